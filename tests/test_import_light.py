"""`import layoutkit` stays light: no CUDA target, driver bindings, CuPy or torch
(the array-api-compat `test_no_dependencies` pattern: a fresh interpreter per check)."""

import subprocess
import sys

import pytest

HEAVY = ("numba.cuda", "cuda.bindings", "cuda.core", "cupy", "torch", "jax")


def imported_heavy_modules(code):
    """Run ``code`` in a fresh interpreter and return the heavy modules it imported."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_import_layoutkit_is_light():
    assert imported_heavy_modules("import layoutkit") == []


def test_import_does_not_import_numba_at_all():
    probe = "import layoutkit, sys; print('numba' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize(
    "code",
    [
        "import layoutkit\nlayout = layoutkit.StridedLayout.dense((4, 6), 8)[::2, ::-1]\n"
        "assert layout.is_unique and layout.flattened().ndim >= 1",
        "import layoutkit\nlayout = layoutkit.StridedLayout((3, 4), None, 4)\n"
        "layoutkit.StridedLayout._repr_html_(layout)",
        "import numpy as np, layoutkit\n"
        "view = layoutkit.StridedMemoryView.from_array_interface(np.arange(6.0))\n"
        "assert view.layout.shape == (6,)",
        "import numpy as np, layoutkit\n"
        "V = layoutkit.StridedMemoryView.from_array_interface\n"
        "a, b = np.arange(12.0).reshape(3, 4), np.zeros((4, 3)).T\n"
        "layoutkit.copy(V(b), V(a[::-1]))\n"
        "assert (b == a[::-1]).all()",
    ],
    ids=["layout-transforms", "layout-picture", "host-view", "host-copy"],
)
def test_host_only_work_stays_light(code):
    assert imported_heavy_modules(code) == []


def test_star_import_is_light_and_leaves_numbas_cuda_alone():
    """``from layoutkit import *`` binds every name of ``__all__`` without the CUDA side;
    ``layoutkit.cuda`` stays an attribute (it would import Numba's CUDA target and the
    driver bindings, and replace ``from numba import cuda`` in the caller's namespace)."""
    star = (
        "from layoutkit import *\nimport layoutkit\n"
        "assert StridedLayout and plan_copy and copy and display and 'cuda' not in dir()\n"
        "assert 'cuda' in dir(layoutkit) and 'display' in dir(layoutkit)\n"
        "assert set(layoutkit.__all__) <= set(dir(layoutkit))"
    )
    assert imported_heavy_modules(star) == []
    code = "from numba import cuda\nfrom layoutkit import *\nassert cuda.__name__ == 'numba.cuda'"
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr


def test_every_public_name_loads_from_many_threads_at_once():
    """The lazy names' first access from threads at once: their modules import Numba, whose
    circular imports gave a second thread partially initialised modules (ImportError,
    AttributeError), and layoutkit.copy's cycle raised _DeadlockError."""
    code = """
import threading
import layoutkit

names = [*layoutkit.__all__, "cuda"] * 2
barrier = threading.Barrier(len(names))
errors = []

def load(name):
    barrier.wait()
    try:
        assert getattr(layoutkit, name) is not None
    except Exception as exc:
        errors.append(f"{name}: {type(exc).__name__}: {exc}")

threads = [threading.Thread(target=load, args=(name,)) for name in names]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(errors or "ok")
"""
    for _ in range(3):  # the race was lost on every run, but cheaply made surer
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=180
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "ok"
