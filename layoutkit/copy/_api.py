"""``copy(dst, src, stream=None, allocator=None, blocking=None)``: validate two views, plan
from their layouts, run the plan.

Both sides are :class:`layoutkit.StridedMemoryView` objects; anything else that
``StridedMemoryView.from_any_interface`` accepts (NumPy, CuPy, torch and JAX arrays,
DLPack producers) is imported as one first. Objects that merely look like views (a
``ptr`` and a ``layout`` attribute) are imported the same way, never trusted: a copy
writes where the pointer says, so only validated views reach it.
"""

import dataclasses
import functools

import numpy as np

from layoutkit import _driver
from layoutkit._errors import DtypeMismatchError
from layoutkit.copy.cpu import kernel_beats_numpy, run_host_plan
from layoutkit.copy.plan import check_layouts, planned
from layoutkit.interop.host import ndarray_record
from layoutkit.layout import StridedLayout
from layoutkit.memoryview import StridedMemoryView, check_memory

__all__ = ["CopyAllocatorOptions", "copy"]


@dataclasses.dataclass(frozen=True)
class CopyAllocatorOptions:
    """Memory resources a copy allocates its temporaries from (``copy(allocator=...)``).

    A copy between host and device memory whose sides cannot move as they are allocates
    temporaries: a dense device copy of the device side, and, where the host side has
    gaps, a host buffer it is packed into (or unpacked from). Without a resource for a
    side, the copy uses the driver's stream-ordered allocator on the device and a ring of
    pinned buffers of its own on the host. A dict ``{"host": ..., "device": ...}`` works
    in place of this class, as in cuda.core.

    Attributes
    ----------
    host : MemoryResource, optional
        Allocates the host temporary (``allocate(size, stream)``, a host-accessible
        :class:`~layoutkit.Buffer`); pinned memory (``PinnedMemoryResource``) lets the
        copy engine read it directly.
    device : MemoryResource, optional
        Allocates device temporaries (a device-accessible Buffer on the copy's device).

    Examples
    --------
    >>> from layoutkit import HostMemoryResource
    >>> CopyAllocatorOptions(host=HostMemoryResource()).device is None
    True
    """

    host: object = None
    device: object = None


def allocator_options(allocator):
    """``allocator`` as a :class:`CopyAllocatorOptions`, or None for none.

    Raises
    ------
    TypeError
        For anything but None, a CopyAllocatorOptions or a dict, or a resource without a
        callable ``allocate``.
    ValueError
        For a dict with keys other than ``"host"`` and ``"device"``.

    Examples
    --------
    >>> from layoutkit import HostMemoryResource
    >>> allocator_options({"host": HostMemoryResource()}).device is None
    True
    >>> allocator_options({"pinned": None})
    Traceback (most recent call last):
    ...
    ValueError: allocator: a dict of memory resources takes only the keys 'host' and 'device', got the key 'pinned'
    """
    if allocator is None:
        return None
    if issubclass(type(allocator), dict):
        # exact str keys only, named without running the keys' or resources' own code
        for key in dict.keys(allocator):
            if type(key) is not str or key not in ("host", "device"):
                got = f"the key {key!r}" if type(key) is str else (
                    f"a key of type {type(key).__name__}")  # fmt: skip
                raise ValueError(
                    "allocator: a dict of memory resources takes only the keys 'host' and "
                    f"'device', got {got}"
                )
        allocator = CopyAllocatorOptions(
            dict.get(allocator, "host"), dict.get(allocator, "device")
        )
    elif type(allocator) is not CopyAllocatorOptions:
        raise TypeError(
            f"allocator must be None, a CopyAllocatorOptions or a dict with the keys 'host' "
            f"and 'device', got {type(allocator).__name__}"
        )
    for side in ("host", "device"):
        resource = getattr(allocator, side)
        if resource is None:
            continue
        try:
            allocate = getattr(resource, "allocate", None)
        except Exception:  # a property that raises: no usable allocate
            allocate = None
        if not callable(allocate):
            raise TypeError(
                f"allocator's {side} resource must be a memory resource (with "
                f"allocate(size, stream)), got {type(resource).__name__}"
            )
    return allocator


def _check_blocking(blocking):
    if blocking is not None and type(blocking) is not bool:
        raise TypeError(f"blocking must be None, True or False, got {blocking!r}")

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
    if not issubclass(type(obj), StridedMemoryView):  # not isinstance: __class__ may lie
        stream_ptr = _driver.stream_handle(stream) if stream is not None else 0
        try:
            obj = StridedMemoryView.from_any_interface(obj, stream_ptr)
        except TypeError as exc:
            raise TypeError(
                f"{name} must be a strided memory view or an array (anything "
                f"StridedMemoryView.from_any_interface accepts); got {type(obj).__name__}: {exc}"
            ) from None
        except BufferError as exc:  # the producer refused: say which side it was
            if type(exc) is not BufferError:
                raise
            raise BufferError(f"{name}: {exc}") from exc
    check_memory(obj, name)  # a closed buffer, or a null pointer with elements: no memory
    return obj


def _check_dtypes(dst, src):
    """Refuse two dtypes that differ (itemsizes are :func:`check_layouts`'s)."""
    dst_dtype = getattr(dst, "dtype", None)
    src_dtype = getattr(src, "dtype", None)
    if dst_dtype is not None and src_dtype is not None and dst_dtype != src_dtype:
        raise DtypeMismatchError(
            f"destination and source dtypes differ: dst dtype {dst_dtype} and src dtype "
            f"{src_dtype}; copy does not convert"
        )


def _without_leading_units(dst_layout, src_layout):
    """The source layout without the leading extent-1 axes ``dst`` does not have.

    ``np.copyto`` drops them (``copyto(zeros(3), ones((1, 3)))`` works): the same
    elements, from the same element zero.
    """
    extra = src_layout.ndim - dst_layout.ndim
    if extra > 0 and all(e == 1 for e in src_layout.shape[:extra]):
        return src_layout[(0,) * extra]
    return src_layout


def _broadcast(dst_layout, src_layout):
    """The source layout broadcast to the destination's shape (``broadcast_to``), after
    dropping the leading extent-1 axes that ``dst`` does not have, as ``np.copyto`` does."""
    kept = _without_leading_units(dst_layout, src_layout)
    if kept.shape == dst_layout.shape:
        return kept
    try:
        return kept.broadcast_to(dst_layout.shape)
    except ValueError:
        raise ValueError(
            f"src shape {src_layout.shape} and dst shape {dst_layout.shape} cannot be "
            "broadcast together: src must broadcast to dst's shape"
        ) from None


def checked_layouts(dst_layout, src_layout):
    """The source's layouts for a copy into ``dst_layout``, or the error the copy raises.

    Returns ``(src_own_layout, src_layout)``: the source without the leading extent-1
    axes ``dst`` does not have, and that broadcast to the destination's shape.

    Raises
    ------
    TypeError, ValueError
        As :func:`check_layouts` does (its ``DtypeMismatchError`` for itemsizes that
        differ before any shape's error), or for shapes that do not broadcast.
    """
    src_own_layout = _without_leading_units(dst_layout, src_layout)
    if dst_layout.itemsize != src_own_layout.itemsize:
        check_layouts(dst_layout, src_own_layout)  # its TypeError, before any shape's error
    broadcast = _broadcast(dst_layout, src_layout)
    check_layouts(dst_layout, broadcast)  # a non-unique dst first: it is read-only too
    return src_own_layout, broadcast


#: :func:`checked_layouts` of plain ``StridedLayout`` pairs, a pure function of them (the
#: errors are not kept: they are raised again each time), so a program that copies the
#: same layouts again and again checks them once. Plain layouts only: their equality is
#: by meaning (the same offset for every index, which is all the checks and the plan
#: read), where a subclass's ``__eq__`` and ``__hash__`` could say anything.
_checked_plain_layouts = functools.lru_cache(maxsize=1024)(checked_layouts)


def checked_sides(dst, src):
    """The checks of a copy between two imported sides, in the order ``copy`` makes them.

    ``dst`` and ``src`` are views, or the import records of NumPy arrays (which hold the
    same ``layout``, ``dtype`` and ``readonly``). Returns ``(dst_layout, src_own_layout,
    src_layout)``.

    Raises
    ------
    DtypeMismatchError
        When the dtypes (or itemsizes) differ.
    ValueError
        When the shapes do not broadcast, or ``dst`` is not unique or is read-only.
    """
    dst_layout, src_layout = dst.layout, src.layout
    _check_dtypes(dst, src)
    layouts = checked_layouts
    if type(dst_layout) is StridedLayout and type(src_layout) is StridedLayout:
        layouts = _checked_plain_layouts
    src_own_layout, src_layout = layouts(dst_layout, src_layout)
    if dst.readonly:
        raise ValueError("dst is read-only")
    return dst_layout, src_own_layout, src_layout


#: Host copies of fewer bytes than this between NumPy arrays go to ``np.copyto`` (see
#: :func:`copy_ndarrays`): below it NumPy's loops beat the planned copy on every layout
#: measured; from it the plan decides (:func:`~layoutkit.copy.cpu.kernel_beats_numpy`:
#: a transpose through the blocked kernel is faster; BENCHMARKS.md, "Small host copies").
NUMPY_COPY_BYTES = 256 << 10
#: Dtype kinds whose same-dtype ``np.copyto`` moves every byte as it is (bools, integers,
#: floats, complex, datetimes): no references, fields or padding for NumPy to interpret.
_NUMPY_KINDS = frozenset("biufcmM")
_ndarray = np.ndarray


def copy_ndarrays(dst, src):
    """Copy between two NumPy arrays with ``np.copyto``, after the checks of ``copy``.

    Only for two exact ``numpy.ndarray`` objects (no subclass's code runs) whose dtype
    NumPy copies byte for byte, whose byte ranges do not intersect, and with fewer than
    ``NUMPY_COPY_BYTES`` bytes to write or a plan that NumPy runs as fast (see
    :func:`~layoutkit.copy.cpu.kernel_beats_numpy`). Arrays that may overlap take the
    general path, which copies through a temporary where NumPy would copy some 1-d views
    element by element (``a[::2] <- a[:6]``); so do arrays the import leaves to the
    protocol (``ndarray_record`` returns None) or refuses (the general path's error names
    the side). The checks are :func:`checked_sides`, as the general path makes them, so
    NumPy refuses nothing here: the result, and every error, is the general path's.

    Returns
    -------
    bool
        Whether the copy is done (``False``: nothing was written; take the general path).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.zeros((8, 8), np.float32)
    >>> copy_ndarrays(a, np.ones((8, 8), np.float32).T), float(a.sum())
    (True, 64.0)
    >>> copy_ndarrays(a[:5], a[3:])  # byte ranges that intersect: the general path
    False
    """
    if type(dst) is not _ndarray or type(src) is not _ndarray or dst.dtype.kind not in _NUMPY_KINDS:
        return False
    try:
        dst_record, src_record = ndarray_record(dst), ndarray_record(src)
    except (BufferError, ValueError, OverflowError):  # the general path raises, naming the side
        return False
    if dst_record is None or src_record is None:
        return False
    dst_layout, _, src_layout = checked_sides(dst_record, src_record)
    if dst_layout.volume == 0:
        return True
    if np.may_share_memory(dst, src):  # byte ranges that intersect
        return False
    if dst.nbytes >= NUMPY_COPY_BYTES and kernel_beats_numpy(
        planned(dst_layout, src_layout, dst_record.ptr, src_record.ptr, False, False)
    ):
        return False
    np.copyto(dst, src)  # the dtypes are equal: nothing to cast
    return True


def _span(view, layout):
    """The byte range ``[lo, hi)`` of a view's elements (``offset_bounds``), absolute."""
    low, high = layout.offset_bounds
    itemsize = layout.itemsize
    base = view.ptr - layout.slice_offset * itemsize
    return base + low * itemsize, base + (high + 1) * itemsize


def _same_elements(dst_layout, src_layout):
    """Whether two layouts of one shape, from the same address, address the same elements.

    The strides of extent-1 axes are never used, so they do not count (layout equality by
    meaning, with the slice offsets, which are relative to different buffers, set aside).
    """
    return all(
        e == 1 or d == s
        for e, d, s in zip(dst_layout.shape, dst_layout._strides, src_layout._strides)
    )


#: Most candidate solutions NumPy's exact overlap test may try before a copy counts the
#: two views as sharing memory (``np.shares_memory``'s ``max_work``).
SHARE_WORK = 1 << 16


def shares_bytes(dst, src, dst_layout, src_layout):
    """Whether an element of ``dst`` and an element of ``src`` share a byte.

    The byte ranges first (host and device pointers share one unified address space, so
    distinct allocations never intersect); where they intersect, NumPy's exact test over
    arrays that only describe the two views (``np.shares_memory``, which reads no
    memory), within ``SHARE_WORK``: a problem too hard for it counts as shared.

    Examples
    --------
    >>> import numpy as np
    >>> from layoutkit import StridedMemoryView
    >>> a = StridedMemoryView.from_any_interface(np.zeros(8))
    >>> even, odd = a.view(a.layout[::2]), a.view(a.layout[1::2])
    >>> shares_bytes(even, odd, even.layout, odd.layout)  # interleaved: nothing shared
    False
    >>> head, tail = a.view(a.layout[:5]), a.view(a.layout[4:])
    >>> shares_bytes(head, tail, head.layout, tail.layout)
    True
    """
    d_lo, d_hi = _span(dst, dst_layout)
    s_lo, s_hi = _span(src, src_layout)
    if not (d_lo < s_hi and s_lo < d_hi):
        return False
    try:
        return bool(np.shares_memory(_described(dst, dst_layout), _described(src, src_layout),
                                     max_work=SHARE_WORK))  # fmt: skip
    except (np.exceptions.TooHardError, OverflowError, ValueError):
        return True


class _Description:
    """An ``__array_interface__`` that describes a view's elements as opaque bytes."""

    def __init__(self, ptr, layout):
        from layoutkit.interop.host import interface_dict

        self.__array_interface__ = interface_dict(
            ptr, False, layout.shape, layout._byte_strides(), None, layout.itemsize
        )


def _described(view, layout):
    """An ndarray of opaque ``V<itemsize>`` items at ``view``'s address with ``layout``:
    for address arithmetic, and for reading the view's bytes while the view is alive."""
    return np.asarray(_Description(view.ptr, layout))


def _device_side(view, name):
    """Whether the copy reaches ``view``'s memory as device memory. Memory that is not
    device-accessible is read or written by the host, so it must be host-accessible: a
    memory resource may say its memory is neither (``BufferError``, as its buffers'
    ``__dlpack__`` says)."""
    location = view._where()
    if location.is_device_accessible:
        return True
    if not location.is_host_accessible:
        raise BufferError(
            f"{name}: the memory is neither device-accessible nor host-accessible (its "
            "memory resource says so); nothing can copy it"
        )
    return False


def copy(dst, src, stream=None, allocator=None, blocking=None):
    """Copy every element of ``src`` into ``dst``: any layouts, host or device.

    Parameters
    ----------
    dst : StridedMemoryView or array
        The destination; writable, with a unique layout (no two indices share memory).
        Anything ``StridedMemoryView.from_any_interface`` accepts works too.
    src : StridedMemoryView or array
        The source, with the same dtype; its shape must broadcast to ``dst``'s (leading
        extent-1 axes beyond ``dst``'s dimensions are dropped first, as ``np.copyto``
        drops them).
    stream : None, int or stream object, optional
        The CUDA stream that orders a copy involving device-accessible memory
        (``None``: the legacy default stream). Ignored for host-to-host copies.
    allocator : CopyAllocatorOptions or dict, optional
        Memory resources for the temporaries of a copy between host and device memory
        (``{"host": resource, "device": resource}``; see :class:`CopyAllocatorOptions`).
    blocking : bool, optional
        For a copy involving device-accessible memory, whether the call waits for
        ``stream`` to finish (``stream.sync()``) before it returns. ``None`` (the
        default): a copy between device-accessible views is only queued; a copy with a
        host-only side waits, as in cuda.core. ``False`` never waits for the stream,
        except before freeing a host temporary from ``allocator``; a copy into pageable
        host memory has arrived anyway when the driver returns, and a host source has
        been read (packed into layoutkit's own pinned staging ring where it has gaps).

    Notes
    -----
    Host-to-host copies are done when the call returns; between two NumPy arrays that do
    not overlap (no ``stream``, ``allocator`` or ``blocking``), ``np.copyto`` does the
    work once the checks below have passed, except for the large transposes and threaded
    copies layoutkit's own loops run faster (:func:`copy_ndarrays`). A copy whose
    destination is device-accessible memory is queued on ``stream``. A copy into host-only memory from
    device memory returns once the data has arrived. The waits are logged (``"Syncing
    stream <handle>"``, level DEBUG, logger ``layoutkit.copy``). A source that shares
    memory with ``dst`` is read as it was before the copy (through a temporary;
    ``np.copyto`` does the same, except for 1-d views with different strides of one sign,
    which it copies element by element: ``a[::2] <- a[:6]``) where it is host-only
    memory, and refused where it is device-accessible (device, pinned or managed memory,
    which work queued on a stream may still be writing); a view copied onto itself is a
    no-op, and views of one buffer whose elements share no byte
    (``a[::2]`` and ``a[1::2]``) are copied directly. A copy between device-accessible
    views can be captured into a CUDA graph on a capturing ``stream`` (it allocates
    nothing and, unless ``blocking=True``, never waits); run it once before capturing, so
    its kernel is compiled. A copy with a host-only side cannot be captured and raises
    ``RuntimeError`` on a capturing stream.

    Raises
    ------
    TypeError
        When an argument is neither a view nor an array, or ``allocator`` or
        ``blocking`` is of another type.
    DtypeMismatchError
        When the dtypes (itemsizes) differ: a ``TypeError`` and a ``ValueError`` (the
        class cuda.core's copies raise).
    BufferError
        When a view's buffer was closed, a view describes a null pointer with elements,
        or its memory is neither device- nor host-accessible.
    ValueError
        When the shapes do not broadcast, ``dst`` is not unique (a broadcast) or
        read-only, the views share device-accessible memory, or they live on different
        devices that cannot reach each other.

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
    if stream is None and allocator is None and blocking is None and copy_ndarrays(dst, src):
        return
    if stream is not None:  # refused before anything is imported or copied, host copies too
        _driver.stream_handle(stream)
    allocator = allocator_options(allocator)
    _check_blocking(blocking)
    dst = as_copy_view(dst, "dst", stream)
    imported = src
    src = as_copy_view(src, "src", stream)
    if src is not imported:  # the producer's code ran after dst's check: it may have closed it
        check_memory(dst, "dst")
    dst_layout, src_own_layout, src_layout = checked_sides(dst, src)
    if dst_layout.volume == 0:
        return
    dst_on_device = _device_side(dst, "dst")
    src_on_device = _device_side(src, "src")
    if shares_bytes(dst, src, dst_layout, src_layout):
        if dst.ptr == src.ptr and _same_elements(dst_layout, src_layout):
            return
        if src_on_device:  # device, pinned or managed: the host must not read it now
            raise ValueError(
                "dst and src share device-accessible memory; copy src into a temporary "
                "first (e.g. a dense copy) and copy that into dst"
            )
        # NumPy's answer: the source as it was before the copy (read into a temporary);
        # host-only memory, which no stream's pending work can still be writing. Read as
        # opaque items, so every byte moves as in a direct copy (a struct's padding too)
        src = as_copy_view(np.array(_described(src, src.layout)), "src", stream)
        src_own_layout = _without_leading_units(dst_layout, src.layout)
        src_layout = _broadcast(dst_layout, src.layout)  # host memory, as src was
    plan = planned(dst_layout, src_layout, dst.ptr, src.ptr, dst_on_device, src_on_device)
    if not dst_on_device and not src_on_device:
        run_host_plan(plan, dst.ptr, src.ptr)
        return
    from layoutkit.copy._transfer import run_device_plan

    run_device_plan(plan, dst, src, dst_layout, src_layout, src_own_layout, stream,
                    allocator, blocking)  # fmt: skip
