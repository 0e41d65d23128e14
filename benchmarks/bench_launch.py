"""Kernel launch overhead and bandwidth: views vs numba-cuda DeviceNDArrays and CuPy arrays.

Run on a machine with a GPU: ``python benchmarks/bench_launch.py``. Prints one table:
operation, our figure, the anchor's figure measured in the same process, and the ratio
ours / anchor (for launch times below 1 is faster; for bandwidth above 1 is faster).
CuPy arrays and torch tensors as kernel arguments are measured against the same launch
with prepared views (the target: within 2 us of it).
"""

import time

import numpy as np
from numba import cuda

import layoutkit.cuda
from layoutkit.layout import StridedLayout
from layoutkit.memory import DeviceMemoryResource
from layoutkit.memoryview import StridedMemoryView

LAUNCHES = 2000


def touch1(a):
    if cuda.grid(1) == 1 << 30:
        a[0, 0] = 0


def touch4(a, b, c, d):
    if cuda.grid(1) == 1 << 30:
        a[0, 0] = b[0, 0] + c[0, 0] + d[0, 0]


def scaled_copy(source, destination, factor):
    x, y = cuda.grid(2)
    if y < destination.shape[0] and x < destination.shape[1]:
        destination[y, x] = source[y, x] * factor


def launch_time_us(launch, *args):
    """Mean host time of one launch in microseconds (after warm-up, synchronised)."""
    for _ in range(20):
        launch(*args)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(LAUNCHES):
        launch(*args)
    cuda.synchronize()
    return (time.perf_counter() - start) / LAUNCHES * 1e6


def kernel_time_ms(launch, *args, repeats=5, back_to_back=8):
    """Device time of one launch in milliseconds, from CUDA events (best of ``repeats``).

    Each measurement spans ``back_to_back`` launches, so host launch overhead hides behind
    the previous kernel and only device time counts.
    """
    launch(*args)
    best = float("inf")
    for _ in range(repeats):
        start, stop = cuda.event(), cuda.event()
        start.record()
        for _ in range(back_to_back):
            launch(*args)
        stop.record()
        stop.synchronize()
        best = min(best, cuda.event_elapsed_time(start, stop) / back_to_back)
    return best


def device_view(shape, dtype=np.float32, keep=None):
    itemsize = np.dtype(dtype).itemsize
    layout = StridedLayout.dense(shape, itemsize)
    buffer = DeviceMemoryResource(0).allocate(max(layout.required_size_in_bytes(), 1))
    if keep is not None:
        keep.append(buffer)
    return StridedMemoryView.from_buffer(buffer, layout, np.dtype(dtype))


def launch_rows():
    keep = []
    views = [device_view((4, 4), keep=keep) for _ in range(4)]
    arrays = [cuda.device_array((4, 4), np.float32) for _ in range(4)]
    kernels = {
        "numba": (cuda.jit(touch1), cuda.jit(touch4)),
        "ours": (layoutkit.cuda.jit(touch1), layoutkit.cuda.jit(touch4)),
        "extension": (
            cuda.jit(touch1, extensions=[layoutkit.cuda.extension]),
            cuda.jit(touch4, extensions=[layoutkit.cuda.extension]),
        ),
    }

    def each_launch(kernel):
        return lambda *args: kernel[1, 1](*args)

    def measure(name, arguments):
        one, four = kernels[name]
        return (
            launch_time_us(each_launch(one), arguments[0]),
            launch_time_us(each_launch(four), *arguments),
        )

    anchor = measure("numba", arrays)
    rows = []

    def add(label, figures, anchor_name, anchor_figures):
        for count, ours, reference in zip((1, 4), figures, anchor_figures, strict=True):
            rows.append((f"launch, {count} x {label}", ours, "us", anchor_name, reference))

    add("view, layoutkit.cuda.jit", measure("ours", views), "DeviceNDArray", anchor)
    layoutkit.cuda.ViewKernel.direct_launch = False
    add("view, jit via numba launch", measure("ours", views), "DeviceNDArray", anchor)
    layoutkit.cuda.ViewKernel.direct_launch = True
    add("view, cuda.jit(extensions=)", measure("extension", views), "DeviceNDArray", anchor)
    one, four = kernels["ours"]
    prepared = (one.prepare(1, 1, views[0]), four.prepare(1, 1, *views))
    prepared_figures = (launch_time_us(prepared[0], views[0]), launch_time_us(prepared[1], *views))
    add("view, prepared", prepared_figures, "DeviceNDArray", anchor)
    # producer arguments: read through the fast import table at every launch; the target
    # is within 2 us of the same launch with prepared views
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        cupy_arrays = [cupy.zeros((4, 4), cupy.float32) for _ in range(4)]
        add("CuPy array, layoutkit.cuda.jit", measure("ours", cupy_arrays), "prepared view",
            prepared_figures)  # fmt: skip
        add("CuPy array, numba.cuda.jit", measure("numba", cupy_arrays), "prepared view",
            prepared_figures)  # fmt: skip
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        tensors = [torch.zeros((4, 4), device="cuda") for _ in range(4)]
        add("torch tensor, layoutkit.cuda.jit", measure("ours", tensors), "prepared view",
            prepared_figures)  # fmt: skip
        add("torch tensor, numba.cuda.jit", measure("numba", tensors), "prepared view",
            prepared_figures)  # fmt: skip
    return rows


def bandwidth_rows():
    rows = []
    rows_count, columns = 8192, 8192  # 256 MiB of float32 per contiguous array
    numba_kernel = cuda.jit(scaled_copy)
    our_kernel = layoutkit.cuda.jit(scaled_copy)
    block = (32, 8)
    for name, columns_used, step in (
        ("contiguous", columns, 1),
        ("strided (every 2nd column)", columns // 2, 2),
    ):
        source_array = cuda.device_array((rows_count, columns), np.float32)[:, ::step]
        destination_array = cuda.device_array((rows_count, columns), np.float32)[:, ::step]
        keep = []
        source_view = device_view((rows_count, columns), keep=keep)
        destination_view = device_view((rows_count, columns), keep=keep)
        if step != 1:
            layout = StridedLayout.dense((rows_count, columns), 4)[:, ::step]
            source_view = source_view.view(layout)
            destination_view = destination_view.view(layout)
        grid = ((columns_used + block[0] - 1) // block[0], (rows_count + block[1] - 1) // block[1])
        moved = 2 * rows_count * columns_used * 4
        ours_ms = kernel_time_ms(our_kernel[grid, block], source_view, destination_view, 2.0)
        anchor_ms = kernel_time_ms(numba_kernel[grid, block], source_array, destination_array, 2.0)
        rows.append(
            (
                f"scaled copy, {name}",
                moved / ours_ms / 1e6,
                "GB/s",
                "DeviceNDArray",
                moved / anchor_ms / 1e6,
            )
        )
    return rows


def main():
    rows = launch_rows() + bandwidth_rows()
    print(f"{'operation':46s} {'ours':>10s} {'anchor':>24s} {'ratio':>7s}")
    for operation, ours, unit, anchor_name, anchor in rows:
        print(
            f"{operation:46s} {ours:7.2f} {unit:4s} {anchor_name + ' ' + format(anchor, '.2f'):>22s} {ours / anchor:7.3f}"
        )


if __name__ == "__main__":
    main()
