"""C structs read (and capsules renamed) in one ``struct`` call instead of ctypes calls.

A ctypes foreign call costs about 0.3-0.5 µs, several times what the imports it serves
may take in all. ``MEMORY`` is a memoryview spanning the address space, so
``some_struct.unpack_from(MEMORY, address)`` reads a C struct at a known-good address
in about 0.1 µs. The fields of NumPy arrays and Python capsules are read where CPython
and NumPy put them (``PyArrayObject_fields.data`` and ``PyCapsule``'s ``pointer`` and
``name``, right after the object header; an array's ``flags`` a few fields on: see
``NDARRAY_FIELDS``); import checks those places against the C API on probe objects, and
where they differ (another interpreter build) the functions here fall back to ctypes
calls with the same results (callers of ``NDARRAY_FIELDS`` test ``DIRECT_READS``).

Off switch: ``LAYOUTKIT_NATIVE_READS=0`` in the environment (read at import) always uses
the C-API fallbacks. They matter: on the CPU machine a NumPy data pointer costs ~0.1 µs
read here against ~0.8 µs through ``__array_interface__``, and a capsule's two fields
~0.1 µs against two ctypes calls (~0.5 µs).

Examples
--------
>>> import numpy as np
>>> a = np.arange(4.0)
>>> ndarray_data_pointer(a[1:]) == a.__array_interface__["data"][0] + 8
True
"""

import ctypes
import os
import struct
import sys

__all__ = [
    "MEMORY",
    "WRITABLE_MEMORY",
    "DIRECT_READS",
    "NDARRAY_FIELDS",
    "NPY_ARRAY_WRITEABLE",
    "OBJECT_HEADER",
    "CapsuleType",
    "capsule_fields",
    "BYTES_DATA",
    "c_string_is",
    "ndarray_data_pointer",
    "set_capsule_name",
]

_ADDRESS_SPACE = (ctypes.c_char * sys.maxsize).from_address(0)
MEMORY = memoryview(_ADDRESS_SPACE).toreadonly()
WRITABLE_MEMORY = memoryview(_ADDRESS_SPACE)  # only for blocks this package allocated
_PAGE = 4096  # the smallest page size of any platform: a read inside one page is safe
_HEADER = object.__basicsize__  # sizeof(PyObject): where an object's own fields start
OBJECT_HEADER = _HEADER
_POINTER = struct.Struct("@P")
_TWO_POINTERS = struct.Struct("@PP")
# PyArrayObject_fields after the header: data, nd, dimensions, strides, base, descr, flags
NDARRAY_FIELDS = struct.Struct("@P40xi")  # (data, flags), read at id(array) + OBJECT_HEADER
NPY_ARRAY_WRITEABLE = 0x0400

_api = ctypes.PyDLL(None, handle=ctypes.pythonapi._handle)  # private: argtypes of our own
_get_pointer = _api.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_void_p]
_get_name = _api.PyCapsule_GetName
_get_name.restype = ctypes.c_void_p
_get_name.argtypes = [ctypes.py_object]
_set_name = _api.PyCapsule_SetName
_set_name.restype = ctypes.c_int
_set_name.argtypes = [ctypes.py_object, ctypes.c_void_p]
_new_capsule = _api.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
CapsuleType = type(_new_capsule(1, None, None))


_byte_structs = {}


def c_string_is(address, expected):
    """Whether the NUL-terminated string at ``address`` is ``expected`` (bytes ending in NUL).

    Reads ``len(expected)`` bytes at once when they lie in the string's first page (always
    mapped, since the string's first byte is), else only up to the string's own NUL.

    Examples
    --------
    >>> name = ctypes.create_string_buffer(b"dltensor")
    >>> c_string_is(ctypes.addressof(name), b"dltensor\\0"), c_string_is(ctypes.addressof(name), b"dl\\0")
    (True, False)
    """
    size = len(expected)
    if address % _PAGE + size <= _PAGE:
        reader = _byte_structs.get(size)
        if reader is None:
            reader = _byte_structs[size] = struct.Struct(f"{size}s")
        return reader.unpack_from(MEMORY, address)[0] == expected
    return ctypes.string_at(address) + b"\0" == expected


def _array_data_slot(array):
    """The data pointer of a NumPy array (``array.ctypes.data``)."""
    return _POINTER.unpack_from(MEMORY, id(array) + _HEADER)[0]


def _array_data_interface(array):
    """The data pointer of a NumPy array (``array.ctypes.data``)."""
    return array.__array_interface__["data"][0]


# PyBytesObject: the header, then ob_sval[]; a bytes object's data are at id(b) + BYTES_DATA
# (valid where DIRECT_READS is true)
BYTES_DATA = bytes.__basicsize__ - 1


def _capsule_slots(capsule):
    """``(pointer, name address)`` of a valid Python capsule."""
    return _TWO_POINTERS.unpack_from(MEMORY, id(capsule) + _HEADER)


def _capsule_calls(capsule):
    """``(pointer, name address)`` of a valid Python capsule."""
    name = _get_name(capsule)
    return _get_pointer(capsule, name) or 0, name or 0


def _set_name_slot(capsule, name_address):
    """Rename a valid capsule to the C string at ``name_address`` (which must outlive it)."""
    _POINTER.pack_into(WRITABLE_MEMORY, id(capsule) + _HEADER + _POINTER.size, name_address)


def _set_name_call(capsule, name_address):
    """Rename a valid capsule to the C string at ``name_address`` (which must outlive it)."""
    _set_name(capsule, name_address)


def _slots_match():
    """Whether NumPy arrays and capsules keep their fields where this module reads them.

    Examples
    --------
    The C-API fallbacks give what the slot reads give:

    >>> import numpy as np
    >>> array = np.zeros((3, 4), np.int16)[1:, ::2]
    >>> _array_data_interface(array) == _array_data_slot(array)
    True
    >>> capsule = array.__dlpack__()
    >>> _capsule_calls(capsule) == _capsule_slots(capsule)
    True
    >>> original = _capsule_slots(capsule)[1]  # NumPy's static "dltensor"
    >>> name = ctypes.create_string_buffer(b"dltensor")
    >>> _set_name_call(capsule, ctypes.addressof(name))
    >>> _capsule_slots(capsule)[1] == ctypes.addressof(name)
    True
    >>> _set_name_call(capsule, original)  # the capsule may outlive ``name``
    """
    if sys.implementation.name != "cpython":  # id() is an address only in CPython
        return False
    import numpy as np

    arrays = (np.arange(3.0), np.zeros((2, 3), np.int8)[:, 1:], np.frombuffer(b"probe", np.uint8))
    if any(_array_data_slot(a) != _array_data_interface(a) for a in arrays):
        return False
    for a in arrays:
        data, flags = NDARRAY_FIELDS.unpack_from(MEMORY, id(a) + _HEADER)
        if data != _array_data_interface(a) or bool(flags & NPY_ARRAY_WRITEABLE) != a.flags.writeable:
            return False
    names = [ctypes.create_string_buffer(name) for name in (b"probe", b"renamed")]
    first, second = (ctypes.addressof(name) for name in names)
    capsule = _new_capsule(first + 1, first, None)  # any non-null pointer will do
    if _capsule_slots(capsule) != (first + 1, first):
        return False
    _set_name_slot(capsule, second)
    if _get_name(capsule) != second or _get_pointer(capsule, second) != first + 1:
        return False
    probe = bytes(range(40))
    return id(probe) + BYTES_DATA == ctypes.cast(ctypes.c_char_p(probe), ctypes.c_void_p).value


DIRECT_READS = os.environ.get("LAYOUTKIT_NATIVE_READS", "1") != "0" and _slots_match()
if DIRECT_READS:
    ndarray_data_pointer = _array_data_slot
    capsule_fields = _capsule_slots
    set_capsule_name = _set_name_slot
else:  # another interpreter build, or switched off: the C API, slower
    ndarray_data_pointer = _array_data_interface
    capsule_fields = _capsule_calls
    set_capsule_name = _set_name_call
