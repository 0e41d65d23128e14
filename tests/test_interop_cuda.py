"""StridedMemoryView with real GPU producers and consumers: CuPy, torch, JAX (``cuda``-marked).

Every round trip compares metadata (pointer, shape, strides, dtype, device) and the
data element by element on the host, and checks that no copy was made (same pointer).
"""

import numpy as np
import pytest
from helpers.strategies import explicit_strides

from layoutkit import StridedLayout, StridedMemoryView

pytestmark = pytest.mark.cuda


def significant(shape, strides):
    """Strides that matter: those of axes with more than one element (none if empty)."""
    if 0 in shape:
        return ()
    return tuple(s for n, s in zip(shape, strides, strict=True) if n > 1)


def check_view(view, *, ptr, shape, element_strides, dtype, device_id):
    assert view.shape == tuple(shape)
    assert view.strides == view.layout.strides  # None for implicit C, as the layout has it
    assert significant(view.shape, explicit_strides(view.layout)) == significant(
        view.shape, element_strides
    )
    assert view.dtype == dtype
    assert view.is_device_accessible and view.device_id == device_id
    if 0 not in view.shape:
        assert view.ptr == ptr
        layout, buffer = view.layout, view.buffer
        assert view.ptr == buffer.ptr + layout.slice_offset_in_bytes
        assert (layout.max_offset + 1) * layout.itemsize <= buffer.size


# ----------------------------------------------------------------------------- CuPy
@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def cupy_cases(cp):
    base = cp.arange(2 * 3 * 4, dtype=cp.float32).reshape(2, 3, 4)
    return {
        "c_order": base,
        "sliced": base[:, 1:, ::2],
        "transposed": base.transpose(2, 0, 1),
        "broadcast": cp.broadcast_to(cp.arange(4, dtype=cp.float64), (3, 4)),
        "negative": base[::-1, :, ::-2],
        "zero_size": base[:, :0],
        "zero_d": cp.array(3.5),
        "int8": cp.arange(30, dtype=cp.int8)[::-4],
        "complex": (cp.arange(6) * (1 + 2j)).astype(cp.complex64).reshape(2, 3).T,
    }


CUPY_CASES = ["c_order", "sliced", "transposed", "broadcast", "negative", "zero_size", "zero_d",
              "int8", "complex"]  # fmt: skip
CUPY_IMPORTS = ["from_dlpack", "from_cuda_array_interface", "from_any_interface"]


@pytest.mark.parametrize("importer", CUPY_IMPORTS)
@pytest.mark.parametrize("case", CUPY_CASES)
def test_cupy_round_trip(cp, importer, case):
    x = cupy_cases(cp)[case]
    stream = cp.cuda.get_current_stream().ptr
    view = getattr(StridedMemoryView, importer)(x, stream)
    check_view(
        view, ptr=x.data.ptr, shape=x.shape,
        element_strides=tuple(s // x.itemsize for s in x.strides),
        dtype=x.dtype, device_id=x.device.id,
    )  # fmt: skip
    assert view.__dlpack_device__() == (2, x.device.id)
    assert view.readonly == (case == "broadcast")  # aliasing views are read-only (DECISIONS 19)
    if view.readonly:  # CuPy takes no read-only arrays: ask for a writable view explicitly
        view = StridedMemoryView.from_buffer(view.buffer, view.layout, view.dtype, is_readonly=False)
    for out in (cp.from_dlpack(view), cp.asarray(view)):  # DLPack and CAI exports
        assert out.shape == x.shape and out.dtype == x.dtype
        if x.size:
            assert out.data.ptr == x.data.ptr
            assert significant(x.shape, out.strides) == significant(x.shape, x.strides)
        np.testing.assert_array_equal(cp.asnumpy(out), cp.asnumpy(x))


def test_cupy_writes_through_the_view_are_seen(cp):
    x = cp.zeros((4, 5), dtype=cp.int32)
    view = StridedMemoryView.from_dlpack(x[:, ::2], cp.cuda.get_current_stream().ptr)
    cp.from_dlpack(view)[...] = 7
    expected = np.zeros((4, 5), dtype=np.int32)
    expected[:, ::2] = 7
    np.testing.assert_array_equal(cp.asnumpy(x), expected)


def test_cupy_cai_on_another_stream_waits_for_the_producer(cp):
    x = cp.arange(1 << 20, dtype=cp.float32)
    other = cp.cuda.Stream(non_blocking=True)
    view = StridedMemoryView.from_cuda_array_interface(x, other.ptr)
    with other:
        out = cp.asarray(view) * 2
    other.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(1 << 20, dtype=np.float32) * 2)


def test_cupy_stream_rules(cp):
    x = cp.arange(4.0)
    with pytest.raises(BufferError, match="ambiguous for a CUDA tensor"):
        StridedMemoryView.from_dlpack(x, None)
    with pytest.raises(BufferError, match="ambiguous for __cuda_array_interface__"):
        StridedMemoryView.from_cuda_array_interface(x, None)
    assert StridedMemoryView.from_dlpack(x, -1).shape == (4,)


def test_cupy_owner_lifetime(cp):
    """The memory stays allocated exactly as long as a view or a consumer needs it."""
    import gc

    pool = cp.get_default_memory_pool()
    gc.collect()
    before = pool.used_bytes()
    x = cp.arange(1 << 16, dtype=cp.float64)
    allocated = pool.used_bytes() - before
    assert allocated >= x.nbytes
    view = StridedMemoryView.from_dlpack(x, -1)
    out = cp.from_dlpack(view)
    del x, view
    gc.collect()
    assert pool.used_bytes() - before == allocated
    cp.ones(1 << 16)  # reuse of freed memory would show up as wrong values below
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(1 << 16, dtype=np.float64))
    del out
    gc.collect()
    assert pool.used_bytes() == before


# ----------------------------------------------------------------------------- torch
@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA support here")
    return torch


def torch_cases(torch):
    base = torch.arange(2 * 3 * 4, dtype=torch.float32, device="cuda").reshape(2, 3, 4)
    return {
        "c_order": base,
        "sliced": base[:, 1:, ::2],
        "transposed": base.permute(2, 0, 1),
        "broadcast": torch.arange(4.0, device="cuda").expand(3, 4),
        "zero_size": base[:, :0],
        "zero_d": torch.tensor(3.5, device="cuda"),
        "int16": torch.arange(12, dtype=torch.int16, device="cuda").reshape(3, 4).t(),
        "bool": torch.tensor([True, False, True], device="cuda"),
    }


TORCH_CASES = ["c_order", "sliced", "transposed", "broadcast", "zero_size", "zero_d", "int16",
               "bool"]  # fmt: skip
TORCH_DTYPES = {"float32": np.float32, "int16": np.int16, "bool": np.bool_}


@pytest.mark.parametrize("importer", CUPY_IMPORTS)
@pytest.mark.parametrize("case", TORCH_CASES)
def test_torch_round_trip(torch, importer, case):
    t = torch_cases(torch)[case]
    stream = torch.cuda.current_stream().cuda_stream
    view = getattr(StridedMemoryView, importer)(t, stream)
    check_view(
        view, ptr=t.data_ptr(), shape=tuple(t.shape), element_strides=t.stride(),
        dtype=np.dtype(TORCH_DTYPES[str(t.dtype).removeprefix("torch.")]),
        device_id=t.device.index,
    )  # fmt: skip
    assert view.exporting_obj is t
    assert view.readonly == (case == "broadcast")
    if view.readonly:
        view = StridedMemoryView.from_buffer(view.buffer, view.layout, view.dtype, is_readonly=False)
    outputs = [torch.from_dlpack(view), torch.as_tensor(view, device="cuda")]
    for out in outputs:
        assert tuple(out.shape) == tuple(t.shape) and out.dtype == t.dtype
        if t.numel():
            assert out.data_ptr() == t.data_ptr()
            assert significant(tuple(t.shape), out.stride()) == significant(
                tuple(t.shape), t.stride()
            )
        assert torch.equal(out.cpu(), t.cpu())


def test_torch_bfloat16(torch):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    t = torch.arange(12, dtype=torch.bfloat16, device="cuda").reshape(3, 4)[:, 1::2]
    view = StridedMemoryView.from_dlpack(t, torch.cuda.current_stream().cuda_stream)
    assert view.dtype == np.dtype(ml_dtypes.bfloat16)
    out = torch.from_dlpack(view)
    assert out.dtype == torch.bfloat16 and out.data_ptr() == t.data_ptr()
    assert torch.equal(out.cpu(), t.cpu())


def test_torch_writes_through_cupy(torch, cp):
    t = torch.zeros(6, device="cuda")
    view = StridedMemoryView.from_dlpack(t[::2], torch.cuda.current_stream().cuda_stream)
    cp.from_dlpack(view)[...] = 5
    torch.cuda.synchronize()
    assert t.cpu().tolist() == [5, 0, 5, 0, 5, 0]


# ----------------------------------------------------------------------------- JAX
@pytest.fixture(scope="module")
def jax():
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX has no GPU backend here")
    return jax


JAX_SHAPES = [(2, 3, 4), (0, 3), (), (7,)]


@pytest.mark.parametrize("shape", JAX_SHAPES, ids=str)
def test_jax_round_trip(jax, shape):
    import jax.numpy as jnp

    x = jnp.arange(int(np.prod(shape)), dtype=jnp.float32).reshape(shape)
    x.block_until_ready()
    view = StridedMemoryView.from_dlpack(x, 1)  # 1: the legacy default stream
    device_id = x.devices().pop().id
    check_view(
        view, ptr=x.unsafe_buffer_pointer(), shape=shape,
        element_strides=StridedLayout.dense(shape, 4).strides, dtype=np.float32,
        device_id=device_id,
    )  # fmt: skip
    # JAX arrays are immutable: the view is read-only, and still goes back to JAX in the
    # legacy capsule JAX asks for, as JAX gave its memory out
    assert view.readonly
    out = jax.dlpack.from_dlpack(view)
    assert out.shape == shape and out.dtype == jnp.float32
    if x.size:
        assert out.unsafe_buffer_pointer() == x.unsafe_buffer_pointer()
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x))


def test_jax_reads_a_cupy_slice_through_a_view(jax, cp):
    x = cp.arange(4 * 64, dtype=cp.float32).reshape(4, 64)  # rows of 256 bytes: aligned
    view = StridedMemoryView.from_dlpack(x[2:4], cp.cuda.get_current_stream().ptr)
    out = jax.dlpack.from_dlpack(view)
    np.testing.assert_array_equal(np.asarray(out), cp.asnumpy(x[2:4]))


# ----------------------------------------------------------------------------- own memory
def test_device_buffer_view_exports_to_cupy_and_copies(cp):
    """The example users try first, and DECISIONS 17 on the GPU."""
    from layoutkit import Device

    host = np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2]
    src = StridedMemoryView.from_dlpack(host, -1)
    dense = src.layout.to_dense()
    device = Device(0)
    device.set_current()
    buffer = device.allocate(dense.required_size_in_bytes())
    dst = StridedMemoryView.from_buffer(buffer, dense, src.dtype)
    assert dst.is_device_accessible and dst.device_id == 0
    assert dst.__dlpack_device__() == (2, 0)
    dst.copy_from(src)
    device.sync()
    np.testing.assert_array_equal(cp.asnumpy(cp.from_dlpack(dst)), host)
    back = np.zeros_like(host)
    dst.copy_to(StridedMemoryView.from_dlpack(back, -1))
    device.sync()
    np.testing.assert_array_equal(back, host)


def test_pinned_buffer_view_has_both_interfaces(cp):
    from layoutkit import PinnedMemoryResource

    buffer = PinnedMemoryResource().allocate(64)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((8,), 8), np.int64)
    assert view.__dlpack_device__() == (3, 0)
    host = np.asarray(view)
    host[...] = np.arange(8)
    np.testing.assert_array_equal(np.from_dlpack(view), np.arange(8))
    np.testing.assert_array_equal(cp.asnumpy(cp.asarray(view)), np.arange(8))


def test_cuda_array_interface_export_fields(cp):
    x = cp.arange(12, dtype=cp.int32).reshape(3, 4)[::-1, 1:]
    view = StridedMemoryView.from_dlpack(x, -1)
    cai = view.__cuda_array_interface__
    assert cai["version"] == 3 and cai["stream"] is None
    assert cai["data"] == (x.data.ptr, False)
    assert cai["strides"] == x.strides and cai["shape"] == x.shape and cai["typestr"] == "<i4"
    assert not hasattr(view, "__array_interface__")


# ----------------------------------------------------------------------------- stream ordering
SPIN_SOURCE = r"""
extern "C" __global__ void spin_then_fill(float* x, int n, long long cycles, float value) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = value;
}
"""
SPIN_CYCLES = 200_000_000  # ~0.1 s on an H200: far longer than a copy takes to start


def test_cupy_producer_on_a_side_stream_is_ordered_before_a_copy_on_another(cp):
    """DLPack (CuPy fast path) and CAI: a producer kernel on a side stream, a layoutkit copy
    on another stream: the copy sees the data (an event recorded and waited on)."""
    import layoutkit

    spin = cp.RawKernel(SPIN_SOURCE, "spin_then_fill")
    n = 1 << 16
    side = cp.cuda.Stream(non_blocking=True)
    consumer = cp.cuda.Stream(non_blocking=True)
    for importer in ("from_dlpack", "from_any_interface", "from_cuda_array_interface"):
        x = cp.zeros(n, dtype=cp.float32)
        cp.cuda.Device().synchronize()
        with side:
            spin(((n + 255) // 256,), (256,), (x, np.int32(n), np.int64(SPIN_CYCLES), np.float32(3)))
            view = getattr(StridedMemoryView, importer)(x, consumer.ptr)
        host = np.zeros(n, dtype=np.float32)
        layoutkit.copy(host, view, stream=consumer.ptr)
        consumer.synchronize()
        assert (host == 3).all(), importer


def test_torch_producer_on_a_side_stream_is_ordered_before_a_copy_on_another(torch):
    """The exchange API does not synchronise: current_work_stream is ordered before ours."""
    import layoutkit

    side = torch.cuda.Stream()
    consumer = torch.cuda.Stream()
    for importer in ("from_dlpack", "from_any_interface"):
        x = torch.zeros(1 << 16, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(SPIN_CYCLES)
            x.fill_(5.0)
            view = getattr(StridedMemoryView, importer)(x, consumer.cuda_stream)
        host = np.zeros(1 << 16, dtype=np.float32)
        layoutkit.copy(host, view, stream=consumer.cuda_stream)
        torch.cuda.synchronize()
        assert (host == 5).all(), importer


def test_torch_goes_through_the_exchange_api_on_the_gpu(torch, monkeypatch):
    from layoutkit.interop import fastpaths

    assert fastpaths.reader_for(torch.Tensor).__name__ == "_torch"

    def forbidden(*args, **kwargs):
        raise AssertionError("__dlpack__ was called")

    monkeypatch.setattr(torch.Tensor, "__dlpack__", forbidden)
    t = torch.arange(12.0, device="cuda").reshape(3, 4)[:, 1::2]
    view = StridedMemoryView.from_dlpack(t, torch.cuda.current_stream().cuda_stream)
    assert view.ptr == t.data_ptr() and view.strides == (4, 2) and view.device_id == 0


# ----------------------------------------------------------------------------- kernel arguments
def _scale_kernel():
    from numba import cuda

    import layoutkit.cuda

    @layoutkit.cuda.jit
    def scale(src, dst, factor):
        i = cuda.grid(1)
        if i < dst.shape[0]:
            dst[i] = src[i] * factor

    return scale


def test_kernels_take_torch_tensors_and_cupy_arrays(torch, cp):
    """Arguments read through the fast import table; results as with views."""
    scale = _scale_kernel()
    src = torch.arange(64.0, device="cuda")[::2]
    dst = torch.zeros(32, device="cuda")
    scale[1, 32](src, dst, 3.0)
    torch.cuda.synchronize()
    assert torch.equal(dst.cpu(), src.cpu() * 3)
    x = cp.arange(32, dtype=cp.float32)
    y = cp.zeros(32, dtype=cp.float32)
    scale[1, 32](x, y, 2.0)
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(y), np.arange(32, dtype=np.float32) * 2)
    mixed = torch.zeros(32, device="cuda")
    scale[1, 32](x, mixed, 1.0)  # CuPy in, torch out
    torch.cuda.synchronize()
    np.testing.assert_array_equal(mixed.cpu().numpy(), np.arange(32, dtype=np.float32))
    with pytest.raises(ValueError, match="host-only tensor"):
        scale[1, 32](torch.ones(32), dst, 1.0)


def test_kernel_on_a_stream_waits_for_the_torch_producer_stream(torch):
    scale = _scale_kernel()
    side = torch.cuda.Stream()
    launch = torch.cuda.Stream()
    src = torch.zeros(1 << 12, device="cuda")
    dst = torch.zeros(1 << 12, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):  # torch's current stream is the producer's, as DLPack has it
        torch.cuda._sleep(SPIN_CYCLES)
        src.fill_(2.0)
        scale[(1 << 12) // 256, 256, launch.cuda_stream](src, dst, 4.0)
    torch.cuda.synchronize()
    assert (dst.cpu() == 8.0).all()


# ----------------------------------------------------------------------------- use after close
def test_device_views_of_closed_buffers_refuse_copies_and_launches(cp):
    import layoutkit
    from layoutkit import Device

    device = Device(0)
    device.set_current()
    buffer = device.allocate(256)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((64,), 4), np.float32)
    view.copy_from(np.ones(64, np.float32))
    view.device_id, repr(view)  # noqa: B018  (used: everything cached)
    scale = _scale_kernel()
    scale[1, 64](view, view, 1.0)
    device.sync()
    buffer.close()
    with pytest.raises(BufferError, match="closed"):
        view.copy_from(np.zeros(64, np.float32))
    with pytest.raises(BufferError, match="closed"):
        layoutkit.copy(np.zeros(64, np.float32), view)
    with pytest.raises(BufferError, match="closed"):
        scale[1, 64](view, view, 1.0)
    with pytest.raises(BufferError, match="closed"):
        cp.from_dlpack(view)
