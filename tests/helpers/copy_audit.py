"""An alignment audit of device copy plans, from the launch parameters alone.

Every global access of the copy kernels in ``layoutkit.copy.gpu`` is at an address of the
form ``base + sum(coefficient_i * multiplier_i)``: the launch's base (the plan's element
zero plus the plan's and the launch's offsets), the grid steps times the tile digits,
the row-table strides times the row coordinates, the run stride times the lane's run
position, the thread steps times the thread digits, the vector step times the vector
index. This module reads those multipliers and the ranges of their coefficients from a
launch's arguments, mirroring the kernel's address arithmetic (it never asks the planner
why a vector width was chosen), and enumerates the residues modulo the access size that
the sums can reach. An access is aligned when the only reachable residue is 0.

The residues are exact for the arithmetic (every combination of coefficients in range)
and conservative for masking (a masked coefficient value counts as reachable), so a plan
the audit passes cannot issue a misaligned access; one it fails issues one unless the
offending combination is always masked.
"""

from layoutkit.copy.plan import BLOCK_SLOTS, BLOCK_THREAD_AXES, ROW_AXES

__all__ = ["access_terms", "audit_plan", "misaligned_accesses", "narrow_overflows"]


def _residues(base, terms, size):
    """Residues modulo ``size`` of ``base + sum(c * m)`` over ``0 <= c < count`` for every
    ``(m, count)`` in ``terms``."""
    reached = {base % size}
    for multiplier, count in terms:
        if count <= 1 or multiplier % size == 0:
            continue
        steps = {c * multiplier % size for c in range(min(count, size))}
        reached = {(r + s) % size for r in reached for s in steps}
    return reached


def _grid_terms(count, dst_step, src_step):
    return [(d, c) for d, c in zip(dst_step, count, strict=True)], [
        (s, c) for s, c in zip(src_step, count, strict=True)
    ]


def _row_terms(extent, strides):
    return [(s, e) for s, e in zip(strides, extent, strict=True)]


def access_terms(launch):
    """The global accesses of one launch: ``(what, side, size, terms)`` for each, with
    ``terms`` the ``(multiplier, coefficient count)`` pairs added to that side's base.

    ``side`` is ``"dst"`` or ``"src"``; ``size`` the bytes of the access.
    """
    a = launch.args
    if launch.kernel == "direct":
        unit, src_unit = launch.key[0], launch.key[1]
        tx, run, run_dst, run_src = a[:4]
        row_extent, row_dst, row_src = a[11:14]
        count, grid_dst, grid_src = a[14:17]
        assert len(row_extent) == ROW_AXES
        gd, gs = _grid_terms(count, grid_dst, grid_src)
        return [
            ("direct load", "src", src_unit or unit,
             gs + _row_terms(row_extent, row_src) + [(run_src, run)]),
            ("direct store", "dst", unit,
             gd + _row_terms(row_extent, row_dst) + [(run_dst, run)]),
        ]  # fmt: skip
    if launch.kernel == "tiled":
        unit = launch.key[0]
        phase1, phase2 = a[:16], a[16:32]
        count, grid_dst, grid_src = a[32:35]
        gd, gs = _grid_terms(count, grid_dst, grid_src)
        out = []
        for what, side, grid, phase in (("tiled load", "src", gs, phase1),
                                        ("tiled store", "dst", gd, phase2)):  # fmt: skip
            _, run, run_global = phase[:3]
            row_extent, row_global = phase[13], phase[14]
            out.append((what, side, unit,
                        grid + _row_terms(row_extent, row_global) + [(run_global, run)]))  # fmt: skip
        return out
    if launch.kernel == "block":
        unit, ka, kb, vs, vd, _, ns, nd = launch.key
        counts, dst_thread, src_thread, coord, src_step, dst_step = a[:6]
        count, grid_dst, grid_src = a[6:9]
        assert len(counts) == BLOCK_THREAD_AXES and len(coord) == BLOCK_THREAD_AXES * BLOCK_SLOTS
        gd, gs = _grid_terms(count, grid_dst, grid_src)
        total = ka * kb * unit
        return [
            ("block load", "src", vs,
             gs + [(t, c) for t, c in zip(src_thread, counts, strict=True)]
             + [(vs, ns), (src_step, total // vs // ns)]),
            ("block store", "dst", vd,
             gd + [(t, c) for t, c in zip(dst_thread, counts, strict=True)]
             + [(vd, nd), (dst_step, total // vd // nd)]),
        ]  # fmt: skip
    if launch.kernel == "gather":
        unit = launch.key[0]
        extent, dst_stride, src_stride = a[:3]
        return [
            ("gather load", "src", unit, list(zip(src_stride, extent, strict=True))),
            ("gather store", "dst", unit, list(zip(dst_stride, extent, strict=True))),
        ]
    raise ValueError(f"unknown kernel {launch.kernel!r}")


def misaligned_accesses(plan, dst_ptr, src_ptr):
    """``[(launch text, access, size, residues)]`` of every access of a ``kernel`` plan
    whose address can be misaligned for its size (empty: every access is aligned)."""
    out = []
    for launch in plan.launches:
        bases = {
            "dst": dst_ptr + plan.dst_offset + launch.dst_offset,
            "src": src_ptr + plan.src_offset + launch.src_offset,
        }
        for what, side, size, terms in access_terms(launch):
            reached = _residues(bases[side], terms, size)
            if reached != {0}:
                out.append((launch.text, what, size, sorted(reached)))
    return out


def audit_plan(plan, dst_ptr, src_ptr):
    """Raise AssertionError naming the first misaligned access of a plan, if any."""
    bad = misaligned_accesses(plan, dst_ptr, src_ptr)
    assert not bad, f"misaligned accesses in {plan.describe()}: {bad}"


def narrow_overflows(plan):
    """``[launch text]`` of the launches whose row tables (``gather``: whose element
    offsets) are 32-bit (key's last element 0) although an offset can reach 2**31 in
    magnitude (the tables keep ``sum((extent - 1) * |stride|)`` over a phase's row axes)."""
    out = []
    for launch in plan.launches:
        if launch.kernel == "block" or launch.key[-1]:
            continue
        a = launch.args
        if launch.kernel == "gather":  # offsets: sums of digit x stride over every axis
            tables = [(a[0], a[1]), (a[0], a[2])]
        elif launch.kernel == "direct":
            tables = [(a[11], a[12]), (a[11], a[13])]
        else:
            tables = [(a[13], a[14]), (a[16 + 13], a[16 + 14])]
        for extents, strides in tables:
            if sum((e - 1) * abs(s) for e, s in zip(extents, strides, strict=True)) >= 2**31:
                out.append(launch.text)
    return out
