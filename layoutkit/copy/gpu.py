"""numba-cuda kernels that execute the launches of a device copy plan.

Three kernels, generated as Python source and specialised by a few compile-time numbers
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

Every kernel walks tiles ``t = blockIdx.x, blockIdx.x + gridDim.x, ...``: the tile index
is split into digits over the grid axes once per block, then stepped like an odometer
(no division per tile). The first grid axes are the chunked axes of the tile; their
remaining extents mask a partly filled tile, whose other work proceeds as in a full one.

Kernels take raw addresses as ``int64`` and strides in bytes. Under the CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) the same kernels run with Python loads and stores.
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
    MASK_AXES,
    MAX_ROWS,
    ROW_AXES,
    THREADS,
    TILED,
)

__all__ = ["launch_plan", "kernel_source", "kernel_for", "argument_types", "grid_blocks"]

#: Bytes each SM should keep loading at once: enough blocks are launched for this, within
#: what the SM can hold (the driver's occupancy for the compiled kernel).
IN_FLIGHT_PER_SM = 64 << 10

_BIG = 1 << 62
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

else:
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
def _walk_start(code, grid):
    """Split ``blockIdx.x`` and ``gridDim.x`` into digits over the grid axes."""
    code(*(f"c{j} = grid_count[{j}]" for j in range(grid)))
    code("t = cuda.blockIdx.x", "rest = t", "stride = cuda.gridDim.x", "jump = stride")
    for j in range(grid):
        code(f"g{j} = rest % c{j}", f"rest = rest // c{j}",
             f"i{j} = jump % c{j}", f"jump = jump // c{j}")  # fmt: skip
    code("while t < n_tiles:")
    code.depth += 1
    dst_terms = " + ".join(f"g{j} * grid_dst[{j}]" for j in range(grid))
    src_terms = " + ".join(f"g{j} * grid_src[{j}]" for j in range(grid))
    code(f"dbase = dst + {dst_terms}", f"sbase = src + {src_terms}")


def _walk_end(code, grid):
    """Step the tile index by ``gridDim.x`` and its digits with carries."""
    code("t += stride", "carry = 0")
    for j in range(grid):
        code(f"g{j} += i{j} + carry", "carry = 0", f"if g{j} >= c{j}:")
        with code.block():
            code(f"g{j} -= c{j}", "carry = 1")
    code.depth -= 1


def _table_code(code, name, prefix, first, second):
    """Build a row table in shared memory: ``{name}_a`` / ``{name}_b`` offsets (by the
    strides ``{prefix}_{first}`` / ``{prefix}_{second}``), ``{name}_c`` / ``{name}_d`` the
    row's coordinates along its two chunked axes (huge for rows past the last)."""
    code(*(f"{name}_{part} = cuda.shared.array({MAX_ROWS}, np.int64)" for part in "abcd"),
         "q = cuda.threadIdx.x", f"while q < {MAX_ROWS}:")  # fmt: skip
    with code.block():
        code("rest = q", "oa = 0", "ob = 0")
        for j in range(ROW_AXES):
            code(f"position = rest % {prefix}_extent[{j}]", f"rest = rest // {prefix}_extent[{j}]",
                 f"oa += position * {prefix}_{first}[{j}]",
                 f"ob += position * {prefix}_{second}[{j}]")  # fmt: skip
        code(f"{name}_a[q] = oa", f"{name}_b[q] = ob", f"if q < {prefix}s:")
        with code.block():
            code(f"{name}_c[q] = q // {prefix}_inner1 % {prefix}_extent1",
                 f"{name}_d[q] = q // {prefix}_inner2 % {prefix}_extent2")  # fmt: skip
        code("else:")
        with code.block():
            code(f"{name}_c[q] = {_BIG}", f"{name}_d[q] = {_BIG}")
        code(f"q += {THREADS}")


def _select(code, target, sel, default):
    """``target = rem<sel>`` for a runtime ``sel`` (``MASK_AXES``: ``default``)."""
    code(f"{target} = {default}")
    for j in range(MASK_AXES):
        code(f"{'if' if j == 0 else 'elif'} {sel} == {j}:", f"    {target} = rem{j}")


def _rems(code):
    code(*(f"rem{j} = mask_extent[{j}] - g{j} * mask_tile[{j}]" for j in range(MASK_AXES)))


_ROW_PARAMETERS = ("{p}s, {p}_inner1, {p}_extent1, {p}_sel1, {p}_inner2, {p}_extent2, {p}_sel2, "
                   "{p}_extent")


def _mapping_code(code, name, tx, ir, kq, first, second):
    """Per-thread run offsets ``{name}_r<i>`` etc. and table rows ``{name}_q<k>``."""
    code(f"{name}_lane = cuda.threadIdx.x % {tx}",
         f"{name}_row = cuda.threadIdx.x // {tx}",
         f"{name}_step = {THREADS} // {tx}")  # fmt: skip
    for i in range(ir):
        code(f"{name}_r{i} = {name}_lane + {i} * {tx}",
             f"{name}_x{i} = {name}_r{i} * {first}",
             f"{name}_y{i} = {name}_r{i} * {second}")  # fmt: skip
    for k in range(kq):
        code(f"{name}_q{k} = {name}_row + {k} * {name}_step")


def _replicate(value, src_unit, unit):
    """Expression: the ``src_unit``-byte ``value`` repeated to fill ``unit`` bytes."""
    word = min(unit, 8)
    pattern = sum(1 << (8 * src_unit * k) for k in range(word // src_unit))
    repeated = f"(np.uint64({value}) * np.uint64({pattern}))"
    if unit == 16:
        return f"({repeated}, {repeated})"
    return f"np.uint{8 * unit}({repeated})"


# ----------------------------------------------------------------------------- direct
def direct_source(unit, src_unit, ir, kq, grid):
    """Python source of the ``direct`` kernel (see the module docstring)."""
    code = _Code()
    code("def direct(dst, src, tx, run, run_dst, run_src, " + _ROW_PARAMETERS.format(p="row")
         + ",", "           row_dst, row_src, grid_count, grid_dst, grid_src, mask_extent,",
         "           mask_tile, n_tiles, prototype, src_prototype):")  # fmt: skip
    with code.block():
        _table_code(code, "table", "row", "dst", "src")
        code("cuda.syncthreads()")
        _mapping_code(code, "m", "tx", ir, kq, "run_dst", "run_src")
        _walk_start(code, grid)
        _rems(code)
        code("limit = min(run, rem0)")
        _select(code, "limit_c", "row_sel1", _BIG)
        _select(code, "limit_d", "row_sel2", _BIG)
        for k in range(kq):
            code(f"ok{k} = table_c[m_q{k}] < limit_c and table_d[m_q{k}] < limit_d",
                 f"d{k} = dbase + table_a[m_q{k}]", f"s{k} = sbase + table_b[m_q{k}]")  # fmt: skip
        for k in range(kq):
            for i in range(ir):
                code(f"go{k}_{i} = ok{k} and m_r{i} < limit", f"v{k}_{i} = prototype",
                     f"if go{k}_{i}:")  # fmt: skip
                with code.block():
                    if src_unit:
                        value = f"load_unit(s{k} + m_y{i}, src_prototype)"
                        code(f"v{k}_{i} = {_replicate(value, src_unit, unit)}")
                    else:
                        code(f"v{k}_{i} = load_unit(s{k} + m_y{i}, prototype)")
        for k in range(kq):
            for i in range(ir):
                code(f"if go{k}_{i}:")
                with code.block():
                    code(f"store_unit(d{k} + m_x{i}, v{k}_{i}, prototype)")
        _walk_end(code, grid)
    return code.text()


# ----------------------------------------------------------------------------- tiled
def tiled_source(unit, ir1, kq1, ir2, kq2, grid, shared_units):
    """Python source of the ``tiled`` kernel (see the module docstring)."""
    pair = unit == 16
    code = _Code()

    def phase(p):
        rows = _ROW_PARAMETERS.format(p=f"row{p}")
        return (f"tx{p}, run{p}, run{p}_global, run{p}_shared, run{p}_mult, run{p}_sel, {rows},"
                f" row{p}_global, row{p}_shared")  # fmt: skip

    code(f"def tiled(dst, src, {phase(1)},", f"          {phase(2)},",
         "          grid_count, grid_dst, grid_src, mask_extent, mask_tile, n_tiles, prototype):")
    with code.block():
        if pair:
            code(f"buffer = cuda.shared.array(({shared_units}, 2), np.uint64)")
        else:
            code(f"buffer = cuda.shared.array({shared_units}, {_UNIT_TYPES[unit]})")
        for p in (1, 2):
            _table_code(code, f"table{p}", f"row{p}", "global", "shared")
        code("cuda.syncthreads()")
        _mapping_code(code, "a", "tx1", ir1, kq1, "run1_global", "run1_shared")
        _mapping_code(code, "b", "tx2", ir2, kq2, "run2_global", "run2_shared")
        _walk_start(code, grid)
        _rems(code)
        for p in (1, 2):
            _select(code, f"rem_run{p}", f"run{p}_sel", _BIG)
            code(f"limit{p} = run{p}", f"if run{p}_sel < {MASK_AXES}:",
                 f"    limit{p} = min(run{p}, run{p}_mult * rem_run{p})")  # fmt: skip
            _select(code, f"limit{p}_c", f"row{p}_sel1", _BIG)
            _select(code, f"limit{p}_d", f"row{p}_sel2", _BIG)
        # phase 1: source -> tile
        for k in range(kq1):
            code(f"ok{k} = table1_c[a_q{k}] < limit1_c and table1_d[a_q{k}] < limit1_d",
                 f"s{k} = sbase + table1_a[a_q{k}]", f"h{k} = table1_b[a_q{k}]")  # fmt: skip
        for k in range(kq1):
            for i in range(ir1):
                code(f"go{k}_{i} = ok{k} and a_r{i} < limit1", f"v{k}_{i} = prototype",
                     f"if go{k}_{i}:", f"    v{k}_{i} = load_unit(s{k} + a_x{i}, prototype)")  # fmt: skip
        for k in range(kq1):
            for i in range(ir1):
                code(f"if go{k}_{i}:")
                with code.block():
                    if pair:
                        code(f"buffer[h{k} + a_y{i}, 0] = v{k}_{i}[0]",
                             f"buffer[h{k} + a_y{i}, 1] = v{k}_{i}[1]")  # fmt: skip
                    else:
                        code(f"buffer[h{k} + a_y{i}] = v{k}_{i}")
        code("cuda.syncthreads()")
        # phase 2: tile -> destination
        for k in range(kq2):
            code(f"ok{k} = table2_c[b_q{k}] < limit2_c and table2_d[b_q{k}] < limit2_d",
                 f"d{k} = dbase + table2_a[b_q{k}]", f"h{k} = table2_b[b_q{k}]")  # fmt: skip
        for k in range(kq2):
            for i in range(ir2):
                code(f"if ok{k} and b_r{i} < limit2:")
                with code.block():
                    if pair:
                        value = f"(buffer[h{k} + b_y{i}, 0], buffer[h{k} + b_y{i}, 1])"
                    else:
                        value = f"buffer[h{k} + b_y{i}]"
                    code(f"store_unit(d{k} + b_x{i}, {value}, prototype)")
        code("cuda.syncthreads()")
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


def block_source(unit, ka, kb, vs, vd, grid):
    """Python source of the ``block`` kernel for ``ka x kb`` blocks of ``unit``-byte units.

    The block is loaded as ``ka * kb * unit / vs`` vectors of ``vs`` bytes, ``src_step``
    bytes apart (source position of unit ``(ia, ib)``: ``ia + ka * ib``), and stored as
    vectors of ``vd`` bytes ``dst_step`` apart (destination position ``ib + kb * ia``).
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
        _walk_start(code, grid)
        code(*(f"rem{s} = mask_extent[{s}] - g{s} * mask_tile[{s}]" for s in range(BLOCK_SLOTS)))
        inside = " and ".join(f"k{s} < rem{s}" for s in range(BLOCK_SLOTS))
        code(f"if active and {inside}:")
        with code.block():
            code("source = sbase + tsrc", "target = dbase + tdst")
            loads = total // vs
            for j in range(loads):
                code(f"x{j} = load_unit(source + {j} * src_step, src_prototype)")
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
                code(f"store_unit(target + {i} * dst_step, {_value(words, vd)}, dst_prototype)")
        _walk_end(code, grid)
    return code.text()


# ----------------------------------------------------------------------------- compiling
_GENERATORS = {DIRECT: direct_source, TILED: tiled_source, BLOCK: block_source}


def kernel_source(kernel, key):
    """The generated Python source of one kernel specialisation."""
    return _GENERATORS[kernel](*key)


_HEADER = (
    "# Generated by layoutkit.copy.gpu; compiled kernels are cached beside this file.\n"
    "import numpy as np\n"
    "from numba import cuda\n\n"
    "from layoutkit.copy.gpu import load_unit, store_unit\n\n\n"
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
        namespace = {"cuda": cuda, "np": np, "load_unit": load_unit, "store_unit": store_unit}
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
    if launch.kernel == TILED:
        return (_PROTOTYPES[launch.key[0]],)
    _, _, _, vs, vd, _ = launch.key
    return (_PROTOTYPES[vs], _PROTOTYPES[vd])


def argument_types(kernel, key):
    """The Numba types of a kernel specialisation's parameters (addresses first).

    Examples
    --------
    >>> len(argument_types("direct", (4, 0, 1, 16, 4)))
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

    rows = [i64] * 7 + [ints(ROW_AXES)] * 3
    if kernel == DIRECT:
        unit, src_unit, _, _, grid = key
        middle = [i64] * 4 + rows
        protos = [unit_type(unit), unit_type(src_unit or unit)]
    elif kernel == TILED:
        unit, grid = key[0], key[5]
        middle = ([i64] * 6 + rows) * 2
        protos = [unit_type(unit)]
    else:
        _, _, _, vs, vd, grid = key
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
    >>> grid_blocks(10_000, 16384, 132, 8)  # 4 blocks of 16 KB per SM, 19 tiles each
    527
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
        probe = PreparedLaunch(compiled, types, 1, THREADS, 0, 0)
        resident = probe.max_active_blocks_per_sm()
        blocks = grid_blocks(launch.tiles, launch.in_flight,
                             _driver.multiprocessor_count(device_id), resident)  # fmt: skip
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
