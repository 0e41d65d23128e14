"""Every vector access of every device copy launch is aligned, proven from the launch
parameters (``helpers.copy_audit``) over thousands of plans at the random benchmark's
full sizes (64-256 MB: planning is cheap, nothing runs) and any base alignment.

A misaligned vector access is ``CUDA_ERROR_MISALIGNED_ADDRESS`` on a GPU, which poisons
the whole CUDA context; the simulator tests check alignment too, but only at small sizes.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.copy_audit import access_terms, misaligned_accesses, narrow_overflows
from helpers.copy_cases import copy_cases, layout_of, random_pair_spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layoutkit import StridedLayout
from layoutkit.copy import plan as copy_plan
from layoutkit.copy.plan import KERNEL, plan_copy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_copy_random import spec_layouts  # noqa: E402

#: Random specs audited (each at two base alignments).
SPECS = 1500


def _audit(dst_layout, src_layout, dst_ptr, src_ptr):
    plan = plan_copy(dst_layout, src_layout, dst_ptr, src_ptr, True, True)
    if plan.method != KERNEL:
        return None
    bad = misaligned_accesses(plan, dst_ptr, src_ptr)
    assert not bad, (dst_layout, src_layout, dst_ptr % 16, src_ptr % 16, plan.describe(), bad)
    assert not narrow_overflows(plan), (dst_layout, src_layout, plan.describe())
    return plan


def test_benchmark_sizes_are_aligned():
    rng = np.random.default_rng(20250613)
    kernels = set()
    for _ in range(SPECS):
        spec = random_pair_spec(rng, float(rng.uniform(64, 256)) * 2**20)
        dst, src = spec_layouts(spec)
        residues = [(0, 0), tuple(int(r) for r in rng.integers(0, 16, 2))]
        for dst_ptr, src_ptr in residues:
            plan = _audit(dst, src, (1 << 30) + dst_ptr, (1 << 31) + src_ptr)
            if plan is not None:
                kernels.update(launch.kernel for launch in plan.launches)
    assert kernels == {"direct", "tiled", "block", "gather"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(copy_cases(max_ndim=5, max_extent=40), st.integers(0, 15), st.integers(0, 15))
def test_small_layouts_are_aligned(case, dst_shift, src_shift):
    _, dst, _, src = case
    src_layout = layout_of(src)
    if src.shape != dst.shape:
        src_layout = src_layout.broadcast_to(dst.shape)
    if dst.size == 0:
        return
    _audit(layout_of(dst), src_layout, 4096 + dst_shift, 8192 + src_shift)


def test_the_audit_sees_a_misaligned_base():
    """A plan made for one alignment, run at another, fails the audit (the audit is not
    vacuous), and every launch exposes its accesses."""
    dst = StridedLayout.dense((512, 384), 1)  # not so small that gather reads it all at once
    src = StridedLayout.dense((384, 512), 1).permuted((1, 0))
    plan = plan_copy(dst, src, 0, 0, True, True)
    assert plan.method == KERNEL and plan.launches[0].kernel == "block"
    sizes = {size for launch in plan.launches for _, _, size, _ in access_terms(launch)}
    assert max(sizes) >= 8
    assert misaligned_accesses(plan, 0, 0) == []
    assert misaligned_accesses(plan, 4, 0) and misaligned_accesses(plan, 0, 2)


def test_tables_of_tiles_past_two_gigabytes_are_wide():
    """A 64-bit offset within a tile (rows 1.5 GiB apart) gets the wide kernels."""
    dst = StridedLayout.dense((4, 2**20), 4)
    src = StridedLayout((4, 2**20), (3 << 27, 1), 4)
    plan = plan_copy(dst, src, 0, 0, True, True)
    assert plan.launches[0].key[-1] == 1 and not narrow_overflows(plan)


@pytest.mark.parametrize("sign", [1, -1])
def test_gather_offsets_go_wide_at_two_gigabytes(monkeypatch, sign):
    """A ``gather`` launch keeps 32-bit offsets up to a span of ``2**31 - unit`` bytes (its
    extreme offsets, of either sign, still fit an ``int32``) and takes 64-bit ones from
    ``2**31`` (whose positive extreme would not); the audit agrees with both."""
    monkeypatch.setattr(copy_plan, "GATHER_RULES", ((1 << 62, "block", 0.0, True),))
    copy_plan._plan.cache_clear()
    try:
        for extra, wide in ((0, 0), (1, 1)):
            # 4-byte units; the source's byte span is 4 * (2 * s0 + s1 + 4) = 2**31 - 4 + 4 * extra
            s0 = 2**28 - 8
            s1 = 2**29 - 1 - 4 - 2 * s0 + extra
            src = StridedLayout((3, 2, 5), (sign * s0, sign * s1, 1), 4)
            plan = plan_copy(StridedLayout.dense((3, 2, 5), 4), src, 0, 0, True, True)
            (launch,) = plan.launches
            assert launch.kernel == "gather" and launch.key[-1] == wide, plan.describe()
            assert not narrow_overflows(plan) and not misaligned_accesses(plan, 0, 0)
    finally:
        copy_plan._plan.cache_clear()
