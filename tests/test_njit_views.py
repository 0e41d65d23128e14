"""Views of host memory inside ``@njit``: loads, stores, attributes, derived views, errors.

NumPy is the oracle: every view is made from a NumPy view of an ``arange`` base, so the
expected elements are NumPy's own.
"""

import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit
from numba.core.errors import TypingError
from numba.np import numpy_support
from numba.typed import List

from layoutkit import AxisError, BoundsCheckedView
from layoutkit._numba_view import (
    StridedViewType,
    check_view_accessible,
    numba_dtype,
    strided_view_type,
    view_numba_type,
)
from layoutkit.layout import StridedLayout
from layoutkit.memory import HostMemoryResource
from layoutkit.memoryview import StridedMemoryView


def host_view(array):
    return StridedMemoryView.from_array_interface(array)


def _nested_loops(ndim, body):
    """Source of a function ``k(v, flat)`` running ``body`` for every index in C order."""
    lines = ["def k(v, flat):", "    n = 0"]
    indent = "    "
    for axis in range(ndim):
        lines.append(f"{indent}for i{axis} in range(v.shape[{axis}]):")
        indent += "    "
    index = "(" + "".join(f"i{axis}, " for axis in range(ndim)) + ")"
    lines += [indent + body.format(index=index), indent + "n += 1"]
    return "\n".join(lines)


_KERNELS = {}


def element_kernel(ndim, direction):
    """``read``: flat[n] = v[index]; ``write``: v[index] = flat[n], in C order."""
    key = ndim, direction
    if key not in _KERNELS:
        body = "flat[n] = v[{index}]" if direction == "read" else "v[{index}] = flat[n]"
        namespace = {}
        exec(_nested_loops(ndim, body), namespace)
        _KERNELS[key] = njit(namespace["k"])
    return _KERNELS[key]


@st.composite
def numpy_views(draw, max_ndim=4):
    """(base, make) where ``make(base)`` is a NumPy view of the arange ``base``.

    The view is sliced with steps of either sign, transposed and sometimes broadcast
    (zero stride, read-only as in NumPy); extents 0 and 1 are common.
    """
    ndim = draw(st.integers(0, max_ndim))
    base_shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    base = np.arange(int(np.prod(base_shape)), dtype=np.float64).reshape(base_shape)
    index = []
    for extent in base_shape:
        step = draw(st.sampled_from([1, 2, -1, -2, 3]))
        start = draw(st.integers(0, max(extent - 1, 0)))
        index.append(slice(start, None, step) if step > 0 else slice(None, start, step))
    order = draw(st.permutations(range(ndim)))
    broadcast = ndim > 0 and draw(st.booleans())

    def make(array):
        view = array[tuple(index)].transpose(order)
        if broadcast and view.shape[0] > 0:
            view = np.broadcast_to(view[:1], (3, *view.shape[1:]))
        return view

    return base, make


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(numpy_views())
def test_loads_match_numpy(case):
    base, make = case
    array = make(base)
    flat = np.full(array.size, -1.0)
    element_kernel(array.ndim, "read")(host_view(array), flat)
    np.testing.assert_array_equal(flat, array.reshape(-1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(numpy_views())
def test_stores_match_numpy(case):
    base, make = case
    array = make(base)
    if not array.flags.writeable:  # broadcast views are read-only, as in NumPy
        return
    values = -1.0 - np.arange(array.size, dtype=np.float64)
    expected = base.copy()
    make(expected)[...] = values.reshape(array.shape)
    element_kernel(array.ndim, "write")(host_view(array), values)
    np.testing.assert_array_equal(base, expected)


@pytest.mark.parametrize(
    "dtype", [np.int8, np.uint16, np.int32, np.float32, np.complex128, np.bool_]
)
def test_dtypes_round_trip(dtype):
    base = (np.arange(24) % 7).astype(dtype).reshape(4, 6)
    source = base[::-1, 1::2]
    destination = np.zeros((3, 4), dtype=dtype).T
    copy_2d(host_view(source), host_view(destination))
    np.testing.assert_array_equal(destination, source)


@njit(cache=True)
def copy_2d(source, destination):
    for i in range(source.shape[0]):
        for j in range(source.shape[1]):
            destination[i, j] = source[i, j]


def test_eight_dimensions():
    base = np.arange(3 * 2**7, dtype=np.float64).reshape((2, 3) + (2,) * 6)[..., ::-1, :]
    array = base.transpose((7, 0, 3, 1, 2, 4, 6, 5))[:, 1:]
    flat = np.empty(array.size)
    element_kernel(8, "read")(host_view(array), flat)
    np.testing.assert_array_equal(flat, array.reshape(-1))


@njit(cache=True)
def describe(view):
    return view.shape, view.strides, view.ndim, view.size


def test_attributes_match_numpy():
    array = np.arange(60.0).reshape(3, 4, 5)[::-1, 1:, ::2]
    shape, strides, ndim, size = describe(host_view(array))
    assert shape == array.shape
    assert strides == tuple(s // array.itemsize for s in array.strides)
    assert (ndim, size) == (3, array.size)


@njit(cache=True)
def derived_views(view):
    sliced = view[1:, ::-2]
    row = view[-1]
    with_new_axis = view[None, 0, ...]
    transposed = view.permuted((1, 0))
    return (
        sliced.shape,
        sliced.strides,
        sliced[0, 0],
        sliced[-1, -1],
        row.shape,
        row[2],
        with_new_axis.shape,
        with_new_axis.strides,
        with_new_axis[0, 3],
        transposed.shape,
        transposed[4, 1],
        view[-1, -2],
    )


def test_derived_views_match_numpy():
    array = np.arange(30.0).reshape(5, 6)[:, 1:]
    (
        sliced_shape,
        sliced_strides,
        sliced_first,
        sliced_last,
        row_shape,
        row_item,
        new_shape,
        new_strides,
        new_item,
        transposed_shape,
        transposed_item,
        negative_item,
    ) = derived_views(host_view(array))
    sliced = array[1:, ::-2]
    assert sliced_shape == sliced.shape
    assert sliced_strides == tuple(s // 8 for s in sliced.strides)
    assert (sliced_first, sliced_last) == (sliced[0, 0], sliced[-1, -1])
    assert (row_shape, row_item) == (array[-1].shape, array[-1][2])
    assert new_shape == array[None, 0, ...].shape == (1, 5)
    assert new_strides == (0, 1)
    assert new_item == array[None, 0, ...][0, 3]
    assert (transposed_shape, transposed_item) == (array.T.shape, array.T[4, 1])
    assert negative_item == array[-1, -2]


@njit(cache=True)
def zero_d(view, out):
    out[()] = view[()] * 2


def test_zero_dimensional_views():
    source = np.array(21.0)
    out = np.zeros(())
    zero_d(host_view(source), host_view(out))
    assert out[()] == 42.0


@njit
def store_one(view):
    view[0, 0] = 1


def test_store_into_read_only_view_fails_to_compile():
    array = np.zeros((2, 2))
    array.setflags(write=False)
    with pytest.raises(TypingError, match="the view is read-only"):
        store_one(host_view(array))



@njit
def store_field(view, value):
    element = view[1]  # a Numba record: a reference to the view's memory
    element.a = value


@njit
def store_subarray_field(view, value):
    view[1].b[0] = value


def test_read_only_structured_elements_are_refused_not_written_through():
    """Found by helper njitviews: ``view[1].a = x`` wrote into read-only memory."""
    dtype = np.dtype([("a", np.int32), ("b", np.float64, (2,))])
    array = np.zeros(3, dtype)
    store_field(host_view(array), 7)  # writable: the element is the view's memory
    assert array["a"].tolist() == [0, 7, 0]
    array.setflags(write=False)
    for store in (store_field, store_subarray_field):
        with pytest.raises(TypingError, match="elements of a read-only .* view cannot be read"):
            store(host_view(array), 9)
    assert array["a"].tolist() == [0, 7, 0] and not array["b"].any()

@njit
def store_row(view):
    view[0] = 1.0


def test_store_into_sub_view_fills_it_as_numpy_does():
    # sub-view assignment (tests/test_njit_view_assign.py); it was a typing error before
    array, expected = np.zeros((2, 2)), np.zeros((2, 2))
    store_row(host_view(array))
    expected[0] = 1.0
    assert np.array_equal(array, expected)


@njit
def too_many_indices(view):
    return view[0, 0, 0]


def test_too_many_indices_is_a_typing_error():
    with pytest.raises(TypingError, match="too many indices: 3 for 2 dimensions"):
        too_many_indices(host_view(np.zeros((2, 2))))


@njit(cache=True)
def load(view, i, j):
    return view[i, j]


def test_bounds_checked_view_raises_index_error():
    array = np.arange(6.0).reshape(2, 3)
    checked = BoundsCheckedView(host_view(array))
    assert load(checked, 1, -1) == 5.0
    with pytest.raises(IndexError, match="view index out of bounds on axis 1"):
        load(checked, 1, 3)
    with pytest.raises(IndexError, match="view index out of bounds on axis 0"):
        load(checked, -3, 0)


def test_numba_type_records_static_structure():
    array = np.zeros((4, 6), dtype=np.float32)
    assert view_numba_type(host_view(array)) == StridedViewType(
        view_numba_type(host_view(array)).dtype, 2, "C"
    )
    assert view_numba_type(host_view(array.T)).layout == "F"
    assert view_numba_type(host_view(array[:, ::2])).layout == "A"
    array.setflags(write=False)
    assert view_numba_type(host_view(array)).readonly
    assert view_numba_type(host_view(array), boundscheck=True).boundscheck


def test_fresh_views_alike_in_shape_get_the_types_of_their_own_properties():
    """The type cache is keyed by plain values: a fresh view of the same shape and dtype
    as views typed before, but read-only, unaligned or of another layout kind, gets its
    own type (NumPy's flags are the oracle), in the first round and from the cache."""
    raw = np.zeros(8 * 12 + 64, np.uint8)
    start = -raw.ctypes.data % 64

    def arrays():
        for offset in (0, 1):  # an aligned and an unaligned pointer
            base = raw[start + offset : start + offset + 8 * 12].view(np.float64).reshape(3, 4)
            for array in (base, base.T, base[:, ::2]):
                for writeable in (True, False):
                    array = array.view()
                    array.setflags(write=writeable)
                    yield array

    for _ in range(2):
        for array in arrays():
            typ = host_view(array)._numba_type_
            flags = array.flags
            kind = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
            assert typ == strided_view_type(
                numba_dtype(array.dtype), array.ndim, kind, not flags.writeable, False,
                flags.aligned,
            ), array.strides  # fmt: skip
    assert len({host_view(array)._numba_type_ for array in arrays()}) == 12


def test_equal_dtypes_of_aligned_and_packed_structs_get_their_own_element_types():
    """NumPy's dtype equality ignores ``align=True`` (at any depth): the two dtypes hash
    alike, but Numba's element types differ (aligned or not, alignment 8 or 1). Numba's
    own conversion, uncached, is the oracle, in both orders of first use."""
    fields = {"names": ["a", "b"], "formats": ["f8", "i8"]}
    packed, aligned = np.dtype(fields), np.dtype(fields, align=True)
    wrappers = (
        lambda d: d,
        lambda d: np.dtype([("x", d), ("y", "u1")]),  # nested
        lambda d: np.dtype([("x", d, (2,))]),  # a sub-array field of them
        lambda d: np.dtype((d, (2,))),  # a sub-array element: an opaque element type
    )
    for wrap in wrappers:
        for order in ((packed, aligned), (aligned, packed)):
            for dtype in map(wrap, order):
                assert wrap(packed) == wrap(aligned)
                buffer = HostMemoryResource().allocate(3 * dtype.itemsize)
                layout = StridedLayout.dense((3,), dtype.itemsize)
                view = StridedMemoryView.from_buffer(buffer, layout, dtype)  # not expanded
                element = view._numba_type_.dtype
                if dtype.subdtype is None:
                    assert element == numpy_support.from_dtype(dtype), dtype
                else:
                    assert element.alignment == dtype.alignment, dtype


@njit(cache=True)
def _read_layout(view):
    return view.shape, view.strides, view._slice_offset, view[1, 0, 1]


def test_a_layout_whose_packed_array_goes_on_is_read_right():
    """A dense layout in a given stride order keeps the order after shape and strides in
    its packed int64 array, which the view's record takes only the first part of."""
    layout = StridedLayout.dense((2, 3, 4), 8, stride_order=(2, 0, 1))
    assert len(layout._lay()) > 2 * layout.ndim  # the case this test is about
    buffer = HostMemoryResource().allocate(8 * 24)
    view = StridedMemoryView.from_buffer(buffer, layout, np.float64)
    array = np.asarray(view)
    array[...] = np.arange(24.0).reshape(2, 3, 4)
    assert _read_layout(view) == (layout.shape, layout.strides, 0, array[1, 0, 1])
    # a read-only view's layout is not analysed when the view is made: typing does it
    sliced = StridedMemoryView.from_buffer(buffer, layout[:, ::-2], np.float64, True)
    assert sliced.layout._order is None
    expected = array[:, ::-2]
    assert _read_layout(sliced) == (
        expected.shape, sliced.strides, sliced.layout.slice_offset, expected[1, 0, 1]
    )


def test_layout_kind_must_be_known():
    with pytest.raises(ValueError, match="layout must be one of"):
        StridedViewType(view_numba_type(host_view(np.zeros(2))).dtype, 1, "K")


def _fake_view(is_device_accessible, device_id, is_host_accessible=False, is_closed=False):
    buffer = types.SimpleNamespace(is_host_accessible=is_host_accessible, is_closed=is_closed)
    return types.SimpleNamespace(
        buffer=buffer,
        _buffer=buffer,
        is_device_accessible=is_device_accessible,
        device_id=device_id,
    )


@pytest.mark.parametrize(
    ("view", "on_device", "device_id", "message"),
    [
        (
            _fake_view(True, 0),
            False,
            None,
            "a device-only view .device_id=0. cannot be passed to @njit",
        ),
        (
            _fake_view(False, -1, True),
            True,
            0,
            "a host-only view .device_id=-1. cannot be passed to a GPU kernel",
        ),
        (
            _fake_view(True, 1),
            True,
            0,
            "the view lives on device 1 but the kernel runs on device 0",
        ),
    ],
)
def test_inaccessible_views_are_refused(view, on_device, device_id, message):
    with pytest.raises(ValueError, match=f"arg: {message}"):
        check_view_accessible(view, "arg", on_device, device_id)


def test_pinned_or_managed_views_work_everywhere():
    view = _fake_view(True, 1, is_host_accessible=True)
    check_view_accessible(view, "arg", False)
    check_view_accessible(view, "arg", True, 0)


def test_view_of_closed_buffer_is_refused():
    buffer = HostMemoryResource().allocate(48)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((2, 3), 8), np.float64)
    describe(view)
    buffer.close()
    with pytest.raises(BufferError, match="view argument: the view's buffer is closed"):
        describe(view)


def test_a_view_closed_before_its_first_call_is_refused():
    """No record is made of a view whose buffer is closed (its fast path reads the view's
    buffer only when one was made: this one was)."""
    buffer = HostMemoryResource().allocate(48)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((2, 3), 8), np.float64)
    buffer.close()
    with pytest.raises(BufferError, match="view argument: the view's buffer is closed"):
        describe(view)
    assert view._numba_record is None


@njit(cache=True)
def layout_of(view):
    layout = view.layout
    return (
        layout.shape,
        layout.strides,
        layout.itemsize,
        layout.slice_offset,
        layout.is_contiguous_c,
        layout.permuted((1, 0)).strides,
    )


def test_layout_inside_compiled_code_matches_python():
    base = np.arange(40.0).reshape(5, 8)
    view = host_view(base).view(StridedLayout.dense((5, 8), 8)[1:, ::2])
    layout = view.layout
    assert layout_of(view) == (
        layout.shape,
        layout.strides,
        layout.itemsize,
        layout.slice_offset,
        layout.is_contiguous_c,
        layout.permuted((1, 0)).strides,
    )


@njit(cache=True)
def through_layout(view):
    transposed = view.with_layout(view.layout.permuted((1, 0)))
    return transposed.shape, transposed[3, 1], transposed.layout.slice_offset


def test_view_with_a_derived_layout():
    base = np.arange(40.0).reshape(5, 8)
    view = host_view(base).view(StridedLayout.dense((5, 8), 8)[1:, ::2])
    shape, item, offset = through_layout(view)
    expected = base[1:, ::2].T
    assert (shape, item, offset) == (expected.shape, expected[3, 1], view.layout.slice_offset)


@njit(cache=True)
def permuted_item(view, first_axis):
    return view.permuted((first_axis, 0))[0, 1]


def test_permutations_are_checked_as_in_python():
    array = np.arange(6.0).reshape(2, 3)
    for view in (host_view(array), BoundsCheckedView(host_view(array))):
        assert permuted_item(view, -1) == array.T[0, 1]
        with pytest.raises(AxisError, match="permuted: axis out of range"):
            permuted_item(view, 2)  # (2, 0): was read past the end
        with pytest.raises(ValueError, match="permuted: repeated axis"):
            permuted_item(view, 0)  # (0, 0): was a garbage shape
        for order in ((0, 0), (2, 0)):  # the Python layout raises the same classes
            with pytest.raises(type(_raised(lambda o=order, v=view: v.layout.permuted(o)))):
                permuted_item(view, order[0])


def _raised(function):
    try:
        function()
    except Exception as error:
        return error
    raise AssertionError("expected an exception")


def test_views_are_typed_without_importing_layoutkit_cuda():
    """``StridedMemoryView._numba_type_`` registers the view type on first use."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        from numba import njit
        from layoutkit import StridedMemoryView

        @njit
        def total(v):
            s = 0.0
            for i in range(v.shape[0]):
                for j in range(v.shape[1]):
                    s += v[i, j]
            return s

        a = np.arange(12.0).reshape(3, 4)
        assert total(StridedMemoryView.from_array_interface(a[::-1, ::2])) == a[::-1, ::2].sum()
        assert "layoutkit.cuda" not in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)


# ---------------------------------------------------------------------------------------
# views returned to Python


@njit(cache=True)
def same_view(view):
    return view


@njit(cache=True)
def reversed_rows(view):
    return view[::-1]


@njit(cache=True)
def last_row(view):
    return view[-1]


@njit(cache=True)
def first_column_as_row(view):
    return view[None, ..., 0]


def test_a_view_returned_unchanged_is_the_argument():
    view = host_view(np.arange(6.0).reshape(2, 3))
    assert same_view(view) is view
    checked = BoundsCheckedView(view)
    returned = same_view(checked)
    assert isinstance(returned, BoundsCheckedView) and returned.view is view


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(numpy_views(max_ndim=3).filter(lambda case: case[1](case[0]).ndim >= 1))
def test_returned_views_match_numpy(case):
    base, make = case
    array = make(base)
    view = host_view(array)
    cases = [(reversed_rows, array[::-1])]
    # compiled code checks indices only when asked (see the boundscheck tests)
    if array.shape[-1]:
        cases.append((first_column_as_row, array[None, ..., 0]))
    if array.shape[0]:
        cases.append((last_row, array[-1]))
    for function, expected in cases:
        returned = function(view)
        if not isinstance(expected, np.ndarray):  # an element: view[-1] of a 1-d view
            assert returned == expected
            continue
        assert isinstance(returned, StridedMemoryView)
        assert returned.shape == expected.shape
        assert returned.readonly == view.readonly
        np.testing.assert_array_equal(np.asarray(returned), expected)



@njit
def _sliced_two(view, first, second):
    sub = view[first, second]
    return sub, sub.strides


@njit
def _indexed_one(view, first, second):
    sub = view[first, None, second]
    return sub, sub.strides


def _strided(shape, strides):
    """A view of an arange with element ``strides`` (extent-1 and empty axes: any)."""
    span = sum(abs(s) * (e - 1) for e, s in zip(shape, strides, strict=True) if e)
    start = sum(-s * (e - 1) for e, s in zip(shape, strides, strict=True) if s < 0 and e)
    base = np.arange(span + 1.0)
    return np.lib.stride_tricks.as_strided(base[start:], shape, [8 * s for s in strides])


@pytest.mark.parametrize(
    "shape, strides, first, second",
    [
        ((3, 1), (1, 7), slice(None), slice(None, None, -1)),  # "C" kind, odd last stride
        ((1, 3), (5, 1), slice(None, None, -1), slice(1, None)),  # "C", odd first stride
        ((1, 2, 3), (99, 1, 2), slice(None), slice(None)),  # "F" kind, odd first stride
        ((0, 4), (-1, -8), slice(2, -2, 2), slice(3, 0, -2)),  # empty: "C", any strides
        ((4, 0), (0, 5), slice(0, -4, 3), slice(None)),
    ],
)
def test_sub_views_of_contiguous_views_keep_python_strides_and_pointer(
    shape, strides, first, second
):
    """A sub-view keeps the strides and pointer Python and NumPy give it.

    The layout kind ("C" / "F") lets element addresses take one stride as 1; that stride
    is only ever multiplied by index 0 (an extent-1 axis) or belongs to an empty view, so
    it must not replace the real stride in a sub-view (regression: ``v[:, ::-1]`` of a
    (3, 1) view with strides (1, 7) came back with strides (1, -1), and empty sub-views
    with another pointer).
    """
    array = _strided(shape, strides)
    view = host_view(array)
    for function, index in (
        (_sliced_two, (first, second)),
        (_indexed_one, (first, None, second)),
    ):
        expected = array[index] if function is _sliced_two else array[first, None, second]
        python = view[index]
        sub, sub_strides = function(view, first, second)
        assert sub_strides == tuple(s // 8 for s in expected.strides) == python.layout._strides
        assert sub.layout._strides == python.layout._strides
        assert sub.ptr == python.ptr == expected.__array_interface__["data"][0]
        np.testing.assert_array_equal(np.asarray(sub), expected)


def test_a_returned_view_keeps_its_memory_alive():
    import gc
    import weakref

    def make():
        array = np.arange(24.0).reshape(4, 6)
        return reversed_rows(host_view(array)), weakref.ref(array)

    returned, array_ref = make()
    gc.collect()
    assert array_ref() is not None  # the returned view still owns the memory
    np.testing.assert_array_equal(np.asarray(returned), np.arange(24.0).reshape(4, 6)[::-1])
    del returned
    gc.collect()
    assert array_ref() is None  # and nothing else does


@njit(cache=True)
def stored_then_returned(view):
    keep = List()
    keep.append(view[1:])
    return keep[0]


def test_views_in_compiled_containers_stay_valid():
    array = np.arange(5.0)
    np.testing.assert_array_equal(np.asarray(stored_then_returned(host_view(array))), array[1:])


# ---------------------------------------------------------------------------------------
# with_layout is checked as StridedMemoryView.view(layout) is


@njit(cache=True)
def with_layout(view, layout):
    return view.with_layout(layout)


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (StridedLayout.dense((4, 4), 8), "reaches past the end of the view's buffer"),
        (StridedLayout.dense((3, 4), 4), "the layout's itemsize differs from the view's"),
        (StridedLayout((3,), (-1,), 8), "reaches before the view's buffer"),
    ],
)
def test_with_layout_refuses_layouts_outside_the_buffer(layout, message):
    view = host_view(np.arange(12.0).reshape(3, 4))
    with pytest.raises(ValueError, match=f"with_layout: .*{message}"):
        with_layout(view, layout)
    with pytest.raises(ValueError):  # the Python view refuses it too
        view.view(layout)
    with pytest.raises(ValueError, match=message):  # bounds-checked views as well
        with_layout(BoundsCheckedView(view), layout)


def test_with_layout_gives_the_view_python_gives():
    view = host_view(np.arange(12.0).reshape(3, 4))
    for layout in (
        StridedLayout.dense((12,), 8)[::-1],
        StridedLayout.dense((4, 3), 8).permuted((1, 0)),
        StridedLayout.dense((0, 5), 8),
    ):
        returned = with_layout(view, layout)
        np.testing.assert_array_equal(np.asarray(returned), np.asarray(view.view(layout)))


def test_with_layout_of_a_broadcast_needs_a_read_only_view():
    """Python makes a broadcast view read-only (DECISIONS 19); compiled code cannot change
    a view's type at run time, so a writable view refuses the layout before any write can
    go through it, and a read-only view takes it."""
    view = host_view(np.zeros(3))
    assert not view.readonly
    broadcast = view.layout.broadcast_to((4, 3))
    assert view.view(broadcast).readonly  # Python's rule (DECISIONS 19)
    with pytest.raises(ValueError, match="with_layout: the layout is not unique"):
        with_layout(view, broadcast)
    read_only = StridedMemoryView.from_buffer(view.buffer, view.layout, view.dtype, True)
    returned = with_layout(read_only, broadcast)
    assert returned.readonly and returned.layout == broadcast
    np.testing.assert_array_equal(np.asarray(returned), np.zeros((4, 3)))
    unique = view.layout[::-1]
    assert not view.view(unique).readonly
    assert not with_layout(view, unique).readonly


# ---------------------------------------------------------------------------------------
# bounds checking: boundscheck=True, NUMBA_BOUNDSCHECK=1 and BoundsCheckedView


@njit(boundscheck=True)
def load_checked(view, i):
    return view[i]


def test_boundscheck_true_checks_view_indices_like_ndarray_indices():
    view = host_view(np.arange(3.0))
    assert load_checked(view, -1) == 2.0
    with pytest.raises(IndexError, match="view index out of bounds on axis 0"):
        load_checked(view, 100)
    with pytest.raises(IndexError):  # as for an ndarray
        load_checked(np.arange(3.0), 100)


def test_numba_boundscheck_environment_variable_checks_view_indices():
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import numpy as np
        from numba import njit
        from layoutkit import StridedMemoryView

        @njit
        def load(v, i):
            return v[i]

        view = StridedMemoryView.from_array_interface(np.arange(3.0))
        assert load(view, 2) == 2.0
        try:
            load(view, 100)
        except IndexError as error:
            print("IndexError:", error)
        """
    )
    import os

    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        env=dict(os.environ, NUMBA_BOUNDSCHECK="1"),
    )  # fmt: skip
    assert result.stdout.strip() == "IndexError: view index out of bounds on axis 0"


def test_bounds_checked_view_is_public_and_refuses_non_views():
    import layoutkit

    assert layoutkit.BoundsCheckedView is BoundsCheckedView
    assert "BoundsCheckedView" in layoutkit.__all__
    with pytest.raises(TypeError, match="view must be a StridedMemoryView, got list"):
        BoundsCheckedView([1, 2, 3])
    checked = BoundsCheckedView(host_view(np.arange(3.0)))
    assert BoundsCheckedView(checked).view is checked.view
    assert checked.shape == (3,) and checked._numba_type_.boundscheck


def test_bounds_checked_views_index_in_python_as_views_do():
    array = np.arange(12.0).reshape(3, 4)
    checked = BoundsCheckedView(host_view(array))
    assert checked[1, 2] == 6.0 and len(checked) == 3
    row = checked[-1, ::-2]
    assert type(row) is BoundsCheckedView and row._numba_type_.boundscheck
    np.testing.assert_array_equal(np.asarray(row), array[-1, ::-2])
    rows = list(checked)
    assert all(type(r) is BoundsCheckedView for r in rows)
    np.testing.assert_array_equal([np.asarray(r) for r in rows], array)
    checked[0, 0] = -1.0
    checked[2] = BoundsCheckedView(host_view(np.full(4, 7.0)))
    assert array[0, 0] == -1.0 and (array[2] == 7.0).all()
    with pytest.raises(IndexError, match="out of bounds"):
        checked[3, 0]
    with pytest.raises(IndexError, match="out of bounds"):
        checked[0, -5] = 1.0
    assert first_of_rows(checked) == first_of_rows(host_view(array))


@njit
def first_of_rows(view):
    total = 0.0
    for row in view:
        total += row[0]
    return total


# ---------------------------------------------------------------------------------------
# element types: what works in @njit for every dtype layoutkit supports


@njit
def describe_any(view):
    return view.shape, view.strides, view.layout.itemsize


@njit
def copy_first(source, destination):
    destination[0] = source[1]


NUMPY_DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float32, np.float64, np.complex64, np.complex128,
]  # fmt: skip


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_dtypes_load_and_store(dtype):
    source = (np.arange(4) % 2).astype(dtype)
    destination = np.zeros(4, dtype)
    copy_first(host_view(source), host_view(destination))
    assert destination[0] == source[1]
    assert describe_any(host_view(source)) == ((4,), (1,), np.dtype(dtype).itemsize)


def _ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return [getattr(ml_dtypes, name) for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2")]


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_dtypes_without_cpu_arithmetic_type_and_refuse_elements_in_one_line(name):
    dtype = np.float16 if name == "float16" else getattr(pytest.importorskip("ml_dtypes"), name)
    array = np.zeros(4, dtype)
    # shape, strides and layout work; element access is a one-line typing error saying why
    assert describe_any(host_view(array)) == ((4,), (1,), array.itemsize)
    with pytest.raises(TypingError) as info:
        copy_first(host_view(array), host_view(array))
    (line,) = [line for line in str(info.value).splitlines() if name in line]
    assert "cannot be read or written" in line and "view.view(dtype=numpy.uint" in line


def test_views_without_dtype_are_refused_with_a_clear_error():
    buffer = HostMemoryResource().allocate(16)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((2,), 8))
    with pytest.raises(TypeError, match="a view without a dtype cannot be passed to compiled code"):
        describe_any(view)


def test_calls_and_returned_views_leak_no_reference():
    import subprocess
    import sys
    import textwrap

    # NRT's allocation counters are on only when the process starts with them
    script = textwrap.dedent(
        """
        import gc, os, sys
        import numpy as np
        from numba import njit
        from numba.core.runtime import rtsys
        from layoutkit import StridedMemoryView

        @njit
        def derived(v):
            return v[::-1], v.permuted((0,)), v

        @njit
        def nothing(v):
            return v.shape[0]

        array = np.arange(6.0)
        view = StridedMemoryView.from_array_interface(array)
        for function in (nothing, derived):
            function(view)
            gc.collect()
            before = sys.getrefcount(view), sys.getrefcount(array), rtsys.get_allocation_stats()
            for _ in range(50):
                result = function(view)
                del result
            gc.collect()
            after = sys.getrefcount(view), sys.getrefcount(array), rtsys.get_allocation_stats()
            assert before[:2] == after[:2], (before, after)
            assert after[2].mi_alloc - before[2].mi_alloc == after[2].mi_free - before[2].mi_free
        print("ok")
        """
    )
    import os

    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True,
        env=dict(os.environ, NUMBA_NRT_STATS="1"),
    )  # fmt: skip
    assert result.stdout.strip() == "ok", result.stderr[-3000:]


def test_a_tampered_record_is_refused_not_read():
    view = host_view(np.arange(4.0))
    describe(view)
    view._numba_record = (view._numba_record[0], b"\0" * 8)  # too short for a 1-d view
    with pytest.raises(TypeError, match="_numba_record of this StridedMemoryView object was not"):
        describe(view)
    view._numba_record = (view._numba_record[0], "not bytes")
    with pytest.raises(TypeError, match="was not made by layoutkit"):
        describe(view)


@njit(cache=True)
def _store_through_with_layout(view, layout, i, x):
    view.with_layout(layout)[i] = x


@njit(cache=True)
def _store_through_view(view, layout, i, x):
    view.view(layout)[i] = x


@njit(cache=True)
def _store_through_permuted(view, i, x):
    moved = view.permuted((0,))
    moved[i] = x


@pytest.mark.parametrize(
    "store",
    [
        lambda view, layout, i, x: _store_through_with_layout(view, layout, i, x),
        lambda view, layout, i, x: _store_through_view(view, layout, i, x),
        lambda view, layout, i, x: _store_through_permuted(view, i, x),
    ],
    ids=["with_layout", "view", "permuted"],
)
def test_a_store_through_a_derived_view_is_not_dead_code(store):
    """``view.with_layout(layout)[i] = x`` wrote nothing: Numba's dead-code elimination
    removed the store, to a temporary it did not know shares the view's memory (found by
    helper-45). The derived views are registered with Numba's alias analysis."""
    target = np.zeros(4)
    store(StridedMemoryView.from_array_interface(target), StridedLayout.dense((4,), 8), 2, 5.0)
    np.testing.assert_array_equal(target, [0.0, 0.0, 5.0, 0.0])
