"""``for x in view`` and sub-view assignment ``view[index] = value`` in ``@njit`` code.

NumPy is the oracle: the same iteration or assignment on the ndarray the view was made
from gives the same items, the same bytes afterwards, or an exception of the same class
(with NumPy's message for shapes that cannot broadcast). The Python view agrees too.
"""

import numpy as np
import pytest
from helpers.strategies import basic_indices
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit
from numba.core.errors import TypingError

from layoutkit import BoundsCheckedView, StridedMemoryView
from layoutkit._numba_index import plan_for_values

_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def host_view(array):
    return StridedMemoryView.from_array_interface(array)


@st.composite
def strided_arrays(draw, dtype=np.float64, min_ndim=1, max_ndim=3):
    """``(base, make)``: ``make(base)`` is a NumPy view of the 1-d ``base`` (steps of
    either sign, sometimes transposed), so a copy of ``base`` gives the same view again."""
    shape = draw(st.lists(st.integers(0, 4), min_size=min_ndim, max_size=max_ndim))
    steps = [draw(st.sampled_from([1, -1, 2, -2])) for _ in shape]
    full = [e * abs(s) for e, s in zip(shape, steps, strict=True)]
    base = (np.arange(int(np.prod(full))) % 97).astype(dtype)
    transpose = draw(st.booleans())

    def make(base):
        array = base.reshape(full)[tuple(slice(None, None, s) for s in steps)]
        return array.T if transpose else array

    return base, make


# ---------------------------------------------------------------------------------------
# iteration


@njit
def _items(view):
    out = []
    for item in view:
        out.append(item)
    return out


@njit
def _nested_sum(view):
    total = 0.0
    for plane in view:
        for row in plane:
            for x in row:
                total += x
    return total


@njit
def _enumerated(view):
    total = 0
    for i, x in enumerate(view):
        total += i * x
    return total


@_SETTINGS
@given(strided_arrays(max_ndim=3))
def test_iteration_yields_what_numpy_yields(case):
    base, make = case
    array = make(base)
    view = host_view(array)
    compiled = _items(view) if array.shape[0] else []
    python = list(view)
    expected = list(array)
    assert len(compiled) == len(python) == len(expected)
    for got, py, want in zip(compiled, python, expected, strict=True):
        if array.ndim == 1:  # elements
            assert got == want and type(got) is float and py == want
        else:  # sub-views view[i], of the same memory
            assert got.shape == py.shape == want.shape
            assert got.ptr == py.ptr == want.__array_interface__["data"][0]
            assert np.array_equal(np.asarray(got), want) and np.array_equal(np.asarray(py), want)


def test_iteration_at_three_dimensions_and_with_enumerate():
    array = np.arange(24.0).reshape(2, 3, 4)[:, ::-1, 1:]
    assert _nested_sum(host_view(array)) == array.sum()
    ints = np.arange(7, dtype=np.int32)[::-2]
    assert _enumerated(host_view(ints)) == sum(i * int(x) for i, x in enumerate(ints))


def test_iterating_a_0d_view_is_refused_as_numpy_refuses():
    view = host_view(np.zeros(()))
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        iter(np.zeros(()))
    with pytest.raises(TypeError, match="iteration over a 0-d view"):
        iter(view)
    with pytest.raises(TypingError, match="iteration over a 0-d view"):
        _items(view)


def test_iterating_float16_elements_is_refused_as_reading_them():
    view = host_view(np.zeros(3, np.float16))
    with pytest.raises(TypingError, match="float16"):
        _items(view)
    assert len(_items(host_view(np.zeros((3, 2), np.float16)))) == 3  # sub-views are fine


# ---------------------------------------------------------------------------------------
# sub-view assignment


@njit
def _put(view, index, value):
    view[index] = value


def _outcome(store, index, value):
    try:
        store(index, value)
    except TypingError:
        raise
    except Exception as error:  # noqa: BLE001 - the class and message are compared
        return type(error), str(error)
    return "ok", None


_DTYPES = [np.float64, np.float32, np.int32, np.int8, np.uint16, np.bool_, np.complex128]


@st.composite
def assignments(draw):
    """``(base, make, index, kind, value)``: ``make(base)[index] = value``, where ``value``
    is a number, an array or a view of a broadcastable shape or not, or ("overlap") the
    selected sub-array itself reversed along every axis (the same memory)."""
    dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
    base, make = draw(strided_arrays(dtype))
    array = make(base)
    index = draw(basic_indices(array.shape, max_new_axes=1))
    kind = draw(st.sampled_from(["number", "array", "view", "overlap", "wrong shape"]))
    if kind == "overlap":
        return base, make, index, kind, None
    if kind == "number":  # values every dtype holds (Numba wraps where NumPy raises)
        numbers = [3, 0, 2.75, True] + ([1.5 - 2j] if dtype.kind == "c" else [])
        return base, make, index, kind, draw(st.sampled_from(numbers))
    shape = [1 if draw(st.booleans()) else e for e in np.shape(array[index])]
    if kind == "wrong shape":
        shape = [*shape, 5] if not shape or draw(st.booleans()) else [e + 1 for e in shape]
    shape = [1] * draw(st.integers(0, 1)) + shape[draw(st.integers(0, len(shape))) :]
    value_dtype = np.dtype(draw(st.sampled_from(_DTYPES[:-1])))  # no complex into reals
    value = (np.arange(int(np.prod(shape))) * 3 % 50).reshape(shape).astype(value_dtype)
    return base, make, index, kind, value


def _stores(world, target, index, kind, value):
    """``(store, value)``: ``target[index] = value`` in one world, the value for it."""
    if kind == "overlap":
        selected = target[index]
        value = selected[(slice(None, None, -1),) * selected.ndim]
    if world == "numpy":
        return target.__setitem__, value
    if kind in ("view", "overlap"):
        value = host_view(value)
    if world == "python":
        return host_view(target).__setitem__, value
    view = BoundsCheckedView(host_view(target))
    return (lambda i, x: _put(view, i, x)), value


@_SETTINGS
@given(assignments())
def test_sub_view_assignment_agrees_with_numpy(case):
    base, make, index, kind, value = case
    array = make(base)
    try:
        plan = plan_for_values(index, array.ndim)
        array[index]
    except IndexError:
        return  # indexing errors: tests/test_parity.py
    results = {}
    for world in ("numpy", "python", "njit"):
        if world == "njit" and plan.is_element:
            continue  # one element: the element store (tests/test_parity.py)
        copy = base.copy()
        store, x = _stores(world, make(copy), index, kind, value)
        results[world] = _outcome(store, index, x), copy.tobytes()
    numpy = results["numpy"]
    assert results["python"][1] == numpy[1], (case, results)
    assert results["python"][0][0] == numpy[0][0], (case, results)  # the class
    if "njit" in results:
        assert results["njit"] == numpy, (case, results)  # the bytes, class and message


@njit
def _shift_right(view):
    view[1:] = view[:-1]


@njit
def _shift_left(view):
    view[:-1] = view[1:]


@njit
def _transpose_in_place(view):
    view[...] = view.permuted((1, 0))


def test_a_fresh_process_first_compiles_a_copy_from_a_view_or_an_array():
    """The first compile of a process is a copy (an Ellipsis index types without compiling
    anything else first): the copy's jitted helpers were registered only while typing it,
    and its lowering then failed with "Cannot determine Numba type of <class 'function'>"."""
    import subprocess
    import sys

    for value in ("V(b)", "b"):
        code = (
            "import numpy as np\nfrom numba import njit\nfrom layoutkit import StridedMemoryView\n"
            "V = StridedMemoryView.from_array_interface\n"
            "@njit\ndef put(view, index, value):\n    view[index] = value\n"
            f"a, b = np.zeros(3), np.arange(3.0)\nput(V(a), ..., {value})\n"
            "assert (a == b).all(), a\n"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-2000:]


def test_overlapping_values_are_read_before_they_are_written():
    for function, numpy in [
        (_shift_right, lambda a: a.__setitem__(slice(1, None), a[:-1])),
        (_shift_left, lambda a: a.__setitem__(slice(None, -1), a[1:])),
    ]:
        array, expected = np.arange(7.0)[::-1], np.arange(7.0)[::-1]
        function(host_view(array))
        numpy(expected)
        assert np.array_equal(array, expected)
    square = np.arange(16).reshape(4, 4)
    _transpose_in_place(host_view(square))
    assert np.array_equal(square, np.arange(16).reshape(4, 4).T)


def test_an_array_of_the_views_own_memory_is_read_before_it_is_written():
    array = np.arange(8.0)
    expected = array.copy()
    _put(host_view(array), slice(1, None), array[:-1])  # the ndarray the view was made of
    expected[1:] = expected[:-1].copy()
    assert np.array_equal(array, expected)
    grid = np.arange(12).reshape(3, 4)
    _put(host_view(grid), (slice(None), slice(None, None, -1)), grid)  # reversed columns
    assert np.array_equal(grid, np.arange(12).reshape(3, 4)[:, ::-1])


def test_0d_sub_views_and_empty_sub_views_are_assigned_as_numpy_assigns():
    array = np.arange(6.0).reshape(2, 3)
    _put(host_view(array), (1, 2, Ellipsis), 9.0)  # a 0-d sub-view
    _put(host_view(array), (0, Ellipsis), np.array(7.0))  # a 0-d value, broadcast
    _put(host_view(array), slice(0, 0), np.ones(1))  # nothing selected, extent 1 fits
    assert np.array_equal(array, [[7, 7, 7], [3, 4, 9]])


def test_datetime_elements_are_copied_between_views_of_one_dtype():
    source = np.array(["2026-01-02", "2026-03-04"], "datetime64[D]")
    target = np.zeros(3, "datetime64[D]")
    _put(host_view(target), slice(1, None), host_view(source))
    assert np.array_equal(target[1:], source)


def test_shapes_that_cannot_broadcast_raise_numpys_value_error():
    for target_shape, index, value_shape in [
        ((2, 3), (slice(None),), (2,)),
        ((2, 3), Ellipsis, (2, 2, 3)),
        ((4,), slice(1, None), (4,)),
        ((4,), slice(0, 0), (2,)),
        ((0, 3), Ellipsis, (2, 3)),
        ((3,), (0, Ellipsis), (2,)),  # a 0-d sub-view
        ((2, 3), Ellipsis, (1, 1, 2)),  # NumPy names (1,2): leading 1s dropped to ndim 2
        ((2, 3), Ellipsis, (1, 2, 1, 4)),
        ((), Ellipsis, (1, 1, 2)),
        ((1, 0), Ellipsis, (1, 0, 5)),
    ]:
        array, value = np.zeros(target_shape), np.ones(value_shape)
        with pytest.raises(ValueError) as numpy:
            array[index] = value
        with pytest.raises(ValueError) as compiled:
            _put(host_view(array), index, value)
        assert str(compiled.value) == str(numpy.value)
        assert str(numpy.value).startswith("could not broadcast input array from shape")


def test_leading_extent_one_axes_of_the_value_are_dropped_as_numpy_drops_them():
    array, expected = np.zeros((2, 3), np.int16), np.zeros((2, 3), np.int16)
    value = np.arange(3.0).reshape(1, 1, 3) + 0.5
    _put(host_view(array), (slice(None),), value)
    expected[:] = value
    assert np.array_equal(array, expected)


def test_numbers_and_values_are_cast_as_numbas_array_stores_cast():
    @njit
    def reference(array, value):
        array[1:] = value

    for dtype, value in [
        (np.int8, 300),
        (np.uint16, -1),
        (np.bool_, 0.5),
        (np.float32, np.arange(2, dtype=np.int64) + 2**40),
        (np.int32, np.array([-2.5, 2.5])),
        (np.complex64, np.array([1, 2], np.int8)),
    ]:
        array, expected = np.zeros(3, dtype), np.zeros(3, dtype)
        _put(host_view(array), slice(1, None), value)
        reference(expected, value)
        assert array.tobytes() == expected.tobytes(), (dtype, value)


def test_a_boundscheckedview_checks_the_integers_of_a_sub_view_index():
    from layoutkit import AxisError

    view = BoundsCheckedView(host_view(np.zeros((2, 3))))
    with pytest.raises(AxisError, match="view index out of bounds on axis 0"):
        _put(view, (2, slice(None)), 1.0)


def test_structured_elements_are_copied_between_views_of_one_dtype():
    dtype = np.dtype([("a", "<i4"), ("b", "<f8")])
    source = np.zeros(3, dtype)
    source["a"], source["b"] = [1, 2, 3], [0.5, 1.5, 2.5]
    source.flags.writeable = False  # a read-only structured view can be read from
    target = np.zeros(4, dtype)
    _put(host_view(target), slice(1, None), host_view(source))
    assert target[1:].tobytes() == source.tobytes() and target[0] == np.zeros((), dtype)


def _refusal(target, value, why, index=slice(None)):
    with pytest.raises(TypingError) as info:
        _put(target, index, value)
    message = str(info.value)
    assert any(why in line and len(line) < 400 for line in message.splitlines()), message


def test_what_compiled_code_does_not_assign_is_a_one_line_typing_error():
    writable = host_view(np.zeros(3))
    readonly = np.zeros(3)
    readonly.flags.writeable = False
    _refusal(host_view(readonly), 1.0, "the view is read-only")
    _refusal(host_view(np.broadcast_to(np.zeros(1), (3,))), 1.0, "the view is read-only")
    _refusal(writable, (1.0, 2.0, 3.0), "lists and tuples are not assigned")
    _refusal(writable, 1j, "cannot assign a complex128")
    _refusal(writable, np.ones(3, np.complex64), "cannot assign a array(complex64")
    _refusal(writable, "abc", "the value must be a number, a view or a NumPy array")
    records = [("a", "<i4"), ("b", "<f8")]
    _refusal(
        host_view(np.zeros(3, records)), host_view(np.zeros(3, [("a", "<i4"), ("b", "<f4")])),
        "copied only between the same dtype",
    )  # fmt: skip
    _refusal(host_view(np.zeros(3, records)), 1.0, "cannot assign a float64")
    _refusal(host_view(np.zeros(3, np.float16)), 1.0, "Numba's CPU target has no float16")
    _refusal(writable, host_view(np.zeros(3, np.float16)), "Numba's CPU target has no float16")


def test_assignment_does_not_leak_the_views_it_makes():
    import sys

    array = np.arange(6.0)
    view = host_view(array)
    before = sys.getrefcount(view), sys.getrefcount(array)
    for _ in range(50):
        _shift_right(view)
        _put(view, slice(None, None, 2), 1.0)
    assert (sys.getrefcount(view), sys.getrefcount(array)) == before


# ---------------------------------------------------------------------------------------
# CUDA kernels (compile only)


def _sum_rows(out, view):
    for row in view:
        for x in row:
            out[0] += x


def _sum_planes(out, view):
    for plane in view:
        for row in plane:
            for x in row:
                out[0] += x


def _fill_rows(out, view):
    view[1:, ::-1] = 2
    view[0] = out[0]


def _copy_rows(out, view):
    view[1] = view[0]


@pytest.fixture
def compile_ptx(monkeypatch):
    cuda = pytest.importorskip("numba.cuda")
    pytest.importorskip("layoutkit.cuda")
    import numba.cuda.dispatcher

    if not cuda.is_available():  # as tests/test_cuda_compile.py: compute capability 9.0

        class _Device:
            compute_capability = (9, 0)

        monkeypatch.setattr(numba.cuda.dispatcher, "get_current_device", lambda: _Device())
    return lambda kernel, argument_types: cuda.compile_ptx(kernel, argument_types, cc=(9, 0))[0]


def test_iteration_and_fills_compile_for_cuda(compile_ptx):
    from numba import types as nt

    from layoutkit._numba_view import numba_dtype, strided_view_type

    for dtype in (np.float32, np.float16, np.int8):  # kernels have float16 elements
        element = numba_dtype(np.dtype(dtype), for_cuda=True)
        for kernel, ndim in [(_sum_rows, 2), (_sum_planes, 3), (_fill_rows, 2)]:
            for layout in ("C", "A"):
                view = strided_view_type(element, ndim, layout)
                assert ".visible .entry" in compile_ptx(kernel, (nt.float64[:], view))
    with pytest.raises(TypingError, match="not available in CUDA kernels"):
        compile_ptx(_copy_rows, (nt.float64[:], strided_view_type(nt.float32, 2, "A")))


# ---------------------------------------------------------------------------------------
# the CUDA simulator's view (plain Python: what kernels do, run without a GPU)


def test_the_simulated_view_iterates_and_fills_as_kernels_do():
    from layoutkit.cuda._simulator import SimulatedView

    array = np.arange(24.0).reshape(2, 3, 4)[:, ::-1, 1:]
    simulated = SimulatedView.from_view(host_view(array))
    rows = list(simulated)
    assert [row.shape for row in rows] == [(3, 3), (3, 3)]
    assert [float(x) for x in simulated[1, 2]] == list(array[1, 2])
    expected = array.copy()
    simulated[1, ::-2] = 5  # a number fills a sub-view, as in a kernel
    expected[1, ::-2] = 5
    assert np.array_equal(array, expected)
    with pytest.raises(TypeError, match="iteration over a 0-d view"):
        iter(simulated[0, 0, 0, ...])
    with pytest.raises(TypeError, match="not available in CUDA kernels"):
        simulated[0] = simulated[1]  # kernels refuse to type it
