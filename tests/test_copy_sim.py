"""The GPU copy kernels under numba-cuda's simulator, checked byte for byte against NumPy.

The simulator must be enabled before Numba's CUDA target is imported, so the cases run
in a subprocess (this file, executed as a script with ``NUMBA_ENABLE_CUDASIM=1``). Cases:
named layouts that reach every kernel shape (square, thin and multi-axis tiles, the three
block shapes, fills, edges), random pairs of the benchmark's generator at small sizes,
and random small edge cases (odd itemsizes, misaligned bases, broadcasting); and views of
one buffer: kernels between views whose elements share no byte, and copies of views that
do, which are refused before any kernel runs.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

#: Random pairs of the benchmark generator run under the simulator (it runs every thread
#: of a block as a Python thread: keep the count small).
GENERATOR_CASES = 36
EDGE_CASES = 40
#: Kernel runs between views of one buffer that share no byte (and half as many refused
#: copies of views that do).
ALIAS_CASES = 30


def _typed(rng, shape, dtype):
    """A C-ordered array of random bytes (NumPy's allocation: 16-byte aligned)."""
    array = np.empty(shape, dtype)
    array.view(np.uint8).reshape(-1)[...] = np.frombuffer(rng.bytes(array.nbytes), np.uint8)
    return array


def _named_cases():
    rng = np.random.default_rng(7)
    for dtype in ("u1", "u2", "u4", "u8", "c16", "V3"):
        a = _typed(rng, (40, 13), dtype)
        yield a.T  # a thin transpose
        yield a[::-1, ::2]  # reversed and strided
        yield np.broadcast_to(a[:, :1], (40, 16))  # a fill
        yield np.broadcast_to(a[3], (5, 13))  # a broadcast row
    for dtype in ("u1", "u2", "u4", "f8", "c16"):
        yield _typed(rng, (70, 67), dtype).T  # partly filled tiles and block edges
        yield _typed(rng, (4,) * 6, dtype).transpose(5, 3, 1, 4, 2, 0)  # a tile of 6 axes
        yield _typed(rng, (6, 5, 7, 4), dtype).transpose(3, 1, 0, 2)
    for dtype in ("u1", "u2"):  # the block kernel: deinterleave, interleave, square
        yield _typed(rng, (12, 21, 3), dtype).transpose(2, 0, 1)
        yield _typed(rng, (5, 9, 16), dtype).transpose(1, 2, 0)
        yield _typed(rng, (48, 72), dtype).T
        yield _typed(rng, (3, 16, 5, 8), dtype).transpose(0, 2, 3, 1)
        yield _typed(rng, (72, 80), dtype)[:, :67].T  # 67 = 8 * 8 + 3: blocks and an edge
    yield _typed(rng, (300, 5), "f4").T  # (N, 5) -> (5, N)
    yield _typed(rng, (20, 30, 3), "f4").transpose(1, 0, 2)  # 12-byte records transposed
    for dtype in ("u1", "u2", "c16"):  # short rows on both sides: gather
        yield _typed(rng, (300, 6), dtype)[:, :3]
        yield _typed(rng, (3, 40, 4, 5), dtype).transpose(0, 3, 1, 2)


def _edge_case(rng):
    from helpers.copy_cases import ITEMSIZES, strided_view

    itemsize = int(rng.choice(ITEMSIZES))
    ndim = int(rng.integers(1, 5))
    shape = tuple(int(e) for e in rng.integers(1, 7, ndim))

    def spec(shape):
        return (
            tuple(rng.permutation(len(shape))),
            tuple(int(s) for s in rng.choice([1, 1, 2, -1, -2], len(shape))),
            tuple(int(p) for p in rng.integers(0, 2, len(shape))),
            int(rng.choice([0, 0, 1, 4, 8])),
        )

    src_shape = tuple(1 if rng.integers(0, 4) == 0 else e for e in shape)
    dst_buffer, dst = strided_view(shape, itemsize, *spec(shape), fill=bytes)
    _, src = strided_view(src_shape, itemsize, *spec(src_shape), fill=rng.bytes)
    return dst_buffer, dst, src


def _cases():
    from helpers.copy_cases import numpy_pair, small_specs

    from layoutkit.copy import plan

    # the named cases twice: with gather, and without it (at these sizes one block holds a
    # whole problem, so gather would take every tile and every narrow block; the tiles and
    # blocks must run too)
    rules, block_yield = plan.GATHER_RULES, plan.BLOCK_YIELD
    for named_rules, named_yield in ((rules, block_yield), ((), float("inf"))):
        plan.GATHER_RULES, plan.BLOCK_YIELD = named_rules, named_yield
        plan._plan.cache_clear()
        for src in _named_cases():
            dst = np.zeros(src.shape, src.dtype)
            yield dst.view(np.uint8).reshape(-1), dst, src
    plan.GATHER_RULES, plan.BLOCK_YIELD = rules, block_yield
    plan._plan.cache_clear()
    for seed, spec in enumerate(small_specs(2024, GENERATOR_CASES, (512, 24576))):
        dst_buffer, dst, _, src = numpy_pair(spec, seed, misalign=seed % 3 * 4)
        yield dst_buffer, dst, src
    rng = np.random.default_rng(1234)
    for _ in range(EDGE_CASES):
        yield _edge_case(rng)


def run_cases():
    """Run every case; return ``{kind: count}`` of the launches that ran."""
    from helpers.copy_cases import layout_of

    from layoutkit.copy.gpu import launch_plan
    from layoutkit.copy.plan import KERNEL, plan_copy

    counts = {}
    for dst_buffer, dst, src in _cases():
        src_layout = layout_of(src)
        if src.shape != dst.shape:
            src_layout = src_layout.broadcast_to(dst.shape)
        dst_ptr = dst.__array_interface__["data"][0]
        src_ptr = src.__array_interface__["data"][0]
        plan = plan_copy(layout_of(dst), src_layout, dst_ptr, src_ptr, True, True)
        if plan.method != KERNEL:
            continue
        expected = dst_buffer.copy()
        offset = dst_ptr - dst_buffer.ctypes.data
        np.copyto(np.ndarray(dst.shape, dst.dtype, expected, offset, dst.strides), src)
        launch_plan(plan, dst_ptr, src_ptr)
        assert dst_buffer.tobytes() == expected.tobytes(), (plan.describe(), dst.shape,
                                                            src.strides)  # fmt: skip
        for launch in plan.launches:
            kind = f"{launch.kernel}-{launch.key[0]}"
            extra = []
            if launch.kernel == "direct" and launch.key[1]:
                extra.append("fill")
            if launch.kernel == "block":
                ka, kb = launch.key[1], launch.key[2]
                extra.append("block-square" if ka == kb else "block-run")
            for key in (kind, *extra):
                counts[key] = counts.get(key, 0) + 1
        if len(plan.launches) > 1:
            counts["edges"] = counts.get("edges", 0) + 1
    return counts


def run_alias_cases():
    """Seeded :func:`helpers.copy_cases.aliased_case` pairs of views of one buffer that
    claims to be device memory: those whose elements share no byte (interleaved views,
    disjoint parts) run the device kernels in place, checked against NumPy (the source as
    it was before the copy); those that share a byte are refused by ``layoutkit.copy``
    before any kernel runs, and nothing is written. Returns ``{kind: count}``."""
    from helpers.copy_cases import (
        ALIAS_ELEMENTS,
        DeviceView,
        SeededRandom,
        aliased_case,
        numpy_items,
        offset_layout,
    )

    import layoutkit
    from layoutkit import StridedLayout, StridedMemoryView
    from layoutkit.copy._api import _broadcast, shares_bytes
    from layoutkit.copy.gpu import launch_plan
    from layoutkit.copy.plan import KERNEL, plan_copy

    counts = {"alias-kernel": 0, "alias-refused": 0}
    seed = 0
    while counts["alias-kernel"] < ALIAS_CASES or counts["alias-refused"] < ALIAS_CASES // 2:
        seed += 1
        case = aliased_case(SeededRandom(seed), max_ndim=6)
        if case is None:
            continue
        itemsize, dst_side, src_side = case
        memory = np.frombuffer(np.random.default_rng(seed).bytes(ALIAS_ELEMENTS * itemsize),
                               np.uint8).copy()  # fmt: skip
        device = DeviceView(memory, 0)
        whole = StridedMemoryView.from_buffer(
            device.buffer, StridedLayout.dense((ALIAS_ELEMENTS,), itemsize), f"V{itemsize}"
        )
        dst = whole.view(offset_layout(dst_side[0], dst_side[1], itemsize, dst_side[2]))
        src = whole.view(offset_layout(src_side[0], src_side[1], itemsize, src_side[2]))
        if not dst.size or not dst.layout.is_unique:
            continue
        src_layout = _broadcast(dst.layout, src.layout)
        expected = memory.copy()
        if shares_bytes(dst, src, dst.layout, src_layout):
            if dst.ptr == src.ptr and dst.layout == src_layout:
                continue  # a no-op
            try:
                layoutkit.copy(dst, src)
            except ValueError as exc:
                assert "share device-accessible memory" in str(exc), exc
            else:
                raise AssertionError(f"a device copy of views that share bytes ran: {case}")
            assert memory.tobytes() == expected.tobytes(), f"a refused copy wrote: {case}"
            counts["alias-refused"] += 1
            continue
        plan = plan_copy(dst.layout, src_layout, dst.ptr, src.ptr, True, True)
        if plan.method != KERNEL:
            continue
        np.copyto(numpy_items(expected, dst_side, itemsize),
                  numpy_items(expected, src_side, itemsize).copy())  # fmt: skip
        launch_plan(plan, dst.ptr, src.ptr)
        assert memory.tobytes() == expected.tobytes(), (case, plan.describe())
        counts["alias-kernel"] += 1
    return counts


def test_kernels_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    counts = eval(result.stdout.strip().splitlines()[-1])
    assert counts.get("alias-kernel", 0) >= ALIAS_CASES, counts
    assert counts.get("alias-refused", 0) >= ALIAS_CASES // 2, counts
    for unit in (1, 2, 4, 8, 16):
        assert counts.get(f"tiled-{unit}", 0) >= 2, counts
        assert counts.get(f"direct-{unit}", 0) >= 1, counts
    for unit in (1, 2):
        assert counts.get(f"block-{unit}", 0) >= 3, counts
    assert sum(counts.get(f"gather-{unit}", 0) for unit in (1, 2, 4, 8, 16)) >= 3, counts
    assert counts.get("block-square", 0) >= 2 and counts.get("block-run", 0) >= 4, counts
    assert counts.get("fill", 0) >= 4, counts
    assert counts.get("edges", 0) >= 2, counts
    assert sum(counts.values()) >= 100, counts


if __name__ == "__main__":
    from numba.core import config

    assert config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
    print({**run_cases(), **run_alias_cases()})
