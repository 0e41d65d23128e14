"""A fingerprint of the code that compiled layouts and views are made of.

Numba keys a ``cache=True`` function's cached machine code on the function's own source
and its argument types, not on the extensions its code was compiled with: after
layoutkit changes, a user's cached function would keep running the old unboxing and
boxing code (and fail, or worse, misread the new objects). The Numba types of layouts
and views therefore carry :data:`FINGERPRINT` in their ``key``: a cache entry made with
another layoutkit has argument types that differ from today's, so Numba compiles anew
instead of loading it. (A cached function that takes no layout or view, only makes and
returns them, is not keyed on it: Numba checks only its own source file.)

The fingerprint hashes the sources of the modules whose code ends up in compiled code
(the kernels, the ``_numba_*`` modules, the CUDA argument handler) and of the two
classes compiled code reads objects of (``layout.py``, ``memoryview.py``). It is made
once per process, when layoutkit first imports Numba's side.
"""

import hashlib
from pathlib import Path

__all__ = ["FINGERPRINT", "fingerprint"]

_SOURCES = (
    "_kernel_codes.py",
    "_kernels.py",
    "_numba_assign.py",
    "_numba_boxing.py",
    "_numba_checks.py",
    "_numba_index.py",
    "_numba_layout.py",
    "_numba_view.py",
    "cuda/_extension.py",
    "layout.py",
    "memoryview.py",
)


def fingerprint(root=Path(__file__).parent):
    """A short hash of the sources of layoutkit's compiled side, under ``root``.

    Where a source cannot be read (an installation without ``.py`` files), its name and
    layoutkit's version stand for it.

    Examples
    --------
    >>> len(fingerprint())
    16
    """
    digest = hashlib.blake2b(digest_size=8)
    for name in _SOURCES:
        digest.update(name.encode())
        try:
            digest.update((root / name).read_bytes())
        except OSError:
            from layoutkit import __version__

            digest.update(__version__.encode())
    return digest.hexdigest()


FINGERPRINT = fingerprint()
