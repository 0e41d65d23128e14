"""StridedLayout against NumPy: every transform agrees with the same operation on a view.

Each test applies one operation to a random layout and to a NumPy view with that layout
(values are element offsets, see ``helpers.strategies``) and checks that the results map
every index to the same offset, with the same shape, strides, flags and bounds. Where
NumPy refuses an operation (a reshape that needs a copy, an impossible broadcast), the
layout must refuse it too.
"""

import numpy as np
import pytest
from helpers.strategies import (
    address,
    assert_properties,
    assert_same_mapping,
    assert_zero_volume_rule,
    basic_indices,
    broadcast_targets,
    dense_layouts,
    element_offsets,
    itemsizes,
    layout_offsets,
    layouts,
    meaningful_strides,
    numpy_byte_view,
    numpy_view,
    permutations_of,
    reshape_targets,
    shapes,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from layoutkit import AxisError, StridedLayout

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(layouts())
def test_properties_match_numpy_view(layout):
    assert_same_mapping(layout, numpy_view(layout))


@FAST
@given(layouts())
def test_constructor_takes_numpy_byte_strides(layout):
    view, _ = numpy_byte_view(layout)
    rebuilt = StridedLayout(view.shape, view.strides, view.itemsize, divide_strides=True)
    assert rebuilt.shape == layout.shape
    assert rebuilt.strides == StridedLayout(layout.shape, layout.strides, 1).strides
    assert rebuilt.slice_offset == 0


@FAST
@given(st.data())
def test_sliced_matches_numpy_indexing(data):
    layout = data.draw(layouts())
    index = data.draw(basic_indices(layout.shape))
    view = numpy_view(layout)
    assert_same_mapping(layout.sliced(index), view[index])
    assert layout[index] == layout.sliced(index)


@pytest.mark.parametrize(
    "index",
    [
        (Ellipsis,),
        (None,),
        (Ellipsis, None),
        (None, Ellipsis, None),
        (1, Ellipsis),
        (Ellipsis, -1),
        (slice(None, None, -1), None, 0),
        (slice(5, -7, -2), Ellipsis),
        (slice(1, 1), Ellipsis, slice(None, None, -3)),
        (0, 1, 2),
        (-1, -1, -1, None),
        (),
        (slice(None, None, 2**63 - 1), slice(-(2**70), 2**70, -(2**70))),
        (slice(2**70, None, -(2**63 - 1)), Ellipsis, slice(1, None, 2**62)),
    ],
    ids=repr,
)
def test_sliced_table_against_numpy(index):
    layout = StridedLayout((3, 4, 5), (-2, 7, 30), 8)[:, ::-1, 1:]
    assert_same_mapping(layout[index], numpy_view(layout)[index])


@FAST
@given(st.data())
def test_offset_of_matches_numpy_indexing(data):
    layout = data.draw(layouts())
    view = numpy_view(layout)
    index = tuple(
        data.draw(st.integers(-e - 2, e + 1)) if e else data.draw(st.integers(-2, 1))
        for e in layout.shape
    )
    try:
        expected = int(view[index])
    except IndexError:
        with pytest.raises(AxisError, match=r"index -?\d+ is out of bounds for axis"):
            layout.offset_of(index)
    else:
        assert layout.offset_of(index) == expected
        assert layout.offset_of(list(index)) == expected
        assert layout.offset_of(tuple(np.int64(i) for i in index)) == expected


@FAST
@given(st.data())
def test_permuted_matches_transpose(data):
    layout = data.draw(layouts())
    order = data.draw(permutations_of(layout.ndim))
    negative = tuple(a - layout.ndim if data.draw(st.booleans()) else a for a in order)
    result = layout.permuted(negative)
    assert_same_mapping(result, numpy_view(layout).transpose(order))
    assert layout.permuted(list(order)) == result


@FAST
@given(st.data())
def test_reshaped_matches_numpy_no_copy_reshape(data):
    layout = data.draw(layouts())
    wrong_volume = data.draw(st.booleans()) and data.draw(st.booleans())
    target = data.draw(reshape_targets(layout.volume + wrong_volume))
    view = numpy_view(layout)
    try:
        expected = view.reshape(target, copy=False)
    except ValueError:
        with pytest.raises(ValueError, match="shape"):
            layout.reshaped(target)
    else:
        assert_same_mapping(layout.reshaped(target), expected)


@pytest.mark.parametrize(
    ("shape", "strides", "target"),
    [
        ((4, 1, 6), (6, 100, 1), (24,)),
        ((6, 100, 1), (1, 6, 7), (2, 3, 100)),
        ((4, 5, 3), (1, 12, 4), (4, 15)),  # dense (5, 3, 4) permuted by (2, 0, 1)
        ((4, 5, 3), (1, 12, 4), (20, 3)),
        ((2, 3), (3, 2), (6,)),
        ((1, 1, 1), (9, 8, 7), (1,)),
        ((1, 1, 1), (9, 8, 7), ()),
        ((), (), (1, 1, 1)),
        ((3, 0, 2), (0, 0, 0), (-1, 3)),
        ((3, 0, 2), (0, 0, 0), (0, 7)),
        ((2, 2), (0, 1), (4,)),
        ((2, 2), (0, 1), (2, 1, 2)),
    ],
)
def test_reshaped_table_against_numpy(shape, strides, target):
    layout = StridedLayout(shape, strides, 4)
    view = numpy_view(layout)
    try:
        expected = view.reshape(target, copy=False)
    except ValueError:
        with pytest.raises(ValueError):
            layout.reshaped(target)
    else:
        assert_same_mapping(layout.reshaped(target), expected)


@FAST
@given(layouts())
def test_squeezed_matches_squeeze(layout):
    # zero-volume layouts keep NumPy's shape (DECISIONS 11), not the reference's (0,)
    assert_same_mapping(layout.squeezed(), numpy_view(layout).squeeze())


@FAST
@given(st.data())
def test_unsqueezed_matches_expand_dims(data):
    layout = data.draw(layouts())
    k = data.draw(st.integers(0, min(4, 64 - layout.ndim)))
    out_ndim = layout.ndim + k
    axes = []
    if out_ndim:
        axis = st.integers(0, out_ndim - 1)
        axes = data.draw(st.lists(axis, min_size=k, max_size=k, unique=True))
    axes = [a - out_ndim if data.draw(st.booleans()) else a for a in axes]
    view = numpy_view(layout)
    if len(axes) == 1 and data.draw(st.booleans()):
        result, expected = layout.unsqueezed(axes[0]), np.expand_dims(view, axes[0])
    else:
        result, expected = layout.unsqueezed(tuple(axes)), np.expand_dims(view, tuple(axes))
    assert_same_mapping(result, expected)


@FAST
@given(st.data())
def test_broadcast_to_matches_numpy(data):
    layout = data.draw(layouts())
    target = data.draw(broadcast_targets(layout.shape))
    result = layout.broadcast_to(target)
    assert_same_mapping(result, np.broadcast_to(numpy_view(layout), target))


@FAST
@given(st.data())
def test_broadcast_to_refuses_what_numpy_refuses(data):
    layout = data.draw(layouts(ndim=data.draw(st.integers(0, 4))))
    target = tuple(data.draw(st.lists(st.integers(0, 4), max_size=6)))
    view = numpy_view(layout)
    try:
        expected = np.broadcast_to(view, target)
    except ValueError:
        with pytest.raises(ValueError, match="broadcast"):
            layout.broadcast_to(target)
    else:
        assert_same_mapping(layout.broadcast_to(target), expected)


def _can_numpy_merge(view, shape, axis):
    """Whether NumPy can view ``view`` with axes ``axis`` and ``axis + 1`` of shape merged."""
    merged = shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2 :]
    try:
        view.reshape(merged, copy=False)
    except ValueError:
        return False
    return True


@FAST
@given(st.data())
def test_flattened_preserves_c_order_and_merges_maximally(data):
    layout = data.draw(layouts())
    view = numpy_view(layout)
    if layout.ndim and data.draw(st.booleans()):
        start = data.draw(st.integers(-layout.ndim, layout.ndim - 1))
        end = data.draw(st.integers(-layout.ndim, layout.ndim - 1))
        result = layout.flattened(start, end)
        first, last = start % layout.ndim, end % layout.ndim
    else:
        result = layout.flattened()
        first, last = 0, layout.ndim - 1
    # the C-order enumeration is unchanged: offsets equal the original view's ravel
    assert np.array_equal(layout_offsets(result), np.ravel(view))
    assert_properties(result)
    assert_zero_volume_rule(result)
    assert result.itemsize == layout.itemsize
    if layout.ndim == 0:
        assert (result.shape, result.strides) == ((1,), (1,))
        return
    if last <= first:
        assert result.shape == layout.shape
        return
    # axes outside [first, last] are untouched; inside, no neighbours NumPy could merge
    kept_after = layout.ndim - 1 - last
    assert result.shape[:first] == layout.shape[:first]
    assert result.shape[len(result.shape) - kept_after :] == layout.shape[last + 1 :]
    reshaped = view.reshape(result.shape, copy=False)
    assert np.array_equal(reshaped.ravel(), np.ravel(view))
    for axis in range(first, len(result.shape) - kept_after - 1):
        assert not _can_numpy_merge(reshaped, result.shape, axis), (layout, result, axis)


@FAST
@given(st.data())
def test_flattened_axis_mask_flattens_alike(data):
    layout = data.draw(layouts())
    mask = layout.flattened_axis_mask()
    assert layout.flattened(mask=mask) == layout.flattened()
    # any second layout of the same shape: the ANDed mask flattens both to one shape
    strides = data.draw(st.lists(st.integers(-9, 9), min_size=layout.ndim, max_size=layout.ndim))
    other = StridedLayout(layout.shape, strides, layout.itemsize)
    both = mask & other.flattened_axis_mask()
    first, second = layout.flattened(mask=both), other.flattened(mask=both)
    assert first.shape == second.shape
    assert np.array_equal(layout_offsets(first), layout_offsets(layout))
    assert np.array_equal(layout_offsets(second), layout_offsets(other))


@FAST
@given(st.data())
def test_dense_matches_numpy_empty(data):
    shape = data.draw(shapes())
    itemsize = data.draw(itemsizes)
    kind = data.draw(st.sampled_from(["C", "F", "perm"]))
    if kind == "perm":
        order = data.draw(permutations_of(len(shape)))
        stored = np.empty([shape[a] for a in order], dtype=np.int64)
        expected = stored.transpose(np.argsort(order))
        layout = StridedLayout.dense(shape, itemsize, stride_order=order)
    else:
        expected = np.empty(shape, dtype=np.int64, order=kind)
        layout = StridedLayout.dense(shape, itemsize, stride_order=kind)
    _assert_dense_like(layout, expected, shape, itemsize)


def _assert_dense_like(layout, expected, shape, itemsize):
    """``layout`` is dense with ``shape``; with ``expected`` (a NumPy array), its strides."""
    assert layout.shape == shape and layout.itemsize == itemsize
    assert layout.slice_offset == 0
    assert_zero_volume_rule(layout)
    if 0 in shape:  # DECISIONS 11: dense layouts of zero volume have all-zero strides
        assert layout.strides == (0,) * len(shape)
    if expected is not None:
        strides = tuple(s // expected.itemsize for s in expected.strides)
        assert meaningful_strides(shape, layout.strides) == meaningful_strides(shape, strides)
    assert layout.is_dense and layout.is_unique
    assert sorted(layout_offsets(layout).tolist()) == list(range(layout.volume))
    assert_properties(layout)


def _has_stride_ties(layout):
    """Whether two axes of extent above 1 share ``abs(stride)`` (order K is then a choice)."""
    strides = meaningful_strides(layout.shape, layout.strides)
    return strides is not None and len({abs(s) for s in strides}) != len(strides)


@FAST
@given(st.data())
def test_dense_like_and_to_dense_match_numpy_empty_like(data):
    layout = data.draw(layouts())
    order = data.draw(st.sampled_from(["K", "C", "F", "perm"]))
    if order == "perm":
        perm = data.draw(permutations_of(layout.ndim))
        expected = np.empty([layout.shape[a] for a in perm]).transpose(np.argsort(perm))
        result = StridedLayout.dense_like(layout, perm)
        assert layout.to_dense(list(perm)) == result
    else:
        expected = np.empty_like(numpy_view(layout), order=order)
        result = StridedLayout.dense_like(layout, order)
        assert layout.to_dense(order) == result
    if order == "K" and _has_stride_ties(layout):
        # NumPy breaks ties of abs(stride) by axis index, the reference (and layoutkit)
        # by larger extent first: both are dense, the order between tied axes differs
        expected = None
    _assert_dense_like(result, expected, layout.shape, layout.itemsize)
    if order == "K" and layout.is_dense and (layout.volume or not any(layout.strides)):
        assert result is layout  # a zero volume with other strides is not passed on


@FAST
@given(st.data())
def test_repacked_matches_numpy_dtype_view(data):
    layout = data.draw(layouts())
    new_itemsize = data.draw(itemsizes)
    keep_dim = data.draw(st.booleans())
    axis = data.draw(st.integers(-layout.ndim, layout.ndim - 1)) if layout.ndim else -1
    view, origin = numpy_byte_view(layout)
    try:
        if layout.ndim:
            moved = np.moveaxis(view, axis, -1).view(f"V{new_itemsize}")
            expected = np.moveaxis(moved, -1, axis)
        else:
            expected = view.view(f"V{new_itemsize}")
    except ValueError:
        with pytest.raises(ValueError):
            layout.repacked(new_itemsize, axis=axis, keep_dim=keep_dim)
        return
    try:
        result = layout.repacked(new_itemsize, axis=axis, keep_dim=keep_dim)
    except ValueError:
        # NumPy keeps byte strides; a layout counts in elements of the new size, so
        # packing also needs the new itemsize to be a multiple of the old one (DECISIONS 7)
        # and the slice offset and other strides to be divisible.
        assert _repack_needs_divisibility(layout, new_itemsize, axis)
        return
    if new_itemsize > layout.itemsize and not keep_dim and expected.shape[axis] == 1:
        expected = np.squeeze(expected, axis)
    assert result.shape == expected.shape
    assert result.itemsize == new_itemsize
    assert_zero_volume_rule(result)
    assert_properties(result)
    if result.volume:
        assert result.slice_offset_in_bytes == address(expected) - origin
        assert np.array_equal(
            element_offsets(result.shape, result.strides_in_bytes, result.slice_offset_in_bytes),
            element_offsets(expected.shape, expected.strides, address(expected) - origin),
        )


def _repack_needs_divisibility(layout, new_itemsize, axis):
    old = layout.itemsize
    if new_itemsize <= old:
        return old % new_itemsize != 0
    if new_itemsize % old:
        return True
    axis %= layout.ndim
    byte_strides = [
        s * old for i, (e, s) in enumerate(zip(layout.shape, layout.strides, strict=True)) if i != axis and e != 1
    ]
    return any(b % new_itemsize for b in [layout.slice_offset * old, *byte_strides])


@FAST
@given(dense_layouts())
def test_dense_layouts_are_dense(layout):
    assert layout.is_dense and layout.is_unique and layout.is_contiguous_any
    assert sorted(layout_offsets(layout).tolist()) == list(range(layout.volume))


@FAST
@given(st.data())
def test_empty_slices_keep_numpys_strides_and_offset(data):
    layout = data.draw(layouts())
    assume(layout.ndim and layout.volume)
    axis = data.draw(st.integers(0, layout.ndim - 1))
    index = (slice(None, None, -1),) * axis + (slice(2, 2, data.draw(st.sampled_from([1, -2]))),)
    whole = numpy_view(layout)
    result, view = layout[index], whole[index]
    assert result.volume == 0 and result.shape == view.shape
    assert result.strides == tuple(s // view.itemsize for s in view.strides)
    assert result.slice_offset == layout.slice_offset + (address(view) - address(whole)) // 8
    assert_zero_volume_rule(result)


@FAST
@given(st.data())
def test_fast_and_full_paths_agree(data):
    """Plain tuples go straight to the kernels; lists and NumPy integers take the full
    checks. Both give the same layouts with the same derived values."""
    layout = data.draw(layouts())
    shape, strides, itemsize = layout.shape, layout.strides, layout.itemsize
    as_numpy = [np.int64(v) for v in shape]
    pairs = [
        (StridedLayout(shape, strides, itemsize), StridedLayout(list(shape), list(strides), itemsize)),
        (StridedLayout(shape, None, itemsize), StridedLayout(as_numpy, None, np.int32(itemsize))),
        (StridedLayout.dense(shape, itemsize, "F"), StridedLayout.dense(as_numpy, itemsize, "F")),
    ]
    order = data.draw(permutations_of(layout.ndim))
    pairs.append((StridedLayout.dense(shape, itemsize, order),
                  StridedLayout.dense(shape, itemsize, list(order))))
    target = data.draw(broadcast_targets(shape))
    pairs.append((layout.broadcast_to(target), layout.broadcast_to(list(target))))
    dense = StridedLayout.dense(shape, itemsize)
    reshape = data.draw(reshape_targets(dense.volume))
    pairs.append((dense.reshaped(reshape), dense.reshaped([np.int64(e) for e in reshape])))
    for fast, full in pairs:
        assert (fast.shape, fast.strides, fast.slice_offset) == (full.shape, full.strides, full.slice_offset)
        for name in ("volume", "offset_bounds", "is_unique", "is_contiguous_any", "stride_order"):
            assert getattr(fast, name) == getattr(full, name), name
        if fast.volume <= 4096:
            assert_properties(fast)
