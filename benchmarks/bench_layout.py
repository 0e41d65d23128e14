"""Layout operations: layoutkit next to cuda.core's ``_StridedLayout`` and NumPy, same run.

Prints three tables (operations inside ``@njit`` loops: ``bench_njit.py``):

Times are the best of ``REPEAT`` runs (the machine is shared: the least disturbed run of
each library is the fairest comparison).

1. Repeated arguments: ns per call on fixed 3-d layouts, passing the same
   argument objects every call (what a loop with literal tuples does).
2. Fresh arguments, random layouts: every call gets a new layout and new argument objects
   built from lists (``layout.reshaped(tuple(shape))``, what code that computes its shapes
   does), for random layouts of 1-4 dimensions and of 16 and 64 dimensions. Properties
   are read once from layouts made just before, so the figure includes computing them.
3. Cold start: a fresh process doing ``import layoutkit`` plus first operations, with an
   empty Numba cache and with a warm one.

``ratio`` is layoutkit / cuda.core (below 1: layoutkit is faster). The summary line
under each table gives the median and the largest ratio.

Run: ``python benchmarks/bench_layout.py`` (``--quick`` for fewer repeats).
"""

import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit

import numpy as np

from layoutkit import StridedLayout

try:
    from cuda.core._layout import _StridedLayout as ReferenceLayout
except ImportError:  # cuda-core is installed with numba-cuda[cu13]
    ReferenceLayout = None

QUICK = "--quick" in sys.argv
REPEAT = 3 if QUICK else 7
POOL = 300 if QUICK else 1000


def best_ns(fn, number=2000):
    """Best of ``REPEAT`` runs of the mean time of ``number`` calls, in ns."""
    number //= 4 if QUICK else 1
    return min(timeit.repeat(fn, number=number, repeat=REPEAT)) / number * 1e9


# ------------------------------------------------------------------------- table 1
def repeated_rows():
    ours = StridedLayout.dense((5, 3, 4), 4)
    ref = ReferenceLayout.dense((5, 3, 4), 4) if ReferenceLayout else None
    arr = np.empty((5, 3, 4), np.float32)
    ours_b, ref_b = StridedLayout.dense((3, 1), 4), _ref(lambda R: R.dense((3, 1), 4))
    arr_b = np.empty((3, 1), np.float32)
    ours_r, ref_r = StridedLayout.dense((5, 4), 2), _ref(lambda R: R.dense((5, 4), 2))
    arr_r = np.empty((5, 4), np.float16)
    ours_s, ref_s = StridedLayout.dense((1, 3, 1, 4), 4), _ref(lambda R: R.dense((1, 3, 1, 4), 4))
    arr_s = np.empty((1, 3, 1, 4), np.float32)
    index = (slice(1, 4), slice(None, None, -1))
    rows = [
        # name, layoutkit, cuda.core, numpy
        ("StridedLayout(shape, strides)", lambda: StridedLayout((5, 3, 4), (12, 4, 1), 4),
         lambda: ReferenceLayout((5, 3, 4), (12, 4, 1), 4), None),
        ("dense (5,3,4)", lambda: StridedLayout.dense((5, 3, 4), 4),
         lambda: ReferenceLayout.dense((5, 3, 4), 4), lambda: np.empty((5, 3, 4), np.float32)),
        ("permuted (2,0,1)", lambda: ours.permuted((2, 0, 1)), lambda: ref.permuted((2, 0, 1)),
         lambda: arr.transpose((2, 0, 1))),
        ("sliced [1:4, ::-1]", lambda: ours[index], lambda: ref[index], lambda: arr[index]),
        ("reshaped (15,4)", lambda: ours.reshaped((15, 4)), lambda: ref.reshaped((15, 4)),
         lambda: arr.reshape((15, 4))),
        ("flattened()", ours.flattened, lambda: ref.flattened(), lambda: arr.reshape(-1)),
        ("squeezed()", ours_s.squeezed, lambda: ref_s.squeezed(), arr_s.squeeze),
        ("unsqueezed(1)", lambda: ours.unsqueezed(1), lambda: ref.unsqueezed(1),
         lambda: np.expand_dims(arr, 1)),
        ("broadcast_to (2,3,5)", lambda: ours_b.broadcast_to((2, 3, 5)),
         lambda: ref_b.broadcast_to((2, 3, 5)), lambda: np.broadcast_to(arr_b, (2, 3, 5))),
        ("repacked(8)", lambda: ours_r.repacked(8), lambda: ref_r.repacked(8),
         lambda: arr_r.view(np.float64)),
        ("to_dense('F')", lambda: ours.to_dense("F"), lambda: ref.to_dense("F"),
         lambda: np.empty_like(arr, order="F")),
    ]
    numpy_equivalent = {
        "volume": lambda: arr.size,
        "is_contiguous_c": lambda: arr.flags.c_contiguous,
        "strides_in_bytes": lambda: arr.strides,
    }
    for prop in ("volume", "stride_order", "offset_bounds", "is_contiguous_c",
                 "is_contiguous_any", "is_dense", "is_unique", "strides_in_bytes"):
        rows.append((prop, (lambda p=prop: getattr(ours, p)), (lambda p=prop: getattr(ref, p)),
                     numpy_equivalent.get(prop)))
    rows.append(("required_size_in_bytes()", ours.required_size_in_bytes,
                 ref.required_size_in_bytes if ref else None, lambda: arr.nbytes))
    return rows


def _ref(make):
    return make(ReferenceLayout) if ReferenceLayout else None


def print_repeated_table():
    print("## 1. Repeated arguments: ns per call (3-d layouts, the same argument objects)")
    print(f"{'operation':<30}{'layoutkit':>10}{'cuda.core':>11}{'numpy':>9}{'ratio':>8}")
    ratios = []
    for name, ours, ref, numpy_op in repeated_rows():
        ours_ns = best_ns(ours)
        ref_ns = best_ns(ref) if ref and ReferenceLayout else None
        numpy_ns = best_ns(numpy_op) if numpy_op else None
        ratio = ours_ns / ref_ns if ref_ns else None
        if ratio:
            ratios.append(ratio)
        print(f"{name:<30}{ours_ns:>10.0f}{_fmt(ref_ns):>11}{_fmt(numpy_ns):>9}{_fmt(ratio, 2):>8}")
    _summary(ratios)


def _fmt(value, digits=0):
    return "-" if value is None else f"{value:.{digits}f}"


def _summary(ratios):
    if ratios:
        print(f"ratio median {statistics.median(ratios):.2f}, largest {max(ratios):.2f}, "
              f"{sum(r <= 2 for r in ratios)}/{len(ratios)} within 2x")


# ------------------------------------------------------------------------- table 2
class Case:
    """One random layout (a dense layout in a random axis order, maybe strided by steps of
    2 or -1) and random arguments for each operation, all kept as lists."""

    def __init__(self, rng, ndim):
        # many dimensions: most extents 1, some up to 4 (volumes stay far below 2**63)
        extents = (1,) * 12 + (2, 3, 4) if ndim > 16 else (1, 1, 1, 2, 3, 4)
        self.shape = [rng.choice(extents) if ndim > 4 else rng.randint(1, 6)
                      for _ in range(ndim)]
        self.itemsize = rng.choice((1, 2, 4, 8))
        self.order = rng.sample(range(ndim), ndim)
        self.steps = [rng.choice((1, 1, 2, -1)) if rng.random() < 0.5 else 1 for _ in range(ndim)]
        self.permutation = rng.sample(range(ndim), ndim)
        self.slices = [(rng.randint(0, e - 1), None, rng.choice((1, 2, -1))) for e in self.shape]
        self.axis = rng.randint(0, min(ndim, 62))
        lead = [rng.randint(1, 3) for _ in range(rng.randint(0, 2))] if ndim < 63 else []
        stretch = set(rng.sample(range(ndim), min(ndim, 3)))  # a few extent-1 axes grow
        self.broadcast = lead + [rng.randint(1, 3) if e == 1 and i in stretch else e
                                 for i, e in enumerate(self.shape)]
        self.reshape = _factorised(rng, self.shape)
        view = StridedLayout.dense(self._bigger(), self.itemsize, self.order)[self._steps()]
        self.strides = list(view.strides)

    def _bigger(self):
        return tuple(e * abs(s) for e, s in zip(self.shape, self.steps))

    def _steps(self):
        return tuple(slice(None, None, s) for s in self.steps)

    def layouts(self, ndim=None):
        """Fresh layouts (nothing cached) of both libraries: the strided view."""
        ndim = len(self.shape) if ndim is None else ndim
        shape, order = self._bigger()[:ndim], tuple(a for a in self.order if a < ndim)
        return tuple(lib.dense(shape, self.itemsize, order)[self._steps()[:ndim]]
                     for lib in (StridedLayout, ReferenceLayout))

    def dense_layouts(self):
        """Fresh C-order dense layouts of both libraries (reshape and repack need one)."""
        shape = tuple(self.shape)
        return StridedLayout.dense(shape, self.itemsize), ReferenceLayout.dense(shape, self.itemsize)


def _factorised(rng, shape):
    """Another shape of the same volume (extents merged and split at random)."""
    factors = []
    for e in shape:
        p = 2
        while e > 1:
            while e % p == 0:
                factors.append(p)
                e //= p
            p += 1
    rng.shuffle(factors)
    target = [1] * max(1, min(len(shape), len(factors)))
    for f in factors:
        target[rng.randrange(len(target))] *= f
    return target


def _slices(case):
    return tuple(slice(a, b, c) for a, b, c in case.slices)


# name -> (needs, call): needs is "layout" (the case's random layout, both libraries),
# "head" (the same at most 63 dims, so one axis can be added), "dense" (C-order dense:
# reshape and repack need one) or None; call(lib, layout, case) runs the operation
FRESH_OPS = {
    "StridedLayout(shape, strides)": (None, lambda lib, _, c: lib(tuple(c.shape), tuple(c.strides), c.itemsize)),
    "StridedLayout(shape, None)": (None, lambda lib, _, c: lib(tuple(c.shape), None, c.itemsize)),
    "dense(shape, 'C')": (None, lambda lib, _, c: lib.dense(tuple(c.shape), c.itemsize)),
    "dense(shape, order)": (None, lambda lib, _, c: lib.dense(tuple(c.shape), c.itemsize, tuple(c.order))),
    "permuted": ("layout", lambda lib, layout, c: layout.permuted(tuple(c.permutation))),
    "sliced": ("layout", lambda lib, layout, c: layout[_slices(c)]),
    "reshaped": ("dense", lambda lib, layout, c: layout.reshaped(tuple(c.reshape))),
    "flattened()": ("layout", lambda lib, layout, c: layout.flattened()),
    "squeezed()": ("layout", lambda lib, layout, c: layout.squeezed()),
    "unsqueezed(axis)": ("head", lambda lib, layout, c: layout.unsqueezed(c.axis)),
    "broadcast_to": ("layout", lambda lib, layout, c: layout.broadcast_to(tuple(c.broadcast))),
    "repacked(1)": ("dense", lambda lib, layout, c: layout.repacked(1)),
    "to_dense('F')": ("layout", lambda lib, layout, c: layout.to_dense("F")),
    "volume": ("layout", lambda lib, layout, c: layout.volume),
    "stride_order": ("layout", lambda lib, layout, c: layout.stride_order),
    "offset_bounds": ("layout", lambda lib, layout, c: layout.offset_bounds),
    "is_contiguous_any": ("layout", lambda lib, layout, c: layout.is_contiguous_any),
    "is_unique": ("layout", lambda lib, layout, c: layout.is_unique),
    "strides_in_bytes": ("layout", lambda lib, layout, c: layout.strides_in_bytes),
    "required_size_in_bytes()": ("dense", lambda lib, layout, c: layout.required_size_in_bytes()),
}


def fresh_ns(call, lib, cases, needs, side):
    """Best of ``REPEAT`` passes of the mean ns per call; new layouts every pass."""
    runs = []
    for _ in range(REPEAT):
        if needs is None:
            work = [(None, c) for c in cases]
        else:
            make = {"layout": Case.layouts, "head": lambda c: c.layouts(63),
                    "dense": Case.dense_layouts}[needs]
            work = [(make(c)[side], c) for c in cases]
        start = time.perf_counter_ns()
        for layout, c in work:
            call(lib, layout, c)
        runs.append((time.perf_counter_ns() - start) / len(work))
    return min(runs)


def print_fresh_table():
    if ReferenceLayout is None:
        print("\n(cuda.core is not installed: no fresh-argument table)")
        return
    print("\n## 2. Fresh arguments, random layouts: ns per call (a new layout and new")
    print("##    argument tuples every call; properties read once from new layouts)")
    groups = {"1-4 dims": (1, 4), "16 dims": (16, 16), "64 dims": (64, 64)}
    rng = random.Random(2026)
    pools = {name: [Case(rng, rng.randint(lo, hi)) for _ in range(POOL)]
             for name, (lo, hi) in groups.items()}
    print(f"{'operation':<30}" + "".join(f"{g:>25}" for g in groups))
    print(f"{'':<30}" + f"{'layoutkit cuda.core ratio':>25}" * len(groups))
    ratios = {g: [] for g in groups}
    for name, (needs, call) in FRESH_OPS.items():
        line = f"{name:<30}"
        for group, cases in pools.items():
            ours = fresh_ns(call, StridedLayout, cases, needs, 0)
            ref = fresh_ns(call, ReferenceLayout, cases, needs, 1)
            ratios[group].append(ours / ref)
            line += f"{ours:>10.0f}{ref:>10.0f}{ours / ref:>5.1f}"
        print(line)
    for group, values in ratios.items():
        print(f"{group}: ", end="")
        _summary(values)


# ------------------------------------------------------------------------- table 3
COLD_START = textwrap.dedent(
    """
    import time
    t0 = time.perf_counter()
    import layoutkit
    layout = layoutkit.StridedLayout.dense((5, 3, 4), 4).permuted((2, 0, 1))
    layout.is_contiguous_c
    t1 = time.perf_counter()
    layout.to_dense("C").reshaped((60,))
    layout[1:, ::-1].flattened().is_unique, layout.broadcast_to((2, 4, 5, 3)).stride_order
    t2 = time.perf_counter()
    import sys
    print(t1 - t0, t2 - t0, "numba" in sys.modules)
    """
)


def fresh_process_env(**extra):
    """The environment of a fresh process as users run it: with bytecode caching (an
    environment that turns it off would make every start compile layoutkit's sources)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


def cold_start(cache_dir):
    out = subprocess.run(
        [sys.executable, "-c", COLD_START], env=fresh_process_env(NUMBA_CACHE_DIR=cache_dir),
        capture_output=True, text=True, check=True,
    )
    first, more, numba = out.stdout.split()
    return float(first), float(more), numba == "True"


def print_cold_start():
    print("\n## 3. Cold start: fresh process, import layoutkit + first dense/permuted/property")
    print("##    (then + to_dense, reshaped, sliced, flattened, is_unique, broadcast_to)")
    with tempfile.TemporaryDirectory() as cache_dir:
        empty = cold_start(cache_dir)
        warm = [cold_start(cache_dir) for _ in range(REPEAT)]
    warm_first = statistics.median(w[0] for w in warm)
    warm_more = statistics.median(w[1] for w in warm)
    best_first = min(w[0] for w in warm)
    bare = min(_process_seconds("pass") for _ in range(REPEAT))
    numba_import = min(_process_seconds("import numba") for _ in range(REPEAT))
    print(f"empty Numba cache : first op {empty[0]:.3f} s, all {empty[1]:.3f} s, "
          f"numba imported: {empty[2]}")
    print(f"warm Numba cache  : first op {warm_first:.3f} s (best {best_first:.3f} s), "
          f"all {warm_more:.3f} s (median of {REPEAT})")
    print(f"(for scale, best of {REPEAT}: a whole `python -c pass` process takes "
          f"{bare:.3f} s, `python -c 'import numba'` {numba_import:.3f} s)")


def _process_seconds(code):
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=fresh_process_env(), check=True)
    return time.perf_counter() - t0


if __name__ == "__main__":
    print_repeated_table()
    print_fresh_table()
    print_cold_start()
