"""Views whose pointer is not a multiple of their dtype's alignment, in compiled code.

NumPy is the oracle twice: ``flags.aligned`` decides which views are unaligned, and the
elements an ``@njit`` function reads and writes through an unaligned view are NumPy's.
The kernels' loads are checked in their PTX (``compile_ptx``, no GPU): an unaligned view
is read and written a byte at a time, an aligned one with the element's own width.
"""

import re

import numpy as np
import pytest
from numba import cuda, njit, typeof, types
from numba.core.errors import TypingError
from numba.core.typeconv import Conversion
from numba.np import numpy_support

import layoutkit._driver
import layoutkit.cuda
from layoutkit import BoundsCheckedView
from layoutkit._numba_view import is_aligned, strided_view_type, view_record
from layoutkit.cuda._launcher import _same_view_type
from layoutkit.memory import Buffer
from layoutkit.memoryview import StridedMemoryView

RECORD = np.dtype([("a", "u1"), ("b", "f8"), ("c", "i4")], align=True)
DTYPES = [np.float32, np.float64, np.complex64, np.complex128, np.int16, RECORD]
OFFSETS = range(16)  # bytes past a 64-byte aligned start: every residue of every alignment


def at_offset(dtype, count, offset):
    """A 1-d NumPy array of ``count`` elements ``offset`` bytes past a 64-byte aligned
    address, filled with distinct values (of :data:`RECORD`, in every field)."""
    dtype = np.dtype(dtype)
    raw = np.zeros(count * dtype.itemsize + 64 + 16, np.uint8)
    start = -raw.ctypes.data % 64 + offset
    array = raw[start : start + count * dtype.itemsize].view(dtype)
    if dtype == RECORD:
        array["a"] = np.arange(count)
        array["b"] = np.arange(count) * 1.5 - 3
        array["c"] = np.arange(count) * -7
    elif not dtype.names:  # other structured dtypes stay zero
        array[...] = (np.arange(count) * 3 - 5).astype(dtype)
        if dtype.kind == "c":
            array.imag = np.arange(count) + 0.25
    return array


def view_of(array):
    return StridedMemoryView.from_any_interface(array)


def view_type(dtype, ndim, layout="A", **flags):
    return strided_view_type(numpy_support.from_dtype(np.dtype(dtype)), ndim, layout, **flags)


# ---------------------------------------------------------------------------- the type


def test_unaligned_is_part_of_the_type():
    aligned = view_type("f4", 1, "C")
    unaligned = view_type("f4", 1, "C", aligned=False)
    assert str(aligned) == "StridedView(float32, 1d, C)"
    assert str(unaligned) == "StridedView(float32, 1d, C, unaligned)"
    assert str(view_type("f4", 1, "C", readonly=True, aligned=False)) == (
        "StridedView(float32, 1d, C, readonly, unaligned)"
    )
    assert aligned != unaligned and aligned.key != unaligned.key
    assert aligned.mangling_args != unaligned.mangling_args
    assert unaligned is view_type("f4", 1, "C", aligned=False)  # cached
    assert aligned.copy(aligned=False) is unaligned
    assert unaligned.copy(ndim=2, layout="A") is view_type("f4", 2, "A", aligned=False)
    assert unaligned.copy(readonly=True).aligned is False
    assert (aligned.element_alignment, unaligned.element_alignment) == (None, 1)


def test_an_unaligned_record_view_has_unaligned_fields():
    inner = np.dtype([("x", "f8"), ("y", "u1")], align=True)
    outer = np.dtype([("flag", "u1"), ("inner", inner)], align=True)
    unaligned = view_type(outer, 1, "C", aligned=False)
    assert view_type(outer, 1, "C").dtype.aligned is True
    assert unaligned.dtype.aligned is False
    assert unaligned.dtype.typeof("inner").aligned is False
    assert unaligned.dtype.size == outer.itemsize
    assert unaligned.dtype.offset("inner") == outer.fields["inner"][1]


@pytest.mark.parametrize("dtype", [*DTYPES, np.bool_, np.uint8, np.float16])
@pytest.mark.parametrize("offset", OFFSETS)
def test_alignment_is_numpys_flag(dtype, offset):
    array = at_offset(dtype, 4, offset)
    assert is_aligned(array.ctypes.data, array.dtype) is array.flags.aligned
    view = view_of(array)
    assert typeof(view).aligned is array.flags.aligned
    assert view_record(view)[0] is typeof(view)  # the record @njit unboxes with
    assert BoundsCheckedView(view)._numba_type_.aligned is array.flags.aligned


def test_unaligned_views_from_every_importer():
    raw = np.zeros(64, np.uint8)
    start = -raw.ctypes.data % 16 + 1
    array = raw[start : start + 32].view(np.float64)
    buffer = Buffer.from_handle(array.ctypes.data, 32, owner=array)
    for view in (
        StridedMemoryView.from_array_interface(array),
        StridedMemoryView.from_dlpack(array),
        StridedMemoryView.from_any_interface(array),
        StridedMemoryView.from_buffer(buffer, (4,), dtype=np.float64),
    ):
        assert view.ptr % 8 == 1
        assert typeof(view) == view_type("f8", 1, "C", aligned=False)


# ------------------------------------------------------------------- @njit against NumPy


@njit
def read_all(view, out):
    for i in range(view.shape[0]):
        out[i] = view[i]


@njit
def write_all(view, values):
    for i in range(view.shape[0]):
        view[i] = values[i]


@njit
def read_modify_write(view):
    for i in range(view.shape[0]):
        view[i] = view[i] * 3 - i


@njit
def record_fields(view, out):
    for i in range(view.shape[0]):
        element = view[i]
        out[i] = element.b + element.c
        element.b = element.b * 2 + element.a
        element.c = element.c - 1


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d is not RECORD])
@pytest.mark.parametrize("offset", OFFSETS)
def test_reads_writes_and_updates_match_numpy(dtype, offset):
    array = at_offset(dtype, 9, offset)
    expected = array.copy()
    out = np.zeros(9, dtype)
    read_all(view_of(array), out)
    np.testing.assert_array_equal(out, expected)

    values = (np.arange(9) * -2 + 1).astype(dtype)
    write_all(view_of(array), values)
    np.testing.assert_array_equal(array, values)

    expected = array * 3 - np.arange(9)
    read_modify_write(view_of(array))
    np.testing.assert_array_equal(array, expected)


@pytest.mark.parametrize("offset", OFFSETS)
def test_record_fields_match_numpy(offset):
    array = at_offset(RECORD, 7, offset)
    expected = array.copy()
    out = np.zeros(7)
    record_fields(view_of(array), out)
    np.testing.assert_array_equal(out, expected["b"] + expected["c"])
    np.testing.assert_array_equal(array["b"], expected["b"] * 2 + expected["a"])
    np.testing.assert_array_equal(array["c"], expected["c"] - 1)
    np.testing.assert_array_equal(array["a"], expected["a"])


def _float_access_alignments(function):
    """The alignments of every double load and store in the function's LLVM IR."""
    llvm = function.inspect_llvm(function.signatures[0])
    return set(re.findall(r"(?:load|store) (?:<\d+ x )?double[^\n]*, align (\d+)", llvm))


def test_unaligned_loads_and_stores_are_byte_aligned_in_the_ir():
    @njit
    def update(view):
        view[0] = view[1] + 1.0

    @njit
    def update_again(view):
        view[0] = view[1] + 1.0

    update(view_of(at_offset(np.float64, 2, 3)))
    update_again(view_of(at_offset(np.float64, 2, 0)))
    assert _float_access_alignments(update) == {"1"}
    assert _float_access_alignments(update_again) == {"8"}


@pytest.mark.parametrize("offset", [0, 1, 3, 5])
def test_sub_view_assignment_through_unaligned_views_matches_numpy(offset):
    @njit
    def assign(target, source):
        target[1:] = source[:-1]  # the same memory: through a temporary
        target[0] = -2.5

    @njit
    def fill(target):
        target[::2] = 7.0

    expected = at_offset(np.float64, 9, offset).copy()
    expected[1:] = expected[:-1].copy()
    expected[0] = -2.5
    array = at_offset(np.float64, 9, offset)
    assign(view_of(array), view_of(array))
    np.testing.assert_array_equal(array, expected)
    expected[::2] = 7.0
    fill(view_of(array))
    np.testing.assert_array_equal(array, expected)
    alignment = {"8"} if array.flags.aligned else {"1"}
    assert _float_access_alignments(fill) == alignment
    # the overlap's temporary is a fresh (aligned) array: only its own accesses are wide
    assert alignment <= _float_access_alignments(assign) <= {"1", "8"}


@pytest.mark.parametrize("offset", [1, 3, 8])
def test_records_are_assigned_between_aligned_and_unaligned_views_of_one_dtype(offset):
    """The same structured dtype, one side aligned and the other not (or an aligned and a
    packed record of one layout): copied as NumPy copies it, not refused as different
    dtypes (the unaligned view's element type is an unaligned Numba record)."""

    @njit
    def assign(target, source):
        target[1:] = source[:-1]

    packed = np.dtype({"names": ["a", "b", "c"], "formats": ["u1", "f8", "i4"],
                       "offsets": [0, 8, 16], "itemsize": 24})  # fmt: skip
    assert packed == RECORD and not packed.isalignedstruct
    for target, source in [
        (np.zeros(6, RECORD), at_offset(RECORD, 6, offset)),  # aligned <- unaligned
        (at_offset(RECORD, 6, offset), at_offset(RECORD, 6, 0)[::-1]),  # unaligned <- aligned
        (at_offset(RECORD, 6, offset), at_offset(RECORD, 6, 0).astype(packed)),  # packed
        (at_offset(RECORD, 6, offset), None),  # its own memory: through a temporary
    ]:
        source = target if source is None else source
        expected = target.copy()
        expected[1:] = source[:-1].copy()
        assign(view_of(target), view_of(source))
        for field in RECORD.names:
            np.testing.assert_array_equal(target[field], expected[field])


# ------------------------------------------------------------------- derived views


@njit
def derived(view):
    return (
        view[1:],
        view[...],
        view[0],
        view.permuted((1, 0)),
        view.with_layout(view.layout.reshaped((4, 3))),
        view.view(dtype=np.int32),
    )


@njit
def derived_elements(view, out):
    out[0] = view[1:][0, 2]
    out[1] = view[...][2, 3]
    out[2] = view[0][1]
    out[3] = view.permuted((1, 0))[3, 1]
    out[4] = view.with_layout(view.layout.reshaped((4, 3)))[3, 0]
    out[5] = view[::-1, ::2][0, 1]


@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_derived_views_keep_the_flag_and_the_elements(offset):
    array = at_offset(np.float32, 12, offset).reshape(3, 4)
    view = view_of(array)
    derived(view)
    result = derived.nopython_signatures[-1].return_type
    assert {t.aligned for t in result.types} == {array.flags.aligned}
    out = np.zeros(6, np.float32)
    derived_elements(view, out)
    flat = array.reshape(4, 3)
    expected = [array[1:][0, 2], array[2, 3], array[0][1], array.T[3, 1], flat[3, 0],
                array[::-1, ::2][0, 1]]  # fmt: skip
    np.testing.assert_array_equal(out, expected)


@njit
def as_float32(view):
    return view.view(view.layout.repacked(4), np.float32)


@njit
def as_bytes(view):
    return view.view(view.layout.repacked(1), np.uint8)


@njit
def first_float32(view):
    return as_float32(view)[0]


def test_a_reinterpretation_is_aligned_only_where_the_view_vouches_for_it():
    aligned_bytes = view_of(at_offset(np.uint8, 8, 0))
    assert typeof(aligned_bytes).aligned
    # a byte view's pointer need not be 4-aligned: its float32 view is typed unaligned
    as_float32(aligned_bytes)
    assert as_float32.nopython_signatures[-1].return_type.aligned is False
    as_float32(view_of(at_offset(np.int32, 2, 0)))
    assert as_float32.nopython_signatures[-1].return_type.aligned is True
    as_float32(view_of(at_offset(np.int32, 2, 2)))
    assert as_float32.nopython_signatures[-1].return_type.aligned is False
    as_bytes(view_of(at_offset(np.float64, 2, 0)))
    assert as_bytes.nopython_signatures[-1].return_type.aligned is True
    for offset in (0, 1, 3):
        raw = at_offset(np.uint8, 8, offset)
        assert first_float32(view_of(raw)) == raw[:4].view(np.float32)[0]


@njit
def pick(first, second, take_first):
    chosen = first if take_first else second  # two branches, one variable
    return chosen


@njit
def pick_element(first, second, take_first):
    chosen = first if take_first else second
    return chosen[1]


def test_an_aligned_and_an_unaligned_view_unify_as_unaligned():
    aligned = at_offset(np.float64, 6, 0)
    unaligned = at_offset(np.float64, 6, 5)[::2]  # layout kind "A"
    first, second = view_of(aligned), view_of(unaligned)
    for take_first in (True, False):
        assert pick_element(first, second, take_first) == (aligned if take_first else unaligned)[1]
        chosen = pick(first, second, take_first)
        assert chosen.ptr == (first if take_first else second).ptr
    assert pick.nopython_signatures[-1].return_type == view_type("f8", 1, "A", aligned=False)


def test_only_conversions_to_a_type_that_assumes_less_are_safe():
    c_aligned = view_type("f8", 1, "C")
    a_unaligned = view_type("f8", 1, "A", aligned=False)
    assert c_aligned.can_convert_to(None, a_unaligned) == Conversion.safe
    assert a_unaligned.can_convert_to(None, c_aligned) is None
    assert c_aligned.can_convert_to(None, view_type("f4", 1, "A", aligned=False)) is None
    assert c_aligned.can_convert_to(None, view_type("f8", 1, "C", readonly=True)) is None
    unaligned_f = view_type("f8", 1, "F", aligned=False)
    assert c_aligned.unify(None, unaligned_f) == a_unaligned
    record = view_type(RECORD, 1, "C")
    assert record.unify(None, record.copy(aligned=False)) is record.copy(aligned=False)


# ------------------------------------------------------------------- CUDA


@pytest.fixture
def compute_capability_without_gpu(monkeypatch):
    if cuda.is_available():
        return
    import numba.cuda.dispatcher

    class _Device:
        compute_capability = (9, 0)

    monkeypatch.setattr(numba.cuda.dispatcher, "get_current_device", lambda: _Device())


def doubled(source, destination):
    i = cuda.grid(1)
    if i < destination.shape[0]:
        destination[i] = source[i] * 2


def chosen_copy(aligned, unaligned, take_aligned):
    i = cuda.grid(1)
    view = aligned if take_aligned else unaligned
    unaligned[i] = view[i]


def _accesses(ptx):
    """The (instruction, type) of every load and store of global or generic memory."""
    return set(re.findall(r"\b(ld|st)(?:\.global)?\.(\w+)\s", ptx))


@pytest.mark.usefixtures("compute_capability_without_gpu")
@pytest.mark.parametrize(
    ("dtype", "wide"), [(np.float32, "f32"), (np.float64, "f64"), (np.complex128, "f64")]
)
def test_kernels_load_unaligned_elements_byte_by_byte(dtype, wide):
    aligned = view_type(dtype, 1, "C")
    unaligned = view_type(dtype, 1, "C", aligned=False)
    narrow, _ = cuda.compile_ptx(doubled, (unaligned, unaligned), cc=(9, 0))
    full, _ = cuda.compile_ptx(doubled, (aligned, aligned), cc=(9, 0))
    assert _accesses(narrow) == {("ld", "u8"), ("st", "u8")}
    assert _accesses(full) == {("ld", wide), ("st", wide)}
    mixed, _ = cuda.compile_ptx(chosen_copy, (aligned, unaligned, types.boolean), cc=(9, 0))
    assert _accesses(mixed) == {("ld", "u8"), ("st", "u8")}


def test_kernel_arguments_are_typed_by_their_pointer(monkeypatch):
    from helpers.copy_cases import DeviceView

    monkeypatch.setattr(layoutkit._driver, "ensure_context", lambda: 0)
    kernel = layoutkit.cuda.jit(doubled)
    aligned = DeviceView(at_offset(np.float64, 4, 0), 0)
    unaligned = DeviceView(at_offset(np.float64, 4, 4), 0)
    first, second = kernel.launch_arguments((aligned, unaligned))
    assert first._numba_type_ == view_type("f8", 1, "C")
    assert second._numba_type_ == view_type("f8", 1, "C", aligned=False)
    checked = layoutkit.cuda.jit(doubled, boundscheck=True).launch_arguments((unaligned,))[0]
    assert checked._numba_type_ == view_type("f8", 1, "C", boundscheck=True, aligned=False)


def test_import_records_of_one_layout_are_typed_by_their_pointer():
    from layoutkit.cuda._kernel import _record_argument
    from layoutkit.interop.record import ImportRecord
    from layoutkit.layout import StridedLayout

    managed = layoutkit._driver.Location(0, True, True, True)
    layout = StridedLayout.dense((4,), 8)
    types_seen = []
    for ptr in (4096, 4097, 4096, 4100):
        record = ImportRecord(ptr, layout, np.dtype(np.float64), managed, False, None, None, None)
        argument = _record_argument(record, "argument 0", lambda: 0, False)
        types_seen.append(argument._numba_type_)
        assert argument.values[0] == ptr
    aligned, unaligned = view_type("f8", 1, "C"), view_type("f8", 1, "C", aligned=False)
    assert types_seen == [aligned, unaligned, aligned, unaligned]


def test_import_records_of_equal_struct_dtypes_get_their_own_element_types():
    """An aligned-struct dtype and its packed twin compare (and hash) equal in NumPy:
    kernel arguments of one layout and pointer get the element type of their own."""
    from layoutkit.cuda._kernel import _record_argument
    from layoutkit.interop.record import ImportRecord
    from layoutkit.layout import StridedLayout

    fields = {"names": ["a", "b"], "formats": ["f8", "i8"]}
    managed = layoutkit._driver.Location(0, True, True, True)
    layout = StridedLayout.dense((4,), 16)
    for dtype in (np.dtype(fields), np.dtype(fields, align=True), np.dtype(fields)):
        record = ImportRecord(4096, layout, dtype, managed, False, None, None, None)
        element = _record_argument(record, "argument 0", lambda: 0, False)._numba_type_.dtype
        assert element == numpy_support.from_dtype(dtype), dtype


def test_a_kernel_prepared_for_aligned_views_refuses_unaligned_ones():
    aligned = view_type("f4", 2, "C")
    unaligned = aligned.copy(aligned=False)
    assert _same_view_type(aligned, aligned)
    assert _same_view_type(aligned.copy(boundscheck=True), aligned)
    assert not _same_view_type(unaligned, aligned)
    assert _same_view_type(aligned, unaligned)
    assert _same_view_type(unaligned, unaligned.copy(boundscheck=True))



def derived_in_a_kernel(view, out):
    i = cuda.grid(1)
    out[i] = view[1:, ::-1][0, i] + view.permuted((1, 0))[i, 0] + view[0][i]
    bits = view.view(dtype=np.int64)
    bits[0, i] = bits[1, i]


@pytest.mark.usefixtures("compute_capability_without_gpu")
def test_views_derived_in_a_kernel_stay_unaligned():
    unaligned = view_type("f8", 2, "C", aligned=False)
    ptx, _ = cuda.compile_ptx(derived_in_a_kernel, (unaligned, view_type("f8", 1, "C")), cc=(9, 0))
    # the aligned output is stored whole; every access of the unaligned view is a byte
    assert _accesses(ptx) == {("ld", "u8"), ("st", "u8"), ("st", "f64")}


def test_a_record_with_sub_arrays_refuses_unaligned_element_access():
    dtype = np.dtype([("a", "u1"), ("m", "(2,)f8")], align=True)

    @njit
    def first_m(view):
        return view[0].m[1]

    aligned = at_offset(dtype, 2, 0)
    aligned["m"] = [[1.0, 2.0], [3.0, 4.0]]
    assert first_m(view_of(aligned)) == 2.0
    with pytest.raises(TypingError, match="elements of an unaligned .* view cannot be accessed"):
        first_m(view_of(at_offset(dtype, 2, 4)))
