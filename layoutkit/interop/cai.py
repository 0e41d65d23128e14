"""``__cuda_array_interface__`` (v3): import with its stream rules, and export.

Import (:func:`read_cuda_array_interface`): version 2 or newer, no mask, and a consumer
stream must be named (``stream_ptr=None`` is ambiguous: ``BufferError``). When the
producer names a stream that differs from the consumer's and ``stream_ptr`` is not
``-1``, the consumer stream waits for the producer's pending work (an event recorded
on the producer stream, waited on by the consumer), as the CAI v3 specification asks.

Export (:func:`cuda_interface_dict`): ``"stream": None``. A view carries no stream of
its own and promises nothing about pending work on its memory; as with
``StridedMemoryView.from_buffer``, ordering is the user's business, and ``None`` is
the value CAI v3 defines for "no synchronisation needed" (``1`` would claim work on the
legacy default stream and make every consumer wait on it).

Examples
--------
>>> import numpy as np
>>> from layoutkit.interop.cai import cuda_interface_dict
>>> cuda_interface_dict(4096, False, (3,), (4,), np.dtype("float32"), 4)["stream"] is None
True
"""

from .dlpack import _int_stream
from .host import InterfaceInfo, check_interface, interface_dict, interface_dtype

__all__ = ["cuda_interface_dict", "read_cuda_array_interface"]

_NO_SYNC = -1


def _wait_for_producer(consumer_stream, producer_stream):
    """Make ``consumer_stream`` wait for the work queued so far on ``producer_stream``."""
    from .. import _driver

    event = _driver._call("cuEventCreate", 0x2)  # CU_EVENT_DISABLE_TIMING
    try:
        _driver._call("cuEventRecord", event, producer_stream)
        _driver._call("cuStreamWaitEvent", consumer_stream, event, 0)
    finally:
        _driver._call("cuEventDestroy", event)


def _producer_stream(interface, obj):
    stream = interface.get("stream")
    if stream is None:
        return None
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise BufferError(
            f"{type(obj).__name__}.__cuda_array_interface__['stream'] is {stream!r}; "
            "CAI v3 requires None or an int stream handle"
        )
    if stream == 0:
        raise BufferError(
            f"{type(obj).__name__}.__cuda_array_interface__['stream'] is 0, which CAI v3 "
            "forbids as ambiguous (1: legacy default stream, 2: per-thread default stream)"
        )
    return stream


def read_cuda_array_interface(obj, stream_ptr):
    """Read a device tensor's pointer, shape, byte strides and dtype, ordering streams.

    Parameters
    ----------
    obj : object
        Exposes ``__cuda_array_interface__``.
    stream_ptr : int
        The consumer stream's handle, or ``-1`` for no synchronisation.

    Returns
    -------
    InterfaceInfo

    Raises
    ------
    TypeError
        When ``obj`` has no ``__cuda_array_interface__`` or ``stream_ptr`` is not an int.
    BufferError
        For ``stream_ptr=None``, a version below 2, a mask, or a malformed entry. Version
        2 (torch still exports it) has no ``stream`` entry, so nothing is ordered.
    """
    try:
        interface = obj.__cuda_array_interface__
    except AttributeError:
        raise TypeError(f"{type(obj).__name__} object has no __cuda_array_interface__") from None
    stream = stream_ptr if type(stream_ptr) is int else _int_stream(stream_ptr)
    if stream is None:
        raise BufferError(
            "stream_ptr=None is ambiguous for __cuda_array_interface__: pass the consumer "
            "stream's handle, or -1 for no synchronization"
        )
    # version 2 (no 'stream' entry: nothing to order) is still what torch 2.11 exports
    check_interface(interface, "__cuda_array_interface__", obj, min_version=2)
    data = interface.get("data")
    try:
        ptr, readonly = data
        ptr = int(ptr)
    except (TypeError, ValueError):
        raise BufferError(
            f"{type(obj).__name__}.__cuda_array_interface__['data'] is {data!r}, not a "
            "(pointer, read-only) pair"
        ) from None
    if not 0 <= ptr < 2**64:
        raise BufferError(
            f"{type(obj).__name__}.__cuda_array_interface__['data'] pointer {ptr} is not an address"
        )
    producer = _producer_stream(interface, obj)
    # the driver's handle 0 and CAI's 1 both name the legacy default stream
    if stream != _NO_SYNC and producer is not None and producer != (stream or 1):
        _wait_for_producer(stream, producer)
    strides = interface.get("strides")
    return InterfaceInfo(
        ptr, bool(readonly), tuple(interface["shape"]),
        None if strides is None else tuple(strides), interface_dtype(interface), obj,
    )  # fmt: skip


def cuda_interface_dict(ptr, readonly, shape, strides_in_bytes, dtype, itemsize):
    """The CAI v3 dict describing a device view: explicit byte strides, ``stream`` None."""
    interface = interface_dict(ptr, readonly, shape, strides_in_bytes, dtype, itemsize)
    interface["stream"] = None
    return interface
