"""``copy(dst, src, stream=None)``: validate two views, plan, and run the plan.

A view is anything with ``ptr`` (address of element zero), ``layout`` (a
``StridedLayout``), ``dtype``, ``readonly``, ``is_device_accessible`` and ``device_id``,
such as :class:`layoutkit.StridedMemoryView`; anything else that
``StridedMemoryView.from_any_interface`` accepts (NumPy, CuPy, torch and JAX arrays,
DLPack producers) is imported as one first.
"""

from layoutkit.copy.plan import broadcast_source_strides, byte_extent, plan_copy

__all__ = ["copy"]

_VIEW_ATTRIBUTES = ("ptr", "layout", "readonly", "is_device_accessible", "device_id")


def as_copy_view(obj, name, stream):
    """``obj`` as a view a copy can use: a view (checked open), or an imported array.

    Arrays and other producers are imported with ``from_any_interface`` on the copy's
    stream (host producers need none). A view whose buffer was closed is refused,
    whatever the view cached before.

    Raises
    ------
    TypeError
        When ``obj`` is neither a view nor importable.
    BufferError
        When the view's buffer is closed, or it describes a null pointer with elements.

    Examples
    --------
    >>> import numpy as np
    >>> as_copy_view(np.zeros(3), "dst", None).shape
    (3,)
    >>> as_copy_view(3, "dst", None)
    Traceback (most recent call last):
    ...
    TypeError: dst must be a strided memory view or an array (anything StridedMemoryView.from_any_interface accepts); got int: int object supports none of DLPack, __cuda_array_interface__, __array_interface__ or the buffer protocol
    """
    from layoutkit.memoryview import StridedMemoryView

    if not isinstance(obj, StridedMemoryView) and not all(
        hasattr(obj, a) for a in _VIEW_ATTRIBUTES
    ):
        from layoutkit import _driver

        stream_ptr = _driver.stream_handle(stream) if stream is not None else 0
        try:
            obj = StridedMemoryView.from_any_interface(obj, stream_ptr)
        except TypeError as exc:
            raise TypeError(
                f"{name} must be a strided memory view or an array (anything "
                f"StridedMemoryView.from_any_interface accepts); got {type(obj).__name__}: {exc}"
            ) from None
    from layoutkit.memoryview import check_memory

    check_memory(obj, name)  # a closed buffer, or a null pointer with elements: no memory
    return obj


def _check_dtypes(dst, src, dst_layout, src_layout):
    dst_dtype = getattr(dst, "dtype", None)
    src_dtype = getattr(src, "dtype", None)
    if dst_dtype is not None and src_dtype is not None and dst_dtype != src_dtype:
        raise TypeError(
            f"dst dtype {dst_dtype} and src dtype {src_dtype} differ; copy does not convert"
        )
    if dst_layout.itemsize != src_layout.itemsize:
        raise TypeError(
            f"dst itemsize {dst_layout.itemsize} and src itemsize {src_layout.itemsize} differ; "
            "copy does not convert"
        )


def _broadcast_src_strides(dst_layout, src_layout):
    return broadcast_source_strides(dst_layout.shape, src_layout.shape, src_layout.strides)


def _overlapping(dst, src, dst_layout, src_strides):
    """Whether the byte ranges of the two views intersect.

    Host and device pointers share one (unified) address space, so ranges of any two
    views are compared: distinct allocations never intersect.
    """
    itemsize = dst_layout.itemsize
    d_lo, d_hi = byte_extent(dst_layout.shape, dst_layout.strides, itemsize)
    s_lo, s_hi = byte_extent(dst_layout.shape, src_strides, itemsize)
    if d_lo == d_hi or s_lo == s_hi:
        return False
    return dst.ptr + d_lo < src.ptr + s_hi and src.ptr + s_lo < dst.ptr + d_hi


def copy(dst, src, stream=None):
    """Copy every element of ``src`` into ``dst``: any layouts, host or device.

    Parameters
    ----------
    dst : StridedMemoryView or array
        The destination; writable, with a unique layout (no two indices share memory).
        Anything ``StridedMemoryView.from_any_interface`` accepts works too.
    src : StridedMemoryView or array
        The source, with the same dtype; its shape must broadcast to ``dst``'s.
    stream : None, int or stream object, optional
        The CUDA stream that orders a copy involving device-accessible memory
        (``None``: the legacy default stream). Ignored for host-to-host copies.

    Notes
    -----
    Host-to-host copies are done when the call returns. A copy whose destination is
    device-accessible memory is queued on ``stream``. A copy into host-only memory from
    device memory returns once the data has arrived. Overlapping views are refused
    (copy through a temporary instead), except a view copied onto itself, which is a
    no-op.

    Raises
    ------
    TypeError
        When an argument is neither a view nor an array, or the dtypes (itemsizes) differ.
    BufferError
        When a view's buffer was closed, or a view describes a null pointer with elements.
    ValueError
        When the shapes do not broadcast, ``dst`` is read-only or not unique (a
        broadcast), the views overlap, or they live on different devices that cannot
        reach each other.

    Examples
    --------
    >>> import numpy as np
    >>> from layoutkit import StridedMemoryView
    >>> a = np.arange(6, dtype=np.int16).reshape(2, 3)
    >>> b = np.zeros((3, 2), dtype=np.int16)
    >>> copy(StridedMemoryView.from_array_interface(b),
    ...      StridedMemoryView.from_array_interface(a.T))
    >>> b.tolist()
    [[0, 3], [1, 4], [2, 5]]
    >>> copy(b, np.ones((3, 2), dtype=np.int16))  # arrays need no views
    >>> b.tolist()
    [[1, 1], [1, 1], [1, 1]]
    """
    dst = as_copy_view(dst, "dst", stream)
    src = as_copy_view(src, "src", stream)
    dst_layout, src_layout = dst.layout, src.layout
    _check_dtypes(dst, src, dst_layout, src_layout)
    src_strides = _broadcast_src_strides(dst_layout, src_layout)
    if dst.readonly:
        raise ValueError("dst is read-only")
    if dst_layout.volume == 0:
        return
    if not dst_layout.is_unique:
        raise ValueError(
            f"dst layout is not unique (shape {dst_layout.shape}, strides {dst_layout.strides}): "
            "a broadcast destination cannot be written"
        )
    if _overlapping(dst, src, dst_layout, src_strides):
        if dst.ptr == src.ptr and tuple(dst_layout.strides) == tuple(src_strides):
            return
        raise ValueError(
            "dst and src overlap in memory; copy src into a temporary first "
            "(e.g. a dense copy) and copy that into dst"
        )
    dst_on_device = bool(dst.is_device_accessible)
    src_on_device = bool(src.is_device_accessible)
    plan = plan_copy(
        dst_layout.shape,
        dst_layout.strides,
        src_strides,
        dst_layout.itemsize,
        dst.ptr,
        src.ptr,
        dst_on_device,
        src_on_device,
    )
    if not dst_on_device and not src_on_device:
        from layoutkit.copy.cpu import run_host_plan

        run_host_plan(plan, dst.ptr, src.ptr)
        return
    from layoutkit.copy._transfer import run_device_plan

    run_device_plan(plan, dst, src, dst_layout, src_strides, stream)
