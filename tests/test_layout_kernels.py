"""The integer kernels (compiled code's layout algebra) agree with ``StridedLayout``.

Python layouts compute in plain Python; ``@njit`` and ``@cuda.jit`` code runs the kernels
of ``layoutkit._kernels``. Both must give the same answer for every layout, so each test
here runs one kernel (compiled for the CPU) and the Python operation on the same random
layout. Layouts with huge strides (``extreme_layouts``) check that no kernel wraps around
in int64 where Python's integers cannot.
"""

import numpy as np
import pytest
from helpers.strategies import (
    basic_indices,
    broadcast_targets,
    extreme_layouts,
    layout_offsets,
    layouts,
    permutations_of,
    reshape_targets,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from layoutkit import StridedLayout
from layoutkit import _kernels as K

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT64_MAX = 2**63 - 1


def lay(layout):
    return np.array(layout.shape + layout.strides, dtype=np.int64)


def buffer(size):
    return np.zeros(max(size, 1), dtype=np.int64)


def kernel_order(layout):
    out = buffer(layout.ndim)
    K.stride_order(lay(layout), layout.ndim, out, 0)
    return tuple(out[: layout.ndim].tolist())


any_layouts = st.one_of(layouts(), extreme_layouts())


@FAST
@given(any_layouts)
def test_properties_agree(layout):
    n = layout.ndim
    packed = lay(layout)
    assert K.volume_of(packed, n) == layout.volume
    assert kernel_order(layout) == layout.stride_order
    assert np.uint64(K.merge_mask(packed, n) & (2**64 - 1)) == layout.flattened_axis_mask()
    if layout.volume:  # compiled callers answer True for a zero volume themselves
        order = np.array(layout.stride_order or (0,), dtype=np.int64)
        assert K.is_contiguous_c(packed, n) == layout.is_contiguous_c
        assert K.is_contiguous_f(packed, n) == layout.is_contiguous_f
        assert K.is_contiguous_along(packed, n, order, 0) == layout.is_contiguous_any
        if K.is_unique_nested(packed, n, order, 0):  # conservative: never says more
            assert layout.is_unique


def test_is_unique_nested_does_not_wrap_around():
    # offsets 0..1 + j * -2**62 + k * (2**62 + 1): index (0, 1, 1) and (1, 0, 0) share 1
    layout = StridedLayout((2, 3, 2), (1, -(2**62), 2**62 + 1), 1)
    order = np.array(layout.stride_order, dtype=np.int64)
    assert not K.is_unique_nested(lay(layout), 3, order, 0)
    assert not layout.is_unique
    offsets = layout_offsets_exact(layout)
    assert len(set(offsets)) < len(offsets)


def layout_offsets_exact(layout):
    """Every offset with Python ints (NumPy's int64 would wrap for these strides)."""
    offsets = [layout.slice_offset]
    for extent, stride in zip(layout.shape, layout.strides, strict=True):
        offsets = [o + i * stride for o in offsets for i in range(extent)]
    return offsets


@FAST
@given(extreme_layouts())
def test_is_unique_never_lies_for_huge_strides(layout):
    offsets = layout_offsets_exact(layout)
    assert layout.is_unique == (len(set(offsets)) == len(offsets))
    lo, hi = layout.offset_bounds
    if offsets:
        assert (lo, hi) == (min(offsets), max(offsets))
        assert lo * layout.itemsize >= -(2**63) and (hi + 1) * layout.itemsize <= INT64_MAX


def test_merge_mask_keeps_unmergeable_extents_apart():
    # zero volume (all strides 0): merging the first two axes would need extent 2**124
    layout = StridedLayout((2**62, 2**62, 0), None, 1)
    assert K.merge_mask(lay(layout), 3) == layout.flattened_axis_mask() == 0b100
    assert layout.flattened().shape == (2**62, 0)


@FAST
@given(st.data())
def test_dense_strides_agree(data):
    layout = data.draw(layouts())
    order = data.draw(permutations_of(layout.ndim))
    dense = StridedLayout.dense(layout.shape, layout.itemsize, order)
    out = buffer(layout.ndim)
    shape = np.array(layout.shape or (0,), dtype=np.int64)
    K.dense_strides(shape, layout.ndim, np.array(order or (0,), dtype=np.int64), out, 0)
    assert tuple(out[: layout.ndim].tolist()) == dense.strides


@FAST
@given(st.data())
def test_reshape_agrees(data):
    layout = data.draw(layouts())
    assume(layout.volume > 0)
    target = data.draw(reshape_targets(layout.volume))
    try:
        expected = layout.reshaped(target)
    except ValueError:
        expected = None
    shape = expected.shape if expected is not None else tuple(abs(e) for e in target)
    m, n = len(shape), layout.ndim
    out = buffer(2 * m + 2 * n)
    status = K.reshape(lay(layout), n, np.array(shape, dtype=np.int64), m, out, m)
    if expected is None:
        assert status != K.OK or -1 in target
    else:
        assert status == K.OK
        assert tuple(out[m : 2 * m].tolist()) == expected.strides


def test_reshape_with_a_wrong_volume_never_reads_past_the_shapes():
    layout = StridedLayout.dense((2, 3), 1)
    for shape in [(5,), (4, 4), (2, 2**40), (7, 1, 1)]:
        m = len(shape)
        out = buffer(2 * m + 4)
        assert K.reshape(lay(layout), 2, np.array(shape, dtype=np.int64), m, out, m) != K.OK


@FAST
@given(st.data())
def test_broadcast_agrees(data):
    layout = data.draw(layouts())
    target = data.draw(broadcast_targets(layout.shape))
    m = len(target)
    out = buffer(2 * m)
    status = K.broadcast(lay(layout), layout.ndim, np.array(target or (0,), dtype=np.int64), m, out, m)
    assert status == K.OK
    result = layout.broadcast_to(target)
    if result.volume:
        assert tuple(out[m : 2 * m].tolist()) == result.strides


@FAST
@given(st.data())
def test_slicing_agrees(data):
    layout = data.draw(layouts())
    index = data.draw(basic_indices(layout.shape, allow_new_axes=False, allow_ellipsis=False))
    items = index if isinstance(index, tuple) else (index,)
    result = layout[index]
    offset = layout.slice_offset
    shape, strides = [], []
    for axis, item in enumerate(items):
        e, s = layout.shape[axis], layout.strides[axis]
        if isinstance(item, slice):
            status, offset, length, stride = K.slice_one(
                offset, e, s, item.start or 0, item.stop or 0, item.step or 1,
                item.start is not None, item.stop is not None,
            )
            assert status == K.OK
            assert (K.slice_axis(e, item.start or 0, item.stop or 0, item.step or 1,
                                 item.start is not None, item.stop is not None)[1]
                    == len(range(*item.indices(e))))
            shape.append(length)
            strides.append(stride)
        else:
            status, offset = K.step_offset(offset, item + e if item < 0 else item, s)
            assert status == K.OK
    shape += layout.shape[len(items):]
    strides += layout.strides[len(items):]
    assert tuple(shape) == result.shape
    if result.volume:
        assert offset == result.slice_offset
        assert tuple(strides) == result.strides


@FAST
@given(any_layouts, st.sampled_from([1, 2, 4, 8, 16, 32]), st.data())
def test_repack_agrees(layout, itemsize, data):
    assume(layout.ndim)
    axis = data.draw(st.integers(0, layout.ndim - 1))
    n = layout.ndim
    out = buffer(2 * n)
    old = layout.itemsize
    divides = itemsize % old == 0 if itemsize > old else old % itemsize == 0
    assume(itemsize != old and divides)
    status, offset = K.repack(lay(layout), n, layout.slice_offset, old, itemsize, axis, out, n)
    try:
        expected = layout.repacked(itemsize, axis=axis)
    except (ValueError, OverflowError):
        assert status != K.OK
        return
    assert status == K.OK
    if expected.volume:
        assert (tuple(out[:n].tolist()), tuple(out[n : 2 * n].tolist()), offset) == (
            expected.shape, expected.strides, expected.slice_offset
        )


def test_repack_reports_an_extent_that_would_wrap():
    layout = StridedLayout((2**10, 2**52), (0, 1), 8)  # a broadcast: 2**62 elements
    out = buffer(4)
    status, _ = K.repack(lay(layout), 2, 0, 8, 1, 1, out, 2)
    assert status == K.OVERFLOW_VOLUME  # 2**65 elements of 1 byte
    with pytest.raises(OverflowError, match="volume"):
        layout.repacked(1)


@FAST
@given(any_layouts, st.sampled_from([1, 2, 3, 8, 12, 16, 2**31, 3 * 2**31, 2**62, INT64_MAX]),
       st.integers(0, 2**40), st.data())
def test_max_compatible_itemsize_agrees(layout, max_itemsize, data_ptr, data):
    assume(layout.ndim and max_itemsize >= layout.itemsize)
    axis = data.draw(st.integers(0, layout.ndim - 1))
    expected = layout.max_compatible_itemsize(max_itemsize, data_ptr, axis)
    assert K.max_compatible_itemsize(
        lay(layout), layout.ndim, layout.slice_offset, layout.itemsize, max_itemsize,
        data_ptr % max_itemsize, axis,
    ) == expected
    assert expected < 2**31
    assert layout.repacked(expected, data_ptr, axis).itemsize == expected


@pytest.mark.parametrize(
    ("shape", "itemsize", "max_itemsize", "expected"),
    [
        ((4096,), 1, 2**31, 4096),
        ((2**32,), 1, 2**31, 2**30),  # would be 2**31: the largest below the limit
        ((2**32,), 1, 2**62, 2**30),
        ((3 * 2**31,), 1, 3 * 2**31, 3 * 2**29),
        ((2**20,), 4, 2**40, 2**22),
    ],
)
def test_max_compatible_itemsize_beyond_the_itemsize_limit(shape, itemsize, max_itemsize, expected):
    layout = StridedLayout.dense(shape, itemsize)
    assert layout.max_compatible_itemsize(max_itemsize) == expected
    assert layout.repacked(expected).itemsize == expected
    assert K.max_compatible_itemsize(lay(layout), 1, 0, itemsize, max_itemsize, 0, 0) == expected


def test_layout_offsets_helper_matches_exact_offsets():
    layout = StridedLayout((2, 3), (3, -1), 1)[:, ::-1]
    assert layout_offsets(layout).tolist() == layout_offsets_exact(layout)
