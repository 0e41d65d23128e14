"""Shared pytest configuration: the ``cuda`` marker skips cleanly without a GPU."""

import functools

import pytest


@functools.cache
def gpu_unavailable_reason():
    """Return why no CUDA GPU can be used here, or ``None`` when one can."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:  # pragma: no cover - depends on the machine
        return f"cuda-bindings is not installed ({exc})"
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:  # the bindings raise when libcuda.so is missing
        return f"no CUDA driver found ({type(exc).__name__}: {exc})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return f"cuInit failed: {err.name}"
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return "no CUDA device found"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if item.get_closest_marker("cuda") is not None:  # not item.keywords: that also
            # holds the names of the item's packages, e.g. doctests under layoutkit/cuda/
            if reason is None:
                reason = gpu_unavailable_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"cuda test: {reason}"))
