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

from numba import types

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
    (dtype, ndim, layout kind, read-only) matches the example views given to
    ``prepare``, and scalars of the example scalars' types. Views are checked for device
    accessibility, a closed buffer and the device; the stream, grid and block are those
    given to ``prepare``. Device exceptions are not reported on this path.

    Copies use :meth:`pack` once and :meth:`relaunch` per copy, which replaces the
    leading ``int64`` parameters (the two addresses) and takes the stream.
    """

    def __init__(self, compiled, argument_types, griddim, blockdim, stream, sharedmem):
        from layoutkit import _driver

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
        self._grid = _dim3(griddim, "griddim")
        self._block = _dim3(blockdim, "blockdim")
        self._sharedmem = int(sharedmem)
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
    """Whether a view of type ``actual`` fits a kernel prepared for ``expected``."""
    return actual.copy(boundscheck=expected.boundscheck) is expected


def _dim3(value, name):
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d > 0 for d in dims):
        raise ValueError(f"{name} must be a positive int or a tuple of 1-3 of them, got {value!r}")
    return dims + (1,) * (3 - len(dims))
