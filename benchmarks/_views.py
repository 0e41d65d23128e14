"""Views of benchmark arrays through layoutkit's public API (shared by the copy benchmarks).

Views are made once per case, outside the timed region: the benchmarks time the copies.
"""

import numpy as np

from layoutkit import Buffer, StridedMemoryView


def host_view(array):
    """A view of a NumPy array in pageable host memory (no driver involved)."""
    return StridedMemoryView.from_array_interface(array)


def pinned_view(array):
    """A view of a NumPy array whose memory is pinned (page-locked) host memory.

    The array interface only says "host memory"; a buffer made with ``from_handle`` asks
    the driver, which reports the memory as pinned (device-accessible), so the copy
    engine can let kernels and DMA read it directly.
    """
    host = StridedMemoryView.from_array_interface(array)
    buffer = Buffer.from_handle(host.buffer.ptr, host.buffer.size, owner=array)
    return StridedMemoryView.from_buffer(buffer, host.layout, host.dtype)


def device_view(array):
    """A view of a CuPy array or a torch tensor (DLPack, no stream ordering)."""
    return StridedMemoryView.from_any_interface(array, -1)


def torch_view(tensor, pinned=False):
    """A view of a torch tensor; ``pinned`` for a CPU tensor in pinned memory."""
    if pinned and not tensor.is_cuda:
        return pinned_view(tensor.numpy())
    if not tensor.is_cuda:
        return host_view(tensor.numpy())
    return device_view(tensor)


def dtype_of(view):
    return np.dtype(view.dtype)
