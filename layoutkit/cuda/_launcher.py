"""The one prepared launcher: a compiled kernel relaunched through the driver.

numba-cuda spends several microseconds per launch typing arguments and converting each
kernel parameter. A :class:`PreparedLaunch` does that work once: it keeps the kernel
handle, one parameter buffer with an 8-byte slot per kernel parameter and the array of
pointers to those slots (``layoutkit._driver.KernelLauncher``). A launch writes the new
values into the slots with one ``struct.pack_into`` and calls ``cuLaunchKernel``.

Both ``@layoutkit.cuda.jit`` kernels (``ViewKernel.prepare`` and the direct launch path)
and the copy kernels of ``layoutkit.copy.gpu`` launch through it; :func:`cufunction` is
the only code that reads numba-cuda's compiled handles.
"""

import operator

import numpy as np
from numba import types

from layoutkit import _driver
from layoutkit._numba_view import StridedViewType
from layoutkit.cuda._records import view_record

# one 8-byte slot per kernel parameter; narrower scalars are padded
_SLOT_FORMATS = {
    types.int8: "b7x",
    types.int16: "h6x",
    types.int32: "i4x",
    types.int64: "q",
    types.uint8: "B7x",
    types.uint16: "H6x",
    types.uint32: "I4x",
    types.uint64: "Q",
    types.float32: "f4x",
    types.float64: "d",
    types.boolean: "?7x",
}


def _parameter_format(argument_type):
    """``struct`` format of the kernel parameters of one argument, and whether it is a view.

    numba-cuda passes a view as its ``2 * ndim + 2`` integers, a tuple as one parameter
    per item and a scalar as one parameter.

    Examples
    --------
    >>> _parameter_format(types.UniTuple(types.int64, 3))
    ('qqq', False)
    >>> _parameter_format(types.uint8)
    ('B7x', False)
    """
    if isinstance(argument_type, StridedViewType):
        return "q" * argument_type.parameter_count, True
    if argument_type in _SLOT_FORMATS:
        return _SLOT_FORMATS[argument_type], False
    if isinstance(argument_type, types.BaseTuple) and not isinstance(
        argument_type, types.NamedTuple
    ):
        return "".join(_parameter_format(t)[0] for t in argument_type.types), False
    raise TypeError(
        "prepare() supports views and integer, float and bool scalars (and tuples of them); "
        f"got {argument_type}"
    )


def cufunction(compiled):
    """The ``CUfunction`` handle (an ``int``) of a kernel compiled by numba-cuda."""
    return int(compiled._codelibrary.get_cufunc().handle)


def _flat(values):
    out = []
    for value in values:
        if isinstance(value, tuple):
            out += _flat(value)
        else:
            out.append(value)
    return out


class PreparedLaunch:
    """Relaunch a compiled kernel with new arguments of the same types (made by ``prepare``).

    Call it with the kernel's arguments: ``StridedMemoryView`` objects whose Numba type
    (dtype, ndim, layout kind, read-only, aligned) matches the example views given to
    ``prepare`` (a kernel prepared for an unaligned view takes aligned ones too, not the
    reverse: it would fault on a misaligned pointer), and scalars of the example scalars'
    types. Views are checked for device
    accessibility, a closed buffer and the device; the stream, grid and block are those
    given to ``prepare``. Device exceptions are not reported on this path.

    Copies use :meth:`pack` once and :meth:`relaunch` per copy, which replaces the
    leading ``int64`` parameters (the two addresses) and takes the stream.
    """

    def __init__(self, compiled, argument_types, griddim, blockdim, stream, sharedmem):
        from layoutkit import _driver

        self._grid, self._block, _, self._sharedmem = launch_configuration(
            griddim, blockdim, stream, sharedmem
        )
        formats = [_parameter_format(t) for t in argument_types]
        self._argument_types = argument_types
        self._names = tuple(f"argument {position}" for position in range(len(argument_types)))
        self._is_view = tuple(is_view for _, is_view in formats)
        self._device_id = _driver.current_device_id()
        self._launcher = _driver.KernelLauncher(
            cufunction(compiled), "".join(fmt for fmt, _ in formats)
        )
        self._packer = self._launcher.packer
        self._slots = self._launcher.slots
        self._stream = self._launcher.stream(_driver.stream_handle(stream) if stream else 0)
        self._streams = {}
        self.compiled = compiled

    def __call__(self, *args):
        if len(args) != len(self._is_view):
            raise TypeError(f"the kernel takes {len(self._is_view)} arguments, got {len(args)}")
        values = []
        argument_types = self._argument_types
        for position, (arg, is_view) in enumerate(zip(args, self._is_view, strict=True)):
            if is_view:
                _, numba_type, view_values = view_record(
                    arg, self._names[position], self._device_id
                )
                if numba_type is not argument_types[position] and not _same_view_type(
                    numba_type, argument_types[position]
                ):
                    raise TypeError(
                        f"argument {position}: the kernel was prepared for "
                        f"{argument_types[position]}, got a view of type {numba_type}; call "
                        "prepare() again for new view types"
                    )
                values.extend(view_values)
            else:
                values.append(arg)
        self._launch(values)

    def launch_flat(self, arguments):
        """Launch with arguments already checked and flattened (``LaunchArgument`` objects)."""
        values = []
        for arg, is_view in zip(arguments, self._is_view, strict=True):
            if is_view:
                values.extend(arg.values)
            else:
                values.append(arg)
        self._launch(values)

    def pack(self, values):
        """Write every parameter (``values``: ints, NumPy scalars, tuples of them)."""
        self._packer.pack_into(self._slots, 0, *(int(v) for v in _flat(values)))

    def relaunch(self, stream_handle, *leading):
        """Launch on ``stream_handle`` after replacing the first ``int64`` parameters.

        The caller serialises calls (the parameter buffer is shared); the driver copies
        the parameters when the kernel is queued.
        """
        slots = self._slots
        for position, value in enumerate(leading):
            slots[position] = value
        stream = self._streams.get(stream_handle)
        if stream is None:
            if len(self._streams) >= 64:
                self._streams.clear()
            stream = self._streams[stream_handle] = self._launcher.stream(stream_handle)
        self._launcher.launch(self._grid, self._block, self._sharedmem, stream)

    def max_active_blocks_per_sm(self):
        """How many blocks of this launch's block size one SM holds at once."""
        from layoutkit import _driver

        threads = self._block[0] * self._block[1] * self._block[2]
        return _driver.max_active_blocks_per_sm(
            self._launcher.function_handle, threads, self._sharedmem
        )

    def _launch(self, values):
        self._packer.pack_into(self._slots, 0, *values)
        self._launcher.launch(self._grid, self._block, self._sharedmem, self._stream)


def _same_view_type(actual, expected):
    """Whether a view of type ``actual`` fits a kernel prepared for ``expected``: the same
    type but for bounds checking, or aligned where the kernel takes unaligned views."""
    if expected.aligned and not actual.aligned:
        return False
    return actual.copy(boundscheck=expected.boundscheck, aligned=expected.aligned) is expected


#: CUDA's limits on every device numba-cuda supports (compute capability 5.0 and later)
GRID_LIMITS = (2**31 - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
MAX_SHARED_MEMORY = 2**32 - 1  # the driver's unsigned int; the device's own limit is lower


def launch_configuration(griddim, blockdim, stream=0, sharedmem=0):
    """The checked launch configuration: ``(grid, block, stream, sharedmem)``.

    The one rule for ``kernel[griddim, blockdim, stream, sharedmem]`` and
    :meth:`ViewKernel.prepare`, in the simulator too. ``grid`` and ``block`` are 3-tuples
    of Python ints within CUDA's limits, ``stream`` is as given (``None`` becomes 0) after
    :func:`layoutkit._driver.stream_handle` read it, and ``sharedmem`` is a Python int.

    Raises
    ------
    TypeError
        For a dimension or ``sharedmem`` that is not an integer (floats, bools, strings,
        ``None``), and for a stream that is not one.
    ValueError
        For 0, 4 or more dimensions, an extent below 1 or beyond CUDA's limits, more than
        1024 threads per block, a negative ``sharedmem`` or one past 2**32 - 1, a stream
        handle outside ``[0, 2**64)``.

    Examples
    --------
    >>> launch_configuration(4, (32, 8))
    ((4, 1, 1), (32, 8, 1), 0, 0)
    >>> launch_configuration(0, 32)
    Traceback (most recent call last):
    ...
    ValueError: griddim must be positive in every dimension, got 0
    """
    # every launch reads its configuration: plain ints take the short way (~0.4 us)
    grid = _plain_dim3(griddim, GRID_LIMITS) or _dim3(griddim, "griddim", GRID_LIMITS)
    block = _plain_dim3(blockdim, BLOCK_LIMITS) or _dim3(blockdim, "blockdim", BLOCK_LIMITS)
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise ValueError(
            f"blockdim {blockdim!r} has {threads} threads; a block has at most "
            f"{MAX_THREADS_PER_BLOCK}"
        )
    if stream is None:
        stream = 0
    elif type(stream) is not int or stream != 0:
        _driver.stream_handle(stream)
    if type(sharedmem) is not int:
        sharedmem = _integer(sharedmem, "sharedmem", sharedmem)
    if not 0 <= sharedmem <= MAX_SHARED_MEMORY:
        raise ValueError(f"sharedmem must be in [0, {MAX_SHARED_MEMORY}] bytes, got {sharedmem}")
    return grid, block, stream, sharedmem


def _plain_dim3(value, limits):
    """``value`` as a 3-tuple where it is an int or a tuple of ints within ``limits``."""
    if type(value) is int:
        return (value, 1, 1) if 0 < value <= limits[0] else None
    if type(value) is tuple and 1 <= len(value) <= 3:
        for extent, limit in zip(value, limits):
            if type(extent) is not int or not 0 < extent <= limit:
                return None
        return value + (1,) * (3 - len(value))
    return None


def _integer(value, name, given):
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an integer, not a bool (got {given!r})")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer, got {given!r} ({type(value).__name__})"
        ) from None


def _dim3(value, name, limits=GRID_LIMITS):
    dims = tuple(value) if isinstance(value, tuple | list) else (value,)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"{name} must be an integer or a tuple of 1 to 3 of them, got {value!r}")
    dims = tuple(_integer(d, name, value) for d in dims)
    if min(dims) < 1:
        raise ValueError(f"{name} must be positive in every dimension, got {value!r}")
    for axis, (extent, limit) in enumerate(zip(dims, limits)):
        if extent > limit:
            raise ValueError(
                f"{name} {value!r}: dimension {'xyz'[axis]} is {extent}, beyond CUDA's "
                f"limit of {limit}"
            )
    return dims + (1,) * (3 - len(dims))
