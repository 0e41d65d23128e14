"""Views as kernel arguments on a real GPU: random layouts against NumPy, CuPy and torch
arguments, the prepared launch path, bounds checks and launch-time errors."""

import numpy as np
import pytest
from numba import cuda

import layoutkit.cuda
from layoutkit import _driver
from layoutkit.layout import StridedLayout
from layoutkit.memory import DeviceMemoryResource
from layoutkit.memoryview import StridedMemoryView

pytestmark = pytest.mark.cuda


def device_copy_of(base):
    """A device buffer holding ``base`` (C-contiguous), and a function reading it back."""
    buffer = DeviceMemoryResource(0).allocate(max(base.nbytes, 1))
    _driver.ensure_context()  # the allocation leaves none current; cuMemcpy needs one
    if base.nbytes:
        _driver.memcpy(buffer.ptr, base.ctypes.data, base.nbytes)

    def read_back():
        host = np.empty_like(base)
        if base.nbytes:
            _driver.memcpy(host.ctypes.data, buffer.ptr, base.nbytes)
        return host

    return buffer, read_back


def device_view(buffer, layout, dtype):
    return StridedMemoryView.from_buffer(buffer, layout, np.dtype(dtype))


def random_case(rng):
    """(shape, index, order, broadcast_extent) of a NumPy view of an arange base."""
    ndim = int(rng.integers(0, 9))
    shape = tuple(int(e) for e in rng.integers(0, 4 if ndim > 4 else 6, size=ndim))
    index = []
    for extent in shape:
        step = int(rng.choice([1, 2, -1, -2, 3]))
        start = int(rng.integers(0, max(extent, 1)))
        index.append(slice(start, None, step) if step > 0 else slice(None, start, step))
    order = tuple(int(a) for a in rng.permutation(ndim))
    broadcast = 3 if ndim and rng.random() < 0.25 else None
    return shape, tuple(index), order, broadcast


def apply_case(target, index, order, broadcast, broadcast_to):
    """The same view of ``target`` (a NumPy array or a StridedLayout)."""
    view = target[(*index, ...)] if isinstance(target, np.ndarray) else target[index]
    view = view.transpose(order) if isinstance(view, np.ndarray) else view.permuted(order)
    if broadcast and view.shape and view.shape[0] > 0:
        view = broadcast_to(view[:1], (broadcast, *view.shape[1:]))
    return view


CASES = [random_case(np.random.default_rng(seed)) for seed in range(40)]


@pytest.mark.parametrize("case", CASES, ids=[f"case{k}" for k in range(len(CASES))])
def test_random_layouts_read_and_write_what_numpy_predicts(case):
    from helpers.kernels import blocks_for, flat_kernel

    shape, index, order, broadcast = case
    base = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    array = apply_case(base, index, order, broadcast, np.broadcast_to)
    layout = apply_case(
        StridedLayout.dense(shape, 8), index, order, broadcast, lambda lay, s: lay.broadcast_to(s)
    )
    assert layout.shape == array.shape
    buffer, read_back = device_copy_of(base)
    view = device_view(buffer, layout, np.float64)

    flat = np.full(array.size, -1.0)
    flat_buffer, read_flat = device_copy_of(flat)
    flat_view = device_view(flat_buffer, StridedLayout.dense(flat.shape, 8), np.float64)
    flat_kernel(array.ndim, "read")[blocks_for(array.size)](view, flat_view)
    cuda.synchronize()
    np.testing.assert_array_equal(read_flat(), array.reshape(-1))

    if broadcast:  # a broadcast view aliases elements; writing it is not well defined
        return
    values = -1.0 - np.arange(array.size, dtype=np.float64)
    values_buffer, _ = device_copy_of(values)
    values_view = device_view(values_buffer, StridedLayout.dense(values.shape, 8), np.float64)
    flat_kernel(array.ndim, "write")[blocks_for(array.size)](view, values_view)
    cuda.synchronize()
    expected = base.copy()
    apply_case(expected, index, order, None, None)[...] = values.reshape(array.shape)
    np.testing.assert_array_equal(read_back(), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("offset", [1, 2, 3, 4, 5, 12])
def test_unaligned_views_read_and_write_without_faults(dtype, offset):
    """A view at a pointer that is not a multiple of its dtype's alignment: the kernel
    loads and stores its elements byte-wise (a wide access there faults)."""
    from layoutkit.memory import Buffer

    @layoutkit.cuda.jit
    def negate_into(view, out):
        i = cuda.grid(1)
        if i < view.shape[0]:
            out[i] = view[i]
            view[i] = -view[i]

    dtype = np.dtype(dtype)
    values = (np.arange(37) * 3 - 5).astype(dtype)
    raw = np.zeros(values.nbytes + 32, np.uint8)
    raw[offset : offset + values.nbytes] = values.view(np.uint8)
    buffer, read_back = device_copy_of(raw)
    shifted = Buffer.from_handle(buffer.ptr + offset, values.nbytes, owner=buffer)
    view = StridedMemoryView.from_buffer(shifted, StridedLayout.dense(values.shape, dtype.itemsize), dtype)
    assert (view.ptr % dtype.alignment == 0) == (offset % dtype.alignment == 0)
    out = np.zeros_like(values)
    out_buffer, read_out = device_copy_of(out)
    out_view = device_view(out_buffer, StridedLayout.dense(out.shape, dtype.itemsize), dtype)
    negate_into[1, 64](view, out_view)
    cuda.synchronize()
    np.testing.assert_array_equal(read_out(), values)
    after = read_back()
    np.testing.assert_array_equal(after[offset : offset + values.nbytes].view(dtype), -values)
    assert not after[:offset].any() and not after[offset + values.nbytes :].any()


def test_derived_views_match_numpy():
    from helpers.kernels import derived_views, expected_derived

    base = np.arange(42.0).reshape(6, 7)
    buffer, _ = device_copy_of(base)
    view = device_view(buffer, StridedLayout.dense((6, 7), 8)[1:, 2:], np.float64)
    out = np.zeros(12)
    out_buffer, read_out = device_copy_of(out)
    derived_views[1, 1](view, device_view(out_buffer, StridedLayout.dense((12,), 8), np.float64))
    cuda.synchronize()
    np.testing.assert_array_equal(read_out(), expected_derived(base[1:, 2:], 1 * 7 + 2))


@pytest.mark.parametrize(
    "index", [(slice(None), slice(1, None, 3)), (slice(None, None, -1), slice(1, None, 3))]
)
def test_cupy_arrays_passed_directly(index):
    cupy = pytest.importorskip("cupy")
    from helpers.kernels import scaled_copy

    source = cupy.arange(60, dtype=cupy.float32).reshape(6, 10)[index]
    destination = cupy.zeros((10, 6), dtype=cupy.float32).T[:, :3]
    scaled_copy[(1, 1), (8, 8)](source, destination, 3.0)
    np.testing.assert_array_equal(cupy.asnumpy(destination), cupy.asnumpy(source) * 3)


def test_torch_tensors_passed_directly():
    torch = pytest.importorskip("torch")
    from helpers.kernels import scaled_copy

    source = torch.arange(60, dtype=torch.float32, device="cuda").reshape(6, 10)[:, 1::3]
    destination = torch.zeros((10, 6), dtype=torch.float32, device="cuda").T[:, :3]
    scaled_copy[(1, 1), (8, 8)](source, destination, 3.0)
    torch.cuda.synchronize()
    assert torch.equal(destination.cpu(), source.cpu() * 3)


def test_plain_numba_kernel_with_the_extension():
    from helpers.kernels import scaled_copy_source

    kernel = cuda.jit(scaled_copy_source, extensions=[layoutkit.cuda.extension])
    base = np.arange(20.0).reshape(4, 5)
    buffer, _ = device_copy_of(base)
    source = device_view(buffer, StridedLayout.dense((4, 5), 8)[:, ::-2], np.float64)
    out_buffer, read_out = device_copy_of(np.zeros((4, 3)))
    destination = device_view(out_buffer, StridedLayout.dense((4, 3), 8), np.float64)
    kernel[(1, 1), (8, 8)](source, destination, 2.0)
    cuda.synchronize()
    np.testing.assert_array_equal(read_out(), base[:, ::-2] * 2)


def test_prepared_launch_relaunches_with_new_views():
    from helpers.kernels import scaled_copy

    layout = StridedLayout.dense((8, 8), 4)
    first = np.arange(64, dtype=np.float32).reshape(8, 8)
    second = first[::-1].copy()
    source_a, _ = device_copy_of(first)
    source_b, _ = device_copy_of(second)
    out_buffer, read_out = device_copy_of(np.zeros((8, 8), np.float32))
    out = device_view(out_buffer, layout, np.float32)
    launcher = scaled_copy.prepare(
        (1, 1), (8, 8), device_view(source_a, layout, np.float32), out, 2.0
    )
    launcher(device_view(source_a, layout, np.float32), out, 2.0)
    cuda.synchronize()
    np.testing.assert_array_equal(read_out(), first * 2)
    launcher(device_view(source_b, layout, np.float32), out, -1.0)
    cuda.synchronize()
    np.testing.assert_array_equal(read_out(), -second)
    with pytest.raises(TypeError, match="argument 0: the kernel was prepared for"):
        launcher(
            device_view(source_b, StridedLayout.dense((8, 8), 4)[:, ::2], np.float32), out, 1.0
        )


def test_bounds_checked_kernel_reports_index_error():
    @layoutkit.cuda.jit(boundscheck=True, debug=True, opt=False)
    def read_past_end(view, out):
        out[0] = view[view.shape[0]]

    buffer, _ = device_copy_of(np.arange(4.0))
    view = device_view(buffer, StridedLayout.dense((4,), 8), np.float64)
    with pytest.raises(IndexError, match="view index out of bounds on axis 0"):
        read_past_end[1, 1](view, view)


def test_host_only_view_is_refused_at_launch():
    from helpers.kernels import scaled_copy

    host = StridedMemoryView.from_array_interface(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="argument 0: a host-only view"):
        scaled_copy[1, (2, 2)](host, host, 1.0)


def test_closed_buffer_is_refused_at_launch():
    from helpers.kernels import scaled_copy

    buffer, _ = device_copy_of(np.zeros((2, 2)))
    view = device_view(buffer, StridedLayout.dense((2, 2), 8), np.float64)
    buffer.close()
    with pytest.raises(BufferError, match="argument 0: the view's buffer is closed"):
        scaled_copy[1, (2, 2)](view, view, 1.0)


def test_device_view_is_refused_by_njit():
    from numba import njit

    import layoutkit._numba_view  # noqa: F401  (registers view typing for @njit)

    buffer, _ = device_copy_of(np.zeros(3))
    view = device_view(buffer, StridedLayout.dense((3,), 8), np.float64)

    @njit
    def first(v):
        return v[0]

    with pytest.raises(
        ValueError, match="a device-only view .device_id=0. cannot be passed to @njit"
    ):
        first(view)


def test_view_of_another_device_is_refused():
    if _driver.device_count() < 2:
        pytest.skip("needs two GPUs")
    from helpers.kernels import scaled_copy

    buffer = DeviceMemoryResource(1).allocate(32)
    view = device_view(buffer, StridedLayout.dense((2, 2), 8), np.float64)
    with pytest.raises(ValueError, match="lives on device 1 but the kernel runs on device 0"):
        scaled_copy[1, (2, 2)](view, view, 1.0)


def test_view_kernels_under_compute_sanitizer_memcheck():
    """The random-layout, derived-view and prepared-launch tests, run under memcheck."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        pytest.skip("compute-sanitizer is not on PATH")
    here = Path(__file__).resolve()
    result = subprocess.run(
        [
            sanitizer, "--tool", "memcheck", "--error-exitcode", "3",
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(here),
            "-k", "random_layouts or derived_views or prepared_launch or plain_numba_kernel or unaligned",
        ],
        capture_output=True, text=True, timeout=900, cwd=here.parent.parent,
        env=dict(os.environ),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "ERROR SUMMARY: 0 errors" in result.stdout + result.stderr


def test_debug_kernels_report_the_checks_of_transforms():
    @layoutkit.cuda.jit(debug=True, opt=False)
    def permute(view, first):
        view.permuted((first, 0))

    @layoutkit.cuda.jit(debug=True, opt=False)
    def move(view, layout):
        view.with_layout(layout)

    buffer, _ = device_copy_of(np.zeros((2, 3)))
    view = device_view(buffer, StridedLayout.dense((2, 3), 8), np.float64)
    with pytest.raises(ValueError, match="permuted: repeated axis"):
        permute[1, 1](view, 0)
    with pytest.raises(IndexError, match="permuted: axis out of range"):
        permute[1, 1](view, 5)
    with pytest.raises(ValueError, match="with_layout: the layout reaches past the end"):
        move[1, 1](view, StridedLayout.dense((3, 3), 8))


def test_failed_checks_stop_the_thread_without_debug():
    from helpers.kernels import read_row

    buffer, _ = device_copy_of(np.arange(6.0))
    view = device_view(buffer, StridedLayout.dense((2, 3), 8), np.float64)
    out_buffer, read_out = device_copy_of(np.array([-1.0]))
    out = device_view(out_buffer, StridedLayout.dense((1,), 8), np.float64)
    checked = layoutkit.cuda.jit(boundscheck=True)(read_row.dispatcher.py_func)
    checked[1, 1](view, 99, out)  # no report without debug=True, but no read or write
    cuda.synchronize()
    assert read_out().tolist() == [-1.0]
    checked[1, 1](view, 1, out)
    cuda.synchronize()
    assert read_out().tolist() == [3.0]


def test_layouts_built_in_kernels():
    @layoutkit.cuda.jit
    def build(out, n):
        if cuda.grid(1) == 0:
            a = StridedLayout.dense((n, 3), 4, "F")
            b = StridedLayout((n, 3), (1, n), 4)
            out[0] = (a == b) + 10 * a.volume + 100 * a.strides[1]

    out_buffer, read_out = device_copy_of(np.zeros(1, np.int64))
    build[1, 1](device_view(out_buffer, StridedLayout.dense((1,), 8), np.int64), 5)
    cuda.synchronize()
    assert read_out().tolist() == [1 + 10 * 15 + 100 * 5]
