"""Hostile ``__array_interface__`` / ``__cuda_array_interface__`` producers and host buffers.

The rule (issue 9, "Every import door validates everything it is given before it returns
a view"): an import either raises ``TypeError`` / ``ValueError`` / ``BufferError`` /
``OverflowError`` (or lets a hostile object's own error through), or returns a view whose
every attribute works, whose bytes lie in the 64-bit address space and inside the
producer's buffer where its length is known, and which NumPy, reading the same dict,
agrees with. Nothing is written by an import.
"""

import functools
import gc
import mmap

import numpy as np
import pytest
from helpers.hostile import Cases, note
from helpers.hostile_checks import (
    DOCUMENTED_OR_HOSTILE,
    Poisoned,
    check,
    check_view,
    refused,
    refused_or_ok,
)
from helpers.hostile_dlpack import SameCapsule
from helpers.hostile_objects import (
    CountingIndex,
    EndlessSequence,
    EqualsAnything,
    FakeInterface,
    NonIntIndex,
    ShiftingInterface,
    numpy_reading,
    type_equal_to,
)
from helpers.hostile_strategies import fuzz_case, interface_dicts
from helpers.strategies import explicit_byte_strides
from hypothesis import strategies as st

import layoutkit
from layoutkit import StridedMemoryView

cases = Cases(__name__)
AI = "__array_interface__"
CAI = "__cuda_array_interface__"


def _import(obj, name):
    if name == AI:
        return StridedMemoryView.from_array_interface(obj)
    return StridedMemoryView.from_cuda_array_interface(obj, -1)


def _block():
    return Poisoned(4096)


def _expect_refused_at_import(interface, name, what):
    """The import itself must refuse (not a property read afterwards)."""
    block = _block()
    interface = dict(interface)
    if interface.get("data") == "BLOCK":
        interface["data"] = (block.address, False)
    obj = FakeInterface(interface, name, keep=block)
    ok, view = refused_or_ok(_import, obj, name, what=what, classes=DOCUMENTED_OR_HOSTILE)
    if ok:
        check_view(view, what, where=name == AI)  # names the attribute that fails late
        raise AssertionError(f"{what}: accepted, giving shape {view.shape}, strides "
                             f"{view.strides}, dtype {view.dtype}; it must be refused")  # fmt: skip
    block.untouched(what)


def _interface(**entries):
    interface = {"version": 3, "typestr": "<f8", "data": "BLOCK"}
    interface.update(entries)
    return interface


REFUSED = {
    # issue 9: refused at import, not at the first .shape
    "negative_extent": _interface(shape=(-1,)),
    "negative_extent_in_zero_volume": _interface(shape=(0, -1)),
    "stride_not_multiple_of_itemsize": _interface(shape=(2,), strides=(3,)),
    "itemsize_zero": _interface(shape=(2,), typestr="|V0"),
    "strides_wrong_length": _interface(shape=(2,), strides=(8, 8)),
    "extent_beyond_int64": _interface(shape=(2**63,)),
    "volume_beyond_int64": _interface(shape=(2**32, 2**32)),
    "float_extent": _interface(shape=(2.0,)),
    "string_strides": _interface(shape=(2,), strides="ab"),
    "string_extent": _interface(shape=("2",)),
    "too_many_dimensions": _interface(shape=(1,) * 65),
    "byte_span_beyond_int64": _interface(shape=(2, 2), strides=(2**62, 2**62), typestr="|u1"),
    # pointers: no truncation, no parsing, 64 bits
    "pointer_float": dict(_interface(shape=(2,)), data=(4096.0, False)),
    "pointer_string": dict(_interface(shape=(2,)), data=("4096", False)),
    "pointer_negative": dict(_interface(shape=(2,)), data=(-8, False)),
    "pointer_end_past_2_64": dict(_interface(shape=(2,)), data=(2**64 - 8, False)),
    "pointer_2_64": dict(_interface(shape=(1,)), data=(2**64, False)),
    "negative_strides_start_below_0": dict(_interface(shape=(3,), strides=(-8,)), data=(8, False)),
    "data_three_entries": dict(_interface(shape=(2,)), data=(4096, False, 0)),
    "pointer_index_gives_float": dict(_interface(shape=(2,)), data=(NonIntIndex(4096.5), False)),
    "mask": _interface(shape=(2,), mask="BLOCK"),
    "shape_not_a_sequence": _interface(shape=2),
    # an endless iterable was read forever (tuple() of it): no more than 65 entries are read
    "shape_endless": _interface(shape=EndlessSequence()),
    "strides_endless": _interface(shape=(2,), strides=EndlessSequence()),
    "object_dtype": _interface(shape=(2,), typestr="|O"),
}


for _name, _entries in REFUSED.items():
    for _kind in (AI, CAI):
        _prefix = "ai" if _kind == AI else "cai"
        cases.add(
            f"{_prefix}_{_name}",
            functools.partial(_expect_refused_at_import, _entries, _kind, f"{_kind} {_name}"),
        )


# ------------------------------------------------------------------ buffer objects as data
def _buffer_interface(data, **entries):
    interface = {"version": 3, "typestr": "<f8", "data": data}
    interface.update(entries)
    return interface


def _address_of(buffer):
    return np.frombuffer(buffer, np.uint8).__array_interface__["data"][0]


BUFFER_REFUSED = {
    # issue 9: the buffer's length is known, so a larger description is refused
    "buffer_smaller_than_described": dict(size=8, shape=(1000,)),
    "bytes_smaller_than_described": dict(size=8, shape=(1000,), immutable=True),
    "offset_past_the_end": dict(size=64, shape=(4,), offset=40),
    "offset_negative": dict(size=64, shape=(1,), offset=-8),
    "offset_huge": dict(size=64, shape=(1,), offset=2**70),
    "offset_float": dict(size=64, shape=(1,), offset=1.5),
    "offset_integral_float": dict(size=64, shape=(1,), offset=8.0),
    "offset_string": dict(size=64, shape=(1,), offset="8"),
    "offset_index_gives_float": dict(size=64, shape=(1,), offset=NonIntIndex(8.5)),
    "strides_past_the_end": dict(size=64, shape=(2,), strides=(64,)),
    "negative_strides_before_the_start": dict(size=64, shape=(2,), strides=(-8,)),
}


def _buffer_refused(name):
    spec = dict(BUFFER_REFUSED[name])
    size = spec.pop("size")
    immutable = spec.pop("immutable", False)
    data = bytes(range(size)) if immutable else bytearray(range(size))
    before = bytes(data)
    obj = FakeInterface(_buffer_interface(data, **spec))
    what = f"__array_interface__ with data=<{size}-byte {type(data).__name__}> and {spec}"
    ok, view = refused_or_ok(_import, obj, AI, what=what)
    if ok:
        check_view(view, what, within=(_address_of(data), size))
        raise AssertionError(f"{what}: accepted ({view.shape}, {view.strides}); refuse it")
    check(bytes(data) == before, f"{what}: the import wrote into the buffer")


for _name in BUFFER_REFUSED:
    cases.add(f"ai_{_name}", functools.partial(_buffer_refused, _name))


@cases.case
def ai_buffer_with_offset_inside_is_read_correctly():
    """The valid use of ``offset``: the view starts ``offset`` bytes into the buffer."""
    data = bytearray(np.arange(8, dtype=np.float64).tobytes())
    view = _import(FakeInterface(_buffer_interface(data, shape=(3,), offset=16)), AI)
    check_view(view, "data=bytearray, offset=16", within=(_address_of(data), 64))
    check(np.from_dlpack(view).tolist() == [2.0, 3.0, 4.0], "offset 16 read the wrong elements")


@cases.case
def cai_stream_index_gives_float():
    """A CAI ``stream`` whose ``__index__`` gives a float is no stream handle."""
    _expect_refused_at_import(_interface(shape=(2,), stream=NonIntIndex(2.5)), CAI,
                              "CAI stream=NonIntIndex(2.5)")  # fmt: skip


_NO_DRIVER = (pytest.mark.skipif(layoutkit._driver.driver_found(),
                                 reason="a CUDA driver is installed here"),)  # fmt: skip
# what reads or writes a view's memory: (name, use(view, a float32 NumPy array of 4))
_MEMORY_USES = (
    ("numpy.asarray", lambda view, out: np.asarray(view)),
    ("numpy.from_dlpack", lambda view, out: np.from_dlpack(view)),
    ("layoutkit.copy to NumPy", lambda view, out: layoutkit.copy(out, view)),
    ("copy_from NumPy", lambda view, out: view.copy_from(out)),
    ("view[0]", lambda view, out: view[0]),
    ("view[0] = 1", lambda view, out: view.__setitem__(0, 1.0)),
    ("view[1:] of a view", lambda view, out: np.asarray(view[1:])),
    ("__dlpack__", lambda view, out: view.__dlpack__(max_version=(1, 0))),
    ("device_id", lambda view, out: view.device_id),
)


@cases.case(marks=_NO_DRIVER)
def cai_memory_is_never_read_as_host_memory_without_a_driver():
    """A CUDA array interface names CUDA memory; with no driver to ask where it lives, its
    pointer (another process's device address, say) must never be read or written as host
    memory: every use refuses (``NoDriverError``, naming the memory), and an unmapped
    address does not crash. The import itself needs no driver."""
    block = Poisoned(64)
    for ptr in (0xDEAD0000, block.address):
        note(ptr)
        view = _import(FakeInterface(_interface(shape=(4,), typestr="<f4", data=(ptr, False)),
                                     CAI, keep=block), CAI)  # fmt: skip
        check(view.ptr == ptr and view.shape == (4,), f"CAI at {ptr:#x}: read {view!r}")
        repr(view)  # "unknown" where the memory is
        out = np.zeros(4, np.float32)
        for name, use in _MEMORY_USES:
            refused(use, view, out, what=f"{name} of a CAI view at {ptr:#x} without a CUDA "
                    "driver", classes=(layoutkit.NoDriverError,))  # fmt: skip
        check(not out.any(), "a copy out of the CAI view wrote its NumPy destination")
    block.untouched("uses of a CAI view of host memory without a driver")


@cases.case
def int_subclass_equal_to_a_cached_key_keeps_its_own_value():
    """Imported layouts are cached by their shape and strides: an int subclass equal to
    everything, hashing as an earlier import's extent (stride), must still get its own
    value, as NumPy reads it, not the cached layout."""
    data = bytearray(64)
    for entries, lying in (
        (dict(shape=(3,)), dict(shape=(EqualsAnything(8, hash_as=3),))),
        (dict(shape=(2,), strides=(8,)), dict(shape=(2,), strides=(EqualsAnything(16, 8),))),
    ):
        _import(FakeInterface(_buffer_interface(data, typestr="|u1", **entries)), AI)
        obj = FakeInterface(_buffer_interface(data, typestr="|u1", **lying))
        view = _import(obj, AI)
        expected = np.asarray(obj)
        byte_strides = explicit_byte_strides(view.layout)  # None in strides_in_bytes: implicit C
        check(view.shape == expected.shape and byte_strides == expected.strides,
              f"{lying}: the view has shape {view.shape}, byte strides "
              f"{byte_strides}; NumPy reads {expected.shape}, "
              f"{expected.strides}")  # fmt: skip


def _type_equal_to(target):
    """A class whose metaclass makes it equal to ``target`` and hash as it (a dict keyed by
    types finds ``target``'s entry for it); its instances hold ``a_victim`` in their first
    slot (slots are laid out sorted by name), where an ndarray holds its data pointer, and
    ``g_flags`` where it holds its flags."""

    data = bytearray(16)
    namespace = {
        "__slots__": ("a_victim", "b", "c", "d", "e", "f", "g_flags"),
        "shape": (2,), "strides": (8,), "dtype": np.dtype("f8"),
        "__array_interface__": {"version": 3, "shape": (2,), "typestr": "<f8", "data": data},
        "__dlpack__": lambda self, **kwargs: self.dlpack.__dlpack__(**kwargs),
        "__dlpack_device__": lambda self: (1, 0),
        "dlpack": np.arange(2.0),
    }  # fmt: skip
    return type_equal_to(target, "Liar", (), namespace), data


@cases.case
def type_equal_to_a_cached_type_gets_no_fast_path():
    """The fast paths were looked up by ``type(obj)`` in a dict: a class whose metaclass
    made it equal to ``numpy.ndarray`` (and hash as it) was read as an ndarray, its data
    pointer and flags taken from the object's own slots (the address of any object it
    held; a copy into it overwrote that object's header: a crash). Equal to
    ``StridedMemoryView``, it got the view reader (AttributeError), or another type's
    exchange API. A type is its own fast path's key: these are read through their
    protocols."""
    from layoutkit.interop import exchange

    exchange.exchange_api(StridedMemoryView)  # a cached exchange table of another type
    for target in (np.ndarray, StridedMemoryView):
        liar, data = _type_equal_to(target)
        obj = liar()
        victim = obj.a_victim = bytearray(b"v" * 64)
        obj.g_flags = next(o for o in [object() for _ in range(4096)] if id(o) & 0x400)  # WRITEABLE
        check(exchange.exchange_api(liar) is None, f"equal to {target.__name__}: an exchange API")
        for door, expected in (
            (StridedMemoryView.from_array_interface, _address_of(data)),
            (lambda o: StridedMemoryView.from_any_interface(o, -1), obj.dlpack.ctypes.data),
            (lambda o: StridedMemoryView.from_dlpack(o, -1), obj.dlpack.ctypes.data),
        ):  # fmt: skip
            note((target, door))
            view = door(obj)
            check(view.ptr == expected and view.ptr != id(victim),
                  f"a type equal to {target.__name__}: the view reads {view.ptr:#x}, not its "
                  f"protocol's memory {expected:#x} (the object's slot: {id(victim):#x})")  # fmt: skip
        layoutkit.copy(obj, np.ones(2))  # into its DLPack memory, the protocol from_any_interface picks
        check(obj.dlpack.tolist() == [1.0, 1.0] and victim == b"v" * 64,
              f"copy into a type equal to {target.__name__} wrote elsewhere")  # fmt: skip


@cases.case
def objects_claiming_a_layoutkit_class_are_not_trusted():
    """``isinstance`` believes a ``__class__`` property: ``copy`` took an object claiming to
    be a StridedMemoryView as a view and wrote through the layout and pointer it reported
    (8 elements into a 1-element array), and ``from_buffer`` took one claiming to be a
    Buffer with the size it reported. Only the real type counts."""
    from layoutkit.memory import HostMemoryResource

    small = np.zeros(1)
    real = StridedMemoryView.from_dlpack(small)
    lying = {"layout": layoutkit.StridedLayout.dense((8,), 8), "shape": (8,), "size": 8}

    def claiming(cls, attributes, target):
        namespace = {
            "__class__": property(lambda self: cls),
            "__getattr__": lambda self, name: attributes.get(name, getattr(target, name)),
        }  # fmt: skip
        return type("Claiming", (), namespace)()

    refused(layoutkit.copy, claiming(StridedMemoryView, lying, real), np.ones(8),
            what="copy into an object claiming to be a view")  # fmt: skip
    check(small.tolist() == [0.0], "copy wrote into the claimed view's memory")
    buffer = HostMemoryResource().allocate(8)
    refused(StridedMemoryView.from_buffer, claiming(layoutkit.Buffer, {"_size": 1 << 20}, buffer),
            layoutkit.StridedLayout.dense((1 << 17,), 8), np.float64, classes=(TypeError,),
            what="from_buffer of an object claiming to be a Buffer")  # fmt: skip
    # Buffer.copy_to / copy_from read the other side's size and pointer as a Buffer's
    big = {"_size": 1 << 20, "size": 1 << 20}
    for door in (buffer.copy_to, buffer.copy_from):
        refused(door, claiming(layoutkit.Buffer, big, buffer), classes=(TypeError,),
                what=f"Buffer.{door.__name__} of an object claiming to be a Buffer")  # fmt: skip


@cases.case
def objects_claiming_a_layout_or_view_class_are_not_trusted_by_compiled_code():
    """More doors that believed a ``__class__`` property: ``dense_like`` made a
    ``StridedLayout`` of a claimed layout's shape (10**6 elements) and its packed array
    (1 element), whose view read 8 MB past an 8-byte array; ``@njit`` and
    ``BoundsCheckedView`` unboxed a claimed view's ``_numba_record`` (the pointer of a
    1-element array with 65536 elements) and wrote past it (a segfault)."""
    import array
    import struct

    from numba import njit

    from layoutkit._numba_view import BoundsCheckedView, _record_for_unbox

    small = np.zeros(1)
    real = StridedMemoryView.from_dlpack(small)
    numba_type, packed = _record_for_unbox(StridedMemoryView.from_dlpack(np.zeros(1 << 16)))
    values = list(struct.unpack(f"={len(packed) // 8}q", packed))
    values[1] = small.ctypes.data
    record = (numba_type, struct.pack(f"={len(values)}q", *values))

    def claiming(cls, attributes, target):
        namespace = {
            "__class__": property(lambda self: cls),
            "__getattr__": lambda self, name: attributes[name] if name in attributes
            else getattr(target, name),
        }  # fmt: skip
        return type("Claiming", (), namespace)()

    layout = claiming(layoutkit.StridedLayout, {
        "_shape": (10**6,), "_strides": (1,), "_itemsize": 8, "_offset": 0,
        "_given_strides": (1,), "_packed": array.array("q", [1, 1]),
    }, None)  # fmt: skip
    refused(layoutkit.StridedLayout.dense_like, layout, classes=(TypeError,),
            what="dense_like of an object claiming to be a layout")  # fmt: skip
    view = claiming(StridedMemoryView, {"_numba_record": record}, real)
    refused(BoundsCheckedView, view, classes=(TypeError,),
            what="BoundsCheckedView of an object claiming to be a view")  # fmt: skip

    @njit
    def fill(v):
        for i in range(v.shape[0]):
            v[i] = 7.0

    refused(fill, view, classes=(TypeError,), what="@njit of an object claiming to be a view")
    check(small.tolist() == [0.0], "@njit wrote through the claimed view's record")


# ------------------------------------------------------------------ descr and typestr
def _descr_case(typestr, descr):
    block = _block()
    interface = {"version": 3, "shape": (2,), "typestr": typestr, "descr": descr,
                 "data": (block.address, False)}  # fmt: skip
    itemsize = np.dtype(typestr).itemsize
    what = f"typestr {typestr!r} with descr {descr!r}"
    ok, view = refused_or_ok(_import, FakeInterface(interface), AI, what=what)
    if ok:
        check_view(view, what)
        check(view.dtype.itemsize == itemsize,
              f"{what}: the view's dtype {view.dtype} (itemsize {view.dtype.itemsize}) "
              f"overrides the typestr's itemsize {itemsize}; refuse the mismatch")  # fmt: skip


cases.add("ai_descr_itemsize_differs_from_void_typestr",
          functools.partial(_descr_case, "|V8", [("a", "<f4")]))  # fmt: skip
cases.add("ai_descr_itemsize_differs_from_typestr",
          functools.partial(_descr_case, "<f8", [("", "<f4")]))  # fmt: skip
cases.add("ai_descr_larger_than_typestr",
          functools.partial(_descr_case, "|V4", [("a", "<f8"), ("b", "<f8")]))  # fmt: skip


# ------------------------------------------------------------------ producers that change
@cases.case
def ai_extent_read_twice_gives_another_value():
    """Time of check, time of use: an extent whose ``__index__`` grows on every read. The
    view must use the value it validated (fits the 64-byte buffer) or refuse."""
    data = bytearray(64)
    interface = _buffer_interface(data, shape=(CountingIndex(8, 1000),), typestr="|u1")
    what = "a shape whose __index__ gives 8, then 1008, then 2008, ..."
    ok, view = refused_or_ok(_import, FakeInterface(interface), AI, what=what,
                             classes=DOCUMENTED_OR_HOSTILE)  # fmt: skip
    if ok:
        check_view(view, what, within=(_address_of(data), 64))


@cases.case
def ai_stride_read_twice_gives_another_value():
    data = bytearray(64)
    interface = _buffer_interface(data, shape=(2,), strides=(CountingIndex(8, 1000),),
                                  typestr="|u1")  # fmt: skip
    what = "strides whose __index__ gives 8, then 1008, ..."
    ok, view = refused_or_ok(_import, FakeInterface(interface), AI, what=what,
                             classes=DOCUMENTED_OR_HOSTILE)  # fmt: skip
    if ok:
        check_view(view, what, within=(_address_of(data), 64))


@cases.case
def any_interface_reads_a_shifting_interface_once():
    """``__array_interface__`` returns a small description, then a huge one: whatever is
    used must be what was validated (the data buffer is 64 bytes)."""
    data = bytearray(64)
    small = _buffer_interface(data, shape=(8,))
    huge = _buffer_interface(data, shape=(1 << 20,))
    for make in (StridedMemoryView.from_array_interface,
                 lambda o: StridedMemoryView.from_any_interface(o, -1)):  # fmt: skip
        obj = ShiftingInterface(small, huge)
        ok, view = refused_or_ok(make, obj, what="a shifting __array_interface__")
        if ok:
            check_view(view, "a shifting __array_interface__", within=(_address_of(data), 64))


# ------------------------------------------------------------------ arrays that change after import
def _reshaped_after_import(make, change):
    array = np.zeros((2, 3), np.float64)
    view = make(array)
    shape, strides, dtype = view.shape, view.strides, view.dtype
    change(array)
    byte_strides = view.layout.strides_in_bytes
    exported = np.from_dlpack(view)
    check((exported.shape, exported.strides, exported.dtype) == (shape, byte_strides, dtype),
          f"after the array changed, the view exports shape {exported.shape} strides "
          f"{exported.strides} dtype {exported.dtype}; it was imported as {shape} "
          f"{byte_strides} {dtype}")  # fmt: skip
    check(view.shape == shape and view.strides == strides, "the view itself changed shape")
    interface = view.__array_interface__
    check(tuple(interface["shape"]) == shape and tuple(interface["strides"]) == byte_strides,
          f"__array_interface__ exports shape {interface['shape']} strides "
          f"{interface['strides']}, not {shape} {byte_strides}")  # fmt: skip
    capsule_view = StridedMemoryView.from_dlpack(SameCapsule(view.__dlpack__(max_version=(1, 0))), -1)
    check(capsule_view.shape == shape, f"__dlpack__ exports shape {capsule_view.shape}")


def _set_shape(array):
    array.shape = (3, 2)


def _set_flat(array):
    array.shape = (6,)


def _set_dtype(array):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array.dtype = np.int64


def _set_strides(array):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array.strides = (0, 8)  # deprecated in NumPy 2.4, still allowed


IMPORTS = {
    "array_interface": StridedMemoryView.from_array_interface,
    "dlpack": lambda a: StridedMemoryView.from_dlpack(a, -1),
    "any_interface": lambda a: StridedMemoryView.from_any_interface(a, -1),
}
for _door, _make in IMPORTS.items():
    for _change in (_set_shape, _set_flat, _set_dtype, _set_strides):
        cases.add(f"ndarray{_change.__name__}_after_{_door}_import",
                  functools.partial(_reshaped_after_import, _make, _change))  # fmt: skip


# ------------------------------------------------------------------ buffer exporters held
def _exporter_cannot_release(make, release, what):
    storage, holder = make()
    view = StridedMemoryView.from_array_interface(holder)
    expected = np.from_dlpack(view).copy()
    refused(release, storage, what=f"{what} while a view of it exists", classes=(BufferError,))
    check(np.array_equal(np.from_dlpack(view), expected), f"{what}: the view's data changed")
    del view
    gc.collect()
    release(storage)  # allowed once the view is gone: the view released its export


def _bytearray():
    storage = bytearray(range(64))
    return storage, storage


def _mmap():
    storage = mmap.mmap(-1, 4096)
    storage.write(bytes(range(64)))
    return storage, storage


cases.add("bytearray_cannot_resize_under_a_view",
          functools.partial(_exporter_cannot_release, _bytearray,
                            lambda b: b.extend(b"x" * (1 << 20)), "resizing a bytearray"))  # fmt: skip
cases.add("mmap_cannot_close_under_a_view",
          functools.partial(_exporter_cannot_release, _mmap, lambda m: m.close(),
                            "closing an mmap"))  # fmt: skip


@cases.case
def released_memoryview_leaves_the_memory_exported():
    """Releasing the memoryview a view was made from may succeed (the view holds its own
    export of the same memory), but the memory must stay exported and intact."""
    storage = bytearray(range(64))
    exported = memoryview(storage)
    view = StridedMemoryView.from_array_interface(exported)
    refused_or_ok(exported.release, classes=(BufferError,))
    refused(storage.extend, b"x" * (1 << 20), what="resizing the bytearray under a view",
            classes=(BufferError,))  # fmt: skip
    check(np.from_dlpack(view).tolist() == list(range(64)), "the view's data changed")


@cases.case
def bytes_data_is_read_only_and_never_written():
    data = bytes(range(64))
    view = StridedMemoryView.from_array_interface(data)
    check(view.readonly, "a view of bytes is not read-only")
    source = StridedMemoryView.from_array_interface(np.zeros(64, np.uint8))
    refused(view.copy_from, source, what="copy into a view of bytes")
    refused(layoutkit.copy, view, source, what="layoutkit.copy into a view of bytes")
    check(data == bytes(range(64)), "a bytes object was written")


# ------------------------------------------------------------------ hypothesis: random dicts
def _numpy_agrees(view, interface, array, what):
    """Where NumPy reads the same raw-pointer dict, the view must describe the same memory."""
    if not isinstance(array, np.ndarray) or not view.size:
        return
    check(view.shape == array.shape, f"{what}: shape {view.shape}, NumPy {array.shape}")
    check(view.ptr == array.ctypes.data, f"{what}: ptr {view.ptr:#x}, NumPy {array.ctypes.data:#x}")
    mine = [s for s, e in zip(view.layout._byte_strides(), view.shape) if e != 1]
    numpy = [s for s, e in zip(array.strides, array.shape) if e != 1]
    check(mine == numpy, f"{what}: byte strides {mine}, NumPy {numpy}")
    if "descr" not in interface:
        check(view.dtype == array.dtype, f"{what}: dtype {view.dtype}, NumPy {array.dtype}")
    if not array.flags.writeable:
        check(view.readonly, f"{what}: NumPy reads it read-only, the view is writable")


def _fuzz_interface(name, data):
    block = _block()
    pointers = st.one_of(
        st.integers(0, 64).map(lambda k: block.address + 8 * k),
        st.sampled_from([0, 8, 2**63, 2**64 - 8, 2**64 - 1]),
    )
    interface = data.draw(interface_dicts(pointers, cuda=name == CAI), label="interface")
    note(interface)
    obj = FakeInterface(interface, name, keep=block)
    what = f"{name} {interface!r}"
    ok, view = refused_or_ok(_import, obj, name, what=what, classes=DOCUMENTED_OR_HOSTILE)
    if ok:
        raw = interface.get("data")
        within = None
        if raw is not None and not isinstance(raw, tuple | list):
            with memoryview(raw) as exported:
                within = (_address_of(exported.cast("B")), exported.nbytes)
        check_view(view, what, where=name == AI, within=within)
        if name == AI and isinstance(raw, tuple):
            _numpy_agrees(view, interface, numpy_reading(FakeInterface(interface)), what)
    block.untouched(what)



cases.add("fuzz_array_interface_dicts", fuzz_case(functools.partial(_fuzz_interface, AI), 250, None), timeout=300)
cases.add("fuzz_cuda_array_interface_dicts", fuzz_case(functools.partial(_fuzz_interface, CAI), 150, None), timeout=300)
cases.add("fuzz_array_interface_dicts_long", fuzz_case(functools.partial(_fuzz_interface, AI), 400, 20000), timeout=1800, slow=True)
cases.add("fuzz_cuda_array_interface_dicts_long", fuzz_case(functools.partial(_fuzz_interface, CAI), 300, 15000), timeout=1800,
          slow=True)  # fmt: skip


@cases.case
def stride_count_errors_quote_the_strides_given():
    """An interface with shape () and byte strides (8,) was refused quoting "strides (1,)",
    the strides divided by the itemsize, not those the producer gave."""
    array = np.arange(4.0)

    class Interface:
        def __init__(self, **entries):
            self.__array_interface__ = dict(array.__array_interface__, **entries)

    class CudaInterface:
        __cuda_array_interface__ = {"shape": (), "strides": (8,), "typestr": "<f8",
                                    "data": (0, False), "version": 3}  # fmt: skip

    for make, strides in ((lambda: StridedMemoryView.from_array_interface(
                               Interface(shape=(), strides=(8,))), (8,)),
                          (lambda: StridedMemoryView.from_array_interface(
                               Interface(strides=(8, 16))), (8, 16)),
                          (lambda: StridedMemoryView.from_cuda_array_interface(
                               CudaInterface(), -1), (8,))):  # fmt: skip
        exc = refused(make, classes=(ValueError,))
        check(f"strides {strides}" in str(exc), f"message does not quote {strides}: {exc}")


@cases.case
def data_errors_name_the_data_entry():
    """``data=4096`` (an int, not a pair), ``data=[ptr, False]`` (a list) and a missing
    ``data`` on an object without a buffer were refused as "int object has no
    __array_interface__ and does not support the buffer protocol", naming the int and
    not the entry (and saying the producer, which has one, has no interface)."""
    block = _block()
    for data, says in ((block.address, "['data'] is"), ([block.address, False], "['data'] is"),
                       (None, "has no 'data'"), (3.5, "['data'] is")):  # fmt: skip
        interface = _interface(shape=(2,), data=data)
        if data is None:
            del interface["data"]
        exc = refused(_import, FakeInterface(interface, keep=block), AI, classes=(TypeError,))
        check(says in str(exc) and "has no __array_interface__" not in str(exc),
              f"data={data!r}: {exc}")  # fmt: skip


class _Raises:
    """Raises ``error`` from ``name`` (a property, or a method where ``call``)."""

    def __init__(self, error):
        self.error = error


def _producer(name, call):
    def fail(self, *args, **kwargs):
        raise self.error

    namespace = {name: fail if call else property(fail)}
    if name == "__dlpack__":
        namespace["__dlpack_device__"] = lambda self: (1, 0)
    if name == "__dlpack_device__":
        namespace["__dlpack__"] = lambda self, **kwargs: np.zeros(2).__dlpack__()
    return type(f"Raising{name.strip('_')}", (_Raises,), namespace)


@cases.case
def producers_whose_protocol_raises():
    """A producer whose ``__array_interface__`` / ``__cuda_array_interface__`` property or
    ``__dlpack__`` / ``__dlpack_device__`` raised RuntimeError or KeyError let it escape
    (from_any_interface's hasattr too): it is the producer exporting nothing, a BufferError
    naming the protocol and the exception."""
    doors = {
        "__array_interface__": (False, [StridedMemoryView.from_array_interface,
                                        StridedMemoryView.from_any_interface]),
        "__cuda_array_interface__": (False, [StridedMemoryView.from_cuda_array_interface,
                                             StridedMemoryView.from_any_interface]),
        "__dlpack__": (True, [StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface]),
        "__dlpack_device__": (True, [StridedMemoryView.from_dlpack,
                                     StridedMemoryView.from_any_interface]),
    }  # fmt: skip
    for name, (call, readers) in doors.items():
        cls = _producer(name, call)
        for error in (RuntimeError("boom"), KeyError("k"), ZeroDivisionError("z")):
            for reader in readers:
                note((name, error, reader.__name__))
                args = () if reader == StridedMemoryView.from_array_interface else (-1,)
                exc = refused(reader, cls(error), *args, classes=(BufferError,))
                check(name.strip("_") in str(exc) and type(error).__name__ in str(exc),
                      f"{reader.__name__} of a raising {name}: {exc}")  # fmt: skip
        refused(layoutkit.copy, np.zeros(2), cls(RuntimeError("boom")))


cases.export(globals())
