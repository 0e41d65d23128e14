"""Strided copy bandwidth: layoutkit next to NumPy (host) and torch / CuPy (GPU), same run.

Usage: ``python benchmarks/bench_copy.py [--cpu-only] [--small-only] [--quick]``

Device bandwidth counts bytes read plus bytes written (a broadcast source: bytes written
only, compared with the fill rate). Every row also says which fraction of the
contiguous-copy (or fill) rate measured in the same run the layoutkit copy reaches.
The CPU section compares host copies with ``np.copyto`` on the same layouts.
"""

import argparse
import time

import numpy as np
from _views import device_view as cupy_view
from _views import host_view, torch_view

from layoutkit.copy import copy
from layoutkit.copy.plan import plan_copy


def method_of(dst, src):
    """The plan of a copy, as ``CopyPlan.describe`` says it."""
    src_layout = src.layout
    if src_layout.shape != dst.layout.shape:
        src_layout = src_layout.broadcast_to(dst.layout.shape)
    plan = plan_copy(dst.layout, src_layout, dst.ptr, src.ptr, dst.is_device_accessible,
                     src.is_device_accessible)  # fmt: skip
    return plan.describe()


def _fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


# ----------------------------------------------------------------------------- host
def cpu_cases(quick):
    n = 2048 if quick else 4096
    rng = np.random.default_rng(0)
    square = rng.random((n, n), dtype=np.float32)
    wide = rng.random((n, 2 * n), dtype=np.float32)
    u8 = rng.integers(0, 255, (n, n), dtype=np.uint8)
    cube = rng.random((64, 256, 256), dtype=np.float32)
    return [
        ("contiguous f32", square),
        ("transpose f32", square.T),
        ("transpose u8", u8.T),
        ("step-2 slice f32", wide[:, ::2]),
        ("reversed f32", square[::-1, ::-1]),
        ("3-d permute (2,0,1) f32", cube.transpose(2, 0, 1)),
        ("broadcast row f32", np.broadcast_to(square[0], (n, n))),
    ]


def _best_time(function, repeats):
    function()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def run_cpu(quick):
    print("\nHost copies (GB/s, bytes read + written; best of 5)")
    print(f"{'case':32s} {'method':18s} {'layoutkit':>10s} {'np.copyto':>10s} {'ratio':>7s}")
    for name, src in cpu_cases(quick):
        dst = np.empty(src.shape, src.dtype)
        moved = 2 * dst.nbytes if src.strides and all(src.strides) else dst.nbytes
        d, s = host_view(dst), host_view(src)
        ours = _best_time(lambda d=d, s=s: copy(d, s), 5)
        theirs = _best_time(lambda dst=dst, src=src: np.copyto(dst, src), 5)
        print(f"{name:32s} {method_of(d, s):18s} {moved / ours / 1e9:10.2f} "
              f"{moved / theirs / 1e9:10.2f} {theirs / ours:7.2f}")  # fmt: skip


SMALL_CALLS = 2000


def _per_call_us(function, pairs):
    """Best of 7 rounds of the time per call of ``function(dst, src)``, one call per pair
    (fresh argument objects, made untimed). The best round, not the median: on a shared
    machine the other rounds measure the neighbours' load more than the copy."""
    function(*pairs[0])
    rounds = []
    for _ in range(7):
        start = time.perf_counter()
        for dst, src in pairs:
            function(dst, src)
        rounds.append((time.perf_counter() - start) / len(pairs) * 1e6)
    return min(rounds)


def run_small_host_copies():
    """Per-call cost of small host copies between NumPy arrays: what code that copies
    many small arrays pays. Every call gets new array objects (views of the same memory:
    ``a[...]``), as code that slices its arrays on each call makes them. ``arrays`` passes
    them to ``copy`` as they are (``np.copyto`` does the work below
    ``NUMPY_COPY_BYTES``); ``views`` copies between ``StridedMemoryView`` objects of them,
    made untimed (the planned copy through layoutkit's kernel). The ratios are to
    ``np.copyto`` on the same arrays."""
    print(f"\nSmall host copies (us per call, fresh array objects, best of 7 x {SMALL_CALLS})")
    print(f"{'case':26s} {'arrays':>8s} {'views':>8s} {'np.copyto':>10s} {'arrays/np':>10s} "
          f"{'views/np':>9s}")  # fmt: skip
    rng = np.random.default_rng(1)
    for n in (8, 64, 256):
        a = rng.random((n, n), dtype=np.float32)
        for name, source in (("C order", a), ("transposed", a.T), ("step-2 rows", a[::2])):
            target = np.empty(source.shape, source.dtype)
            pairs = [(target[...], source[...]) for _ in range(SMALL_CALLS)]
            views = [(host_view(d), host_view(s)) for d, s in pairs]
            ours = _per_call_us(copy, pairs)
            ours_views = _per_call_us(copy, views)
            theirs = _per_call_us(np.copyto, pairs)
            print(f"{f'{n}x{n} f32 {name}':26s} {ours:8.2f} {ours_views:8.2f} {theirs:10.2f} "
                  f"{ours / theirs:10.2f} {ours_views / theirs:9.2f}")  # fmt: skip


# ----------------------------------------------------------------------------- device
def _gpu_timer(torch):
    def measure(function, repeats):
        function()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            function()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / repeats

    return measure


def gpu_cases(cp, quick):
    n = 8192 if quick else 16384
    cases = []

    def add(name, src, fill=False):
        cases.append((name, src, fill))

    f32 = cp.random.random((n, n), dtype=cp.float32)
    add("contiguous f32", f32)
    add("transpose f32", f32.T)
    add("transpose f16", f32.astype(cp.float16).T)
    add("transpose u8", (f32 * 255).astype(cp.uint8).T)
    add("transpose f64", f32[: n // 2].astype(cp.float64).T)
    add("transpose c128 (16 B)", f32[: n // 2, : n // 2].astype(cp.complex128).T)
    add("transpose f32 odd (n-1, n+1)", cp.random.random((n - 1, n + 1), dtype=cp.float32).T)
    add("transpose u8 odd (n-1, n+1)", (cp.random.random((n - 1, n + 1)) * 255).astype(cp.uint8).T)
    batch = 16 if quick else 64
    add(
        "(64,4096,1024) f32 perm (0,2,1)",
        cp.random.random((batch, 4096, 1024), dtype=cp.float32).transpose(0, 2, 1),
    )
    nchw = cp.random.random((64 if quick else 128, 64, 112, 112), dtype=cp.float32).astype(
        cp.float16
    )
    add("NCHW->NHWC f16", nchw.transpose(0, 2, 3, 1))
    add("NHWC->NCHW f16", cp.ascontiguousarray(nchw.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2))
    add(
        "4-d reversal of axes f32",
        cp.random.random((128, 64, 64, 64), dtype=cp.float32).transpose(3, 2, 1, 0),
    )
    add(
        "3-d perm (2,1,0) f32 (512,256,256)",
        cp.random.random((512, 256, 256), dtype=cp.float32).transpose(2, 1, 0),
    )
    add(
        "5-d perm (4,2,0,3,1) f32 32^5",
        cp.random.random((32,) * 5, dtype=cp.float32).transpose(4, 2, 0, 3, 1),
    )
    add(
        "6-d perm (5,3,1,4,2,0) f16 16^6",
        cp.random.random((16,) * 6, dtype=cp.float32)
        .astype(cp.float16)
        .transpose(5, 3, 1, 4, 2, 0),
    )
    wide = cp.random.random((n, 2 * n), dtype=cp.float32)
    add("step-2 slice f32", wide[:, ::2])
    add("step-2 slice f16", wide.astype(cp.float16)[:, ::2])
    add("reversed rows+cols f32", f32[::-1, ::-1])
    add("odd slice f32 [1:-1, 3:-2]", f32[1:-1, 3:-2])
    add("broadcast row f32", cp.broadcast_to(f32[0], (n, n)), fill=True)
    add("broadcast column f32", cp.broadcast_to(f32[:, :1], (n, n)), fill=True)
    add(
        "broadcast scalar u8",
        cp.broadcast_to((f32[:1, :1] * 255).astype(cp.uint8), (n, n)),
        fill=True,
    )
    return cases


def run_gpu(quick):
    try:
        import cupy as cp
        import torch
    except ImportError as exc:
        print(f"\nGPU section skipped: {exc}")
        return
    measure = _gpu_timer(torch)
    stream = torch.cuda.current_stream().cuda_stream
    repeats = 10
    n = 8192 if quick else 16384
    base = cp.random.random((n, n), dtype=cp.float32)
    out = cp.empty_like(base)
    contiguous = 2 * base.nbytes / measure(lambda: cp.copyto(out, base), repeats)
    fill_target = torch.empty((n, n), dtype=torch.float32, device="cuda")
    fill = fill_target.numel() * 4 / measure(lambda: fill_target.fill_(1.0), repeats)
    print(f"\nDevice copies on {torch.cuda.get_device_name()} (TB/s; contiguous copy "
          f"{contiguous / 1e12:.2f}, fill {fill / 1e12:.2f}, same run)")  # fmt: skip
    header = f"{'case':36s} {'method':16s} {'layoutkit':>9s} {'torch':>7s} {'cupy':>7s} {'vs best':>7s} {'% ref':>6s}"
    print(header)
    for name, src, is_fill in gpu_cases(cp, quick):
        dst = cp.empty(src.shape, src.dtype)
        moved = dst.nbytes if is_fill else 2 * dst.nbytes
        d, s = cupy_view(dst), cupy_view(src)
        try:
            ours = moved / measure(lambda d=d, s=s: copy(d, s, stream=stream), repeats)
        except Exception as exc:  # report and keep measuring the other cases
            print(f"{name:36s} layoutkit failed: {type(exc).__name__}: {exc}")
            continue
        if not bool((dst == src).all()):
            print(f"{name:36s} layoutkit result WRONG")
        theirs_cupy = moved / measure(lambda dst=dst, src=src: cp.copyto(dst, src), repeats)
        theirs_torch = None
        if all(stride >= 0 for stride in src.strides):  # torch has no negative strides
            t_dst, t_src = torch.from_dlpack(dst), torch.from_dlpack(src)
            theirs_torch = moved / measure(lambda a=t_dst, b=t_src: a.copy_(b), repeats)
        best = max(theirs_cupy, theirs_torch or 0)
        reference = fill if is_fill else contiguous
        print(f"{name:36s} {method_of(d, s):16s} {ours / 1e12:9.2f} "
              f"{_fmt(theirs_torch and theirs_torch / 1e12):>7s} {theirs_cupy / 1e12:7.2f} "
              f"{ours / best:7.2f} {100 * ours / reference:5.0f}%")  # fmt: skip
        del dst
    run_transfers(torch, quick)


def run_transfers(torch, quick):
    n = 8192 if quick else 16384
    print("\nHost <-> device (GB/s of data moved; wall time with synchronisation, best of 5)")
    print(f"{'case':36s} {'method':16s} {'layoutkit':>9s} {'torch':>7s} {'ratio':>7s}")
    pinned = torch.empty((n, n), dtype=torch.float32, pin_memory=True)
    pinned.copy_(torch.rand((n, n)))
    pageable = torch.rand((n, n))
    device = torch.empty((n, n), dtype=torch.float32, device="cuda")

    def timed(function):
        def run():
            function()
            torch.cuda.synchronize()

        return _best_time(run, 5)

    rows = [
        ("H2D pinned contiguous", device, pinned, True),
        ("D2H pinned contiguous", pinned, device, True),
        ("H2D pageable contiguous", device, pageable, False),
        ("D2H pageable contiguous", pageable, device, False),
        ("H2D pageable transposed src", device, pageable.T, False),
        ("D2H pageable transposed dst", pageable.T, device, False),
        ("H2D pageable step-2 rows src", device[: n // 2], pageable[::2], False),
        ("H2D pinned transposed src", device, pinned.T, True),
    ]
    for name, dst, src, is_pinned in rows:
        d = torch_view(dst, pinned=is_pinned and not dst.is_cuda)
        s = torch_view(src, pinned=is_pinned and not src.is_cuda)
        moved = dst.numel() * 4
        try:
            ours = moved / timed(lambda d=d, s=s: copy(d, s))
        except Exception as exc:
            print(f"{name:36s} layoutkit failed: {type(exc).__name__}: {exc}")
            continue
        theirs = moved / timed(lambda dst=dst, src=src: dst.copy_(src))
        print(f"{name:36s} {method_of(d, s):16s} {ours / 1e9:9.1f} {theirs / 1e9:7.1f} "
              f"{ours / theirs:7.2f}")  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-only", action="store_true", help="skip the GPU section")
    parser.add_argument("--quick", action="store_true", help="smaller arrays")
    parser.add_argument("--small-only", action="store_true",
                        help="only the small host copies (implies --cpu-only)")  # fmt: skip
    args = parser.parse_args()
    if not args.small_only:
        run_cpu(args.quick)
    run_small_host_copies()
    if not args.cpu_only and not args.small_only:
        run_gpu(args.quick)


if __name__ == "__main__":
    main()
