"""Execute a copy plan between two host views: ``memmove`` or an ``@njit`` kernel.

The kernel walks the coalesced axes with byte strides and moves one unit (1 to 16 bytes)
per index. Its last two axes are copied in blocks, so a transpose reads and writes
through cache-sized tiles; an elementwise plan uses a single block per row.
"""

import ctypes

import numpy as np
from numba import njit

from layoutkit.copy._units import UNIT_PROTOTYPES, copy_bytes, load_unit, store_unit
from layoutkit.copy.plan import ELEMENTWISE, MEMCPY, NONE, TRANSPOSE

__all__ = ["run_host_plan"]

#: Transpose blocks on the CPU (rows along the source's fastest axis, columns along the
#: destination's), by unit size: tall and narrow blocks measured fastest (2-d and 3-d
#: transposes of 1-8 byte units on a 2-core x86 host; square 32x32 blocks ran 2-4x slower).
_TRANSPOSE_BLOCK = {1: (32, 8), 2: (32, 8), 4: (64, 8), 8: (64, 8), 16: (64, 8)}


@njit(cache=True, nogil=True)
def _copy_blocked(
    dst, src, shape, dst_strides, src_strides, block_rows, block_cols, unit, prototype
):
    """Copy units from address ``src`` to ``dst`` over ``shape`` (ndim >= 2, byte strides).

    Rows that are contiguous on both sides move with ``memcpy``.
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
                    for c in range(c0, c1):
                        store_unit(d + c * dst_col, load_unit(s + c * src_col, prototype))
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


def _kernel_axes(plan):
    """Shape and strides for the kernel: at least 2 axes, the tiled pair last."""
    shape, dst, src = list(plan.shape), list(plan.dst_strides), list(plan.src_strides)
    if plan.method == TRANSPOSE:
        for axes in (shape, dst, src):
            axes.insert(len(axes) - 1, axes.pop(plan.row_axes[0]))
    while len(shape) < 2:
        shape.insert(0, 1)
        dst.insert(0, 0)
        src.insert(0, 0)
    return (np.array(axes, dtype=np.int64) for axes in (shape, dst, src))


def run_host_plan(plan, dst_ptr, src_ptr):
    """Execute ``plan`` between host addresses (of element zero of each view).

    Parameters
    ----------
    plan : CopyPlan
        A plan with method ``"none"``, ``"memcpy"``, ``"elementwise"`` or ``"transpose"``.
    dst_ptr, src_ptr : int
        Host addresses of element zero of the destination and the source.

    Examples
    --------
    >>> from layoutkit.copy.plan import plan_copy
    >>> src = np.arange(6, dtype=np.int32).reshape(2, 3)
    >>> dst = np.zeros((3, 2), dtype=np.int32)
    >>> plan = plan_copy((3, 2), (2, 1), (1, 3), 4)
    >>> run_host_plan(plan, dst.ctypes.data, src.ctypes.data)
    >>> dst.tolist()
    [[0, 3], [1, 4], [2, 5]]
    """
    if plan.method == NONE:
        return
    dst_start = dst_ptr + plan.dst_offset
    src_start = src_ptr + plan.src_offset
    if plan.method == MEMCPY:
        ctypes.memmove(dst_start, src_start, plan.nbytes)
        return
    if plan.method not in (ELEMENTWISE, TRANSPOSE):
        raise ValueError(f"plan method {plan.method!r} is not a host-to-host method")
    shape, dst_strides, src_strides = _kernel_axes(plan)
    if plan.method == TRANSPOSE:
        block_rows, block_cols = _TRANSPOSE_BLOCK[plan.unit]
    else:
        block_rows, block_cols = int(shape[-2]), int(shape[-1])
    _copy_blocked(
        dst_start,
        src_start,
        shape,
        dst_strides,
        src_strides,
        block_rows,
        block_cols,
        plan.unit,
        UNIT_PROTOTYPES[plan.unit],
    )
