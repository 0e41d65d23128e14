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
