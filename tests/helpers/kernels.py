"""Kernels over views shared by the simulator tests and the GPU tests (same source for both)."""

import numpy as np
from numba import cuda

import layoutkit.cuda


def scaled_copy_source(source, destination, factor):
    """destination = source * factor; thread x runs along the last axis (coalesced for C)."""
    x, y = cuda.grid(2)
    if y < destination.shape[0] and x < destination.shape[1]:
        destination[y, x] = source[y, x] * factor


scaled_copy = layoutkit.cuda.jit(scaled_copy_source)


@layoutkit.cuda.jit
def derived_views(view, out):
    """Writes, in order: values NumPy computes from the same view (see ``expected_derived``)."""
    if cuda.grid(1) == 0:
        sliced = view[1:, ::-2]
        out[0] = sliced[0, 0]
        out[1] = sliced[-1, -1]
        out[2] = view[-1][2]
        out[3] = view[None, 0, ...][0, 3]
        out[4] = view.permuted((1, 0))[3, 1]
        out[5] = view[-1, -2]
        out[6] = view.size
        out[7] = view.ndim
        out[8] = view.strides[0]
        out[9] = sliced.shape[1]
        out[10] = view.with_layout(view.layout.permuted((1, 0)))[2, 1]
        out[11] = view.layout.slice_offset


def expected_derived(array, slice_offset):
    """What ``derived_views`` writes for the NumPy view ``array`` (itemsize-8 elements)."""
    sliced = array[1:, ::-2]
    return np.array(
        [
            sliced[0, 0],
            sliced[-1, -1],
            array[-1][2],
            array[None, 0, ...][0, 3],
            array.T[3, 1],
            array[-1, -2],
            array.size,
            array.ndim,
            array.strides[0] // array.itemsize,
            sliced.shape[1],
            array.T[2, 1],
            slice_offset,
        ]
    )


@layoutkit.cuda.jit
def store_into(view):
    view[0] = 1.0


_FLAT_KERNELS = {}


def flat_kernel(ndim, direction):
    """Kernel ``k(view, flat)``: thread n moves element n (C order) between view and flat.

    ``direction`` is ``"read"`` (flat[n] = view[index]) or ``"write"`` (view[index] = flat[n]).
    """
    key = ndim, direction
    if key not in _FLAT_KERNELS:
        lines = ["def k(view, flat):", "    n = cuda.grid(1)", "    if n < flat.shape[0]:"]
        lines.append("        rest = n")
        for axis in reversed(range(ndim)):
            lines.append(f"        i{axis} = rest % view.shape[{axis}]")
            lines.append(f"        rest //= view.shape[{axis}]")
        index = "(" + "".join(f"i{axis}, " for axis in range(ndim)) + ")"
        body = f"flat[n] = view[{index}]" if direction == "read" else f"view[{index}] = flat[n]"
        lines.append("        " + body)
        namespace = {"cuda": cuda}
        exec("\n".join(lines), namespace)
        _FLAT_KERNELS[key] = layoutkit.cuda.jit(namespace["k"])
    return _FLAT_KERNELS[key]


def blocks_for(count, threads=64):
    return max((count + threads - 1) // threads, 1), threads


@layoutkit.cuda.jit
def permute_first(view, first):
    """Permute ``view`` with axis order ``(first, 0)`` (a check that may fail)."""
    if cuda.grid(1) == 0:
        view.permuted((first, 0))


@layoutkit.cuda.jit
def move_to(view, layout):
    """``view.with_layout(layout)`` (a check that may fail)."""
    if cuda.grid(1) == 0:
        view.with_layout(layout)


@layoutkit.cuda.jit
def read_row(view, i, out):
    """out[0] = view[i, 0] (an index that may be out of range)."""
    if cuda.grid(1) == 0:
        out[0] = view[i, 0]
