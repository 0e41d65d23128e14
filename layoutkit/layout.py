"""``StridedLayout``: the memory layout of an n-d tensor, immutable and hashable.

A layout is a shape, strides counted in elements, an itemsize in bytes and a slice offset
in elements (the offset of index ``(0, ..., 0)``). The element at index ``idx`` lives at
byte ``(slice_offset + sum(idx[k] * strides[k])) * itemsize`` from the start of the
memory the layout describes.

The arithmetic runs in the ``@njit`` kernels of :mod:`layoutkit._kernels`; this module
validates arguments (every error names the argument and its value) and caches results.
"""

import array
import math
import operator

from ._errors import AxisError

__all__ = ["StridedLayout"]

MAX_NDIM = 64
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_ITEMSIZE_LIMIT = 2**31
_MEMO_LIMIT = 16
_EXACT_UNIQUE_LIMIT = 4096  # volumes up to this get an exact is_unique by enumeration


def _kernels():
    """The kernel module, imported on first use so that ``import layoutkit`` stays light."""
    global _K
    if _K is None:
        from . import _kernels as k

        _K = k
    return _K


_K = None
_INFO_ORDER = 5  # _kernels.INFO_ORDER: where analyze() writes the stride order
_DENSE_MEMO = {}  # (id(shape), itemsize, order) -> (shape, layout): repeated dense() calls


def _int64_buffer(values):
    return array.array("q", values)


_ZEROS = array.array("q", bytes(8 * 4 * MAX_NDIM))


def _out_buffer(size):
    """A zeroed int64 buffer of ``size`` slots (slicing a template is twice as fast)."""
    return _ZEROS[:size] if size <= len(_ZEROS) else array.array("q", bytes(8 * size))


def _as_index(value, name):
    """``operator.index(value)``, or a TypeError that names the argument."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer, got {value!r} of type {type(value).__name__}"
        ) from None


def _as_index_tuple(values, name):
    """A tuple of Python ints from a sequence of integer-likes (or a single integer)."""
    if type(values) is tuple or type(values) is list:
        try:
            return tuple(map(operator.index, values))
        except TypeError:
            pass  # fall through for a message that names the bad entry
    else:
        try:
            return (operator.index(values),)
        except TypeError:
            pass
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(
                f"{name} must be a sequence of integers, got {values!r} of type "
                f"{type(values).__name__}"
            )
    values = tuple(values)
    return tuple(_as_index(v, f"{name}[{i}]") for i, v in enumerate(values))


def _check_ndim(ndim, name):
    if ndim > MAX_NDIM:
        raise ValueError(f"{name} has {ndim} dimensions; at most {MAX_NDIM} are supported")


def _check_extents(shape, name):
    if not shape or (min(shape) >= 0 and max(shape) <= _INT64_MAX):
        return
    for i, e in enumerate(shape):
        if e < 0:
            raise ValueError(f"{name}[{i}] = {e} is negative; extents must be >= 0")
        if e > _INT64_MAX:
            raise OverflowError(f"{name}[{i}] = {e} does not fit in int64")


def _check_itemsize(itemsize, name="itemsize"):
    itemsize = _as_index(itemsize, name)
    if itemsize <= 0:
        raise ValueError(f"{name} must be positive, got {itemsize}")
    if itemsize >= _ITEMSIZE_LIMIT:
        raise OverflowError(f"{name} = {itemsize} is too large (limit 2**31 - 1)")
    return itemsize


def _normalize_axis(axis, ndim, name):
    axis = _as_index(axis, name)
    if not -ndim <= axis < ndim:
        raise AxisError(f"{name} {axis} is out of bounds for a layout of {ndim} dimensions")
    return axis + ndim if axis < 0 else axis


def _normalize_permutation(order, ndim, name):
    order = _as_index_tuple(order, name)
    if len(order) != ndim:
        raise ValueError(
            f"{name} {order} has {len(order)} entries; the layout has {ndim} dimensions"
        )
    axes = tuple([a + ndim if a < 0 else a for a in order])
    if len(set(axes)) == ndim and (not axes or (min(axes) >= 0 and max(axes) < ndim)):
        return axes
    for a in order:  # name the first bad entry
        _normalize_axis(a, ndim, name)
    raise ValueError(f"{name} {order} repeats an axis")


def _overflow(status, what):
    """The OverflowError for a kernel status; ``what`` is a string or makes one (lazily)."""
    if callable(what):
        what = what()
    k = _kernels()
    reason = {
        k.OVERFLOW_VOLUME: "its volume",
        k.OVERFLOW_OFFSET: "its element offsets",
        k.OVERFLOW_BYTES: "its byte strides or byte offsets",
    }[status]
    return OverflowError(f"{what}: {reason} do not fit in int64")


class StridedLayout:
    """The memory layout of an n-d tensor: shape, strides (in elements), itemsize, offset.

    Parameters
    ----------
    shape : sequence of int
        Extents, each >= 0; at most 64 dimensions.
    strides : sequence of int or None
        Step between neighbours along each axis, in elements (in bytes when
        ``divide_strides`` is true). May be negative or 0. ``None`` means C order.
    itemsize : int
        Bytes per element, 1 <= itemsize < 2**31.
    divide_strides : bool
        Whether ``strides`` are in bytes (each must be a multiple of ``itemsize``).

    Notes
    -----
    Layouts are immutable, hashable and picklable, and equal when they map every index
    to the same offset with the same itemsize. Every number a layout implies (volume,
    offsets, byte strides and byte offsets) is checked to fit in int64 when the layout is
    built. A zero-volume layout addresses no memory: its strides and slice offset are 0.

    Examples
    --------
    >>> from layoutkit import StridedLayout
    >>> layout = StridedLayout((2, 3), (3, 1), itemsize=4)
    >>> layout.is_contiguous_c, layout.volume
    (True, 6)
    >>> layout.permuted((1, 0)).strides
    (1, 3)
    >>> layout[:, ::-2]
    StridedLayout(shape=(2, 2), strides=(3, -2), itemsize=4, slice_offset=2)
    >>> StridedLayout((4, 1, 6), (6, 100, 1), 4).flattened().shape
    (24,)
    """

    __slots__ = ("_shape", "_strides", "_itemsize", "_offset", "_packed", "_memo",
                 "_volume", "_min_offset", "_max_offset", "_bounds", "_is_c", "_is_f", "_is_any",
                 "_is_dense", "_is_unique", "_mask", "_order", "_strides_in_bytes",
                 "__weakref__")

    def __init__(self, shape, strides, itemsize, divide_strides=False):
        shape = _as_index_tuple(shape, "shape")
        ndim = len(shape)
        _check_ndim(ndim, "shape")
        _check_extents(shape, "shape")
        itemsize = _check_itemsize(itemsize)
        if strides is None:
            strides = _dense_strides(shape, tuple(range(ndim)))
        else:
            strides = _as_index_tuple(strides, "strides")
            if len(strides) != ndim:
                raise ValueError(
                    f"strides {strides} has {len(strides)} entries but shape {shape} has {ndim}"
                )
            if divide_strides:
                for i, s in enumerate(strides):
                    if s % itemsize:
                        raise ValueError(
                            f"strides[{i}] = {s} bytes is not a multiple of itemsize {itemsize}"
                        )
                strides = tuple(s // itemsize for s in strides)
            for i, s in enumerate(strides):
                if not _INT64_MIN < s <= _INT64_MAX:
                    raise OverflowError(f"strides[{i}] = {s} does not fit in int64")
        self._init(
            shape,
            strides,
            itemsize,
            0,
            lambda: f"StridedLayout(shape={shape}, strides={strides}, itemsize={itemsize})",
        )

    def _init(self, shape, strides, itemsize, offset, what):
        """Store the values and analyse them at once (derived properties become slot reads)."""
        if 0 in shape:
            strides = (0,) * len(shape)
            offset = 0
        self._shape = shape
        self._strides = strides
        self._itemsize = itemsize
        self._offset = offset
        self._packed = None
        self._memo = None
        self._analyze(what)

    @classmethod
    def _trusted(cls, shape, strides, itemsize, slice_offset=0):
        """A layout from values known to be valid (tuples of ints that fit): no argument checks."""
        self = cls.__new__(cls)
        self._init(shape, strides, itemsize, slice_offset, "layout")
        return self

    @classmethod
    def _checked(cls, shape, strides, itemsize, slice_offset, what):
        """A layout from int tuples of the right lengths; OverflowError naming ``what``."""
        self = cls.__new__(cls)
        self._init(shape, strides, itemsize, slice_offset, what)
        return self

    # ---------------------------------------------------------------- kernel plumbing
    def _lay(self):
        packed = self._packed
        if packed is None:
            packed = self._packed = _int64_buffer(self._shape + self._strides)
        return packed

    def _analyze(self, what="layout"):
        """Compute every derived property into its slot; OverflowError if a number won't fit."""
        ndim = len(self._shape)
        out = _out_buffer(_INFO_ORDER + ndim)
        status = _ANALYZE(self._lay(), ndim, self._itemsize, self._offset, out)
        if status:
            raise _overflow(status, what)
        volume, low, high, flags, mask, *order = out.tolist()
        self._volume = volume
        self._min_offset = low
        self._max_offset = high
        self._bounds = (low, high)
        self._is_c = bool(flags & 1)
        self._is_f = bool(flags & 2)
        self._is_any = bool(flags & 4)
        self._is_dense = bool(flags & 4) and self._offset == 0
        self._is_unique = True if flags & 8 else None  # None: settled exactly on first use
        self._mask = mask & 0xFFFF_FFFF_FFFF_FFFF  # the kernel's int64 read as uint64 (bit 63)
        self._order = tuple(order)

    def _memo_get(self, name, arg):
        memo = self._memo
        if memo is not None:
            hit = memo.get((name, id(arg)))
            if hit is not None and hit[0] is arg:
                return hit[1]
        return None

    def _memo_put(self, name, arg, result):
        # only immutable arguments are memoised; the stored argument keeps its id alive
        if _is_frozen(arg):
            memo = self._memo
            if memo is None:
                memo = self._memo = {}
            elif len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[(name, id(arg))] = (arg, result)
        return result

    # ---------------------------------------------------------------- construction
    @classmethod
    def dense(cls, shape, itemsize, stride_order="C"):
        """A dense layout of ``shape`` whose axes are laid out in ``stride_order``.

        Parameters
        ----------
        shape : sequence of int
        itemsize : int
        stride_order : {"C", "F"} or sequence of int
            ``"C"`` (last axis fastest), ``"F"`` (first axis fastest) or a permutation
            of the axes from slowest to fastest.

        Examples
        --------
        >>> StridedLayout.dense((2, 3, 4), 8, stride_order=(2, 0, 1)).strides
        (3, 1, 6)
        >>> StridedLayout.dense((2, 0, 4), 8).strides  # zero volume: all strides 0
        (0, 0, 0)
        """
        memo_key = None
        if type(shape) is tuple and type(itemsize) is int and type(stride_order) is str:
            memo_key = (id(shape), itemsize, stride_order)
            hit = _DENSE_MEMO.get(memo_key)
            if hit is not None and hit[0] is shape and cls is StridedLayout:
                return hit[1]
        original = shape
        shape = _as_index_tuple(shape, "shape")
        ndim = len(shape)
        _check_ndim(ndim, "shape")
        _check_extents(shape, "shape")
        itemsize = _check_itemsize(itemsize)
        order = _parse_stride_order(stride_order, ndim, allow_k=False)
        strides = _dense_strides(shape, order)
        result = cls._checked(
            shape, strides, itemsize, 0, lambda: f"dense layout of shape {shape}"
        )
        if memo_key is not None and _is_frozen(original):
            if len(_DENSE_MEMO) >= _MEMO_LIMIT * 4:
                _DENSE_MEMO.clear()
            _DENSE_MEMO[memo_key] = (original, result)  # keeps the id of ``original`` alive
        return result

    @classmethod
    def dense_like(cls, other, stride_order="K"):
        """A dense layout with the shape and itemsize of ``other``.

        ``stride_order="K"`` keeps ``other``'s stride order; ``"C"``, ``"F"`` or a
        permutation choose another. Returns ``other`` itself when it is already dense
        in the requested order.

        Examples
        --------
        >>> sliced = StridedLayout.dense((4, 6), 4, "F")[::2, 1:]
        >>> StridedLayout.dense_like(sliced).strides
        (1, 2)
        """
        if not isinstance(other, StridedLayout):
            raise TypeError(
                f"other must be a StridedLayout, got {type(other).__name__}"
            )
        ndim = other.ndim
        if isinstance(stride_order, str) and stride_order == "K":
            if other.is_dense:
                return other
            order = other.stride_order
        else:
            order = _parse_stride_order(stride_order, ndim, allow_k=True)
            if order == tuple(range(ndim)) and other.is_dense and other.is_contiguous_c:
                return other
            if (
                order == tuple(range(ndim - 1, -1, -1))
                and other.is_dense
                and other.is_contiguous_f
            ):
                return other
        strides = _dense_strides(other._shape, order)
        return cls._checked(
            other._shape, strides, other._itemsize, 0, lambda: f"dense layout like {other!r}"
        )

    def to_dense(self, stride_order="K"):
        """``StridedLayout.dense_like(self, stride_order)``.

        Examples
        --------
        >>> StridedLayout.dense((3, 4), 2)[:, ::-1].to_dense().strides
        (4, 1)
        """
        return StridedLayout.dense_like(self, stride_order)

    # ---------------------------------------------------------------- stored properties
    @property
    def ndim(self):
        """Number of dimensions."""
        return len(self._shape)

    # stored values, read through C-level attrgetters (read-only: no setter)
    shape = property(operator.attrgetter("_shape"), doc="Extents, a tuple of int.")
    strides = property(
        operator.attrgetter("_strides"),
        doc="Strides in elements, a tuple of int (never ``None``: implicit C is resolved).",
    )
    itemsize = property(operator.attrgetter("_itemsize"), doc="Bytes per element.")
    slice_offset = property(
        operator.attrgetter("_offset"),
        doc="Element offset of index ``(0, ..., 0)`` (made non-zero by slicing or repacking).",
    )

    @property
    def strides_in_bytes(self):
        """Strides in bytes."""
        try:
            return self._strides_in_bytes
        except AttributeError:  # first use: the slot is still empty
            size = self._itemsize
            value = self._strides_in_bytes = tuple([s * size for s in self._strides])
            return value

    @property
    def slice_offset_in_bytes(self):
        """The slice offset in bytes."""
        return self._offset * self._itemsize

    # ---------------------------------------------------------------- derived properties
    # Read straight from the slots that _analyze() fills when the layout is made (C-level
    # attrgetters: no Python frame per read).
    volume = property(
        operator.attrgetter("_volume"),
        doc="Number of elements (the product of the extents; 1 for 0-d).",
    )
    offset_bounds = property(
        operator.attrgetter("_bounds"),
        doc="``(min_offset, max_offset)`` in elements, slice offset included; "
        "``(0, -1)`` if empty.",
    )
    min_offset = property(
        operator.attrgetter("_min_offset"),
        doc="Smallest element offset of any index (see ``offset_bounds``).",
    )
    max_offset = property(
        operator.attrgetter("_max_offset"),
        doc="Largest element offset of any index (see ``offset_bounds``).",
    )
    is_contiguous_c = property(
        operator.attrgetter("_is_c"),
        doc="Whether the elements are contiguous in C order (extent-1 axes may have any "
        "stride).",
    )
    is_contiguous_f = property(
        operator.attrgetter("_is_f"),
        doc="Whether the elements are contiguous in Fortran order.",
    )
    is_contiguous_any = property(
        operator.attrgetter("_is_any"),
        doc="Whether the elements are contiguous in some axis order (see ``stride_order``).",
    )
    is_dense = property(
        operator.attrgetter("_is_dense"),
        doc="Contiguous in some axis order, starting at offset 0.",
    )
    stride_order = property(
        operator.attrgetter("_order"),
        doc="""Axes from the slowest (largest ``abs(stride)``) to the fastest.

        Ties are broken by larger extent first, then by lower axis index.

        Examples
        --------
        >>> StridedLayout.dense((2, 3, 4), 4, "F").stride_order
        (2, 1, 0)
        """,
    )

    @property
    def is_unique(self):
        """Whether every index has its own offset.

        Never True for a layout that maps two indices to one offset. Exact when the
        volume is at most 4096 or when the strides nest once sorted (each axis steps over
        everything the faster axes reach: true of every layout built from a dense one by
        this library's transforms); otherwise conservative (may be False for an
        interleaved unique layout).

        Examples
        --------
        >>> StridedLayout((2, 3), (3, 2), 1).is_unique  # interleaved, yet unique
        True
        >>> StridedLayout.dense((3,), 4).broadcast_to((2, 3)).is_unique
        False
        """
        unique = self._is_unique
        if unique is None:  # the nesting test said no: settle small layouts exactly
            unique = False
            volume = self._volume
            if volume <= _EXACT_UNIQUE_LIMIT and not _has_zero_stride_axis(
                self._shape, self._strides
            ):
                import numpy as np

                unique = bool(
                    _OFFSETS_ARE_DISTINCT(
                        self._lay(), len(self._shape), self._offset, volume,
                        np.empty(volume, np.int64),
                    )
                )
            self._is_unique = unique
        return unique

    def required_size_in_bytes(self):
        """Bytes an allocation needs to hold every element: ``(max_offset + 1) * itemsize``.

        Raises
        ------
        ValueError
            If an element lies before the start (``min_offset < 0``).

        Examples
        --------
        >>> StridedLayout.dense((3, 4), 4)[1:, ::2].required_size_in_bytes()
        44
        """
        lo, hi = self.offset_bounds
        if lo < 0:
            raise ValueError(
                f"layout {self!r} reaches offset {lo} before its start: the size it "
                "needs is ambiguous (use to_dense() for an allocation)"
            )
        return (hi + 1) * self._itemsize

    def flattened_axis_mask(self):
        """Bit ``j`` is set when axis ``j`` merges with axis ``j - 1`` in ``flattened``.

        Masks of several layouts of the same shape can be ANDed and passed to
        ``flattened(mask=...)`` so that all of them flatten to the same shape.

        Examples
        --------
        >>> bin(StridedLayout.dense((2, 3, 4), 4)[:, :2].flattened_axis_mask())
        '0b100'
        """
        return self._mask

    # ---------------------------------------------------------------- transforms
    def permuted(self, axis_order):
        """The layout with its axes reordered: axis ``i`` of the result is ``axis_order[i]``.

        Examples
        --------
        >>> StridedLayout.dense((2, 3, 4), 4).permuted((2, 0, 1)).shape
        (4, 2, 3)
        """
        hit = self._memo_get("permuted", axis_order)
        if hit is not None:
            return hit
        shape = self._shape
        order = _normalize_permutation(axis_order, len(shape), "axis_order")
        strides = self._strides
        result = StridedLayout._trusted(
            tuple([shape[a] for a in order]),
            tuple([strides[a] for a in order]),
            self._itemsize,
            self._offset,
        )
        return self._memo_put("permuted", axis_order, result)

    def squeezed(self):
        """The layout without its extent-1 axes.

        Examples
        --------
        >>> StridedLayout.dense((1, 3, 1, 2), 4).squeezed().shape
        (3, 2)
        """
        hit = self._memo_get("squeezed", None)
        if hit is not None:
            return hit
        pairs = [(e, s) for e, s in zip(self._shape, self._strides) if e != 1]
        result = StridedLayout._trusted(
            tuple(e for e, _ in pairs), tuple(s for _, s in pairs), self._itemsize, self._offset
        )
        return self._memo_put("squeezed", None, result)

    def unsqueezed(self, axis):
        """The layout with extent-1 axes inserted at ``axis`` (an int or a sequence).

        Axes index the result, as in ``numpy.expand_dims``.

        Examples
        --------
        >>> StridedLayout.dense((3, 4), 4).unsqueezed((0, -1)).shape
        (1, 3, 4, 1)
        """
        hit = self._memo_get("unsqueezed", axis)
        if hit is not None:
            return hit
        axes = _as_index_tuple(axis, "axis")
        if not axes:
            return self
        shape = self._shape
        out_ndim = len(shape) + len(axes)
        _check_ndim(out_ndim, "the unsqueezed layout")
        new_axes = {_normalize_axis(a, out_ndim, "axis") for a in axes}
        if len(new_axes) != len(axes):
            raise ValueError(f"axis {axes} repeats an axis")
        new_shape = []
        new_strides = []
        old = 0
        for i in range(out_ndim):
            if i in new_axes:
                new_shape.append(1)
                new_strides.append(None)
            else:
                new_shape.append(shape[old])
                new_strides.append(self._strides[old])
                old += 1
        # a new axis gets extent * stride of the next original axis, or the last stride
        following = None
        for i in range(out_ndim - 1, -1, -1):
            if new_strides[i] is None:
                new_strides[i] = following if following is not None else _last(self._strides)
            elif i not in new_axes:
                step = new_strides[i] * new_shape[i]
                following = step if _INT64_MIN <= step <= _INT64_MAX else new_strides[i]
        result = StridedLayout._checked(
            tuple(new_shape),
            tuple(new_strides),
            self._itemsize,
            self._offset,
            lambda: f"unsqueezing {self!r} at {axes}",
        )
        return self._memo_put("unsqueezed", axis, result)

    def broadcast_to(self, shape):
        """The layout broadcast to ``shape`` (NumPy rules; new and stretched axes get stride 0).

        Examples
        --------
        >>> StridedLayout.dense((3, 1), 4).broadcast_to((2, 3, 5)).strides
        (0, 1, 0)
        """
        hit = self._memo_get("broadcast_to", shape)
        if hit is not None:
            return hit
        new_shape = _as_index_tuple(shape, "shape")
        m = len(new_shape)
        _check_ndim(m, "shape")
        _check_extents(new_shape, "shape")
        n = len(self._shape)
        if m < n:
            raise ValueError(
                f"cannot broadcast a layout of shape {self._shape} to shape {new_shape} "
                "with fewer dimensions"
            )
        out = _out_buffer(2 * m)
        status = _BROADCAST(self._lay(), n, _int64_buffer(new_shape), m, out, m)
        if status:
            axis = -status - 1
            raise ValueError(
                f"cannot broadcast a layout of shape {self._shape} to shape {new_shape}: "
                f"extent {self._shape[axis - (m - n)]} does not match {new_shape[axis]} "
                f"at axis {axis}"
            )
        values = out.tolist()
        result = StridedLayout._checked(
            new_shape,
            tuple(values[m:]),
            self._itemsize,
            self._offset,
            lambda: f"broadcasting {self!r} to {new_shape}",
        )
        return self._memo_put("broadcast_to", shape, result)

    def reshaped(self, shape):
        """The layout viewed with another shape of the same volume, without copying.

        One extent may be -1 (inferred). Extent-1 axes never block a reshape.

        Raises
        ------
        ValueError
            If the volumes differ or the strides cannot express the new shape.

        Examples
        --------
        >>> StridedLayout.dense((5, 3, 4), 4).permuted((2, 0, 1)).reshaped((4, 15)).strides
        (1, 4)
        """
        hit = self._memo_get("reshaped", shape)
        if hit is not None:
            return hit
        new_shape = _as_index_tuple(shape, "shape")
        m = len(new_shape)
        _check_ndim(m, "shape")
        volume = self.volume
        new_shape = _infer_extent(new_shape, volume)
        n = len(self._shape)
        if volume == 0:
            result = StridedLayout._trusted(new_shape, (0,) * m, self._itemsize, 0)
            return self._memo_put("reshaped", shape, result)
        out = _out_buffer(2 * m + 2 * n)
        status = _RESHAPE(self._lay(), n, _int64_buffer(new_shape), m, out, m)
        if status:
            raise ValueError(
                f"cannot reshape {self!r} to shape {new_shape}: the strides are "
                "incompatible (a copy would be needed)"
            )
        values = out.tolist()
        result = StridedLayout._checked(
            new_shape,
            tuple(values[m : 2 * m]),
            self._itemsize,
            self._offset,
            lambda: f"reshaping {self!r} to {new_shape}",
        )
        return self._memo_put("reshaped", shape, result)

    def flattened(self, start_axis=0, end_axis=-1, mask=None):
        """Merge axes ``start_axis..end_axis`` (inclusive) wherever the strides allow.

        With ``mask``, axis ``j`` may merge into axis ``j - 1`` when bit ``j`` is set,
        and ``start_axis``/``end_axis`` are ignored. Extent-1 axes never block a merge.

        Examples
        --------
        >>> StridedLayout.dense((2, 3, 4), 4).flattened(1, 2).shape
        (2, 12)
        >>> StridedLayout.dense((2, 3, 4), 4)[:, :, :2].flattened().shape
        (6, 2)
        """
        defaults = (
            mask is None
            and type(start_axis) is int
            and type(end_axis) is int
            and start_axis == 0
            and end_axis == -1
        )
        if defaults:
            hit = self._memo_get("flattened", None)
            if hit is not None:
                return hit
        n = len(self._shape)
        if mask is not None:
            mask = _as_index(mask, "mask")
            if not 0 <= mask < 2**64:
                raise OverflowError(f"mask = {mask} does not fit in uint64")
        else:
            start = _as_index(start_axis, "start_axis")
            end = _as_index(end_axis, "end_axis")
            if start == 0 and end == -1:
                mask = (1 << n) - 2 if n else 0
            else:
                start = _normalize_axis(start, n, "start_axis")
                end = _normalize_axis(end, n, "end_axis")
                mask = ((1 << (end + 1)) - (1 << (start + 1))) if end > start else 0
        hit = self._memo_get("flattened", mask)
        if hit is not None:
            return hit
        cap = max(n, 1)
        out = _out_buffer(2 * cap)
        signed_mask = mask - 2**64 if mask >= 2**63 else mask
        m = _FLATTEN(self._lay(), n, signed_mask, out, cap)
        values = out.tolist()
        result = StridedLayout._trusted(
            tuple(values[:m]), tuple(values[cap : cap + m]), self._itemsize, self._offset
        )
        return self._memo_put("flattened", None if defaults else mask, result)

    def repacked(self, itemsize, data_ptr=0, axis=-1, keep_dim=True):
        """Reinterpret the elements as elements of ``itemsize`` bytes along ``axis``.

        Packing (a larger itemsize) needs it to be a multiple of the current one, stride
        1 along ``axis``, and the extent there, the slice offset, every other stride and
        ``data_ptr`` to be compatible. Unpacking needs the current itemsize to be a
        multiple of the new one. With ``keep_dim=False`` an axis packed down to extent 1
        is dropped.

        Examples
        --------
        >>> StridedLayout.dense((5, 4), 2).repacked(8)
        StridedLayout(shape=(5, 1), strides=(1, 1), itemsize=8)
        >>> StridedLayout.dense((5, 4), 8).repacked(4).shape
        (5, 8)
        """
        memoisable = (
            type(itemsize) is int
            and type(data_ptr) is int
            and type(axis) is int
            and data_ptr == 0
            and axis == -1
            and keep_dim is True
        )
        if memoisable:
            hit = self._memo_get("repacked", itemsize)
            if hit is not None:
                return hit
        new_itemsize = _check_itemsize(itemsize)
        data_ptr = _as_index(data_ptr, "data_ptr")
        n = len(self._shape)
        old = self._itemsize
        if new_itemsize == old:
            if n:  # nothing to repack on a 0-d layout, but the axis must still be valid
                _normalize_axis(axis, n, "axis")
            else:
                _as_index(axis, "axis")
            return self
        ax = _normalize_axis(axis, n, "axis")
        if new_itemsize > old:
            if new_itemsize % old:
                raise ValueError(
                    f"cannot pack elements of {old} bytes into elements of itemsize "
                    f"{new_itemsize}: not a multiple"
                )
            if data_ptr % new_itemsize:
                raise ValueError(
                    f"data_ptr {data_ptr:#x} is not aligned to the new itemsize {new_itemsize}"
                )
        elif old % new_itemsize:
            raise ValueError(
                f"cannot unpack elements of {old} bytes into elements of itemsize "
                f"{new_itemsize}: not a divisor"
            )
        out = _out_buffer(2 * n)
        status, detail = _REPACK(self._lay(), n, self._offset, old, new_itemsize, ax, out, n)
        if status:
            raise ValueError(
                f"cannot repack {self!r} to itemsize {new_itemsize} along axis {ax}: "
                + _REPACK_REASONS[detail].format(
                    k=max(new_itemsize, old) // min(new_itemsize, old),
                    stride=self._strides[ax],
                    extent=self._shape[ax],
                    offset=self._offset,
                    other=out[0],
                )
            )
        values = out.tolist()
        shape = tuple(values[:n])
        strides = tuple(values[n:])
        if not keep_dim and shape[ax] == 1:
            shape = shape[:ax] + shape[ax + 1 :]
            strides = strides[:ax] + strides[ax + 1 :]
        result = StridedLayout._checked(
            shape,
            strides,
            new_itemsize,
            detail,
            lambda: f"repacking {self!r} to itemsize {new_itemsize}",
        )
        return self._memo_put("repacked", itemsize, result) if memoisable else result

    def max_compatible_itemsize(self, max_itemsize=16, data_ptr=0, axis=-1):
        """Largest divisor of ``max_itemsize`` (a multiple of this itemsize) for ``repacked``.

        ``self.repacked(self.max_compatible_itemsize(m, p, a), p, a)`` always succeeds;
        the result is ``itemsize`` itself when nothing larger fits. As in the reference,
        sizes that do not divide ``max_itemsize`` are not considered: ``dense((5, 6), 4)``
        gives 8 for ``max_itemsize=16`` although ``repacked(12)`` would work.

        Examples
        --------
        >>> StridedLayout.dense((5, 6), 2).max_compatible_itemsize(16)
        4
        >>> StridedLayout.dense((5, 6), 2).max_compatible_itemsize(16, data_ptr=2)
        2
        """
        max_itemsize = _as_index(max_itemsize, "max_itemsize")
        if max_itemsize <= 0:
            raise ValueError(f"max_itemsize must be positive, got {max_itemsize}")
        data_ptr = _as_index(data_ptr, "data_ptr")
        n = len(self._shape)
        ax = _normalize_axis(axis, n, "axis")
        if max_itemsize < self._itemsize:
            raise ValueError(
                f"max_itemsize {max_itemsize} is smaller than the itemsize {self._itemsize}"
            )
        max_itemsize = min(max_itemsize, _ITEMSIZE_LIMIT - 1)
        return _MAX_COMPATIBLE_ITEMSIZE(
            self._lay(), n, self._offset, self._itemsize, max_itemsize,
            data_ptr % max_itemsize, ax,
        )

    def sliced(self, slices):
        """The layout of ``array[slices]`` for an array with this layout (NumPy basic indexing).

        ``slices`` may hold ints, slices, ``None`` (a new extent-1 axis) and one
        ``Ellipsis``; a non-tuple is one item.

        Examples
        --------
        >>> layout = StridedLayout.dense((4, 5, 6), 1)
        >>> layout.sliced((1, Ellipsis, None, slice(None, None, -2))).shape
        (5, 1, 3)
        >>> layout[1, 2, 3].slice_offset
        45
        """
        hit = self._memo_get("sliced", slices)
        if hit is not None:
            return hit
        items = slices if type(slices) is tuple else (slices,)
        spec, k = _parse_index(items, self._shape)
        n = len(self._shape)
        cap = k + n
        out = _out_buffer(2 * cap)
        status, m, offset = _APPLY_INDEX(self._lay(), n, self._offset, spec, k, out, cap)
        if status:
            raise OverflowError(f"indexing {self!r} with {slices!r}: offsets overflow int64")
        _check_ndim(m, "the indexed layout")
        values = out.tolist()
        result = StridedLayout._checked(
            tuple(values[:m]),
            tuple(values[cap : cap + m]),
            self._itemsize,
            offset,
            lambda: f"indexing {self!r} with {slices!r}",
        )
        return self._memo_put("sliced", slices, result)

    def __getitem__(self, slices):
        return self.sliced(slices)

    # ---------------------------------------------------------------- identity
    def __eq__(self, other):
        # equal when every index maps to the same offset: strides of extent-1 axes are
        # never used, so they do not count
        if not isinstance(other, StridedLayout):
            return NotImplemented
        if (
            self._shape != other._shape
            or self._itemsize != other._itemsize
            or self._offset != other._offset
        ):
            return False
        if self._strides == other._strides:
            return True
        return 1 in self._shape and _used_strides(self) == _used_strides(other)

    def __hash__(self):
        strides = _used_strides(self) if 1 in self._shape else self._strides
        return hash((self._shape, strides, self._itemsize, self._offset))

    def __reduce__(self):
        return _rebuild, (self._shape, self._strides, self._itemsize, self._offset)

    def __repr__(self):
        text = f"StridedLayout(shape={self._shape}, strides={self._strides}, itemsize={self._itemsize}"
        if self._offset:
            text += f", slice_offset={self._offset}"
        return text + ")"

    @property
    def _numba_type_(self):
        """The Numba type of this layout (lets ``@njit`` code take layouts as arguments)."""
        try:
            return _NUMBA_TYPES[len(self._shape)]
        except IndexError:  # first use: the types are made by layoutkit._numba_layout
            return _numba_types()[len(self._shape)]

    @classmethod
    def _numba_box(cls, shape, strides, itemsize, slice_offset):
        """A layout from int tuples computed by compiled code (OverflowError if they overflow)."""
        return cls._checked(
            shape, strides, itemsize, slice_offset, "layout returned from compiled code"
        )

    def _repr_html_(self):
        from ._display import layout_html

        return layout_html(self)


_NUMBA_TYPES = ()  # StridedLayoutType by ndim, for _numba_type_; filled on first use


def _numba_types():
    global _NUMBA_TYPES
    from ._numba_layout import layout_type

    _NUMBA_TYPES = tuple(layout_type(ndim) for ndim in range(MAX_NDIM + 1))
    return _NUMBA_TYPES


def _rebuild(shape, strides, itemsize, slice_offset):
    """Unpickle a layout, validating every value (pickles can come from anywhere)."""
    layout = StridedLayout(shape, strides, itemsize)
    offset = _as_index(slice_offset, "slice_offset")
    if layout.volume == 0 or offset == 0:
        return layout
    if not _INT64_MIN <= offset <= _INT64_MAX:
        raise OverflowError(f"slice_offset = {offset} does not fit in int64")
    return StridedLayout._checked(
        layout.shape, layout.strides, layout.itemsize, offset, "unpickled layout"
    )


def _used_strides(layout):
    """The strides with those of extent-1 axes (never used) replaced by 0."""
    return tuple(0 if e == 1 else s for e, s in zip(layout._shape, layout._strides))


def _is_frozen(arg):
    """Whether ``arg`` is built only of ints, None, Ellipsis and slices of those."""
    kind = type(arg)
    if kind is int or arg is None or arg is Ellipsis:
        return True
    if kind is tuple:
        return all(map(_is_frozen, arg))
    if kind is slice:
        return _is_frozen(arg.start) and _is_frozen(arg.stop) and _is_frozen(arg.step)
    return False


def _last(values):
    return values[-1] if values else 1


def _has_zero_stride_axis(shape, strides):
    return any(s == 0 and e > 1 for e, s in zip(shape, strides))


_REPACK_REASONS = {
    1: "its stride there is {stride}, not 1",
    2: "the extent {extent} there is not divisible by {k}",
    3: "the slice offset {offset} is not divisible by {k}",
    4: "the stride of axis {other} is not divisible by {k}",
}


def _parse_stride_order(stride_order, ndim, allow_k):
    if isinstance(stride_order, str):
        if stride_order == "C":
            return tuple(range(ndim))
        if stride_order == "F":
            return tuple(range(ndim - 1, -1, -1))
        options = "'K', 'C', 'F'" if allow_k else "'C', 'F'"
        raise ValueError(
            f"stride_order must be one of {options} or a permutation of the axes, "
            f"got {stride_order!r}"
        )
    return _normalize_permutation(stride_order, ndim, "stride_order")


def _dense_strides(shape, order):
    ndim = len(shape)
    if 0 not in shape and math.prod(shape) > _INT64_MAX:
        raise OverflowError(f"the volume of shape {shape} does not fit in int64")
    out = _out_buffer(ndim)
    _DENSE_STRIDES(_int64_buffer(shape), ndim, _int64_buffer(order), out, 0)
    return tuple(out.tolist())


def _infer_extent(shape, volume):
    """Replace a single -1 extent by the one that makes the volume ``volume``."""
    unknown = None
    known = 1
    for i, e in enumerate(shape):
        if e == -1:
            if unknown is not None:
                raise ValueError(f"shape {shape} has more than one -1 extent")
            unknown = i
        elif e < 0:
            raise ValueError(f"shape[{i}] = {e} is negative; extents must be >= 0 or -1")
        elif e > _INT64_MAX:  # a zero volume would let it through
            raise OverflowError(f"shape[{i}] = {e} does not fit in int64")
        else:
            known *= e
    if unknown is None:
        if known != volume:
            raise ValueError(
                f"cannot reshape a layout of volume {volume} to shape {shape} "
                f"(volume {known})"
            )
        return shape
    if known == 0:
        raise ValueError(f"shape {shape}: the -1 extent is ambiguous with a zero extent")
    if volume % known:
        raise ValueError(
            f"cannot reshape a layout of volume {volume} to shape {shape}: "
            f"{volume} is not divisible by {known}"
        )
    return shape[:unknown] + (volume // known,) + shape[unknown + 1 :]


def _clamp64(value):
    return max(_INT64_MIN + 1, min(_INT64_MAX, value))


def _parse_index(items, shape):
    """Encode basic-index items for the ``apply_index`` kernel: (spec buffer, count)."""
    k = _kernels()
    n = len(shape)
    consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
    ellipses = sum(1 for it in items if it is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > n:
        raise AxisError(
            f"too many indices: {consumed} given for a layout of {n} dimensions"
        )
    spec = []
    axis = 0
    for item in items:
        if item is None:
            spec += (k.ITEM_NEWAXIS, 0, 0, 0)
        elif item is Ellipsis:
            for _ in range(n - consumed):
                spec += (k.ITEM_SLICE, 0, 0, 1)
                axis += 1
        elif isinstance(item, slice):
            kind = k.ITEM_SLICE
            step = 1 if item.step is None else _as_index(item.step, "slice step")
            if step == 0:
                raise ValueError(f"slice step cannot be zero (axis {axis})")
            step = _clamp64(step)  # as Python and NumPy clamp a huge step
            start = stop = 0
            if item.start is not None:
                start = _clamp64(_as_index(item.start, "slice start"))
                kind |= k.ITEM_HAS_START
            if item.stop is not None:
                stop = _clamp64(_as_index(item.stop, "slice stop"))
                kind |= k.ITEM_HAS_STOP
            spec += (kind, start, stop, step)
            axis += 1
        else:
            if isinstance(item, bool) or not hasattr(item, "__index__"):
                raise TypeError(
                    "indices must be integers, slices, None or Ellipsis, got "
                    f"{item!r} of type {type(item).__name__}"
                )
            index = _as_index(item, "index")
            extent = shape[axis]
            if not -extent <= index < extent:
                raise AxisError(
                    f"index {index} is out of bounds for axis {axis} with extent {extent}"
                )
            spec += (k.ITEM_INT, index, 0, 0)
            axis += 1
    return _int64_buffer(spec), len(spec) // 4


class _LazyKernel:
    """Call a kernel through its compiled entry point for ``array.array`` arguments.

    The first call compiles (or loads from Numba's cache) and keeps the entry point of the
    single specialisation, which skips the dispatcher's type resolution afterwards.
    """

    __slots__ = ("_name", "_entry")

    def __init__(self, name):
        self._name = name
        self._entry = None

    def __call__(self, *args):
        entry = self._entry
        if entry is None:
            dispatcher = getattr(_kernels(), self._name)
            result = dispatcher(*args)
            (signature,) = [s for s in dispatcher.signatures if _matches(s, args)]
            self._entry = dispatcher.overloads[signature].entry_point
            return result
        return entry(*args)


def _matches(signature, args):
    from numba import typeof

    return tuple(signature) == tuple(typeof(a) for a in args)


_ANALYZE = _LazyKernel("analyze")
_OFFSETS_ARE_DISTINCT = _LazyKernel("offsets_are_distinct")
_DENSE_STRIDES = _LazyKernel("dense_strides")
_BROADCAST = _LazyKernel("broadcast")
_RESHAPE = _LazyKernel("reshape")
_FLATTEN = _LazyKernel("flatten")
_REPACK = _LazyKernel("repack")
_MAX_COMPATIBLE_ITEMSIZE = _LazyKernel("max_compatible_itemsize")
_APPLY_INDEX = _LazyKernel("apply_index")
