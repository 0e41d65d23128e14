"""Execute copy plans that involve device-accessible memory.

* device to device (pinned and managed memory count as device-accessible): the kernels of
  :mod:`layoutkit.copy.gpu`, or ``cuMemcpyAsync`` for one contiguous run. Nothing on this
  path allocates, synchronises or waits on the host, so it can be captured into a CUDA
  graph (driver stream capture, ``torch.cuda.graph``, CuPy's capture) and replayed.
* host to device and device to host (a pageable host side): ``cuMemcpyAsync`` for one
  contiguous run, ``cuMemcpy2DAsync`` for long rows at a pitch, else *staged*:

  - a host side without gaps between its elements (any axis order) moves whole: its
    bytes go to a device temporary, and a device kernel rearranges them (or the
    reverse);
  - a host side with gaps is packed into (or unpacked from) a dense layout in its own
    axis order, in chunks, through a ring of ``STAGING_BUFFERS`` pinned buffers of
    ``STAGING_BYTES`` each: the host packs chunk ``i + 1`` (on ``HOST_THREADS``
    threads) while the copy engine moves chunk ``i``; a device kernel does any
    permutation. A broadcast source is packed before broadcasting (only its own
    elements cross the bus).

  Staged copies need the host and cannot be captured into a graph: queued on a
  capturing stream they raise ``RuntimeError`` before touching it.

A copy that writes host-only memory returns once the data has arrived (the driver returns
from a copy into pageable memory once it is done); a copy with a host-only side also waits
for its stream unless asked not to (``blocking=False``), and every such wait is logged
(DEBUG, logger ``layoutkit.copy``). Temporaries come from the copy's
``allocator`` where it names a resource for their side. Driver calls go through
:mod:`layoutkit._driver`.
"""

import logging
import threading

from layoutkit import _driver
from layoutkit.copy.plan import COPY2D, KERNEL, MEMCPY, NONE, STAGED, planned

__all__ = ["run_device_plan"]

#: Pinned staging buffers (a ring) and the bytes of each.
STAGING_BUFFERS = 3
STAGING_BYTES = 8 << 20

_staging_lock = threading.Lock()
_staging = {}  # device id -> [(pinned address, event)], made on first use

_log = logging.getLogger("layoutkit.copy")


def _synchronize(handle):
    """Wait for the work queued on stream ``handle`` (logged: ``Syncing stream <handle>``)."""
    _log.debug("Syncing stream %d", handle)
    _driver.stream_synchronize(handle)


def _allocated(resource, nbytes, stream, side, device_id, guards):
    """A temporary of ``nbytes`` from an allocator's ``side`` resource, checked before any
    copy writes it: a layoutkit Buffer, large enough, writable, reachable (the host for
    ``"host"``, device ``device_id`` for ``"device"``), and apart from what the copy uses.

    ``allocate`` is foreign code: it may have closed the copy's views or an earlier
    temporary, or handed out memory they occupy. ``guards`` is ``(dst, src, *earlier
    temporaries)`` (views, then Buffers); each must still be open and share no byte with
    the new buffer.

    Raises
    ------
    TypeError
        When ``allocate`` returns anything but a Buffer.
    ValueError
        For a buffer too small, read-only, out of reach, or overlapping ``dst``, ``src``
        or an earlier temporary, or when an earlier temporary was closed (the new buffer
        is closed first).
    BufferError
        When ``dst``'s or ``src``'s buffer was closed (the new buffer is closed first).
    """
    from layoutkit.memory import Buffer

    buffer = resource.allocate(nbytes, stream)
    if not issubclass(type(buffer), Buffer):  # not isinstance: __class__ may lie
        raise TypeError(
            f"allocator's {side} resource: {type(resource).__name__}.allocate() returned "
            f"{type(buffer).__name__}, not a layoutkit Buffer"
        )
    try:
        problem = _unusable(buffer, nbytes, side, device_id, guards)
    except BaseException:
        buffer.close(stream)
        raise
    if problem is None:
        return buffer
    buffer.close(stream)
    raise ValueError(f"allocator's {side} resource gave {problem} for a copy's temporary")


def _unusable(buffer, nbytes, side, device_id, guards):
    """Why ``buffer`` cannot be a temporary of ``nbytes`` (None: it can); ``BufferError``
    when a view in ``guards`` lost its memory."""
    from layoutkit.copy._api import _span as view_span
    from layoutkit.memoryview import check_memory

    dst, src, *temporaries = guards
    check_memory(dst, "dst")  # allocate may have closed them
    check_memory(src, "src")
    if any(temporary.is_closed for temporary in temporaries):
        return "a buffer after closing the copy's earlier temporary"
    if buffer.is_closed or buffer.size < nbytes:
        return f"a closed buffer or one of {buffer.size} bytes ({nbytes} needed)"
    if buffer.is_readonly:
        return "a read-only buffer"
    if side == "host" and not buffer.is_host_accessible:
        return "memory the host cannot access"
    if side == "device" and not (buffer.is_device_accessible and (
            buffer.is_host_accessible or buffer.device_id == device_id)):  # fmt: skip
        return f"memory device {device_id} cannot access"
    low, high = buffer.ptr, buffer.ptr + max(nbytes, 1)
    spans = [("dst", view_span(dst, dst.layout)), ("src", view_span(src, src.layout))]
    spans += [("an earlier temporary", (t.ptr, t.ptr + t.size)) for t in temporaries]
    for name, (start, stop) in spans:
        if low < stop and start < high:
            return f"memory that overlaps {name}"
    return None


class _Temporary:
    """A device temporary of a staged copy: from the allocator's device resource (its
    ``buffer``), else the driver's stream-ordered allocator (``buffer`` None); freed in
    stream order by :meth:`release`."""

    def __init__(self, allocator, nbytes, stream, handle, device_id, guards):
        resource = allocator.device if allocator is not None else None
        self._stream, self._handle = stream, handle
        if resource is None:
            self.buffer = None
            self.ptr = _driver.mem_alloc_async(max(nbytes, 1), handle)
        else:
            self.buffer = _allocated(resource, nbytes, stream, "device", device_id, guards)
            self.ptr = self.buffer.ptr

    def release(self):
        if self.buffer is None:
            _driver.mem_free_async(self.ptr, self._handle)
        else:
            self.buffer.close(self._stream)


def _check_devices(dst_device, src_device):
    """The device that runs the copy; refuse devices that cannot reach each other."""
    if dst_device >= 0 and src_device >= 0 and dst_device != src_device:
        if not _driver.device_can_access_peer(dst_device, src_device):
            raise ValueError(
                f"dst is on device {dst_device} and src on device {src_device}, "
                "which has no peer access to it; copy through host memory"
            )
        _driver.enable_peer_access(dst_device, src_device)
    for device in (dst_device, src_device):
        if device >= 0:
            return device
    return _driver.ensure_context()


def _ring(device_id):
    """The pinned staging buffers of a device and their events (lock held, context current)."""
    ring = _staging.get(device_id)
    if ring is None:
        ring = _staging[device_id] = [
            (_driver.mem_host_alloc(STAGING_BYTES), _driver.event_create())
            for _ in range(STAGING_BUFFERS)
        ]
    return ring


def _execute(plan, dst_ptr, src_ptr, dst_on_device, stream, device_id):
    """Run a ``memcpy``, ``copy2d`` or ``kernel`` plan; True when it was one of them."""
    method = plan.method
    if method == NONE:
        return True
    if method == MEMCPY:
        _driver.memcpy_async(dst_ptr + plan.dst_offset, src_ptr + plan.src_offset,
                             plan.nbytes, stream)  # fmt: skip
    elif method == COPY2D:
        _driver.memcpy_2d_async(
            dst_ptr + plan.dst_offset, plan.dst_strides[0], dst_on_device,
            src_ptr + plan.src_offset, plan.src_strides[0], not dst_on_device,
            plan.shape[1] * plan.unit, plan.shape[0], stream,
        )  # fmt: skip
    elif method == KERNEL:
        from layoutkit.copy import gpu

        gpu.launch_plan(plan, dst_ptr, src_ptr, stream, device_id)
    else:
        return False
    return True


def _device_copy(dst_ptr, dst_layout, src_ptr, src_layout, stream, device_id):
    """A device-to-device copy between two layouts (any plan but staging)."""
    plan = planned(dst_layout, src_layout, dst_ptr, src_ptr, True, True)
    _execute(plan, dst_ptr, src_ptr, True, stream, device_id)


def _span(layout):
    """``(low, high)``: the byte range of a layout's elements, relative to element zero."""
    low, high = layout.offset_bounds
    itemsize = layout.itemsize
    return (low - layout.slice_offset) * itemsize, (high - layout.slice_offset + 1) * itemsize


def _gap_free(layout):
    """Whether a layout's elements fill their byte range exactly (any order, any signs)."""
    low, high = layout.offset_bounds
    return layout.is_unique and high - low + 1 == layout.volume


def _staged(dst, src, dst_layout, src_layout, src_own_layout, stream, handle, device_id,
            allocator):  # fmt: skip
    """Host <-> device through a device temporary and, for a host side with gaps, pinned
    staging buffers or the allocator's host temporary (see the module docstring)."""
    to_device = bool(dst.is_device_accessible)
    host_ptr = src.ptr if to_device else dst.ptr
    host_layout = src_own_layout if to_device else dst_layout
    itemsize = host_layout.itemsize
    low, high = _span(host_layout)
    if _gap_free(host_layout):  # move the host bytes whole, rearrange on the device
        nbytes = high - low
        temporary = _Temporary(allocator, nbytes, stream, handle, device_id, (dst, src))
        twin = temporary.ptr - low
        try:
            if to_device:
                _driver.memcpy_async(temporary.ptr, host_ptr + low, nbytes, handle)
                _device_copy(dst.ptr, dst_layout, twin, _broadcast(host_layout, dst_layout),
                             handle, device_id)  # fmt: skip
            else:
                _device_copy(twin, host_layout, src.ptr, src_layout, handle, device_id)
                _driver.memcpy_async(host_ptr + low, temporary.ptr, nbytes, handle)
        finally:
            temporary.release()
        return
    dense = host_layout.to_dense()
    device_ptr, device_layout = (dst.ptr, dst_layout) if to_device else (src.ptr, src_layout)
    same = planned(device_layout, _broadcast(dense, device_layout), device_ptr, 0, True, True)
    temporary = host_buffer = None
    nbytes = dense.volume * itemsize
    try:  # every temporary is made before anything is written, and freed at the very end
        if same.method == MEMCPY:  # the device side is that dense layout: no temporary
            base = device_ptr + same.dst_offset - same.src_offset
        else:
            temporary = _Temporary(allocator, nbytes, stream, handle, device_id, (dst, src))
            base = temporary.ptr
        if allocator is not None and allocator.host is not None:
            earlier = () if temporary is None or temporary.buffer is None else (
                temporary.buffer,)  # fmt: skip
            host_buffer = _allocated(allocator.host, nbytes, stream, "host", None,
                                     (dst, src, *earlier))  # fmt: skip
        if not to_device and temporary is not None:
            _device_copy(base, dense, src.ptr, src_layout, handle, device_id)
        if host_buffer is not None:
            _through_host_temporary(host_buffer.ptr, to_device, base, dense, host_ptr,
                                    host_layout, handle)  # fmt: skip
        else:
            with _staging_lock:
                ring, chunk = _ring(device_id), STAGING_BYTES
                if to_device:
                    _pack_and_send(base, dense, host_ptr, host_layout, handle, ring, chunk)
                else:
                    _receive_and_unpack(host_ptr, host_layout, base, dense, handle, ring, chunk)
        if to_device and temporary is not None:
            _device_copy(dst.ptr, dst_layout, base, _broadcast(dense, dst_layout),
                         handle, device_id)  # fmt: skip
    finally:
        try:
            if host_buffer is not None:
                try:  # no transfer may still read or write the buffer (also after a failure)
                    _synchronize(handle)
                finally:
                    host_buffer.close(stream)
        finally:
            if temporary is not None:
                temporary.release()


def _through_host_temporary(temporary_ptr, to_device, base, dense, host_ptr, host_layout,
                            handle):  # fmt: skip
    """Pack (or unpack) the host side whole through the host temporary at address
    ``temporary_ptr`` (an allocator's buffer of the dense layout's bytes), in one chunk."""
    nbytes = dense.volume * dense.itemsize
    event = _driver.event_create()
    try:
        ring = [(temporary_ptr, event)]
        if to_device:
            _pack_and_send(base, dense, host_ptr, host_layout, handle, ring, nbytes)
        else:
            _receive_and_unpack(host_ptr, host_layout, base, dense, handle, ring, nbytes)
    finally:
        _driver.event_destroy(event)


def _broadcast(layout, like):
    return layout if layout.shape == like.shape else layout.broadcast_to(like.shape)


def _pieces(dense_layout, host_layout, host_ptr, chunk_bytes):
    """The chunks of a pack or unpack: ``(dense byte offset, bytes, host copy arguments)``,
    each chunk one contiguous range of the dense layout of at most ``chunk_bytes``
    (or one unit)."""
    from layoutkit.copy.cpu import split_problem
    from layoutkit.copy.plan import _widen, coalesced

    shape, ds, ss, d_off, s_off = coalesced(dense_layout, host_layout)
    unit, shape, ds, ss = _widen(shape, ds, ss, 0, host_ptr + s_off)
    limit = max(1, chunk_bytes // unit)
    for dense_offset, host_offset, piece in split_problem(shape, ds, ss, limit):
        m = len(piece)
        count = 1
        for extent in piece:
            count *= extent
        yield dense_offset + d_off, count * unit, (piece, ds[len(ds) - m :],
                                                   ss[len(ss) - m :], host_offset + s_off, unit)


def _pack_and_send(temporary, dense, host_ptr, host_layout, stream, ring, chunk_bytes):
    """Pack the host side chunk by chunk into the ``ring`` of ``(host buffer, event)``
    (buffers of ``chunk_bytes``), each chunk sent on."""
    from layoutkit.copy.cpu import copy_problem

    for i, (offset, nbytes, (piece, dense_strides, host_strides, host_offset, unit)) in enumerate(
        _pieces(dense, host_layout, host_ptr, chunk_bytes)
    ):
        pinned, event = ring[i % len(ring)]
        _driver.event_synchronize(event)  # the buffer's last transfer has left
        copy_problem(pinned, host_ptr + host_offset, piece, dense_strides, host_strides, unit)
        _driver.memcpy_async(temporary + offset, pinned, nbytes, stream)
        _driver.event_record(event, stream)


def _receive_and_unpack(host_ptr, host_layout, temporary, dense, stream, ring, chunk_bytes):
    """Bring the dense device copy back chunk by chunk through the ``ring`` (as
    :func:`_pack_and_send`'s) and unpack it into the host view."""
    from layoutkit.copy.cpu import copy_problem

    pieces = list(_pieces(dense, host_layout, host_ptr, chunk_bytes))
    for i, (offset, nbytes, _) in enumerate(pieces[: len(ring)]):
        pinned, event = ring[i]
        _driver.memcpy_async(pinned, temporary + offset, nbytes, stream)
        _driver.event_record(event, stream)
    for i, (_, _, (piece, dense_strides, host_strides, host_offset, unit)) in enumerate(pieces):
        pinned, event = ring[i % len(ring)]
        _driver.event_synchronize(event)
        copy_problem(host_ptr + host_offset, pinned, piece, host_strides, dense_strides, unit)
        later = i + len(ring)
        if later < len(pieces):
            offset, nbytes, _ = pieces[later]
            _driver.memcpy_async(pinned, temporary + offset, nbytes, stream)
            _driver.event_record(event, stream)


def run_device_plan(plan, dst, src, dst_layout, src_layout, src_own_layout, stream,
                    allocator=None, blocking=None):  # fmt: skip
    """Execute ``plan`` for views of which at least one is device-accessible.

    Parameters
    ----------
    plan : CopyPlan
        The plan :func:`layoutkit.copy.plan.plan_copy` made for these views.
    dst, src : StridedMemoryView
        The views (``ptr``, ``is_device_accessible``, ``device_id`` are read).
    dst_layout, src_layout : StridedLayout
        The destination layout and the source's broadcast to it.
    src_own_layout : StridedLayout
        The source's layout before broadcasting.
    stream : None, int or stream object
        The stream the copy is ordered on.
    allocator : CopyAllocatorOptions, optional
        Resources for the temporaries (checked by ``copy``).
    blocking : bool, optional
        Whether to wait for the stream at the end (``None``: where a side is host-only).

    Raises
    ------
    RuntimeError
        For a staged copy (a host side that is not device-accessible) queued on a stream
        that is capturing a CUDA graph.
    """
    handle = _driver.stream_handle(stream)
    dst_on_device = bool(dst.is_device_accessible)
    src_on_device = bool(src.is_device_accessible)
    dst_device = dst.device_id if dst_on_device else -1
    src_device = src.device_id if src_on_device else -1
    device_id = _check_devices(dst_device, src_device)
    if not (dst_on_device and src_on_device) and _driver.stream_is_capturing(handle):
        raise RuntimeError(
            f"copy between host memory and device memory (plan {plan.method}) cannot be "
            f"captured: stream {handle:#x} is capturing a CUDA graph; use pinned host memory "
            "(device-accessible) or copy outside the capture"
        )
    with _driver.device_context(device_id):
        if plan.method == STAGED:
            _staged(dst, src, dst_layout, src_layout, src_own_layout, stream, handle,
                    device_id, allocator)  # fmt: skip
        else:
            _execute(plan, dst.ptr, src.ptr, dst_on_device, handle, device_id)
        # blocking=None: wait where a side is host-only. Without the wait, a copy into
        # pageable host memory has still arrived (the driver returns once it has)
        if (not (dst_on_device and src_on_device)) if blocking is None else blocking:
            _synchronize(handle)
