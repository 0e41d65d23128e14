"""numba-cuda kernels that execute the launches of a device copy plan.

Four kernels, generated as Python source and specialised by a few compile-time numbers
(the unit size, items per thread, the number of grid axes); everything that depends on
the layouts (extents, strides, tile shapes, thread mappings) is a runtime argument, so
new layouts rarely need a new compilation. See :mod:`layoutkit.copy.plan` for which
kernel a problem gets.

* ``direct``: each thread moves ``ir x kq`` units straight from source to destination:
  ``ir`` positions along the run (the destination's fastest axis, ``tx`` lanes wide) in
  each of ``kq`` rows, whose offsets come from a table in shared memory built once per
  block. All loads are issued before the first store.
* ``tiled``: the same two-level mapping twice, through a tile in shared memory: phase 1
  reads the source along its run into the tile, phase 2 writes the destination along its
  run. Each phase has its own row table.
* ``block``: each thread loads a block of units with vector loads, transposes it in
  registers (shifts and masks of 32-bit words) and stores it with vector stores.
* ``gather``: no tile: the destination in element order, each element's offsets on both
  sides from the digits of its number (multiply-shift divisions).

Every kernel walks tiles ``t = blockIdx.x, blockIdx.x + gridDim.x, ...`` (``gather``
is launched with a block per tile, see ``WALKING_KERNELS``); except in ``gather`` (whose
tile is a run of element numbers) the tile index is split into 32-bit digits over the
grid axes once per block, then stepped like an odometer (no division per tile). The
first grid axes are the chunked axes of the tile; their remaining extents mask a partly
filled tile; a full tile takes an unmasked path.

The generated code is written for what the compiler makes of it (see
``benchmarks/COPY_NOTES.md``, round 2): per-item offsets are stepped inside the tile loop
rather than precomputed (hoisted, they would all live in registers), row tables hold
32-bit entries (64-bit for tiles spanning 2 GiB: the ``wide`` variants), divisions and
array indices are unsigned 32-bit, and every access takes its width from a prototype.

Kernels take raw addresses as ``int64`` and strides in bytes. Under the CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) the same kernels run with Python loads and stores, which
check alignment.
"""

import ctypes
import functools
import threading

import numpy as np
from numba import cuda
from numba.core import config

from layoutkit.copy.plan import (
    BLOCK,
    BLOCK_SLOTS,
    BLOCK_THREAD_AXES,
    DIRECT,
    DIRECT_ROWS,
    GATHER,
    MASK_AXES,
    ROW_AXES,
    THREADS,
    TILED,
    TILED_ROWS,
)

__all__ = ["launch_plan", "kernel_source", "kernel_for", "argument_types", "grid_blocks"]

#: Bytes each SM should keep loading at once: enough blocks are launched for this, within
#: what the SM can hold (the driver's occupancy for the compiled kernel).
IN_FLIGHT_PER_SM = 128 << 10
#: Kernels whose blocks walk several tiles (a grid sized by ``IN_FLIGHT_PER_SM``): each
#: block sets up state that the walk amortises (row tables in shared memory, the tile
#: index's digits). A ``gather`` block has none, so it gets one block per tile and the
#: hardware's block scheduler keeps every warp slot busy to the last tile. Measured with
#: ncu on the H200 (seeds 8542-8543, 16-byte gathers): a walking grid kept 67-79 % of the
#: warp slots active and ran 8-11 % slower than torch's one-block-per-tile elementwise
#: copy, which kept 88-91 % active with the same DRAM and L2 traffic.
WALKING_KERNELS = (DIRECT, TILED, BLOCK)

_BIG = 1 << 62
_BIG32 = (1 << 31) - 1
_SIM = bool(config.ENABLE_CUDASIM)

if _SIM:
    _CTYPES = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}

    def _aligned(address, size):
        """The address as an int; a misaligned access fails here as it would on a GPU
        (``CUDA_ERROR_MISALIGNED_ADDRESS``)."""
        address = int(address)
        if address % size:
            raise AssertionError(f"misaligned {size}-byte access at {address:#x}")
        return address

    def load_unit(address, prototype):
        """Simulator load: read the unit at ``address`` through ctypes (aligned)."""
        address = _aligned(address, 16 if isinstance(prototype, tuple) else prototype.itemsize)
        if isinstance(prototype, tuple):
            return tuple(
                np.uint64(ctypes.c_uint64.from_address(address + 8 * i).value) for i in (0, 1)
            )
        value = _CTYPES[prototype.itemsize].from_address(address).value
        return type(prototype)(value)

    def store_unit(address, value, prototype):
        """Simulator store: write ``value`` at ``address`` as a unit of ``prototype``'s
        size (aligned; the value must fit in it, as it must on a GPU, where the store
        truncates to the prototype's width)."""
        if isinstance(prototype, tuple):
            address = _aligned(address, 16)
            for i in (0, 1):
                ctypes.c_uint64.from_address(address + 8 * i).value = int(value[i])
            return
        size = prototype.itemsize
        address = _aligned(address, size)
        if not 0 <= int(value) < 1 << (8 * size):
            raise AssertionError(f"{size}-byte store of {int(value):#x} at {address:#x}")
        _CTYPES[size].from_address(address).value = int(value)

    def high_word(x, y):
        """Simulator ``__umulhi``: the high 32 bits of the 64-bit product of two 32-bit
        unsigned values (as ``int32`` bits, like libdevice's)."""
        return np.uint32((int(np.uint32(x)) * int(np.uint32(y))) >> 32).view(np.int32)

else:
    from numba.cuda.libdevice import umulhi as high_word

    from layoutkit.copy._units import load_unit, store_unit

_UNIT_TYPES = {1: "np.uint8", 2: "np.uint16", 4: "np.uint32", 8: "np.uint64"}


class _Code:
    """Lines of generated Python source with an indentation level."""

    def __init__(self):
        self.lines = []
        self.depth = 0

    def __call__(self, *lines):
        self.lines += ["    " * self.depth + line for line in lines]

    def block(self):
        code = self

        class _Indent:
            def __enter__(self):
                code.depth += 1

            def __exit__(self, *exc):
                code.depth -= 1

        return _Indent()

    def text(self):
        return "\n".join(self.lines) + "\n"


# ----------------------------------------------------------------------------- shared parts
def _walk_start(code, grid, masks=True):
    """Split ``blockIdx.x`` and ``gridDim.x`` into 32-bit digits over the grid axes; with
    ``masks``, each tile's remaining extents ``rem<j>`` and whether it is ``full``."""
    code(*(f"c{j} = np.int32(grid_count[{j}])" for j in range(grid)))
    code("t = cuda.blockIdx.x", "rest = np.uint32(t)", "stride = cuda.gridDim.x",
         "jump = np.uint32(stride)")  # fmt: skip
    for j in range(grid):  # 32-bit divisions (see _table_code)
        code(f"g{j} = np.int32(rest % np.uint32(c{j}))", f"rest = np.uint32(rest // np.uint32(c{j}))",
             f"i{j} = np.int32(jump % np.uint32(c{j}))", f"jump = np.uint32(jump // np.uint32(c{j}))")  # fmt: skip
    code("while t < n_tiles:")
    code.depth += 1
    # products in 64 bits (under the simulator an np.int32 digit would multiply in 32)
    dst_terms = " + ".join(f"np.int64(g{j}) * grid_dst[{j}]" for j in range(grid))
    src_terms = " + ".join(f"np.int64(g{j}) * grid_src[{j}]" for j in range(grid))
    code(f"dbase = dst + {dst_terms}", f"sbase = src + {src_terms}")
    if not masks:
        return
    # 0 (t < n_tiles < 2**62), but not to the compiler: row-table reads indexed by
    # ``q + fresh`` stay in the tile loop. Hoisted out of it, every thread would hold its
    # rows' four table entries in registers (more than 200 for 16 rows: one block per SM).
    code("fresh = np.int32(t >> 62)")
    code(*(f"rem{j} = mask_extent[{j}] - np.int64(g{j}) * mask_tile[{j}]" for j in range(MASK_AXES)))
    full = " and ".join(f"rem{j} >= mask_tile[{j}]" for j in range(MASK_AXES))
    code(f"full = {full}")


def _walk_end(code, grid):
    """Step the tile index by ``gridDim.x`` and its digits with carries."""
    code("t += stride", "carry = 0")
    for j in range(grid):
        code(f"g{j} = np.int32(g{j} + i{j} + carry)", "carry = 0", f"if g{j} >= c{j}:")
        with code.block():
            code(f"g{j} = np.int32(g{j} - c{j})", "carry = 1")
    code.depth -= 1


def _table_code(code, name, prefix, first, second, size, first_type, second_type):
    """Build a row table of ``size`` rows in shared memory: ``{name}_a`` / ``{name}_b``
    offsets (by the strides ``{prefix}_{first}`` / ``{prefix}_{second}``, of the given
    NumPy types), ``{name}_c`` / ``{name}_d`` the row's coordinates along its two chunked
    axes (int32: a coordinate is below its tile extent). Rows past the tile's are masked
    by the thread's own row check, never by the table."""
    code(f"{name}_a = cuda.shared.array({size}, {first_type})",
         f"{name}_b = cuda.shared.array({size}, {second_type})",
         f"{name}_c = cuda.shared.array({size}, np.int32)",
         f"{name}_d = cuda.shared.array({size}, np.int32)",
         "q = cuda.threadIdx.x", f"while q < {size}:")  # fmt: skip
    with code.block():
        # Unsigned 32-bit divisions (row numbers and tile extents are small): Numba widens
        # them to 64 bits, and LLVM narrows a division of zero-extended operands back; a
        # signed 64-bit division is a call of some 70 instructions.
        code("rest = np.uint32(q)", "oa = 0", "ob = 0")
        for j in range(ROW_AXES):
            extent = f"np.uint32({prefix}_extent[{j}])"
            code(f"position = np.int64(rest % {extent})", f"rest = np.uint32(rest // {extent})",
                 f"oa += position * {prefix}_{first}[{j}]",
                 f"ob += position * {prefix}_{second}[{j}]")  # fmt: skip
        for part, k in (("c", 1), ("d", 2)):
            code(f"{name}_{part}[np.uint32(q)] = np.uint32(np.uint32(q) // np.uint32({prefix}_inner{k})) "
                 f"% np.uint32(min({prefix}_extent{k}, {_BIG32}))")  # fmt: skip
        code(f"{name}_a[np.uint32(q)] = oa", f"{name}_b[np.uint32(q)] = ob", f"q += {THREADS}")


def _select(code, target, sel, default):
    """``target = rem<sel>`` for a runtime ``sel`` (``MASK_AXES``: ``default``)."""
    code(f"{target} = {default}")
    for j in range(MASK_AXES):
        code(f"{'if' if j == 0 else 'elif'} {sel} == {j}:", f"    {target} = rem{j}")


def _row_limits(code, target, sel1, sel2):
    """``{target}_c`` / ``{target}_d``: the bounds of a partly filled tile's two chunked
    row coordinates (clipped to int32: a coordinate is compared with them)."""
    _select(code, f"{target}_c", sel1, _BIG32)
    _select(code, f"{target}_d", sel2, _BIG32)
    code(f"{target}_c = min({target}_c, {_BIG32})", f"{target}_d = min({target}_d, {_BIG32})")


_ROW_PARAMETERS = ("{p}s, {p}_inner1, {p}_extent1, {p}_sel1, {p}_inner2, {p}_extent2, {p}_sel2, "
                   "{p}_extent")


def _mapping_code(code, name, tx, first, second, run, rows):
    """Per-thread constants of a phase: the lane along the run and the first table row,
    the lane's offsets by ``first`` and ``second``, the steps to the thread's next run
    position (``tx`` lanes on) and how many of its positions lie on a full tile's run
    (``{name}_n``: a full tile checks item ``i`` with one compare against a constant).
    Everything else is stepped from these inside the tile loop (see :func:`_chain`)."""
    code(f"{name}_lane = np.int64(np.uint32(cuda.threadIdx.x) % np.uint32({tx}))",
         f"{name}_n = np.int32(np.uint32(max({run} - {name}_lane, 0) + {tx} - 1) // np.uint32({tx}))",
         f"{name}_row = np.int32(np.uint32(cuda.threadIdx.x) // np.uint32({tx}))",
         f"{name}_step = np.int32(np.uint32({THREADS}) // np.uint32({tx}))",
         f"{name}_lx = {name}_lane * {first}", f"{name}_ly = {name}_lane * {second}",
         f"{name}_sx = {tx} * {first}", f"{name}_sy = {tx} * {second}",
         f"{name}_st = np.int32({tx})", f"{name}_rows = np.int32({rows})")  # fmt: skip


def _chain(code, variable, start, step, index, narrow=False):
    """``variable`` for item ``index`` of a chain: ``start`` for the first, then stepped.

    Arrays are indexed with ``np.uint32`` of such values: Numba adds the array's length to
    a negative signed index (three instructions per access); an unsigned index has none.
    ``narrow`` keeps a row number in 32 bits (its compares are one instruction, not two).

    Offsets are stepped from loop-variant values (``fresh``, the tile's bases) rather
    than precomputed per item: the compiler would hoist per-item constants out of the
    tile loop and keep them all in registers (two per 64-bit offset and item); a step is
    one add, as the precomputed sum was.
    """
    value = start if index == 0 else f"{variable} + {step}"
    code(f"{variable} = np.int32({value})" if narrow else f"{variable} = {value}")


def _replicate(value, src_unit, unit):
    """Expression: the ``src_unit``-byte ``value`` repeated to fill ``unit`` bytes."""
    word = min(unit, 8)
    pattern = sum(1 << (8 * src_unit * k) for k in range(word // src_unit))
    repeated = f"(np.uint64({value}) * np.uint64({pattern}))"
    if unit == 16:
        return f"({repeated}, {repeated})"
    return f"np.uint{8 * unit}({repeated})"


# ----------------------------------------------------------------------------- direct
def _direct_moves(code, ir, kq, src_unit, unit, masked):
    """One tile of the ``direct`` kernel: every load, then every store. A full tile
    checks only that the thread's run position and row exist; a partly filled one
    checks them against the remaining extents (``limit`` along the run, the table's
    chunked coordinates)."""
    for k in range(kq):
        _chain(code, "q", "m_row + fresh", "m_step", k, narrow=True)
        ok = "q < m_rows"
        if masked:
            ok += " and table_c[np.uint32(q)] < limit_c and table_d[np.uint32(q)] < limit_d"
        code(f"ok{k} = {ok}")
        for i in range(ir):
            if masked:
                _chain(code, "r", "m_lane + fresh", "m_st", i)
            _chain(code, "s", "sbase + table_b[np.uint32(q)] + m_ly", "m_sy", i)
            code(f"go{k}_{i} = ok{k} and {'r < limit' if masked else f'm_n > {i}'}",
                 f"v{k}_{i} = prototype", f"if go{k}_{i}:")  # fmt: skip
            with code.block():
                if src_unit:
                    value = _replicate("load_unit(s, src_prototype)", src_unit, unit)
                    code(f"v{k}_{i} = {value}")
                else:
                    code(f"v{k}_{i} = load_unit(s, prototype)")
    for k in range(kq):
        _chain(code, "q", "m_row + fresh", "m_step", k, narrow=True)
        for i in range(ir):
            _chain(code, "d", "dbase + table_a[np.uint32(q)] + m_lx", "m_sx", i)
            code(f"if go{k}_{i}:")
            with code.block():
                code(f"store_unit(d, v{k}_{i}, prototype)")


def direct_source(unit, src_unit, ir, kq, grid, wide):
    """Python source of the ``direct`` kernel (see the module docstring)."""
    offset_type = "np.int64" if wide else "np.int32"
    code = _Code()
    code("def direct(dst, src, tx, run, run_dst, run_src, " + _ROW_PARAMETERS.format(p="row")
         + ",", "           row_dst, row_src, grid_count, grid_dst, grid_src, mask_extent,",
         "           mask_tile, n_tiles, prototype, src_prototype):")  # fmt: skip
    with code.block():
        _table_code(code, "table", "row", "dst", "src", DIRECT_ROWS, offset_type, offset_type)
        code("cuda.syncthreads()")
        _mapping_code(code, "m", "tx", "run_dst", "run_src", "run", "rows")
        _walk_start(code, grid)
        code("if full:")
        with code.block():
            _direct_moves(code, ir, kq, src_unit, unit, masked=False)
        code("else:")
        with code.block():
            code("limit = min(run, rem0)")
            _row_limits(code, "limit", "row_sel1", "row_sel2")
            _direct_moves(code, ir, kq, src_unit, unit, masked=True)
        _walk_end(code, grid)
    return code.text()


# ----------------------------------------------------------------------------- tiled
def _tiled_moves(code, ir1, kq1, ir2, kq2, pair, masked):
    """One tile of the ``tiled`` kernel: the source into shared memory, then shared
    memory to the destination (masked as in :func:`_direct_moves`)."""
    for k in range(kq1):  # phase 1: source -> tile
        _chain(code, "q", "a_row + fresh", "a_step", k, narrow=True)
        ok = "q < a_rows"
        if masked:
            ok += " and table1_c[np.uint32(q)] < limit1_c and table1_d[np.uint32(q)] < limit1_d"
        code(f"ok{k} = {ok}")
        for i in range(ir1):
            if masked:
                _chain(code, "r", "a_lane + fresh", "a_st", i)
            _chain(code, "s", "sbase + table1_a[np.uint32(q)] + a_lx", "a_sx", i)
            code(f"go{k}_{i} = ok{k} and {'r < limit1' if masked else f'a_n > {i}'}",
                 f"v{k}_{i} = prototype",
                 f"if go{k}_{i}:", f"    v{k}_{i} = load_unit(s, prototype)")  # fmt: skip
    for k in range(kq1):  # masked items store to a spare slot: no branch per item
        _chain(code, "q", "a_row + fresh", "a_step", k, narrow=True)
        for i in range(ir1):
            _chain(code, "h", "table1_b[np.uint32(q)] + a_ly", "a_sy", i)
            code(f"h = np.uint32(h) if go{k}_{i} else np.uint32(spare)")
            if pair:
                code(f"buffer[h, 0] = v{k}_{i}[0]", f"buffer[h, 1] = v{k}_{i}[1]")
            else:
                code(f"buffer[h] = v{k}_{i}")
    code("cuda.syncthreads()")
    for k in range(kq2):  # phase 2: tile -> destination
        _chain(code, "q", "b_row + fresh", "b_step", k, narrow=True)
        ok = "q < b_rows"
        if masked:
            ok += " and table2_c[np.uint32(q)] < limit2_c and table2_d[np.uint32(q)] < limit2_d"
        code(f"ok = {ok}")
        for i in range(ir2):
            if masked:
                _chain(code, "r", "b_lane + fresh", "b_st", i)
            _chain(code, "d", "dbase + table2_a[np.uint32(q)] + b_lx", "b_sx", i)
            _chain(code, "h", "table2_b[np.uint32(q)] + b_ly", "b_sy", i)
            code(f"if ok and {'r < limit2' if masked else f'b_n > {i}'}:")
            with code.block():
                value = "(buffer[np.uint32(h), 0], buffer[np.uint32(h), 1])" if pair else "buffer[np.uint32(h)]"
                code(f"store_unit(d, {value}, prototype)")
    code("cuda.syncthreads()")


def tiled_source(unit, ir1, kq1, ir2, kq2, grid, shared_units, wide):
    """Python source of the ``tiled`` kernel (see the module docstring)."""
    pair = unit == 16
    offset_type = "np.int64" if wide else "np.int32"
    code = _Code()

    def phase(p):
        rows = _ROW_PARAMETERS.format(p=f"row{p}")
        return (f"tx{p}, run{p}, run{p}_global, run{p}_shared, run{p}_mult, run{p}_sel, {rows},"
                f" row{p}_global, row{p}_shared")  # fmt: skip

    code(f"def tiled(dst, src, {phase(1)},", f"          {phase(2)},",
         "          grid_count, grid_dst, grid_src, mask_extent, mask_tile, n_tiles, prototype):")
    with code.block():
        # the tile, then one spare slot for the stores of masked items
        code(f"spare = {shared_units}")
        if pair:
            code(f"buffer = cuda.shared.array(({shared_units + 1}, 2), np.uint64)")
        else:
            code(f"buffer = cuda.shared.array({shared_units + 1}, {_UNIT_TYPES[unit]})")
        for p in (1, 2):
            _table_code(code, f"table{p}", f"row{p}", "global", "shared", TILED_ROWS, offset_type,
                        "np.int32")  # fmt: skip
        code("cuda.syncthreads()")
        _mapping_code(code, "a", "tx1", "run1_global", "run1_shared", "run1", "row1s")
        _mapping_code(code, "b", "tx2", "run2_global", "run2_shared", "run2", "row2s")
        _walk_start(code, grid)
        code("if full:")
        with code.block():
            _tiled_moves(code, ir1, kq1, ir2, kq2, pair, masked=False)
        code("else:")
        with code.block():
            for p in (1, 2):
                _select(code, f"rem_run{p}", f"run{p}_sel", _BIG)
                code(f"limit{p} = run{p}", f"if run{p}_sel < {MASK_AXES}:",
                     f"    limit{p} = min(run{p}, run{p}_mult * rem_run{p})")  # fmt: skip
                _row_limits(code, f"limit{p}", f"row{p}_sel1", f"row{p}_sel2")
            _tiled_moves(code, ir1, kq1, ir2, kq2, pair, masked=True)
        _walk_end(code, grid)
    return code.text()


# ----------------------------------------------------------------------------- block
def _words(vector, size):
    """Expressions of the 32-bit words of a loaded ``size``-byte value (``size >= 4``)."""
    if size == 4:
        return [vector]
    halves = [f"{vector}[0]", f"{vector}[1]"] if size == 16 else [vector]
    words = []
    for half in halves:
        words += [f"np.uint32({half} & np.uint64(0xFFFFFFFF))",
                  f"np.uint32({half} >> np.uint64(32))"]  # fmt: skip
    return words


def _value(words, size):
    """Expression packing 32-bit word expressions into one ``size``-byte store value."""

    def pair(lo, hi):
        return f"(np.uint64({lo}) | (np.uint64({hi}) << np.uint64(32)))"

    if size == 16:
        return f"({pair(words[0], words[1])}, {pair(words[2], words[3])})"
    if size == 8:
        return pair(words[0], words[1])
    if size == 4:
        return words[0]
    return f"np.uint{8 * size}({words[0]})"


def block_source(unit, ka, kb, vs, vd, grid, ns, nd):
    """Python source of the ``block`` kernel for ``ka x kb`` blocks of ``unit``-byte units.

    The block is loaded as ``ka * kb * unit / vs`` vectors of ``vs`` bytes, in rows of
    ``ns`` adjacent vectors ``src_step`` bytes apart (source position of unit ``(ia, ib)``:
    ``ia + ka * ib``), and stored as vectors of ``vd`` bytes in rows of ``nd`` adjacent
    vectors ``dst_step`` apart (destination position ``ib + kb * ia``). Rows of several
    vectors are a square block whose side is not aligned for one vector per row.
    """
    total = ka * kb * unit
    code = _Code()
    code("def block(dst, src, counts, dst_thread, src_thread, coord, src_step, dst_step,",
         "          grid_count, grid_dst, grid_src, mask_extent, mask_tile, n_tiles,",
         "          src_prototype, dst_prototype):")  # fmt: skip
    with code.block():
        code("rest = cuda.threadIdx.x", "tdst = 0", "tsrc = 0",
             *(f"k{s} = 0" for s in range(BLOCK_SLOTS)))  # fmt: skip
        for e in range(BLOCK_THREAD_AXES):
            code(f"digit = rest % counts[{e}]", f"rest = rest // counts[{e}]",
                 f"tdst += digit * dst_thread[{e}]", f"tsrc += digit * src_thread[{e}]",
                 *(f"k{s} += digit * coord[{e * BLOCK_SLOTS + s}]" for s in range(BLOCK_SLOTS)))  # fmt: skip
        code("active = rest == 0")
        _walk_start(code, grid, masks=False)
        code(*(f"rem{s} = mask_extent[{s}] - np.int64(g{s}) * mask_tile[{s}]"
               for s in range(BLOCK_SLOTS)))
        inside = " and ".join(f"k{s} < rem{s}" for s in range(BLOCK_SLOTS))
        code(f"if active and {inside}:")
        with code.block():
            code("source = sbase + tsrc", "target = dbase + tdst")
            loads = total // vs
            for j in range(loads):
                code(f"x{j} = load_unit(source + {j % ns * vs} + {j // ns} * src_step, "
                     "src_prototype)")  # fmt: skip
            if vs >= 4:
                for j in range(loads):
                    for w, expr in enumerate(_words(f"x{j}", vs)):
                        code(f"w{j * (vs // 4) + w} = {expr}")
            mask = (1 << (8 * unit)) - 1

            def unit_at(position):
                offset = position * unit
                if vs >= 4:
                    word, shift = divmod(offset, 4)
                    value = f"w{word}"
                else:
                    vector, within = divmod(offset, vs)
                    value, shift = f"np.uint32(x{vector})", within
                if unit == 4:
                    return value
                if shift:
                    value = f"({value} >> np.uint32({8 * shift}))"
                return f"({value} & np.uint32({mask}))"

            per_word = max(4, vd) // 4
            for i in range(total // vd):
                words = []
                for w in range(per_word):
                    parts = []
                    for byte in range(0, min(4, vd), unit):
                        position = (i * vd + w * 4 + byte) // unit
                        ia, ib = divmod(position, kb)
                        part = unit_at(ia + ka * ib)
                        parts.append(f"({part} << np.uint32({8 * byte}))" if byte else part)
                    words.append(" | ".join(parts))
                code(f"store_unit(target + {i % nd * vd} + {i // nd} * dst_step, "
                     f"{_value(words, vd)}, dst_prototype)")  # fmt: skip
        _walk_end(code, grid)
    return code.text()


# ----------------------------------------------------------------------------- gather
def gather_source(unit, items, axes, wide):
    """Python source of the ``gather`` kernel: ``items`` elements per thread, ``THREADS``
    apart, of a problem of ``axes`` axes (fastest first in the arguments).

    An element number ``n < 2**31`` is split into digits with the multiply-shift
    divisions of :func:`layoutkit.copy.plan.divider` (``__umulhi``; the slowest digit is
    what is left), each digit adding its two strides to 32-bit offsets (64-bit where an
    offset can reach 2 GiB: ``wide``). All loads come before the first store.
    """
    offset = "np.int64" if wide else "np.int32"
    code = _Code()
    code("def gather(dst, src, extent, dst_stride, src_stride, magic, shift, volume, n_tiles,",
         "           prototype):")  # fmt: skip
    with code.block():
        code("thread = np.uint32(cuda.threadIdx.x)", "t = cuda.blockIdx.x", "while t < n_tiles:")
        with code.block():
            code(f"first = np.uint32(np.uint32(t) * np.uint32({THREADS * items}) + thread)")
            for j in range(items):
                # past the end: element 0 (its offsets stay in range; nothing is moved)
                code(f"n = np.uint32(first + np.uint32({j * THREADS}))",
                     f"go{j} = n < np.uint32(volume)", f"n = n if go{j} else np.uint32(0)",
                     f"s = {offset}(0)", f"d{j} = {offset}(0)")  # fmt: skip
                for k in range(axes - 1):
                    code(f"high = np.uint32(high_word(n, np.uint32(magic[{k}])))",
                         f"q = np.uint32(np.uint32(high + n) >> np.uint32(shift[{k}]))",
                         f"r = {offset}(np.uint32(n - q * np.uint32(extent[{k}])))",
                         f"s = {offset}(s + r * {offset}(src_stride[{k}]))",
                         f"d{j} = {offset}(d{j} + r * {offset}(dst_stride[{k}]))", "n = q")  # fmt: skip
                code(f"s = {offset}(s + {offset}(n) * {offset}(src_stride[{axes - 1}]))",
                     f"d{j} = {offset}(d{j} + {offset}(n) * {offset}(dst_stride[{axes - 1}]))",
                     f"v{j} = prototype", f"if go{j}:",
                     f"    v{j} = load_unit(src + np.int64(s), prototype)")  # fmt: skip
            for j in range(items):
                code(f"if go{j}:", f"    store_unit(dst + np.int64(d{j}), v{j}, prototype)")
            code("t += cuda.gridDim.x")
    return code.text()


# ----------------------------------------------------------------------------- compiling
_GENERATORS = {DIRECT: direct_source, TILED: tiled_source, BLOCK: block_source,
               GATHER: gather_source}  # fmt: skip


def kernel_source(kernel, key):
    """The generated Python source of one kernel specialisation."""
    return _GENERATORS[kernel](*key)


_HEADER = (
    "# Generated by layoutkit.copy.gpu; compiled kernels are cached beside this file.\n"
    "import numpy as np\n"
    "from numba import cuda\n\n"
    "from layoutkit.copy.gpu import high_word, load_unit, store_unit\n\n\n"
)


def _cache_directory():
    """Where generated kernels are written so that Numba can cache their compilation
    (``$NUMBA_CACHE_DIR/layoutkit-copy``, else ``~/.cache/layoutkit/copy``), or None when
    no private directory can be made there."""
    import os

    base = os.environ.get("NUMBA_CACHE_DIR")
    if base:
        path = os.path.join(base, "layoutkit-copy")
    else:
        cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        path = os.path.join(cache_home, "layoutkit", "copy")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.stat(path)
    except OSError:
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o022:  # only a private directory
        return None
    return path


def _module_function(source, name):
    """Write ``source`` to the cache directory (once) and import function ``name`` from it."""
    import hashlib
    import importlib.util
    import os

    directory = _cache_directory()
    if directory is None:
        return None
    text = _HEADER + source
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    module_name = f"layoutkit_copy_{name}_{digest}"
    path = os.path.join(directory, module_name + ".py")
    try:
        if not os.path.exists(path):
            partial = f"{path}.{os.getpid()}.tmp"
            with open(partial, "w") as file:
                file.write(text)
            os.replace(partial, path)
        with open(path) as file:
            if file.read() != text:
                return None
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except OSError:
        return None
    return getattr(module, name)


@functools.cache
def kernel_for(kernel, key):
    """The ``cuda.jit`` dispatcher of one kernel specialisation (compiled on first launch).

    The source is written to a private cache directory and compiled with Numba's cache,
    so a specialisation compiles once per machine; where no such directory can be made
    (and under the simulator) it is compiled from memory.
    """
    source = kernel_source(kernel, key)
    function = None if _SIM else _module_function(source, kernel)
    if function is None:
        namespace = {"cuda": cuda, "np": np, "load_unit": load_unit, "store_unit": store_unit,
                     "high_word": high_word}  # fmt: skip
        exec(compile(source, f"<layoutkit.copy.gpu {kernel}{key}>", "exec"), namespace)
        function = namespace[kernel]
        function.source = source
        return cuda.jit(function)
    function.source = source
    try:
        return cuda.jit(function, cache=True, launch_bounds=THREADS)
    except Exception:  # a numba-cuda without launch bounds, or one that cannot cache here
        return cuda.jit(function)


_PROTOTYPES = {
    1: np.uint8(0),
    2: np.uint16(0),
    4: np.uint32(0),
    8: np.uint64(0),
    16: (np.uint64(0), np.uint64(0)),
}


def prototypes(launch):
    """The unit prototype arguments that follow a launch's runtime arguments."""
    if launch.kernel == DIRECT:
        unit, src_unit = launch.key[0], launch.key[1]
        return (_PROTOTYPES[unit], _PROTOTYPES[src_unit or unit])
    if launch.kernel in (TILED, GATHER):
        return (_PROTOTYPES[launch.key[0]],)
    vs, vd = launch.key[3], launch.key[4]
    return (_PROTOTYPES[vs], _PROTOTYPES[vd])


def argument_types(kernel, key):
    """The Numba types of a kernel specialisation's parameters (addresses first).

    Examples
    --------
    >>> len(argument_types("direct", (4, 0, 1, 16, 4, 0)))
    24
    """
    from numba import types

    i64 = types.int64

    def ints(n):
        return types.UniTuple(i64, n)

    def unit_type(size):
        if size == 16:
            return types.UniTuple(types.uint64, 2)
        return getattr(types, f"uint{8 * size}")

    if kernel == GATHER:
        unit, axes = key[0], key[2]
        return (i64, i64, *[ints(axes)] * 5, i64, i64, unit_type(unit))
    rows = [i64] * 7 + [ints(ROW_AXES)] * 3
    if kernel == DIRECT:
        unit, src_unit, grid = key[0], key[1], key[4]
        middle = [i64] * 4 + rows
        protos = [unit_type(unit), unit_type(src_unit or unit)]
    elif kernel == TILED:
        unit, grid = key[0], key[5]
        middle = ([i64] * 6 + rows) * 2
        protos = [unit_type(unit)]
    else:
        vs, vd, grid = key[3], key[4], key[5]
        middle = [ints(BLOCK_THREAD_AXES)] * 3 + [ints(BLOCK_THREAD_AXES * BLOCK_SLOTS), i64, i64]
        protos = [unit_type(vs), unit_type(vd)]
    masks = BLOCK_SLOTS if kernel == BLOCK else MASK_AXES
    walk = [ints(grid)] * 3 + [ints(masks)] * 2 + [i64]
    return (i64, i64, *middle, *walk, *protos)


def grid_blocks(tiles, in_flight, multiprocessors, resident):
    """Blocks of a launch: enough for ``IN_FLIGHT_PER_SM`` bytes in flight per SM, no more
    than ``resident`` per SM, no more than the tiles, balanced (every block walks the same
    number of tiles, give or take one).

    Examples
    --------
    >>> grid_blocks(10_000, 16384, 132, 8)  # 8 blocks of 16 KB per SM, 10 tiles each
    1000
    >>> grid_blocks(10_000, 16384, 132, 2)  # registers allow 2 blocks per SM
    264
    >>> grid_blocks(7, 16384, 132, 8)
    7
    """
    per_sm = max(1, min(resident, -(-IN_FLIGHT_PER_SM // max(in_flight, 1))))
    most = max(1, multiprocessors * per_sm)
    rounds = -(-tiles // most)
    return max(1, -(-tiles // rounds))


# ----------------------------------------------------------------------------- launching
class _PreparedCopy:
    """A compiled launch relaunched with new addresses (and stream) through the one
    prepared launcher, :class:`layoutkit.cuda._launcher.PreparedLaunch`."""

    def __init__(self, launch, device_id):
        from layoutkit import _driver
        from layoutkit.cuda._launcher import PreparedLaunch

        values = (0, 0, *launch.args, *prototypes(launch))
        types = argument_types(launch.kernel, launch.key)
        compiled = kernel_for(launch.kernel, launch.key).compile(types)
        blocks = launch.tiles
        if launch.kernel in WALKING_KERNELS:
            probe = PreparedLaunch(compiled, types, 1, THREADS, 0, 0)
            blocks = grid_blocks(launch.tiles, launch.in_flight,
                                 _driver.multiprocessor_count(device_id),
                                 probe.max_active_blocks_per_sm())  # fmt: skip
        self.blocks = blocks
        self._launch = PreparedLaunch(compiled, types, blocks, THREADS, 0, 0)
        self._launch.pack(values)
        self._lock = threading.Lock()

    def __call__(self, dst, src, stream_handle):
        with self._lock:
            self._launch.relaunch(stream_handle, dst, src)


@functools.lru_cache(maxsize=1024)
def _prepared(launch, device_id):
    return _PreparedCopy(launch, device_id)


def _simulate(launch, dst, src):
    blocks = min(launch.tiles, 3)
    kernel = kernel_for(launch.kernel, launch.key)
    kernel[blocks, THREADS](dst, src, *launch.args, *prototypes(launch))


def launch_plan(plan, dst_ptr, src_ptr, stream_handle=0, device_id=0):
    """Queue the launches of a ``kernel`` plan on a stream.

    Parameters
    ----------
    plan : CopyPlan
        A plan between two device-accessible views.
    dst_ptr, src_ptr : int
        Device addresses of element zero of each view.
    stream_handle : int
        The ``CUstream`` handle (0: the legacy default stream).
    device_id : int
        The device whose current context runs the kernels.
    """
    dst = int(dst_ptr + plan.dst_offset)
    src = int(src_ptr + plan.src_offset)
    for launch in plan.launches:
        d, s = dst + launch.dst_offset, src + launch.src_offset
        if _SIM:
            _simulate(launch, d, s)
        else:
            _prepared(launch, device_id)(d, s, int(stream_handle))
