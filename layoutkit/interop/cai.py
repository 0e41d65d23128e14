"""``__cuda_array_interface__`` (v3): import with its stream rules, and export.

Import (:func:`read_cuda_array_interface`): version 3 or newer, no mask, and a consumer
stream must be named (``stream_ptr=None`` is ambiguous: ``BufferError``). When the
producer names a stream that differs from the consumer's and ``stream_ptr`` is not
``-1``, the consumer stream waits for the producer's pending work (an event recorded
on the producer stream, waited on by the consumer), as the CAI v3 specification asks.
Every entry is checked as for ``__array_interface__``, except that a null pointer with
elements is accepted as a description (cuda.core 1.2.2 accepts it; the view refuses
every use of its memory).

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

from .._driver import CLAIMED_DEVICE
from .dlpack import consumer_stream
from .host import _pointer_pair, check_interface, interface_dict, interface_dtype
from .record import (
    CURRENT_DEVICE,
    ImportRecord,
    check_pointer,
    import_layout,
    index_entry,
    int_entries,
    producer_failure,
)

__all__ = ["cuda_interface_dict", "driver_stream", "read_cuda_array_interface"]

_NO_SYNC = -1
_LEGACY_DEFAULT = (0, 1)  # the driver's NULL handle and CU_STREAM_LEGACY (CAI's 1)


def driver_stream(handle):
    """A stream handle as the driver compares it: CAI's and DLPack's ``1`` is handle 0.

    Examples
    --------
    >>> driver_stream(1), driver_stream(0), driver_stream(2), driver_stream(4096)
    (0, 0, 2, 4096)
    """
    return 0 if handle in _LEGACY_DEFAULT else handle


def _producer_stream(interface, what):
    stream = interface.get("stream")
    if stream is None:
        return None
    handle = index_entry(stream)
    if handle is None:
        raise BufferError(
            f"{what}['stream'] is {stream!r}; CAI v3 requires None or an int stream handle"
        )
    stream = handle
    if stream == 0:
        raise BufferError(
            f"{what}['stream'] is 0, which CAI v3 forbids as ambiguous (1: legacy default "
            "stream, 2: per-thread default stream)"
        )
    if not 0 < stream < 2**64:
        raise BufferError(f"{what}['stream'] is {stream}, not a stream handle")
    return stream


def read_cuda_array_interface(obj, stream_ptr):
    """Read a device tensor into an :class:`ImportRecord`, ordering streams.

    Parameters
    ----------
    obj : object
        Exposes ``__cuda_array_interface__``.
    stream_ptr : int
        The consumer stream's handle, or ``-1`` for no synchronisation.

    Returns
    -------
    ImportRecord
        Its location is left to the driver (``CLAIMED_DEVICE``: where there is no
        driver, using the memory raises ``NoDriverError``; it is never read as host
        memory), except for an empty tensor without a pointer, which is on the current
        device.

    Raises
    ------
    TypeError
        When ``obj`` has no ``__cuda_array_interface__`` or ``stream_ptr`` is not a stream.
    BufferError
        For ``stream_ptr=None``, a version below 3 (as cuda.core 1.2.2: version 2, which
        torch still exports, cannot name the producer's stream; take torch tensors through
        DLPack), a mask or a malformed entry. A null pointer with elements is accepted, as
        cuda.core 1.2.2 does: such a view is a description only and refuses everything
        that would touch its memory.
    ValueError, OverflowError
        For a negative extent, a stride that is no multiple of the itemsize, or values
        beyond int64.
    """
    try:
        interface = obj.__cuda_array_interface__
    except AttributeError:
        raise TypeError(f"{type(obj).__name__} object has no __cuda_array_interface__") from None
    except Exception as exc:  # the producer's own failure: it exports nothing
        raise producer_failure(f"{type(obj).__name__}.__cuda_array_interface__", exc) from exc
    stream = consumer_stream(stream_ptr)
    if stream is None:
        raise BufferError(
            "stream_ptr=None: stream=None is ambiguous for __cuda_array_interface__; pass the consumer "
            "stream's handle, or -1 for no synchronization"
        )
    what = f"{type(obj).__name__}.__cuda_array_interface__"
    check_interface(interface, "__cuda_array_interface__", obj)
    dtype = interface_dtype(interface, what)
    shape = int_entries(interface["shape"], "shape", what)
    strides = interface.get("strides")
    if strides is not None:
        strides = int_entries(strides, "strides", what)
    layout = import_layout(shape, strides, dtype.itemsize, True, what)
    ptr, readonly = _pointer_pair(interface.get("data"), what)
    check_pointer(ptr, layout, what, null_with_elements=True)  # as cuda.core 1.2.2 accepts
    producer = _producer_stream(interface, what)
    if stream != _NO_SYNC and producer is not None:
        from .._driver import order_after

        order_after(driver_stream(stream), driver_stream(producer))
    location = CLAIMED_DEVICE if ptr else CURRENT_DEVICE
    # the dict keeps alive what the producer put in it for the memory (as host.py's reader)
    return ImportRecord(ptr, layout, dtype, location, readonly, obj, (obj, interface), None)


def cuda_interface_dict(ptr, readonly, shape, strides_in_bytes, dtype, itemsize):
    """The CAI v3 dict describing a device view: explicit byte strides, ``stream`` None."""
    interface = interface_dict(ptr, readonly, shape, strides_in_bytes, dtype, itemsize)
    interface["stream"] = None
    return interface
