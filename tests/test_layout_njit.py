"""StridedLayout inside users' own ``@njit`` functions agrees with the Python class."""

import pickle

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
