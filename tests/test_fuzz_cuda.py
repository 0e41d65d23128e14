"""The GPU side of the fuzzing suite (``cuda``-marked; skipped without a GPU).

Device views used, then closed, refused by every operation that touches memory, kernel
launches included; deepcopy and pickle of device views; bounds-checked kernels
(``layoutkit.cuda.jit(boundscheck=True, debug=True)``) reporting ``IndexError`` for view
indices, and debug kernels refusing ``permuted`` orders out of range; hostile
``__cuda_array_interface__`` dicts over device memory. Each case runs in a child
interpreter (``helpers.hostile``), so a crash or an illegal-address error names its case.

On the GPU machine, from the repository root (logs under ``$OUT``)::

    python -m pytest -q -p no:cacheprovider -m cuda tests/test_fuzz_cuda.py
    compute-sanitizer --tool memcheck --target-processes all --error-exitcode 3 \\
        python -m pytest -q -p no:cacheprovider -m cuda tests/test_fuzz_cuda.py
"""

import copy
import functools
import pickle

import numpy as np
import pytest
from helpers.hostile import Cases
from helpers.hostile_checks import DOCUMENTED_OR_HOSTILE, check, check_view, refused, refused_or_ok
from helpers.hostile_objects import FakeInterface

import layoutkit
from layoutkit import StridedLayout, StridedMemoryView

cases = Cases(__name__)
CUDA = (pytest.mark.cuda,)
CLOSED = (BufferError, ValueError)


def _device_view(values, layout=None):
    """A device view holding ``values`` (float64), and a function reading it back."""
    from layoutkit import _driver
    from layoutkit.memory import DeviceMemoryResource

    _driver.ensure_context()  # the driver calls below run in the device's context
    values = np.ascontiguousarray(values, np.float64)
    buffer = DeviceMemoryResource(0).allocate(max(values.nbytes, 8))
    if values.nbytes:
        _driver.memcpy(buffer.ptr, values.ctypes.data, values.nbytes)
    layout = layout or StridedLayout.dense(values.shape, 8)
    view = StridedMemoryView.from_buffer(buffer, layout, np.float64)

    def read_back():
        host = np.empty(values.shape)
        _driver.memcpy(host.ctypes.data, buffer.ptr, values.nbytes)
        return host

    return view, buffer, read_back


def _host(shape):
    array = np.zeros(shape)
    return StridedMemoryView.from_array_interface(array), array


_KERNELS = {}


def _kernel(name):
    """Kernels compiled on first use (numba-cuda imported only in the child)."""
    if name not in _KERNELS:
        from numba import cuda

        jit = layoutkit.cuda.jit
        if name == "scale":

            @jit
            def scale(dst, src):
                i = cuda.grid(1)
                if i < dst.shape[0]:
                    dst[i] = 2.0 * src[i]

            _KERNELS[name] = scale
        elif name == "read_at":

            @jit(boundscheck=True, debug=True, opt=False)
            def read_at(view, out, i):
                out[0] = view[i]

            _KERNELS[name] = read_at
        elif name == "permuted":

            @jit(debug=True, opt=False)
            def permuted(view, out, a, b):
                out[0] = view.permuted((a, b))[0, 0]

            _KERNELS[name] = permuted
    return _KERNELS[name]


# ------------------------------------------------------------------ use after close
def _launch(view):
    out, _, _ = _device_view(np.zeros(view.shape))
    _kernel("scale")[1, 32](out, view)


CLOSED_OPERATIONS = {
    "copy_from_host": lambda v: v.copy_from(_host(v.shape)[0]),
    "copy_to_host": lambda v: v.copy_to(_host(v.shape)[0]),
    "copy_device_to_device": lambda v: layoutkit.copy(_device_view(np.zeros(v.shape))[0], v),
    "copy_into_closed": lambda v: layoutkit.copy(v, _device_view(np.zeros(v.shape))[0]),
    "dlpack": lambda v: v.__dlpack__(stream=-1, max_version=(1, 0)),
    "cuda_array_interface": lambda v: v.__cuda_array_interface__,
    "kernel_launch_src": _launch,
    "kernel_launch_dst": lambda v: _kernel("scale")[1, 32](v, _device_view(np.ones(v.shape))[0]),
    "view_method": lambda v: v.view(v.layout, v.dtype),
}


def _device_closed(operation):
    view, buffer, _ = _device_view(np.arange(32.0))
    view.device_id  # noqa: B018 (used first: cached state must not let it through)
    repr(view)
    host, _ = _host(view.shape)
    layoutkit.copy(host, view)
    _launch(view)
    buffer.close()
    refused(CLOSED_OPERATIONS[operation], view, classes=CLOSED,
            what=f"{operation} of a used device view after buffer.close()")  # fmt: skip


for _operation in CLOSED_OPERATIONS:
    cases.add(f"cuda_closed_{_operation}", functools.partial(_device_closed, _operation),
              marks=CUDA, timeout=300)  # fmt: skip


def _device_duplicate(how, name):
    view, _, read_back = _device_view(np.arange(32.0))
    view.device_id  # noqa: B018 (used first)
    ok, duplicate = refused_or_ok(how, view, classes=(TypeError,), what=f"{name} of a device view")
    if not ok:
        return
    check_view(duplicate, f"{name} of a device view")
    check(duplicate.ptr != view.ptr, f"{name} of a device view shares its memory")
    host, array = _host(duplicate.shape)
    layoutkit.copy(host, duplicate)
    check(np.array_equal(array, np.arange(32.0)), f"{name} of a device view: other contents")
    layoutkit.copy(duplicate, _host(duplicate.shape)[0])
    check(np.array_equal(read_back(), np.arange(32.0)), f"writing the {name} changed the original")


cases.add("cuda_deepcopy_device_view", functools.partial(_device_duplicate, copy.deepcopy,
          "copy.deepcopy"), marks=CUDA, timeout=300)  # fmt: skip
cases.add("cuda_pickle_device_view", functools.partial(
    _device_duplicate, lambda v: pickle.loads(pickle.dumps(v)), "pickle"), marks=CUDA,
    timeout=300)  # fmt: skip


# ------------------------------------------------------------------ bounds-checked kernels
def _out():
    return _device_view(np.zeros(1))[0]


@cases.case(marks=CUDA, timeout=300)
def cuda_boundscheck_view_index_past_the_end():
    view, _, _ = _device_view(np.arange(3.0))
    for i in (3, 100, -4):
        refused(_kernel("read_at")[1, 1], view, _out(), i, classes=(IndexError,),
                what=f"a bounds-checked kernel reading v[{i}] of a 3-element view")  # fmt: skip
    _kernel("read_at")[1, 1](view, _out(), 2)  # in range: no error


@cases.case(marks=CUDA, timeout=300)
def cuda_debug_kernel_permuted_out_of_range():
    view, _, _ = _device_view(np.arange(6.0).reshape(2, 3))
    for a, b in ((0, 0), (0, 5), (7, 7), (0, -3)):
        refused(_kernel("permuted")[1, 1], view, _out(), a, b, classes=(IndexError, ValueError),
                what=f"a debug kernel with view.permuted(({a}, {b})) of a 2-d view")  # fmt: skip


# ------------------------------------------------------------------ device interfaces
DEVICE_INTERFACES = {
    "negative_extent": dict(shape=(-1,)),
    "stride_not_multiple": dict(shape=(2,), strides=(3,)),
    "itemsize_zero": dict(shape=(2,), typestr="|V0"),
    "strides_wrong_length": dict(shape=(2,), strides=(8, 8)),
    "pointer_float": dict(shape=(2,), data="float"),
    "end_past_2_64": dict(shape=(2,), data=(2**64 - 8, False)),
    "stream_zero": dict(shape=(2,), stream=0),
    "stream_bool": dict(shape=(2,), stream=True),
}


def _device_interface(name):
    view, buffer, _ = _device_view(np.zeros(8))
    interface = {"version": 3, "typestr": "<f8", "data": (buffer.ptr, False), "stream": None}
    interface.update(DEVICE_INTERFACES[name])
    if interface["data"] == "float":
        interface["data"] = (float(buffer.ptr), False)
    obj = FakeInterface(interface, "__cuda_array_interface__", keep=buffer)
    for stream in (-1, 0, 1):
        ok, result = refused_or_ok(StridedMemoryView.from_cuda_array_interface, obj, stream,
                                   classes=DOCUMENTED_OR_HOSTILE)  # fmt: skip
        if ok:
            check_view(result, f"__cuda_array_interface__ {name} (stream_ptr={stream})")
            raise AssertionError(f"__cuda_array_interface__ {name}: accepted; refuse it")


for _name in DEVICE_INTERFACES:
    cases.add(f"cuda_array_interface_{_name}", functools.partial(_device_interface, _name),
              marks=CUDA, timeout=300)  # fmt: skip


cases.export(globals())
