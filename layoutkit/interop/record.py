"""The one import record behind every door, and the checks every door shares.

Each protocol reader (:mod:`~layoutkit.interop.dlpack`, :mod:`~layoutkit.interop.cai`,
:mod:`~layoutkit.interop.host`) and each producer fast path
(:mod:`~layoutkit.interop.fastpaths`) returns an :class:`ImportRecord`;
``StridedMemoryView`` is built from a record in one place. A record is complete and
checked when it exists: its layout was validated (extents, strides, itemsize, int64
ranges), its pointer is not null unless it has no elements, and every byte it
addresses lies inside the 64-bit address space.

Layouts of imported tensors are immutable and a program sees the same few shapes again
and again, so they are shared through one cache keyed by ``(shape, strides, itemsize,
strides_in_bytes)``.

Examples
--------
>>> from layoutkit.interop.record import import_layout
>>> layout = import_layout((2, 3), (-3, 1), 4, False, "a tensor")
>>> layout.strides, layout.slice_offset  # relative to the lowest byte
((-3, 1), 3)
>>> import_layout((2, -1), None, 4, False, "a tensor")
Traceback (most recent call last):
...
ValueError: a tensor: shape[1] = -1 is negative. Extents must be non-negative (>= 0)
"""

from itertools import islice
from typing import NamedTuple

import numpy as np

from .._driver import HOST, Location
from ..layout import MAX_NDIM, StridedLayout, _as_index

__all__ = [
    "CACHE_LIMIT",
    "CURRENT_DEVICE",
    "HOST",
    "ImportRecord",
    "build_entry",
    "check_pointer",
    "checked_layout",
    "import_layout",
    "index_entry",
    "int_entries",
    "layout_cache",
    "layout_entry",
    "named",
    "new_record",
    "producer_failure",
]

CURRENT_DEVICE = Location(None, True, False, False)  # device memory of the current device
_ADDRESS_LIMIT = 2**64
_INT64_MAX = 2**63 - 1
CACHE_LIMIT = 1024  # entries a cache of imported layouts keeps (it is emptied when full)


class ImportRecord(NamedTuple):
    """Everything a view needs about imported memory, already checked.

    Attributes
    ----------
    ptr : int
        Address of element ``(0, ..., 0)``.
    layout : StridedLayout
        Shape, strides (elements) and itemsize, relative to where the tensor's buffer
        starts (``ptr - layout.slice_offset_in_bytes``): for an imported tensor its lowest
        byte (``layout.min_offset == 0``); never before it.
    dtype : numpy.dtype or None
        The element type (``None`` only for a buffer view made without one).
    location : Location or None
        Where the memory lives; ``None`` when only the driver (or the buffer) can say,
        ``CLAIMED_DEVICE`` when only the driver can say and the producer calls it CUDA
        memory (never host memory without a driver), ``CURRENT_DEVICE`` for an empty CUDA
        tensor without a pointer. A location whose ``device_id`` is ``None`` is not
        resolved yet.
    readonly : bool
        The producer's read-only flag.
    exporter : object
        The object the user handed over (``exporting_obj``).
    owner : object
        What keeps the memory alive: the exporter itself, the consumed DLPack tensor (whose
        deleter runs once, when the owner dies) or a Buffer.
    dl_device : tuple or None
        ``(device_type, device_id)`` as a DLPack producer named it, else ``None``.
    """

    ptr: int
    layout: StridedLayout
    dtype: np.dtype | None
    location: Location | None
    readonly: bool
    exporter: object
    owner: object
    dl_device: tuple | None


def new_record(fields):
    """An :class:`ImportRecord` from a tuple of its eight fields, in order (the fast way)."""
    return _tuple_new(ImportRecord, fields)


_tuple_new = tuple.__new__
# (shape, strides, itemsize, strides_in_bytes) -> (layout, lead, size, aliasing): hot readers
# look here first and call layout_entry only on a miss
layout_cache = {}


def _element_strides(shape, strides, itemsize):
    """Byte strides (a tuple of int) in elements; ValueError naming one itemsize does not divide.

    A stride that addresses nothing (of an extent-1 axis, or of a tensor without elements)
    need not be a multiple: it becomes 0, as in NumPy's own DLPack export (its views
    have such strides, e.g. a row of a packed structured array's field). ``None`` for an
    invalid itemsize, which the layout's own checks then name.
    """
    if type(itemsize) is not int or itemsize < 1:
        return None
    divided = []
    for i, s in enumerate(strides):
        if s % itemsize:
            if shape[i] != 1 and 0 not in shape:
                raise ValueError(
                    f"strides[{i}] = {s} bytes is not a multiple of itemsize {itemsize} "
                    "(strides must be divisible by itemsize)"
                )
            s = 0  # never used to address an element
        divided.append(s // itemsize)
    return tuple(divided)


def _unused_strides_zeroed(shape, strides, itemsize):
    """Element ``strides`` where each stride that addresses nothing and whose byte stride
    does not fit in int64 is 0 (the same tuple where none is).

    A stride addresses nothing on an extent-1 axis, or in a tensor without elements;
    producers leave junk there (NumPy's and cuda.core's imports read it without a look),
    which the layout would refuse. Such strides of any other value are kept.
    """
    if type(itemsize) is not int or itemsize < 1 or len(strides) != len(shape):
        return strides  # the layout's checks name what is wrong
    empty = 0 in shape
    if not empty and 1 not in shape:
        return strides
    fixed = tuple(
        0 if (empty or shape[i] == 1) and type(s) is int and not -_INT64_MAX <= s * itemsize <= _INT64_MAX
        else s
        for i, s in enumerate(strides)
    )
    return strides if fixed == strides else fixed


def _build(shape, strides, itemsize, strides_in_bytes):
    divide = False
    if strides_in_bytes and strides is not None:
        # strides of another length than the shape stay as given, so that the layout's
        # check quotes the strides the producer gave (not their quotients)
        divided = _element_strides(shape, strides, itemsize) if len(strides) == len(shape) else None
        if divided is None:
            divide = True  # the layout's checks name what is wrong
        else:
            strides = divided
    if strides is not None and not divide:
        strides = _unused_strides_zeroed(shape, strides, itemsize)
    layout = StridedLayout(shape, strides, itemsize, divide_strides=divide)
    low = layout.min_offset
    if low < 0 and layout.volume:
        # the layout addresses elements before (0, ..., 0): move it so its lowest byte is 0
        span = (layout.max_offset - low + 1) * itemsize
        if span > _INT64_MAX:
            raise OverflowError(f"{layout!r} spans {span} bytes, more than int64 allows")
        layout = StridedLayout._trusted(layout.shape, layout._strides, itemsize, -low)
    lead = layout.slice_offset * itemsize  # bytes from the buffer's start to (0, ..., 0)
    return layout, lead, (layout.max_offset + 1) * itemsize, not layout.is_unique


def layout_entry(shape, strides, itemsize, strides_in_bytes, what):
    """``(layout, lead, size, aliasing)`` for :func:`import_layout`'s arguments, from the cache.

    ``lead`` is the byte offset of element ``(0, ..., 0)`` from the tensor's lowest byte,
    ``size`` the bytes it spans, and ``aliasing`` whether the layout maps two indices to
    one element (such views are read-only, DECISIONS 19).
    """
    key = (shape, strides, itemsize, strides_in_bytes)
    entry = layout_cache.get(key)
    if entry is None:
        entry = build_entry(shape, strides, itemsize, strides_in_bytes, what)
        if len(layout_cache) >= CACHE_LIMIT:
            layout_cache.clear()
        layout_cache[key] = entry
    return entry


def build_entry(shape, strides, itemsize, strides_in_bytes, what):
    """:func:`layout_entry`'s entry, made now (for a cache of the caller's own)."""
    try:
        return _build(shape, strides, itemsize, strides_in_bytes)
    except (TypeError, ValueError, OverflowError) as exc:
        raise type(exc)(f"{named(what)}: {exc}") from None


def import_layout(shape, strides, itemsize, strides_in_bytes, what):
    """The validated layout of an imported tensor, relative to its lowest byte.

    Parameters
    ----------
    shape : tuple of int
        Extents; every entry an ``int`` (see :func:`int_entries`).
    strides : tuple of int or None
        Strides, in bytes when ``strides_in_bytes`` else in elements; ``None``: C order.
    itemsize : int
        Bytes per element.
    strides_in_bytes : bool
        Whether ``strides`` are byte strides (each that addresses elements must be a
        multiple of ``itemsize``).
    what : str or callable
        How errors name the tensor (a callable makes the name, only for an error).

    Raises
    ------
    ValueError
        For a negative extent, more than 64 dimensions, a stride count that differs
        from the shape's, a byte stride that is not a multiple of ``itemsize`` (on an
        axis of extent > 1, with elements) or an itemsize below 1.
    OverflowError
        When a value, the volume or the span does not fit in int64.
    """
    return layout_entry(shape, strides, itemsize, strides_in_bytes, what)[0]


def checked_layout(shape, strides, itemsize, strides_in_bytes, ptr, what):
    """:func:`import_layout` and :func:`check_pointer` for element ``(0, ..., 0)`` at ``ptr``.

    Examples
    --------
    >>> checked_layout((2, 3), (3, -1), 8, False, 4096, "x").slice_offset
    2
    >>> checked_layout((2,), (-1,), 8, False, 4, "x")
    Traceback (most recent call last):
    ...
    BufferError: x: its 16 bytes at -0x4 reach beyond the 64-bit address space
    """
    layout, lead, size, _ = layout_entry(shape, strides, itemsize, strides_in_bytes, what)
    base = ptr - lead
    if ptr and base >= 0 and base + size <= _ADDRESS_LIMIT:
        return layout
    check_pointer(ptr, layout, what)  # raises, unless a null pointer without elements
    return layout


def producer_failure(what, exc):
    """The ``BufferError`` for a producer's own failure ``exc`` inside ``what`` (a protocol
    call or property): it exports nothing. The caller raises it ``from exc``."""
    return BufferError(f"{what} raised {type(exc).__name__}: {exc}")


def named(what):
    """The name of a tensor in a message: ``what``, or what the callable ``what`` makes.

    Hot readers pass a callable, so that the name is formatted only for an error.
    """
    return what() if callable(what) else what


def int_entries(values, name, what):
    """``values`` as a tuple of ``int`` (NumPy integers accepted; bools, floats refused).

    The layout cache is keyed by these tuples, so an entry must be an ``int`` and not
    merely equal to one (``True == 1``, ``2.0 == 2``).

    An iterable other than a tuple or list is read up to ``MAX_NDIM + 1`` entries (enough for the
    layout to refuse too many dimensions; an endless one is not read forever).

    Raises
    ------
    TypeError
        For a non-sequence or an entry that is not an integer.

    Examples
    --------
    >>> import numpy as np
    >>> int_entries([np.int64(2), 3], "shape", "x")
    (2, 3)
    >>> int_entries((2.0,), "shape", "x")
    Traceback (most recent call last):
    ...
    TypeError: x: shape[0] is 2.0 of type float, not an integer
    """
    if type(values) is list:
        values = tuple(values)  # a snapshot: an entry's __index__ may change the list
    elif type(values) is not tuple:
        try:  # no more entries than a layout may have: an endless iterable is read no further
            values = tuple(islice(values, MAX_NDIM + 1))
        except TypeError:
            raise TypeError(
                f"{what}: {name} is {values!r} of type {type(values).__name__}, not a sequence"
            ) from None
    result = []
    for i, value in enumerate(values):
        kind = type(value)
        if kind is not int:
            if kind is bool or not hasattr(kind, "__index__"):
                raise TypeError(
                    f"{what}: {name}[{i}] is {value!r} of type {kind.__name__}, not an integer"
                )
            try:  # a plain int: an int subclass may lie through __eq__ and __hash__ (the cache)
                value = _as_index(value, f"{name}[{i}]")
            except TypeError as exc:
                raise TypeError(f"{named(what)}: {exc}") from exc.__cause__
        result.append(value)
    return tuple(result)


def index_entry(value):
    """``value`` as a plain ``int``, or ``None`` where it is no integer (see ``int_entries``).

    Bools, floats and objects whose ``__index__`` fails or gives no int are no integers;
    an int subclass gives its plain value (its comparisons and arithmetic may lie).

    Examples
    --------
    >>> index_entry(7), index_entry(True), index_entry(2.0)
    (7, None, None)
    """
    if type(value) is int:
        return value
    try:
        return _as_index(value, "value")
    except TypeError:
        return None


def check_pointer(ptr, layout, what, null_with_elements=False):
    """Refuse a null pointer to elements, or bytes outside ``[0, 2**64)``; returns ``ptr``.

    ``ptr`` is the address of element ``(0, ..., 0)``; ``layout`` is relative to the
    tensor's lowest byte (as :func:`import_layout` makes it). ``null_with_elements``
    admits a null pointer with elements (a description only: the view refuses every
    use of its memory, see :func:`layoutkit.memoryview.check_memory`).

    Raises
    ------
    BufferError
        For a null pointer to one or more elements, or a tensor that starts below
        address 0 or ends beyond ``2**64``.

    Examples
    --------
    >>> from layoutkit import StridedLayout
    >>> check_pointer(0, StridedLayout((2,), (1,), 8), "x")
    Traceback (most recent call last):
    ...
    BufferError: x has a null data pointer but 2 elements
    >>> check_pointer(2**64 - 8, StridedLayout((2,), (1,), 8), "x")
    Traceback (most recent call last):
    ...
    BufferError: x: its 16 bytes at 0xfffffffffffffff8 reach beyond the 64-bit address space
    """
    if not ptr:
        if layout.volume and not null_with_elements:
            raise BufferError(
                f"{named(what)} has a null data pointer but {layout.volume} elements"
            )
        return ptr
    base = ptr - layout.slice_offset_in_bytes
    size = (layout.max_offset + 1) * layout.itemsize
    if base < 0 or base + size > _ADDRESS_LIMIT:
        raise BufferError(
            f"{named(what)}: its {size} bytes at {base:#x} reach beyond the 64-bit address space"
        )
    return ptr
