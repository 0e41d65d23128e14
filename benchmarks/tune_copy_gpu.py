"""Time variants of the GPU copy kernels on the benchmark's shapes, in one device call.

Usage on the GPU machine: ``python3 benchmarks/tune_copy_gpu.py [LOGFILE]``. A variant is
the plan with other kernel parameters (``tile``, ``vector``) or other module settings
(blocks per SM, lanes of the register-block kernel), launched through ``launch_plan``.
Each result is checked against the source (destination poisoned with a value the source
never holds); rates are TB/s of bytes read + written, median of 7 batches of 5 launches,
next to the contiguous copy (``cupy.copyto``) measured in the same run. ``host us`` is
the Python time of one launch (no synchronisation): when it nears the device time, the
launch, not the kernel, sets the rate.
"""

import dataclasses
import sys
import time

import cupy as cp
import numpy as np

from layoutkit.copy import gpu
from layoutkit.copy.plan import plan_copy

LOG = open(sys.argv[1], "w") if len(sys.argv) > 1 else None  # noqa: SIM115 (whole run)
START = time.time()


def say(text):
    print(text, flush=True)
    if LOG:
        LOG.write(text + "\n")
        LOG.flush()


def timed(function, batches=7, per_batch=5):
    function()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(batches):
        start.record()
        for _ in range(per_batch):
            function()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3 / per_batch)
    return float(np.median(times))


def host_time(function, launches=20):
    cp.cuda.Device().synchronize()
    begin = time.perf_counter()
    for _ in range(launches):
        function()
    elapsed = (time.perf_counter() - begin) / launches
    cp.cuda.Device().synchronize()
    return elapsed


def plan_of(dst, src):
    it = dst.itemsize
    return plan_copy(dst.shape, [s // it for s in dst.strides], [s // it for s in src.strides],
                     it, dst.data.ptr, src.data.ptr, True, True)  # fmt: skip


@dataclasses.dataclass
class Variant:
    label: str
    changes: dict  # plan fields to replace
    settings: dict  # gpu module attributes to set while launching


def variants_for(plan, full):
    out = [Variant("default", {}, {}), Variant("numba launch", {}, {"DRIVER_LAUNCH": False})]
    if plan.method == "elementwise":
        out.append(Variant("8 blocks/SM", {}, {"ELEMENTWISE_BLOCKS_PER_SM": 8}))
        return out
    if plan.method != "transpose":
        return out
    for tile in (32, 64):
        if plan.vector or tile != plan.tile:
            out.append(Variant(f"shared tile {tile}", {"tile": tile, "vector": 0}, {}))
    if plan.vector:
        for lanes in (4, 16) if full else ():
            out.append(Variant(f"block lanes_a {lanes}", {}, {"BLOCK_LANES_A": lanes}))
        if plan.vector == 16:
            out.append(Variant("block vector 8", {"vector": 8}, {}))
    if full:
        for blocks in (4, 16):
            out.append(Variant(f"{blocks} blocks/SM", {}, {"BLOCKS_PER_SM": blocks}))
    return out


def run_variant(variant, plan, dst, src):
    saved = {name: getattr(gpu, name) for name in variant.settings}
    for name, value in variant.settings.items():
        setattr(gpu, name, value)
    gpu._launch_setup.cache_clear()
    gpu._driver_launch.cache_clear()
    try:
        varied = dataclasses.replace(plan, **variant.changes)

        def launch():
            gpu.launch_plan(varied, dst.data.ptr, src.data.ptr)

        # a value the source never holds: NaN, or 255 (sources are < 255)
        dst.fill(float("nan") if dst.dtype.kind in "fc" else 255)
        launch()
        cp.cuda.Device().synchronize()
        ok = bool((dst == src).all())
        seconds = timed(launch)
        return ok, seconds, host_time(launch)
    finally:
        for name, value in saved.items():
            setattr(gpu, name, value)
        gpu._launch_setup.cache_clear()
        gpu._driver_launch.cache_clear()


def cases():
    n = 16384
    f32 = cp.random.random((n, n), dtype=cp.float32)
    yield "transpose f32", f32.T, True
    yield "transpose f16", f32.astype(cp.float16).T, True
    yield "transpose u8", (f32 * 255).astype(cp.uint8).T, True
    yield "transpose f64", f32[: n // 2].astype(cp.float64).T, False
    del f32
    big = cp.random.random((64, 4096, 1024), dtype=cp.float32)
    yield "(64,4096,1024) f32 perm (0,2,1)", big.transpose(0, 2, 1), False
    del big
    nchw = cp.random.random((128, 64, 112, 112), dtype=cp.float32).astype(cp.float16)
    yield "NCHW->NHWC f16", nchw.transpose(0, 2, 3, 1), False
    nhwc = cp.ascontiguousarray(nchw.transpose(0, 2, 3, 1))
    del nchw
    yield "NHWC->NCHW f16", nhwc.transpose(0, 3, 1, 2), False
    del nhwc
    cube = cp.random.random((128, 64, 64, 64), dtype=cp.float32)
    yield "4-d reversal f32", cube.transpose(3, 2, 1, 0), False
    yield "3-d perm (2,1,0) f32", cube.reshape(512, 256, 256).transpose(2, 1, 0), False
    del cube
    f5 = cp.random.random((32,) * 5, dtype=cp.float32)
    yield "5-d perm f32 32^5", f5.transpose(4, 2, 0, 3, 1), False
    sixes = f5.astype(cp.float16).reshape(-1)[: 16**6].reshape((16,) * 6)
    yield "6-d perm f16 16^6", sixes.transpose(5, 3, 1, 4, 2, 0), False


def main():
    say(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    base = cp.random.random((16384, 16384), dtype=cp.float32)
    out = cp.empty_like(base)
    contiguous = 2 * base.nbytes / timed(lambda o=out, b=base: cp.copyto(o, b)) / 1e12
    del base, out
    say(f"contiguous copy (cupy.copyto 16384^2 f32): {contiguous:.2f} TB/s")
    for name, src, full in cases():
        dst = cp.empty(src.shape, src.dtype)
        plan = plan_of(dst, src)
        moved = 2 * dst.nbytes
        say(f"\n== {name}  {plan.method}/{plan.unit}B tile={plan.tile} vector={plan.vector} "
            f"shape={plan.shape} rows={plan.row_axes} cols={plan.col_axes} "
            f"[{time.time() - START:.0f}s]")  # fmt: skip
        for variant in variants_for(plan, full):
            try:
                ok, seconds, host = run_variant(variant, plan, dst, src)
                say(f"   {variant.label:20s} {moved / seconds / 1e12:6.2f} TB/s "
                    f"{100 * moved / seconds / 1e12 / contiguous:4.0f}%  device "
                    f"{seconds * 1e6:7.1f} us  host {host * 1e6:6.1f} us  "
                    f"{'ok' if ok else 'WRONG'}")  # fmt: skip
            except Exception as exc:
                say(f"   {variant.label:20s} FAILED {type(exc).__name__}: {str(exc)[:200]}")
        del dst, src
        cp.get_default_memory_pool().free_all_blocks()
    say(f"\n[{time.time() - START:.0f}s]")


if __name__ == "__main__":
    main()
