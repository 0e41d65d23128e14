"""Host tensors: ``__array_interface__`` (v3) and the buffer protocol (PEP 3118), no driver.

:func:`read_array_interface` reads a NumPy array, any object with
``__array_interface__`` or any object exposing the buffer protocol (``bytes``,
``bytearray``, ``memoryview``, ``array.array``, ...) into an
:class:`~layoutkit.interop.record.ImportRecord`, checking every entry first: version,
mask, shape and strides (integers), ``typestr`` against ``descr``, ``data`` (a pointer
pair, or a buffer object whose length the described array must fit in) and ``offset``.
:func:`ndarray_record` is the fast path for NumPy arrays. :func:`interface_dict` builds
the dict a view exports as ``__array_interface__`` (and, with a ``stream`` key added, as
``__cuda_array_interface__``).

Examples
--------
>>> import numpy as np
>>> from layoutkit.interop.host import read_array_interface
>>> record = read_array_interface(np.zeros((2, 3), dtype=np.float32)[:, ::2])
>>> record.layout.shape, record.layout.strides_in_bytes, record.dtype, record.readonly
((2, 2), (12, 8), dtype('float32'), False)
>>> read_array_interface(type("Short", (), {"__array_interface__": {
...     "version": 3, "shape": (8,), "typestr": "<i4", "data": bytearray(16)}})())
Traceback (most recent call last):
...
BufferError: Short.__array_interface__: the array's bytes [0, 32) do not lie inside its 16-byte data buffer (offset 0)
"""

import numpy as np

from .._driver import _shown
from .._dtypes import as_dtype, is_ml_dtype, is_numpy_dlpack_dtype, to_dlpack_dtype
from . import _native
from .record import (
    CACHE_LIMIT,
    HOST,
    ImportRecord,
    build_entry,
    check_pointer,
    import_layout,
    index_entry,
    int_entries,
    producer_failure,
)

__all__ = [
    "check_interface",
    "interface_dict",
    "interface_dtype",
    "ndarray_record",
    "read_array_interface",
]

_ndarray = np.ndarray
_tuple_new = tuple.__new__
_ADDRESS_LIMIT = 2**64
_CPU = (1, 0)  # DLPack's (kDLCPU, 0): where every host record is
_DIRECT_READS = _native.DIRECT_READS
_read_ndarray_fields = _native.NDARRAY_FIELDS.unpack_from
_MEMORY = _native.MEMORY
_HEADER = _native.OBJECT_HEADER
_WRITEABLE = _native.NPY_ARRAY_WRITEABLE


def check_interface(interface, name, obj):
    """Validate the parts of an array interface dict common to the host and CUDA versions.

    Raises
    ------
    BufferError
        For a version below 3, a ``mask``, or a missing key.
    TypeError
        When the interface is not a dict.
    """
    if not isinstance(interface, dict):
        raise TypeError(f"{type(obj).__name__}.{name} is {type(interface).__name__}, not a dict")
    version = interface.get("version", 0)
    if type(version) is not int or version < 3:
        raise BufferError(
            f"{type(obj).__name__}.{name} has version {version!r}; only v3 or above is supported"
        )
    if interface.get("mask") is not None:
        raise BufferError(
            f"{type(obj).__name__}.{name} has a mask: mask is not supported (a view cannot "
            "leave elements out)"
        )
    for key in ("shape", "typestr"):
        if key not in interface:
            raise BufferError(f"{type(obj).__name__}.{name} has no {key!r} entry")


def interface_dtype(interface, what):
    """The dtype an array interface describes: ``typestr``, refined by ``descr``.

    ``descr`` (a list of fields, or a dtype as layoutkit exports for ml_dtypes types)
    may only say more about the same bytes: its itemsize must be ``typestr``'s.

    Raises
    ------
    BufferError
        When ``descr`` describes elements of another size than ``typestr``.
    TypeError
        When ``typestr`` (or ``descr``) is not a dtype, or holds Python objects.
    """
    typestr = interface["typestr"]
    if type(typestr) is str:
        dtype = _typestr_dtypes.get(typestr)
        if dtype is None:
            dtype = as_dtype(typestr, f"{what}['typestr']")
            if len(_typestr_dtypes) < 256:
                _typestr_dtypes[typestr] = dtype
    else:
        dtype = as_dtype(typestr, f"{what}['typestr']")
    descr = interface.get("descr")
    if descr is None or descr == [("", typestr)]:
        return dtype
    try:
        described = as_dtype(descr, f"{what}['descr']")
    except TypeError:
        if dtype.kind == "V":
            raise
        return dtype  # a descr NumPy cannot read says nothing more about plain numbers
    if described.itemsize != dtype.itemsize:
        raise BufferError(
            f"{what}: descr {descr!r} describes {described.itemsize}-byte elements but typestr "
            f"{typestr!r} {dtype.itemsize}-byte ones"
        )
    return described if dtype.kind == "V" else dtype


_typestr_dtypes = {}  # a program sees few typestrs; np.dtype(typestr) is the slow part


def _pointer_pair(data, what):
    """Read ``(ptr, readonly)`` from an interface's ``data`` tuple."""
    try:
        ptr, readonly = data
    except (TypeError, ValueError):
        raise BufferError(f"{what}['data'] is {data!r}, not a (pointer, read-only) pair") from None
    address = index_entry(ptr)
    if address is None:
        raise BufferError(f"{what}['data'] pointer {ptr!r} is not an integer")
    ptr = address
    if not 0 <= ptr < 2**64:
        raise BufferError(f"{what}['data'] pointer {ptr} is not an address")
    return ptr, bool(readonly)


def _offset(interface, what):
    offset = interface.get("offset", 0)
    if type(offset) is not int:
        value = index_entry(offset)
        if value is None:
            raise BufferError(f"{what}['offset'] is {offset!r}, not an integer")
        offset = value
    if offset < 0:
        raise BufferError(f"{what}['offset'] is {offset}; it must be >= 0")
    return offset


def _buffer_array(obj, what, source=None):
    """A zero-copy uint8-or-typed NumPy array over ``obj``'s buffer, and its byte length.

    ``source`` says where ``obj`` came from, for the error where it has no buffer: ``None``
    (the object imported), ``"data"`` (an interface's ``data`` entry) or ``"own"`` (the
    object whose interface has no ``data``, or ``None``).
    """
    try:
        memory = memoryview(obj)
    except TypeError:
        if source == "data":
            message = (
                f"{what}['data'] is {_shown(obj)} of type {type(obj).__name__}: neither a "
                "(pointer, read-only) tuple nor an object that supports the buffer protocol"
            )
        elif source == "own":
            message = (
                f"{what} has no 'data' (or None): the array is the object's own buffer, but "
                f"{type(obj).__name__} does not support the buffer protocol"
            )
        else:
            message = (
                f"{what}: {type(obj).__name__} object has no __array_interface__ and does not "
                "support the buffer protocol"
            )
        raise TypeError(message) from None
    try:
        array = np.asarray(memory)
    except (TypeError, ValueError, NotImplementedError) as exc:
        raise BufferError(
            f"{what}: the buffer (format {memory.format!r}) cannot be viewed: {exc}"
        ) from None
    return array, memory.nbytes


def ndarray_record(array, dlpack_only=False, final=True):
    """The record of a NumPy array, read directly; ``None`` where the protocol must decide.

    That is: object dtypes, byte strides that are not multiples of the itemsize (the
    protocol's reader raises the errors), and with ``dlpack_only`` dtypes DLPack does not
    carry. With ``final`` (the inline fast paths, which make the view from the record as
    it is) also writable arrays whose layout aliases elements (``as_strided``): their view
    is read-only but their memory is not, which ``StridedMemoryView._from_record`` sees
    to; so a final record's view is read-only exactly when the array is (DECISIONS 19
    needs nothing more). Callers that go through ``_from_record`` pass ``final=False``
    and get those arrays' records too, with their dtype (the interface dict would call
    an ml_dtypes type void).
    """
    dtype = array.dtype
    shape = array.shape
    strides = array.strides
    entry = _ndarray_entries.get((shape, strides, dtype))
    if entry is None:
        entry = _ndarray_entry(shape, strides, dtype)
    layout, lead, top, aliasing, kind = entry
    if kind is not _DLPACK and (kind is _NOT_VIEWABLE or dlpack_only):
        return None
    if _DIRECT_READS:  # data pointer and flags in one read (see layoutkit.interop._native)
        ptr, flags = _read_ndarray_fields(_MEMORY, id(array) + _HEADER)
        readonly = not flags & _WRITEABLE
    else:
        ptr = _native.ndarray_data_pointer(array)
        readonly = not array.flags.writeable
    if aliasing and final and not readonly:
        return None
    # from the lowest byte (ptr - lead) to the last (as_strided can reach outside the
    # address space): lead <= ptr <= top
    if not ptr or not lead <= ptr <= top:
        check_pointer(ptr, layout, "NumPy array")  # raises, unless a null pointer without elements
    return _tuple_new(ImportRecord, (ptr, layout, dtype, HOST, readonly, array, array, _CPU))


_NOT_VIEWABLE, _HOST_ONLY, _DLPACK = "not viewable", "host only", "DLPack"
# (shape, strides, dtype) -> (layout, lead, top, aliasing, kind): one look-up for the dtype's
# kind and the layout (layout_entry's values, with ``top`` the highest data pointer whose
# bytes end inside the address space); a program sees the same few again and again
_ndarray_entries = {}


def _ndarray_entry(shape, strides, dtype):
    kind = _dtype_kind(dtype)
    entry = (None, 0, 0, False, _NOT_VIEWABLE)  # object dtypes, and strides the protocol refuses
    if kind is not _NOT_VIEWABLE:
        try:
            layout, lead, size, aliasing = build_entry(shape, strides, dtype.itemsize, True, "NumPy array")
        except ValueError:
            pass
        else:
            entry = (layout, lead, _ADDRESS_LIMIT - size + lead, aliasing, kind)
    if len(_ndarray_entries) >= CACHE_LIMIT:
        _ndarray_entries.clear()
    _ndarray_entries[(shape, strides, dtype)] = entry
    return entry


def _dtype_kind(dtype):
    if dtype.hasobject:
        return _NOT_VIEWABLE
    if is_numpy_dlpack_dtype(dtype):
        return _DLPACK
    try:  # ml_dtypes types: ours to carry (NumPy's own export refuses them)
        to_dlpack_dtype(dtype)
    except BufferError:
        return _HOST_ONLY
    return _DLPACK


def _buffer_record(obj, what):
    """The record of an object with only the buffer protocol."""
    array, _ = _buffer_array(obj, what)
    record = ndarray_record(array)
    if record is None:
        as_dtype(array.dtype, f"{what}'s buffer format")  # raises for Python objects ('O')
        raise BufferError(f"{what}: the buffer cannot be viewed")  # pragma: no cover
    return record._replace(exporter=obj)


def read_array_interface(obj):
    """Read a host tensor into an :class:`ImportRecord`; no driver call.

    NumPy arrays are read directly (keeping dtypes such as ml_dtypes' bfloat16 that the
    interface dict would only call void). Objects whose interface has ``data=None`` or a
    buffer object as ``data``, and objects with only the buffer protocol, are read
    through that protocol, and the described array must fit in the buffer.

    Raises
    ------
    TypeError
        When ``obj`` has neither interface, or for an entry of the wrong type.
    BufferError
        For a malformed interface, a version below 3, a mask, a ``descr`` of another
        itemsize than ``typestr``, a bad ``offset``, an array that does not fit in its
        data buffer, or a null pointer with elements.
    ValueError, OverflowError
        For a negative extent, a stride that is no multiple of the itemsize, or values
        beyond int64.
    """
    if type(obj) is _ndarray:
        record = ndarray_record(obj, final=False)
        if record is not None:
            return record
    elif isinstance(obj, np.generic):  # a scalar: its interface is a copy, and says void
        # (for ml_dtypes); read-only, since writes would change only the copy (NumPy refuses
        # a scalar as np.copyto's destination)
        copy = ndarray_record(np.asarray(obj), final=False)
        return copy._replace(exporter=obj, readonly=True)
    what = f"{type(obj).__name__}.__array_interface__"
    try:
        interface = obj.__array_interface__
    except AttributeError:
        return _buffer_record(obj, f"{type(obj).__name__} object")
    except Exception as exc:  # the producer's own failure: it exports nothing
        raise producer_failure(what, exc) from exc
    check_interface(interface, "__array_interface__", obj)
    dtype = interface_dtype(interface, what)
    shape = int_entries(interface["shape"], "shape", what)
    strides = interface.get("strides")
    if strides is not None:
        strides = int_entries(strides, "strides", what)
    layout = import_layout(shape, strides, dtype.itemsize, True, what)
    offset = _offset(interface, what)
    data = interface.get("data")
    if type(data) is tuple:
        if offset:
            raise BufferError(
                f"{what}['offset'] is {offset}, but an offset applies only to a buffer object "
                "as data, not to a (pointer, read-only) pair"
            )
        ptr, readonly = _pointer_pair(data, what)
        # the dict too: a producer may keep the memory alive only there (a NumPy scalar's
        # interface points into a fresh array held by its "__ref" entry)
        keeper = (obj, interface)
    else:  # the data are those of a buffer (the object's own for None), from "offset" on
        if data is None:
            array, nbytes = _buffer_array(obj, what, "own")
        else:
            array, nbytes = _buffer_array(data, what, "data")
        if not array.flags.contiguous:
            raise BufferError(f"{what}: the data buffer is not contiguous")
        needed = (layout.max_offset + 1) * layout.itemsize
        lowest = offset - layout.slice_offset_in_bytes  # negative strides reach back
        if lowest < 0 or lowest + needed > nbytes:
            raise BufferError(
                f"{what}: the array's bytes [{lowest}, {lowest + needed}) do not lie inside its "
                f"{nbytes}-byte data buffer (offset {offset})"
            )
        ptr = _native.ndarray_data_pointer(array) + offset
        readonly = not array.flags.writeable
        keeper = (obj, array)  # the array over the buffer holds the buffer export
    check_pointer(ptr, layout, what)
    return ImportRecord(ptr, layout, dtype, HOST, readonly, obj, keeper, _CPU)


def interface_dict(ptr, readonly, shape, strides_in_bytes, dtype, itemsize):
    """The version-3 array interface dict describing a view (explicit byte strides).

    A view without a dtype is described as raw ``itemsize``-byte void elements. An
    ml_dtypes type (bfloat16, float8, ...), whose ``typestr`` can only say ``|V<n>``,
    is described as ``|V<n>`` with the dtype itself as ``descr``, which NumPy reads back
    as that type. Structured dtypes carry their ``descr`` list (one that list does not
    describe exactly carries itself, see :func:`_fields_descr`). A sub-array dtype
    (``'(2,3)f4'``) carries itself too: its ``descr`` list is only ``[('', '|V24')]``,
    while the dtype is read back as itself by layoutkit and by NumPy as NumPy makes every
    array of it, with the sub-array's axes appended (``(n,)`` elements: a ``(n, 2, 3)``
    float32 array). Other dtypes say all in ``typestr`` (``descr`` would only repeat
    it), so their dict holds only immutable values.

    Examples
    --------
    >>> import numpy as np
    >>> interface = interface_dict(4096, True, (2,), (8,), np.dtype("int64"), 8)
    >>> interface["typestr"], "descr" in interface
    ('<i8', False)
    """
    if dtype is None:
        dtype = np.dtype(f"V{itemsize}")
    interface = {
        "version": 3,
        "shape": shape,
        "typestr": _typestrs.get(dtype) or _typestr(dtype),
        "data": (ptr, readonly),
        "strides": strides_in_bytes,
    }
    if dtype.fields is not None:
        interface["descr"] = _fields_descr(dtype)
    elif dtype.subdtype is not None or (dtype.isbuiltin == 2 and is_ml_dtype(dtype)):
        interface["descr"] = dtype  # a sub-array, or a user-defined type such as '<f1'
    return interface


def _fields_descr(dtype):
    """The ``descr`` of a structured dtype: its list of fields where NumPy reads that list
    back as ``dtype``, else the dtype itself (which NumPy reads back exactly, as it
    reads an ml_dtypes type's).

    The list has no form for out-of-order or overlapping fields (``dtype.descr``
    raises), reads an aligned struct's padding back as named void fields, and cannot be
    read back at all where the name NumPy gives a padding field is taken (``'i1,f4'``
    aligned: its padding after ``f0`` would be ``f1``, ``np.dtype(descr)`` raises).

    Examples
    --------
    >>> import numpy as np
    >>> _fields_descr(np.dtype([("a", "u1"), ("b", "<i4")]))
    [('a', '|u1'), ('b', '<i4')]
    >>> aligned = np.dtype([("a", "u1"), ("b", "<i4")], align=True)
    >>> _fields_descr(aligned) is aligned
    True
    >>> padded = np.dtype("i1,f4", align=True)
    >>> _fields_descr(padded) is padded
    True
    """
    try:
        descr = dtype.descr
        if np.dtype(descr) == dtype:
            return descr
    except ValueError:  # out-of-order or overlapping fields; a list NumPy cannot read back
        pass
    return dtype


_typestrs = {}  # dtype -> its typestr (dtype.str builds a new string each time)


def _typestr(dtype):
    typestr = f"|V{dtype.itemsize}" if dtype.isbuiltin == 2 and is_ml_dtype(dtype) else dtype.str
    if len(_typestrs) >= 256:
        _typestrs.clear()
    _typestrs[dtype] = typestr
    return typestr
