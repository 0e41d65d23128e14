"""Strided copies between any two views: planner, CPU kernels and GPU kernels.

``copy(dst, src, stream=None, allocator=None, blocking=None)`` is the entry point (also
``dst.copy_from(src)`` and ``src.copy_to(dst)`` on :class:`layoutkit.StridedMemoryView`).
``plan`` holds the pure planning arithmetic, ``cpu`` the host kernels, ``gpu`` the
numba-cuda kernels.

This package is callable: ``layoutkit.copy(dst, src)`` works whether the name
``layoutkit.copy`` resolves to this package or to the function.
"""

import sys
import types

from layoutkit.copy._api import copy

__all__ = ["copy"]


class _CallablePackage(types.ModuleType):
    """Module type that forwards calls to :func:`copy`."""

    def __call__(self, dst, src, stream=None, allocator=None, blocking=None):
        return copy(dst, src, stream, allocator, blocking)


sys.modules[__name__].__class__ = _CallablePackage
