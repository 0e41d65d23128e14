"""Copies between random layout pairs on a GPU: layoutkit next to torch and CuPy, same run.

Usage::

    python benchmarks/bench_copy_random.py [--seeds 0 1 2 3] [--cases 60] [--mb 64 256]
        [--time-limit 240] [--log PATH] [--plans-only]

Every case comes from the seeded generator ``tests/helpers/copy_cases.random_pair_spec``
(the copy tests run the same generator at small sizes): 2-6 axes, extents 2-16 in random
positions and large ones, itemsizes 1-16, a source in a random axis order with steps
and negative steps, sometimes broadcast, a destination dense in C or a random order;
``--mb`` bytes per destination. For each case layoutkit's copy, torch ``dst.copy_(src)``
on the same memory (skipped for negative strides, which torch cannot view) and CuPy
``dst[...] = src`` are timed with CUDA events (bytes read plus bytes written, a broadcast
source counted once), and layoutkit's result is checked against the source. The
contiguous-copy rate (CuPy ``copyto`` of 256 MB) is measured in the same run. Then
host <-> device rows: strided host sides next to the contiguous transfer of the same
memory kind (pageable, pinned), torch and CuPy.

The summary comes last: the share of cases at >= 0.95x the better peer, the geometric
mean and minimum against it, the median share of the contiguous rate, the ten worst
cases with their plans, and figures by kernel. ``--log`` gets every case. A case that
fails is logged and counted; the run goes on (in a new process, with the cases so far,
when the failure left the CUDA context unusable). ``--plans-only`` plans the cases without
a GPU (kernels, specialisations) and stops.
"""

import argparse
import contextlib
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _views import device_view as cupy_view  # noqa: E402
from _views import host_view, pinned_view  # noqa: E402
from helpers.copy_cases import SPEC_DTYPES, random_pair_spec  # noqa: E402

from layoutkit import StridedLayout  # noqa: E402
from layoutkit.copy import copy  # noqa: E402
from layoutkit.copy.plan import plan_copy  # noqa: E402

START = time.time()
LOG = []


def say(text="", log_only=False):
    LOG.append(text)
    if not log_only:
        print(text, flush=True)


# ----------------------------------------------------------------------------- specs
def source_base_shape(spec):
    """Extents of the array the source is sliced from (as ``numpy_pair`` builds it)."""
    return tuple(e * abs(s) + p for e, s, p in zip(spec.src_shape, spec.steps, spec.pad,
                                                    strict=True))  # fmt: skip


def spec_layouts(spec):
    """The destination and (broadcast) source layouts of a spec, without memory."""
    big = source_base_shape(spec)
    strides, step = [0] * len(big), 1
    for k in reversed(spec.src_order):
        strides[k], step = step, step * big[k]
    src = StridedLayout(big, strides, spec.itemsize)
    src = src[tuple(slice(None, None, s) for s in spec.steps)]
    src = src[tuple(slice(0, e) for e in spec.src_shape)]
    if src.shape != spec.shape:
        src = src.broadcast_to(spec.shape)
    return StridedLayout.dense(spec.shape, spec.itemsize, stride_order=spec.dst_order), src


def generate(seeds, cases, mb):
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for index in range(cases):
            nbytes = float(rng.uniform(mb[0], mb[1])) * 2**20
            yield seed, index, random_pair_spec(rng, nbytes)


def _digits(value, extents):
    out = []
    for extent in extents:
        out.append(value % extent)
        value //= extent
    return out, value


def _efficiency(addresses, size):
    """Bytes used of the 32-byte sectors that one warp access touches."""
    sectors = set()
    for address in addresses:
        sectors.update(range(address // 32, (address + size - 1) // 32 + 1))
    return len(addresses) * size / (32 * len(sectors)) if sectors else 1.0


def _phase_addresses(tx, run, run_stride, rows, row_extent, row_stride):
    out = []
    for lane in range(32):
        r, q = lane % tx, lane // tx
        if r < run and q < rows:
            digits, _ = _digits(q, row_extent)
            out.append(r * run_stride + sum(d * s for d, s in zip(digits, row_stride, strict=True)))
    return out


def warp_efficiency(launch):
    """``(load, store)`` sector efficiency of the first warp's global accesses: its first
    load and store of a ``direct`` or ``tiled`` tile, all of its block's for ``block``."""
    a = launch.args
    if launch.kernel == "direct":
        unit, src_unit = launch.key[0], launch.key[1] or launch.key[0]
        tx, run, run_dst, run_src, rows = a[:5]
        row_extent, row_dst, row_src = a[11:14]
        return (_efficiency(_phase_addresses(tx, run, run_src, rows, row_extent, row_src), src_unit),
                _efficiency(_phase_addresses(tx, run, run_dst, rows, row_extent, row_dst), unit))  # fmt: skip
    if launch.kernel == "tiled":
        unit = launch.key[0]
        out = []
        for phase in (a[:16], a[16:32]):
            tx, run, run_global, _, _, _, rows = phase[:7]
            out.append(_efficiency(_phase_addresses(tx, run, run_global, rows, phase[13],
                                                    phase[14]), unit))  # fmt: skip
        return tuple(out)
    if launch.kernel == "gather":  # lanes take elements 0..31
        unit, (extent, dst_stride, src_stride) = launch.key[0], a[:3]
        places = [_digits(lane, extent)[0] for lane in range(32)]
        return tuple(_efficiency([sum(d * s for d, s in zip(digits, strides, strict=True))
                                  for digits in places], unit)
                     for strides in (src_stride, dst_stride))  # fmt: skip
    counts, dst_thread, src_thread, _, src_step, dst_step = a[:6]
    unit, ka, kb, vs, vd, _, ns, nd = launch.key
    loads, stores = [], []
    for lane in range(32):
        digits, rest = _digits(lane, counts)
        if rest == 0:
            src = sum(d * t for d, t in zip(digits, src_thread, strict=True))
            dst = sum(d * t for d, t in zip(digits, dst_thread, strict=True))
            loads += [src + j % ns * vs + j // ns * src_step
                      for j in range(ka * kb * unit // vs)]  # fmt: skip
            stores += [dst + i % nd * vd + i // nd * dst_step
                       for i in range(ka * kb * unit // vd)]  # fmt: skip
    return _efficiency(loads, vs), _efficiency(stores, vd)


def plans_only(args):
    kinds, keys = {}, set()
    low = []
    for seed, index, spec in generate(args.seeds, args.cases, args.mb):
        dst, src = spec_layouts(spec)
        plan = plan_copy(dst, src, 0, 0, True, True)
        kind = plan.launches[0].kernel if plan.launches else plan.method
        kinds[kind] = kinds.get(kind, 0) + 1
        keys.update((launch.kernel, launch.key) for launch in plan.launches)
        efficiency = [warp_efficiency(launch) for launch in plan.launches[:1]]
        text = " ".join(f"{load:.2f}/{store:.2f}" for load, store in efficiency)
        if efficiency and min(efficiency[0]) < 0.5:
            low.append((f"{seed}:{index}", spec, plan, text))
        say(f"{seed}:{index:3d} {spec.describe():70s} {plan.describe()}  [sectors {text}]")
    say(f"\nplans by first kernel: {kinds}; {len(keys)} kernel specialisations")
    say(f"{len(low)} plans whose first warp uses under half of its load or store sectors:")
    for name, spec, plan, text in low:
        say(f"  {name:>6s} {spec.describe()}  {plan.describe()}  [{text}]")


# ----------------------------------------------------------------------------- device
#: Fill kernels: distinct bit patterns, with an exponent bit cleared in floating-point
#: types so every value is finite and compares equal only to itself (or -0 / +0).
_FILL_MASKS = {"uint8": ("uint8", 0xFF), "float16": ("uint16", 0xBFFF),
               "float32": ("uint32", 0xBFFFFFFF), "float64": ("uint64", 0xBFFFFFFFFFFFFFFF),
               "complex128": ("uint64", 0xBFFFFFFFFFFFFFFF)}  # fmt: skip
_C_TYPES = {"uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
            "uint64": "unsigned long long"}  # what CuPy's kernel source calls them


def make_fills(cp):
    kernels = {}
    for dtype, (bits, mask) in _FILL_MASKS.items():
        kernel = cp.ElementwiseKernel(
            "", f"{bits} x",
            "unsigned long long h = (i + 1) * 0x9E3779B97F4A7C15ull; h ^= h >> 29;"
            f" x = ({_C_TYPES[bits]})(h & {mask}ull)", f"lk_fill_{dtype}",
        )  # fmt: skip
        kernels[dtype] = (getattr(cp, bits), kernel)

    def fill(stored):
        bits, kernel = kernels[str(stored.dtype)]
        kernel(stored.reshape(-1).view(bits))

    return fill


def cupy_pair(cp, spec, fill):
    """``(dst, src)`` CuPy arrays of a spec; the source holds distinct finite values."""
    dtype = SPEC_DTYPES[spec.itemsize]
    big = source_base_shape(spec)
    stored = cp.empty(tuple(big[k] for k in spec.src_order), dtype)
    fill(stored)
    src = stored.transpose(tuple(np.argsort(spec.src_order)))
    src = src[tuple(slice(None, None, s) for s in spec.steps)]
    src = src[tuple(slice(0, e) for e in spec.src_shape)]
    dst = cp.empty(tuple(spec.shape[k] for k in spec.dst_order), dtype)
    dst = dst.transpose(tuple(np.argsort(spec.dst_order)))
    return dst, src


def make_timer(cp):
    def measure(function):
        """Seconds per call: a warm-up, then the best of two batches of 2-10 calls."""
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        function()
        end.record()
        end.synchronize()
        once = max(cp.cuda.get_elapsed_time(start, end) / 1e3, 1e-6)
        repeats = max(2, min(10, math.ceil(2e-3 / once)))
        best = float("inf")
        for _ in range(2):
            start.record()
            for _ in range(repeats):
                function()
            end.record()
            end.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(start, end) / 1e3 / repeats)
        return best

    return measure


def run_case(cp, torch, measure, spec, fill):
    dst, src = cupy_pair(cp, spec, fill)
    moved = dst.nbytes + src.nbytes
    d, s = cupy_view(dst), cupy_view(src)
    first = time.perf_counter()
    copy(d, s)
    cp.cuda.Device().synchronize()
    first = time.perf_counter() - first
    ok = bool((dst == src).all())
    ours = moved / measure(lambda: copy(d, s))
    begin = time.perf_counter()
    for _ in range(20):
        copy(d, s)
    host_us = (time.perf_counter() - begin) / 20 * 1e6
    cp.cuda.Device().synchronize()
    theirs_cupy = moved / measure(lambda: dst.__setitem__(Ellipsis, src))
    theirs_torch = None
    if all(stride >= 0 for stride in src.strides):
        t_dst, t_src = torch.from_dlpack(dst), torch.from_dlpack(src)
        theirs_torch = moved / measure(lambda: t_dst.copy_(t_src))
    src_layout = s.layout if s.layout.shape == d.layout.shape else s.layout.broadcast_to(
        d.layout.shape)  # fmt: skip
    plan = plan_copy(d.layout, src_layout, d.ptr, s.ptr, True, True)
    return {
        "ok": ok, "ours": ours, "torch": theirs_torch, "cupy": theirs_cupy, "first": first,
        "host_us": host_us, "plan": plan.describe(),
        "kernel": plan.launches[0].kernel if plan.launches else plan.method,
    }  # fmt: skip


def contiguous_rate(cp, measure):
    base = cp.ones(64 << 20, cp.float32)
    out = cp.empty_like(base)
    return 2 * base.nbytes / measure(lambda: cp.copyto(out, base))


def _fmt(value, scale=1e12, digits=2):
    return "-" if value is None else f"{value / scale:.{digits}f}"


def _context_lost(cp):
    """Whether the CUDA context is unusable (a sticky error such as a misaligned address:
    every later call in this process fails)."""
    try:
        cp.cuda.runtime.deviceSynchronize()
        cp.get_default_memory_pool().free_all_blocks()
    except Exception:
        return True
    return False


def _restart(args, state):
    """Save the cases so far and run the rest in a fresh process (a new CUDA context)."""
    import os
    import pickle

    path = args.state or str(Path(args.log or "bench_copy_random").with_suffix(".state"))
    state["log"] = LOG
    Path(path).write_bytes(pickle.dumps(state))
    argv = [a for a in sys.argv if a != "--state" and a != args.state]
    os.execv(sys.executable, [sys.executable, *argv, "--state", path])


def run_random(cp, torch, args):
    """Every case's figures; a case that loses the CUDA context is counted as failed and
    the rest run in a fresh process (``--state`` carries the cases so far)."""
    state = {"start": START, "results": [], "failures": [], "done": set(), "contiguous": None}
    if args.state and Path(args.state).exists():
        import pickle

        state = pickle.loads(Path(args.state).read_bytes())
        LOG[:0] = state.pop("log", [])
    start = state["start"]
    measure = make_timer(cp)
    fill = make_fills(cp)
    if state["contiguous"] is None:
        state["contiguous"] = contiguous_rate(cp, measure)
        say(f"contiguous copy: {state['contiguous'] / 1e12:.2f} TB/s", log_only=True)
        say(f"{'case':>7s} {'spec':72s} {'ours':>6s} {'torch':>6s} {'cupy':>6s} {'vs best':>7s}"
            f" {'%ref':>5s} {'first s':>7s} {'host us':>7s} plan", log_only=True)  # fmt: skip
    contiguous, results, failures = state["contiguous"], state["results"], state["failures"]
    for seed, index, spec in generate(args.seeds, args.cases, args.mb):
        name = f"{seed}:{index}"
        if name in state["done"]:
            continue
        if time.time() - start > args.time_limit:
            say(f"time limit reached after {len(results) + len(failures)} cases")
            break
        state["done"].add(name)
        try:
            result = run_case(cp, torch, measure, spec, fill)
        except Exception as exc:
            failures.append((name, spec, f"{type(exc).__name__}: {exc}"))
            say(f"{name:>7s} {spec.describe():72s} FAILED {type(exc).__name__}: {exc}",
                log_only=True)  # fmt: skip
            say(traceback.format_exc(), log_only=True)
            if _context_lost(cp):
                say(f"{name:>7s} lost the CUDA context: the rest run in a new process",
                    log_only=True)  # fmt: skip
                _restart(args, state)
            continue
        finally:
            with contextlib.suppress(Exception):  # a lost context: handled above
                cp.get_default_memory_pool().free_all_blocks()
        best = max(result["cupy"], result["torch"] or 0)
        result.update(name=name, spec=spec, ratio=result["ours"] / best,
                      share=result["ours"] / contiguous)  # fmt: skip
        results.append(result)
        say(f"{name:>7s} {spec.describe():72s} {_fmt(result['ours']):>6s} "
            f"{_fmt(result['torch']):>6s} {_fmt(result['cupy']):>6s} {result['ratio']:7.2f} "
            f"{100 * result['share']:4.0f}% {result['first']:7.2f} {result['host_us']:7.1f} "
            f"{result['plan']}{'' if result['ok'] else '  WRONG'}", log_only=True)  # fmt: skip
        if len(results) % 25 == 0:
            print(f"[{time.time() - START:.0f}s] {len(results)} cases", flush=True)
    return contiguous, results, failures


# ----------------------------------------------------------------------------- transfers
def run_transfers(cp, torch):
    """Host <-> device rows: strided host sides next to contiguous ones of the same kind."""
    n = 8192
    rows = []
    pinned = torch.empty((n, n), dtype=torch.float32, pin_memory=True)
    pinned.copy_(torch.rand((n, n)))
    pageable = np.random.default_rng(0).random((n, n), dtype=np.float32)
    pinned_np = pinned.numpy()
    device = cp.empty((n, n), cp.float32)
    half = cp.empty((n // 2, n), cp.float32)
    cases = [
        # name, dst, src, kind, reference (contiguous of the same kind)
        ("H2D pageable contiguous", device, pageable, "pageable", None),
        ("H2D pageable [::2, ::-1]", half, pageable[::2, ::-1], "pageable", "H2D pageable contiguous"),
        ("H2D pageable [:, ::2]", half.reshape(n, n // 2), pageable[:, ::2], "pageable",
         "H2D pageable contiguous"),
        ("H2D pageable transposed", device, pageable.T, "pageable", "H2D pageable contiguous"),
        ("D2H pageable contiguous", pageable, device, "pageable", None),
        ("D2H pageable [::2, ::-1]", pageable[::2, ::-1], half, "pageable",
         "D2H pageable contiguous"),
        ("D2H pageable transposed", pageable.T, device, "pageable", "D2H pageable contiguous"),
        ("H2D pinned contiguous", device, pinned_np, "pinned", None),
        ("H2D pinned transposed", device, pinned_np.T, "pinned", "H2D pinned contiguous"),
        ("H2D pinned [:, ::2]", half.reshape(n, n // 2), pinned_np[:, ::2], "pinned",
         "H2D pinned contiguous"),
        ("D2H pinned contiguous", pinned_np, device, "pinned", None),
        ("D2H pinned transposed", pinned_np.T, device, "pinned", "D2H pinned contiguous"),
    ]  # fmt: skip

    def wall(function):
        function()
        cp.cuda.Device().synchronize()
        best = float("inf")
        for _ in range(3):
            begin = time.perf_counter()
            function()
            cp.cuda.Device().synchronize()
            best = min(best, time.perf_counter() - begin)
        return best

    def view_of(array, kind):
        if isinstance(array, np.ndarray):
            return pinned_view(array) if kind == "pinned" else host_view(array)
        return cupy_view(array)

    rates = {}
    for name, dst, src, kind, reference in cases:
        try:
            d, s = view_of(dst, kind), view_of(src, kind)
            moved = dst.nbytes
            ours = moved / wall(lambda d=d, s=s: copy(d, s))
            plan = plan_copy(d.layout, s.layout, d.ptr, s.ptr, d.is_device_accessible,
                             s.is_device_accessible).describe()  # fmt: skip
            rates[name] = ours
            theirs_torch = theirs_cupy = None
            if isinstance(src, np.ndarray):
                if min(src.strides) >= 0:
                    t_src = torch.from_numpy(src)
                    t_dst = torch.from_dlpack(dst)
                    theirs_torch = moved / wall(lambda a=t_dst, b=t_src: a.copy_(b))
                theirs_cupy = moved / wall(lambda a=dst, b=src: a.__setitem__(
                    Ellipsis, cp.asarray(b)))  # fmt: skip
            else:
                if min(dst.strides) >= 0:
                    t_dst = torch.from_numpy(dst)
                    t_src = torch.from_dlpack(src)
                    theirs_torch = moved / wall(lambda a=t_dst, b=t_src: a.copy_(b))
                theirs_cupy = moved / wall(lambda a=dst, b=src: np.copyto(a, cp.asnumpy(b)))
            rows.append((name, plan, ours, theirs_torch, theirs_cupy,
                         ours / rates[reference] if reference in rates else None))  # fmt: skip
        except Exception as exc:
            rows.append((name, f"FAILED {type(exc).__name__}: {exc}", None, None, None, None))
    return rows


# ----------------------------------------------------------------------------- summary
def summary(device_name, contiguous, results, failures, transfers, args):
    say("")
    say(f"Random layouts on {device_name}: {len(results)} cases (seeds {args.seeds}, "
        f"{args.mb[0]}-{args.mb[1]} MB), {len(failures)} failed; contiguous copy "
        f"{contiguous / 1e12:.2f} TB/s (same run)")  # fmt: skip
    if results:
        ratios = [r["ratio"] for r in results]
        wrong = [r["name"] for r in results if not r["ok"]]
        share95 = sum(ratio >= 0.95 for ratio in ratios) / len(ratios)
        geomean = math.exp(statistics.fmean(math.log(ratio) for ratio in ratios))
        median_share = statistics.median(r["share"] for r in results)
        say(f"  cases at >= 0.95x the better peer: {100 * share95:5.1f}%   (target >= 95%)")
        say(f"  geometric mean vs the better peer: {geomean:5.2f}x   (target >= 1.5x)")
        say(f"  minimum vs the better peer:        {min(ratios):5.2f}x   (target >= 0.8x)")
        say(f"  median share of the contiguous rate: {100 * median_share:3.0f}%   "
            "(target >= 70%)")  # fmt: skip
        say(f"  median first call (compile or cache load) {statistics.median(r['first'] for r in results):.2f} s, "
            f"median host time per copy {statistics.median(r['host_us'] for r in results):.1f} us")  # fmt: skip
        if wrong:
            say(f"  WRONG results: {wrong}")
        say("\n  by kernel         cases  median vs best  median % ref")
        kinds = sorted({r["kernel"] for r in results})
        for kind in kinds:
            group = [r for r in results if r["kernel"] == kind]
            say(f"  {kind:16s} {len(group):6d} {statistics.median(r['ratio'] for r in group):14.2f}"
                f" {100 * statistics.median(r['share'] for r in group):12.0f}%")  # fmt: skip
        say("\n  worst 10 cases (ours / torch / cupy TB/s, vs best, % ref, plan)")
        for r in sorted(results, key=lambda r: r["ratio"])[:10]:
            say(f"  {r['name']:>6s} {r['spec'].describe()}")
            say(f"         {_fmt(r['ours'])} / {_fmt(r['torch'])} / {_fmt(r['cupy'])}  "
                f"{r['ratio']:.2f}x  {100 * r['share']:.0f}%  {r['plan']}")  # fmt: skip
    for name, spec, error in failures[:10]:
        say(f"  FAILED {name} {spec.describe()}: {error[:300]}")
    if transfers:
        say("\n  host <-> device (GB/s of data; wall time with synchronisation, best of 3)")
        say(f"  {'case':28s} {'ours':>7s} {'torch':>7s} {'cupy':>7s} {'vs contiguous':>13s}  plan")
        for name, plan, ours, theirs_torch, theirs_cupy, vs in transfers:
            say(f"  {name:28s} {_fmt(ours, 1e9, 1):>7s} {_fmt(theirs_torch, 1e9, 1):>7s} "
                f"{_fmt(theirs_cupy, 1e9, 1):>7s} {'-' if vs is None else f'{vs:.2f}':>13s}  {plan}")  # fmt: skip
    say(f"\n[{time.time() - START:.0f}s]")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--cases", type=int, default=60, help="cases per seed")
    parser.add_argument("--mb", type=float, nargs=2, default=[64, 256])
    parser.add_argument("--time-limit", type=float, default=240,
                        help="stop starting cases after this many seconds")  # fmt: skip
    parser.add_argument("--log", help="file for every case's line")
    parser.add_argument("--plans-only", action="store_true", help="plan the cases, no GPU")
    parser.add_argument("--no-transfers", action="store_true")
    parser.add_argument("--state", help="cases so far (written when a case loses the CUDA "
                        "context; the run goes on in a new process from it)")  # fmt: skip
    args = parser.parse_args()
    try:
        if args.plans_only:
            plans_only(args)
            return
        import cupy as cp
        import torch

        device_name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        contiguous, results, failures = run_random(cp, torch, args)
        transfers = [] if args.no_transfers else run_transfers(cp, torch)
        summary(device_name, contiguous, results, failures, transfers, args)
    finally:
        if args.log:
            Path(args.log).write_text("\n".join(LOG) + "\n")


if __name__ == "__main__":
    main()
