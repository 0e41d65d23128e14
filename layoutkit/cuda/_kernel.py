"""``layoutkit.cuda.jit``: numba-cuda kernels whose arguments may be views."""

import contextlib
import functools
import inspect
import os
import types

import numpy as np

from layoutkit._numba_view import dtype_key, is_aligned, view_arguments, view_numba_type
from layoutkit.cuda._extension import LaunchArgument, ViewArgumentHandler, launch_argument
from layoutkit.cuda._launcher import launch_configuration
from layoutkit.interop.fastpaths import reader_for

extension = ViewArgumentHandler()


def simulator_enabled():
    """Whether numba-cuda runs kernels in its Python simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    from numba import config

    return bool(getattr(config, "ENABLE_CUDASIM", os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"))


def jit(func=None, /, *, boundscheck=False, **options):
    """Compile a CUDA kernel that accepts views (and everything ``numba.cuda.jit`` accepts).

    A thin wrapper over ``numba.cuda.jit(func, extensions=[layoutkit.cuda.extension],
    **options)``. A view argument can be a ``StridedMemoryView`` or any object with
    ``__cuda_array_interface__`` or ``__dlpack__`` that is not a NumPy array (CuPy
    arrays, torch tensors). torch tensors and CuPy arrays are read through the producer
    fast paths of :mod:`layoutkit.interop.fastpaths` straight into kernel parameters (no
    view object is made); the producer's stream is ordered before the launch stream.

    Parameters
    ----------
    func : function, optional
        The kernel; when omitted, returns a decorator.
    boundscheck : bool
        Check every integer index against its extent. A violation raises ``AxisError``
        (an ``IndexError``, as in Python) at launch when ``debug=True`` is also given
        (numba-cuda reports device exceptions only in debug mode).
    **options
        Passed to ``numba.cuda.jit``.

    Returns
    -------
    ViewKernel
        Launch with ``kernel[griddim, blockdim](*args)`` or
        ``kernel[griddim, blockdim, stream, sharedmem](*args)``; see
        :meth:`ViewKernel.prepare` for the fast launch path.

    Raises
    ------
    TypeError
        For a ``func`` that is not a Python function (a class, a builtin, a signature
        string or list: argument types come from each launch), a generator or coroutine
        function, one already compiled (a Numba dispatcher or a ``ViewKernel``: decorate
        its Python function), an unknown option, or a flag (``boundscheck``, ``debug``,
        ``opt``, ``lineinfo``, ``cache``, ``fastmath``, ``forceinline``, ``lto``) that is
        not a bool.
    ValueError
        For ``device=True``: device functions are ``numba.cuda.jit(device=True)``, called
        from kernels with the views those receive.
    """
    boundscheck = _flag(boundscheck, "boundscheck")
    _check_options(options)
    if func is None:
        return lambda function: jit(function, boundscheck=boundscheck, **options)
    _check_kernel_function(func)
    from numba import cuda

    if simulator_enabled():
        return ViewKernel(cuda.jit(func, **options), boundscheck, simulated=True)
    extensions = [*options.pop("extensions", ()), extension]
    return ViewKernel(cuda.jit(func, extensions=extensions, **options), boundscheck)


# numba-cuda's jit options (its named parameters and the keywords it reads)
_OPTIONS = frozenset({
    "device", "inline", "forceinline", "link", "debug", "opt", "lineinfo", "cache",
    "launch_bounds", "lto", "shared_memory_carveout", "fastmath", "max_registers", "extensions",
})  # fmt: skip
_FLAGS = ("debug", "opt", "lineinfo", "cache", "fastmath", "forceinline", "lto", "device")
_NOT_A_KERNEL = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _flag(value, name, none_allowed=False):
    if value is None and none_allowed:
        return None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


def _check_options(options):
    """Refuse what numba-cuda would take silently or fail on much later."""
    for name in options:
        if name not in _OPTIONS:
            known = ", ".join(sorted(_OPTIONS | {"boundscheck"}))
            raise TypeError(f"jit() got an unexpected keyword argument {name!r} (options: {known})")
    for name in _FLAGS:
        if name in options:
            _flag(options[name], name, none_allowed=name in ("debug", "opt", "lto"))
    if options.get("device"):
        raise ValueError(
            "layoutkit.cuda.jit compiles kernels; write device functions with "
            "numba.cuda.jit(device=True) and call them from a kernel with its view arguments"
        )
    extensions = options.get("extensions", ())
    if not isinstance(extensions, list | tuple):
        raise TypeError(
            f"extensions must be a list or tuple of argument handlers, got {extensions!r}"
        )


def _check_kernel_function(func):
    if isinstance(func, types.FunctionType):
        if func.__code__.co_flags & _NOT_A_KERNEL:
            raise TypeError(
                f"a kernel cannot be a generator or coroutine function, got {func.__qualname__}"
            )
        return
    if isinstance(func, ViewKernel) or hasattr(func, "py_func"):
        raise TypeError(
            f"{func!r} is already compiled; decorate its Python function "
            "(kernel.dispatcher.py_func, or a Numba dispatcher's .py_func)"
        )
    if isinstance(func, str | list | tuple):
        raise TypeError(
            "layoutkit.cuda.jit takes the kernel function, not signatures: the argument "
            f"types come from each launch (got {func!r})"
        )
    raise TypeError(f"a kernel must be a Python function, got {func!r} ({type(func).__name__})")


def _arity(function):
    """The kernel's (fewest, most) positional arguments; most is None for ``*args``."""
    parameters = inspect.signature(function).parameters.values()
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(p.default is p.empty for p in positional)
    varargs = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    return required, None if varargs else len(positional)


@contextlib.contextmanager
def _driver_needed():
    """numba-cuda's CudaSupportError (an ImportError) for a missing driver, as layoutkit's
    NoDriverError: launching or compiling for a GPU on a machine without one."""
    from numba.cuda.cudadrv.error import CudaSupportError

    try:
        yield
    except CudaSupportError as exc:
        from layoutkit import _driver
        from layoutkit._errors import NoDriverError

        raise NoDriverError(
            f"{_driver.NO_DRIVER_MESSAGE}: a kernel needs a GPU to compile and run; "
            f"NUMBA_ENABLE_CUDASIM=1 runs it in numba-cuda's simulator ({exc})"
        ) from exc


def _stream_pointer(stream):
    """The consumer stream handle for importing arguments: 1 (DLPack's and the driver's
    legacy default stream) for the default stream, else the stream's handle."""
    from layoutkit import _driver

    return (_driver.stream_handle(stream) if stream else 0) or 1


class ViewKernel:
    """A numba-cuda kernel with view arguments (made by :func:`jit`).

    A launch converts and checks the view arguments, then, when every argument is a view
    or a Python ``int``/``float``/``bool``, the kernel is not compiled with ``debug=True``
    and no other ``extensions=`` are given, launches through the driver with a launcher cached per launch
    configuration and argument types (as :meth:`prepare` does); otherwise it goes through
    numba-cuda's own launch.

    Attributes
    ----------
    dispatcher : numba.cuda dispatcher
        The underlying numba-cuda kernel.
    direct_launch : bool
        Class-wide switch of the driver launch path (True); False always launches
        through numba-cuda.
    """

    direct_launch = True

    def __init__(self, dispatcher, boundscheck=False, simulated=False):
        self.dispatcher = dispatcher
        self._boundscheck = boundscheck
        self._simulated = simulated
        self._launchers = {}
        options = {} if simulated else dispatcher.targetoptions
        # debug kernels report device exceptions and other extensions convert arguments:
        # both need numba-cuda's own launch
        self._can_launch_directly = (
            not simulated and not options.get("debug") and len(options.get("extensions") or ()) <= 1
        )
        function = getattr(dispatcher, "py_func", None) or getattr(dispatcher, "fn", None)
        self._arity = _arity(function) if function is not None else (0, None)

    def __getitem__(self, config):
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise ValueError(
                "launch configuration must be [griddim, blockdim] or "
                f"[griddim, blockdim, stream, sharedmem]; got {config!r}"
            )
        # always all four: the simulator keeps a sharedmem given once for later launches
        return _ConfiguredLaunch(self, launch_configuration(*config))

    def _check_count(self, args):
        fewest, most = self._arity
        if not fewest <= len(args) <= (len(args) if most is None else most):
            takes = f"{fewest}" if fewest == most else f"{fewest} to {most}"
            if most is None:
                takes = f"at least {fewest}"
            raise TypeError(f"the kernel takes {takes} arguments, got {len(args)}")

    def launch_arguments(self, args, stream=0):
        """Return ``args`` with every view turned into what the kernel is launched with."""
        if self._simulated:
            return tuple(_simulated_argument(arg) for arg in args)
        from layoutkit import _driver

        view_class = _strided_memory_view_class()
        stream_ptr = None
        device_ids = []

        def current_device_id():  # one driver query per launch, only if a view needs it
            if not device_ids:
                device_ids.append(_driver.ensure_context())
            return device_ids[0]

        converted = []
        for position, arg in enumerate(args):
            kind = type(arg)
            if kind is view_class or issubclass(kind, view_class):  # not isinstance: __class__ lies
                view = arg
            elif id(kind) in _SCALARS or kind is LaunchArgument:
                converted.append(arg)
                continue
            elif kind is not _ndarray and (reader := reader_for(kind)) is not None:
                if stream_ptr is None:
                    stream_ptr = _stream_pointer(stream)
                record = reader(arg, stream_ptr, False)
                if record is None or record.location is None or record.location.device_id is None:
                    # where the memory lives is not known yet: the protocol's view decides
                    view = view_class.from_any_interface(arg, stream_ptr)
                else:
                    converted.append(
                        _record_argument(
                            record, _argument_name(position), current_device_id,
                            self._boundscheck,
                        )  # fmt: skip
                    )
                    continue
            elif _is_importable(arg):
                if stream_ptr is None:
                    stream_ptr = _stream_pointer(stream)
                view = view_class.from_any_interface(arg, stream_ptr)
            else:
                converted.append(arg)
                continue
            converted.append(
                launch_argument(
                    view, _argument_name(position), current_device_id, self._boundscheck
                )
            )
        return tuple(converted)

    def prepare(self, griddim, blockdim, *example_args, stream=0, sharedmem=0):
        """Compile for the types of ``example_args`` and return a fast launcher.

        The returned :class:`~layoutkit.cuda.PreparedLaunch` is called with new
        arguments of the same types (views with the same dtype, ndim, layout kind,
        read-only flag and alignment, see :class:`~layoutkit.cuda.PreparedLaunch`;
        scalars of the same type) and launches through the driver with one preallocated
        parameter buffer, skipping numba-cuda's per-argument work.
        """
        from layoutkit.cuda._launcher import PreparedLaunch

        if self._simulated:
            raise RuntimeError("prepare() needs a GPU; the CUDA simulator is enabled")
        launch_configuration(griddim, blockdim, stream, sharedmem)
        self._check_count(example_args)
        arguments = self.launch_arguments(example_args, stream)
        with _driver_needed():
            argument_types = tuple(self.dispatcher.typeof_pyval(arg) for arg in arguments)
            compiled = self.dispatcher.compile(argument_types)
            return PreparedLaunch(compiled, argument_types, griddim, blockdim, stream, sharedmem)

    def _direct_launcher(self, config, arguments):
        """The cached driver launcher for these arguments, or None to launch through numba."""
        if not (self.direct_launch and self._can_launch_directly):
            return None
        key_types = []
        for arg in arguments:
            kind = type(arg)
            if kind is LaunchArgument:
                key_types.append(arg._numba_type_)
            elif kind is int or kind is float or kind is bool:  # identity: see _SCALARS
                key_types.append(kind)
            else:
                return None
        key = config, tuple(key_types)
        try:
            launcher = self._launchers.get(key)
        except TypeError:  # an unhashable launch configuration
            return None
        if launcher is None:
            launcher = self._launchers[key] = self._new_launcher(config, arguments)
        return launcher or None

    def _new_launcher(self, config, arguments):
        from layoutkit.cuda._launcher import PreparedLaunch

        argument_types = tuple(self.dispatcher.typeof_pyval(arg) for arg in arguments)
        compiled = self.dispatcher.compile(argument_types)
        griddim, blockdim, stream, sharedmem = (*config, 0, 0)[:4]
        try:
            return PreparedLaunch(compiled, argument_types, griddim, blockdim, stream, sharedmem)
        except TypeError:  # a scalar type the packed launch does not handle
            return False


class _ConfiguredLaunch:
    __slots__ = ("_kernel", "_config", "_stream")

    def __init__(self, kernel, config):
        self._kernel = kernel
        self._config = config
        self._stream = config[2] if len(config) > 2 else 0

    def __call__(self, *args):
        kernel = self._kernel
        kernel._check_count(args)
        arguments = kernel.launch_arguments(args, self._stream)
        with _driver_needed():
            launcher = kernel._direct_launcher(self._config, arguments)
            if launcher is None:
                kernel.dispatcher[self._config](*arguments)
            else:
                launcher.launch_flat(arguments)


# passed to numba-cuda as they are; by identity: a metaclass may make a type equal to (and
# hash as) int, and its objects would skip the import and its checks
_SCALARS = frozenset(map(id, (int, float, bool, complex)))
_ndarray = np.ndarray
_types = {}  # (id(layout), dtype, readonly, boundscheck, aligned) -> (layout, numba type)


def _record_argument(record, name, current_device_id, boundscheck):
    """A kernel parameter straight from an import record: the checks a view would get.

    Raises
    ------
    ValueError
        For host-only memory, or device memory of another device than the kernel's.
    """
    location = record.location
    if not location.is_device_accessible:
        raise ValueError(
            f"{name}: a host-only tensor (device_id={location.device_id}) cannot be passed to "
            "a GPU kernel; copy it to device memory first"
        )
    if not location.is_host_accessible and _several_devices():
        device_id = current_device_id()
        if location.device_id != device_id:
            raise ValueError(
                f"{name}: the tensor lives on device {location.device_id} but the kernel runs "
                f"on device {device_id}"
            )
    layout = record.layout
    # alignment too: a kernel typed for an aligned pointer faults on a misaligned one
    dtype = record.dtype
    # dtype_key: an aligned-struct dtype and its packed twin compare equal
    aligned = is_aligned(record.ptr, dtype)
    key = (id(layout), dtype_key(dtype), record.readonly, boundscheck, aligned)
    known = _types.get(key)
    if known is None:
        if len(_types) >= 1024:
            _types.clear()
        # the layout kept in the value keeps its id from being reused by another
        known = _types[key] = (layout, view_numba_type(record, boundscheck, for_cuda=True))
    return LaunchArgument(known[1], view_arguments(record))


@functools.cache
def _several_devices():
    from layoutkit import _driver

    return _driver.device_count() > 1
_ARGUMENT_NAMES = tuple(f"argument {position}" for position in range(64))
_view_class = []


def _strided_memory_view_class():
    if not _view_class:
        from layoutkit.memoryview import StridedMemoryView

        _view_class.append(StridedMemoryView)
    return _view_class[0]


def _argument_name(position):
    return _ARGUMENT_NAMES[position] if position < 64 else f"argument {position}"


def _is_importable(arg):
    """Whether ``arg`` is a device tensor to import as a view (CuPy, torch, ...).

    NumPy arrays stay as they are (numba-cuda copies them to the device), and so do
    objects that give their Numba type themselves (numba's device arrays).
    """
    if hasattr(arg, "_numba_type_"):
        return False
    return hasattr(arg, "__cuda_array_interface__") or (
        hasattr(arg, "__dlpack__") and type(arg).__module__.split(".")[0] != "numpy"
    )


def _simulated_argument(arg):
    from layoutkit.cuda._simulator import SimulatedView

    return SimulatedView.from_argument(arg)
