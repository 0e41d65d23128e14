"""Producers on the CPU: torch (DLPack 1.3's C exchange API), JAX, and our own exchange API.

Every import is compared with the producer's own description (pointer, shape, strides,
dtype) and element by element through NumPy; lifetimes are followed with weak
references. torch and JAX are optional test dependencies (``importorskip``).
"""

import ctypes
import gc
import sys
import tracemalloc
import types
import weakref

import numpy as np
import pytest
from helpers.producers import DLTensor, Producer

from layoutkit import StridedLayout, StridedMemoryView
from layoutkit.interop import dlpack, exchange, fastpaths


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def torch_cases(torch):
    base = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    return {
        "c_order": base,
        "sliced": base[:, 1:, ::2],
        "transposed": base.permute(2, 0, 1),
        "zero_size": base[:, :0],
        "zero_d": torch.tensor(3.5),
        "int8": torch.arange(30, dtype=torch.int8)[::4],
        "bool": torch.arange(6) % 2 == 0,
        "complex": (torch.arange(6) * (1 + 2j)).to(torch.complex64).reshape(2, 3).t(),
        "expanded": torch.arange(4.0).expand(3, 4),
        "offset": torch.arange(100, dtype=torch.int64)[10:20],
    }


TORCH_CASES = ["c_order", "sliced", "transposed", "zero_size", "zero_d", "int8", "bool",
               "complex", "expanded", "offset"]  # fmt: skip
IMPORTERS = {
    "from_dlpack": lambda t: StridedMemoryView.from_dlpack(t, -1),
    "from_dlpack_no_stream": StridedMemoryView.from_dlpack,
    "from_any_interface": StridedMemoryView.from_any_interface,
}


@pytest.mark.parametrize("importer", IMPORTERS)
@pytest.mark.parametrize("case", TORCH_CASES)
def test_torch_round_trip(torch, importer, case):
    t = torch_cases(torch)[case]
    view = IMPORTERS[importer](t)
    assert view.exporting_obj is t
    assert view.shape == tuple(t.shape)
    if t.numel():
        assert view.ptr == t.data_ptr()
        assert view.strides == tuple(t.stride())
    assert view.dtype == np.dtype(str(t.dtype).removeprefix("torch."))
    assert view.device_id == -1 and not view.is_device_accessible
    assert view.readonly == (0 in t.stride() and t.numel() > 1)  # aliasing views (DECISIONS 19)
    np.testing.assert_array_equal(np.asarray(view), t.numpy())
    np.testing.assert_array_equal(torch.from_dlpack(view).numpy(), t.numpy())


def test_torch_goes_through_the_exchange_api(torch, monkeypatch):
    """The fast path is DLPack 1.3's C table, not __dlpack__ and not torch's object layout."""
    assert fastpaths.reader_for(torch.Tensor).__name__ == "_torch"
    api = exchange.exchange_api(torch.Tensor)
    assert api.version[0] == 1 and api.dltensor_from_py_object is not None

    def forbidden(*args, **kwargs):
        raise AssertionError("__dlpack__ was called")

    monkeypatch.setattr(torch.Tensor, "__dlpack__", forbidden)
    t = torch.arange(6.0).reshape(2, 3)
    assert StridedMemoryView.from_dlpack(t, -1).shape == (2, 3)
    assert fastpaths.reader_for(torch.nn.Parameter).__name__ == "_torch"  # found on the type


def test_torch_without_the_exchange_api_falls_back_to_dlpack(torch, monkeypatch):
    monkeypatch.setitem(fastpaths._readers, torch.Tensor, None)
    t = torch.arange(6.0).reshape(2, 3).t()
    view = StridedMemoryView.from_dlpack(t, -1)
    assert isinstance(view.buffer.owner, dlpack.ImportedTensor)  # a consumed capsule
    np.testing.assert_array_equal(np.asarray(view), t.numpy())


def test_torch_tensors_the_protocol_refuses_are_refused(torch):
    """autograd and the conjugate bit: torch's own refusal; the negative bit: ours."""
    with pytest.raises(BufferError, match="require gradient"):
        StridedMemoryView.from_dlpack(torch.ones(2, requires_grad=True))
    conjugated = torch.tensor([1 + 2j], dtype=torch.complex64).conj()
    with pytest.raises(BufferError, match="conjugate bit"):
        StridedMemoryView.from_any_interface(conjugated)
    with pytest.raises(BufferError, match="negative bit"):
        StridedMemoryView.from_dlpack(conjugated.imag)  # memory holds +2, the value is -2
    resolved = StridedMemoryView.from_dlpack(conjugated.imag.resolve_neg())
    assert np.asarray(resolved).tolist() == [-2.0]


def test_torch_bfloat16_both_ways(torch):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    view = StridedMemoryView.from_dlpack(t)
    assert view.dtype == np.dtype(ml_dtypes.bfloat16)
    assert np.asarray(view).dtype == ml_dtypes.bfloat16  # array interface: a real bfloat16 array
    np.testing.assert_array_equal(np.asarray(view).astype(np.float32), t.float().numpy())
    back = torch.from_dlpack(view)  # DLPack code 4 (bfloat)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)


def test_torch_view_keeps_the_tensor_alive(torch):
    t = torch.arange(8.0)
    alive = weakref.ref(t)
    view = StridedMemoryView.from_any_interface(t)
    buffer = view.buffer
    del t
    gc.collect()
    assert alive() is not None and np.asarray(view)[7] == 7.0
    del view
    gc.collect()
    assert alive() is not None  # the buffer still needs it
    del buffer
    gc.collect()
    assert alive() is None


def test_torch_writes_through_the_view_are_seen(torch):
    t = torch.zeros(3, 4)
    view = StridedMemoryView.from_dlpack(t[:, ::2])
    view[1, 1] = 5.0
    view.copy_from(np.ones((3, 2), np.float32))
    assert t[:, ::2].sum().item() == 6.0 and t[:, 1::2].sum().item() == 0.0


def test_no_leak_over_100000_torch_imports(torch):
    t = torch.arange(12.0).reshape(3, 4)[:, ::2]
    references = sys.getrefcount(t)

    def import_once():
        view = StridedMemoryView.from_dlpack(t, -1)
        view.buffer  # noqa: B018

    for _ in range(100_000):
        import_once()
    gc.collect()
    assert sys.getrefcount(t) == references
    tracemalloc.start()
    for _ in range(1_000):
        import_once()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(10_000):
        import_once()
    growth = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert growth < 64 * 1024, f"memory grew by {growth} bytes"


def test_torch_cpu_streams_are_ignored_and_cuda_rules_kept(torch):
    t = torch.ones(3)
    for stream_ptr in (None, -1, 0):
        assert StridedMemoryView.from_dlpack(t, stream_ptr).shape == (3,)
    with pytest.raises(TypeError, match="must be a stream handle"):
        StridedMemoryView.from_dlpack(t, "0")


# ----------------------------------------------------------------------------- JAX
@pytest.fixture(scope="module")
def jnp():
    """jax.numpy with its arrays on the CPU (on a GPU machine too)."""
    jax = pytest.importorskip("jax")
    with jax.default_device(jax.devices("cpu")[0]):
        yield pytest.importorskip("jax.numpy")


@pytest.mark.parametrize("shape", [(3, 4), (), (0, 5), (2, 3, 4)], ids=str)
def test_jax_round_trip(jnp, shape):
    x = jnp.arange(int(np.prod(shape)), dtype=jnp.float32).reshape(shape)
    view = StridedMemoryView.from_any_interface(x)
    assert view.exporting_obj is x and view.shape == shape and view.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(view), np.asarray(x))
    back = jnp.from_dlpack(StridedMemoryView.from_array_interface(np.asarray(view).copy()))
    np.testing.assert_array_equal(np.asarray(back), np.asarray(x))


def test_jax_takes_the_dlpack_route(jnp):
    x = jnp.ones((2, 2))
    assert fastpaths.reader_for(type(x)) is fastpaths._jax
    assert isinstance(StridedMemoryView.from_dlpack(x).buffer.owner, dlpack.ImportedTensor)


# ----------------------------------------------------------------------------- our own exchange API
_TABLE = ctypes.Structure.__class__(
    "DLPackExchangeAPI",
    (ctypes.Structure,),
    {
        "_fields_": [
            ("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev_api", ctypes.c_void_p),
            ("managed_tensor_allocator", ctypes.c_void_p),
            ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
            ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
            ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
            ("current_work_stream", ctypes.c_void_p),
        ]  # fmt: skip
    },
)
_get_pointer = ctypes.PyDLL(None, handle=ctypes.pythonapi._handle).PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)


def our_table():
    """What a C consumer finds through ``type(view).__dlpack_c_exchange_api__``."""
    capsule = StridedMemoryView.__dlpack_c_exchange_api__
    assert StridedMemoryView.__c_dlpack_exchange_api__ is capsule  # cuda.core's alias
    return _TABLE.from_address(_get_pointer(capsule, b"dlpack_exchange_api"))


def test_exchange_table_header():
    table = our_table()
    assert (table.major, table.minor, table.prev_api) == (1, 3, None)
    for name, _ in _TABLE._fields_[3:]:
        assert getattr(table, name), name


def test_exchange_borrowed_dltensor_describes_the_view():
    a = np.arange(24, dtype=np.int16).reshape(4, 6)[::-1, 1::2]
    view = StridedMemoryView.from_dlpack(a)
    out = DLTensor()
    assert _FROM_PY(our_table().dltensor_from_py_object_no_sync)(view, ctypes.addressof(out)) == 0
    assert out.data == a.__array_interface__["data"][0] and out.byte_offset == 0
    assert (out.device.device_type, out.device.device_id, out.ndim) == (1, 0, 2)
    assert (out.dtype.code, out.dtype.bits, out.dtype.lanes) == (0, 16, 1)
    assert out.shape[:2] == [4, 3] and out.strides[:2] == [-6, 2]


def test_exchange_managed_tensor_round_trip_and_deleter_once():
    a = np.arange(6.0).reshape(2, 3).T
    view = StridedMemoryView.from_dlpack(a)
    references = sys.getrefcount(view)
    out = ctypes.c_void_p()
    table = our_table()
    assert _FROM_PY(table.managed_tensor_from_py_object_no_sync)(view, ctypes.addressof(out)) == 0
    assert sys.getrefcount(view) == references + 1  # manager_ctx holds the view
    # hand the managed tensor back: a new view owns it and calls its deleter once
    to_py = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    result = ctypes.c_void_p()
    assert to_py(table.managed_tensor_to_py_object_no_sync)(out.value, ctypes.addressof(result)) == 0
    again = ctypes.cast(result.value, ctypes.py_object).value
    ctypes.pythonapi.Py_DecRef(ctypes.py_object(again))  # the new reference we were given
    assert isinstance(again, StridedMemoryView) and again.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(again), a)
    del again
    gc.collect()
    assert sys.getrefcount(view) == references


def test_exchange_failures_return_minus_one():
    table = our_table()
    out = DLTensor()
    assert _FROM_PY(table.dltensor_from_py_object_no_sync)(object(), ctypes.addressof(out)) == -1
    untyped = StridedMemoryView.from_buffer(
        StridedMemoryView.from_dlpack(np.zeros(4)).buffer, StridedLayout.dense((4,), 8)
    )
    assert _FROM_PY(table.dltensor_from_py_object_no_sync)(untyped, ctypes.addressof(out)) == -1
    errors = []
    set_error = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)(
        lambda context, kind, message: errors.append(kind)
    )
    allocator = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
    )(table.managed_tensor_allocator)
    slot = ctypes.c_void_p(1)
    assert allocator(None, ctypes.addressof(slot), None, ctypes.cast(set_error, ctypes.c_void_p)) == -1
    assert errors == [b"NotImplementedError"] and slot.value is None


def test_exchange_current_work_stream_is_null():
    stream = ctypes.c_void_p(7)
    function = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.c_void_p)(
        our_table().current_work_stream
    )
    assert function(2, 0, ctypes.addressof(stream)) == 0 and stream.value is None


def test_a_producer_with_only_the_exchange_api_is_imported_through_it():
    """Any type with the capsule takes it: here, our own views (as another library would)."""
    Subclass = type("Subclass", (StridedMemoryView,), {"__slots__": ()})
    a = np.arange(5.0)
    view = Subclass.from_dlpack(a)
    record = exchange.exchange_record(view, exchange.exchange_api(Subclass), -1, False)
    assert record.exporter is view and record.layout.shape == (5,)
    np.testing.assert_array_equal(np.asarray(StridedMemoryView._from_record(record)), a)


def test_types_without_a_valid_exchange_capsule_have_no_api():
    Bad = type("Bad", (), {"__dlpack_c_exchange_api__": object()})
    assert exchange.exchange_api(Bad) is None
    Named = type("Named", (), {"__dlpack_c_exchange_api__": np.zeros(1).__dlpack__()})
    assert exchange.exchange_api(Named) is None  # a capsule, but not the exchange table
    assert exchange.exchange_api(Producer) is None


# ----------------------------------------------------------------------------- kernel arguments
def test_kernel_arguments_from_host_tensors_are_refused_on_the_host(torch):
    """Launch conversion reads torch tensors through the same fast path (no GPU needed here)."""
    from layoutkit.cuda._kernel import ViewKernel

    kernel = ViewKernel(types.SimpleNamespace(targetoptions={}))
    with pytest.raises(ValueError, match="argument 1: a host-only tensor"):
        kernel.launch_arguments((1.5, torch.ones(3)))


def test_kernel_arguments_from_device_records(monkeypatch):
    """A device-located record becomes the view's kernel parameters, without a view object."""
    from layoutkit._driver import Location
    from layoutkit._numba_view import view_numba_type
    from layoutkit.cuda import _kernel
    from layoutkit.cuda._kernel import ViewKernel

    class DeviceTensor:
        """A producer whose fast path says its memory is on device 0."""

    a = np.arange(12, dtype=np.float32).reshape(3, 4)

    def reader(obj, stream_ptr, dlpack_only):
        assert stream_ptr == 1  # the launch stream (the legacy default stream)
        record = fastpaths.ndarray_record(a[:, ::2])
        return record._replace(location=Location(0, True, False, False), exporter=obj)

    monkeypatch.setitem(fastpaths._readers, DeviceTensor, reader)
    monkeypatch.setattr(_kernel, "_several_devices", lambda: False)
    kernel = ViewKernel(types.SimpleNamespace(targetoptions={}))
    (argument,) = kernel.launch_arguments((DeviceTensor(),))
    view = StridedMemoryView.from_dlpack(a[:, ::2])
    assert argument.values == (a.ctypes.data, 3, 2, 4, 2, 0, 11)  # ..., offset, limit
    assert argument._numba_type_ == view_numba_type(view)


# ----------------------------------------------------------------------------- threads
def test_imports_from_several_threads_see_their_own_tensors(torch):
    """The exchange API's out-parameters are per thread: no thread reads another's."""
    import threading

    tensors = [torch.arange(n, dtype=torch.float32)[::2] for n in range(10, 90, 10)]
    arrays = [np.arange(n, dtype=np.int16).reshape(-1, 2)[:, ::-1] for n in range(10, 90, 10)]
    failures = []

    def work(offset):
        try:
            for step in range(2000):
                t = tensors[(offset + step) % len(tensors)]
                view = StridedMemoryView.from_dlpack(t)
                assert view.ptr == t.data_ptr() and view.shape == tuple(t.shape)
                a = arrays[(offset + step) % len(arrays)]
                other = StridedMemoryView.from_any_interface(a)
                assert other.ptr == a.ctypes.data and other.strides == (2, -1)
                assert np.asarray(other)[0, 0] == a[0, 0]
        except Exception as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[0]


def test_no_leak_over_100000_exchange_exports_and_imports():
    """Managed tensors through our exchange table, released by the consumer each time."""
    view = StridedMemoryView.from_dlpack(np.arange(6.0).reshape(2, 3))
    references = sys.getrefcount(view)
    table = our_table()
    export = _FROM_PY(table.managed_tensor_from_py_object_no_sync)
    out = ctypes.c_void_p()
    deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

    def round_trip():
        assert export(view, ctypes.addressof(out)) == 0
        deleter(dlpack.VERSIONED.unpack(ctypes.string_at(out.value, dlpack.VERSIONED.size))[3])(
            out.value
        )
        again = exchange.exchange_record(view, exchange.exchange_api(type(view)), -1, False)
        del again  # the record's tensor dies with it: its deleter runs

    for _ in range(100_000):
        round_trip()
    gc.collect()
    assert sys.getrefcount(view) == references
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    for _ in range(10_000):
        round_trip()
    gc.collect()
    growth = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    assert growth < 64 * 1024, f"memory grew by {growth} bytes"
