"""Compile every copy kernel specialisation the tests and benchmarks will need, in parallel.

Usage on the GPU machine (with ``NUMBA_CACHE_DIR`` set, so later processes load the
compiled kernels from the cache instead of compiling them one at a time)::

    python3 benchmarks/warm_copy_kernels.py [--workers 16] [--seeds 913]

The specialisations come from planning (no GPU work) the cases of
``bench_copy_random.py`` (its default seeds and any ``--seeds``) and ``tune_copy_gpu.py``
and the generator at test sizes; each
worker process compiles some of them through ``layoutkit.copy.gpu.kernel_for``. Each
kernel's line gives its registers, local memory (spills) and shared memory.
"""

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def specialisations(extra_seeds=()):
    from bench_copy_random import generate, spec_layouts
    from helpers.copy_cases import small_specs

    from layoutkit.copy.plan import plan_copy

    seeds = [0, 1, 2, 3, 4, 5, 100, 101, *extra_seeds]
    specs = [spec for _, _, spec in generate(seeds, 60, [64, 256])]
    specs += small_specs(11, 120, (256, 1 << 20)) + small_specs(5, 40, (256, 65536))
    specs += small_specs(2024, 36, (512, 24576))
    keys = set()
    for spec in specs:
        dst, src = spec_layouts(spec)
        for misalign in (0, 4, 8):
            plan = plan_copy(dst, src, misalign, misalign, True, True)
            keys.update((launch.kernel, launch.key) for launch in plan.launches)
    keys.update(named_specialisations())
    keys.update(test_specialisations())
    return sorted(keys, key=str)


def test_specialisations():
    """The kernels of ``tests/test_copy_cuda.py``'s named layouts (those the memcheck run
    copies too): planned from the host arrays the tests build."""
    from helpers.copy_cases import layout_of
    from test_copy_cuda import LAYOUTS, _named

    from layoutkit.copy.plan import plan_copy

    cases = [(itemsize, LAYOUTS[name], shape) for itemsize in (1, 2, 3, 4, 8, 12, 16)
             for name in LAYOUTS for shape in ((67, 45), (37, 45))]  # fmt: skip
    cases += [(itemsize, lambda a: a.T, (40, 75)) for itemsize in (1, 2)]
    cases += [(itemsize, lambda a: a.reshape(13, 5, 3).transpose(2, 0, 1), (13, 15))
              for itemsize in (1, 2)]  # fmt: skip
    keys = set()
    for itemsize, make, shape in cases:
        _, dst, _, src = _named(itemsize, make, shape)
        if dst.size == 0:
            continue
        src_layout = layout_of(src)
        if src.shape != dst.shape:
            src_layout = src_layout.broadcast_to(dst.shape)
        plan = plan_copy(layout_of(dst), src_layout, dst.__array_interface__["data"][0],
                         src.__array_interface__["data"][0], True, True)  # fmt: skip
        keys.update((launch.kernel, launch.key) for launch in plan.launches)
    return keys


def named_specialisations():
    """The kernels of ``bench_copy.py --quick``'s device cases (planned from CuPy arrays
    on this machine's GPU; none without CuPy)."""
    try:
        import cupy as cp
    except ImportError:
        return set()
    from bench_copy import gpu_cases

    from layoutkit.copy.plan import plan_copy
    from layoutkit.memoryview import StridedMemoryView

    keys = set()
    for _, array, _ in gpu_cases(cp, True):
        src = StridedMemoryView.from_any_interface(array, -1)
        dst = StridedMemoryView.from_any_interface(cp.empty(array.shape, array.dtype), -1)
        layout = src.layout
        if layout.shape != dst.layout.shape:
            layout = layout.broadcast_to(dst.layout.shape)
        plan = plan_copy(dst.layout, layout, dst.ptr, src.ptr, True, True)
        keys.update((launch.kernel, launch.key) for launch in plan.launches)
    cp.get_default_memory_pool().free_all_blocks()
    return keys


def compile_one(item):
    from layoutkit.copy import gpu

    kernel, key = item
    begin = time.perf_counter()
    try:
        compiled = gpu.kernel_for(kernel, key).compile(gpu.argument_types(kernel, key))
        resources = (f"regs {compiled.regs_per_thread} local {compiled.local_mem_per_thread} B "
                     f"shared {compiled.shared_mem_per_block} B")  # fmt: skip
    except Exception as exc:  # report and go on: the copy compiles it again when used
        return kernel, key, time.perf_counter() - begin, f"FAILED {type(exc).__name__}: {exc}"
    return kernel, key, time.perf_counter() - begin, resources


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    parser.add_argument("--seeds", type=int, nargs="*", default=[],
                        help="more seeds of bench_copy_random.py to plan")  # fmt: skip
    args = parser.parse_args()
    start = time.perf_counter()
    items = specialisations(args.seeds)
    print(f"{len(items)} kernel specialisations; compiling on {args.workers} processes",
          flush=True)  # fmt: skip
    failures, slowest = 0, 0.0
    # spawned workers: this process may hold a CUDA context (CuPy), which forked
    # children cannot use
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for kernel, key, seconds, text in pool.map(compile_one, items):
            slowest = max(slowest, seconds)
            failures += text.startswith("FAILED")
            print(f"  {kernel}{key}: {seconds:.1f} s {text}", flush=True)
    print(f"compiled {len(items) - failures}/{len(items)} in {time.perf_counter() - start:.1f} s "
          f"(slowest {slowest:.1f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
