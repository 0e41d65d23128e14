"""Kernels over views under numba-cuda's simulator, checked against NumPy.

The simulator only starts in a fresh process with ``NUMBA_ENABLE_CUDASIM=1``:
``test_simulator_suite`` runs this file in such a process, where the other tests run.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
in_simulator = pytest.mark.skipif(
    not SIMULATED, reason="runs in the simulator process started by test_simulator_suite"
)


@pytest.mark.skipif(SIMULATED, reason="this is the simulator process")
def test_simulator_suite():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "skipped" in result.stdout


def host_view(array):
    from layoutkit.memoryview import StridedMemoryView

    return StridedMemoryView.from_array_interface(array)


@in_simulator
def test_kernels_run_in_the_simulator():
    import layoutkit.cuda

    assert layoutkit.cuda.simulator_enabled()


@in_simulator
@pytest.mark.parametrize(
    "make_source",
    [
        lambda base: base,
        lambda base: base[::-1, 1::2],
        lambda base: base.T[1:, ::-1],
        lambda base: np.broadcast_to(base[0], (5, 6)),
    ],
    ids=["contiguous", "negative-step", "transposed", "broadcast"],
)
def test_scaled_copy(make_source):
    from helpers.kernels import scaled_copy

    source = make_source(np.arange(30.0).reshape(5, 6))
    destination = np.zeros(source.shape)
    scaled_copy[(2, 2), (4, 4)](host_view(source), host_view(destination), 2.0)
    np.testing.assert_array_equal(destination, source * 2.0)


@in_simulator
def test_scaled_copy_into_a_strided_destination():
    from helpers.kernels import scaled_copy

    source = np.arange(12.0).reshape(3, 4)
    base = np.zeros((6, 9))
    destination = base[::2, 8:0:-2]
    scaled_copy[(1, 1), (4, 4)](host_view(source), host_view(destination), -1.0)
    expected = np.zeros((6, 9))
    expected[::2, 8:0:-2] = -source
    np.testing.assert_array_equal(base, expected)


@in_simulator
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_scaled_copy_between_unaligned_views(dtype):
    from helpers.kernels import scaled_copy

    def unaligned(shape, offset):
        count = int(np.prod(shape)) * np.dtype(dtype).itemsize
        raw = np.zeros(count + 64, np.uint8)
        start = -raw.ctypes.data % 16 + offset
        return raw[start : start + count].view(dtype).reshape(shape)

    source, destination = unaligned((3, 4), 1), unaligned((3, 4), 3)
    source[...] = np.arange(12).reshape(3, 4) - 5.5
    assert not source.flags.aligned and not destination.flags.aligned
    scaled_copy[(1, 1), (4, 4)](host_view(source), host_view(destination), 2.0)
    np.testing.assert_array_equal(destination, source * 2.0)


@in_simulator
def test_derived_views_and_attributes():
    from helpers.kernels import derived_views, expected_derived

    from layoutkit.layout import StridedLayout

    base = np.arange(42.0).reshape(6, 7)
    view = host_view(base).view(StridedLayout.dense((6, 7), 8)[1:, 2:])
    out = np.zeros(12)
    derived_views[1, 1](view, host_view(out))
    np.testing.assert_array_equal(out, expected_derived(base[1:, 2:], view.layout.slice_offset))


@in_simulator
def test_store_into_read_only_view_fails():
    from helpers.kernels import store_into

    array = np.zeros(3)
    array.setflags(write=False)
    with pytest.raises(TypeError, match="the view is read-only"):
        store_into[1, 1](host_view(array))


@in_simulator
@pytest.mark.parametrize(
    ("shape", "index", "order"),
    [
        ((), (), ()),
        ((0, 3), (slice(None), slice(None, None, -1)), (1, 0)),
        ((4,), (slice(None, None, -3),), (0,)),
        ((3, 1, 4), (slice(1, None), slice(None), slice(None, None, 2)), (2, 0, 1)),
        ((2, 2, 2, 2, 2, 2, 2, 2), (slice(None, None, -1),) * 8, (7, 6, 5, 4, 3, 2, 1, 0)),
    ],
)
def test_reads_and_writes_match_numpy(shape, index, order):
    from helpers.kernels import blocks_for, flat_kernel

    base = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    array = base[(*index, ...)].transpose(order)
    flat = np.full(array.size, -1.0)
    flat_kernel(array.ndim, "read")[blocks_for(array.size)](host_view(array), host_view(flat))
    np.testing.assert_array_equal(flat, array.reshape(-1))

    values = -1.0 - np.arange(array.size, dtype=np.float64)
    expected = base.copy()
    expected[(*index, ...)].transpose(order)[...] = values.reshape(array.shape)
    flat_kernel(array.ndim, "write")[blocks_for(array.size)](host_view(array), host_view(values))
    np.testing.assert_array_equal(base, expected)


@in_simulator
def test_checks_of_transforms_raise_in_simulated_kernels():
    from helpers.kernels import move_to, permute_first, read_row

    from layoutkit import AxisError
    from layoutkit.layout import StridedLayout

    view = host_view(np.zeros((2, 3)))
    out = host_view(np.zeros(1))
    # permuted is the Python layout's own, with its messages
    with pytest.raises(ValueError) as repeated:
        permute_first[1, 1](view, 0)
    assert not isinstance(repeated.value, AxisError)
    with pytest.raises(AxisError):
        permute_first[1, 1](view, 5)
    with pytest.raises(ValueError, match="with_layout: the layout reaches past the end"):
        move_to[1, 1](view, StridedLayout.dense((3, 3), 8))
    with pytest.raises(ValueError, match="with_layout: the layout's itemsize differs"):
        move_to[1, 1](view, StridedLayout.dense((2, 3), 4))
    broadcast = StridedLayout.dense((3,), 8).broadcast_to((2, 3))  # writable view: refused
    with pytest.raises(ValueError, match="with_layout: the layout is not unique"):
        move_to[1, 1](view, broadcast)
    with pytest.raises(AxisError, match="view index out of bounds on axis 0"):
        read_row[1, 1](view, 2, out)


@in_simulator
@pytest.mark.parametrize(
    "index",
    [
        (slice(None, None, -2), 1),
        (None, Ellipsis, slice(1, None)),
        (-1,),
        (slice(5, 1, -1), slice(None)),
        (Ellipsis,),
        (0, None, 2),
    ],
)
def test_simulated_views_index_as_compiled_code_does(index):
    """The simulator's view and an @njit view give the same sub-view for every index."""
    from numba import njit

    from layoutkit.cuda import SimulatedView

    array = np.arange(42.0).reshape(6, 7)[::-1, 1:]
    view = host_view(array)
    compiled = njit(lambda v, index: v[index])(view, index)
    simulated = SimulatedView.from_view(view)[index]
    assert simulated.shape == compiled.shape
    assert simulated.strides == compiled.strides
    assert simulated.layout == compiled.layout
    np.testing.assert_array_equal(np.asarray(compiled), array[index])


@in_simulator
def test_bounds_checked_views_are_kernel_arguments_in_the_simulator():
    """A ``BoundsCheckedView`` is a kernel argument on the GPU; the simulator took it as it
    was, so the kernel failed with "'BoundsCheckedView' object is not subscriptable"."""
    from helpers.kernels import read_row, scaled_copy

    from layoutkit import AxisError, BoundsCheckedView

    source = np.arange(12.0).reshape(3, 4)[::-1]
    destination = np.zeros((3, 4))
    scaled_copy[(1, 1), (4, 4)](
        BoundsCheckedView(host_view(source)), BoundsCheckedView(host_view(destination)), 3.0
    )
    np.testing.assert_array_equal(destination, 3.0 * source)
    out = host_view(np.zeros(1))
    with pytest.raises(AxisError, match="view index out of bounds on axis 0"):
        read_row[1, 1](BoundsCheckedView(host_view(source)), 3, out)


@in_simulator
def test_objects_claiming_a_view_class_are_passed_as_they_are():
    """The simulator believed a ``__class__`` property: an object claiming to be a view of
    65536 elements at a 1-element array's address was simulated as that view, and the
    kernel wrote element 65535 past the array. Only the real type makes a view."""
    import layoutkit.cuda
    from layoutkit import StridedLayout
    from layoutkit.memoryview import StridedMemoryView

    small = np.zeros(1)
    real = host_view(small)
    lying = {"layout": StridedLayout.dense((1 << 16,), 8), "shape": (1 << 16,),
             "ptr": small.ctypes.data, "_buffer": None}  # fmt: skip

    class Claiming:
        __class__ = property(lambda self: StridedMemoryView)

        def __getattr__(self, name):
            return lying[name] if name in lying else getattr(real, name)

    @layoutkit.cuda.jit
    def fill_last(v):
        v[v.shape[0] - 1] = 7.0

    with pytest.raises(TypeError, match="does not support item assignment"):
        fill_last[1, 1](Claiming())
    assert small.tolist() == [0.0]
