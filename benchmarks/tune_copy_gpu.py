"""Time variants of the copy planner's parameters on many layouts, in one device call.

Usage on the GPU machine::

    python3 benchmarks/tune_copy_gpu.py [--cases 30] [--seeds 100 101] [--time-limit 200]
        [--log PATH] [--only WORD ...] [--torch] [--json PATH] [--random-only]

A variant changes module settings of ``layoutkit.copy.plan`` / ``layoutkit.copy.gpu``
(run bytes of tiles, bytes in flight per SM, where ``direct`` takes over, whether 1- and
2-byte transposes use register blocks, lanes of a block, items per thread...). For each
case (named layouts, then random pairs of the benchmark's generator on seeds the
benchmark does not use) every variant is planned; variants whose launches equal the
default's are not timed again. Each distinct plan is checked against the source, then
timed with CUDA events (TB/s of bytes read + written). The summary, last, gives for each
variant the cases it changed, the geometric mean of its rate over the default's there,
and its wins and losses; ``--log`` gets every line. ``--json`` writes one line per case
(the coalesced problem, every variant's rate and plan, CuPy's and, with ``--torch``,
torch's rate) for fitting planner rules offline.
"""

import argparse
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench_copy_random import (  # noqa: E402
    contiguous_rate,
    cupy_pair,
    cupy_view,
    make_fills,
    make_timer,
)
from helpers.copy_cases import PairSpec, random_pair_spec  # noqa: E402

from layoutkit.copy import copy, gpu  # noqa: E402
from layoutkit.copy import plan as planner  # noqa: E402

START = time.time()
LOG = []


def say(text="", log_only=False):
    LOG.append(text)
    if not log_only:
        print(text, flush=True)


def _doubled(items):
    return {unit: 2 * count for unit, count in items.items()}


def _halved(items):
    return {unit: max(1, count // 2) for unit, count in items.items()}


#: name -> {(module, attribute): value}; "items" variants compile new kernels, so they run
#: on the named cases only.
VARIANTS = {
    "run 128B": {(planner, "RUN_BYTES"): 128},
    "run 512B": {(planner, "RUN_BYTES"): 512},
    "in flight 32K": {(gpu, "IN_FLIGHT_PER_SM"): 32 << 10},
    "in flight 128K": {(gpu, "IN_FLIGHT_PER_SM"): 128 << 10},
    "direct from 64B": {(planner, "RUN_DIRECT"): 64},
    "direct from 512B": {(planner, "RUN_DIRECT"): 512},
    "no blocks": {(planner, "BLOCK_VECTOR"): {}},
    "blocks for 4B too": {(planner, "BLOCK_VECTOR"): {1: 8, 2: 16, 4: 16}},
    "uint8 blocks 16B": {(planner, "BLOCK_VECTOR"): {1: 16, 2: 16}},
    "block lanes 4": {(planner, "BLOCK_SOURCE_LANES"): 4},
    "block lanes 16": {(planner, "BLOCK_SOURCE_LANES"): 16},
    "no gather": {(planner, "GATHER_RULES"): ()},
    "gather to 512B": {(planner, "GATHER_RULES"): ((32, "window", 0.1, True), (256, "block", 0.75, True),
                                                   (512, "block", 0.75, True))},
    "gather to 256B at 0.5": {(planner, "GATHER_RULES"): ((32, "window", 0.1, True), (256, "block", 0.5, True))},
    "gather to 256B at 0.9": {(planner, "GATHER_RULES"): ((32, "window", 0.1, True), (256, "block", 0.9, True))},
    "gather below 32B by first block": {(planner, "GATHER_RULES"): (
        (32, "block", 0.35, True), (256, "block", 0.75, True), (1 << 62, "block", 0.8, False))},
    "gather always": {(planner, "GATHER_RULES"): ((1 << 62, "block", 0.0, True),)},
    "gather always, no blocks": {(planner, "GATHER_RULES"): ((1 << 62, "block", 0.0, True),),
                                 (planner, "BLOCK_VECTOR"): {}},
    "gather always, items x2": {(planner, "GATHER_RULES"): ((1 << 62, "block", 0.0, True),),
                                (planner, "ITEMS"): _doubled(planner.ITEMS)},
    "gather always, items /2": {(planner, "GATHER_RULES"): ((1 << 62, "block", 0.0, True),),
                                (planner, "ITEMS"): _halved(planner.ITEMS)},
    "gather always, items /4": {(planner, "GATHER_RULES"): ((1 << 62, "block", 0.0, True),),
                                (planner, "ITEMS"): _halved(_halved(planner.ITEMS))},
    "gather always, in flight 256K": {(planner, "GATHER_RULES"): ((1 << 62, "block", 0.0, True),),
                                      (gpu, "IN_FLIGHT_PER_SM"): 256 << 10},
    "gather walks": {(gpu, "WALKING_KERNELS"): (*gpu.WALKING_KERNELS, planner.GATHER)},
    "one block per tile": {(gpu, "WALKING_KERNELS"): ()},
    "tiled one block per tile": {(gpu, "WALKING_KERNELS"): (planner.DIRECT, planner.BLOCK)},
    "direct one block per tile": {(gpu, "WALKING_KERNELS"): (planner.TILED, planner.BLOCK)},
    "tiled rows 256": {(planner, "TILED_ROWS"): 256, (gpu, "TILED_ROWS"): 256},
    "tiled pad 9/8": {(planner, "SHARED_UNITS"): planner.THREADS * 9 // 8},
    "tiled rows 256, pad 9/8": {(planner, "TILED_ROWS"): 256, (gpu, "TILED_ROWS"): 256,
                                (planner, "SHARED_UNITS"): planner.THREADS * 9 // 8},
    "tiled rows 128, pad 9/8": {(planner, "TILED_ROWS"): 128, (gpu, "TILED_ROWS"): 128,
                                (planner, "SHARED_UNITS"): planner.THREADS * 9 // 8},
    "in flight 256K": {(gpu, "IN_FLIGHT_PER_SM"): 256 << 10},
    "in flight 512K": {(gpu, "IN_FLIGHT_PER_SM"): 512 << 10},
    "items x2": {(planner, "ITEMS"): _doubled(planner.ITEMS)},
    "items /2": {(planner, "ITEMS"): _halved(planner.ITEMS)},
}
NAMED_ONLY = {"items x2", "items /2"}


def named_specs():
    """Layouts of the issue and of bench_copy.py, as generator specs."""
    def spec(itemsize, shape, src_order, steps=None, dst_order=None):
        n = len(shape)
        return PairSpec(itemsize, shape, src_order, steps or (1,) * n, (0,) * n, (),
                        dst_order or tuple(range(n)))  # fmt: skip

    return [
        ("transpose f32 16384^2", spec(4, (16384, 16384), (1, 0))),
        ("transpose u8 16384^2", spec(1, (16384, 16384), (1, 0))),
        ("transpose f16 16384^2", spec(2, (16384, 16384), (1, 0))),
        ("transpose u8 odd 16383x16385", spec(1, (16383, 16385), (1, 0))),
        ("transpose f16 odd 16383x16385", spec(2, (16383, 16385), (1, 0))),
        ("transpose f64 8192x16384", spec(8, (16384, 8192), (1, 0))),
        ("transpose c128 8192^2", spec(16, (8192, 8192), (1, 0))),
        ("HWC->CHW u8 4000^2", spec(1, (3, 4000, 4000), (1, 2, 0))),
        ("CHW->HWC u8 4000^2", spec(1, (4000, 4000, 3), (2, 0, 1))),
        ("(N,5)->(5,N) f32", spec(4, (5, 6710910), (1, 0))),
        ("(N,3)->(3,N) f64", spec(8, (3, 5592405), (1, 0))),
        ("6-d 16^6 f16", spec(2, (16,) * 6, (5, 3, 1, 4, 2, 0))),
        ("5-d reversal f64", spec(8, (4, 64, 32, 16, 8), (4, 3, 2, 1, 0))),
        ("(7,5,N) f16 (0,2,1)", spec(2, (7, 2396745, 5), (0, 2, 1))),
        ("12-byte records", spec(4, (4000, 4000, 3), (1, 0, 2))),
        ("step [::3, 1::2] f32", spec(4, (5461, 8192), (0, 1), (3, 2))),
    ]


def random_specs(seeds, cases):
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for index in range(cases):
            nbytes = float(rng.uniform(64, 128)) * 2**20
            yield f"{seed}:{index}", random_pair_spec(rng, nbytes)


#: Settings that the kernel generators read (a kernel's key does not hold them).
SOURCE_SETTINGS = ("TILED_ROWS", "DIRECT_ROWS")


def _apply(settings):
    saved = {}
    for (module, name), value in settings.items():
        saved[(module, name)] = getattr(module, name)
        setattr(module, name, value)
    planner._plan.cache_clear()
    gpu._prepared.cache_clear()
    if any(name in SOURCE_SETTINGS for _, name in settings):
        gpu.kernel_for.cache_clear()
    return saved


def _plan_for(d, s):
    layout = s.layout if s.layout.shape == d.layout.shape else s.layout.broadcast_to(
        d.layout.shape)  # fmt: skip
    return planner.plan_copy(d.layout, layout, d.ptr, s.ptr, True, True)


def _problem(plan):
    """The coalesced problem a plan was made from (JSON-ready), for offline rule fitting."""
    return {"shape": plan.shape, "ds": plan.dst_strides, "ss": plan.src_strides,
            "unit": plan.unit}  # fmt: skip


def run_case(cp, torch, measure, fill, name, spec, variants):
    dst, src = cupy_pair(cp, spec, fill)
    moved = dst.nbytes + src.nbytes
    d, s = cupy_view(dst), cupy_view(src)
    cupy_rate = moved / measure(lambda: dst.__setitem__(Ellipsis, src))
    torch_rate = None
    if torch is not None and all(stride >= 0 for stride in src.strides):
        t_dst, t_src = torch.from_dlpack(dst), torch.from_dlpack(src)
        torch_rate = moved / measure(lambda: t_dst.copy_(t_src))
    rates, seen, problem = {}, {}, None
    for label, settings in [("default", {})] + list(variants.items()):
        saved = _apply(settings)
        try:
            plan = _plan_for(d, s)
            problem = problem or _problem(plan)
            walks = tuple(launch.kernel in gpu.WALKING_KERNELS for launch in plan.launches)
            signature = (tuple(launch.identity for launch in plan.launches), plan.method,
                         walks, gpu.IN_FLIGHT_PER_SM if any(walks) else None,
                         *(getattr(gpu, name) for name in SOURCE_SETTINGS))  # fmt: skip
            if signature in seen:
                rates[label] = ("=", seen[signature])
                continue
            dst.fill(0)
            copy(d, s)
            ok = bool((dst == src).all())
            rate = moved / measure(lambda: copy(d, s))
            seen[signature] = label
            rates[label] = (rate, plan.describe(), ok)
        except Exception as exc:
            rates[label] = ("failed", f"{type(exc).__name__}: {exc}")
            say(traceback.format_exc(), log_only=True)
        finally:
            _apply(saved)
    return cupy_rate, torch_rate, rates, problem


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[100, 101])
    parser.add_argument("--cases", type=int, default=20, help="random cases per seed")
    parser.add_argument("--time-limit", type=float, default=200)
    parser.add_argument("--log")
    parser.add_argument("--json", help="one JSON line per case: the coalesced problem, "
                        "each variant's rate and plan, CuPy's and torch's rates")
    parser.add_argument("--torch", action="store_true", help="time torch's copy_ too")
    parser.add_argument("--only", nargs="+", default=[],
                        help="time only the variants named, or whose names contain one of these")
    parser.add_argument("--random-only", action="store_true", help="skip the named layouts")
    args = parser.parse_args()
    chosen = {k: v for k, v in VARIANTS.items() if not args.only or any(
        w == k if w in VARIANTS else w in k for w in args.only)}
    import cupy as cp

    torch = None
    if args.torch:
        import torch
    measure = make_timer(cp)
    fill = make_fills(cp)
    contiguous = contiguous_rate(cp, measure)
    say(f"device {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; contiguous copy "
        f"{contiguous / 1e12:.2f} TB/s")  # fmt: skip
    changes = {label: [] for label in chosen}
    records = open(args.json, "w") if args.json else None  # noqa: SIM115 (closed at the end)
    cases = [] if args.random_only else [(name, spec, True) for name, spec in named_specs()]
    cases += [(name, spec, False) for name, spec in random_specs(args.seeds, args.cases)]
    for name, spec, named in cases:
        if time.time() - START > args.time_limit:
            say(f"time limit reached before {name}")
            break
        variants = {k: v for k, v in chosen.items() if named or k not in NAMED_ONLY}
        try:
            cupy_rate, torch_rate, rates, problem = run_case(cp, torch, measure, fill, name,
                                                             spec, variants)
        except Exception as exc:
            say(f"{name} {spec.describe()} FAILED {type(exc).__name__}: {exc}")
            say(traceback.format_exc(), log_only=True)
            continue
        finally:
            cp.get_default_memory_pool().free_all_blocks()
        default = rates["default"]
        if records is not None:  # written as it goes: a run cut short keeps its cases
            records.write(json.dumps({
                "name": name, "spec": spec.describe(), "problem": problem, "cupy": cupy_rate,
                "torch": torch_rate, "contiguous": contiguous,
                "variants": {k: list(v) for k, v in rates.items()}}) + "\n")  # fmt: skip
            records.flush()
        say(f"\n== {name} {spec.describe()}  cupy {cupy_rate / 1e12:.2f} TB/s", log_only=True)
        for label, result in rates.items():
            if result[0] == "=":
                say(f"   {label:20s} = {result[1]}", log_only=True)
                continue
            if result[0] == "failed":
                say(f"   {label:20s} FAILED {result[1]}", log_only=True)
                continue
            rate, text, ok = result
            say(f"   {label:20s} {rate / 1e12:6.2f} TB/s {100 * rate / contiguous:4.0f}%  "
                f"{'' if ok else 'WRONG '}{text}", log_only=True)  # fmt: skip
            if label != "default" and default[0] not in ("=", "failed"):
                changes[label].append((name, rate / default[0]))
        if default[0] not in ("=", "failed"):
            print(f"[{time.time() - START:.0f}s] {name}: default {default[0] / 1e12:.2f} TB/s "
                  f"({100 * default[0] / contiguous:.0f}%), cupy {cupy_rate / 1e12:.2f}  "
                  f"{default[1]}", flush=True)  # fmt: skip
    say("\nvariant              changed  geomean vs default  wins  losses  best case")
    for label, items in changes.items():
        if not items:
            say(f"{label:20s} {0:7d}")
            continue
        geomean = math.exp(statistics.fmean(math.log(r) for _, r in items))
        best = max(items, key=lambda item: item[1])
        say(f"{label:20s} {len(items):7d} {geomean:19.3f} {sum(r > 1.03 for _, r in items):5d} "
            f"{sum(r < 0.97 for _, r in items):7d}  {best[0]} {best[1]:.2f}x")  # fmt: skip
    say(f"[{time.time() - START:.0f}s]")
    if args.log:
        Path(args.log).write_text("\n".join(LOG) + "\n")
    if records is not None:
        records.close()


if __name__ == "__main__":
    main()
