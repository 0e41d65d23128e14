"""DLPack import and export through ctypes: capsules, managed tensors, deleters, stream rules.

Import (:func:`import_dlpack`, :func:`consume_capsule`) asks the producer for a versioned
capsule (DLPack 1.x) and falls back to the legacy one; it renames the capsule to
``used_dltensor(_versioned)`` and reads it into an :class:`ImportedTensor` that owns the
managed tensor and calls its deleter exactly once, when released or collected (also when
a check fails). :func:`tensor_record` / :func:`fields_record` check every field (ndim,
dtype, ``data + byte_offset``, shape, strides, the address range) and describe the tensor
as an :class:`~layoutkit.interop.record.ImportRecord`.

Export (:func:`export_capsule`) builds a managed tensor in one PyMem block whose
``manager_ctx`` holds a reference to the exporting object; its deleter (called by the
consumer, or by the capsule destructor for a capsule nobody consumed) frees the block and
drops the reference, so the exporter stays alive exactly as long as a consumer needs it.
Deleter and destructor are C functions (see the notes above ``_FUNCTIONS``).

Examples
--------
>>> import numpy as np
>>> from layoutkit.interop.dlpack import consume_capsule
>>> array = np.arange(6, dtype=np.int16).reshape(2, 3)
>>> with consume_capsule(array.__dlpack__(max_version=(1, 0))) as tensor:
...     tensor.shape, tensor.strides, tensor.dtype_triple, tensor.device
((2, 3), (3, 1), (0, 16, 1), (1, 0))
"""

import ctypes
import functools
import operator
import struct
import sys
import threading

from .._driver import HOST, Location, _shown
from .._dtypes import from_dlpack_dtype
from ._native import (
    BYTES_DATA,
    DIRECT_READS,
    MEMORY,
    WRITABLE_MEMORY,
    CapsuleType,
    c_string_is,
    capsule_fields,
    set_capsule_name,
)
from .record import checked_layout, index_entry, named, new_record, producer_failure

__all__ = [
    "DLPACK_VERSION",
    "ImportedTensor",
    "consume_capsule",
    "consumer_stream",
    "export_capsule",
    "fields_record",
    "import_dlpack",
    "export_header",
    "location_of",
    "managed_header",
    "managed_record",
    "make_packer",
    "managed_tensor",
    "pack_managed",
    "producer_stream",
    "read_extents",
    "tensor_record",
    "versioned_tensor",
    "refuse_copy",
    "requested_device",
    "wants_versioned",
]

DLPACK_VERSION = (1, 3)  # the newest DLPack ABI whose fields this module reads and writes

kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLCUDAManaged = 13
DEVICE_TYPE_NAMES = {
    1: "CPU", 2: "CUDA", 3: "CUDAHost", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
    10: "ROCM", 11: "ROCMHost", 12: "ExtDev", 13: "CUDAManaged", 14: "OneAPI", 15: "WebGPU",
    16: "Hexagon", 17: "MAIA", 18: "Trn",
}  # fmt: skip

_MAX_NDIM = 64  # StridedLayout's limit; a larger ndim is not read from producer memory
_ADDRESS_LIMIT = 2**64
_INT64_MAX = 2**63 - 1
_LEGACY_DEFAULT_STREAM = 1  # DLPack's and CAI's name for the driver's stream handle 0

FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_IS_SUBBYTE_TYPE_PADDED = 1 << 2

# Native-aligned struct layouts (dlpack.h); checked against ctypes.sizeof in the tests.
# DLTensor: data, device(type, id), ndim, dtype(code, bits, lanes), shape, strides, byte_offset
_TENSOR_FORMAT = "PiiiBBHPPQ"
# DLManagedTensorVersioned: version(major, minor), manager_ctx, deleter, flags, dl_tensor
VERSIONED = struct.Struct("@IIPPQ" + _TENSOR_FORMAT)
# DLManagedTensor (legacy): dl_tensor, manager_ctx, deleter
LEGACY = struct.Struct("@" + _TENSOR_FORMAT + "PP")

_NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
_NAME_LEGACY = ctypes.create_string_buffer(b"dltensor")
_NAME_USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")
_NAME_USED_LEGACY = ctypes.create_string_buffer(b"used_dltensor")
_ADDR_NAME_VERSIONED = ctypes.addressof(_NAME_VERSIONED)
_ADDR_NAME_LEGACY = ctypes.addressof(_NAME_LEGACY)
_ADDR_USED_VERSIONED = ctypes.addressof(_NAME_USED_VERSIONED)
_ADDR_USED_LEGACY = ctypes.addressof(_NAME_USED_LEGACY)


def _capsule_api():
    """Bind the PyCapsule functions: with error checks, and without for the callbacks."""
    # private handles: argtypes set on ctypes.pythonapi's shared function objects would
    # clash with any other library that binds the same functions differently
    api = ctypes.PyDLL(None, handle=ctypes.pythonapi._handle)
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_void_p]
    api.PyCapsule_SetName.restype = ctypes.c_int
    api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_void_p]
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    # The capsule destructor receives a dying capsule (refcount 0) and may run while an
    # exception is set; these bindings neither touch refcounts nor check for errors. For a
    # capsule of ours with its own name, the two calls only read fields.
    raw = ctypes.CDLL(None, handle=ctypes.pythonapi._handle)
    get_name = raw.PyCapsule_GetName
    get_name.restype = ctypes.c_void_p
    get_name.argtypes = [ctypes.c_void_p]
    get_pointer = raw.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return api, get_name, get_pointer


_api, _raw_get_name, _raw_get_pointer = _capsule_api()
_DELETER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _immortal(obj):
    """Keep ``obj`` (and the C memory it owns) alive until the process ends.

    Capsules outlive this module: one held by a reference cycle, or by a module torn down
    after this one, dies at interpreter shutdown, after this module's globals are gone.
    Its name (ours: exported capsules, and consumed ones renamed ``used_dltensor...``) is
    read by its destructor then, and a fallback destructor or deleter is called: memory
    a module global owned would have been freed (NumPy's destructor then read a freed
    name and reported "PyCapsule_GetPointer called with incorrect name").
    """
    _api.Py_IncRef(obj)
    return obj


_api.Py_IncRef.argtypes = [ctypes.py_object]


for _name in (_NAME_VERSIONED, _NAME_LEGACY, _NAME_USED_VERSIONED, _NAME_USED_LEGACY):
    _immortal(_name)


# ----------------------------------------------------------------------------------- import
def consumer_stream(stream_ptr):
    """The one reading of a consumer's stream argument: ``None``, ``-1`` or a handle.

    ``None`` (ambiguous: the rules of the producer's device decide) and ``-1`` (no
    synchronisation) are kept; anything else is read by :func:`layoutkit._driver.stream_handle`
    (an ``int`` or NumPy integer, or an object with ``__cuda_stream__``, ``.cuda_stream``,
    ``.ptr`` or ``.handle``).

    Raises
    ------
    TypeError
        For bools, floats, strings and objects that name no stream.

    Examples
    --------
    >>> consumer_stream(None), consumer_stream(-1), consumer_stream(7)
    (None, -1, 7)
    """
    if stream_ptr is None:
        return None
    if type(stream_ptr) is int and -1 <= stream_ptr < _STREAM_LIMIT:
        return stream_ptr
    from .._driver import _shown, stream_handle

    try:
        if type(stream_ptr) is not bool and hasattr(type(stream_ptr), "__index__"):
            stream = operator.index(stream_ptr)
            if stream == -1:
                return -1
        return stream_handle(stream_ptr)
    except Exception as exc:
        raise TypeError(
            f"stream_ptr={_shown(stream_ptr)} must be a stream handle (an int in "
            f"[0, 2**64) or a stream object), -1 or None ({exc})"
        ) from exc


_STREAM_LIMIT = 2**64  # stream handles are in [0, 2**64); -1 means no synchronisation


def refuse_copy(copy, what):
    """Check ``__dlpack__``'s ``copy``: ``None`` / ``False`` export without a copy; ``True``
    raises ``BufferError`` (layoutkit exports its memory, never a copy), naming ``what``.

    Raises
    ------
    TypeError
        For anything but ``None`` and a bool (NumPy's included), naming the value.

    Examples
    --------
    >>> refuse_copy(None, "view"), refuse_copy(False, "view")
    (None, None)
    >>> refuse_copy("no", "view")
    Traceback (most recent call last):
    ...
    TypeError: copy must be None, True or False, got 'no' of type str
    """
    if copy is None or copy is False:
        return None
    kind = type(copy)
    if kind is not bool and not (kind.__module__ == "numpy" and kind.__name__ in _NUMPY_BOOLS):
        raise TypeError(
            f"copy must be None, True or False, got {_shown(copy)} of type {kind.__name__}"
        )
    if copy:
        raise BufferError(f"copy={copy!r}: a {what} exports its memory without a copy")
    return None


_NUMPY_BOOLS = ("bool", "bool_")  # numpy.bool (2.x) and numpy.bool_, without importing NumPy


class _DeviceRequestError(BufferError, TypeError):
    """A ``dl_device`` that is no device pair: ``BufferError`` as cuda.core 1.2.2 raises for
    every ``dl_device`` it does not serve, and ``TypeError`` for a value of the wrong kind."""


def requested_device(dl_device):
    """``__dlpack__``'s ``dl_device`` as a ``(device_type, device_id)`` tuple of ints, or None.

    Raises
    ------
    BufferError, TypeError
        For anything but ``None`` or a pair (tuple or list) of integers, naming the value
        (one exception of both classes).

    Examples
    --------
    >>> requested_device(None), requested_device((1, 0)), requested_device([2, 1])
    (None, (1, 0), (2, 1))
    >>> requested_device(5)
    Traceback (most recent call last):
    ...
    layoutkit.interop.dlpack._DeviceRequestError: dl_device must be None or a (device_type, device_id) tuple of ints, got 5 of type int
    """
    if dl_device is None:
        return None
    if type(dl_device) in (tuple, list) and len(dl_device) == 2:
        device_type, device_id = index_entry(dl_device[0]), index_entry(dl_device[1])
        if device_type is not None and device_id is not None:
            return (device_type, device_id)
    raise _DeviceRequestError(
        "dl_device must be None or a (device_type, device_id) tuple of ints, got "
        f"{_shown(dl_device)} of type {type(dl_device).__name__}"
    )


def wants_versioned(max_version):
    """Whether ``__dlpack__(max_version=...)`` asks for a versioned capsule (major >= 1).

    Raises
    ------
    TypeError
        When ``max_version`` is neither ``None`` nor a tuple, or its entries are no ints.
    BufferError
        For a tuple of another length than two.

    Examples
    --------
    >>> wants_versioned(None), wants_versioned((1, 3)), wants_versioned((0, 8))
    (False, True, False)
    """
    if max_version is None:
        return False
    if type(max_version) is not tuple:
        raise TypeError(f"max_version={max_version!r} must be a (major, minor) tuple")
    if len(max_version) != 2:  # cuda.core's message (its Buffer's)
        raise BufferError(f"Expected max_version tuple[int, int], got {max_version}")
    major, minor = max_version
    if type(major) is int and type(minor) is int:  # the common call: nothing to convert
        return major >= 1
    major, minor = index_entry(major), index_entry(minor)
    if major is None or minor is None:
        raise TypeError(f"max_version={max_version!r} must be a (major, minor) tuple of ints")
    return major >= 1


def producer_stream(device_type, stream_ptr):
    """Return the ``stream=`` value to pass to ``__dlpack__`` for a producer on ``device_type``.

    CPU producers: ``None`` whatever the consumer's stream (checked first): there is no
    stream to order (DECISIONS 12), and DLPack gives CPU producers ``stream=None`` (NumPy
    raises ``RuntimeError`` for anything else).
    CUDA producers: ``None`` is refused (``BufferError``); other values pass through
    (``-1`` asks the producer not to synchronise), except the driver's handle ``0`` of the
    legacy default stream, which DLPack forbids as ambiguous and names ``1``. Pinned and
    managed producers get the value as given. Other device types are not supported
    (``BufferError``).

    Examples
    --------
    >>> producer_stream(1, 7) is None, producer_stream(2, 7), producer_stream(3, None)
    (True, 7, None)
    >>> producer_stream(2, 0)  # the legacy default stream, as DLPack numbers it
    1
    """
    stream = consumer_stream(stream_ptr)
    if device_type == kDLCPU:
        return None
    if device_type == kDLCUDA:
        if stream is None:
            raise BufferError(
                "stream_ptr=None: stream=None is ambiguous for a CUDA tensor; pass the consumer stream's "
                "handle, or -1 for no synchronization"
            )
        return _LEGACY_DEFAULT_STREAM if stream == 0 else stream
    if device_type in (kDLCUDAHost, kDLCUDAManaged):
        return stream
    raise unsupported_device(device_type)


def device_name(device_type):
    """DLPack's name for a device type (``"unknown"`` for codes it does not define)."""
    return DEVICE_TYPE_NAMES.get(device_type, "unknown")


def unsupported_device(device_type):
    """The BufferError for a device type other than CPU, CUDA, CUDA host and CUDA managed.

    It carries cuda.core's phrase, "device not supported".
    """
    return BufferError(
        f"DLPack device type {device_type} ({device_name(device_type)}): device not supported"
    )


def location_of(device):
    """The :class:`~layoutkit._driver.Location` of a DLPack ``(device_type, device_id)``.

    Raises
    ------
    BufferError
        For device types other than CPU, CUDA, CUDA host (pinned) and CUDA managed, and
        for a negative device id of a CUDA type (-1 would read as host memory's
        ``device_id``).

    Examples
    --------
    >>> location_of((1, 0)), location_of((2, 3)).device_id
    (Location(device_id=-1, is_device_accessible=False, is_host_accessible=True, is_managed=False), 3)
    >>> location_of((2, -1))
    Traceback (most recent call last):
    ...
    BufferError: DLPack device (2, -1): a CUDA device id is an ordinal, >= 0
    """
    if type(device) is tuple:
        location = _LOCATIONS.get(device)
        if location is not None:
            return location
    device_type, device_id = device
    if device_type == kDLCPU:
        return HOST
    if device_id < 0 and device_type in (kDLCUDA, kDLCUDAHost, kDLCUDAManaged):
        raise BufferError(
            f"DLPack device ({device_type}, {device_id}): a {device_name(device_type)} device "
            "id is an ordinal, >= 0"
        )
    if device_type == kDLCUDA:
        location = Location(device_id, True, False, False)
    elif device_type in (kDLCUDAHost, kDLCUDAManaged):
        location = Location(device_id, True, True, device_type == kDLCUDAManaged)
    else:
        raise unsupported_device(device_type)
    if type(device) is tuple and len(_LOCATIONS) < 64:  # a program sees few devices
        _LOCATIONS[device] = location
    return location


def import_dlpack(obj, stream_ptr):
    """Ask ``obj`` for a DLPack capsule (versioned if it can) and read it into a record.

    Returns
    -------
    ImportRecord
        Its owner is the consumed tensor, whose deleter runs once, when the owner dies.
    """
    try:
        device = obj.__dlpack_device__()
    except (TypeError, ValueError, BufferError):
        raise
    except Exception as exc:  # the producer's own failure: it exports nothing
        raise producer_failure(f"{type(obj).__name__}.__dlpack_device__()", exc) from exc
    try:
        device_type, device_id = device  # read once (at most 3 items): another read may differ
        pair = (device_type, device_id)
    except (TypeError, ValueError):
        raise BufferError(
            f"{type(obj).__name__}.__dlpack_device__() returned {device!r}, not a "
            "(device_type, device_id) pair"
        ) from None
    stream = producer_stream(device_type, stream_ptr)
    try:
        try:
            capsule = obj.__dlpack__(stream=stream, max_version=DLPACK_VERSION)
        except TypeError:  # a producer from before DLPack 1.0 knows no max_version
            # with no stream to name, no arguments (as NumPy retries): old producers take
            # stream positionally only, or no argument at all
            capsule = obj.__dlpack__() if stream is None else obj.__dlpack__(stream=stream)
    except (TypeError, ValueError, BufferError):
        raise
    except Exception as exc:  # the producer's own failure: it exports nothing
        raise producer_failure(f"{type(obj).__name__}.__dlpack__()", exc) from exc
    record = tensor_record(consume_capsule(capsule), obj)
    _check_device(record.dl_device, pair, device, obj)
    return record


def _check_device(tensor_device, pair, device, obj):
    """Refuse (``BufferError``) a tensor on another device than the one
    ``obj.__dlpack_device__()`` named: the producer's stream rule was that device's (a CPU
    answer gives a CUDA tensor no stream to order its pending work on). The refused
    record's tensor dies with the error, and its deleter runs then."""
    if tensor_device != (index_entry(pair[0]), index_entry(pair[1])):  # NumPy ints say the same
        raise BufferError(
            f"{type(obj).__name__}.__dlpack_device__() returned {_shown(device)}, but its "
            f"capsule's tensor is on device {tensor_device}; DLPack requires the two to agree"
        )


class ImportedTensor:
    """A consumed DLPack managed tensor; calls the producer's deleter exactly once.

    Every field is read when the tensor is consumed. ``strides`` is ``None`` where a
    legacy producer gave NULL (C order). An ImportedTensor is the one owner of the
    producer's tensor: it cannot be copied or pickled. Once a view uses it (it is the
    owner of the view's import record), only its death runs the deleter: ``release()``
    is refused then, as the views still read the memory.
    """

    __slots__ = (
        "_address", "_deleter", "_in_use", "data", "byte_offset", "device", "ndim",
        "dtype_triple", "flags", "readonly", "padded", "versioned", "shape", "strides",
        "__weakref__",
    )  # fmt: skip

    def release(self):
        """Call the producer's deleter now (once; later calls do nothing).

        Raises
        ------
        BufferError
            When views use the tensor (it is released when the last of them dies).
        """
        if self._in_use:
            raise BufferError(
                "the imported DLPack tensor is used by views; its deleter runs when the last "
                "of them dies"
            )
        with _RELEASING:  # two threads releasing one tensor: one of them calls the deleter
            deleter = self._deleter
            self._deleter = 0
        if deleter:
            _call_deleter(deleter, self._address)

    def _free(self, _call=None):
        # bound on first use below: __del__ runs at shutdown too, after the module's globals
        # are cleared (a tensor in a reference cycle, or held by a module torn down later)
        deleter = getattr(self, "_deleter", 0)  # 0 also for a bare instance (a refused pickle)
        self._deleter = 0
        if deleter:
            _call(deleter, self._address)

    __del__ = _free

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.release()

    def __reduce_ex__(self, protocol):
        raise TypeError(
            "cannot copy or pickle an imported DLPack tensor: it owns the producer's deleter, "
            "which must run exactly once"
        )

    def __setstate__(self, state):
        raise TypeError("an imported DLPack tensor cannot be unpickled: it is made by an import")


_deleter_functions = {}
_RELEASING = threading.Lock()


def _call_deleter(deleter, address, _functions=_deleter_functions, _make=_DELETER_TYPE):
    """Call a producer's C deleter; the GIL is released during the call, as DLPack allows.

    Everything it uses is bound as a default argument: it runs at shutdown too.
    """
    function = _functions.get(deleter)
    if function is None:
        function = _functions[deleter] = _make(deleter)
    function(address)


ImportedTensor._free.__defaults__ = (_call_deleter,)


_int64_structs = {}


def _int64s(count):
    """A cached ``struct.Struct`` for ``count`` native int64 values."""
    packer = _int64_structs.get(count)
    if packer is None:
        packer = _int64_structs[count] = struct.Struct(f"@{count}q")
    return packer


def _capsule_name(name_address):
    """What a capsule whose name is not a DLPack tensor's is: an error to raise."""
    name = ctypes.string_at(name_address) if name_address else None
    if name is not None and name.startswith(b"used_dltensor"):
        return BufferError("the DLPack capsule was already consumed")
    return BufferError(f"capsule named {name!r} is not a DLPack tensor capsule")


def consume_capsule(capsule):
    """Take ownership of the managed tensor in a DLPack capsule.

    Raises
    ------
    BufferError
        When the capsule was already consumed or is not a DLPack capsule, or (the
        deleter is called first) when it carries a DLPack major version other than 1, a
        negative ndim or more than 64, or dimensions but no shape.
    """
    if type(capsule) is not CapsuleType:
        raise BufferError(f"{type(capsule).__name__} object is not a DLPack capsule")
    # Reading the name and renaming the capsule are several bytecodes: two threads given one
    # capsule (a producer returning the same object every time) could both see it unconsumed
    # and both own its tensor, calling the deleter twice. A claim (one atomic dict operation)
    # makes the read-and-rename one thread's; no Python code runs while it is held, and a
    # call that finds a claim (another thread's, or a signal handler's) refuses, never waits.
    key = id(capsule)
    token = object()
    if _claims.setdefault(key, token) is not token:
        raise BufferError("the DLPack capsule is being consumed by another thread")
    try:
        address, name = capsule_fields(capsule)
        if name and c_string_is(name, b"dltensor_versioned\0"):
            if not address:
                raise BufferError("the DLPack capsule holds a NULL managed tensor")
            fields = VERSIONED.unpack_from(MEMORY, address)
            set_capsule_name(capsule, _ADDR_USED_VERSIONED)  # consumed: before any check fails
            versioned = True
        elif name and c_string_is(name, b"dltensor\0"):
            if not address:
                raise BufferError("the DLPack capsule holds a NULL managed tensor")
            fields = LEGACY.unpack_from(MEMORY, address)
            set_capsule_name(capsule, _ADDR_USED_LEGACY)
            versioned = False
        else:
            raise _capsule_name(name)
    finally:
        del _claims[key]
    if versioned:
        return managed_tensor(address, fields[3], fields[0], fields[4], True, fields[5:])
    return managed_tensor(address, fields[11], 1, 0, False, fields[:10])


_claims = {}  # id(capsule) -> the token of the one call reading and renaming it


def managed_record(address):
    """The record of the versioned managed tensor at ``address``, whose ownership is ours now.

    For a C consumer handing a tensor over (``managed_tensor_to_py_object_no_sync``): the
    record's exporter and owner are the :class:`ImportedTensor`, which calls its deleter
    once.
    """
    tensor = versioned_tensor(address, "the managed tensor handed over")
    return tensor_record(tensor, tensor)


def versioned_tensor(address, what):
    """:func:`managed_tensor` of the ``DLManagedTensorVersioned`` at ``address`` (read here).

    Raises
    ------
    BufferError
        For a NULL ``address`` (``what`` names where it came from; nothing to delete), and
        as :func:`managed_tensor` does.
    """
    if not address:
        raise BufferError(f"{what} holds a NULL managed tensor")
    fields = VERSIONED.unpack_from(MEMORY, address)
    return managed_tensor(address, fields[3], fields[0], fields[4], True, fields[5:])


def read_extents(ndim, shape_at, strides_at, what):
    """``(shape, strides)`` of a DLTensor with ``ndim`` dimensions, read from its arrays.

    ``strides`` is ``None`` where ``strides_at`` is NULL (C order).

    Raises
    ------
    BufferError
        For ``ndim`` outside ``0..64``, or dimensions but a NULL shape (``what`` names
        the tensor, or makes its name: see :func:`~layoutkit.interop.record.named`).
    """
    if not 0 <= ndim <= _MAX_NDIM:
        raise BufferError(f"{named(what)} has ndim {ndim}; 0 to {_MAX_NDIM} are supported")
    if not ndim:
        return (), ()
    if not shape_at:
        raise BufferError(f"{named(what)} has ndim {ndim} but a NULL shape")
    reader = _int64_structs.get(ndim) or _int64s(ndim)
    return reader.unpack_from(MEMORY, shape_at), (
        reader.unpack_from(MEMORY, strides_at) if strides_at else None
    )


def managed_tensor(address, deleter, major, flags, versioned, tensor_fields):
    """An :class:`ImportedTensor` owning the managed tensor at ``address`` (fields read).

    ``tensor_fields`` are the DLTensor's ten values as :data:`VERSIONED` unpacks them.
    From here on the deleter runs exactly once, also when a check below fails.
    """
    tensor = ImportedTensor()
    tensor._address = address
    tensor._deleter = deleter
    tensor._in_use = False
    data, device_type, device_id, ndim, code, bits, lanes, shape_at, strides_at, offset = (
        tensor_fields
    )
    if major != 1:
        tensor._free()
        raise BufferError(f"DLPack major version {major} is not supported (only 1.x)")
    try:
        tensor.shape, tensor.strides = read_extents(ndim, shape_at, strides_at, "DLPack tensor")
    except BaseException:
        tensor._free()
        raise
    tensor.versioned = versioned
    tensor.data = data
    tensor.byte_offset = offset
    tensor.device = (device_type, device_id)
    tensor.ndim = ndim
    tensor.dtype_triple = (code, bits, lanes)
    tensor.flags = flags
    tensor.readonly = bool(flags & FLAG_READ_ONLY)
    tensor.padded = bool(flags & FLAG_IS_SUBBYTE_TYPE_PADDED)
    return tensor


def tensor_record(tensor, exporter):
    """Check a consumed tensor's fields and describe it as an :class:`ImportRecord`.

    The tensor is the record's owner: its deleter runs when the last view or buffer
    using it dies. On any error it is released first. See :func:`fields_record`.
    """
    try:
        record = fields_record(
            tensor.data, tensor.byte_offset, tensor.device, tensor.dtype_triple, tensor.padded,
            tensor.shape, tensor.strides, tensor.readonly, exporter, tensor,
        )  # fmt: skip
    except BaseException:
        tensor._free()
        raise
    tensor._in_use = True  # from here on, only the death of every user frees it
    return record


def fields_record(data, byte_offset, device, dtype_triple, padded, shape, strides, readonly,
                  exporter, owner):  # fmt: skip
    """Check a DLTensor's fields (already read) and describe them as an :class:`ImportRecord`.

    Raises
    ------
    BufferError
        For an unsupported device, ``data + byte_offset`` beyond 64 bits, a null data
        pointer with elements, a vector dtype (``lanes != 1``), or bytes that reach
        outside the address space.
    TypeError
        For a dtype NumPy cannot represent.
    NotImplementedError
        For an ml_dtypes type (bfloat16, float8, ...) without ml_dtypes installed.
    ValueError, OverflowError
        For a negative extent, an invalid stride, packed sub-byte data, or values beyond
        int64.
    """
    def what():  # formatted only for an error (see record.named)
        return f"{type(exporter).__name__} DLPack tensor"

    location = location_of(device)
    code, bits, lanes = dtype_triple
    if lanes != 1:
        raise BufferError(
            f"{what()} has dtype (code={code}, bits={bits}, lanes={lanes}): vector types "
            "(lanes != 1) are not supported"
        )
    dtype = _DTYPES.get(dtype_triple) if not padded else None
    if dtype is None:
        dtype = from_dlpack_dtype(code, bits, lanes, padded)
    ptr = data + byte_offset
    if ptr >= _ADDRESS_LIMIT:
        raise BufferError(
            f"{what()} has data {data:#x} + byte_offset {byte_offset}, beyond the 64-bit "
            "address space"
        )
    try:
        layout = checked_layout(shape, strides, dtype.itemsize, False, ptr, what)
    except OverflowError:
        repaired = _cupy14_strides(exporter, strides, dtype.itemsize)
        if repaired is strides:
            raise
        layout = checked_layout(shape, repaired, dtype.itemsize, False, ptr, what)
    return new_record((ptr, layout, dtype, location, readonly, exporter, owner, device))


_LOCATIONS = {(kDLCPU, 0): HOST}
_DTYPES = {
    (code, bits, 1): from_dlpack_dtype(code, bits, 1)
    for code, bits in ((0, 8), (0, 16), (0, 32), (0, 64), (1, 8), (1, 16), (1, 32), (1, 64),
                       (2, 16), (2, 32), (2, 64), (5, 64), (5, 128), (6, 8))
}  # fmt: skip


def _cupy14_strides(exporter, strides, itemsize):
    """Undo CuPy 14's unsigned division of a negative byte stride; other strides are kept.

    CuPy 14 exports the DLPack stride of a negative byte stride ``b`` (a multiple of the
    itemsize) as ``(2**64 + b) // itemsize``, a value whose byte stride does not fit in
    int64. Only for CuPy arrays, and only such values, exactly, are read back as the
    stride ``b // itemsize`` they encode; anything else is left for the layout checks to
    refuse (the same ``strides`` object is returned when nothing changes).

    Examples
    --------
    >>> CuPyArray = type("ndarray", (), {"__module__": "cupy._core.core"})
    >>> _cupy14_strides(CuPyArray(), (2**62 - 3, 1), 4)
    (-3, 1)
    >>> _cupy14_strides(CuPyArray(), (2**62 + 5,), 4)  # not what CuPy makes of a stride
    (4611686018427387909,)
    """
    module = type(exporter).__module__ or ""
    if strides is None or not module.startswith("cupy") or itemsize == 1 or 2**64 % itemsize:
        return strides  # itemsize 1: the signed read is already right
    wrap = 2**64 // itemsize
    limit = _INT64_MAX // itemsize
    repaired = tuple(s - wrap if limit < s < wrap and (wrap - s) <= limit else s for s in strides)
    return strides if repaired == strides else repaired


# ----------------------------------------------------------------------------------- export
# Our managed tensors live in one PyMem_Malloc block each (struct, then shape and strides);
# manager_ctx holds a strong reference to the exporting object. NumPy's own DLPack deleters
# do exactly "PyMem_Free(self); Py_XDECREF(self->manager_ctx)" under the GIL, and NumPy's
# capsule destructors call the deleter of a capsule nobody consumed, saving and restoring
# any exception being raised meanwhile (consumers drop capsules and call deleters in their
# error paths). Being C, they do this where a ctypes callback cannot: a callback run while
# an exception is set loses that exception. So those four functions are borrowed, after
# :func:`_check_numpy_deleter` has seen the deleter behave so; otherwise Python fallbacks
# with the same effect are used.
_MANAGER_CTX_OFFSET = {True: 8, False: LEGACY.size - 16}
_api.PyMem_Free.argtypes = [ctypes.c_void_p]
_api.Py_DecRef.argtypes = [ctypes.c_void_p]
_api.PyMem_Malloc.restype = ctypes.c_void_p
_api.PyMem_Malloc.argtypes = [ctypes.c_size_t]
_api.PyCapsule_GetDestructor.restype = ctypes.c_void_p
_api.PyCapsule_GetDestructor.argtypes = [ctypes.py_object]


# The fallbacks run as late as the last capsule dies, at shutdown after this module's globals
# are cleared: everything they use is bound as a default argument.
def _python_deleter(versioned, address, _offsets=_MANAGER_CTX_OFFSET, _pointer=ctypes.c_void_p,
                    _free=_api.PyMem_Free, _decref=_api.Py_DecRef):  # fmt: skip
    """Fallback deleter: what NumPy's does, as a ctypes callback."""
    context = _pointer.from_address(address + _offsets[versioned]).value or 0
    _free(address)
    _decref(context)


def _python_destructor(capsule, _get_name=_raw_get_name, _get_pointer=_raw_get_pointer,
                       _names=(_ADDR_NAME_VERSIONED, _ADDR_NAME_LEGACY),
                       _deleter=_python_deleter):  # fmt: skip
    """Fallback capsule destructor: call the deleter of a capsule nobody consumed."""
    name = _get_name(capsule)
    if name in _names:  # still our own name: unconsumed
        _deleter(name == _names[0], _get_pointer(capsule, name))


_PYTHON_CALLBACKS = _immortal((  # C holds their addresses, in capsules that outlive the module
    _DELETER_TYPE(functools.partial(_python_deleter, True)),
    _DELETER_TYPE(functools.partial(_python_deleter, False)),
    _DELETER_TYPE(_python_destructor),
))
_PYTHON_FUNCTIONS = {
    versioned: (ctypes.cast(_PYTHON_CALLBACKS[0 if versioned else 1], ctypes.c_void_p).value,
                ctypes.cast(_PYTHON_CALLBACKS[2], ctypes.c_void_p).value)
    for versioned in (True, False)
}  # fmt: skip


def _allocate(size):
    """A PyMem block of ``size`` bytes (NumPy's deleter frees it with PyMem_Free)."""
    address = _api.PyMem_Malloc(size)
    if not address:
        raise MemoryError(f"cannot allocate {size} bytes for a DLPack managed tensor")
    return address


def _pack_managed(versioned, address, size, context, deleter, flags, tensor):
    """Write a managed tensor's struct at ``address``; returns the block as a ctypes array."""
    block = (ctypes.c_char * size).from_address(address)
    if versioned:
        VERSIONED.pack_into(block, 0, *DLPACK_VERSION, context, deleter, flags, *tensor)
    else:
        LEGACY.pack_into(block, 0, *tensor, context, deleter)
    return block


_EMPTY_TENSOR = (0, kDLCPU, 0, 0, 0, 8, 1, 0, 0, 0)


def _check_numpy_deleter(deleter, versioned):
    """Whether ``deleter`` frees a PyMem block and drops one reference to its manager_ctx."""
    probe = object()
    before = sys.getrefcount(probe)
    size = (VERSIONED if versioned else LEGACY).size
    address = _allocate(size)
    _pack_managed(versioned, address, size, id(probe), deleter, 0, _EMPTY_TENSOR)
    _api.Py_IncRef(probe)
    _DELETER_TYPE(deleter)(address)
    return sys.getrefcount(probe) == before


def _numpy_functions(versioned):
    """``(deleter, capsule destructor)`` addresses of NumPy's DLPack export, or None."""
    import numpy as np

    try:
        capsule = np.empty(0).__dlpack__(max_version=(1, 0) if versioned else None)
    except TypeError:  # NumPy < 2.1 makes no versioned capsules
        return None
    destructor = _api.PyCapsule_GetDestructor(capsule)
    name, layout = (_ADDR_NAME_VERSIONED, VERSIONED) if versioned else (_ADDR_NAME_LEGACY, LEGACY)
    fields = layout.unpack(ctypes.string_at(_api.PyCapsule_GetPointer(capsule, name), layout.size))
    deleter = fields[3] if versioned else fields[-1]
    if not (deleter and destructor and _check_numpy_deleter(deleter, versioned)):
        return None
    return deleter, destructor


_NUMPY_FUNCTIONS = {versioned: _numpy_functions(versioned) for versioned in (True, False)}
_FUNCTIONS_ARE_NUMPYS = all(_NUMPY_FUNCTIONS.values())
_FUNCTIONS = {
    versioned: _NUMPY_FUNCTIONS[versioned] or _PYTHON_FUNCTIONS[versioned]
    for versioned in (True, False)
}


def export_capsule(exporter, ptr, shape, strides, dtype_triple, device, flags, versioned):
    """Build a DLPack capsule describing memory that ``exporter`` keeps alive.

    Parameters
    ----------
    exporter : object
        Kept alive until the consumer calls the deleter (or the capsule dies unconsumed).
    ptr : int
        Address of the element at index ``(0, ..., 0)``; exported as ``data`` with
        ``byte_offset`` 0 (NULL when the tensor has no elements).
    shape, strides : tuple of int
        Extents and strides in elements (strides always explicit).
    dtype_triple : tuple
        ``(code, bits, lanes)``.
    device : tuple
        ``(device_type, device_id)``.
    flags : int
        DLPack flag bits (versioned capsules only).
    versioned : bool
        Build a ``dltensor_versioned`` capsule (DLPack 1.x) rather than a legacy one.
    """
    address = pack_managed(exporter, ptr, shape, strides, dtype_triple, device, flags, versioned)
    return _capsule(address, versioned)


def _capsule(address, versioned):
    """The capsule owning the managed tensor at ``address`` (its deleter runs if this fails)."""
    try:
        return _new_capsule(
            address, _ADDR_NAME_VERSIONED if versioned else _ADDR_NAME_LEGACY,
            _FUNCTIONS[versioned][1],
        )  # fmt: skip
    except BaseException:
        _DELETER_TYPE(_FUNCTIONS[versioned][0])(address)
        raise


def managed_header(exporter, ptr, ndim, shape_address, strides_address, dtype_triple, device,
                   flags, versioned):  # fmt: skip
    """The bytes of a managed tensor whose shape and strides live elsewhere.

    For :func:`export_header`: ``shape_address`` and ``strides_address`` point at ``ndim``
    int64 values each that live as long as ``exporter`` (0 for a 0-d tensor);
    ``manager_ctx`` is ``exporter``. The other arguments are :func:`export_capsule`'s.

    Raises
    ------
    BufferError
        When a value does not fit its C field.
    """
    if not 0 <= ptr < _ADDRESS_LIMIT:  # native "P" would wrap a negative value silently
        raise BufferError(f"cannot describe the tensor in DLPack: data pointer {ptr} is no address")
    deleter = _FUNCTIONS[versioned][0]
    device_type, device_id = device
    code, bits, lanes = dtype_triple
    try:
        if versioned:
            return VERSIONED.pack(
                *DLPACK_VERSION, id(exporter), deleter, flags, ptr, device_type, device_id,
                ndim, code, bits, lanes, shape_address, strides_address, 0,
            )  # fmt: skip
        return LEGACY.pack(
            ptr, device_type, device_id, ndim, code, bits, lanes, shape_address,
            strides_address, 0, id(exporter), deleter,
        )  # fmt: skip
    except struct.error as exc:
        raise BufferError(f"cannot describe the tensor in DLPack: {exc}") from None


def export_header(exporter, header, versioned):
    """A capsule of a new managed tensor holding ``header`` (from :func:`managed_header`).

    The tensor is one PyMem block with ``header``'s bytes; its ``manager_ctx`` gets a new
    reference to ``exporter`` (the one ``header`` names), which the deleter drops. The
    three C calls (allocate, take the reference, make the capsule) are made by one
    compiled function (:mod:`~layoutkit.interop._packer`) once a process has made
    :data:`PACKER_AFTER` capsules (at once where llvmlite is loaded already, e.g. by
    Numba), else through ctypes.

    Raises
    ------
    MemoryError
        When the block cannot be allocated.
    """
    packer = _packers.get(versioned)
    if packer is not None:
        return packer(id(exporter), id(header) + BYTES_DATA)  # DIRECT_READS: see _packers
    if versioned in _packers:  # not made yet
        _count_export(versioned)
    size = len(header)
    address = _malloc(size)
    if not address:
        raise MemoryError(f"cannot allocate {size} bytes for a DLPack managed tensor")
    _header_structs[size].pack_into(WRITABLE_MEMORY, address, header)
    _incref(exporter)  # manager_ctx's reference, dropped by the deleter
    return _capsule(address, versioned)


_header_structs = {layout.size: struct.Struct(f"{layout.size}s") for layout in (VERSIONED, LEGACY)}
PACKER_AFTER = 64  # capsules made through ctypes before the compiled packer pays off
_exports_made = {True: 0, False: 0}
# versioned -> the compiled packer; None while it is not made yet (the key is dropped once
# it cannot be made). It needs NumPy's C deleter (see the notes above _FUNCTIONS) and reads
# a header's bytes where a bytes object keeps them (DIRECT_READS).
_packers = {True: None, False: None} if DIRECT_READS and _FUNCTIONS_ARE_NUMPYS else {}


def _count_export(versioned):
    made = _exports_made[versioned] = _exports_made[versioned] + 1
    if made >= PACKER_AFTER or "llvmlite.binding" in sys.modules:
        make_packer(versioned)


def make_packer(versioned):
    """Compile the packer of (non-)``versioned`` capsules now; whether it could be made."""
    from ._packer import compile_packer

    deleter, destructor = _FUNCTIONS[versioned]
    packer = compile_packer(
        (VERSIONED if versioned else LEGACY).size,
        _ADDR_NAME_VERSIONED if versioned else _ADDR_NAME_LEGACY, destructor, deleter,
    )  # fmt: skip
    if packer is None:
        _packers.pop(versioned, None)
    else:
        _packers[versioned] = packer
    return packer is not None


def pack_managed(exporter, ptr, shape, strides, dtype_triple, device, flags, versioned):
    """Write a new managed tensor (arguments as :func:`export_capsule`'s); return its address.

    The tensor lives in one PyMem block with its shape and strides; ``manager_ctx`` holds a
    new reference to ``exporter``. Its deleter frees both, exactly once.

    Raises
    ------
    BufferError
        When a value does not fit its C field (nothing is allocated then).
    MemoryError
        When the block cannot be allocated.
    """
    if not 0 <= ptr < _ADDRESS_LIMIT:  # native "P" would wrap a negative value silently
        raise BufferError(f"cannot describe the tensor in DLPack: data pointer {ptr} is no address")
    ndim = len(shape)
    layout = _managed_structs.get((versioned, ndim)) or _managed_struct(versioned, ndim)
    size = layout.size
    address = _malloc(size)
    if not address:
        raise MemoryError(f"cannot allocate {size} bytes for a DLPack managed tensor")
    shape_address = strides_address = 0
    if ndim:
        shape_address = address + size - 16 * ndim
        strides_address = shape_address + 8 * ndim
    deleter = _FUNCTIONS[versioned][0]
    device_type, device_id = device
    code, bits, lanes = dtype_triple
    try:
        if versioned:
            layout.pack_into(
                WRITABLE_MEMORY, address, *DLPACK_VERSION, id(exporter), deleter, flags,
                ptr, device_type, device_id, ndim, code, bits, lanes, shape_address,
                strides_address, 0, *shape, *strides,
            )  # fmt: skip
        else:
            layout.pack_into(
                WRITABLE_MEMORY, address, ptr, device_type, device_id, ndim, code, bits, lanes,
                shape_address, strides_address, 0, id(exporter), deleter, *shape, *strides,
            )  # fmt: skip
    except struct.error as exc:  # a value outside its C field: nothing was handed out yet
        _free(address)
        raise BufferError(f"cannot describe the tensor in DLPack: {exc}") from None
    _incref(exporter)  # manager_ctx's reference, dropped by the deleter
    return address


_managed_structs = {}
_malloc = _api.PyMem_Malloc
_free = _api.PyMem_Free
_incref = _api.Py_IncRef
_new_capsule = _api.PyCapsule_New


def _managed_struct(versioned, ndim):
    """A cached ``struct.Struct`` for a managed tensor followed by its shape and strides."""
    key = (versioned, ndim)
    layout = _managed_structs.get(key)
    if layout is None:
        header = VERSIONED if versioned else LEGACY
        layout = _managed_structs[key] = struct.Struct(f"{header.format}{2 * ndim}q")
    return layout
