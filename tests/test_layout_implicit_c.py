"""Implicit C strides (``strides=None``): the public tri-state, as cuda.core keeps it.

``strides`` and ``strides_in_bytes`` stay ``None`` for a layout built with
``strides=None`` and for the calls that return such a layout itself; every other
operation gives explicit strides. The layout still means, equals and hashes as its C
strides (DECISIONS 9), and everything inside layoutkit reads the explicit ones.
"""

import copy
import pickle

import numpy as np
import pytest

from layoutkit import StridedLayout, StridedMemoryView
from layoutkit.copy.plan import plan_copy

SHAPES = [(), (5,), (2, 3), (2, 1, 4), (3, 0, 2), (1,), (0,)]


def implicit(shape, itemsize=4):
    return StridedLayout(shape, None, itemsize)


@pytest.mark.parametrize("shape", SHAPES)
def test_strides_none_is_kept(shape):
    layout = implicit(shape)
    assert layout.strides is None and layout.strides_in_bytes is None
    explicit = StridedLayout.dense(shape, 4)
    assert explicit.strides is not None  # dense() is explicit, as in cuda.core
    assert layout == explicit and hash(layout) == hash(explicit)
    assert layout.shape == shape and layout.slice_offset == 0
    # the derived values are those of the C strides
    for name in ("volume", "offset_bounds", "is_contiguous_c", "is_dense", "is_unique"):
        assert getattr(layout, name) == getattr(explicit, name), name
    assert layout.stride_order == explicit.stride_order


def test_divide_strides_is_ignored_with_none():
    layout = StridedLayout((2, 3), None, 8, divide_strides=True)
    assert layout.strides is None and layout == StridedLayout.dense((2, 3), 8)


def test_0d_tuple_stays_a_tuple():
    assert StridedLayout((), (), 8).strides == ()
    assert StridedLayout((), (), 8).strides_in_bytes == ()
    assert StridedLayout((), None, 8).strides is None
    assert StridedLayout((), None, 8) == StridedLayout((), (), 8)


def test_explicit_c_strides_stay_explicit():
    layout = StridedLayout((2, 3), (3, 1), 4)
    assert layout.strides == (3, 1) and layout.strides_in_bytes == (12, 4)
    assert layout.to_dense() is layout  # an identity return keeps what it was given


@pytest.mark.parametrize("shape", [(2, 3), (5,), ()])
def test_identity_returns_keep_none(shape):
    """Reference 1.8: these calls return ``self`` (so None survives)."""
    layout = implicit(shape)
    assert layout.to_dense() is layout
    assert layout.to_dense("C") is layout
    assert StridedLayout.dense_like(layout) is layout
    assert StridedLayout.dense_like(layout, "C") is layout
    assert layout.repacked(4) is layout
    assert layout.unsqueezed(()) is layout


@pytest.mark.parametrize("shape", [(2, 3), (5,), ()])
def test_an_order_given_as_a_sequence_is_never_an_identity_return(shape):
    """Reference 1.4: a tuple order never returns the same object (not even for 0-d)."""
    identity = tuple(range(len(shape)))
    for layout in (implicit(shape), StridedLayout.dense(shape, 4)):
        for order in (identity, list(identity)):
            dense = layout.to_dense(order)
            assert dense is not layout and dense == layout
            assert dense.strides == StridedLayout.dense(shape, 4).strides


def test_dense_like_f_of_a_1d_implicit_layout_is_itself():
    layout = implicit((5,))  # dense and F-contiguous: cuda.core returns it as well
    assert layout.to_dense("F") is layout and layout.strides is None


def test_zero_volume_implicit_layout():
    layout = implicit((3, 0, 2))
    assert layout.strides is None and layout.to_dense() is layout
    assert layout.permuted((2, 0, 1)).strides == (0, 0, 0)  # DECISIONS 11: all zero


def test_transforms_give_explicit_strides():
    layout = implicit((2, 3, 4))
    results = {
        "to_dense('F')": layout.to_dense("F"),
        "to_dense(order)": layout.to_dense((0, 1, 2)),
        "permuted(identity)": layout.permuted((0, 1, 2)),
        "flattened()": layout.flattened(),
        "flattened(0, 0)": layout.flattened(0, 0),
        "squeezed()": layout.squeezed(),
        "reshaped(same)": layout.reshaped((2, 3, 4)),
        "broadcast_to(same)": layout.broadcast_to((2, 3, 4)),
        "unsqueezed(0)": layout.unsqueezed(0),
        "layout[()]": layout[()],
        "layout[:]": layout[:],
        "sliced": layout.sliced((slice(None),)),
        "repacked(8)": layout.repacked(8),
    }
    for name, result in results.items():
        assert result.strides is not None, name
        assert result.strides_in_bytes == tuple(s * result.itemsize for s in result.strides)
    assert results["permuted(identity)"] == layout
    assert results["permuted(identity)"].strides == (12, 4, 1)
    assert implicit(()).flattened().strides == (1,)
    assert implicit(()).squeezed().strides == ()
    assert implicit(()).unsqueezed(0).strides == (1,)


def test_equality_and_hash_by_meaning():
    a, b = implicit((2, 3, 4), 8), StridedLayout((2, 3, 4), (12, 4, 1), 8)
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a != implicit((2, 3, 4), 4)
    assert a != StridedLayout((2, 3, 4), (1, 2, 6), 8)


@pytest.mark.parametrize("shape", SHAPES)
def test_repr_and_pickle_round_trip(shape):
    layout = implicit(shape)
    assert repr(layout) == f"StridedLayout(shape={shape}, strides=None, itemsize=4)"
    rebuilt = eval(repr(layout), {"StridedLayout": StridedLayout})
    assert rebuilt.strides is None and rebuilt == layout
    for clone in (pickle.loads(pickle.dumps(layout)), copy.copy(layout), copy.deepcopy(layout)):
        assert clone.strides is None and clone == layout and hash(clone) == hash(layout)
    explicit = StridedLayout.dense(shape, 4)
    assert pickle.loads(pickle.dumps(explicit)).strides == explicit.strides


class Tagged(StridedLayout):
    pass


def test_subclass_pickle_and_identity_copies_keep_none():
    layout = Tagged((2, 3), None, 4)
    assert layout.strides is None
    assert pickle.loads(pickle.dumps(layout)).strides is None
    assert type(pickle.loads(pickle.dumps(layout))) is Tagged
    # methods of subclasses return plain layouts, with the flag where they return "self"
    assert type(layout.repacked(4)) is StridedLayout and layout.repacked(4).strides is None
    assert layout.unsqueezed(()).strides is None
    assert Tagged.dense_like(implicit((2, 3))).strides is None
    assert StridedLayout.dense_like(layout).strides is None


def test_crafted_pickle_state_is_still_refused():
    layout = Tagged((2, 3), None, 4)
    with pytest.raises(TypeError, match="cannot set the state"):
        layout.__setstate__({"_given_strides": (1, 1)})
    with pytest.raises(TypeError, match="cannot set the state"):
        implicit((2, 3)).__setstate__({})


def test_views_keep_implicit_strides_and_exports_use_explicit_ones():
    a = np.arange(12, dtype=np.int32)
    buffer = StridedMemoryView.from_array_interface(a).buffer
    view = StridedMemoryView.from_buffer(buffer, (3, 4), None, dtype=np.int32)
    assert view.layout.strides is None  # the layout built from strides=None, as given
    assert view.strides is None  # the view's strides are its layout's, as in cuda.core
    assert view.__array_interface__["strides"] == (16, 4)  # exports are explicit
    np.testing.assert_array_equal(np.from_dlpack(view), a.reshape(3, 4))
    np.testing.assert_array_equal(np.asarray(view), a.reshape(3, 4))
    assert "strides=None" in repr(view)


def test_copy_planner_reads_explicit_strides():
    plan = plan_copy(implicit((3, 4), 8), implicit((3, 4), 8))
    assert plan.method == "memcpy" or plan.shape == (12,)


def test_display_draws_implicit_layouts():
    from layoutkit.display import layout_html, layout_svg

    assert "<svg" in layout_svg(implicit((2, 3)))
    assert "None" in layout_html(implicit((2, 3)))  # the property table shows strides=None


def test_compiled_code_sees_and_returns_explicit_strides():
    from numba import njit

    @njit
    def strides_of(layout):
        return layout.strides

    @njit
    def build(shape):
        return StridedLayout(shape, None, 4)

    assert strides_of(implicit((2, 3))) == (3, 1)
    built = build((2, 3))
    assert built.strides == (3, 1) and built == implicit((2, 3))


def test_compiled_code_reads_views_of_implicit_layouts():
    from numba import njit

    @njit
    def read(view):
        return view.strides, view[1, 2]

    a = np.arange(12, dtype=np.int32)
    buffer = StridedMemoryView.from_array_interface(a).buffer
    view = StridedMemoryView.from_buffer(buffer, (3, 4), None, dtype=np.int32)
    assert view.layout.strides is None
    assert read(view) == ((4, 1), 6)

    class Exporter:  # an __array_interface__ without strides: C order
        __array_interface__ = {**a.__array_interface__, "shape": (3, 4), "strides": None}

    exported = StridedMemoryView.from_array_interface(Exporter())
    assert exported.layout.strides is None and exported.strides is None
    assert read(exported) == ((4, 1), 6)
