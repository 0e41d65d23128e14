"""layoutkit in unusual environments: each check runs in a fresh interpreter with its own
environment variables or interpreter options, so a failure at import is a failure here.

- ``NUMBA_DISABLE_JIT=1``: Numba runs ``@njit`` functions as Python. The layout API,
  views, copies and the demo give the results they give compiled (the host copy kernel's
  pointer intrinsics cannot run as Python; NumPy does that copy).
- No cache location: Numba refuses ``cache=True`` where it cannot write (a read-only
  installation without a writable ``NUMBA_CACHE_DIR`` or home cache);
  ``NUMBA_CACHE_LOCATOR_CLASSES=IPythonCacheLocator`` is that situation without a
  read-only mount (that locator finds nothing outside IPython).
- ``python -OO`` (no asserts, no docstrings), ``-X dev -W error`` (no warnings on normal use).
"""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Work a host-only user does, checked against NumPy; prints "ok".
HOST_WORK = """
import numpy as np
import layoutkit
from layoutkit import StridedLayout, StridedMemoryView as V

layout = StridedLayout.dense((3, 4, 5), 4)[1:, ::-2, None, 3]
assert layout.offset_bounds == (28, 58) and layout.is_unique
assert StridedLayout((2, 3), (3, 2), 1).is_unique
assert not StridedLayout.dense((1, 4), 8).broadcast_to((3, 4)).is_unique
assert StridedLayout.dense((4, 6), 4).repacked(8) == StridedLayout.dense((4, 3), 8)
for n in (62, 63, 64):   # bit 63 of the flatten mask is the int64 sign bit
    wide = StridedLayout.dense((1,) * n, 1)
    assert wide.flattened_axis_mask() == 2**n - 2, (n, wide.flattened_axis_mask())
    assert wide.flattened().shape == (1,)

a = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
for source in (a[::-1, ::2], a.transpose(2, 0, 1), a[:, ::-1, 1::2].T):
    for dtype in (np.uint8, np.float32, np.complex128):
        s = np.ascontiguousarray(source).astype(dtype)[..., ::-1]
        out = np.zeros(s.shape[::-1], dtype).T          # another axis order
        layoutkit.copy(V.from_array_interface(out), V.from_array_interface(s))
        assert np.array_equal(out, s), (source.shape, dtype)
big = np.arange(2**20, dtype=np.float64).reshape(1024, 1024)   # the threaded path
out = np.zeros((1024, 1024))
V.from_array_interface(out).copy_from(V.from_array_interface(big.T))
assert np.array_equal(out, big.T)

v = V.from_array_interface(np.zeros(5))
v[1:3] = 7.0
v[0] = 1
assert np.from_dlpack(v).tolist() == [1.0, 7.0, 7.0, 0.0, 0.0]
assert "<svg" in layoutkit.display.layout_svg(layout)
print("ok")
"""


def run_python(code, env=None, options=()):
    """Run ``code`` in a fresh interpreter (repository on the path); return its stdout."""
    environment = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    result = subprocess.run(
        [sys.executable, *options, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=240, env=environment, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.parametrize(
    "env, options",
    [
        ({"NUMBA_DISABLE_JIT": "1"}, ()),
        ({"NUMBA_CACHE_LOCATOR_CLASSES": "IPythonCacheLocator"}, ()),
        ({"NUMBA_BOUNDSCHECK": "1"}, ()),
        ({}, ("-OO",)),
        ({}, ("-X", "dev", "-W", "error")),
    ],
    ids=["disable-jit", "no-cache-location", "boundscheck", "OO", "dev-W-error"],
)
def test_host_work_in_environment(env, options):
    assert run_python(HOST_WORK, env, options).strip().endswith("ok")


@pytest.mark.parametrize(
    "env",
    [{"NUMBA_DISABLE_JIT": "1"}, {"NUMBA_CACHE_LOCATOR_CLASSES": "IPythonCacheLocator"}],
    ids=["disable-jit", "no-cache-location"],
)
def test_demo_in_environment(env):
    out = run_python("import runpy; runpy.run_module('layoutkit', run_name='__main__')", env)
    assert out.strip().splitlines()[-1] == "25 of 25 layouts match NumPy"


def test_user_njit_code_compiles_without_a_cache_location():
    out = run_python(
        """
        import numpy as np
        from numba import njit
        from layoutkit import StridedLayout, StridedMemoryView

        @njit
        def f(view, layout):
            return view[1] + view.layout.volume + layout.permuted((1, 0)).strides[0]

        print(f(StridedMemoryView.from_array_interface(np.arange(4.0)),
                StridedLayout.dense((2, 3), 4)))
        """,
        {"NUMBA_CACHE_LOCATOR_CLASSES": "IPythonCacheLocator"},
    )
    assert out.strip() == "6.0"
