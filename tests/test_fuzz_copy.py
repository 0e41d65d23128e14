"""Hostile copies: arrays instead of views, duck-typed views that lie, and random layouts
in canary memory against a NumPy oracle.

The rules: ``layoutkit.copy(dst, src)`` given arrays copies them or says how to make views
(issue 9); an object that is not a view, or whose ``layout`` is not a ``StridedLayout``,
is refused with ``TypeError`` before any memory is touched; a copy that runs writes
exactly the destination's elements, with NumPy's values (a source that overlaps the
destination read as it was before the copy, as through NumPy's temporary), and not one
byte more; a copy that is refused (read-only or aliasing destination, shapes that do not
broadcast) writes nothing. Views of one buffer (any strides, offsets, itemsizes and
dimensions, made by ``from_buffer``, ``view()`` or the array interface) copy through each
of ``copy``, ``copy_from`` and ``copy_to`` as ``np.copyto`` copies arrays that alias the
same way.
"""

import types

import numpy as np
from helpers.copy_cases import (
    ALIAS_ELEMENTS,
    DrawRandom,
    alias_dtypes,
    alias_view,
    aliased_case,
    numpy_items,
)
from helpers.hostile import Cases, note
from helpers.hostile_checks import (
    DOCUMENTED_OR_HOSTILE,
    HostileError,
    Poisoned,
    check,
    host_view,
    refused,
    refused_or_ok,
)
from helpers.hostile_strategies import fuzz_case
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import layoutkit
from layoutkit import StridedLayout

cases = Cases(__name__)


# ------------------------------------------------------------------ arrays instead of views
def _copies_or_explains(call, dst, src, what):
    ok, exc = refused_or_ok(call, dst, src, what=what)
    if ok:
        check(np.array_equal(dst, src), f"{what} returned but did not copy")
        return
    check(isinstance(exc, TypeError), f"{what}: {type(exc).__name__} ({exc})")
    text = str(exc)
    check("from_" in text or "StridedMemoryView" in text,
          f"{what} refuses arrays without saying how to make views: {text!r}")  # fmt: skip


@cases.case
def copy_numpy_arrays():
    src = np.arange(12.0).reshape(3, 4)
    _copies_or_explains(layoutkit.copy, np.zeros((3, 4)), src, "layoutkit.copy(ndarray, ndarray)")
    _copies_or_explains(lambda d, s: layoutkit.copy(host_view(d), s), np.zeros((3, 4)), src,
                        "layoutkit.copy(view, ndarray)")  # fmt: skip
    _copies_or_explains(lambda d, s: host_view(d).copy_from(s), np.zeros((3, 4)), src,
                        "view.copy_from(ndarray)")  # fmt: skip
    _copies_or_explains(lambda d, s: host_view(s).copy_to(d), np.zeros((3, 4)), src,
                        "view.copy_to(ndarray)")  # fmt: skip


@cases.case
def copy_into_read_only_array_is_refused():
    dst = np.zeros(4)
    dst.flags.writeable = False
    refused(layoutkit.copy, dst, np.ones(4), what="layoutkit.copy into a read-only ndarray")
    check(not dst.any(), "a read-only ndarray was written")


# ------------------------------------------------------------------ duck-typed views that lie
def _duck(block, **changes):
    array = block.array(np.uint8, (64,))
    view = host_view(array)
    attributes = dict(ptr=view.ptr, layout=view.layout, dtype=view.dtype, readonly=False,
                      is_device_accessible=False, device_id=-1, shape=view.shape)  # fmt: skip
    attributes.update(changes)
    return types.SimpleNamespace(**attributes)


class _RaisingPtr:
    layout = StridedLayout.dense((64,), 1)
    dtype = np.dtype(np.uint8)
    readonly = False
    is_device_accessible = False
    device_id = -1

    @property
    def ptr(self):
        raise HostileError("ptr refuses")


FORGED_LAYOUT = types.SimpleNamespace(
    shape=(1 << 20,), strides=(1,), itemsize=1, volume=1 << 20, is_unique=True, ndim=1,
    offset_bounds=(0, 63), slice_offset=0, strides_in_bytes=(1,), is_contiguous_c=True,
    is_contiguous_f=True, is_contiguous_any=True, is_dense=True, min_offset=0, max_offset=63,
)  # fmt: skip

DUCKS = {
    # a layout that is not a StridedLayout: its numbers were never validated
    "layout_namespace": lambda b: _duck(b, layout=FORGED_LAYOUT, shape=(1 << 20,)),
    "layout_tuple": lambda b: _duck(b, layout=((64,), (1,), 1)),
    "ptr_float": lambda b: _duck(b, ptr=float(_duck(b).ptr)),
    "ptr_string": lambda b: _duck(b, ptr=str(_duck(b).ptr)),
    "ptr_negative": lambda b: _duck(b, ptr=-64),
    "ptr_past_2_64": lambda b: _duck(b, ptr=2**64 - 8),
    "ptr_raises": lambda b: _RaisingPtr(),
}


def _duck_case(name, role):
    block = Poisoned(64)
    duck = DUCKS[name](block)
    other_block = Poisoned(1 << 20 if name == "layout_namespace" else 64, seed=1)
    other = host_view(other_block.array(np.uint8))
    dst, src = (duck, other) if role == "dst" else (other, duck)
    refused(layoutkit.copy, dst, src, what=f"layoutkit.copy with a duck-typed {role} ({name})",
            classes=(*DOCUMENTED_OR_HOSTILE,))  # fmt: skip
    block.untouched(f"a refused copy with a lying duck-typed {role}")
    other_block.untouched(f"a refused copy with a lying duck-typed {role}")


for _name in DUCKS:
    for _role in ("dst", "src"):
        cases.add(f"copy_duck_{_role}_{_name}", lambda n=_name, r=_role: _duck_case(n, r))


@cases.case
def copy_refuses_non_views():
    view = host_view(np.zeros(4))
    for junk in (None, 4, "view", object(), [1.0, 2.0, 3.0, 4.0]):
        for dst, src in ((junk, view), (view, junk)):
            ok, _ = refused_or_ok(layoutkit.copy, dst, src, classes=DOCUMENTED_OR_HOSTILE)
            if ok:  # converted (issue 10): then it must have copied correctly
                check(isinstance(junk, list), f"layoutkit.copy accepted {junk!r}")


@cases.case
def plan_copy_refuses_layouts_no_copy_exists_for():
    """The public ``plan_copy`` planned any two layouts: other shapes (a plan reading the
    source at the destination's indices), other itemsizes, a broadcast destination,
    float pointers (a float "alignment") or no layouts at all (AttributeError). Each is
    refused with the class ``copy`` gives, naming the argument."""
    dense = StridedLayout.dense
    for args, classes in (
        ((None, dense((4,), 8)), TypeError),
        ((dense((4,), 8), (4,)), TypeError),
        ((dense((3, 4), 8), dense((4, 3), 8)), ValueError),
        ((dense((3, 4), 8), dense((12,), 8)), ValueError),
        ((dense((3, 4), 8), dense((4,), 8)), ValueError),  # broadcast it first
        ((dense((3, 4), 8), dense((3, 4), 4)), TypeError),
        ((dense((1, 4), 8).broadcast_to((3, 4)), dense((3, 4), 8)), ValueError),
        ((dense((4,), 8), dense((4,), 8), 1.5), TypeError),
        ((dense((4,), 8), dense((4,), 8), 0, "16"), TypeError),
        ((dense((4,), 8), dense((4,), 8), True), TypeError),
        ((dense((4,), 8), dense((4,), 8), -16), OverflowError),
        ((dense((4,), 8), dense((4,), 8), 0, 2**64), OverflowError),
    ):
        refused(layoutkit.plan_copy, *args, classes=(classes,))
    check(layoutkit.plan_copy(dense((0, 4), 8), dense((1, 4), 8).broadcast_to((0, 4))).method
          == "none", "an empty copy plans to nothing")  # fmt: skip
    check(layoutkit.plan_copy(dense((3, 4), 8), dense((4,), 8).broadcast_to((3, 4))).method
          == "host", "a broadcast source plans")  # fmt: skip


@cases.case
def subclasses_cannot_redefine_what_copies_trust():
    """A view subclass whose ``ptr`` / ``layout`` / ``readonly`` (or a mixin's) lie, or a
    Buffer subclass whose ``ptr`` lies, had ``copy`` write where they said (a segfault at
    address 8, bytes written into a read-only ``bytes``): such classes are refused when
    defined; a subclass adding its own methods still copies."""
    block = Poisoned(64)
    lie = property(lambda self: 8)
    for base, names in ((layoutkit.StridedMemoryView, ("ptr", "layout", "readonly", "_record")),
                        (layoutkit.Buffer, ("ptr", "size", "is_readonly", "_ptr"))):  # fmt: skip
        for name in names:
            for mixin in (False, True):
                what = f"a {base.__name__} subclass{' with a mixin' if mixin else ''} redefining {name}"
                namespace = {name: lie}
                bases = (type("Mixin", (), namespace), base) if mixin else (base,)
                refused(type, "Lying", bases, {} if mixin else namespace, what=what,
                        classes=(TypeError,))  # fmt: skip
    Plain = type("Plain", (layoutkit.StridedMemoryView,), {"extra": lambda self: 1})
    view = Plain.from_array_interface(block.array(np.float64, (4,)))
    layoutkit.copy(view, np.ones(4))
    check(np.from_dlpack(view).tolist() == [1.0] * 4, "a plain subclass view was not copied into")


@cases.case
def trusted_attributes_cannot_be_replaced_after_the_class_exists():
    """Found by helper-36: ``Sub.layout = property(...)`` after ``Sub`` was defined passed the
    check made at definition, and ``copy`` wrote 8 doubles into an 8-byte array. Setting or
    deleting a view's or buffer's own attribute on the base or any subclass is refused; new
    attributes and special methods may still be set."""
    lie = property(lambda self: StridedLayout.dense((8,), 8))
    for base, name in ((layoutkit.StridedMemoryView, "layout"), (layoutkit.StridedMemoryView, "_record"),
                       (layoutkit.Buffer, "size"), (layoutkit.Buffer, "_ptr")):  # fmt: skip
        sub = type("Sub", (base,), {})
        for kind in (sub, base):
            refused(setattr, kind, name, lie, what=f"{kind.__name__}.{name} = a lie",
                    classes=(TypeError,))  # fmt: skip
            refused(delattr, kind, name, what=f"del {kind.__name__}.{name}", classes=(TypeError,))
        sub.extra = 1  # a new attribute: allowed
        check(sub.extra == 1, "a subclass could not take a new attribute")
    sub = type("Sub", (layoutkit.StridedMemoryView,), {})
    array = np.zeros(1)
    view = sub.from_array_interface(array)
    refused(layoutkit.copy, view, np.ones(8), classes=(ValueError,))  # shapes, not a lie
    check(array.tolist() == [0.0], "a refused copy wrote")


@cases.case
def trusted_attributes_cannot_be_replaced_through_mixins_or_lookup():
    """Found by helper review: past the class's own seal, three ordinary class definitions
    made ``copy`` write 8 doubles into an 8-byte array (a segfault with 10**6): a mixin
    listed before the view class, given ``layout = property(...)`` after the subclass
    existed; a subclass defining ``__getattribute__`` (special methods were exempt); and
    a mixin after the view class given ``__getattribute__`` later (the view's came from
    ``object``, after the mixin). A metaclass of the subclass's own could set attributes
    past the seal. Mixins ahead and other metaclasses are refused when the class is
    defined; ``__getattribute__`` is the view's own; mixins after it still work."""
    view_class = layoutkit.StridedMemoryView
    lie = StridedLayout.dense((8,), 8)

    def lying_lookup(self, name):
        return lie if name == "layout" else object.__getattribute__(self, name)

    mixin = type("Mixin", (), {})
    exc = refused(type, "Sub", (mixin, view_class), {}, what="a mixin ahead of the view class",
                  classes=(TypeError,))  # fmt: skip
    check("Mixin" in str(exc) and "after" in str(exc), f"the refusal does not say why: {exc}")
    refused(type, "Sub", (view_class,), {"__getattribute__": lying_lookup},
            what="a subclass defining __getattribute__", classes=(TypeError,))  # fmt: skip
    meta = type("Meta", (type(view_class),), {"__setattr__": type.__setattr__})
    refused(meta, "Sub", (view_class,), {}, what="a subclass with a metaclass of its own",
            classes=(TypeError,))  # fmt: skip
    after = type("After", (), {})
    sub = type("Sub", (view_class, after), {})
    refused(setattr, sub, "__getattribute__", lying_lookup, what="Sub.__getattribute__ = a lie",
            classes=(TypeError,))  # fmt: skip
    after.layout = property(lambda self: lie)  # behind the view's own: never read
    after.__getattribute__ = lying_lookup  # behind the view's own: never called
    array = np.zeros(1)
    view = sub.from_array_interface(array)
    check(view.layout.shape == (1,), f"a mixin after the view class replaced its layout: {view.layout}")
    refused(layoutkit.copy, view, np.ones(8), classes=(ValueError,))  # shapes, not a lie
    check(array.tolist() == [0.0], "a refused copy wrote")


@cases.case
def copy_onto_itself_with_other_extent_1_strides():
    """Found by the long copy fuzz: the same elements, described with another stride on an
    extent-1 axis (a stride never used, DECISIONS 6), are refused as overlapping; a view
    copied onto itself is a no-op (the copy docstring)."""
    array = np.arange(6.0).reshape(3, 2)[:, :1]
    same = as_strided(array, array.shape, (array.strides[0], 40))
    for dst, src in ((array, same), (same, array)):
        ok, exc = refused_or_ok(layoutkit.copy, host_view(dst), host_view(src))
        check(ok, f"copying a view onto the same elements (strides {dst.strides} and "
                  f"{src.strides}) is refused: {exc}")  # fmt: skip
    check(array.ravel().tolist() == [0.0, 2.0, 4.0], "a copy onto itself changed the data")


# ------------------------------------------------------------------ random copies, NumPy oracle
DTYPES = (np.uint8, np.int16, np.uint32, np.int64, np.complex128)


@st.composite
def block_views(draw, block, dtype, shape=None):
    """A view of an ndarray over ``block`` with random strides (negative, zero, gaps)."""
    itemsize = np.dtype(dtype).itemsize
    if shape is None:
        ndim = draw(st.integers(0, 4))
        shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    strides = draw(st.lists(st.integers(-9, 9), min_size=len(shape), max_size=len(shape)))
    low = sum((e - 1) * s for e, s in zip(shape, strides) if s < 0 and e)
    high = sum((e - 1) * s for e, s in zip(shape, strides) if s > 0 and e)
    capacity = block.nbytes // itemsize
    if high - low + 1 > capacity:
        return None
    first = draw(st.integers(-low, capacity - 1 - high))
    element = np.ndarray((1,), dtype, buffer=block.inner, offset=first * itemsize)
    array = as_strided(element, shape, tuple(s * itemsize for s in strides))
    return host_view(array)


def _numpy_of(view, raw, block):
    """The NumPy array over ``raw`` (a copy of ``block``'s bytes) that ``view`` describes."""
    base = raw[block.guard : block.guard + block.nbytes]
    start = view.ptr - block.address
    dtype = view.dtype
    if not view.size:
        return np.empty(view.shape, dtype)
    first = np.ndarray((1,), dtype, buffer=base, offset=start)
    return as_strided(first, view.shape, view.layout.strides_in_bytes)


def _random_copy(data):
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    same_block = data.draw(st.booleans(), label="same block")
    dst_block = Poisoned(512, seed=1)
    src_block = dst_block if same_block else Poisoned(512, seed=2)
    dst = data.draw(block_views(dst_block, dtype), label="dst")
    if dst is None:
        return
    src_shape = dst.shape[data.draw(st.integers(0, len(dst.shape))) :]
    if data.draw(st.booleans()):
        src_shape = tuple(1 if data.draw(st.booleans()) else e for e in src_shape)
    src = data.draw(block_views(src_block, dtype, src_shape), label="src")
    if src is None:
        return
    note((dst.layout, dst.ptr - dst_block.address, src.layout, src.ptr - src_block.address,
          dtype, same_block))  # fmt: skip
    expected_raw = dst_block.raw.copy()
    expected_dst = _numpy_of(dst, expected_raw, dst_block)
    source_values = _numpy_of(src, src_block.raw.copy(), src_block).copy()
    ok, exc = refused_or_ok(layoutkit.copy, dst, src, what="layoutkit.copy")
    unique = dst.layout.is_unique
    if not ok:
        check(not unique, f"layoutkit.copy refused a valid copy: {type(exc).__name__}: {exc}")
        dst_block.untouched("a refused copy")
        if not same_block:
            src_block.untouched("a refused copy")
        return
    check(unique or not dst.size, "a copy into a non-unique (aliasing) destination ran")
    expected_dst[...] = source_values
    diff = np.flatnonzero(dst_block.raw != expected_raw)
    check(not diff.size,
          f"the copy left {diff.size} byte(s) different from NumPy's result (first at "
          f"{[int(i) - dst_block.guard for i in diff[:8]]} of the dst block; negative or "
          f">= {dst_block.nbytes}: guards)")  # fmt: skip
    if not same_block:
        src_block.untouched("a copy (its source)")



cases.add("fuzz_copies_in_canary_memory", fuzz_case(_random_copy, 150), timeout=300)
cases.add("fuzz_copies_in_canary_memory_long", fuzz_case(_random_copy, 250, 10000), timeout=3600, slow=True)


# ------------------------------------------------------------------ views of one buffer
#: The three ways to ask for a copy; each must give ``np.copyto``'s answer.
COPY_CALLS = {
    "layoutkit.copy(dst, src)": lambda dst, src: layoutkit.copy(dst, src),
    "dst.copy_from(src)": lambda dst, src: dst.copy_from(src),
    "src.copy_to(dst)": lambda dst, src: src.copy_to(dst),
}


def _aliased_copy(data):
    """One :func:`helpers.copy_cases.aliased_case` in canary memory: both views over one
    Buffer (or its memory), made by ``from_buffer`` (read-only, writable or the default),
    ``view()`` or the array interface, copied by one of ``COPY_CALLS``. The oracle is
    ``np.copyto(dst, src.copy())`` between arrays that alias the same way: the source as
    it was before the copy, for any overlap (``np.copyto(dst, src)`` is not that for 1-d
    views with different strides of one sign, which NumPy copies element by element)."""
    case = aliased_case(DrawRandom(data))
    if case is None:
        return
    itemsize, dst_side, src_side = case
    block = Poisoned(ALIAS_ELEMENTS * itemsize, seed=data.draw(st.integers(0, 7)))
    buffer = layoutkit.StridedMemoryView.from_array_interface(block.inner).buffer
    dtype = data.draw(st.sampled_from(alias_dtypes(itemsize)), label="dtype")
    hows = ("from_buffer", "view") if dtype is None else ("from_buffer", "view", "array_interface")
    readonly = data.draw(st.sampled_from((None, None, False, True)), label="dst is_readonly")
    dst = alias_view(block.inner, buffer, dst_side, itemsize, dtype,
                     data.draw(st.sampled_from(hows), label="dst made by"), readonly)  # fmt: skip
    src = alias_view(block.inner, buffer, src_side, itemsize, dtype,
                     data.draw(st.sampled_from(hows), label="src made by"))  # fmt: skip
    call = data.draw(st.sampled_from(sorted(COPY_CALLS)), label="call")
    note((itemsize, dst_side, src_side, dtype, dst.layout, src.layout, dst.readonly, call))
    expected = block.inner.copy()
    if dst.size and not dst.readonly and dst.layout.is_unique:
        np.copyto(numpy_items(expected, dst_side, itemsize),
                  numpy_items(expected, src_side, itemsize).copy())  # fmt: skip
    ok, exc = refused_or_ok(COPY_CALLS[call], dst, src, what=call)
    if not ok:
        check(isinstance(exc, ValueError) and (dst.readonly or not dst.layout.is_unique),
              f"{call} refused a valid copy: {type(exc).__name__}: {exc}")  # fmt: skip
        block.untouched(f"a refused {call}")
        return
    check(not dst.readonly or not dst.size, f"{call} wrote a read-only destination")
    block.only_changed(expected, f"{call} between views of one buffer")



cases.add("fuzz_copies_between_views_of_one_buffer", fuzz_case(_aliased_copy, 400), timeout=300)
cases.add("fuzz_copies_between_views_of_one_buffer_long", fuzz_case(_aliased_copy, 400, 20000),
          timeout=3600, slow=True)  # fmt: skip


@cases.case
def plan_copy_reads_a_subclass_layouts_checked_values():
    """plan_copy checked a StridedLayout subclass through its properties, which may lie:
    a destination of 100 elements whose ``shape`` property said (8,) was planned with an
    8-element source (a plan reading past the source). The checks and the plan read the
    values the constructor checked (plain_layout)."""
    from layoutkit import StridedLayout, plan_copy

    class Liar(StridedLayout):
        @property
        def shape(self):
            return (8,)

        @property
        def is_unique(self):
            return True

    refused(plan_copy, Liar((100,), None, 8), StridedLayout((8,), None, 8),
            classes=(ValueError,))  # fmt: skip
    refused(plan_copy, Liar((8,), (0,), 8), StridedLayout((8,), None, 8),
            classes=(ValueError,))  # fmt: skip
    plan = plan_copy(Liar((8,), None, 8), StridedLayout((8,), None, 8))
    check(plan.shape == (1,) or plan.shape == (8,) or plan.unit * plan.shape[0] == 64,
          f"plan of two 8-element layouts: {plan}")  # fmt: skip


cases.export(globals())
