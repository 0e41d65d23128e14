"""Random chains of layout transforms, checked step by step.

A chain starts from a random layout and applies 5-15 random transforms (indexing,
``permuted``, ``reshaped``, ``flattened``, ``squeezed``, ``unsqueezed``,
``broadcast_to``, ``repacked``, ``to_dense``, ``dense_like``), reading random subsets
of the derived properties in random order along the way. After every step the layout
must answer every property as a *fresh* layout with the same shape, strides, itemsize
and slice offset does (derived values carried over from a parent, or cached by an
earlier read, must not differ), and map every index to the offset NumPy's view gives,
where NumPy has the same operation (which must succeed or fail with it).

Random choices come from a ``draw`` object with ``integers(a, b)``, ``choice(seq)`` and
``boolean()`` (``RandomDraw`` for seeded runs, ``HypothesisDraw`` inside ``@given``), so
one driver serves exploratory runs and the tests.
"""

import math
import pickle

import numpy as np

from layoutkit import StridedLayout

from .hostile_checks import DERIVED_PROPERTIES
from .parity import outcome
from .strategies import assert_same_mapping, enumerable, layout_offsets, numpy_view, prime_factors

MAX_NDIM = 64
MAX_VOLUME = 4096


class RandomDraw:
    """Choices from a ``random.Random``."""

    def __init__(self, rng):
        self.rng = rng

    def integers(self, a, b):
        return self.rng.randint(a, b)

    def choice(self, values):
        return self.rng.choice(list(values))

    def boolean(self):
        return self.rng.random() < 0.5


class HypothesisDraw:
    """Choices from hypothesis' ``st.data()``."""

    def __init__(self, data):
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def integers(self, a, b):
        return self.data.draw(self.st.integers(a, b))

    def choice(self, values):
        return self.data.draw(self.st.sampled_from(list(values)))

    def boolean(self):
        return self.data.draw(self.st.booleans())


# ------------------------------------------------------------------------- start layouts
def shape_of(draw, ndim):
    """Extents 0..4; beyond 4 dimensions at most 4 are not 1 (volumes stay small)."""
    if ndim <= 4:
        return tuple(draw.integers(0, 4) for _ in range(ndim))
    shape = [1] * ndim
    for _ in range(draw.integers(0, 4)):
        shape[draw.integers(0, ndim - 1)] = draw.integers(0, 4)
    return tuple(shape)


def start_layout(draw):
    """A random layout: constructor (strides in [-12, 12]), implicit C, or dense."""
    ndim = draw.choice([0, 1, 2, 3, 4, 4, 6, 12, 33, 64])
    shape = shape_of(draw, ndim)
    itemsize = draw.choice([1, 2, 3, 4, 8, 16, draw.integers(1, 16)])
    kind = draw.integers(0, 4)
    if kind == 4:  # strides near the int64 limits (only fresh layouts are the oracle)
        big = lambda: draw.choice([1, -1]) * (2 ** draw.integers(20, 62) // itemsize  # noqa: E731
                                              + draw.integers(-2, 2))
        strides = tuple(big() if draw.boolean() else draw.integers(-3, 3) for _ in shape)
        try:
            layout = StridedLayout(shape, strides, itemsize)
        except OverflowError:
            layout = StridedLayout(shape, None, itemsize)
    elif kind == 0:
        strides = tuple(draw.integers(-12, 12) for _ in shape)
        layout = StridedLayout(shape, strides, itemsize)
    elif kind == 1:
        layout = StridedLayout(shape, None, itemsize)
    else:
        order = draw.choice(["C", "F", "perm"])
        if order == "perm":
            axes = list(range(ndim))
            for i in range(ndim - 1, 0, -1):  # Fisher-Yates with the draw's integers
                j = draw.integers(0, i)
                axes[i], axes[j] = axes[j], axes[i]
            order = tuple(axes)
        layout = StridedLayout.dense(shape, itemsize, order)
    how = draw.integers(0, 5)
    if how == 0:  # through pickle (the validating rebuild)
        layout = pickle.loads(pickle.dumps(layout))
    elif how == 1:  # a subclass instance (its methods return plain layouts)
        layout = _Sub(layout.shape, layout.strides, layout.itemsize)
    return layout


class _Sub(StridedLayout):
    __slots__ = ()


# ------------------------------------------------------------------------- transforms
def _permutation(draw, n):
    axes = list(range(n))
    for i in range(n - 1, 0, -1):
        j = draw.integers(0, i)
        axes[i], axes[j] = axes[j], axes[i]
    if n and draw.integers(0, 9) == 0:  # sometimes negative entries, sometimes a bad one
        k = draw.integers(0, n - 1)
        axes[k] = axes[k] - n if draw.boolean() else draw.choice([n, -n - 1, axes[0]])
    return tuple(axes)


def _slice(draw, extent):
    bound = lambda: None if draw.boolean() else draw.integers(-extent - 2, extent + 2)  # noqa: E731
    step = None if draw.boolean() else draw.choice([1, 2, 3, -1, -2, -3])
    return slice(bound(), bound(), step)


def _index(draw, shape):
    n = len(shape)
    consumed = draw.integers(0, n)
    items = []
    for e in shape[:consumed]:
        if e and draw.boolean():
            items.append(draw.integers(-e, e - 1) if draw.integers(0, 9) else e)  # e: out of range
        else:
            items.append(_slice(draw, e))
    if consumed < n and draw.boolean():
        items.insert(draw.integers(0, len(items)), Ellipsis)
    if n + 3 <= MAX_NDIM:
        for _ in range(draw.integers(0, 2)):
            items.insert(draw.integers(0, len(items)), None)
    if len(items) == 1 and draw.boolean():
        return items[0]
    return tuple(items)


def _factor_shape(draw, volume, ndim_cap):
    """A shape of ``volume`` (random factors, extent-1 axes, maybe one -1 or a wrong one)."""
    if volume == 0:
        shape = [draw.integers(0, 3) for _ in range(draw.integers(1, 5))]
        shape[draw.integers(0, len(shape) - 1)] = 0
        return tuple(shape)
    factors = prime_factors(volume)
    groups = draw.integers(1, max(1, min(len(factors), 6)))
    shape = [1] * groups
    for f in factors:
        shape[draw.integers(0, groups - 1)] *= f
    for _ in range(draw.integers(0, 3)):
        if len(shape) < ndim_cap:
            shape.insert(draw.integers(0, len(shape)), 1)
    if draw.boolean():
        shape[draw.integers(0, len(shape) - 1)] = -1
    elif draw.integers(0, 9) == 0:
        shape[draw.integers(0, len(shape) - 1)] += 1  # another volume
    return tuple(shape)


def _broadcast_shape(draw, shape):
    lead = draw.integers(0, min(2, MAX_NDIM - len(shape)))
    new = [draw.integers(0, 3) for _ in range(lead)]
    for e in shape:
        new.append(draw.integers(0, 3) if e == 1 and draw.boolean() else e)
    if new and draw.integers(0, 9) == 0:
        new[draw.integers(0, len(new) - 1)] += 2  # often not broadcastable
    return tuple(new)


def _axes_tuple(draw, m):
    count = draw.integers(1, min(3, m))
    axes = set()
    while len(axes) < count:
        axes.add(draw.integers(-m, m - 1) % m)
    return tuple(a - m if draw.boolean() else a for a in axes)


def random_op(draw, layout):
    """One transform of ``layout`` as ``(name, args)``; ``apply(layout, op)`` runs it."""
    n = layout.ndim
    names = ["index", "index", "permuted", "reshaped", "reshaped", "flattened", "squeezed",
             "unsqueezed", "broadcast_to", "repacked", "to_dense", "dense_like"]  # fmt: skip
    name = draw.choice(names)
    if name == "index":
        return name, (_index(draw, layout.shape),)
    if name == "permuted":
        return name, (_permutation(draw, n),)
    if name == "reshaped":
        return name, (_factor_shape(draw, layout.volume, MAX_NDIM),)
    if name == "flattened":
        how = draw.integers(0, 2)
        if how == 0 or not n:
            return name, ()
        if how == 1:
            a, b = sorted((draw.integers(-n, n - 1) % n, draw.integers(-n, n - 1) % n))
            return name, (a, b - n if draw.boolean() else b)
        mask = draw.integers(0, 2**min(n, 63) - 1) << draw.integers(0, 1)
        if draw.boolean():
            mask = layout.flattened_axis_mask() & mask
        return name, (0, -1, mask)
    if name == "squeezed":
        return name, ()
    if name == "unsqueezed":
        if n + 3 > MAX_NDIM:
            return "squeezed", ()
        if draw.boolean():
            return name, (draw.integers(-n - 1, n),)
        return name, (_axes_tuple(draw, n + draw.integers(1, 3)),)
    if name == "broadcast_to":
        return name, (_broadcast_shape(draw, layout.shape),)
    if name == "repacked":
        old = layout.itemsize
        new = draw.choice([1, 2, 4, 8, 16, 32, old, 2 * old, 3 * old])
        if n and draw.boolean():
            new = layout.max_compatible_itemsize(old * draw.choice([1, 2, 4, 8]), 0, -1)
        axis = draw.integers(-n, n - 1) if n else -1
        return name, (new, 0, axis, draw.boolean())
    order = draw.choice(["K", "C", "F", "perm"])
    if order == "perm":
        order = _permutation(draw, n)
    return name, (order,)


def apply(layout, op):
    name, args = op
    if name == "index":
        return layout[args[0]]
    if name == "dense_like":
        return StridedLayout.dense_like(layout, *args)
    return getattr(layout, name)(*args)


def numpy_apply(view, op):
    """The same operation on a NumPy view, or ``NotImplemented`` where NumPy has none."""
    name, args = op
    if name == "index":
        return view[args[0]]
    if name == "permuted":
        return np.transpose(view, args[0])
    if name == "reshaped":
        return np.reshape(view, args[0], copy=False)
    if name == "squeezed":
        return np.squeeze(view)
    if name == "unsqueezed":
        return np.expand_dims(view, args[0])
    if name == "broadcast_to":
        return np.broadcast_to(view, args[0])
    if name == "flattened" and len(args) < 3 and view.ndim:  # the C-order offsets stay
        return NotImplemented
    return NotImplemented


# ------------------------------------------------------------------------- properties
def _mci(m, p, a):
    return lambda layout: layout.max_compatible_itemsize(m, p, a)


READS = {
    **DERIVED_PROPERTIES,
    "ndim": lambda x: x.ndim,
    "shape": lambda x: x.shape,
    "itemsize": lambda x: x.itemsize,
    "slice_offset": lambda x: x.slice_offset,
    "explicit_strides": lambda x: x._strides,
    "byte_strides": lambda x: x._byte_strides(),
    "required_size_in_bytes": lambda x: x.required_size_in_bytes(),
    "hash": hash,
    "flattened": lambda x: _exact(x.flattened()),
    "to_dense_K": lambda x: _exact(x.to_dense()),
    "to_dense_C": lambda x: _exact(x.to_dense("C")),
    "to_dense_F": lambda x: _exact(x.to_dense("F")),
    "mci_16": _mci(16, 0, -1),
    "mci_64_8_0": _mci(64, 8, 0),
    "mci_32_4_last": _mci(32, 4, -1),
    "offset_last": lambda x: x.offset_of(tuple(e - 1 for e in x.shape)) if x.volume else None,
    "repr": repr,
}


def _exact(layout):
    return (layout.shape, layout._strides, layout.itemsize, layout.slice_offset,
            layout.strides is None)  # fmt: skip


def read(layout, name):
    """``(status, value)`` of one property: ``("ok", value)`` or ``(exception class, None)``."""
    status, value = outcome(READS[name], layout)
    return (status, value if status == "ok" else None)


def fresh(layout):
    """A new layout with the same values (nothing carried over, nothing read yet)."""
    return StridedLayout._trusted(layout.shape, layout._strides, layout.itemsize,
                                  layout.slice_offset)  # fmt: skip


def read_some(draw, layout, seen):
    """Read a random subset of the properties in random order, recording the answers."""
    names = list(READS)
    for _ in range(draw.integers(0, 6)):
        name = draw.choice(names)
        seen.setdefault(name, read(layout, name))


def compare_with_fresh(layout, seen, where):
    """Every property of ``layout`` (and what was read earlier) equals a fresh layout's."""
    reference = fresh(layout)
    other = fresh(layout)
    names = list(READS)
    for name in reversed(names):  # a second fresh layout read in the other order
        read(other, name)
    for name in names:
        expected = read(reference, name)
        got = read(layout, name)
        name_ex = expected
        if name == "repr" and layout.strides is None:
            continue  # implicit C prints strides=None
        if name in ("to_dense_K", "to_dense_C", "to_dense_F", "flattened") and got[0] == "ok":
            got, name_ex = (got[0], got[1][:4]), (expected[0], expected[1][:4])
        assert got == name_ex, (where, name, layout, got, name_ex)
        assert read(other, name) == expected, (where, name, "order", layout)
        if name in seen:
            early = seen[name]
            if name in ("to_dense_K", "to_dense_C", "to_dense_F", "flattened") and early[0] == "ok":
                early = (early[0], early[1][:4])
            assert early == name_ex, (where, name, "read early", layout, early, name_ex)
    if layout.strides is None:  # implicit C only for layouts that are dense in C order
        assert layout.slice_offset == 0 and layout._strides == StridedLayout.dense(
            layout.shape, 1
        )._strides, (where, layout)
    assert layout == reference and hash(layout) == hash(reference), (where, layout)


# ------------------------------------------------------------------------- the driver
def _raised(result):
    return result[0] != "ok"


def run_chain(draw, length=None, log=None):
    """One chain; raises AssertionError naming the step at fault."""
    layout = start_layout(draw)
    ops = []
    seen = {}
    read_some(draw, layout, seen)
    compare_with_fresh(layout, seen, (layout, ops))
    steps = length if length is not None else draw.integers(5, 15)
    for _ in range(steps):
        op = random_op(draw, layout)
        where = (ops + [op], layout)
        status, result = outcome(apply, layout, op)
        view = _numpy_view(layout)
        if view is not None:
            expected = outcome(numpy_apply, view, op)
            if expected[0] == "ok" and expected[1] is NotImplemented:
                expected = None
        else:
            expected = None
        if (expected is not None and status is OverflowError and expected[0] == "ok"
                and expected[1].size == 0):  # fmt: skip
            # an empty result whose slice offset in bytes does not fit in int64 is
            # refused (NumPy's pointer arithmetic wraps; slice_offset_in_bytes must fit)
            expected = None
        if expected is not None:
            # NumPy's IndexError against our AxisError, NumPy's AxisError against our
            # ValueError/AxisError: compare whether each raised
            assert (status == "ok") == (expected[0] == "ok"), (where, status, expected)
        if status != "ok":
            assert status in (ValueError, IndexError, TypeError, OverflowError) or issubclass(
                status, (ValueError, IndexError, TypeError, OverflowError)
            ), (where, status)
            if log is not None:
                log.append((op, status.__name__))
            continue  # the chain goes on from the same layout
        if log is not None:
            log.append((op, "ok"))
        assert type(result) is StridedLayout, (where, type(result))
        if expected is not None and result.volume <= MAX_VOLUME:
            assert_same_mapping(result, expected[1])
        elif view is not None and op[0] in ("flattened", "to_dense", "dense_like"):
            _check_no_numpy(layout, result, op)
        if op[0] == "repacked":
            _check_repacked(layout, result, op)
        ops.append(op)
        layout = result
        seen = {}
        read_some(draw, layout, seen)
        if layout.volume <= MAX_VOLUME and enumerable(layout):
            compare_with_fresh(layout, seen, (ops, layout))
        else:
            compare_with_fresh(layout, seen, (ops, layout))
    return layout, ops


def _numpy_view(layout):
    """The offset view of ``layout``, or None where NumPy cannot afford or express it."""
    fits = all(abs(s) < 2**59 for s in layout._strides)  # int64 byte strides of 8
    return numpy_view(layout) if fits and enumerable(layout) else None


def _check_no_numpy(before, after, op):
    name, args = op
    if name == "flattened":
        assert np.array_equal(layout_offsets(before), layout_offsets(after)), (op, before, after)
        assert after.offset_bounds == before.offset_bounds
        if len(args) < 3 and (not args or (args[0] == 0 and args[1] in (-1, before.ndim - 1))):
            # everything mergeable merged: flattening again changes nothing
            again = after.flattened()
            assert again.shape == after.shape, (op, before, after, again)
    else:  # dense: same shape and itemsize, a permutation of 0..volume-1
        assert after.shape == before.shape and after.itemsize == before.itemsize
        assert after.is_dense and after.is_unique, (op, before, after)
        assert sorted(layout_offsets(after).tolist()) == list(range(after.volume))
        if args[0] == "C":
            assert after.is_contiguous_c
        if args[0] == "F":
            assert after.is_contiguous_f


def _check_repacked(before, after, op):
    new, _, axis, keep_dim = op[1]
    old = before.itemsize
    assert after.itemsize == new
    if new == old:
        assert after is before or (type(before) is not StridedLayout and after == before)
        return
    if not before.volume:
        assert after.volume == 0 and after.slice_offset == 0
        return
    if before.volume > MAX_VOLUME:
        return
    ax = axis % before.ndim if before.ndim else 0
    index_before = np.array(np.unravel_index(np.arange(before.volume), before.shape)).T
    if new > old:
        k = new // old
        shape = list(before.shape)
        shape[ax] //= k
        after_full = after if keep_dim or len(shape) == after.ndim else after.unsqueezed(ax)
        for idx in index_before:
            j = list(idx)
            t = j[ax] % k
            j[ax] //= k
            got = after_full.offset_of(tuple(int(v) for v in j)) * new + t * old
            assert got == before.offset_of(tuple(int(v) for v in idx)) * old, (op, before, after)
    else:
        k = old // new
        for idx in index_before:
            base = before.offset_of(tuple(int(v) for v in idx)) * old
            for t in range(k):
                j = [int(v) for v in idx]
                j[ax] = j[ax] * k + t
                assert after.offset_of(tuple(j)) * new == base + t * new, (op, before, after)
    assert math.prod(after.shape) * new == before.volume * old


# ------------------------------------------------------------------------- compiled chains
# A compiled chain keeps the number of dimensions (compiled code types a layout by it):
# op codes and their integer arguments are data, so one function per ndim runs any chain
# of these transforms; after each step it records the layout's properties in a row.
C_PERMUTED, C_SLICED, C_SLICED_STEP, C_RESHAPED, C_BROADCAST, C_REPACKED = range(6)
C_DENSE_K, C_DENSE_C, C_DENSE_F, C_DENSE_ORDER, C_DENSE_LIKE, C_INDEX_UNSQUEEZE = range(6, 12)
C_NEW_AXIS, C_REBUILT = 12, 13
COMPILED_OPS = 14
ARGS = 3  # integer arguments per axis (a slice's three), beyond 3 per op


def _row_width(n):
    return 16 + 4 * n


def _chain_source(n):
    """Source of ``chain(layout, codes, args, rows, masks)`` for ``n``-d layouts."""
    def axes(k):
        return "".join(f"a[{k * n + i}], " for i in range(n))

    tup = lambda k: f"({axes(k)})"  # noqa: E731
    slices = "(" + "".join(f"slice(a[{3 * i}], a[{3 * i + 1}], a[{3 * i + 2}]), "
                           for i in range(n)) + ")"  # fmt: skip
    steps = "(" + "".join(f"slice(None, None, a[{3 * i + 2}]), " for i in range(n)) + ")"
    last = 3 * n
    index_unsqueeze = (
        f"layout[a[{last}]].unsqueezed(a[{last + 1}])" if n else "layout"
    )
    new_axis = "layout[None, ..., 0]" if n else "layout[None][0]"
    w = _row_width(n)
    body = f"""
def chain(layout, codes, args, rows, masks):
    for k in range(len(codes)):
        c = codes[k]
        a = args[k]
        if c == {C_PERMUTED}:
            layout = layout.permuted({tup(0)})
        elif c == {C_SLICED}:
            layout = layout.sliced({slices})
        elif c == {C_SLICED_STEP}:
            layout = layout[{steps}]
        elif c == {C_RESHAPED}:
            layout = layout.reshaped({tup(0)})
        elif c == {C_BROADCAST}:
            layout = layout.broadcast_to({tup(0)})
        elif c == {C_REPACKED}:
            layout = layout.repacked(a[{last}], a[{last + 1}], a[{last + 2}])
        elif c == {C_DENSE_K}:
            layout = layout.to_dense()
        elif c == {C_DENSE_C}:
            layout = layout.to_dense("C")
        elif c == {C_DENSE_F}:
            layout = StridedLayout.dense_like(layout, "F")
        elif c == {C_DENSE_ORDER}:
            layout = layout.to_dense({tup(0)})
        elif c == {C_DENSE_LIKE}:
            layout = StridedLayout.dense_like(layout)
        elif c == {C_INDEX_UNSQUEEZE}:
            layout = {index_unsqueeze}
        elif c == {C_NEW_AXIS}:
            layout = {new_axis}
        else:
            layout = StridedLayout(layout.shape, layout.strides, layout.itemsize)
        r = rows[k]
        r[0] = layout.volume
        r[1] = layout.offset_bounds[0]
        r[2] = layout.offset_bounds[1]
        r[3] = layout.is_contiguous_c
        r[4] = layout.is_contiguous_f
        r[5] = layout.is_contiguous_any
        r[6] = layout.is_dense
        r[7] = layout.is_unique
        r[8] = layout.required_size_in_bytes() if layout.min_offset >= 0 else -1
        r[9] = layout.slice_offset
        r[10] = layout.itemsize
        r[11] = layout.slice_offset_in_bytes
        r[12] = layout.max_compatible_itemsize(16 * layout.itemsize, 0, -1) if {n} else 0
        r[13] = hash(layout)
        r[14] = layout.min_offset
        r[15] = layout.max_offset
        for i in range({n}):
            r[16 + i] = layout.shape[i]
            r[16 + {n} + i] = layout.strides[i]
            r[16 + {2 * n} + i] = layout.stride_order[i]
            r[16 + {3 * n} + i] = layout.strides_in_bytes[i]
        masks[k] = layout.flattened_axis_mask()
    return layout
"""
    assert w == _row_width(n)
    return body


_COMPILED = {}


def compiled_chain(n):
    """The compiled chain function for ``n``-d layouts (its ``py_func`` runs in Python)."""
    if n not in _COMPILED:
        from numba import njit

        namespace = {"StridedLayout": StridedLayout}
        exec(_chain_source(n), namespace)
        _COMPILED[n] = njit(cache=False)(namespace["chain"])
    return _COMPILED[n]


def random_compiled_ops(draw, layout, steps):
    """``steps`` op codes and their arguments for a compiled chain of ``layout``'s ndim.

    Arguments are drawn from the layout the chain has at that step in Python, so most
    ops succeed; a failing op ends the chain (compiled code raises).
    """
    n = layout.ndim
    codes, args = [], []
    width = ARGS * n + 3
    for _ in range(steps):
        c = draw.integers(0, COMPILED_OPS - 1)
        a = [0] * width
        shape = layout.shape
        if c in (C_PERMUTED, C_DENSE_ORDER):
            a[:n] = _permutation(draw, n)
        elif c in (C_SLICED, C_SLICED_STEP):
            for i, e in enumerate(shape):
                s = _slice(draw, e)
                start = s.start if s.start is not None else draw.integers(-e - 1, e + 1)
                stop = s.stop if s.stop is not None else draw.integers(-e - 1, e + 1)
                a[3 * i: 3 * i + 3] = start, stop, s.step or draw.choice([1, -1, 2])
        elif c == C_RESHAPED:
            target = _factor_shape(draw, layout.volume, n)
            target = (target + (1,) * n)[:n] if len(target) != n else target
            a[:n] = target
        elif c == C_BROADCAST:
            target = list(shape)
            for i, e in enumerate(shape):
                if e == 1 and draw.boolean():
                    target[i] = draw.integers(0, 3)
            if n and draw.integers(0, 9) == 0:
                target[draw.integers(0, n - 1)] += 1
            a[:n] = target
        elif c == C_REPACKED:
            old = layout.itemsize
            new = draw.choice([1, 2, 4, 8, 16, old, 2 * old, 3 * old])
            if n and draw.boolean():
                new = layout.max_compatible_itemsize(old * draw.choice([1, 2, 4]), 0, -1)
            a[ARGS * n: ARGS * n + 3] = new, draw.choice([0, 0, 8, 4]), (
                draw.integers(-n, n - 1) if n else -1)
        elif c == C_INDEX_UNSQUEEZE and n:
            e = shape[0]
            a[ARGS * n] = draw.integers(-e, e - 1) if e and draw.integers(0, 9) else e
            a[ARGS * n + 1] = draw.integers(-n, n - 1)
        status, result = outcome(compiled_chain(n).py_func, layout, np.array([c]),
                                 np.array([a], dtype=np.int64),
                                 np.zeros((1, _row_width(n)), np.int64),
                                 np.zeros(1, np.uint64))  # fmt: skip
        if status != "ok" and draw.integers(0, 4):
            continue  # most chains go on: the failing op is dropped
        codes.append(c)
        args.append(a)
        if status != "ok":
            break
        layout = result
    if not codes:  # every op was dropped: one that always works
        codes, args = [C_REBUILT], [[0] * width]
    return np.array(codes, dtype=np.int64), np.array(args, dtype=np.int64).reshape(len(codes), width)


def run_compiled_chain(draw, steps=None, ndims=(0, 1, 2, 2, 3, 3, 4)):
    """One chain of ndim-keeping transforms in compiled code and in Python: the same
    outcome (result or exception class) and the same properties after every step."""
    n = draw.choice(ndims)
    layout = start_layout_of(draw, n)
    codes, args = random_compiled_ops(draw, layout, steps or draw.integers(5, 15))
    width = _row_width(n)
    results = []
    for function in (compiled_chain(n).py_func, compiled_chain(n)):
        rows = np.zeros((len(codes), width), np.int64)
        masks = np.zeros(len(codes), np.uint64)
        status, result = outcome(function, layout, codes, args, rows, masks)
        results.append((status, result, rows, masks))
    (ps, pr, prows, pmasks), (cs, cr, crows, cmasks) = results
    what = (layout, codes.tolist(), args.tolist())
    assert ps == cs, (what, ps, cs)
    assert np.array_equal(prows, crows), (what, np.argwhere(prows != crows), prows, crows)
    assert np.array_equal(pmasks, cmasks), (what, pmasks, cmasks)
    if ps == "ok":
        assert (pr.shape, pr._strides, pr.itemsize, pr.slice_offset) == (
            cr.shape, cr._strides, cr.itemsize, cr.slice_offset), (what, pr, cr)
        compare_with_fresh(cr, {}, what)
    return codes, ps


def start_layout_of(draw, n):
    """A random layout of ``n`` dimensions (as ``start_layout``) with explicit strides
    (compiled code has no implicit C: its ``strides`` are never None)."""
    layout = _start_layout_of(draw, n)
    return StridedLayout._trusted(layout.shape, layout._strides, layout.itemsize,
                                  layout.slice_offset)  # fmt: skip


def _start_layout_of(draw, n):
    while True:
        layout = start_layout(draw)
        if layout.ndim == n:
            return layout
        if layout.ndim > n:
            layout = layout.squeezed() if layout.squeezed().ndim <= n else layout[(0,) * (
                layout.ndim - n)] if all(layout.shape[: layout.ndim - n]) else None
        if layout is not None and layout.ndim < n:
            layout = layout.unsqueezed(tuple(range(n - layout.ndim)))
        if layout is not None and layout.ndim == n:
            return layout
