"""Every GPU copy kernel specialisation is typed and lowered to PTX for sm_90 (no GPU needed)."""

import pytest
from numba import cuda
from numba import types as nt

from layoutkit.copy import gpu
from layoutkit.copy.plan import TRANSPOSE_TILE

UNIT_TYPES = {
    1: nt.uint8,
    2: nt.uint16,
    4: nt.uint32,
    8: nt.uint64,
    16: nt.UniTuple(nt.uint64, 2),
}
ACCESS = {1: "u8", 2: "u16", 4: "u32", 8: "u64", 16: "v2.u64"}


def int_tuple(n):
    return nt.UniTuple(nt.int64, n)


def ptx_of(function, signature):
    ptx, _ = cuda.compile_ptx(function, signature, cc=(9, 0))
    return ptx


@pytest.mark.parametrize("unit", sorted(UNIT_TYPES))
@pytest.mark.parametrize("ndim", [1, 2, 3, 4, 6])
def test_elementwise_kernel_lowers(unit, ndim):
    unit_type = UNIT_TYPES[unit]
    signature = (nt.int64, nt.int64, *[int_tuple(ndim)] * 3, nt.int64, unit_type, unit_type)
    ptx = ptx_of(gpu.elementwise_kernel(ndim).py_func, signature)
    assert f"ld.global.{ACCESS[unit]}" in ptx
    assert f"st.global.{ACCESS[unit]}" in ptx
    assert ".local" not in ptx  # offsets and units stay in registers


@pytest.mark.parametrize(
    ("src_unit", "unit"), [(1, 2), (1, 16), (2, 8), (4, 16), (8, 16), (2, 4), (4, 8)]
)
def test_fill_kernel_lowers(src_unit, unit):
    signature = (
        nt.int64, nt.int64, *[int_tuple(2)] * 3, nt.int64, UNIT_TYPES[unit], UNIT_TYPES[src_unit],
    )  # fmt: skip
    ptx = ptx_of(gpu.elementwise_kernel(2, src_unit, unit).py_func, signature)
    assert f"ld.global.{ACCESS[src_unit]}" in ptx
    assert f"st.global.{ACCESS[unit]}" in ptx


@pytest.mark.parametrize("unit", sorted(UNIT_TYPES))
@pytest.mark.parametrize(("row_ndim", "col_ndim", "batch_ndim"), [(1, 1, 1), (2, 1, 2), (3, 2, 1)])
def test_transpose_kernel_lowers(unit, row_ndim, col_ndim, batch_ndim):
    tile = TRANSPOSE_TILE[unit]
    signature = (
        *[nt.int64] * 4,
        *[int_tuple(row_ndim)] * 3,
        *[int_tuple(col_ndim)] * 3,
        *[int_tuple(batch_ndim)] * 3,
        *[nt.int64] * 3,
        UNIT_TYPES[unit],
    )
    kernel = gpu.transpose_kernel(unit, tile, row_ndim, col_ndim, batch_ndim)
    ptx = ptx_of(kernel.py_func, signature)
    assert f"ld.global.{ACCESS[unit]}" in ptx
    assert f"st.global.{ACCESS[unit]}" in ptx
    assert "bar.sync" in ptx
    assert ".shared" in ptx


@pytest.mark.parametrize(("unit", "vector"), [(1, 8), (2, 16), (2, 8), (4, 16)])
@pytest.mark.parametrize(("row_ndim", "col_ndim", "batch_ndim"), [(1, 1, 1), (2, 2, 2)])
@pytest.mark.parametrize("warps_a", [1, 4])
def test_block_transpose_kernel_lowers(unit, vector, row_ndim, col_ndim, batch_ndim, warps_a):
    signature = (
        *[nt.int64] * 4,
        *[int_tuple(row_ndim)] * 3,
        *[int_tuple(col_ndim)] * 3,
        *[int_tuple(batch_ndim)] * 3,
        *[nt.int64] * 3,
        UNIT_TYPES[vector],
    )
    kernel = gpu.block_transpose_kernel(unit, vector, 8, warps_a, row_ndim, col_ndim, batch_ndim)
    ptx = ptx_of(kernel.py_func, signature)
    k = vector // unit
    assert ptx.count(f"ld.global.{ACCESS[vector]}") == k  # the block: k vector loads
    assert ptx.count(f"st.global.{ACCESS[vector]}") == k  # and k vector stores
    assert ".shared" not in ptx
    assert ".local" not in ptx  # the block stays in registers


def test_generated_sources_are_kept_for_reading():
    assert "load_unit" in gpu.elementwise_source(3)
    assert "cuda.shared.array((32, 33)" in gpu.transpose_source(4, 32, 1, 1, 1)
