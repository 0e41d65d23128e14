"""numba-cuda argument handler: turns view and layout arguments into kernel parameters.

numba-cuda calls ``prepare_args(ty, val, stream, retr)`` of every handler in a kernel's
``extensions=`` list for every argument at every launch (and, under the simulator, with
``ty=None``). For a view it returns the flattened struct model values
``(data, *shape, *strides, offset, limit)``, for a ``StridedLayout``
``(*shape, *strides, itemsize, slice_offset)``, typed as a tuple of ``CPointer(int64)``:
numba-cuda appends such values to the launch parameters as plain ints, without building
a ctypes object per value. Everything else passes through untouched.
"""

from functools import cache

from numba import types

from layoutkit._numba_layout import StridedLayoutType, layout_for_compiled
from layoutkit._numba_view import StridedViewType, view_numba_type
from layoutkit.cuda._records import view_record
from layoutkit.cuda._simulator import SimulatedView


class LaunchArgument:
    """A view already validated and flattened for one launch (made by ``layoutkit.cuda.jit``).

    ``_numba_type_`` is what numba-cuda's typing reads; ``values`` are the kernel
    parameters of the view.
    """

    __slots__ = ("_numba_type_", "values")

    def __init__(self, numba_type, values):
        self._numba_type_ = numba_type
        self.values = values


@cache
def _parameters_type(count):
    return types.UniTuple(types.CPointer(types.int64), count)


class ViewArgumentHandler:
    """The ``extensions=`` entry that lets ``numba.cuda.jit`` kernels take views and layouts.

    Use the module-level instance ``layoutkit.cuda.extension``.
    """

    def prepare_args(self, ty, val, stream=0, retr=None):
        """Return ``(type, value)`` numba-cuda should marshal for argument ``val``."""
        if type(val) is LaunchArgument:
            return _parameters_type(len(val.values)), val.values
        if ty is None:  # the CUDA simulator
            return ty, SimulatedView.from_argument(val)
        if type(ty) is StridedLayoutType:
            val = layout_for_compiled(val)  # its checked values, not what it claims
            values = (*val._shape, *val._strides, val._itemsize, val._offset)
            return _parameters_type(len(values)), values
        if type(ty) is not StridedViewType:
            return ty, val
        from layoutkit import _driver

        values = view_record(val, "view argument", _driver.ensure_context)[2]
        return _parameters_type(len(values)), values


def launch_argument(view, name, device_id, boundscheck=False):
    """Validate ``view`` for a kernel on ``device_id`` and flatten it into a LaunchArgument."""
    _, numba_type, values = view_record(view, name, device_id)
    if boundscheck:
        numba_type = numba_type.copy(boundscheck=True)
    return LaunchArgument(numba_type, values)


def register_cuda_support():
    """Make layouts and views work in numba-cuda kernels (run once, on import of layoutkit.cuda).

    Registers the typing of ``StridedMemoryView`` arguments (element types as numba-cuda
    has them), the kernel-parameter data model of views and the inlined methods of layouts
    and views, which numba-cuda does not take from Numba's own registries.
    """
    from numba.cuda.typing.typeof import typeof_impl

    from layoutkit._numba_checks import register_cuda_inline
    from layoutkit._numba_view import BoundsCheckedView, register_cuda_model, register_view_aliases
    from layoutkit.memoryview import StridedMemoryView

    typeof_impl.register(StridedMemoryView)(
        lambda view, context: view_numba_type(view, for_cuda=True)
    )
    typeof_impl.register(BoundsCheckedView)(
        lambda checked, context: view_numba_type(checked.view, boundscheck=True, for_cuda=True)
    )
    register_cuda_model()
    try:  # numba-cuda's own copy of Numba's IR analyses (older releases use Numba's)
        from numba.cuda.core import ir_utils as cuda_ir_utils
    except ImportError:
        pass
    else:
        register_view_aliases(cuda_ir_utils)
    register_cuda_inline()
    _refuse_in_kernels()


def _refuse_in_kernels():
    """``hash(layout)`` and ``str()`` of a layout or view in a kernel: a one-line typing
    error (numba-cuda has no ``hash()``, and its ``str()`` needs strings it cannot make)."""
    from numba.core.errors import TypingError
    from numba.cuda.extending import overload

    from layoutkit._numba_layout import StridedLayoutType
    from layoutkit._numba_view import StridedViewType

    @overload(hash, target="cuda")
    def _hash(value):
        if isinstance(value, StridedLayoutType):
            raise TypingError(
                "hash() of a StridedLayout is not available in CUDA kernels (numba-cuda has "
                "no hash()); compare layouts with ==, or hash them in Python or @njit code"
            )
        return None

    @overload(str, target="cuda")
    def _str(value):
        if isinstance(value, (StridedLayoutType, StridedViewType)):
            raise TypingError(
                "a layout or view has no repr() or str() in CUDA kernels (kernels have no "
                "strings); format it in Python"
            )
        return None
