"""Hostile uses of real producers' memory: torch tensors changed under views.

Each case runs in a child interpreter (``helpers.hostile``), so a read of freed memory that
crashes is a failure naming the case. torch is optional: without it the cases are skipped.

The rules held to:

* a view of a torch tensor keeps the tensor's memory (its storage) alive: ``del``,
  ``tensor.set_()`` and ``tensor.data = ...`` give the tensor other memory, never free the
  view's (resizing the storage itself in place is torch's own free, under every DLPack
  consumer alike);
"""

import gc
import importlib.util

import numpy as np
import pytest
from helpers.hostile import Cases
from helpers.hostile_checks import check

import layoutkit
from layoutkit import StridedMemoryView

cases = Cases(__name__)
_NO_TORCH = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
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


cases.export(globals())
