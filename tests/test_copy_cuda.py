"""Copies with device memory on a real GPU, checked byte for byte against ``np.copyto``.

Each side of a case is a NumPy byte buffer mirrored into host, pinned or device memory
(whole-buffer ``cuMemcpy``), so bytes outside the destination view are checked too.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.copy_cases import (
    copy_cases,
    expected_bytes,
    host_view,
    mirrored_view,
    numpy_pair,
    small_specs,
)
from hypothesis import given, settings

from layoutkit import _driver
from layoutkit.copy import copy
from layoutkit.layout import StridedLayout

pytestmark = pytest.mark.cuda

HERE = Path(__file__).resolve().parent

KINDS = ("host", "pinned", "device")
PAIRS = [(d, s) for d in KINDS for s in KINDS if "device" in (d, s) or "pinned" in (d, s)]


class Memory:
    """``host`` bytes copied into memory of ``kind`` ("host", "pinned" or "device")."""

    def __init__(self, kind, host):
        self.kind = kind
        self.host = host
        if kind == "host":
            self.ptr = host.ctypes.data
        elif kind == "pinned":
            _driver.ensure_context()
            self.ptr = _driver.mem_host_alloc(max(host.nbytes, 1))
        else:
            _driver.ensure_context()
            self.ptr = _driver.mem_alloc(max(host.nbytes, 1))
        if kind != "host":
            _driver.memcpy(self.ptr, host.ctypes.data, host.nbytes)

    def view(self, array):
        if self.kind == "host":
            return host_view(array)
        return mirrored_view(self.ptr, array, self.host)

    def read(self):
        if self.kind == "host":
            return self.host.copy()
        _driver.synchronize_device(0)
        out = np.empty_like(self.host)
        _driver.memcpy(out.ctypes.data, self.ptr, out.nbytes)
        return out

    def free(self):
        if self.kind == "pinned":
            _driver.mem_free_host(self.ptr)
        elif self.kind == "device":
            _driver.mem_free(self.ptr)


def check_case(case, dst_kind, src_kind):
    dst_buffer, dst, src_buffer, src = case
    expected = expected_bytes(dst_buffer, dst, src)
    dst_memory = Memory(dst_kind, dst_buffer)
    src_memory = Memory(src_kind, src_buffer)
    try:
        copy(dst_memory.view(dst), src_memory.view(src))
        np.testing.assert_array_equal(dst_memory.read(), expected)
        np.testing.assert_array_equal(src_memory.read(), src_buffer)
    finally:
        dst_memory.free()
        src_memory.free()


@pytest.mark.parametrize(("dst_kind", "src_kind"), PAIRS)
@settings(max_examples=60, deadline=None)
@given(case=copy_cases())
def test_random_layouts(dst_kind, src_kind, case):
    check_case(case, dst_kind, src_kind)


#: Cases of the random-layout benchmark's generator, at test sizes.
GENERATOR_SPECS = small_specs(11, 120, (256, 1 << 20))


@pytest.mark.parametrize(("dst_kind", "src_kind"), PAIRS)
def test_generator_layouts(dst_kind, src_kind):
    count = len(GENERATOR_SPECS) if (dst_kind, src_kind) == ("device", "device") else 30
    for seed, spec in enumerate(GENERATOR_SPECS[:count]):
        check_case(numpy_pair(spec, seed, misalign=seed % 3 * 4), dst_kind, src_kind)


def _named(itemsize, make, shape=(67, 45)):
    rng = np.random.default_rng(itemsize)
    dtype = np.dtype((np.void, itemsize))
    base = np.frombuffer(rng.bytes(int(np.prod(shape)) * itemsize), dtype).reshape(shape)
    src_buffer = base.view(np.uint8).reshape(-1).copy()
    src = np.ndarray(shape, dtype, src_buffer)
    src = make(src)
    assert src.size == 0 or np.shares_memory(src, src_buffer)  # a view, never a copy
    dst_buffer = np.zeros(src.size * itemsize + 32, np.uint8)
    dst = np.ndarray(src.shape, dtype, dst_buffer, 16)
    return dst_buffer, dst, src_buffer, src


LAYOUTS = {
    "transpose": lambda a: a.T,
    "reverse-step": lambda a: a[::-1, ::2],
    "broadcast-row": lambda a: np.broadcast_to(a[3], (70, a.shape[1])),
    "broadcast-column": lambda a: np.broadcast_to(a[:, 3:4], (a.shape[0], 40)),
    "contiguous": lambda a: a,
    "3d-permute": lambda a: a[:6, :44].reshape(6, 11, 4, 1).transpose(2, 0, 3, 1),
    "short-rows": lambda a: a[:, 5:8],  # 3-element rows 45 apart: gather
    "0-d": lambda a: a[5, 7, ...],
    "empty": lambda a: a[:0],
}


@pytest.mark.parametrize("itemsize", [1, 2, 3, 4, 8, 12, 16])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize(("dst_kind", "src_kind"), [("device", "device"), ("device", "host"),
                                                    ("host", "device")])  # fmt: skip
def test_named_layouts(itemsize, layout, dst_kind, src_kind):
    check_case(_named(itemsize, LAYOUTS[layout]), dst_kind, src_kind)


def test_large_transposes_and_odd_extents():
    for itemsize, shape in [
        (4, (1025, 2047)),
        (1, (2049, 3001)),
        (2, (513, 4097)),
        (16, (300, 701)),
        (1, (1032, 2056)),  # 8 x 8 blocks: the register-block kernel, edge tiles included
        (2, (520, 4104)),
    ]:
        check_case(_named(itemsize, lambda a: a.T, shape), "device", "device")
    nchw_to_nhwc = _named(2, lambda a: a.transpose(0, 2, 3, 1), (3, 64, 16, 24))
    check_case(nchw_to_nhwc, "device", "device")


def test_stream_argument_orders_the_copy():
    cuda = pytest.importorskip("numba.cuda")
    stream = cuda.stream()
    case = _named(4, lambda a: a.T, (301, 257))
    dst_buffer, dst, src_buffer, src = case
    expected = expected_bytes(dst_buffer, dst, src)
    dst_memory, src_memory = Memory("device", dst_buffer), Memory("device", src_buffer)
    copy(dst_memory.view(dst), src_memory.view(src), stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(dst_memory.read(), expected)
    dst_memory.free()
    src_memory.free()


def test_strided_memory_view_end_to_end():
    from layoutkit import Device, StridedMemoryView

    host = np.arange(12 * 10, dtype=np.float32).reshape(12, 10)
    device = Device(0)
    device.set_current()
    layout = StridedLayout.dense((10, 12), 4)
    buffer = device.allocate(layout.required_size_in_bytes())
    on_device = StridedMemoryView.from_buffer(buffer, layout, np.float32)
    on_device.copy_from(StridedMemoryView.from_array_interface(host.T))
    back = np.zeros((10, 12), np.float32)
    on_device.copy_to(StridedMemoryView.from_array_interface(back))
    np.testing.assert_array_equal(back, host.T)


SANITIZED = """
import sys
sys.path[:0] = {paths!r}
from helpers.copy_cases import numpy_pair, small_specs
from test_copy_cuda import LAYOUTS, _named, check_case
for itemsize in (1, 2, 4, 8, 16, 3):
    for layout in ("transpose", "reverse-step", "broadcast-row", "broadcast-column", "3d-permute"):
        for dst_kind, src_kind in (("device", "device"), ("host", "device"), ("device", "host")):
            check_case(_named(itemsize, LAYOUTS[layout], (37, 45)), dst_kind, src_kind)
for itemsize in (1, 2):  # the block kernel: squares with edges, a deinterleave
    check_case(_named(itemsize, lambda a: a.T, (40, 75)), "device", "device")
    check_case(_named(itemsize, lambda a: a.reshape(13, 5, 3).transpose(2, 0, 1), (13, 15)),
               "device", "device")
for seed, spec in enumerate(small_specs(5, 40, (256, 65536))):
    check_case(numpy_pair(spec, seed, misalign=seed % 3 * 4), "device", "device")
    if seed % 4 == 0:
        check_case(numpy_pair(spec, seed), "device", "host")
        check_case(numpy_pair(spec, seed), "host", "device")
print("sanitized copies ok")
"""


def test_compute_sanitizer_memcheck():
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        pytest.skip("compute-sanitizer is not on PATH")
    script = SANITIZED.format(paths=[str(HERE), str(HERE.parent)])
    result = subprocess.run(
        [sanitizer, "--tool", "memcheck", "--error-exitcode", "3", sys.executable, "-c", script],
        capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "sanitized copies ok" in result.stdout


# ----------------------------------------------------------------------------- graphs
def _graph_case():
    """A uint8 transpose planned as blocks and an edge (two launches), and its buffers."""
    return _named(1, lambda a: a[:, :1029].T, (1040, 1032))


def _fresh_source(memory, array, round_):
    """New bytes in the source buffer (as before the replay), returned as NumPy."""
    rng = np.random.default_rng(100 + round_)
    memory.host[...] = rng.integers(0, 256, memory.host.size, dtype=np.uint8)
    _driver.memcpy(memory.ptr, memory.host.ctypes.data, memory.host.nbytes)
    return array


def _replay_three_times(capture, replay):
    """Capture a device copy, then replay it three times after new source data."""
    dst_buffer, dst, src_buffer, src = _graph_case()
    dst_memory, src_memory = Memory("device", dst_buffer), Memory("device", src_buffer)
    try:
        copy(dst_memory.view(dst), src_memory.view(src))  # compiles the kernels
        graph = capture(lambda stream: copy(dst_memory.view(dst), src_memory.view(src),
                                            stream=stream))  # fmt: skip
        for round_ in range(3):
            _fresh_source(src_memory, src, round_)
            replay(graph)
            np.testing.assert_array_equal(dst_memory.read(), expected_bytes(dst_buffer, dst, src))
    finally:
        dst_memory.free()
        src_memory.free()


def _cu(result):
    """The value of a cuda-bindings driver call, which must have succeeded."""
    from cuda.bindings import driver as cu

    assert result[0] == cu.CUresult.CUDA_SUCCESS, result[0]
    return result[1] if len(result) == 2 else None


def _capturing_stream():
    from cuda.bindings import driver as cu

    _driver.ensure_context()
    return _cu(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))


def test_graph_capture_with_the_driver():
    from cuda.bindings import driver as cu

    stream = _capturing_stream()

    def capture(queue):
        _cu(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL))
        queue(int(stream))
        graph = _cu(cu.cuStreamEndCapture(stream))
        return _cu(cu.cuGraphInstantiate(graph, 0))

    def replay(executable):
        _cu(cu.cuGraphLaunch(executable, stream))
        _cu(cu.cuStreamSynchronize(stream))

    _replay_three_times(capture, replay)


def test_graph_capture_with_torch():
    torch = pytest.importorskip("torch")

    def capture(queue):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            queue(torch.cuda.current_stream().cuda_stream)
        return graph

    def replay(graph):
        graph.replay()
        torch.cuda.synchronize()

    _replay_three_times(capture, replay)


def test_graph_capture_with_cupy():
    cp = pytest.importorskip("cupy")
    stream = cp.cuda.Stream(non_blocking=True)

    def capture(queue):
        with stream:
            stream.begin_capture()
            queue(stream.ptr)
            return stream.end_capture()

    def replay(graph):
        graph.launch(stream)
        stream.synchronize()

    _replay_three_times(capture, replay)


def test_staged_copy_during_capture_raises_and_keeps_the_capture():
    from cuda.bindings import driver as cu

    stream = _capturing_stream()
    dst_buffer, dst, src_buffer, src = _named(4, lambda a: a.T, (64, 48))
    dst_memory = Memory("device", dst_buffer)
    try:
        _cu(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL))
        with pytest.raises(RuntimeError, match="cannot be captured"):
            copy(dst_memory.view(dst), Memory("host", src_buffer).view(src), stream=int(stream))
        assert _cu(cu.cuStreamEndCapture(stream)) is not None  # the capture is still valid
    finally:
        dst_memory.free()
