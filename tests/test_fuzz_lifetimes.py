"""Hostile lifetimes: use after close, copies and pickles of views, exports that outlive views.

Each case runs in a child interpreter (``helpers.hostile``), so a use of freed memory that
crashes is a failure naming the case.

The rules held to (issue 9, DECISIONS 19):

* every operation that touches a view's memory (copies either way, DLPack and array
  interface exports, ``@njit`` unboxing, ``view()``) checks that its buffer is open,
  whatever the view cached before (``device_id``, ``repr``, an earlier copy), and refuses
  a closed one with ``BufferError`` or ``ValueError``;
* ``copy.deepcopy`` and ``pickle`` of a view either refuse with ``TypeError`` or give an
  independent copy with its own memory and the same contents; a shallow ``copy.copy``
  gives a view that keeps the memory alive; whatever happens, a DLPack producer's
  deleter runs exactly once.
"""

import copy
import functools
import gc
import pickle
import weakref

import numpy as np
from helpers.doors import DOORS, open_door, scratch_like
from helpers.hostile import Cases
from helpers.hostile_checks import check, check_view, refused, refused_or_ok
from helpers.hostile_dlpack import SameCapsule
from numba import njit

import layoutkit
from layoutkit import Buffer, HostMemoryResource, StridedMemoryView

cases = Cases(__name__)
CLOSED = (BufferError, ValueError)


# ------------------------------------------------------------------ use after close
@njit
def _read_first_1d(view):
    return view[0]


@njit
def _read_first_2d(view):
    return view[0, 0]


def _use(view):
    """What makes a view cache things before the close: device_id, repr and a copy."""
    view.device_id  # noqa: B018 (the read is the point)
    repr(view)
    scratch, _ = scratch_like(view)
    layoutkit.copy(scratch, view)


def _njit_read(view):
    return (_read_first_1d if view.layout.ndim == 1 else _read_first_2d)(view)


CLOSED_OPERATIONS = {
    "copy_from": lambda view: view.copy_from(scratch_like(view)[0]),
    "copy_to": lambda view: view.copy_to(scratch_like(view)[0]),
    "copy_as_dst": lambda view: layoutkit.copy(view, scratch_like(view)[0]),
    "copy_as_src": lambda view: layoutkit.copy(scratch_like(view)[0], view),
    "dlpack_versioned": lambda view: view.__dlpack__(max_version=(1, 0)),
    "dlpack_legacy": lambda view: view.__dlpack__(),
    "numpy_from_dlpack": lambda view: np.from_dlpack(view),
    "array_interface": lambda view: view.__array_interface__,
    "njit_unbox": _njit_read,
    "view_method": lambda view: view.view(view.layout, view.dtype),
    "from_buffer": lambda view: StridedMemoryView.from_buffer(view.buffer, view.layout, view.dtype),
}


def _use_after_close(door_name, operation):
    door = open_door(door_name)
    view = door.view
    _use(view)
    view.buffer.close()
    refused(
        CLOSED_OPERATIONS[operation],
        view,
        what=f"{operation} of a used {door.name} view after view.buffer.close()",
        classes=CLOSED,
    )


def _cuda_interface_after_close(door_name):
    door = open_door(door_name)
    _use(door.view)
    door.view.buffer.close()
    # a host view has no CUDA interface anyway: AttributeError says so as well
    refused(
        lambda: door.view.__cuda_array_interface__,
        what=f"__cuda_array_interface__ of a closed {door.name} view",
        classes=(*CLOSED, AttributeError),
    )


for _door in DOORS:
    for _operation in CLOSED_OPERATIONS:
        cases.add(
            f"closed_{_door}_{_operation}",
            functools.partial(_use_after_close, _door, _operation),
            timeout=120,
        )
    cases.add(
        f"closed_{_door}_cuda_array_interface",
        functools.partial(_cuda_interface_after_close, _door),
    )


@cases.case
def closed_buffer_refused_by_copy_before_any_use():
    """A from_buffer view closed before anything was cached: copy still refuses."""
    buffer = HostMemoryResource().allocate(1 << 20)
    view = StridedMemoryView.from_buffer(
        buffer, layoutkit.StridedLayout.dense((1 << 17,), 8), np.float64
    )
    buffer.close()
    refused(lambda: view.copy_from(scratch_like(view)[0]), what="copy_from into a closed buffer",
            classes=CLOSED)  # fmt: skip


@cases.case
def structured_and_subarray_elements_outlive_the_buffer():
    """``view[i]`` of a structured or subarray dtype was NumPy's element over the whole
    address space: a view of the memory that did not keep it alive, so reading it after
    ``buffer.close()`` read freed (here unmapped: a segfault) memory. It is a read-only
    copy now, with the values the memory had."""
    for dtype in (np.dtype([("a", "f8")]), np.dtype("(2,)f4")):
        buffer = HostMemoryResource().allocate(1 << 24)  # large: freed by munmap
        view = StridedMemoryView.from_buffer(
            buffer, layoutkit.StridedLayout.dense((1 << 21,), 8), np.float64
        )
        view[5] = 2.0
        element = view.view(dtype=dtype)[5]
        expected = np.array([2.0]).view(dtype)[0]
        del view
        buffer.close()
        gc.collect()
        check(element.tobytes() == expected.tobytes(),
              f"{dtype} element after close reads {element!r}, expected {expected!r}")  # fmt: skip
        refused(element.__setitem__, 0, 0, classes=(ValueError,),
                what=f"writing into a {dtype} element (a copy: writes would be lost)")  # fmt: skip


@cases.case
def view_returned_by_njit_then_buffer_closed_is_refused_as_closed():
    """A view returned by compiled code knows no device yet; its parent's buffer closed,
    passing it to compiled code was a RuntimeError from reading the closed buffer's
    device: it is the BufferError every closed view gives."""
    buffer = HostMemoryResource().allocate(64)
    view = StridedMemoryView.from_buffer(
        buffer, layoutkit.StridedLayout.dense((8,), 8), np.float64
    )
    derived = _tail(view)
    buffer.close()
    refused(_read_first_1d, derived, what="@njit of a returned view after buffer.close()",
            classes=(BufferError,))  # fmt: skip


@njit
def _tail(view):
    return view[2:]


# ------------------------------------------------------------------ copies and pickles
def _deep(view):
    return copy.deepcopy(view)


def _pickled(view):
    return pickle.loads(pickle.dumps(view))


def _contents(view):
    scratch, array = scratch_like(view)
    layoutkit.copy(scratch, view)
    return array


def _duplicate(door_name, how, name):
    door = open_door(door_name)
    producer = door.producer
    view = door.view
    view.ptr  # noqa: B018 (used first: pointers and buffers get cached)
    _use(view)
    ok, duplicate = refused_or_ok(how, view, what=f"{name} of a {door.name} view",
                                  classes=(TypeError,))  # fmt: skip
    if ok:
        check_view(duplicate, f"{name} of a {door.name} view")
        check(type(duplicate) is type(view), f"{name} gave a {type(duplicate).__name__}")
        check(duplicate.shape == view.shape and duplicate.dtype == view.dtype,
              f"{name} changed shape or dtype")  # fmt: skip
        check(np.array_equal(_contents(duplicate), door.expected),
              f"{name} of a {door.name} view has other contents than the original")  # fmt: skip
        if view.size:
            check(duplicate.ptr != view.ptr,
                  f"{name} of a {door.name} view shares the original's memory at "
                  f"{view.ptr:#x}: it must copy independently or refuse with TypeError")  # fmt: skip
        zeros, _ = scratch_like(duplicate)
        if not duplicate.readonly:
            layoutkit.copy(duplicate, zeros)
        check(np.array_equal(door.array, door.expected),
              f"writing into the {name} of a {door.name} view changed the original")  # fmt: skip
        expected_copy = _contents(duplicate)
        del door, view, zeros
        gc.collect()
        check(np.array_equal(_contents(duplicate), expected_copy),
              f"the {name} of a {door.name} view lost its memory when the original died")  # fmt: skip
        del duplicate
    else:
        del door, view, duplicate  # the refusal: its traceback holds the view's frame
    del ok
    gc.collect()
    if producer is not None:
        check(producer.deleted == 1,
              f"after {name} of a DLPack view and the death of every view, the producer's "
              f"deleter ran {producer.deleted} times (must be exactly once)")  # fmt: skip


def _shallow(door_name):
    door = open_door(door_name)
    producer = door.producer
    view = door.view
    _use(view)
    ok, duplicate = refused_or_ok(copy.copy, view, what=f"copy.copy of a {door.name} view",
                                  classes=(TypeError,))  # fmt: skip
    if ok:
        check_view(duplicate, f"copy.copy of a {door.name} view")
        expected = door.expected
        del door, view
        gc.collect()
        check(np.array_equal(_contents(duplicate), expected),
              "copy.copy of a view does not keep the memory alive once the original dies")  # fmt: skip
        del duplicate
    else:
        del door, view
    gc.collect()
    if producer is not None:
        check(producer.deleted == 1,
              f"after copy.copy of a DLPack view, the deleter ran {producer.deleted} times")  # fmt: skip


for _door in DOORS:
    cases.add(f"deepcopy_{_door}", functools.partial(_duplicate, _door, _deep, "copy.deepcopy"))
    cases.add(
        f"pickle_{_door}", functools.partial(_duplicate, _door, _pickled, "pickle round trip")
    )
    cases.add(f"shallow_copy_{_door}", functools.partial(_shallow, _door))


@cases.case
def buffer_refuses_pickle_and_deepcopy():
    buffer = HostMemoryResource().allocate(64)
    refused(pickle.dumps, buffer, classes=(TypeError,))
    refused(copy.deepcopy, buffer, classes=(TypeError,))
    check(copy.copy(buffer) is buffer, "copy.copy(buffer) must be the buffer itself")
    buffer.close()


# ------------------------------------------------------------------ exports outliving views
def _export_outlives_view(door_name):
    """A consumer of an exported capsule reads the data after the view (and door) died,
    and once the consumer dies nothing of the view is left (no leak)."""
    door = open_door(door_name)
    producer = door.producer
    expected = door.expected
    capsule = door.view.__dlpack__(max_version=(1, 0))
    alive = weakref.ref(door.view)
    del door
    gc.collect()
    result = np.from_dlpack(SameCapsule(capsule))
    del capsule
    gc.collect()
    check(np.array_equal(result.reshape(expected.shape), expected),
          "a consumer of an exported capsule reads other data once the view died")  # fmt: skip
    del result
    gc.collect()
    check(alive() is None, "the view stays alive after its capsule's consumer died (a leak)")
    if producer is not None:
        check(producer.deleted == 1, f"the producer's deleter ran {producer.deleted} times")


for _door in ("from_buffer", "dlpack_versioned_capsule", "dlpack_numpy_capsule"):
    cases.add(f"export_outlives_view_{_door}", functools.partial(_export_outlives_view, _door))


def _close_while_exported(export):
    """Found while fuzzing: ``buffer.close()`` frees memory that an exported NumPy array
    still reads. Closing must refuse while exports live (as ``mmap.close`` does with
    ``BufferError``), or the memory must outlive the last export."""
    buffer = HostMemoryResource().allocate(1 << 20)
    layout = layoutkit.StridedLayout.dense((1 << 17,), 8)
    view = StridedMemoryView.from_buffer(buffer, layout, np.float64)
    view.copy_from(host_view_of(np.arange(1 << 17, dtype=np.float64)))
    exported = export(view)
    del view
    ok, _ = refused_or_ok(buffer.close, classes=(BufferError,))
    if ok:
        gc.collect()
        check(np.array_equal(exported, np.arange(1 << 17)),
              "an array exported from a view still reads the buffer after buffer.close() "
              "freed it (use after free)")  # fmt: skip


def host_view_of(array):
    return StridedMemoryView.from_array_interface(array)


cases.add("close_while_exported_by_dlpack",
          functools.partial(_close_while_exported, np.from_dlpack))  # fmt: skip
cases.add("close_while_exported_by_array_interface",
          functools.partial(_close_while_exported, np.asarray))  # fmt: skip


@cases.case
def layoutkit_round_trip_releases_everything():
    """A view exported to DLPack and imported back by layoutkit: no leak, one deleter."""
    from helpers.producers import Producer

    producer = Producer(np.arange(6.0))
    view = StridedMemoryView.from_dlpack(producer, -1)
    again = StridedMemoryView.from_dlpack(SameCapsule(view.__dlpack__(max_version=(1, 0))), -1)
    check(np.array_equal(np.from_dlpack(again), np.arange(6.0)), "round trip changed the data")
    alive = weakref.ref(view)
    del view, again
    gc.collect()
    check(alive() is None, "a view exported to and imported by layoutkit leaks")
    check(producer.deleted == 1, f"the producer's deleter ran {producer.deleted} times")


def _round_trips(count):
    """Imports, exports and copies over and over: memory use must not grow with count."""
    import tracemalloc

    from helpers.producers import Producer

    array = np.arange(12.0).reshape(3, 4)
    target = np.zeros((3, 4))

    def once():
        for view in (StridedMemoryView.from_dlpack(Producer(array), -1),
                     StridedMemoryView.from_dlpack(array, -1),
                     StridedMemoryView.from_array_interface(array[:, ::2]),
                     StridedMemoryView.from_dlpack(SameCapsule(
                         StridedMemoryView.from_dlpack(array, -1).__dlpack__(
                             max_version=(1, 0))), -1)):  # fmt: skip
            np.from_dlpack(view)
            view.__dlpack__(max_version=(1, 0))  # dropped unconsumed
            view.__dlpack__()
            layoutkit.copy(StridedMemoryView.from_array_interface(target[:, : view.shape[1]]),
                           view)  # fmt: skip

    for _ in range(200):  # caches fill up first
        once()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(count):
        once()
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    check(grown < 256 * 1024, f"{count} rounds of imports and exports leaked {grown} bytes")


cases.add("round_trips_do_not_leak", functools.partial(_round_trips, 2000), timeout=300)
cases.add("round_trips_do_not_leak_long", functools.partial(_round_trips, 100_000),
          timeout=3600, slow=True)  # fmt: skip


@cases.case
def public_owner_cannot_release_memory_in_use():
    """Found while fuzzing: ``view.buffer.owner`` of a DLPack import is the object holding
    the producer's deleter, and its public ``release()`` frees the tensor while views use
    it (and before the exports they made die). The deleter must run only when nothing uses
    the memory any more, whatever is called on objects reachable from a view."""
    from helpers.producers import Producer

    producer = Producer(np.arange(4.0))
    view = StridedMemoryView.from_dlpack(producer, -1)
    owner = view.buffer.owner
    for name in dir(owner):
        method = getattr(owner, name, None)
        if name.startswith("_") or not callable(method):
            continue
        refused_or_ok(method, what=f"view.buffer.owner.{name}()",
                      classes=(TypeError, ValueError, BufferError, RuntimeError))  # fmt: skip
    check(producer.deleted == 0,
          "the producer's deleter ran while a view still uses its memory (through "
          "view.buffer.owner's public methods)")  # fmt: skip
    del view, owner
    gc.collect()
    check(producer.deleted == 1, f"the deleter ran {producer.deleted} times in all")


@cases.case
def unconsumed_capsule_releases_view():
    view = StridedMemoryView.from_dlpack(np.arange(6.0), -1)
    for versioned in ((1, 0), None):
        view.__dlpack__(max_version=versioned)  # dropped unconsumed
    alive = weakref.ref(view)
    del view
    gc.collect()
    check(alive() is None, "an unconsumed exported capsule keeps its view alive (a leak)")


@cases.case
def from_buffer_view_keeps_buffer_alive():
    """A view over a Buffer nobody else holds keeps it open (no use after free)."""
    view = StridedMemoryView.from_buffer(
        HostMemoryResource().allocate(1 << 20), layoutkit.StridedLayout.dense((1 << 17,), 8),
        np.float64,
    )  # fmt: skip
    gc.collect()
    src, _ = scratch_like(view)
    layoutkit.copy(view, src)
    check(not view.buffer.is_closed, "the view's buffer was closed under it")
    check(isinstance(view.buffer, Buffer), "view.buffer is not a Buffer")


@cases.case
def deleter_once_after_many_imports():
    """Many imports and exports of one producer's tensor: one deleter call per import."""
    from helpers.producers import Producer

    array = np.arange(12, dtype=np.int32).reshape(3, 4)
    producers = [Producer(array) for _ in range(200)]
    views = [StridedMemoryView.from_dlpack(p, -1) for p in producers]
    exports = [np.from_dlpack(v) for v in views[::2]]
    check(all(np.array_equal(e, array) for e in exports), "round trips changed the data")
    del views, exports
    gc.collect()
    counts = {p.deleted for p in producers}
    check(counts == {1}, f"deleters ran {sorted(counts)} times (must be once each)")


cases.export(globals())
