"""The copy planner on its own: every plan, executed by NumPy, equals ``np.copyto``."""

import numpy as np
import pytest
from helpers.copy_cases import copy_cases, expected_bytes
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutkit.copy.plan import (
    COPY2D,
    ELEMENTWISE,
    FILL,
    MEMCPY,
    NONE,
    STAGE_DEVICE,
    STAGE_HOST,
    TRANSPOSE,
    broadcast_source_strides,
    byte_extent,
    plan_copy,
)


def address(array):
    return array.__array_interface__["data"][0]


def element_strides(array):
    return tuple(s // array.itemsize for s in array.strides)


def plan_for(dst, src, **where):
    src_strides = broadcast_source_strides(dst.shape, src.shape, element_strides(src))
    return plan_copy(
        dst.shape,
        element_strides(dst),
        src_strides,
        dst.itemsize,
        address(dst),
        address(src),
        **where,
    )


def run_with_numpy(plan, dst_buffer, dst_addr, src_buffer, src_addr):
    """Execute ``plan`` with NumPy byte views: the reference executor."""
    if plan.method == NONE:
        return

    def view(buffer, addr, offset, strides):
        start = addr + offset - buffer.ctypes.data
        return np.lib.stride_tricks.as_strided(
            buffer[start:], shape=plan.shape + (plan.unit,), strides=strides + (1,)
        )

    src_unit = plan.src_unit or plan.unit
    src_view = np.lib.stride_tricks.as_strided(
        src_buffer[src_addr + plan.src_offset - src_buffer.ctypes.data :],
        shape=plan.shape + (src_unit,),
        strides=plan.src_strides + (1,),
    )
    if plan.method == FILL:  # each destination unit is the source unit repeated
        src_view = np.concatenate([src_view] * (plan.unit // src_unit), axis=-1)
    view(dst_buffer, dst_addr, plan.dst_offset, plan.dst_strides)[...] = src_view


@settings(max_examples=400, deadline=None)
@given(copy_cases(), st.sampled_from([(False, False), (True, True)]))
def test_plan_moves_the_same_bytes_as_copyto(case, where):
    dst_buffer, dst, src_buffer, src = case
    expected = expected_bytes(dst_buffer, dst, src)
    plan = plan_for(dst, src, dst_on_device=where[0], src_on_device=where[1])
    run_with_numpy(plan, dst_buffer, address(dst), src_buffer, address(src))
    np.testing.assert_array_equal(dst_buffer, expected)


@settings(max_examples=300, deadline=None)
@given(copy_cases())
def test_plan_units_are_aligned_and_strides_sorted(case):
    _, dst, _, src = case
    plan = plan_for(dst, src)
    assert plan.unit in (1, 2, 4, 8, 16)
    assert plan.nbytes == dst.size * dst.itemsize
    if plan.method == NONE:
        return
    for value in (
        *plan.dst_strides,
        *plan.src_strides,
        address(dst) + plan.dst_offset,
        address(src) + plan.src_offset,
    ):
        assert value % plan.unit == 0
    assert all(e > 1 for e in plan.shape)
    assert list(plan.dst_strides) == sorted(plan.dst_strides, reverse=True)
    assert all(s > 0 for s in plan.dst_strides)


@pytest.mark.parametrize(
    ("shape", "dst", "src", "itemsize", "method", "coalesced"),
    [
        ((4, 6), (6, 1), (6, 1), 4, MEMCPY, (6,)),
        ((), (), (), 12, MEMCPY, (3,)),
        ((0, 3), (3, 1), (1, 0), 4, NONE, (0,)),
        ((8, 16), (16, 1), (1, 8), 4, TRANSPOSE, (8, 16)),
        ((8, 16), (16, 1), (-1, 8), 4, TRANSPOSE, (8, 16)),
        ((8, 16), (16, 1), (32, 1), 4, ELEMENTWISE, (8, 4)),
        ((8, 16), (16, 1), (0, 1), 4, ELEMENTWISE, (8, 4)),
        ((8, 16), (16, 1), (0, 0), 4, ELEMENTWISE, (128,)),
        ((5, 7), (7, 1), (14, 2), 1, ELEMENTWISE, (35,)),
        ((2, 1, 3), (3, 100, 1), (3, 7, 1), 2, MEMCPY, (3,)),
        ((3, 5), (-5, -1), (5, 1), 4, ELEMENTWISE, (15,)),
    ],
)
def test_plan_methods(shape, dst, src, itemsize, method, coalesced):
    plan = plan_copy(shape, dst, src, itemsize)
    assert plan.method == method
    assert plan.shape == coalesced
    assert plan.nbytes == int(np.prod(shape)) * itemsize


def test_transpose_names_the_source_fast_axis_and_a_tile():
    plan = plan_copy((6, 8, 16), (128, 16, 1), (128, 1, 8), 2)
    assert plan.method == TRANSPOSE
    assert plan.row_axes == (1,)
    assert plan.col_axes == (2,)
    assert plan.tile > 0
    assert plan.shape == (6, 8, 16)


def test_transpose_folds_small_axes_into_the_tile():
    # a 6-d permutation of 16**6 float16 elements: 16-unit axes fold into 256-unit edges
    src = np.empty((16,) * 6, np.float16).transpose(5, 3, 1, 4, 2, 0)
    dst = np.empty(src.shape, np.float16)
    plan = plan_copy(src.shape, element_strides(dst), element_strides(src), 2)
    assert plan.method == TRANSPOSE
    assert plan.row_axes == (0, 3)
    assert plan.col_axes == (5, 4)


def test_device_broadcast_along_rows_is_a_fill_of_wide_units():
    plan = plan_copy((64, 64), (64, 1), (1, 0), 4, dst_on_device=True, src_on_device=True)
    assert (plan.method, plan.unit, plan.src_unit) == (FILL, 16, 4)
    assert plan.shape == (64, 16)
    assert plan_copy((64, 64), (64, 1), (1, 0), 4).method == ELEMENTWISE  # host: no fill


def test_misaligned_pointer_narrows_the_unit():
    assert plan_copy((64,), (1,), (1,), 4, dst_ptr=0, src_ptr=0).unit == 16
    assert plan_copy((64,), (1,), (1,), 4, dst_ptr=4, src_ptr=0).unit == 4
    assert plan_copy((63,), (1,), (1,), 4, dst_ptr=0, src_ptr=0).unit == 4


@pytest.mark.parametrize(
    ("shape", "dst", "src", "method"),
    [
        ((4, 6), (6, 1), (6, 1), MEMCPY),
        ((4, 6), (6, 1), (12, 1), COPY2D),
        ((4, 6), (1, 4), (6, 1), STAGE_DEVICE),
        ((4, 6), (6, 1), (12, 2), STAGE_HOST),
    ],
)
def test_host_to_device_methods(shape, dst, src, method):
    plan = plan_copy(shape, dst, src, 4, dst_on_device=True, src_on_device=False)
    assert plan.method == method


def test_device_to_host_stages_on_the_device_when_the_host_side_is_dense():
    plan = plan_copy((4, 6), (6, 1), (1, 4), 4, dst_on_device=False, src_on_device=True)
    assert plan.method == STAGE_DEVICE
    plan = plan_copy((4, 6), (1, 8), (6, 1), 4, dst_on_device=False, src_on_device=True)
    assert plan.method == STAGE_HOST


def test_broadcast_source_strides_follow_numpy():
    assert broadcast_source_strides((2, 3, 4), (3, 1), (5, 9)) == (0, 5, 0)
    with pytest.raises(
        ValueError, match=r"src shape \(2,\) cannot be broadcast to dst shape \(3,\)"
    ):
        broadcast_source_strides((3,), (2,), (1,))


@pytest.mark.parametrize(
    ("shape", "strides", "itemsize", "extent"),
    [
        ((3, 4), (4, 1), 2, (0, 24)),
        ((3, 4), (-4, -1), 1, (-11, 1)),
        ((), (), 8, (0, 8)),
        ((2, 0), (1, 1), 4, (0, 0)),
        ((5,), (0,), 4, (0, 4)),
    ],
)
def test_byte_extent(shape, strides, itemsize, extent):
    assert byte_extent(shape, strides, itemsize) == extent


def test_transpose_kernel_follows_what_fills_a_tile():
    # 16384**2 float32 fills 64-unit shared-memory tiles
    big = plan_copy((16384, 16384), (16384, 1), (1, 16384), 4)
    assert (big.tile, big.vector) == (64, 0)
    # a 32**5 float32 permutation: 32-unit rows cannot, 4 x 4 register blocks can
    src = np.empty((32,) * 5, np.float32).transpose(4, 2, 0, 3, 1)
    dst = np.empty(src.shape, np.float32)
    blocks = plan_copy(src.shape, element_strides(dst), element_strides(src), 4)
    assert blocks.vector == 16
    # 13 columns: no 4 x 4 block fits, and 32-unit tiles are filled more than 64-unit ones
    small = plan_copy((13, 40), (40, 1), (1, 13), 4)
    assert (small.tile, small.vector) == (32, 0)
    # float16 and uint8 take blocks wherever they fit; not with a misaligned address
    assert plan_copy((4096, 4096), (4096, 1), (1, 4096), 2).vector == 16
    assert plan_copy((4096, 4096), (4096, 1), (1, 4096), 1).vector == 8
    assert plan_copy((4096, 4096), (4096, 1), (1, 4096), 1, dst_ptr=4).vector == 0
