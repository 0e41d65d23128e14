"""Threads building layouts, importing views, copying and exporting at once.

Each thread checks every answer against NumPy as it goes; shared objects (one layout, one
view) are used by all threads together, so caches and memos are raced. The rule: no
wrong result, no crash, no deadlock (the harness's timeout), no exception.
"""

import sys
import threading

import numpy as np
from helpers.hostile import Cases
from helpers.hostile_checks import check
from numba import njit

import layoutkit
from layoutkit import StridedLayout, StridedMemoryView

cases = Cases(__name__)
THREADS = 8

DOORS = (
    StridedMemoryView.from_array_interface,
    lambda a: StridedMemoryView.from_dlpack(a, -1),
    lambda a: StridedMemoryView.from_any_interface(a, -1),
)


def _random_array(rng):
    ndim = int(rng.integers(0, 5))
    shape = tuple(int(e) for e in rng.integers(1, 6, ndim))
    base = np.arange(int(np.prod(shape)), dtype=rng.choice([np.int8, np.int32, np.float64]))
    base = base.reshape(shape)
    index = tuple(slice(None, None, int(rng.choice([1, 2, -1]))) for _ in shape)
    return base[(*index, ...)].transpose(tuple(rng.permutation(ndim)))


def _layout_of(array):
    return StridedLayout(array.shape, array.strides, array.itemsize, divide_strides=True)


def _work(seed, shared_layout, shared_view, shared_values, iterations, failures):
    rng = np.random.default_rng(seed)
    try:
        for _ in range(iterations):
            array = _random_array(rng)
            # a layout and its transforms, against NumPy
            layout = StridedLayout.dense(array.shape, array.itemsize)
            order = tuple(int(a) for a in rng.permutation(layout.ndim))
            permuted = layout.permuted(order)
            check(permuted.shape == tuple(layout.shape[a] for a in order), "permuted shape")
            check(_layout_of(array).volume == array.size, "volume")
            # the shared layout, raced
            check(shared_layout.permuted((2, 0, 1)).shape == (4, 2, 3), "shared permuted")
            check(shared_layout.reshaped((6, 4)).strides == (4, 1), "shared reshaped")
            check(shared_layout[1:, ::-1].slice_offset == 12 + 8, "shared slicing")
            # an import, a copy and an export, against NumPy
            view = DOORS[int(rng.integers(0, len(DOORS)))](array)
            check(view.shape == array.shape, f"import shape {view.shape} != {array.shape}")
            check(view.layout.strides_in_bytes == array.strides, "import strides")
            out = np.zeros(array.shape, array.dtype)
            layoutkit.copy(StridedMemoryView.from_array_interface(out), view)
            check(np.array_equal(out, array), "a copy gave other values")
            check(np.array_equal(np.from_dlpack(view), array), "an export gave other values")
            # the shared view, exported and copied from by everyone
            check(np.array_equal(np.from_dlpack(shared_view), shared_values), "shared export")
            target = np.zeros_like(shared_values)
            shared_view.copy_to(StridedMemoryView.from_array_interface(target))
            check(np.array_equal(target, shared_values), "shared copy")
    except BaseException as exc:  # reported by the main thread
        failures.append(exc)


def _run_threads(target, iterations):
    shared_layout = StridedLayout.dense((2, 3, 4), 8)
    shared_values = np.arange(60.0).reshape(5, 12)[::2, 1::3]
    shared_view = StridedMemoryView.from_dlpack(shared_values, -1)
    failures = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: interleave inside calls
    try:
        threads = [
            threading.Thread(target=target, args=(seed, shared_layout, shared_view,
                                                  shared_values, iterations, failures))
            for seed in range(THREADS)
        ]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(old)
    if failures:
        raise AssertionError(f"{len(failures)} thread(s) failed; the first:") from failures[0]


@cases.case(timeout=300)
def threads_build_import_copy_export():
    _run_threads(_work, 60)


@cases.case(timeout=3600, slow=True)
def threads_build_import_copy_export_long():
    _run_threads(_work, 3000)


@njit
def _sum_view(view):
    total = 0.0
    for i in range(view.shape[0]):
        for j in range(view.shape[1]):
            total += view[i, j]
    return total


def _njit_work(seed, shared_layout, shared_view, shared_values, iterations, failures):
    rng = np.random.default_rng(seed)
    try:
        for _ in range(iterations):
            array = np.arange(24.0).reshape(4, 6)[:: int(rng.choice([1, 2])), ::-1]
            check(_sum_view(StridedMemoryView.from_array_interface(array)) == array.sum(),
                  "an @njit sum over a view")  # fmt: skip
            check(
                _sum_view(shared_view) == shared_values.sum(), "an @njit sum over the shared view"
            )
    except BaseException as exc:
        failures.append(exc)


@cases.case(timeout=300)
def threads_first_njit_calls_race():
    """All threads make the first call of an @njit function taking views at once."""
    _run_threads(_njit_work, 20)


cases.export(globals())
