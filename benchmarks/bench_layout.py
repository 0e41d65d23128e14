"""Layout operations: layoutkit next to cuda.core's ``_StridedLayout`` and NumPy, same run.

Prints three tables:

1. Python-level median time per operation. ``layoutkit`` is a repeated call with the same
   (immutable) arguments, which layoutkit memoises per layout; ``uncached`` passes a list
   (never memoised), so it measures argument checking plus the kernel call. ``ratio`` is
   layoutkit / cuda.core.
2. The same operations inside an ``@njit`` loop, in ns per operation.
3. Cold start: a fresh process doing ``import layoutkit`` plus a first operation, with an
   empty Numba cache and with a warm one.

Run: ``python benchmarks/bench_layout.py``.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit

import numpy as np
from numba import njit

from layoutkit import StridedLayout

try:
    from cuda.core._layout import _StridedLayout as ReferenceLayout
except ImportError:  # cuda-core is installed with numba-cuda[cu13]
    ReferenceLayout = None


def median_ns(fn, number=2000, repeat=7):
    """Median over ``repeat`` runs of the mean time of ``number`` calls, in ns."""
    runs = timeit.repeat(fn, number=number, repeat=repeat)
    return statistics.median(runs) / number * 1e9


def python_rows():
    ours = StridedLayout.dense((5, 3, 4), 4)
    ref = ReferenceLayout.dense((5, 3, 4), 4) if ReferenceLayout else None
    arr = np.empty((5, 3, 4), np.float32)
    ours_b = StridedLayout.dense((3, 1), 4)
    ref_b = ReferenceLayout.dense((3, 1), 4) if ReferenceLayout else None
    arr_b = np.empty((3, 1), np.float32)
    ours_r = StridedLayout.dense((5, 4), 2)
    ref_r = ReferenceLayout.dense((5, 4), 2) if ReferenceLayout else None
    arr_r = np.empty((5, 4), np.float16)
    ours_s = StridedLayout.dense((1, 3, 1, 4), 4)
    ref_s = ReferenceLayout.dense((1, 3, 1, 4), 4) if ReferenceLayout else None
    arr_s = np.empty((1, 3, 1, 4), np.float32)
    index = (slice(1, 4), slice(None, None, -1))
    rows = [
        # name, ours (memoised), ours (uncached), reference, numpy
        (
            "dense (5,3,4)",
            lambda: StridedLayout.dense((5, 3, 4), 4),
            lambda: StridedLayout.dense([5, 3, 4], 4),
            lambda: ReferenceLayout.dense((5, 3, 4), 4),
            lambda: np.empty((5, 3, 4), np.float32),
        ),
        (
            "permuted (2,0,1)",
            lambda: ours.permuted((2, 0, 1)),
            lambda: ours.permuted([2, 0, 1]),
            lambda: ref.permuted((2, 0, 1)),
            lambda: arr.transpose((2, 0, 1)),
        ),
        (
            "sliced [1:4, ::-1]",
            lambda: ours[index],
            lambda: ours.sliced([slice(1, 4), slice(None, None, -1)][0]),
            lambda: ref[index],
            lambda: arr[index],
        ),
        (
            "reshaped (15,4)",
            lambda: ours.reshaped((15, 4)),
            lambda: ours.reshaped([15, 4]),
            lambda: ref.reshaped((15, 4)),
            lambda: arr.reshape((15, 4)),
        ),
        (
            "flattened()",
            lambda: ours.flattened(),
            lambda: ours.flattened(0, 2),
            lambda: ref.flattened(),
            lambda: arr.reshape(-1),
        ),
        (
            "squeezed()",
            lambda: ours_s.squeezed(),
            None,
            lambda: ref_s.squeezed(),
            lambda: arr_s.squeeze(),
        ),
        (
            "broadcast_to (2,3,5)",
            lambda: ours_b.broadcast_to((2, 3, 5)),
            lambda: ours_b.broadcast_to([2, 3, 5]),
            lambda: ref_b.broadcast_to((2, 3, 5)),
            lambda: np.broadcast_to(arr_b, (2, 3, 5)),
        ),
        (
            "repacked(8)",
            lambda: ours_r.repacked(8),
            None,
            lambda: ref_r.repacked(8),
            lambda: arr_r.view(np.float64),
        ),
    ]
    for prop in (
        "volume",
        "stride_order",
        "offset_bounds",
        "is_contiguous_c",
        "is_contiguous_any",
        "is_dense",
        "is_unique",
        "strides_in_bytes",
    ):
        numpy_equivalent = {
            "volume": lambda: arr.size,
            "is_contiguous_c": lambda: arr.flags.c_contiguous,
            "strides_in_bytes": lambda: arr.strides,
        }.get(prop)
        rows.append(
            (
                prop,
                (lambda p=prop: getattr(ours, p)),
                None,
                (lambda p=prop: getattr(ref, p)),
                numpy_equivalent,
            )
        )
    rows.append(
        (
            "required_size_in_bytes()",
            ours.required_size_in_bytes,
            None,
            ref.required_size_in_bytes if ref else None,
            lambda: arr.nbytes,
        )
    )
    return rows


def print_python_table():
    print("## From Python: median ns per call (3-d layouts)")
    header = f"{'operation':<26}{'layoutkit':>10}{'uncached':>10}{'cuda.core':>11}{'numpy':>9}{'ratio':>8}"
    print(header)
    for name, ours, uncached, ref, numpy_op in python_rows():
        ours_ns = median_ns(ours)
        uncached_ns = median_ns(uncached) if uncached else None
        ref_ns = median_ns(ref) if ref and ReferenceLayout else None
        numpy_ns = median_ns(numpy_op) if numpy_op else None
        ratio = f"{ours_ns / ref_ns:.2f}" if ref_ns else "-"
        print(
            f"{name:<26}{ours_ns:>10.0f}{_fmt(uncached_ns):>10}{_fmt(ref_ns):>11}"
            f"{_fmt(numpy_ns):>9}{ratio:>8}"
        )


def _fmt(value):
    return "-" if value is None else f"{value:.0f}"


@njit(cache=True)
def _njit_permute(layout, n):
    acc = 0
    for i in range(n):
        p = layout.permuted(((i + 2) % 3, i % 3, (i + 1) % 3))
        acc += p.strides[0]
    return acc


@njit(cache=True)
def _njit_slice(layout, n):
    acc = 0
    for i in range(n):
        s = layout[i % 2 :, ::-1]
        acc += s.slice_offset
    return acc


@njit(cache=True)
def _njit_reshape(layout, n):
    acc = 0
    for i in range(n):
        r = layout.reshaped((15 + (i & 0), 4))
        acc += r.strides[0]
    return acc


@njit(cache=True)
def _njit_contiguity(layout, n):
    acc = 0
    for i in range(n):
        p = layout.permuted((i % 3, (i + 1) % 3, (i + 2) % 3))
        acc += p.is_contiguous_any + p.is_unique
    return acc


@njit(cache=True)
def _njit_offset(layout, n):
    acc = 0
    for i in range(n):
        acc += layout.offset_of((i % 5, i % 3, i % 4))
    return acc


def print_njit_table():
    print("\n## Inside @njit: ns per operation (loop of 10^6, varying arguments)")
    layout = StridedLayout.dense((5, 3, 4), 4)
    n = 1_000_000
    for name, fn in (
        ("permuted", _njit_permute),
        ("sliced [i:, ::-1]", _njit_slice),
        ("reshaped (15,4)", _njit_reshape),
        ("permuted + is_contiguous_any + is_unique", _njit_contiguity),
        ("offset_of (3-d index)", _njit_offset),
    ):
        fn(layout, 10)
        seconds = min(timeit.repeat(lambda fn=fn: fn(layout, n), number=1, repeat=5))
        print(f"{name:<42}{seconds / n * 1e9:>8.2f} ns")


COLD_START = textwrap.dedent(
    """
    import time
    t0 = time.perf_counter()
    import layoutkit
    layout = layoutkit.StridedLayout.dense((5, 3, 4), 4).permuted((2, 0, 1))
    layout.is_contiguous_c
    print(time.perf_counter() - t0)
    """
)


def cold_start_seconds(cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run(
        [sys.executable, "-c", COLD_START], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def print_cold_start():
    print("\n## Cold start: fresh process, import layoutkit + first dense/permuted/property")
    with tempfile.TemporaryDirectory() as cache_dir:
        empty = cold_start_seconds(cache_dir)
        warm = statistics.median(cold_start_seconds(cache_dir) for _ in range(3))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import numba"], check=True)
    numba_import = time.perf_counter() - t0
    print(f"empty Numba cache : {empty:.3f} s")
    print(f"warm Numba cache  : {warm:.3f} s")
    print(f"(for scale: a whole `python -c 'import numba'` process takes {numba_import:.3f} s)")


if __name__ == "__main__":
    print_python_table()
    print_njit_table()
    print_cold_start()
