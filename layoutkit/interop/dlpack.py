"""DLPack import and export through ctypes: capsules, managed tensors, deleters, stream rules.

Import (:func:`import_dlpack`, :func:`consume_capsule`) asks the producer for a versioned
capsule (DLPack 1.x) and falls back to the legacy one; it renames the capsule to
``used_dltensor(_versioned)`` and returns an :class:`ImportedTensor` that owns the managed
tensor and calls its deleter exactly once, when released or collected.

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
import operator
import struct
import sys

from ._native import (
    MEMORY,
    WRITABLE_MEMORY,
    CapsuleType,
    c_string_is,
    capsule_fields,
    set_capsule_name,
)

__all__ = [
    "DLPACK_VERSION",
    "ImportedTensor",
    "consume_capsule",
    "export_capsule",
    "import_dlpack",
    "producer_stream",
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


# ----------------------------------------------------------------------------------- import
def _int_stream(stream_ptr):
    """Read a stream argument: None, an int-like handle, or an object with ``__cuda_stream__``."""
    if stream_ptr is None:
        return None
    protocol = getattr(stream_ptr, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    if isinstance(stream_ptr, bool):
        raise TypeError(f"stream_ptr={stream_ptr!r} must be a stream handle (int), -1 or None")
    try:
        return operator.index(stream_ptr)
    except TypeError:
        raise TypeError(
            f"stream_ptr={stream_ptr!r} must be a stream handle (int), -1 or None"
        ) from None


def producer_stream(device_type, stream_ptr):
    """Return the ``stream=`` value to pass to ``__dlpack__`` for a producer on ``device_type``.

    CPU producers: ``None`` is ambiguous (``BufferError``), ``-1`` and ``0`` mean no stream.
    CUDA producers: ``None`` is refused (``BufferError``); other values pass through
    (``-1`` asks the producer not to synchronise), except the driver's handle ``0`` of the
    legacy default stream, which DLPack forbids as ambiguous and names ``1``. Pinned and
    managed producers get the value as given. Other device types are not supported
    (``BufferError``).

    Examples
    --------
    >>> producer_stream(1, -1) is None, producer_stream(2, 7), producer_stream(3, None)
    (True, 7, None)
    >>> producer_stream(2, 0)  # the legacy default stream, as DLPack numbers it
    1
    """
    stream = stream_ptr if type(stream_ptr) is int else _int_stream(stream_ptr)
    if device_type == kDLCPU:
        if stream is None:
            raise BufferError(
                "stream_ptr=None is ambiguous for a CPU tensor: pass -1 for no synchronization"
            )
        return None if stream in (-1, 0) else stream
    if device_type == kDLCUDA:
        if stream is None:
            raise BufferError(
                "stream_ptr=None is ambiguous for a CUDA tensor: pass the consumer stream's "
                "handle, or -1 for no synchronization"
            )
        return _LEGACY_DEFAULT_STREAM if stream == 0 else stream
    if device_type in (kDLCUDAHost, kDLCUDAManaged):
        return stream
    name = DEVICE_TYPE_NAMES.get(device_type, "unknown")
    raise BufferError(f"DLPack device type {device_type} ({name}) is not supported")


def import_dlpack(obj, stream_ptr):
    """Ask ``obj`` for a DLPack capsule (versioned if it can) and consume it.

    Returns
    -------
    ImportedTensor
        Owner of the managed tensor.
    """
    device_type, _ = obj.__dlpack_device__()
    stream = producer_stream(device_type, stream_ptr)
    try:
        capsule = obj.__dlpack__(stream=stream, max_version=DLPACK_VERSION)
    except TypeError:  # a producer from before DLPack 1.0 knows no max_version
        capsule = obj.__dlpack__(stream=stream)
    return consume_capsule(capsule)


class ImportedTensor:
    """A consumed DLPack managed tensor; calls the producer's deleter exactly once.

    All fields, shape and strides included, are read when the capsule is consumed.
    ``strides`` is ``None`` where a legacy producer gave NULL (C order); ``ptr`` is
    ``data + byte_offset`` (DECISIONS 13).
    """

    __slots__ = (
        "_address", "_deleter", "data", "byte_offset", "ptr", "device", "ndim", "dtype_triple",
        "flags", "readonly", "padded", "versioned", "shape", "strides", "__weakref__",
    )  # fmt: skip

    def release(self):
        """Call the producer's deleter now (once; later calls do nothing)."""
        deleter, self._deleter = self._deleter, 0
        if deleter:
            _call_deleter(deleter, self._address)

    __del__ = release

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.release()


_deleter_functions = {}


def _call_deleter(deleter, address):
    """Call a producer's C deleter; the GIL is released during the call, as DLPack allows."""
    function = _deleter_functions.get(deleter)
    if function is None:
        function = _deleter_functions[deleter] = _DELETER_TYPE(deleter)
    function(address)


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
        When the capsule was already consumed, is not a DLPack capsule, carries a DLPack
        major version other than 1, has more than 64 dimensions, or has dimensions but no
        shape (the deleter is still called for those last three).
    """
    if type(capsule) is not CapsuleType:
        raise BufferError(f"{type(capsule).__name__} object is not a DLPack capsule")
    address, name = capsule_fields(capsule)
    if name and c_string_is(name, b"dltensor_versioned\0"):
        major, _, _, deleter, flags, *tensor_fields = VERSIONED.unpack_from(MEMORY, address)
        set_capsule_name(capsule, _ADDR_USED_VERSIONED)
        versioned = True
    elif name and c_string_is(name, b"dltensor\0"):
        *tensor_fields, _, deleter = LEGACY.unpack_from(MEMORY, address)
        set_capsule_name(capsule, _ADDR_USED_LEGACY)
        major, flags, versioned = 1, 0, False
    else:
        raise _capsule_name(name)
    tensor = ImportedTensor()
    tensor._address = address
    tensor._deleter = deleter
    if major != 1:
        tensor.release()
        raise BufferError(f"DLPack major version {major} is not supported (only 1.x)")
    data, device_type, device_id, ndim, code, bits, lanes, shape_at, strides_at, offset = (
        tensor_fields
    )
    tensor.versioned = versioned
    tensor.data = data
    tensor.byte_offset = offset
    tensor.ptr = data + offset
    tensor.device = (device_type, device_id)
    tensor.ndim = ndim
    tensor.dtype_triple = (code, bits, lanes)
    tensor.flags = flags
    tensor.readonly = bool(flags & FLAG_READ_ONLY)
    tensor.padded = bool(flags & FLAG_IS_SUBBYTE_TYPE_PADDED)
    if ndim > 0:
        if not shape_at:
            tensor.release()
            raise BufferError(f"DLPack tensor has ndim {ndim} but a NULL shape")
        if ndim > _MAX_NDIM:
            tensor.release()
            raise BufferError(f"DLPack tensor has ndim {ndim}; at most {_MAX_NDIM} are supported")
        reader = _int64_structs.get(ndim) or _int64s(ndim)
        tensor.shape = reader.unpack_from(MEMORY, shape_at)
        tensor.strides = reader.unpack_from(MEMORY, strides_at) if strides_at else None
    else:
        tensor.shape = tensor.strides = ()
    return tensor


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
_api.Py_IncRef.argtypes = [ctypes.py_object]
_api.PyCapsule_GetDestructor.restype = ctypes.c_void_p
_api.PyCapsule_GetDestructor.argtypes = [ctypes.py_object]


def _read_address(address):
    return ctypes.c_void_p.from_address(address).value or 0


def _python_deleter(versioned, address):
    """Fallback deleter: what NumPy's does, as a ctypes callback."""
    context = _read_address(address + _MANAGER_CTX_OFFSET[versioned])
    _api.PyMem_Free(address)
    _api.Py_DecRef(context)


def _python_destructor(capsule):
    """Fallback capsule destructor: call the deleter of a capsule nobody consumed."""
    name = _raw_get_name(capsule)
    if name in (_ADDR_NAME_VERSIONED, _ADDR_NAME_LEGACY):  # still our own name: unconsumed
        address = _raw_get_pointer(capsule, name)
        _python_deleter(name == _ADDR_NAME_VERSIONED, address)


_PYTHON_CALLBACKS = (  # kept alive for as long as the module: C holds their addresses
    _DELETER_TYPE(lambda address: _python_deleter(True, address)),
    _DELETER_TYPE(lambda address: _python_deleter(False, address)),
    _DELETER_TYPE(_python_destructor),
)
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


_FUNCTIONS = {
    versioned: _numpy_functions(versioned) or _PYTHON_FUNCTIONS[versioned]
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
    deleter, destructor = _FUNCTIONS[versioned]
    device_type, device_id = device
    code, bits, lanes = dtype_triple
    if versioned:
        layout.pack_into(
            WRITABLE_MEMORY, address, *DLPACK_VERSION, id(exporter), deleter, flags,
            ptr, device_type, device_id, ndim, code, bits, lanes, shape_address, strides_address,
            0, *shape, *strides,
        )  # fmt: skip
        name = _ADDR_NAME_VERSIONED
    else:
        layout.pack_into(
            WRITABLE_MEMORY, address, ptr, device_type, device_id, ndim, code, bits, lanes,
            shape_address, strides_address, 0, id(exporter), deleter, *shape, *strides,
        )  # fmt: skip
        name = _ADDR_NAME_LEGACY
    _incref(exporter)  # manager_ctx's reference, dropped by the deleter
    try:
        return _new_capsule(address, name, destructor)
    except BaseException:
        _DELETER_TYPE(deleter)(address)
        raise


_managed_structs = {}
_malloc = _api.PyMem_Malloc
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
