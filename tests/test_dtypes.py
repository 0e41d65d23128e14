"""dtype normalisation and the NumPy <-> DLPack dtype tables (DECISIONS 15)."""

import numpy as np
import pytest

from layoutkit._dtypes import as_dtype, from_dlpack_dtype, is_ml_dtype, to_dlpack_dtype

NUMPY_DLPACK_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]  # fmt: skip


@pytest.mark.parametrize("spelling", [np.float32, "f4", "float32", np.dtype("<f4"), "=f4"])
def test_as_dtype_accepts_what_numpy_accepts(spelling):
    assert as_dtype(spelling) == np.dtype(np.float32)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "dtype=None is not a dtype"),
        ("not-a-dtype", "dtype='not-a-dtype' is not a dtype"),
        (3.5, "dtype=3.5 is not a dtype"),
        (object, "holds Python objects"),
        ([("a", "O")], "holds Python objects"),
    ],
)
def test_as_dtype_rejects(value, message):
    with pytest.raises(TypeError, match=message):
        as_dtype(value)


def test_as_dtype_error_names_the_argument():
    with pytest.raises(TypeError, match="^itemtype='bad' is not a dtype"):
        as_dtype("bad", argname="itemtype")


@pytest.mark.parametrize("name", NUMPY_DLPACK_DTYPES)
def test_numpy_dtypes_round_trip_through_dlpack(name):
    dtype = np.dtype(name)
    code, bits, lanes, padded = to_dlpack_dtype(dtype)
    assert (lanes, padded) == (1, False)
    assert bits == 8 * dtype.itemsize
    assert from_dlpack_dtype(code, bits, lanes) == dtype
    assert not is_ml_dtype(dtype)


@pytest.mark.parametrize("name", NUMPY_DLPACK_DTYPES)
def test_dlpack_codes_match_numpy_own_export(name):
    """NumPy's own DLPack export names the same (code, bits): checked through a real capsule."""
    from layoutkit.interop.dlpack import consume_capsule

    array = np.zeros(3, dtype=name)
    with consume_capsule(array.__dlpack__(max_version=(1, 0))) as tensor:
        code, bits, lanes = tensor.dtype_triple
    assert (code, bits, lanes) == to_dlpack_dtype(np.dtype(name))[:3]


ML_NAMES = [
    "bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
    "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "int2", "int4", "uint2", "uint4",
]  # fmt: skip


@pytest.mark.parametrize("name", ML_NAMES)
def test_ml_dtypes_round_trip_through_dlpack(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = np.dtype(getattr(ml_dtypes, name))
    assert as_dtype(name) == dtype
    code, bits, lanes, padded = to_dlpack_dtype(dtype)
    assert padded == (bits < 8)
    assert from_dlpack_dtype(code, bits, lanes, padded) == dtype
    assert dtype.itemsize == (1 if padded else bits // 8)
    assert is_ml_dtype(dtype)


def test_bfloat16_dlpack_code():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert to_dlpack_dtype(np.dtype(ml_dtypes.bfloat16)) == (4, 16, 1, False)
    assert to_dlpack_dtype(np.dtype(ml_dtypes.float8_e4m3fn)) == (10, 8, 1, False)


def test_packed_sub_byte_is_refused():
    with pytest.raises(ValueError, match="packed sub-byte"):
        from_dlpack_dtype(17, 4, 1, padded=False)


@pytest.mark.parametrize(
    ("triple", "error", "message"),
    [
        ((2, 32, 2), BufferError, "lanes != 1"),
        ((3, 64, 1), TypeError, "opaque handle.*no NumPy equivalent"),
        ((2, 128, 1), TypeError, "no NumPy equivalent"),
        ((99, 8, 1), TypeError, "unknown code 99"),
        ((0, 12, 1), TypeError, "no NumPy equivalent"),
    ],
)
def test_from_dlpack_dtype_rejects(triple, error, message):
    with pytest.raises(error, match=message):
        from_dlpack_dtype(*triple)


@pytest.mark.parametrize(
    ("dtype", "message"),
    [
        (np.dtype([("a", "f4"), ("b", "i4")]), "Structured dtypes cannot be exported through DLPack"),
        (np.dtype(">i8"), "Non-native-endian"),
        (np.dtype("U3"), r"Unsupported dtype for DLPack export: dtype\(.<U3.\) has no DLPack equivalent"),
        (np.dtype("M8[s]"), "no DLPack equivalent"),
        (np.dtype(np.longdouble), "no DLPack equivalent"),
    ],
)
def test_to_dlpack_dtype_rejects(dtype, message):
    with pytest.raises(BufferError, match=message):
        to_dlpack_dtype(dtype)


def test_missing_ml_dtypes_gives_not_implemented(monkeypatch):
    import layoutkit._dtypes as dtypes

    monkeypatch.setattr(dtypes, "_ml_dtypes_tables", lambda: ({}, {}))
    with pytest.raises(NotImplementedError, match="requires `ml_dtypes`"):
        dtypes.from_dlpack_dtype(4, 16, 1)
