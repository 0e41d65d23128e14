"""Hostile uses of real producers' memory: torch tensors and JAX arrays changed under views.

Each case runs in a child interpreter (``helpers.hostile``), so a read of freed memory that
crashes is a failure naming the case. torch and JAX are optional: without them the cases
are skipped.

The rules held to:

* a view of a torch tensor keeps the tensor's memory (its storage) alive: ``del``,
  ``tensor.set_()`` and ``tensor.data = ...`` give the tensor other memory, never free the
  view's (resizing the storage itself in place is torch's own free, under every DLPack
  consumer alike);
* JAX arrays are immutable: views of them are read-only, and copies, item assignment,
  ``@njit`` writes and writable re-views are refused without writing a byte; a deleted
  array is refused with ``BufferError``, and an array deleted after the import leaves the
  view its memory.
"""

import gc
import importlib.util

import numpy as np
import pytest
from helpers.hostile import Cases
from helpers.hostile_checks import check, refused

import layoutkit
from layoutkit import StridedMemoryView

cases = Cases(__name__)
_NO_TORCH = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
_NO_JAX = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs JAX")
_LARGE = 1 << 21  # 8 MiB of float32: allocated with mmap, so a read after free can crash


def _churn(torch):
    """Allocate and fill memory, so freed blocks are reused (or unmapped) before reads."""
    return [torch.full((_LARGE,), -1.0) for _ in range(4)]


@cases.case(marks=(_NO_TORCH,))
def torch_view_outlives_set_and_data_assignment():
    import torch

    expected = np.arange(_LARGE, dtype=np.float32)
    for what, change in (
        ("del tensor", None),
        ("tensor.set_(other)", lambda t: t.set_(torch.zeros(3))),
        ("tensor.data = other", lambda t: setattr(t, "data", torch.zeros(3))),
    ):  # fmt: skip
        for door in (StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface):
            tensor = torch.arange(_LARGE, dtype=torch.float32)
            view = door(tensor)
            buffer = view.buffer
            if change is not None:
                change(tensor)
            del tensor
            gc.collect()
            junk = _churn(torch)
            check(np.array_equal(np.asarray(view), expected),
                  f"{door.__name__}, then {what}: the view reads other memory")  # fmt: skip
            del view, junk
            gc.collect()
            again = StridedMemoryView.from_buffer(buffer, layoutkit.StridedLayout.dense((_LARGE,), 4),
                                                  np.float32)  # fmt: skip
            check(np.array_equal(np.asarray(again), expected),
                  f"{door.__name__}, then {what}: the buffer lost the memory")  # fmt: skip


@cases.case(marks=(_NO_JAX,))
def jax_views_are_read_only_and_writes_into_them_are_refused():
    import jax.numpy as jnp
    from numba import njit

    @njit
    def store(view):
        view[0] = 42.0

    x = jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4)
    before = np.array(x)
    for door in (StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface):
        view = door(x)
        check(view.readonly, f"{door.__name__}: a view of an immutable JAX array is writable")
        source = np.zeros((3, 4), np.float32)
        refused(layoutkit.copy, x, source, what="layoutkit.copy into a JAX array")
        refused(layoutkit.copy, view, source, what="layoutkit.copy into a JAX array's view")
        refused(view.copy_from, source, what="view.copy_from into a JAX array")
        refused(view.__setitem__, (0, 0), 5.0, what="item assignment into a JAX array")
        refused(store, view, what="an @njit write into a JAX array", classes=(Exception,))
        refused(StridedMemoryView.from_buffer, view.buffer, view.layout, view.dtype, False,
                what="a writable view of a JAX array's buffer")  # fmt: skip
        check(not np.asarray(view).flags.writeable, "numpy.asarray(view) of a JAX array is writable")
        check(not np.from_dlpack(view).flags.writeable, "np.from_dlpack(view) of a JAX array is writable")
    check(np.array_equal(np.asarray(x), before), "a refused write changed the JAX array")


@cases.case(marks=(_NO_JAX,))
def jax_deleted_arrays():
    import jax.numpy as jnp

    gone = jnp.arange(5.0)
    gone.delete()
    for door in (StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface):
        exc = refused(door, gone, what="a deleted JAX array", classes=(BufferError,))
        check("deleted" in str(exc), f"a deleted JAX array: the message {exc} does not say so")
    x = jnp.arange(_LARGE, dtype=jnp.float32)
    view = StridedMemoryView.from_any_interface(x)
    x.delete()
    del x
    gc.collect()
    junk = [jnp.full((_LARGE,), -1.0) + k for k in range(4)]
    check(np.array_equal(np.asarray(view), np.arange(_LARGE, dtype=np.float32)),
          "a JAX array deleted after the import took the view's memory")  # fmt: skip
    del junk


cases.export(globals())
