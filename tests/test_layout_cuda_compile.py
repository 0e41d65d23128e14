"""Every StridedLayout overload types and lowers for CUDA (compile_ptx, no GPU needed)."""

import types

import pytest

cuda = pytest.importorskip("numba.cuda")
make_layout = None  # bound to layoutkit._numba_layout.make_layout by the test that uses it


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


def _make_and_use(out, n):
    layout = make_layout((n, 3), (3, 1), 4, 0)
    out[0] = layout.is_contiguous_c + layout.volume


def test_layouts_built_in_a_kernel(compile_ptx):
    from numba import types as nt

    global make_layout
    from layoutkit._numba_layout import make_layout

    ptx, _ = compile_ptx(_make_and_use, (nt.int64[:], nt.int64))
    assert ".visible .entry" in ptx
