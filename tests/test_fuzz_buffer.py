"""Hostile ``Buffer.from_handle`` and memory-resource arguments.

The rules (issue 9, DECISIONS 14): a buffer's bytes ``[ptr, ptr + size)`` lie in the
64-bit address space; pointers and sizes are integers (``int``, NumPy integers,
``ctypes.c_void_p``, handle objects), never floats, strings or bools, and are not
truncated; a layout reaching outside a buffer of known size is refused by
``from_buffer``; impossible allocation sizes get ``OverflowError`` / ``ValueError``, not a
``MemoryError`` escaping.
"""

import ctypes
import functools
import gc

import numpy as np
from helpers.hostile import Cases, note
from helpers.hostile_checks import (
    DOCUMENTED_OR_HOSTILE,
    HostileError,
    Poisoned,
    check,
    refused,
    refused_or_ok,
)
from helpers.hostile_objects import IntSubclass, NonIntIndex, RaisingIndex
from helpers.hostile_strategies import fuzz_case, int_likes, junk
from hypothesis import strategies as st

import layoutkit
from layoutkit import Buffer, HostMemoryResource, MemoryResource, StridedLayout, StridedMemoryView

cases = Cases(__name__)

REFUSED_HANDLES = {
    "end_past_2_64": (2**64 - 8, 16),  # the example
    "end_one_past_2_64": (2**64 - 1, 2),
    "ptr_2_64": (2**64, 0),
    "ptr_negative": (-8, 8),
    "size_negative": (4096, -1),
    "size_2_64": (4096, 2**64),
    "null_with_size": (0, 16),
    "ptr_float": (4096.0, 8),
    "ptr_string": ("4096", 8),
    "ptr_hex_string": ("0x1000", 8),
    "ptr_bytes": (b"\x00\x10", 8),
    "ptr_bool": (True, 0),
    "ptr_none": (None, 0),
    "ptr_list": ([4096], 8),
    "ptr_complex": (4096 + 0j, 8),
    "ptr_numpy_float": (np.float64(4096), 8),
    "ptr_numpy_negative": (np.int64(-8), 8),
    "size_float": (4096, 8.0),
    "size_string": (4096, "8"),
    "size_bool": (4096, True),
    "ptr_non_int_index": (NonIntIndex(4096.0), 8),
    # int() (the fallback for handle objects) truncated a float array and took NumPy's bool
    "ptr_numpy_float_array": (np.array(4096.7), 8),
    "ptr_numpy_1d_array": (np.array([4096]), 8),
    "ptr_numpy_bool": (np.True_, 0),
    "size_numpy_bool": (4096, np.True_),
    "size_numpy_float_array": (4096, np.array(8.5)),
    "ptr_raising_index": (RaisingIndex(), 8),
}


def _refused_handle(name):
    ptr, size = REFUSED_HANDLES[name]
    refused(Buffer.from_handle, ptr, size, what=f"Buffer.from_handle({ptr!r}, {size!r})",
            classes=DOCUMENTED_OR_HOSTILE)  # fmt: skip


for _name in REFUSED_HANDLES:
    cases.add(f"from_handle_{_name}", functools.partial(_refused_handle, _name))


ACCEPTED_HANDLES = {
    "numpy_uint64": (np.uint64(4096), np.uint64(8), 4096, 8),
    "c_void_p": (ctypes.c_void_p(4096), 8, 4096, 8),
    "numpy_0d_integer_arrays": (np.array(4096), np.array(8, np.uint8), 4096, 8),
    "null_empty": (0, 0, 0, 0),
    "c_void_p_null_empty": (ctypes.c_void_p(None), 0, 0, 0),
    "int_subclass": (IntSubclass(4096), IntSubclass(8), 4096, 8),
    "last_byte_of_the_address_space": (2**64 - 1, 1, 2**64 - 1, 1),
}


def _accepted_handle(name):
    ptr, size, expected_ptr, expected_size = ACCEPTED_HANDLES[name]
    buffer = Buffer.from_handle(ptr, size)
    check((buffer.ptr, buffer.size) == (expected_ptr, expected_size),
          f"from_handle({ptr!r}, {size!r}) gave ptr {buffer.ptr}, size {buffer.size}")  # fmt: skip
    check(type(buffer.ptr) is int and type(buffer.size) is int, "ptr/size are not ints")


for _name in ACCEPTED_HANDLES:
    cases.add(f"from_handle_accepts_{_name}", functools.partial(_accepted_handle, _name))


@cases.case
def from_handle_size_bounds_every_layout():
    """DECISIONS 14: ``from_handle(ptr, size, owner=...)`` has a known size; layouts past it,
    or before its start, are refused by from_buffer."""
    array = np.zeros(8)
    buffer = Buffer.from_handle(array.ctypes.data, array.nbytes, owner=array)
    for layout in (StridedLayout.dense((9,), 8), StridedLayout((2,), (8,), 8),
                   StridedLayout((2,), (-1,), 8), StridedLayout.dense((5,), 16)):  # fmt: skip
        refused(StridedMemoryView.from_buffer, buffer, layout, None,
                what=f"from_buffer of a 64-byte buffer with {layout!r}")  # fmt: skip


@cases.case
def impossible_host_allocations_are_refused_clearly():
    """Sizes no machine can allocate: OverflowError / ValueError naming the size."""
    resource = HostMemoryResource()
    for size in (2**63, 2**64 - 1, 2**64, -1):
        refused(resource.allocate, size, what=f"HostMemoryResource().allocate({size})")


@cases.case
def host_resource_rejects_foreign_and_double_frees():
    resource = HostMemoryResource()
    buffer = resource.allocate(64)
    buffer.close()
    buffer.close()  # idempotent
    refused(resource.deallocate, 4096, 64, what="deallocating memory it never allocated")
    other = HostMemoryResource().allocate(64)
    refused(resource.deallocate, other.ptr, 64, what="deallocating another resource's memory")
    other.close()


@cases.case
def host_memory_freed_early_by_a_second_owner_stays_for_its_views():
    """A second owner of a host allocation (``Buffer.from_handle(b.ptr, b.size, mr=mr)``)
    closed, or a direct ``mr.deallocate(b.ptr, b.size)``, freed the memory under ``b``'s
    views (a segfault reading them once unmapped). The memory now lives as long as ``b``
    and its views; ``b``'s own deallocation is then refused as a second free."""
    for early in ("from_handle", "deallocate"):
        resource = HostMemoryResource()
        buffer = resource.allocate(1 << 24)  # large: freed by munmap
        view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((1 << 21,), 8),
                                             np.float64)  # fmt: skip
        view[(1 << 21) - 1] = 7.0
        if early == "from_handle":
            Buffer.from_handle(buffer.ptr, buffer.size, mr=resource).close()
        else:
            resource.deallocate(buffer.ptr, buffer.size)
        gc.collect()
        check(np.from_dlpack(view)[-1] == 7.0, f"{early}: the view no longer reads its memory")
        del view
        refused(buffer.close, what=f"buffer.close() after {early} freed it", classes=(ValueError,))
        check(buffer.is_closed, f"{early}: a close whose deallocate raised left it open")


@cases.case
def from_handle_rejects_bad_mr_owner_stream():
    array = np.zeros(4)
    for kwargs in (dict(mr=object()), dict(mr=HostMemoryResource(), owner=array),
                   dict(stream=1), dict(mr="host")):  # fmt: skip
        refused(Buffer.from_handle, array.ctypes.data, 32, what=f"from_handle(..., **{kwargs})",
                **kwargs)  # fmt: skip


class _RefusingResource(MemoryResource):
    """A user resource whose ``deallocate`` records its call, then raises."""

    def __init__(self):
        self.calls = []

    def allocate(self, size, stream=None):
        return Buffer.from_handle(0x10000, size, mr=self, stream=stream)

    def deallocate(self, ptr, size, stream=None):
        self.calls.append(stream)
        raise HostileError("deallocate refuses")

    device_id = -1
    is_device_accessible = False
    is_host_accessible = True


@cases.case
def close_with_a_stream_propagates_deallocate_errors():
    """``close(stream)`` ran ``deallocate`` only as this frame died (the detached
    finalizer's tuple still held the allocation), so its error was printed as "Exception
    ignored" instead of raised, as ``close()`` raises it. Both now raise, once, on the
    stream given."""
    for stream in (None, 0, 7):
        resource = _RefusingResource()
        buffer = resource.allocate(8, stream=3)
        refused(buffer.close, stream, what=f"close({stream!r}) of a failing deallocate",
                classes=(HostileError,))  # fmt: skip
        check(buffer.is_closed, f"close({stream!r}): a failed deallocate left it open")
        buffer.close(stream)
        del buffer
        gc.collect()
        expected = [3 if stream is None else stream]
        check(resource.calls == expected, f"close({stream!r}): deallocate calls {resource.calls}")


class _InaccessibleResource(MemoryResource):
    """cuda.core's NullMemoryResource: memory neither the host nor a device can access
    (here canary host memory, to see whether anything touched it)."""

    def __init__(self):
        self.block = Poisoned(64)

    def allocate(self, size, stream=None):
        return Buffer.from_handle(self.block.address, size, mr=self)

    def deallocate(self, ptr, size, stream=None):
        pass

    device_id = -1
    is_device_accessible = False
    is_host_accessible = False


@cases.case
def memory_neither_host_nor_device_accessible_is_not_copied():
    """Copies took memory that is not device-accessible for host memory: ``fill``,
    ``copy_to`` / ``copy_from`` and ``layoutkit.copy`` wrote (and read) memory whose
    resource says the host cannot access it, while indexing and ``__dlpack__`` refused
    it. Copies now refuse it (``BufferError``) before touching it."""
    resource = _InaccessibleResource()
    buffer = resource.allocate(64)
    host = HostMemoryResource().allocate(64)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((64,), 1), np.uint8)
    doors = {
        "fill": lambda: buffer.fill(1),
        "copy_from(host)": lambda: buffer.copy_from(host),
        "copy_to(host)": lambda: buffer.copy_to(host),
        "host.copy_from": lambda: host.copy_from(buffer),
        "copy(view, ndarray)": lambda: layoutkit.copy(view, np.ones(64, np.uint8)),
        "copy(ndarray, view)": lambda: layoutkit.copy(np.ones(64, np.uint8), view),
        "view.copy_from(view)": lambda: view.copy_from(view[::-1]),
        "__dlpack__": buffer.__dlpack__,
    }
    for name, door in doors.items():
        refused(door, what=name, classes=(BufferError,))
        resource.block.untouched(name)
    # nor may @njit code read it (the view's record took "not device-accessible" for host)
    from numba import njit

    first = njit(lambda v: v[0])
    refused(first, view, what="@njit read", classes=(ValueError,))
    buffer.close()
    host.close()


class _LyingComparisons(int):
    """An ``int`` subclass that says it lies in every range."""

    def __lt__(self, other):
        return True

    __le__ = __lt__

    def __gt__(self, other):
        return False

    __ge__ = __gt__


@cases.case
def fill_reads_an_int_subclass_as_its_value():
    """``fill(v)`` compared ``v`` itself with ``[0, 256)``: a subclass's comparisons passed
    it, and ``bytes((v,))`` raised a message naming neither the argument nor the value."""
    buffer = HostMemoryResource().allocate(8)
    for value in (1000, -1):
        error = refused(buffer.fill, _LyingComparisons(value), classes=(OverflowError,))
        check(f"fill value {value} " in str(error), f"fill({value}): {error}")
    buffer.fill(_LyingComparisons(7))
    check(ctypes.string_at(buffer.ptr, 8) == b"\x07" * 8, "fill(7) of a subclass")
    buffer.close()


def _fuzz_from_handle(data):
    ptr = data.draw(
        st.one_of(int_likes, junk, st.builds(ctypes.c_void_p, st.integers(0, 2**64 - 1)))
    )
    size = data.draw(st.one_of(int_likes, junk))
    note((ptr, size))
    ok, buffer = refused_or_ok(Buffer.from_handle, ptr, size, classes=DOCUMENTED_OR_HOSTILE)
    if ok:
        check(type(buffer.ptr) is int and type(buffer.size) is int, "ptr/size are not ints")
        check(buffer.ptr >= 0 and buffer.ptr + buffer.size <= 2**64,
              f"from_handle({ptr!r}, {size!r}): [{buffer.ptr:#x}, +{buffer.size}) leaves "
              "the 64-bit address space")  # fmt: skip
        check(buffer.ptr or not buffer.size, "a null buffer with a size")
        buffer.close()



cases.add("fuzz_from_handle", fuzz_case(_fuzz_from_handle, 300), timeout=300)
cases.add("fuzz_from_handle_long", fuzz_case(_fuzz_from_handle, 600, 30000), timeout=1800, slow=True)


cases.export(globals())
