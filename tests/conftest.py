"""Shared pytest configuration: the ``cuda`` marker skips cleanly without a GPU, and the
``slow`` marker runs only when asked for (``--runslow`` or ``LAYOUTKIT_SLOW=1``)."""

import functools
import os

import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="also run tests marked slow (the long fuzz runs); same as LAYOUTKIT_SLOW=1",
    )


def slow_requested(config):
    """Whether slow tests run: ``--runslow`` or a non-empty ``LAYOUTKIT_SLOW`` other than 0."""
    return config.getoption("--runslow") or os.environ.get("LAYOUTKIT_SLOW", "") not in ("", "0")


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
    run_slow = slow_requested(config)
    if run_slow:
        os.environ["LAYOUTKIT_SLOW"] = "1"  # subprocesses started by tests see it too
    skip_slow = pytest.mark.skip(reason="slow test: run with --runslow or LAYOUTKIT_SLOW=1")
    reason = None
    for item in items:
        if not run_slow and item.get_closest_marker("slow") is not None:
            item.add_marker(skip_slow)
        if item.get_closest_marker("cuda") is not None:  # not item.keywords: that also
            # holds the names of the item's packages, e.g. doctests under layoutkit/cuda/
            if reason is None:
                reason = gpu_unavailable_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"cuda test: {reason}"))
