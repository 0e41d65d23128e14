"""dtype normalisation: NumPy dtypes, DLPack ``(code, bits, lanes)`` triples, ml_dtypes types.

Anything :func:`numpy.dtype` accepts is a dtype here (``np.float32``, ``"f4"``, a dtype),
plus the names of ``ml_dtypes`` types (``"bfloat16"``, ``"float8_e4m3fn"``, ...) when that
optional package is installed. Object dtypes are refused: a view describes raw memory, and
memory holding Python object pointers cannot be shared safely.

DLPack carries a dtype as ``(code, bits, lanes)``. :func:`from_dlpack_dtype` and
:func:`to_dlpack_dtype` translate both ways for every type the two sides share: bool,
signed and unsigned integers, IEEE floats, complex and, through ml_dtypes, bfloat16, the
float8 family and the one-per-byte ("padded") sub-byte types int2/int4/float4/float6.

Examples
--------
>>> import numpy as np
>>> from layoutkit._dtypes import as_dtype, from_dlpack_dtype, to_dlpack_dtype
>>> as_dtype(np.float32) == np.dtype("float32")
True
>>> to_dlpack_dtype(np.dtype("complex64"))
(5, 64, 1, False)
>>> from_dlpack_dtype(0, 16, 1)
dtype('int16')
"""

import functools
import sys

import numpy as np

__all__ = [
    "DLPACK_CODE_NAMES",
    "as_dtype",
    "from_dlpack_dtype",
    "is_ml_dtype",
    "is_numpy_dlpack_dtype",
    "to_dlpack_dtype",
]

# DLDataTypeCode values (dlpack.h, DLPack 1.3)
kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLOpaqueHandle = 3
kDLBfloat = 4
kDLComplex = 5
kDLBool = 6

DLPACK_CODE_NAMES = {
    0: "int",
    1: "uint",
    2: "float",
    3: "opaque handle",
    4: "bfloat",
    5: "complex",
    6: "bool",
    7: "float8_e3m4",
    8: "float8_e4m3",
    9: "float8_e4m3b11fnuz",
    10: "float8_e4m3fn",
    11: "float8_e4m3fnuz",
    12: "float8_e5m2",
    13: "float8_e5m2fnuz",
    14: "float8_e8m0fnu",
    15: "float6_e2m3fn",
    16: "float6_e3m2fn",
    17: "float4_e2m1fn",
}

# (code, bits) -> NumPy dtype, for the types NumPy itself has
_NUMPY_FROM_DL = {
    (kDLBool, 8): np.dtype(np.bool_),
    (kDLInt, 8): np.dtype(np.int8),
    (kDLInt, 16): np.dtype(np.int16),
    (kDLInt, 32): np.dtype(np.int32),
    (kDLInt, 64): np.dtype(np.int64),
    (kDLUInt, 8): np.dtype(np.uint8),
    (kDLUInt, 16): np.dtype(np.uint16),
    (kDLUInt, 32): np.dtype(np.uint32),
    (kDLUInt, 64): np.dtype(np.uint64),
    (kDLFloat, 16): np.dtype(np.float16),
    (kDLFloat, 32): np.dtype(np.float32),
    (kDLFloat, 64): np.dtype(np.float64),
    (kDLComplex, 64): np.dtype(np.complex64),
    (kDLComplex, 128): np.dtype(np.complex128),
}

# (code, bits) -> ml_dtypes attribute name; bits < 8 are one element per byte ("padded")
_ML_DTYPE_NAMES = {
    (kDLBfloat, 16): "bfloat16",
    (7, 8): "float8_e3m4",
    (8, 8): "float8_e4m3",
    (9, 8): "float8_e4m3b11fnuz",
    (10, 8): "float8_e4m3fn",
    (11, 8): "float8_e4m3fnuz",
    (12, 8): "float8_e5m2",
    (13, 8): "float8_e5m2fnuz",
    (14, 8): "float8_e8m0fnu",
    (15, 6): "float6_e2m3fn",
    (16, 6): "float6_e3m2fn",
    (17, 4): "float4_e2m1fn",
    (kDLInt, 2): "int2",
    (kDLInt, 4): "int4",
    (kDLUInt, 2): "uint2",
    (kDLUInt, 4): "uint4",
}


@functools.cache
def _ml_dtypes_tables():
    """Return ``(from_dl, to_dl)`` for the ml_dtypes types, both empty without ml_dtypes."""
    try:
        import ml_dtypes
    except ImportError:
        return {}, {}
    from_dl = {}
    for key, name in _ML_DTYPE_NAMES.items():
        scalar_type = getattr(ml_dtypes, name, None)
        if scalar_type is not None:
            from_dl[key] = np.dtype(scalar_type)
    return from_dl, {dtype: key for key, dtype in from_dl.items()}


_NUMPY_TO_DL = {dtype: (code, bits, 1, False) for (code, bits), dtype in _NUMPY_FROM_DL.items()}


def as_dtype(dtype, argname="dtype"):
    """Return ``dtype`` as a :class:`numpy.dtype`.

    Parameters
    ----------
    dtype : object
        Anything :func:`numpy.dtype` accepts, or the name of an ml_dtypes type.
        ``None`` is refused (NumPy would read it as float64).
    argname : str
        Argument name used in error messages.

    Raises
    ------
    TypeError
        For ``None``, values that are not dtypes, and object dtypes.

    Examples
    --------
    >>> as_dtype("<i4")
    dtype('int32')
    >>> as_dtype(object)
    Traceback (most recent call last):
    ...
    TypeError: dtype=dtype('O') holds Python objects; a memory view needs plain data
    """
    if type(dtype) is not np.dtype and not isinstance(dtype, np.dtype):
        if dtype is None:
            raise TypeError(f"{argname}=None is not a dtype")
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            if not isinstance(dtype, str) or "ml_dtypes" in sys.modules:
                raise TypeError(
                    f"{argname}={dtype!r} is not a dtype numpy.dtype() understands"
                ) from None
            _ml_dtypes_tables()  # importing ml_dtypes registers its names with NumPy
            try:
                dtype = np.dtype(dtype)
            except TypeError:
                raise TypeError(
                    f"{argname}={dtype!r} is not a dtype numpy.dtype() understands"
                ) from None
    if dtype.hasobject:
        raise TypeError(f"{argname}={dtype!r} holds Python objects; a memory view needs plain data")
    return dtype


def is_ml_dtype(dtype):
    """Whether ``dtype`` is one of the ml_dtypes types (bfloat16, float8, int4, ...).

    Their array-interface ``typestr`` is only ``|V<n>``; the dtype itself says what
    the bytes mean.

    Examples
    --------
    >>> import numpy as np
    >>> is_ml_dtype(np.dtype("float16"))
    False
    """
    return dtype in _ml_dtypes_tables()[1]


def is_numpy_dlpack_dtype(dtype):
    """Whether ``dtype`` is one of NumPy's own dtypes that DLPack carries (bool, ints, floats, complex).

    Examples
    --------
    >>> import numpy as np
    >>> is_numpy_dlpack_dtype(np.dtype("uint16")), is_numpy_dlpack_dtype(np.dtype("M8[s]"))
    (True, False)
    """
    return dtype in _NUMPY_TO_DL


def _describe(code, bits, lanes):
    name = DLPACK_CODE_NAMES.get(code, f"unknown code {code}")
    return f"DLPack dtype (code={code} [{name}], bits={bits}, lanes={lanes})"


def from_dlpack_dtype(code, bits, lanes, padded=False):
    """Return the NumPy dtype of a DLPack ``(code, bits, lanes)`` dtype.

    Raises
    ------
    BufferError
        For vector types (``lanes != 1``).
    NotImplementedError
        For ml_dtypes types when ml_dtypes is not installed.
    ValueError
        For packed sub-byte types (several elements per byte, no ``padded`` flag).
    TypeError
        For type codes NumPy cannot represent (e.g. opaque handles, 128-bit floats).

    Examples
    --------
    >>> from_dlpack_dtype(6, 8, 1)
    dtype('bool')
    >>> from_dlpack_dtype(2, 32, 4)
    Traceback (most recent call last):
    ...
    BufferError: DLPack dtype (code=2 [float], bits=32, lanes=4): vector types (lanes != 1) are not supported
    """
    if lanes != 1:
        raise BufferError(
            f"{_describe(code, bits, lanes)}: vector types (lanes != 1) are not supported"
        )
    key = (code, bits)
    dtype = _NUMPY_FROM_DL.get(key)
    if dtype is not None:
        return dtype
    if key in _ML_DTYPE_NAMES:
        if bits < 8 and not padded:
            raise ValueError(
                f"{_describe(code, bits, lanes)} is packed sub-byte data (several elements per "
                "byte); only padded sub-byte tensors are supported"
            )
        dtype = _ml_dtypes_tables()[0].get(key)
        if dtype is None:
            raise NotImplementedError(
                f"{_describe(code, bits, lanes)} requires `ml_dtypes`, an optional package "
                "(pip install 'layoutkit[dtypes]')"
            )
        return dtype
    raise TypeError(f"{_describe(code, bits, lanes)} has no NumPy equivalent")


def to_dlpack_dtype(dtype):
    """Return ``(code, bits, lanes, padded)`` describing a NumPy dtype in DLPack.

    ``padded`` is True for the one-byte-per-element sub-byte types (int4, float4, ...),
    which need the DLPack ``IS_SUBBYTE_TYPE_PADDED`` flag.

    Raises
    ------
    BufferError
        For dtypes DLPack cannot carry: structured, non-native byte order, strings,
        datetimes, ``longdouble``, ...

    Examples
    --------
    >>> import numpy as np
    >>> to_dlpack_dtype(np.dtype(bool))
    (6, 8, 1, False)
    >>> to_dlpack_dtype(np.dtype(">f4"))
    Traceback (most recent call last):
    ...
    BufferError: Non-native-endian dtype('>f4') cannot be exported: DLPack needs native byte order
    """
    described = _NUMPY_TO_DL.get(dtype)
    if described is not None:
        return described
    key = _ml_dtypes_tables()[1].get(dtype)
    if key is not None:
        return key[0], key[1], 1, key[1] < 8
    if dtype.fields is not None:
        raise BufferError(f"Structured dtypes cannot be exported through DLPack: {dtype!r}")
    if not dtype.isnative:
        raise BufferError(
            f"Non-native-endian {dtype!r} cannot be exported: DLPack needs native byte order"
        )
    raise BufferError(f"Unsupported dtype for DLPack export: {dtype!r} has no DLPack equivalent")
