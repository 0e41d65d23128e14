"""Hypothesis strategies for random layouts and NumPy oracles to check them against.

The oracle of a layout is a real NumPy view with the same shape and strides whose
*values* are the element offsets of its elements: ``numpy_view(layout)[idx]`` is the
offset of ``idx``. Applying one operation to a layout and to its view must give a layout
whose offsets, computed independently by ``element_offsets``, equal the values of the
transformed view in C order (``assert_same_mapping``).

Strategies cover 0-d, zero-volume, extent-1, zero and negative strides, slice offsets and
up to 64 dimensions (high-dimensional layouts have mostly extent-1 axes so that volumes
stay small enough to enumerate).
"""

import contextlib
import math

import numpy as np
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

from layoutkit import StridedLayout

MAX_NDIM = 64
ITEMSIZES = (1, 2, 4, 8, 16)
MAX_EXTENT = 5
MAX_STRIDE = 30
MAX_NON_UNIT_AXES = 4  # keeps every volume at most 5**4 = 625


# ------------------------------------------------------------------------- strategies
ndims = st.one_of(
    st.integers(0, 4), st.integers(0, 4), st.integers(5, 12), st.integers(13, MAX_NDIM)
)
itemsizes = st.sampled_from(ITEMSIZES)
strides_values = st.one_of(st.just(0), st.integers(-MAX_STRIDE, MAX_STRIDE))


@st.composite
def shapes(draw, ndim=None, max_extent=MAX_EXTENT):
    """Extents in ``0..max_extent``; beyond 4 dimensions, at most 4 are not 1."""
    if ndim is None:
        ndim = draw(ndims)
    if ndim <= MAX_NON_UNIT_AXES:
        return tuple(draw(st.lists(st.integers(0, max_extent), min_size=ndim, max_size=ndim)))
    shape = [1] * ndim
    free = draw(
        st.lists(st.integers(0, ndim - 1), max_size=MAX_NON_UNIT_AXES, unique=True)
    )
    for axis in free:
        shape[axis] = draw(st.integers(0, max_extent))
    return tuple(shape)


@st.composite
def raw_layouts(draw, ndim=None):
    """A layout from the constructor: any extents, strides in [-30, 30], offset 0."""
    shape = draw(shapes(ndim))
    strides = tuple(draw(st.lists(strides_values, min_size=len(shape), max_size=len(shape))))
    return StridedLayout(shape, strides, draw(itemsizes))


@st.composite
def dense_layouts(draw, ndim=None):
    """A dense layout in C, F or a random axis order."""
    shape = draw(shapes(ndim))
    order = draw(
        st.one_of(st.sampled_from(["C", "F"]), st.permutations(range(len(shape))))
    )
    return StridedLayout.dense(shape, draw(itemsizes), stride_order=order)


@st.composite
def slice_items(draw, extent):
    """A slice for an axis of ``extent``: any step sign, bounds in and beyond range."""
    bound = st.one_of(st.none(), st.integers(-extent - 2, extent + 2))
    step = st.one_of(st.none(), st.sampled_from([1, 2, 3, -1, -2, -3]))
    return slice(draw(bound), draw(bound), draw(step))


def _axis_item(draw, extent):
    if extent and draw(st.booleans()):
        return draw(st.integers(-extent, extent - 1))
    return draw(slice_items(extent))


@st.composite
def basic_indices(draw, shape, allow_new_axes=True, max_new_axes=3, allow_ellipsis=True):
    """A NumPy basic index for ``shape``: ints, slices, ``None`` and one ``Ellipsis``."""
    ndim = len(shape)
    consumed = draw(st.integers(0, ndim))
    if allow_ellipsis and consumed < ndim and draw(st.booleans()):
        # items for the first ``head`` axes, then Ellipsis, then items for the last axes
        head = draw(st.integers(0, consumed))
        tail = consumed - head
        items = [_axis_item(draw, e) for e in shape[:head]]
        items.append(Ellipsis)
        items += [_axis_item(draw, e) for e in shape[ndim - tail :]]
    else:
        items = [_axis_item(draw, e) for e in shape[:consumed]]
    if allow_new_axes and ndim + max_new_axes <= MAX_NDIM:
        for _ in range(draw(st.integers(0, max_new_axes))):
            items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


@st.composite
def layouts(draw, ndim=None):
    """Any layout: from the constructor or ``dense``, optionally sliced (gives offsets)."""
    layout = draw(st.one_of(raw_layouts(ndim), dense_layouts(ndim)))
    if ndim is None and draw(st.booleans()):
        layout = layout[draw(basic_indices(layout.shape, allow_new_axes=False))]
    return layout


@st.composite
def extreme_layouts(draw):
    """Small layouts (at most 81 elements) with strides up to the int64 limits.

    Offsets of such layouts overflow int64 arithmetic unless it is checked: they test
    the overflow checks and that no property wraps around (NumPy cannot view them; see
    ``tests/test_layout_kernels.py`` for exact oracles with Python ints).
    """
    from hypothesis import assume

    ndim = draw(st.integers(1, 4))
    magnitude = st.integers(0, 62).map(lambda k: 2**k)
    stride = st.one_of(
        magnitude, magnitude.map(lambda v: -v), magnitude.map(lambda v: v + 1),
        magnitude.map(lambda v: -v - 1), st.integers(-3, 3),
    )
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    strides = tuple(draw(st.lists(stride, min_size=ndim, max_size=ndim)))
    try:
        layout = StridedLayout(shape, strides, draw(st.sampled_from((1, 2, 8))))
    except OverflowError:
        assume(False)
    if draw(st.booleans()):
        with contextlib.suppress(OverflowError):
            layout = layout[tuple(slice(None, None, -1) for _ in shape)]
    return layout


def permutations_of(ndim):
    return st.permutations(range(ndim)).map(tuple)


@st.composite
def reshape_targets(draw, volume, max_ndim=12):
    """A shape of ``volume`` (a random factorisation, extent-1 axes, maybe one -1)."""
    if volume == 0:
        ndim = draw(st.integers(1, max_ndim))
        shape = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
        shape[draw(st.integers(0, ndim - 1))] = 0
        return tuple(shape)
    factors = prime_factors(volume)
    groups = draw(st.integers(1, max(1, len(factors))))
    shape = [1] * groups
    for p in draw(st.permutations(factors)):
        shape[draw(st.integers(0, groups - 1))] *= p
    for _ in range(draw(st.integers(0, 2))):
        shape.insert(draw(st.integers(0, len(shape))), 1)
    shape = shape[:max_ndim]
    if math.prod(shape) != volume:  # the cut dropped a factor: put it back on the last axis
        shape[-1] *= volume // math.prod(shape)
    if draw(st.booleans()):
        shape[draw(st.integers(0, len(shape) - 1))] = -1
    return tuple(shape)


def prime_factors(n):
    """The prime factors of ``n >= 1``, smallest first, with repeats."""
    factors = []
    p = 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors


@st.composite
def broadcast_targets(draw, shape):
    """A shape ``shape`` broadcasts to: new leading axes, extent-1 axes stretched (to 0 too)."""
    lead = draw(st.integers(0, min(3, MAX_NDIM - len(shape))))
    new = list(draw(st.lists(st.integers(0, 3), min_size=lead, max_size=lead)))
    for extent in shape:
        new.append(draw(st.integers(0, 3)) if extent == 1 and draw(st.booleans()) else extent)
    return tuple(new)


# ------------------------------------------------------------------------- oracles
def element_offsets(shape, strides, offset):
    """Offsets of every index in C order, by NumPy index arithmetic (an int64 array)."""
    volume = math.prod(shape)
    if not shape:
        return np.array([offset], dtype=np.int64)
    if volume == 0:
        return np.empty(0, dtype=np.int64)
    index = np.unravel_index(np.arange(volume), shape)
    result = np.full(volume, offset, dtype=np.int64)
    for axis_index, stride in zip(index, strides, strict=True):
        result += axis_index.astype(np.int64) * stride
    return result


def explicit_strides(layout):
    """The layout's strides in elements, also for implicit C (``strides`` is then None)."""
    return layout._strides


def explicit_byte_strides(layout):
    """The layout's strides in bytes, also for implicit C (``strides_in_bytes`` is None)."""
    return layout._byte_strides()


def assert_public_strides(layout):
    """``strides`` / ``strides_in_bytes``: None together (implicit C), else the values."""
    if layout.strides is None:
        assert layout.strides_in_bytes is None
        assert explicit_strides(layout) == StridedLayout.dense(layout.shape, 1).strides
        assert layout.slice_offset == 0
    else:
        assert layout.strides == explicit_strides(layout)
        assert layout.strides_in_bytes == explicit_byte_strides(layout)


def layout_offsets(layout):
    return element_offsets(layout.shape, explicit_strides(layout), layout.slice_offset)


def enumerable(layout, limit=4096):
    """Whether the oracles can afford a layout: few elements and a small offset span."""
    lo, hi = layout.offset_bounds
    return layout.volume <= limit and hi - lo < 64 * limit


def numpy_view(layout):
    """An int64 NumPy view with the layout's shape and strides whose values are offsets."""
    shape, strides, offset = layout.shape, explicit_strides(layout), layout.slice_offset
    if 0 in shape:  # no elements: NumPy keeps the strides as well
        return as_strided(np.empty(0, np.int64), shape, [s * 8 for s in strides], writeable=False)
    lo = offset + sum(s * (e - 1) for e, s in zip(shape, strides, strict=True) if s < 0)
    hi = offset + sum(s * (e - 1) for e, s in zip(shape, strides, strict=True) if s > 0)
    base = np.arange(lo, hi + 1, dtype=np.int64)
    view = as_strided(base[offset - lo :], shape, [s * 8 for s in strides], writeable=False)
    assert np.array_equal(view.ravel(), layout_offsets(layout))
    return view


def numpy_byte_view(layout):
    """A NumPy view of dtype ``V<itemsize>`` with the layout's byte mapping.

    Returns ``(view, origin)``: ``origin`` is the address that element offset 0 maps to,
    so ``address(view) - origin`` is the layout's slice offset in bytes.
    """
    dtype = np.dtype(f"V{layout.itemsize}")
    if layout.volume == 0:  # no elements: NumPy keeps the strides as well
        empty = np.empty(0, dtype=dtype)
        strides = explicit_byte_strides(layout)
        return as_strided(empty, layout.shape, strides, writeable=False), 0
    lo, hi = offset_bounds(layout.shape, explicit_strides(layout), layout.slice_offset)
    items = np.zeros(hi - lo + 1, dtype=dtype)
    origin = address(items) - lo * layout.itemsize
    view = as_strided(
        items[layout.slice_offset - lo :], layout.shape, explicit_byte_strides(layout),
        writeable=False,
    )
    return view, origin


def address(array):
    return array.__array_interface__["data"][0]


def offset_bounds(shape, strides, offset):
    if 0 in shape:
        return 0, -1
    lo = offset + sum(s * (e - 1) for e, s in zip(shape, strides, strict=True) if s < 0)
    hi = offset + sum(s * (e - 1) for e, s in zip(shape, strides, strict=True) if s > 0)
    return lo, hi


def meaningful_strides(shape, strides):
    """Strides of the axes whose extent is not 1 (the others are never used)."""
    if 0 in shape:
        return None
    return tuple(s for e, s in zip(shape, strides, strict=True) if e != 1)


def contiguous_in_some_order(shape, strides):
    """Whether some axis order makes the layout C-contiguous (independent reference)."""
    if 0 in shape:
        return True
    pairs = sorted(((s, e) for e, s in zip(shape, strides, strict=True) if e != 1), reverse=True)
    expected = 1
    for stride, extent in reversed(pairs):
        if stride != expected:
            return False
        expected *= extent
    return True


def assert_zero_volume_rule(layout):
    """DECISIONS 11: a zero-volume layout addresses nothing; it keeps its strides (which
    fit in int64 as bytes) and equals every zero-volume layout of its shape and itemsize."""
    if 0 in layout.shape:
        dense = StridedLayout.dense(layout.shape, layout.itemsize)
        assert dense.strides == (0,) * layout.ndim
        assert layout == dense and hash(layout) == hash(dense), layout
        assert layout.offset_bounds == (0, -1) and layout.required_size_in_bytes() == 0
        assert all(abs(s) <= 2**63 - 1 for s in explicit_byte_strides(layout))
        assert abs(layout.slice_offset_in_bytes) <= 2**63


def assert_same_mapping(layout, view, itemsize=None):
    """The layout describes ``view``: same shape, strides, offsets, flags and bounds."""
    assert isinstance(layout, StridedLayout)
    assert layout.shape == view.shape
    strides = explicit_strides(layout)
    assert type(strides) is tuple and len(strides) == layout.ndim
    assert_public_strides(layout)
    if itemsize is not None:
        assert layout.itemsize == itemsize
    assert_zero_volume_rule(layout)
    view_strides = tuple(s // view.itemsize for s in view.strides)
    assert meaningful_strides(layout.shape, strides) == meaningful_strides(
        view.shape, view_strides
    )
    offsets = layout_offsets(layout)
    assert np.array_equal(offsets, np.ravel(view)), (layout, offsets, np.ravel(view))
    assert_properties(layout, offsets)
    assert layout.is_contiguous_c == view.flags.c_contiguous
    assert layout.is_contiguous_f == view.flags.f_contiguous


def assert_properties(layout, offsets=None):
    """Every derived property of ``layout`` against its enumerated offsets."""
    if offsets is None:
        offsets = layout_offsets(layout)
    shape, strides, size = layout.shape, explicit_strides(layout), layout.itemsize
    volume = math.prod(shape)
    assert layout.volume == volume == len(offsets)
    assert layout.ndim == len(shape)
    bounds = (int(offsets.min()), int(offsets.max())) if volume else (0, -1)
    assert layout.offset_bounds == bounds
    assert (layout.min_offset, layout.max_offset) == bounds
    assert explicit_byte_strides(layout) == tuple(s * size for s in strides)
    assert_public_strides(layout)
    assert layout.slice_offset_in_bytes == layout.slice_offset * size
    assert layout.is_unique == (len(set(offsets.tolist())) == volume)
    any_order = contiguous_in_some_order(shape, strides)
    assert layout.is_contiguous_any == any_order
    assert layout.is_dense == (any_order and layout.slice_offset == 0)
    fits = all(abs(s) < 2**59 for s in strides)  # NumPy's byte strides must fit in int64
    c_view = None
    if volume and fits:
        c_view = as_strided(np.empty(1), shape, [s * 8 for s in strides])
    if c_view is not None:
        assert layout.is_contiguous_c == c_view.flags.c_contiguous
        assert layout.is_contiguous_f == c_view.flags.f_contiguous
    elif not volume:
        assert layout.is_contiguous_c and layout.is_contiguous_f
    if bounds[0] < 0:
        try:
            layout.required_size_in_bytes()
        except ValueError:
            pass
        else:
            raise AssertionError(f"{layout!r}: required_size_in_bytes accepted min < 0")
    else:
        assert layout.required_size_in_bytes() == (bounds[1] + 1) * size
    order = layout.stride_order
    assert sorted(order) == list(range(layout.ndim))
    keys = [(-abs(strides[a]), -shape[a], a) for a in order]
    assert keys == sorted(keys)
