"""Hand-built DLPack producers: capsules made with ctypes structures written from dlpack.h.

They are independent of ``layoutkit.interop.dlpack``'s ``struct`` formats, count how often
their deleter runs and record the keyword arguments of every ``__dlpack__`` request, so
tests can check lifetimes, flags, ``byte_offset`` and hostile field values.
"""

import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


new_capsule = ctypes.PyDLL(None, handle=ctypes.pythonapi._handle).PyCapsule_New
new_capsule.restype = ctypes.py_object
new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_CAPSULE_NAMES = {
    True: b"dltensor_versioned",
    False: b"dltensor",
}  # kept alive: capsules keep the pointer


class Producer:
    """Hands out a hand-built DLPack capsule over ``array``'s memory; counts deleter calls."""

    def __init__(self, array, *, byte_offset=0, shape=None, strides="array", dtype=None,
                 device=(1, 0), versioned=True, flags=0, major=1, data=None, legacy_only=False,
                 ndim=None):  # fmt: skip
        self.array = array
        self.deleted = 0
        self.device = device
        self.versioned = versioned and not legacy_only
        self.legacy_only = legacy_only
        self.requests = []
        shape = array.shape if shape is None else shape
        if strides == "array":
            strides = tuple(s // array.itemsize for s in array.strides)
        self._shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self._strides = None if strides is None else (ctypes.c_int64 * max(len(shape), 1))(*strides)
        if data is None:
            data = array.__array_interface__["data"][0] - byte_offset
        self._deleter = DELETER(self._on_delete)
        tensor = DLTensor(
            data, DLDevice(*device), len(shape) if ndim is None else ndim,
            DLDataType(*(dtype or _dl_dtype(array.dtype))),
            ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)),
            None if strides is None else ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64)),
            byte_offset,
        )  # fmt: skip
        if self.versioned:
            self.managed = DLManagedTensorVersioned(
                DLPackVersion(major, 0), None, self._deleter, flags, tensor
            )
        else:
            self.managed = DLManagedTensor(tensor, None, self._deleter)

    def _on_delete(self, address):
        assert address == ctypes.addressof(self.managed)
        self.deleted += 1

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        if self.legacy_only and "max_version" in kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.requests.append(dict(stream=stream, **kwargs))
        name = _CAPSULE_NAMES[self.versioned]
        return new_capsule(ctypes.addressof(self.managed), name, None)


def _dl_dtype(dtype):
    from layoutkit._dtypes import to_dlpack_dtype

    return to_dlpack_dtype(dtype)[:3]
