"""Execute copy plans that involve device-accessible memory.

* device to device: ``cuMemcpyAsync`` for one contiguous run, else a numba-cuda kernel
  (:mod:`layoutkit.copy.gpu`) on the destination's device;
* host to device and device to host: ``cuMemcpyAsync``, ``cuMemcpy2DAsync`` for rows at
  a pitch, else staging: a dense host side is moved whole into a device temporary and
  rearranged there by a kernel; a strided host side is packed (or unpacked) on the host
  into a pinned buffer that is dense in the destination's axis order.

Driver calls go through :mod:`layoutkit._driver`; this module adds the 2-d copy and the
peer-access checks. A copy that writes host-only memory, and every staged copy, waits for
its stream before returning.
"""

import threading

from layoutkit import _driver
from layoutkit.copy.plan import (
    COPY2D,
    ELEMENTWISE,
    FILL,
    MEMCPY,
    NONE,
    STAGE_DEVICE,
    STAGE_HOST,
    TRANSPOSE,
    byte_extent,
    plan_copy,
)

__all__ = ["run_device_plan"]

_MEMORYTYPE_HOST = 1
_MEMORYTYPE_UNIFIED = 4

_pinned_lock = threading.Lock()
_pinned = {"ptr": 0, "size": 0}
#: A pinned staging buffer up to this size is kept for the next staged copy.
KEEP_PINNED_BYTES = 64 << 20


class _Side:
    """One side of a copy: element-zero address, element strides, where it lives."""

    __slots__ = ("ptr", "strides", "on_device")

    def __init__(self, ptr, strides, on_device):
        self.ptr = ptr
        self.strides = tuple(strides)
        self.on_device = on_device


def _dense_strides(shape, order_strides):
    """C-dense element strides for ``shape`` with axes ordered like ``order_strides``."""
    order = sorted(range(len(shape)), key=lambda k: abs(order_strides[k]), reverse=True)
    strides = [0] * len(shape)
    step = 1
    for k in reversed(order):
        strides[k] = step
        step *= shape[k]
    return tuple(strides)


def _memcpy_2d(plan, dst, src, stream):
    driver = _driver._bindings()
    params = driver.CUDA_MEMCPY2D()
    for prefix, side, offset, pitch in (
        ("src", src, plan.src_offset, plan.src_strides[0]),
        ("dst", dst, plan.dst_offset, plan.dst_strides[0]),
    ):
        address = side.ptr + offset
        if side.on_device:
            setattr(params, prefix + "MemoryType", driver.CUmemorytype(_MEMORYTYPE_UNIFIED))
            setattr(params, prefix + "Device", address)
        else:
            setattr(params, prefix + "MemoryType", driver.CUmemorytype(_MEMORYTYPE_HOST))
            setattr(params, prefix + "Host", address)
        setattr(params, prefix + "Pitch", pitch)
    params.WidthInBytes = plan.shape[1] * plan.unit
    params.Height = plan.shape[0]
    _driver._call("cuMemcpy2DAsync", params, stream)


def _check_devices(dst_device, src_device):
    """The device that runs the copy; refuse devices that cannot reach each other."""
    if dst_device >= 0 and src_device >= 0 and dst_device != src_device:
        driver = _driver._bindings()
        can_access = _driver._call(
            "cuDeviceCanAccessPeer",
            _driver._call("cuDeviceGet", dst_device),
            _driver._call("cuDeviceGet", src_device),
        )
        if not can_access:
            raise ValueError(
                f"dst is on device {dst_device} and src on device {src_device}, "
                "which has no peer access to it; copy through host memory"
            )
        with _driver.device_context(dst_device):
            error = driver.cuCtxEnablePeerAccess(_driver.primary_context(src_device), 0)[0]
            already = driver.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
            if error not in (driver.CUresult.CUDA_SUCCESS, already):
                _driver._raise_for("cuCtxEnablePeerAccess", error)
    for device in (dst_device, src_device):
        if device >= 0:
            return device
    return _driver.ensure_context()


def _run_kernel(plan, dst, src, stream, device_id):
    from layoutkit.copy import gpu

    with _driver.device_context(device_id):
        gpu.launch_plan(plan, dst.ptr, src.ptr, stream, device_id)


def _device_temporary(nbytes, stream, device_id):
    with _driver.device_context(device_id):
        return _driver.mem_alloc_async(max(nbytes, 1), stream)


def _free_device_temporary(ptr, stream, device_id):
    with _driver.device_context(device_id):
        _driver.mem_free_async(ptr, stream)


def _pinned_buffer(nbytes):
    """The process's pinned staging buffer, grown to ``nbytes`` (caller holds the lock)."""
    if _pinned["size"] < nbytes:
        _release_pinned(0)
        _pinned["ptr"] = _driver.mem_host_alloc(nbytes)
        _pinned["size"] = nbytes
    return _pinned["ptr"]


def _release_pinned(keep):
    """Free the staging buffer if it is larger than ``keep`` bytes (caller holds the lock)."""
    if _pinned["ptr"] and _pinned["size"] > keep:
        ptr = _pinned["ptr"]
        _pinned["ptr"], _pinned["size"] = 0, 0
        _driver.mem_free_host(ptr)


def _execute(plan, shape, itemsize, dst, src, stream, device_id):
    """Run ``plan`` from ``src`` to ``dst`` (both :class:`_Side`), any placement of the two."""
    method = plan.method
    if method == NONE:
        return
    if method == MEMCPY:
        _driver.memcpy_async(
            dst.ptr + plan.dst_offset, src.ptr + plan.src_offset, plan.nbytes, stream
        )
    elif method == COPY2D:
        _memcpy_2d(plan, dst, src, stream)
    elif method in (ELEMENTWISE, FILL, TRANSPOSE):
        _run_kernel(plan, dst, src, stream, device_id)
    elif method == STAGE_DEVICE:
        _stage_on_device(shape, itemsize, dst, src, stream, device_id)
    elif method == STAGE_HOST:
        _stage_on_host(shape, itemsize, dst, src, stream, device_id)
    else:
        raise ValueError(f"unknown copy plan method {method!r}")


def _replan(shape, itemsize, dst, src, stream, device_id):
    plan = plan_copy(
        shape, dst.strides, src.strides, itemsize, dst.ptr, src.ptr, dst.on_device, src.on_device
    )
    _execute(plan, shape, itemsize, dst, src, stream, device_id)


def _stage_on_device(shape, itemsize, dst, src, stream, device_id):
    """The host side is dense: move its bytes whole, rearrange them on the device."""
    host = src if dst.on_device else dst
    lo, hi = byte_extent(shape, host.strides, itemsize)
    temporary = _device_temporary(hi - lo, stream, device_id)
    try:
        twin = _Side(temporary - lo, host.strides, True)
        if dst.on_device:
            _driver.memcpy_async(temporary, src.ptr + lo, hi - lo, stream)
            _replan(shape, itemsize, dst, twin, stream, device_id)
        else:
            _replan(shape, itemsize, twin, src, stream, device_id)
            _driver.memcpy_async(dst.ptr + lo, temporary, hi - lo, stream)
    finally:
        _free_device_temporary(temporary, stream, device_id)
    if not dst.on_device:
        _driver.stream_synchronize(stream)


def _stage_on_host(shape, itemsize, dst, src, stream, device_id):
    """The host side is strided: pack or unpack it through pinned memory."""
    from layoutkit.copy.cpu import run_host_plan

    nbytes = itemsize
    for extent in shape:
        nbytes *= extent
    dense = _dense_strides(shape, dst.strides)
    with _pinned_lock:
        pinned = _Side(_pinned_buffer(nbytes), dense, False)
        if dst.on_device:
            run_host_plan(plan_copy(shape, dense, src.strides, itemsize, pinned.ptr, src.ptr),
                          pinned.ptr, src.ptr)  # fmt: skip
            _replan(shape, itemsize, dst, pinned, stream, device_id)
            _driver.stream_synchronize(stream)
        else:
            _replan(shape, itemsize, pinned, src, stream, device_id)
            _driver.stream_synchronize(stream)
            run_host_plan(plan_copy(shape, dst.strides, dense, itemsize, dst.ptr, pinned.ptr),
                          dst.ptr, pinned.ptr)  # fmt: skip
        _release_pinned(KEEP_PINNED_BYTES)


def run_device_plan(plan, dst, src, dst_layout, src_strides, stream):
    """Execute ``plan`` for views of which at least one is device-accessible.

    Parameters
    ----------
    plan : CopyPlan
        The plan :func:`layoutkit.copy.plan.plan_copy` made for these views.
    dst, src : StridedMemoryView
        The views (``ptr``, ``is_device_accessible``, ``device_id`` are read).
    dst_layout : StridedLayout
        The destination layout.
    src_strides : tuple of int
        The source strides broadcast to the destination shape, in elements.
    stream : None, int or stream object
        The stream the copy is ordered on.
    """
    handle = _driver.stream_handle(stream)
    dst_device = dst.device_id if dst.is_device_accessible else -1
    src_device = src.device_id if src.is_device_accessible else -1
    device_id = _check_devices(dst_device, src_device)
    dst_side = _Side(dst.ptr, dst_layout.strides, bool(dst.is_device_accessible))
    src_side = _Side(src.ptr, src_strides, bool(src.is_device_accessible))
    with _driver.device_context(device_id):
        _execute(plan, dst_layout.shape, dst_layout.itemsize, dst_side, src_side, handle, device_id)
    if not dst_side.on_device and plan.method in (MEMCPY, COPY2D):
        _driver.stream_synchronize(handle)
