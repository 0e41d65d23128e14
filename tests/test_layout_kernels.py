"""The integer kernels, the one layout algebra, against exact arithmetic and NumPy.

``StridedLayout`` runs the *layout kernels* of ``layoutkit._kernels`` (one per
operation); compiled code combines the *building blocks* in its own stack buffers. The
tests here call kernels directly: the layout kernels against oracles computed with
Python ints, which cannot wrap around (layouts whose strides reach the int64 limits
included), and the building blocks against the layout kernels, called as compiled code
calls them (NumPy int64 buffers). ``tests/test_layout_numpy.py`` checks every operation
of the class, and so every layout kernel, against NumPy views.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers.strategies import (
    basic_indices,
    broadcast_targets,
    contiguous_in_some_order,
    enumerable,
    extreme_layouts,
    layouts,
    permutations_of,
    reshape_targets,
    shapes,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from layoutkit import StridedLayout
from layoutkit import _kernels as K

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT64_MAX = 2**63 - 1
INT64 = range(-(2**63), 2**63)


def lay(layout):
    return np.array(layout.shape + layout._strides, dtype=np.int64)  # implicit C resolved


def buffer(size):
    return np.zeros(max(size, 1), dtype=np.int64)


any_layouts = st.one_of(layouts(), extreme_layouts())


def exact_offsets(shape, strides, offset):
    """Every offset in C order, with Python ints."""
    offsets = [offset]
    for extent, stride in zip(shape, strides, strict=True):
        offsets = [o + i * stride for o in offsets for i in range(extent)]
    return offsets


def layout_offsets_exact(layout):
    return exact_offsets(layout.shape, layout.strides, layout.slice_offset)


def object_view(layout):
    """A NumPy object array of the exact offsets, indexed like the layout (NumPy's rules
    on Python ints: no wraparound)."""
    values = np.empty(layout.volume, dtype=object)
    values[:] = layout_offsets_exact(layout)
    return values.reshape(layout.shape)


# ------------------------------------------------------------------------- check
def exact_check(shape, strides, itemsize, offset):
    """The rules of ``check`` with Python ints: ``(status, volume, low, high)``."""
    if any(e < 0 for e in shape):
        return K.NEGATIVE_EXTENT, None, 0, -1
    volume = int(np.prod(shape, dtype=object)) if shape else 1
    if volume not in INT64:
        return K.OVERFLOW_VOLUME, None, 0, -1
    if any(abs(s) * itemsize > INT64_MAX for s in strides):
        return K.OVERFLOW_BYTES, None, 0, -1
    if volume == 0:
        if offset * itemsize not in INT64:
            return K.OVERFLOW_BYTES, None, 0, -1
        return K.OK, 0, 0, -1
    low = offset + sum(s * (e - 1) for e, s in zip(shape, strides, strict=True) if s < 0)
    high = offset + sum(s * (e - 1) for e, s in zip(shape, strides, strict=True) if s > 0)
    partial = [offset]  # every partial sum the kernel forms must fit as well
    for e, s in zip(shape, strides, strict=True):
        partial.append(s * (e - 1))
    if low not in INT64 or high not in INT64 or any(p not in INT64 for p in partial):
        return K.OVERFLOW_OFFSET, None, 0, -1
    if low * itemsize not in INT64 or (high + 1) * itemsize not in INT64:
        return K.OVERFLOW_BYTES, None, 0, -1
    return K.OK, volume, low, high


magnitudes = st.integers(0, 62).map(lambda k: 2**k)
int64_values = st.one_of(
    st.integers(-3, 3), magnitudes, magnitudes.map(lambda v: -v), magnitudes.map(lambda v: v - 1),
    st.just(INT64_MAX), st.just(-INT64_MAX),
)


@FAST
@given(st.data())
def test_check_agrees_with_exact_arithmetic(data):
    ndim = data.draw(st.integers(0, 5))
    shape = tuple(data.draw(st.lists(st.one_of(st.integers(0, 4), magnitudes), min_size=ndim, max_size=ndim)))
    strides = tuple(data.draw(st.lists(int64_values, min_size=ndim, max_size=ndim)))
    itemsize = data.draw(st.sampled_from([1, 2, 3, 8, 2**31 - 1]))
    offset = data.draw(st.one_of(st.integers(-100, 100), int64_values))
    status, volume, low, high = K.check(
        np.array(shape + strides or (0,), dtype=np.int64), ndim, itemsize, offset, False
    )
    expected = exact_check(shape, strides, itemsize, offset)
    if expected[0] == K.OK:
        assert (status, volume, low, high) == expected
    else:
        assert status != K.OK  # refused; the kernel names the first failure in its order
        assert expected[0] != K.OK


def test_check_divides_byte_strides_in_place():
    packed = np.array([2, 3, 24, -8], dtype=np.int64)
    assert K.check(packed, 2, 8, 0, True) == (K.OK, 6, -2, 3)
    assert packed.tolist() == [2, 3, 3, -1]
    assert K.check(np.array([2, 3, 24, 6], dtype=np.int64), 2, 8, 0, True)[:2] == (K.NOT_A_MULTIPLE, 1)


# ------------------------------------------------------------------------- analyze
@FAST
@given(any_layouts)
def test_analyze_agrees_with_independent_oracles(layout):
    n = layout.ndim
    info = buffer(K.INFO_ORDER + n)
    assert K.analyze(lay(layout), n, layout.itemsize, layout.slice_offset, info) == K.OK
    assert info[K.INFO_VOLUME] == layout.volume
    assert (info[K.INFO_MIN], info[K.INFO_MAX]) == layout.offset_bounds
    order = tuple(info[K.INFO_ORDER : K.INFO_ORDER + n].tolist())
    keys = [(-abs(layout.strides[a]), -layout.shape[a], a) for a in order]
    assert sorted(order) == list(range(n)) and keys == sorted(keys)
    flags = int(info[K.INFO_FLAGS])
    assert bool(flags & K.FLAG_ANY) == contiguous_in_some_order(layout.shape, layout.strides)
    offsets = layout_offsets_exact(layout) if layout.volume <= 4096 else None
    if offsets is not None and flags & K.FLAG_UNIQUE:  # the nesting test never lies
        assert len(set(offsets)) == len(offsets)
    if offsets is not None and all(abs(s) < 2**40 for s in layout.strides) and layout.volume:
        c_view = np.lib.stride_tricks.as_strided(
            np.empty(1), layout.shape, [s * 8 for s in layout.strides]
        )
        assert bool(flags & K.FLAG_C) == c_view.flags.c_contiguous
        assert bool(flags & K.FLAG_F) == c_view.flags.f_contiguous
    # the mask merges exactly what flatten merges, and merging keeps every offset
    mask = int(info[K.INFO_MASK])
    out = buffer(2 * max(n, 1))
    m = K.flatten(lay(layout), n, -1, out, max(n, 1))
    assert m == max(n, 1) - bin(mask & (2**64 - 1)).count("1")
    if offsets is not None:
        merged = exact_offsets(out[:m].tolist(), out[m : 2 * m].tolist(), layout.slice_offset)
        assert merged == offsets


def test_is_unique_nested_does_not_wrap_around():
    # offsets 0..1 + j * -2**62 + k * (2**62 + 1): index (0, 1, 1) and (1, 0, 0) share 1
    layout = StridedLayout((2, 3, 2), (1, -(2**62), 2**62 + 1), 1)
    order = np.array(layout.stride_order, dtype=np.int64)
    assert not K.is_unique_nested(lay(layout), 3, order, 0)
    assert not K.offsets_are_distinct(lay(layout), 3, 0, buffer(layout.volume))
    offsets = layout_offsets_exact(layout)
    assert len(set(offsets)) < len(offsets)


@FAST
@given(any_layouts)
def test_offsets_are_distinct_is_exact(layout):
    assume(layout.volume <= K.EXACT_UNIQUE_LIMIT)
    offsets = layout_offsets_exact(layout)
    distinct = K.offsets_are_distinct(lay(layout), layout.ndim, layout.slice_offset, buffer(layout.volume))
    assert distinct == (len(set(offsets)) == len(offsets)) == layout.is_unique



@FAST
@given(any_layouts)
def test_unique_by_search_is_exact(layout):
    """The search answers exactly (or gives up), at any volume and near int64's limits."""
    assume(layout.volume and layout.volume <= K.EXACT_UNIQUE_LIMIT)
    offsets = layout_offsets_exact(layout)
    scratch = np.zeros(6 * layout.ndim, dtype=np.int64)
    found = K.unique_by_search(lay(layout), layout.ndim, scratch, K.UNIQUE_SEARCH_BUDGET)
    assert found in (-1, int(len(set(offsets)) == len(offsets)))


@pytest.mark.parametrize(
    "shape, strides, expected",
    [
        ((2, 3), (3, 2), 1),  # interleaved, unique: the nesting test says no
        ((2, 3), (2, 1), 0),  # offsets 0..3 twice
        ((3, 4), (0, 1), 0),  # a broadcast axis
        ((5000, 3), (3, 2), 1),  # beyond the enumeration limit: 3 di + 2 dj == 0 needs dj 0
        ((5000, 4), (3, 2), 0),  # (0, 3) and (2, 0) meet
        ((2, 3, 2), (1, -(2**62), 2**62 + 1), 0),  # (0, 1, 1) and (1, 0, 0) meet
        ((2, 2), (2**61, -(2**61) + 1), 1),
        ((1, 7, 1), (-5, 0, 9), 0),
        ((1, 1), (4, 4), 1),
    ],
)
def test_unique_by_search_examples(shape, strides, expected):
    layout = StridedLayout(shape, strides, 1)
    scratch = np.zeros(6 * len(shape), dtype=np.int64)
    assert K.unique_by_search(lay(layout), len(shape), scratch, K.UNIQUE_SEARCH_BUDGET) == expected
    assert layout.is_unique == bool(expected)


def test_unique_by_search_gives_up_past_its_budget():
    layout = StridedLayout((6, 6, 6), (7, 5, 3), 1)  # many partial sums cancel: ~100 nodes
    scratch = np.zeros(18, dtype=np.int64)
    assert K.unique_by_search(lay(layout), 3, scratch, 3) == -1
    assert K.unique_by_search(lay(layout), 3, scratch, K.UNIQUE_SEARCH_BUDGET) == 0


def test_merge_mask_keeps_unmergeable_extents_apart():
    # zero volume: any strides merge, but merging the first two axes needs extent 2**124
    layout = StridedLayout((2**62, 2**62, 0), (5, 7, 1), 1)
    assert K.merge_mask(lay(layout), 3) == layout.flattened_axis_mask() == 0b100
    assert layout.flattened().shape == (2**62, 0)


# ------------------------------------------------------------------------- transforms
@FAST
@given(st.data())
def test_apply_index_agrees_with_exact_offsets(data):
    layout = data.draw(any_layouts)
    assume(layout.volume <= 4096)
    index = data.draw(basic_indices(layout.shape))
    result = layout[index]  # the apply_index kernel
    expected = np.asarray(object_view(layout)[index], dtype=object)  # 0-d: an array too
    assert result.shape == expected.shape
    offsets = list(np.ravel(expected))
    assert layout_offsets_exact(result) == offsets
    assert result.offset_bounds == ((min(offsets), max(offsets)) if offsets else (0, -1))


@FAST
@given(st.data())
def test_reshape_and_broadcast_keep_exact_offsets(data):
    layout = data.draw(any_layouts)
    assume(0 < layout.volume <= 4096)
    target = data.draw(reshape_targets(layout.volume))
    try:
        reshaped = layout.reshaped(target)  # the reshape_layout kernel
    except (ValueError, OverflowError):
        pass
    else:
        assert layout_offsets_exact(reshaped) == layout_offsets_exact(layout)
    shape = data.draw(broadcast_targets(layout.shape))
    broadcast = layout.broadcast_to(shape)  # the broadcast_layout kernel
    if len(shape) <= 32:  # NumPy's broadcast_to limit
        expected = np.broadcast_to(object_view(layout), shape)
        assert layout_offsets_exact(broadcast) == list(expected.flat)


@FAST
@given(st.data())
def test_dense_strides_agree(data):
    layout = data.draw(layouts())
    order = data.draw(permutations_of(layout.ndim))
    dense = StridedLayout.dense(layout.shape, layout.itemsize, order)  # dense_layout
    out = buffer(layout.ndim)
    shape = np.array(layout.shape or (0,), dtype=np.int64)
    K.dense_strides(shape, layout.ndim, np.array(order or (0,), dtype=np.int64), out, 0)
    assert tuple(out[: layout.ndim].tolist()) == dense.strides


@FAST
@given(st.data())
def test_reshape_agrees(data):
    layout = data.draw(layouts())
    assume(layout.volume > 0)
    target = data.draw(reshape_targets(layout.volume))
    try:
        expected = layout.reshaped(target)
    except ValueError:
        expected = None
    shape = expected.shape if expected is not None else tuple(abs(e) for e in target)
    m, n = len(shape), layout.ndim
    out = buffer(2 * m + 2 * n)
    status = K.reshape(lay(layout), n, np.array(shape, dtype=np.int64), m, out, m)
    if expected is None:
        assert status != K.OK or -1 in target
    else:
        assert status == K.OK
        assert tuple(out[m : 2 * m].tolist()) == expected.strides


def test_reshape_with_a_wrong_volume_never_reads_past_the_shapes():
    layout = StridedLayout.dense((2, 3), 1)
    for shape in [(5,), (4, 4), (2, 2**40), (7, 1, 1), (6, 5), (6, 1, 2)]:
        m = len(shape)
        out = buffer(2 * m)
        assert K.reshape(lay(layout), 2, np.array(shape, dtype=np.int64), m, out, m) != K.OK


@FAST
@given(st.data())
def test_broadcast_agrees(data):
    layout = data.draw(layouts())
    target = data.draw(broadcast_targets(layout.shape))
    m = len(target)
    out = buffer(2 * m)
    status = K.broadcast(lay(layout), layout.ndim, np.array(target or (0,), dtype=np.int64), m, out, m)
    assert status == K.OK
    assert tuple(out[m : 2 * m].tolist()) == layout.broadcast_to(target).strides


@FAST
@given(st.data())
def test_slicing_agrees(data):
    layout = data.draw(any_layouts)
    index = data.draw(basic_indices(layout.shape, allow_new_axes=False, allow_ellipsis=False))
    items = index if isinstance(index, tuple) else (index,)
    try:
        result = layout[index]
    except OverflowError:
        result = None
    offset = layout.slice_offset
    shape, strides = [], []
    for axis, item in enumerate(items):
        e, s = layout.shape[axis], layout.strides[axis]
        if isinstance(item, slice):
            status, offset, length, stride = K.slice_one(
                offset, e, s, item.start or 0, item.stop or 0, item.step or 1,
                item.start is not None, item.stop is not None, layout.itemsize,
            )
            assert (K.slice_axis(e, item.start or 0, item.stop or 0, item.step or 1,
                                 item.start is not None, item.stop is not None)[1]
                    == len(range(*item.indices(e))))
            if status != K.OK:  # the same limits as apply_index: the class refuses too
                assert result is None
                return
            shape.append(length)
            strides.append(stride)
        else:
            status, offset = K.step_offset(offset, item + e if item < 0 else item, s)
            assert status == K.OK
    if result is None:  # what apply_index checks last: an empty result's offset in bytes
        assert 0 in shape + list(layout.shape[len(items):])
        assert not -(2**63) <= offset * layout.itemsize <= INT64_MAX
        return
    shape += layout.shape[len(items):]
    strides += layout.strides[len(items):]
    assert (tuple(shape), tuple(strides), offset) == (result.shape, result.strides, result.slice_offset)


@FAST
@given(any_layouts, st.sampled_from([1, 2, 4, 8, 16, 32]), st.data())
def test_repack_agrees(layout, itemsize, data):
    assume(layout.ndim)
    axis = data.draw(st.integers(0, layout.ndim - 1))
    n = layout.ndim
    out = buffer(2 * n)
    old = layout.itemsize
    divides = itemsize % old == 0 if itemsize > old else old % itemsize == 0
    assume(itemsize != old and divides)
    status, offset = K.repack(lay(layout), n, layout.slice_offset, old, itemsize, axis, out, n)
    try:
        expected = layout.repacked(itemsize, axis=axis)
    except (ValueError, OverflowError):
        assert status != K.OK
        return
    assert status == K.OK
    assert (tuple(out[:n].tolist()), tuple(out[n : 2 * n].tolist()), offset) == (
        expected.shape, expected.strides, expected.slice_offset
    )
    if expected.volume and enumerable(layout):  # every byte keeps its place
        old_bytes = {o * old + b for o in layout_offsets_exact(layout) for b in range(old)}
        new_bytes = {o * itemsize + b for o in layout_offsets_exact(expected) for b in range(itemsize)}
        assert old_bytes == new_bytes


def test_repack_reports_an_extent_that_would_wrap():
    layout = StridedLayout((2**10, 2**52), (0, 1), 8)  # a broadcast: 2**62 elements
    out = buffer(4)
    status, _ = K.repack(lay(layout), 2, 0, 8, 1, 1, out, 2)
    assert status == K.OVERFLOW_VOLUME  # 2**65 elements of 1 byte
    with pytest.raises(OverflowError, match="volume"):
        layout.repacked(1)


@FAST
@given(any_layouts, st.sampled_from([1, 2, 3, 8, 12, 16, 2**31, 3 * 2**31, 2**62, INT64_MAX]),
       st.integers(0, 2**40), st.data())
def test_max_compatible_itemsize_is_the_largest_usable(layout, max_itemsize, data_ptr, data):
    assume(layout.ndim and max_itemsize >= layout.itemsize)
    axis = data.draw(st.integers(0, layout.ndim - 1))
    size = K.max_compatible_itemsize(
        lay(layout), layout.ndim, layout.slice_offset, layout.itemsize, max_itemsize,
        data_ptr % max_itemsize, axis,
    )
    assert size == layout.max_compatible_itemsize(max_itemsize, data_ptr, axis)
    assert size < 2**31 and size % layout.itemsize == 0
    assert max_itemsize % size == 0 or size == layout.itemsize  # itemsize: nothing fits
    assert layout.repacked(size, data_ptr, axis).itemsize == size
    if max_itemsize <= 64:  # no usable multiple of the answer is missed
        for candidate in range(size + layout.itemsize, max_itemsize + 1, layout.itemsize):
            if max_itemsize % candidate == 0 and candidate % size == 0:
                with pytest.raises(ValueError):
                    layout.repacked(candidate, data_ptr, axis)


@pytest.mark.parametrize(
    ("shape", "itemsize", "max_itemsize", "expected"),
    [
        ((4096,), 1, 2**31, 4096),
        ((2**32,), 1, 2**31, 2**30),  # would be 2**31: the largest below the limit
        ((2**32,), 1, 2**62, 2**30),
        ((3 * 2**31,), 1, 3 * 2**31, 3 * 2**29),
        ((2**20,), 4, 2**40, 2**22),
    ],
)
def test_max_compatible_itemsize_beyond_the_itemsize_limit(shape, itemsize, max_itemsize, expected):
    layout = StridedLayout.dense(shape, itemsize)
    assert layout.max_compatible_itemsize(max_itemsize) == expected
    assert layout.repacked(expected).itemsize == expected
    assert K.max_compatible_itemsize(lay(layout), 1, 0, itemsize, max_itemsize, 0, 0) == expected


@FAST
@given(any_layouts, st.data())
def test_offset_of_agrees_with_exact_offsets(layout, data):
    assume(layout.volume and layout.volume <= 4096)
    index = tuple(data.draw(st.integers(-e, e - 1)) for e in layout.shape)
    status, offset = K.offset_of(lay(layout), layout.ndim, layout.slice_offset, np.array(index or (0,), dtype=np.int64))
    assert status == K.OK and offset == object_view(layout)[index]
    if layout.ndim:
        bad = (layout.shape[0],) + index[1:]
        assert K.offset_of(lay(layout), layout.ndim, 0, np.array(bad, dtype=np.int64)) == (K.OUT_OF_RANGE, 0)


@FAST
@given(st.data())
def test_unsqueeze_inserts_unit_axes(data):
    layout = data.draw(any_layouts)
    assume(layout.ndim < 62)
    m = layout.ndim + data.draw(st.integers(1, 2))
    new_axes = sorted(data.draw(st.lists(st.integers(0, m - 1), min_size=m - layout.ndim, max_size=m - layout.ndim, unique=True)))
    out = buffer(2 * m)
    K.unsqueeze(lay(layout), layout.ndim, sum(1 << a for a in new_axes), m, layout.itemsize, out)
    shape, strides = out[:m].tolist(), out[m : 2 * m].tolist()
    kept = [i for i in range(m) if i not in new_axes]
    assert [shape[i] for i in kept] == list(layout.shape) and all(shape[a] == 1 for a in new_axes)
    assert [strides[i] for i in kept] == list(layout.strides)
    assert all(abs(s) * layout.itemsize <= INT64_MAX for s in strides)
    assert StridedLayout(tuple(shape), tuple(strides), layout.itemsize).volume == layout.volume


@given(shapes(), st.sampled_from([1, 2, 8]))
def test_byte_strides(shape, itemsize):
    layout = StridedLayout(shape, None, itemsize)
    out = buffer(layout.ndim)
    K.byte_strides(lay(layout), layout.ndim, itemsize, out)
    assert tuple(out[: layout.ndim].tolist()) == tuple(s * itemsize for s in layout._strides)


# ------------------------------------------------------------------------- loading
def test_a_layout_operation_loads_only_its_own_kernel():
    """Numba is imported by the first operation that needs a kernel, which loads that
    kernel alone (from Numba's cache, or compiled)."""
    probe = textwrap.dedent(
        """
        import sys
        import layoutkit
        from layoutkit import layout
        before = "numba" in sys.modules
        layoutkit.StridedLayout.dense((2, 3), 4)
        print(before, sorted(
            name for name, value in vars(layout).items()
            if name.isupper() and name.startswith("_") and callable(value)
            and not isinstance(value, (layout._Kernel, type))
        ))
        """
    )
    for _ in range(2):  # the first run may compile (an empty cache), the second loads it
        result = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split(maxsplit=1) == ["False", "['_DENSE_LAYOUT']\n"]


def test_first_use_from_many_threads_at_once():
    """Kernels loaded by several threads at once, and output buffers made per call: every
    thread gets the answers of a single-threaded run."""
    probe = textwrap.dedent(
        """
        import threading
        from layoutkit import StridedLayout

        def work(seed):
            base = StridedLayout.dense((4, 6, 5), 2, (seed % 3, (seed + 1) % 3, (seed + 2) % 3))
            out = []
            for i in range(200):
                layout = base[i % 2 :, ::-1 - i % 2].broadcast_to((2, 4 - i % 2, 6 // (1 + i % 2), 5))
                out.append((layout.to_dense("F").strides, layout.flattened().shape,
                            layout.stride_order, layout.is_unique, layout.strides_in_bytes,
                            base.to_dense("C").reshaped((-1, 5)).unsqueezed(i % 3).strides))
            return out

        expected = {seed: work(seed) for seed in range(8)}
        results = {}
        start = threading.Barrier(8)

        def run(seed):
            start.wait()
            results[seed] = work(seed)

        threads = [threading.Thread(target=run, args=(seed,)) for seed in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(results == expected)
        """
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


# every layout kernel, with the argument types compiled code would give it
_DEVICE_SIGNATURES = {
    "check": "a i i i i", "analyze": "a i i i a", "dense_layout": "a i i i",
    "dense_like": "a i i i a", "reshape_layout": "a i a i i i", "broadcast_layout": "a i a i i i",
    "flatten": "a i i a i", "unsqueeze": "a i i i i a", "apply_index": "a i i i a a i",
    "repack_layout": "a i i i i i a", "max_compatible_itemsize": "a i i i i i i",
    "offset_of": "a i i a", "byte_strides": "a i i a", "offsets_are_distinct": "a i i a",
    "unique_by_search": "a i a i",
}


@pytest.mark.parametrize("name", _DEVICE_SIGNATURES)
def test_layout_kernels_compile_for_cuda_devices(name, monkeypatch):
    """The layout kernels are device code too (compile_ptx for cc 9.0, no GPU needed):
    no Python objects, no allocation."""
    import types

    cuda = pytest.importorskip("numba.cuda")
    import numba.cuda.dispatcher as dispatcher
    from numba import types as nt

    from tests.conftest import gpu_unavailable_reason

    if gpu_unavailable_reason() is not None:  # compile_ptx asks the device otherwise
        monkeypatch.setattr(
            dispatcher, "get_current_device",
            lambda: types.SimpleNamespace(compute_capability=(9, 0)),
        )
    kinds = {"a": nt.int64[::1], "i": nt.int64}
    signature = tuple(kinds[k] for k in _DEVICE_SIGNATURES[name].split())
    ptx, _ = cuda.compile_ptx(getattr(K, name).py_func, signature, device=True, cc=(9, 0))
    assert ".func" in ptx and "malloc" not in ptx
