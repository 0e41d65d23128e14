"""Views as first-class arguments of ``@cuda.jit`` kernels.

Two ways to pass a ``StridedMemoryView`` (or a CuPy array / torch tensor, converted once
per launch) to a kernel::

    @layoutkit.cuda.jit
    def scale(src, dst, factor):
        i = cuda.grid(1)
        if i < dst.shape[0]:
            dst[i] = src[i] * factor

    @numba.cuda.jit(extensions=[layoutkit.cuda.extension])
    def same_kernel_for_plain_numba_users(src, dst, factor): ...

Inside the kernel a view supports ``v[i, j]`` loads and stores, basic indexing with slices,
``None`` and ``...`` (giving views), ``v.shape``, ``v.strides`` (in elements), ``v.ndim``,
``v.size``, ``len(v)``, ``v.readonly``, ``v.ptr``, ``v.dtype``, ``v.permuted(axis_order)``,
``v.layout`` (a compiled ``StridedLayout`` with its properties and transforms),
``v.with_layout(layout)`` and ``v.view(layout, dtype)`` (the view with another layout or
element type of the same memory, e.g. ``v.with_layout(v.layout.permuted((1, 0)))``), as
in Python. Stores into read-only views fail to compile.
``layoutkit.cuda.jit(boundscheck=True, debug=True)`` checks indices.

For hot loops, ``launcher = kernel.prepare(griddim, blockdim, *example_args)`` compiles
once and relaunches with new views of the same types through the driver.

Under ``NUMBA_ENABLE_CUDASIM=1`` the same kernels run in numba-cuda's simulator, with views
replaced by :class:`SimulatedView` objects of the same meaning.
"""

from layoutkit.cuda._extension import LaunchArgument, ViewArgumentHandler
from layoutkit.cuda._kernel import ViewKernel, extension, jit, simulator_enabled
from layoutkit.cuda._launcher import PreparedLaunch
from layoutkit.cuda._simulator import SimulatedView

__all__ = [
    "LaunchArgument",
    "PreparedLaunch",
    "SimulatedView",
    "ViewArgumentHandler",
    "ViewKernel",
    "extension",
    "jit",
    "simulator_enabled",
]


def _register():
    if not simulator_enabled():
        from layoutkit.cuda._extension import register_cuda_support

        register_cuda_support()


_register()
