"""Host tensors: ``__array_interface__`` (v3) and the buffer protocol (PEP 3118), no driver.

:func:`read_array_interface` reads what a view needs from a NumPy array, any object
with ``__array_interface__``, or any object exposing the buffer protocol (``bytes``,
``bytearray``, ``memoryview``, ``array.array``, ...). :func:`interface_dict` builds the
dict a view exports as ``__array_interface__`` (and, with a ``stream`` key added, as
``__cuda_array_interface__``).

Examples
--------
>>> import numpy as np
>>> from layoutkit.interop.host import read_array_interface
>>> array = np.zeros((2, 3), dtype=np.float32)[:, ::2]
>>> info = read_array_interface(array)
>>> info.shape, info.strides, info.dtype, info.readonly
((2, 2), (12, 8), dtype('float32'), False)
"""

from typing import NamedTuple

import numpy as np

from .._dtypes import as_dtype

__all__ = [
    "InterfaceInfo",
    "check_interface",
    "interface_dict",
    "read_array_interface",
]


class InterfaceInfo(NamedTuple):
    """What an array interface says about a tensor; ``strides`` in bytes (None: C order)."""

    ptr: int
    readonly: bool
    shape: tuple
    strides: tuple | None
    dtype: np.dtype
    keeper: object  # keeps the memory alive; an ndarray only when it is exactly the tensor


def check_interface(interface, name, obj, min_version=3):
    """Validate the parts of an array interface dict common to the host and CUDA versions.

    Raises
    ------
    BufferError
        For a version below ``min_version``, a ``mask``, or a missing key.
    TypeError
        When the interface is not a dict.
    """
    if not isinstance(interface, dict):
        raise TypeError(f"{type(obj).__name__}.{name} is {type(interface).__name__}, not a dict")
    version = interface.get("version", 0)
    if not isinstance(version, int) or version < min_version:
        raise BufferError(
            f"{type(obj).__name__}.{name} has version {version!r}; version {min_version} or "
            "newer is needed"
        )
    if interface.get("mask") is not None:
        raise BufferError(
            f"{type(obj).__name__}.{name} has a mask; masked arrays are not supported"
        )
    for key in ("shape", "typestr"):
        if key not in interface:
            raise BufferError(f"{type(obj).__name__}.{name} has no {key!r} entry")


def interface_dtype(interface):
    """The dtype an array interface describes (``descr`` refines a void ``typestr``)."""
    typestr = interface["typestr"]
    descr = interface.get("descr")
    if descr and isinstance(typestr, str) and typestr[1:2] == "V" and descr != [("", typestr)]:
        try:
            return as_dtype(descr, "descr")
        except (TypeError, ValueError):
            pass
    if type(typestr) is not str:
        return as_dtype(typestr, "typestr")
    dtype = _typestr_dtypes.get(typestr)
    if dtype is None:
        dtype = as_dtype(typestr, "typestr")
        if len(_typestr_dtypes) < 256:
            _typestr_dtypes[typestr] = dtype
    return dtype


_typestr_dtypes = {}  # a program sees few typestrs; np.dtype(typestr) is the slow part


def _data_pointer(data, obj, name):
    """Read ``(ptr, readonly)`` from the interface's ``data`` entry."""
    try:
        ptr, readonly = data
        ptr = int(ptr)
    except (TypeError, ValueError):
        raise BufferError(
            f"{type(obj).__name__}.{name}['data'] is {data!r}, not a (pointer, read-only) pair"
        ) from None
    if ptr < 0 or ptr >= 2**64:
        raise BufferError(f"{type(obj).__name__}.{name}['data'] pointer {ptr} is not an address")
    return ptr, bool(readonly)


def _from_buffer_protocol(obj):
    """Read a PEP 3118 exporter through a zero-copy NumPy array over its memory."""
    try:
        memory = memoryview(obj)
    except TypeError:
        raise TypeError(
            f"{type(obj).__name__} object has no __array_interface__ and does not support the "
            "buffer protocol"
        ) from None
    try:
        array = np.asarray(memory)
    except (TypeError, ValueError, NotImplementedError) as exc:
        raise BufferError(
            f"{type(obj).__name__} object's buffer (format {memory.format!r}) cannot be viewed: {exc}"
        ) from None
    info = read_array_interface(array)
    return info._replace(keeper=array)


def read_array_interface(obj):
    """Read a host tensor's pointer, shape, byte strides and dtype; no driver call.

    NumPy arrays are read directly (keeping dtypes such as ml_dtypes' bfloat16 that the
    interface dict would only call void). Objects whose interface has ``data=None``, and
    objects with only the buffer protocol, are read through that protocol.

    Returns
    -------
    InterfaceInfo

    Raises
    ------
    TypeError
        When ``obj`` has neither interface.
    BufferError
        For a malformed interface, a version below 3, or a mask.
    """
    interface = getattr(obj, "__array_interface__", None)
    if interface is None:
        return _from_buffer_protocol(obj)
    check_interface(interface, "__array_interface__", obj)
    data = interface.get("data")
    if data is None or not isinstance(data, tuple):
        # the data are those of the object's buffer, starting "offset" bytes in
        base = _from_buffer_protocol(obj if data is None else data)
        ptr, readonly = base.ptr + interface.get("offset", 0), base.readonly
        keeper = (obj, base.keeper)  # the array over the buffer holds the buffer export
    else:
        ptr, readonly = _data_pointer(data, obj, "__array_interface__")
        keeper = obj
    dtype = as_dtype(obj.dtype) if type(obj) is np.ndarray else interface_dtype(interface)
    strides = interface.get("strides")
    return InterfaceInfo(
        ptr, readonly, tuple(interface["shape"]), None if strides is None else tuple(strides),
        dtype, keeper,
    )  # fmt: skip


def interface_dict(ptr, readonly, shape, strides_in_bytes, dtype, itemsize):
    """The version-3 array interface dict describing a view (explicit byte strides).

    A view without a dtype is described as raw ``itemsize``-byte void elements.

    Examples
    --------
    >>> import numpy as np
    >>> interface_dict(4096, True, (2,), (8,), np.dtype("int64"), 8)["typestr"]
    '<i8'
    """
    if dtype is None:
        dtype = np.dtype(f"V{itemsize}")
    return {
        "version": 3,
        "shape": shape,
        "typestr": dtype.str,
        "descr": dtype.descr,
        "data": (ptr, readonly),
        "strides": strides_in_bytes,
    }
