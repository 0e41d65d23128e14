"""DLPack import and export: capsules, deleters, flags, byte_offset, stream rules.

Producers here build their capsules with ctypes structures written from dlpack.h,
independently of ``layoutkit.interop.dlpack``'s ``struct`` formats, and count how often
their deleter runs.
"""

import contextlib
import ctypes
import gc
import sys
import tracemalloc
import weakref

import numpy as np
import pytest
from helpers.producers import (
    DLManagedTensor,
    DLManagedTensorVersioned,
    Producer,
    new_capsule,
)

from layoutkit import StridedLayout, StridedMemoryView
from layoutkit.interop import dlpack


def test_struct_formats_match_dlpack_h():
    assert dlpack.VERSIONED.size == ctypes.sizeof(DLManagedTensorVersioned)
    assert dlpack.LEGACY.size == ctypes.sizeof(DLManagedTensor)


@pytest.mark.parametrize("versioned", [True, False])
def test_import_reads_every_field_and_deletes_once(versioned):
    a = np.arange(24, dtype=np.int32).reshape(4, 6)[::-1, 1::2]
    producer = Producer(a, versioned=versioned, legacy_only=not versioned)
    view = StridedMemoryView.from_dlpack(producer, stream_ptr=-1)
    assert producer.requests[-1]["stream"] is None
    assert view.ptr == a.__array_interface__["data"][0]
    assert view.shape == a.shape and view.strides == (-6, 2)
    assert view.dtype == np.int32 and view.readonly is False
    np.testing.assert_array_equal(np.from_dlpack(view), a)
    assert producer.deleted == 0
    buffer = view.buffer
    del view
    gc.collect()
    assert producer.deleted == 0  # the buffer still needs the tensor
    del buffer
    gc.collect()
    assert producer.deleted == 1


def test_versioned_is_asked_first_then_legacy():
    a = np.arange(3.0)
    producer = Producer(a, legacy_only=True)
    StridedMemoryView.from_dlpack(producer, -1)
    assert producer.requests == [{"stream": None}]
    producer = Producer(a)
    StridedMemoryView.from_dlpack(producer, -1)
    assert producer.requests == [{"stream": None, "max_version": dlpack.DLPACK_VERSION}]


class _PositionalStream(Producer):
    """A DLPack 0.x producer whose ``stream`` is positional only (``__dlpack__(self, stream=None, /)``)."""

    def __dlpack__(self, stream=None, /):
        return Producer.__dlpack__(self, stream)


class _NoArguments(Producer):
    """A producer older still: ``__dlpack__(self)`` takes no argument."""

    def __dlpack__(self):
        return Producer.__dlpack__(self)


@pytest.mark.parametrize("kind", [_PositionalStream, _NoArguments])
def test_legacy_producers_without_a_stream_keyword_are_read(kind):
    """They refused ``stream=None`` with TypeError after refusing ``max_version``, though
    NumPy reads them (its retry passes no argument): with no stream to name, neither do we.
    A CUDA producer still gets its stream by keyword, as DLPack names it."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    for door in (StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface):
        producer = kind(a, versioned=False)
        view = door(producer, -1)
        np.testing.assert_array_equal(np.from_dlpack(view), a)
        del view
        gc.collect()
        assert producer.deleted == 1
    producer = kind(a, versioned=False)
    out = np.zeros_like(a)
    import layoutkit

    layoutkit.copy(out, producer)
    np.testing.assert_array_equal(out, a)
    gc.collect()
    assert producer.deleted == 1


def test_byte_offset_is_honoured():
    """DECISIONS 13: ptr = data + byte_offset."""
    a = np.arange(10, dtype=np.float64)
    producer = Producer(a[2:], byte_offset=16)
    view = StridedMemoryView.from_dlpack(producer, -1)
    assert view.ptr == a.__array_interface__["data"][0] + 16
    np.testing.assert_array_equal(np.from_dlpack(view), a[2:])


def test_read_only_flag():
    a = np.arange(4.0)
    view = StridedMemoryView.from_dlpack(Producer(a, flags=dlpack.FLAG_READ_ONLY), -1)
    assert view.readonly
    assert not np.from_dlpack(view).flags.writeable
    with pytest.raises(BufferError, match="read-only view needs a versioned"):
        view.__dlpack__()


def test_legacy_null_strides_mean_c_order():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    view = StridedMemoryView.from_dlpack(Producer(a, strides=None, legacy_only=True), -1)
    assert view.strides is None and view.layout == StridedLayout.dense((2, 3), 2)  # implicit C
    np.testing.assert_array_equal(np.asarray(view), a)


def test_major_version_mismatch_still_calls_deleter():
    producer = Producer(np.arange(3.0), major=2)
    with pytest.raises(BufferError, match="major version 2"):
        StridedMemoryView.from_dlpack(producer, -1)
    assert producer.deleted == 1


def test_unsupported_device_still_calls_deleter():
    producer = Producer(np.arange(3.0), device=(1, 0))
    producer.managed.dl_tensor.device.device_type = 4  # OpenCL, while claiming CPU up front
    with pytest.raises(BufferError, match="device type 4 \\(OpenCL\\): device not supported"):
        StridedMemoryView.from_dlpack(producer, -1)
    gc.collect()
    assert producer.deleted == 1


@pytest.mark.parametrize("device", [(4, 0), (10, 0), (99, 0)])
def test_unsupported_device_is_refused_before_asking(device):
    producer = Producer(np.arange(3.0), device=device)
    # the message carries cuda.core's phrase (its test_utils_dlpack.py matches it)
    with pytest.raises(BufferError, match=f"device type {device[0]} .*: device not supported"):
        StridedMemoryView.from_dlpack(producer, -1)
    assert producer.requests == []


def test_null_data_with_elements_is_refused():
    producer = Producer(np.arange(3.0), data=0)
    with pytest.raises(BufferError, match="null data pointer but 3 elements"):
        StridedMemoryView.from_dlpack(producer, -1)
    gc.collect()
    assert producer.deleted == 1


def test_null_data_without_elements_is_fine():
    view = StridedMemoryView.from_dlpack(Producer(np.zeros((0, 3)), data=0), -1)
    assert view.ptr == 0 and view.shape == (0, 3) and view.size == 0
    assert np.from_dlpack(view).shape == (0, 3)


@pytest.mark.parametrize(
    ("dtype", "error", "message"),
    [
        ((3, 64, 1), TypeError, "opaque handle"),
        ((2, 32, 4), BufferError, "lanes != 1"),
        ((2, 0, 1), TypeError, "no NumPy equivalent"),
    ],
)
def test_unsupported_dtypes_fail_at_import_and_still_delete(dtype, error, message):
    """Errors come early: a dtype is translated (and refused) when the capsule is read."""
    producer = Producer(np.zeros(4, dtype=np.uint64), dtype=dtype)
    with pytest.raises(error, match=message):
        StridedMemoryView.from_dlpack(producer, -1)
    gc.collect()
    assert producer.deleted == 1


def test_packed_sub_byte_is_refused():
    producer = Producer(np.zeros(4, dtype=np.uint8), dtype=(17, 4, 1))
    with pytest.raises(ValueError, match="packed sub-byte"):
        StridedMemoryView.from_dlpack(producer, -1)


def test_padded_sub_byte_round_trip():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.arange(6, dtype=np.uint8).astype(ml_dtypes.int4)
    producer = Producer(a, dtype=(0, 4, 1), flags=dlpack.FLAG_IS_SUBBYTE_TYPE_PADDED)
    view = StridedMemoryView.from_dlpack(producer, -1)
    assert view.dtype == np.dtype(ml_dtypes.int4)
    again = StridedMemoryView.from_dlpack(view, -1)  # our export sets the padded flag again
    assert again.dtype == np.dtype(ml_dtypes.int4)


@pytest.mark.parametrize(
    ("stream_ptr", "error", "message"),
    [
        ("0", TypeError, "stream_ptr='0' must be a stream handle"),
        (1.5, TypeError, "stream_ptr=1.5 must be a stream handle"),
        (True, TypeError, "stream_ptr=True must be a stream handle"),
    ],
)
def test_cpu_stream_rules(stream_ptr, error, message):
    producer = Producer(np.arange(3.0))
    with pytest.raises(error, match=message):
        StridedMemoryView.from_dlpack(producer, stream_ptr)
    assert producer.requests == []


def test_cpu_producers_are_asked_with_stream_none_whatever_the_consumer_stream():
    """DECISIONS 12: a host producer has no stream to order; DLPack gives CPU producers
    stream=None (NumPy raises RuntimeError for another value)."""
    producer = Producer(np.arange(3.0))
    for stream_ptr in (0, None, -1, 7, 2**40, np.int64(5)):
        StridedMemoryView.from_dlpack(producer, stream_ptr)
    StridedMemoryView.from_dlpack(producer)
    assert [r["stream"] for r in producer.requests] == [None] * 7
    for stream_ptr in (1, 2, 7, 2**40):
        for door in (StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface):
            view = door(np.arange(3.0), stream_ptr)
            np.testing.assert_array_equal(np.from_dlpack(view), np.arange(3.0))


def test_cuda_stream_rules():
    assert dlpack.producer_stream(2, -1) == -1
    assert dlpack.producer_stream(2, 5) == 5
    assert dlpack.producer_stream(2, 0) == 1  # the legacy default stream: DLPack forbids 0
    with pytest.raises(BufferError, match="ambiguous for a CUDA tensor"):
        dlpack.producer_stream(2, None)
    assert dlpack.producer_stream(3, None) is None  # pinned: passed through
    assert dlpack.producer_stream(13, 9) == 9  # managed: passed through

    class Stream:
        def __cuda_stream__(self):
            return (0, 1234)

    assert dlpack.producer_stream(2, Stream()) == 1234


def test_consume_capsule_errors():
    a = np.arange(3.0)
    capsule = a.__dlpack__(max_version=(1, 0))
    dlpack.consume_capsule(capsule).release()
    with pytest.raises(BufferError, match="already consumed"):
        dlpack.consume_capsule(capsule)
    with pytest.raises(BufferError, match="not a DLPack capsule"):
        dlpack.consume_capsule(object())
    other = new_capsule(8, b"something_else", None)
    with pytest.raises(BufferError, match="b'something_else' is not a DLPack tensor capsule"):
        dlpack.consume_capsule(other)


def test_no_dlpack_is_a_type_error():
    with pytest.raises(TypeError, match="object does not support DLPack"):
        StridedMemoryView.from_dlpack(object(), -1)

    class OnlyDunder:
        def __dlpack__(self, **kwargs):
            raise AssertionError("must not be called")

    with pytest.raises(TypeError, match="OnlyDunder object does not support DLPack"):
        StridedMemoryView.from_dlpack(OnlyDunder(), -1)


# ----------------------------------------------------------------------------- export
class InterfaceOnly:
    """Hides the ndarray: its views are exported by layoutkit's own DLPack code."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


def _view(array):
    return StridedMemoryView.from_array_interface(InterfaceOnly(array))


def test_views_of_ndarrays_export_what_they_were_made_with():
    """The capsule describes the view, not the array's metadata now (issue 9)."""
    a = np.arange(12.0).reshape(3, 4)
    view = StridedMemoryView.from_dlpack(a, -1)
    a.shape = (4, 3)
    assert np.from_dlpack(view).shape == (3, 4)
    assert np.asarray(view).shape == (3, 4)
    assert StridedMemoryView.from_dlpack(view).shape == (3, 4)


def test_views_of_ndarrays_keep_the_array_alive_as_long_as_needed():
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    alive = weakref.ref(a)
    view = StridedMemoryView.from_dlpack(a, -1)
    consumer = np.from_dlpack(view)
    del view
    np.testing.assert_array_equal(consumer, a)
    assert consumer.__array_interface__["data"][0] == a.__array_interface__["data"][0]
    del a
    gc.collect()
    assert alive() is not None
    del consumer
    gc.collect()
    assert alive() is None


class LegacyConsumerShim:
    """Makes NumPy consume the legacy capsule of ``view`` (as a pre-1.0 consumer would)."""

    def __init__(self, view):
        self.view = view

    def __dlpack_device__(self):
        return self.view.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.view.__dlpack__()


@pytest.mark.parametrize("legacy", [False, True])
def test_export_keeps_the_view_alive_and_deleter_runs_once(legacy):
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    view = _view(a)
    alive = weakref.ref(view)
    references = sys.getrefcount(view)
    consumer = np.from_dlpack(LegacyConsumerShim(view) if legacy else view)
    assert sys.getrefcount(view) == references + 1  # the managed tensor's reference
    del view
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(consumer, a)
    assert consumer.__array_interface__["data"][0] == a.__array_interface__["data"][0]
    del consumer
    gc.collect()
    assert alive() is None


def test_unconsumed_capsule_releases_the_view():
    view = _view(np.arange(3.0))
    alive = weakref.ref(view)
    capsule = view.__dlpack__(max_version=(1, 0))
    legacy_capsule = view.__dlpack__()
    del view
    gc.collect()
    assert alive() is not None
    del capsule
    gc.collect()
    assert alive() is not None
    del legacy_capsule
    gc.collect()
    assert alive() is None


def test_consumer_errors_keep_their_exception_and_release_the_view():
    """A consumer that fails after taking our capsule calls our deleter with its exception
    set; the C deleter and destructor keep that exception, and nothing leaks."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    array_view = StridedMemoryView.from_dlpack(np.zeros(4, dtype=ml_dtypes.bfloat16), -1)
    view = StridedMemoryView.from_buffer(array_view.buffer, array_view.layout, array_view.dtype)
    alive = weakref.ref(view)
    with pytest.raises(RuntimeError, match="Unsupported dtype"):  # NumPy has no bfloat16 code
        np.from_dlpack(view)
    del view
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("versioned", [True, False])
def test_numpy_deleter_and_destructor_are_used(versioned):
    deleter, destructor = dlpack._FUNCTIONS[versioned]
    assert (deleter, destructor) != dlpack._PYTHON_FUNCTIONS[versioned]
    assert dlpack._check_numpy_deleter(deleter, versioned)


@pytest.mark.parametrize("versioned", [True, False])
def test_python_fallback_deleter_and_destructor(monkeypatch, versioned):
    """Where NumPy's C functions cannot be used, ctypes callbacks do the same work."""
    monkeypatch.setitem(dlpack._FUNCTIONS, versioned, dlpack._PYTHON_FUNCTIONS[versioned])
    monkeypatch.setattr(dlpack, "_packers", {})  # the compiled packer needs NumPy's functions
    max_version = (1, 0) if versioned else None
    a = np.arange(6.0)[::-2]
    consumed = _view(a)
    alive = weakref.ref(consumed)
    out = np.from_dlpack(LegacyConsumerShim(consumed) if not versioned else consumed)
    np.testing.assert_array_equal(out, a)
    unconsumed = _view(a)
    also_alive = weakref.ref(unconsumed)
    capsule = unconsumed.__dlpack__(max_version=max_version)
    del consumed, unconsumed
    gc.collect()
    assert alive() is not None and also_alive() is not None
    del out, capsule
    gc.collect()
    assert alive() is None and also_alive() is None


def test_export_fields_through_our_own_import():
    a = np.arange(24, dtype=np.complex64).reshape(2, 3, 4).transpose(2, 0, 1)[::-1]
    view = _view(a)
    with dlpack.consume_capsule(view.__dlpack__(max_version=(1, 2))) as tensor:
        assert tensor.versioned and tensor.flags == 0
        assert tensor.shape == a.shape
        assert tensor.strides == tuple(s // a.itemsize for s in a.strides)
        assert tensor.data == a.__array_interface__["data"][0] and tensor.byte_offset == 0
        assert tensor.dtype_triple == (5, 64, 1) and tensor.device == (1, 0)


def test_export_zero_size_has_null_data():
    view = _view(np.zeros((3, 0)))
    with dlpack.consume_capsule(view.__dlpack__(max_version=(1, 0))) as tensor:
        assert tensor.data is None or tensor.data == 0
        assert tensor.shape == (3, 0)


def test_export_zero_d():
    view = _view(np.array(2.5))
    out = np.from_dlpack(view)
    assert out.shape == () and out == 2.5


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"copy": True}, BufferError, "copy=True"),
        ({"dl_device": (2, 0)}, BufferError, "dl_device=\\(2, 0\\)"),
        ({"max_version": [1, 0]}, TypeError, "max_version=\\[1, 0\\] must be a"),
        ({"stream": "x"}, TypeError, "must be a stream handle"),
    ],
)
def test_export_rejects(kwargs, error, message):
    with pytest.raises(error, match=message):
        _view(np.arange(3.0)).__dlpack__(**kwargs)


def test_export_accepts_own_device_and_copy_false():
    view = _view(np.arange(3.0))
    capsule = view.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False, stream=-1)
    dlpack.consume_capsule(capsule).release()


def test_export_without_dtype_or_with_unsupported_dtype():
    a = np.zeros(4, dtype="M8[s]")
    view = StridedMemoryView.from_array_interface(a)
    with pytest.raises(BufferError, match="no DLPack equivalent"):
        view.__dlpack__(max_version=(1, 0))
    raw = view.view(dtype=None)
    assert raw is view  # both None: the view itself
    untyped = StridedMemoryView.from_buffer(view.buffer, view.layout)
    with pytest.raises(BufferError, match="has no dtype"):
        untyped.__dlpack__(max_version=(1, 0))


def test_deleter_runs_even_when_the_consumer_is_the_last_reference():
    """The exporter dies inside our deleter; nothing else may touch it afterwards."""
    for _ in range(100):
        np.from_dlpack(_view(np.arange(5.0)))
    gc.collect()
    assert sys.getrefcount(None) > 0  # the interpreter is still in one piece


@pytest.mark.parametrize(
    ("shape", "strides", "error", "message"),
    [
        ((-1,), (1,), ValueError, "shape\\[0\\] = -1 is negative"),
        ((2,), (2**62,), OverflowError, "int64"),
        ((2**40, 2**40), (0, 0), OverflowError, "int64"),
        ((3,), (2**62 + 5,), OverflowError, "int64"),  # not CuPy's unsigned division
    ],
)
def test_impossible_dlpack_layouts_are_refused_at_import(shape, strides, error, message):
    """A producer's numbers are checked as StridedLayout checks them, before a view exists."""
    producer = Producer(np.zeros(1), shape=shape, strides=strides)
    with pytest.raises(error, match=message):
        StridedMemoryView.from_dlpack(producer, -1)
    gc.collect()
    assert producer.deleted == 1


def test_dlpack_layouts_match_the_checked_constructor():
    for array in (
        np.zeros((3, 0, 2)),
        np.zeros((4, 5))[::-2, 1::2],
        np.zeros(()),
        np.zeros(7)[::3],
    ):
        view = StridedMemoryView.from_dlpack(Producer(array), -1)
        strides = tuple(s // 8 for s in array.strides)
        expected = StridedLayout(array.shape, strides, 8)
        assert view.layout.shape == expected.shape and view.layout.strides == expected.strides
        assert (
            view.layout.offset_bounds == (0, expected.max_offset - expected.min_offset)
            or array.size == 0
        )


# ----------------------------------------------------------------------------- issue 9: checks
@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"ndim": -1, "shape": ()}, BufferError, "ndim -1"),
        ({"ndim": 65, "shape": ()}, BufferError, "ndim 65"),
        ({"data": 2**64 - 8, "byte_offset": 16}, BufferError, "beyond the 64-bit address space"),
        ({"data": 2**64 - 8}, BufferError, "reach beyond the 64-bit address space"),
        ({"data": 8, "strides": (-1,)}, BufferError, "reach beyond the 64-bit address space"),
        ({"dtype": (2, 32, 2)}, BufferError, "lanes != 1"),
        ({"dtype": (2, 0, 1)}, TypeError, "no NumPy equivalent"),
        ({"shape": (3,), "strides": (2**61,)}, OverflowError, "int64"),
        ({"shape": (3,), "strides": (-(2**61),)}, OverflowError, "int64"),
        ({"shape": (2**62, 4)}, OverflowError, "int64"),
    ],
    ids=str,
)
def test_hostile_dlpack_fields_are_refused_and_the_deleter_runs_once(fields, error, message):
    a = np.arange(3.0)
    producer = Producer(a, **fields)
    with pytest.raises(error, match=message):
        StridedMemoryView.from_dlpack(producer, -1)
    gc.collect()
    assert producer.deleted == 1


def test_byte_offset_of_zero_size_tensors_is_harmless():
    view = StridedMemoryView.from_dlpack(Producer(np.zeros(0), data=0, byte_offset=0), -1)
    assert view.ptr == 0 and view.size == 0


def test_export_that_cannot_be_packed_allocates_nothing_and_keeps_the_exporter():
    exporter = object()
    references = sys.getrefcount(exporter)
    for ptr, shape in ((2**64, (1,)), (-1, (1,)), (4096, (2**63,))):
        with pytest.raises(BufferError, match="cannot describe the tensor in DLPack"):
            dlpack.export_capsule(exporter, ptr, shape, (1,), (2, 32, 1), (1, 0), 0, True)
    assert sys.getrefcount(exporter) == references

    def failing_export():
        with contextlib.suppress(BufferError):
            dlpack.export_capsule(exporter, 4096, (2**63,), (1,), (2, 32, 1), (1, 0), 0, True)

    failing_export()
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    for _ in range(10_000):
        failing_export()
    gc.collect()
    growth = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    assert growth < 16 * 1024, f"{growth} bytes still allocated after 10,000 failed exports"


def test_consumer_stream_is_the_one_stream_reading():
    class CuPyStream:
        ptr = 4096

    class CudaStream:
        def __cuda_stream__(self):
            return (0, 8192)

    assert dlpack.consumer_stream(None) is None
    assert dlpack.consumer_stream(np.int64(-1)) == -1
    assert dlpack.consumer_stream(CuPyStream()) == 4096
    assert dlpack.consumer_stream(CudaStream()) == 8192
    for bad in (True, 1.0, "1", -2, object()):
        with pytest.raises(TypeError, match="must be a stream handle"):
            dlpack.consumer_stream(bad)


def test_managed_imports_from_cupy_like_producers_keep_their_strides():
    """The CuPy-14 repair needs a CuPy producer and a stride the checks refused."""
    a = np.arange(6.0)
    CuPyLike = type("ndarray", (Producer,), {"__module__": "cupy._core.core"})
    view = StridedMemoryView.from_dlpack(CuPyLike(a[::2]), -1)
    assert view.strides == (2,)


def test_look_alikes_of_cupy_arrays_take_the_protocol(monkeypatch):
    """CuPy's fast path reads ``data.ptr`` and friends: only CuPy's own class gets it."""
    import types

    from layoutkit.interop import fastpaths

    fake_cupy = types.ModuleType("cupy")
    fake_cupy.ndarray = type("ndarray", (), {"__module__": "cupy._core.core"})
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    CuPyLike = type("ndarray", (Producer,), {"__module__": "cupy._core.core"})
    assert fastpaths.reader_for(CuPyLike) is None
    assert fastpaths.reader_for(fake_cupy.ndarray) is fastpaths._cupy
    view = StridedMemoryView.from_dlpack(CuPyLike(np.arange(4.0)), -1)
    assert view.shape == (4,)


def test_native_reads_have_an_off_switch():
    """LAYOUTKIT_NATIVE_READS=0: the C-API fallbacks, with the same results."""
    import os
    import subprocess
    import textwrap

    code = textwrap.dedent(
        """
        import numpy as np
        from layoutkit import StridedMemoryView
        from layoutkit.interop import _native
        assert not _native.DIRECT_READS
        assert _native.ndarray_data_pointer is _native._array_data_interface
        a = np.arange(12.0).reshape(3, 4)[:, ::-1]
        view = StridedMemoryView.from_dlpack(a)
        assert view.ptr == a.ctypes.data
        class Wrapped:  # not an ndarray: its capsule is read through ctypes calls
            __dlpack__ = a.__dlpack__
            __dlpack_device__ = a.__dlpack_device__
        again = StridedMemoryView.from_dlpack(Wrapped())
        np.testing.assert_array_equal(np.from_dlpack(again), a)
        print("ok")
        """
    )
    env = {**os.environ, "LAYOUTKIT_NATIVE_READS": "0"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def _consumed_fields(capsule):
    with dlpack.consume_capsule(capsule) as tensor:
        return (
            tensor.data, tensor.byte_offset, tensor.device, tensor.ndim, tensor.dtype_triple,
            tensor.flags, tensor.shape, tensor.strides, tensor.versioned,
        )


@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize(
    "array",
    [np.arange(24.0).reshape(2, 3, 4)[:, ::-1, ::2], np.array(7, np.int16), np.zeros((0, 3))],
    ids=["3-d", "0-d", "empty"],
)
def test_compiled_packer_and_ctypes_make_the_same_capsules(monkeypatch, versioned, array):
    if not dlpack.make_packer(versioned):
        pytest.skip("llvmlite cannot compile here")
    max_version = (1, 0) if versioned else None
    view = StridedMemoryView.from_dlpack(array, -1)
    references = sys.getrefcount(view)
    compiled = _consumed_fields(view.__dlpack__(max_version=max_version))
    with monkeypatch.context() as patch:
        patch.setattr(dlpack, "_packers", {})
        by_ctypes = _consumed_fields(view.__dlpack__(max_version=max_version))
    assert compiled == by_ctypes
    assert compiled[6] == array.shape and compiled[0] == (view.ptr if array.size else 0)
    unconsumed = [view.__dlpack__(max_version=max_version) for _ in range(3)]
    assert sys.getrefcount(view) == references + 3
    del unconsumed
    assert sys.getrefcount(view) == references


def test_a_packer_that_cannot_be_made_leaves_the_ctypes_calls(monkeypatch):
    from layoutkit.interop import _packer

    monkeypatch.setattr(dlpack, "_packers", {True: None})
    monkeypatch.setattr(_packer, "compile_packer", lambda *args: None)
    assert not dlpack.make_packer(True)
    assert dlpack._packers == {}
    a = np.arange(6.0)
    np.testing.assert_array_equal(np.from_dlpack(StridedMemoryView.from_dlpack(a, -1)), a)


def test_the_packer_is_compiled_once_exports_are_many():
    """Without llvmlite loaded, the first PACKER_AFTER - 1 exports go through ctypes (no
    compile time for a program that exports a few views); the next one compiles it. Where
    llvmlite is loaded already (by Numba), the first export does."""
    import subprocess
    import textwrap

    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from layoutkit import StridedMemoryView
        from layoutkit.interop import dlpack
        view = StridedMemoryView.from_dlpack(np.arange(6.0), -1)
        if "llvmlite.binding" in sys.modules:  # loaded with Numba: nothing to wait for
            before = 0
        else:
            before = dlpack.PACKER_AFTER - 1
        for _ in range(before):
            np.from_dlpack(view)
        assert dlpack._packers[True] is None and ("llvmlite.binding" in sys.modules) == (not before)
        out = np.from_dlpack(view)
        assert dlpack._packers.get(True) is not None, "no packer"
        assert (np.from_dlpack(view) == out).all() and (out == np.arange(6.0)).all()
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_many_exports_leak_nothing():
    """100,000 capsules through the compiled packer, half consumed by NumPy, half dropped
    unconsumed: the view's references and the traced memory come back."""
    dlpack.make_packer(True)
    view = StridedMemoryView.from_dlpack(np.arange(12.0).reshape(3, 4)[:, ::2], -1)
    references = sys.getrefcount(view)
    for _ in range(1000):  # warm the caches
        np.from_dlpack(view)
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    for _ in range(50_000):
        np.from_dlpack(view)
        view.__dlpack__(max_version=(1, 0))
    gc.collect()
    growth = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    assert sys.getrefcount(view) == references
    assert growth < 16 * 1024, f"{growth} bytes still allocated after 100,000 exports"


@pytest.mark.parametrize("dl_device", [(), (1,), 5, "cpu", (1.0, 0)])
def test_a_dl_device_that_is_no_device_pair_is_a_buffer_error(dl_device):
    """cuda.core 1.2.2 raises BufferError for every dl_device it does not serve (its
    test_buffer_dunder_dlpack passes ``dl_device=()``); the error is a TypeError too."""
    from layoutkit import Buffer

    a = np.zeros(16, np.uint8)
    for exporter in (Buffer.from_handle(a.ctypes.data, 16, owner=a), StridedMemoryView.from_dlpack(a, -1)):
        with pytest.raises(BufferError, match="dl_device must be None or a"):
            exporter.__dlpack__(dl_device=dl_device)
        with pytest.raises(TypeError, match="dl_device must be None or a"):
            exporter.__dlpack__(dl_device=dl_device)
