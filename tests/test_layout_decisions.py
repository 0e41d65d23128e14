"""One test per StridedLayout item of ``DECISIONS.md`` (1-11): where layoutkit does better
than the reference ``cuda.core._layout._StridedLayout``."""

import copy
import pickle

import numpy as np
import pytest
from helpers.strategies import (
    assert_zero_volume_rule,
    itemsizes,
    layout_offsets,
    layouts,
    numpy_view,
    permutations_of,
    reshape_targets,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import layoutkit
from layoutkit import AxisError, StridedLayout

FAST = settings(max_examples=150, deadline=None)


def test_1_public_class():
    assert "StridedLayout" in layoutkit.__all__
    assert layoutkit.StridedLayout is StridedLayout
    assert StridedLayout.__module__ == "layoutkit.layout"
    assert StridedLayout.__doc__ and StridedLayout.reshaped.__doc__


@pytest.mark.parametrize(
    "make",
    [
        lambda: StridedLayout([2, 3], [3, 1], 4),
        lambda: StridedLayout(np.array([2, 3]), np.array([3, 1]), np.int64(4)),
        lambda: StridedLayout((np.int32(2), np.uint8(3)), (np.int16(3), 1), 4),
        lambda: StridedLayout(range(2, 4), None, 4),
        lambda: StridedLayout.dense([2, 3], np.intc(4), stride_order=[0, 1]),
        lambda: StridedLayout.dense((2, 3), 4, stride_order=np.array([0, 1])),
        lambda: StridedLayout.dense((2, 3), 4, "F").to_dense(np.array([0, -1])),
        lambda: StridedLayout.dense((1, 2, 3), 4)[np.int64(0)],
        lambda: StridedLayout.dense((3, 2), 4, "F").permuted([np.int8(1), 0]),
        lambda: StridedLayout.dense((6,), 4).reshaped([np.int64(2), -1]),
        lambda: StridedLayout.dense((2, 3), 4).broadcast_to([np.int64(1), 2, 3]).squeezed(),
        lambda: StridedLayout.dense((2, 3), 4).unsqueezed(np.int64(1)).squeezed(),
        lambda: StridedLayout.dense((2, 3), 4)[:, np.int64(0) : np.int64(3)],
    ],
)
def test_2_sequences_and_numpy_integers_are_accepted(make):
    layout = make()
    assert layout == StridedLayout.dense((2, 3), 4)
    assert all(type(v) is int for v in layout.shape + layout._strides)
    assert type(layout.itemsize) is int


@pytest.mark.parametrize("start_axis", [0, np.int64(0), np.uint8(0)], ids=repr)
@pytest.mark.parametrize("end_axis", [-1, np.int64(-1), np.int8(-1)], ids=repr)
def test_2_integer_types_do_not_change_the_meaning_of_axes(start_axis, end_axis):
    """The defaults' values of any integer type flatten a 0-d layout as the defaults do
    (unchecked, as in cuda.core), and the axes of an n-d layout by their value."""
    scalar = StridedLayout((), (), 4)
    assert scalar.flattened(start_axis, end_axis) == scalar.flattened() == StridedLayout(
        (1,), (1,), 4
    )
    layout = StridedLayout.dense((2, 3, 4), 4)[:, :2]
    assert layout.flattened(start_axis, end_axis) == layout.flattened(0, -1)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: StridedLayout((2.0, 3), None, 4), "shape"),
        (lambda: StridedLayout((2, 3), (3.5, 1), 4), "strides"),
        (lambda: StridedLayout((2, 3), None, 4.0), "itemsize"),
        (lambda: StridedLayout("23", None, 4), "shape"),
        (lambda: StridedLayout((2, "3"), None, 4), "shape"),
        (lambda: StridedLayout.dense((2, 3), 4, stride_order=(0.0, 1)), "stride_order"),
        (lambda: StridedLayout.dense((2, 3), 4).permuted((1.0, 0)), "axis_order"),
        (lambda: StridedLayout.dense((2, 3), 4).permuted("10"), "axis_order"),
        (lambda: StridedLayout.dense((2, 3), 4).reshaped((6.0,)), "shape"),
        (lambda: StridedLayout.dense((2, 3), 4).broadcast_to((2, 3.0)), "shape"),
        (lambda: StridedLayout.dense((2, 3), 4).unsqueezed(0.0), "axis"),
        (lambda: StridedLayout.dense((2, 3), 4)[1.0], "indices"),
        (lambda: StridedLayout.dense((2, 3), 4)[:, 0.5:], "slice start"),
        (lambda: StridedLayout.dense((2, 3), 4).flattened(0.0, 1), "start_axis"),
        (lambda: StridedLayout.dense((2, 3), 4).repacked(8.0), "itemsize"),
    ],
)
def test_2_floats_and_strings_are_type_errors(call, name):
    with pytest.raises(TypeError, match=name):
        call()


def test_3_axis_error_is_index_error_and_value_error():
    assert issubclass(AxisError, IndexError) and issubclass(AxisError, ValueError)
    layout = StridedLayout.dense((2, 3), 4)
    for exc in (IndexError, ValueError, AxisError):
        with pytest.raises(exc, match="index 3 is out of bounds"):
            layout[:, 3]
        with pytest.raises(exc, match="axis_order 2"):
            layout.permuted((0, 2))
        with pytest.raises(exc, match="axis 3"):
            layout.unsqueezed(3)
    # NumPy raises IndexError for the same index
    with pytest.raises(IndexError):
        np.empty((2, 3))[:, 3]


@pytest.mark.parametrize(
    "index",
    [Ellipsis, None, (None, None), (Ellipsis, None), (0, Ellipsis, None, -1), (None, 1, ...)],
    ids=repr,
)
def test_4_none_and_ellipsis_index_like_numpy(index):
    layout = StridedLayout((3, 4, 5), (20, -5, 1), 2)[1:, ::-1]
    view = numpy_view(layout)
    result = layout[index]
    assert result.shape == view[index].shape
    assert np.array_equal(layout_offsets(result), view[index].ravel())


def test_5_overflow_is_raised_when_a_layout_is_built():
    with pytest.raises(OverflowError, match="volume"):
        StridedLayout((2**32, 2**32), (0, 0), 1)
    with pytest.raises(OverflowError, match="volume"):
        StridedLayout.dense((2**32, 2**32), 1)
    with pytest.raises(OverflowError, match="offsets"):
        StridedLayout((2, 2), (2**62, 2**62), 1)
    with pytest.raises(OverflowError, match="byte"):
        StridedLayout((2,), (2**62,), 4)
    with pytest.raises(OverflowError):
        StridedLayout.dense((2**31, 2**31), 4)  # 2**62 elements of 4 bytes
    big = StridedLayout((2**31,), (2**31,), 1)  # offsets fit; every property is then fine
    assert big.max_offset == (2**31 - 1) * 2**31


def test_5_a_zero_extent_never_overflows_in_any_order():
    for shape in [(2**40, 2**40, 0), (0, 2**40, 2**40), (2**62, 4, 0), (2**63 - 1, 0, 2**63 - 1)]:
        for order in ("C", "F"):
            layout = StridedLayout.dense(shape, 16, stride_order=order)
            assert layout.volume == 0 and layout.strides == (0, 0, 0)
        # offsets such as (2**40 - 1) * 2**58 would not fit, but no element exists
        layout = StridedLayout(shape, (2**58, -(2**58), 2**58), 16)
        assert (layout.volume, layout.offset_bounds, layout.required_size_in_bytes()) == (
            0,
            (0, -1),
            0,
        )
        # strides are kept (DECISIONS 11), so they must fit in int64 as bytes
        with pytest.raises(OverflowError, match="byte strides"):
            StridedLayout(shape, (2**62, -(2**62), 2**62), 16)


def test_6_extent_one_axes_never_block_a_merge():
    layout = StridedLayout((4, 1, 6), (6, 100, 1), 4)
    assert layout.flattened() == StridedLayout((24,), (1,), 4)
    assert layout.reshaped((24,)) == StridedLayout((24,), (1,), 4)
    assert layout.flattened_axis_mask() == 0b110
    assert np.empty((4, 1, 6))[...].reshape(24, copy=False).shape == (24,)


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_6_flattened_axis_mask_agrees_with_flattened(layout):
    mask = layout.flattened_axis_mask()
    assert layout.flattened(mask=mask) == layout.flattened()
    assert layout.flattened(mask=2**64 - 1) == layout.flattened()  # every merge allowed
    if layout.ndim:
        # every set bit is one merge
        assert layout.ndim - bin(mask).count("1") == layout.flattened().ndim


def test_7_repacked_checks_divisibility():
    with pytest.raises(ValueError, match="not a multiple"):
        StridedLayout.dense((5, 4), 4).repacked(6)  # the reference returns 5 x 4 x 6 bytes
    with pytest.raises(ValueError, match="not a divisor"):
        StridedLayout.dense((5, 4), 8).repacked(3)  # the reference returns 5 x 8 x 3 bytes
    assert StridedLayout.dense((5, 4), 4).repacked(8) == StridedLayout.dense((5, 2), 8)
    assert StridedLayout.dense((5, 4), 8).repacked(2) == StridedLayout.dense((5, 16), 2)


def test_7_repacked_to_the_same_itemsize_still_validates():
    layout = StridedLayout.dense((5, 4), 4)
    assert layout.repacked(4) is layout
    with pytest.raises(AxisError, match="axis 2"):
        layout.repacked(4, axis=2)
    with pytest.raises(TypeError, match="data_ptr"):
        layout.repacked(4, data_ptr="0")
    with pytest.raises(TypeError, match="axis"):
        layout.repacked(4, axis=None)
    with pytest.raises(ValueError, match="itemsize"):
        layout.repacked(0)


def test_8_max_compatible_itemsize_examples():
    layout = StridedLayout.dense((5, 6), 4)
    assert layout.max_compatible_itemsize(6) == 4  # the reference answers 2
    assert layout.max_compatible_itemsize(16, data_ptr=2) == 4  # the reference answers 2
    assert layout.max_compatible_itemsize(16) == 8
    assert layout.max_compatible_itemsize(12) == 12
    # the itemsize limit (2**31) is not a divisor: 2**31 - 1 is odd (the answer was 1)
    assert StridedLayout.dense((4096,), 1).max_compatible_itemsize(2**31) == 4096
    assert StridedLayout.dense((2**32,), 1).max_compatible_itemsize(2**40) == 2**30


@settings(max_examples=200, deadline=None)
@given(
    layouts(),
    st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 32, 48, 64]),
    st.integers(0, 1024),
    st.data(),
)
def test_8_max_compatible_itemsize_is_a_usable_multiple(layout, max_itemsize, data_ptr, data):
    if not layout.ndim or max_itemsize < layout.itemsize:
        return
    axis = data.draw(st.integers(-layout.ndim, layout.ndim - 1))
    size = layout.max_compatible_itemsize(max_itemsize, data_ptr, axis)
    assert size % layout.itemsize == 0 and layout.itemsize <= size <= max_itemsize
    packed = layout.repacked(size, data_ptr, axis)
    assert packed.itemsize == size
    assert packed.volume * size == layout.volume * layout.itemsize
    # the largest: every multiple of itemsize dividing max_itemsize that repacked
    # accepts divides the answer
    for candidate in range(layout.itemsize, max_itemsize + 1, layout.itemsize):
        if max_itemsize % candidate == 0:
            try:
                layout.repacked(candidate, data_ptr, axis)
            except ValueError:
                assert size % candidate != 0
            else:
                assert size % candidate == 0


def test_9_implicit_c_equals_explicit_and_layouts_are_values():
    implicit = StridedLayout((2, 3, 4), None, 8)
    explicit = StridedLayout((2, 3, 4), (12, 4, 1), 8)
    # implicit C keeps strides None (as in cuda.core) but means, and equals, C strides
    assert implicit.strides is None and implicit.strides_in_bytes is None
    assert implicit == explicit and hash(implicit) == hash(explicit)
    assert implicit == StridedLayout((2, 3, 4), (96, 32, 8), 8, divide_strides=True)
    assert StridedLayout((), None, 8).strides is None
    assert StridedLayout((), (), 8).strides == ()
    assert StridedLayout((), None, 8) == StridedLayout((), (), 8)
    assert {implicit: "a"}[explicit] == "a"
    assert implicit != StridedLayout((2, 3, 4), None, 4)
    assert implicit != implicit[1:][0:]  # a slice offset makes a different layout
    assert implicit != "StridedLayout"
    # strides of extent-1 axes are never used: they do not count
    unit = StridedLayout((2, 1, 4), (4, 99, 1), 8)
    assert unit == StridedLayout.dense((2, 1, 4), 8) and hash(unit) == hash(
        StridedLayout.dense((2, 1, 4), 8)
    )
    assert unit != StridedLayout((2, 1, 4), (5, 99, 1), 8)


@settings(max_examples=100, deadline=None)
@given(layouts())
def test_9_pickle_and_copy_round_trip(layout):
    for clone in (pickle.loads(pickle.dumps(layout)), copy.copy(layout), copy.deepcopy(layout)):
        assert clone == layout and hash(clone) == hash(layout)
        assert clone.slice_offset == layout.slice_offset
        assert np.array_equal(layout_offsets(clone), layout_offsets(layout))


def test_9_layouts_are_immutable():
    layout = StridedLayout.dense((2, 3), 4)
    for name in ("shape", "strides", "itemsize", "slice_offset", "volume"):
        with pytest.raises(AttributeError):
            setattr(layout, name, 1)
    with pytest.raises(AttributeError):
        layout.extra = 1


def test_10_is_unique_is_exact_for_interleaved_layouts():
    assert StridedLayout((2, 3), (3, 2), 1).is_unique  # the reference says False
    assert not StridedLayout((2, 3), (2, 1), 1).is_unique  # offsets 0..3 twice
    assert not StridedLayout.dense((3,), 4).broadcast_to((2, 3)).is_unique
    assert StridedLayout.dense((3,), 4).broadcast_to((1, 3)).is_unique
    # exact with strides near the int64 limits (int64 arithmetic wrapped around to True)
    assert not StridedLayout((2, 3, 2), (1, -(2**62), 2**62 + 1), 1).is_unique
    assert StridedLayout((2, 2), (2**61, -(2**61) + 1), 1).is_unique


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_10_is_unique_never_lies(layout):
    offsets = layout_offsets(layout).tolist()
    if layout.is_unique:
        assert len(set(offsets)) == len(offsets)


@st.composite
def transformed_dense(draw):
    """A dense layout (possibly big) after a random chain of the library's transforms."""
    shape = tuple(draw(st.lists(st.integers(1, 24), min_size=1, max_size=3)))
    order = draw(st.one_of(st.sampled_from(["C", "F"]), permutations_of(len(shape))))
    layout = StridedLayout.dense(shape, draw(itemsizes), order)
    for _ in range(draw(st.integers(1, 5))):
        step = draw(st.sampled_from(["permute", "slice", "reshape", "flatten", "squeeze",
                                     "unsqueeze", "repack", "broadcast"]))
        try:
            if step == "permute":
                layout = layout.permuted(draw(permutations_of(layout.ndim)))
            elif step == "slice":
                layout = layout[tuple(
                    slice(draw(st.integers(0, 3)), None, draw(st.sampled_from([1, 2, -1, -3])))
                    for _ in layout.shape
                )]
            elif step == "reshape":
                layout = layout.reshaped(draw(reshape_targets(layout.volume, max_ndim=5)))
            elif step == "flatten":
                layout = layout.flattened()
            elif step == "squeeze":
                layout = layout.squeezed()
            elif step == "unsqueeze":
                layout = layout.unsqueezed(draw(st.integers(0, layout.ndim)))
            elif step == "repack":
                layout = layout.repacked(draw(itemsizes), axis=-1)
            else:
                layout = layout.broadcast_to((1, *layout.shape))
        except ValueError:
            pass  # not possible for this layout (a reshape that needs a copy, ...)
    return layout


@settings(max_examples=150, deadline=None)
@given(transformed_dense())
def test_10_is_unique_for_every_layout_built_from_dense(layout):
    assert layout.is_unique, layout
    offsets = layout_offsets(layout)
    assert len(np.unique(offsets)) == offsets.size


def test_11_zero_volume_layouts_keep_their_strides_and_are_all_equal():
    given = StridedLayout((3, 0, 4), (7, 1, 9), 4)
    assert given.strides == (7, 1, 9) and given.slice_offset == 0  # as NumPy and the reference
    dense = StridedLayout.dense((3, 0, 4), 4)
    assert dense.strides == (0, 0, 0)
    assert given == dense and hash(given) == hash(dense)  # no index maps anywhere
    assert given.to_dense().strides == (0, 0, 0)  # the reference keeps 7, 1, 9
    assert StridedLayout.dense_like(given, "F").strides == (0, 0, 0)
    # imports keep the producer's strides: np.frombuffer(b"") has byte strides (8,)
    assert StridedLayout((0,), np.frombuffer(b"").strides, 8, divide_strides=True).strides == (1,)
    # an empty slice keeps NumPy's strides and offset (the reference zeroes every stride)
    array = np.empty((4, 5, 6), np.int8)
    empty = StridedLayout.dense((4, 5, 6), 1)[1, 0:0]
    assert (empty.shape, empty.strides, empty.slice_offset) == ((0, 6), (6, 1), 30)
    assert array[1, 0:0].strides == (6, 1)
    assert array[1, 0:0].ctypes.data - array.ctypes.data == 30
    # squeezed keeps NumPy's shape (the reference gives (0,))
    assert StridedLayout((1, 0, 1, 3), None, 2).squeezed().shape == np.empty((1, 0, 1, 3)).squeeze().shape
    assert given.broadcast_to((2, 3, 0, 4)).strides == (0, 7, 1, 9)
    assert StridedLayout.dense((3, 1), 4).broadcast_to((3, 0)).strides == (1, 0)
    assert given.reshaped((0, 5)).strides == (0, 0)
    assert given.repacked(2).strides == (0, 0, 0)
    # also along the zero extent itself, packing or unpacking (the reference: "The axis 1 extent
    # must be non-zero, got 0.")
    assert StridedLayout((5, 0), (0, 1), 8).repacked(4, axis=1) == StridedLayout.dense((5, 0), 4)
    assert StridedLayout((3, 0), (0, 1), 4).repacked(8, axis=1).strides == (0, 0)


@settings(max_examples=100, deadline=None)
@given(layouts())
def test_11_every_transform_of_a_zero_volume_layout_is_valid(layout):
    assume(0 < layout.ndim < 64)  # room for one more axis
    layout = layout[..., 5:5]  # extents are at most 5: an empty last axis
    results = [
        layout,
        layout.squeezed(),
        layout.flattened(),
        layout.unsqueezed(0),
        layout.permuted(tuple(reversed(range(layout.ndim)))),
        layout.to_dense("F"),
        layout[..., None],
        layout.reshaped((0,)),
        layout.broadcast_to((2, *layout.shape)),
    ]
    for result in results:
        assert result.volume == 0
        assert_zero_volume_rule(result)
    assert layout.to_dense("F").strides == (0,) * layout.ndim
