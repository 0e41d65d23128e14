"""Producers on the CPU: torch (DLPack 1.3's C exchange API), JAX, and our own exchange API.

Every import is compared with the producer's own description (pointer, shape, strides,
dtype) and element by element through NumPy; lifetimes are followed with weak
references. torch and JAX are optional test dependencies (``importorskip``).
"""

import ctypes
import gc
import sys
import threading
import tracemalloc
import types
import warnings
import weakref

import numpy as np
import pytest
from helpers.hostile import Cases
from helpers.hostile_objects import type_equal_to
from helpers.producers import DLTensor, Producer

from layoutkit import StridedLayout, StridedMemoryView
from layoutkit._dtypes import is_ml_dtype
from layoutkit.interop import dlpack, exchange, fastpaths

# the calls that hand our exchange table NULL pointers, hostile objects or interrupts run
# in a child process (helpers.hostile): a regression there would crash, not fail
cases = Cases(__name__)


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
    monkeypatch.setitem(fastpaths._readers, id(torch.Tensor), (torch.Tensor, None))
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


def test_torch_view_keeps_the_tensor_memory_alive(torch):
    """The tensor's storage is the owner: set_() / .data = cannot take the view's memory."""
    t = torch.arange(8.0)
    storage = weakref.ref(t.untyped_storage())
    view = StridedMemoryView.from_any_interface(t)
    assert view.exporting_obj is t and isinstance(view.buffer.owner, torch.UntypedStorage)
    buffer = view.buffer
    t.set_(torch.zeros(2))
    del t
    gc.collect()
    assert storage() is not None and np.asarray(view)[7] == 7.0
    del view
    gc.collect()
    assert storage() is not None  # the buffer still needs it
    del buffer
    gc.collect()
    assert storage() is None


def test_torch_subclasses_are_read_through_their_protocol(torch):
    """A subclass's __dlpack__ and __torch_function__ are honoured, and torch's refusals
    (autograd, conjugate bit) and ours (negative bit) hold for subclasses too."""

    class Sub(torch.Tensor):
        pass

    class Refusing(torch.Tensor):
        def __dlpack__(self, *args, **kwargs):
            raise BufferError("Refusing exports nothing")

    assert fastpaths.reader_for(Sub).__name__ == "_torch_subclass"
    plain = torch.arange(6.0).reshape(2, 3).t().as_subclass(Sub)
    view = StridedMemoryView.from_any_interface(plain)
    assert view.strides == (1, 3)
    np.testing.assert_array_equal(np.asarray(view), plain.as_subclass(torch.Tensor).numpy())
    conjugated = torch.tensor([1 + 2j, 3 - 4j]).conj()
    for tensor, match in (
        (torch.ones(2, requires_grad=True).as_subclass(Sub), "require gradient"),
        (conjugated.as_subclass(Sub), "conjugate bit"),
        (conjugated.imag.as_subclass(Sub), "negative bit"),
        (torch.ones(2).as_subclass(Refusing), "exports nothing"),
    ):  # fmt: skip
        for door in (StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface):
            with pytest.raises(BufferError, match=match):
                door(tensor)


def test_a_type_equal_to_torch_tensor_is_no_torch_subclass(torch):
    """``_torch_of`` tested ``torch.Tensor in kind.__mro__``, which compares with ``==``: a
    type equal to torch.Tensor got the subclass reader, which called ``is_neg()`` on it
    (an AttributeError escaped). Its own protocol reads it."""
    liar = type_equal_to(torch.Tensor, "Liar", (), {
        "__dlpack__": lambda self, **kwargs: np.arange(3.0).__dlpack__(**kwargs),
        "__dlpack_device__": lambda self: (1, 0),
    })  # fmt: skip
    assert fastpaths._torch_of(liar) is None
    assert fastpaths._torch_of(torch.nn.Parameter) is torch
    assert StridedMemoryView.from_dlpack(liar()).shape == (3,)


def test_torch_tensors_dlpack_cannot_carry_are_buffer_errors(torch):
    """torch's exchange functions raise RuntimeError with a C++ trace; we name the tensor."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensors are deprecated
        quantized = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)
    for tensor, match in (
        (torch.zeros(2, dtype=torch.bits8), r"dtype torch\.bits8.*Bit types are not supported"),
        (quantized, r"dtype torch\.qint8.*QUInt/QInt types are not supported"),
        (torch.empty(2, device="meta"), r"device meta.*Cannot pack tensors on meta"),
        (torch.eye(2).to_sparse(), "layout other than torch.strided"),
    ):  # fmt: skip
        for door in (StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface):
            with pytest.raises(BufferError, match=match) as caught:
                door(tensor)
            assert "\n" not in str(caught.value)  # no C++ stack trace in the message


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


_TORCH_DTYPES = ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32",
                 "int64", "float16", "bfloat16", "float32", "float64", "complex64",
                 "complex128", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                 "float8_e5m2fnuz", "float8_e8m0fnu")  # fmt: skip


def _random_torch_tensor(torch, rng):
    """A tensor of a random dtype over a random strided layout (torch.as_strided)."""
    dtype = getattr(torch, rng.choice(_TORCH_DTYPES))
    ndim = rng.choice([0, 1, 2, 2, 3, 4])
    shape = [rng.choice([0, 1, 1, 2, 3, 5]) for _ in range(ndim)]
    strides = [rng.choice([0, 1, 2, 3, 7, 64]) for _ in range(ndim)]
    offset = rng.choice([0, 1, 17])
    span = 1 + sum((e - 1) * s for e, s in zip(shape, strides) if e)
    base = torch.randint(1, 100, (span + offset + 3,)).to(dtype)
    return torch.as_strided(base, shape, strides, offset)


def _as_numpy(torch, t):
    """What the tensor holds, as NumPy (ml_dtypes for bfloat16 and float8) via float32."""
    if t.dtype == torch.bfloat16 or "float8" in str(t.dtype):
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return t.float().numpy().astype(getattr(ml_dtypes, str(t.dtype).removeprefix("torch.")))
    return t.numpy()


def test_torch_random_layouts_agree_with_torch_and_the_protocol(torch, monkeypatch):
    """The exchange API and the __dlpack__ fallback give the same view, element by element
    what torch holds; torch.from_dlpack / numpy.from_dlpack of the view alias it."""
    import random

    rng = random.Random(20261)
    tensors = [_random_torch_tensor(torch, rng) for _ in range(300)]
    fast = [(StridedMemoryView.from_dlpack(t), StridedMemoryView.from_any_interface(t))
            for t in tensors]  # fmt: skip
    monkeypatch.setitem(fastpaths._readers, id(torch.Tensor), (torch.Tensor, None))
    for t, (view, other) in zip(tensors, fast):
        protocol = StridedMemoryView.from_dlpack(t)
        for v in (other, protocol):
            assert (v.shape, v.strides, v.dtype, v.readonly, v.device_id, v.size) == (
                view.shape, view.strides, view.dtype, view.readonly, view.device_id, view.size
            )  # fmt: skip
        assert view.shape == tuple(t.shape)
        assert view.readonly == (not StridedLayout(view.shape, view.strides, 1).is_unique)
        if t.numel():
            assert view.ptr == protocol.ptr == t.data_ptr() and view.strides == tuple(t.stride())
        expected = _as_numpy(torch, t)
        got = np.asarray(view)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes()
        back = torch.from_dlpack(view)
        assert back.dtype == t.dtype and tuple(back.shape) == tuple(t.shape)
        if t.numel():
            assert back.data_ptr() == t.data_ptr() and back.stride() == t.stride()


def test_torch_copies_agree_with_copy_(torch):
    """layoutkit.copy between torch tensors (broadcast sources, strided destinations) does
    what dst.copy_(src) does, and writes nothing outside the destination."""
    import random

    import layoutkit

    rng = random.Random(7)
    for _ in range(200):
        dtype = getattr(torch, rng.choice(("float32", "int16", "uint8", "complex64", "bfloat16")))
        shape = tuple(rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(0, 3)))
        big = torch.full(tuple(3 * e for e in shape), 99).to(dtype)
        dst = big[tuple(slice(1, 1 + 2 * e, 2) for e in shape)]
        if len(shape) >= 2 and rng.random() < 0.5:
            dst = dst.transpose(0, 1)
        src_shape = tuple(1 if rng.random() < 0.4 else e for e in dst.shape)
        src = torch.randint(0, 50, src_shape).to(dtype)
        if rng.random() < 0.5:
            src = src.expand(tuple(dst.shape))
        expected = big.clone()
        expected_dst = expected[tuple(slice(1, 1 + 2 * e, 2) for e in shape)]
        if dst.dim() >= 2 and dst.stride() != expected_dst.stride():
            expected_dst = expected_dst.transpose(0, 1)
        expected_dst.copy_(src)
        layoutkit.copy(dst, src)
        assert torch.equal(big, expected), (dtype, shape, src.shape, src.stride())


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
    # the view is read-only (JAX arrays are immutable) and still goes back to JAX in the
    # legacy capsule JAX asks for: its memory came out of JAX the same way
    assert view.readonly
    direct = jnp.from_dlpack(view)
    np.testing.assert_array_equal(np.asarray(direct), np.asarray(x))
    if x.size:
        assert direct.unsafe_buffer_pointer() == x.unsafe_buffer_pointer()


def test_legacy_exports_of_read_only_views_stay_refused_elsewhere(jnp):
    """The JAX exception is for memory that came in through a legacy capsule and a view
    that does not alias; read-only NumPy memory and broadcasts still need a versioned
    capsule."""
    view = StridedMemoryView.from_any_interface(jnp.arange(4.0, dtype=jnp.float32))
    broadcast = view.view(view.layout.broadcast_to((3, 4)))
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    for refused in (broadcast, StridedMemoryView.from_any_interface(frozen)):
        with pytest.raises(BufferError, match="needs a versioned DLPack capsule"):
            refused.__dlpack__()
        assert np.from_dlpack(refused).shape == refused.shape  # versioned: fine


_JAX_DTYPES = ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16",
               "bfloat16", "float32", "complex64", "float8_e4m3fn", "float8_e5m2",
               "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e3m4",
               "float8_e4m3", "float8_e8m0fnu")  # fmt: skip


@pytest.mark.parametrize("name", _JAX_DTYPES)
def test_jax_dtypes_are_read_only_views_of_the_same_bytes(jnp, name):
    """JAX arrays are immutable: views are read-only, as numpy.asarray(array) is."""
    if not hasattr(jnp, name):
        pytest.skip(f"this JAX has no {name}")
    x = jnp.arange(6).astype(getattr(jnp, name)).reshape(2, 3)
    expected = np.asarray(x)
    for door in (StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface):
        view = door(x)
        assert view.readonly and view.dtype == expected.dtype and view.shape == (2, 3)
        got = np.asarray(view)
        assert not got.flags.writeable and got.tobytes() == expected.tobytes()
        if not is_ml_dtype(expected.dtype):  # NumPy's from_dlpack knows no ml_dtypes types
            assert np.from_dlpack(view).tobytes() == expected.tobytes()
    import layoutkit

    with pytest.raises(ValueError, match="read-only"):
        layoutkit.copy(x, np.zeros((2, 3), expected.dtype))
    assert np.asarray(x).tobytes() == expected.tobytes()


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2", "float4_e2m1fn"])
def test_jax_packed_sub_byte_arrays_are_refused(jnp, name):
    """JAX either refuses to export them or exports them packed: never read as bytes."""
    if not hasattr(jnp, name):
        pytest.skip(f"this JAX has no {name}")
    x = jnp.arange(4).astype(getattr(jnp, name))
    with pytest.raises((BufferError, ValueError), match="DLPack|sub-byte"):
        StridedMemoryView.from_any_interface(x)


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
# dlpack.h's callers hold the GIL and read a failure's Python exception: PYFUNCTYPE does both
_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)
_TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


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
    result = ctypes.c_void_p()
    assert _TO_PY(table.managed_tensor_to_py_object_no_sync)(out.value, ctypes.addressof(result)) == 0
    again = ctypes.cast(result.value, ctypes.py_object).value
    ctypes.pythonapi.Py_DecRef(ctypes.py_object(again))  # the new reference we were given
    assert isinstance(again, StridedMemoryView) and again.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(again), a)
    del again
    gc.collect()
    assert sys.getrefcount(view) == references


@cases.case
def exchange_failures_raise_their_exception():
    """dlpack.h: -1 with a Python exception set. The exception is the one the view's own
    methods raise, here seen by a caller as a C consumer sees it (PyErr_Occurred)."""
    table = our_table()
    out = DLTensor()
    borrow = _FROM_PY(table.dltensor_from_py_object_no_sync)
    with pytest.raises(TypeError, match="py_object must be a StridedMemoryView, not object"):
        borrow(object(), ctypes.addressof(out))
    untyped = StridedMemoryView.from_buffer(
        StridedMemoryView.from_dlpack(np.zeros(4)).buffer, StridedLayout.dense((4,), 8)
    )
    with pytest.raises(BufferError, match="dtype"):
        untyped.__dlpack__()
    with pytest.raises(BufferError, match="dtype"):
        borrow(untyped, ctypes.addressof(out))
    swapped = StridedMemoryView.from_array_interface(np.zeros(3, np.dtype("<i4").newbyteorder()))
    slot = ctypes.c_void_p(1)
    with pytest.raises(BufferError, match="Non-native-endian dtype"):
        _FROM_PY(table.managed_tensor_from_py_object_no_sync)(swapped, ctypes.addressof(slot))
    assert slot.value is None  # cleared before the failure
    stream = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.c_void_p)(
        table.current_work_stream
    )
    with pytest.raises(RuntimeError, match="out_current_stream cannot be NULL"):
        stream(1, 0, None)
    # a failure leaves no exception behind for the next call
    assert stream(1, 0, ctypes.addressof(slot)) == 0 and slot.value is None


@cases.case
def exchange_failures_from_many_threads_raise_each_its_own_and_leak_nothing():
    """Each call's exception travels on its own trampoline's stack: threads failing at once
    (the GIL switching inside the callbacks) each get their own, and none is leaked."""
    table = our_table()
    borrow = _FROM_PY(table.dltensor_from_py_object_no_sync)
    stream = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.c_void_p)(
        table.current_work_stream
    )
    out = DLTensor()
    raised = []

    def fail(times):
        for _ in range(times):
            with pytest.raises(TypeError, match="py_object must be a StridedMemoryView"):
                borrow(object(), ctypes.addressof(out))
            with pytest.raises(RuntimeError, match="out_current_stream cannot be NULL"):
                stream(1, 0, None)
            raised.append(True)  # only reached where both raised what they should

    gc.collect()
    before = sys.getrefcount(TypeError), sys.getrefcount(RuntimeError)
    threads = [threading.Thread(target=fail, args=(300,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    gc.collect()
    assert len(raised) == 4 * 300
    assert (sys.getrefcount(TypeError), sys.getrefcount(RuntimeError)) == before


@cases.case
def exchange_a_null_object_raises_without_reaching_the_callback():
    """A NULL ``py_object`` is refused by the trampoline: ctypes cannot convert it for the
    callback, whose C result was then left unset (0 for the borrowed DLTensor, which the
    caller read as success with ``out`` never written)."""
    table = our_table()
    by_address = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    unraisable = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        for name in ("dltensor_from_py_object_no_sync", "managed_tensor_from_py_object_no_sync"):
            out = DLTensor()
            before = bytes(out)
            with pytest.raises(RuntimeError, match=f"^{name}: py_object cannot be NULL$"):
                by_address(getattr(table, name))(None, ctypes.addressof(out))
            assert bytes(out) == before  # nothing written
    finally:
        sys.unraisablehook = hook
    assert not unraisable, unraisable[0].exc_value  # ctypes never saw the NULL


@cases.case
def exchange_keyboard_interrupt_in_a_callback_reaches_the_caller():
    """A KeyboardInterrupt (not an Exception) raised inside a callback is the caller's
    exception too, with -1: escaping the callback, ctypes printed it and returned an
    unset int."""
    from layoutkit.interop.exchange import exchange_capsule

    def interrupted(*_):
        raise KeyboardInterrupt("interrupted")

    capsule = exchange_capsule(interrupted, interrupted, interrupted)
    table = _TABLE.from_address(_get_pointer(capsule, b"dlpack_exchange_api"))
    tensor = ctypes.create_string_buffer(dlpack.VERSIONED.size)
    ctypes.c_uint32.from_buffer(tensor).value = 1
    out = DLTensor()
    for call in (
        lambda: _FROM_PY(table.dltensor_from_py_object_no_sync)(object(), ctypes.addressof(out)),
        lambda: _FROM_PY(table.managed_tensor_from_py_object_no_sync)(object(), ctypes.addressof(out)),
        lambda: _TO_PY(table.managed_tensor_to_py_object_no_sync)(ctypes.addressof(tensor), ctypes.addressof(out)),
    ):  # fmt: skip
        with pytest.raises(KeyboardInterrupt, match="interrupted"):
            call()


@cases.case
def exchange_allocator_fails_through_set_error_or_an_exception():
    """The allocator never allocates: with SetError it reports there only (dlpack.h: called
    exactly when -1 is returned), without one it raises NotImplementedError."""
    table = our_table()
    errors = []
    set_error = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)(
        lambda context, kind, message: errors.append((kind, message))
    )
    allocator = ctypes.PYFUNCTYPE(
        ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
    )(table.managed_tensor_allocator)
    slot = ctypes.c_void_p(1)
    assert allocator(None, ctypes.addressof(slot), None, ctypes.cast(set_error, ctypes.c_void_p)) == -1
    assert errors == [(b"NotImplementedError", errors[0][1])] and b"not supported" in errors[0][1]
    assert slot.value is None
    with pytest.raises(NotImplementedError, match="managed_tensor_allocator is not supported"):
        allocator(None, ctypes.addressof(slot), None, None)


@cases.case
def exchange_null_pointers_raise_and_free_the_tensor():
    """A NULL ``out`` raises RuntimeError naming it; the stolen tensor is freed once (and a
    NULL tensor is refused before anything is read)."""
    view = StridedMemoryView.from_dlpack(np.arange(6.0))
    references = sys.getrefcount(view)
    table = our_table()
    export = _FROM_PY(table.managed_tensor_from_py_object_no_sync)
    to_py = _TO_PY(table.managed_tensor_to_py_object_no_sync)
    borrow = _FROM_PY(table.dltensor_from_py_object_no_sync)
    unraisable = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with pytest.raises(RuntimeError, match="managed_tensor_from_py_object_no_sync: out cannot"):
            export(view, None)
        assert sys.getrefcount(view) == references  # nothing packed, nothing kept
        with pytest.raises(RuntimeError, match="dltensor_from_py_object_no_sync: out cannot be"):
            borrow(view, None)
        out = ctypes.c_void_p()
        assert export(view, ctypes.addressof(out)) == 0
        with pytest.raises(RuntimeError, match="out_py_object cannot be NULL"):
            to_py(out.value, None)
        result = ctypes.c_void_p(1)
        with pytest.raises(RuntimeError, match="tensor cannot be NULL"):
            to_py(None, ctypes.addressof(result))
        assert result.value is None
    finally:
        sys.unraisablehook = hook
    gc.collect()
    assert not unraisable, unraisable[0].exc_value
    assert sys.getrefcount(view) == references  # the tensor's deleter ran


@cases.case
def exchange_import_failure_raises_and_the_capsule_is_built_once():
    """A tensor the import refuses raises its BufferError through the table; the capsule is
    built on first access (its trampolines are compiled then) and is the same object after."""
    table = our_table()
    tensor = ctypes.create_string_buffer(dlpack.VERSIONED.size)  # no deleter, device type 0
    ctypes.c_uint32.from_buffer(tensor).value = 1  # version 1.0
    result = ctypes.c_void_p(1)
    to_py = _TO_PY(table.managed_tensor_to_py_object_no_sync)
    with pytest.raises(BufferError, match="device not supported"):
        to_py(ctypes.addressof(tensor), ctypes.addressof(result))
    assert result.value is None
    view = StridedMemoryView.from_dlpack(np.arange(2))
    assert view.__dlpack_c_exchange_api__ is StridedMemoryView.__dlpack_c_exchange_api__


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


def test_kernel_arguments_are_classified_by_their_real_type():
    """Scalars were found by ``kind in {int, float, bool, complex}`` (equality: a type equal
    to int skipped the import and its checks) and views by ``isinstance`` (which believes
    a ``__class__`` property): both are read through their protocols now."""
    from layoutkit.cuda._kernel import ViewKernel

    kernel = ViewKernel(types.SimpleNamespace(targetoptions={}))
    equal_to_int = type_equal_to(int, "Liar", (), {
        "__dlpack__": lambda self, **kwargs: np.arange(3.0).__dlpack__(**kwargs),
        "__dlpack_device__": lambda self: (1, 0),
    })  # fmt: skip
    with pytest.raises(ValueError, match="argument 0: a host-only"):
        kernel.launch_arguments((equal_to_int(),))
    real = StridedMemoryView.from_dlpack(np.arange(3.0))
    claiming = type("Claiming", (), {
        "__class__": property(lambda self: StridedMemoryView),
        "__getattr__": lambda self, name: getattr(real, name),
    })()  # fmt: skip
    assert isinstance(claiming, StridedMemoryView)
    (passed,) = kernel.launch_arguments((claiming,))  # an object numba-cuda types, not a view
    assert passed is claiming
    assert kernel.launch_arguments((3, 2.5, True, 1j)) == (3, 2.5, True, 1j)


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

    monkeypatch.setitem(fastpaths._readers, id(DeviceTensor), (DeviceTensor, reader))
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


cases.export(globals())
