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
from helpers.hostile_dlpack import SameCapsule
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


def _junk_buffers():
    """Small int64 arrays of junk, the size of a freed layout buffer (its memory reused)."""
    from array import array

    return [array("q", [77] * 8) for _ in range(64)]


def _export_matches(view, values, what):
    exported = np.from_dlpack(view)
    check(exported.shape == values.shape and exported.strides == values.strides,
          f"{what}: exported shape {exported.shape}, strides {exported.strides}; the view "
          f"has {values.shape}, {values.strides}")  # fmt: skip


@cases.case(timeout=120)
def an_export_inside_another_first_export_keeps_its_shape():
    """A read-only view's layout gets its int64 buffer on its first export (a read-only
    view needs no uniqueness analysis, which would make it at import). Another thread's
    export made while the first is making that buffer (here: from inside it) points its
    capsule at the buffer it made; the first must not replace (and free) that buffer
    before the capsule is consumed."""
    import layoutkit.layout as layout_module

    values = np.arange(120.0).reshape(2, 3, 4, 5)
    values.flags.writeable = False
    view = StridedMemoryView.from_dlpack(values, -1).permuted((3, 1, 0, 2))
    check(view.layout._packed is None, "test premise: the view's layout has no buffer yet")
    make = layout_module._int64s
    calls, capsules = [], []

    def interleaved(*args):
        calls.append(args)
        if len(calls) == 1:  # the other thread's export, in the middle of the first one's
            capsules.append(view.__dlpack__(max_version=(1, 0)))
        return make(*args)

    layout_module._int64s = interleaved
    try:
        np.from_dlpack(view)
    finally:
        layout_module._int64s = make
    check(len(calls) == 2, f"test premise: two buffers made, got {len(calls)}")
    junk = _junk_buffers()  # noqa: F841 (reuses the memory of a freed buffer)
    expected = values.transpose(3, 1, 0, 2)
    exported = np.from_dlpack(SameCapsule(capsules[0]))
    check(exported.shape == expected.shape and exported.strides == expected.strides,
          f"the inner export's capsule says shape {exported.shape}, strides "
          f"{exported.strides}; the view has {expected.shape}, {expected.strides}")  # fmt: skip
    _export_matches(view, expected, "after interleaved first exports")


def _races(rounds, make, work, after):
    """``rounds`` times: ``make()`` a fresh object, run ``work(obj)`` in 4 threads released
    at once (switching threads every microsecond), then ``after(obj, results)`` with the
    threads' results; a thread's exception fails the case."""
    failures = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(rounds):
            obj = make()
            start = threading.Barrier(4)
            results = []

            def run(obj=obj, start=start, results=results):
                start.wait()
                try:
                    results.append(work(obj))
                except BaseException as exc:
                    failures.append(exc)

            threads = [threading.Thread(target=run) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            after(obj, results)
    finally:
        sys.setswitchinterval(old)
    if failures:
        raise AssertionError(f"{len(failures)} thread(s) failed; the first:") from failures[0]


def _first_exports_race(rounds):
    values = np.arange(120.0).reshape(2, 3, 4, 5)
    values.flags.writeable = False
    base = StridedMemoryView.from_dlpack(values, -1)
    expected = values.transpose(3, 1, 0, 2)

    def after(view, _):
        junk = _junk_buffers()  # noqa: F841
        _export_matches(view, expected, "an export after first exports raced")

    _races(rounds, lambda: base.permuted((3, 1, 0, 2)),  # a fresh layout, without its buffer
           lambda view: _export_matches(view, expected, "a first export raced"), after)  # fmt: skip


@cases.case(timeout=300)
def threads_race_first_exports_of_one_view():
    """Threads make the first exports of one read-only view at once (see above)."""
    _first_exports_race(300)


@cases.case(timeout=300)
def threads_race_first_buffer_of_one_view():
    """Threads ask one fresh view for its buffer at once: all get the same Buffer, so
    closing it closes the view for everyone (a second Buffer, dropped, would not)."""
    values = np.arange(24.0).reshape(2, 3, 4)

    def after(view, seen):
        assert len({id(b) for b in seen}) == 1 and seen[0] is view.buffer, seen

    _races(300, lambda: StridedMemoryView.from_dlpack(values, -1), lambda view: view.buffer,
           after)  # fmt: skip

cases.export(globals())
