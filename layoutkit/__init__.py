"""layoutkit: describe and move strided tensor memory from Python, ``@njit`` and ``@cuda.jit``.

Importing this package is cheap: it does not import Numba's CUDA target,
``cuda.bindings``, CuPy or torch. Every public name below is loaded on first use.
"""

import importlib

__all__ = [
    "AxisError",
    "BoundsCheckedView",
    "Buffer",
    "CUDAError",
    "Device",
    "DeviceMemoryResource",
    "HostMemoryResource",
    "ManagedMemoryResource",
    "MemoryResource",
    "NoDriverError",
    "PinnedMemoryResource",
    "StridedLayout",
    "StridedMemoryView",
    "args_viewable_as_strided_memory",
    "copy",
    "cuda",
    "display",
    "plan_copy",
]

__version__ = "0.1.0"

# public name -> module that defines it (imported on first attribute access)
_LAZY = {
    "AxisError": "layoutkit._errors",
    "BoundsCheckedView": "layoutkit._numba_view",
    "CUDAError": "layoutkit._errors",
    "NoDriverError": "layoutkit._errors",
    "StridedLayout": "layoutkit.layout",
    "Buffer": "layoutkit.memory",
    "Device": "layoutkit.memory",
    "DeviceMemoryResource": "layoutkit.memory",
    "HostMemoryResource": "layoutkit.memory",
    "ManagedMemoryResource": "layoutkit.memory",
    "MemoryResource": "layoutkit.memory",
    "PinnedMemoryResource": "layoutkit.memory",
    "StridedMemoryView": "layoutkit.memoryview",
    "args_viewable_as_strided_memory": "layoutkit.memoryview",
    "copy": "layoutkit.copy",
    "plan_copy": "layoutkit.copy.plan",
}


def __getattr__(name):
    if name in ("cuda", "display"):
        return importlib.import_module(f"layoutkit.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'layoutkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
