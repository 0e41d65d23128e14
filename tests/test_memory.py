"""Tests for layoutkit.memory that need no GPU: Buffer.from_handle validation, ownership
and lifetimes (checked with weakrefs), close/context manager, closed-buffer errors,
identity, the driver-free HostMemoryResource, known-origin host buffers (DECISIONS 12),
and the device/pinned/managed resources' bookkeeping against a scripted driver."""

import contextlib
import copy
import ctypes
import gc
import pickle
import subprocess
import sys
import threading
import tracemalloc
import weakref

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
    StridedMemoryView,
    _driver,
)
from layoutkit.memory import HostMemoryResource, MemoryResource

HOST_INFO = _driver.Location(-1, False, True, False)


class Owner:
    """A weak-referenceable stand-in for an array that owns memory."""


class RecordingResource(MemoryResource):
    """Hands out fake addresses and records every deallocate call; touches no memory."""

    def __init__(self, fail=False):
        self.deallocations = []
        self.fail = fail

    def allocate(self, size, stream=None):
        return Buffer.from_handle(0x10000 + 64 * len(self.deallocations), size, mr=self,
                                  stream=stream)

    def deallocate(self, ptr, size, stream=None):
        self.deallocations.append((ptr, size, stream))
        if self.fail:
            raise OSError("deallocate failed")

    device_id = -1
    is_device_accessible = False
    is_host_accessible = True


def host_bytes(buffer):
    """The buffer's memory as a writable NumPy uint8 array (no copy)."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * buffer.size).from_address(buffer.ptr))


@pytest.fixture
def no_driver_calls(monkeypatch):
    """Fail the test if anything asks the driver about a pointer."""
    def forbidden(ptr):
        raise AssertionError(f"driver queried for 0x{ptr:x}")

    monkeypatch.setattr(_driver, "pointer_info", forbidden)


# ---------------------------------------------------------------- from_handle arguments
def test_buffer_cannot_be_constructed_directly():
    with pytest.raises(RuntimeError, match=r"use Buffer\.from_handle\(ptr, size"):
        Buffer(0x1000, 8)


@pytest.mark.parametrize(
    ("ptr", "size"),
    [(0x1000, 8), (np.uint64(0x1000), np.int32(8)), (ctypes.c_void_p(0x1000), 8),
     (0, 0), (2**64 - 1, 1), (0x1000, 2**64 - 0x1000)],
)
def test_from_handle_accepts_integer_likes(ptr, size):
    buf = Buffer.from_handle(ptr, size)
    assert (buf.ptr, buf.size) == (_driver.handle_int(ptr, "ptr"), int(size))
    assert type(buf.ptr) is int and type(buf.size) is int
    assert buf.ptr == buf.handle
    assert buf.owner is None and buf.memory_resource is None and not buf.is_closed


@pytest.mark.parametrize("name", ["ptr", "size"])
@pytest.mark.parametrize("bad", [1.5, "16", None, True, np.float32(2), [4]])
def test_from_handle_rejects_non_integers(name, bad):
    args = {"ptr": 0x1000, "size": 8, name: bad}
    with pytest.raises(TypeError, match=f"^{name} must be an integer"):
        Buffer.from_handle(**args)


@pytest.mark.parametrize("name", ["ptr", "size"])
@pytest.mark.parametrize("bad", [-1, -(2**70), 2**64])
def test_from_handle_rejects_out_of_range_values(name, bad):
    args = {"ptr": 0x1000, "size": 8, name: bad}
    with pytest.raises(OverflowError, match=rf"^{name} must be in \[0, 2\*\*64\), got {bad}$"):
        Buffer.from_handle(**args)


def test_null_pointer_needs_zero_size():
    with pytest.raises(ValueError, match="ptr is 0 .* size is 16"):
        Buffer.from_handle(0, 16)


def test_owner_and_mr_together_are_rejected():
    with pytest.raises(ValueError, match="cannot be both specified together"):
        Buffer.from_handle(0x1000, 8, mr=RecordingResource(), owner=Owner())


def test_mr_must_be_a_memory_resource():
    with pytest.raises(TypeError, match="mr must be a layoutkit MemoryResource, got 'pool'"):
        Buffer.from_handle(0x1000, 8, mr="pool")


def test_stream_needs_mr():
    with pytest.raises(ValueError, match="stream .* needs mr"):
        Buffer.from_handle(0x1000, 8, stream=0)


# ---------------------------------------------------------------- owner lifetime
def test_owner_lives_exactly_until_close():
    owner = Owner()
    alive = weakref.ref(owner)
    buf = Buffer.from_handle(0x1000, 8, owner=owner)
    del owner
    gc.collect()
    assert alive() is buf.owner
    buf.close()
    gc.collect()
    assert alive() is None


def test_owner_is_released_when_the_buffer_is_collected():
    owner = Owner()
    alive = weakref.ref(owner)
    buf = Buffer.from_handle(0x1000, 8, owner=owner)
    buffer_alive = weakref.ref(buf)
    del owner, buf
    gc.collect()
    assert buffer_alive() is None
    assert alive() is None


def test_numpy_owner_keeps_the_memory_readable():
    buf = Buffer.from_handle(np.arange(16, dtype=np.uint8).ctypes.data, 16,
                             owner=np.arange(16, dtype=np.uint8))
    owner_alive = weakref.ref(buf.owner)
    gc.collect()
    assert owner_alive() is not None
    buf.close()
    gc.collect()
    assert owner_alive() is None


# ---------------------------------------------------------------- mr: deallocate exactly once
def test_close_deallocates_exactly_once():
    mr = RecordingResource()
    buf = mr.allocate(32)
    ptr = buf.ptr
    buf.close()
    buf.close()
    assert mr.deallocations == [(ptr, 32, None)]


def test_garbage_collection_deallocates_exactly_once():
    mr = RecordingResource()
    buf = mr.allocate(32)
    ptr = buf.ptr
    del buf
    gc.collect()
    assert mr.deallocations == [(ptr, 32, None)]


def test_deallocation_stream_is_recorded_and_close_can_override_it():
    mr = RecordingResource()
    recorded = mr.allocate(8, stream=3)
    overridden = mr.allocate(8, stream=3)
    recorded.close()
    overridden.close(stream=7)
    del overridden
    gc.collect()
    assert [stream for _, _, stream in mr.deallocations] == [3, 7]


def test_concurrent_close_deallocates_exactly_once():
    mr = RecordingResource()
    buffers = [mr.allocate(8) for _ in range(200)]
    start = threading.Barrier(4)

    def close_all():
        start.wait()
        for buf in buffers:
            buf.close()

    threads = [threading.Thread(target=close_all) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(mr.deallocations) == len(buffers)
    assert all(buf.is_closed for buf in buffers)


def test_buffer_keeps_its_memory_resource_alive_until_close():
    mr = RecordingResource()
    mr_alive = weakref.ref(mr)
    buf = mr.allocate(8)
    deallocations = mr.deallocations
    del mr
    gc.collect()
    assert mr_alive() is buf.memory_resource
    buf.close()
    gc.collect()
    assert mr_alive() is None
    assert len(deallocations) == 1


def test_failing_deallocate_still_closes_and_never_runs_twice():
    mr = RecordingResource(fail=True)
    buf = mr.allocate(8)
    with pytest.raises(OSError, match="deallocate failed"):
        buf.close()
    assert buf.is_closed
    buf.close()
    del buf
    gc.collect()
    assert len(mr.deallocations) == 1


def test_open_buffers_at_interpreter_exit_do_not_crash():
    code = (
        "import sys\n"
        "from layoutkit.memory import Buffer, HostMemoryResource\n"
        "class Loud(HostMemoryResource):\n"
        "    def deallocate(self, ptr, size, stream=None):\n"
        "        sys.stdout.write('deallocated\\n')\n"
        "        super().deallocate(ptr, size, stream)\n"
        "mr = Loud()\n"
        "kept = [mr.allocate(64) for _ in range(3)]\n"
        "cycle = [mr.allocate(8)]\n"
        "cycle.append(cycle)\n"
        "kept[0].close()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.count("deallocated") >= 1


# ---------------------------------------------------------------- context manager, closed state
def test_context_manager_returns_the_buffer_and_closes_it():
    mr = RecordingResource()
    with mr.allocate(16) as buf:
        assert isinstance(buf, Buffer) and not buf.is_closed
    assert buf.is_closed
    assert len(mr.deallocations) == 1


def test_context_manager_closes_when_the_block_raises():
    owner = Owner()
    alive = weakref.ref(owner)
    with pytest.raises(KeyError), Buffer.from_handle(0x1000, 8, owner=owner) as buf:
        del owner
        raise KeyError("inside")
    gc.collect()
    assert buf.is_closed and alive() is None


@pytest.mark.parametrize(
    "attribute",
    ["ptr", "device_id", "is_device_accessible", "is_host_accessible", "is_managed"],
)
def test_closed_buffer_raises_on_use(attribute):
    buf = Buffer._from_known(0x1000, 8, owner=Owner(), location=_driver.HOST)
    buf.close()
    with pytest.raises(RuntimeError, match=f"^buffer is closed: cannot read {attribute}"):
        getattr(buf, attribute)


def test_closed_buffer_state():
    buf = Buffer.from_handle(0x1000, 8, owner=Owner())
    buf.close()
    assert (buf.is_closed, buf.size, buf.owner, buf.memory_resource) == (True, 0, None, None)
    assert repr(buf) == "<Buffer ptr=0x0 size=0 closed>"


# ---------------------------------------------------------------- identity
def test_equality_and_hash_by_pointer_and_size():
    a = Buffer.from_handle(0x1000, 8)
    b = Buffer.from_handle(0x1000, 8, owner=Owner())
    assert a == b and hash(a) == hash(b)
    assert a != Buffer.from_handle(0x1000, 9)
    assert a != Buffer.from_handle(0x1008, 8)
    assert a != (0x1000, 8)
    assert len({a, b, Buffer.from_handle(0x2000, 8)}) == 2


def test_closed_buffer_equals_only_itself_and_keeps_its_hash():
    a = Buffer.from_handle(0x1000, 8)
    b = Buffer.from_handle(0x1000, 8)
    before = hash(a)
    buffers = {a}
    a.close()
    assert hash(a) == before and a in buffers
    assert a == a and a != b and b != a


def test_buffers_cannot_be_pickled_and_copy_returns_the_same_handle():
    buf = Buffer.from_handle(0x1000, 8)
    with pytest.raises(TypeError, match="cannot pickle"):
        pickle.dumps(buf)
    with pytest.raises(TypeError, match="cannot pickle"):
        copy.deepcopy(buf)
    assert copy.copy(buf) is buf


def test_repr_is_cuda_cores_pointer_and_size():
    """cuda.core 1.2.2's ``<Buffer ptr=0x... size=N>`` whoever keeps the memory (its
    test_object_protocols.py matches it whole); a read-only buffer says so after."""
    assert repr(Buffer.from_handle(0x1000, 8)) == "<Buffer ptr=0x1000 size=8>"
    assert repr(Buffer.from_handle(0x1000, 8, owner=np.zeros(1))) == "<Buffer ptr=0x1000 size=8>"
    with HostMemoryResource().allocate(4) as buf:
        assert repr(buf) == f"<Buffer ptr=0x{buf.ptr:x} size=4>"
    read_only = StridedMemoryView.from_array_interface(b"abcd").buffer
    assert repr(read_only) == f"<Buffer ptr=0x{read_only.ptr:x} size=4 readonly>"


# ---------------------------------------------------------------- where the memory lives
def test_known_origin_host_buffer_needs_no_driver(no_driver_calls):
    a = np.arange(10, dtype=np.float64)
    buf = Buffer._from_known(a.ctypes.data, a.nbytes, owner=a, location=_driver.HOST)
    assert (buf.device_id, buf.is_device_accessible, buf.is_host_accessible,
            buf.is_managed) == tuple(HOST_INFO)
    assert buf.owner is a


def test_resource_buffers_take_attributes_from_the_resource(no_driver_calls):
    class Managedish(RecordingResource):
        device_id = 3
        is_device_accessible = True
        is_managed = True

    buf = Buffer.from_handle(0x1000, 8, mr=Managedish())
    assert (buf.device_id, buf.is_device_accessible, buf.is_host_accessible,
            buf.is_managed) == (3, True, True, True)


def test_pointer_attributes_are_queried_once_and_cached(monkeypatch):
    asked = []

    def pointer_info(ptr):
        asked.append(ptr)
        return _driver.Location(0, True, False, False)

    monkeypatch.setattr(_driver, "pointer_info", pointer_info)
    buf = Buffer.from_handle(0x7000, 64)
    for _ in range(2):
        assert (buf.device_id, buf.is_device_accessible, buf.is_host_accessible,
                buf.is_managed) == (0, True, False, False)
    assert asked == [0x7000]


@pytest.mark.skipif(_driver.driver_found(), reason="a CUDA driver is installed here")
def test_unknown_pointer_without_a_driver_is_host_memory():
    """DECISIONS 12: no device memory can exist without a driver."""
    a = np.arange(4.0)
    buf = Buffer.from_handle(a.ctypes.data, a.nbytes, owner=a)
    assert (buf.device_id, buf.is_device_accessible, buf.is_host_accessible) == (-1, False, True)
    assert buf.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(buf).view(np.float64), a)
    view = StridedMemoryView.from_buffer(buf, StridedLayout.dense((4,), 8), np.float64)
    np.testing.assert_array_equal(np.from_dlpack(view), a)


# ---------------------------------------------------------------- HostMemoryResource
@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 1000, 4096])
def test_host_resource_round_trip(size, no_driver_calls):
    mr = HostMemoryResource()
    buf = mr.allocate(size)
    assert buf.size == size and buf.ptr % 64 == 0 and buf.ptr != 0
    assert buf.memory_resource is mr
    assert (buf.device_id, buf.is_device_accessible, buf.is_host_accessible,
            buf.is_managed) == tuple(HOST_INFO)
    data = host_bytes(buf)
    expected = (np.arange(size) * 7 % 256).astype(np.uint8)
    data[:] = expected
    assert np.array_equal(host_bytes(buf), expected)
    del data
    buf.close()
    assert mr._storage == {}


def test_host_resource_allocations_do_not_overlap():
    mr = HostMemoryResource()
    buffers = [mr.allocate(100) for _ in range(20)]
    for i, buf in enumerate(buffers):
        host_bytes(buf)[:] = i
    for i, buf in enumerate(buffers):
        assert np.all(host_bytes(buf) == i)
    ranges = sorted((b.ptr, b.ptr + b.size) for b in buffers)
    assert all(end <= start for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False))
    for buf in buffers:
        buf.close()
    assert mr._storage == {}


def test_host_resource_frees_on_garbage_collection():
    mr = HostMemoryResource()
    buf = mr.allocate(256)
    del buf
    gc.collect()
    assert mr._storage == {}


def test_host_resource_rejects_foreign_and_double_deallocation():
    mr = HostMemoryResource()
    buf = mr.allocate(8)
    ptr = buf.ptr
    buf.close()
    with pytest.raises(ValueError, match=f"ptr 0x{ptr:x} was not allocated by this HostMemoryResource"):
        mr.deallocate(ptr, 8)
    with pytest.raises(ValueError, match="not allocated by this HostMemoryResource"):
        HostMemoryResource().deallocate(0x1000, 8)


@pytest.mark.parametrize(("ptr", "size", "error", "words"), [
    (None, 8, TypeError, "ptr"), ("0x1000", 8, TypeError, "ptr"), (4096.0, 8, TypeError, "ptr"),
    (-1, 8, OverflowError, "ptr"), (2**64, 8, OverflowError, "ptr"),
    ("valid", 8.0, TypeError, "size"), ("valid", -1, OverflowError, "size"),
])  # fmt: skip
def test_host_resource_deallocate_reads_its_arguments_first(ptr, size, error, words):
    """``deallocate(None, 8)`` raised "unsupported format string passed to
    NoneType.__format__" (its message formatted ``ptr`` with ``:x``); a refused call
    frees nothing."""
    mr = HostMemoryResource()
    buf = mr.allocate(8)
    with pytest.raises(error, match=words):
        mr.deallocate(buf.ptr if ptr == "valid" else ptr, size)
    assert buf.ptr in mr._storage
    buf.close()
    assert mr._storage == {}


@pytest.mark.parametrize(("size", "error"), [(-1, OverflowError), (2**64, OverflowError),
                                             (1.0, TypeError), ("8", TypeError)])
def test_host_resource_rejects_bad_sizes(size, error):
    with pytest.raises(error, match="size"):
        HostMemoryResource().allocate(size)


def test_memory_resource_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        MemoryResource()


# ---------------------------------------------------------------- no leak
def _traced_growth(cycle, repeat):
    """Bytes of traced memory still held after ``repeat`` calls of ``cycle``."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(repeat):
            cycle()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def _growth_of(cycle, repeat=100_000):
    """Memory that ``repeat`` more calls of ``cycle`` keep: the growth over 3 * repeat calls
    less the growth over repeat calls.

    A leak grows with the number of calls; what the process allocates once while a window
    is measured (a cache filling, a finalizer of an earlier test; seen as ~20 KB in full
    suite runs) does not, and cancels out.
    """
    for _ in range(1000):
        cycle()
    return _traced_growth(cycle, 3 * repeat) - _traced_growth(cycle, repeat)


def test_from_handle_close_cycles_do_not_leak():
    owner = Owner()

    def cycle():
        Buffer.from_handle(0x1000, 64, owner=owner).close()

    assert _growth_of(cycle) < 16 * 1024


def test_host_allocate_close_cycles_do_not_leak():
    mr = HostMemoryResource()

    def cycle():
        mr.allocate(64).close()

    assert _growth_of(cycle, repeat=20_000) < 16 * 1024
    assert mr._storage == {}


# ---------------------------------------------------------------- device-side resources, scripted
class FakeDeviceDriver:
    """Replaces the _driver functions the resources use; records calls in order."""

    def __init__(self, monkeypatch, devices=2):
        self.calls = []
        self.next_ptr = 0x7F0000000000
        monkeypatch.setattr(_driver, "device_count", lambda: devices)
        monkeypatch.setattr(_driver, "device_context", self.device_context)
        monkeypatch.setattr(_driver, "ensure_context", lambda: self.calls.append(("ensure",)))
        for name in ("mem_alloc_async", "mem_alloc_managed", "mem_host_alloc"):
            monkeypatch.setattr(_driver, name, self.allocator(name))
        for name in ("mem_free_async", "mem_free", "mem_free_host", "set_current_device",
                     "synchronize_device"):
            monkeypatch.setattr(_driver, name, self.recorder(name))
        monkeypatch.setattr(_driver, "device_name", lambda device_id: f"Fake GPU {device_id}")
        monkeypatch.setattr(Device, "_instances", {})

    @contextlib.contextmanager
    def device_context(self, device_id):
        self.calls.append(("enter", device_id))
        yield
        self.calls.append(("exit", device_id))

    def allocator(self, name):
        def allocate(*args):
            self.next_ptr += 0x1000
            self.calls.append((name, *args))
            return self.next_ptr
        return allocate

    def recorder(self, name):
        return lambda *args: self.calls.append((name, *args))


class CuPyLikeStream:
    ptr = 0x55


def test_device_resource_allocates_and_frees_in_stream_order_on_its_device(monkeypatch):
    fake = FakeDeviceDriver(monkeypatch)
    mr = DeviceMemoryResource(1)
    stream = CuPyLikeStream()
    buf = mr.allocate(256, stream=stream)
    ptr = buf.ptr
    assert (buf.size, buf.device_id, buf.is_device_accessible, buf.is_host_accessible,
            buf.is_managed, buf.memory_resource) == (256, 1, True, False, False, mr)
    buf.close()
    assert fake.calls == [("enter", 1), ("mem_alloc_async", 256, stream), ("exit", 1),
                          ("enter", 1), ("mem_free_async", ptr, stream.ptr), ("exit", 1)]


def test_device_resource_zero_size_needs_no_driver_call(monkeypatch):
    fake = FakeDeviceDriver(monkeypatch)
    buf = DeviceMemoryResource(0).allocate(0)
    assert (buf.ptr, buf.size, buf.device_id) == (0, 0, 0)
    buf.close()
    assert fake.calls == []


def test_device_resource_rejects_a_bad_stream_before_allocating(monkeypatch):
    fake = FakeDeviceDriver(monkeypatch)
    with pytest.raises(TypeError, match="stream must be None, an int handle"):
        DeviceMemoryResource(0).allocate(64, stream=1.5)
    assert fake.calls == []


def test_pinned_resource(monkeypatch):
    fake = FakeDeviceDriver(monkeypatch)
    mr = PinnedMemoryResource()
    buf = mr.allocate(128)
    ptr = buf.ptr
    assert (buf.device_id, buf.is_device_accessible, buf.is_host_accessible,
            buf.is_managed) == (-1, True, True, False)
    del buf
    gc.collect()
    assert fake.calls == [("ensure",), ("mem_host_alloc", 128), ("mem_free_host", ptr)]


def test_managed_resource(monkeypatch):
    fake = FakeDeviceDriver(monkeypatch)
    buf = ManagedMemoryResource(1).allocate(64)
    ptr = buf.ptr
    assert (buf.device_id, buf.is_device_accessible, buf.is_host_accessible,
            buf.is_managed) == (1, True, True, True)
    buf.close()
    assert fake.calls == [("enter", 1), ("mem_alloc_managed", 64), ("exit", 1),
                          ("enter", 1), ("mem_free", ptr), ("exit", 1)]


@pytest.mark.parametrize("resource", [DeviceMemoryResource, ManagedMemoryResource, Device])
@pytest.mark.parametrize(
    ("device_id", "error", "message"),
    [(-1, AxisError, "device_id must be >= 0, got -1"),
     (2, AxisError, r"device_id 2 is out of range: 2 CUDA device\(s\) found"),
     (1.0, TypeError, "device_id must be an integer, got 1.0"),
     (True, TypeError, "device_id must be an integer, not a bool"),
     ("0", TypeError, "device_id must be an integer, got '0'")],
)
def test_device_ids_are_validated(monkeypatch, resource, device_id, error, message):
    FakeDeviceDriver(monkeypatch, devices=2)
    with pytest.raises(error, match=message):
        resource(device_id)


def test_device_is_one_object_per_id_with_one_memory_resource(monkeypatch):
    fake = FakeDeviceDriver(monkeypatch)
    device = Device(np.int64(1))
    assert Device(1) is device and Device() is Device(0) and Device(0) is not device
    assert device.device_id == 1
    assert device.memory_resource is device.memory_resource
    assert isinstance(device.memory_resource, DeviceMemoryResource)
    assert repr(device) == "<Device 1 (Fake GPU 1)>"
    device.set_current()
    buf = device.allocate(32)
    assert (buf.device_id, buf.memory_resource) == (1, device.memory_resource)
    device.sync()
    assert ("set_current_device", 1) in fake.calls and ("synchronize_device", 1) in fake.calls


def test_device_copies_and_pickles_are_the_device_itself(monkeypatch):
    """A pickle round trip (or a copy) of Device(1) made Device.__new__() (Device(0)) and
    set the pickled slots on it: Device(0).device_id became 1, and its allocations went to
    device 1."""
    FakeDeviceDriver(monkeypatch)
    zero, one = Device(0), Device(1)
    one.memory_resource  # noqa: B018 (a slot the default reduction copied as well)
    for duplicate in (copy.copy, copy.deepcopy, lambda d: pickle.loads(pickle.dumps(d))):
        assert duplicate(one) is one and duplicate(zero) is zero
    assert (zero.device_id, Device(0).device_id, Device(1).device_id) == (0, 0, 1)
    assert zero.memory_resource.device_id == 0


def test_device_subclasses_keep_their_own_objects(monkeypatch):
    """Device(n) is one object per id and class: a subclass's D(0), made first, was handed
    out as Device(0) too (and Device(1), made first, as D(1)) (found by helper-38)."""
    FakeDeviceDriver(monkeypatch)

    class Named(Device):
        __slots__ = ()

    named, one = Named(0), Device(1)
    assert type(Device(0)) is Device and Device(0) is not named and Named(0) is named
    assert type(Named(1)) is Named and Named(1) is not one and Device(1) is one
    assert copy.deepcopy(named) is named and copy.copy(Named(1)) is Named(1)


@pytest.mark.skipif(_driver.driver_found(), reason="a CUDA driver is installed here")
def test_device_without_a_driver_says_so():
    with pytest.raises(RuntimeError, match="^no CUDA driver was found"):
        Device(0)


# ---------------------------------------------------------------- cuda.core 1.2.2 behaviour
class CtypesHostResource(MemoryResource):
    """cuda.core's DummyHostMemoryResource: ctypes memory; device_id raises, as there."""

    def allocate(self, size, stream=None):
        self._storage = (ctypes.c_byte * size)()
        return Buffer.from_handle(ptr=ctypes.addressof(self._storage), size=size, mr=self)

    def deallocate(self, ptr, size, stream=None):
        del self._storage

    @property
    def is_device_accessible(self):
        return False

    @property
    def is_host_accessible(self):
        return True

    @property
    def device_id(self):
        raise RuntimeError("the host memory resource is not bound to any GPU")


class NullResource(CtypesHostResource):
    """Neither host- nor device-accessible (cuda.core's NullMemoryResource)."""

    @property
    def is_host_accessible(self):
        return False


@pytest.mark.parametrize("device_id", ["zero", True, 1.0])
def test_a_resource_device_id_that_is_no_ordinal_is_refused(device_id):
    """A resource's ``device_id`` went unread into the location record, and later compared
    (``'>=' not supported``); it must be an ordinal, or a Device as cuda.core's own test
    resources answer (tests/test_memory_cuda.py)."""

    class Odd(CtypesHostResource):
        @property
        def device_id(self):
            return device_id

    view = StridedMemoryView.from_buffer(
        Odd().allocate(size=64), StridedLayout.dense((8,), 8), np.float64
    )
    with pytest.raises(TypeError, match=r"Odd.device_id is .* a device ordinal \(int\) or a Device"):
        view.copy_from(np.ones(8))


def test_buffer_initialization_reads_each_resource_property_on_its_own():
    buffer = CtypesHostResource().allocate(size=1024)
    assert buffer.handle != 0 and buffer.size == 1024
    assert buffer.is_device_accessible is False and buffer.is_host_accessible is True
    assert not buffer.is_mapped and not buffer.is_managed
    with pytest.raises(RuntimeError, match="not bound to any GPU"):
        buffer.device_id  # noqa: B018
    assert buffer.__dlpack_device__() == (1, 0)  # the host needs no device_id
    buffer.close()
    assert buffer.handle == 0 and buffer.memory_resource is None and buffer.size == 0


def test_closed_buffer_handle_is_zero_and_ptr_refuses():
    buffer = Buffer.from_handle(0x1000, 8, owner=Owner())
    buffer.close()
    assert buffer.handle == 0
    with pytest.raises(RuntimeError, match="buffer is closed"):
        buffer.ptr  # noqa: B018
    with pytest.raises(RuntimeError, match="buffer is closed"):
        buffer.__dlpack__()


@pytest.mark.parametrize(
    ("ptr", "size"), [(2**64 - 8, 16), (2**63, 2**63 + 1), (2, 2**64 - 1)], ids=str
)
def test_from_handle_refuses_ranges_beyond_64_bits(ptr, size):
    with pytest.raises(OverflowError, match="beyond the 64-bit address space"):
        Buffer.from_handle(ptr, size)


def test_buffer_dlpack_export_round_trip_and_lifetime():
    a = np.arange(16, dtype=np.uint8)
    buffer = Buffer.from_handle(a.ctypes.data, a.nbytes, owner=a)
    references = sys.getrefcount(buffer)
    out = np.from_dlpack(buffer)
    assert out.dtype == np.int8 and out.shape == (16,) and out.ctypes.data == a.ctypes.data
    assert sys.getrefcount(buffer) == references + 1  # the consumer holds the buffer
    del out
    gc.collect()
    assert sys.getrefcount(buffer) == references
    assert "dltensor" in repr(buffer.__dlpack__())
    assert "dltensor_versioned" in repr(buffer.__dlpack__(max_version=(1, 0)))
    with pytest.raises(BufferError, match="copy=True"):
        buffer.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="dl_device"):
        buffer.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match=r"^Expected max_version tuple\[int, int\], got \(\)$"):
        buffer.__dlpack__(max_version=())
    with pytest.raises(TypeError, match="must be a \\(major, minor\\) tuple"):
        buffer.__dlpack__(max_version=[1, 0])
    from layoutkit.interop import dlpack

    with dlpack.consume_capsule(buffer.__dlpack__(max_version=(1, 0), dl_device=(1, 0))) as t:
        assert (t.shape, t.strides, t.dtype_triple, t.device) == ((16,), (1,), (0, 8, 1), (1, 0))


def test_buffer_dlpack_of_inaccessible_memory_is_refused_and_leaks_nothing():
    buffer = NullResource().allocate(size=1024)
    with pytest.raises(BufferError, match=r"^buffer is neither device-accessible nor host-accessible$"):
        buffer.__dlpack_device__()
    before = sys.getrefcount(buffer)
    with pytest.raises(BufferError, match="invalid buffer"):
        buffer.__dlpack__()
    assert sys.getrefcount(buffer) == before


def test_read_only_buffers_export_read_only_capsules():
    from layoutkit.interop import dlpack

    view = StridedMemoryView.from_array_interface(b"abcdefgh")
    buffer = view.buffer
    assert buffer.is_readonly and "readonly" in repr(buffer)
    with dlpack.consume_capsule(buffer.__dlpack__(max_version=(1, 0))) as tensor:
        assert tensor.readonly
    with pytest.raises(BufferError, match="read-only buffer needs a versioned"):
        buffer.__dlpack__()
    assert not np.from_dlpack(buffer).flags.writeable


def test_owner_close_restores_the_refcount():
    a = (ctypes.c_byte * 20)()
    before = sys.getrefcount(a)
    buffer = Buffer.from_handle(ctypes.addressof(a), 20, owner=a)
    assert sys.getrefcount(a) != before
    buffer.close()
    assert sys.getrefcount(a) == before


def test_no_leak_over_100000_buffer_exports():
    a = np.arange(64, dtype=np.uint8)
    buffer = Buffer.from_handle(a.ctypes.data, a.nbytes, owner=a)
    references = sys.getrefcount(buffer)
    for _ in range(100_000):
        np.from_dlpack(buffer)
    gc.collect()
    assert sys.getrefcount(buffer) == references


# ------------------------------------------------- Buffer.copy_to / copy_from / fill (1.2.2)
def _filled(resource, size, seed):
    buffer = resource.allocate(size)
    data = bytes(np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8))
    ctypes.memmove(buffer.ptr, data, size)
    return buffer, data


@pytest.mark.parametrize("size", [1, 7, 1024])
def test_buffer_copy_to_and_copy_from_copy_every_byte(size):
    """cuda.core's buffer_copy_to / buffer_copy_from, on host memory; every byte checked."""
    mr = CtypesHostResource()
    other = CtypesHostResource()
    src, data = _filled(mr, size, 1)
    dst = other.allocate(size)
    assert src.copy_to(dst, stream=None) is dst
    assert ctypes.string_at(dst.ptr, size) == data
    again, more = _filled(HostMemoryResource(), size, 2)
    dst.copy_from(again, stream=0)
    assert ctypes.string_at(dst.ptr, size) == more
    made = again.copy_to()  # a new buffer from the source's memory resource
    assert made.memory_resource is again.memory_resource and made.size == size
    assert ctypes.string_at(made.ptr, size) == more


def test_buffer_copies_refuse_what_cuda_core_refuses_and_more():
    mr = HostMemoryResource()
    a, b = mr.allocate(16), mr.allocate(8)
    with pytest.raises(ValueError, match=r"sizes mismatch between src and dst \(sizes are: src=16, dst=8\)"):
        a.copy_to(b)
    with pytest.raises(ValueError, match="sizes mismatch"):
        b.copy_from(a)
    with pytest.raises(TypeError, match="dst must be a layoutkit Buffer, got ndarray"):
        a.copy_to(np.zeros(16, np.uint8))
    with pytest.raises(TypeError, match="no copy options"):
        a.copy_to(mr.allocate(16), options=object())
    owned = Buffer.from_handle(a.ptr, 16)  # no memory resource to allocate from
    with pytest.raises(ValueError, match="destination buffer must be given"):
        owned.copy_to()
    # overlapping host buffers copy as memmove does (layoutkit.copy reads the source first)
    ctypes.memmove(a.ptr, bytes(range(16)), 16)
    Buffer.from_handle(a.ptr, 8).copy_to(Buffer.from_handle(a.ptr + 4, 8))
    assert ctypes.string_at(a.ptr, 16) == bytes([0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15])
    read_only = StridedMemoryView.from_array_interface(b"abcdefghabcdefgh").buffer
    with pytest.raises(ValueError, match="read-only"):
        read_only.copy_from(a)
    a.copy_from(read_only)  # a read-only source is fine
    assert ctypes.string_at(a.ptr, 16) == b"abcdefghabcdefgh"
    b.close()
    with pytest.raises(RuntimeError, match="buffer is closed"):
        b.copy_to(mr.allocate(8))
    with pytest.raises(RuntimeError, match="buffer is closed"):
        mr.allocate(8).copy_from(b)
    empty = mr.allocate(0)
    assert empty.copy_to(mr.allocate(0)).size == 0


_FILL_SIZE = 64
_FILL_CASES = [  # cuda.core 1.2.2's test_buffer_fill cases, on host memory
    (0x42, _FILL_SIZE, None), (-1, _FILL_SIZE, OverflowError), (256, _FILL_SIZE, OverflowError),
    (1000, _FILL_SIZE, OverflowError), ("invalid", _FILL_SIZE, TypeError),
    (b"\x7f", _FILL_SIZE, None), (b"\x34\x12", _FILL_SIZE, None),
    (b"\xef\xbe\xad\xde", _FILL_SIZE, None), (b"\x34\x12", _FILL_SIZE + 1, ValueError),
    (b"\xef\xbe\xad\xde", _FILL_SIZE + 2, ValueError), (b"", _FILL_SIZE, ValueError),
    (b"\x01\x02\x03", _FILL_SIZE, ValueError),
    (np.uint8(0), _FILL_SIZE, None), (np.uint8(255), _FILL_SIZE, None),
    (np.int8(-1), _FILL_SIZE, None), (np.int8(-128), _FILL_SIZE, None),
    (np.uint16(0x1234), _FILL_SIZE, None), (np.int16(-32768), _FILL_SIZE, None),
    (np.uint16(0x1234), _FILL_SIZE + 1, ValueError),
    (np.uint32(0xDEADBEEF), _FILL_SIZE, None), (np.int32(-1), _FILL_SIZE, None),
    (np.uint32(0xDEADBEEF), _FILL_SIZE + 2, ValueError), (np.float32(1.0), _FILL_SIZE, None),
    (np.uint64(0), _FILL_SIZE, ValueError), (np.float64(0), _FILL_SIZE, ValueError),
]  # fmt: skip


@pytest.mark.parametrize(("value", "size", "error"), _FILL_CASES, ids=repr)
def test_buffer_fill(value, size, error):
    buffer = HostMemoryResource().allocate(size)
    ctypes.memset(buffer.ptr, 0xAA, size)
    if error is not None:
        with pytest.raises(error):
            buffer.fill(value, stream=None)
        assert ctypes.string_at(buffer.ptr, size) == b"\xaa" * size  # nothing written
        return
    buffer.fill(value, stream=None)
    pattern = bytes([value]) if isinstance(value, int) else memoryview(value).tobytes()
    assert ctypes.string_at(buffer.ptr, size) == pattern * (size // len(pattern))


def test_buffer_fill_refuses_unaligned_read_only_and_closed_buffers():
    base = HostMemoryResource().allocate(16)
    ctypes.memset(base.ptr, 0, 16)
    with pytest.raises(ValueError, match="4-byte pattern needs a buffer whose size"):
        Buffer.from_handle(base.ptr + 2, 8).fill(np.uint32(7))
    Buffer.from_handle(base.ptr + 2, 8).fill(9)  # one byte: any address
    assert ctypes.string_at(base.ptr, 16) == b"\0\0" + b"\x09" * 8 + b"\0" * 6
    with pytest.raises(ValueError, match="read-only"):
        StridedMemoryView.from_array_interface(b"abcd").buffer.fill(0)
    base.close()
    with pytest.raises(RuntimeError, match="buffer is closed"):
        base.fill(0)


# ------------------------------------------------ memory outlives close() while exports read it
class TrackedHostResource(HostMemoryResource):
    """Host memory whose deallocations are recorded (with their stream)."""

    def __init__(self):
        super().__init__()
        self.deallocations = []

    def deallocate(self, ptr, size, stream=None):
        self.deallocations.append((ptr, stream))
        super().deallocate(ptr, size, stream)


@pytest.mark.parametrize(
    "export",
    [np.asarray, np.from_dlpack, lambda view: np.from_dlpack(view.buffer),
     lambda view: StridedMemoryView.from_dlpack(view, -1)],
    ids=["array-interface", "dlpack", "buffer-dlpack", "view-of-view"],
)
@pytest.mark.parametrize("stream", [None, 7])
def test_close_while_exported_defers_the_deallocation_to_the_last_export(export, stream):
    """Found by the fuzz suite: buffer.close() freed memory a NumPy array exported from a
    view still read. Views keep the memory alive, so it is freed when the last export dies
    (on the stream close was given), exactly once; the view itself refuses use at once."""
    mr = TrackedHostResource()
    buffer = mr.allocate(8 * 1024)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((1024,), 8), np.float64)
    view.copy_from(np.arange(1024.0))
    exported = export(view)
    ptr = buffer.ptr
    buffer.close(stream)
    with pytest.raises(BufferError, match="closed"):
        view.copy_from(np.zeros(1024))
    del view
    gc.collect()
    assert mr.deallocations == []  # still read by the export
    np.testing.assert_array_equal(np.asarray(exported) if not isinstance(exported, np.ndarray)
                                  else exported.view(np.float64) if exported.dtype != np.float64
                                  else exported, np.arange(1024.0))  # fmt: skip
    del exported
    gc.collect()
    assert mr.deallocations == [(ptr, stream)]


def test_close_without_exports_frees_at_once_and_views_refuse_use():
    mr = TrackedHostResource()
    buffer = mr.allocate(64)
    ptr = buffer.ptr
    buffer.close()
    assert mr.deallocations == [(ptr, None)]
    failing = RecordingResource(fail=True).allocate(16)
    with pytest.raises(OSError, match="deallocate failed"):
        failing.close()  # nothing else holds the memory: deallocate runs here, its error too


def test_views_alone_keep_the_memory_until_they_die():
    mr = TrackedHostResource()
    buffer = mr.allocate(64)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((8,), 8), np.float64)
    sub = view[::2]
    buffer.close()
    for user in (view, sub):
        with pytest.raises(BufferError, match="closed"):
            user.view(dtype=np.int64)
    del view, user
    gc.collect()
    assert mr.deallocations == []  # sub still holds the memory (it refuses every use)
    del sub
    gc.collect()
    assert len(mr.deallocations) == 1


@pytest.mark.parametrize("size", [2**63, 2**64 - 1, sys.maxsize])
def test_host_allocations_no_process_can_address_are_overflow_errors(size):
    with pytest.raises(OverflowError, match=f"size {size}|must be in"):
        HostMemoryResource().allocate(size)
