"""Per-view launch records: a device view is validated and flattened once, not per launch.

A ``StridedMemoryView`` never changes its pointer, layout, dtype, read-only flag or device,
so its Numba type, its kernel parameters and the result of the accessibility checks are
computed on its first launch and kept, keyed by ``id(view)`` with a weak reference that
tells a live view from a new object at a reused address. Only the one thing that can
change, whether the view's buffer was closed, is checked at every launch. The device
check is done on the first launch against the device current then.
"""

import weakref

from layoutkit._numba_view import check_view_accessible, view_arguments, view_numba_type

_MAX_RECORDS = 1024
_records = {}


def view_record(view, name, device_id):
    """Return ``(weak reference, numba type, kernel parameter values)`` of a device view.

    Parameters
    ----------
    view : StridedMemoryView
        The argument.
    name : str
        How errors name the argument.
    device_id : int or callable
        The device the kernel runs on, or a function returning it (called only if the
        view's device must be compared; see ``check_view_accessible``).

    Raises
    ------
    ValueError
        A host-only view, or a view on another device.
    BufferError
        The view's buffer is closed.
    """
    record = _records.get(id(view))
    if record is not None and record[0]() is view:
        buffer = view._buffer  # made only on demand; only a made buffer can be closed
        if buffer is not None and buffer.is_closed:
            raise BufferError(f"{name}: the view's buffer is closed")
        return record
    check_view_accessible(view, name, True, device_id)
    record = (weakref.ref(view), view_numba_type(view, for_cuda=True), view_arguments(view))
    if len(_records) >= _MAX_RECORDS:
        _records.clear()
    _records[id(view)] = record
    return record
