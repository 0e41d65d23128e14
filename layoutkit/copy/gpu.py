"""numba-cuda kernels that execute a copy plan between two device-accessible views.

* ``elementwise``: a grid-stride loop over the coalesced index space, fastest destination
  axis innermost; each thread keeps four units in flight (four loads, then four stores).
  The unit is 1 to 16 bytes, so a contiguous run moves through 16-byte vector accesses.
* ``transpose``: for plans whose two sides have different fastest axes. A tile of
  ``tile x tile`` units goes through shared memory (rows padded by one unit against bank
  conflicts); reads are coalesced along the source's fastest axis and writes along the
  destination's. Blocks loop over tiles (grid-stride), each tile also indexed by the
  remaining "batch" axes.

Kernels take raw addresses as ``int64`` and strides in bytes; they are specialised by
argument types (number of axes, unit size). Under the CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) the same kernels run with Python loads and stores.
"""

import ctypes
import functools

import numpy as np
from numba import cuda
from numba.core import config

from layoutkit.copy.plan import ELEMENTWISE, NONE, TRANSPOSE

__all__ = [
    "launch_plan",
    "elementwise_kernel",
    "transpose_kernel",
    "elementwise_source",
    "transpose_source",
]

#: Threads per block of every kernel.
THREADS = 256
#: Units each elementwise thread keeps in flight.
UNROLL = 4
#: Blocks per SM the grid-stride launches aim for.
BLOCKS_PER_SM = 8

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


def elementwise_source(ndim):
    """Python source of the elementwise kernel over ``ndim`` coalesced axes.

    Every thread of a grid-stride loop keeps ``UNROLL`` units in flight: it computes
    their offsets, loads them all, then stores them all.
    """
    lines = ["def elementwise(dst, src, shape, dst_strides, src_strides, count, prototype):"]
    for k in range(ndim):
        lines.append(f"    e{k} = shape[{k}]; ds{k} = dst_strides[{k}]; ss{k} = src_strides[{k}]")
    lines += ["    step = cuda.gridsize(1)", "    i = cuda.grid(1)"]
    lines.append(f"    while i + {UNROLL - 1} * step < count:")
    for u in range(UNROLL):
        lines += _offsets_code(ndim, f"i + {u} * step", u, 8)
    lines += [f"        v{u} = load_unit(src + s{u}, prototype)" for u in range(UNROLL)]
    lines += [f"        store_unit(dst + d{u}, v{u})" for u in range(UNROLL)]
    lines.append(f"        i += {UNROLL} * step")
    lines.append("    while i < count:")
    lines += _offsets_code(ndim, "i", 0, 8)
    lines += ["        store_unit(dst + d0, load_unit(src + s0, prototype))", "        i += step"]
    return "\n".join(lines) + "\n"


@functools.cache
def elementwise_kernel(ndim):
    """The elementwise kernel for ``ndim`` coalesced axes (specialised by unit on launch)."""
    return cuda.jit(_compile(elementwise_source(ndim), "elementwise"))


def transpose_source(unit, tile, batch_ndim):
    """Python source of the tiled transpose for ``unit``-byte units, ``tile``-unit tiles.

    ``rows`` is the source's fastest axis, ``cols`` the destination's; the tile goes
    through shared memory as ``buffer[col, row]`` with one unit of padding per row.
    ``batch_ndim`` further axes index the tiles. A full tile is moved by unrolled code
    that issues all of a thread's global loads before its first shared-memory store;
    edge tiles take a checked loop.
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

    passes = THREADS // tile
    per_thread = tile // passes
    lines = [
        "def transpose(dst, src, rows, cols, dst_row, dst_col, src_row, src_col,",
        "              batch_shape, batch_dst, batch_src, tiles_rows, tiles_cols, n_tiles,",
        "              prototype):",
        f"    buffer = cuda.shared.array({shape}, {dtype})",
        "    tx = cuda.threadIdx.x",
        "    ty = cuda.threadIdx.y",
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
    lines += [
        f"        r0 = tile_row * {tile}",
        f"        c0 = tile_col * {tile}",
        f"        if r0 + {tile} <= rows and c0 + {tile} <= cols:",
        "            source = src_base + (r0 + tx) * src_row + (c0 + ty) * src_col",
        f"            source_step = {passes} * src_col",
    ]
    lines += [f"            v{m} = load_unit(source + {m} * source_step, prototype)"
              for m in range(per_thread)]  # fmt: skip
    for m in range(per_thread):
        lines += ["            " + line for line in put(f"ty + {m * passes}", "tx", f"v{m}")]
    lines += [
        "            cuda.syncthreads()",
        "            target = dst_base + (r0 + ty) * dst_row + (c0 + tx) * dst_col",
        f"            target_step = {passes} * dst_row",
    ]
    lines += [f"            w{m} = {get('tx', f'ty + {m * passes}')}" for m in range(per_thread)]
    lines += [
        f"            store_unit(target + {m} * target_step, w{m})" for m in range(per_thread)
    ]
    lines += [
        "        else:",
        "            r = r0 + tx",
        "            if r < rows:",
        f"                for j in range(ty, {tile}, {passes}):",
        "                    c = c0 + j",
        "                    if c < cols:",
        "                        value = load_unit(src_base + r * src_row + c * src_col, prototype)",
        *("                        " + line for line in put("j", "tx", "value")),
        "            cuda.syncthreads()",
        "            c = c0 + tx",
        "            if c < cols:",
        f"                for j in range(ty, {tile}, {passes}):",
        "                    r = r0 + j",
        "                    if r < rows:",
        f"                        store_unit(dst_base + r * dst_row + c * dst_col, {get('tx', 'j')})",
        "        cuda.syncthreads()",
        "        t += cuda.gridDim.x",
    ]
    return "\n".join(lines) + "\n"


@functools.cache
def transpose_kernel(unit, tile, batch_ndim):
    """The transpose kernel for one unit size, tile edge and number of batch axes."""
    return cuda.jit(_compile(transpose_source(unit, tile, batch_ndim), "transpose"))


@functools.cache
def _multiprocessors(device_id):
    if _SIM:
        return 1
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def _stream(handle):
    if _SIM or handle == 0:
        return 0
    return cuda.external_stream(handle)


def _transpose_arguments(plan, dst, src):
    axis = plan.tile_axis
    last = plan.ndim - 1
    batch = [k for k in range(plan.ndim) if k not in (axis, last)] or None
    if batch is None:
        batch_shape, batch_dst, batch_src = (1,), (0,), (0,)
    else:
        batch_shape = tuple(plan.shape[k] for k in batch)
        batch_dst = tuple(plan.dst_strides[k] for k in batch)
        batch_src = tuple(plan.src_strides[k] for k in batch)
    rows, cols = plan.shape[axis], plan.shape[last]
    tiles_rows = -(-rows // plan.tile)
    tiles_cols = -(-cols // plan.tile)
    n_tiles = tiles_rows * tiles_cols
    for extent in batch_shape:
        n_tiles *= extent
    return (
        dst, src, rows, cols,
        plan.dst_strides[axis], plan.dst_strides[last],
        plan.src_strides[axis], plan.src_strides[last],
        batch_shape, batch_dst, batch_src, tiles_rows, tiles_cols, n_tiles,
    )  # fmt: skip


def launch_plan(plan, dst_ptr, src_ptr, stream_handle=0, device_id=0):
    """Queue the kernel of an ``elementwise`` or ``transpose`` plan on a stream.

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
    from layoutkit.copy._units import UNIT_PROTOTYPES

    if plan.method == NONE:
        return
    prototype = UNIT_PROTOTYPES[plan.unit]
    dst = int(dst_ptr + plan.dst_offset)
    src = int(src_ptr + plan.src_offset)
    stream = _stream(stream_handle)
    max_blocks = _multiprocessors(device_id) * BLOCKS_PER_SM
    if plan.method == ELEMENTWISE:
        count = plan.volume
        blocks = max(1, min(max_blocks, -(-count // (THREADS * UNROLL))))
        elementwise_kernel(plan.ndim)[blocks, THREADS, stream](
            dst, src, plan.shape, plan.dst_strides, plan.src_strides, count, prototype
        )
        return
    if plan.method == TRANSPOSE:
        arguments = _transpose_arguments(plan, dst, src)
        blocks = max(1, min(max_blocks, arguments[-1]))
        kernel = transpose_kernel(plan.unit, plan.tile, len(arguments[8]))
        kernel[blocks, (plan.tile, THREADS // plan.tile), stream](*arguments, prototype)
        return
    raise ValueError(f"plan method {plan.method!r} has no kernel")
