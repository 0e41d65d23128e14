"""Layouts and views in @njit code: call overhead against NumPy arrays, and op costs inside.

Run: ``python benchmarks/bench_njit.py``. Prints two tables:

1. The cost of calling an ``@njit`` function (whose body does nothing) with 1 and 4
   layout or view arguments, next to the same call with NumPy arrays and with an empty
   extension object (a class whose only member is a ``_numba_type_`` class attribute,
   unboxed to nothing): Numba's dispatcher types every argument that is not a NumPy array
   or a scalar through ``_numba_type_`` after a failed fingerprint, which sets the floor
   for any such argument. "fresh" passes each argument object once (random layouts, the
   first call with that object), "same" passes the same objects again (the hundredth
   call). Medians of 5 runs of 2000 calls, in ns per call.
2. Inside ``@njit``: ns per operation in a loop of 10**6 whose arguments vary with the
   loop index (so that the compiler cannot hoist the operation out of the loop).
"""

import statistics
import sys
import time

import numpy as np
from numba import njit, types
from numba.extending import NativeValue, models, register_model, unbox

from layoutkit import StridedLayout, StridedMemoryView

CALLS = 2000
REPEATS = 5


@njit
def one(a):
    return 0


@njit
def four(a, b, c, d):
    return 0


class _EmptyType(types.Type):
    def __init__(self):
        super().__init__(name="EmptyExtensionObject")


_EMPTY_TYPE = _EmptyType()
register_model(_EmptyType)(models.OpaqueModel)


@unbox(_EmptyType)
def _unbox_empty(typ, obj, c):
    return NativeValue(c.context.get_constant_null(typ))


class EmptyExtensionObject:
    """The cheapest argument Numba types through ``_numba_type_`` (the floor)."""

    __slots__ = ()
    _numba_type_ = _EMPTY_TYPE


def _random_arrays(rng, count):
    """2-d float64 NumPy views with random shapes, steps and axis orders (C, F and A)."""
    arrays = []
    for _ in range(count):
        base = np.zeros((int(rng.integers(2, 9)), int(rng.integers(2, 9))))
        steps = tuple(int(s) for s in rng.choice([1, 2, -1], size=2))
        view = base[:: steps[0], :: steps[1]]
        arrays.append(view.T if rng.random() < 0.5 else view)
    return arrays


def _layout_of(array):
    strides = tuple(s // array.itemsize for s in array.strides)
    return StridedLayout(array.shape, strides, array.itemsize)


def _per_call_ns(function, argument_sets):
    """Median over REPEATS of the mean time of calling ``function(*args)`` per set."""
    function(*argument_sets[0])  # compiled before timing
    results = []
    for _ in range(REPEATS):
        start = time.perf_counter_ns()
        for args in argument_sets:
            function(*args)
        results.append((time.perf_counter_ns() - start) / len(argument_sets))
    return statistics.median(results)


def _fresh_ns(function, make_sets):
    """Like ``_per_call_ns`` with new argument objects for every call (made untimed)."""
    function(*make_sets()[0])
    results = []
    for _ in range(REPEATS):
        argument_sets = make_sets()
        start = time.perf_counter_ns()
        for args in argument_sets:
            function(*args)
        results.append((time.perf_counter_ns() - start) / len(argument_sets))
    return statistics.median(results)


def print_call_table():
    rng = np.random.default_rng(0)
    arrays = _random_arrays(rng, CALLS)
    empty = EmptyExtensionObject()

    def layouts():
        return [_layout_of(a) for a in arrays]

    def views():
        return [StridedMemoryView.from_array_interface(a) for a in arrays]

    print("## @njit call overhead, ns per call (an empty function; 2-d float64 arguments)")
    print(
        f"{'arguments':<22}{'ours':>9}{'ndarray':>9}{'ratio':>7}{'floor':>9}{'ratio':>7}"
        "   floor: an empty extension object"
    )
    for kind, make in (("layout", layouts), ("view", views)):
        for count, function in ((1, one), (4, four)):
            floor = _per_call_ns(function, [(empty,) * count] * CALLS)
            for mode in ("fresh", "same"):
                if mode == "fresh":
                    ours = _fresh_ns(
                        function, lambda k=count, m=make: [(o,) * k for o in m()]
                    )
                    ndarray = _fresh_ns(
                        function, lambda k=count: [(a[:],) * k for a in arrays]
                    )
                else:
                    objects = make()
                    ours = _per_call_ns(function, [(o,) * count for o in objects])
                    ndarray = _per_call_ns(function, [(a,) * count for a in arrays])
                name = f"{count} {kind}{'s' if count > 1 else ''}, {mode}"
                print(
                    f"{name:<22}{ours:>9.0f}{ndarray:>9.0f}{ours / ndarray:>7.2f}"
                    f"{floor:>9.0f}{ours / floor:>7.2f}"
                )


@njit(cache=True)
def _permute(layout, n):
    acc = 0
    for i in range(n):
        acc += layout.permuted(((i + 2) % 3, i % 3, (i + 1) % 3)).strides[0]
    return acc


@njit(cache=True)
def _slice(layout, n):
    # starts and steps read from an array, so that the loop cannot be folded to a formula
    acc = 0
    for i in range(n):
        start = _STARTS[i & 1023]
        sliced = layout[start:, :: _STEPS[i & 1023]]
        acc += sliced.slice_offset + sliced.shape[0] + sliced.strides[1]
    return acc


_STARTS = np.random.default_rng(1).integers(-6, 6, 1024)
_STEPS = np.random.default_rng(2).choice(np.array([-2, -1, 1, 3]), 1024)


@njit(cache=True)
def _reshape(layout, n):
    acc = 0
    for i in range(n):
        rows = _ROWS[i & 1023]
        reshaped = layout.reshaped((rows, -1))
        acc += reshaped.strides[0] + reshaped.shape[1]
    return acc


_ROWS = np.random.default_rng(3).choice(np.array([1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60]), 1024)


@njit(cache=True)
def _reshape_strided(layout, n):
    acc = 0
    for i in range(n):
        reshaped = layout.reshaped((5 if _ROWS[i & 1023] & 1 else 15, -1))
        acc += reshaped.strides[0] + reshaped.shape[1]
    return acc


@njit(cache=True)
def _contiguity(layout, n):
    acc = 0
    for i in range(n):
        p = layout.permuted((i % 3, (i + 1) % 3, (i + 2) % 3))
        acc += p.is_contiguous_any + p.is_unique
    return acc


@njit(cache=True)
def _offset_of(layout, n):
    acc = 0
    for i in range(n):
        acc += layout.offset_of((i % 5, i % 3, i % 4))
    return acc


@njit(cache=True)
def _view_slice(view, n):
    acc = 0.0
    for i in range(n):
        acc += view[_STARTS[i & 1023] % 5 :, :: _STEPS[i & 1023]][0, 0, 0]
    return acc


@njit(cache=True)
def _view_permute(view, n):
    acc = 0.0
    for i in range(n):
        acc += view.permuted(((i + 2) % 3, i % 3, (i + 1) % 3))[0, 1, 1]
    return acc


def print_op_table():
    print("\n## Inside @njit: ns per operation (loop of 10**6, arguments vary with the index)")
    layout = StridedLayout.dense((5, 3, 4), 4)
    view = StridedMemoryView.from_array_interface(np.arange(60.0).reshape(5, 3, 4))
    n = 1_000_000
    for name, function, argument in (
        ("layout.permuted", _permute, layout),
        ("layout[start:, ::step] (random start, step)", _slice, layout),
        ("layout.reshaped((rows, -1)) (random rows)", _reshape, layout),
        ("reshaped, not contiguous (the general kernel)", _reshape_strided, layout[:, :, ::2]),
        ("permuted + is_contiguous_any + is_unique", _contiguity, layout),
        ("layout.offset_of (3-d index)", _offset_of, layout),
        ("view[start:, ::step][0, 0, 0]", _view_slice, view),
        ("view.permuted(...)[0, 1, 1]", _view_permute, view),
    ):
        function(argument, 10)
        best = float("inf")
        for _ in range(REPEATS):
            start = time.perf_counter()
            function(argument, n)
            best = min(best, time.perf_counter() - start)
        print(f"{name:<44}{best / n * 1e9:>8.2f} ns")


def main():
    print(f"Python {sys.version.split()[0]}, NumPy {np.__version__}")
    print_call_table()
    print_op_table()


if __name__ == "__main__":
    main()
