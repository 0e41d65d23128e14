"""Every device code path of views, typed and lowered for CUDA with ``compile_ptx`` (no GPU).

numba-cuda compiles the implementations behind ``@overload`` as device functions for the
current device's compute capability; without a GPU a fixture makes that capability 9.0,
the one the kernels themselves are compiled for.
"""

import re

import numpy as np
import pytest
from numba import cuda, types
from numba.np import numpy_support

import layoutkit._driver
import layoutkit.cuda
from layoutkit import AxisError
from layoutkit._numba_view import StridedViewType, strided_view_type
from layoutkit.cuda import LaunchArgument, extension
from layoutkit.memoryview import StridedMemoryView

CC = (9, 0)


@pytest.fixture(autouse=True)
def compute_capability_without_gpu(monkeypatch):
    if cuda.is_available():
        return
    import numba.cuda.dispatcher

    class _Device:
        compute_capability = CC

    monkeypatch.setattr(numba.cuda.dispatcher, "get_current_device", lambda: _Device())


def view_type(dtype, ndim, layout="A", **flags):
    return strided_view_type(numpy_support.from_dtype(np.dtype(dtype)), ndim, layout, **flags)


def compile_kernel(function, argument_types):
    ptx, _ = cuda.compile_ptx(function, argument_types, cc=CC)
    return ptx


def entry_parameter_count(ptx):
    entry = ptx[ptx.index(".entry") :]
    return entry[: entry.index(")")].count(".param")


def scaled_copy(source, destination, factor):
    i, j = cuda.grid(2)
    if i < destination.shape[0] and j < destination.shape[1]:
        destination[i, j] = source[i, j] * factor


@pytest.mark.parametrize("layout", ["C", "F", "A"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.complex64])
def test_scaled_copy_compiles_for_every_layout_kind(dtype, layout):
    source = view_type(dtype, 2, layout, readonly=True)
    destination = view_type(dtype, 2, layout)
    ptx = compile_kernel(scaled_copy, (source, destination, types.float32))
    # a 2-d view is 7 parameters: data, 2 extents, 2 strides, offset, limit
    assert entry_parameter_count(ptx) == 7 + 7 + 1 == source.parameter_count * 2 + 1


def test_c_layout_folds_the_innermost_stride():
    def load_row(source, destination):
        j = cuda.threadIdx.x
        destination[0, j] = source[0, j]

    folded = compile_kernel(load_row, (view_type("f4", 2, "C"), view_type("f4", 2, "C")))
    general = compile_kernel(load_row, (view_type("f4", 2, "A"), view_type("f4", 2, "A")))
    # the general kernel multiplies j by a stride parameter; the folded one uses j as is
    assert len(re.findall(r"mul\.(lo|wide)\.[su]64", folded)) < len(
        re.findall(r"mul\.(lo|wide)\.[su]64", general)
    )


def every_view_feature(view, out, i):
    # loads with negative indices, slices, None and Ellipsis, attributes, derived views
    total = view[i, -1] + view[-1, 0]
    sliced = view[1:, ::-2]
    total += sliced[0, 0] + view[None, 0, ...][0, 1] + view[i][0] + view[...][0, 0]
    transposed = view.permuted((1, 0))
    total += transposed[0, i] + view.size + view.ndim + view.shape[1] + view.strides[0]
    layout = view.layout
    total += layout.slice_offset + layout.permuted((1, 0)).strides[0]
    total += view.with_layout(layout.permuted((1, 0)))[0, 0]
    if layout.is_contiguous_c:
        total += 1
    out[0] = total


@pytest.mark.parametrize("boundscheck", [False, True])
def test_every_view_feature_compiles(boundscheck):
    argument_types = (
        view_type("f8", 2, "A", readonly=True, boundscheck=boundscheck),
        view_type("f8", 1, "C", boundscheck=boundscheck),
        types.int64,
    )
    ptx = compile_kernel(every_view_feature, argument_types)
    assert entry_parameter_count(ptx) == 7 + 5 + 1


@pytest.mark.parametrize("ndim", [0, 1, 3, 8])
def test_parameters_per_view_are_two_per_axis_plus_three(ndim):
    namespace = {}
    index = "(" + "".join("0, " for _ in range(ndim)) + ")"
    exec(f"def store(view):\n    view[{index}] = view[{index}] + 1", namespace)
    ptx = compile_kernel(namespace["store"], (view_type("i4", ndim, "A"),))
    assert entry_parameter_count(ptx) == 2 * ndim + 3


@pytest.mark.parametrize("dtype", [np.bool_, np.uint64, np.complex128, np.float16])
def test_element_types(dtype):
    def flip(view):
        view[0] = view[1]

    compile_kernel(flip, (view_type(dtype, 1, "C"),))


def _half_views():
    from layoutkit._numba_view import numba_dtype

    yield numba_dtype(np.dtype(np.float16), for_cuda=True)
    try:
        import ml_dtypes
    except ImportError:
        return
    yield numba_dtype(np.dtype(ml_dtypes.bfloat16), for_cuda=True)


@pytest.mark.parametrize("element", list(_half_views()), ids=str)
def test_half_precision_views_have_shape_strides_and_layout_in_kernels(element):
    """Found by helper njitviews: ``view.shape`` of a float16 view failed to compile in a
    kernel (NotImplementedError: float16), its type read from the CPU's data model."""

    def facts(view, out):
        sub = view[1:, ::-1]
        out[0] = view.shape[0] + view.strides[1] + view.size + len(view) + sub.shape[1]
        out[1] = view.layout.slice_offset + view.permuted((1, 0)).shape[0]
        out[2] = view.with_layout(view.layout[::2]).strides[0]
        view[0, 0] = sub[0, 0]

    compile_kernel(facts, (strided_view_type(element, 2, "A"), view_type("i8", 1, "C")))


def test_read_only_structured_elements_are_refused_in_kernels():
    record = numpy_support.from_dtype(np.dtype([("a", np.int32), ("b", np.float64)]))

    def store_field(view):
        element = view[0]
        element.a = 1

    compile_kernel(store_field, (strided_view_type(record, 1, "C"),))
    with pytest.raises(Exception, match="elements of a read-only .* view cannot be read") as info:
        compile_kernel(store_field, (strided_view_type(record, 1, "C", readonly=True),))
    assert type(info.value).__name__ == "TypingError"


def test_store_into_read_only_view_fails_with_a_clear_message():
    def store(view):
        view[0] = 1.0

    with pytest.raises(Exception, match="the view is read-only") as info:
        compile_kernel(store, (view_type("f4", 1, "C", readonly=True),))
    assert type(info.value).__name__ == "TypingError"


def test_extension_passes_other_arguments_through():
    assert extension.prepare_args(types.int64, 5) == (types.int64, 5)


def test_extension_flattens_prepared_views():
    argument = LaunchArgument(view_type("f4", 2, "A"), (1024, 2, 3, 3, 1, 0, 6))
    parameter_type, values = extension.prepare_args(argument._numba_type_, argument)
    assert values == (1024, 2, 3, 3, 1, 0, 6)
    assert len(parameter_type) == 7 and all(isinstance(t, types.CPointer) for t in parameter_type)


def test_extension_refuses_host_only_views():
    view = StridedMemoryView.from_array_interface(np.zeros((2, 3), np.float32))
    numba_type = view_type("f4", 2, "C")
    with pytest.raises(ValueError, match="a host-only view .device_id=-1. cannot be passed"):
        extension.prepare_args(numba_type, view)


def test_jit_refuses_host_only_views_before_launching():
    kernel = layoutkit.cuda.jit(scaled_copy)
    source = StridedMemoryView.from_array_interface(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="argument 0: a host-only view"):
        kernel[1, (2, 3)](source, source, 1.0)


def test_view_type_is_registered_for_cuda_typing():
    from numba.cuda.typing.typeof import Purpose, typeof

    view = StridedMemoryView.from_array_interface(np.zeros((2, 3), np.float32)[:, ::2])
    assert typeof(view, Purpose.argument) == view_type("f4", 2, "A")
    assert isinstance(typeof(view, Purpose.argument), StridedViewType)


def test_prepare_rejects_unsupported_argument_types():
    from layoutkit.cuda._launcher import _parameter_format

    assert _parameter_format(view_type("f4", 3, "A")) == ("q" * 9, True)
    assert _parameter_format(types.float32) == ("f4x", False)
    with pytest.raises(TypeError, match="prepare.. supports views and integer, float and bool"):
        _parameter_format(types.complex64)


def test_prepared_launch_packs_one_slot_per_kernel_parameter(monkeypatch):
    import ctypes
    import struct
    import types as pytypes

    from layoutkit.cuda import PreparedLaunch

    calls = []

    fake_bindings = pytypes.SimpleNamespace(
        cuLaunchKernel=lambda *args: calls.append(args) or (0,),
        CUresult=pytypes.SimpleNamespace(CUDA_SUCCESS=0),
        CUfunction=lambda handle: ("function", handle),
        CUstream=lambda handle: ("stream", handle),
    )
    monkeypatch.setattr(layoutkit._driver, "_bindings", lambda: fake_bindings)
    monkeypatch.setattr(layoutkit._driver, "current_device_id", lambda: 0)
    cufunc = pytypes.SimpleNamespace(handle=77)
    compiled = pytypes.SimpleNamespace(
        _codelibrary=pytypes.SimpleNamespace(get_cufunc=lambda: cufunc)
    )
    argument_types = (view_type("f4", 2, "A"), types.float32, types.int64)
    launcher = PreparedLaunch(compiled, argument_types, (3, 2), 128, 0, 0)
    view = LaunchArgument(argument_types[0], (4096, 5, 7, -7, 2, 9, 40))
    launcher.launch_flat((view, 1.5, -3))

    (call,) = calls
    assert call[:9] == (("function", 77), 3, 2, 1, 128, 1, 1, 0, ("stream", 0))
    pointers = (ctypes.c_void_p * 9).from_address(call[9])
    slots = [ctypes.string_at(pointer, 8) for pointer in pointers]
    assert [struct.unpack("<q", slot)[0] for slot in slots[:7]] == [4096, 5, 7, -7, 2, 9, 40]
    assert struct.unpack("<f", slots[7][:4])[0] == 1.5
    assert struct.unpack("<q", slots[8])[0] == -3


def test_bounds_check_errors_are_reported_by_the_kernel():
    # indexing is lowered inside the kernel, so its AxisError (an IndexError, the class
    # Python's view raises) is in the kernel's own exception table (what numba-cuda reads
    # back after a debug launch)
    from numba.cuda.compiler import compile_cuda

    def read_past_end(view, out):
        out[0] = view[view.shape[0]]

    checked = view_type("f8", 1, "C", boundscheck=True)
    result = compile_cuda(
        read_past_end,
        types.void,
        (checked, checked),
        debug=True,
        nvvm_options={"opt": 0, "g": None},
        cc=CC,
    )
    exception_class, arguments, _ = result.call_helper.get_exception(1)
    assert exception_class is AxisError
    assert arguments == ("view index out of bounds on axis 0",)


class _DeviceViewLike:
    """The attributes of a device StridedMemoryView that launches read."""

    def __init__(self):
        from layoutkit.layout import StridedLayout

        self.ptr = 4096
        self.layout = StridedLayout.dense((2, 3), 4)
        self.dtype = np.dtype(np.float32)
        self.readonly = False
        self.is_device_accessible = True
        self.device_id = 0
        self._buffer = None


def test_view_records_are_made_once_and_closed_buffers_still_fail():
    import types as pytypes

    from layoutkit.cuda._records import view_record

    view = _DeviceViewLike()
    first = view_record(view, "argument 0", 0)
    assert first[1:] == (view_type("f4", 2, "C"), (4096, 2, 3, 3, 1, 0, 6))
    assert view_record(view, "argument 0", 0) is first
    view._buffer = pytypes.SimpleNamespace(is_closed=True)
    with pytest.raises(BufferError, match="argument 0: the view's buffer is closed"):
        view_record(view, "argument 0", 0)


def test_view_records_check_the_device_on_first_use():
    from layoutkit.cuda._records import view_record

    view = _DeviceViewLike()
    view.device_id = 1
    view.buffer = None
    with pytest.raises(ValueError, match="argument 2: the view lives on device 1"):
        view_record(view, "argument 2", lambda: 0)


def test_extension_accepts_bounds_checked_views(monkeypatch):
    from helpers.copy_cases import DeviceView

    from layoutkit._numba_view import BoundsCheckedView

    monkeypatch.setattr(layoutkit._driver, "ensure_context", lambda: 0)
    device_view = DeviceView(np.zeros((2, 3), np.float32), 0)
    view = BoundsCheckedView(device_view)
    numba_type = view._numba_type_
    assert numba_type == view_type("f4", 2, "C", boundscheck=True)
    _, values = extension.prepare_args(numba_type, view)
    assert values == (device_view.ptr, 2, 3, 3, 1, 0, 6)


def view_checks(view, out, layout, i, step):
    moved = view.with_layout(layout)
    turned = view.permuted((i, 0))
    out[0] = moved[0, 0] + turned[0, 0] + view[i, 0] + view[:, ::step][0, 0]


def test_view_checks_raise_from_the_kernel_itself():
    """with_layout, permuted, indices and slices raise in the kernel (reported in debug)."""
    from numba.cuda.compiler import compile_cuda

    from layoutkit._numba_checks import NOT_UNIQUE_WRITABLE, status_error
    from layoutkit._numba_layout import layout_type

    checked = view_type("f8", 2, "A", boundscheck=True)
    result = compile_cuda(
        view_checks, types.void,
        (checked, view_type("f8", 1, "C"), layout_type(2), types.int64, types.int64),
        debug=True, nvvm_options={"opt": 0, "g": None}, cc=CC,
    )  # fmt: skip
    raised = {(exc.__name__, args[0]) for exc, args, _ in result.call_helper.exceptions.values()}
    for expected in [
        ("ValueError", "with_layout: the layout's itemsize differs from the view's"),
        ("ValueError", "with_layout: the layout reaches before the view's buffer"),
        ("ValueError", "with_layout: the layout reaches past the end of the view's buffer"),
        ("ValueError", "with_layout: " + status_error(NOT_UNIQUE_WRITABLE, "").args[0][2:]),
        ("AxisError", "permuted: axis out of range"),
        ("ValueError", "permuted: repeated axis"),
        ("AxisError", "view index out of bounds on axis 0"),
        ("ValueError", "slice step cannot be zero"),
    ]:
        assert expected in raised, expected


def test_bfloat16_views_load_and_store_in_kernels():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from layoutkit._numba_view import numba_dtype

    element = numba_dtype(np.dtype(ml_dtypes.bfloat16), for_cuda=True)
    assert str(element) == "__nv_bfloat16"

    def flip(view):
        view[0] = view[1]

    compile_kernel(flip, (strided_view_type(element, 1, "C"),))


def test_float8_views_refuse_elements_in_kernels():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from numba.core.errors import TypingError

    from layoutkit._numba_view import numba_dtype

    element = numba_dtype(np.dtype(ml_dtypes.float8_e4m3fn), for_cuda=True)

    def shape_only(view, out):
        out[0] = view.shape[0] + view.layout.itemsize

    compile_kernel(shape_only, (strided_view_type(element, 1, "C"), view_type("i8", 1, "C")))

    def flip(view):
        view[0] = view[1]

    with pytest.raises(TypingError, match="elements of a float8_e4m3fn view cannot be read"):
        compile_kernel(flip, (strided_view_type(element, 1, "C"),))


def test_bounds_checked_views_are_typed_for_cuda():
    from numba.cuda.typing.typeof import Purpose, typeof

    from layoutkit import BoundsCheckedView

    view = StridedMemoryView.from_array_interface(np.zeros((2, 3), np.float32))
    assert typeof(BoundsCheckedView(view), Purpose.argument) == view_type(
        "f4", 2, "C", boundscheck=True
    )


def test_layout_arguments_are_flattened_into_parameters():
    from layoutkit._numba_layout import layout_type
    from layoutkit.layout import StridedLayout

    def volume(layout, out):
        out[0] = layout.volume + layout.slice_offset

    ptx = compile_kernel(volume, (layout_type(3), view_type("i8", 1, "C")))
    assert entry_parameter_count(ptx) == (2 * 3 + 2) + 5
    layout = StridedLayout.dense((2, 3, 4), 8)[1:, ::-1]
    parameter_type, values = extension.prepare_args(layout_type(3), layout)
    assert values == (1, 3, 4, 12, -4, 1, 8, 20)
    assert len(parameter_type) == 8


def test_a_store_through_a_derived_view_survives_dead_code_elimination():
    """``view.with_layout(layout)[0] = x`` in one statement: Numba's dead-code elimination
    removed such a store in ``@njit`` code (the temporary view was not known to share the
    argument's memory); numba-cuda, which has its own copy of that analysis and gets the
    same registration, keeps the store in the kernel."""
    from layoutkit._numba_layout import layout_type

    def store(view, layout, x):
        view.with_layout(layout)[0] = x

    ptx = compile_kernel(store, (view_type("f8", 1, "C"), layout_type(1), types.float64))
    assert re.search(r"\bst\.global\.f64\b|\bst\.f64\b", ptx), "the kernel stores nothing"


def test_import_records_get_numba_cudas_element_types():
    # a tensor read by a producer fast path (torch, CuPy) is typed as views are for
    # kernels: float16 is a number there, not the opaque element of @njit code
    from layoutkit.cuda._kernel import _record_argument
    from layoutkit.interop.record import ImportRecord
    from layoutkit.layout import StridedLayout

    managed = layoutkit._driver.Location(0, True, True, True)
    record = ImportRecord(
        4096, StridedLayout.dense((4,), 2), np.dtype(np.float16), managed, False, None, None, None
    )
    argument = _record_argument(record, "argument 0", lambda: 0, False)
    assert argument._numba_type_ == view_type(np.float16, 1, "C")

    def flip(view):
        view[0] = view[1]

    compile_kernel(flip, (argument._numba_type_,))
