"""Device.create_stream(): one owner per stream, destroyed once; cuda.core 1.2.2's forms.

The driver calls are replaced by a recorder here (no GPU on CI); the cuda test at the end
makes real streams and orders a copy and an import on one.
"""

import copy
import gc
import pickle

import numpy as np
import pytest

import layoutkit
from layoutkit import Stream, StridedMemoryView, _driver
from layoutkit.stream import create_stream


class Recorder:
    """Stands in for the driver's stream calls."""

    def __init__(self, monkeypatch):
        self.created, self.destroyed, self.synced = [], [], []
        monkeypatch.setattr(_driver, "stream_create", self.create)
        monkeypatch.setattr(_driver, "stream_destroy", self.destroyed.append)
        monkeypatch.setattr(_driver, "stream_synchronize", self.synced.append)

    def create(self, device_id, nonblocking=True):
        self.created.append((device_id, nonblocking))
        return 0x1000 + len(self.created)


@pytest.fixture
def driver(monkeypatch):
    return Recorder(monkeypatch)


def test_a_new_stream_is_non_blocking_and_destroyed_once_by_close(driver):
    stream = create_stream(0)
    assert driver.created == [(0, True)]
    assert stream.handle == 0x1001 and stream.device_id == 0 and not stream.is_closed
    assert stream.__cuda_stream__() == (0, 0x1001)
    assert _driver.stream_handle(stream) == 0x1001  # what copy(..., stream=) reads
    stream.sync()
    assert driver.synced == [0x1001]
    stream.close()
    stream.close()
    assert driver.destroyed == [0x1001]
    assert stream.handle == 0 and stream.is_closed and repr(stream) == "<Stream (closed)>"
    for use in (stream.sync, stream.__cuda_stream__):
        with pytest.raises(RuntimeError, match="the stream was closed"):
            use()


def test_a_dropped_stream_is_destroyed_once_and_a_with_block_closes_it(driver):
    create_stream(0)
    gc.collect()
    assert driver.destroyed == [0x1001]
    with create_stream(0) as stream:
        assert stream.handle == 0x1002
    assert driver.destroyed == [0x1001, 0x1002]
    del stream
    gc.collect()
    assert driver.destroyed == [0x1001, 0x1002]


def test_a_wrapped_stream_belongs_to_its_object(driver):
    class Foreign:
        def __cuda_stream__(self):
            return (0, 0x77)

    foreign = Foreign()
    stream = create_stream(0, foreign)
    assert stream.handle == 0x77 and driver.created == []
    stream.close()
    del stream
    gc.collect()
    assert driver.destroyed == []


def test_a_foreign_handle_and_the_default_stream_are_never_destroyed(driver, monkeypatch):
    """cuda.core's ``Stream.from_handle(handle)`` and ``Device.default_stream``: streams
    this library did not make, so closing (or dropping) their objects destroys nothing."""
    monkeypatch.setattr(_driver, "stream_device_id", lambda handle: 3)
    foreign = Stream.from_handle(0x55)
    assert foreign.handle == 0x55 and foreign.device_id == 3
    foreign.sync()
    foreign.close()
    del foreign
    gc.collect()
    assert driver.destroyed == [] and driver.synced == [0x55]


@pytest.mark.parametrize(
    ("handle", "error"),
    [(None, TypeError), ("0x55", TypeError), (1.5, TypeError), (True, TypeError),
     (-1, ValueError), (2**64, ValueError)],
)
def test_a_foreign_handle_must_name_a_stream(driver, handle, error):
    with pytest.raises(error, match="stream|handle"):
        Stream.from_handle(handle)
    assert driver.destroyed == []


@pytest.mark.parametrize(
    ("options", "nonblocking"),
    [({"nonblocking": False}, False), ({"nonblocking": True}, True)],
)
def test_options_choose_blocking_or_not(driver, options, nonblocking):
    create_stream(0, options=options)

    class StreamOptions:  # cuda.core's form
        priority = None

    StreamOptions.nonblocking = nonblocking
    create_stream(0, options=StreamOptions())
    assert driver.created == [(0, nonblocking)] * 2


@pytest.mark.parametrize(
    "options",
    [{"nonblocking": 1}, {"priority": 0}, {"nonblocking": True, "x": 1}, "fast", object()],
    ids=["int", "priority", "unknown key", "string", "object"],
)
def test_other_options_are_refused_before_a_stream_is_made(driver, options):
    with pytest.raises(TypeError, match="options="):
        create_stream(0, options=options)
    assert driver.created == []


def test_streams_are_made_only_by_a_device_and_never_copied(driver):
    with pytest.raises(TypeError, match="use Device.create_stream"):
        Stream()
    stream = create_stream(0)
    for duplicate in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="cannot (pickle or )?copy a Stream"):
            duplicate(stream)
    assert layoutkit.Stream is Stream and "Stream" in layoutkit.__all__


def test_a_late_free_on_a_closed_stream_waits_for_the_device(driver, monkeypatch):
    """Found on the H200: buffer.close(stream) with a view alive defers the free to the
    view's death, by when the stream was closed; the free raised in a finalizer (and the
    memory leaked)."""
    import contextlib

    from layoutkit.memory import DeviceMemoryResource

    freed, waited = [], []
    monkeypatch.setattr(_driver, "device_count", lambda: 1)
    monkeypatch.setattr(_driver, "device_context", lambda device_id: contextlib.nullcontext())
    monkeypatch.setattr(_driver, "mem_free_async", lambda ptr, stream: freed.append((ptr, stream)))
    monkeypatch.setattr(_driver, "synchronize_device", waited.append)
    resource = DeviceMemoryResource(0)
    stream = create_stream(0)
    resource.deallocate(0x5000, 64, stream)  # an open stream orders the free
    stream.close()
    resource.deallocate(0x6000, 64, stream)
    assert freed == [(0x5000, 0x1001), (0x6000, 0)] and waited == [0]


@pytest.mark.cuda
def test_a_device_stream_orders_a_copy_and_an_import():
    from layoutkit import Device

    device = Device(0)
    stream = device.create_stream()
    assert isinstance(stream, Stream) and stream.device_id == 0 and stream.handle
    host = np.arange(12.0).reshape(3, 4)
    buffer = device.allocate(host.nbytes, stream)
    on_device = StridedMemoryView.from_buffer(buffer, (4, 3), itemsize=8, dtype=np.float64)
    layoutkit.copy(on_device, host.T, stream=stream)
    back = np.zeros((4, 3))
    layoutkit.copy(back, on_device, stream=stream)
    stream.sync()
    np.testing.assert_array_equal(back, host.T)
    cp = pytest.importorskip("cupy")
    array = cp.arange(6.0)
    view = StridedMemoryView.from_dlpack(array, stream_ptr=stream.handle)
    assert view.ptr == array.data.ptr
    buffer.close(stream)  # the view is alive: the free waits for it, after the stream's end
    stream.close()
    assert stream.handle == 0
    side = cp.cuda.Stream(non_blocking=True)
    foreign = Stream.from_handle(side.ptr)
    assert foreign.handle == side.ptr and foreign.device_id == 0
    foreign.close()  # the object only: CuPy's stream still works
    side.synchronize()
    default = device.default_stream
    assert default.handle == 0 and default.device_id == 0 and default == device.default_stream
    scratch = device.allocate(host.nbytes, default)
    target = StridedMemoryView.from_buffer(scratch, (4, 3), itemsize=8, dtype=np.float64)
    layoutkit.copy(target, host.T, stream=default)
    again = np.zeros((4, 3))
    layoutkit.copy(again, target, stream=default)
    np.testing.assert_array_equal(again, host.T)
    default.close()  # the object only: the legacy stream still works
    device.default_stream.sync()
    scratch.close()
    del on_device
    gc.collect()  # the late free: the device waited for, no error in the finalizer
