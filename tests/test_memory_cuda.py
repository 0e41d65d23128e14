"""GPU tests for Buffer pointer attributes and the CUDA memory resources.

Every test needs a CUDA GPU and driver (the ``cuda`` marker skips them elsewhere).
Pointer attributes are checked for each kind of memory the issue names: device memory,
pinned host memory (``cuMemHostAlloc``), host memory registered with
``cuMemHostRegister``, managed memory, and plain host memory. Data written through one
pointer is read back through ``cuMemcpy`` and compared with NumPy."""

import gc

import numpy as np
import pytest

from layoutkit import (
    AxisError,
    Buffer,
    Device,
    DeviceMemoryResource,
    ManagedMemoryResource,
    PinnedMemoryResource,
    StridedLayout,
    _driver,
)

pytestmark = pytest.mark.cuda

PAGE = 4096


@pytest.fixture
def device():
    device = Device(0)
    device.set_current()
    return device


@pytest.fixture
def last_device_id(device):
    """The highest device ordinal: memory is made there and queried with device 0 current."""
    return _driver.device_count() - 1


def attributes(buffer):
    return (buffer.device_id, buffer.is_device_accessible, buffer.is_host_accessible,
            buffer.is_managed)


def host_view(ptr, size):
    """Host-accessible memory at ``ptr`` as a writable NumPy uint8 array (no copy)."""
    import ctypes

    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))


def pattern(size, seed):
    return ((np.arange(size) * 31 + seed) % 251).astype(np.uint8)


def copy_out(ptr, size):
    """Read ``size`` bytes at any driver-reachable ``ptr`` into a new NumPy array."""
    out = np.zeros(size, dtype=np.uint8)
    _driver.memcpy(out.ctypes.data, ptr, size)
    return out


def copy_in(ptr, data):
    _driver.memcpy(ptr, data.ctypes.data, data.nbytes)


# ---------------------------------------------------------------- pointer attributes
def test_device_memory_attributes(device, last_device_id):
    with _driver.device_context(last_device_id):
        ptr = _driver.mem_alloc(256)
    try:
        buf = Buffer.from_handle(ptr, 256)
        assert attributes(buf) == (last_device_id, True, False, False)
    finally:
        with _driver.device_context(last_device_id):
            _driver.mem_free(ptr)


def test_pinned_host_memory_attributes(device, last_device_id):
    with _driver.device_context(last_device_id):
        ptr = _driver.mem_host_alloc(256)
    try:
        buf = Buffer.from_handle(ptr, 256)
        assert attributes(buf) == (last_device_id, True, True, False)
    finally:
        _driver.mem_free_host(ptr)


def test_registered_host_memory_attributes(device, last_device_id):
    storage = np.zeros(3 * PAGE, dtype=np.uint8)
    start = -storage.ctypes.data % PAGE
    region = storage[start:start + 2 * PAGE]
    ptr, size = region.ctypes.data, region.nbytes
    assert attributes(Buffer.from_handle(ptr, size, owner=region)) == (-1, False, True, False)
    with _driver.device_context(last_device_id):
        _driver.mem_host_register(ptr, size)
    try:
        buf = Buffer.from_handle(ptr, size, owner=region)
        assert attributes(buf) == (last_device_id, True, True, False)
    finally:
        _driver.mem_host_unregister(ptr)


def test_managed_memory_attributes(device, last_device_id):
    with _driver.device_context(last_device_id):
        ptr = _driver.mem_alloc_managed(256)
    try:
        buf = Buffer.from_handle(ptr, 256)
        assert attributes(buf) == (last_device_id, True, True, True)
    finally:
        with _driver.device_context(last_device_id):
            _driver.mem_free(ptr)


def test_plain_host_memory_attributes(device):
    a = np.arange(100, dtype=np.int64)
    buf = Buffer.from_handle(a.ctypes.data, a.nbytes, owner=a)
    assert attributes(buf) == (-1, False, True, False)


def test_attributes_of_stream_ordered_device_memory(device):
    with device.allocate(1024) as owned:
        device.sync()  # the stream-ordered allocation has happened
        external = Buffer.from_handle(owned.ptr, owned.size)
        assert attributes(external) == (0, True, False, False)


# ---------------------------------------------------------------- resources: write and read back
def test_device_resource_round_trip(device):
    data = pattern(4096, seed=1)
    with DeviceMemoryResource(0).allocate(data.nbytes) as buf:
        assert attributes(buf) == (0, True, False, False)
        copy_in(buf.ptr, data)
        assert np.array_equal(copy_out(buf.ptr, buf.size), data)
    device.sync()


def test_device_resource_on_a_stream(device):
    stream = _driver._call("cuStreamCreate", 0)
    try:
        data = pattern(1 << 16, seed=2)
        out = np.zeros_like(data)
        buf = DeviceMemoryResource(0).allocate(data.nbytes, stream=stream)
        _driver.memcpy_async(buf.ptr, data.ctypes.data, data.nbytes, stream)
        _driver.memcpy_async(out.ctypes.data, buf.ptr, data.nbytes, stream)
        _driver.stream_synchronize(stream)
        assert np.array_equal(out, data)
        buf.close()  # frees on the recorded stream
        _driver.stream_synchronize(stream)
    finally:
        _driver._call("cuStreamDestroy", stream)


def test_pinned_resource_round_trip(device):
    data = pattern(4096, seed=3)
    with PinnedMemoryResource().allocate(data.nbytes) as buf:
        assert attributes(buf) == (-1, True, True, False)
        host_view(buf.ptr, buf.size)[:] = data
        with device.allocate(data.nbytes) as on_device:
            _driver.memcpy(on_device.ptr, buf.ptr, data.nbytes)
            assert np.array_equal(copy_out(on_device.ptr, data.nbytes), data)


def test_managed_resource_round_trip(device):
    data = pattern(4096, seed=4)
    with ManagedMemoryResource(0).allocate(data.nbytes) as buf:
        assert attributes(buf) == (0, True, True, True)
        host_view(buf.ptr, buf.size)[:] = data
        assert np.array_equal(copy_out(buf.ptr, buf.size), data)
        device.sync()


def test_garbage_collected_device_buffers_are_freed(device):
    mr = DeviceMemoryResource(0)
    _, total = _driver._call("cuMemGetInfo")
    chunk = 1 << 30
    for _ in range(2 * total // chunk):  # twice the device's memory, one GiB at a time
        buf = mr.allocate(chunk)
        del buf  # the last reference: the finalizer frees it now
    cycle = [mr.allocate(chunk)]
    cycle.append(cycle)
    del cycle
    gc.collect()
    device.sync()
    assert _driver._call("cuMemGetInfo")[0] > 0


def test_zero_size_allocations(device):
    for mr in (DeviceMemoryResource(0), PinnedMemoryResource(), ManagedMemoryResource(0)):
        with mr.allocate(0) as buf:
            assert (buf.ptr, buf.size, buf.memory_resource) == (0, 0, mr)


# ---------------------------------------------------------------- Device
def test_device_basics(device):
    assert Device(0) is device and device.device_id == 0
    assert device.name and repr(device) == f"<Device 0 ({device.name})>"
    assert _driver.current_device_id() == 0
    with pytest.raises(AxisError, match="is out of range"):
        Device(_driver.device_count())


def test_seed_example_allocates_the_dense_version_of_a_sliced_array(device):
    a = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)[::2, 1::3]
    layout = StridedLayout(a.shape, a.strides, a.itemsize, divide_strides=True)
    dense = layout.to_dense()
    Device(0).set_current()
    buf = Device(0).allocate(dense.required_size_in_bytes())
    assert buf.size == a.size * a.itemsize == 36
    assert attributes(buf) == (0, True, False, False)
    packed = np.ascontiguousarray(a)
    copy_in(buf.ptr, packed.view(np.uint8).ravel())
    back = copy_out(buf.ptr, buf.size).view(np.float32).reshape(dense.shape)
    assert np.array_equal(back, a)
    buf.close()


# ------------------------------------------------- Buffer.copy_to / copy_from / fill (1.2.2)
RESOURCES = {
    "device": lambda: DeviceMemoryResource(0),
    "pinned": lambda: PinnedMemoryResource(),
    "managed": lambda: ManagedMemoryResource(0),
}


@pytest.mark.parametrize("kind", list(RESOURCES))
def test_buffer_copy_to_copy_from_and_fill_on_the_gpu(device, kind):
    """cuda.core's buffer_copy_to / buffer_copy_from / test_buffer_fill on each kind of
    memory, on a side stream; every byte read back."""
    from cuda.core import Device as CoreDevice  # a cuda.core stream, as its tests pass one

    core_device = CoreDevice(0)
    core_device.set_current()
    stream = core_device.create_stream()
    mr = RESOURCES[kind]()
    src, dst = mr.allocate(1024), mr.allocate(1024)
    data = pattern(1024, 3)
    copy_in(src.ptr, data)
    assert src.copy_to(dst, stream=stream) is dst
    stream.sync()
    np.testing.assert_array_equal(copy_out(dst.ptr, 1024), data)
    made = src.copy_to(stream=stream)
    back = DeviceMemoryResource(0).allocate(1024)
    back.copy_from(made, stream=stream)
    stream.sync()
    np.testing.assert_array_equal(copy_out(back.ptr, 1024), data)
    for value in (0x42, b"\x34\x12", np.uint32(0xDEADBEEF), np.float32(1.0), np.int8(-1)):
        dst.fill(value, stream=stream)
        stream.sync()
        expected = bytes([value]) if isinstance(value, int) else memoryview(value).tobytes()
        assert copy_out(dst.ptr, 1024).tobytes() == expected * (1024 // len(expected))
    with pytest.raises(ValueError, match="sizes mismatch"):
        src.copy_to(mr.allocate(512), stream=stream)


def test_a_resource_may_answer_device_id_with_a_device(device):
    """cuda.core's test resources (DummyUnifiedMemoryResource) return the Device itself as
    their device_id; copies through their buffers failed comparing it ('>=' not supported)."""
    from layoutkit import MemoryResource, StridedMemoryView

    class Unified(MemoryResource):
        def __init__(self, device):
            self.device = device

        def allocate(self, size, stream=None):
            return Buffer.from_handle(_driver.mem_alloc_managed(size), size, mr=self)

        def deallocate(self, ptr, size, stream=None):
            _driver.mem_free(ptr)

        is_device_accessible = property(lambda self: True)
        is_host_accessible = property(lambda self: True)
        device_id = property(lambda self: self.device)

    assert int(device) == device.device_id
    source, target = Unified(device).allocate(1024), Unified(device).allocate(1024)
    layout = StridedLayout.dense((1024,), 1)
    data = (np.arange(1024) % 251).astype(np.uint8)
    StridedMemoryView.from_buffer(source, layout, np.uint8).copy_from(data)
    source.copy_to(target, stream=device.create_stream())
    device.sync()
    out = np.asarray(StridedMemoryView.from_buffer(target, layout, np.uint8))
    assert (out == data).all()
    source.close()
    target.close()
