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

from layoutkit._numba_view import (
    BoundsCheckedView,
    StridedViewType,
    check_view_accessible,
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
def store_row(view):
    view[0] = 1.0


def test_store_into_sub_view_is_a_typing_error():
    with pytest.raises(TypingError, match="only single elements can be assigned"):
        store_row(host_view(np.zeros((2, 2))))


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


def test_bounds_checked_permutation():
    array = np.arange(6.0).reshape(2, 3)
    checked = BoundsCheckedView(host_view(array))
    assert permuted_item(checked, -1) == array.T[0, 1]
    with pytest.raises(IndexError, match="permuted: axis out of range"):
        permuted_item(checked, 2)


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
