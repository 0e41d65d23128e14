"""numba-cuda kernels that execute a copy plan between two device-accessible views.

* ``elementwise``: a grid-stride loop over the coalesced index space, fastest destination
  axis innermost; each thread keeps four units in flight (four loads, then four stores).
  The unit is 1 to 16 bytes, so a contiguous run moves through 16-byte vector accesses.
* ``fill``: the elementwise kernel for a source that does not move along the
  destination's innermost axis: each source unit is loaded once per destination unit
  and repeated to fill it (a float32 broadcast along rows is stored 16 bytes at a time).
* ``transpose``: for plans whose two sides have different fastest axes. A tile of
  ``tile x tile`` units goes through shared memory (rows padded by one unit against bank
  conflicts); reads are coalesced along the source's fastest axis and writes along the
  destination's, each thread keeping ``tile // 4`` loads in flight; axes smaller than a
  tile are folded into its rows or columns (see :func:`layoutkit.copy.plan.plan_copy`).
  Blocks loop over tiles (grid-stride), each tile also indexed by the remaining "batch"
  axes.
* ``block transpose``: the same plans with 1- or 2-byte units (4-byte ones where the
  groups cannot fill a shared tile) when the planner found a ``vector`` access that fits: each thread loads a square block of units as 8- or
  16-byte vectors along the source's fastest axis, transposes it in registers (shifts
  and masks of 32-bit words) and stores it as vectors along the destination's. Narrow
  units then move in wide accesses on both sides, without shared memory.

Kernels take raw addresses as ``int64`` and strides in bytes; they are specialised by
argument types (number of axes, unit size). Under the CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) the same kernels run with Python loads and stores.
"""

import contextlib
import ctypes
import functools
import struct
import warnings

import numpy as np
from numba import cuda
from numba.core import config

from layoutkit.copy.plan import ELEMENTWISE, FILL, NONE, TRANSPOSE

__all__ = [
    "launch_plan",
    "elementwise_kernel",
    "transpose_kernel",
    "elementwise_source",
    "transpose_source",
    "block_transpose_kernel",
    "block_transpose_source",
]

#: Threads per block of every kernel.
THREADS = 256
#: Units each elementwise thread keeps in flight.
UNROLL = 4
#: Blocks per SM of the shared-memory transpose launches (grid-stride loops over tiles);
#: 4 and 16 moved 16384**2 float32 at the same rate on an H200.
BLOCKS_PER_SM = 8
#: Blocks per SM of the register-block transpose: on an H200 16 beat 8 (16384**2 float16
#: 3.55 against 3.33 TB/s, uint8 2.80 against 2.56).
BLOCK_BLOCKS_PER_SM = 16
#: Blocks per SM of the elementwise and fill launches. On an H200 32 beat 8: reversed
#: 16384**2 float32 3.70 TB/s against 3.59, step-2 slice float16 2.58 against 2.46.
ELEMENTWISE_BLOCKS_PER_SM = 32
#: Lanes of a warp along the source's fastest axis in the register-block transpose (8
#: of them read 8 16-byte vectors, a 128-byte line; 4 lanes write 64 bytes of a row). On
#: an H200 8 beat 4 and 16 for float16 (3.33 against 2.93 and 3.03 TB/s) and uint8.
BLOCK_LANES_A = 8

_SIM = bool(config.ENABLE_CUDASIM)

if _SIM:
    _CTYPES = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}

    def load_unit(address, prototype):
        """Simulator load: read the unit at ``address`` through ctypes."""
        address = int(address)
        if isinstance(prototype, tuple):
            return tuple(
                np.uint64(ctypes.c_uint64.from_address(address + 8 * i).value) for i in (0, 1)
            )
        value = _CTYPES[prototype.itemsize].from_address(address).value
        return type(prototype)(value)

    def store_unit(address, value):
        """Simulator store: write the unit ``value`` at ``address`` through ctypes."""
        address = int(address)
        if isinstance(value, tuple):
            for i in (0, 1):
                ctypes.c_uint64.from_address(address + 8 * i).value = int(value[i])
        else:
            _CTYPES[value.itemsize].from_address(address).value = int(value)

else:
    from layoutkit.copy._units import load_unit, store_unit


def _compile(source, name):
    """Execute generated kernel ``source`` and return ``cuda.jit`` of function ``name``."""
    namespace = {"cuda": cuda, "np": np, "load_unit": load_unit, "store_unit": store_unit}
    exec(compile(source, f"<layoutkit.copy.gpu {name}>", "exec"), namespace)
    function = namespace[name]
    function.source = source
    return function


def _offsets_code(ndim, index, suffix, indent):
    """Lines computing byte offsets ``d<suffix>``/``s<suffix>`` of linear ``index``."""
    pad = " " * indent
    lines = [f"{pad}rest = {index}", f"{pad}d{suffix} = 0", f"{pad}s{suffix} = 0"]
    for k in range(ndim - 1, 0, -1):
        lines += [
            f"{pad}quotient = rest // e{k}",
            f"{pad}position = rest - quotient * e{k}",
            f"{pad}d{suffix} += position * ds{k}",
            f"{pad}s{suffix} += position * ss{k}",
            f"{pad}rest = quotient",
        ]
    lines += [f"{pad}d{suffix} += rest * ds0", f"{pad}s{suffix} += rest * ss0"]
    return lines


def _replicate_code(value, src_unit, unit, out, indent):
    """Lines making ``v<out>``: the ``src_unit``-byte ``value`` repeated to ``unit`` bytes."""
    pad = " " * indent
    word = min(unit, 8)
    pattern = sum(1 << (8 * src_unit * k) for k in range(word // src_unit))
    lines = [f"{pad}x{out} = np.uint64({value}) * np.uint64({pattern})"]
    if unit == 16:
        return [*lines, f"{pad}v{out} = (x{out}, x{out})"]
    return [*lines, f"{pad}v{out} = np.uint{8 * unit}(x{out})"]


def elementwise_source(ndim, src_unit=0, unit=0):
    """Python source of the elementwise kernel over ``ndim`` coalesced axes.

    Every thread of a grid-stride loop keeps ``UNROLL`` units in flight: it computes
    their offsets, loads them all, then stores them all. With ``src_unit`` (a fill
    plan) each loaded ``src_unit``-byte value is repeated into a ``unit``-byte one.
    """

    def load(out, indent):
        if not src_unit:
            return [f"{' ' * indent}v{out} = load_unit(src + s{out}, prototype)"]
        value = f"load_unit(src + s{out}, src_prototype)"
        return _replicate_code(value, src_unit, unit, out, indent)

    lines = [
        "def elementwise(dst, src, shape, dst_strides, src_strides, count, prototype,",
        "                src_prototype):",
    ]
    for k in range(ndim):
        lines.append(f"    e{k} = shape[{k}]; ds{k} = dst_strides[{k}]; ss{k} = src_strides[{k}]")
    lines += ["    step = cuda.gridsize(1)", "    i = cuda.grid(1)"]
    lines.append(f"    while i + {UNROLL - 1} * step < count:")
    for u in range(UNROLL):
        lines += _offsets_code(ndim, f"i + {u} * step", u, 8)
    for u in range(UNROLL):
        lines += load(u, 8)
    lines += [f"        store_unit(dst + d{u}, v{u})" for u in range(UNROLL)]
    lines.append(f"        i += {UNROLL} * step")
    lines.append("    while i < count:")
    lines += _offsets_code(ndim, "i", 0, 8)
    lines += load(0, 8)
    lines += ["        store_unit(dst + d0, v0)", "        i += step"]
    return "\n".join(lines) + "\n"


@functools.cache
def elementwise_kernel(ndim, src_unit=0, unit=0):
    """The elementwise kernel for ``ndim`` axes (specialised by unit on launch).

    ``src_unit`` and ``unit`` select the fill variant, which repeats source units.
    """
    return cuda.jit(_compile(elementwise_source(ndim, src_unit, unit), "elementwise"))


def _group_code(group, index, size, out, indent):
    """Lines computing offsets ``d<out>``/``s<out>`` of ``index`` over an axis group.

    The group's axes (``<group>_shape``, ``<group>_dst``, ``<group>_src``) are listed
    fastest first.
    """
    pad = " " * indent
    if size == 1:
        return [f"{pad}d{out} = ({index}) * {group}_dst[0]",
                f"{pad}s{out} = ({index}) * {group}_src[0]"]  # fmt: skip
    lines = [f"{pad}rest{out} = {index}"]
    for j in range(size):
        position = f"rest{out}"
        if j < size - 1:
            lines += [
                f"{pad}quotient{out} = rest{out} // {group}_shape[{j}]",
                f"{pad}position{out} = rest{out} - quotient{out} * {group}_shape[{j}]",
            ]
            position = f"position{out}"
        assign = "=" if j == 0 else "+="
        lines += [
            f"{pad}d{out} {assign} {position} * {group}_dst[{j}]",
            f"{pad}s{out} {assign} {position} * {group}_src[{j}]",
        ]
        if j < size - 1:
            lines.append(f"{pad}rest{out} = quotient{out}")
    return lines


def _tile_walk_code(batch_ndim):
    """Source lines of a grid-stride walk over tiles: the tile's row, column and batch bases.

    The block takes tiles ``t = blockIdx.x, blockIdx.x + gridDim.x, ...``; each tile's
    index splits into its column, its row and one position per batch axis, whose strides
    move ``dst_base`` and ``src_base``.
    """
    lines = [
        "    t = cuda.blockIdx.x",
        "    while t < n_tiles:",
        "        tile_col = t % tiles_cols",
        "        rest = t // tiles_cols",
        "        tile_row = rest % tiles_rows",
        "        rest = rest // tiles_rows",
        "        dst_base = dst",
        "        src_base = src",
    ]
    for k in range(batch_ndim - 1, -1, -1):
        lines += [
            f"        quotient = rest // batch_shape[{k}]",
            f"        position = rest - quotient * batch_shape[{k}]",
            f"        dst_base += position * batch_dst[{k}]",
            f"        src_base += position * batch_src[{k}]",
            "        rest = quotient",
        ]
    return lines


def transpose_source(unit, tile, row_ndim, col_ndim, batch_ndim):
    """Python source of the tiled transpose for ``unit``-byte units, ``tile``-unit tiles.

    A tile's rows run along the source's fastest axes (``row_ndim`` axes folded
    together), its columns along the destination's (``col_ndim`` axes); it goes through
    shared memory as ``buffer[col, row]`` with one unit of padding per row, so reads
    are coalesced in the source and writes in the destination. ``batch_ndim`` further
    axes index the tiles. A full tile is moved by unrolled code that issues all of a
    thread's global loads before its first shared-memory store; edge tiles take a
    checked loop.
    """
    pair = unit == 16
    shape = f"({tile}, {tile + 1}, 2)" if pair else f"({tile}, {tile + 1})"
    dtype = "np.uint64" if pair else f"np.uint{8 * unit}"

    def put(row, col, value):
        if pair:
            return [
                f"buffer[{row}, {col}, 0] = {value}[0]",
                f"buffer[{row}, {col}, 1] = {value}[1]",
            ]
        return [f"buffer[{row}, {col}] = {value}"]

    def get(row, col):
        return (
            f"(buffer[{row}, {col}, 0], buffer[{row}, {col}, 1])"
            if pair
            else f"buffer[{row}, {col}]"
        )

    def rows_at(index, out, indent):
        return _group_code("row", index, row_ndim, out, indent)

    def cols_at(index, out, indent):
        return _group_code("col", index, col_ndim, out, indent)

    passes = THREADS // tile
    per_thread = tile // passes
    lines = [
        "def transpose(dst, src, rows, cols, row_shape, row_dst, row_src,",
        "              col_shape, col_dst, col_src, batch_shape, batch_dst, batch_src,",
        "              tiles_rows, tiles_cols, n_tiles, prototype):",
        f"    buffer = cuda.shared.array({shape}, {dtype})",
        "    tx = cuda.threadIdx.x",
        "    ty = cuda.threadIdx.y",
    ]
    lines += _tile_walk_code(batch_ndim)
    lines += [
        f"        r0 = tile_row * {tile}",
        f"        c0 = tile_col * {tile}",
        f"        if r0 + {tile} <= rows and c0 + {tile} <= cols:",
        *rows_at("r0 + tx", "R", 12),
    ]
    for m in range(per_thread):
        lines += cols_at(f"c0 + ty + {m * passes}", f"c{m}", 12)
    lines += [f"            v{m} = load_unit(src_base + sR + sc{m}, prototype)"
              for m in range(per_thread)]  # fmt: skip
    for m in range(per_thread):
        lines += ["            " + line for line in put(f"ty + {m * passes}", "tx", f"v{m}")]
    lines += ["            cuda.syncthreads()", *cols_at("c0 + tx", "C", 12)]
    for m in range(per_thread):
        lines += rows_at(f"r0 + ty + {m * passes}", f"r{m}", 12)
    lines += [f"            w{m} = {get('tx', f'ty + {m * passes}')}" for m in range(per_thread)]
    lines += [f"            store_unit(dst_base + dr{m} + dC, w{m})" for m in range(per_thread)]
    lines += [
        "        else:",
        "            r = r0 + tx",
        "            if r < rows:",
        *rows_at("r", "R", 16),
        f"                for j in range(ty, {tile}, {passes}):",
        "                    c = c0 + j",
        "                    if c < cols:",
        *cols_at("c", "c", 24),
        "                        value = load_unit(src_base + sR + sc, prototype)",
        *("                        " + line for line in put("j", "tx", "value")),
        "            cuda.syncthreads()",
        "            c = c0 + tx",
        "            if c < cols:",
        *cols_at("c", "C", 16),
        f"                for j in range(ty, {tile}, {passes}):",
        "                    r = r0 + j",
        "                    if r < rows:",
        *rows_at("r", "r", 24),
        f"                        store_unit(dst_base + dr + dC, {get('tx', 'j')})",
        "        cuda.syncthreads()",
        "        t += cuda.gridDim.x",
    ]
    return "\n".join(lines) + "\n"


@functools.cache
def transpose_kernel(unit, tile, row_ndim, col_ndim, batch_ndim):
    """The transpose kernel for one unit size, tile edge and number of axes per group."""
    source = transpose_source(unit, tile, row_ndim, col_ndim, batch_ndim)
    return cuda.jit(_compile(source, "transpose"))


def _words_of(vector, size, name):
    """Lines splitting the loaded ``size``-byte unit ``vector`` into 32-bit words ``<name>_<w>``."""
    if size == 4:
        return [f"{name}_0 = {vector}"]
    halves = [f"{vector}[0]", f"{vector}[1]"] if size == 16 else [vector]
    lines = []
    for h, half in enumerate(halves):
        lines += [
            f"{name}_{2 * h} = np.uint32({half} & np.uint64(0xFFFFFFFF))",
            f"{name}_{2 * h + 1} = np.uint32({half} >> np.uint64(32))",
        ]
    return lines


def _unit_of(words, size):
    """Expression packing 32-bit word expressions ``words`` into one ``size``-byte unit."""

    def pair(lo, hi):
        return f"(np.uint64({lo}) | (np.uint64({hi}) << np.uint64(32)))"

    if size == 16:
        return f"({pair(words[0], words[1])}, {pair(words[2], words[3])})"
    if size == 8:
        return pair(words[0], words[1])
    return words[0]


def _transposed_words(k, unit):
    """32-bit word expressions of each output vector of a ``k x k`` block transpose.

    Input vector ``j`` (``k`` units of ``unit`` bytes) has words ``x<j>_<w>``; unit ``j``
    of output vector ``i`` is unit ``i`` of input ``j``. Returns a list (by ``i``) of
    lists of word expressions.
    """
    bits = 8 * unit
    per_word = 4 // unit
    out = []
    for i in range(k):
        word, shift = divmod(i * unit * 8, 32)
        words = []
        for w in range(k // per_word):
            parts = []
            for p in range(per_word):
                field = f"x{w * per_word + p}_{word}"
                if shift:
                    field = f"({field} >> np.uint32({shift}))"
                if bits < 32:
                    field = f"({field} & np.uint32({(1 << bits) - 1}))"
                parts.append(f"({field} << np.uint32({bits * p}))" if p else field)
            words.append(" | ".join(parts))
        out.append(words)
    return out


def block_tile(unit, vector, lanes_a, warps_a):
    """Tile ``(rows, columns)`` in units of the register-block transpose's 256 threads."""
    k = vector // unit
    return warps_a * lanes_a * k, (THREADS // 32 // warps_a) * (32 // lanes_a) * k


def block_transpose_source(unit, vector, lanes_a, warps_a, row_ndim, col_ndim, batch_ndim):
    """Python source of the register-block transpose (plans with a ``vector``).

    Each thread moves a block of ``k x k`` units (``k = vector // unit``): ``k``
    ``vector``-byte loads along the source's fastest axis (the tile's rows ``a``), a
    transpose in registers, ``k`` ``vector``-byte stores along the destination's (the
    columns ``b``). No shared memory and no barrier. A warp is ``lanes_a x (32 //
    lanes_a)`` threads over ``(a, b)``; a block of 256 threads is ``warps_a x (8 //
    warps_a)`` warps. ``k`` divides the first axis of both groups (see
    :func:`layoutkit.copy.plan.plan_copy`), so a block lies wholly inside or outside.
    """
    k = vector // unit
    lanes_b = 32 // lanes_a
    tile_a, tile_b = block_tile(unit, vector, lanes_a, warps_a)
    lines = [
        "def transpose(dst, src, rows, cols, row_shape, row_dst, row_src,",
        "              col_shape, col_dst, col_src, batch_shape, batch_dst, batch_src,",
        "              tiles_rows, tiles_cols, n_tiles, prototype):",
        "    lane = cuda.threadIdx.x % 32",
        "    warp = cuda.threadIdx.x // 32",
        f"    a_in = (warp % {warps_a} * {lanes_a} + lane % {lanes_a}) * {k}",
        f"    b_in = (warp // {warps_a} * {lanes_b} + lane // {lanes_a}) * {k}",
        "    src_next = col_src[0]",
        "    dst_next = row_dst[0]",
    ]
    lines += _tile_walk_code(batch_ndim)
    lines += [
        f"        a = tile_row * {tile_a} + a_in",
        f"        b = tile_col * {tile_b} + b_in",
        "        if a < rows and b < cols:",
        *_group_code("row", "a", row_ndim, "A", 12),
        *_group_code("col", "b", col_ndim, "B", 12),
        "            source = src_base + sA + sB",
        "            target = dst_base + dA + dB",
    ]
    pad = " " * 12
    lines += [f"{pad}v{j} = load_unit(source + {j} * src_next, prototype)" for j in range(k)]
    for j in range(k):
        lines += [pad + line for line in _words_of(f"v{j}", vector, f"x{j}")]
    for i, words in enumerate(_transposed_words(k, unit)):
        lines.append(f"{pad}store_unit(target + {i} * dst_next, {_unit_of(words, vector)})")
    lines.append("        t += cuda.gridDim.x")
    return "\n".join(lines) + "\n"


@functools.cache
def block_transpose_kernel(unit, vector, lanes_a, warps_a, row_ndim, col_ndim, batch_ndim):
    """The register-block transpose kernel (see :func:`block_transpose_source`)."""
    source = block_transpose_source(unit, vector, lanes_a, warps_a, row_ndim, col_ndim, batch_ndim)
    return cuda.jit(_compile(source, "transpose"))


@functools.cache
def _multiprocessors(device_id):
    if _SIM:
        return 1
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def _stream(handle):
    if _SIM or handle == 0:
        return 0
    return cuda.external_stream(handle)


def _transpose_arguments(plan, tile_rows, tile_cols):
    """Transpose kernel arguments after the two addresses and before the prototype."""

    def group(axes):
        return (
            tuple(plan.shape[k] for k in axes),
            tuple(plan.dst_strides[k] for k in axes),
            tuple(plan.src_strides[k] for k in axes),
        )

    row_group = group(plan.row_axes)
    col_group = group(plan.col_axes)
    batch = [k for k in range(plan.ndim) if k not in plan.row_axes and k not in plan.col_axes]
    batch_group = group(batch) if batch else ((1,), (0,), (0,))
    rows = cols = 1
    for extent in row_group[0]:
        rows *= extent
    for extent in col_group[0]:
        cols *= extent
    tiles_rows = -(-rows // tile_rows)
    tiles_cols = -(-cols // tile_cols)
    n_tiles = tiles_rows * tiles_cols
    for extent in batch_group[0]:
        n_tiles *= extent
    return (rows, cols, *row_group, *col_group, *batch_group,
            tiles_rows, tiles_cols, n_tiles)  # fmt: skip


def block_layout(plan):
    """``(lanes_a, warps_a)`` of the register-block transpose of ``plan``.

    ``BLOCK_LANES_A`` lanes of a warp run along the source's fastest axis; the block's
    8 warps are stacked along the destination's, unless that leaves threads without
    columns: then they are spread along the rows.
    """
    k = plan.vector // plan.unit
    cols = 1
    for axis in plan.col_axes:
        cols *= plan.shape[axis]
    warps_b = THREADS // 32
    while warps_b > 1 and warps_b * (32 // BLOCK_LANES_A) * k > cols:
        warps_b //= 2
    return BLOCK_LANES_A, THREADS // 32 // warps_b


@functools.lru_cache(maxsize=1024)
def _launch_setup(plan, device_id):
    """``(kernel, blocks, threads, arguments)`` of a plan; arguments follow the addresses."""
    from layoutkit.copy._units import UNIT_PROTOTYPES

    prototype = UNIT_PROTOTYPES[plan.unit]
    if plan.method in (ELEMENTWISE, FILL):
        count = plan.volume
        max_blocks = _multiprocessors(device_id) * ELEMENTWISE_BLOCKS_PER_SM
        blocks = max(1, min(max_blocks, -(-count // (THREADS * UNROLL))))
        kernel = elementwise_kernel(plan.ndim, plan.src_unit, plan.unit if plan.src_unit else 0)
        src_prototype = UNIT_PROTOTYPES[plan.src_unit or plan.unit]
        arguments = (plan.shape, plan.dst_strides, plan.src_strides, count, prototype,
                     src_prototype)  # fmt: skip
        return kernel, blocks, THREADS, arguments
    if plan.method != TRANSPOSE:
        raise ValueError(f"plan method {plan.method!r} has no kernel")
    groups = (len(plan.row_axes), len(plan.col_axes))
    if plan.vector:
        lanes_a, warps_a = block_layout(plan)
        arguments = _transpose_arguments(
            plan, *block_tile(plan.unit, plan.vector, lanes_a, warps_a)
        )
        kernel = block_transpose_kernel(
            plan.unit, plan.vector, lanes_a, warps_a, *groups, len(arguments[8])
        )
        threads = THREADS
        prototype = UNIT_PROTOTYPES[plan.vector]
    else:
        arguments = _transpose_arguments(plan, plan.tile, plan.tile)
        kernel = transpose_kernel(plan.unit, plan.tile, *groups, len(arguments[8]))
        threads = (plan.tile, THREADS // plan.tile)
    per_sm = BLOCK_BLOCKS_PER_SM if plan.vector else BLOCKS_PER_SM
    blocks = max(1, min(_multiprocessors(device_id) * per_sm, arguments[-1]))
    return kernel, blocks, threads, (*arguments, prototype)


#: Launch compiled copy kernels through ``cuLaunchKernel`` with their arguments packed
#: once per plan, instead of through numba-cuda's dispatcher (which types and converts
#: some 40 kernel parameters on every launch).
DRIVER_LAUNCH = True

_PARAMETER_FORMATS = {1: "B7x", 2: "H6x", 4: "I4x", 8: "Q"}


def _parameters(values):
    """``(struct format, flat values)`` of kernel arguments: one 8-byte slot per parameter.

    numba-cuda passes a tuple argument as one parameter per item; a ``uint8`` ...
    ``uint64`` unit prototype is one parameter of its size.
    """
    fmt, flat = "", []
    for value in values:
        if isinstance(value, tuple):
            inner, inner_flat = _parameters(value)
            fmt += inner
            flat += inner_flat
        elif isinstance(value, np.integer):
            fmt += _PARAMETER_FORMATS[value.itemsize]
            flat.append(int(value))
        else:
            fmt += "q"
            flat.append(int(value))
    return fmt, flat


class _DriverLaunch:
    """A compiled copy kernel relaunched with new addresses through ``cuLaunchKernel``.

    The parameter slots are packed once; a launch writes the two addresses into the
    first two slots (under a lock: the driver copies the parameters at the call).
    """

    def __init__(self, kernel, blocks, threads, arguments):
        import threading

        from numba import typeof

        from layoutkit import _driver

        compiled = kernel.compile(tuple(typeof(value) for value in (0, 0, *arguments)))
        fmt, flat = _parameters(arguments)
        self._launcher = _driver.KernelLauncher(
            int(compiled._codelibrary.get_cufunc().handle), "qq" + fmt
        )
        self._slots = self._launcher.slots
        self._launcher.packer.pack_into(self._slots, 0, 0, 0, *flat)
        self._addresses = struct.Struct("<qq")
        self._lock = threading.Lock()
        block = (threads,) if isinstance(threads, int) else threads
        self._grid = (blocks, 1, 1)
        self._block = (*block, *(1,) * (3 - len(block)))

    def __call__(self, dst, src, stream_handle):
        stream = self._launcher.stream(stream_handle)
        with self._lock:
            self._addresses.pack_into(self._slots, 0, dst, src)
            self._launcher.launch(self._grid, self._block, 0, stream)


@functools.lru_cache(maxsize=1024)
def _driver_launch(plan, device_id):
    """The :class:`_DriverLaunch` of a plan's kernel on a device (compiles on first use)."""
    return _DriverLaunch(*_launch_setup(plan, device_id))


#: numba-cuda warns about grids below this many blocks; a small copy needs no more.
_NUMBA_MIN_GRID = 128


@contextlib.contextmanager
def _quiet(blocks):
    """Silence numba-cuda's low-occupancy warning for a deliberately small grid."""
    if blocks >= _NUMBA_MIN_GRID:
        yield
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Grid size", category=Warning)
        yield


def launch_plan(plan, dst_ptr, src_ptr, stream_handle=0, device_id=0):
    """Queue the kernel of an ``elementwise``, ``fill`` or ``transpose`` plan on a stream.

    Parameters
    ----------
    plan : CopyPlan
        A plan between two device-accessible views.
    dst_ptr, src_ptr : int
        Device addresses of element zero of each view.
    stream_handle : int
        The ``CUstream`` handle (0: the legacy default stream).
    device_id : int
        The device whose current context runs the kernel (used for the grid size).
    """
    if plan.method == NONE:
        return
    dst = int(dst_ptr + plan.dst_offset)
    src = int(src_ptr + plan.src_offset)
    if DRIVER_LAUNCH and not _SIM:
        _driver_launch(plan, device_id)(dst, src, int(stream_handle))
        return
    kernel, blocks, threads, arguments = _launch_setup(plan, device_id)
    with _quiet(blocks):
        kernel[blocks, threads, _stream(stream_handle)](dst, src, *arguments)
