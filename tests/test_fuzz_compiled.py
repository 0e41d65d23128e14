"""Hostile arguments to views and layouts inside ``@njit`` code.

The rules (issue 9): compiled code makes the same checks as Python for every transform
that takes axes or a layout (an axis order with a repeat or an axis out of range, a layout
reaching outside the view's memory, an index out of range, a result that overflows int64)
and raises ``ValueError`` / ``IndexError`` / ``OverflowError`` / ``TypeError`` where
Python does, instead of returning garbage; ``@njit(boundscheck=True)`` and
``NUMBA_BOUNDSCHECK=1`` check view indices as they check ndarray indices
(``IndexError``). Axis orders and indices are passed as runtime arguments, so no check
can be folded away at compile time.
"""

import functools

import numpy as np
from helpers.hostile import Cases, note
from helpers.hostile_checks import Poisoned, check, host_view, plain, refused, refused_or_ok
from helpers.hostile_strategies import fuzz_case
from hypothesis import strategies as st
from numba import njit

from layoutkit import StridedLayout, StridedMemoryView

cases = Cases(__name__)
COMPILED_ERRORS = (ValueError, IndexError, OverflowError, TypeError)
BOUNDSCHECK = {"NUMBA_BOUNDSCHECK": "1"}


def _view3():
    """A view of exactly three float64s (its buffer is 24 bytes) inside canary memory."""
    block = Poisoned(24)
    array = block.array(np.float64, (3,))
    view = StridedMemoryView.from_buffer(host_view(array).buffer, StridedLayout.dense((3,), 8),
                                         np.float64)  # fmt: skip
    return view, array, block


def _view2x3():
    block = Poisoned(48)
    array = block.array(np.float64, (2, 3))
    return host_view(array), array, block


# ------------------------------------------------------------------ compiled view transforms
@njit(cache=True)
def _permuted_shape(view, order):
    return view.permuted(order).shape


@njit(cache=True)
def _permuted_read(view, order):
    return view.permuted(order)[1, 0]


@njit(cache=True)
def _with_layout_read(view, layout, index):
    return view.with_layout(layout)[index]


@njit(cache=True, boundscheck=True)
def _with_layout_read_checked(view, layout, index):
    return view.with_layout(layout)[index]


@njit(cache=True)
def _with_layout_shape(view, layout):
    return view.with_layout(layout).shape


PERMUTATIONS = {"repeated_axis": (0, 0), "axis_past_the_end": (0, 5), "axis_below_minus_ndim": (0, -3),
                "both_bad": (7, 7)}  # fmt: skip


def _permuted(name, function):
    view, _, block = _view2x3()
    order = PERMUTATIONS[name]
    refused(StridedLayout.dense((2, 3), 8).permuted, order, what="Python's permuted (premise)")
    ok, result = refused_or_ok(function, view, order, classes=COMPILED_ERRORS,
                               what=f"@njit view.permuted({order})")  # fmt: skip
    check(not ok, f"@njit view.permuted({order}) of a (2, 3) view was accepted and gave "
                  f"{result!r}; Python raises for it")  # fmt: skip
    block.untouched(f"@njit view.permuted({order})")


for _name in PERMUTATIONS:
    cases.add(f"njit_view_permuted_{_name}", functools.partial(_permuted, _name, _permuted_shape),
              timeout=120)  # fmt: skip
    cases.add(f"njit_view_permuted_{_name}_then_read",
              functools.partial(_permuted, _name, _permuted_read), timeout=120)  # fmt: skip


WITH_LAYOUTS = {
    "past_the_buffer": (StridedLayout.dense((100,), 8), 99),
    "stride_past_the_buffer": (StridedLayout((2,), (3,), 8), 1),
    "before_the_buffer": (StridedLayout((2,), (-1,), 8), 1),
    "other_itemsize": (StridedLayout.dense((6,), 4), 5),
}


def _with_layout(name, function):
    view, _, block = _view3()
    layout, index = WITH_LAYOUTS[name]
    refused(view.view, layout, what=f"Python's view.view({layout!r}) (premise)")
    ok, result = refused_or_ok(function, view, layout, index, classes=COMPILED_ERRORS,
                               what=f"@njit view.with_layout({layout!r})[{index}]")  # fmt: skip
    check(not ok, f"@njit view.with_layout({layout!r}) of a 3-element view was accepted and "
                  f"read {result!r}; Python's view() refuses that layout")  # fmt: skip
    block.untouched("with_layout")


for _name in WITH_LAYOUTS:
    cases.add(f"njit_view_with_layout_{_name}",
              functools.partial(_with_layout, _name, _with_layout_read), timeout=120)  # fmt: skip
    cases.add(f"njit_boundscheck_view_with_layout_{_name}",
              functools.partial(_with_layout, _name, _with_layout_read_checked), timeout=120)  # fmt: skip


# ------------------------------------------------------------------ bounds checking
@njit(cache=True, boundscheck=True)
def _get_checked(view, i):
    return view[i]


@njit(cache=True, boundscheck=True)
def _put_checked(view, i):
    view[i] = 1.0


@njit(cache=True, boundscheck=True)
def _get2_checked(view, i, j):
    return view[i, j]


@njit(cache=True, boundscheck=True)
def _get_sliced_checked(view, i):
    return view[1:][i]


@njit
def _get(view, i):
    return view[i]


@njit
def _put(view, i):
    view[i] = 1.0


@njit
def _get2(view, i, j):
    return view[i, j]


def _out_of_range(kind, getter, putter, getter2):
    """An index out of range raises IndexError for a view as for an ndarray."""
    view, array, block = _view3()
    if kind == "get":
        for i in (3, 100, -4, 2**40):
            refused(getter, array.copy(), i, classes=(IndexError,), what="ndarray (premise)")
            refused(getter, view, i, classes=(IndexError,), what=f"v[{i}] on a 3-element view")
    elif kind == "put":
        for i in (3, 100, -4):
            refused(putter, view, i, classes=(IndexError,), what=f"v[{i}] = 1.0, 3 elements")
        block.untouched("stores out of range")
    else:
        view, array, block = _view2x3()
        for i, j in ((0, 3), (2, 0), (-3, 0), (0, -4)):
            refused(getter2, array.copy(), i, j, classes=(IndexError,), what="ndarray (premise)")
            refused(getter2, view, i, j, classes=(IndexError,), what=f"v[{i}, {j}] on (2, 3)")


for _kind in ("get", "put", "get2"):
    cases.add(f"njit_boundscheck_decorator_{_kind}_out_of_range",
              functools.partial(_out_of_range, _kind, _get_checked, _put_checked, _get2_checked),
              timeout=120)  # fmt: skip
    cases.add(f"njit_boundscheck_environment_{_kind}_out_of_range",
              functools.partial(_out_of_range, _kind, _get, _put, _get2), timeout=120,
              env=BOUNDSCHECK)  # fmt: skip


@cases.case(timeout=120)
def njit_boundscheck_decorator_derived_view_out_of_range():
    view, _, _ = _view3()
    refused(_get_sliced_checked, view, 2, classes=(IndexError,), what="v[1:][2], 3 elements")


@cases.case(timeout=120)
def njit_in_range_reads_are_right():
    """The premise of the cases above: in-range indices read the right elements."""
    view, array, _ = _view3()
    for i in (0, 1, 2, -1, -3):
        check(_get_checked(view, i) == array[i], f"boundscheck v[{i}]")
        check(_get(view, i) == array[i], f"v[{i}]")


# ------------------------------------------------------------------ views of unusual dtypes
@njit
def _size(view):
    return view.size


def _unusual_dtype_views():
    import ml_dtypes

    yield (
        "no dtype",
        StridedMemoryView.from_buffer(
            host_view(np.zeros(4)).buffer, StridedLayout.dense((4,), 8), None
        ),
    )
    for dtype in (np.float16, ml_dtypes.bfloat16, ">f8", "V8", "M8[s]", "U4", "c8", "?",
                  [("a", "<f4"), ("b", "<i4")]):  # fmt: skip
        yield str(dtype), host_view(np.zeros(4, dtype))


@njit
def _first_put(view, value):
    old = view[0]
    view[0] = value
    return old


@cases.case(timeout=120)
def bounds_checked_view_cannot_be_given_another_view_or_a_duck():
    """``BoundsCheckedView``'s Numba type is made for the view it wraps: putting another
    view in (``checked.view = uint8_view``) had compiled code read 8-byte elements of a
    10-byte buffer and write into read-only ``bytes``; a duck with a view's attributes
    and ``ptr`` 8 was wrapped and read at address 8 (segfault)."""
    from layoutkit import BoundsCheckedView

    block = Poisoned(80)
    checked = BoundsCheckedView(host_view(block.array(np.float64, (10,))))
    memory = bytes(80)
    for name, other in (
        ("view", host_view(np.arange(10, dtype=np.uint8))),
        ("view", StridedMemoryView.from_array_interface(np.frombuffer(memory))),
        ("_numba_type_", BoundsCheckedView(host_view(np.arange(10, dtype=np.uint8)))._numba_type_),
    ):  # fmt: skip
        refused(setattr, checked, name, other, what=f"BoundsCheckedView.{name} = {other!r}",
                classes=(AttributeError,))  # fmt: skip
    check(memory == bytes(80), "compiled code wrote into read-only bytes")
    real = host_view(block.array(np.float64, (10,)))
    duck = type("Duck", (), {name: getattr(real, name) for name in
                             ("layout", "dtype", "readonly", "shape", "ndim")})()  # fmt: skip
    duck.ptr, duck._buffer, duck._numba_record = 8, None, None
    refused(BoundsCheckedView, duck, what="BoundsCheckedView of a duck with ptr 8",
            classes=(TypeError,))  # fmt: skip
    expected = block.array(np.float64, (10,)).copy()
    old = _first_put(checked, 1.0)
    check(old == expected[0] or (np.isnan(old) and np.isnan(expected[0])),
          "the wrapped view was not the one given")  # fmt: skip
    expected[0] = 1.0
    block.only_changed(expected, "a store through the checked view")


@njit(cache=True)
def _cached_first(view):
    return view[0]


@cases.case(timeout=120)
def njit_argument_claiming_the_view_type_is_not_trusted():
    """Any object may claim a view's Numba type through ``_numba_type_``: one doing so with
    a forged ``_numba_record`` (data at address 8) was unboxed from it and read there
    (segfault). Unboxing checks the class first, in cached code as well."""
    import struct

    real = host_view(np.arange(10.0))
    forged = (real._numba_type_, struct.pack("=6q", 1, 8, 0, 10, 10, 1))
    duck = type("Duck", (), {"_numba_type_": real._numba_type_, "_buffer": None,
                             "_numba_record": forged})()  # fmt: skip
    for function, args in ((_cached_first, ()), (_get, (0,))):
        refused(function, duck, *args, classes=(TypeError,),
                what=f"{function.__name__} of a duck claiming {real._numba_type_}")  # fmt: skip
    check(_cached_first(real) == 0.0, "a real view after the duck")


@njit(cache=True)
def _cached_with_layout_put(view, layout, index, value):
    made = view.with_layout(layout)
    made[index] = value
    return made.layout


class _ShadowedShape(StridedLayout):
    """Shadows the ``_shape`` slot: its constructor's value is dropped, reads say 2**62+1."""

    __slots__ = ()
    _shape = property(lambda self: ((1 << 62) + 1,), lambda self, value: None)


class _StoresALie(StridedLayout):
    """Stores 2**62+1 as its shape, past the checks its constructor made."""

    def __setattr__(self, name, value):
        object.__setattr__(self, name, ((1 << 62) + 1,) if name == "_shape" else value)


class _AddsAMethod(StridedLayout):
    shape = (99,)  # a public property may lie: compiled code reads the checked values

    def extra(self):
        return 1


@cases.case(timeout=300)
def njit_and_cuda_layout_arguments_are_read_through_their_checked_values():
    """The layout unboxer (and the CUDA argument handler) read ``_shape`` / ``_strides`` /
    ``_itemsize`` / ``_offset`` as attributes of whatever claimed the layout type: a
    subclass shadowing the ``_shape`` slot, one storing a shape its constructor never
    checked, a duck with ``_numba_type_`` (with or without a ``__class__`` property)
    passed shape 2**62+1 with stride 4, whose offset bounds wrap to (0, 0) in compiled
    code: ``with_layout`` of a 4-element view accepted it and the store wrote far past
    the buffer (segfault). Anything but exactly a StridedLayout is read through
    plain_layout: a subclass gives its constructor's checked values (here a 4-element
    layout of stride 4, which the 4-element view refuses: ValueError), anything else is
    refused (TypeError or OverflowError); a subclass adding methods still works."""
    from layoutkit._numba_layout import layout_type
    from layoutkit.cuda._extension import ViewArgumentHandler

    extension = ViewArgumentHandler()

    huge = (1 << 62) + 1
    duck = {"_numba_type_": layout_type(1), "_shape": (huge,), "_strides": (4,),
            "_itemsize": 8, "_offset": 0}  # fmt: skip
    lookalikes = (
        type("Duck", (), duck)(),
        type("ClaimsTheClass", (), {**duck, "__class__": property(lambda self: StridedLayout)})(),
    )
    block = Poisoned(32)
    view = host_view(block.array(np.float64, (4,)))
    for layout in lookalikes:
        refused(_cached_with_layout_put, view, layout, 1 << 24, 1.0, classes=(TypeError, OverflowError),
                what=f"@njit with_layout of a {type(layout).__name__}")  # fmt: skip
        refused(extension.prepare_args, layout_type(1), layout, classes=(TypeError, OverflowError),
                what=f"CUDA argument of a {type(layout).__name__}")  # fmt: skip
    for layout in (_ShadowedShape((4,), (4,), 8), _StoresALie((4,), (4,), 8)):
        refused(_cached_with_layout_put, view, layout, 1 << 24, 1.0, classes=(ValueError,),
                what=f"@njit with_layout of a {type(layout).__name__}")  # fmt: skip
        values = extension.prepare_args(layout_type(1), layout)[1]
        check(values == (4, 4, 8, 0), f"the CUDA argument of a {type(layout).__name__}: {values}")
    block.untouched("compiled stores through lying layouts")
    expected = block.array(np.float64, (4,)).copy()
    fine = _AddsAMethod((2,), (2,), 8)
    made = _cached_with_layout_put(view, fine, 1, 5.0)
    check(type(made) is StridedLayout and made == StridedLayout((2,), (2,), 8),
          f"a layout subclass came back from compiled code as {made!r}")  # fmt: skip
    check(extension.prepare_args(layout_type(1), fine)[1] == (2, 2, 8, 0),
          "the CUDA argument of a layout subclass")  # fmt: skip
    expected[2] = 5.0
    block.only_changed(expected, "a store through a subclass layout")


@cases.case(timeout=300)
def njit_views_of_unusual_dtypes_work_or_fail_typing():
    """Found while fuzzing: a float16 view passed to @njit raises a bare NotImplementedError
    from Numba's lowering; unsupported dtypes must be a typing error that says so."""
    from numba.core.errors import TypingError

    for name, view in _unusual_dtype_views():
        ok, result = refused_or_ok(_size, view, what=f"@njit of a {name} view",
                                   classes=(TypeError, TypingError))  # fmt: skip
        if ok:
            check(result == 4, f"@njit size of a {name} view is {result}")


@njit
def _element_of(view, i):
    return view[i]


@cases.case(timeout=300)
def njit_elements_without_a_numba_type_are_refused_by_their_dtype():
    """Found auditing dtypes: a view of a sub-array dtype (``'(2,3)f4'``, as ``from_buffer``
    or ``view(dtype=...)`` make one) typed its elements as Numba's nested array, whose
    compiled form is a 72-byte array structure, not the element's 24 bytes: ``v[1]``
    stepped 72 bytes an element and read that structure from the data (``v[1][0, 1]``
    gave garbage or a segfault). Its elements, like those of non-native byte order or of
    a size no integer has, are a typing error naming the dtype as NumPy writes it
    (``'>u2'``, not ``'uint16'``), whose advice (no ``numpy.uint56``) works."""
    from numba.core.errors import TypingError

    from layoutkit._numba_view import OpaqueElement, numba_dtype

    for spelling in ("(2,3)f4", ">u2", ">f8", "V7", [("a", ">i4"), ("b", "u1")]):
        dtype = np.dtype(spelling)
        array = np.arange(4 * dtype.itemsize, dtype=np.uint8).view(f"V{dtype.itemsize}")
        view = host_view(array).view(dtype=dtype)
        for for_cuda in (False, True):
            check(isinstance(numba_dtype(dtype, for_cuda), OpaqueElement),
                  f"{dtype} (for_cuda={for_cuda}) has a Numba element type")  # fmt: skip
        error = refused(_element_of, view, 1, what=f"@njit v[1] of a {dtype} view",
                        classes=(TypingError,))  # fmt: skip
        line = next((line for line in str(error).splitlines() if "cannot be read" in line), "")
        check(f"elements of a {dtype} view" in line, f"{dtype}: the message says {line!r}")
        if dtype.itemsize in (1, 2, 4, 8):
            check(f"numpy.uint{8 * dtype.itemsize})" in line, f"{dtype}: {line!r}")
            raw = view.view(dtype=f"u{dtype.itemsize}")
            check(_element_of(raw, 1) == np.asarray(raw)[1], f"{dtype}: the raw element")
        else:
            check("repacked(1), numpy.uint8" in line and "numpy.uint" + str(8 * dtype.itemsize)
                  not in line, f"{dtype}: {line!r}")  # fmt: skip
            raw = view.view(view.layout.repacked(1), np.uint8)
            check(_element_of(raw, dtype.itemsize + 1) == dtype.itemsize + 1,
                  f"{dtype}: the raw byte of element 1")  # fmt: skip
        check(_size(view) == 4, f"@njit size of a {dtype} view")
    sub = host_view(np.arange(24, dtype=np.float32).view("V24")).view(dtype="(2,3)f4")
    check(np.array_equal(sub[0], np.arange(6, dtype=np.float32).reshape(2, 3)),
          "Python reads a sub-array element")  # fmt: skip


# ------------------------------------------------------------------ compiled layouts vs Python
@njit(cache=True)
def _c_permuted(layout, order):
    return layout.permuted(order)


@njit(cache=True)
def _c_reshaped(layout, shape):
    return layout.reshaped(shape)


@njit(cache=True)
def _c_broadcast_to(layout, shape):
    return layout.broadcast_to(shape)


@njit(cache=True)
def _c_unsqueezed(layout, axis):
    return layout.unsqueezed(axis)


@njit(cache=True)
def _c_repacked(layout, itemsize, data_ptr, axis):
    return layout.repacked(itemsize, data_ptr, axis)


@njit(cache=True)
def _c_max_compatible_itemsize(layout, max_itemsize, data_ptr, axis):
    return layout.max_compatible_itemsize(max_itemsize, data_ptr, axis)


@njit(cache=True)
def _c_getitem(layout, i, j):
    return layout[i, j]


@njit(cache=True)
def _c_getitem_step(layout, step):
    return layout[::step]


@njit(cache=True)
def _c_is_unique(layout):
    return layout.is_unique


_L23 = StridedLayout.dense((2, 3), 8)
_L11 = StridedLayout.dense((1, 1), 8)
_LBIG = StridedLayout((2, 2), (2**60, 1), 4)

DIFFERENTIAL = {
    "permuted_repeat": (_c_permuted, lambda x, a: x.permuted(a), (_L23, (1, 1))),
    "permuted_out_of_range": (_c_permuted, lambda x, a: x.permuted(a), (_L23, (0, 2))),
    "reshaped_volume": (_c_reshaped, lambda x, a: x.reshaped(a), (_L23, (7, 1))),
    "reshaped_two_unknowns": (_c_reshaped, lambda x, a: x.reshaped(a), (_L23, (-1, -1))),
    "reshaped_negative": (_c_reshaped, lambda x, a: x.reshaped(a), (_L23, (-2, -3))),
    "broadcast_mismatch": (_c_broadcast_to, lambda x, a: x.broadcast_to(a), (_L23, (2, 5))),
    "broadcast_negative": (_c_broadcast_to, lambda x, a: x.broadcast_to(a), (_L23, (-2, 3))),
    "broadcast_volume_overflow": (_c_broadcast_to, lambda x, a: x.broadcast_to(a),
                                  (_L11, (2**62, 4))),
    "broadcast_extent_overflow": (_c_broadcast_to, lambda x, a: x.broadcast_to(a),
                                  (_L11, (2**63 - 1, 2))),
    "unsqueezed_out_of_range": (_c_unsqueezed, lambda x, a: x.unsqueezed(a), (_L23, 5)),
    "unsqueezed_below": (_c_unsqueezed, lambda x, a: x.unsqueezed(a), (_L23, -4)),
    "unsqueezed_stride_overflow": (_c_unsqueezed, lambda x, a: x.unsqueezed(a), (_LBIG, 0)),
    "repacked_not_multiple": (_c_repacked, lambda x, *a: x.repacked(*a), (_L23, 12, 0, -1)),
    "repacked_misaligned": (_c_repacked, lambda x, *a: x.repacked(*a), (_L23, 16, 8, -1)),
    "repacked_axis": (_c_repacked, lambda x, *a: x.repacked(*a), (_L23, 4, 0, 5)),
    "repacked_zero": (_c_repacked, lambda x, *a: x.repacked(*a), (_L23, 0, 0, -1)),
    "repacked_huge": (_c_repacked, lambda x, *a: x.repacked(*a), (_L23, 2**40, 0, -1)),
    "max_itemsize_zero": (_c_max_compatible_itemsize,
                          lambda x, *a: x.max_compatible_itemsize(*a), (_L23, 0, 0, -1)),
    "max_itemsize_axis": (_c_max_compatible_itemsize,
                          lambda x, *a: x.max_compatible_itemsize(*a), (_L23, 16, 0, 2)),
    "max_itemsize_2_31": (_c_max_compatible_itemsize,
                          lambda x, *a: x.max_compatible_itemsize(*a),
                          (StridedLayout.dense((2, 4096), 1), 2**31, 0, -1)),
    "max_itemsize_2_31_empty": (_c_max_compatible_itemsize,
                                lambda x, *a: x.max_compatible_itemsize(*a),
                                (StridedLayout.dense((0, 0), 1), 2**31, 0, 0)),
    "getitem_out_of_range": (_c_getitem, lambda x, i, j: x[i, j], (_L23, 0, 3)),
    "getitem_below": (_c_getitem, lambda x, i, j: x[i, j], (_L23, -3, 0)),
    "getitem_step_zero": (_c_getitem_step, lambda x, s: x[::s], (_L23, 0)),
    # found by the fuzz: a step of -2**63 gave an empty axis (NumPy: one element)
    "getitem_step_int64_min": (_c_getitem_step, lambda x, s: x[::s],
                               (StridedLayout.dense((5, 1), 8), -(2**63))),
    "getitem_step_int64_min_empty": (_c_getitem_step, lambda x, s: x[::s],
                                     (StridedLayout.dense((2, 0), 1), -(2**63))),
    "is_unique_wraparound": (_c_is_unique, lambda x: x.is_unique,
                             (StridedLayout((2, 3, 2), (1, -(2**62), 2**62 + 1), 1),)),
}  # fmt: skip


def _differential(name):
    """Compiled and Python agree: both refuse, or both give the same answer."""
    compiled, python, args = DIFFERENTIAL[name]
    what = f"{name}{args[1:]!r}"
    py_ok, expected = refused_or_ok(python, *args, what=f"Python {what}",
                                    classes=(*COMPILED_ERRORS, IndexError))  # fmt: skip
    ok, got = refused_or_ok(compiled, *args, what=f"@njit {what}", classes=COMPILED_ERRORS)
    if not py_ok:
        check(not ok, f"@njit {what} gave {got!r}; Python raises "
                      f"{type(expected).__name__}: {expected}")  # fmt: skip
        return
    check(ok, f"@njit {what} raises {type(got).__name__}: {got}; Python gives {expected!r}")
    if isinstance(expected, StridedLayout):
        check(plain(got) == plain(expected), f"@njit {what} gave {got!r}, Python {expected!r}")
    else:
        check(got == expected, f"@njit {what} gave {got!r}, Python {expected!r}")


for _name in DIFFERENTIAL:
    cases.add(f"njit_layout_{_name}", functools.partial(_differential, _name), timeout=120)


# ------------------------------------------------------------------ hypothesis: random arguments
_ints = st.one_of(
    st.integers(-4, 8),
    st.integers(-4, 8),
    st.sampled_from([2**31, 2**32, 2**40, 2**62, 2**63 - 1, -(2**63), -(2**62), 16, 4096]),
)
_pairs = st.tuples(_ints, _ints)


@st.composite
def _layouts_2d(draw):
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=2, max_size=2)))
    stride = st.one_of(st.integers(-6, 6), st.sampled_from([2**40, -(2**40), 2**58, -(2**58)]))
    strides = tuple(draw(st.lists(stride, min_size=2, max_size=2)))
    itemsize = draw(st.sampled_from([1, 2, 4, 8, 16]))
    try:
        return StridedLayout(shape, strides, itemsize)
    except (ValueError, OverflowError):
        return StridedLayout.dense(shape, itemsize)


RANDOM_OPERATIONS = {
    "permuted": (_c_permuted, lambda x, a: x.permuted(a), st.tuples(_pairs)),
    "reshaped": (_c_reshaped, lambda x, a: x.reshaped(a), st.tuples(_pairs)),
    "broadcast_to": (_c_broadcast_to, lambda x, a: x.broadcast_to(a), st.tuples(_pairs)),
    "unsqueezed": (_c_unsqueezed, lambda x, a: x.unsqueezed(a), st.tuples(_ints)),
    "repacked": (_c_repacked, lambda x, *a: x.repacked(*a), st.tuples(_ints, _ints, _ints)),
    "max_compatible_itemsize": (_c_max_compatible_itemsize,
                                lambda x, *a: x.max_compatible_itemsize(*a),
                                st.tuples(_ints, _ints, _ints)),
    "getitem": (_c_getitem, lambda x, i, j: x[i, j], st.tuples(_ints, _ints)),
    "getitem_step": (_c_getitem_step, lambda x, s: x[::s], st.tuples(_ints)),
}  # fmt: skip


def _random_differential(data):
    name = data.draw(st.sampled_from(sorted(RANDOM_OPERATIONS)), label="operation")
    compiled, python, arguments = RANDOM_OPERATIONS[name]
    layout = data.draw(_layouts_2d(), label="layout")
    args = data.draw(arguments, label="arguments")
    note((name, layout, args))
    what = f"{layout!r}.{name}{args!r}"
    py_ok, expected = refused_or_ok(python, layout, *args, what=f"Python {what}",
                                    classes=(*COMPILED_ERRORS, IndexError))  # fmt: skip
    ok, got = refused_or_ok(compiled, layout, *args, what=f"@njit {what}",
                            classes=COMPILED_ERRORS)  # fmt: skip
    if not py_ok:
        check(not ok, f"@njit {what} gave {got!r}; Python raises {type(expected).__name__}: "
                      f"{expected}")  # fmt: skip
        return
    check(ok, f"@njit {what} raises {type(got).__name__}: {got}; Python gives {expected!r}")
    if isinstance(expected, StridedLayout):
        check(plain(got) == plain(expected), f"@njit {what} gave {got!r}, Python {expected!r}")
    else:
        check(got == expected, f"@njit {what} gave {got!r}, Python {expected!r}")



cases.add("fuzz_njit_layout_errors_against_python", fuzz_case(_random_differential, 250), timeout=600)
cases.add("fuzz_njit_layout_errors_against_python_long", fuzz_case(_random_differential, 400, 20000), timeout=3600,
          slow=True)  # fmt: skip


cases.export(globals())
