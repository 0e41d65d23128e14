"""Random copy cases for the copy tests: NumPy arrays over padded byte buffers.

A case is a destination and a source array (dtype ``V<itemsize>``) that are views into
their own ``uint8`` buffers, so a test can compare every byte of each buffer, including
the bytes a copy must not touch. ``np.copyto(dst, src)`` is the oracle.
"""

import numpy as np
from hypothesis import strategies as st

ITEMSIZES = (1, 2, 3, 4, 6, 8, 12, 16)


def strided_view(shape, itemsize, order, steps, pad, misalign, fill):
    """A view of ``shape`` into a fresh byte buffer.

    ``order`` is the memory order of the axes (a permutation), ``steps`` the per-axis
    slice step (negative reverses), ``pad`` extra elements per axis before slicing and
    ``misalign`` a byte offset of the whole array inside its buffer.
    """
    big = tuple(e * abs(s) + p for e, s, p in zip(shape, steps, pad, strict=True))
    nbytes = int(np.prod(big, dtype=np.int64)) * itemsize
    buffer = np.frombuffer(fill(nbytes + misalign + 16), dtype=np.uint8).copy()
    base = buffer[misalign : misalign + nbytes].view(np.dtype((np.void, itemsize)))
    stored = base.reshape(tuple(big[k] for k in order))
    inverse = np.argsort(order)
    array = stored.transpose(inverse)
    if shape:
        array = array[tuple(slice(None, None, s) for s in steps)]
        array = array[tuple(slice(0, e) for e in shape)]
    return buffer, array


@st.composite
def view_specs(draw, shape, itemsize):
    ndim = len(shape)
    order = draw(st.permutations(range(ndim))) if ndim else []
    steps = draw(st.lists(st.sampled_from((1, 1, 2, -1, -2)), min_size=ndim, max_size=ndim))
    pad = draw(st.lists(st.integers(0, 1), min_size=ndim, max_size=ndim))
    misalign = draw(st.sampled_from((0, 0, 1, 2, 4, 8)))
    return tuple(order), tuple(steps), tuple(pad), misalign


def _random_bytes(seed):
    rng = np.random.default_rng(seed)
    return lambda n: rng.integers(0, 256, n, dtype=np.uint8).tobytes()


@st.composite
def copy_cases(draw, max_ndim=4, max_extent=5, itemsizes=ITEMSIZES):
    """Draw ``(dst_buffer, dst, src_buffer, src)``; ``src`` may broadcast to ``dst``."""
    itemsize = draw(st.sampled_from(itemsizes))
    shape = tuple(draw(st.lists(st.integers(0, max_extent), max_size=max_ndim)))
    seed = draw(st.integers(0, 2**32 - 1))
    dst_buffer, dst = strided_view(
        shape, itemsize, *draw(view_specs(shape, itemsize)), fill=lambda n: bytes(n)
    )
    src_shape = list(shape)
    lead = draw(st.integers(0, len(shape)))
    for k in range(lead, len(shape)):
        if draw(st.integers(0, 4)) == 0:
            src_shape[k] = 1
    src_shape = tuple(src_shape[draw(st.integers(0, lead)) :])
    src_buffer, src = strided_view(
        src_shape, itemsize, *draw(view_specs(src_shape, itemsize)), fill=_random_bytes(seed)
    )
    return dst_buffer, dst, src_buffer, src


def expected_bytes(dst_buffer, dst, src):
    """The destination buffer after ``np.copyto(dst, src)`` (computed on copies)."""
    offset = dst.__array_interface__["data"][0] - dst_buffer.ctypes.data
    expected_buffer = dst_buffer.copy()
    if dst.size == 0:
        return expected_buffer
    twin = np.ndarray(
        dst.shape, dst.dtype, buffer=expected_buffer, offset=offset, strides=dst.strides
    )
    np.copyto(twin, src)
    return expected_buffer
