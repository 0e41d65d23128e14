"""StridedLayout inside users' own ``@njit`` functions agrees with the Python class."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit
from numba.core.errors import TypingError

from layoutkit import StridedLayout


@njit(cache=True)
def _properties(layout):
    return (
        layout.ndim,
        layout.shape,
        layout.strides,
        layout.itemsize,
        layout.slice_offset,
        layout.volume,
        layout.offset_bounds,
        layout.min_offset,
        layout.max_offset,
        layout.is_contiguous_c,
        layout.is_contiguous_f,
        layout.is_contiguous_any,
        layout.is_dense,
        layout.stride_order,
        layout.flattened_axis_mask(),
        layout.strides_in_bytes,
        layout.slice_offset_in_bytes,
    )


@njit(cache=True)
def _transforms_3d(layout):
    return (
        layout.permuted((2, 0, 1)),
        layout.permuted((-1, 1, 0)),
        layout[1:, ::-2, None],
        layout[..., 0],
        layout.sliced((0, Ellipsis)),
        layout.broadcast_to((2,) + layout.shape),
        layout.unsqueezed(1),
        layout.unsqueezed((0, -1)),
        layout.to_dense(),
        layout.to_dense("C"),
        layout.to_dense("F"),
    )


layouts_3d = st.builds(
    lambda shape, strides, itemsize, cut: StridedLayout(shape, strides, itemsize)[cut:],
    st.tuples(*[st.integers(1, 4)] * 3),
    st.tuples(*[st.integers(-12, 12)] * 3),
    st.sampled_from([1, 2, 4, 8]),
    st.integers(0, 1),
)


# ``f.py_func`` is the same function run by the Python interpreter on the Python class.
@settings(max_examples=60, deadline=None)
@given(layouts_3d)
def test_properties_match_python(layout):
    assert _properties(layout) == _properties.py_func(layout)


@settings(max_examples=60, deadline=None)
@given(layouts_3d)
def test_transforms_match_python(layout):
    if layout.shape[0] == 0:
        return  # layout[..., 0] and [0, ...] need a non-empty first axis
    assert _transforms_3d(layout) == _transforms_3d.py_func(layout)


@njit(cache=True)
def _reshape_and_repack(layout):
    return layout.reshaped((3, -1)), layout.repacked(8), layout.max_compatible_itemsize(16)


def test_reshape_repack_and_round_trip():
    layout = StridedLayout.dense((6, 4), 2)
    reshaped, repacked, widest = _reshape_and_repack(layout)
    assert reshaped == layout.reshaped((3, -1))
    assert repacked == layout.repacked(8)
    assert widest == layout.max_compatible_itemsize(16) == 8
    # a layout made in compiled code is a full Python layout once returned
    assert pickle.loads(pickle.dumps(reshaped)) == reshaped


@njit(cache=True)
def _zero_d(layout):
    return layout.volume, layout.offset_bounds, layout.unsqueezed(0), layout[None]


def test_zero_d_and_zero_volume():
    zero_d = StridedLayout((), (), 4)
    assert _zero_d(zero_d) == (1, (0, 0), zero_d.unsqueezed(0), zero_d[None])
    empty = StridedLayout.dense((3, 0, 2), 4)
    assert _properties(empty) == _properties.py_func(empty)


@njit(cache=True)
def _bad_permutation(layout):
    return layout.permuted((0, 0))


@njit(cache=True)
def _bad_reshape(layout):
    return layout.reshaped((5, 5))


def test_invalid_arguments_raise_in_compiled_code():
    layout = StridedLayout.dense((2, 3), 4)
    with pytest.raises(ValueError, match="repeated axis"):
        _bad_permutation(layout)
    with pytest.raises(ValueError, match="volumes differ"):
        _bad_reshape(layout)


def test_squeezed_is_a_clear_typing_error():
    @njit
    def squeeze(layout):
        return layout.squeezed()

    with pytest.raises(TypingError, match="depends on run-time values"):
        squeeze(StridedLayout.dense((1, 3), 4))


@njit(cache=True)
def _offsets_in_a_loop(layout, out):
    k = 0
    for i in range(layout.shape[0]):
        for j in range(layout.shape[1]):
            out[k] = layout.offset_of((i, j))
            k += 1


def test_offset_of_matches_numpy_view():
    np = pytest.importorskip("numpy")
    base = np.arange(40)
    layout = StridedLayout.dense((5, 8), 8)[::-2, 1::3]
    view = np.lib.stride_tricks.as_strided(
        base[layout.slice_offset :], layout.shape, layout.strides_in_bytes
    )
    out = np.empty(layout.volume, np.int64)
    _offsets_in_a_loop(layout, out)
    assert out.tolist() == view.ravel().tolist()


# ---------------------------------------------------------------------------------------
# random layouts of the shared strategies: every operation agrees with the Python class,
# errors included (same exception class), and results come back as Python layouts

from helpers.strategies import layouts, numpy_view  # noqa: E402
from hypothesis import HealthCheck  # noqa: E402

from layoutkit import AxisError  # noqa: E402

RANDOM = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NDIMS = st.sampled_from([0, 1, 2, 3, 5])


def outcome(function, *args):
    """("ok", result) or ("raises", exception class) of a call."""
    try:
        return "ok", function(*args)
    except (ValueError, IndexError, OverflowError) as error:
        return "raises", type(error)


def assert_same_outcome(compiled, *args):
    """The compiled function and its own Python source agree on ``args``."""
    expected = outcome(compiled.py_func, *args)
    actual = outcome(compiled, *args)
    assert actual == expected, (args, actual, expected)
    if actual[0] == "ok":
        for value in actual[1] if isinstance(actual[1], tuple) else (actual[1],):
            if isinstance(value, StridedLayout):
                # exact strides (== ignores those of extent-1 axes) and a valid layout
                assert value == pickle.loads(pickle.dumps(value))
        assert_exact(actual[1], expected[1])


def assert_exact(actual, expected):
    if isinstance(expected, tuple):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_exact(a, e)
    elif isinstance(expected, StridedLayout):
        # compiled code has explicit strides only: a layout it returns never has None
        # (implicit C), where the Python function may return one built with strides=None
        assert actual.strides is not None
        assert (actual.shape, actual._strides, actual.itemsize, actual.slice_offset) == (
            expected.shape, expected._strides, expected.itemsize, expected.slice_offset,
        )  # fmt: skip
    else:
        assert actual == expected


@njit(cache=True)
def _all_properties(layout):
    return (
        layout.ndim, layout.shape, layout.strides, layout.itemsize, layout.slice_offset,
        layout.volume, layout.offset_bounds, layout.is_contiguous_c, layout.is_contiguous_f,
        layout.is_contiguous_any, layout.is_dense, layout.stride_order,
        layout.flattened_axis_mask(), layout.strides_in_bytes, layout.slice_offset_in_bytes,
    )  # fmt: skip


@njit(cache=True)
def _is_unique(layout):
    return layout.is_unique


@njit(cache=True)
def _required_size(layout):
    return layout.required_size_in_bytes()


@RANDOM
@given(st.data())
def test_random_layout_properties_match_python(data):
    layout = data.draw(layouts(data.draw(NDIMS)))
    assert_same_outcome(_all_properties, layout)
    assert_same_outcome(_required_size, layout)
    # compiled code runs the exact search Python runs (regression: it ran only the
    # nesting test, and said False for interleaved unique layouts such as (2, 3), (3, 2))
    assert _is_unique(layout) == layout.is_unique


@pytest.mark.parametrize(
    "shape, strides",
    [((2, 3), (3, 2)), ((2, 3), (2, 1)), ((5000, 3), (3, 2)), ((3, 2, 2), (2, 3, 7)),
     ((2,) * 9, (256, 3, 64, 32, 16, 8, 4, 2, 1)), ((2,) * 9, (1, 2, 4, 8, 16, 32, 64, 128, 255))],
)
def test_is_unique_matches_python_where_strides_interleave(shape, strides):
    layout = StridedLayout(shape, strides, 4)
    assert _is_unique(layout) == layout.is_unique


@njit(cache=True)
def _permuted(layout, order):
    return layout.permuted(order)


@RANDOM
@given(st.data())
def test_random_permutations_match_python(data):
    layout = data.draw(layouts(data.draw(NDIMS)))
    n = layout.ndim
    order = data.draw(st.lists(st.integers(-n - 1, n), min_size=n, max_size=n).map(tuple))
    assert_same_outcome(_permuted, layout, order)  # repeated and out-of-range axes too


@njit(cache=True)
def _reshaped_2d(layout, rows, columns):
    return layout.reshaped((rows, columns))


@RANDOM
@given(st.data())
def test_random_reshapes_match_python(data):
    layout = data.draw(st.one_of(layouts(3), layouts(2).map(lambda lay: lay[::-1])))
    volume = layout.volume
    rows = data.draw(st.sampled_from([-1, 0, 1, 2, 3, volume, max(volume, 1) * 2]))
    columns = data.draw(st.sampled_from([-1, 1, 2, volume, volume // max(rows, 1)]))
    assert_same_outcome(_reshaped_2d, layout, rows, columns)


@njit(cache=True)
def _transforms(layout, extent, axis, itemsize):
    return (
        layout.broadcast_to((extent,) + layout.shape),
        layout.unsqueezed(axis),
        layout.to_dense(),
        layout.to_dense("C"),
        layout.to_dense("F"),
        StridedLayout.dense_like(layout, "F"),
    )


@njit(cache=True)
def _repacked(layout, itemsize, data_ptr, axis):
    return layout.repacked(itemsize, data_ptr, axis)


@njit(cache=True)
def _max_compatible(layout, max_itemsize, data_ptr, axis):
    return layout.max_compatible_itemsize(max_itemsize, data_ptr, axis)


@RANDOM
@given(st.data())
def test_random_transforms_match_python(data):
    layout = data.draw(layouts(data.draw(st.sampled_from([1, 2, 3]))))
    n = layout.ndim
    extent = data.draw(st.integers(-1, 3))
    axis = data.draw(st.integers(-n - 2, n + 1))
    itemsize = data.draw(st.sampled_from([0, 1, 2, 4, 8, 16, 32, 2**31]))
    assert_same_outcome(_transforms, layout, extent, axis, itemsize)
    data_ptr = data.draw(st.sampled_from([0, 8, 12, 4096]))
    assert_same_outcome(_repacked, layout, itemsize, data_ptr, axis)
    assert_same_outcome(_max_compatible, layout, itemsize, data_ptr, axis)


_INDEX_FUNCTIONS = {}


def _index_function(kinds, is_tuple=True):
    """A compiled ``f(layout, *entries)`` applying one index of these entry kinds."""
    key = kinds, is_tuple
    if key not in _INDEX_FUNCTIONS:
        names = [f"e{i}" for i in range(len(kinds))]
        items = [
            {"int": name, "slice": name, "new": "None", "ellipsis": "..."}[kind]
            for kind, name in zip(kinds, names, strict=True)
        ]
        args = "".join(
            f", {name}" for name, kind in zip(names, kinds, strict=True) if kind in ("int", "slice")
        )
        index = "(" + "".join(f"{item}, " for item in items) + ")" if is_tuple else items[0]
        namespace = {}
        exec(f"def index(layout{args}):\n    return layout[{index}]", namespace)
        _INDEX_FUNCTIONS[key] = njit(namespace["index"])
    return _INDEX_FUNCTIONS[key]


def _kind(entry):
    if entry is None:
        return "new"
    if entry is Ellipsis:
        return "ellipsis"
    return "slice" if isinstance(entry, slice) else "int"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_indices_match_python(data):
    from helpers.strategies import basic_indices

    layout = data.draw(layouts(data.draw(st.sampled_from([1, 2, 3]))))
    index = data.draw(basic_indices(layout.shape, max_new_axes=1))
    entries = index if isinstance(index, tuple) else (index,)
    function = _index_function(tuple(_kind(e) for e in entries), isinstance(index, tuple))
    values = [e for e in entries if e is not None and e is not Ellipsis]
    assert_same_outcome(function, layout, *values)
    # integers out of range raise AxisError, as in Python
    if layout.ndim and layout.shape[0]:
        bad = _index_function(("int",), False)
        assert outcome(bad, layout, layout.shape[0]) == ("raises", AxisError)


@njit(cache=True)
def _offsets(layout, out):
    k = 0
    for i in range(layout.shape[0]):
        for j in range(layout.shape[1]):
            out[k] = layout.offset_of((i - layout.shape[0], j))  # negative: from the end
            k += 1


@RANDOM
@given(layouts(2))
def test_offset_of_matches_numpy(layout):
    import numpy as np

    out = np.zeros(layout.volume, np.int64)
    _offsets(layout, out)
    assert out.tolist() == numpy_view(layout).ravel().tolist()


@njit(cache=True)
def _offset_of_first(layout, i):
    return layout.offset_of((i, 0))


def test_offset_of_checks_the_index():
    layout = StridedLayout.dense((3, 4), 8)
    assert _offset_of_first(layout, -1) == 8  # the last row: negative indices count from the end
    with pytest.raises(AxisError, match="offset_of: index out of bounds on axis 0"):
        _offset_of_first(layout, 3)


# ---------------------------------------------------------------------------------------
# constructors and equality in compiled code


@njit(cache=True)
def _constructed(shape, strides, itemsize):
    return StridedLayout(shape, strides, itemsize)


@njit(cache=True)
def _constructed_in_bytes(shape, strides, itemsize):
    return StridedLayout(shape, strides, itemsize, divide_strides=True)


@njit(cache=True)
def _constructed_c(shape, itemsize):
    return StridedLayout(shape, None, itemsize), StridedLayout.dense(shape, itemsize)


@njit(cache=True)
def _dense_orders(shape, itemsize, order):
    return (
        StridedLayout.dense(shape, itemsize, "C"),
        StridedLayout.dense(shape, itemsize, "F"),
        StridedLayout.dense(shape, itemsize, order),
    )


shapes_2d = st.tuples(st.integers(-1, 4), st.integers(0, 4))
strides_2d = st.tuples(st.integers(-12, 12), st.integers(-12, 12))


@RANDOM
@given(shapes_2d, strides_2d, st.sampled_from([-1, 0, 1, 4, 8, 2**31]), st.booleans())
def test_constructors_match_python(shape, strides, itemsize, in_bytes):
    if in_bytes:
        assert_same_outcome(_constructed_in_bytes, shape, tuple(s * 4 for s in strides), itemsize)
    assert_same_outcome(_constructed, shape, strides, itemsize)
    assert_same_outcome(_constructed_c, shape, itemsize)
    assert_same_outcome(_dense_orders, shape, itemsize, (1, 0))
    assert_same_outcome(_dense_orders, shape, itemsize, (1, 1))  # not a permutation


def test_constructors_refuse_overflow():
    with pytest.raises(OverflowError, match="StridedLayout: the volume does not fit in int64"):
        _constructed_c((2**62, 4), 1)
    with pytest.raises(OverflowError, match="StridedLayout: the element offsets do not fit"):
        _constructed((4, 2), (2**62, 1), 1)


@njit(cache=True)
def _compare(a, b):
    return a == b, a != b


@RANDOM
@given(st.data())
def test_equality_matches_python(data):
    ndim = data.draw(st.sampled_from([1, 2]))
    a = data.draw(layouts(ndim))
    b = data.draw(st.one_of(st.just(a), layouts(ndim), st.just(StridedLayout(a.shape, a.strides, a.itemsize))))
    assert _compare(a, b) == (a == b, a != b)
    # extent-1 strides never count, as in Python
    ones = StridedLayout((1, 3), (7, 1), 4)
    assert _compare(ones, StridedLayout((1, 3), (3, 1), 4)) == (True, False)
    assert _compare(StridedLayout.dense((3,), 4), StridedLayout.dense((3, 1), 4)) == (False, True)


def test_layouts_made_in_compiled_code_are_python_layouts():
    a, b = _constructed_c((3, 4), 2)
    assert type(a) is StridedLayout and a == b == StridedLayout.dense((3, 4), 2)
    assert hash(a) == hash(StridedLayout.dense((3, 4), 2))
    assert pickle.loads(pickle.dumps(a)) == a


@RANDOM
@given(st.data())
def test_unsorted_flag_kernels_agree_with_the_sorted_ones(data):
    """Compiled layouts of up to 8 dimensions test contiguity and uniqueness without
    sorting their axes; the answer is the one the stride-order kernels give."""
    import array

    import numpy as np

    from layoutkit import _kernels as K

    layout = data.draw(layouts(data.draw(st.integers(0, 8))))
    n = layout.ndim
    lay = array.array("q", layout.shape + layout.strides)
    order = np.zeros(max(n, 1), np.int64)
    K.stride_order(lay, n, order, 0)
    assert K.is_contiguous_unsorted(lay, n) == K.is_contiguous_along(lay, n, order, 0)
    assert K.is_unique_unsorted(lay, n) == K.is_unique_nested(lay, n, order, 0)


@njit(cache=True)
def _repacked_at(layout, itemsize, data_ptr, axis):
    return layout.repacked(itemsize, data_ptr, axis)


@njit(cache=True)
def _max_compatible_at(layout, max_itemsize, data_ptr, axis):
    return layout.max_compatible_itemsize(max_itemsize, data_ptr, axis)


@pytest.mark.parametrize("data_ptr", [-16, -2, np.int64(-8), np.int8(-1)])
@pytest.mark.parametrize("itemsize", [2, 4, 16])
def test_negative_data_pointers_are_refused_as_in_python(itemsize, data_ptr):
    """A data_ptr below 0 is no address: Python raises OverflowError (cuda.core's
    uintptr_t); compiled code read -16 modulo the itemsize as aligned and repacked."""
    layout = StridedLayout.dense((4, 8), 2)
    for compiled, method in (
        (_repacked_at, layout.repacked),
        (_max_compatible_at, layout.max_compatible_itemsize),
    ):
        with pytest.raises(OverflowError, match=r"data_ptr must be an address in \[0, 2\*\*64\)"):
            method(itemsize, int(data_ptr), -1)
        with pytest.raises(OverflowError, match=r"data_ptr must be an address in \[0, 2\*\*64\)"):
            compiled(layout, itemsize, data_ptr, -1)


def test_unsigned_data_pointers_beyond_int64_are_addresses():
    """uint64 pointers at and above 2**63 are read as the addresses they are."""
    layout = StridedLayout.dense((4, 8), 2)
    for data_ptr in (2**64 - 16, 2**64 - 8, 2**63 + 8):
        expected = outcome(layout.repacked, 16, data_ptr, -1)
        actual = outcome(_repacked_at, layout, 16, np.uint64(data_ptr), -1)
        assert actual[0] == expected[0] and (actual[0] == "raises" or actual[1] == expected[1])
        assert _max_compatible_at(layout, 16, np.uint64(data_ptr), -1) == (
            layout.max_compatible_itemsize(16, data_ptr, -1)
        )


@pytest.mark.parametrize("data_ptr", [2**64 - 12, 2**64 - 16, 2**63 + 4, 2**63 + 12])
@pytest.mark.parametrize("itemsize", [12, 24])
def test_unsigned_data_pointers_modulo_sizes_that_do_not_divide_2_64(data_ptr, itemsize):
    """An address of 2**63 or more is read modulo 12 or 24 exactly (regression: compiled
    code wrapped it to a negative int64 first, so 2**64 - 12, which is 4 bytes past a
    multiple of 12, counted as aligned: repacked(12) accepted it where Python refuses,
    and max_compatible_itemsize gave 12 instead of 4)."""
    for layout in (StridedLayout.dense((6,), 4), StridedLayout.dense((6,), 2)):
        expected = outcome(layout.repacked, itemsize, data_ptr, -1)
        actual = outcome(_repacked_at, layout, itemsize, np.uint64(data_ptr), -1)
        assert actual[0] == expected[0] and (actual[0] == "raises" or actual[1] == expected[1])
        assert _max_compatible_at(layout, itemsize, np.uint64(data_ptr), -1) == (
            layout.max_compatible_itemsize(itemsize, data_ptr, -1)
        )


@njit(cache=True)
def _unsigned_axes(layout, order, axis, new_axis):
    permuted, dense = layout.permuted(order), layout.to_dense(order)
    return permuted, dense, layout.unsqueezed(new_axis), layout.repacked(4, 0, axis)


@pytest.mark.parametrize(
    "order, axis, new_axis",
    [
        ((np.uint64(2**64 - 1), np.uint64(0)), np.uint64(1), np.uint64(0)),  # wrapped to -1
        ((np.uint64(1), np.uint64(0)), np.uint64(2**64 - 1), np.uint64(0)),
        ((np.uint64(1), np.uint64(0)), np.uint64(1), np.uint64(2**64 - 1)),
        ((np.uint64(1), np.uint64(0)), np.uint64(1), np.uint64(2)),
        ((np.uint8(1), np.uint8(0)), np.uint8(1), np.uint8(1)),
        ((np.uint8(1), np.uint8(0)), np.uint8(0), np.uint8(1)),  # ValueError: axis 0 cannot pack
    ],
)
def test_unsigned_axes_mean_what_they_mean_in_python(order, axis, new_axis):
    """An unsigned 64-bit axis of 2**63 or more is out of range (AxisError in Python);
    compiled code wrapped 2**64 - 1 to axis -1 and permuted, and an unsigned scalar axis
    made repacked's axis arithmetic float64, a typing error."""
    layout = StridedLayout.dense((4, 8), 2)

    def python(layout, order, axis, new_axis):
        order = tuple(int(a) for a in order)
        permuted, dense = layout.permuted(order), layout.to_dense(order)
        return permuted, dense, layout.unsqueezed(int(new_axis)), layout.repacked(4, 0, int(axis))

    expected = outcome(python, layout, order, axis, new_axis)
    actual = outcome(_unsigned_axes, layout, order, axis, new_axis)
    assert actual[0] == expected[0], (actual, expected)
    if actual[0] == "raises":
        assert actual[1] is expected[1]
    else:
        assert_exact(actual[1], expected[1])


def test_a_fresh_process_builds_layouts_in_njit_before_passing_any():
    """Numba learns StridedLayout's type from layoutkit's ``numba_extensions`` entry point,
    so compiled code can name the class before any layout went into compiled code."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys
        from numba import njit
        from layoutkit import StridedLayout

        assert "layoutkit._numba_layout" not in sys.modules

        @njit
        def make(shape):
            return StridedLayout(shape, None, 4).permuted((1, 0)), StridedLayout.dense(shape, 2)

        transposed, dense = make((2, 3))
        assert transposed == StridedLayout((3, 2), (1, 3), 4), transposed
        assert dense == StridedLayout.dense((2, 3), 2), dense
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
