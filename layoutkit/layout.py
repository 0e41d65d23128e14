"""``StridedLayout``: the memory layout of an n-d tensor, immutable and hashable.

A layout is a shape, strides counted in elements, an itemsize in bytes and a slice offset
in elements (the offset of index ``(0, ..., 0)``). The element at index ``idx`` lives at
byte ``(slice_offset + sum(idx[k] * strides[k])) * itemsize`` from the start of the
memory the layout describes.

The layout algebra is implemented once, by the integer kernels of
:mod:`layoutkit._kernels`, which compiled code (``@njit``, ``@cuda.jit``) runs too. This
class checks and normalises arguments in plain Python on tuples (every error names the
argument and its value), then makes one kernel call per operation through the kernel's
compiled entry point: arguments go in as one ``array('q')``, results come back in a
buffer made for that call (no buffer is shared, so layouts work from any thread), and
the kernel checks the result's numbers in the same call. Numba is imported by the first
operation that needs a kernel, not by ``import layoutkit``.

Validation is complete before a layout exists: every number a layout implies (extents,
strides, volume, element offsets, byte strides and byte offsets) fits in int64. The
volume and offset bounds come with every layout; the other derived properties are
computed by one kernel call on first use and kept in the layout's slots.
"""

import _thread
import math
import operator
import reprlib
import struct
from array import array
from itertools import islice

from . import _kernel_codes as C
from ._errors import AxisError

__all__ = ["StridedLayout"]

MAX_NDIM = 64
_INT64_MAX = C.INT64_MAX
_INT64_MIN = C.INT64_MIN
_ITEM_INDEX = C.ITEM_INDEX
_ITEMSIZE_LIMIT = C.ITEMSIZE_LIMIT
_exact_int = int.__index__  # an int subclass's value as a plain int (no overridable hook)
_new_instance = object.__new__
_PUBLISH_LOCK = _thread.allocate_lock()  # _lay's one publication of a layout's buffer
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


def _as_address(value, name):
    """``value`` as an address: an integer (``_as_index``) in ``[0, 2**64)``, else the
    OverflowError cuda.core's ``uintptr_t`` arguments raise, naming it."""
    value = _as_index(value, name)
    if not 0 <= value < 2**64:
        raise OverflowError(f"{name} must be an address in [0, 2**64), got {value}")
    return value


def _as_ints(values, name, scalar_ok=True):
    """A tuple of plain ints from a sequence of integer-likes (or one integer if ``scalar_ok``).

    Other iterables than tuples and lists are read at most ``MAX_NDIM + 1`` entries deep,
    so an endless one cannot hang the call.
    """
    kind = type(values)
    if kind is tuple and _count(map(type, values), int) == len(values):
        return values
    if kind is not tuple and kind is not list:
        expected = "a sequence of integers" + (" or an integer" if scalar_ok else "")
        if isinstance(values, (str, bytes, bytearray, memoryview, dict, set, frozenset)):
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
            values = tuple(islice(entries, MAX_NDIM + 1))
        except Exception as exc:  # a broken iterator: the argument's fault
            raise TypeError(f"{name}: reading {_describe(values)} failed ({exc!r})") from exc
        if len(values) > MAX_NDIM:
            raise ValueError(f"{name} has more than {MAX_NDIM} dimensions")
    return tuple([_as_index(v, f"{name}[{i}]") for i, v in enumerate(values)])


def _check_ndim(ndim, name):
    if ndim > MAX_NDIM:
        raise ValueError(f"{name} has {ndim} dimensions; at most {MAX_NDIM} are supported")


def _outside_int64(what, value):
    """The OverflowError for a stride or offset outside ``[-(2**63 - 1), 2**63 - 1]``.

    Examples
    --------
    >>> print(_outside_int64("strides[0]", -2**63))
    strides[0] = -9223372036854775808 is int64's most negative value, which has no negation in int64; strides and offsets lie in [-(2**63 - 1), 2**63 - 1]
    """
    if value == -_INT64_MAX - 1:
        return OverflowError(
            f"{what} = {value} is int64's most negative value, which has no negation in "
            "int64; strides and offsets lie in [-(2**63 - 1), 2**63 - 1]"
        )
    return OverflowError(f"{what} = {value} does not fit in int64")


def _check_extents(shape, name):
    """Every extent in ``0..INT64_MAX`` (a ValueError or OverflowError naming the first)."""
    if shape and (min(shape) < 0 or max(shape) > _INT64_MAX):
        for i, e in enumerate(shape):
            if e < 0:
                raise _negative_extent(name, shape, i)
            if e > _INT64_MAX:
                raise OverflowError(f"{name}[{i}] = {e} does not fit in int64")


def _negative_extent(name, shape, axis):
    return ValueError(
        f"{name}[{axis}] = {shape[axis]} is negative. Extents must be non-negative (>= 0)"
    )


def _check_itemsize(itemsize, name="itemsize", new=False):
    if type(itemsize) is not int:
        itemsize = _as_index(itemsize, name)
    if not 0 < itemsize < _ITEMSIZE_LIMIT:
        if itemsize <= 0:
            also = ": the new itemsize must be greater than zero" if new else ""
            raise ValueError(f"{name} must be positive, got {itemsize}{also}")
        raise OverflowError(f"{name} = {itemsize} is too large (limit 2**31 - 1)")
    return itemsize


def _normalize_axis(axis, ndim, name):
    if type(axis) is not int:
        axis = _as_index(axis, name)
    if not -ndim <= axis < ndim:
        raise AxisError(
            f"Invalid axis: {name} {axis} is out of bounds for a layout of {ndim} dimensions "
            f"(axis {axis} out of range for {ndim} dimensions)"
        )
    return axis + ndim if axis < 0 else axis


def _normalize_permutation(order, ndim, name):
    """A permutation of ``range(ndim)`` (entries may be negative, NumPy-style)."""
    if type(order) is not tuple or _count(map(type, order), int) != len(order):
        order = _as_ints(order, name, scalar_ok=False)
    if len(order) != ndim:
        raise ValueError(
            f"{name} {_describe(order)} has {len(order)} entries; it must have the same "
            f"length as the number of dimensions ({ndim})"
        )
    if order == _IOTA[ndim] or sorted(order) == _IOTA_LIST[ndim]:
        return order
    axes = tuple([a + ndim if a < 0 else a for a in order])
    if sorted(axes) == _IOTA_LIST[ndim]:
        return axes
    for a in order:  # name the first bad entry
        _normalize_axis(a, ndim, name)
    seen = set()
    repeated = next(a for a in axes if a in seen or seen.add(a))
    raise ValueError(f"{name} {order} repeats an axis: axis {repeated} appears multiple times")


_IOTA = [tuple(range(n)) for n in range(MAX_NDIM + 1)]
_ALL_AXES = [(1 << n) - 1 for n in range(MAX_NDIM + 1)]  # bit a set for every axis a < n
_itemgetter = operator.itemgetter
_IOTA_LIST = [list(range(n)) for n in range(MAX_NDIM + 1)]
_REVERSED = [tuple(range(n - 1, -1, -1)) for n in range(MAX_NDIM + 1)]


def _is_one_integer(value):
    """Whether ``value`` is a single integer-like: it has ``__index__`` and is not iterable
    (a NumPy array of axes has ``__index__`` too, but is a sequence). Bools are not."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        return False
    try:
        iter(value)
    except TypeError:
        return True
    return False


def _parse_stride_order(stride_order, ndim, allow_k):
    """Axes slowest first for ``"C"``, ``"F"`` or a permutation (``None``: ``"C"``)."""
    if stride_order is None:
        return _IOTA[ndim]
    if type(stride_order) is str:
        if stride_order == "C":
            return _IOTA[ndim]
        if stride_order == "F":
            return _REVERSED[ndim]
    if isinstance(stride_order, str) or _is_one_integer(stride_order):
        options = "'K', 'C', 'F'" if allow_k else "'C', 'F'"
        raise ValueError(
            f"stride_order must be {options}, or a permutation of the axes (slowest "
            f"first), got {_describe(stride_order)}"
        )
    return _normalize_permutation(stride_order, ndim, "stride_order")


# ------------------------------------------------------------------------- kernel calls
class _Kernel:
    """A layout kernel of :mod:`layoutkit._kernels`, called through its entry point.

    The first call imports the kernels (and Numba), loads the kernel for these argument
    types from Numba's cache or compiles it, and replaces the module global that holds
    this object by the compiled entry point: later calls go straight to compiled code,
    without the dispatcher's type resolution. Callers pass the same types every time
    (``array('q')`` buffers and ints).
    """

    __slots__ = ("_name", "_alias")

    def __init__(self, name):
        self._name = name
        self._alias = "_" + name.upper()

    def __call__(self, *args):
        from . import _kernels

        dispatcher = getattr(_kernels, self._name)
        entry = _cached_entry_point(dispatcher, args)
        if entry is None:  # not cached yet: the dispatcher compiles (and caches) it
            from ._kernel_calls import entry_point

            result = dispatcher(*args)
            entry = entry_point(dispatcher, args)  # the Python function under NUMBA_DISABLE_JIT
        else:
            result = entry(*args)
        globals()[self._alias] = entry
        return result


def _cached_entry_point(dispatcher, args):
    """The entry point of ``dispatcher`` for ``args`` from Numba's on-disk cache, or None.

    The dispatcher's own path to its cache first initialises Numba's whole CPU target
    (every typing and lowering registry, about 0.15 s: a third of a cold start); a
    compiled kernel needs only the code generator and the runtime. This uses Numba's
    internals (the dispatcher's cache, the CPU target context) behind a fallback:
    anything unexpected, or a kernel not cached yet, returns None and the dispatcher
    compiles as usual.
    """
    try:
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.registry import cpu_target
        from numba.core.runtime import rtsys

        signature = tuple(map(dispatcher.typeof_pyval, args))
        with global_compiler_lock:
            context = cpu_target.target_context
            rtsys.initialize(context)
            result = dispatcher._cache._load_overload(signature, context)
        return None if result is None else result.entry_point
    except Exception:  # another Numba, no cache, NUMBA_DISABLE_JIT: the dispatcher's path
        return None


_CHECK = _Kernel("check")
_ANALYZE = _Kernel("analyze")
_DENSE_LAYOUT = _Kernel("dense_layout")
_DENSE_LIKE = _Kernel("dense_like")
_RESHAPE_LAYOUT = _Kernel("reshape_layout")
_BROADCAST_LAYOUT = _Kernel("broadcast_layout")
_FLATTEN = _Kernel("flatten")
_UNSQUEEZE = _Kernel("unsqueeze")
_APPLY_INDEX = _Kernel("apply_index")
_REPACK_LAYOUT = _Kernel("repack_layout")
_MAX_COMPATIBLE_ITEMSIZE = _Kernel("max_compatible_itemsize")
_OFFSET_OF = _Kernel("offset_of")
_BYTE_STRIDES = _Kernel("byte_strides")
_OFFSETS_ARE_DISTINCT = _Kernel("offsets_are_distinct")
_UNIQUE_BY_SEARCH = _Kernel("unique_by_search")

# Kernel output buffers are slices of this template: a slice is a new array, so no two
# calls (or threads) share a buffer, and the template itself is never written.
_ZEROS = array("q", bytes(8 * 3 * MAX_NDIM))


class _ByCount(dict):
    """``self[k]`` is the method ``name`` of ``struct.Struct(f"{k}q")``, made on first use."""

    def __init__(self, name):
        super().__init__()
        self.name = name

    def __missing__(self, count):
        method = self[count] = getattr(struct.Struct(f"{count}q"), self.name)
        return method


# _UNPACK[k](buffer, offset=0): k int64 values from a buffer as a tuple of ints
_UNPACK = _ByCount("unpack_from")
# _PACK[k](*values): k ints as int64 bytes. Beyond 8 values a buffer is made as
# _new_buffer() (an empty array('q')) extended by frombytes(_PACK[k](...)), a copy of
# bytes: array('q', values) converts value by value (through PyArg_Parse), which costs
# 2-3x more at 32-128 values; up to 8 the two measure the same in whole operations
_PACK = _ByCount("pack")
_new_buffer = array("q").__copy__
_count = operator.countOf  # _count(map(type, values), int) == len(values): plain ints
_UINT64 = 2**64
_DENSE_KINDS = {"C": 0, "F": 1}  # dense_layout's kinds (2: an axis order)
_LIKE_KINDS = {"C": 0, "F": 1, "K": 3}  # dense_like's kinds


def _int64s(values, copies=1):
    """``values`` (a tuple or list of ints) as an ``array('q')``, ``copies`` times over;
    OverflowError for a value beyond int64."""
    if len(values) <= 8:
        return array("q", values) * copies
    buffer = _new_buffer()
    try:
        packed = _PACK[len(values)](*values)
    except struct.error:
        raise OverflowError("a value does not fit in int64") from None
    buffer.frombytes(packed * copies if copies != 1 else packed)
    return buffer


def _signed64(mask):
    """A uint64 bit mask as the int64 with the same bits (the kernels' mask argument)."""
    return mask - _UINT64 if mask > _INT64_MAX else mask


def _overflow_reason(status, axis):
    if status == C.OVERFLOW_VOLUME:
        return "its volume does not fit in int64"
    if status == C.OVERFLOW_BYTES and axis >= 0:
        return "its byte strides do not fit in int64"
    return "its byte offsets do not fit in int64"


# ------------------------------------------------------------------------- construction
def _new(cls, shape, strides, itemsize, offset, volume, bounds, packed=None, implicit=False):
    """A layout from valid values (the one place that fills the slots).

    ``strides`` are always explicit (compiled code, kernels, equality and every reader
    inside layoutkit use them); ``implicit`` marks a layout built with ``strides=None``,
    whose public ``strides`` and ``strides_in_bytes`` are None (implicit C, as in
    cuda.core). Only constructors set it; every transform returns explicit strides.

    ``volume`` and ``bounds`` come with every layout (from the kernel that checked it);
    the other derived values are computed on first use. ``_order``, ``_strides_in_bytes``
    and ``_hash`` start as None (a None test: reading a slot that was never set would
    raise, and catching that costs ten times more); the flags and the mask are left
    unset: ``_analyze`` fills them all before ``_order``, so ``_order is None`` is the
    test for every one of them (and a layout costs five slot stores less to make).
    ``packed`` is ``shape + strides`` as an ``array('q')`` if one was made.
    """
    self = _new_instance(cls)
    if cls is not StridedLayout:  # past a subclass's __setattr__ or slot-shadowing properties
        for slot, value in zip(_FILLED_SLOTS, (
                shape, strides, None if implicit else strides, itemsize, offset, volume,
                bounds, packed, None, None, None)):  # fmt: skip
            slot.__set__(self, value)
        return self
    self._shape = shape
    self._strides = strides
    self._given_strides = None if implicit else strides
    self._itemsize = itemsize
    self._offset = offset
    self._volume = volume
    self._bounds = bounds
    self._packed = packed
    self._order = self._strides_in_bytes = self._hash = None
    return self


def _checked_layout(cls, shape, strides, itemsize, offset, packed, divide, what):
    """A layout of int tuples of the right lengths, packed (shape | strides) in ``packed``.

    The check kernel decides whether every number fits (dividing byte strides by the
    itemsize first when ``divide`` is 1); an OverflowError names ``what`` (``None``: the
    constructor call; a string, or a callable that makes one).
    """
    n = len(shape)
    status, volume, low, high = _CHECK(packed, n, itemsize, offset, divide)
    if status:
        if status == C.NEGATIVE_EXTENT:
            raise _negative_extent("shape", shape, volume)
        if status == C.NOT_A_MULTIPLE:
            raise ValueError(
                f"strides[{volume}] = {strides[volume]} bytes is not a multiple of itemsize "
                f"{itemsize}"
            )
        if what is None:
            what = f"StridedLayout(shape={shape}, strides={strides}, itemsize={itemsize})"
        elif callable(what):
            what = what()
        raise OverflowError(f"{what}: {_overflow_reason(status, volume)}")
    if divide:
        strides = _UNPACK[n](packed, 8 * n)
    return _new(cls, shape, strides, itemsize, offset, volume, (low, high), packed)


def _dense_failure(shape, status, axis):
    """The exception for a dense layout of ``shape`` that ``dense_layout`` refused."""
    if status == C.NEGATIVE_EXTENT:
        return _negative_extent("shape", shape, axis)
    what = "volume does" if status == C.OVERFLOW_VOLUME else "size in bytes does"
    return OverflowError(f"dense layout of shape {shape}: its {what} not fit in int64")


def _dense(cls, shape, itemsize, kind, order, implicit=False):
    """The dense layout of ``shape`` (plain ints within int64) of class ``cls``, built
    from its values: C order (``kind`` 0), Fortran order (1) or ``order`` (2);
    ``implicit``: built from ``strides=None`` (see ``_new``)."""
    n = len(shape)
    packed = _int64s(shape, 2) if kind != 2 else _int64s(shape + shape + order)
    status, volume, low, high = _DENSE_LAYOUT(packed, n, itemsize, kind)
    if status:
        raise _dense_failure(shape, status, volume)
    return _new(
        cls, shape, _UNPACK[n](packed, 8 * n), itemsize, 0, volume, (low, high), packed,
        implicit,
    )


def _dense_like(cls, other, stride_order):
    """``cls.dense_like(other, stride_order)`` for a layout ``other`` (``to_dense`` calls
    it directly: one Python call less).

    ``other``'s values are read from its slots: a subclass may shadow ``_shape`` or
    ``_packed``, and the kernel reads ``2 * len(shape)`` int64s from the packed array.
    """
    original = other
    if type(other) is not StridedLayout:
        other = plain_layout(other)  # keeps implicit C strides
    shape = other._shape
    n = len(shape)
    kind = _LIKE_KINDS.get(stride_order) if type(stride_order) is str else None
    if kind is None:
        if stride_order is None:
            kind = 3
        else:
            order = _parse_stride_order(stride_order, n, allow_k=True)
            kind = 0 if order is _IOTA[n] else 1 if order is _REVERSED[n] else 2
    # out: shape | strides | the axis order (given, or written by the kernel for "K")
    out = _int64s(order, 3) if kind == 2 else _ZEROS[: 3 * n]
    itemsize = other._itemsize
    status, volume, low, high, same = _DENSE_LIKE(
        other._packed or other._lay(), n, itemsize, kind, out
    )
    if status:
        raise _dense_failure(shape, status, volume)
    # an order given as a sequence never gives other (even the identity, or () for
    # 0-d, which parse as "C"), as in cuda.core: the result has explicit strides
    given = stride_order is not None and type(stride_order) is not str
    if same and not given and not other._offset:
        if type(original) is cls:
            return original
        strides, out = other._strides, other._packed
        implicit = other._given_strides is None
    else:
        strides = _UNPACK[n](out, 8 * n)
        implicit = False
    if cls is not StridedLayout:
        return cls(shape, None if implicit else strides, itemsize)
    return _new(
        StridedLayout, shape, strides, itemsize, 0, volume, (low, high), out, implicit
    )


def _constructed(cls, shape, strides, itemsize, divide_strides):
    """The constructor's full checks: any argument types, every error named."""
    if type(shape) is not tuple or _count(map(type, shape), int) != len(shape):
        shape = _as_ints(shape, "shape")
    ndim = len(shape)
    if ndim > MAX_NDIM:
        _check_ndim(ndim, "shape")
    _check_extents(shape, "shape")
    if type(itemsize) is not int or not 0 < itemsize < _ITEMSIZE_LIMIT:
        itemsize = _check_itemsize(itemsize)
    if strides is None:
        return _dense(cls, shape, itemsize, 0, None, implicit=True)
    if type(strides) is not tuple or _count(map(type, strides), int) != len(strides):
        strides = _as_ints(strides, "strides")
    if len(strides) != ndim:
        raise ValueError(
            f"strides {_describe(strides)} has {len(strides)} entries but shape "
            f"{shape} has {ndim}"
        )
    if strides and (min(strides) < -_INT64_MAX or max(strides) > _INT64_MAX):
        for i, s in enumerate(strides):
            if not -_INT64_MAX <= s <= _INT64_MAX:
                raise _outside_int64(f"strides[{i}]", s)
    packed = _int64s(shape + strides)
    return _checked_layout(
        cls, shape, strides, itemsize, 0, packed, 1 if divide_strides else 0, None
    )


class StridedLayout:
    """The memory layout of an n-d tensor: shape, strides (in elements), itemsize, offset.

    Parameters
    ----------
    shape : sequence of int
        Extents, each >= 0; at most 64 dimensions.
    strides : sequence of int or None
        Step between neighbours along each axis, in elements (in bytes when
        ``divide_strides`` is true). May be negative or 0. ``None`` means C order
        (implicit C: the ``strides`` property then stays ``None``, as in cuda.core).
    itemsize : int
        Bytes per element, 1 <= itemsize < 2**31.
    divide_strides : bool
        Whether ``strides`` are in bytes (each must be a multiple of ``itemsize``).

    Notes
    -----
    Layouts are immutable, hashable and picklable, and equal when they map every index
    to the same offset with the same itemsize. Every number a layout implies (volume,
    offsets, byte strides and byte offsets) is checked to fit in int64 when the layout is
    built. A zero-volume layout addresses no memory: it keeps the strides it is given
    (they must still fit in int64 as bytes), all zero-volume layouts of one shape and
    itemsize are equal, and ``dense``, ``dense_like`` and ``to_dense`` give them all-zero
    strides.

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
    StridedLayout(shape=(2, 2), strides=(3, -2), itemsize=4, _slice_offset=2)
    >>> StridedLayout((4, 1, 6), (6, 100, 1), 4).flattened().shape
    (24,)
    >>> layout.offset_of((1, -1))
    5
    >>> StridedLayout((0, 3), (3, 1), 8) == StridedLayout.dense((0, 3), 8)  # no elements
    True
    """

    __slots__ = (
        # the layout (read by compiled code: see layoutkit._numba_layout)
        "_shape", "_strides", "_itemsize", "_offset",
        # the public strides: None for implicit C (strides=None), else _strides
        "_given_strides",
        # set by every constructor: the kernel that checked the layout computed them
        "_volume", "_bounds",
        # an array('q') starting with shape + strides (see _lay)
        "_packed",
        # derived values, each filled on first use
        "_order", "_is_c", "_is_f", "_is_any", "_unique", "_mask", "_strides_in_bytes",
        "_hash",
        "__weakref__",
    )

    def __new__(cls, shape, strides, itemsize, divide_strides=False):
        # the constructor is __new__ (as for tuple): no instance exists before its values
        # are valid, and pickle's NEWOBJ cannot make one without them
        if type(shape) is tuple and type(itemsize) is int and 0 < itemsize < _ITEMSIZE_LIMIT:
            # plain tuples of ints: one kernel call (anything else, or anything the kernel
            # refuses, takes the full checks, which name what is wrong)
            n = len(shape)
            if type(strides) is tuple and len(strides) == n <= MAX_NDIM:
                values = shape + strides
                if _count(map(type, values), int) == n + n:
                    try:
                        packed = array("q", values) if n <= 4 else _int64s(values)
                    except OverflowError:  # a value beyond int64
                        pass
                    else:
                        divide = 1 if divide_strides else 0
                        status, volume, low, high = _CHECK(packed, n, itemsize, 0, divide)
                        if not status:
                            if divide:
                                strides = _UNPACK[n](packed, 8 * n)
                            return _new(
                                cls, shape, strides, itemsize, 0, volume, (low, high), packed
                            )
            elif strides is None and n <= MAX_NDIM and _count(map(type, shape), int) == n:
                packed = _new_buffer()
                try:
                    packed.frombytes(_PACK[n](*shape) * 2)
                except struct.error:  # an extent beyond int64
                    pass
                else:
                    status, volume, low, high = _DENSE_LAYOUT(packed, n, itemsize, 0)
                    if not status:
                        return _new(
                            cls, shape, _UNPACK[n](packed, 8 * n), itemsize, 0, volume,
                            (low, high), packed, True,
                        )
        return _constructed(cls, shape, strides, itemsize, divide_strides)

    @classmethod
    def _trusted(cls, shape, strides, itemsize, slice_offset=0):
        """A layout from tuples of ints of the right lengths (callers inside layoutkit).

        The int64 checks still run: an OverflowError if a number does not fit.
        """
        return StridedLayout._checked(shape, strides, itemsize, slice_offset, "layout")

    @classmethod
    def _checked(cls, shape, strides, itemsize, slice_offset, what):
        """Like ``_trusted``; the OverflowError names ``what`` (a string or makes one)."""
        if type(itemsize) is not int or not 0 < itemsize < _ITEMSIZE_LIMIT:
            itemsize = _check_itemsize(itemsize)
        if not -_INT64_MAX <= slice_offset <= _INT64_MAX:
            raise _outside_int64("slice_offset", slice_offset)
        try:
            packed = _int64s(shape + strides)
        except OverflowError:  # name the value beyond int64
            _check_extents(shape, "shape")
            for i, s in enumerate(strides):
                if not -_INT64_MAX <= s <= _INT64_MAX:
                    raise _outside_int64(f"strides[{i}]", s) from None
            raise
        return _checked_layout(
            StridedLayout, shape, strides, itemsize, slice_offset, packed, 0, what
        )

    def _lay(self):
        """An int64 ``array('q')`` starting with ``shape + strides`` (for kernels and
        exports; it is never written once the layout exists).

        Published once: exports keep a pointer into it (a DLPack header's shape and
        strides) for as long as the layout lives, so a second one made by another thread
        at the same time must not replace (and free) the first.
        """
        packed = self._packed
        if packed is None:
            made = _int64s(self._shape + self._strides)
            with _PUBLISH_LOCK:
                packed = self._packed
                if packed is None:
                    packed = self._packed = made
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
        if (
            type(shape) is tuple
            and type(itemsize) is int
            and 0 < itemsize < _ITEMSIZE_LIMIT
            and len(shape) <= MAX_NDIM
            and _count(map(type, shape), int) == len(shape)
        ):  # plain arguments: straight to the kernel (anything else: the full checks)
            n = len(shape)
            if type(stride_order) is str:
                kind = _DENSE_KINDS.get(stride_order)
            elif stride_order is None:
                kind = 0
            elif (
                type(stride_order) is tuple
                and len(stride_order) == n
                and _count(map(type, stride_order), int) == n
                and sorted(stride_order) == _IOTA_LIST[n]
            ):
                kind = 2
            else:
                kind = None
            if kind is not None:
                packed = _new_buffer()
                try:
                    if kind == 2:
                        packed.frombytes(_PACK[3 * n](*shape, *shape, *stride_order))
                    else:
                        packed.frombytes(_PACK[n](*shape) * 2)
                except struct.error:  # an extent beyond int64: named below
                    packed = None
                if packed is not None:
                    status, volume, low, high = _DENSE_LAYOUT(packed, n, itemsize, kind)
                    if status:
                        raise _dense_failure(shape, status, volume)
                    strides = _UNPACK[n](packed, 8 * n)
                    if cls is not StridedLayout:
                        return cls(shape, strides, itemsize)
                    return _new(
                        StridedLayout, shape, strides, itemsize, 0, volume, (low, high),
                        packed,
                    )
        if type(shape) is not tuple or _count(map(type, shape), int) != len(shape):
            shape = _as_ints(shape, "shape")
        ndim = len(shape)
        if ndim > MAX_NDIM:
            _check_ndim(ndim, "shape")
        if type(itemsize) is not int or not 0 < itemsize < _ITEMSIZE_LIMIT:
            itemsize = _check_itemsize(itemsize)
        order = _parse_stride_order(stride_order, ndim, allow_k=False)
        _check_extents(shape, "shape")
        kind = 0 if order is _IOTA[ndim] else 1 if order is _REVERSED[ndim] else 2
        layout = _dense(StridedLayout, shape, itemsize, kind, order)
        if cls is not StridedLayout:
            return cls(shape, layout._strides, itemsize)
        return layout

    @classmethod
    def dense_like(cls, other, stride_order="K"):
        """A dense layout with the shape and itemsize of ``other``.

        ``stride_order="K"`` (or ``None``) keeps ``other``'s stride order; ``"C"``,
        ``"F"`` or a permutation choose another. Returns ``other`` itself when it is
        already dense in the requested order (and of class ``cls``); a zero-volume layout
        is dense only with all-zero strides (it does not pass other strides on).

        Examples
        --------
        >>> sliced = StridedLayout.dense((4, 6), 4, "F")[::2, 1:]
        >>> StridedLayout.dense_like(sliced).strides
        (1, 2)
        >>> StridedLayout.dense_like(StridedLayout((3, 0), (5, 2), 4)).strides
        (0, 0)
        """
        if not issubclass(type(other), StridedLayout):  # not isinstance: __class__ may lie
            raise TypeError(f"other must be a StridedLayout, got {type(other).__name__}")
        return _dense_like(cls, other, stride_order)

    def to_dense(self, stride_order="K"):
        """``StridedLayout.dense_like(self, stride_order)``.

        Examples
        --------
        >>> StridedLayout.dense((3, 4), 2)[:, ::-1].to_dense().strides
        (4, 1)
        >>> StridedLayout.dense((3, 4), 2).to_dense("F").strides
        (1, 3)
        """
        return _dense_like(StridedLayout, self, stride_order)

    # ---------------------------------------------------------------- stored properties
    @property
    def ndim(self):
        """Number of dimensions."""
        return len(self._shape)

    # stored values, read through C-level attrgetters (read-only: no setter)
    shape = property(operator.attrgetter("_shape"), doc="Extents, a tuple of int.")
    strides = property(
        operator.attrgetter("_given_strides"),
        doc="""Strides in elements, a tuple of int, or ``None`` for implicit C order.

        ``None`` (as in cuda.core) only for a layout built with ``strides=None`` and for
        the calls that return such a layout itself (``dense_like`` / ``to_dense`` of a
        layout already dense in that order, ``repacked`` to the same itemsize,
        ``unsqueezed(())``); every other operation, and every layout returned from
        compiled code, has explicit strides. A 0-d layout built with ``()`` keeps ``()``.
        Implicit C equals (and hashes as) the same explicit C strides.

        Examples
        --------
        >>> implicit = StridedLayout((2, 3), None, 4)
        >>> implicit.strides is None, implicit.permuted((0, 1)).strides
        (True, (3, 1))
        >>> implicit == StridedLayout((2, 3), (3, 1), 4)
        True
        """,
    )
    itemsize = property(operator.attrgetter("_itemsize"), doc="Bytes per element.")
    slice_offset = property(
        operator.attrgetter("_offset"),
        doc="Element offset of index ``(0, ..., 0)`` (made non-zero by slicing or repacking).",
    )
    volume = property(
        operator.attrgetter("_volume"),
        doc="Number of elements (the product of the extents; 1 for 0-d).",
    )
    offset_bounds = property(
        operator.attrgetter("_bounds"),
        doc="""``(min_offset, max_offset)`` in elements, slice offset included; ``(0, -1)``
        if empty.

        Examples
        --------
        >>> StridedLayout((3, 4), (-4, 1), 2).offset_bounds
        (-8, 3)
        """,
    )

    @property
    def strides_in_bytes(self):
        """Strides in bytes (``None`` when ``strides`` is ``None``: implicit C)."""
        if self._given_strides is None:
            return None
        return self._byte_strides()

    def _byte_strides(self):
        """Strides in bytes, a tuple of int (explicit also for implicit C)."""
        value = self._strides_in_bytes
        if value is None:
            n = len(self._shape)
            out = _ZEROS[:n]
            _BYTE_STRIDES(self._packed or self._lay(), n, self._itemsize, out)
            value = self._strides_in_bytes = _UNPACK[n](out)
        return value

    @property
    def slice_offset_in_bytes(self):
        """The slice offset in bytes."""
        return self._offset * self._itemsize

    @property
    def min_offset(self):
        """Smallest element offset of any index (see ``offset_bounds``)."""
        return self._bounds[0]

    @property
    def max_offset(self):
        """Largest element offset of any index (see ``offset_bounds``)."""
        return self._bounds[1]

    # ---------------------------------------------------------------- derived properties
    @property
    def is_contiguous_c(self):
        """Whether the elements are contiguous in C order (extent-1 axes may have any stride)."""
        if self._order is None:
            _analyze(self)
        return self._is_c

    @property
    def is_contiguous_f(self):
        """Whether the elements are contiguous in Fortran order."""
        if self._order is None:
            _analyze(self)
        return self._is_f

    @property
    def is_contiguous_any(self):
        """Whether the elements are contiguous in some axis order (see ``stride_order``)."""
        if self._order is None:
            _analyze(self)
        return self._is_any

    @property
    def is_dense(self):
        """Contiguous in some axis order, starting at offset 0."""
        if self._offset:
            return False
        if self._order is None:
            _analyze(self)
        return self._is_any

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
            order = _analyze(self)
        return order

    @property
    def is_unique(self):
        """Whether every index has its own offset.

        Never True for a layout that maps two indices to one offset. Exact when the
        strides nest once sorted (each axis steps over everything the faster axes reach:
        true of every layout built from a dense one by this library's transforms), else
        settled by a search for two indices that meet (``_kernels.unique_by_search``, the
        same answer compiled code gives), exact at any volume; only where that search
        gives up (very many partial sums that cancel) it enumerates volumes up to 4096 and
        is conservative beyond (may be False for a unique layout).

        Examples
        --------
        >>> StridedLayout((2, 3), (3, 2), 1).is_unique  # interleaved, yet unique
        True
        >>> StridedLayout.dense((3,), 4).broadcast_to((2, 3)).is_unique
        False
        >>> StridedLayout((2, 3, 2), (1, -2**62, 2**62 + 1), 1).is_unique  # (0,1,1) ~ (1,0,0)
        False
        """
        if self._order is None:
            _analyze(self)
        value = self._unique
        if value is None:  # the nesting test failed: search (or enumerate) exactly
            value = self._unique = _offsets_are_distinct(self)
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
        low, high = self._bounds
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
        if self._order is None:
            _analyze(self)
        return self._mask

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
        n = len(shape)
        if type(index) is not tuple or _count(map(type, index), int) != len(index):
            index = _as_ints(index, "index", scalar_ok=False)
        if len(index) != n:
            raise AxisError(
                f"index {_describe(index)} has {len(index)} entries; the layout has "
                f"{n} dimensions"
            )
        try:
            packed = _int64s(index)
        except OverflowError:  # an entry beyond int64: out of range for every extent
            status, value = C.OUT_OF_RANGE, next(
                axis for axis, i in enumerate(index) if not -_INT64_MAX <= i <= _INT64_MAX
            )
        else:
            status, value = _OFFSET_OF(
                self._packed or self._lay(), n, self._offset, packed
            )
        if status:
            raise AxisError(
                f"index {index[value]} is out of bounds for axis {value} with extent "
                f"{shape[value]}"
            )
        return value

    # ---------------------------------------------------------------- transforms
    def permuted(self, axis_order):
        """The layout with its axes reordered: axis ``i`` of the result is ``axis_order[i]``.

        Examples
        --------
        >>> StridedLayout.dense((2, 3, 4), 4).permuted((2, 0, 1)).shape
        (4, 2, 3)
        """
        if type(self) is not StridedLayout:  # a subclass may shadow the slots read here
            self = plain_layout(self)
        shape, strides = self._shape, self._strides
        ndim = len(shape)
        order = axis_order
        if type(order) is tuple and len(order) == ndim and 1 < ndim <= 8:
            # few axes: one loop checks them (a bit per axis seen: ndim entries that set
            # ndim bits are a permutation), one itemgetter takes them
            seen = 0
            for a in order:
                if type(a) is not int or not 0 <= a < ndim:
                    break
                seen |= 1 << a
            else:
                if seen == _ALL_AXES[ndim]:
                    take = _itemgetter(*order)
                    return _new(
                        StridedLayout, take(shape), take(strides), self._itemsize,
                        self._offset, self._volume, self._bounds,
                    )
        if (
            type(order) is not tuple
            or len(order) != ndim
            or _count(map(type, order), int) != len(order)
            or sorted(order) != _IOTA_LIST[ndim]
        ):
            order = _normalize_permutation(axis_order, ndim, "axis_order")
        if ndim > 1:
            take = operator.itemgetter(*order)
            shape, strides = take(shape), take(strides)
        return _new(
            StridedLayout, shape, strides, self._itemsize, self._offset, self._volume,
            self._bounds,
        )

    def squeezed(self):
        """The layout without its extent-1 axes.

        Examples
        --------
        >>> StridedLayout.dense((1, 3, 1, 2), 4).squeezed().shape
        (3, 2)
        """
        if type(self) is not StridedLayout:  # a subclass may shadow the slots read here
            self = plain_layout(self)
        shape = self._shape
        strides = self._strides
        if 1 in shape:
            new_shape, new_strides = [], []
            for e, s in zip(shape, strides):
                if e != 1:
                    new_shape.append(e)
                    new_strides.append(s)
            shape, strides = tuple(new_shape), tuple(new_strides)
        return _new(
            StridedLayout, shape, strides, self._itemsize, self._offset, self._volume,
            self._bounds,
        )

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
        if type(self) is not StridedLayout:  # a subclass may shadow the slots read here
            self = plain_layout(self)
        n = len(self._shape)
        if type(axis) is int and -n - 1 <= axis <= n:
            if n == MAX_NDIM:
                _check_ndim(n + 1, f"axis {axis}: the unsqueezed layout")
            m = n + 1
            new_axes = 1 << (axis + m if axis < 0 else axis)
        else:
            axes = _as_ints(axis, "axis")
            if not axes:
                return self  # plain already (a subclass's checked values, above)
            m = n + len(axes)
            _check_ndim(m, f"axis {_describe(axes)}: the unsqueezed layout")
            new_axes = 0
            for a in axes:
                bit = 1 << _normalize_axis(a, m, "axis")
                if new_axes & bit:
                    raise ValueError(
                        f"axis {axes} repeats an axis: axis {a} appears multiple times"
                    )
                new_axes |= bit
        out = _ZEROS[: 2 * m]
        if new_axes > _INT64_MAX:  # bit 63: the kernel's int64 mask is negative
            new_axes -= _UINT64
        _UNSQUEEZE(self._packed or self._lay(), n, new_axes, m, self._itemsize, out)
        values = _UNPACK[2 * m](out)
        return _new(
            StridedLayout, values[:m], values[m:], self._itemsize, self._offset,
            self._volume, self._bounds, out,
        )

    def broadcast_to(self, shape):
        """The layout broadcast to ``shape`` (NumPy rules; new and stretched axes get stride 0).

        Examples
        --------
        >>> StridedLayout.dense((3, 1), 4).broadcast_to((2, 3, 5)).strides
        (0, 1, 0)
        """
        if type(self) is not StridedLayout:  # a subclass may shadow the slots read here
            self = plain_layout(self)
        if type(shape) is not tuple or _count(map(type, shape), int) != len(shape):
            shape = _as_ints(shape, "shape")
        m = len(shape)
        if m > MAX_NDIM:
            _check_ndim(m, "shape")
        n = len(self._shape)
        if m < n:
            raise ValueError(
                f"cannot broadcast a layout of shape {self._shape} to shape {shape} "
                f"with fewer dimensions: the number of dimensions of shape ({m}) must be "
                f"greater than or equal to the layout's ({n})"
            )
        try:
            out = _int64s(shape, 2)
        except OverflowError:  # an extent beyond int64
            _check_extents(shape, "shape")
            raise
        status, volume, low, high = _BROADCAST_LAYOUT(
            self._packed or self._lay(), n, out, m, self._itemsize, self._offset
        )
        if status:
            _check_extents(shape, "shape")  # a negative extent is named as such
            if status == C.INCOMPATIBLE:
                raise ValueError(
                    f"cannot broadcast a layout of shape {self._shape} to shape {shape}: "
                    f"extent {self._shape[volume - m + n]} does not match {shape[volume]} "
                    f"at axis {volume}; the shapes cannot be broadcast together"
                )
            raise OverflowError(
                f"broadcasting {self!r} to {shape}: {_overflow_reason(status, volume)}"
            )
        return _new(
            StridedLayout, shape, _UNPACK[m](out, 8 * m), self._itemsize, self._offset,
            volume, (low, high), out,
        )

    def reshaped(self, shape):
        """The layout viewed with another shape of the same volume, without copying.

        One extent may be -1 (inferred). Extent-1 axes never block a reshape. A
        zero-volume layout reshapes to all-zero strides.

        Raises
        ------
        ValueError
            If the volumes differ or the strides cannot express the new shape.

        Examples
        --------
        >>> StridedLayout.dense((5, 3, 4), 4).permuted((2, 0, 1)).reshaped((4, 15)).strides
        (1, 4)
        """
        if type(self) is not StridedLayout:  # a subclass may shadow the slots read here
            self = plain_layout(self)
        volume = self._volume
        if type(shape) is not tuple or _count(map(type, shape), int) != len(shape):
            shape = _as_ints(shape, "shape")
        m = len(shape)
        if m > MAX_NDIM:
            _check_ndim(m, "shape")
        if -1 in shape:
            shape = _infer_extent(shape, volume)
        try:
            out = _int64s(shape, 2)
        except OverflowError:  # an extent beyond int64
            _infer_extent(shape, volume)  # raises, naming it
            raise
        status = _RESHAPE_LAYOUT(
            self._packed or self._lay(), len(self._shape), out, m, self._itemsize, volume
        )
        if status:
            if status != C.OVERFLOW_OFFSET:
                _infer_extent(shape, volume)  # a bad extent or another volume: named
                raise ValueError(
                    f"cannot reshape {self!r} to shape {shape}: Layout strides are "
                    "incompatible with the new shape (a copy would be needed)"
                )
            raise OverflowError(
                f"reshaping {self!r} to shape {shape}: its byte strides do not fit in int64"
            )
        return _new(
            StridedLayout, shape, _UNPACK[m](out, 8 * m), self._itemsize, self._offset,
            volume, self._bounds, out,
        )

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
        if type(self) is not StridedLayout:  # a subclass may shadow the slots read here
            self = plain_layout(self)
        n = len(self._shape)
        if mask is not None:
            mask = _as_index(mask, "mask")
            if not 0 <= mask < _UINT64:
                raise OverflowError(f"mask = {mask} does not fit in uint64")
            mask = _signed64(mask)
        elif type(start_axis) is type(end_axis) is int and start_axis == 0 and end_axis == -1:
            mask = -1  # the defaults (the fast path of _axis_range_mask)
        else:
            mask = _axis_range_mask(start_axis, end_axis, n)
        out = _ZEROS[: 2 * (n or 1)]
        m = _FLATTEN(self._packed or self._lay(), n, mask, out, n or 1)
        values = _UNPACK[2 * m](out)
        return _new(
            StridedLayout, values[:m], values[m:], self._itemsize, self._offset,
            self._volume, self._bounds, out,
        )

    def repacked(self, itemsize, data_ptr=0, axis=-1, keep_dim=True):
        """Reinterpret the elements as elements of ``itemsize`` bytes along ``axis``.

        Packing (a larger itemsize) needs it to be a multiple of the current one, stride
        1 along ``axis``, and the extent there, the slice offset, every other stride and
        ``data_ptr`` to be compatible. Unpacking needs the current itemsize to be a
        multiple of the new one. With ``keep_dim=False`` an axis packed down to extent 1
        is dropped. A zero-volume layout repacks to all-zero strides and offset 0.
        ``data_ptr`` is an integer address in ``[0, 2**64)``: others raise
        ``OverflowError``, non-integers (floats, bools) ``TypeError``.

        Examples
        --------
        >>> StridedLayout.dense((5, 4), 2).repacked(8)
        StridedLayout(shape=(5, 1), strides=(1, 1), itemsize=8)
        >>> StridedLayout.dense((5, 4), 8).repacked(4).shape
        (5, 8)
        """
        if type(self) is not StridedLayout:  # a subclass may shadow the slots read here
            self = plain_layout(self)
        # plain ints in range take no helper call (each helper checks the rest)
        if type(itemsize) is int and 0 < itemsize < _ITEMSIZE_LIMIT:
            new_itemsize = itemsize
        else:
            new_itemsize = _check_itemsize(itemsize, new=True)
        if type(data_ptr) is not int or not 0 <= data_ptr < _UINT64:
            data_ptr = _as_address(data_ptr, "data_ptr")
        n = len(self._shape)
        old = self._itemsize
        if new_itemsize == old:
            if n:  # nothing to repack on a 0-d layout, but the axis must still be valid
                _normalize_axis(axis, n, "axis")
            else:
                _as_index(axis, "axis")
            return self  # plain already (a subclass's checked values, above)
        if type(axis) is int and -n <= axis < n:
            ax = axis + n if axis < 0 else axis
        else:
            ax = _normalize_axis(axis, n, "axis")
        if new_itemsize > old:
            if new_itemsize % old:
                raise ValueError(
                    f"cannot pack elements of {old} bytes into elements of itemsize "
                    f"{new_itemsize}: not a multiple"
                )
            if data_ptr % new_itemsize:
                raise ValueError(
                    f"data_ptr {data_ptr:#x} is not aligned to the new itemsize "
                    f"{new_itemsize}: it must be aligned to the packed itemsize"
                )
        elif old % new_itemsize:
            raise ValueError(
                f"cannot unpack elements of {old} bytes into elements of itemsize "
                f"{new_itemsize}: not a divisor"
            )
        out = _ZEROS[: 2 * n]
        status, offset, volume, low, high = _REPACK_LAYOUT(
            self._packed or self._lay(), n, self._offset, old, new_itemsize, ax, out
        )
        if status:
            raise self._repack_failure(status, offset, volume, new_itemsize, ax)
        values = _UNPACK[2 * n](out)
        shape, strides = values[:n], values[n:]
        if not keep_dim and shape[ax] == 1:
            shape = shape[:ax] + shape[ax + 1 :]
            strides = strides[:ax] + strides[ax + 1 :]
            out = None
        return _new(
            StridedLayout, shape, strides, new_itemsize, offset, volume, (low, high), out
        )

    def _repack_failure(self, status, reason, axis, new_itemsize, ax):
        """The exception for a failed ``repack_layout`` (see its status codes)."""
        old = self._itemsize
        if status == C.INCOMPATIBLE:
            k = new_itemsize // old
            if reason == 1:
                why = f"its stride there is {self._strides[ax]}: the axis {ax} stride must be 1"
            elif reason == 2:
                why = f"the extent {self._shape[ax]} there must be divisible by {k}"
            elif reason == 3:
                why = f"the slice offset {self._offset} must be divisible by {k}"
            else:
                why = f"the stride of axis {axis} ({self._strides[axis]}) must be divisible by {k}"
            return ValueError(
                f"cannot repack {self!r} to itemsize {new_itemsize} along axis {ax}: {why}"
            )
        return OverflowError(
            f"repacking {self!r} to itemsize {new_itemsize}: "
            f"{_overflow_reason(status, -1 if status == C.OVERFLOW_VOLUME else axis)}"
        )

    def max_compatible_itemsize(self, max_itemsize=16, data_ptr=0, axis=-1):
        """Largest divisor of ``max_itemsize`` (a multiple of this itemsize) for ``repacked``.

        ``self.repacked(self.max_compatible_itemsize(m, p, a), p, a)`` always succeeds;
        the result is ``itemsize`` itself when nothing larger fits. As in the reference,
        sizes that do not divide ``max_itemsize`` are not considered: ``dense((5, 6), 4)``
        gives 8 for ``max_itemsize=16`` although ``repacked(12)`` would work. Results stay
        below the itemsize limit 2**31: where the common divisor is larger (a
        ``max_itemsize`` of 2**31 or more), it is divided by its smallest prime factors
        until it fits, which gives the largest size for powers of two. A ``max_itemsize``
        beyond int64 counts with its largest power-of-two divisor (at most 2**62).
        ``data_ptr`` is checked as in :meth:`repacked`.

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
            raise ValueError(f"max_itemsize must be greater than zero, got {max_itemsize}")
        data_ptr = _as_address(data_ptr, "data_ptr")
        n = len(self._shape)
        ax = _normalize_axis(axis, n, "axis")
        itemsize = self._itemsize
        if max_itemsize < itemsize:
            raise ValueError(
                f"max_itemsize {max_itemsize} cannot be less than itemsize {itemsize}"
            )
        if max_itemsize > _INT64_MAX:
            max_itemsize = math.gcd(max_itemsize, 2**62)
        return _MAX_COMPATIBLE_ITEMSIZE(
            self._packed or self._lay(), n, self._offset, itemsize, max_itemsize,
            data_ptr % max_itemsize, ax,
        )

    def sliced(self, slices):
        """The layout of ``array[slices]`` for an array with this layout (NumPy basic indexing).

        ``slices`` may hold ints, slices, ``None`` (a new extent-1 axis) and one
        ``Ellipsis``; a non-tuple is one item. Strides and slice offset are NumPy's, also
        for an empty result: an empty slice keeps the axis' stride and adds nothing to
        the slice offset.

        Examples
        --------
        >>> layout = StridedLayout.dense((4, 5, 6), 1)
        >>> layout.sliced((1, Ellipsis, None, slice(None, None, -2))).shape
        (5, 1, 3)
        >>> layout[1, 2, 3].slice_offset
        45
        """
        if type(self) is not StridedLayout:  # a subclass may shadow the slots read here
            self = plain_layout(self)
        items = slices if type(slices) is tuple else (slices,)
        shape = self._shape
        n = len(shape)
        # the kernel's items (see apply_index): slices normalised by Python's own
        # slice.indices (it clamps and checks their bounds), indices as given
        spec = []
        axis = m = 0
        for position, item in enumerate(items):
            if type(item) is slice:
                if axis == n:
                    raise _too_many_indices(items, n)
                try:
                    spec += item.indices(shape[axis])
                except Exception as exc:  # bounds that are not integers, a step of 0
                    raise _slice_error(item, axis) from exc
                if spec[-1] == _INT64_MIN:  # the kernel takes |step| <= INT64_MAX: a step
                    spec[-1] = -_INT64_MAX  # of either size leaves at most one element
                axis += 1
                m += 1
            elif item is None:
                spec += _NEW_AXIS_ITEM
                m += 1
            elif item is Ellipsis:
                whole = n - axis - _consumed(items, position + 1)
                if whole < 0:
                    raise _too_many_indices(items, n)
                spec += (whole, C.ITEM_WHOLE, 0)
                axis += whole
                m += whole
            else:
                if axis == n:
                    raise _too_many_indices(items, n)
                spec += (item if type(item) is int else _index_item(item), _ITEM_INDEX, 0)
                axis += 1
        m += n - axis
        if m > MAX_NDIM:
            _check_ndim(m, "the indexed layout")
        try:
            packed = array("q", spec) if len(spec) <= 8 else _int64s(spec)
        except OverflowError:  # a step or an index beyond int64
            packed = _int64s(_fit_int64(spec, shape))
        out = _ZEROS[: 2 * m]
        status, offset, volume, low, high = _APPLY_INDEX(
            self._packed or self._lay(), n, self._offset, self._itemsize, packed, out, m
        )
        if status:
            raise self._index_failure(slices, spec, status, offset, volume)
        values = _UNPACK[2 * m](out)
        return _new(
            StridedLayout, values[:m], values[m:], self._itemsize, offset, volume,
            (low, high), out,
        )

    __getitem__ = sliced

    def _index_failure(self, slices, spec, status, axis, position):
        """The exception for a failed ``apply_index`` (see its status codes): the item
        at ``position`` on ``axis`` failed, or (``position`` -1) the result did."""
        if status == C.OUT_OF_RANGE:
            return AxisError(
                f"index {spec[3 * position]} is out of bounds for axis {axis} with "
                f"extent {self._shape[axis]} (out of range for axis {axis})"
            )
        if position < 0:
            why = _overflow_reason(status, axis)
        elif spec[3 * position + 2] == 0:  # an integer index
            why = f"the offset of index {spec[3 * position]} on axis {axis} does not fit in int64"
        else:
            why = (
                f"on axis {axis} the offset of the slice's first element does not fit in "
                f"int64, or the stride of axis {axis} times the step does not fit in int64 "
                "in bytes"
            )
        return OverflowError(f"indexing {self!r} with {_describe(slices)}: {why}")

    # ---------------------------------------------------------------- identity
    def __eq__(self, other):
        # equal when every index maps to the same offset: strides of extent-1 axes are
        # never used, and a zero-volume layout maps no index at all
        if not issubclass(type(other), StridedLayout):  # not isinstance: __class__ may lie
            return NotImplemented
        if self._shape != other._shape or self._itemsize != other._itemsize:
            return False
        if not self._volume:
            return True
        if self._offset != other._offset:
            return False
        if self._strides == other._strides:
            return True
        return 1 in self._shape and _used_strides(self) == _used_strides(other)

    def __hash__(self):
        value = self._hash
        if value is None:
            if not self._volume:
                key = (self._shape, self._itemsize)
            else:
                strides = _used_strides(self) if 1 in self._shape else self._strides
                key = (self._shape, strides, self._itemsize, self._offset)
            value = self._hash = hash(key)
        return value

    def __reduce__(self):
        # unpickling runs the full validation in _rebuild (a pickle can come from anywhere)
        values = (self._shape, self._given_strides, self._itemsize, self._offset)
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
        if not hasattr(self, "_shape"):  # object.__new__(StridedLayout): repr must not raise
            return "StridedLayout(never initialised)"
        text = f"StridedLayout(shape={self._shape}, strides={self._given_strides}, itemsize={self._itemsize}"
        if self._offset:
            text += f", _slice_offset={self._offset}"
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
        """A layout from int tuples computed by compiled code (OverflowError if they overflow).

        Compiled code always has explicit strides, so the result never has implicit C.
        """
        return cls._checked(
            shape, strides, itemsize, slice_offset, "layout returned from compiled code"
        )

    def _repr_html_(self):
        from .display import layout_html

        return layout_html(self)


_NUMBA_TYPES = ()  # StridedLayoutType by ndim, for _numba_type_; filled on first use


def _numba_types():
    global _NUMBA_TYPES
    from ._numba_layout import layout_type

    _NUMBA_TYPES = tuple(layout_type(ndim) for ndim in range(MAX_NDIM + 1))
    return _NUMBA_TYPES


_SLOT_NAMES = frozenset(StridedLayout.__slots__)
_GIVEN_STRIDES = StridedLayout.__dict__["_given_strides"]
_VALUE_SLOTS = tuple(StridedLayout.__dict__[name] for name in ("_shape", "_strides", "_itemsize",
                                                                "_offset"))  # fmt: skip
#: The slots ``_new`` fills, in its order (a subclass's objects are filled through them).
_FILLED_SLOTS = tuple(StridedLayout.__dict__[name] for name in (
    "_shape", "_strides", "_given_strides", "_itemsize", "_offset", "_volume", "_bounds",
    "_packed", "_order", "_strides_in_bytes", "_hash"))  # fmt: skip


def plain_layout(layout):
    """``layout`` as exactly a ``StridedLayout``, read from its slots.

    A subclass may redefine any property (``offset_bounds``, ``shape``, ...) to lie; what
    addresses memory (a view's layout) is made of the values the constructor checked.

    Examples
    --------
    >>> class Liar(StridedLayout):
    ...     offset_bounds = (0, 0)
    >>> plain = plain_layout(Liar((4,), (1,), 8))
    >>> type(plain).__name__, plain.offset_bounds
    ('StridedLayout', (0, 3))
    """
    if type(layout) is StridedLayout:
        return layout
    try:
        values = [slot.__get__(layout) for slot in _VALUE_SLOTS]
        given = _GIVEN_STRIDES.__get__(layout)
    except AttributeError:  # never constructed (object.__new__): no values were checked
        raise TypeError(
            f"{type(layout).__name__} redefines StridedLayout's internal attributes; its "
            "layout values are not known"
        ) from None
    plain = StridedLayout._trusted(*values)
    if given is None and not plain._offset:  # built with strides=None: keep implicit C
        implicit = StridedLayout(plain._shape, None, plain._itemsize)
        if implicit._strides == plain._strides:
            return implicit
    return plain


def _rebuild(shape, strides, itemsize, slice_offset, cls=StridedLayout, *, what="unpickled layout"):
    """Unpickle a layout, validating every value (pickles can come from anywhere).

    Also the door for other objects' layout values (``what`` names them in errors).
    """
    if not (isinstance(cls, type) and issubclass(cls, StridedLayout)):
        raise TypeError(f"cannot unpickle a layout as {_describe(cls)}: not a StridedLayout")
    layout = StridedLayout(shape, strides, itemsize)
    offset = _as_index(slice_offset, "slice_offset")
    if offset:
        layout = StridedLayout._checked(
            layout._shape, layout._strides, layout._itemsize, offset, what
        )
    if cls is not StridedLayout:
        layout = _copy(layout, cls)
    return layout


def _copy(layout, cls=StridedLayout):
    """An instance of ``cls`` with the values of ``layout`` (already valid)."""
    return _new(
        cls, layout._shape, layout._strides, layout._itemsize, layout._offset,
        layout._volume, layout._bounds, layout._packed, layout._given_strides is None,
    )


def _used_strides(layout):
    """The strides with those of extent-1 axes (never used) replaced by 0."""
    return tuple([0 if e == 1 else s for e, s in zip(layout._shape, layout._strides)])


def _analyze(layout):
    """Fill the derived slots of ``layout`` with one kernel call; returns the stride order.

    ``_unique`` is True where the kernel's nesting test proves uniqueness, else None
    (``is_unique`` settles the rest). ``_order`` is stored last: a layout whose
    ``_order`` is set has every other derived slot set (also for a reader in another
    thread).
    """
    n = len(layout._shape)
    info = _ZEROS[: _INFO_ORDER + n]
    _ANALYZE(layout._packed or layout._lay(), n, layout._itemsize, layout._offset, info)
    values = _UNPACK[_INFO_ORDER + n](info)  # one read of the whole record
    layout._is_c, layout._is_f, layout._is_any, layout._unique = _FLAG_VALUES[
        values[_INFO_FLAGS]
    ]
    mask = values[_INFO_MASK]
    layout._mask = mask + _UINT64 if mask < 0 else mask
    order = layout._order = values[_INFO_ORDER:]
    return order


_INFO_ORDER, _INFO_FLAGS, _INFO_MASK = C.INFO_ORDER, C.INFO_FLAGS, C.INFO_MASK
# analyze's flags (FLAG_C | FLAG_F | FLAG_ANY | FLAG_UNIQUE) -> the slots they fill
_FLAG_VALUES = tuple(
    (bits & C.FLAG_C != 0, bits & C.FLAG_F != 0, bits & C.FLAG_ANY != 0,
     True if bits & C.FLAG_UNIQUE else None)
    for bits in range(16)
)  # fmt: skip


def _offsets_are_distinct(layout):
    """Exact uniqueness where the strides do not nest: the search compiled code runs too
    (``unique_by_search``), then, if it gave up, enumeration (up to EXACT_UNIQUE_LIMIT)."""
    n = len(layout._shape)
    found = _UNIQUE_BY_SEARCH(
        layout._lay(), n, array("q", bytes(48 * n)), C.UNIQUE_SEARCH_BUDGET
    )
    if found >= 0:
        return found == 1
    volume = layout._volume
    if volume > C.EXACT_UNIQUE_LIMIT:
        return False  # too many elements to enumerate: the conservative answer
    scratch = array("q", bytes(8 * volume))
    return _OFFSETS_ARE_DISTINCT(layout._lay(), n, layout._offset, scratch)


def _infer_extent(shape, volume):
    """Replace a single -1 extent by the one that makes the volume ``volume``.

    Returns ``shape`` itself when it has no -1 and its volume is ``volume``; raises,
    naming the extent, for any other extent below 0 or beyond int64 and for a volume that
    cannot match.
    """
    unknown = None
    known = 1
    for i, e in enumerate(shape):
        if e == -1:
            if unknown is not None:
                raise ValueError(
                    f"shape {shape} has more than one -1 extent: There can be at most one "
                    "-1 extent in a shape"
                )
            unknown = i
        elif e < 0:
            raise _negative_extent("shape", shape, i)
        elif e > _INT64_MAX:  # a zero volume would let it through
            raise OverflowError(f"shape[{i}] = {e} does not fit in int64")
        else:
            known *= e
    if unknown is None:
        if known != volume:
            raise ValueError(
                f"cannot reshape a layout of volume {volume} to shape {shape}: The "
                f"original volume {volume} and the new volume {known} must be equal."
            )
        return shape
    if known == 0:
        raise ValueError(
            f"shape {shape}: The -1 extent is ambiguous when the specified sub-volume is 0"
        )
    if volume % known:
        raise ValueError(
            f"cannot reshape a layout of volume {volume} to shape {shape}: "
            f"The original volume {volume} must be divisible by the specified sub-volume "
            f"{known}"
        )
    return shape[:unknown] + (volume // known,) + shape[unknown + 1 :]


# ------------------------------------------------------------------------- indexing
_NEW_AXIS_ITEM = (0, C.ITEM_NEWAXIS, 0)


def _axis_range_mask(start_axis, end_axis, ndim):
    """The ``flattened`` mask that merges axes ``start_axis..end_axis`` of ``ndim`` axes.

    The defaults' values (0, -1), of any integer type, merge every axis unchecked (also
    of a 0-d layout), as in cuda.core; other axes are normalised and checked.
    """
    if type(start_axis) is not int:
        start_axis = _as_index(start_axis, "start_axis")
    if type(end_axis) is not int:
        end_axis = _as_index(end_axis, "end_axis")
    if start_axis == 0 and end_axis == -1:
        return -1
    start = _normalize_axis(start_axis, ndim, "start_axis")
    end = _normalize_axis(end_axis, ndim, "end_axis")
    return _signed64((1 << (end + 1)) - (1 << (start + 1))) if end > start else 0


def _fit_int64(spec, shape):
    """``spec`` with every slice step clamped to int64 (a step beyond it leaves at most
    one element, so the meaning is kept); AxisError for an integer index beyond int64."""
    fitted = list(spec)
    axis = 0
    for i in range(0, len(spec), 3):
        a, b, c = spec[i : i + 3]
        if c:
            fitted[i + 2] = max(-_INT64_MAX, min(c, _INT64_MAX))
            axis += 1
        elif b == C.ITEM_INDEX:
            if not -_INT64_MAX <= a <= _INT64_MAX:
                raise AxisError(
                    f"index {a} is out of bounds for axis {axis} with extent {shape[axis]} "
                    f"(out of range for axis {axis})"
                )
            axis += 1
        elif b == C.ITEM_WHOLE:
            axis += a
    return fitted


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
    return AxisError(
        f"too many indices: {count} given for a layout of {ndim} dimensions (the number of "
        f"indices {count} is greater than the number of dimensions {ndim})"
    )


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
        f"{_describe(item)} of type {type(item).__name__}. Expected slice instance or "
        "integer (or None or Ellipsis)."
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
