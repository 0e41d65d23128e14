"""Building and exporting StridedMemoryViews: layoutkit next to cuda.core, same run.

Usage: ``python benchmarks/bench_views.py [--quick]``

Each figure is the best of several timing runs, per call, in microseconds. "build" rows
time the constructor alone (cuda.core builds the layout on first use; layoutkit takes it
from a cache of recently seen layouts, or builds it on first use after a miss); "build +
read" rows also read ``ptr``, ``shape`` and ``strides``, which is what a consumer pays. GPU rows
(CuPy, torch) appear only where a GPU and those libraries are present. A figure is "-"
where that library cannot do the operation here (e.g. cuda.core's
``from_array_interface`` needs a CUDA driver even for host arrays).
"""

import argparse
import timeit

import numpy as np

from layoutkit import StridedMemoryView


class DLPackProducer:
    """A DLPack producer that is not a NumPy array: both libraries take the capsule path."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def per_call_us(function, number, repeat=5):
    """Best time per call, in microseconds; None if ``function`` raises."""
    try:
        function()
    except Exception:
        return None
    return min(timeit.repeat(function, number=number, repeat=repeat)) / number * 1e6


def read(view):
    return view.ptr, view.shape, view.strides


def host_rows():
    """(operation, make) pairs; ``make(StridedMemoryView class)`` returns the timed callable."""
    a = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)[:, ::2, ::-1]
    producer = DLPackProducer(a)

    def exported(S, source):
        view = S.from_dlpack(source, -1)
        read(view)
        return view

    return [
        ("from_dlpack(numpy), build", lambda S: lambda: S.from_dlpack(a, -1)),
        ("from_dlpack(numpy), build + read", lambda S: lambda: read(S.from_dlpack(a, -1))),
        ("from_any_interface(numpy)", lambda S: lambda: S.from_any_interface(a, -1)),
        ("from_array_interface(numpy)", lambda S: lambda: S.from_array_interface(a)),
        ("from_dlpack(capsule producer), build + read",
         lambda S: lambda: read(S.from_dlpack(producer, -1))),
        ("view(numpy).__dlpack__(max_version=(1, 0))",
         lambda S: (lambda v: lambda: v.__dlpack__(max_version=(1, 0)))(exported(S, a))),
        ("numpy.from_dlpack(view(numpy))",
         lambda S: (lambda v: lambda: np.from_dlpack(v))(exported(S, a))),
        ("numpy.from_dlpack(view(capsule producer))",
         lambda S: (lambda v: lambda: np.from_dlpack(v))(exported(S, producer))),
    ]  # fmt: skip


def gpu_rows():
    rows = []
    try:
        import cupy as cp

        x = cp.arange(4 * 6 * 8, dtype=cp.float32).reshape(4, 6, 8)[:, ::2, ::-1]
        stream = cp.cuda.get_current_stream().ptr
        rows += [
            ("from_dlpack(cupy), build + read", lambda S: lambda: read(S.from_dlpack(x, stream))),
            ("from_cuda_array_interface(cupy), build + read",
             lambda S: lambda: read(S.from_cuda_array_interface(x, stream))),
            ("cupy.from_dlpack(view)",
             lambda S: (lambda v: lambda: cp.from_dlpack(v))(S.from_dlpack(x, stream))),
        ]  # fmt: skip
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            t = torch.arange(4 * 6 * 8, dtype=torch.float32, device="cuda").reshape(4, 6, 8)
            t = t[:, ::2].transpose(1, 2)
            tstream = torch.cuda.current_stream().cuda_stream
            rows += [
                ("from_dlpack(torch), build + read",
                 lambda S: lambda: read(S.from_dlpack(t, tstream))),
                ("from_any_interface(torch), build + read",
                 lambda S: lambda: read(S.from_any_interface(t, tstream))),
                ("torch.from_dlpack(view)",
                 lambda S: (lambda v: lambda: torch.from_dlpack(v))(S.from_dlpack(t, tstream))),
            ]  # fmt: skip
    except ImportError:
        pass
    return rows


def gpu_present():
    try:
        from layoutkit import _driver

        return _driver.device_count() > 0
    except Exception:
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per timing")
    args = parser.parse_args()
    number = 2_000 if args.quick else 20_000
    try:
        from cuda.core.utils import StridedMemoryView as reference
    except ImportError:
        reference = None
    rows = host_rows()
    if gpu_present():
        rows += gpu_rows()
    header = f"{'operation':50s} {'layoutkit us':>13s} {'cuda.core us':>13s} {'ratio':>7s}"
    print(header)
    print("-" * len(header))
    for name, make in rows:
        ours = per_call_us(make(StridedMemoryView), number)
        theirs = per_call_us(make(reference), number) if reference else None
        ratio = f"{ours / theirs:.2f}" if ours and theirs else "-"
        print(
            f"{name:50s} {'-' if ours is None else f'{ours:.2f}':>13s} "
            f"{'-' if theirs is None else f'{theirs:.2f}':>13s} {ratio:>7s}"
        )
    print("\nratio = layoutkit / cuda.core (below 1: layoutkit faster)")


if __name__ == "__main__":
    main()
