"""Every GPU copy kernel variant is typed and lowered to PTX for sm_90 (no GPU needed), with
the accesses as wide as the plan says and no local memory.

A variant is what the generators specialise on: the kernel, the unit size, the split of a
thread's items between run and rows (``direct``, ``tiled``), a fill's source unit, the
block shape and vector widths (``block``). The grid's length only changes how many
digits the tile walk steps, so one length is compiled.
"""

import re

import pytest
from numba import cuda

from layoutkit.copy import gpu
from layoutkit.copy.plan import ITEMS, MASK_AXES, SHARED_UNITS

ACCESS = {1: "u8", 2: "u16", 4: "u32", 8: "u64", 16: "v2.u64"}
GRID = 4


def ptx_of(kernel, key):
    function = gpu.kernel_for(kernel, key).py_func
    ptx, _ = cuda.compile_ptx(function, gpu.argument_types(kernel, key), cc=(9, 0))
    return ptx


def global_widths(ptx):
    """``{(op, type): count}`` of the global loads and stores in ``ptx`` (op "ld"/"st")."""
    counts = {}
    for op, kind in re.findall(r"\b(ld|st)\.global(?:\.[a-z]+)*?\.(v2\.u64|u8|u16|u32|u64)\b", ptx):
        counts[(op, kind)] = counts.get((op, kind), 0) + 1
    return counts


def only_widths(ptx, load, store):
    """Whether every global load of ``ptx`` is of type ``load`` and every store of type
    ``store`` (a wider access than planned is misaligned or out of bounds)."""
    return set(global_widths(ptx)) == {("ld", load), ("st", store)}


def copies_of(ptx, instruction, count):
    """Whether ``ptx`` holds ``instruction`` ``count`` times, or in whole copies of that
    many (the optimiser may duplicate a loop body: unswitching, peeling)."""
    found = ptx.count(instruction)
    return found >= count and found % count == 0


def split(unit):
    return [(1, ITEMS[unit]), (ITEMS[unit], 1)]


#: 64-bit offsets within a tile (``wide``) change only the row tables' type: one unit each.
DIRECT = [(u, 0, ir, kq, int(wide)) for u in ACCESS for ir, kq in split(u)
          for wide in (False, u == 4 and ir == 1)]  # fmt: skip
FILL = [(16, 4), (16, 1), (8, 2), (4, 1)]
TILED = [(u, *a, *b, 0) for u in ACCESS for a in split(u) for b in split(u)]
TILED += [(4, 1, 16, 16, 1, 1)]
BLOCK = [  # unit, ka, kb, vs, vd (, ns, nd): squares, deinterleaves, interleaves, every
    # vector width, squares with a side of narrow vectors (ns / nd of them per row)
    (1, 8, 8, 1, 8, 8, 1),
    (1, 8, 8, 8, 2, 1, 4),
    (2, 8, 8, 2, 4, 8, 4),
    (2, 8, 8, 16, 4, 1, 4),
    (1, 8, 8, 8, 8),
    (2, 8, 8, 16, 16),
    (1, 3, 16, 16, 16),
    (2, 5, 8, 8, 16),
    (1, 16, 5, 16, 16),
    (2, 8, 3, 16, 16),
    (1, 3, 16, 1, 16),
    (4, 4, 4, 16, 16),
    (1, 12, 4, 16, 4),  # the deinterleave whose 4-byte stores Numba once typed as 8 bytes
    (1, 2, 4, 2, 4),
    (1, 4, 4, 4, 4),
    (1, 4, 2, 4, 2),
    (1, 4, 1, 4, 1),
    (1, 1, 4, 1, 4),
    (2, 2, 2, 4, 4),
    (2, 4, 1, 8, 2),
    (2, 2, 4, 4, 8),
]


@pytest.mark.parametrize("variant", DIRECT, ids=str)
def test_direct_kernel_lowers(variant):
    unit, src_unit, ir, kq, wide = variant
    ptx = ptx_of("direct", (unit, src_unit, ir, kq, GRID, wide))
    assert copies_of(ptx, f"ld.global.{ACCESS[unit]}", ir * kq)  # all loads, then stores
    assert copies_of(ptx, f"st.global.{ACCESS[unit]}", ir * kq)
    assert only_widths(ptx, ACCESS[unit], ACCESS[unit])
    assert ".local" not in ptx


@pytest.mark.parametrize(("unit", "src_unit"), FILL, ids=str)
def test_fill_kernel_lowers(unit, src_unit):
    ptx = ptx_of("direct", (unit, src_unit, 1, ITEMS[unit], GRID, 0))
    assert f"ld.global.{ACCESS[src_unit]}" in ptx
    assert copies_of(ptx, f"st.global.{ACCESS[unit]}", ITEMS[unit])
    assert only_widths(ptx, ACCESS[src_unit], ACCESS[unit])


@pytest.mark.parametrize("variant", TILED, ids=str)
def test_tiled_kernel_lowers(variant):
    unit, wide = variant[0], variant[-1]
    ptx = ptx_of("tiled", (*variant[:-1], GRID, SHARED_UNITS * ITEMS[unit], wide))
    assert copies_of(ptx, f"ld.global.{ACCESS[unit]}", ITEMS[unit])
    assert copies_of(ptx, f"st.global.{ACCESS[unit]}", ITEMS[unit])
    assert only_widths(ptx, ACCESS[unit], ACCESS[unit])
    assert "bar.sync" in ptx and "st.shared" in ptx
    assert ".local" not in ptx


@pytest.mark.parametrize("variant", BLOCK, ids=str)
def test_block_kernel_lowers(variant):
    unit, ka, kb, vs, vd, ns, nd = (*variant, 1, 1)[:7]
    ptx = ptx_of("block", (unit, ka, kb, vs, vd, GRID, ns, nd))
    total = ka * kb * unit
    assert copies_of(ptx, f"ld.global.{ACCESS[vs]}", total // vs)  # the block in vectors
    assert copies_of(ptx, f"st.global.{ACCESS[vd]}", total // vd)
    assert only_widths(ptx, ACCESS[vs], ACCESS[vd])
    assert ".shared" not in ptx
    assert ".local" not in ptx  # the block stays in registers


@pytest.mark.parametrize("unit", ACCESS)
@pytest.mark.parametrize(("axes", "wide"), [(2, 0), (6, 0), (3, 1)])
def test_gather_kernel_lowers(unit, axes, wide):
    ptx = ptx_of("gather", (unit, ITEMS[unit], axes, wide))
    assert copies_of(ptx, f"ld.global.{ACCESS[unit]}", ITEMS[unit])  # all loads, then stores
    assert copies_of(ptx, f"st.global.{ACCESS[unit]}", ITEMS[unit])
    assert only_widths(ptx, ACCESS[unit], ACCESS[unit])
    # each digit: one high-word multiply, no division
    assert "div." not in ptx and "rem." not in ptx
    assert copies_of(ptx, "mul.hi.u32", ITEMS[unit] * (axes - 1))
    assert ".shared" not in ptx and ".local" not in ptx


def test_sources_are_kept_for_reading():
    kernel = gpu.kernel_for("tiled", (4, 1, 16, 16, 1, GRID, SHARED_UNITS * 16, 0))
    assert "cuda.shared.array(5121, np.uint32)" in kernel.py_func.source  # and a spare slot
    assert f"rem{MASK_AXES - 1}" in gpu.kernel_source("direct", (4, 0, 1, 16, GRID, 0))
