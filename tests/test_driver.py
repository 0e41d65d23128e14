"""Tests for layoutkit._driver that need no GPU: stream normalisation, the signed device
ordinal, pointer classification, error translation, lazy initialisation and the
"no CUDA driver was found" error. Driver behaviour is simulated by a fake bindings
module that reuses the real cuda-bindings enums."""

import ctypes
import subprocess
import sys
import types

import numpy as np
import pytest

from layoutkit import _driver

driver = pytest.importorskip("cuda.bindings.driver")
CUresult = driver.CUresult


class FakeBindings(types.SimpleNamespace):
    """A stand-in for ``cuda.bindings.driver``: real enums, scripted functions, a call log."""

    def __init__(self, **functions):
        super().__init__(CUresult=CUresult, CUpointer_attribute=driver.CUpointer_attribute,
                         calls=[], **functions)
        self.cuGetErrorString = self._logged("cuGetErrorString",
                                             lambda err: (CUresult.CUDA_SUCCESS, b"scripted failure"))
        for name, function in functions.items():
            setattr(self, name, self._logged(name, function))

    def _logged(self, name, function):
        def call(*args):
            self.calls.append((name, args))
            return function(*args)
        return call

    def count(self, name):
        return sum(1 for called, _ in self.calls if called == name)


@pytest.fixture
def fake(monkeypatch):
    """Install a FakeBindings (filled in by the test) as the driver module."""
    bindings = FakeBindings(cuInit=lambda flags: (CUresult.CUDA_SUCCESS,))
    monkeypatch.setattr(_driver, "_bindings", lambda: bindings)
    monkeypatch.setattr(_driver, "_initialized", False)
    monkeypatch.setattr(_driver, "_primary_contexts", {})
    return bindings


def script(bindings, name, function):
    setattr(bindings, name, bindings._logged(name, function))


# ---------------------------------------------------------------- signed device ordinal
@pytest.mark.parametrize(
    ("raw", "expected"),
    [(0, 0), (1, 1), (7, 7), (2**31 - 1, 2**31 - 1), (2**31, -(2**31)),
     (4294967294, -2), (4294967295, -1), (-1, -1), (-2, -2)],
)
def test_signed_ordinal_reads_unsigned_32_bit_values_as_signed(raw, expected):
    assert _driver.signed_ordinal(raw) == expected


# ---------------------------------------------------------------- pointer classification
@pytest.mark.parametrize(
    ("memory_type", "managed", "ordinal", "expected"),
    [
        (0, False, 4294967294, (-1, False, True, False)),   # plain host memory
        (0, False, 0, (-1, False, True, False)),
        (1, False, 0, (0, True, True, False)),               # pinned or registered
        (1, False, 4294967294, (-2, True, True, False)),     # DECISIONS 16: signed
        (2, False, 3, (3, True, False, False)),              # device memory
        (2, True, 1, (1, True, True, True)),                 # managed memory
        (0, True, 0, (0, True, True, True)),                 # managed wins over type
    ],
)
def test_classify_pointer(memory_type, managed, ordinal, expected):
    assert tuple(_driver.classify_pointer(memory_type, managed, ordinal)) == expected


def test_classify_pointer_accepts_driver_enums():
    info = _driver.classify_pointer(driver.CUmemorytype.CU_MEMORYTYPE_DEVICE, 0, 2)
    assert info == _driver.Location(2, True, False, False)


@pytest.mark.parametrize("memory_type", [3, 4, 99])
def test_classify_pointer_rejects_other_memory_types(memory_type):
    with pytest.raises(ValueError, match=f"unsupported memory type {memory_type}"):
        _driver.classify_pointer(memory_type, False, 0)


# ---------------------------------------------------------------- stream normalisation
class ProtocolStream:
    def __cuda_stream__(self):
        return (0, 77)


class TorchLikeStream:
    cuda_stream = 11


class CuPyLikeStream:
    ptr = 22


class HandleStream:
    def __init__(self, handle):
        self.handle = handle


class ProtocolAndPtrStream(CuPyLikeStream, ProtocolStream):
    pass


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        (None, 0),
        (0, 0),
        (5, 5),
        (2**64 - 1, 2**64 - 1),
        (np.int32(3), 3),
        (np.uint64(9), 9),
        (ProtocolStream(), 77),
        (TorchLikeStream(), 11),
        (CuPyLikeStream(), 22),
        (HandleStream(33), 33),
        (HandleStream(ctypes.c_void_p(44)), 44),       # numba-cuda's ctypes handle
        (HandleStream(ctypes.c_void_p(None)), 0),      # NULL ctypes handle
        (HandleStream(driver.CUstream(55)), 55),       # cuda-bindings handle object
        (driver.CUstream(66), 66),
        (ProtocolAndPtrStream(), 77),                  # __cuda_stream__ comes first
    ],
)
def test_stream_handle_normalises(stream, expected):
    handle = _driver.stream_handle(stream)
    assert handle == expected
    assert type(handle) is int


@pytest.mark.parametrize("stream", [1.0, "0", True, object(), b"\x00", HandleStream(2.5)])
def test_stream_handle_rejects_non_streams(stream):
    with pytest.raises(TypeError, match="stream"):
        _driver.stream_handle(stream)


@pytest.mark.parametrize("stream", [-1, 2**64, HandleStream(-5)])
def test_stream_handle_rejects_out_of_range_handles(stream):
    with pytest.raises(ValueError, match=r"stream handle must be in \[0, 2\*\*64\)"):
        _driver.stream_handle(stream)


def test_stream_protocol_must_return_a_pair():
    class Broken:
        def __cuda_stream__(self):
            return 5

    with pytest.raises(TypeError, match=r"__cuda_stream__ must return \(version, handle\)"):
        _driver.stream_handle(Broken())


def test_handle_int_accepts_cuda_bindings_pointers():
    assert _driver.handle_int(driver.CUdeviceptr(1024), "ptr") == 1024


@pytest.mark.parametrize("value", [1.5, "12", None, True, np.float64(3.0), [1]])
def test_handle_int_rejects_non_integers(value):
    with pytest.raises(TypeError, match="^ptr must be an integer"):
        _driver.handle_int(value, "ptr")


# ---------------------------------------------------------------- error translation
def test_failed_call_raises_cuda_error_naming_call_and_error(fake):
    script(fake, "cuMemAlloc", lambda size: (CUresult.CUDA_ERROR_OUT_OF_MEMORY, None))
    with pytest.raises(_driver.CUDAError) as info:
        _driver.mem_alloc(1 << 40)
    err = info.value
    assert isinstance(err, RuntimeError)
    assert err.call == "cuMemAlloc"
    assert err.error_name == "CUDA_ERROR_OUT_OF_MEMORY"
    assert str(err) == "cuMemAlloc failed with CUDA_ERROR_OUT_OF_MEMORY: scripted failure"


def test_not_initialized_triggers_one_cuinit_and_a_retry(fake):
    answers = [
        (CUresult.CUDA_ERROR_NOT_INITIALIZED, None),
        (CUresult.CUDA_SUCCESS, [driver.CUmemorytype.CU_MEMORYTYPE_DEVICE, False, 1]),
        (CUresult.CUDA_SUCCESS, [driver.CUmemorytype.CU_MEMORYTYPE_HOST, False, 4294967294]),
    ]
    script(fake, "cuPointerGetAttributes", lambda n, attrs, ptr: answers.pop(0))
    assert _driver.pointer_info(0x1000) == _driver.Location(1, True, False, False)
    assert fake.count("cuInit") == 1
    assert fake.count("cuPointerGetAttributes") == 2
    assert _driver.pointer_info(0x2000) == _driver.Location(-2, True, True, False)
    assert fake.count("cuInit") == 1


def test_pointer_info_asks_for_type_managed_flag_and_ordinal_in_one_call(fake):
    script(fake, "cuPointerGetAttributes",
           lambda n, attrs, ptr: (CUresult.CUDA_SUCCESS, [0, False, 4294967294]))
    assert _driver.pointer_info(0xABC) == _driver.Location(-1, False, True, False)
    (name, (count, attributes, ptr)), = fake.calls
    attribute = driver.CUpointer_attribute
    assert (name, count, ptr) == ("cuPointerGetAttributes", 3, 0xABC)
    assert list(attributes) == [attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                attribute.CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL]


def test_init_runs_cuinit_once(fake):
    _driver.init()
    _driver.init()
    assert fake.count("cuInit") == 1
    assert _driver.driver_found()


def test_failing_cuinit_is_a_cuda_error_and_means_no_driver_found(fake):
    script(fake, "cuInit", lambda flags: (CUresult.CUDA_ERROR_NO_DEVICE,))
    with pytest.raises(_driver.CUDAError, match="cuInit failed with CUDA_ERROR_NO_DEVICE"):
        _driver.init()
    assert not _driver.driver_found()


class DynamicLibNotFoundError(RuntimeError):
    """Same name as cuda.pathfinder's exception for a missing libcuda."""


def test_missing_driver_library_becomes_no_driver_error(fake):
    def missing(*args):
        raise DynamicLibNotFoundError('"cuda" is an NVIDIA driver library')

    script(fake, "cuPointerGetAttributes", missing)
    with pytest.raises(_driver.NoDriverError, match="^no CUDA driver was found") as info:
        _driver.pointer_info(0x1000)
    assert isinstance(info.value.__cause__, DynamicLibNotFoundError)
    assert info.value.call == "cuPointerGetAttributes"


def test_other_exceptions_from_the_bindings_propagate_unchanged(fake):
    def bad(*args):
        raise TypeError("Argument 'ptr' is not instance of type")

    script(fake, "cuMemFree", bad)
    with pytest.raises(TypeError, match="Argument 'ptr'"):
        _driver.mem_free(object())


def test_missing_cuda_bindings_becomes_no_driver_error(monkeypatch):
    monkeypatch.setattr(_driver, "_bindings_module", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    with pytest.raises(_driver.NoDriverError, match="^no CUDA driver was found: cuda-bindings is not installed"):
        _driver.device_count()


@pytest.mark.skipif(_driver.driver_found(), reason="a CUDA driver is installed here")
def test_this_machine_reports_no_cuda_driver():
    a = np.zeros(4)
    with pytest.raises(_driver.NoDriverError, match="^no CUDA driver was found"):
        _driver.pointer_info(a.ctypes.data)
    with pytest.raises(RuntimeError, match="^no CUDA driver was found"):
        _driver.device_count()


# ---------------------------------------------------------------- contexts
def _context_fakes(fake, current):
    """Script primary-context retain and a one-slot context stack starting at ``current``."""
    stack = [driver.CUcontext(current)]
    script(fake, "cuDeviceGet", lambda ordinal: (CUresult.CUDA_SUCCESS, driver.CUdevice(ordinal)))
    script(fake, "cuDevicePrimaryCtxRetain",
           lambda device: (CUresult.CUDA_SUCCESS, driver.CUcontext(0x100 + int(device))))
    script(fake, "cuCtxGetCurrent", lambda: (CUresult.CUDA_SUCCESS, stack[-1]))
    script(fake, "cuCtxPushCurrent", lambda ctx: (stack.append(ctx), (CUresult.CUDA_SUCCESS,))[1])
    script(fake, "cuCtxPopCurrent", lambda: (CUresult.CUDA_SUCCESS, stack.pop()))
    script(fake, "cuCtxSetCurrent", lambda ctx: (stack.__setitem__(-1, ctx), (CUresult.CUDA_SUCCESS,))[1])
    script(fake, "cuCtxGetDevice", lambda: (CUresult.CUDA_SUCCESS, int(stack[-1]) - 0x100))
    return stack


def test_device_context_pushes_the_primary_context_and_restores_the_caller(fake):
    stack = _context_fakes(fake, current=0x101)          # device 1 is current
    with _driver.device_context(0):
        assert int(stack[-1]) == 0x100
        assert _driver.current_device_id() == 0
    assert [int(c) for c in stack] == [0x101]
    assert fake.count("cuCtxPushCurrent") == fake.count("cuCtxPopCurrent") == 1


def test_device_context_pops_even_when_the_block_raises(fake):
    stack = _context_fakes(fake, current=0)
    with pytest.raises(KeyError), _driver.device_context(2):
        raise KeyError("inside")
    assert [int(c) for c in stack] == [0]


def test_device_context_is_free_when_already_current(fake):
    _context_fakes(fake, current=0x100)
    with _driver.device_context(0):
        pass
    assert fake.count("cuCtxPushCurrent") == 0


def test_primary_context_is_retained_once_per_device(fake):
    _context_fakes(fake, current=0)
    first = _driver.primary_context(1)
    assert _driver.primary_context(1) is first
    assert fake.count("cuDevicePrimaryCtxRetain") == 1


def test_current_device_and_ensure_context(fake):
    _context_fakes(fake, current=0)
    assert _driver.current_device_id() is None
    assert _driver.ensure_context() == 0
    assert _driver.current_device_id() == 0
    _driver.set_current_device(3)
    assert _driver.ensure_context() == 3


# ---------------------------------------------------------------- import hygiene
def test_importing_layoutkit_memory_does_not_import_cuda_bindings():
    code = (
        "import sys, layoutkit, layoutkit._driver, layoutkit.memory\n"
        "from layoutkit.memory import HostMemoryResource\n"
        "HostMemoryResource().allocate(8).close()\n"
        "assert 'cuda.bindings' not in sys.modules, 'cuda.bindings imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- stream ordering
def test_order_after_records_on_the_producer_and_waits_on_the_consumer(fake):
    events = []
    script(fake, "cuEventCreate", lambda flags: (CUresult.CUDA_SUCCESS, events.append(flags) or 77))
    script(fake, "cuEventRecord", lambda event, stream: (CUresult.CUDA_SUCCESS,))
    script(fake, "cuStreamWaitEvent", lambda stream, event, flags: (CUresult.CUDA_SUCCESS,))
    script(fake, "cuEventDestroy", lambda event: (CUresult.CUDA_SUCCESS,))
    _driver.order_after(consumer=1000, producer=2000)
    assert [name for name, _ in fake.calls] == [
        "cuEventCreate", "cuEventRecord", "cuStreamWaitEvent", "cuEventDestroy",
    ]  # fmt: skip
    assert events == [0x2]  # timing disabled
    assert fake.calls[1][1] == (77, 2000) and fake.calls[2][1] == (1000, 77, 0)
    fake.calls.clear()
    _driver.order_after(5, 5)  # the same stream: nothing to order
    assert fake.calls == []


def test_order_after_destroys_the_event_when_the_wait_fails(fake):
    script(fake, "cuEventCreate", lambda flags: (CUresult.CUDA_SUCCESS, 77))
    script(fake, "cuEventRecord", lambda event, stream: (CUresult.CUDA_ERROR_INVALID_HANDLE,))
    script(fake, "cuEventDestroy", lambda event: (CUresult.CUDA_SUCCESS,))
    with pytest.raises(_driver.CUDAError, match="cuEventRecord failed with CUDA_ERROR_INVALID_HANDLE"):
        _driver.order_after(1000, 2000)
    assert fake.count("cuEventDestroy") == 1


def test_exception_classes_are_public():
    import layoutkit

    for name in ("AxisError", "CUDAError", "NoDriverError"):
        assert name in layoutkit.__all__
    assert layoutkit.NoDriverError is _driver.NoDriverError
    assert issubclass(layoutkit.NoDriverError, layoutkit.CUDAError)
    assert issubclass(layoutkit.CUDAError, RuntimeError)
