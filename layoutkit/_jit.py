"""``numba.njit`` for layoutkit's own kernels: cached where Numba can write its cache.

Numba refuses ``cache=True`` when it finds nowhere to write the cache ("cannot cache
function ...: no locator available"): a read-only installation (a system package, a
container image, a read-only mount) whose user has no writable ``NUMBA_CACHE_DIR`` or
home cache directory. layoutkit's kernels then compile in memory on every run instead of
failing to import. The one place layoutkit asks Numba for a cache on the CPU
(``copy.gpu.kernel_for`` has the same fallback for its CUDA kernels).
"""

from numba import njit as _numba_njit

__all__ = ["njit"]

_NO_LOCATOR = "no locator available"


def njit(*, cache=False, **options):
    """``numba.njit(cache=cache, **options)`` as a decorator, uncached where Numba cannot cache.

    Examples
    --------
    >>> @njit(cache=True)
    ... def twice(x):
    ...     return 2 * x
    >>> twice(21)
    42
    """

    def decorate(function):
        if cache:
            try:
                return _numba_njit(cache=True, **options)(function)
            except RuntimeError as exc:  # Numba's class for "nowhere to write the cache"
                if _NO_LOCATOR not in str(exc):
                    raise
        return _numba_njit(**options)(function)

    return decorate
