"""The fast launch path: a compiled kernel relaunched through the driver with packed arguments.

numba-cuda spends several microseconds per launch typing arguments and converting each
kernel parameter. A :class:`PreparedLaunch` does that work once: it keeps the kernel
handle, one parameter buffer with an 8-byte slot per kernel parameter and the array of
pointers to those slots. A launch writes the new values into the slots with one
``struct.pack_into`` and calls ``cuLaunchKernel``.
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
    """struct format of one kernel argument's parameters, and whether it is a view."""
    if isinstance(argument_type, StridedViewType):
        return "q" * argument_type.parameter_count, True
    if argument_type in _SLOT_FORMATS:
        return _SLOT_FORMATS[argument_type], False
    raise TypeError(
        f"prepare() supports views and integer, float and bool scalars; got {argument_type}"
    )


class PreparedLaunch:
    """Relaunch a compiled kernel with new arguments of the same types (made by ``prepare``).

    Call it with the kernel's arguments: ``StridedMemoryView`` objects whose Numba type
    (dtype, ndim, layout kind, read-only) matches the example views given to
    ``prepare``, and scalars of the example scalars' types. Views are checked for device
    accessibility, a closed buffer and the device; the stream, grid and block are those
    given to ``prepare``. Device exceptions are not reported on this path.
    """

    def __init__(self, compiled, argument_types, griddim, blockdim, stream, sharedmem):
        from layoutkit import _driver

        formats = [_parameter_format(t) for t in argument_types]
        self._argument_types = argument_types
        self._names = tuple(f"argument {position}" for position in range(len(argument_types)))
        self._is_view = tuple(is_view for _, is_view in formats)
        self._device_id = _driver.current_device_id()
        self._launcher = _driver.KernelLauncher(
            int(compiled._codelibrary.get_cufunc().handle),
            "".join(fmt for fmt, _ in formats),
        )
        self._packer = self._launcher.packer
        self._slots = self._launcher.slots
        self._stream = self._launcher.stream(_driver.stream_handle(stream) if stream else 0)
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
