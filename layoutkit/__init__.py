"""layoutkit: describe and move strided tensor memory from Python, ``@njit`` and ``@cuda.jit``.

Importing this package is cheap: it does not import Numba's CUDA target,
``cuda.bindings``, CuPy or torch. Every public name below is loaded on first use.
"""

import _thread
import importlib

__all__ = [
    "AxisError",
    "BoundsCheckedView",
    "Buffer",
    "CUDAError",
    "CopyAllocatorOptions",
    "Device",
    "DeviceMemoryResource",
    "DtypeMismatchError",
    "HostMemoryResource",
    "ManagedMemoryResource",
    "MemoryResource",
    "NoDriverError",
    "PinnedMemoryResource",
    "Stream",
    "StridedLayout",
    "StridedMemoryView",
    "args_viewable_as_strided_memory",
    "copy",
    "display",
    "plan_copy",
]

__version__ = "0.1.0"

# subpackages loaded on first attribute access; layoutkit.cuda is not in __all__, so
# ``from layoutkit import *`` stays light (it imports Numba's CUDA target and the driver
# bindings) and does not replace numba's ``cuda`` where a script imported both
_SUBMODULES = frozenset({"cuda", "display"})

# public name -> module that defines it (imported on first attribute access)
_LAZY = {
    "AxisError": "layoutkit._errors",
    "BoundsCheckedView": "layoutkit._numba_view",
    "CUDAError": "layoutkit._errors",
    "CopyAllocatorOptions": "layoutkit.copy._api",
    "DtypeMismatchError": "layoutkit._errors",
    "NoDriverError": "layoutkit._errors",
    "StridedLayout": "layoutkit.layout",
    "Buffer": "layoutkit.memory",
    "Device": "layoutkit.memory",
    "DeviceMemoryResource": "layoutkit.memory",
    "HostMemoryResource": "layoutkit.memory",
    "ManagedMemoryResource": "layoutkit.memory",
    "MemoryResource": "layoutkit.memory",
    "PinnedMemoryResource": "layoutkit.memory",
    "Stream": "layoutkit.stream",
    "StridedMemoryView": "layoutkit.memoryview",
    "args_viewable_as_strided_memory": "layoutkit.memoryview",
    "copy": "layoutkit.copy",
    "plan_copy": "layoutkit.copy.plan",
}


# Lazy loads are serialised: the modules behind them import Numba, whose circular imports
# hand a second thread that imports it at the same time partially initialised modules
# (ImportError, AttributeError), and layoutkit.copy's own cycle raised _DeadlockError when
# two threads touched layoutkit.copy and layoutkit.plan_copy first. Re-entrant: a module
# being loaded may read another lazy name.
_LOAD_LOCK = _thread.RLock()


def __getattr__(name):
    if name in _SUBMODULES:
        with _LOAD_LOCK:
            return importlib.import_module(f"layoutkit.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'layoutkit' has no attribute {name!r}")
    with _LOAD_LOCK:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
    return value


def _numba_extension():
    """Numba's ``numba_extensions`` entry point: register layouts with Numba's typing.

    Numba calls it before it first compiles anything, so ``@njit`` and ``@cuda.jit`` code
    can build layouts (``StridedLayout(...)``, ``StridedLayout.dense(...)``) in a process
    that has not passed a layout to compiled code yet.
    """
    with _LOAD_LOCK:
        importlib.import_module("layoutkit._numba_layout")


def __dir__():
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)
