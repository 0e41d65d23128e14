"""Every StridedLayout overload types and lowers for CUDA (compile_ptx, no GPU needed)."""

import types

import pytest

from layoutkit import StridedLayout

cuda = pytest.importorskip("numba.cuda")
pytest.importorskip("layoutkit.cuda")  # registers layouts and views with numba-cuda


@pytest.fixture
def compile_ptx(monkeypatch):
    """``numba.cuda.compile_ptx`` for compute capability 9.0 on a machine without a GPU.

    numba-cuda 0.30 asks the driver for the current device's compute capability when it
    compiles a device function called from the kernel (our overloads), even inside
    ``compile_ptx``; without a GPU that query fails, so a stand-in device reports 9.0.
    """
    import numba.cuda.dispatcher as dispatcher

    from tests.conftest import gpu_unavailable_reason

    if gpu_unavailable_reason() is not None:
        monkeypatch.setattr(
            dispatcher,
            "get_current_device",
            lambda: types.SimpleNamespace(compute_capability=(9, 0)),
        )
    return lambda kernel, signature: cuda.compile_ptx(kernel, signature, cc=(9, 0))


def _every_overload(out, layout):
    p = layout.permuted((2, 0, 1))[1:, ::-1, None]
    r = layout.reshaped((-1, layout.shape[2])).broadcast_to((2, 1, 1)).unsqueezed(0)
    d = layout.to_dense("K").repacked(8)
    out[0] = (
        p.volume
        + p.is_unique
        + p.is_contiguous_any
        + p.is_contiguous_c
        + p.is_contiguous_f
        + p.is_dense
        + p.stride_order[0]
        + p.flattened_axis_mask()
        + p.strides_in_bytes[0]
        + p.slice_offset_in_bytes
        + p.min_offset
        + p.max_offset
        + r.offset_of((0, 0, 0, 0))
        + d.max_compatible_itemsize(16)
        + layout.required_size_in_bytes()
        + layout[..., 0].unsqueezed((0, 1)).ndim
    )


def test_every_overload_compiles_for_cuda(compile_ptx):
    from numba import types as nt

    from layoutkit._numba_layout import layout_type

    ptx, _ = compile_ptx(_every_overload, (nt.int64[:], layout_type(3)))
    assert ".visible .entry" in ptx
    # scratch buffers live in registers/local memory: no heap allocation in device code
    assert "malloc" not in ptx


def _constructors(out, n, m):
    a = StridedLayout((n, 3), (3, 1), 4)
    b = StridedLayout((n, 3), None, 4)
    c = StridedLayout((n, 3), (12, 4), 4, True)
    d = StridedLayout.dense((n, 3), 4, "F")
    e = StridedLayout.dense((n, m), 8, (1, 0))
    f = StridedLayout.dense_like(e, "C")
    out[0] = (a == b) + (a != c) + (c == b) + d.is_contiguous_f + e.volume + f.strides[0]


def test_constructors_and_equality_compile_for_cuda(compile_ptx):
    from numba import types as nt

    ptx, _ = compile_ptx(_constructors, (nt.int64[:], nt.int64, nt.int32))
    assert ".visible .entry" in ptx and "malloc" not in ptx


def _every_check(out, layout, i, size):
    # every method that checks its arguments, with run-time values that may fail
    p = layout.permuted((i, 0, 1))
    r = layout.reshaped((i, -1))
    b = layout.broadcast_to((i, 2, 3, 4))
    u = layout.unsqueezed(i)
    k = layout.repacked(size, 0, i)
    m = layout.max_compatible_itemsize(size, 0, i)
    d = layout.to_dense((i, 1, 0))
    s = StridedLayout.dense((i, 2), size, (i, 0))
    out[0] = p.volume + r.volume + b.volume + u.volume + k.volume + m + d.volume + s.volume
    out[1] = layout.offset_of((i, 0, 0)) + layout[i, 1:].volume + layout.required_size_in_bytes()


def test_checks_raise_from_the_kernel_itself(compile_ptx):
    """Every check is in the kernel's own exception table, so debug launches report it."""
    from numba import types as nt
    from numba.cuda.compiler import compile_cuda

    from layoutkit._numba_layout import layout_type

    result = compile_cuda(
        _every_check, nt.void, (nt.int64[:], layout_type(3), nt.int64, nt.int64),
        debug=True, nvvm_options={"opt": 0, "g": None}, cc=(9, 0),
    )  # fmt: skip
    raised = {(exc.__name__, args[0]) for exc, args, _ in result.call_helper.exceptions.values()}
    for expected in [
        ("AxisError", "permuted: axis out of range"),
        ("ValueError", "permuted: repeated axis"),
        ("ValueError", "reshaped: the volumes differ"),
        ("ValueError", "broadcast_to: extents do not match"),
        ("AxisError", "unsqueezed: axis out of range"),
        ("ValueError", "repacked: the new itemsize is not a multiple of the old one"),
        ("ValueError", "max_compatible_itemsize: max_itemsize is smaller than the itemsize"),
        ("ValueError", "to_dense: repeated axis"),
        ("ValueError", "StridedLayout.dense: repeated axis"),
        ("AxisError", "offset_of: index out of bounds on axis 0"),
        ("AxisError", "index out of bounds on axis 0"),
        ("ValueError", "required_size_in_bytes: the layout reaches before its start: the size "
         "it needs is ambiguous"),
    ]:
        assert expected in raised, expected
