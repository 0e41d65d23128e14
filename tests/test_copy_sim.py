"""The GPU copy kernels under numba-cuda's simulator, checked byte for byte against NumPy.

The simulator must be enabled before Numba's CUDA target is imported, so the cases run
in a subprocess (this file, executed as a script with ``NUMBA_ENABLE_CUDASIM=1``).
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from layoutkit.copy.plan import (
    BLOCK_VECTORS,
    ELEMENTWISE,
    FILL,
    TRANSPOSE,
    TRANSPOSE_TILE,
    broadcast_source_strides,
    plan_copy,
)

HERE = Path(__file__).resolve().parent


def _random_case(rng):
    from helpers.copy_cases import ITEMSIZES, strided_view

    itemsize = int(rng.choice(ITEMSIZES))
    ndim = int(rng.integers(0, 5))
    shape = tuple(int(e) for e in rng.integers(0, 6, ndim))

    def spec(shape):
        return (
            tuple(rng.permutation(len(shape))),
            tuple(int(s) for s in rng.choice([1, 1, 2, -1, -2], len(shape))),
            tuple(int(p) for p in rng.integers(0, 2, len(shape))),
            int(rng.choice([0, 0, 1, 4, 8])),
        )

    src_shape = tuple(1 if rng.integers(0, 4) == 0 else e for e in shape)
    dst_buffer, dst = strided_view(shape, itemsize, *spec(shape), fill=bytes)
    src_buffer, src = strided_view(src_shape, itemsize, *spec(src_shape), fill=rng.bytes)
    return dst_buffer, dst, src


def _named_cases():
    rng = np.random.default_rng(7)
    for dtype in ("u1", "u2", "u4", "u8", "c16", "V3", "V6"):
        itemsize = np.dtype(dtype).itemsize
        typed = np.frombuffer(rng.bytes(40 * 13 * itemsize), dtype).reshape(40, 13)
        column = np.broadcast_to(typed[:, :1], (40, 16))
        for src in (typed.T, typed[::-1, ::2], typed[:, None, :].transpose(2, 1, 0), column):
            dst = np.zeros(src.shape, dtype)
            yield dst.view(np.uint8).reshape(-1), dst, src
        if itemsize in TRANSPOSE_TILE:  # full tiles take the unrolled path of the kernel
            tile = TRANSPOSE_TILE[itemsize]
            shape = (2 * tile + 3, tile + 5)
            typed = np.frombuffer(rng.bytes(shape[0] * shape[1] * itemsize), dtype).reshape(shape)
            dst = np.zeros(shape[::-1], dtype)
            yield dst.view(np.uint8).reshape(-1), dst, typed.T
        if itemsize in BLOCK_VECTORS:  # blocks of 8 x 8 units: the register-block kernel
            for shape, axes in (((40, 72), (1, 0)), ((3, 16, 5, 8), (0, 2, 3, 1))):
                typed = np.empty(shape, dtype)  # NumPy's allocation: 16-byte aligned
                typed.view(np.uint8)[...] = np.frombuffer(
                    rng.bytes(typed.nbytes), np.uint8
                ).reshape(typed.view(np.uint8).shape)
                src = typed.transpose(axes)
                dst = np.zeros(src.shape, dtype)
                yield dst.view(np.uint8).reshape(-1), dst, src
        for shape, axes in (((8, 8, 8, 8), (3, 2, 1, 0)), ((4,) * 6, (5, 3, 1, 4, 2, 0))):
            typed = np.frombuffer(rng.bytes(int(np.prod(shape)) * itemsize), dtype).reshape(shape)
            src = typed.transpose(axes)
            dst = np.zeros(src.shape, dtype)
            yield dst.view(np.uint8).reshape(-1), dst, src


def run_cases(n_random):
    """Run the named and ``n_random`` random cases; return ``{method: count}``."""
    from layoutkit.copy.gpu import launch_plan

    rng = np.random.default_rng(1234)
    cases = list(_named_cases()) + [_random_case(rng) for _ in range(n_random)]
    counts = {}
    for dst_buffer, dst, src in cases:
        itemsize = dst.itemsize
        src_strides = broadcast_source_strides(
            dst.shape, src.shape, tuple(s // itemsize for s in src.strides)
        )
        dst_ptr = dst.__array_interface__["data"][0]
        src_ptr = src.__array_interface__["data"][0]
        dst_strides = tuple(s // itemsize for s in dst.strides)
        plan = plan_copy(
            dst.shape, dst_strides, src_strides, itemsize, dst_ptr, src_ptr, True, True
        )
        if plan.method not in (ELEMENTWISE, FILL, TRANSPOSE):
            continue
        expected = dst_buffer.copy()
        offset = dst_ptr - dst_buffer.ctypes.data
        np.copyto(np.ndarray(dst.shape, dst.dtype, expected, offset, dst.strides), src)
        launch_plan(plan, dst_ptr, src_ptr)
        assert dst_buffer.tobytes() == expected.tobytes(), (plan, dst.shape, src.strides)
        keys = [f"{plan.method}-{plan.unit}", "grouped-transpose"]
        if plan.vector:
            keys.append(f"block-transpose-{plan.unit}")
        for key in keys:
            if key == "grouped-transpose" and len(plan.row_axes) + len(plan.col_axes) <= 2:
                continue
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_kernels_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    counts = eval(result.stdout.strip().splitlines()[-1])
    assert {"transpose-1", "transpose-4", "transpose-16", "elementwise-1"} <= set(counts)
    assert counts["block-transpose-1"] >= 2
    assert counts["block-transpose-2"] >= 2
    assert counts["block-transpose-4"] >= 2
    assert counts["grouped-transpose"] >= 7
    assert sum(n for key, n in counts.items() if key.startswith("fill")) >= 4
    assert sum(counts.values()) >= 40


if __name__ == "__main__":
    from numba.core import config

    assert config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
    print(run_cases(120))
