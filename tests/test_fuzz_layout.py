"""Hostile layouts: wrong answers near int64's edges, memo traps, slow displays, and junk
arguments into the constructor and every method.

The rules: a layout's answers are right for every layout it accepts (``is_unique`` never
True for two indices sharing an offset, exact for volumes up to 4096;
``max_compatible_itemsize`` the largest divisor of ``max_itemsize`` that ``repacked``
accepts; ``dense`` returns an instance of the class it was called on); bad arguments get
``TypeError`` / ``ValueError`` / ``OverflowError`` / ``AxisError`` (``IndexError`` for
indexing, as NumPy does); nothing hangs.
"""

import functools
import itertools
import math

import numpy as np
from helpers.chains import HypothesisDraw, run_chain
from helpers.hostile import Cases, note
from helpers.hostile_checks import (
    DOCUMENTED,
    DOCUMENTED_OR_HOSTILE,
    check,
    check_layout,
    refused_or_ok,
)
from helpers.hostile_strategies import fuzz_case, int_likes, int_sequences, junk
from hypothesis import strategies as st

from layoutkit import StridedLayout

cases = Cases(__name__)


def _offsets(shape, strides, offset=0):
    """Every element offset, with Python ints (no wraparound)."""
    ranges = [range(e) for e in shape]
    return [offset + sum(i * s for i, s in zip(index, strides))
            for index in itertools.product(*ranges)]  # fmt: skip


# ------------------------------------------------------------------ is_unique
@cases.case
def is_unique_int64_wraparound():
    """The issue's example: offsets 1 (index (1, 0, 0)) and 1 (index (0, 1, 1)) collide."""
    layout = StridedLayout((2, 3, 2), (1, -(2**62), 2**62 + 1), 1)
    offsets = _offsets(layout.shape, layout.strides)
    check(len(set(offsets)) < len(offsets), "test premise: the layout aliases")
    check(layout.is_unique is False, f"{layout!r}.is_unique is {layout.is_unique}")


big_strides = st.one_of(
    st.integers(-6, 6),
    st.builds(
        lambda k, d, sign: sign * (2**k + d),
        st.integers(40, 62),
        st.integers(-3, 3),
        st.sampled_from([1, -1]),
    ),  # fmt: skip
)


@st.composite
def near_overflow_layouts(draw):
    """Small layouts with strides near 2**62: independent ones, or the issue's shape (an
    extent-3 axis and an extent-2 axis of opposite big strides, among small ones), where
    an int64 sum of spans wraps around."""
    if draw(st.booleans()):
        ndim = draw(st.integers(1, 4))
        shape = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
        strides = tuple(draw(st.lists(big_strides, min_size=ndim, max_size=ndim)))
        return shape, strides, 1
    sign = draw(st.sampled_from([1, -1]))
    axes = [(3, sign * (2**62 + draw(st.integers(-3, 3)))),
            (2, -sign * (2**62 + draw(st.integers(-3, 3))))]  # fmt: skip
    axes += draw(st.lists(st.tuples(st.integers(1, 3), st.integers(-6, 6)), max_size=2))
    axes = draw(st.permutations(axes))
    return tuple(a[0] for a in axes), tuple(a[1] for a in axes), 1


def _is_unique_exact(data):
    shape, strides, itemsize = data.draw(near_overflow_layouts(), label="layout")
    note((shape, strides, itemsize))
    ok, layout = refused_or_ok(StridedLayout, shape, strides, itemsize)
    if not ok:
        return
    offsets = _offsets(shape, strides)
    distinct = len(set(offsets)) == len(offsets)
    check(layout.is_unique == distinct,
          f"{layout!r}.is_unique is {layout.is_unique}; its {len(offsets)} offsets are "
          f"{'distinct' if distinct else 'not distinct'}")  # fmt: skip



cases.add("fuzz_is_unique_near_int64_edges", fuzz_case(_is_unique_exact, 400), timeout=300)
cases.add("fuzz_is_unique_near_int64_edges_long", fuzz_case(_is_unique_exact, 400, 20000),
          timeout=1800, slow=True)  # fmt: skip


# ------------------------------------------------------------------ max_compatible_itemsize
def _divisors(n):
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _expected_max_itemsize(layout, max_itemsize, data_ptr, axis):
    best = layout.itemsize
    for d in _divisors(max_itemsize):
        if d % layout.itemsize or d <= best or d >= 2**31:
            continue
        ok, _ = refused_or_ok(layout.repacked, d, data_ptr, axis)
        if ok:
            best = d
    return best


def _check_max_itemsize(layout, max_itemsize, data_ptr=0, axis=-1):
    what = f"{layout!r}.max_compatible_itemsize({max_itemsize}, {data_ptr}, {axis})"
    got = layout.max_compatible_itemsize(max_itemsize, data_ptr, axis)
    expected = _expected_max_itemsize(layout, max_itemsize, data_ptr, axis)
    check(got == expected, f"{what} is {got}; the largest usable divisor is {expected}")
    ok, exc = refused_or_ok(layout.repacked, got, data_ptr, axis)
    check(ok, f"{what} = {got}, which repacked refuses ({exc})")


@cases.case
def max_compatible_itemsize_2_31():
    """The issue's example: 2**31 is clamped to the odd 2**31 - 1, losing every divisor."""
    _check_max_itemsize(StridedLayout.dense((4096,), 1), 2**31)
    _check_max_itemsize(StridedLayout.dense((0, 0), 1), 2**31)  # empty: 2**30 (< 2**31)
    _check_max_itemsize(StridedLayout.dense((64, 4096), 4), 2**32)
    _check_max_itemsize(StridedLayout.dense((2**20,), 2), 3 * 2**31)


def _max_itemsize_fuzz(data):
    itemsize = data.draw(st.sampled_from([1, 2, 4, 8, 3, 6]))
    shape = tuple(data.draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 8, 16, 64, 4096]),
                                     min_size=1, max_size=3)))  # fmt: skip
    layout = StridedLayout.dense(shape, itemsize)
    if data.draw(st.booleans()):
        index = tuple(slice(data.draw(st.integers(0, 1)), None) for _ in shape)
        layout = layout[index]
    max_itemsize = data.draw(st.one_of(
        st.sampled_from([1, 2, 16, 64, 2**31 - 1, 2**31, 2**32, 3 * 2**30, 10**9, 2**40]),
        st.integers(1, 10**6)))  # fmt: skip
    if max_itemsize < itemsize:
        return
    data_ptr = data.draw(st.sampled_from([0, 0, 2, 16, 4096, 2**40 + 8]))
    note((layout, max_itemsize, data_ptr))
    _check_max_itemsize(layout, max_itemsize, data_ptr)


cases.add("fuzz_max_compatible_itemsize", fuzz_case(_max_itemsize_fuzz, 300), timeout=300)
cases.add("fuzz_max_compatible_itemsize_long", fuzz_case(_max_itemsize_fuzz, 300, 10000),
          timeout=1800, slow=True)  # fmt: skip


# ------------------------------------------------------------------ memo traps
class _Sub(StridedLayout):
    __slots__ = ()


@cases.case
def dense_after_subclass_dense_is_base_class():
    shape = (2, 3)
    made = _Sub.dense(shape, 4)
    check(type(made) is _Sub, f"Sub.dense gave a {type(made).__name__}")
    base = StridedLayout.dense(shape, 4)
    check(type(base) is StridedLayout,
          f"StridedLayout.dense(shape, 4) after Sub.dense(shape, 4) gave a "
          f"{type(base).__name__}: a memo handed out the subclass instance")  # fmt: skip


@cases.case
def subclass_dense_after_base_dense_is_subclass():
    shape = (3, 5)
    StridedLayout.dense(shape, 8)
    made = _Sub.dense(shape, 8)
    check(type(made) is _Sub, f"Sub.dense after StridedLayout.dense gave a {type(made).__name__}")


@cases.case
def memoised_transform_with_equal_new_tuples():
    """Results memoised by argument identity must still answer for equal, fresh arguments."""
    layout = StridedLayout.dense((2, 3, 4), 4)
    for _ in range(50):
        order = tuple([2, 0, 1])
        check(layout.permuted(order).shape == (4, 2, 3), "permuted with a fresh tuple")
        shape = tuple([4, 6])
        check(layout.reshaped(shape).shape == (4, 6), "reshaped with a fresh tuple")
        order = [1, 2, 0]  # a list has no identity guarantee: never memoised wrongly
        check(layout.permuted(order).shape == (3, 4, 2), "permuted with a list")
        order[0] = 0
        check(layout.permuted([0, 2, 1]).shape == (2, 4, 3), "permuted after a list changed")


# ------------------------------------------------------------------ extreme slice steps
@cases.case
def slicing_with_extreme_steps_matches_numpy():
    """Found by the fuzz: ``layout[::-2**63]`` raises OverflowError (and compiled code gives
    an empty axis) where NumPy clamps the step, as Python does, and gives one element. The
    stride of an extent-1 axis is never used (DECISIONS 6), so it cannot overflow."""
    for shape in ((5,), (5, 1), (2, 0), (1,)):
        base = np.empty(shape, np.float64)
        layout = StridedLayout.dense(shape, 8)
        for step in (-(2**63), -(2**63) + 1, 2**63 - 1, 2**63, -(2**64), 2**70):
            expected = base[::step]
            what = f"StridedLayout.dense({shape}, 8)[::{step}]"
            ok, got = refused_or_ok(layout.sliced, slice(None, None, step), what=what)
            check(ok, f"{what} raises {type(got).__name__}: {got}; NumPy gives shape "
                      f"{expected.shape}")  # fmt: skip
            check(got.shape == expected.shape, f"{what}: shape {got.shape}, NumPy {expected.shape}")
            if expected.size:
                offset = (expected.ctypes.data - base.ctypes.data) // 8
                check(got.slice_offset == offset,
                      f"{what}: slice_offset {got.slice_offset}, NumPy {offset}")  # fmt: skip


# ------------------------------------------------------------------ displays
@cases.case(timeout=5)
def repr_html_of_zero_volume_huge_extent_is_fast():
    """The issue's example (~25 s before): an empty layout has nothing to enumerate. A
    display takes milliseconds; 5 s is a hang, not a timing."""
    html = StridedLayout((0, 10**8, 2, 2), None, 1)._repr_html_()
    check(isinstance(html, str), "_repr_html_ did not return a string")


@cases.case(timeout=5)
def repr_html_of_empty_views_and_layouts_is_fast():
    """The same display through a view, and with the empty axis elsewhere."""
    from layoutkit import HostMemoryResource, StridedMemoryView

    layout = StridedLayout((0, 10**8, 2, 2), None, 1)
    view = StridedMemoryView.from_buffer(HostMemoryResource().allocate(0), layout, np.uint8)
    check(isinstance(view._repr_html_(), str), "view._repr_html_()")
    check(isinstance(StridedLayout((1, 0, 10**8, 2, 2), None, 1)._repr_html_(), str),
          "_repr_html_ of (1, 0, 10**8, 2, 2)")  # fmt: skip


@cases.case(timeout=5)
def repr_html_of_huge_layouts_is_fast():
    for layout in (StridedLayout((10**9, 10**9), None, 1), StridedLayout((2,) * 62, None, 1),
                   StridedLayout((10**8, 0), None, 8), StridedLayout((3, 10**9), (0, 1), 1)):  # fmt: skip
        check(isinstance(layout._repr_html_(), str), f"{layout!r}._repr_html_()")
        check(isinstance(repr(layout), str), f"repr of {layout!r}")


@cases.case(timeout=10)
def display_refuses_what_is_no_layout():
    """``layoutkit.display`` draws look-alike layouts (cuda.core's) too. Objects without
    the attributes raised AttributeError, an endless ``shape`` hung, and strides longer
    than the shape reached ``zip``'s ValueError: each is refused as the constructor
    refuses it, naming the argument."""
    from types import SimpleNamespace

    from helpers.hostile_checks import refused

    from layoutkit.display import layout_html, layout_svg, view_html

    def duck(**changes):
        values = dict(shape=(3,), strides=(-1,), itemsize=1, slice_offset=2)
        values.update(changes)
        return SimpleNamespace(**values)

    for draw in (layout_svg, layout_html):
        for junk_layout, classes in (
            (None, TypeError),
            (np.zeros(3), TypeError),
            (duck(shape=itertools.count()), ValueError),
            (duck(strides=(1, 2)), ValueError),
            (duck(slice_offset="2"), TypeError),
            (duck(slice_offset=2**63), OverflowError),
            (duck(itemsize=0), ValueError),
        ):
            refused(draw, junk_layout, classes=(classes,))
        check("<svg" in draw(duck()), f"{draw.__name__} of a valid look-alike")
    for junk_view in (None, StridedLayout.dense((2,), 1), SimpleNamespace(layout=None)):
        refused(view_html, junk_view, classes=(TypeError,))
    refused(view_html, SimpleNamespace(layout=duck(strides=())), classes=(ValueError,))


# ------------------------------------------------------------------ junk into every method
_arguments = st.one_of(int_likes, int_sequences(), junk, st.sampled_from(["C", "F", "K", "A"]))


def _call(data, name, function, *args):
    note((name, args))
    classes = (*DOCUMENTED_OR_HOSTILE, IndexError) if name in ("sliced", "[]") else (
        DOCUMENTED_OR_HOSTILE)  # fmt: skip
    ok, result = refused_or_ok(function, *args, what=f"{name}{args!r}", classes=classes)
    if ok and isinstance(result, StridedLayout):
        check_layout(result, f"{name}{args!r}")
    return ok, result


_base_layouts = st.sampled_from([
    StridedLayout.dense((2, 3, 4), 4),
    StridedLayout((3, 1, 4), (-4, 7, 1), 2),
    StridedLayout((), None, 8),
    StridedLayout.dense((0, 5), 1),
    StridedLayout.dense((4,), 8).broadcast_to((3, 4)),
    StridedLayout.dense((1,) * 64, 1),
    StridedLayout((2, 2), (2**61, 1), 2),
])  # fmt: skip

_index_items = st.one_of(
    int_likes, st.none(), st.just(Ellipsis), junk,
    st.builds(slice, st.one_of(st.none(), int_likes), st.one_of(st.none(), int_likes),
              st.one_of(st.none(), int_likes, junk)),
)  # fmt: skip

METHODS = {
    "permuted": lambda d, x: x.permuted(d.draw(_arguments)),
    "unsqueezed": lambda d, x: x.unsqueezed(d.draw(_arguments)),
    "broadcast_to": lambda d, x: x.broadcast_to(d.draw(_arguments)),
    "reshaped": lambda d, x: x.reshaped(d.draw(_arguments)),
    "flattened": lambda d, x: x.flattened(d.draw(_arguments), d.draw(_arguments)),
    "flattened(mask)": lambda d, x: x.flattened(mask=d.draw(_arguments)),
    "repacked": lambda d, x: x.repacked(*d.draw(st.lists(_arguments, min_size=1, max_size=4))),
    "max_compatible_itemsize": lambda d, x: x.max_compatible_itemsize(
        *d.draw(st.lists(_arguments, max_size=3))),
    "to_dense": lambda d, x: x.to_dense(d.draw(_arguments)),
    "dense_like": lambda d, x: StridedLayout.dense_like(d.draw(st.one_of(
        st.just(x), junk)), d.draw(_arguments)),
    "dense": lambda d, x: StridedLayout.dense(d.draw(_arguments), d.draw(_arguments),
                                              d.draw(_arguments)),
    "sliced": lambda d, x: x.sliced(d.draw(st.one_of(
        st.lists(_index_items, max_size=5).map(tuple), _index_items))),
    "[]": lambda d, x: x[d.draw(st.one_of(st.lists(_index_items, max_size=5).map(tuple),
                                          _index_items))],
    "StridedLayout": lambda d, x: StridedLayout(d.draw(_arguments), d.draw(
        st.one_of(st.none(), _arguments)), d.draw(_arguments),
        d.draw(st.one_of(st.booleans(), junk))),
    "required_size_in_bytes": lambda d, x: x.required_size_in_bytes(),
    "==": lambda d, x: x == d.draw(st.one_of(junk, _base_layouts)),
}  # fmt: skip


def _junk_calls(data):
    layout = data.draw(_base_layouts, label="layout")
    name = data.draw(st.sampled_from(sorted(METHODS)), label="method")

    def call(*_):
        return METHODS[name](data, layout)

    _call(data, name, call)
    check_layout(layout, "the layout a method was called on")  # nothing changed it


cases.add("fuzz_layout_methods_with_junk", fuzz_case(_junk_calls, 600), timeout=600)
cases.add("fuzz_layout_methods_with_junk_long", fuzz_case(_junk_calls, 600, 50000),
          timeout=3600, slow=True)  # fmt: skip


JUNK_BY_NAME = {
    "shape_raising_index": lambda: StridedLayout((2, _raising()), None, 1),
    "shape_endless": lambda: StridedLayout(_endless(), None, 1),
    "strides_endless": lambda: StridedLayout((2,), _endless(), 1),
    "permuted_endless": lambda: StridedLayout.dense((2, 3), 1).permuted(_endless()),
    "reshaped_endless": lambda: StridedLayout.dense((2, 3), 1).reshaped(_endless()),
    "dense_order_endless": lambda: StridedLayout.dense((2, 3), 1, _endless()),
    "index_endless": lambda: StridedLayout.dense((2, 3), 1)[_endless()],
}


def _raising():
    from helpers.hostile_objects import RaisingIndex

    return RaisingIndex()


def _endless():
    from helpers.hostile_objects import EndlessSequence

    return EndlessSequence()


def _named_junk(name):
    """A hostile argument by name: refused (or its own error), never a hang."""
    refused_or_ok(JUNK_BY_NAME[name], what=name, classes=(*DOCUMENTED_OR_HOSTILE, IndexError))


for _name in JUNK_BY_NAME:
    cases.add(f"layout_{_name}", functools.partial(_named_junk, _name), timeout=20)


@cases.case
def documented_classes_only_from_overflowing_transforms():
    """Transforms whose results do not fit int64 say so with OverflowError (DECISIONS 5)."""
    big = StridedLayout((2, 2), (2**61, 1), 2)
    for name, call in {
        "broadcast_to": lambda: big.broadcast_to((2**40, 2**40, 2, 2)),
        "unsqueezed": lambda: StridedLayout((2**62,), (1,), 1).unsqueezed(0),
        "reshaped": lambda: StridedLayout.dense((2**31, 2**31), 1).reshaped((2**62,)),
        "repacked": lambda: StridedLayout((2, 8), (2**60, 1), 1).repacked(8),
        "dense": lambda: StridedLayout.dense((2**32, 2**32), 1),
        "sliced": lambda: StridedLayout((3,), (2**62,), 1)[::-1],
    }.items():
        ok, result = refused_or_ok(call, what=name, classes=DOCUMENTED)
        if ok:
            check_layout(result, name)


# ------------------------------------------------------------------ transform chains
def _transform_chain(data):
    """5-15 random transforms with properties read in random order along the way: after
    each step the layout answers every property as a fresh layout of the same values
    does (nothing carried over or cached wrongly) and maps indices as NumPy's view."""
    run_chain(HypothesisDraw(data))


cases.add("fuzz_transform_chains", fuzz_case(_transform_chain, 150), timeout=120)
cases.add("fuzz_transform_chains_long", fuzz_case(_transform_chain, 150, 20000),
          timeout=1800, slow=True)  # fmt: skip


cases.export(globals())
