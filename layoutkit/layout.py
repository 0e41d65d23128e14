"""``StridedLayout``: the memory layout of an n-d tensor, immutable and hashable.

A layout is a shape, strides counted in elements, an itemsize in bytes and a slice offset
in elements (the offset of index ``(0, ..., 0)``). The element at index ``idx`` lives at
byte ``(slice_offset + sum(idx[k] * strides[k])) * itemsize`` from the start of the
memory the layout describes.

From Python every operation is plain Python arithmetic on tuples of ints: at these sizes
(at most 64 dimensions) that is faster than any call into compiled code, and it keeps the
first layout operation of a process free of Numba's start-up. Compiled code (``@njit``,
``@cuda.jit``) runs the same rules as the integer kernels of :mod:`layoutkit._kernels`;
``tests/test_layout_kernels.py`` checks that the two agree on random layouts.

Validation is complete before a layout exists: every number a layout implies (extents,
strides, volume, element offsets, byte strides and byte offsets) fits in int64, and every
error names the argument and its value. Derived properties are computed on first use and
kept in the layout's slots.
"""

import itertools
import math
import operator
import reprlib
from array import array

from ._errors import AxisError

__all__ = ["StridedLayout"]

MAX_NDIM = 64
_INT64_MAX = 2**63 - 1
_ITEMSIZE_LIMIT = 2**31
_EXACT_UNIQUE_LIMIT = 4096  # volumes up to this get an exact is_unique by enumeration
_ONLY_INT = frozenset((int,))
_exact_int = int.__index__  # an int subclass's value as a plain int (no overridable hook)
_new_instance = object.__new__
_mul = operator.mul
_accumulate = itertools.accumulate
_prod = math.prod
_show = reprlib.Repr()
_show.maxstring = _show.maxother = 80
_show.maxtuple = _show.maxlist = 12


# ------------------------------------------------------------------------- argument checks
def _describe(value):
    """``repr(value)``, shortened, for an error message (never raises)."""
    try:
        return _show.repr(value)
    except Exception:  # a hostile __repr__ must not replace the real error
        return f"<{type(value).__name__} object>"


def _as_index(value, name):
    """``value`` as a plain int (``operator.index``; bools refused), or a TypeError naming it."""
    if type(value) is int:
        return value
    failure = None
    if not isinstance(value, bool):
        try:
            return _exact_int(operator.index(value))
        except TypeError:
            pass
        except Exception as exc:  # a broken __index__: still the argument's fault
            failure = exc
    raise TypeError(
        f"{name} must be an integer, got {_describe(value)} of type {type(value).__name__}"
    ) from failure


def _as_ints(values, name, scalar_ok=True):
    """A tuple of plain ints from a sequence of integer-likes (or one integer if ``scalar_ok``).

    Other iterables than tuples and lists are read at most ``MAX_NDIM + 1`` entries deep,
    so an endless one cannot hang the call.
    """
    kind = type(values)
    if kind is tuple and _ONLY_INT.issuperset(map(type, values)):
        return values
    if kind is not tuple and kind is not list:
        expected = "a sequence of integers" + (" or an integer" if scalar_ok else "")
        if isinstance(values, (str, bytes, bytearray, dict, set, frozenset)):
            raise TypeError(
                f"{name} must be {expected}, got {_describe(values)} of type {kind.__name__}"
            )
        try:
            entries = iter(values)
        except TypeError:  # not iterable: a single integer, or nothing we accept
            if scalar_ok and not isinstance(values, bool) and hasattr(kind, "__index__"):
                return (_as_index(values, name),)
            raise TypeError(
                f"{name} must be {expected}, got {_describe(values)} of type {kind.__name__}"
            ) from None
        try:
            values = tuple(itertools.islice(entries, MAX_NDIM + 1))
        except Exception as exc:  # a broken iterator: the argument's fault
            raise TypeError(f"{name}: reading {_describe(values)} failed ({exc!r})") from exc
        if len(values) > MAX_NDIM:
            raise ValueError(f"{name} has more than {MAX_NDIM} dimensions")
    return tuple([_as_index(v, f"{name}[{i}]") for i, v in enumerate(values)])


def _check_ndim(ndim, name):
    if ndim > MAX_NDIM:
        raise ValueError(f"{name} has {ndim} dimensions; at most {MAX_NDIM} are supported")


def _check_extents(shape, name):
    """Every extent in ``0..INT64_MAX``; returns the volume (which may not fit in int64)."""
    if shape and (min(shape) < 0 or max(shape) > _INT64_MAX):
        for i, e in enumerate(shape):
            if e < 0:
                raise ValueError(f"{name}[{i}] = {e} is negative; extents must be >= 0")
            if e > _INT64_MAX:
                raise OverflowError(f"{name}[{i}] = {e} does not fit in int64")
    return _prod(shape)


def _check_itemsize(itemsize, name="itemsize"):
    if type(itemsize) is not int:
        itemsize = _as_index(itemsize, name)
    if not 0 < itemsize < _ITEMSIZE_LIMIT:
        if itemsize <= 0:
            raise ValueError(f"{name} must be positive, got {itemsize}")
        raise OverflowError(f"{name} = {itemsize} is too large (limit 2**31 - 1)")
    return itemsize


def _normalize_axis(axis, ndim, name):
    if type(axis) is not int:
        axis = _as_index(axis, name)
    if not -ndim <= axis < ndim:
        raise AxisError(f"{name} {axis} is out of bounds for a layout of {ndim} dimensions")
    return axis + ndim if axis < 0 else axis


def _normalize_permutation(order, ndim, name):
    """A permutation of ``range(ndim)`` (entries may be negative, NumPy-style)."""
    if type(order) is not tuple or not _ONLY_INT.issuperset(map(type, order)):
        order = _as_ints(order, name, scalar_ok=False)
    if len(order) != ndim:
        raise ValueError(
            f"{name} {_describe(order)} has {len(order)} entries; the layout has {ndim} "
            "dimensions"
        )
    if order == _IOTA[ndim] or sorted(order) == _IOTA_LIST[ndim]:
        return order
    axes = tuple([a + ndim if a < 0 else a for a in order])
    if sorted(axes) == _IOTA_LIST[ndim]:
        return axes
    for a in order:  # name the first bad entry
        _normalize_axis(a, ndim, name)
    raise ValueError(f"{name} {order} repeats an axis")


_IOTA = [tuple(range(n)) for n in range(MAX_NDIM + 1)]
_IOTA_LIST = [list(range(n)) for n in range(MAX_NDIM + 1)]
_REVERSED = [tuple(range(n - 1, -1, -1)) for n in range(MAX_NDIM + 1)]


def _parse_stride_order(stride_order, ndim, allow_k):
    """Axes slowest first for ``"C"``, ``"F"`` or a permutation (``None``: ``"C"``)."""
    if stride_order is None:
        return _IOTA[ndim]
    if type(stride_order) is str:
        if stride_order == "C":
            return _IOTA[ndim]
        if stride_order == "F":
            return _REVERSED[ndim]
    if isinstance(stride_order, str) or (
        not isinstance(stride_order, bool) and hasattr(type(stride_order), "__index__")
    ):
        options = "'K', 'C', 'F'" if allow_k else "'C', 'F'"
        raise ValueError(
            f"stride_order must be one of {options} or a sequence of axes (slowest "
            f"first), got {_describe(stride_order)}"
        )
    return _normalize_permutation(stride_order, ndim, "stride_order")


# ------------------------------------------------------------------------- int64 checks
def _fits(shape, strides, itemsize, offset):
    """Why the numbers of a non-empty layout do not fit in int64, or ``None`` if they do.

    Exact: the volume, every element offset and byte offset (including the end of the
    last element) and every byte stride (of extent-1 axes too) must fit; strides are kept
    in ``[-INT64_MAX, INT64_MAX]`` (in bytes too) so that ``abs`` of any of them fits.
    Returns ``(reason, volume, low, high)``; ``reason`` is ``None`` or says what does not fit.
    """
    volume = _prod(shape)
    if volume > _INT64_MAX:
        return "its volume does not fit in int64", volume, 0, 0
    limit = _INT64_MAX // itemsize
    low = high = offset
    for e, s in zip(shape, strides):
        if not -limit <= s <= limit:
            return "its byte strides do not fit in int64", volume, 0, 0
        if s > 0:
            high += s * (e - 1)
        else:
            low += s * (e - 1)
    if high >= limit or low < -(2**63 // itemsize):
        return "its byte offsets do not fit in int64", volume, low, high
    return None, volume, low, high


# Fast paths: each takes values as given and returns None unless they are the common
# case (tuples of plain ints, no zero extent, every number well inside int64); callers then
# run the full checks, which name what is wrong. One Python loop costs less here than
# several builtin passes (min(), max(), map() each cost a call).
def _plain_bounds(shape, strides, itemsize):
    """``(volume, (low, high))`` of a plain, non-empty layout whose numbers fit, or None."""
    if type(strides) is not tuple or len(strides) != len(shape):
        return None
    limit = _INT64_MAX // itemsize
    volume = 1
    low = high = 0
    for e, s in zip(shape, strides):
        if type(e) is not int or type(s) is not int or e < 1 or not -limit <= s <= limit:
            return None
        volume *= e
        if s > 0:
            high += s * (e - 1)
        else:
            low += s * (e - 1)
    if volume > _INT64_MAX or high >= limit or low < -(2**63 // itemsize):
        return None
    return volume, (low, high)


def _plain_volume(shape):
    """The volume of a plain shape of extents 1..INT64_MAX (whose volume fits), or None."""
    volume = 1
    for e in shape:
        if type(e) is not int or e < 1:
            return None
        volume *= e
    return volume if volume <= _INT64_MAX else None


def _plain_c_strides(shape, itemsize):
    """C-order dense strides of a plain, non-empty shape whose bytes fit, or None."""
    strides = []
    running = 1
    for e in reversed(shape):
        if type(e) is not int or e < 1:
            return None
        strides.append(running)
        running *= e
    if running > _INT64_MAX // itemsize:
        return None
    strides.reverse()
    return tuple(strides)


def _plain_ordered_strides(shape, order, itemsize):
    """Dense strides with the axes ``order`` (slowest first), as ``_plain_c_strides``."""
    strides = [0] * len(shape)
    running = 1
    for axis in reversed(order):
        e = shape[axis]
        if type(e) is not int or e < 1:
            return None
        strides[axis] = running
        running *= e
    if running > _INT64_MAX // itemsize:
        return None
    return tuple(strides)


def _plain_f_strides(shape, itemsize):
    """Fortran-order dense strides, as ``_plain_c_strides``."""
    strides = []
    running = 1
    for e in shape:
        if type(e) is not int or e < 1:
            return None
        strides.append(running)
        running *= e
    if running > _INT64_MAX // itemsize:
        return None
    return tuple(strides)


def _constructed(cls, shape, strides, itemsize, divide_strides):
    """The constructor's full checks: any argument types, every error named."""
    if type(shape) is not tuple or not _ONLY_INT.issuperset(map(type, shape)):
        shape = _as_ints(shape, "shape")
    ndim = len(shape)
    if ndim > MAX_NDIM:
        _check_ndim(ndim, "shape")
    _check_extents(shape, "shape")
    if type(itemsize) is not int or not 0 < itemsize < _ITEMSIZE_LIMIT:
        itemsize = _check_itemsize(itemsize)
    if strides is None:
        strides = _dense_strides(shape, _IOTA[ndim], itemsize, "shape")
    else:
        if type(strides) is not tuple or not _ONLY_INT.issuperset(map(type, strides)):
            strides = _as_ints(strides, "strides")
        if len(strides) != ndim:
            raise ValueError(
                f"strides {_describe(strides)} has {len(strides)} entries but shape "
                f"{shape} has {ndim}"
            )
        if divide_strides:
            strides = _divided(strides, itemsize)
        if strides and (min(strides) <= -_INT64_MAX - 1 or max(strides) > _INT64_MAX):
            for i, s in enumerate(strides):
                if not -_INT64_MAX <= s <= _INT64_MAX:
                    raise OverflowError(f"strides[{i}] = {s} does not fit in int64")
    if 0 in shape:
        return _new(shape, (0,) * ndim, itemsize, 0, cls)
    reason, volume, low, high = _fits(shape, strides, itemsize, 0)
    if reason is not None:
        raise OverflowError(
            f"StridedLayout(shape={shape}, strides={strides}, itemsize={itemsize}): {reason}"
        )
    self = _new(shape, strides, itemsize, 0, cls)
    self._volume = volume
    self._bounds = (low, high)
    return self


def _validated(shape, strides, itemsize, offset, what):
    """A layout from int tuples of the right lengths; OverflowError naming ``what``."""
    if not 0 < itemsize < _ITEMSIZE_LIMIT:
        _check_itemsize(itemsize)
    if 0 in shape:
        if max(shape) > _INT64_MAX:
            _check_extents(shape, "shape")
        return _new(shape, (0,) * len(shape), itemsize, 0)
    reason, volume, low, high = _fits(shape, strides, itemsize, offset)
    if reason is not None:
        if callable(what):
            what = what()
        raise OverflowError(f"{what}: {reason}")
    self = _new(shape, strides, itemsize, offset)
    self._volume = volume
    self._bounds = (low, high)
    return self


def _new(shape, strides, itemsize, offset, cls=None):
    """A layout from values that are already valid (the one place that fills the slots).

    Derived values start as None (computed on first use): reading a slot that was never
    set would raise, and catching that costs ten times a None test.
    """
    self = _new_instance(cls or StridedLayout)
    self._shape = shape
    self._strides = strides
    self._itemsize = itemsize
    self._offset = offset
    self._packed = self._volume = self._bounds = self._order = None
    self._is_c = self._is_f = self._is_any = self._unique = None
    self._mask = self._strides_in_bytes = self._hash = None
    return self


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

    Arguments follow NumPy: any sequence of integer-likes (NumPy integers included)
    where a shape or axes are expected; floats, strings and bools are refused.

    Subclasses: the constructor is ``__new__`` (as for ``tuple``), so a subclass that
    takes other arguments overrides ``__new__``. Every method returns a plain
    ``StridedLayout`` (as ``str`` and ``tuple`` methods do for their subclasses), also
    where the result equals ``self``; the classmethods ``dense`` and ``dense_like`` called
    on a subclass build their result with ``cls(shape, strides, itemsize)``, as
    ``dict.fromkeys`` calls ``cls()``. Pickles keep the subclass and its ``__dict__``.

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
    >>> layout.offset_of((1, -1))
    5
    """

    __slots__ = (
        # the layout (read by compiled code: see layoutkit._numba_layout)
        "_shape", "_strides", "_itemsize", "_offset",
        # derived values, each filled on first use
        "_packed", "_volume", "_bounds", "_order", "_is_c", "_is_f", "_is_any", "_unique",
        "_mask", "_strides_in_bytes", "_hash",
        "__weakref__",
    )

    def __new__(cls, shape, strides, itemsize, divide_strides=False):
        # the constructor is __new__ (as for tuple): no instance exists before its values
        # are valid, and pickle's NEWOBJ cannot make one without them
        if (
            type(shape) is tuple
            and type(itemsize) is int
            and 0 < itemsize < _ITEMSIZE_LIMIT
            and len(shape) <= MAX_NDIM
            and not divide_strides
        ):  # the common case in one pass; anything unusual takes the full checks below
            if strides is None:
                strides = _plain_c_strides(shape, itemsize)
                fits = None if strides is None else ()
            else:
                fits = _plain_bounds(shape, strides, itemsize)
            if fits is not None:
                self = _new(shape, strides, itemsize, 0, cls)
                if fits:
                    self._volume, self._bounds = fits
                return self
        return _constructed(cls, shape, strides, itemsize, divide_strides)

    @classmethod
    def _trusted(cls, shape, strides, itemsize, slice_offset=0):
        """A layout from tuples of ints of the right lengths (callers inside layoutkit).

        The int64 checks still run: an OverflowError if a number does not fit.
        """
        return _validated(shape, strides, itemsize, slice_offset, "layout")

    @classmethod
    def _checked(cls, shape, strides, itemsize, slice_offset, what):
        """Like ``_trusted``; the OverflowError names ``what`` (a string or makes one)."""
        return _validated(shape, strides, itemsize, slice_offset, what)

    def _lay(self):
        """``shape + strides`` as one int64 ``array('q')`` (for kernels and compiled code)."""
        packed = self._packed
        if packed is None:
            packed = self._packed = array("q", self._shape + self._strides)
        return packed

    # ---------------------------------------------------------------- construction
    @classmethod
    def dense(cls, shape, itemsize, stride_order="C"):
        """A dense layout of ``shape`` whose axes are laid out in ``stride_order``.

        Parameters
        ----------
        shape : sequence of int
        itemsize : int
        stride_order : {"C", "F"}, sequence of int or None
            ``"C"`` (last axis fastest; also ``None``), ``"F"`` (first axis fastest) or a
            permutation of the axes from slowest to fastest. A single integer is refused.

        Examples
        --------
        >>> StridedLayout.dense((2, 3, 4), 8, stride_order=(2, 0, 1)).strides
        (3, 1, 6)
        >>> StridedLayout.dense((2, 0, 4), 8).strides  # zero volume: all strides 0
        (0, 0, 0)
        """
        strides = None
        if (
            type(shape) is tuple
            and type(itemsize) is int
            and 0 < itemsize < _ITEMSIZE_LIMIT
            and type(stride_order) is str
            and len(shape) <= MAX_NDIM
        ):  # the common case in one pass (None: the full checks below decide)
            if stride_order == "C":
                strides = _plain_c_strides(shape, itemsize)
            elif stride_order == "F":
                strides = _plain_f_strides(shape, itemsize)
        elif (
            type(shape) is tuple
            and type(itemsize) is int
            and 0 < itemsize < _ITEMSIZE_LIMIT
            and type(stride_order) is tuple
            and len(stride_order) == len(shape)
            and _ONLY_INT.issuperset(map(type, stride_order))
            and sorted(stride_order) == _IOTA_LIST[len(shape)]
        ):  # a permutation of plain axes: the strides in that order, in one pass
            strides = _plain_ordered_strides(shape, stride_order, itemsize)
        if strides is None:
            if type(shape) is not tuple or not _ONLY_INT.issuperset(map(type, shape)):
                shape = _as_ints(shape, "shape")
            ndim = len(shape)
            if ndim > MAX_NDIM:
                _check_ndim(ndim, "shape")
            if type(itemsize) is not int or not 0 < itemsize < _ITEMSIZE_LIMIT:
                itemsize = _check_itemsize(itemsize)
            order = _parse_stride_order(stride_order, ndim, allow_k=False)
            strides = _dense_strides(shape, order, itemsize, "shape")
        if cls is not StridedLayout:
            return cls(shape, strides, itemsize)
        return _new(shape, strides, itemsize, 0)

    @classmethod
    def dense_like(cls, other, stride_order="K"):
        """A dense layout with the shape and itemsize of ``other``.

        ``stride_order="K"`` (or ``None``) keeps ``other``'s stride order; ``"C"``,
        ``"F"`` or a permutation choose another. Returns ``other`` itself when it is already dense
        in the requested order (and of class ``cls``).

        Examples
        --------
        >>> sliced = StridedLayout.dense((4, 6), 4, "F")[::2, 1:]
        >>> StridedLayout.dense_like(sliced).strides
        (1, 2)
        """
        if not isinstance(other, StridedLayout):
            raise TypeError(f"other must be a StridedLayout, got {type(other).__name__}")
        shape = other._shape
        ndim = len(shape)
        if stride_order is None or type(stride_order) is str and stride_order == "K":
            same = other._offset == 0 and _get_is_any(other)
            order = None if same else _get_order(other)
        else:
            order = _parse_stride_order(stride_order, ndim, allow_k=True)
            if order is _IOTA[ndim]:
                same = other._offset == 0 and _get_is_c(other)
            elif order is _REVERSED[ndim]:
                same = other._offset == 0 and _get_is_f(other)
            else:
                same = False
        itemsize = other._itemsize
        if same:
            if type(other) is cls:
                return other
            strides = other._strides
        elif order is _IOTA[ndim]:
            strides = _plain_c_strides(shape, itemsize) or _dense_strides(
                shape, order, itemsize, "shape"
            )
        elif order is _REVERSED[ndim]:
            strides = _plain_f_strides(shape, itemsize) or _dense_strides(
                shape, order, itemsize, "shape"
            )
        else:
            strides = _dense_strides(shape, order, itemsize, "shape")
        if cls is not StridedLayout:
            return cls(shape, strides, itemsize)
        return _new(shape, strides, itemsize, 0)

    def to_dense(self, stride_order="K"):
        """``StridedLayout.dense_like(self, stride_order)``.

        Examples
        --------
        >>> StridedLayout.dense((3, 4), 2)[:, ::-1].to_dense().strides
        (4, 1)
        >>> StridedLayout.dense((3, 4), 2).to_dense("F").strides
        (1, 3)
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
        value = self._strides_in_bytes
        if value is None:
            size = self._itemsize
            value = self._strides_in_bytes = tuple([s * size for s in self._strides])
        return value

    @property
    def slice_offset_in_bytes(self):
        """The slice offset in bytes."""
        return self._offset * self._itemsize

    # ---------------------------------------------------------------- derived properties
    @property
    def volume(self):
        """Number of elements (the product of the extents; 1 for 0-d)."""
        volume = self._volume
        if volume is None:
            volume = self._volume = _prod(self._shape)
        return volume

    @property
    def offset_bounds(self):
        """``(min_offset, max_offset)`` in elements, slice offset included; ``(0, -1)`` if empty.

        Examples
        --------
        >>> StridedLayout((3, 4), (-4, 1), 2).offset_bounds
        (-8, 3)
        """
        bounds = self._bounds
        if bounds is None:
            bounds = self._bounds = _offset_bounds(self._shape, self._strides, self._offset)
        return bounds

    @property
    def min_offset(self):
        """Smallest element offset of any index (see ``offset_bounds``)."""
        return _get_bounds(self)[0]

    @property
    def max_offset(self):
        """Largest element offset of any index (see ``offset_bounds``)."""
        return _get_bounds(self)[1]

    @property
    def is_contiguous_c(self):
        """Whether the elements are contiguous in C order (extent-1 axes may have any stride)."""
        value = self._is_c
        if value is None:
            shape = self._shape
            value = self._is_c = _is_contiguous(
                shape, self._strides, range(len(shape) - 1, -1, -1)
            )
        return value

    @property
    def is_contiguous_f(self):
        """Whether the elements are contiguous in Fortran order."""
        value = self._is_f
        if value is None:
            shape = self._shape
            value = self._is_f = _is_contiguous(shape, self._strides, range(len(shape)))
        return value

    @property
    def is_contiguous_any(self):
        """Whether the elements are contiguous in some axis order (see ``stride_order``)."""
        value = self._is_any
        if value is None:
            shape, strides = self._shape, self._strides
            order = _get_order(self)
            value = self._is_any = _is_contiguous(shape, strides, reversed(order))
        return value

    @property
    def is_dense(self):
        """Contiguous in some axis order, starting at offset 0."""
        if self._offset:
            return False
        value = self._is_any
        return _get_is_any(self) if value is None else value

    @property
    def stride_order(self):
        """Axes from the slowest (largest ``abs(stride)``) to the fastest.

        Ties are broken by larger extent first, then by lower axis index.

        Examples
        --------
        >>> StridedLayout.dense((2, 3, 4), 4, "F").stride_order
        (2, 1, 0)
        """
        order = self._order
        if order is None:
            shape, strides = self._shape, self._strides
            keys = list(zip(map(abs, strides), shape))
            order = self._order = tuple(
                sorted(range(len(shape)), key=keys.__getitem__, reverse=True)
            )
            # ``reverse`` keeps equal keys in their original order: ties by axis index
        return order

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
        >>> StridedLayout((2, 3, 2), (1, -2**62, 2**62 + 1), 1).is_unique  # (0,1,1) ~ (1,0,0)
        False
        """
        value = self._unique
        if value is None:
            value = self._unique = _is_unique(self)
        return value

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
        bounds = self._bounds
        low, high = _get_bounds(self) if bounds is None else bounds
        if low < 0:
            raise ValueError(
                f"layout {self!r} reaches offset {low} before its start: the size it "
                "needs is ambiguous (use to_dense() for an allocation)"
            )
        return (high + 1) * self._itemsize

    def flattened_axis_mask(self):
        """Bit ``j`` is set when axis ``j`` merges with axis ``j - 1`` in ``flattened``.

        Masks of several layouts of the same shape can be ANDed and passed to
        ``flattened(mask=...)`` so that all of them flatten to the same shape.

        Examples
        --------
        >>> bin(StridedLayout.dense((2, 3, 4), 4)[:, :2].flattened_axis_mask())
        '0b100'
        """
        mask = self._mask
        if mask is None:
            mask = self._mask = _merged(self._shape, self._strides, -1)[2]
        return mask

    def offset_of(self, index):
        """Element offset of the multi-index ``index`` (one integer per axis).

        Negative entries count from the end, as in NumPy; an entry out of range raises
        :class:`~layoutkit.AxisError`. The same method works on layouts in compiled code.

        Examples
        --------
        >>> layout = StridedLayout.dense((4, 5), 2)[1:, ::-1]
        >>> layout.offset_of((0, 0)), layout.offset_of((-1, -1))
        (9, 15)
        """
        shape = self._shape
        if type(index) is not tuple or not _ONLY_INT.issuperset(map(type, index)):
            index = _as_ints(index, "index", scalar_ok=False)
        if len(index) != len(shape):
            raise AxisError(
                f"index {_describe(index)} has {len(index)} entries; the layout has "
                f"{len(shape)} dimensions"
            )
        offset = self._offset
        for axis, (i, e, s) in enumerate(zip(index, shape, self._strides)):
            if not -e <= i < e:
                raise AxisError(
                    f"index {i} is out of bounds for axis {axis} with extent {e}"
                )
            offset += (i + e if i < 0 else i) * s
        return offset

    # ---------------------------------------------------------------- transforms
    def permuted(self, axis_order):
        """The layout with its axes reordered: axis ``i`` of the result is ``axis_order[i]``.

        Examples
        --------
        >>> StridedLayout.dense((2, 3, 4), 4).permuted((2, 0, 1)).shape
        (4, 2, 3)
        """
        shape, strides = self._shape, self._strides
        ndim = len(shape)
        order = axis_order
        if type(order) is tuple and len(order) == ndim and ndim <= 8:
            # few axes: check and take them in one loop (a bit per axis seen)
            new_shape, new_strides, seen = [], [], 0
            for a in order:
                if type(a) is not int or not 0 <= a < ndim or seen >> a & 1:
                    break
                seen |= 1 << a
                new_shape.append(shape[a])
                new_strides.append(strides[a])
            else:
                return _new(tuple(new_shape), tuple(new_strides), self._itemsize, self._offset)
        if (
            type(order) is not tuple
            or len(order) != ndim
            or not _ONLY_INT.issuperset(map(type, order))
            or sorted(order) != _IOTA_LIST[ndim]
        ):
            order = _normalize_permutation(axis_order, ndim, "axis_order")
        if ndim > 1:
            take = operator.itemgetter(*order)
            return _new(take(shape), take(strides), self._itemsize, self._offset)
        return _new(shape, strides, self._itemsize, self._offset)

    def squeezed(self):
        """The layout without its extent-1 axes.

        Examples
        --------
        >>> StridedLayout.dense((1, 3, 1, 2), 4).squeezed().shape
        (3, 2)
        """
        shape = self._shape
        if 1 not in shape:
            return _new(shape, self._strides, self._itemsize, self._offset)
        new_shape, new_strides = [], []
        for e, s in zip(shape, self._strides):
            if e != 1:
                new_shape.append(e)
                new_strides.append(s)
        return _new(tuple(new_shape), tuple(new_strides), self._itemsize, self._offset)

    def unsqueezed(self, axis):
        """The layout with extent-1 axes inserted at ``axis`` (an int or a sequence).

        Axes index the result, as in ``numpy.expand_dims``. A new axis gets the stride
        ``extent * stride`` of the next original axis (the last stride after them all, 1
        for a 0-d layout).

        Examples
        --------
        >>> StridedLayout.dense((3, 4), 4).unsqueezed((0, -1)).shape
        (1, 3, 4, 1)
        """
        shape, strides = self._shape, self._strides
        ndim = len(shape)
        if type(axis) is int and -ndim - 1 <= axis <= ndim:
            if ndim == MAX_NDIM:
                _check_ndim(ndim + 1, "the unsqueezed layout")
            at = axis + ndim + 1 if axis < 0 else axis
            if at < ndim:
                step = shape[at] * strides[at]
                stride = step if abs(step) <= _INT64_MAX // self._itemsize else strides[at]
            else:
                stride = strides[-1] if ndim else 1
            return _new(
                shape[:at] + (1,) + shape[at:],
                strides[:at] + (stride,) + strides[at:],
                self._itemsize,
                self._offset,
            )
        axes = _as_ints(axis, "axis")
        if not axes:
            return self if type(self) is StridedLayout else _copy(self)
        out_ndim = ndim + len(axes)
        _check_ndim(out_ndim, "the unsqueezed layout")
        new_axes = {_normalize_axis(a, out_ndim, "axis") for a in axes}
        if len(new_axes) != len(axes):
            raise ValueError(f"axis {axes} repeats an axis")
        limit = _INT64_MAX // self._itemsize
        new_shape = [1] * out_ndim
        new_strides = [0] * out_ndim
        following = strides[-1] if ndim else 1  # the stride of new axes after all others
        old = ndim
        for i in range(out_ndim - 1, -1, -1):
            if i in new_axes:
                new_strides[i] = following
            else:
                old -= 1
                e, s = shape[old], strides[old]
                new_shape[i], new_strides[i] = e, s
                following = e * s if abs(e * s) <= limit else s
        return _new(tuple(new_shape), tuple(new_strides), self._itemsize, self._offset)

    def broadcast_to(self, shape):
        """The layout broadcast to ``shape`` (NumPy rules; new and stretched axes get stride 0).

        Examples
        --------
        >>> StridedLayout.dense((3, 1), 4).broadcast_to((2, 3, 5)).strides
        (0, 1, 0)
        """
        volume = _plain_volume(shape) if type(shape) is tuple else None
        if volume is None or len(shape) > MAX_NDIM:  # not plain: the full checks
            if type(shape) is not tuple or not _ONLY_INT.issuperset(map(type, shape)):
                shape = _as_ints(shape, "shape")
            if len(shape) > MAX_NDIM:
                _check_ndim(len(shape), "shape")
            volume = _check_extents(shape, "shape")
        m = len(shape)
        old_shape, old_strides = self._shape, self._strides
        n = len(old_shape)
        if m < n:
            raise ValueError(
                f"cannot broadcast a layout of shape {old_shape} to shape {shape} "
                "with fewer dimensions"
            )
        lead = m - n
        if shape[lead:] == old_shape:
            strides = (0,) * lead + old_strides
        else:
            strides = [0] * m
            for i in range(lead, m):
                e = old_shape[i - lead]
                if e == shape[i]:
                    strides[i] = old_strides[i - lead]
                elif e != 1:
                    raise ValueError(
                        f"cannot broadcast a layout of shape {old_shape} to shape {shape}: "
                        f"extent {e} does not match {shape[i]} at axis {i}"
                    )
            strides = tuple(strides)
        if volume == 0:
            return _new(shape, (0,) * m, self._itemsize, 0)
        if volume > _INT64_MAX:
            raise OverflowError(
                f"broadcasting {self!r} to {shape}: its volume does not fit in int64"
            )
        return _new(shape, strides, self._itemsize, self._offset)

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
        volume = _get_volume(self)
        if type(shape) is not tuple or len(shape) > MAX_NDIM or _plain_volume(shape) != volume:
            # not plain (or a -1, a zero, a mismatch): the full checks, which name the error
            if type(shape) is not tuple or not _ONLY_INT.issuperset(map(type, shape)):
                shape = _as_ints(shape, "shape")
            if len(shape) > MAX_NDIM:
                _check_ndim(len(shape), "shape")
            shape = _infer_extent(shape, volume)
        if volume == 0:
            return _new(shape, (0,) * len(shape), self._itemsize, 0)
        strides = _reshaped_strides(
            self._shape, self._strides, shape, _INT64_MAX // self._itemsize
        )
        if strides is None:
            raise ValueError(
                f"cannot reshape {self!r} to shape {shape}: the strides are "
                "incompatible (a copy would be needed)"
            )
        if strides is _BEYOND_INT64:
            raise OverflowError(
                f"reshaping {self!r} to shape {shape}: its byte strides do not fit in int64"
            )
        return _new(shape, strides, self._itemsize, self._offset)

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
        n = len(self._shape)
        if mask is not None:
            mask = _as_index(mask, "mask")
            if not 0 <= mask < 2**64:
                raise OverflowError(f"mask = {mask} does not fit in uint64")
        elif type(start_axis) is type(end_axis) is int and start_axis == 0 and end_axis == -1:
            mask = -1
        else:
            start = _normalize_axis(start_axis, n, "start_axis")
            end = _normalize_axis(end_axis, n, "end_axis")
            mask = ((1 << (end + 1)) - (1 << (start + 1))) if end > start else 0
        shape, strides, _ = _merged(self._shape, self._strides, mask)
        return _new(shape, strides, self._itemsize, self._offset)

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
        new_itemsize = _check_itemsize(itemsize)
        data_ptr = _as_index(data_ptr, "data_ptr")
        shape = self._shape
        n = len(shape)
        old = self._itemsize
        if new_itemsize == old:
            if n:  # nothing to repack on a 0-d layout, but the axis must still be valid
                _normalize_axis(axis, n, "axis")
            else:
                _as_index(axis, "axis")
            return self if type(self) is StridedLayout else _copy(self)
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
        new_shape = list(shape)
        new_strides = list(self._strides)
        offset = self._offset
        empty = 0 in shape
        if not empty:
            if shape[ax] != 1 and new_strides[ax] != 1:
                raise self._repack_error(new_itemsize, ax, f"its stride there is {new_strides[ax]}, not 1")
            new_strides[ax] = 1  # an extent-1 axis may have had any stride
        if new_itemsize > old:
            k = new_itemsize // old
            if shape[ax] % k:
                raise self._repack_error(
                    new_itemsize, ax, f"the extent {shape[ax]} there is not divisible by {k}"
                )
            new_shape[ax] = shape[ax] // k
            if not empty:
                if offset % k:
                    raise self._repack_error(
                        new_itemsize, ax, f"the slice offset {offset} is not divisible by {k}"
                    )
                offset //= k
                for i, (e, s) in enumerate(zip(shape, new_strides)):
                    if i != ax:
                        if s % k and e != 1:
                            raise self._repack_error(
                                new_itemsize, ax, f"the stride of axis {i} is not divisible by {k}"
                            )
                        new_strides[i] = s // k  # extent-1 axes: any stride will do
        else:
            k = old // new_itemsize
            new_shape[ax] = shape[ax] * k
            # byte strides and byte offsets keep their values; only the count can grow
            if new_shape[ax] > _INT64_MAX or _get_volume(self) * k > _INT64_MAX:
                raise OverflowError(
                    f"repacking {self!r} to itemsize {new_itemsize}: its volume does not "
                    "fit in int64"
                )
            if not empty:
                offset *= k
                for i in range(n):
                    if i != ax:
                        new_strides[i] *= k
        if not keep_dim and new_shape[ax] == 1:
            del new_shape[ax], new_strides[ax]
        if empty:
            return _new(tuple(new_shape), (0,) * len(new_shape), new_itemsize, 0)
        return _new(tuple(new_shape), tuple(new_strides), new_itemsize, offset)

    def _repack_error(self, new_itemsize, axis, reason):
        return ValueError(
            f"cannot repack {self!r} to itemsize {new_itemsize} along axis {axis}: {reason}"
        )

    def max_compatible_itemsize(self, max_itemsize=16, data_ptr=0, axis=-1):
        """Largest divisor of ``max_itemsize`` (a multiple of this itemsize) for ``repacked``.

        ``self.repacked(self.max_compatible_itemsize(m, p, a), p, a)`` always succeeds;
        the result is ``itemsize`` itself when nothing larger fits. As in the reference,
        sizes that do not divide ``max_itemsize`` are not considered: ``dense((5, 6), 4)``
        gives 8 for ``max_itemsize=16`` although ``repacked(12)`` would work. Results stay
        below the itemsize limit 2**31: where the common divisor is larger (a
        ``max_itemsize`` of 2**31 or more), it is divided by its smallest prime factors
        until it fits, which gives the largest size for powers of two.

        Examples
        --------
        >>> StridedLayout.dense((5, 6), 2).max_compatible_itemsize(16)
        4
        >>> StridedLayout.dense((5, 6), 2).max_compatible_itemsize(16, data_ptr=2)
        2
        >>> StridedLayout.dense((4096,), 1).max_compatible_itemsize(2**31)
        4096
        """
        max_itemsize = _as_index(max_itemsize, "max_itemsize")
        if max_itemsize <= 0:
            raise ValueError(f"max_itemsize must be positive, got {max_itemsize}")
        data_ptr = _as_index(data_ptr, "data_ptr")
        shape, strides = self._shape, self._strides
        ax = _normalize_axis(axis, len(shape), "axis")
        itemsize = self._itemsize
        if max_itemsize < itemsize:
            raise ValueError(
                f"max_itemsize {max_itemsize} is smaller than the itemsize {itemsize}"
            )
        if 0 not in shape and shape[ax] != 1 and strides[ax] != 1:
            return itemsize
        # every byte quantity repacked() divides by the new size (Python ints: exact)
        common = math.gcd(
            max_itemsize,
            data_ptr,
            self._offset * itemsize,
            shape[ax] * itemsize,
            *[s * itemsize for i, (e, s) in enumerate(zip(shape, strides)) if i != ax and e != 1],
        )
        if common % itemsize:
            return itemsize
        if common < _ITEMSIZE_LIMIT:
            return common
        return itemsize * _reduced_below(common // itemsize, (_ITEMSIZE_LIMIT - 1) // itemsize)

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
        shape, strides = self._shape, self._strides
        items = slices if type(slices) is tuple else (slices,)
        n = len(shape)
        new_shape = []
        new_strides = []
        offset = self._offset
        limit = _INT64_MAX // self._itemsize
        empty = False
        axis = 0
        for position, item in enumerate(items):
            if item is None:
                new_shape.append(1)
                new_strides.append(0)  # NumPy's stride for a new axis
                continue
            if item is Ellipsis:
                whole = n - axis - _consumed(items, position + 1)
                if whole < 0:
                    raise _too_many_indices(items, n)
                new_shape += shape[axis : axis + whole]
                new_strides += strides[axis : axis + whole]
                axis += whole
                continue
            if axis == n:
                raise _too_many_indices(items, n)
            e = shape[axis]
            s = strides[axis]
            if type(item) is slice:
                if item.start is None and item.stop is None and item.step is None:
                    new_shape.append(e)  # ":" keeps the axis
                    new_strides.append(s)
                    axis += 1
                    continue
                try:
                    start, stop, step = item.indices(e)
                except Exception as exc:  # bounds that are not integers, or a step of 0
                    raise _slice_error(item, axis) from exc
                if step > 0:
                    length = (stop - start + step - 1) // step if stop > start else 0
                else:
                    length = (start - stop - step - 1) // -step if start > stop else 0
                if length == 0:
                    empty = True
                offset += start * s
                if -limit <= s * step <= limit:
                    s *= step
                elif length > 1:
                    raise OverflowError(
                        f"indexing {self!r} with {_describe(slices)}: the stride of axis "
                        f"{axis} becomes {s * step} elements, beyond int64 in bytes"
                    )  # else extent 1: the stride is never used, keep a fitting one
                new_shape.append(length)
                new_strides.append(s)
            else:
                if type(item) is not int:
                    item = _index_item(item)
                if not -e <= item < e:
                    raise AxisError(
                        f"index {item} is out of bounds for axis {axis} with extent {e}"
                    )
                offset += (item + e if item < 0 else item) * s
            axis += 1
        if axis < n:  # the axes not indexed are kept whole
            new_shape += shape[axis:]
            new_strides += strides[axis:]
        m = len(new_shape)
        if m > MAX_NDIM:
            _check_ndim(m, "the indexed layout")
        if empty or 0 in shape:
            return _new(tuple(new_shape), (0,) * m, self._itemsize, 0)
        return _new(tuple(new_shape), tuple(new_strides), self._itemsize, offset)

    __getitem__ = sliced

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
        value = self._hash
        if value is None:
            strides = _used_strides(self) if 1 in self._shape else self._strides
            value = self._hash = hash((self._shape, strides, self._itemsize, self._offset))
        return value

    def __reduce__(self):
        # unpickling runs the full validation in _rebuild (a pickle can come from anywhere)
        values = (self._shape, self._strides, self._itemsize, self._offset)
        if type(self) is StridedLayout:
            return _rebuild, values
        state = getattr(self, "__dict__", None)
        return _rebuild, (*values, type(self)), state or None

    def __setstate__(self, state):
        """Pickle's BUILD step: only a subclass's own attributes, never a layout's values.

        A layout's values come only from validated constructors (``_rebuild`` for
        pickles), so a crafted pickle cannot set the slots directly.
        """
        if (
            type(self) is StridedLayout
            or not isinstance(state, dict)
            or not hasattr(self, "_shape")
            or any(key in _SLOT_NAMES for key in state)
        ):
            raise TypeError(
                f"cannot set the state of a {type(self).__name__} from a pickle: layouts "
                "are rebuilt through their validating constructor"
            )
        for key, value in state.items():
            setattr(self, key, value)

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


_SLOT_NAMES = frozenset(StridedLayout.__slots__)
# the base class's getters: what layoutkit itself reads, whatever a subclass overrides
_get_volume = StridedLayout.volume.fget
_get_bounds = StridedLayout.offset_bounds.fget
_get_order = StridedLayout.stride_order.fget
_get_is_c = StridedLayout.is_contiguous_c.fget
_get_is_f = StridedLayout.is_contiguous_f.fget
_get_is_any = StridedLayout.is_contiguous_any.fget


def _rebuild(shape, strides, itemsize, slice_offset, cls=StridedLayout):
    """Unpickle a layout, validating every value (pickles can come from anywhere)."""
    if not (isinstance(cls, type) and issubclass(cls, StridedLayout)):
        raise TypeError(f"cannot unpickle a layout as {_describe(cls)}: not a StridedLayout")
    layout = StridedLayout(shape, strides, itemsize)
    offset = _as_index(slice_offset, "slice_offset")
    if offset and 0 not in layout._shape:
        if not -_INT64_MAX <= offset <= _INT64_MAX:
            raise OverflowError(f"slice_offset = {offset} does not fit in int64")
        layout = _validated(
            layout._shape, layout._strides, layout._itemsize, offset, "unpickled layout"
        )
    if cls is not StridedLayout:
        layout = _copy(layout, cls)
    return layout


def _copy(layout, cls=StridedLayout):
    """An instance of ``cls`` with the values of ``layout`` (already valid)."""
    return _new(layout._shape, layout._strides, layout._itemsize, layout._offset, cls)


def _used_strides(layout):
    """The strides with those of extent-1 axes (never used) replaced by 0."""
    return tuple(0 if e == 1 else s for e, s in zip(layout._shape, layout._strides))


def _divided(strides, itemsize):
    """Byte strides as element strides; ValueError for one that is not a multiple."""
    result = []
    for i, s in enumerate(strides):
        q, r = divmod(s, itemsize)
        if r:
            raise ValueError(f"strides[{i}] = {s} bytes is not a multiple of itemsize {itemsize}")
        result.append(q)
    return tuple(result)


def _dense_strides(shape, order, itemsize, name):
    """Dense strides for ``shape`` with axes ``order`` (slowest first), checked to fit.

    A zero volume gives all-zero strides. Otherwise the volume in bytes must fit in int64
    (every stride and offset of a dense layout is below it).
    """
    volume = _check_extents(shape, name)
    ndim = len(shape)
    if volume == 0 or ndim == 0:
        return (0,) * ndim
    if volume > _INT64_MAX // itemsize:
        what = "its volume does" if volume > _INT64_MAX else "its size in bytes does"
        raise OverflowError(f"dense layout of {name} {shape}: {what} not fit in int64")
    if order is _IOTA[ndim]:
        strides = tuple(_accumulate(shape[:0:-1], _mul, initial=1))[::-1]
    elif order is _REVERSED[ndim]:
        strides = tuple(_accumulate(shape[:-1], _mul, initial=1))
    else:
        ordered = [shape[a] for a in order]
        running = list(_accumulate(ordered[:0:-1], _mul, initial=1))
        result = [0] * ndim
        for a, s in zip(reversed(order), running):
            result[a] = s
        strides = tuple(result)
    return strides


def _offset_bounds(shape, strides, offset):
    """``(lowest, highest)`` element offset; ``(0, -1)`` for a zero volume."""
    if 0 in shape:
        return (0, -1)
    low = high = offset
    for e, s in zip(shape, strides):
        if s > 0:
            high += s * (e - 1)
        else:
            low += s * (e - 1)
    return (low, high)


def _is_contiguous(shape, strides, fastest_first):
    """Whether the axes, taken in the order ``fastest_first``, step through the elements one
    by one (extent-1 axes skipped); a zero volume is contiguous."""
    if 0 in shape:
        return True
    expected = 1
    for axis in fastest_first:
        e = shape[axis]
        if e != 1:
            if strides[axis] != expected:
                return False
            expected *= e
    return True


def _is_unique(layout):
    """``is_unique``: the nesting test, then enumeration for small volumes."""
    shape, strides = layout._shape, layout._strides
    if 0 in shape:
        return True
    axes = sorted((abs(s), e) for e, s in zip(shape, strides) if e != 1)
    reach = 0  # the largest offset the faster axes reach (Python ints: no wraparound)
    for s, e in axes:
        if s <= reach:
            break
        reach += s * (e - 1)
    else:
        return True
    if axes[0][0] == 0 or _get_volume(layout) > _EXACT_UNIQUE_LIMIT:
        return False  # a broadcast axis, or too many elements to enumerate
    offsets = [0]
    for s, e in axes:
        offsets = [o + i * s for i in range(e) for o in offsets]
    return len(set(offsets)) == len(offsets)


def _merged(shape, strides, mask):
    """Merge axis ``j`` into axis ``j - 1`` where bit ``j`` of ``mask`` allows and the
    strides do; returns ``(shape, strides, merge_mask)``.

    Extent-1 axes never block a merge; a merged extent must fit in int64 (it always does
    but in a zero-volume layout, whose strides are all 0). A 0-d layout gives ``(1,)``.
    """
    n = len(shape)
    if n == 0:
        return (1,), (1,), 0
    if mask == -1 and 1 in shape and 0 not in shape:
        # every merge allowed and extent-1 axes never block one: merge the others (many
        # dimensions are mostly extent 1); the mask marks every extent-1 axis too
        axes = [j for j, e in enumerate(shape) if e != 1]
        if not axes:
            return (1,), (strides[0],), (1 << n) - 2
        sub_shape, sub_strides, sub_merges = _merged(
            tuple([shape[j] for j in axes]), tuple([strides[j] for j in axes]), -1
        )
        merges = (1 << n) - 2  # axes 1..n-1 merge, but where two kept axes do not
        for k in range(1, len(axes)):
            if not sub_merges >> k & 1:
                merges &= ~(1 << axes[k])
        return sub_shape, sub_strides, merges
    out_shape = []
    out_strides = []
    merges = 0
    group_extent = shape[0]
    group_stride = strides[0]
    for j in range(1, n):
        e = shape[j]
        s = strides[j]
        if (
            mask >> j & 1
            and (group_extent == 1 or e == 1 or group_stride == s * e)
            and group_extent * e <= _INT64_MAX
        ):
            merges |= 1 << j
            if e != 1:
                group_stride = s
            group_extent *= e
        else:
            out_shape.append(group_extent)
            out_strides.append(group_stride)
            group_extent = e
            group_stride = s
    out_shape.append(group_extent)
    out_strides.append(group_stride)
    return tuple(out_shape), tuple(out_strides), merges


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


_BEYOND_INT64 = object()  # _reshaped_strides: a stride the new shape needs does not fit


def _reshaped_strides(shape, strides, new_shape, limit):
    """Strides for viewing a non-empty layout with ``new_shape`` (same volume), or None.

    NumPy's no-copy reshape: extent-1 axes are dropped, the remaining old axes and the new
    axes are matched in groups of equal volume; each old group must be C-contiguous. Within
    a group each new stride is the next one times the next extent; a new extent-1 axis
    whose stride would be beyond ``limit`` (in elements) takes the next stride instead (it
    is never used), any other returns ``_BEYOND_INT64``. New extent-1 axes after every
    group take the last stride.
    """
    innermost = 1  # the common case first: the non-unit axes form one C-contiguous group
    expected = None
    for e, s in zip(reversed(shape), reversed(strides)):
        if e != 1:
            if expected is None:
                innermost = s
            elif s != expected:
                break
            expected = s * e
    else:  # one group: C strides of the new shape, in units of the innermost stride
        result = []
        running = innermost
        for e in reversed(new_shape):
            if -limit <= running <= limit:
                result.append(running)
            elif e == 1:
                result.append(result[-1])
            else:
                return _BEYOND_INT64
            running *= e
        result.reverse()
        return tuple(result)
    old_shape, old_strides = [], []
    for e, s in zip(shape, strides):
        if e != 1:
            old_shape.append(e)
            old_strides.append(s)
    m = len(new_shape)
    k = len(old_shape)
    result = [0] * m
    oi = ni = 0
    while ni < m and oi < k:
        nj, oj = ni + 1, oi + 1
        new_volume = new_shape[ni]
        old_volume = old_shape[oi]
        while new_volume != old_volume:
            if new_volume < old_volume:
                new_volume *= new_shape[nj]
                nj += 1
            else:
                old_volume *= old_shape[oj]
                oj += 1
        for ok in range(oi, oj - 1):
            if old_strides[ok] != old_shape[ok + 1] * old_strides[ok + 1]:
                return None
        running = result[nj - 1] = old_strides[oj - 1]
        for nk in range(nj - 1, ni, -1):
            running *= new_shape[nk]  # Python ints: the true stride, whatever it is
            if -limit <= running <= limit:
                result[nk - 1] = running
            elif new_shape[nk - 1] == 1:
                result[nk - 1] = result[nk]
            else:
                return _BEYOND_INT64
        ni, oi = nj, oj
    last = result[ni - 1] if ni else 1
    for nk in range(ni, m):
        result[nk] = last
    return tuple(result)


def _reduced_below(q, bound):
    """``q`` divided by its smallest prime factors (below 2**16) until it is <= ``bound``.

    A divisor of ``q``, the largest one for a power of two (1 if no small factor is left
    to remove). The rule of ``layoutkit._kernels.reduced_below``.
    """
    p = 2
    while q > bound:
        while p < 65536 and q % p:
            p += 1
        if p >= 65536:
            return 1
        q //= p
    return q


# ------------------------------------------------------------------------- indexing
def _consumed(items, start):
    """How many of ``items[start:]`` index an axis (not ``None``, not ``Ellipsis``)."""
    count = 0
    for item in items[start:]:
        if item is Ellipsis:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if item is not None:
            count += 1
    return count


def _too_many_indices(items, ndim):
    count = sum(1 for item in items if item is not None and item is not Ellipsis)
    return AxisError(f"too many indices: {count} given for a layout of {ndim} dimensions")


def _index_item(item):
    """An integer index item as a plain int; TypeError for anything else."""
    failure = None
    if not isinstance(item, bool) and hasattr(type(item), "__index__"):
        try:
            return _as_index(item, "index")
        except TypeError as exc:  # e.g. a NumPy array of several integers
            failure = exc
    raise TypeError(
        "indices must be integers, slices, None or Ellipsis, got "
        f"{_describe(item)} of type {type(item).__name__}"
    ) from failure


def _slice_error(item, axis):
    """The error for a slice whose bounds are not integers or whose step is 0."""
    for name in ("start", "stop", "step"):
        value = getattr(item, name)
        if value is not None:
            value = _as_index(value, f"slice {name}")  # raises for the first bad bound
            if name == "step" and value == 0:
                return ValueError(f"slice step cannot be zero (axis {axis})")
    return TypeError(f"slice {_describe(item)} (axis {axis}): its bounds must be integers")
