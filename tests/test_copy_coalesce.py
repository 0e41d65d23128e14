"""The two-layout kernel of copies, ``_kernels.coalesce_pair``, against NumPy: it keeps
the map from every index to its (first offset, second offset) pair."""

import array

import numpy as np
from helpers.strategies import MAX_STRIDE, element_offsets, shapes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layoutkit import _kernels

FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def coalesce(shape, first, second):
    n = len(shape)
    cap = n + 1
    pair = array.array("q", [*shape, *first, *second])
    out = array.array("q", bytes(32 * cap))
    m, first_offset, second_offset = _kernels.coalesce_pair(pair, n, out, cap)
    return (
        tuple(out[:m]), tuple(out[cap : cap + m]), tuple(out[2 * cap : 2 * cap + m]),
        first_offset, second_offset,
    )  # fmt: skip


def offset_pairs(shape, first, second, first_offset=0, second_offset=0):
    """Every index's (first offset, second offset), sorted: the map as a multiset."""
    a = element_offsets(shape, first, first_offset)
    b = element_offsets(shape, second, second_offset)
    order = np.lexsort((b, a))
    return np.stack([a[order], b[order]])


strides_values = st.one_of(st.just(0), st.integers(-MAX_STRIDE, MAX_STRIDE))


@st.composite
def layout_pairs(draw):
    shape = draw(shapes())
    first = tuple(draw(st.lists(strides_values, min_size=len(shape), max_size=len(shape))))
    second = tuple(draw(st.lists(strides_values, min_size=len(shape), max_size=len(shape))))
    return shape, first, second


@FAST
@given(layout_pairs())
def test_coalesce_pair_keeps_the_map_from_index_to_both_offsets(case):
    shape, first, second = case
    new_shape, new_first, new_second, first_offset, second_offset = coalesce(*case)
    np.testing.assert_array_equal(
        offset_pairs(new_shape, new_first, new_second, first_offset, second_offset),
        offset_pairs(shape, first, second),
    )
    if 0 in shape:
        assert new_shape == (0,)
        return
    assert all(e > 1 for e in new_shape)
    assert all(s >= 0 for s in new_first)
    keys = [(s, abs(t)) for s, t in zip(new_first, new_second, strict=True)]
    assert keys == sorted(keys, reverse=True)  # slowest first, ties by the second side
    for j in range(1, len(new_shape)):  # nothing left to merge
        assert not (
            new_first[j - 1] == new_first[j] * new_shape[j]
            and new_second[j - 1] == new_second[j] * new_shape[j]
        )


def test_coalesce_pair_examples():
    assert coalesce((3, 4, 4), (16, 4, 1), (16, 4, 1)) == ((48,), (1,), (1,), 0, 0)
    assert coalesce((3, 4, 4), (16, 4, 1), (4, 1, 12)) == ((12, 4), (4, 1), (1, 12), 0, 0)
    assert coalesce((3, 5), (-5, -1), (5, 1)) == ((15,), (1,), (-1,), -14, 14)
    assert coalesce((2, 1, 3), (3, 100, 1), (3, 7, 1)) == ((6,), (1,), (1,), 0, 0)
    assert coalesce((), (), ()) == ((), (), (), 0, 0)
    assert coalesce((4, 0), (1, 1), (2, 2)) == ((0,), (0,), (0,), 0, 0)
