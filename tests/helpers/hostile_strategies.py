"""Hypothesis strategies for hostile values: junk of every type, integer-likes that lie,
and array-interface dicts assembled from them.

Values come in three strengths: plausible (what a correct producer might send), edgy
(boundaries: 0, -1, 2**63, 2**64, NumPy integers, bools, integral floats) and junk (wrong
types, hostile objects). The dict strategies mix all three per entry, so most examples
are nearly valid and fail in one place.
"""

import array

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.hostile import slow_enabled
from helpers.hostile_objects import (
    CountingIndex,
    IntSubclass,
    LyingLength,
    NonIntIndex,
    RaisingIndex,
    RaisingIteration,
    ShiftingSequence,
)

BOUNDARIES = (
    0, 1, -1, 2, 7, 8, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1, 2**63, -(2**63), 2**64 - 1,
    2**64, -(2**64), 2**70,
)  # fmt: skip


def fuzz_settings(examples, slow_examples=None):
    """Hypothesis settings for a fuzz case: ``examples`` by default (derandomized, so CI
    always runs the same sample), ``slow_examples`` (random) under ``LAYOUTKIT_SLOW=1``."""
    from hypothesis import HealthCheck

    long_run = slow_enabled() and slow_examples is not None
    return settings(
        max_examples=slow_examples if long_run else examples,
        derandomize=not long_run,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=long_run,  # CI: the first fault, shrunk, is enough to fail
        print_blob=True,
    )


def fuzz_case(body, examples, slow_examples=None):
    """A hostile case running ``body(data)`` on hypothesis data, with :func:`fuzz_settings`."""

    @fuzz_settings(examples, slow_examples)
    @given(st.data())
    def run(data):
        body(data)

    return run


junk = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.just(()),
    st.just([]),
    st.just({}),
    st.just(object()),
    st.just(Ellipsis),
    st.just(slice(None)),
    st.complex_numbers(max_magnitude=4),
    st.builds(RaisingIndex),
    st.builds(NonIntIndex, st.one_of(st.floats(0, 4), st.none(), st.text(max_size=2))),
)

plausible_ints = st.integers(-3, 12)
edgy_ints = st.one_of(
    st.sampled_from(BOUNDARIES),
    st.sampled_from(BOUNDARIES).map(lambda v: v + 1),
    st.integers(-(2**65), 2**65),
)
numpy_ints = st.one_of(
    st.integers(-3, 12).map(np.int64),
    st.integers(0, 12).map(np.uint8),
    st.integers(0, 2**64 - 1).map(np.uint64),
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
)
int_likes = st.one_of(
    plausible_ints,
    plausible_ints,
    edgy_ints,
    numpy_ints,
    st.booleans(),
    st.integers(-3, 12).map(float),
    st.builds(CountingIndex, st.integers(0, 4), st.sampled_from([1, 100, 2**62])),
    st.integers(0, 5).map(IntSubclass),
    st.builds(RaisingIndex),
    st.builds(NonIntIndex),
)


def int_sequences(min_size=0, max_size=4, elements=int_likes):
    """Tuples mostly; also lists, arrays, lying and raising sequences, long tuples."""
    items = st.lists(elements, min_size=min_size, max_size=max_size)
    return st.one_of(
        items.map(tuple),
        items.map(tuple),
        items,
        st.lists(plausible_ints, max_size=max_size).map(lambda v: array.array("q", v)),
        st.builds(LyingLength, st.lists(plausible_ints, max_size=4), st.integers(0, 70)),
        st.builds(
            ShiftingSequence,
            st.lists(plausible_ints, max_size=4),
            st.lists(plausible_ints, max_size=4),
        ),  # fmt: skip
        st.builds(RaisingIteration, st.integers(0, 3)),
        st.integers(60, 70).map(lambda n: (1,) * n),
    )


TYPESTRS = ("<f8", "<f4", "|u1", "|i1", "<i4", "<u8", "|b1", "<c16", "<f2", ">f4", "|V8",
            "|V0", "|V3", "<U4", "|O", "<M8[s]", "|S2", "<f16")  # fmt: skip
typestrs = st.one_of(
    st.sampled_from(TYPESTRS),
    st.sampled_from(TYPESTRS),
    st.sampled_from(TYPESTRS).map(str.encode),
    st.text(max_size=4),
    junk,
)
descrs = st.one_of(
    typestrs.map(lambda t: [("", t)]),
    st.just([("a", "<f4")]),
    st.just([("a", "<f4"), ("b", "|u1")]),
    st.just([("a", "<f8"), ("", "|V8")]),
    st.lists(st.tuples(st.text(max_size=2), typestrs), max_size=3),
    junk,
)


@st.composite
def buffer_objects(draw):
    """An object with the buffer protocol: bytearray, bytes, memoryview, array.array."""
    size = draw(st.sampled_from([0, 1, 3, 8, 16, 64, 200]))
    kind = draw(st.sampled_from(["bytearray", "bytes", "memoryview", "array", "readonly"]))
    data = bytes(draw(st.binary(min_size=size, max_size=size)))
    if kind == "bytearray":
        return bytearray(data)
    if kind == "bytes":
        return data
    if kind == "memoryview":
        return memoryview(bytearray(data))
    if kind == "readonly":
        return memoryview(bytearray(data)).toreadonly()
    return array.array("b", data)


VALID_TYPESTRS = ("<f8", "<f4", "|u1", "<i2", "<i4", "|b1", "<c16", "<u8")
_REMOVE = object()


def _edited_sequence(draw, values):
    """``values`` with one entry replaced by an integer-like (or junk)."""
    if not values:
        return draw(int_sequences())
    values = list(values)
    values[draw(st.integers(0, len(values) - 1))] = draw(st.one_of(int_likes, junk))
    return draw(st.sampled_from([tuple, list]))(values)


@st.composite
def interface_dicts(draw, pointer, cuda=False):
    """``__array_interface__`` (or, with ``cuda``, ``__cuda_array_interface__``) dicts.

    A valid description of ``(ptr, readonly)`` memory (``pointer`` draws the raw
    pointers) with zero to three entries made hostile: replaced by junk, edited in one
    element, removed, or joined by entries that should not be there.
    """
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    typestr = draw(st.sampled_from(VALID_TYPESTRS))
    itemsize = int(typestr[2:]) if typestr[1] != "c" else 16
    interface = {
        "version": 3,
        "shape": shape,
        "typestr": typestr,
        "data": (draw(pointer), draw(st.booleans())),
    }
    if draw(st.booleans()):
        step = st.integers(-6, 6).map(lambda k: k * itemsize)
        interface["strides"] = tuple(draw(st.lists(step, min_size=ndim, max_size=ndim)))
    data = st.one_of(
        st.tuples(pointer, st.booleans(), st.booleans()),
        st.tuples(st.one_of(int_likes, junk), st.one_of(st.booleans(), junk)),
        st.lists(pointer, min_size=2, max_size=2),
        junk,
    )
    if not cuda:
        data = st.one_of(buffer_objects(), buffer_objects(), st.none(), data)
    hostile = {
        "version": st.one_of(int_likes, junk),
        "shape": st.one_of(int_sequences(), junk),
        "shape[i]": None,
        "strides": st.one_of(st.none(), int_sequences(), junk),
        "strides[i]": None,
        "typestr": typestrs,
        "descr": descrs,
        "data": data,
        "offset": st.one_of(int_likes, junk),
        "mask": junk,
        "extra": junk,
    }
    if cuda:
        hostile["stream"] = st.one_of(st.none(), st.sampled_from([1, 2, 0, -1]), edgy_ints, junk)
    for key in draw(st.lists(st.sampled_from(sorted(hostile)), max_size=3)):
        if key.endswith("[i]"):
            name = key[:-3]
            interface[name] = _edited_sequence(draw, interface.get(name) or shape)
        elif key in ("version", "shape", "typestr", "data") and draw(st.integers(0, 4)) == 0:
            interface.pop(key, None)
        else:
            interface[key] = draw(hostile[key])
    return interface
