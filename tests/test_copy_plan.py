"""The copy planner on its own: every plan, executed by NumPy, equals ``np.copyto``, and
the kernels chosen follow the shape of the problem."""

import numpy as np
import pytest
from helpers.copy_cases import copy_cases, expected_bytes, layout_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layoutkit import StridedLayout
from layoutkit.copy import plan as copy_plan
from layoutkit.copy.plan import (
    BLOCK,
    COPY2D,
    DIRECT,
    GATHER,
    HOST,
    KERNEL,
    MEMCPY,
    NONE,
    STAGED,
    TILED,
    coalesced,
    divider,
    plan_copy,
)

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def address(array):
    return array.__array_interface__["data"][0]


def plan_for(dst, src, **where):
    src_layout = layout_of(src)
    if src.shape != dst.shape:
        src_layout = src_layout.broadcast_to(dst.shape)
    return plan_copy(layout_of(dst), src_layout, address(dst), address(src), **where)


def run_with_numpy(plan, dst_buffer, dst_addr, src_buffer, src_addr):
    """Execute a plan's coalesced problem with NumPy byte views: the reference executor."""
    if plan.method == NONE:
        return

    def view(buffer, addr, offset, strides):
        start = addr + offset - buffer.ctypes.data
        return np.lib.stride_tricks.as_strided(
            buffer[start:], shape=plan.shape + (plan.unit,), strides=strides + (1,)
        )

    view(dst_buffer, dst_addr, plan.dst_offset, plan.dst_strides)[...] = view(
        src_buffer, src_addr, plan.src_offset, plan.src_strides
    )


@FAST
@given(copy_cases(), st.sampled_from([(False, False), (True, True), (True, False)]))
def test_plan_moves_the_same_bytes_as_copyto(case, where):
    dst_buffer, dst, src_buffer, src = case
    expected = expected_bytes(dst_buffer, dst, src)
    plan = plan_for(dst, src, dst_on_device=where[0], src_on_device=where[1])
    run_with_numpy(plan, dst_buffer, address(dst), src_buffer, address(src))
    np.testing.assert_array_equal(dst_buffer, expected)


@FAST
@given(copy_cases())
def test_plan_units_are_aligned_and_strides_sorted(case):
    _, dst, _, src = case
    plan = plan_for(dst, src, dst_on_device=True, src_on_device=True)
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
    assert (plan.method == KERNEL) == bool(plan.launches)


def dense(shape, itemsize, order="C"):
    return StridedLayout.dense(shape, itemsize, stride_order=order)


def permuted(shape, itemsize, axes):
    """The layout of ``np.empty(shape).transpose(axes)``."""
    return dense(shape, itemsize).permuted(axes)


def kernels(dst, src):
    return [launch.kernel for launch in plan_copy(dst, src, 0, 0, True, True).launches]


def test_coalesced_examples():
    d = dense((3, 4), 2)
    assert coalesced(d, d) == ((24,), (1,), (1,), 0, 0)
    assert coalesced(d, permuted((4, 3), 2, (1, 0))) == ((3, 4, 2), (8, 2, 1), (2, 6, 1), 0, 0)


@pytest.mark.parametrize(
    ("dst", "src", "method", "shape", "unit"),
    [
        (dense((4, 6), 4), dense((4, 6), 4), MEMCPY, (6,), 16),
        (dense((), 12), dense((), 12), MEMCPY, (3,), 4),
        (dense((8, 16), 4), permuted((16, 8), 4, (1, 0)), HOST, (8, 16), 4),
        (dense((8, 16), 4), dense((8, 32), 4)[:, ::2], HOST, (128,), 4),
        (dense((8, 16), 4), dense((16,), 4).broadcast_to((8, 16)), HOST, (8, 4), 16),
        (dense((3, 5), 4)[::-1, ::-1], dense((3, 5), 4), HOST, (15,), 4),
    ],
)
def test_host_plans(dst, src, method, shape, unit):
    plan = plan_copy(dst, src)
    assert (plan.method, plan.shape, plan.unit) == (method, shape, unit)


def test_device_kernels_by_the_shape_of_the_problem():
    # a large 2-d transpose: square tiles of 64 x 64 float32 (256-byte runs on both sides)
    plan = plan_copy(dense((16384, 16384), 4), permuted((16384, 16384), 4, (1, 0)), 0, 0,
                     True, True)  # fmt: skip
    (launch,) = plan.launches
    assert launch.kernel == TILED and "64x64" in launch.text
    # (N, 5) float32 -> (5, N): a thin 5 x 512 tile, the 5-element axis whole
    (launch,) = plan_copy(dense((5, 6710910), 4), permuted((6710910, 5), 4, (1, 0)), 0, 0,
                          True, True).launches  # fmt: skip
    assert launch.kernel == TILED and "5x512" in launch.text
    # HWC -> CHW uint8: the deinterleave block, one 48-byte source run per thread
    (launch,) = plan_copy(dense((3, 4000, 4000), 1), permuted((4000, 4000, 3), 1, (2, 0, 1)),
                          0, 0, True, True).launches  # fmt: skip
    assert launch.kernel == BLOCK and "3x16 v16/16" in launch.text
    # CHW -> HWC: the interleave mirror
    assert kernels(dense((4000, 4000, 3), 1), permuted((3, 4000, 4000), 1, (1, 2, 0))) == [BLOCK]
    # uint8 transposes take 8 x 8 blocks; odd extents leave edges planned without blocks
    assert kernels(dense((1024, 1024), 1), permuted((1024, 1024), 1, (1, 0))) == [BLOCK]
    odd = permuted((1024, 1032), 1, (1, 0))[:1029]  # 1029 rows: 5 left over by 8 x 8 blocks
    assert kernels(dense((1029, 1024), 1), odd) == [BLOCK, GATHER]  # 5-byte runs: no tile
    # contiguous rows, strided rows, a broadcast row and a broadcast column
    assert kernels(dense((64, 64), 4), dense((64, 128), 4)[:, ::2]) == [DIRECT]
    assert kernels(dense((64, 64), 4), dense((64,), 4).broadcast_to((64, 64))) == [DIRECT]
    column = plan_copy(dense((64, 64), 4), dense((64, 1), 4).broadcast_to((64, 64)), 0, 0,
                       True, True)  # fmt: skip
    assert column.launches[0].kernel == DIRECT and "<-4B" in column.launches[0].text
    # 12-byte records transposed: the short common run is folded into a tile
    assert kernels(dense((2000, 1000, 3), 4), permuted((1000, 2000, 3), 4, (1, 0, 2))) == [TILED]


def test_short_runs_on_one_side_are_gathered():
    # 6-byte rows 12 bytes apart (every other half of a padded row): no tile of runs that
    # short, each element's offsets from its number
    padded = dense((2**20, 6), 2)[:, :3]
    (launch,) = plan_copy(dense((2**20, 3), 2), padded, 0, 0, True, True).launches
    assert launch.kernel == GATHER and launch.text == "gather/2B 1048576x3"
    # ... a permutation whose tile would write 10-byte destination runs (seed 8026 case 81
    # of the random benchmark, smaller)
    src = StridedLayout((8, 6, 4, 38, 5), (760, 6080, 1, 4, 152), 2)
    assert kernels(dense((8, 6, 4, 38, 5), 2), src) == [GATHER]
    # long runs on both sides keep their tile
    assert kernels(dense((4096, 4096), 4), permuted((4096, 4096), 4, (1, 0))) == [TILED]


@pytest.mark.parametrize(
    ("problem", "kernel"),
    [
        # (coalesced shape, destination strides, source strides, unit) of random benchmark
        # cases measured on the H200 (plan.GATHER_RULES): 3-byte source runs (uint8 HWC ->
        # CHW with a reversed channel axis), whose sectors come back a few rows later
        (((3, 5060790, 7), (35425530, 7, 1), (-1, 3, 15182373), 1), GATHER),
        # 2-element runs of float16 also read 56 KB apart along the destination's fastest
        # axis, their sectors' other bytes 15 MB of destination later: the tile stays
        (((2, 10, 350, 10984), (76888000, 7688800, 21968, 2), (2, -8, -160, 56000), 2), TILED),
        # 7-byte runs whose sectors come back within the window, but a warp's 32 loads
        # fall in 32 sectors: the tile stays
        (((2, 54, 7, 4, 24443), (36957816, 684404, 97772, 24443, 1),
          (-73918656, 7, -1, 9239832, 378), 1), TILED),
    ],
)
def test_short_source_runs_gather_where_the_window_reads_well(problem, kernel):
    assert [launch.kernel for launch in copy_plan.device_launches(*problem)] == [kernel]


def test_long_runs_that_gather_reads_as_well_are_gathered():
    # rows of 961 float32 with a pitch of 964: the tile of 256-unit runs wastes a fourth
    # of its last run per row; gather reads each row as the source's own order would
    pitched = dense((25470, 964), 4)[:, :961]
    assert kernels(dense((25470, 961), 4), pitched) == [GATHER]
    # 12 float16 planes interleaved: a block of 8-byte source vectors yields to gather
    planes = permuted((12, 2**20), 2, (1, 0))
    assert kernels(dense((2**20, 12), 2), planes) == [GATHER]
    # a row broadcast to every row keeps its wide direct fill; a column broadcast along
    # 2-byte runs that cannot widen is gathered
    row = dense((8192,), 4).broadcast_to((8192, 8192))
    assert kernels(dense((8192, 8192), 4), row) == [DIRECT]
    column = dense((10391, 1), 2).broadcast_to((10391, 3417))
    assert kernels(dense((10391, 3417), 2), column) == [GATHER]
    # reversed uint8 runs, contiguous on both sides: gather's arithmetic per byte would cost
    reversed_runs = permuted((350, 2, 122828), 1, (1, 0, 2))[:, :, ::-1]
    assert kernels(dense((2, 350, 122828), 1), reversed_runs) == [DIRECT]


@given(st.integers(1, 2**31 - 1), st.integers(0, 2**31 - 1))
def test_gather_divisions_are_exact(extent, n):
    magic, shift = divider(extent)
    assert 0 < magic < 2**32
    assert ((n * magic >> 32) + n) >> shift == n // extent


@pytest.mark.parametrize("extent", [1, 2, 3, 5, 7, 641, 2**16 + 1, 2**30, 2**30 + 1, 2**31 - 1])
def test_gather_divisions_at_the_edges(extent):
    magic, shift = divider(extent)
    for n in (0, 1, extent - 1, extent, 2 * extent - 1, 2**31 - 2, 2**31 - 1):
        assert ((n * magic >> 32) + n) >> shift == n // extent, (extent, n)


def test_small_extents_fold_into_one_tile(monkeypatch):
    # a 6-d permutation of 4**6 float16: all six axes fold into the tile (which gather,
    # reading the whole problem in one block, would take)
    monkeypatch.setattr(copy_plan, "GATHER_RULES", ())
    copy_plan._plan.cache_clear()
    try:
        (launch,) = plan_copy(dense((4,) * 6, 2), permuted((4,) * 6, 2, (5, 3, 1, 4, 2, 0)), 0,
                              0, True, True).launches  # fmt: skip
    finally:
        copy_plan._plan.cache_clear()
    assert launch.kernel == TILED and launch.tiles == 1


def test_misaligned_pointer_narrows_the_unit():
    a = dense((64,), 4)
    assert plan_copy(a, a, 0, 0).unit == 16
    assert plan_copy(a, a, 4, 0).unit == 4
    b = dense((63,), 4)
    assert plan_copy(b, b).unit == 4


@pytest.mark.parametrize(
    ("dst", "src", "method"),
    [
        (dense((4, 6), 4), dense((4, 6), 4), MEMCPY),
        (dense((4, 160), 4), dense((4, 320), 4)[:, :160], COPY2D),
        (dense((4, 6), 4), dense((4, 12), 4)[:, :6], STAGED),  # rows too short
        (dense((4, 6), 4), permuted((6, 4), 4, (1, 0)), STAGED),
    ],
)
def test_host_to_device_methods(dst, src, method):
    assert plan_copy(dst, src, 0, 0, True, False).method == method
