"""Execute a copy between two host views: ``memmove`` or an ``@njit`` kernel.

The kernel walks the coalesced axes with byte strides and moves one unit (1 to 16 bytes)
per index. Its last two axes are copied in blocks, so a transpose reads and writes
through cache-sized tiles; rows contiguous on both sides move with ``memcpy``. Copies of
more than ``PARALLEL_BYTES`` are split along their slowest axes into pieces run by a
small pool of threads (the kernel releases the GIL).
"""

import ctypes
import functools
import os
import threading

import numpy as np
from numba import config as numba_config

from layoutkit._jit import njit
from layoutkit.copy._units import UNIT_PROTOTYPES, copy_bytes, load_unit, store_unit
from layoutkit.copy.plan import HOST, MEMCPY, NONE

__all__ = ["run_host_plan", "copy_problem", "split_problem", "kernel_beats_numpy"]

#: Transpose blocks on the CPU (rows along the source's fastest axis, columns along the
#: destination's), by unit size: tall and narrow blocks measured fastest (2-d and 3-d
#: transposes of 1-8 byte units on a 2-core x86 host; square 32x32 blocks ran 2-4x slower).
_TRANSPOSE_BLOCK = {1: (32, 8), 2: (32, 8), 4: (64, 8), 8: (64, 8), 16: (64, 8)}
#: Rows of at least this many units that repeat one source unit are filled by doubling
#: a filled block, up to about ``FILL_BLOCK`` bytes (so the copies read from L1).
FILL_UNITS = 16
FILL_BLOCK = 4096
#: Copies above this many bytes are split over ``HOST_THREADS`` threads.
PARALLEL_BYTES = 4 << 20
#: Threads of host copies (and of the packing of staged transfers): half the cores, at
#: most 8 (on a 2-core machine one thread already saturates its memory bandwidth).
HOST_THREADS = max(1, min(8, (os.cpu_count() or 1) // 2))
#: Whether Numba runs ``@njit`` functions as Python (``NUMBA_DISABLE_JIT=1``).
_PYTHON_ONLY = bool(numba_config.DISABLE_JIT)


@njit(cache=True, nogil=True)
def _copy_blocked(
    dst, src, shape, dst_strides, src_strides, block_rows, block_cols, unit, prototype
):
    """Copy units from address ``src`` to ``dst`` over ``shape`` (ndim >= 2, byte strides).

    Rows that are contiguous on both sides move with ``memcpy``. A row that repeats one
    source unit into contiguous destination units (a fill) stores the unit once and
    doubles it with ``memcpy`` (a memset's speed, where one unit per store is 10-30x
    slower for 1-byte units).
    """
    ndim = shape.size
    rows, cols = shape[ndim - 2], shape[ndim - 1]
    dst_row, dst_col = dst_strides[ndim - 2], dst_strides[ndim - 1]
    src_row, src_col = src_strides[ndim - 2], src_strides[ndim - 1]
    batch = 1
    for k in range(ndim - 2):
        batch *= shape[k]
    index = np.zeros(ndim, np.int64)
    dst_base, src_base = dst, src
    contiguous_rows = dst_col == unit and src_col == unit
    fill_rows = dst_col == unit and src_col == 0 and cols >= FILL_UNITS
    block = unit
    for _ in range(batch):
        for r0 in range(0, rows, block_rows):
            r1 = min(r0 + block_rows, rows)
            for c0 in range(0, cols, block_cols):
                c1 = min(c0 + block_cols, cols)
                for r in range(r0, r1):
                    d = dst_base + r * dst_row
                    s = src_base + r * src_row
                    if contiguous_rows:
                        copy_bytes(d + c0 * unit, s + c0 * unit, (c1 - c0) * unit)
                        continue
                    if fill_rows:
                        start, nbytes = d + c0 * unit, (c1 - c0) * unit
                        store_unit(start, load_unit(s, prototype), prototype)
                        done = unit  # [start, start + done) is filled
                        while done < nbytes:  # from a block of at most ~FILL_BLOCK bytes
                            step = min(done if done < FILL_BLOCK else block, nbytes - done)
                            copy_bytes(start + done, start, step)
                            done += step
                            if done < FILL_BLOCK:
                                block = done
                        continue
                    for c in range(c0, c1):
                        store_unit(d + c * dst_col, load_unit(s + c * src_col, prototype), prototype)
        k = ndim - 3
        while k >= 0:
            index[k] += 1
            dst_base += dst_strides[k]
            src_base += src_strides[k]
            if index[k] < shape[k]:
                break
            dst_base -= index[k] * dst_strides[k]
            src_base -= index[k] * src_strides[k]
            index[k] = 0
            k -= 1


def _source_fast_axis(shape, src_strides):
    """The source's fastest moving axis (the last axis wins ties), or the last axis."""
    last = len(shape) - 1
    moving = [k for k in range(len(shape)) if src_strides[k] != 0]
    if not moving:
        return last
    return min(moving, key=lambda k: (abs(src_strides[k]), k != last))


def _transposes(shape, src_strides, fast):
    """Whether the kernel copies a coalesced problem in transpose blocks: the source's
    fastest axis ``fast`` is not the destination's (the last), and the rows are not a
    fill (a row that repeats one source unit, src stride 0, is already the best inner
    loop)."""
    return fast != len(shape) - 1 and not (src_strides[-1] == 0 and shape[-1] >= FILL_UNITS)


def kernel_beats_numpy(plan):
    """Whether running a host ``plan`` here beats ``np.copyto`` on the same arrays, for
    copies of at least a few hundred KiB (below, NumPy's lower overhead wins everywhere).

    A transpose: the kernel's blocks (256 x 256 float32: 60 us against NumPy's 80;
    BENCHMARKS.md, "Small host copies"). A copy split over threads (``PARALLEL_BYTES``
    with ``HOST_THREADS`` above 1). Otherwise both move the same rows: NumPy, with less
    overhead (1 MB step-2 or reversed rows: 10-25 % less time).

    Examples
    --------
    >>> from layoutkit import StridedLayout
    >>> from layoutkit.copy.plan import plan_copy
    >>> dense = StridedLayout.dense((512, 512), 4)
    >>> kernel_beats_numpy(plan_copy(dense, dense.permuted((1, 0))))
    True
    >>> kernel_beats_numpy(plan_copy(dense, StridedLayout.dense((512, 1024), 4)[:, ::2]))
    False
    """
    if plan.method == NONE:
        return False
    if HOST_THREADS > 1 and plan.volume * plan.unit >= PARALLEL_BYTES:
        return True
    return plan.method == HOST and _transposes(
        plan.shape, plan.src_strides, _source_fast_axis(plan.shape, plan.src_strides)
    )


def _unit_array(address, shape, strides, unit):
    """A NumPy array of ``unit``-byte void items over host memory at ``address``."""
    low = sum(min(0, (e - 1) * s) for e, s in zip(shape, strides, strict=True))
    high = sum(max(0, (e - 1) * s) for e, s in zip(shape, strides, strict=True)) + unit
    memory = (ctypes.c_char * (high - low)).from_address(address + low)
    return np.ndarray(shape, f"V{unit}", memory, -low, strides)


def _run_in_python(dst, src, shape, dst_strides, src_strides, unit):
    """The copy kernel's work without compiled code (``NUMBA_DISABLE_JIT=1``, where the
    kernel's pointer intrinsics cannot run): NumPy copies between arrays over the same
    addresses (a copy that reaches here has elements: the plan handled empty ones)."""
    destination = _unit_array(dst, shape, dst_strides, unit)
    np.copyto(destination, _unit_array(src, shape, src_strides, unit), casting="no")


def _run_one(dst, src, shape, dst_strides, src_strides, unit):
    if len(shape) == 1 and dst_strides[0] == unit and src_strides[0] == unit:
        ctypes.memmove(dst, src, shape[0] * unit)
        return
    if _PYTHON_ONLY:
        _run_in_python(dst, src, tuple(shape), tuple(dst_strides), tuple(src_strides), unit)
        return
    _copy_blocked(dst, src, *_kernel_arguments(tuple(shape), tuple(dst_strides),
                                               tuple(src_strides), unit))  # fmt: skip


@functools.lru_cache(maxsize=1024)
def _kernel_arguments(shape, dst_strides, src_strides, unit):
    """``_copy_blocked``'s arguments after the two addresses, for a coalesced problem: its
    axes with the source's fastest last where that makes a transpose, as int64 arrays the
    kernel only reads, and the block size. Made once per problem (a program copies the
    same few layouts again and again; making them cost more than a small copy)."""
    shape, dst_strides, src_strides = list(shape), list(dst_strides), list(src_strides)
    fast = _source_fast_axis(shape, src_strides)
    transpose = _transposes(shape, src_strides, fast)
    if transpose:
        for axes in (shape, dst_strides, src_strides):
            axes.insert(len(axes) - 1, axes.pop(fast))
    while len(shape) < 2:
        shape.insert(0, 1)
        dst_strides.insert(0, 0)
        src_strides.insert(0, 0)
    if transpose:
        block_rows, block_cols = _TRANSPOSE_BLOCK[unit]
    else:
        block_rows, block_cols = shape[-2], shape[-1]
    return (np.array(shape, np.int64), np.array(dst_strides, np.int64),
            np.array(src_strides, np.int64), block_rows, block_cols, unit,
            UNIT_PROTOTYPES[unit])  # fmt: skip


def split_problem(shape, dst_strides, src_strides, limit):
    """Pieces of at most ``limit`` units that tile a coalesced problem, in its order.

    Yields ``(dst_offset, src_offset, shape)`` (offsets in bytes, strides unchanged): a
    range along the first axis whose inner axes hold at most ``limit`` units, at every
    position of the axes before it. With a destination dense in its axis order, each
    piece is one contiguous range of destination bytes.

    Examples
    --------
    >>> list(split_problem((4, 6), (24, 4), (4, 16), 12))
    [(0, 0, (2, 6)), (48, 8, (2, 6))]
    """
    m = len(shape)
    inner = 1
    k = m
    while k > 0 and inner * shape[k - 1] <= limit:
        k -= 1
        inner *= shape[k]
    if k == 0:
        yield 0, 0, tuple(shape)
        return
    axis = k - 1
    take = max(1, limit // inner)
    outer = shape[:axis]
    index = [0] * axis
    while True:
        dst_base = sum(i * s for i, s in zip(index, dst_strides, strict=False))
        src_base = sum(i * s for i, s in zip(index, src_strides, strict=False))
        for start in range(0, shape[axis], take):
            count = min(take, shape[axis] - start)
            yield (dst_base + start * dst_strides[axis], src_base + start * src_strides[axis],
                   (count, *shape[axis + 1 :]))  # fmt: skip
        j = axis - 1
        while j >= 0:
            index[j] += 1
            if index[j] < outer[j]:
                break
            index[j] = 0
            j -= 1
        if j < 0:
            return


_pool_lock = threading.Lock()
_pool = []


def _executor():
    if not _pool:
        with _pool_lock:
            if not _pool:
                from concurrent.futures import ThreadPoolExecutor

                _pool.append(ThreadPoolExecutor(HOST_THREADS, "layoutkit-copy"))
    return _pool[0]


def copy_problem(dst, src, shape, dst_strides, src_strides, unit):
    """Copy a coalesced problem between host addresses (bases already offset).

    Large copies are split (:func:`split_problem`) into ``HOST_THREADS`` pieces of work
    run in parallel; the pieces never share destination bytes.
    """
    volume = 1
    for e in shape:
        volume *= e
    if HOST_THREADS == 1 or volume * unit < PARALLEL_BYTES:
        _run_one(dst, src, shape, dst_strides, src_strides, unit)
        return
    pieces = list(split_problem(shape, dst_strides, src_strides, -(-volume // HOST_THREADS)))
    m = len(shape)
    futures = [
        _executor().submit(_run_one, dst + d, src + s, piece, dst_strides[m - len(piece):],
                           src_strides[m - len(piece):], unit)  # fmt: skip
        for d, s, piece in pieces
    ]
    for future in futures:
        future.result()


def run_host_plan(plan, dst_ptr, src_ptr):
    """Execute ``plan`` between host addresses (of element zero of each view).

    Parameters
    ----------
    plan : CopyPlan
        A plan with method ``"none"``, ``"memcpy"`` or ``"host"``.
    dst_ptr, src_ptr : int
        Host addresses of element zero of the destination and the source.

    Examples
    --------
    >>> from layoutkit import StridedLayout
    >>> from layoutkit.copy.plan import plan_copy
    >>> src = np.arange(6, dtype=np.int32).reshape(2, 3)
    >>> dst = np.zeros((3, 2), dtype=np.int32)
    >>> plan = plan_copy(StridedLayout(dst.shape, dst.strides, 4, divide_strides=True),
    ...                  StridedLayout(src.T.shape, src.T.strides, 4, divide_strides=True))
    >>> run_host_plan(plan, dst.ctypes.data, src.ctypes.data)
    >>> dst.tolist()
    [[0, 3], [1, 4], [2, 5]]
    """
    if plan.method == NONE:
        return
    if plan.method not in (MEMCPY, HOST):
        raise ValueError(f"plan method {plan.method!r} is not a host-to-host method")
    shape, dst_strides, src_strides = plan.shape, plan.dst_strides, plan.src_strides
    if plan.method == MEMCPY:
        shape, dst_strides, src_strides = (plan.volume,), (plan.unit,), (plan.unit,)
    copy_problem(dst_ptr + plan.dst_offset, src_ptr + plan.src_offset, shape, dst_strides,
                 src_strides, plan.unit)  # fmt: skip
