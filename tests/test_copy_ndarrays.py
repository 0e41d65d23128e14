"""Host copies between NumPy arrays through ``np.copyto`` (``copy_ndarrays``): every byte
and every error the same as the general path's.

The oracle is the same call with the fast path off (``copy_ndarrays`` declining: the
planned copy through layoutkit's kernel), over padded byte buffers: both buffers compared byte
for byte, the source's untouched, overlapping and broadcast sources included.
"""

import numpy as np
import pytest
from helpers.copy_cases import (
    ALIAS_ELEMENTS,
    DrawRandom,
    aliased_case,
    copy_cases,
    numpy_items,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

from layoutkit import DtypeMismatchError, HostMemoryResource, StridedLayout, StridedMemoryView
from layoutkit.copy import _api, copy, cpu
from layoutkit.copy._api import copy_ndarrays

#: NumPy dtypes by itemsize, all of the kinds the fast path takes (byte-swapped ones too).
DTYPES = {
    1: ["u1", "i1", "b1"],
    2: ["<i2", ">u2", "f2"],
    4: ["<f4", ">f4", "i4"],
    8: ["f8", ">i8", "c8", "M8[s]", "m8[ns]"],
    16: ["c16", ">c16"],
}


def _general(monkeypatch):
    monkeypatch.setattr(_api, "copy_ndarrays", lambda dst, src: False)  # the planned path


def _twin(array, buffer, other):
    """``array``'s twin over ``other``, a copy of its byte buffer ``buffer``."""
    offset = array.__array_interface__["data"][0] - buffer.ctypes.data
    if array.size == 0:
        return np.empty(array.shape, array.dtype)
    return np.ndarray(array.shape, array.dtype, other, offset, array.strides)


def _outcome(call, *args):
    try:
        call(*args)
    except Exception as exc:  # the error is the outcome compared
        return type(exc), str(exc)
    return None


@settings(max_examples=300, deadline=None)
@given(copy_cases(itemsizes=tuple(DTYPES)), st.data())
def test_copies_between_arrays_match_the_general_path(case, data):
    dst_buffer, dst, src_buffer, src = case
    dtype = np.dtype(data.draw(st.sampled_from(DTYPES[dst.itemsize])))
    dst, src = dst.view(dtype), src.view(dtype)  # random bytes: NaN payloads, bools of 2..255
    twin_dst_buffer = dst_buffer.copy()
    twin_dst = _twin(dst, dst_buffer, twin_dst_buffer)
    source_before = src_buffer.copy()
    with pytest.MonkeyPatch.context() as patch:
        _general(patch)
        copy(twin_dst, src)
    assert copy_ndarrays(dst, src)  # separate buffers: NumPy's copy, done
    np.testing.assert_array_equal(dst_buffer, twin_dst_buffer)
    np.testing.assert_array_equal(src_buffer, source_before)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_arrays_of_one_buffer_match_the_general_path(data):
    """Overlapping, interleaved, transposed-onto-itself, broadcast and aliasing views of one
    buffer: the same bytes, or the same error (a non-unique or read-only destination)."""
    case = aliased_case(DrawRandom(data), max_ndim=8)
    if case is None:
        return
    itemsize, dst_side, src_side = case
    if itemsize not in DTYPES:
        return
    dtype = np.dtype(data.draw(st.sampled_from(DTYPES[itemsize])))
    frozen = data.draw(st.integers(0, 7)) == 0  # a read-only destination, now and then
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    memory = rng.integers(0, 256, ALIAS_ELEMENTS * itemsize, dtype=np.uint8)
    twin = memory.copy()
    outcomes = []
    for buffer, fast in ((memory, True), (twin, False)):
        dst = numpy_items(buffer, dst_side, itemsize).view(dtype)
        src = numpy_items(buffer, src_side, itemsize).view(dtype)
        if frozen:
            dst.flags.writeable = False
        with pytest.MonkeyPatch.context() as patch:
            if not fast:
                _general(patch)
            outcomes.append(_outcome(copy, dst, src))
    assert outcomes[0] == outcomes[1]
    np.testing.assert_array_equal(memory, twin)


def test_overlapping_arrays_take_the_general_path():
    """``np.copyto`` copies 1-d arrays with different strides of one sign element by
    element (``a[::2] <- a[:6]`` reads elements it already wrote); copy reads the source
    first, as for any other overlap."""
    a = np.arange(12, dtype=np.int32)
    assert not copy_ndarrays(a[::2], a[:6])
    copy(a[::2], a[:6])
    assert a[::2].tolist() == [0, 1, 2, 3, 4, 5]
    b = np.arange(12, dtype=np.int32)
    copy(b[1:], b[:-1])
    assert b.tolist() == [0, *range(11)]


class _Subclass(np.ndarray):
    pass


def test_large_transposes_and_other_arrays_take_the_general_path():
    small = np.zeros((8, 8), np.float32)
    assert copy_ndarrays(small, small.T.copy())
    side = 512  # 1 MiB of float32: from NUMPY_COPY_BYTES on, the plan decides
    assert side * side * 4 >= _api.NUMPY_COPY_BYTES
    source = np.arange(side * 2 * side, dtype=np.float32).reshape(side, 2 * side)
    large = np.zeros((side, side), np.float32)
    threads = cpu.HOST_THREADS > 1 and large.nbytes >= cpu.PARALLEL_BYTES
    assert copy_ndarrays(large, source[:, ::2]) is not threads  # NumPy's rows are as fast
    copy(large, source[:, ::2])
    np.testing.assert_array_equal(large, source[:, ::2])
    assert not copy_ndarrays(large, source[:, :side].T)  # the kernel's transpose blocks
    copy(large, source[:, :side].T)
    np.testing.assert_array_equal(large, source[:, :side].T)
    assert not copy_ndarrays(np.zeros(4, "V4"), np.ones(4, "V4"))  # bytes NumPy may interpret
    assert not copy_ndarrays(np.zeros(2, "i1,f4"), np.zeros(2, "i1,f4"))
    assert not copy_ndarrays(small.view(_Subclass), small)  # a subclass: its code may run
    assert not copy_ndarrays(small, StridedMemoryView.from_any_interface(small))


def test_mixed_and_structured_copies_still_copy():
    src = np.arange(64, dtype=np.float32).reshape(8, 8)
    dst = np.zeros((8, 8), np.float32)
    copy(dst, StridedMemoryView.from_any_interface(src.T))
    np.testing.assert_array_equal(dst, src.T)
    large = np.arange(_api.NUMPY_COPY_BYTES // 4 + 1, dtype=np.float32)
    out = np.zeros_like(large)
    copy(out, large)
    np.testing.assert_array_equal(out, large)
    record = np.zeros(3, [("a", "u1"), ("b", "<f8")])
    record["b"] = [1.5, 2.5, 3.5]
    target = np.zeros(3, record.dtype)
    copy(target, record)
    assert target.tobytes() == record.tobytes()


_BASE = np.zeros(4, "f4")

#: Bad NumPy arguments: (dst, src, error class, message).
BAD = {
    "dtypes differ": (np.zeros(3, "f4"), np.zeros(3, "i4"), DtypeMismatchError,
                      "dtypes differ: dst dtype float32 and src dtype int32"),
    "itemsizes differ": (np.zeros(3, "f4"), np.zeros(3, "f8"), DtypeMismatchError,
                         "dtypes differ: dst dtype float32 and src dtype float64"),
    "byte orders differ": (np.zeros(3, "<f4"), np.zeros(3, ">f4"), DtypeMismatchError,
                           "dtypes differ"),
    "shapes do not broadcast": (np.zeros(3, "f4"), np.zeros(4, "f4"), ValueError,
                                r"src shape \(4,\) and dst shape \(3,\) cannot be broadcast"),
    "extra source axes": (np.zeros(3, "f4"), np.zeros((2, 3), "f4"), ValueError,
                          "cannot be broadcast together"),
    "read-only dst": (np.frombuffer(bytes(12), "f4"), np.ones(3, "f4"), ValueError,
                      "dst is read-only"),
    "non-unique dst": (as_strided(np.zeros(1, "f4"), (3,), (0,)), np.ones(3, "f4"),
                       ValueError, "non-unique"),
    "strides no multiple of the itemsize": (np.zeros(2, "f4"), as_strided(_BASE, (2,), (6,)),
                                            ValueError, "not a multiple of itemsize"),
    "byte offsets beyond int64": (as_strided(_BASE, (3,), (2**62,)), np.ones(3, "f4"),
                                  OverflowError, "do not fit in int64"),
    "below the address space": (as_strided(_BASE, (2,), (-(2**62),)), np.ones(2, "f4"),
                                BufferError, "dst: .*beyond the 64-bit address space"),
}  # fmt: skip


@pytest.mark.parametrize("name", BAD)
def test_bad_arrays_raise_the_general_paths_error_and_write_nothing(name, monkeypatch):
    dst, src, error, message = BAD[name]
    before = _BASE.copy()
    with pytest.raises(error, match=message) as fast:
        copy(dst, src)
    _general(monkeypatch)
    with pytest.raises(error) as general:
        copy(dst, src)
    assert (fast.type, str(fast.value)) == (general.type, str(general.value))
    np.testing.assert_array_equal(_BASE, before)


class _Described:  # a CUDA array interface of a null pointer with elements: no memory
    __cuda_array_interface__ = {"version": 3, "shape": (4,), "typestr": "<f4",
                                "data": (0, False)}  # fmt: skip


def test_views_of_closed_or_missing_memory_are_refused_next_to_arrays():
    buffer = HostMemoryResource().allocate(16)
    closed = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((4,), 4), np.float32)
    buffer.close()
    missing = StridedMemoryView.from_cuda_array_interface(_Described(), -1)
    array = np.ones(4, np.float32)
    for view, message in ((closed, "buffer is closed"), (missing, "null data pointer")):
        with pytest.raises(BufferError, match=message):
            copy(view, array)
        with pytest.raises(BufferError, match=message):
            copy(array, view)
    assert array.tolist() == [1.0] * 4
