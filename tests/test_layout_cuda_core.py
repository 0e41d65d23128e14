"""Differential test against the reference, cuda.core's ``_StridedLayout``.

Random layouts are built with both libraries and every property and transform is
compared. Each difference must be one that ``DECISIONS.md`` names; the classifier checks
that it is that kind of difference *and* that layoutkit's answer is the right one
(against NumPy views or the enumerated offsets). Any other difference fails the test.
``DIFFERENCES`` lists the items this test finds, and the example tests at the end show
one instance of each.
"""

import math

import numpy as np
import pytest
from helpers.strategies import (
    address,
    assert_same_mapping,
    assert_zero_volume_rule,
    basic_indices,
    broadcast_targets,
    enumerable,
    itemsizes,
    layout_offsets,
    numpy_byte_view,
    numpy_view,
    permutations_of,
    reshape_targets,
    shapes,
    strides_values,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layoutkit import AxisError, StridedLayout

CL = pytest.importorskip("cuda.core._layout")._StridedLayout

# DECISIONS items that explain the differences this test finds, one sentence each
DIFFERENCES = {
    "2": "layoutkit accepts lists and NumPy integers where the reference needs exact tuples "
    "and ints, and rejects floats the reference truncates.",
    "3": "an out-of-range axis or index raises AxisError (an IndexError and a ValueError) "
    "where the reference raises a plain ValueError.",
    "4": "layout[...] takes None and Ellipsis with NumPy's meaning; the reference raises "
    "TypeError.",
    "5": "a layout whose volume, offsets or byte strides overflow int64 is refused when "
    "built; the reference builds it and raises OverflowError later from properties.",
    "6": "extent-1 axes never block a merge in flattened, reshaped and flattened_axis_mask "
    "(nor the stride-1 requirement of repacked); the reference lets their strides block.",
    "7": "repacked refuses itemsizes that do not divide each other (the reference returns a "
    "layout of the wrong byte size) and validates its arguments for the same itemsize.",
    "8": "max_compatible_itemsize returns a multiple of itemsize that repacked accepts; "
    "the reference can return less than itemsize or a non-multiple.",
    "9": "implicit C (strides=None, kept as None as in the reference) equals the same "
    "explicit C strides, and stride_order describes the real strides.",
    "10": "is_unique is exact where the reference is conservative (interleaved strides).",
    "11": "zero-volume layouts of one shape and itemsize are equal whatever their strides, "
    "dense_like/to_dense give them all-zero strides (the reference passes any strides on), "
    "an empty slice keeps NumPy's strides and offset (the reference zeroes every stride), "
    "flattened merges any of their axes, repacked gives them all-zero strides, and squeezed "
    "keeps NumPy's shape instead of (0,).",
}

PROPERTIES = (
    "ndim", "shape", "strides", "strides_in_bytes", "itemsize", "slice_offset",
    "slice_offset_in_bytes", "volume", "offset_bounds", "min_offset", "max_offset",
    "stride_order", "is_unique", "is_contiguous_c", "is_contiguous_f", "is_contiguous_any",
    "is_dense",
)


# ------------------------------------------------------------------------- running both
def outcome(call):
    """``("ok", value)`` or ``("error", exception class)``; layouts become plain tuples."""
    try:
        value = call()
    except (TypeError, ValueError, OverflowError, IndexError) as exc:
        return "error", type(exc)
    if isinstance(value, (StridedLayout, CL)):
        # and whether its public strides are None (implicit C): both libraries must agree
        return "ok", plain(value), value.strides is None
    return "ok", value


def plain(layout):
    """(shape, strides, itemsize, slice_offset), implicit C strides resolved."""
    if isinstance(layout, StridedLayout):
        strides = layout._strides  # layoutkit's own (all 0 for a zero volume)
    else:
        strides = layout.strides
        if strides is None:
            strides = c_strides(layout.shape)
    return tuple(layout.shape), tuple(strides), layout.itemsize, layout.slice_offset


def c_strides(shape):
    strides, running = [], 1
    for extent in reversed(shape):
        strides.append(running)
        running *= extent
    return tuple(reversed(strides))


def is_plain_layout(value):
    return isinstance(value, tuple) and len(value) == 4 and isinstance(value[0], tuple)


def rebuild(value):
    return StridedLayout._trusted(*value)


class Case:
    """One layout in both libraries, with the arguments that built it."""

    def __init__(self, shape, strides, itemsize, index):
        self.args = (shape, strides, itemsize)
        self.index = index
        self.ours = outcome(lambda: self._build(StridedLayout))
        self.theirs = outcome(lambda: self._build(CL))
        self.ours_layout = self._build(StridedLayout) if self.ours[0] == "ok" else None
        self.theirs_layout = self._build(CL) if self.theirs[0] == "ok" else None

    def _build(self, cls):
        layout = cls(*self.args)
        return layout if self.index is None else layout.sliced(self.index)

    def __repr__(self):
        return f"Case(shape, strides, itemsize={self.args}, index={self.index})"

    @property
    def empty(self):
        return 0 in self.ours_layout.shape


def classify(probe, case, ours, theirs, args=()):
    """The DECISIONS item that explains a difference (after checking layoutkit is right)."""
    layout = case.ours_layout
    if ours[0] == "error" and theirs[0] == "error":
        # same failure, the exception class differs: only AxisError for ValueError
        if ours[1] is AxisError and issubclass(theirs[1], ValueError):
            return "3"
        return None
    if probe == "equals explicit C" and case.args[1] is None:
        assert ours == ("ok", True)  # equal by meaning; the reference compares the None
        return "9"
    if probe == "stride_order" and case.theirs_layout.strides is None:
        # the reference answers the identity for implicit C; layoutkit sorts real strides
        assert_stride_order(layout)
        return "9"
    empty_result = ours[0] == "ok" and is_plain_layout(ours[1]) and 0 in ours[1][0]
    if case.empty or empty_result:
        assert_zero_volume_rule_applies(probe, layout, ours, theirs, args)
        return "11"
    if is_eager_overflow(ours, theirs):
        return "5"
    if unit_strides_only(ours, theirs):
        return "6"
    check = CLASSIFIERS.get(probe)
    item = check(case, ours, theirs, *args) if check else None
    if item is None and explained_by_unit_strides(case, probe, args, ours):
        item = "6"
    return item


def explained_by_unit_strides(case, probe, args, ours):
    """The reference agrees once the strides of extent-1 axes are made regular.

    Such strides are never used, so the layouts are the same; layoutkit ignores them
    (DECISIONS 6) where the reference lets them decide.
    """
    layout = case.ours_layout
    if 1 not in layout.shape:
        return False
    shape = layout.shape
    regular = list(layout._strides)
    for j in range(len(shape) - 1, -1, -1):
        if shape[j] == 1:
            regular[j] = regular[j + 1] * shape[j + 1] if j + 1 < len(shape) else 1
    variants = [regular]
    for fill in (1, 0):
        variants.append([fill if e == 1 else s for e, s in zip(shape, regular, strict=True)])
    if probe in ("repacked", "max_compatible_itemsize") and -len(shape) <= args[2] < len(shape):
        variants[-1][args[2]] = 1  # the reference wants stride 1 along the axis
    call_args = None if probe in PROPERTIES else args
    for strides in variants:
        base = CL(shape, tuple(strides), layout.itemsize)
        if layout.slice_offset:
            base = _with_offset(base, layout.slice_offset)
        theirs = outcome(lambda base=base: run_probe(base, probe, call_args))
        if theirs == ours or unit_strides_only(ours, theirs):
            return True
    return False


def _with_offset(layout, offset):
    """The reference layout moved by ``offset`` elements (sliced out of a wider one)."""
    wider = CL((2, *layout.shape), (offset, *layout.strides), layout.itemsize)
    return wider.sliced((1,))


def unit_strides_only(ours, theirs):
    """Both are the same layout except for strides of extent-1 axes (never used).

    layoutkit's merges and splits ignore the stride of an extent-1 axis (DECISIONS 6),
    so the stride it gives such an axis can differ from the reference's.
    """
    if ours[0] != "ok" or theirs[0] != "ok" or not is_plain_layout(ours[1]):
        return False
    (shape, strides, size, offset), (shape2, strides2, size2, offset2) = ours[1], theirs[1]
    if (shape, size, offset) != (shape2, size2, offset2):
        return False
    return all(e == 1 or a == b for e, a, b in zip(shape, strides, strides2, strict=True))


def assert_stride_order(layout):
    strides = layout._strides  # also for implicit C
    keys = [(-abs(strides[a]), -layout.shape[a], a) for a in layout.stride_order]
    assert keys == sorted(keys)


def assert_zero_volume_rule_applies(probe, layout, ours, theirs, args):
    """DECISIONS 11: where a zero volume is involved, layoutkit's answer follows its rule.

    Every zero-volume layout is valid and equals the dense one of its shape; a layout
    result has the reference's shape (NumPy's for ``squeezed`` and ``repacked``, fewer
    axes for ``flattened``), dense
    and repacked ones have all-zero strides and an empty slice NumPy's strides and offset.
    """
    assert_zero_volume_rule(layout)
    if ours[0] != "ok" or not is_plain_layout(ours[1]):
        return
    result = rebuild(ours[1])
    assert_zero_volume_rule(result)
    if theirs[0] == "ok" and probe not in ("squeezed", "flattened"):
        assert result.shape == theirs[1][0]
    if probe == "flattened" and theirs[0] == "ok":  # merged at least as much
        assert result.volume == 0 and result.ndim <= len(theirs[1][0])
    if probe == "squeezed":
        assert result.shape == tuple(e for e in layout.shape if e != 1)  # NumPy's squeeze
    if result.volume:
        return
    numpy_can = math.prod(e or 1 for e in layout.shape) < 2**40  # NumPy's size limit
    if probe == "repacked" and 0 in layout.shape and numpy_can:
        assert result.shape == numpy_empty_repacked_shape(layout, *args)
    if probe in ("to_dense", "repacked"):
        assert result.strides == (0,) * result.ndim and result.slice_offset == 0
    if probe == "sliced" and layout.volume:
        assert_numpy_slice(layout, args[0], result)


def assert_numpy_slice(layout, index, result):
    """``result`` has the strides and offset of NumPy's view of ``layout[index]``."""
    whole = numpy_view(layout)
    view = whole[index]
    assert result.strides == tuple(s // 8 for s in view.strides)
    assert result.slice_offset == layout.slice_offset + (address(view) - address(whole)) // 8


def numpy_empty_repacked_shape(layout, itemsize, data_ptr, axis, keep_dim):
    """The shape NumPy's ``.view`` gives an empty array of ``layout``'s shape."""
    empty = np.empty(layout.shape, dtype=f"V{layout.itemsize}")
    moved = np.moveaxis(empty, axis, -1).view(f"V{itemsize}")
    shape = np.moveaxis(moved, -1, axis).shape
    if itemsize > layout.itemsize and not keep_dim and shape[axis] == 1:
        shape = shape[: axis % len(shape)] + shape[axis % len(shape) + 1 :]
    return shape


def verify_with_numpy(case, ours, expected_array):
    """layoutkit's layout result maps every index as the NumPy array does."""
    assert ours[0] == "ok"
    assert_same_mapping(rebuild(ours[1]), expected_array)


def has_odd_unit_axis(layout):
    """An extent-1 axis whose stride could block the reference's merge test.

    Only layouts the NumPy oracle can afford qualify here; others are classified by
    ``explained_by_unit_strides``, which needs no enumeration.
    """
    return 1 in layout.shape and enumerable(layout)


def classify_flattened(case, ours, theirs, start=0, end=-1):
    layout = case.ours_layout
    if not has_odd_unit_axis(layout):
        return None
    result = rebuild(ours[1])
    assert np.array_equal(layout_offsets(result), numpy_view(layout).ravel())
    if theirs[0] == "ok":
        assert len(result.shape) < len(theirs[1][0])  # merged more
    return "6"


def classify_mask(case, ours, theirs):
    layout = case.ours_layout
    if 1 not in layout.shape:
        return None
    # layoutkit's mask is the one its flattened() uses; every set bit is one merge
    assert layout.flattened(mask=ours[1]) == layout.flattened()
    assert layout.ndim - bin(ours[1]).count("1") == layout.flattened().ndim
    return "6"


def classify_reshaped(case, ours, theirs, target):
    layout = case.ours_layout
    if not has_odd_unit_axis(layout) or ours[0] != "ok" or theirs[0] != "error":
        return None
    verify_with_numpy(case, ours, numpy_view(layout).reshape(target, copy=False))
    return "6"


def classify_is_unique(case, ours, theirs):
    layout = case.ours_layout
    if enumerable(layout):
        offsets = layout_offsets(layout).tolist()
    elif layout.volume <= 200_000:  # beyond NumPy's oracle: the offsets as Python ints
        offsets = [
            layout.slice_offset + sum(i * s for i, s in zip(index, layout._strides, strict=True))
            for index in np.ndindex(*layout.shape)
        ]
    else:
        return None
    if ours == ("ok", True) and theirs == ("ok", False) and len(set(offsets)) == len(offsets):
        return "10"
    return None


def classify_repacked(case, ours, theirs, itemsize, data_ptr, axis, keep_dim):
    layout = case.ours_layout
    old = layout.itemsize
    if ours[0] == "error" and theirs[0] == "ok":
        if max(old, itemsize) % min(old, itemsize):
            new_shape, _, new_itemsize, _ = theirs[1]
            if math.prod(new_shape) * new_itemsize != layout.volume * old:
                return "7"  # the reference's answer has another byte size
        return None
    if ours[0] == "ok" and theirs[0] == "error" and layout.ndim and enumerable(layout):
        ax = axis % layout.ndim
        if layout.shape[ax] == 1 and layout._strides[ax] != 1 and itemsize < old:
            view, origin = numpy_byte_view(layout)
            moved = np.moveaxis(view, ax, -1).view(f"V{itemsize}")
            expected = np.moveaxis(moved, -1, ax)
            result = rebuild(ours[1])
            assert result.shape == expected.shape
            assert result.slice_offset_in_bytes == expected.__array_interface__["data"][0] - origin
            return "6"
    return None


def classify_max_itemsize(case, ours, theirs, max_itemsize, data_ptr, axis):
    layout = case.ours_layout
    if ours[0] != "ok":
        return None
    size = ours[1]
    assert size % layout.itemsize == 0 and size <= max_itemsize
    layout.repacked(size, data_ptr, axis)  # usable
    if theirs[0] == "ok":
        other = theirs[1]
        if other < layout.itemsize or other % layout.itemsize:
            return "8"
    return None


CLASSIFIERS = {
    "flattened": classify_flattened,
    "flattened_axis_mask": classify_mask,
    "reshaped": classify_reshaped,
    "is_unique": classify_is_unique,
    "repacked": classify_repacked,
    "max_compatible_itemsize": classify_max_itemsize,
}


# ------------------------------------------------------------------------- random cases
@st.composite
def cases(draw):
    shape = draw(shapes())
    ndim = len(shape)
    kind = draw(st.sampled_from(["small", "small", "implicit", "dense", "huge"]))
    if kind == "implicit":
        strides = None
    elif kind == "dense":
        order = draw(permutations_of(ndim))
        strides = StridedLayout.dense(shape, 1, order).strides
    elif kind == "huge":
        shape = tuple(draw(st.sampled_from([e, 2**31, 2**62])) for e in shape)
        strides = tuple(draw(st.sampled_from([1, -(2**40), 2**62, 2**31])) for _ in shape)
    else:
        strides = tuple(draw(st.lists(strides_values, min_size=ndim, max_size=ndim)))
    itemsize = draw(itemsizes)
    index = None
    if kind != "huge" and draw(st.booleans()):
        index = draw(basic_indices(shape, allow_new_axes=False, allow_ellipsis=False))
        index = index if isinstance(index, tuple) else (index,)
    return Case(shape, strides, itemsize, index)


def probes(layout, draw):
    """``(name, args)`` of every property (args ``None``) and of random method calls."""
    n = layout.ndim
    calls = [(name, None) for name in PROPERTIES]
    calls += [("required_size_in_bytes", ()), ("flattened_axis_mask", ()), ("squeezed", ())]
    calls.append(("flattened", ()))
    if n:
        calls.append(("flattened", (draw(st.integers(-n, n - 1)), draw(st.integers(-n, n - 1)))))
    calls.append(("permuted", (draw(permutations_of(n)),)))
    if layout.volume <= 10**6:
        calls.append(("reshaped", (draw(reshape_targets(layout.volume, max_ndim=8)),)))
    axes = tuple(draw(st.lists(st.integers(-n - 2, n + 1), max_size=2, unique=True)))
    calls.append(("unsqueezed", (axes,)))
    calls.append(("broadcast_to", (draw(broadcast_targets(layout.shape)),)))
    order = draw(st.one_of(st.sampled_from(["K", "C", "F"]), permutations_of(n)))
    calls.append(("to_dense", (order,)))
    data_ptr = draw(st.sampled_from([0, 2, 4, 8, 16, 24]))
    axis = draw(st.integers(-max(n, 1), max(n, 1) - 1))
    itemsize = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16]))
    calls.append(("repacked", (itemsize, data_ptr, axis, draw(st.booleans()))))
    max_itemsize = draw(st.sampled_from([1, 2, 4, 6, 8, 12, 16, 32]))
    calls.append(("max_compatible_itemsize", (max_itemsize, data_ptr, axis)))
    index = draw(basic_indices(layout.shape, allow_new_axes=False, allow_ellipsis=False))
    calls.append(("sliced", (index if isinstance(index, tuple) else (index,),)))
    return calls


def run_probe(layout, name, args):
    return getattr(layout, name) if args is None else getattr(layout, name)(*args)


def check_dense(case, draw):
    """``dense`` with the case's shape and itemsize in a random order."""
    shape, _, itemsize = case.args
    order = draw(st.one_of(st.sampled_from(["C", "F"]), permutations_of(len(shape))))
    ours = outcome(lambda: StridedLayout.dense(shape, itemsize, order))
    theirs = outcome(lambda: CL.dense(shape, itemsize, order))
    if ours == theirs or is_eager_overflow(ours, theirs):
        return
    # the reference multiplies extents in axis order and overflows before reaching a 0
    assert 0 in shape and ours[0] == "ok" and theirs == ("error", OverflowError), (
        f"unclassified difference in dense{(shape, itemsize, order)}: "
        f"layoutkit {ours}, reference {theirs}"
    )
    assert ours[1][1] == (0,) * len(shape)  # "5": no overflow for a zero volume


def check_case(case, draw):
    check_dense(case, draw)
    if case.ours != case.theirs or case.ours_layout is None:
        item = classify_construction(case)
        assert item, f"unclassified construction difference: {case!r}"
        return
    for name, args in probes(case.ours_layout, draw):
        ours = outcome(lambda: run_probe(case.ours_layout, name, args))  # noqa: B023
        theirs = outcome(lambda: run_probe(case.theirs_layout, name, args))  # noqa: B023
        if ours == theirs:
            continue
        item = classify(name, case, ours, theirs, args or ())
        assert item in DIFFERENCES, (
            f"unclassified difference in {name}{args or ''} for {case!r}: "
            f"layoutkit {ours}, reference {theirs}"
        )


def classify_construction(case):
    """Built layouts differ: the zero-volume rule (11) or eager overflow (5)."""
    if case.ours[0] == "error":
        assert case.ours[1] is OverflowError
        assert overflows(plain(case.theirs_layout))
        return "5"
    layout = case.ours_layout
    if 0 in layout.shape:
        assert_zero_volume_rule(layout)
        if case.index is None:  # implicit C strides (else they would agree): dense, all 0
            assert case.args[1] is None and layout.strides is None
            assert layout._strides == (0,) * layout.ndim
            return "11"
        # an empty slice: NumPy's strides and offset, where the reference zeroes the strides
        base = StridedLayout(*case.args)
        if base.volume:
            assert_numpy_slice(base, case.index, layout)
        return "11"
    if case.args[1] is None and plain(case.theirs_layout) == case.ours[1]:
        return "9"
    return None


def overflows(value):
    """Whether a (plain) layout implies a number outside int64 (Python arithmetic)."""
    limit = range(-(2**63), 2**63)
    shape, strides, itemsize, offset = value
    if 0 in shape:  # no offsets: only the (kept) strides must fit as bytes
        return any(s * itemsize not in range(-(2**63) + 1, 2**63) for s in strides)
    volume = math.prod(shape)
    lo = offset + sum(s * (e - 1) for e, s in zip(shape, strides, strict=True) if s < 0)
    hi = offset + sum(s * (e - 1) for e, s in zip(shape, strides, strict=True) if s > 0)
    values = [volume, lo, hi, lo * itemsize, (hi + 1) * itemsize]  # the end of the last one
    values += [s * itemsize for s in strides]
    return any(v not in limit for v in values)


def is_eager_overflow(ours, theirs):
    """layoutkit refuses a layout that overflows; the reference returned it (DECISIONS 5)."""
    return (
        ours == ("error", OverflowError)
        and theirs[0] == "ok"
        and is_plain_layout(theirs[1])
        and overflows(theirs[1])
    )


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.data())
def test_differences_from_cuda_core_are_decisions(case, data):
    check_case(case, data.draw)


# ------------------------------------------------------------------------- examples
def _difference(probe, shape, strides, itemsize, call, args=(), index=None):
    """Run one probe on both libraries; return the DECISIONS item it is classified as."""
    case = Case(shape, strides, itemsize, index)
    if case.ours != case.theirs or case.ours_layout is None:
        return classify_construction(case)
    ours = outcome(lambda: call(case.ours_layout))
    theirs = outcome(lambda: call(case.theirs_layout))
    assert ours != theirs
    return classify(probe, case, ours, theirs, args)


EXAMPLES = {
    "3": lambda: _difference("sliced", (2, 3), None, 4, lambda lay: lay.sliced((0, 5)), ((0, 5),)),
    "5": lambda: _difference("ctor", (2**32, 2**32), (0, 0), 1, None),
    "6": lambda: _difference("flattened", (4, 1, 6), (6, 100, 1), 4, lambda lay: lay.flattened()),
    "7": lambda: _difference(
        "repacked", (5, 4), (4, 1), 4, lambda lay: lay.repacked(6, 0, -1, True), (6, 0, -1, True)
    ),
    "8": lambda: _difference(
        "max_compatible_itemsize", (5, 6), (6, 1), 4,
        lambda lay: lay.max_compatible_itemsize(6, 0, -1), (6, 0, -1),
    ),
    "9": lambda: _difference(
        "equals explicit C", (2, 3), None, 4, lambda lay: lay == type(lay)((2, 3), (3, 1), 4)
    ),
    "10": lambda: _difference("is_unique", (2, 3), (3, 2), 1, lambda lay: lay.is_unique),
    "11": lambda: _difference(
        "to_dense", (3, 0, 4), (7, 1, 9), 4, lambda lay: lay.to_dense("K"), ("K",)
    ),
}


def _argument_types():
    # the reference needs exact tuples and truncates floats; layoutkit follows operator.index
    with pytest.raises(TypeError):
        CL([2, 3], None, 4)
    assert StridedLayout([2, 3], None, 4) == StridedLayout((2, 3), None, 4)
    assert CL((2.0, 3), None, 4).shape == (2, 3)
    with pytest.raises(TypeError, match="shape"):
        StridedLayout((2.0, 3), None, 4)
    return "2"


def _none_and_ellipsis():
    with pytest.raises(TypeError):
        CL((2, 3), None, 4)[None]
    with pytest.raises(TypeError):
        CL((2, 3), None, 4)[..., 0]
    layout = StridedLayout((2, 3), None, 4)
    assert_same_mapping(layout[None, ..., 0], numpy_view(layout)[None, ..., 0])
    return "4"


EXAMPLES["2"] = _argument_types
EXAMPLES["4"] = _none_and_ellipsis


@pytest.mark.parametrize("item", sorted(DIFFERENCES, key=int))
def test_each_listed_difference_has_an_example(item):
    """The table lists only differences that exist: one example of each, classified."""
    assert EXAMPLES[item]() == item
