"""StridedMemoryView on the host: every import path and export against NumPy as the oracle."""

import array
import gc
import subprocess
import sys
import textwrap
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest
from helpers.strategies import basic_indices, explicit_strides, shapes
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutkit import (
    Buffer,
    StridedLayout,
    StridedMemoryView,
    _driver,
    args_viewable_as_strided_memory,
)
from layoutkit.interop import dlpack

_BASE = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
HOST_ARRAYS = {
    "c_order": _BASE,
    "f_order": np.asfortranarray(_BASE),
    "sliced": _BASE[:, 1:, ::2],
    "transposed": _BASE.transpose(2, 0, 1),
    "broadcast": np.broadcast_to(np.arange(4.0), (3, 4)),
    "negative": _BASE[::-1, :, ::-2],
    "negative_int8": np.arange(20, dtype=np.int8)[::-3],
    "zero_size": _BASE[:, :0],
    "zero_d": np.array(3.5),
    "extent_one": _BASE[:1, 1:2],
    "bool": np.array([True, False, True]),
    "complex": (np.arange(6) * (1 + 2j)).astype(np.complex64).reshape(2, 3).T,
    "uint16": np.arange(12, dtype=np.uint16).reshape(3, 4)[::2, ::-1],
    "readonly": np.frombuffer(b"\x01\x02\x03\x04\x05\x06", dtype=np.uint8)[1::2],
}


class Generic:
    """A DLPack producer that is not an ndarray, so the capsule path is taken."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class InterfaceOnly:
    """Exposes only the ``__array_interface__`` dict of an array."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


IMPORTS = {
    "from_dlpack": lambda a: StridedMemoryView.from_dlpack(a, -1),
    "from_dlpack_capsule": lambda a: StridedMemoryView.from_dlpack(Generic(a), -1),
    "from_array_interface": StridedMemoryView.from_array_interface,
    "from_array_interface_dict": lambda a: StridedMemoryView.from_array_interface(InterfaceOnly(a)),
    "from_any_interface": lambda a: StridedMemoryView.from_any_interface(a, -1),
}


def data_pointer(a):
    return a.__array_interface__["data"][0]


def significant(shape, strides):
    """Strides that matter: those of axes with more than one element (none if empty)."""
    if 0 in shape:
        return ()
    return tuple(s for n, s in zip(shape, strides, strict=True) if n > 1)


def check_view_matches(view, a):
    """The view describes exactly ``a``: same memory, metadata, and elements."""
    assert view.shape == a.shape
    assert view.strides == view.layout.strides  # None for implicit C, as the layout has it
    assert significant(a.shape, explicit_strides(view.layout)) == significant(
        a.shape, tuple(s // a.itemsize for s in a.strides)
    )
    assert view.dtype == a.dtype
    assert view.size == a.size
    assert view.readonly == (not a.flags.writeable)
    assert view.device_id == -1 and view.is_device_accessible is False
    if a.size:
        assert view.ptr == data_pointer(a)
    # the layout is relative to the buffer, and the buffer holds every element
    layout, buffer = view.layout, view.buffer
    assert view.ptr == buffer.ptr + layout.slice_offset_in_bytes
    if a.size:
        assert layout.min_offset >= 0
        assert (layout.max_offset + 1) * layout.itemsize <= buffer.size
    for out in (np.from_dlpack(view), np.asarray(view)):
        np.testing.assert_array_equal(out, a)
        assert out.dtype == a.dtype and out.shape == a.shape
        if a.size:
            assert data_pointer(out) == data_pointer(a)
            assert significant(a.shape, out.strides) == significant(a.shape, a.strides)
        assert out.flags.writeable == a.flags.writeable


@pytest.mark.parametrize("importer", IMPORTS)
@pytest.mark.parametrize("case", HOST_ARRAYS)
def test_import_and_export_round_trip(importer, case):
    a = HOST_ARRAYS[case]
    view = IMPORTS[importer](a)
    check_view_matches(view, a)
    assert view.exporting_obj is a or isinstance(view.exporting_obj, Generic | InterfaceOnly)


@pytest.mark.parametrize("case", HOST_ARRAYS)
def test_view_of_view_round_trip(case):
    """A view is itself a DLPack producer and an array-interface exporter."""
    a = HOST_ARRAYS[case]
    first = StridedMemoryView.from_dlpack(a, -1)
    check_view_matches(StridedMemoryView.from_dlpack(first, -1), a)
    check_view_matches(StridedMemoryView.from_array_interface(first), a)


def test_negative_strides_layout_points_back_from_buffer_start():
    a = np.arange(8, dtype=np.int32)[::-1]
    view = StridedMemoryView.from_dlpack(a, -1)
    assert view.layout == StridedLayout._trusted((8,), (-1,), 4, 7)
    assert view.buffer.ptr == data_pointer(a) - 28 and view.buffer.size == 32
    # slicing the layout slices the view, as NumPy slices the array
    np.testing.assert_array_equal(np.from_dlpack(view.view(view.layout[1::3])), a[1::3])


@pytest.mark.parametrize(
    "obj",
    [bytearray(b"abcdef"), b"abcdef", memoryview(b"abcdefgh")[::2], array.array("i", [1, 2, 3])],
    ids=["bytearray", "bytes", "memoryview", "array"],
)
def test_buffer_protocol_objects(obj):
    view = StridedMemoryView.from_any_interface(obj, None)
    expected = np.asarray(memoryview(obj))
    np.testing.assert_array_equal(np.from_dlpack(view), expected)
    assert view.readonly == memoryview(obj).readonly
    assert view.exporting_obj is obj


def test_buffer_protocol_objects_of_python_objects_are_refused_by_their_format():
    """A memoryview of an object array ('O' format) was refused with a BufferError that
    said only "the buffer cannot be viewed"; it is the object-dtype TypeError of every
    other door."""
    with pytest.raises(TypeError, match=r"memoryview object's buffer format=dtype\('O'\) holds"):
        StridedMemoryView.from_any_interface(memoryview(np.array([1, None], object)), -1)


@pytest.mark.parametrize(
    "array",
    [
        np.rec.fromrecords([(1, 2.0), (3, 4.5)], names="a,b"),
        np.array(["ab", "c"]),
        np.array(["2020-01-01", "2021-06-30"], "M8[D]")[::-1],
        np.arange(6, dtype=">i4").reshape(2, 3).T,
        np.zeros((2, 3), np.dtype([("a", "u1"), ("b", ">i4")], align=True))[:, ::2],
        np.arange(6).astype(np.dtype("i1,f4", align=True)).reshape(2, 3).T,
        np.zeros(3, np.dtype({"names": ["a", "b"], "formats": ["u1", "<i4"],
                              "offsets": [4, 0], "itemsize": 12})),  # fmt: skip
    ],
    ids=["recarray", "strings", "datetimes", "big-endian", "aligned-struct",
         "aligned-struct-default-names", "out-of-order-fields"],  # fmt: skip
)
def test_any_interface_reads_numpy_dtypes_dlpack_has_no_code_for(array):
    """DLPack carries numbers only; a NumPy array (subclass or not) of any plain dtype is
    read through its array interface, not refused by NumPy's DLPack export.

    The way back keeps the dtype: an aligned struct's ``descr`` list read back as one
    with a named ``V3`` padding field, and one with out-of-order fields had no list
    (``__array_interface__`` raised ``ValueError`` from ``dtype.descr``); an aligned
    ``'i1,f4'``, whose padding field NumPy would name ``f1``, raised ``ValueError`` ("field
    'f1' occurs more than once") reading its own list back."""
    view = StridedMemoryView.from_any_interface(array)
    assert view.dtype == array.dtype and view.shape == array.shape
    back = np.asarray(view)
    assert back.dtype == array.dtype
    np.testing.assert_array_equal(back, np.asarray(array))
    assert np.shares_memory(back, array)
    assert StridedMemoryView.from_array_interface(view).dtype == array.dtype


def test_sub_array_dtype_views_export_what_numpy_makes_of_that_dtype():
    """A view of a sub-array dtype (``'(2,3)f4'``, as ``from_buffer`` or ``view(dtype=...)``
    make one) exported the ``descr`` list ``[('', '|V24')]``, so ``numpy.asarray(view)``
    gave raw ``V24`` bytes and a re-import lost the dtype. NumPy makes an array of that
    dtype as float32 with the sub-array's axes appended; so does the export now."""
    values = np.arange(2 * 4 * 6, dtype=np.float32).reshape(2, 4, 2, 3)
    elements = values.reshape(2, 4, 6).view("V24")[..., 0][:, ::-2]
    view = StridedMemoryView.from_array_interface(elements).view(dtype="(2,3)f4")
    assert view.dtype == np.dtype("(2,3)f4") and view.shape == (2, 2)
    expected = np.ndarray((2, 2), "(2,3)f4", values, 3 * 24, elements.strides)
    back = np.asarray(view)
    assert back.dtype == np.float32 and back.shape == expected.shape == (2, 2, 2, 3)
    assert back.strides == expected.strides and np.shares_memory(back, values)
    np.testing.assert_array_equal(back, values[:, ::-2])
    np.testing.assert_array_equal(view[1, 0], values[1, 3])
    again = StridedMemoryView.from_array_interface(view)
    assert again.dtype == view.dtype and again.layout == view.layout and again.ptr == view.ptr


def test_bfloat16_survives_import_and_export():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(2, 3)[:, ::-1]
    view = StridedMemoryView.from_dlpack(a, -1)
    assert view.dtype == np.dtype(ml_dtypes.bfloat16)
    again = StridedMemoryView.from_dlpack(view, -1)  # through a real capsule (code 4)
    assert again.dtype == np.dtype(ml_dtypes.bfloat16) and again.ptr == data_pointer(a)
    out = np.asarray(again).view(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.astype(np.float32), a.astype(np.float32))


# ----------------------------------------------------------------------------- from_buffer
@pytest.fixture
def host_buffer():
    a = np.arange(12, dtype=np.int32)
    return StridedMemoryView.from_array_interface(a).buffer, a


def test_from_buffer_addresses_and_dtype(host_buffer):
    buffer, a = host_buffer
    layout = StridedLayout.dense((3, 4), 4)[1:, ::-2]
    view = StridedMemoryView.from_buffer(buffer, layout, np.int32)
    assert view.ptr == buffer.ptr + layout.slice_offset_in_bytes
    assert view.exporting_obj is buffer and view.buffer is buffer
    np.testing.assert_array_equal(np.from_dlpack(view), a.reshape(3, 4)[1:, ::-2])
    assert not view.readonly
    assert StridedMemoryView.from_buffer(buffer, layout, "i4", is_readonly=True).readonly


@pytest.mark.parametrize("spelling", [np.float32, "f4", np.dtype("float32"), "float32"])
def test_from_buffer_dtype_spellings(host_buffer, spelling):
    """DECISIONS 15: any numpy.dtype() argument."""
    buffer, _ = host_buffer
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((12,), 4), spelling)
    assert view.dtype == np.float32


def test_from_buffer_ml_dtypes_name(host_buffer):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    buffer, _ = host_buffer
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((24,), 2), "bfloat16")
    assert view.dtype == np.dtype(ml_dtypes.bfloat16)


def test_from_buffer_without_dtype(host_buffer):
    buffer, _ = host_buffer
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((6,), 8))
    assert view.dtype is None
    assert np.asarray(view).dtype == np.dtype("V8")  # raw elements through the array interface
    typed = view.view(dtype=np.int64)
    assert typed.dtype == np.int64 and typed.ptr == view.ptr


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (StridedLayout.dense((13,), 4), "reaches byte 52, past the end of the buffer. Expected at least 52 bytes, got 48 bytes"),
        (StridedLayout.dense((4, 4), 4)[:, ::-1], "reaches byte 64, past the end of the buffer. Expected at least 64 bytes, got 48 bytes"),
        (StridedLayout((3,), (-1,), 4), "reaches offset -2, before the start of the buffer"),
        (StridedLayout.dense((7,), 8), "reaches byte 56, past the end of the buffer. Expected at least 56 bytes, got 48 bytes"),
    ],
)
def test_from_buffer_refuses_layouts_outside(host_buffer, layout, message):
    """DECISIONS 14 (buffer from a NumPy array, known size)."""
    buffer, _ = host_buffer
    with pytest.raises(ValueError, match=message):
        StridedMemoryView.from_buffer(buffer, layout)


def test_from_buffer_checks_from_handle_buffers_too():
    """DECISIONS 14: Buffer.from_handle(ptr, size, owner=...) has a known size; no driver needed."""
    a = np.zeros(10, dtype=np.uint8)
    buffer = Buffer.from_handle(data_pointer(a), a.nbytes, owner=a)
    StridedMemoryView.from_buffer(buffer, StridedLayout.dense((10,), 1))
    with pytest.raises(ValueError, match="reaches byte 11, past the end of the buffer. Expected at least 11 bytes, got 10 bytes"):
        StridedMemoryView.from_buffer(buffer, StridedLayout.dense((11,), 1))


def test_zero_volume_layout_fits_any_buffer():
    a = np.zeros(0, dtype=np.uint8)
    buffer = StridedMemoryView.from_array_interface(a).buffer
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((5, 0), 4), np.float32)
    assert view.size == 0 and np.from_dlpack(view).shape == (5, 0)


def test_from_buffer_bad_arguments(host_buffer):
    buffer, a = host_buffer
    layout = StridedLayout.dense((12,), 4)
    with pytest.raises(TypeError, match="buffer must be a layoutkit Buffer, got ndarray"):
        StridedMemoryView.from_buffer(a, layout)
    with pytest.raises(ValueError, match="itemsize or dtype must be specified"):
        StridedMemoryView.from_buffer(buffer, (12,))  # the shape form needs an itemsize
    with pytest.raises(TypeError, match=r"layout must be a StridedLayout .*got \(12,\) of type tuple"):
        StridedMemoryView.from_buffer(buffer, layout=(12,))
    with pytest.raises(
        ValueError, match="dtype float64 has itemsize 8 but the layout's itemsize is 4"
    ):
        StridedMemoryView.from_buffer(buffer, layout, np.float64)
    with pytest.raises(TypeError, match="dtype='nope' is not a dtype"):
        StridedMemoryView.from_buffer(buffer, layout, "nope")
    with pytest.raises(TypeError, match="holds Python objects"):
        StridedMemoryView.from_buffer(buffer, StridedLayout.dense((6,), 8), object)


@pytest.mark.parametrize("itemsize", [4.0, np.float64(4), "4", np.array([4]), True])
@pytest.mark.parametrize("form", ["layout", "shape and dtype"])
def test_from_buffer_itemsize_is_an_integer_in_both_forms(host_buffer, itemsize, form):
    """``itemsize=4.0`` (equal to the layout's or dtype's) was accepted, ``"4"`` refused as
    a mismatch (``itemsize (4) does not match ... (4)``): it is read as an integer first."""
    buffer, _ = host_buffer
    if form == "layout":
        call = {"layout": StridedLayout.dense((12,), 4)}
    else:
        call = {"shape": (12,), "dtype": np.float32}
    with pytest.raises(TypeError, match="itemsize must be an integer"):
        StridedMemoryView.from_buffer(buffer, itemsize=itemsize, **call)
    assert StridedMemoryView.from_buffer(buffer, itemsize=np.int64(4), **call).shape == (12,)


@pytest.mark.parametrize("flag", [False, np.False_, 0])
def test_from_buffer_is_readonly_false_asks_for_a_writable_aliasing_view(host_buffer, flag):
    """``is_readonly=np.False_`` (and ``0``) meant the default (an aliasing layout
    read-only), not ``False``: ``is_readonly is False`` missed every false value but
    ``False`` itself (found by the API matrix, and by a new user's pass)."""
    buffer, _ = host_buffer
    broadcast = StridedLayout.dense((1, 4), 4).broadcast_to((3, 4))
    assert StridedMemoryView.from_buffer(buffer, broadcast).readonly
    assert not StridedMemoryView.from_buffer(buffer, broadcast, is_readonly=flag).readonly
    assert StridedMemoryView.from_buffer(buffer, broadcast, is_readonly=np.True_).readonly


def test_closed_buffer():
    a = np.arange(4.0)
    buffer = Buffer.from_handle(data_pointer(a), a.nbytes, owner=a)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((4,), 8), np.float64)
    buffer.close()
    with pytest.raises(ValueError, match="buffer is closed"):
        StridedMemoryView.from_buffer(buffer, StridedLayout.dense((4,), 8))
    with pytest.raises(BufferError, match="buffer is closed"):
        view.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError, match="buffer is closed"):
        view.__array_interface__  # noqa: B018


def test_null_buffer_needs_empty_layout():
    with pytest.raises(ValueError, match="null"):
        Buffer.from_handle(0, 16)


# ----------------------------------------------------------------------------- view()
def test_view_with_no_arguments_is_self():
    view = StridedMemoryView.from_dlpack(np.arange(4.0), -1)
    assert view.view() is view


def test_view_reinterprets_relative_to_the_buffer():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    view = StridedMemoryView.from_dlpack(a, -1)
    pairs = view.view(view.layout.repacked(8), np.int64)
    np.testing.assert_array_equal(np.from_dlpack(pairs), a.view(np.int64))
    sliced = view.view(view.layout[::2, 1::2])
    np.testing.assert_array_equal(np.from_dlpack(sliced), a[::2, 1::2])
    assert sliced.exporting_obj is a
    broadcast = view.view(view.layout[0].broadcast_to((2, 4)))
    np.testing.assert_array_equal(np.from_dlpack(broadcast), np.broadcast_to(a[0], (2, 4)))


def test_view_keeps_readonly_and_checks():
    a = np.arange(6.0)
    a.flags.writeable = False
    view = StridedMemoryView.from_dlpack(a, -1)
    assert view.view(view.layout[::2]).readonly
    with pytest.raises(ValueError, match="itemsize 8 but the layout's itemsize is 4"):
        view.view(StridedLayout.dense((12,), 4))
    with pytest.raises(ValueError, match="reaches byte 56, past the end of the buffer. Expected at least 56 bytes, got 48 bytes"):
        view.view(StridedLayout.dense((7,), 8))
    assert view.view(StridedLayout.dense((12,), 4), np.float32).shape == (12,)


def test_view_errors_say_how_to_change_the_dtype():
    """NumPy's ``a.view(np.int32)`` puts the dtype first, and ``a.view(np.float64)`` of a
    float32 array repacks the last axis: the messages name the value and say what
    ``view`` takes instead (a ``dtype=`` keyword; a layout of the dtype's itemsize)."""
    view = StridedMemoryView.from_array_interface(np.zeros((4, 6), np.float32))
    with pytest.raises(TypeError, match=r"got <class 'numpy.int32'> of type type; to change only the dtype, pass dtype="):
        view.view(np.int32)
    with pytest.raises(ValueError, match=r"itemsize is 4; pass a layout of itemsize 8 with it \(layout.repacked\(8\)"):
        view.view(dtype=float)
    assert np.asarray(view.view(view.layout.repacked(8), float)).shape == (4, 3)


def test_host_views_need_no_driver():
    """DECISIONS 12: host imports, view() and exports never touch cuda.bindings."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["cuda.bindings"] = None  # any attempt to import it fails loudly
        import numpy as np
        from layoutkit import StridedMemoryView as V, Buffer, StridedLayout
        a = np.arange(12.0).reshape(3, 4)
        for view in (V.from_array_interface(a), V.from_dlpack(a.T, -1),
                     V.from_dlpack(V.from_dlpack(a[::-1], -1), -1),
                     V.from_any_interface(bytearray(16), None)):
            again = view.view(view.layout[::-1])
            assert view.device_id == -1 and not view.is_device_accessible
            assert view.buffer.is_host_accessible and not view.buffer.is_device_accessible
            np.from_dlpack(again); np.asarray(again); repr(again)
        buf = Buffer.from_handle(a.ctypes.data, a.nbytes, owner=a)
        V.from_buffer(buf, StridedLayout.dense((12,), 8), np.float64).view(StridedLayout.dense((3,), 8))
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# ----------------------------------------------------------------------------- attributes
def test_attributes_are_read_only():
    view = StridedMemoryView.from_dlpack(np.arange(3.0), -1)
    for name in ("ptr", "layout", "shape", "strides", "dtype", "size", "device_id",
                 "is_device_accessible", "readonly", "exporting_obj", "buffer"):  # fmt: skip
        with pytest.raises(AttributeError):
            setattr(view, name, None)
    with pytest.raises(AttributeError):
        view.extra = 1


def test_repr_names_every_field():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    text = repr(StridedMemoryView.from_dlpack(a, -1))
    for part in (f"ptr=0x{data_pointer(a):x}", "shape=(2, 3)", "strides=(3, 1)", "itemsize=2",
                 "dtype=int16", "device_id=-1", "is_device_accessible=False", "readonly=False",
                 "exporting_obj=ndarray"):  # fmt: skip
        assert part in text


def test_host_views_have_no_cuda_array_interface():
    view = StridedMemoryView.from_dlpack(np.arange(3.0), -1)
    assert not hasattr(view, "__cuda_array_interface__")
    assert view.__array_interface__["version"] == 3
    assert view.__dlpack_device__() == (1, 0)


def test_deprecated_constructor():
    a = np.arange(3.0)
    with pytest.warns(DeprecationWarning, match="from_any_interface"):
        view = StridedMemoryView(a, -1)
    check_view_matches(view, a)


def test_deprecated_constructor_keeps_where_the_memory_lives():
    """Found by cuda.core's test_utils.py on the H200: StridedMemoryView(empty CUDA tensor)
    said device -1: the constructor dropped the import's location (a null pointer, which
    the driver cannot place), where from_any_interface gives the producer's device."""
    from helpers.producers import Producer

    def empty_cuda_tensor():
        return Producer(np.zeros(0, np.float32), device=(2, 0), data=0)

    expected = StridedMemoryView.from_any_interface(empty_cuda_tensor(), -1)
    with pytest.warns(DeprecationWarning, match="from_any_interface"):
        view = StridedMemoryView(empty_cuda_tensor(), -1)
    assert (view.device_id, view.is_device_accessible) == (0, True)
    assert (expected.device_id, expected.is_device_accessible) == (0, True)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "constructor",
    [
        lambda o: StridedMemoryView.from_any_interface(o, -1),
        lambda o: StridedMemoryView.from_dlpack(o, -1),
        lambda o: StridedMemoryView.from_cuda_array_interface(o, -1),
        StridedMemoryView.from_array_interface,
    ],
    ids=["any", "dlpack", "cai", "array_interface"],
)
@pytest.mark.parametrize("obj", [object(), 3, "text", None])
def test_objects_without_interface(constructor, obj):
    with pytest.raises(TypeError, match=type(obj).__name__):
        constructor(obj)


class FakeInterface:
    def __init__(self, **entries):
        base = np.arange(4.0)
        self.base = base
        self.__array_interface__ = {**base.__array_interface__, **entries}


@pytest.mark.parametrize(
    ("entries", "error", "message"),
    [
        ({"version": 2}, BufferError, "version 2; only v3 or above is supported"),
        ({"mask": np.ones(4, bool)}, BufferError, "has a mask: mask is not supported"),
        ({"data": ("x", False)}, BufferError, "pointer 'x' is not an integer"),
        ({"data": (8,)}, BufferError, "not a \\(pointer, read-only\\) pair"),
        ({"data": (-5, False)}, BufferError, "is not an address"),
        ({"data": (0, False)}, BufferError, "null data pointer but 4 elements"),
        ({"typestr": "<z4"}, TypeError, "is not a dtype"),
        ({"typestr": "|O"}, TypeError, "holds Python objects"),
    ],
)
def test_bad_array_interface(entries, error, message):
    with pytest.raises(error, match=message):
        StridedMemoryView.from_array_interface(FakeInterface(**entries))


def test_array_interface_not_a_dict():
    class Weird:
        __array_interface__ = [1, 2]

    with pytest.raises(TypeError, match="Weird.__array_interface__ is list, not a dict"):
        StridedMemoryView.from_array_interface(Weird())


def test_cuda_array_interface_door_takes_a_fast_path_for_device_memory(monkeypatch):
    """cuda.core 1.2.2 reads torch tensors (CAI version 2) through its torch bridge whichever
    door is used; layoutkit's CAI door takes a type's fast path where it gives
    device-accessible memory, and refuses version 2 from everything else."""
    from layoutkit.interop import cai, fastpaths

    class LegacyProducer:  # exports version 2, as torch does (a property of the type)
        def __init__(self, ptr):
            self.ptr = ptr

        @property
        def __cuda_array_interface__(self):
            return {"version": 2, "shape": (4,), "typestr": "<f4", "data": (self.ptr, False)}

    class CurrentInterface:  # what the producer's fast path reads instead
        def __init__(self, ptr):
            self.__cuda_array_interface__ = {
                "version": 3, "shape": (4,), "typestr": "<f4", "data": (ptr, False),
                "strides": (4,), "stream": None,
            }  # fmt: skip

    def fast(obj, stream_ptr, dlpack_only):
        if obj.ptr == 0:
            return None  # the fast path's preconditions fail: the protocol decides
        return cai.read_cuda_array_interface(CurrentInterface(obj.ptr), stream_ptr)

    monkeypatch.setitem(fastpaths._readers, id(LegacyProducer), (LegacyProducer, fast))
    view = StridedMemoryView.from_cuda_array_interface(LegacyProducer(4096), -1)
    assert view.ptr == 4096 and view.shape == (4,) and type(view.exporting_obj) is CurrentInterface
    assert view.strides is None  # C-contiguous: implicit strides, as the interface gives them
    with pytest.raises(BufferError, match="has version 2; only v3 or above is supported"):
        StridedMemoryView.from_cuda_array_interface(LegacyProducer(0), -1)
    with pytest.raises(BufferError, match="stream_ptr=None: stream=None is ambiguous"):
        StridedMemoryView.from_cuda_array_interface(LegacyProducer(4096), None)
    # a host array's fast path gives host memory: the door still needs a CUDA interface
    with pytest.raises(TypeError, match="ndarray object has no __cuda_array_interface__"):
        StridedMemoryView.from_cuda_array_interface(np.zeros(3), -1)


def test_cuda_array_interface_door_needs_the_interface_and_keeps_a_views_strides(monkeypatch):
    """Found by helper review: the door took any type's fast path that gave
    device-accessible memory, so an object with no CUDA array interface at all (a DLPack
    producer, say) was accepted (cuda.core 1.2.2 refuses it), and a view of
    device-accessible memory came back with implicit strides where its own interface
    exports explicit ones (and the DLPack door and the protocol give (8, 1))."""
    from layoutkit.interop import fastpaths
    from layoutkit.memory import MemoryResource

    keep = np.zeros(64)

    class ClaimedDevice(MemoryResource):  # host memory that says it is device-accessible
        def allocate(self, size, stream=None):
            return self._buffer(keep.ctypes.data, size)

        def deallocate(self, ptr, size, stream=None):
            pass

        device_id = property(lambda self: 0)
        is_device_accessible = property(lambda self: True)
        is_host_accessible = property(lambda self: True)

    buffer = ClaimedDevice().allocate(keep.nbytes)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((8, 8), 8), np.float64)
    assert view.is_device_accessible and view.__cuda_array_interface__["strides"] == (64, 8)
    again = StridedMemoryView.from_cuda_array_interface(view, -1)
    assert again.strides == (8, 1) == view.strides and again.ptr == view.ptr

    class NoInterface:  # a producer whose fast path gives device-accessible memory
        pass

    monkeypatch.setitem(
        fastpaths._readers, id(NoInterface),
        (NoInterface, lambda obj, stream_ptr, dlpack_only: view._record),
    )  # fmt: skip
    assert StridedMemoryView.from_dlpack(NoInterface(), -1).ptr == view.ptr  # its fast path
    with pytest.raises(TypeError, match="NoInterface object has no __cuda_array_interface__"):
        StridedMemoryView.from_cuda_array_interface(NoInterface(), -1)


def test_cuda_array_interface_rules_without_a_gpu():
    class FakeCAI:
        def __init__(self, **entries):
            self.__cuda_array_interface__ = {
                "version": 3, "shape": (4,), "typestr": "<f4", "data": (4096, False),
                "strides": None, "stream": None, **entries,
            }  # fmt: skip

    with pytest.raises(BufferError, match="stream_ptr=None: stream=None is ambiguous"):
        StridedMemoryView.from_cuda_array_interface(FakeCAI(), None)
    with pytest.raises(BufferError, match="has a mask: mask is not supported"):
        StridedMemoryView.from_cuda_array_interface(FakeCAI(mask=object()), -1)
    # version 2 (torch 2.11 still exports it) cannot name the producer's stream: refused
    # as cuda.core 1.2.2 refuses it; torch tensors come in through DLPack
    for version in (1, 2):
        legacy = FakeCAI(version=version)
        del legacy.__cuda_array_interface__["stream"]
        with pytest.raises(BufferError, match=f"version {version}; only v3 or above is supported"):
            StridedMemoryView.from_cuda_array_interface(legacy, -1)
    with pytest.raises(BufferError, match="'stream'\\] is 0"):
        StridedMemoryView.from_cuda_array_interface(FakeCAI(stream=0), -1)
    described = StridedMemoryView.from_cuda_array_interface(FakeCAI(data=(0, False)), -1)
    assert described.ptr == 0 and described.shape == (4,)  # a description (cuda.core's rule)
    with pytest.raises(BufferError, match="null data pointer but 4 elements"):
        described.copy_from(np.zeros(4, np.float32))
    # no synchronisation asked: no driver call, metadata read lazily
    view = StridedMemoryView.from_cuda_array_interface(FakeCAI(stream=7), -1)
    assert view.ptr == 4096 and view.shape == (4,) and view.dtype == np.float32
    assert view.strides is None and not view.readonly  # no strides given: implicit C


def test_decorator():
    seen = []

    @args_viewable_as_strided_memory((0, 2))
    def kernel(x, scale, y):
        seen.append((x.view(-1), scale, y.view(-1)))
        return "done"

    a, b = np.arange(3.0), np.ones((2, 2))
    assert kernel(a, 2, b) == "done"
    x, scale, y = seen[0]
    assert x.exporting_obj is a and scale == 2 and y.shape == (2, 2)
    assert kernel.__name__ == "kernel"
    with pytest.raises(TypeError, match="arg_indices must be a tuple"):
        args_viewable_as_strided_memory([0])
    with pytest.raises(TypeError, match="object supports none of"):
        kernel(object(), 1, b)[0]


# ----------------------------------------------------------------------------- copies
def test_copy_from_and_copy_to_delegate_to_layoutkit_copy():
    """DECISIONS 17 on the host: any layouts on both sides."""
    src = np.arange(24, dtype=np.float32).reshape(4, 6)[::-1, ::2]
    dst = np.zeros((6, 4), dtype=np.float32).T[:, ::2]
    dst_view = StridedMemoryView.from_dlpack(dst, -1)
    dst_view.copy_from(StridedMemoryView.from_dlpack(src, -1))
    np.testing.assert_array_equal(dst, src)
    back = np.zeros_like(src)
    StridedMemoryView.from_dlpack(dst, -1).copy_to(StridedMemoryView.from_dlpack(back, -1))
    np.testing.assert_array_equal(back, src)


# ----------------------------------------------------------------------------- lifetimes
class Owner:
    """A weak-referenceable stand-in for the memory's owner."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


def test_owner_lives_exactly_as_long_as_views_and_buffers():
    owner = Owner(np.arange(8.0))
    alive = weakref.ref(owner)
    view = StridedMemoryView.from_array_interface(owner)
    derived = view.view(view.layout[::2])
    buffer = view.buffer
    del owner, view
    gc.collect()
    assert alive() is not None
    del derived
    gc.collect()
    assert alive() is not None
    del buffer
    gc.collect()
    assert alive() is None


def test_ndarray_lives_while_views_or_consumers_need_it():
    a = np.arange(8.0)
    alive = weakref.ref(a)
    view = StridedMemoryView.from_dlpack(a, -1)
    consumer = np.from_dlpack(view)
    del a, view
    gc.collect()
    assert alive() is not None
    del consumer
    gc.collect()
    assert alive() is None


def _memory_growth(round_trip, count):
    """Bytes still allocated after ``count`` calls of ``round_trip`` (after a warm-up)."""
    for _ in range(1000):
        round_trip()
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(count):
            round_trip()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()


def test_no_leak_over_100000_numpy_round_trips():
    """View from an array, np.from_dlpack(view): 100,000 times, memory and refcounts flat."""
    a = np.arange(12.0).reshape(3, 4)[:, ::-2]
    refcount = sys.getrefcount(a)

    def round_trip():
        np.from_dlpack(StridedMemoryView.from_dlpack(a, -1))

    growth = _memory_growth(round_trip, 100_000)
    assert growth < 64 * 1024, f"memory grew by {growth} bytes"
    assert sys.getrefcount(a) == refcount


def test_no_leak_over_100000_capsule_round_trips():
    """Capsule import (deleter called by us) and export (deleter called by NumPy) 100,000 times."""
    a = np.arange(12.0).reshape(3, 4)[:, ::-2]
    producer = Generic(a)
    refcount = sys.getrefcount(a)

    def round_trip():
        view = StridedMemoryView.from_dlpack(producer, -1)
        np.from_dlpack(view)
        view.buffer  # noqa: B018

    for _ in range(100_000):
        round_trip()
    gc.collect()
    assert sys.getrefcount(a) == refcount
    growth = _memory_growth(round_trip, 10_000)  # tracing is slow; 10,000 show any leak
    assert growth < 64 * 1024, f"memory grew by {growth} bytes"


# ----------------------------------------------------------------------------- device kinds
def _known_buffer(array, *, device_id, device, host, managed=False):
    """A buffer over host memory that claims another location (no driver needed)."""
    location = _driver.Location(device_id, device, host, managed)
    return Buffer._from_known(data_pointer(array), array.nbytes, owner=array, location=location)


@pytest.mark.parametrize(
    ("claims", "dlpack_device", "host_interface", "cuda_interface"),
    [
        ({"device_id": -1, "device": False, "host": True}, (1, 0), True, False),
        ({"device_id": 0, "device": True, "host": True}, (3, 0), True, True),
        ({"device_id": 0, "device": True, "host": True, "managed": True}, (13, 0), True, True),
        ({"device_id": 1, "device": True, "host": False}, (2, 1), False, True),
    ],
    ids=["host", "pinned", "managed", "device"],
)
def test_device_kinds_from_buffer(claims, dlpack_device, host_interface, cuda_interface):
    a = np.arange(6, dtype=np.int16)
    buffer = _known_buffer(a, **claims)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((2, 3), 2)[:, ::-1], a.dtype)
    assert view.device_id == claims["device_id"]
    assert view.is_device_accessible == claims["device"]
    assert view.__dlpack_device__() == dlpack_device
    assert hasattr(view, "__array_interface__") == host_interface
    assert hasattr(view, "__cuda_array_interface__") == cuda_interface
    if cuda_interface:
        cai = view.__cuda_array_interface__
        assert cai == {
            "version": 3, "shape": (2, 3), "typestr": "<i2",
            "data": (view.ptr, False), "strides": (6, -2), "stream": None,
        }  # fmt: skip
    if host_interface:
        np.testing.assert_array_equal(np.from_dlpack(view), a.reshape(2, 3)[:, ::-1])
        capsule = view.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
        with dlpack.consume_capsule(capsule) as tensor:
            assert tensor.device == (1, 0)
    else:
        with pytest.raises(BufferError, match="dl_device=\\(1, 0\\)"):
            view.__dlpack__(max_version=(1, 0), dl_device=(1, 0))


def test_repr_html_draws_the_layout():
    page = StridedMemoryView.from_dlpack(np.zeros((2, 3), np.float32), -1)._repr_html_()
    assert "float32" in page and page.count('class="cell"') == 6


def test_array_interface_views_take_any_plain_dtype():
    records = np.zeros(3, dtype=[("x", "<f4"), ("n", "<i2")])
    records["n"] = [1, 2, 3]
    view = StridedMemoryView.from_array_interface(records)
    assert view.dtype == records.dtype
    np.testing.assert_array_equal(np.asarray(view)["n"], [1, 2, 3])
    with pytest.raises(BufferError, match="Structured dtypes cannot be exported"):
        view.__dlpack__(max_version=(1, 0))
    with pytest.raises(TypeError, match="holds Python objects"):
        StridedMemoryView.from_array_interface(np.array([None, 1], dtype=object))


def test_dlpack_strides_divided_as_unsigned_are_read_back_signed():
    """CuPy 14 exports byte stride -12 of a float32 array as (2**64 - 12) // 4.

    Only for CuPy producers, and only such values exactly: anything else is refused.
    """
    from helpers.producers import Producer

    a = np.arange(18, dtype=np.float32).reshape(6, 3)
    CuPyLike = type("ndarray", (Producer,), {"__module__": "cupy._core.core"})
    view = StridedMemoryView.from_dlpack(CuPyLike(a[::-1], strides=(2**62 - 3, 1)), -1)
    assert view.layout.strides == (-3, 1) and view.layout.slice_offset == 15
    np.testing.assert_array_equal(np.from_dlpack(view), a[::-1])
    with pytest.raises(OverflowError, match="int64"):
        StridedMemoryView.from_dlpack(Producer(a[::-1], strides=(2**62 - 3, 1)), -1)
    with pytest.raises(OverflowError, match="int64"):  # 2**64 is no multiple of 3: no repair
        StridedMemoryView.from_dlpack(CuPyLike(a[::-1], strides=(2**62 + 3, 1)), -1)


# ----------------------------------------------------------------------------- issue 9: doors
def run_isolated(code):
    """Run ``code`` in a fresh interpreter: a crash is a failure, not a lost test run."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_use_after_close_is_refused_whatever_was_cached():
    """A view used before ``buffer.close()`` refuses copies, exports and indexing afterwards."""
    out = run_isolated(
        """
        import numpy as np
        import layoutkit
        from layoutkit import HostMemoryResource, StridedLayout, StridedMemoryView as V
        buffer = HostMemoryResource().allocate(64)
        view = V.from_buffer(buffer, StridedLayout.dense((8,), 8), np.float64)
        view.copy_from(np.arange(8.0))                  # used: everything cached
        view.device_id, repr(view), view[3], np.asarray(view), np.from_dlpack(view)
        view.__dlpack__(max_version=(1, 0)), view.__dlpack__()  # DLPack headers cached
        buffer.close()
        checks = [
            lambda: view.copy_from(np.zeros(8)), lambda: layoutkit.copy(view, np.zeros(8)),
            lambda: layoutkit.copy(np.zeros(8), view), lambda: view.copy_to(np.zeros(8)),
            lambda: view.__dlpack__(), lambda: view.__array_interface__, lambda: view[0],
            lambda: view.__setitem__(0, 1.0), lambda: np.from_dlpack(view),
            lambda: V.from_dlpack(view), lambda: view.__dlpack_device__(),
            lambda: view.__dlpack__(max_version=(1, 0)),
        ]
        for check in checks:
            try:
                check()
            except BufferError as exc:
                assert "closed" in str(exc), exc
            else:
                raise AssertionError("not refused")
        print("ok")
        """
    )
    assert out == "ok"


def test_dlpack_export_checks_its_arguments_after_a_cached_export():
    """An export made once (its header cached) does not let later calls skip a check."""
    view = StridedMemoryView.from_dlpack(np.arange(6.0), -1)
    readonly = StridedMemoryView.from_dlpack(np.broadcast_to(np.arange(3.0), (2, 3)), -1)
    for v in (view, readonly):
        np.from_dlpack(v)
        v.__dlpack__(max_version=(1, 0))
    with pytest.raises(TypeError, match="max_version"):
        view.__dlpack__(max_version=(True, 0))
    with pytest.raises(TypeError, match="max_version"):
        view.__dlpack__(max_version=(1.0, 0))
    with pytest.raises(BufferError, match="max_version"):
        view.__dlpack__(max_version=(1, 0, 0))
    with pytest.raises(BufferError, match="copy=True"):
        view.__dlpack__(max_version=(1, 0), copy=True)
    with pytest.raises(TypeError, match="copy"):
        view.__dlpack__(max_version=(1, 0), copy="no")
    with pytest.raises(BufferError, match="dl_device"):
        view.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(TypeError, match="stream"):
        view.__dlpack__(max_version=(1, 0), stream="s")
    with pytest.raises(BufferError, match="read-only"):
        readonly.__dlpack__(max_version=(0, 8))
    with dlpack.consume_capsule(readonly.__dlpack__(max_version=(1, 0))) as tensor:
        assert tensor.readonly


def test_views_of_null_pointers_with_elements_touch_no_memory():
    """cuda.core 1.2.2 accepts a CUDA array interface with a null pointer and elements (its
    test_from_cuda_array_interface_zero_strides); such a view is a description: everything
    that would read or write its memory raises BufferError, and its metadata reads."""
    out = run_isolated(
        """
        import numpy as np
        import layoutkit
        from layoutkit import StridedLayout, StridedMemoryView as V
        from layoutkit.cuda._kernel import ViewKernel
        from layoutkit._numba_view import check_view_accessible
        from layoutkit._driver import driver_found
        import numba, types

        class Described:
            def __init__(self, shape, strides, readonly=False):
                self.__cuda_array_interface__ = {"version": 3, "shape": shape,
                    "strides": strides, "typestr": "<f8", "data": (0, readonly)}

        for shape, strides in (((1, 1), (0, 0)), ((4, 3), None), ((2, 3), (24, -8))):
            view = V.from_cuda_array_interface(Described(shape, strides), -1)
            assert view.shape == shape and view.ptr == 0 and view.size == np.prod(shape)
            assert view.layout.shape == shape and view.dtype == np.float64
            assert "ptr=0x0" in repr(view)
            host = np.zeros(shape)
            checks = {
                "copy_from": lambda: view.copy_from(host),
                "copy_to": lambda: view.copy_to(host),
                "copy dst": lambda: layoutkit.copy(view, host),
                "copy src": lambda: layoutkit.copy(host, view),
                "__dlpack__": lambda: view.__dlpack__(max_version=(1, 0)),
                "__dlpack_device__": lambda: view.__dlpack_device__(),
                "__cuda_array_interface__": lambda: view.__cuda_array_interface__,
                "__array_interface__": lambda: view.__array_interface__,
                "np.from_dlpack": lambda: np.from_dlpack(view),
                "np.asarray": lambda: np.asarray(view),
                "element": lambda: view[(0,) * len(shape)],
                "store": lambda: view.__setitem__((0,) * len(shape), 1.0),
                "sub-view": lambda: view[:1],
                "slice store": lambda: view.__setitem__(slice(None), 0.0),
                "buffer": lambda: view.buffer,
                "view(dtype)": lambda: view.view(dtype=np.int64),
                "with_layout": lambda: view.with_layout(view.layout),
                "import of it": lambda: V.from_any_interface(view, -1),
                "njit": lambda: numba.njit(lambda v: v.shape[0])(view),
                "kernel check": lambda: check_view_accessible(view, "argument 0", True, 0),
                "kernel argument": lambda: ViewKernel(
                    types.SimpleNamespace(targetoptions={})).launch_arguments((view,)),
            }
            for name, check in checks.items():
                try:
                    check()
                except BufferError as exc:
                    assert "null data pointer" in str(exc), (name, exc)
                except layoutkit.NoDriverError:
                    # typing a view of "the current device" asks the driver which one
                    assert name in ("njit", "kernel argument") and not driver_found(), name
                else:
                    raise AssertionError(f"{name}: not refused")
            assert (host == 0).all()
        print("ok")
        """
    )
    assert out == "ok"


def test_views_refuse_pickling_and_deepcopy_and_copy_is_the_view_itself():
    """One rule (as Buffer's): no copy of owned state; the DLPack deleter still runs once."""
    import copy
    import pickle

    from helpers.producers import Producer

    producer = Producer(np.arange(4.0))
    view = StridedMemoryView.from_dlpack(producer)
    for attempt in (copy.deepcopy, pickle.dumps, lambda v: pickle.dumps(v, protocol=5)):
        with pytest.raises(TypeError, match="cannot pickle or deep-copy a StridedMemoryView"):
            attempt(view)
    with pytest.raises(TypeError, match="cannot copy or pickle an imported DLPack tensor"):
        copy.deepcopy(view.buffer.owner)
    with pytest.raises(TypeError, match="cannot copy or pickle an imported DLPack tensor"):
        copy.copy(view.buffer.owner)
    assert copy.copy(view) is view
    del view
    gc.collect()
    assert producer.deleted == 1


class Interface:
    """An ``__array_interface__`` producer built from entries."""

    def __init__(self, **entries):
        self.__array_interface__ = {"version": 3, "typestr": "<i4", **entries}


@pytest.mark.parametrize(
    ("entries", "error", "message"),
    [
        ({"shape": (8,), "data": bytearray(16)}, BufferError, "bytes \\[0, 32\\) do not lie inside"),
        ({"shape": (2,), "data": bytearray(16), "offset": 12}, BufferError, "\\[12, 20\\)"),
        ({"shape": (2,), "data": bytearray(16), "offset": -4}, BufferError, "offset'\\] is -4"),
        ({"shape": (2,), "data": bytearray(16), "offset": 2**70}, BufferError, "do not lie inside"),
        ({"shape": (2,), "data": bytearray(16), "offset": 1.0}, BufferError, "not an integer"),
        ({"shape": (2,), "data": (4096, False), "offset": 8}, BufferError, "applies only to a buffer"),
        ({"shape": (2,), "data": (4096, False), "descr": [("", "<i8")]}, BufferError,
         "describes 8-byte elements but typestr '<i4' 4-byte"),
        ({"shape": (-2,), "data": (4096, False)}, ValueError, "shape\\[0\\] = -2 is negative"),
        ({"shape": (2.0,), "data": (4096, False)}, TypeError, "shape\\[0\\] is 2.0"),
        ({"shape": (True,), "data": (4096, False)}, TypeError, "shape\\[0\\] is True"),
        ({"shape": 3, "data": (4096, False)}, TypeError, "shape is 3 of type int, not a sequence"),
        ({"shape": (2,), "strides": (6,), "data": (4096, False)}, ValueError, "not a multiple"),
        ({"shape": (2,), "data": (4096, False), "typestr": "|V0"}, ValueError, "itemsize"),
        ({"shape": (2,), "data": (2**64 - 4, False)}, BufferError, "64-bit address space"),
        ({"shape": (2,), "data": (True, False)}, BufferError, "pointer True is not an integer"),
        ({"shape": (2, 3), "data": (4096, False), "strides": (4,)}, ValueError, "has 1 entries"),
    ],
)
def test_array_interfaces_are_checked_before_a_view_exists(entries, error, message):
    with pytest.raises(error, match=message):
        StridedMemoryView.from_array_interface(Interface(**entries))
    with pytest.raises(error, match=message):
        StridedMemoryView.from_any_interface(Interface(**entries))


def test_array_interface_with_a_buffer_object_and_offset():
    data = bytearray(np.arange(8, dtype=np.int32).tobytes())
    view = StridedMemoryView.from_array_interface(
        Interface(shape=(3,), strides=(-4,), data=data, offset=12)
    )
    assert np.asarray(view).tolist() == [3, 2, 1] and not view.readonly
    readonly = StridedMemoryView.from_array_interface(Interface(shape=(2,), data=bytes(8)))
    assert readonly.readonly


@pytest.mark.parametrize(
    ("cai", "error", "message"),
    [
        ({"shape": (-1,)}, ValueError, "shape\\[0\\] = -1 is negative"),
        ({"strides": (6,)}, ValueError, "not a multiple"),
        ({"data": (2**64 - 4, False)}, BufferError, "64-bit address space"),
        ({"stream": 2**64}, BufferError, "not a stream handle"),
        ({"stream": True}, BufferError, "requires None or an int stream handle"),
    ],
)
def test_cuda_array_interfaces_are_checked_before_a_view_exists(cai, error, message):
    class FakeCAI:
        __cuda_array_interface__ = {
            "version": 3, "shape": (2,), "typestr": "<f4", "data": (4096, False), **cai,
        }  # fmt: skip

    with pytest.raises(error, match=message):
        StridedMemoryView.from_cuda_array_interface(FakeCAI(), -1)


def test_read_only_is_a_property_of_the_memory():
    """A bytes object stays read-only through .buffer, from_buffer and view()."""
    data = b"\x01" * 16
    view = StridedMemoryView.from_array_interface(data)
    assert view.readonly and view.buffer.is_readonly
    layout = StridedLayout.dense((16,), 1)
    for again in (
        StridedMemoryView.from_buffer(view.buffer, view.layout, view.dtype),
        StridedMemoryView.from_buffer(view.buffer, shape=(16,), itemsize=1),
        view.view(layout[::2]),
        view.view(dtype=np.int8),
        view[4:],
        view.permuted((0,)),
    ):
        assert again.readonly
        with pytest.raises(ValueError, match="read-only"):
            again.copy_from(np.zeros(again.shape, again.dtype or np.uint8))
    with pytest.raises(ValueError, match="buffer's memory is read-only"):
        StridedMemoryView.from_buffer(view.buffer, layout, np.uint8, False)
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 7
    with pytest.raises(BufferError, match="read-only view needs a versioned"):
        view.__dlpack__()
    assert not np.asarray(view).flags.writeable
    assert data == b"\x01" * 16


def test_aliasing_layouts_are_read_only_unless_asked():
    """DECISIONS 19: NumPy's rule for broadcast views."""
    buffer = StridedMemoryView.from_dlpack(np.zeros(4)).buffer
    broadcast = StridedLayout((3, 4), (0, 1), 8)
    assert StridedMemoryView.from_buffer(buffer, broadcast, np.float64).readonly
    writable = StridedMemoryView.from_buffer(buffer, broadcast, np.float64, is_readonly=False)
    assert not writable.readonly
    writable[2, 1] = 5.0
    assert np.asarray(writable)[0, 1] == 5.0
    unique = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((4,), 8), np.float64)
    assert not unique.readonly and unique.view(broadcast).readonly
    assert unique[None].readonly is False  # a new axis of extent 1 aliases nothing


def test_a_view_exports_what_it_was_made_with():
    a = np.arange(12.0)
    view = StridedMemoryView.from_any_interface(a)
    a.shape = (3, 4)
    assert view.shape == (12,)
    for out in (np.from_dlpack(view), np.asarray(view), np.asarray(view.view(view.layout))):
        assert out.shape == (12,)


def test_host_arrays_need_no_stream():
    """DECISIONS 12: host producers have no stream to order."""
    a = np.arange(6.0).reshape(2, 3)
    for make in (StridedMemoryView.from_any_interface, StridedMemoryView.from_dlpack):
        assert make(a).shape == (2, 3)
        assert make(Generic(a)).shape == (2, 3)


def test_bfloat16_array_interface_gives_ml_dtypes_arrays():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        dtype = np.dtype(getattr(ml_dtypes, name))
        a = np.arange(6, dtype=np.float32).astype(dtype).reshape(2, 3)
        view = StridedMemoryView.from_any_interface(a)
        out = np.asarray(view)
        assert out.dtype == dtype and out.ctypes.data == a.ctypes.data
        np.testing.assert_array_equal(out.astype(np.float32), a.astype(np.float32))
        again = StridedMemoryView.from_array_interface(view)
        assert again.dtype == dtype
        with dlpack.consume_capsule(view.__dlpack__(max_version=(1, 0))) as tensor:
            assert tensor.dtype_triple[0] == dlpack_code(name)


def dlpack_code(name):
    from layoutkit._dtypes import DLPACK_CODE_NAMES

    return 4 if name == "bfloat16" else {v: k for k, v in DLPACK_CODE_NAMES.items()}[name]


# ----------------------------------------------------------------------------- cuda.core 1.2.2 forms
@pytest.mark.parametrize("shape", [(), (2, 3), (10, 10), (10, 13, 11)], ids=str)
@pytest.mark.parametrize("dtype", [np.dtype(np.int8), np.dtype(np.uint32)], ids=str)
@pytest.mark.parametrize("stride_order", ["C", "F"])
@pytest.mark.parametrize("readonly", [True, False])
def test_from_buffer_1_2_2_form(shape, dtype, stride_order, readonly):
    """cuda.core 1.2.2's test_from_buffer, on host memory."""
    from layoutkit import HostMemoryResource

    layout = StridedLayout.dense(shape, dtype.itemsize, stride_order)
    buffer = HostMemoryResource().allocate(layout.required_size_in_bytes())
    view = StridedMemoryView.from_buffer(
        buffer, shape=shape, strides=layout.strides, dtype=dtype, is_readonly=readonly
    )
    assert view.exporting_obj is buffer
    assert view._layout == layout and view.layout == layout
    assert view.ptr == int(buffer.handle)
    assert view.shape == shape and view.strides == layout.strides
    assert view.dtype == dtype and view.device_id == -1
    assert view.readonly == readonly
    positional = StridedMemoryView.from_buffer(buffer, shape, layout.strides, itemsize=dtype.itemsize)
    assert positional.layout == layout and positional.dtype is None


def test_from_buffer_argument_rules():
    buffer = StridedMemoryView.from_dlpack(np.zeros(10, np.int16)).buffer
    with pytest.raises(ValueError, match="itemsize or dtype must be specified"):
        StridedMemoryView.from_buffer(buffer, (5,))
    with pytest.raises(ValueError, match="itemsize \\(1\\) does not match dtype.itemsize \\(2\\)"):
        StridedMemoryView.from_buffer(buffer, (5,), dtype=np.dtype("int16"), itemsize=1)
    with pytest.raises(ValueError, match="reaches byte 40, past the end of the buffer. Expected at least 40 bytes, got 20 bytes"):
        StridedMemoryView.from_buffer(buffer, shape=(5, 4), dtype="int16")
    with pytest.raises(ValueError, match="before the start of the buffer"):
        StridedMemoryView.from_buffer(buffer, shape=(5, 4), strides=(-4, 1), itemsize=1)
    with pytest.raises(TypeError, match="at most 2 positional arguments"):
        StridedMemoryView.from_buffer(buffer, (5,), None, 2)
    with pytest.raises(TypeError, match="both as a positional and as a keyword"):
        StridedMemoryView.from_buffer(buffer, (5,), shape=(5,), itemsize=2)
    layout = StridedLayout.dense((5,), 2)
    with pytest.raises(TypeError, match="both as a positional and as a keyword"):
        StridedMemoryView.from_buffer(buffer, layout, np.int16, dtype=np.int16)
    with pytest.raises(TypeError, match="shape/strides/layout besides a layout"):
        StridedMemoryView.from_buffer(buffer, layout, shape=(5,))
    assert StridedMemoryView.from_buffer(buffer, layout=layout, dtype="i2").shape == (5,)
    with pytest.raises(ValueError, match="does not match the layout's"):
        StridedMemoryView.from_buffer(buffer, layout, itemsize=4)


class InterfaceV2:
    def __init__(self, array):
        self.__array_interface__ = dict(array.__array_interface__, version=2)


def _cai(**entries):
    interface = {"shape": (2,), "strides": None, "typestr": "<f8", "data": (0, False), "version": 3}
    interface.update(entries)
    return type("SyntheticCAI", (), {"__cuda_array_interface__": interface})()


def test_interface_doors_1_2_2_rules():
    """cuda.core 1.2.2's interface-door tests (its test_utils.py gates them on a GPU), on host."""
    x = np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "i4"), ("b", "f8")])
    with pytest.raises(ValueError, match=r"strides\[0\] = 12 bytes .*strides must be divisible by itemsize"):
        StridedMemoryView.from_array_interface(x["b"])
    with pytest.raises(ValueError, match=r"strides\[0\] = 10 bytes .*strides must be divisible by itemsize"):
        StridedMemoryView.from_cuda_array_interface(_cai(strides=(10,)), stream_ptr=-1)
    zero = StridedMemoryView.from_cuda_array_interface(_cai(shape=(1, 1), strides=(0, 0)), stream_ptr=-1)
    assert zero.shape == (1, 1) and zero.strides == (0, 0)
    empty = StridedMemoryView.from_cuda_array_interface(_cai(shape=(0, 3), strides=(24, 8)), stream_ptr=-1)
    assert empty.size == 0 and empty.shape == (0, 3) and empty.strides == (3, 1)
    # A structured array keeps its fields (``descr`` refines the void ``typestr``); cuda.core
    # reads only ``typestr`` and gives V12.
    assert StridedMemoryView.from_array_interface(x).dtype == x.dtype
    # CUDA array interface version 2 is refused, as cuda.core 1.2.2 refuses it.
    with pytest.raises(BufferError, match="has version 2; only v3 or above is supported"):
        StridedMemoryView.from_cuda_array_interface(_cai(version=2), stream_ptr=-1)
    with pytest.raises(BufferError, match="has version 2; only v3 or above is supported"):
        StridedMemoryView.from_array_interface(InterfaceV2(np.zeros(3)))


@pytest.mark.parametrize("door", ["from_array_interface", "from_any_interface", "cai"])
def test_unused_byte_strides_need_not_be_multiples_of_the_itemsize(door):
    """A byte stride that addresses nothing (an extent-1 axis, a tensor without elements)
    is never divided into elements (DECISIONS 6): NumPy makes such views (a row of a packed
    record's field) and copies them; the import refused them."""
    records = np.zeros((5, 3), dtype=[("a", "u1"), ("b", "<i2")])
    records["b"] = np.arange(15).reshape(5, 3)
    row = records[1:2, ::2]["b"]  # strides (9, 6): 9 bytes for 2-byte elements
    assert row.strides == (9, 6) and not row.flags.c_contiguous

    def view(shape, strides, array=None):
        if door == "cai":
            cai = _cai(shape=shape, strides=strides, typestr="<i2")
            return StridedMemoryView.from_cuda_array_interface(cai, stream_ptr=-1)
        return getattr(StridedMemoryView, door)(array)

    one = view((1, 2), (9, 6), row)
    assert one.shape == (1, 2) and one.strides[1] == 3
    if door != "cai":
        out = np.zeros((1, 2), "<i2")
        one.copy_to(out)
        assert out.tolist() == row.tolist() == [[3, 5]]
    empty = view((0, 2), (9, 3), records[:0, ::2]["b"])
    assert empty.size == 0 and empty.shape == (0, 2)
    with pytest.raises(ValueError, match=r"strides\[0\] = 9 bytes is not a multiple of itemsize 2"):
        view((2, 2), (9, 6), records[1:3, ::2]["b"])


def test_empty_deprecated_view():
    with pytest.warns(DeprecationWarning, match="deprecated"):
        view = StridedMemoryView()
    with pytest.raises(ValueError, match="Cannot infer layout"):
        view._layout  # noqa: B018
    with pytest.raises(ValueError, match="no memory and no layout"):
        view.ptr  # noqa: B018
    assert repr(view) == "StridedMemoryView(empty)"
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="NoneType object"):
        StridedMemoryView(None, -1)  # an object without any interface, not the empty form


# ----------------------------------------------------------------------------- Python view API
def test_indexing_reads_and_writes_elements_like_numpy():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    view = StridedMemoryView.from_any_interface(a[:, ::-1, 1::2])
    expected = a[:, ::-1, 1::2]
    for index in [(0, 0, 0), (1, 2, 1), (-1, -3, -2), (np.int64(1), 0, 1)]:
        value = view[index]
        assert type(value) is np.int32 and value == expected[index]
    view[1, -1, 0] = 99
    assert a[1, 0, 1] == 99
    view[0, 1, 1] = 2.7  # cast to the dtype, as NumPy does
    assert expected[0, 1, 1] == 2
    zero_d = StridedMemoryView.from_any_interface(np.array(4.5))
    assert zero_d[()] == 4.5 and zero_d.ndim == 0


@pytest.mark.parametrize(
    "index",
    [slice(None), (0,), (slice(None, None, -1), 1), (None, 0, Ellipsis), (Ellipsis, None),
     (1, slice(1, None), slice(None, None, 2)), (-1,)],  # fmt: skip
    ids=str,
)
def test_basic_indexing_gives_views_like_numpy(index):
    a = np.arange(24.0).reshape(2, 3, 4)
    view = StridedMemoryView.from_any_interface(a)
    sub = view[index]
    assert isinstance(sub, StridedMemoryView)
    np.testing.assert_array_equal(np.asarray(sub), a[index])
    assert np.asarray(sub).ctypes.data == a[index].ctypes.data
    assert sub.layout == view.layout[index]


def test_index_errors():
    view = StridedMemoryView.from_any_interface(np.zeros((2, 3)))
    with pytest.raises(IndexError):
        view[2, 0]  # noqa: B018
    with pytest.raises(IndexError):
        view[0, -4] = 1.0
    with pytest.raises(TypeError):
        view[0.5, 1]  # noqa: B018
    untyped = StridedMemoryView.from_buffer(view.buffer, StridedLayout.dense((6,), 8))
    with pytest.raises(TypeError, match="no dtype"):
        untyped[0]  # noqa: B018


def test_slice_assignment_copies():
    a = np.zeros((3, 4), np.float32)
    view = StridedMemoryView.from_any_interface(a)
    view[1] = np.arange(4, dtype=np.float32)
    view[:, 0] = 7.0
    view[2, 1:] = StridedMemoryView.from_any_interface(np.full(3, 5, np.float32))
    np.testing.assert_array_equal(a, [[7, 0, 0, 0], [7, 1, 2, 3], [7, 5, 5, 5]])


def test_device_views_refuse_indexing_and_name_device_memory():
    a = np.zeros(4)
    location = _driver.Location(0, True, False, False)
    buffer = Buffer._from_known(a.ctypes.data, a.nbytes, owner=a, location=location)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((4,), 8), np.float64)
    with pytest.raises(ValueError, match="device memory"):
        view[0]  # noqa: B018
    with pytest.raises(ValueError, match="device memory"):
        view[0] = 1.0
    assert view[1:].shape == (3,) and view[1:].device_id == 0  # sub-views are plain views


def test_ndim_permuted_with_layout_match_compiled_names():
    a = np.arange(24.0).reshape(2, 3, 4)
    view = StridedMemoryView.from_any_interface(a)
    assert view.ndim == 3 and len(view) == 2
    np.testing.assert_array_equal(np.asarray(view.permuted((2, 0, 1))), a.transpose(2, 0, 1))
    flipped = view.with_layout(view.layout[::-1])
    np.testing.assert_array_equal(np.asarray(flipped), a[::-1])
    with pytest.raises(TypeError, match="needs a StridedLayout"):
        view.with_layout((2, 3, 4))
    with pytest.raises(ValueError):
        view.with_layout(StridedLayout.dense((5, 5), 8))  # reaches outside the buffer


def test_no_leak_over_100000_from_buffer_and_view_of_view_round_trips():
    a = np.arange(16.0)
    buffer = StridedMemoryView.from_dlpack(a).buffer
    first = StridedMemoryView.from_dlpack(a[::2])
    refcount = sys.getrefcount(a)

    def round_trip():
        view = StridedMemoryView.from_buffer(buffer, shape=(4, 4), itemsize=8, dtype=np.float64)
        np.from_dlpack(view[1:, ::2])
        StridedMemoryView.from_dlpack(first).buffer  # noqa: B018

    growth = _memory_growth(round_trip, 100_000)
    assert growth < 64 * 1024, f"memory grew by {growth} bytes"
    assert sys.getrefcount(a) == refcount


def test_interface_dicts_are_new_each_time():
    """Views cache what their interface says; a consumer that changes its dict changes
    nothing the next consumer reads."""
    a = np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::-2]
    view = StridedMemoryView.from_dlpack(a, -1)
    first = view.__array_interface__
    first["shape"] = (100, 100)
    first["data"] = (0, False)
    second = view.__array_interface__
    assert second is not first
    assert second["shape"] == (3, 2) and second["data"] == (a.ctypes.data, False)
    np.testing.assert_array_equal(np.asarray(view), a)
    structured = view.view(StridedLayout.dense((3,), 4), np.dtype([("x", "i2"), ("y", "u2")]))
    described = structured.__array_interface__
    assert described["descr"] == [("x", "<i2"), ("y", "<u2")]
    described["descr"].append(("z", "<f8"))
    assert structured.__array_interface__["descr"] == [("x", "<i2"), ("y", "<u2")]
    assert np.asarray(structured).dtype == structured.dtype


@pytest.mark.parametrize("door", ["from_dlpack", "from_array_interface", "from_any_interface"])
def test_numpy_fast_path_checks_the_address_range_as_the_protocols_do(door):
    """as_strided can make an array whose elements lie below address 0 (or past 2**64);
    the NumPy fast path refuses it as the DLPack reader does, before a view exists."""
    from numpy.lib.stride_tricks import as_strided

    a = np.arange(4.0)
    below = as_strided(a, shape=(2,), strides=(-(2**62),))
    with pytest.raises(BufferError, match="NumPy array: its .* bytes at -0x.* reach beyond the 64-bit"):
        getattr(StridedMemoryView, door)(below)
    fine = as_strided(a, shape=(2, 2), strides=(16, -8))[:, ::-1]  # in range: accepted
    view = getattr(StridedMemoryView, door)(fine)
    np.testing.assert_array_equal(np.asarray(view), fine)


def _crafted_pickle(cls, slots):
    """Pickle bytes an attacker writes: ``copyreg.__newobj__(cls)``, then BUILD with the slot
    state ``(None, slots)``: no layoutkit code runs unless the class refuses state."""
    import pickle

    name = f"{cls.__module__}\n{cls.__qualname__}\n".encode()
    state = pickle.dumps((None, slots), protocol=2)[2:-1]  # without PROTO and STOP
    return b"\x80\x02ccopyreg\n__newobj__\nc" + name + b"\x85R" + state + b"b."


def test_crafted_pickles_cannot_make_buffers_views_or_imported_tensors():
    """Found by the fuzz suite: a pickle naming only the class set a Buffer's or a view's
    slots to any address (a copy then wrote there). Their state is refused (a Buffer's
    ``__new__`` already refuses: a Buffer is made only by from_handle or a resource)."""
    import pickle

    from layoutkit.interop.dlpack import ImportedTensor

    for cls, slots in (
        (Buffer, {"_ptr": 8, "_size": 1 << 20, "_closed": False, "_owner": None, "_mr": None}),
        (StridedMemoryView, {"_record": None, "_location": None, "_buffer": None}),
        (ImportedTensor, {"_address": 8, "_deleter": 8, "_in_use": False}),
    ):
        # unpickling calls cls.__new__(cls): for a view that is the deprecated empty
        # constructor (it warns, as cuda.core's does), then __setstate__ refuses
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with pytest.raises(TypeError, match="cannot be unpickled|cannot be created directly"):
                pickle.loads(_crafted_pickle(cls, slots))


def test_an_imported_tensor_in_use_cannot_be_released_through_its_public_methods():
    """Found by the fuzz suite: view.buffer.owner of a DLPack import is the object holding
    the producer's deleter; its release() ran the deleter while the view read the memory."""
    from helpers.producers import Producer

    producer = Producer(np.arange(4.0))
    view = StridedMemoryView.from_dlpack(producer, -1)
    owner = view.buffer.owner
    with pytest.raises(BufferError, match="used by views"):
        owner.release()
    with pytest.raises(BufferError, match="used by views"), owner:
        pass
    assert producer.deleted == 0
    np.testing.assert_array_equal(np.from_dlpack(view), np.arange(4.0))
    del view, owner
    gc.collect()
    assert producer.deleted == 1


def test_views_keep_alive_what_an_interface_dict_holds():
    """A NumPy scalar's ``__array_interface__`` points into a fresh array that only the
    dict's ``"__ref"`` entry keeps alive: the view holds the dict, not only the scalar
    (the memory was freed under every view, which then read other objects' bytes)."""
    views = [StridedMemoryView.from_any_interface(np.float64(i + 0.5)) for i in range(500)]
    views += [StridedMemoryView.from_array_interface(np.int32(-i)) for i in range(500)]
    churn = [np.full(1, -1.0) for _ in range(5000)]  # reuses freed memory, if any was freed
    del churn
    gc.collect()
    assert [float(v[()]) for v in views[:500]] == [i + 0.5 for i in range(500)]
    assert [int(v[()]) for v in views[500:]] == [-i for i in range(500)]
    assert [float(np.asarray(v)) for v in views[:500]] == [i + 0.5 for i in range(500)]


def test_writable_aliasing_arrays_keep_their_ml_dtype():
    """A writable as_strided array of an ml_dtypes type went through the interface dict,
    which calls the type void: the view was ``|V2``, and from_dlpack refused it."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = np.lib.stride_tricks.as_strided(a.view("V2"), (3, 2), (0, 2)).view(ml_dtypes.bfloat16)
    assert b.flags.writeable and b.dtype == ml_dtypes.bfloat16
    for make in (
        StridedMemoryView.from_any_interface,
        StridedMemoryView.from_array_interface,
        lambda x: StridedMemoryView.from_dlpack(x, -1),
    ):
        view = make(b)
        assert view.dtype == b.dtype and view.readonly  # aliasing: read-only (DECISIONS 19)
        assert not view.buffer.is_readonly  # ...but the memory is not
        out = np.asarray(view)
        assert out.dtype == b.dtype and np.shares_memory(out, a)
        np.testing.assert_array_equal(out.astype(np.float32), b.astype(np.float32))


def _assign_both(shape, dtype, index, value, of_view=None):
    """``a[index] = value`` on a NumPy array and on a view of a copy: (NumPy's, ours),
    each the array's values or the exception class. ``of_view(view, array)`` makes the
    value from the two (a sub-view of either memory), else ``value`` is used as is."""
    expected = np.arange(int(np.prod(shape)), dtype=np.float64).astype(dtype).reshape(shape)
    ours = expected.copy()
    view = StridedMemoryView.from_any_interface(ours)
    results = []
    for target, source in ((expected, value), (view, value)):
        if of_view is not None:
            source = of_view(view if target is view else expected, ours if target is view else expected)
        try:
            target[index] = source
            results.append((expected if target is not view else ours).tolist())
        except Exception as exc:  # noqa: BLE001 - the class is compared
            results.append(type(exc))
    return results


@pytest.mark.parametrize(
    "dtype, index, value",
    [
        (np.int32, slice(0, 2), np.int64(-(2**40))),  # OverflowError, as an element's
        (np.int16, slice(None), np.uint64(2**63 + 5)),  # OverflowError
        (np.int32, slice(1, None), np.float64("nan")),  # ValueError
        (np.int32, slice(None), np.arange(3, dtype=np.float64) + 0.5),  # cast: 0, 1, 2
        (np.float32, (Ellipsis,), np.arange(3, dtype=np.int64)),
        (np.uint8, slice(None), np.array([300, -1, 2])),  # NumPy's unsafe cast wraps
        (np.float64, slice(0, 1), np.complex64(1 + 2j)),  # the real part (ComplexWarning)
        (np.int8, slice(None), np.bool_(True)),
        (np.float64, slice(1, 2), np.array([[7.5]])),  # leading extent-1 axes dropped
        (np.float64, slice(1, 2), [[7.5]]),  # ValueError: a sequence is read to 1 dimension
        (np.float64, slice(1, 2), [7.5]),
        (np.float64, (Ellipsis, 1), np.array([4.0])),  # into a 0-d target
        (np.float64, slice(0, 0), np.zeros((1, 0))),
        (np.float64, slice(None), np.zeros((2, 3))),  # ValueError: does not broadcast
        (np.int32, 1, np.array([[5]])),  # an element: ValueError, a sequence
    ],
    ids=repr,
)
def test_slice_assignment_reads_values_as_numpy_assignment_does(dtype, index, value):
    """``v[slices] = x`` went through layoutkit.copy unchanged: a NumPy scalar or array
    of another dtype was refused ("copy does not convert") though NumPy casts it, and a
    value with leading extent-1 axes did not broadcast."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's ComplexWarning / cast warnings, both sides
        expected, ours = _assign_both((3,), dtype, index, value)
    assert ours == expected


@pytest.mark.parametrize(
    "target, source",
    [
        (slice(1, None), slice(None, -1)),
        (slice(None, -1), slice(1, None)),
        (slice(None, None, -1), slice(None)),
        (slice(None, None, 2), slice(0, 3)),
    ],
    ids=str,
)
@pytest.mark.parametrize("of", ["view", "array"])
def test_slice_assignment_reads_an_overlapping_source_first(target, source, of):
    """NumPy's ``a[1:] = a[:-1]`` shifts; ``v[1:] = v[:-1]`` raised copy's overlap error.

    The result is the one through a temporary copy of the source, which NumPy gives
    too, except where its heuristic (reverse the loop) does not suffice: NumPy's
    ``a[::2] = a[0:3]`` reads ``a[2]`` after writing it."""
    def make(view, array):
        if view is array:  # the oracle: NumPy through a temporary
            return array[source].copy()
        return (view if of == "view" else array)[source]

    expected, ours = _assign_both((6,), np.int64, target, None, of_view=make)
    assert ours == expected


def test_element_assignment_takes_a_view_as_numpy_takes_an_array():
    a = np.zeros(3)
    view = StridedMemoryView.from_any_interface(a)
    view[0] = StridedMemoryView.from_any_interface(np.array(2.5))
    view[1] = view[0]
    assert a.tolist() == [2.5, 2.5, 0.0]
    with pytest.raises(ValueError, match="sequence"):
        view[2] = view[0:1]  # NumPy 2 too: a[2] = a[0:1]


def test_ml_dtypes_scalars_import_with_their_dtype():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        scalar = getattr(ml_dtypes, name)(1.5)
        view = StridedMemoryView.from_any_interface(scalar)
        assert view.dtype == scalar.dtype and view.shape == () and view.exporting_obj is scalar
        assert float(view[()]) == 1.5
        target = StridedMemoryView.from_any_interface(np.zeros(2, scalar.dtype))
        target[:] = scalar
        assert np.asarray(target).astype(np.float32).tolist() == [1.5, 1.5]


_ASSIGN_DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.uint64, np.float32, np.float64, np.complex64]


@st.composite
def _assignments(draw):
    """An array, a basic index into it, and a value: a scalar, an array of any of the
    dtypes, or a sub-array of the same memory (as a view or as an array)."""
    shape = draw(shapes(draw(st.integers(0, 3)), max_extent=4))
    dtype = draw(st.sampled_from(_ASSIGN_DTYPES))
    index = draw(basic_indices(shape, max_new_axes=1))
    kind = draw(st.sampled_from(["scalar", "numpy scalar", "array", "self"]))
    if kind == "scalar":
        value = draw(st.one_of(st.integers(-(2**65), 2**65), st.floats(), st.booleans(),
                               st.complex_numbers(allow_nan=False, max_magnitude=1e6)))  # fmt: skip
    elif kind == "numpy scalar":
        value = draw(st.sampled_from(_ASSIGN_DTYPES))(draw(st.integers(0, 2**7 - 1)))
    elif kind == "array":
        tail = draw(st.integers(0, len(shape)))
        value_shape = tuple(draw(st.sampled_from([1, n])) for n in shape[tail:])
        if draw(st.booleans()):
            value_shape = (1, *value_shape)  # a leading unit axis, which NumPy drops
        value = (np.arange(int(np.prod(value_shape))) * 3 - 5).reshape(value_shape)
        value = value.astype(draw(st.sampled_from(_ASSIGN_DTYPES)))
    else:
        value = draw(basic_indices(shape, max_new_axes=0))  # an index of the same memory
    return shape, dtype, index, kind, value


@given(_assignments())
@settings(max_examples=300, deadline=None)
def test_assignment_matches_numpy(case):
    """``view[index] = value`` leaves the memory NumPy's ``a[index] = value`` leaves (a
    self-overlapping value read through a temporary), or raises NumPy's exception class."""
    shape, dtype, index, kind, value = case
    expected = (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
    ours = expected.copy()
    view = StridedMemoryView.from_any_interface(ours)
    if kind == "self":
        try:
            numpy_value, our_value = expected[value].copy(), view[value]
        except IndexError:
            return
    else:
        numpy_value = our_value = value
    outcomes = []
    for target, source in ((expected, numpy_value), (view, our_value)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                target[index] = source
                outcomes.append(None)
            except Exception as exc:  # noqa: BLE001 - the class is compared
                outcomes.append(type(exc))
    numpy_error, our_error = outcomes
    if numpy_error is None:
        assert our_error is None
    else:
        assert our_error is not None and issubclass(our_error, numpy_error)
    assert ours.tobytes() == expected.tobytes()


@pytest.mark.parametrize("door", ["from_any_interface", "from_array_interface"])
def test_views_of_numpy_scalars_are_read_only(door):
    """A NumPy scalar exports a copy of its value: writes through a view would change only
    the copy (a silent no-op), and NumPy refuses a scalar as np.copyto's destination."""
    import layoutkit

    scalar = np.float64(2.5)
    view = getattr(StridedMemoryView, door)(scalar)
    assert view.readonly and float(view[()]) == 2.5
    with pytest.raises(ValueError, match="read-only"):
        view[()] = 3.0
    with pytest.raises(ValueError, match="read-only"):
        layoutkit.copy(scalar, np.array(1.0))
    assert scalar == 2.5
