"""Hostile input to StridedLayout: a documented exception or a correct result, never a crash.

Each case below is a function that returns normally when layoutkit behaves: integer-likes
with odd ``__index__`` methods, int subclasses whose arithmetic lies, NumPy integers
beyond int64, bools, endless and broken iterables, huge slices, 64-d layouts, zero
strides, crafted pickles (NEWOBJ and BUILD opcodes naming only ``StridedLayout``, bare
instances from ``copyreg._reconstructor``) and subclasses whose properties lie. All cases
run in one child process (``test_every_case_in_a_child_process``), so a crash fails the
run instead of ending it; each case is then reported as its own test.
"""

import contextlib
import json
import operator
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from layoutkit import AxisError, StridedLayout
from layoutkit.layout import _rebuild

L = StridedLayout.dense((2, 3, 4), 4)
DOCUMENTED = (TypeError, ValueError, OverflowError, AxisError)
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


@contextlib.contextmanager
def raises(exception, *words):
    """Like pytest.raises, for the child process: the class and words of the message."""
    try:
        yield
    except exception as exc:
        for word in words:
            assert word in str(exc), (word, str(exc))
    else:
        raise AssertionError(f"{exception.__name__} not raised")


def exact_ints(layout):
    values = (*layout.shape, *layout._strides, layout.itemsize, layout.slice_offset)
    return all(type(v) is int for v in values)


# ------------------------------------------------------------------------- integer-likes
class Index:
    """An integer-like through ``__index__`` only (as NumPy integers are)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


class BrokenIndex:
    def __index__(self):
        raise RuntimeError("broken __index__")

    def __repr__(self):
        raise RuntimeError("broken __repr__ too")


class Liar(int):
    """An int whose every operator lies or fails: layoutkit must only read its value."""

    def _fail(self, *args):
        raise AssertionError("an operator of an int subclass was called")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __floordiv__ = __mod__ = __lt__ = __le__ = __gt__ = __ge__ = __neg__ = __abs__ = _fail
    __index__ = __int__ = __hash__ = _fail

    def __eq__(self, other):
        return True

    def __bool__(self):
        return False


@case
def index_objects_are_integers():
    layout = StridedLayout((Index(2), Index(3)), (Index(3), Index(1)), Index(4))
    assert layout == StridedLayout.dense((2, 3), 4) and exact_ints(layout)
    assert layout.permuted((Index(1), Index(0))).shape == (3, 2)
    assert layout[Index(1), Index(-1)].slice_offset == 5
    assert layout[slice(Index(1), Index(2))].shape == (1, 3)
    assert layout.offset_of((Index(1), Index(2))) == 5


@case
def int_subclasses_are_read_by_value_only():
    layout = StridedLayout((Liar(2), Liar(3)), (Liar(3), Liar(1)), Liar(4))
    assert exact_ints(layout) and layout == StridedLayout.dense((2, 3), 4)
    for result in (
        L.permuted((Liar(2), Liar(0), Liar(1))),
        L.reshaped((Liar(6), Liar(-1))),
        L.broadcast_to((Liar(5), Liar(2), Liar(3), Liar(4))),
        L.unsqueezed(Liar(1)),
        L[Liar(1), Liar(2)],
        L.repacked(Liar(8), axis=Liar(-1)),
        StridedLayout.dense((Liar(2), Liar(3)), Liar(8), (Liar(1), Liar(0))),
    ):
        assert exact_ints(result), result
    assert L.offset_of((Liar(1), Liar(2), Liar(3))) == 23
    assert L.max_compatible_itemsize(Liar(16), Liar(0), Liar(-1)) == 16


@case
def index_returning_an_int_subclass_is_read_by_value():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # CPython deprecates it
        layout = StridedLayout((Index(Liar(2)), Index(True)), None, 4)
    assert layout.shape == (2, 1) and exact_ints(layout)


@case
def broken_index_methods_are_type_errors_naming_the_argument():
    for call, name in [
        (lambda: StridedLayout((BrokenIndex(),), None, 4), "shape[0]"),
        (lambda: StridedLayout((2,), (BrokenIndex(),), 4), "strides[0]"),
        (lambda: StridedLayout((2,), None, BrokenIndex()), "itemsize"),
        (lambda: L.permuted((0, BrokenIndex(), 2)), "axis_order[1]"),
        (lambda: L[BrokenIndex()], "indices must be integers"),
        (lambda: L[:, BrokenIndex():], "slice start"),
        (lambda: L[:, : BrokenIndex()], "slice stop"),
        (lambda: L[:, :: BrokenIndex()], "slice step"),
        (lambda: L.flattened(mask=BrokenIndex()), "mask"),
        (lambda: L.repacked(8, data_ptr=BrokenIndex()), "data_ptr"),
        (lambda: L.offset_of((0, 0, BrokenIndex())), "index[2]"),
    ]:
        with raises(TypeError, name):
            call()


@case
def bools_are_refused_where_numpy_refuses_them():
    for call in [
        lambda: StridedLayout((True, 2), None, 4),
        lambda: StridedLayout((2,), (True,), 4),
        lambda: StridedLayout((2,), None, True),
        lambda: L.permuted((True, False, 2)),
        lambda: L.reshaped((True, 24)),
        lambda: L.broadcast_to((True, 2, 3, 4)),
        lambda: L.unsqueezed(True),
        lambda: L[True],
        lambda: L[np.True_],
        lambda: L.flattened(mask=True),
        lambda: L.offset_of((True, 0, 0)),
        lambda: StridedLayout.dense((2, 3), 4, stride_order=True),
    ]:
        with raises(TypeError, "True"):
            call()


@case
def numpy_integers_beyond_int64_overflow():
    big = np.uint64(2**64 - 1)
    for call, exception in [
        (lambda: StridedLayout((big,), None, 1), OverflowError),
        (lambda: StridedLayout((2,), (big,), 1), OverflowError),
        (lambda: StridedLayout((2,), None, big), OverflowError),
        (lambda: L.reshaped((big, 0)), OverflowError),
        (lambda: L.broadcast_to((big, 2, 3, 4)), OverflowError),
        (lambda: L[big], AxisError),
        (lambda: L.permuted((0, 1, big)), AxisError),
        (lambda: L.offset_of((0, 0, big)), AxisError),
    ]:
        with raises(exception, "18446744073709551615"):
            call()
    assert L.flattened(mask=big) == L.flattened()  # a full uint64 mask is valid
    assert L[:, np.int64(2**62) :].shape == (2, 0, 4)


@case
def huge_python_integers_everywhere():
    huge = 2**200
    for call in [
        lambda: StridedLayout((huge,), None, 1),
        lambda: StridedLayout((2,), (-huge,), 1),
        lambda: StridedLayout((0, huge), None, 1),
        lambda: L.reshaped((huge, -1)),
        lambda: L.repacked(huge),
        lambda: L.unsqueezed(huge),
        lambda: L[-huge],
        lambda: L.flattened(huge, -1),
        lambda: L.flattened(mask=huge),
        lambda: L.max_compatible_itemsize(16, axis=huge),
        lambda: _rebuild((2,), (1,), 4, huge),
    ]:
        try:
            call()
        except DOCUMENTED as exc:
            assert str(huge) in str(exc) or "int64" in str(exc), exc
        else:
            raise AssertionError("accepted")
    # huge but meaningful: clamped slices and a huge max_itemsize (not a huge data pointer:
    # no address is beyond 2**64; see data_pointers_outside_the_address_space)
    assert L[-huge:huge:huge, ::-huge].shape == (1, 1, 4)
    assert L.max_compatible_itemsize(huge, data_ptr=2**64 - 16) == 16


@case
def data_pointers_outside_the_address_space():
    """repacked and max_compatible_itemsize took any Python int as data_ptr: 2**64, 2**70
    and -2**70 were read modulo the itemsize (a layout for an address that cannot exist)
    and -1 reached the alignment message. cuda.core's uintptr_t raises OverflowError."""
    A = StridedLayout.dense((4, 8), 2)
    for ptr in (2**64, 2**70, -1, -(2**70), np.int64(-8), 2**200):
        for call in (lambda p: A.repacked(4, data_ptr=p),
                     lambda p: A.max_compatible_itemsize(16, data_ptr=p),
                     lambda p: A.repacked(2, data_ptr=p)):  # fmt: skip
            with raises(OverflowError, "data_ptr", str(int(ptr))):
                call(ptr)
    for ptr in (8.0, True, False, np.float64(8), "8", None, 1 + 0j):
        for call in (lambda p: A.repacked(4, data_ptr=p),
                     lambda p: A.max_compatible_itemsize(16, data_ptr=p)):  # fmt: skip
            with raises(TypeError, "data_ptr"):
                call(ptr)
    assert A.repacked(4, data_ptr=np.uint64(2**64 - 4)).itemsize == 4
    assert A.max_compatible_itemsize(16, data_ptr=np.int64(8)) == 8


# ------------------------------------------------------------------------- sequences
def endless():
    while True:
        yield 1


class BrokenIterator:
    def __iter__(self):
        yield 2
        raise RuntimeError("broken iterator")


class LyingLength(list):
    def __len__(self):
        return 10**9


@case
def endless_and_broken_sequences_are_refused():
    with raises(ValueError, "more than 64"):
        StridedLayout(endless(), None, 1)
    with raises(ValueError, "more than 64"):
        L.reshaped(endless())
    with raises(TypeError, "shape", "broken iterator"):
        StridedLayout(BrokenIterator(), None, 1)
    assert StridedLayout(LyingLength([2, 3]), None, 4).shape == (2, 3)
    with raises(TypeError, "shape"):
        StridedLayout(np.zeros((2, 2), np.int64), None, 4)  # entries are arrays
    assert StridedLayout(np.array(5), None, 4).shape == (5,)  # a 0-d integer array
    for not_a_shape in ["23", b"23", {2: 3}, {2, 3}, 2.0, None, object()]:
        with raises(TypeError, "shape"):
            StridedLayout(not_a_shape, None, 4)


@case
def scalars_are_refused_where_a_sequence_of_axes_is_needed():
    with raises(TypeError, "axis_order"):
        StridedLayout.dense((3,), 4).permuted(0)
    with raises(ValueError, "stride_order"):
        StridedLayout.dense((3,), 4, stride_order=0)
    with raises(TypeError, "index"):
        StridedLayout.dense((3,), 4).offset_of(0)


class RaisesOnCompare:
    def __eq__(self, other):
        raise RuntimeError("compared")

    __hash__ = object.__hash__


@case
def index_items_are_never_compared():
    # items are told apart by identity: no __eq__ runs (a NumPy array's would be ambiguous)
    with raises(TypeError, "indices must be"):
        L[RaisesOnCompare()]
    with raises(TypeError, "indices must be"):
        L[np.array([0, 1])]
    with raises(TypeError, "indices must be"):
        L[0, [1]]


@case
def recursive_and_unprintable_arguments_make_messages():
    shape = [2]
    shape.append(shape)
    with raises(TypeError, "shape[1]"):
        StridedLayout(shape, None, 4)
    with raises(TypeError, "shape[0]", "BrokenIndex"):
        StridedLayout((BrokenIndex(),), None, 4)


# ------------------------------------------------------------------------- shapes at the edges
@case
def sixty_four_dimensions_and_one_more():
    top = StridedLayout.dense((1,) * 60 + (2, 3, 4, 5), 2)
    assert top.permuted(tuple(range(63, -1, -1))).shape[:4] == (5, 4, 3, 2)
    assert top.flattened().shape == (120,)
    assert top.reshaped((1,) * 63 + (120,)).strides[-1] == 1
    assert top.offset_of((0,) * 60 + (1, 2, 3, 4)) == top.volume - 1
    assert top[..., None, 0, 0, 0].ndim == 62
    for call in [
        lambda: top.unsqueezed(0),
        lambda: top[None],
        lambda: top.broadcast_to((1,) * 65),
        lambda: top.reshaped((1,) * 65),
        lambda: StridedLayout((1,) * 65, None, 1),
        lambda: StridedLayout.dense([1] * 65, 1),
    ]:
        with raises(ValueError, "65"):
            call()


@case
def zero_strides_and_zero_extents():
    broadcast = StridedLayout((3, 4), (0, 0), 4)
    assert not broadcast.is_unique and broadcast.offset_bounds == (0, 0)
    assert broadcast.required_size_in_bytes() == 4
    assert broadcast.max_compatible_itemsize(16) == 4  # stride 0 along the axis: no packing
    with raises(ValueError, "stride there is 0"):
        broadcast.repacked(8)
    empty = StridedLayout((0, 2**62, 2**62), (5, -7, 9), 8)
    assert empty.strides == (5, -7, 9) and empty.volume == 0 and empty.is_unique
    assert empty == StridedLayout.dense(empty.shape, 8)
    assert empty.flattened().shape == (0,)  # no element: any strides merge
    apart = StridedLayout((2**62, 2**62, 0), None, 8)
    assert apart.flattened().shape == (2**62, 0)  # 2**124 would not fit: kept apart
    assert empty.reshaped((2**62, 0)).strides == (0, 0)
    assert empty.repacked(16, axis=0).shape == (0, 2**62, 2**62)
    with raises(OverflowError, "shape"):
        StridedLayout((0, 2**62), None, 8).repacked(1, axis=1)  # extent 2**65


@case
def offsets_at_the_int64_limits():
    low = StridedLayout((2, 3, 2), (1, -(2**62), 2**62 + 1), 1)
    assert low.offset_bounds == (-(2**63), 2**62 + 2)
    assert not low.is_unique  # (0, 1, 1) and (1, 0, 0) both map to 1
    assert low.offset_of((0, 1, 1)) == low.offset_of((1, 0, 0)) == 1
    with raises(OverflowError, "byte"):
        StridedLayout((2, 3, 2), (1, -(2**62), 2**62 + 1), 2)
    with raises(OverflowError, "stride of axis 0"):
        StridedLayout((3,), (-(2**61),), 2)[::2]  # a byte stride of -2**63: refused
    reversed_ = StridedLayout((3,), (2**61,), 1)[::-1]
    assert reversed_.slice_offset == 2**62 and reversed_.strides == (-(2**61),)


# ------------------------------------------------------------------------- pickles
PICKLE_CLASS = b"clayoutkit.layout\nStridedLayout\n"
BARE = b"ccopyreg\n_reconstructor\n(" + PICKLE_CLASS + b"cbuiltins\nobject\nNtR."


def build_pickle(state):
    """PROTO 2, the class, NEWOBJ with no arguments, then BUILD with ``state``."""
    body = pickle.dumps(state, protocol=2)[2:-1]  # the state's opcodes, no PROTO/STOP
    return b"\x80\x02" + PICKLE_CLASS + b")\x81" + body + b"b."


@case
def crafted_pickles_cannot_set_slots():
    slots = {"_shape": (1 << 20,), "_strides": (1,), "_itemsize": 1, "_offset": 0,
             "_bounds": (0, 0), "_volume": 1}
    for state in [(None, slots), slots, {"_bounds": (0, 0)}, {"harmless": 1}, None]:
        with raises(TypeError):
            pickle.loads(build_pickle(state))
    with raises(TypeError):
        pickle.loads(b"\x80\x02" + PICKLE_CLASS + b")\x81.")  # NEWOBJ without values


@case
def a_bare_instance_is_inert():
    bare = pickle.loads(BARE)  # object.__new__: no values at all
    assert type(bare) is StridedLayout
    for use in [
        lambda: bare.shape, lambda: bare.volume, lambda: bare.is_unique,
        lambda: hash(bare), lambda: bare == L, lambda: bare.permuted(()), lambda: bare[()],
        lambda: bare._lay(), lambda: pickle.dumps(bare), lambda: bare.offset_of(()),
        lambda: StridedLayout.dense_like(bare), lambda: bare._repr_html_(),
    ]:
        with raises(AttributeError):
            use()
    assert repr(bare) == "StridedLayout(never initialised)"  # repr alone never raises
    with raises(TypeError):
        bare.__setstate__({"_shape": (1 << 20,)})
    from layoutkit import Buffer, StridedMemoryView

    memory = np.zeros(4, np.float64)
    buffer = Buffer.from_handle(memory.ctypes.data, memory.nbytes, owner=memory)
    with raises(AttributeError):
        StridedMemoryView.from_buffer(buffer, bare, np.dtype(np.float64))


@case
def rebuild_validates_everything():
    for args, exception in [
        (((2, -1), (1, 1), 4, 0), ValueError),
        (((2,), (1,), 0, 0), ValueError),
        (((2**40, 2**40), (1, 1), 1, 0), OverflowError),
        (((2,), (2**62,), 4, 0), OverflowError),
        (((2,), (1,), 4, 2**63 - 2), OverflowError),  # the offset pushes past int64 bytes
        (((2,), (1,), 4, 0, int), TypeError),  # not a layout class
        (((2,), (1,), 4, 0, "StridedLayout"), TypeError),
        (((2,), (1.5,), 4, 0), TypeError),
    ]:
        with raises(exception):
            _rebuild(*args)
    assert _rebuild((3, 0), (5, 5), 4, 7) == StridedLayout((3, 0), None, 4)


class Sub(StridedLayout):
    """A subclass with its own attribute (in a __dict__)."""

    def describe(self):
        return f"{self.ndim}-d"


class Liars(StridedLayout):
    """A subclass whose public properties lie: layoutkit must not trust them."""

    volume = 10**30
    stride_order = (0, 0, 0)
    is_dense = True
    is_contiguous_any = is_contiguous_c = is_contiguous_f = True
    offset_bounds = (0, 0)


@case
def subclasses_pickle_with_their_type_and_state():
    sub = Sub.dense((2, 3), 4)
    sub.note = "kept"
    clone = pickle.loads(pickle.dumps(sub))
    assert type(clone) is Sub and clone == sub and clone.note == "kept"
    sliced = Sub((2, 3), None, 4)[1:]
    assert type(pickle.loads(pickle.dumps(sliced))) is StridedLayout  # a method's result
    crafted = pickle.dumps(sub, protocol=0).replace(b"note", b"_shape")
    with raises(TypeError):
        pickle.loads(crafted)


@case
def subclasses_get_plain_layouts_from_methods_and_their_class_from_classmethods():
    dense = Sub.dense((2, 3), 4)
    assert type(dense) is Sub and dense.describe() == "2-d"
    assert type(StridedLayout.dense((2, 3), 4)) is StridedLayout  # the old memo bug
    assert type(Sub.dense_like(L)) is Sub and Sub.dense_like(dense) is dense
    for result in (
        dense.permuted((1, 0)), dense[:, 1:], dense.reshaped((6,)), dense.flattened(),
        dense.squeezed(), dense.unsqueezed(0), dense.unsqueezed(()), dense.broadcast_to((2, 3)),
        dense.repacked(4), dense.repacked(2),
        dense.to_dense(), dense.to_dense("C"),
    ):
        assert type(result) is StridedLayout, result
    plain = StridedLayout.dense((2, 3), 4)
    assert dense == plain and plain == dense and hash(dense) == hash(plain)


@case
def lying_properties_of_a_subclass_do_not_change_results():
    liar = Liars((4, 6), (1, 4), 2)  # F order, not C
    assert StridedLayout.dense_like(liar).strides == (1, 4)
    assert StridedLayout.dense_like(liar, "C").strides == (6, 1)
    assert liar.permuted((1, 0)).reshaped((24,)).strides == (1,)
    with raises(ValueError, "incompatible"):
        liar.reshaped((24,))
    assert liar.required_size_in_bytes() == 48
    assert liar.is_dense is True and StridedLayout.is_dense.fget(liar)  # its own answer


def _slot_setter(name):
    slot = StridedLayout.__dict__[name]
    return lambda self, value: slot.__set__(self, value)


class SlotShadows(StridedLayout):
    """A subclass that shadows the slots: 10**6 elements in a shape packed as 1 element."""

    _shape = property(lambda self: (10**6,), _slot_setter("_shape"))
    _packed = property(lambda self: __import__("array").array("q", [1, 1]),
                       _slot_setter("_packed"))  # fmt: skip


class SlotSwallower(StridedLayout):
    """A subclass whose ``_shape`` property drops what is set (the constructor fills the
    slots past it, through StridedLayout's own slot descriptors)."""

    _shape = property(lambda self: (4,), lambda self, value: None)


@case
def dense_like_reads_a_subclass_s_own_slots():
    """``dense_like`` read ``_shape`` and ``_packed`` through attribute lookup: a subclass
    shadowing them gave a plain layout of shape (10**6,) whose volume and bounds came from
    a 1-element packed array, and a view of it over one float64 read 8 MB past it."""
    import numpy as np

    from layoutkit import StridedMemoryView

    dense = StridedLayout.dense_like(SlotShadows((1,), (1,), 8))
    assert type(dense) is StridedLayout and dense.shape == (1,) and dense.volume == 1
    assert StridedMemoryView.from_dlpack(np.zeros(1), -1).view(dense).shape == (1,)
    assert SlotShadows((1,), (1,), 8).to_dense().shape == (1,)
    swallowed = StridedLayout.dense_like(SlotSwallower((4,), (1,), 8))  # the checked values
    assert type(swallowed) is StridedLayout and swallowed.shape == (4,) and swallowed.volume == 4


class HugeShapeShadow(StridedLayout):
    """Shadows the ``_shape`` slot with 2**40 elements; the constructor checked 4."""

    __slots__ = ()
    _shape = property(lambda self: (1 << 40,), _slot_setter("_shape"))


@case
def transforms_of_a_slot_shadowing_subclass_use_its_checked_values():
    """``permuted``, ``squeezed`` and ``repacked`` (and the other transforms) read
    ``self._shape`` through attribute lookup and copied ``_volume`` / ``_bounds`` from
    the object: a subclass shadowing ``_shape`` gave plain layouts of shape (2**40,) with
    the bounds (0, 3) of its 4 checked elements, and a 4-element view took one through
    ``with_layout`` (reaching 8 TB past its buffer)."""
    import numpy as np

    from layoutkit import StridedMemoryView

    liar = HugeShapeShadow((4,), (1,), 8)
    view = StridedMemoryView.from_array_interface(np.zeros(4))
    for made in (liar.permuted((0,)), liar.squeezed(), liar.repacked(8), liar.unsqueezed(0),
                 liar.reshaped((2, 2)), liar.flattened(), liar[::-1], liar.broadcast_to((4,)),
                 liar.to_dense()):
        assert type(made) is StridedLayout and made.volume == 4, made
        assert view.view(made).size == 4


def run_case(name):
    try:
        CASES[name]()
    except BaseException as exc:  # report, do not crash the child
        return f"{type(exc).__name__}: {exc}"
    return None


@pytest.fixture(scope="module")
def outcomes():
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import test_layout_hostile as t\n"
        "print(json.dumps({name: t.run_case(name) for name in t.CASES}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"the child process died:\n{result.stderr[-4000:]}"
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("name", CASES)
def test_every_case_in_a_child_process(outcomes, name):
    assert outcomes[name] is None, outcomes[name]


def test_cases_run_here_too():
    """The same functions in this process (for a readable traceback when one fails)."""
    failures = {name: run_case(name) for name in CASES}
    assert {k: v for k, v in failures.items() if v} == {}
    assert operator.index(L.volume) == 24


def test_an_object_claiming_the_layout_class_is_not_equal_to_a_layout():
    """``==`` asked ``isinstance``, which believes a ``__class__`` property: a duck with
    a layout's slot names compared equal to a real layout while hashing differently (a
    set or dict held both as distinct keys that were ``==``)."""

    class Duck:
        __class__ = property(lambda self: StridedLayout)
        _shape, _strides, _itemsize, _offset, _volume = (4,), (1,), 8, 0, 4

    layout, duck = StridedLayout((4,), (1,), 8), Duck()
    assert isinstance(duck, StridedLayout)
    assert layout != duck and duck != layout
    assert len({layout, duck}) == 2
