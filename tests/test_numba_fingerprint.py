"""The Numba types of layouts and views carry layoutkit's fingerprint, so that a user's
``cache=True`` function compiled against another layoutkit is compiled again rather than
loaded (see layoutkit/_numba_fingerprint.py)."""

import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")

import layoutkit  # noqa: E402
from layoutkit import _numba_fingerprint as F  # noqa: E402
from layoutkit._numba_layout import layout_type  # noqa: E402
from layoutkit._numba_view import numba_dtype, strided_view_type  # noqa: E402

ROOT = Path(layoutkit.__file__).parent


def test_type_keys_hold_the_fingerprint():
    assert F.FINGERPRINT in layout_type(2).key
    assert F.FINGERPRINT in strided_view_type(numba_dtype(np.dtype("float64")), 2, "C").key


def test_a_type_from_another_layoutkit_is_another_type():
    # what a cache index written by another layoutkit unpickles to
    for typ in (layout_type(2), strided_view_type(numba_dtype(np.dtype("int32")), 1)):
        assert pickle.loads(pickle.dumps(typ)) == typ
        other = pickle.loads(pickle.dumps(typ).replace(F.FINGERPRINT.encode(), b"0" * 16))
        assert other.fingerprint == "0" * 16
        assert other != typ and other.key != typ.key


def test_the_fingerprint_follows_the_sources(tmp_path):
    assert F.fingerprint(ROOT) == F.FINGERPRINT
    for name in F._SOURCES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, tmp_path / name)
    assert F.fingerprint(tmp_path) == F.FINGERPRINT
    with open(tmp_path / "_kernels.py", "a") as f:
        f.write("\n# changed\n")
    assert F.fingerprint(tmp_path) != F.FINGERPRINT


PROBE = textwrap.dedent(
    """
    import sys
    import layoutkit._numba_fingerprint as fp
    fp.FINGERPRINT = sys.argv[1]  # before any layout type is made
    from numba import njit
    from layoutkit import StridedLayout

    @njit(cache=True)
    def volume(layout):
        return layout.volume

    assert volume(StridedLayout.dense((2, 3), 4)) == 6
    print(len(volume.stats.cache_hits), len(volume.stats.cache_misses))
    """
)


def test_cached_code_of_another_fingerprint_is_not_loaded(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT.parent)}
    env = {**os.environ, **env}

    def run(fingerprint):
        result = subprocess.run(
            [sys.executable, "probe.py", fingerprint], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    assert run("a" * 16) == ["0", "1"]  # compiled and cached
    assert run("a" * 16) == ["1", "0"]  # loaded
    assert run("b" * 16) == ["0", "1"]  # another layoutkit: compiled again
