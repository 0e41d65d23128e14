"""An API-wide hostile-argument matrix: every parameter of every public callable, fed each
value of one catalogue of hostile values in turn, the other arguments valid.

The callables are found by introspection: the public classes and functions of
``layoutkit.__all__`` (and ``layoutkit.display``), their methods, classmethods and
constructors, each described by a :class:`Target` that says how to make a receiver and a
valid value for every parameter; :func:`inspect.signature` lists the parameters, so a
parameter added later is attacked without a change here (and a public method added
without a target fails :func:`test_every_public_callable_is_in_the_matrix`).

The rule for one call, ``f(..., name=hostile, ...)``:

* it returns, and the result is what the same call gives for the value's plain meaning
  (``np.int64(2)`` -> ``2``, ``np.array([1, 2])`` -> ``[1, 2]``), and, where the
  operation has a NumPy meaning, what NumPy gives for the same hostile value; or
* it raises one of TypeError / ValueError / BufferError / OverflowError / IndexError
  (``AxisError``), or the target's documented extra classes (``NoDriverError`` on this
  machine for what needs a driver), with a message naming the parameter; or the hostile
  object's own error (:class:`~helpers.hostile_checks.HostileError`) propagates;
* never another class (AttributeError, KeyError, RecursionError, SystemError, numba
  errors ...), a crash or a hang (each target runs as a hostile case in a child process,
  :mod:`helpers.hostile`), an endless read of an endless iterable, or a change to the
  receiver or to the other arguments after a refused call (their state is compared, and
  the receiver must still work).

Each target is one case. The default run feeds every catalogue value to every parameter;
the ``slow`` variant also puts each scalar value inside every position of each valid
sequence argument (``shape=(2, hostile)``) and passes every argument by keyword.
"""

import contextlib
import ctypes
import inspect
import math
import operator
import warnings
from itertools import islice
from typing import NamedTuple

import numpy as np
from helpers.hostile import Cases, note
from helpers.hostile_checks import DOCUMENTED, HostileError, derived_values, describe, plain
from helpers.hostile_objects import (
    DisagreeingList,
    EndlessSequence,
    FakeInterface,
    Index,
    IntRaisingIndex,
    IterationLimit,
    LyingLength,
    LyingTuple,
    MutatingList,
    NonIntIndex,
    RaisingAttribute,
    RaisingDLPack,
    RaisingDunder,
    RaisingIndex,
    RaisingIteration,
    RaisingList,
    ShiftingSequence,
    recursive_list,
)

import layoutkit
from layoutkit import (
    BoundsCheckedView,
    Buffer,
    CUDAError,
    Device,
    DeviceMemoryResource,
    HostMemoryResource,
    ManagedMemoryResource,
    PinnedMemoryResource,
    Stream,
    StridedLayout,
    StridedMemoryView,
)

cases = Cases(__name__)

NONE = object()  # a catalogue value without a plain meaning (no differential check)
SAME = object()  # a catalogue value that is its own plain meaning


# ------------------------------------------------------------------ the catalogue
class Hostile(NamedTuple):
    name: str
    make: object  # () -> a fresh value (some mutate themselves when read)
    plain: object = NONE  # the value's plain meaning, NONE or SAME
    scalar: bool = True  # also tried inside valid sequences (slow variant)
    origin: object = None  # for a sequence holding a catalogue value: that value's Hostile
    must_refuse: bool = False  # an integer in the wrong type: accepting it is a failure


CATALOGUE = [
    Hostile("int subclass, __index__ raises", lambda: IntRaisingIndex(1), 1),
    Hostile("__index__ raises", RaisingIndex),
    Hostile("__index__ returns 1.5", NonIntIndex),
    Hostile("__index__ returns 2**63", lambda: Index(2**63), 2**63),
    Hostile("__index__ returns -2**63-1", lambda: Index(-(2**63) - 1), -(2**63) - 1),
    Hostile("__index__ returns 2**64", lambda: Index(2**64), 2**64),
    Hostile("int 2**63", lambda: 2**63, SAME),
    Hostile("int -1", lambda: -1, SAME),
    Hostile("numpy.int64(1)", lambda: np.int64(1), 1),
    Hostile("numpy.uint64(2**64-1)", lambda: np.uint64(2**64 - 1), 2**64 - 1),
    Hostile("numpy.bool_(True)", lambda: np.bool_(True), True),
    Hostile("True", lambda: True, SAME),
    Hostile("1.0", lambda: 1.0, SAME),
    Hostile("nan", lambda: float("nan"), SAME),
    Hostile("1j", lambda: 1j, SAME),
    Hostile("None", lambda: None, SAME),
    Hostile("str", lambda: "1", SAME),
    Hostile("bytes", lambda: b"\x01", SAME),
    Hostile("bytearray", lambda: bytearray(b"\x01\x02"), NONE),
    Hostile("memoryview", lambda: memoryview(b"\x01\x02"), NONE),
    Hostile("object()", object),
    Hostile("Ellipsis", lambda: Ellipsis, SAME),
    Hostile("slice", lambda: slice(None), SAME),
    Hostile("__len__ lies", lambda: LyingLength([1, 2], 5), scalar=False),
    Hostile("tuple subclass, __len__ lies", lambda: LyingTuple((1, 2), 7), scalar=False),
    Hostile("iteration raises half-way", lambda: RaisingIteration(1), scalar=False),
    Hostile("list subclass, __iter__ raises half-way",
            lambda: RaisingList([1, 2, 3, 4]), scalar=False),  # fmt: skip
    Hostile("endless iterable", EndlessSequence, scalar=False),
    Hostile("__getitem__ disagrees with __iter__",
            lambda: DisagreeingList([0, 1]), scalar=False),  # fmt: skip
    Hostile("shifts between reads", lambda: ShiftingSequence([1, 2], [3, 4, 5]), scalar=False),
    Hostile("mutates itself while iterated", lambda: MutatingList([1, 2]), scalar=False),
    Hostile("recursive list", recursive_list, scalar=False),
    Hostile("10**6 items", lambda: list(range(10**6)), scalar=False),
    Hostile("65 ones", lambda: (1,) * 65, SAME, scalar=False),
    Hostile("65 zeros (list)", lambda: [0] * 65, SAME, scalar=False),
    Hostile("__eq__ raises", lambda: RaisingDunder("__eq__")),
    Hostile("__hash__ raises", lambda: RaisingDunder("__hash__")),
    Hostile("__bool__ raises", lambda: RaisingDunder("__bool__")),
    Hostile("__repr__ raises", lambda: RaisingDunder("__repr__")),
    Hostile("__str__ raises", lambda: RaisingDunder("__str__")),
    Hostile("0-d int array", lambda: np.array(1), 1),
    Hostile("1-d int array", lambda: np.array([1, 2]), [1, 2], scalar=False),
    Hostile("1-d object array", lambda: np.array([1, 2], dtype=object), [1, 2], scalar=False),
    Hostile("0-d object array", lambda: np.array(1, dtype=object)),
    Hostile("1-d float array", lambda: np.array([1.0, 2.0]), scalar=False),
    Hostile("__array_interface__ raises", lambda: RaisingAttribute("__array_interface__")),
    Hostile("__cuda_array_interface__ raises",
            lambda: RaisingAttribute("__cuda_array_interface__")),  # fmt: skip
    Hostile("__dlpack__ raises", RaisingDLPack),
]


# ------------------------------------------------------------------ subjects
def dense_layout():
    return StridedLayout.dense((2, 3, 4), 4)


def strided_layout():
    """A 3-d layout with a slice offset and a negative stride; see :func:`layout_array`."""
    return StridedLayout.dense((2, 3, 4), 4)[:, ::-1, 1:]


def layout_array(layout):
    """An int32 NumPy view with ``layout``'s shape, byte strides and slice offset into a
    base of distinct values (``arange``), and that base: equal elements, equal offsets."""
    base = np.arange(8192, dtype=np.int32)
    start = layout.slice_offset + 4096
    return np.lib.stride_tricks.as_strided(base[start:], layout.shape, _int32_strides(layout)), base


def _int32_strides(layout):
    return tuple(s * 4 for s in layout.strides)


def host_array():
    return np.arange(24, dtype=np.float64).reshape(4, 6)


def host_view():
    return StridedMemoryView.from_array_interface(host_array())


def checked_view():
    return BoundsCheckedView(host_view())


def cai_object():
    """A CUDA array interface producer over host memory (needs a driver to import)."""
    interface = {"shape": (8,), "typestr": "<f8", "data": (Keep.ptr, False), "version": 3,
                 "strides": None}  # fmt: skip
    return FakeInterface(interface, name="__cuda_array_interface__")


def host_buffer():
    buffer = HostMemoryResource().allocate(64)
    ctypes.memmove(buffer.ptr, bytes(range(64)), 64)
    return buffer


class Keep:
    """Memory the valid arguments point at, alive for the whole case."""

    storage = np.arange(64, dtype=np.uint8)
    ptr = storage.__array_interface__["data"][0]
    buffers = []  # allocations freed by hand: kept, so their own deallocation never runs
    current = None

    @classmethod
    def resource(cls):
        """A fresh host resource, the one :meth:`allocation` allocates from."""
        cls.current = HostMemoryResource()
        return cls.current

    @classmethod
    def allocation(cls):
        """The pointer of a fresh allocation of :meth:`resource`'s resource."""
        buffer = cls.current.allocate(64)
        cls.buffers.append(buffer)
        return buffer.ptr


# ------------------------------------------------------------------ state of receivers
def state(obj):
    """What must not change in ``obj`` after a call refused (compared with ``==``)."""
    if isinstance(obj, StridedLayout):
        return ("layout", plain(obj), tuple(sorted(derived_values(obj).items(), key=str)))
    if isinstance(obj, StridedMemoryView):
        memory = np.asarray(obj).tobytes() if obj.buffer.is_host_accessible else None
        return ("view", obj.ptr, obj.shape, obj.strides, str(obj.dtype), obj.readonly, memory)
    if isinstance(obj, BoundsCheckedView):
        return ("checked", state(obj.view))
    if isinstance(obj, Buffer):
        if obj.is_closed:
            return ("closed buffer",)
        memory = ctypes.string_at(obj.ptr, obj.size) if obj.is_host_accessible else None
        return ("buffer", obj.ptr, obj.size, memory)
    if isinstance(obj, np.ndarray):
        return ("array", obj.shape, obj.strides, obj.tobytes())
    return ("object", type(obj).__name__)


def works(obj):
    """Use ``obj`` the ordinary way (a refused call must leave it usable)."""
    if isinstance(obj, (StridedLayout, StridedMemoryView, Buffer)):
        repr(obj)
        hash(obj) if isinstance(obj, StridedLayout) else None
        if (obj == obj) is not True:  # noqa: PLR0124
            raise AssertionError(f"{describe(obj)} no longer equals itself")
    if isinstance(obj, StridedMemoryView):
        np.asarray(obj).sum() if obj.buffer.is_host_accessible else None


# ------------------------------------------------------------------ NumPy's meanings
def _as_numpy_reads(value):
    """What NumPy is given for a sequence argument that layoutkit reads by iterating once
    (DECISIONS 2: any sequence): ``tuple(value)`` for iterables other than tuples, lists,
    strings and arrays; the value itself otherwise."""
    if type(value) in (tuple, list) or isinstance(value, (str, bytes, bytearray, memoryview)):
        return value
    if isinstance(value, np.ndarray):
        return tuple(value.tolist()) if value.ndim == 1 else value
    try:
        return tuple(islice(iter(value), 100))
    except Exception:
        return value


def numpy_layout(operation, sequences=True):
    """A NumPy oracle for a layout method: ``operation(array, value)`` on an array with
    the receiver's layout (:func:`layout_array`) gives NumPy's result (a view, or a copy
    for advanced indexing, or an error); the layout returned must address the same
    elements in the same order, compared element by element."""

    def oracle(receiver, value, result):
        array, base = layout_array(receiver)
        given = _as_numpy_reads(value) if sequences else value
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                expected = np.asarray(operation(array, given))
        except Exception as exc:
            return f"NumPy refuses it ({type(exc).__name__}: {exc}) but it returned {result!r}"
        if not isinstance(result, StridedLayout):
            return f"returned {describe(result)}, not a layout"
        start = result.slice_offset + 4096
        got = np.lib.stride_tricks.as_strided(base[start:], result.shape, _int32_strides(result))
        if got.shape != expected.shape or not np.array_equal(got, expected):
            return f"{result!r} addresses other elements than NumPy's result {expected.tolist()}"
        return None

    return oracle


def _numpy_index(array, index):
    view = array[index]
    if not isinstance(view, np.ndarray):  # a full integer index: NumPy's 0-d view of it
        view = array[(*index, Ellipsis) if isinstance(index, tuple) else (index, Ellipsis)]
    return view


# ------------------------------------------------------------------ targets
class Target(NamedTuple):
    name: str  # "StridedLayout.permuted": the case is named after it
    receiver: object  # () -> the object called on (None: a function or a class)
    call: object  # receiver -> the callable (a bound method, a class, a function)
    valid: dict  # parameter -> () -> a valid value (every parameter without a default)
    raises: tuple = ()  # documented classes besides DOCUMENTED
    numpy: object = None  # (receiver, value, result) -> None or what differs, for ``param``
    numpy_param: str = ""  # the parameter the NumPy oracle knows
    baseline_may_fail: tuple = ()  # the valid call itself may raise these (no driver)
    names: dict = {}  # parameter -> other words its messages may use
    no_plain: tuple = ()  # parameters whose values have no "plain meaning" (obj=, dtype=)
    skip: tuple = ()  # parameters not attacked one at a time (from_buffer's *args form)
    numpy_same: dict = {}  # parameter -> NumPy's version of the call, given the value
    floats_ok: tuple = ()  # parameters with an int valid value that are not integers


def _method(name):
    return lambda receiver: getattr(receiver, name)


def _const(value):
    return lambda: value


_IMPORT = {"no_plain": ("obj",)}  # an array-like: np.int64(1) is one, 1 is not
_DRIVER = (CUDAError,)  # NoDriverError here; documented for everything that needs a GPU

def element_access_targets(owner, receiver):
    """``owner.__getitem__`` and ``__setitem__`` on ``receiver()`` (a view of :func:`host_array`),
    each index and value checked against NumPy's answer on the same array."""
    return [
        Target(f"{owner}.__getitem__", receiver, _method("__getitem__"),
               {"index": _const((1, 2))}, names={"index": ("indices",)},
               numpy_same={"index": lambda v: host_array()[v]}),
        Target(f"{owner}.__setitem__", receiver, _method("__setitem__"),
               {"index": _const((1, 2)), "value": _const(5.0)}, no_plain=("value",),
               names={"index": ("indices",)},
               numpy_same={"index": lambda v: host_array().__setitem__(v, 5.0),
                           "value": lambda v: host_array().__setitem__((1, 2), v)}),
    ]  # fmt: skip


TARGETS = [
    # -------------------------------------------------------------- StridedLayout
    Target("StridedLayout", None, lambda _: StridedLayout,
           {"shape": _const((2, 3)), "strides": _const((12, 4)), "itemsize": _const(4),
            "divide_strides": _const(False)}),
    Target("StridedLayout.dense", None, lambda _: StridedLayout.dense,
           {"shape": _const((2, 3)), "itemsize": _const(4), "stride_order": _const("C")}),
    Target("StridedLayout.dense_like", None, lambda _: StridedLayout.dense_like,
           {"other": strided_layout, "stride_order": _const("K")},
           names={"other": ("layout",)}),
    Target("StridedLayout.to_dense", strided_layout, _method("to_dense"),
           {"stride_order": _const("K")}),
    Target("StridedLayout.offset_of", strided_layout, _method("offset_of"),
           {"index": _const((1, 1, 1))}),
    Target("StridedLayout.permuted", strided_layout, _method("permuted"),
           {"axis_order": _const((2, 0, 1))},
           numpy=numpy_layout(np.transpose), numpy_param="axis_order"),
    Target("StridedLayout.unsqueezed", strided_layout, _method("unsqueezed"),
           {"axis": _const(0)}, numpy=numpy_layout(np.expand_dims), numpy_param="axis"),
    Target("StridedLayout.broadcast_to", strided_layout, _method("broadcast_to"),
           {"shape": _const((5, 2, 3, 3))},
           numpy=numpy_layout(np.broadcast_to), numpy_param="shape"),
    Target("StridedLayout.reshaped", dense_layout, _method("reshaped"),
           {"shape": _const((6, 4))},
           numpy=numpy_layout(lambda a, v: a.reshape(v)), numpy_param="shape"),
    Target("StridedLayout.flattened", dense_layout, _method("flattened"),
           {"start_axis": _const(0), "end_axis": _const(-1), "mask": _const(None)}),
    Target("StridedLayout.repacked", dense_layout, _method("repacked"),
           {"itemsize": _const(8), "data_ptr": _const(0), "axis": _const(-1),
            "keep_dim": _const(True)}),
    Target("StridedLayout.max_compatible_itemsize", dense_layout,
           _method("max_compatible_itemsize"),
           {"max_itemsize": _const(16), "data_ptr": _const(0), "axis": _const(-1)}),
    Target("StridedLayout.sliced", strided_layout, _method("sliced"),
           {"slices": _const((slice(None), slice(None, None, -1)))},
           numpy=numpy_layout(_numpy_index, sequences=False), numpy_param="slices",
           names={"slices": ("index", "indices")}),
    Target("StridedLayout.__getitem__", strided_layout, _method("__getitem__"),
           {"slices": _const((slice(None), slice(None, None, -1)))},
           numpy=numpy_layout(_numpy_index, sequences=False), numpy_param="slices",
           names={"slices": ("index", "indices")}),
    Target("StridedLayout.__eq__", strided_layout, _method("__eq__"),
           {"other": strided_layout}),
    # -------------------------------------------------------------- StridedMemoryView
    Target("StridedMemoryView", None, lambda _: StridedMemoryView,
           {"obj": host_array, "stream_ptr": _const(-1)}, **_IMPORT),
    Target("StridedMemoryView.from_any_interface", None,
           lambda _: StridedMemoryView.from_any_interface,
           {"obj": host_array, "stream_ptr": _const(-1)}, **_IMPORT),
    Target("StridedMemoryView.from_array_interface", None,
           lambda _: StridedMemoryView.from_array_interface, {"obj": host_array}, **_IMPORT),
    Target("StridedMemoryView.from_dlpack", None, lambda _: StridedMemoryView.from_dlpack,
           {"obj": host_array, "stream_ptr": _const(-1)}, **_IMPORT),
    Target("StridedMemoryView.from_cuda_array_interface", None,
           lambda _: StridedMemoryView.from_cuda_array_interface,
           {"obj": cai_object, "stream_ptr": _const(-1)},
           raises=_DRIVER, baseline_may_fail=_DRIVER, **_IMPORT),
    Target("StridedMemoryView.from_buffer(layout)", None,
           lambda _: StridedMemoryView.from_buffer,
           {"buffer": host_buffer, "layout": lambda: StridedLayout.dense((8,), 8),
            "dtype": _const(np.float64), "shape": _const(None), "strides": _const(None),
            "itemsize": _const(8), "is_readonly": _const(None)},
           skip=("args",), no_plain=("dtype",)),
    Target("StridedMemoryView.from_buffer(shape)", None,
           lambda _: StridedMemoryView.from_buffer,
           {"buffer": host_buffer, "shape": _const((2, 4)), "strides": _const((4, 1)),
            "itemsize": _const(8), "dtype": _const(np.float64), "layout": _const(None),
            "is_readonly": _const(False)}, skip=("args",), no_plain=("dtype",)),
    Target("StridedMemoryView.view", host_view, _method("view"),
           {"layout": lambda: StridedLayout.dense((6, 4), 8), "dtype": _const(np.float64)},
           no_plain=("dtype",)),
    Target("StridedMemoryView.with_layout", host_view, _method("with_layout"),
           {"layout": lambda: StridedLayout.dense((6, 4), 8)}),
    Target("StridedMemoryView.permuted", host_view, _method("permuted"),
           {"axis_order": _const((1, 0))}),
    Target("StridedMemoryView.copy_from", host_view, _method("copy_from"),
           {"other": host_view, "stream": _const(None), "allocator": _const(None),
            "blocking": _const(None)}, no_plain=("other", "allocator"),
           names={"other": ("src",)}),
    Target("StridedMemoryView.copy_to", host_view, _method("copy_to"),
           {"other": host_view, "stream": _const(None), "allocator": _const(None),
            "blocking": _const(None)}, no_plain=("other", "allocator"),
           names={"other": ("dst",)}),
    *element_access_targets("StridedMemoryView", host_view),
    Target("StridedMemoryView.__dlpack__", host_view, _method("__dlpack__"),
           {"stream": _const(None), "max_version": _const(None), "dl_device": _const(None),
            "copy": _const(None)}),
    Target("BoundsCheckedView", None, lambda _: BoundsCheckedView, {"view": host_view}),
    *element_access_targets("BoundsCheckedView", checked_view),
    # -------------------------------------------------------------- Buffer
    Target("Buffer", None, lambda _: Buffer, {"args": _const(())},
           baseline_may_fail=(TypeError,), names={"args": ("Buffer",)}),
    Target("Buffer.from_handle", None, lambda _: Buffer.from_handle,
           {"ptr": _const(Keep.ptr), "size": _const(64), "mr": _const(None),
            "owner": _const(None), "stream": _const(None)},
           names={"ptr": ("bytes at",), "size": ("bytes at",)}),
    Target("Buffer.close", host_buffer, _method("close"), {"stream": _const(None)}),
    Target("Buffer.copy_from", host_buffer, _method("copy_from"),
           {"src": host_buffer, "stream": _const(None), "options": _const(None)}),
    Target("Buffer.copy_to", host_buffer, _method("copy_to"),
           {"dst": host_buffer, "stream": _const(None), "options": _const(None)}),
    Target("Buffer.fill", host_buffer, _method("fill"),
           {"value": _const(7), "stream": _const(None)}),
    Target("Buffer.__dlpack__", host_buffer, _method("__dlpack__"),
           {"stream": _const(None), "max_version": _const(None), "dl_device": _const(None),
            "copy": _const(None)}),
    Target("Buffer.__eq__", host_buffer, _method("__eq__"), {"other": host_buffer}),
    Target("Buffer.__exit__", host_buffer, _method("__exit__"),
           {"exc_type": _const(None), "exc": _const(None), "traceback": _const(None)}),
    # -------------------------------------------------------------- resources, devices
    Target("HostMemoryResource.allocate", HostMemoryResource, _method("allocate"),
           {"size": _const(64), "stream": _const(None)}),
    Target("HostMemoryResource.deallocate", Keep.resource, _method("deallocate"),
           {"ptr": Keep.allocation, "size": _const(64), "stream": _const(None)}),
    Target("PinnedMemoryResource.allocate", PinnedMemoryResource, _method("allocate"),
           {"size": _const(64), "stream": _const(None)},
           raises=_DRIVER, baseline_may_fail=_DRIVER),
    Target("DeviceMemoryResource", None, lambda _: DeviceMemoryResource,
           {"device_id": _const(0)}, raises=_DRIVER, baseline_may_fail=_DRIVER),
    Target("ManagedMemoryResource", None, lambda _: ManagedMemoryResource,
           {"device_id": _const(0)}, raises=_DRIVER, baseline_may_fail=_DRIVER),
    Target("Device", None, lambda _: Device, {"device_id": _const(0)},
           raises=_DRIVER, baseline_may_fail=_DRIVER),
    Target("Stream", None, lambda _: Stream, {"args": _const(())},
           baseline_may_fail=(TypeError,), names={"args": ("Stream",)}),
    # -------------------------------------------------------------- functions
    Target("copy", None, lambda _: layoutkit.copy,
           {"dst": host_view, "src": host_view, "stream": _const(None),
            "allocator": _const(None), "blocking": _const(None)},
           no_plain=("dst", "src", "allocator")),
    Target("CopyAllocatorOptions", None, lambda _: layoutkit.CopyAllocatorOptions,
           {"host": _const(None), "device": _const(None)}, no_plain=("host", "device")),
    Target("plan_copy", None, lambda _: layoutkit.plan_copy,
           {"dst_layout": dense_layout, "src_layout": lambda: StridedLayout.dense((2, 3, 4), 4, "F"),
            "dst_ptr": _const(0), "src_ptr": _const(0), "dst_on_device": _const(False),
            "src_on_device": _const(False)}),
    Target("args_viewable_as_strided_memory", None,
           lambda _: layoutkit.args_viewable_as_strided_memory, {"arg_indices": _const((0,))}),
    Target("display.layout_html", None, lambda _: layoutkit.display.layout_html,
           {"layout": strided_layout}),
    Target("display.layout_svg", None, lambda _: layoutkit.display.layout_svg,
           {"layout": strided_layout}),
    Target("display.view_html", None, lambda _: layoutkit.display.view_html,
           {"view": host_view}),
]  # fmt: skip

#: Public callables with nothing to attack: no parameters but ``self`` (they are used on
#: every receiver after each refused call), or not reachable without a GPU.
NO_PARAMETERS = {
    "StridedLayout": {"flattened_axis_mask", "required_size_in_bytes", "squeezed"},
    # Device(0) and streams need a GPU (below: with the special methods)
    "DeviceMemoryResource": {"allocate", "deallocate"},  # made only with a GPU
    "ManagedMemoryResource": {"allocate", "deallocate"},
    "PinnedMemoryResource": {"deallocate"},  # frees only what a GPU allocated
    "MemoryResource": {"allocate", "deallocate"},  # abstract
    # pickling has its own hostile suite (test_fuzz_pickles); no arguments to attack
    "Buffer": {"__dlpack_device__", "__enter__", "__reduce_ex__"},
    "StridedMemoryView": {"__dlpack_device__", "__len__", "__iter__", "__reduce_ex__"},
    "BoundsCheckedView": {"__len__", "__iter__"},
    "Stream": {"__enter__", "close", "sync", "__exit__", "__eq__", "__reduce_ex__",
               "__cuda_stream__", "from_handle"},  # from_handle: a valid handle needs a GPU
    "Device": {"set_current", "sync", "allocate", "create_stream", "__int__"},
}
#: Constructors without parameters (or abstract), called by the targets that use them.
NO_PARAMETER_CONSTRUCTORS = {"HostMemoryResource", "PinnedMemoryResource", "MemoryResource"}

_CLASSES = [StridedLayout, StridedMemoryView, BoundsCheckedView, Buffer, Device,
            DeviceMemoryResource, HostMemoryResource, ManagedMemoryResource,
            layoutkit.MemoryResource, PinnedMemoryResource, Stream]  # fmt: skip


def public_callables():
    """``"Class.method"`` for every public method, classmethod and special method with
    arguments of the public classes, and the public functions and constructors."""
    found = set()
    for name in layoutkit.__all__:
        obj = getattr(layoutkit, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            continue
        if inspect.ismodule(obj) and not callable(obj):  # layoutkit.copy: the function
            found.update(f"{name}.{f}" for f in obj.__all__)
            continue
        found.add(name)
    for cls in _CLASSES:
        for attr, value in vars(cls).items():
            special = attr.startswith("__") and attr.endswith("__")
            if attr.startswith("_") and not special:
                continue
            if special and attr in ("__new__", "__init__", "__repr__", "__hash__",
                                    "__reduce__", "__setstate__", "__copy__", "__deepcopy__",
                                    "__getattr__", "__getattribute__", "__del__",
                                    "__init_subclass__", "__module__", "__doc__",
                                    "__slots__", "__dict__", "__weakref__", "__qualname__",
                                    "__abstractmethods__", "__array_interface__",
                                    "__cuda_array_interface__", "__sizeof__",
                                    "__class_getitem__", "_abc_impl"):  # fmt: skip
                continue
            if isinstance(value, property) or not callable(getattr(cls, attr)):
                continue
            found.add(f"{cls.__name__}.{attr}")
    return found


# ------------------------------------------------------------------ the matrix
def _parameters(target):
    receiver = target.receiver() if target.receiver else None
    return list(inspect.signature(target.call(receiver)).parameters.values())


def _arguments(target, parameters, name, value, keywords):
    """``(args, kwargs, valid objects)`` with ``name`` given ``value``, the rest valid."""
    args, kwargs, made = [], {}, []
    by_keyword = keywords  # once a positional parameter is left out, the rest go by keyword
    for p in parameters:
        if p.name == name:
            given = value
        elif target.valid.get(p.name) is not None:
            given = target.valid[p.name]()
            made.append(given)
        elif p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL,
                                                                     p.VAR_KEYWORD):
            by_keyword = True
            continue
        else:
            raise AssertionError(f"{target.name}: no valid value for parameter {p.name!r}")
        if p.kind is p.VAR_POSITIONAL:
            args.extend((given,) if p.name == name else given)
        elif p.kind is p.KEYWORD_ONLY or (by_keyword and p.kind is p.POSITIONAL_OR_KEYWORD):
            kwargs[p.name] = given
        else:
            args.append(given)
    return args, kwargs, made


_PROBES = (
    bool, operator.index, len, hash, repr, str,
    lambda v: list(islice(iter(v), 100)),
    lambda v: v.__array_interface__,
    lambda v: v.__dlpack_device__(),
    lambda v: v.__dlpack__(),
)  # fmt: skip


def own_error(hostile, exc):
    """Whether ``exc`` is what one of the value's own methods raises (``bool()`` of a
    1-d array, ``__index__``, iteration, ...): such an error may propagate unchanged."""
    if isinstance(exc, HostileError):
        return True
    if hostile.origin is not None and own_error(hostile.origin, exc):
        return True
    for probe in _PROBES:
        try:
            probe(hostile.make())
        except Exception as own:
            if type(own) is type(exc) and str(own) == str(exc):
                return True
    return False


def _mentions(exc, name, target, value):
    """Whether the message names the parameter (or a word the target allows for it), or,
    for a producer's failure (BufferError), the producer's type."""
    words = (name, *target.names.get(name, ()))
    if isinstance(exc, BufferError):
        words = (*words, type(value).__name__)
    text = str(exc)
    return any(w in text for w in words)


def _numpy_refuses_alike(target, name, value, exc):
    """Whether NumPy's own version of the call refuses ``value`` with the same class
    (NumPy's words are then as good as ours: ``float() argument must be ...``)."""
    numpy_call = target.numpy_same.get(name)
    if numpy_call is None:
        return False
    try:
        with _quiet():
            numpy_call(value)
    except Exception as theirs:
        return isinstance(exc, type(theirs))
    return False


class Failures(list):
    def add(self, target, name, hostile, message):
        self.append(f"{target.name}({name}={hostile.name}): {message}")


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _call(target, parameters, name, value, keywords=False):
    """Call the target with ``name=value``: ``(receiver, made, outcome, result or exc)``."""
    receiver = target.receiver() if target.receiver else None
    function = target.call(receiver)
    args, kwargs, made = _arguments(target, parameters, name, value, keywords)
    before = [state(receiver), *map(state, made)]
    with _quiet():
        try:
            result = function(*args, **kwargs)
        except IterationLimit as exc:
            return receiver, made, before, "endless", exc
        except Exception as exc:
            return receiver, made, before, "raised", exc
    return receiver, made, before, "returned", result


def _comparable(result):
    if isinstance(result, StridedLayout):
        return ("layout", plain(result))
    if isinstance(result, StridedMemoryView):
        return ("view", result.shape, result.strides, str(result.dtype), result.readonly)
    if isinstance(result, BoundsCheckedView):
        return ("checked", _comparable(result.view))
    if isinstance(result, Buffer):
        return ("buffer", result.size)
    if isinstance(result, float) and math.isnan(result):
        return "nan"
    if inspect.isfunction(result) or type(result).__name__ in ("PyCapsule", "capsule"):
        return type(result).__name__
    if isinstance(result, np.generic):
        return result.item()
    return result


def _check_one(target, parameters, p, hostile, failures, keywords=False):
    name = p.name
    value = hostile.make()
    note(f"{target.name}({name}={hostile.name})")
    receiver, made, before, outcome, result = _call(target, parameters, name, value, keywords)
    if outcome == "endless":
        failures.add(target, name, hostile, f"read an endless iterable past any sane length: "
                                            f"{result}")  # fmt: skip
        return
    if outcome == "raised":
        exc = result
        allowed = (*DOCUMENTED, IndexError, *target.raises)
        if not isinstance(exc, allowed):
            if not own_error(hostile, exc):
                failures.add(target, name, hostile,
                             f"raised {type(exc).__name__}: {describe(str(exc), 300)}")  # fmt: skip
        elif (not isinstance(exc, target.raises) and not _mentions(exc, name, target, value)
              and not _numpy_refuses_alike(target, name, hostile.make(), exc)
              and not own_error(hostile, exc)):
            failures.add(target, name, hostile,
                         f"{type(exc).__name__} does not name {name!r}: "
                         f"{describe(str(exc), 300)}")  # fmt: skip
        after = [state(receiver), *map(state, made)]
        if after != before:
            failures.add(target, name, hostile, "refused, but changed the receiver or an "
                                                "argument")  # fmt: skip
        try:
            works(receiver)
        except Exception as exc2:
            failures.add(target, name, hostile, f"the receiver no longer works "
                                                f"({type(exc2).__name__}: {exc2})")  # fmt: skip
        return
    # accepted: compare with the plain meaning, and with NumPy's
    if hostile.must_refuse and name not in target.floats_ok:
        failures.add(target, name, hostile, f"accepted ({describe(result)}): an integer "
                     "parameter takes no float, string or array (DECISIONS 2)")  # fmt: skip
    if hostile.plain is not NONE and hostile.plain is not SAME and name not in target.no_plain:
        _, _, _, plain_outcome, plain_result = _call(target, parameters, name, hostile.plain,
                                                     keywords)  # fmt: skip
        if plain_outcome != "returned":
            failures.add(target, name, hostile,
                         f"accepted ({describe(result)}), but its plain meaning "
                         f"{describe(hostile.plain)} is refused "
                         f"({type(plain_result).__name__}: {plain_result})")  # fmt: skip
        elif _comparable(result) != _comparable(plain_result):
            failures.add(target, name, hostile,
                         f"gave {describe(result)}, but its plain meaning "
                         f"{describe(hostile.plain)} gives {describe(plain_result)}")  # fmt: skip
    if target.numpy is not None and name == target.numpy_param:
        problem = target.numpy(receiver, hostile.make(), result)
        if problem:
            failures.add(target, name, hostile, problem)


def _derived(valid):
    """The valid value in the wrong type: ``8`` as ``8.0``, ``"8"``, ``np.float64(8)``;
    ``(2, 3)`` as ``(2.0, 3.0)`` or a float array (the same number is no excuse)."""
    sample = valid() if valid else None
    if type(sample) is int:
        values = {"a float": float(sample), "numpy.float64": np.float64(sample),
                  "a str": str(sample)}  # fmt: skip
    elif type(sample) in (tuple, list) and sample and all(type(v) is int for v in sample):
        values = {"floats": type(sample)(float(v) for v in sample),
                  "a float array": np.array(sample, dtype=float)}  # fmt: skip
    else:
        return
    for how, value in values.items():
        yield Hostile(f"the valid {sample!r} as {how}", lambda v=value: v, must_refuse=True)


def _inside(valid):
    """Each scalar catalogue value at each position of the valid sequence ``valid()``."""
    sample = valid() if valid else None
    if type(sample) not in (tuple, list) or not sample:
        return
    kind = type(sample)
    for position in range(len(sample)):
        for hostile in CATALOGUE:
            if not hostile.scalar:
                continue

            def make(position=position, hostile=hostile):
                items = list(sample)
                items[position] = hostile.make()
                return kind(items)

            plain_meaning = NONE
            if hostile.plain not in (NONE, SAME):
                items = list(sample)
                items[position] = hostile.plain
                plain_meaning = kind(items)
            yield Hostile(f"[{position}]={hostile.name}", make, plain_meaning, origin=hostile)


def run_target(target, inside=False, keywords=False):
    """Feed every catalogue value to every parameter of ``target``; fail listing them all."""
    parameters = _parameters(target)
    failures = Failures()
    # the valid call works (or raises only what the target may without a GPU)
    _, _, _, outcome, result = _call(target, parameters, None, None)
    if outcome != "returned" and not isinstance(result, target.baseline_may_fail):
        raise AssertionError(f"{target.name}: the valid call fails: {result!r}")
    for p in parameters:
        if p.kind is p.VAR_KEYWORD or p.name in target.skip:
            continue
        for hostile in (*CATALOGUE, *_derived(target.valid.get(p.name))):
            _check_one(target, parameters, p, hostile, failures, keywords)
        if inside:
            for inner in _inside(target.valid.get(p.name)):
                _check_one(target, parameters, p, inner, failures, keywords)
    if failures:
        raise AssertionError(f"{len(failures)} hostile call(s) misbehaved:\n" +
                             "\n".join(failures))  # fmt: skip


def _case_name(target):
    text = target.name.replace(".", "_").replace("(", "_").replace(")", "")
    return "matrix_" + text.strip("_").lower()


for _target in TARGETS:
    cases.add(_case_name(_target), lambda t=_target: run_target(t), timeout=120)
    cases.add(_case_name(_target) + "_exhaustive",
              lambda t=_target: run_target(t, inside=True, keywords=True),
              timeout=600, slow=True)  # fmt: skip

cases.export(globals())


def test_every_public_callable_is_in_the_matrix():
    """A public method or function added without a target (or a reason) fails here."""
    covered = {t.name.split("(")[0] for t in TARGETS}
    exempt = {f"{c}.{m}" for c, ms in NO_PARAMETERS.items() for m in ms}
    exempt |= NO_PARAMETER_CONSTRUCTORS
    missing = sorted(public_callables() - covered - exempt)
    assert not missing, f"public callables missing from the matrix: {missing}"


def test_catalogue_values_are_fresh():
    """Every catalogue value is made anew for each call (some mutate when read)."""
    for hostile in CATALOGUE:
        a, b = hostile.make(), hostile.make()
        if isinstance(a, (list, bytearray, np.ndarray)) or hasattr(a, "__dict__"):
            assert a is not b, hostile.name
    assert operator.index(Index(3)) == 3
