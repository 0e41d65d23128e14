"""Importing and exporting StridedMemoryViews: layoutkit next to cuda.core 1.2.2, same run.

Usage: ``python benchmarks/bench_views.py [--quick] [--only cpu|gpu] [--timer wall|cpu]``

Each figure is the best of several timing runs, per call, in microseconds; the ratio is
layoutkit / cuda.core (below 1: layoutkit faster). "build" rows time the constructor
alone; "build + read" rows also read ``ptr``, ``shape`` and ``strides``, which is what a
consumer pays. "fresh" rows import a different array object each call, and "new shapes"
rows one of 4096 random shapes (more than any layout cache keeps), so nothing is reused
from the call before. A figure is "-" where that library cannot do the operation here
(e.g. cuda.core's ``from_array_interface`` needs a CUDA driver even for host arrays).
GPU rows (CuPy, torch on CUDA) appear where a GPU and those libraries are present; torch
CPU rows where torch is installed. ``--timer cpu`` times with the process's CPU time
instead of the wall clock: on a machine shared with other work it leaves out the time
the process waits for a core (no row here waits for a GPU).
"""

import argparse
import itertools
import time
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


def per_call_us(function, number, repeat=7, timer=time.perf_counter):
    """Best time per call, in microseconds; None if ``function`` is None or raises."""
    if function is None:
        return None
    try:
        function()
    except Exception:
        return None
    return min(timeit.Timer(function, timer=timer).repeat(repeat, number)) / number * 1e6


def read(view):
    return view.ptr, view.shape, view.strides


def random_arrays(make, count=4096, seed=0):
    """``count`` arrays of random shapes (1-4 dims, some sliced or transposed)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for _ in range(count):
        shape = tuple(int(n) for n in rng.integers(1, 9, size=rng.integers(1, 5)))
        array = make(shape)
        if rng.random() < 0.3:
            array = array[..., ::2]
        if rng.random() < 0.3 and array.ndim > 1:
            array = array.swapaxes(0, -1)
        arrays.append(array)
    return arrays


def real_array(function):
    """``function`` if it returns an array of the data, else None: NumPy makes a 0-d object
    array of anything it cannot read (cuda.core's views), which is no conversion."""
    return function if function().dtype != object else None


def cycling(arrays, function):
    """A callable that applies ``function`` to the next array each call."""
    source = itertools.cycle(arrays)
    return lambda: function(next(source))


def numpy_rows():
    """(operation, make) pairs; ``make(StridedMemoryView class)`` returns the timed callable."""
    a = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)[:, ::2, ::-1]
    base = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)
    producer = DLPackProducer(a)
    shapes = random_arrays(lambda shape: np.zeros(shape, np.float32))

    def exported(S, source):
        view = S.from_dlpack(source, -1)
        read(view)
        return view

    return [
        ("from_dlpack(numpy), build", lambda S: lambda: S.from_dlpack(a, -1)),
        ("from_dlpack(numpy), build + read", lambda S: lambda: read(S.from_dlpack(a, -1))),
        ("from_dlpack(numpy), fresh array, build + read",
         lambda S: lambda: read(S.from_dlpack(base[:, ::2, ::-1], -1))),
        ("from_dlpack(numpy), new shapes, build + read",
         lambda S: cycling(shapes, lambda x: read(S.from_dlpack(x, -1)))),
        ("from_any_interface(numpy), build + read",
         lambda S: lambda: read(S.from_any_interface(a, -1))),
        ("from_array_interface(numpy), build + read",
         lambda S: lambda: read(S.from_array_interface(a))),
        ("from_dlpack(capsule producer), build + read",
         lambda S: lambda: read(S.from_dlpack(producer, -1))),
        ("view(numpy).__dlpack__(max_version=(1, 0))",
         lambda S: (lambda v: lambda: v.__dlpack__(max_version=(1, 0)))(exported(S, a))),
        ("numpy.from_dlpack(view(numpy))",
         lambda S: (lambda v: lambda: np.from_dlpack(v))(exported(S, a))),
        ("numpy.from_dlpack(view(capsule producer))",
         lambda S: (lambda v: lambda: np.from_dlpack(v))(exported(S, producer))),
        ("numpy.asarray(view(numpy))",
         lambda S: (lambda v: real_array(lambda: np.asarray(v)))(exported(S, a))),
        ("numpy.asarray(view(numpy)), fresh view",
         lambda S: real_array(lambda: np.asarray(S.from_dlpack(a, -1)))),
        ("view(numpy).__dlpack__, fresh view",
         lambda S: lambda: S.from_dlpack(a, -1).__dlpack__(max_version=(1, 0))),
        ("view(numpy).view(layout[::2]) (sub-view)",
         lambda S: (lambda v: (lambda s: lambda: v.view(s))(v._layout[::2]))(exported(S, a))),
    ]  # fmt: skip


def torch_cpu_rows():
    try:
        import torch
    except ImportError:
        return []
    t = torch.arange(4 * 6 * 8, dtype=torch.float32).reshape(4, 6, 8)[:, ::2].transpose(1, 2)
    base = torch.arange(4 * 6 * 8, dtype=torch.float32).reshape(4, 6, 8)
    return [
        ("from_dlpack(torch cpu), build + read", lambda S: lambda: read(S.from_dlpack(t, -1))),
        ("from_dlpack(torch cpu), fresh tensor, build + read",
         lambda S: lambda: read(S.from_dlpack(base[:, ::2], -1))),
        ("from_any_interface(torch cpu), build + read",
         lambda S: lambda: read(S.from_any_interface(t, -1))),
        ("torch.from_dlpack(view(torch cpu))",
         lambda S: (lambda v: lambda: torch.from_dlpack(v))(S.from_dlpack(t, -1))),
    ]  # fmt: skip


def cupy_rows():
    try:
        import cupy as cp
    except ImportError:
        return []
    x = cp.arange(4 * 6 * 8, dtype=cp.float32).reshape(4, 6, 8)[:, ::2, ::-1]
    base = cp.arange(4 * 6 * 8, dtype=cp.float32).reshape(4, 6, 8)
    stream = cp.cuda.get_current_stream().ptr
    shapes = random_arrays(lambda shape: cp.zeros(shape, cp.float32), count=2048)
    return [
        ("from_dlpack(cupy), build + read", lambda S: lambda: read(S.from_dlpack(x, stream))),
        ("from_dlpack(cupy), fresh array, build + read",
         lambda S: lambda: read(S.from_dlpack(base[:, ::2], stream))),
        ("from_dlpack(cupy), new shapes, build + read",
         lambda S: cycling(shapes, lambda y: read(S.from_dlpack(y, stream)))),
        ("from_any_interface(cupy), build + read",
         lambda S: lambda: read(S.from_any_interface(x, stream))),
        ("from_cuda_array_interface(cupy), build + read",
         lambda S: lambda: read(S.from_cuda_array_interface(x, stream))),
        ("cupy.from_dlpack(view(cupy))",
         lambda S: (lambda v: lambda: cp.from_dlpack(v))(S.from_dlpack(x, stream))),
    ]  # fmt: skip


def torch_cuda_rows():
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    t = torch.arange(4 * 6 * 8, dtype=torch.float32, device="cuda").reshape(4, 6, 8)
    t = t[:, ::2].transpose(1, 2)
    base = torch.arange(4 * 6 * 8, dtype=torch.float32, device="cuda").reshape(4, 6, 8)
    stream = torch.cuda.current_stream().cuda_stream
    side = torch.cuda.Stream()
    return [
        ("from_dlpack(torch), build + read", lambda S: lambda: read(S.from_dlpack(t, stream))),
        ("from_dlpack(torch), fresh tensor, build + read",
         lambda S: lambda: read(S.from_dlpack(base[:, ::2], stream))),
        ("from_any_interface(torch), build + read",
         lambda S: lambda: read(S.from_any_interface(t, stream))),
        ("from_dlpack(torch), no sync (-1), build + read",
         lambda S: lambda: read(S.from_dlpack(t, -1))),
        ("from_dlpack(torch), other stream (event), build + read",
         lambda S: lambda: read(S.from_dlpack(t, side.cuda_stream))),
        ("torch.from_dlpack(view(torch))",
         lambda S: (lambda v: lambda: torch.from_dlpack(v))(S.from_dlpack(t, stream))),
    ]  # fmt: skip


def gpu_present():
    try:
        from layoutkit import _driver

        return _driver.device_count() > 0
    except Exception:
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per timing")
    parser.add_argument("--only", choices=["cpu", "gpu"], help="only the host or device rows")
    parser.add_argument("--timer", choices=["wall", "cpu"], default="wall",
                        help="wall clock (default) or the process's CPU time")
    args = parser.parse_args()
    timer = time.process_time if args.timer == "cpu" else time.perf_counter
    number = 2_000 if args.quick else 20_000
    try:
        from cuda.core.utils import StridedMemoryView as reference
    except ImportError:
        reference = None
    rows = []
    if args.only != "gpu":
        rows += numpy_rows() + torch_cpu_rows()
    if args.only != "cpu" and gpu_present():
        rows += cupy_rows() + torch_cuda_rows()
    header = f"{'operation':56s} {'layoutkit us':>13s} {'cuda.core us':>13s} {'ratio':>7s}"
    print(header)
    print("-" * len(header))
    for name, make in rows:
        ours = per_call_us(make(StridedMemoryView), number, timer=timer)
        theirs = per_call_us(make(reference), number, timer=timer) if reference else None
        ratio = f"{ours / theirs:.2f}" if ours and theirs else "-"
        print(
            f"{name:56s} {'-' if ours is None else f'{ours:.2f}':>13s} "
            f"{'-' if theirs is None else f'{theirs:.2f}':>13s} {ratio:>7s}",
            flush=True,
        )
    print("\nratio = layoutkit / cuda.core (below 1: layoutkit faster)")


if __name__ == "__main__":
    main()
