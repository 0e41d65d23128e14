"""Hostile DLPack producers: capsules made with ctypes, with any field value.

The rules (issue 9): ``from_dlpack`` validates every field before it returns a view (ptr
and byte range within 64 bits, ndim, shape, strides, dtype, device) and refuses with
``BufferError`` / ``TypeError`` / ``ValueError`` / ``OverflowError`` (never
``NotImplementedError``, ``struct.error``, ``ctypes.ArgumentError`` or ``MemoryError``);
the deleter of every consumed capsule runs exactly once, refused or not, and an
unconsumed capsule's never; a view it returns reads exactly the elements NumPy's
``as_strided`` finds at ``data + byte_offset`` with the same shape and strides.
"""

import functools
import gc

import numpy as np
from helpers.hostile import Cases, note
from helpers.hostile_checks import (
    DOCUMENTED_OR_HOSTILE,
    HostileError,
    Poisoned,
    check,
    check_view,
    refused,
    refused_or_ok,
)
from helpers.hostile_dlpack import HostileProducer
from helpers.hostile_strategies import fuzz_case
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import layoutkit
from layoutkit import StridedMemoryView

cases = Cases(__name__)
FLOAT64 = (2, 64, 1)


def _base(block, shape=(4,), dtype=np.float64):
    return block.array(dtype, shape)


def _deleters_once(producer, what):
    gc.collect()
    consumed = producer.consumed()
    check(producer.deleted == consumed,
          f"{what}: the deleter ran {producer.deleted} time(s) for {consumed} consumed "
          "capsule(s) (must be once per consumed capsule, never for an unconsumed one)")  # fmt: skip


def _refused_capsule(name, make, classes=DOCUMENTED_OR_HOSTILE, where=True):
    """``from_dlpack`` of the producer ``make(block)`` must refuse; deleters balanced."""
    block = Poisoned(1024)
    producer = make(block)
    what = f"from_dlpack of a capsule with {name}"
    ok, view = refused_or_ok(StridedMemoryView.from_dlpack, producer, -1, what=what,
                             classes=classes)  # fmt: skip
    if ok:
        check_view(view, what, where=where)
        message = (f"{what}: accepted, giving shape {view.shape}, strides {view.strides}, "
                   f"ptr {view.ptr:#x}; it must be refused")  # fmt: skip
        del view
        _deleters_once(producer, what)
        raise AssertionError(message)
    del view  # the exception: its traceback holds the consumer's frames
    _deleters_once(producer, what)
    block.untouched(what)


REFUSED = {
    # issue 9 examples
    "data + byte_offset >= 2**64": lambda b: HostileProducer(
        _base(b), data=2**64 - 8, byte_offset=16
    ),
    "elements past 2**64": lambda b: HostileProducer(_base(b, (16,)), data=2**64 - 64),
    "negative ndim": lambda b: HostileProducer(_base(b, (3,)), ndim=-1),
    "ndim -2**31": lambda b: HostileProducer(_base(b, (3,)), ndim=-(2**31)),
    "ndim 65": lambda b: HostileProducer(_base(b, (3,)), ndim=65),
    "ndim 2**31 - 1": lambda b: HostileProducer(_base(b, (3,)), ndim=2**31 - 1),
    "NULL shape": lambda b: HostileProducer(_base(b, (2, 2)), null_shape=True),
    "garbage stride (CuPy-14 look-alike)": lambda b: HostileProducer(
        _base(b, (3,)), strides=(2**61 - 5,)
    ),
    "stride beyond int64 bytes": lambda b: HostileProducer(_base(b, (3,)), strides=(2**62,)),
    "negative stride beyond int64 bytes": lambda b: HostileProducer(
        _base(b, (3,)), strides=(-(2**62),)
    ),
    "negative extent": lambda b: HostileProducer(_base(b, (3,)), shape=(-3,)),
    "extent beyond int64 volume": lambda b: HostileProducer(
        _base(b, (2, 2)), shape=(2**62, 4), strides=(4, 1)
    ),
    "lanes 4": lambda b: HostileProducer(_base(b), dtype=(2, 32, 4)),
    "lanes 0": lambda b: HostileProducer(_base(b), dtype=(2, 64, 0)),
    "bits 0": lambda b: HostileProducer(_base(b), dtype=(2, 0, 1)),
    "bits 12": lambda b: HostileProducer(_base(b), dtype=(0, 12, 1)),
    "unknown dtype code 99": lambda b: HostileProducer(_base(b), dtype=(99, 32, 1)),
    "opaque handle dtype": lambda b: HostileProducer(_base(b), dtype=(3, 64, 1)),
    "float128": lambda b: HostileProducer(_base(b), dtype=(2, 128, 1)),
    "packed sub-byte dtype": lambda b: HostileProducer(_base(b), dtype=(17, 4, 1)),
    "unknown device type 99": lambda b: HostileProducer(_base(b), device=(99, 0)),
    "device type 0": lambda b: HostileProducer(_base(b), device=(0, 0)),
    "tensor device differs (99)": lambda b: HostileProducer(_base(b), tensor_device=(99, 0)),
    # __dlpack_device__ named the stream rule: a CPU answer gave the CUDA tensor no stream
    "tensor on CUDA, __dlpack_device__ CPU": lambda b: HostileProducer(
        _base(b), device=(1, 0), tensor_device=(2, 0)
    ),
    "tensor on CUDA device 1, __dlpack_device__ device 0": lambda b: HostileProducer(
        _base(b), device=(2, 0), tensor_device=(2, 1)
    ),
    "tensor on CPU, __dlpack_device__ CUDA": lambda b: HostileProducer(
        _base(b), device=(2, 0), tensor_device=(1, 0)
    ),
    # a negative CUDA ordinal read as the view's device_id -1 (host memory's) or -2
    "CUDA device id -1": lambda b: HostileProducer(_base(b), device=(2, -1)),
    "CUDA host device id -1": lambda b: HostileProducer(_base(b), device=(3, -1)),
    "CUDA managed device id -2**31": lambda b: HostileProducer(_base(b), device=(13, -(2**31))),
    "major version 2": lambda b: HostileProducer(_base(b), major=2),
    "major version 0": lambda b: HostileProducer(_base(b), major=0),
    "NULL data with elements": lambda b: HostileProducer(_base(b), data=0),
    "wrong capsule name": lambda b: HostileProducer(_base(b), name=b"not_a_tensor"),
    "NULL capsule name": lambda b: HostileProducer(_base(b), name=None),
    "used capsule name": lambda b: HostileProducer(_base(b), name=b"used_dltensor_versioned"),
    "legacy name on a versioned tensor's request": lambda b: HostileProducer(
        _base(b), name=b"dltensor_versioned_extra"
    ),
    "__dlpack__ returning an int": lambda b: HostileProducer(_base(b), returns=lambda p: 7),
    "__dlpack__ returning None": lambda b: HostileProducer(_base(b), returns=lambda p: None),
    "__dlpack__ returning bytes": lambda b: HostileProducer(_base(b), returns=lambda p: b"x"),
    "__dlpack__ returning an ndarray": lambda b: HostileProducer(
        _base(b), returns=lambda p: np.zeros(3)
    ),
}

for _name, _make in REFUSED.items():
    _case = "dlpack_" + "".join(c if c.isalnum() else "_" for c in _name).strip("_")
    cases.add(_case, functools.partial(_refused_capsule, _name, _make))


class _DeviceLiar:
    """``__dlpack_device__`` returns ``device``; ``__dlpack__`` is never reached."""

    def __init__(self, device):
        self.device = device

    def __dlpack_device__(self):
        if isinstance(self.device, BaseException):
            raise self.device
        return self.device

    def __dlpack__(self, **kwargs):
        raise AssertionError("__dlpack__ called although __dlpack_device__ is unusable")


BAD_DEVICES = {
    "int": 1, "None": None, "one entry": (1,), "three entries": (1, 0, 0), "string": "cpu",
    "string type": ("1", 0), "float type": (1.5, 0), "huge type": (2**70, 0),
    "raises": HostileError("__dlpack_device__ refuses"), "list": [99, 0],
}  # fmt: skip


def _bad_device(name):
    device = BAD_DEVICES[name]
    refused(StridedMemoryView.from_dlpack, _DeviceLiar(device), -1,
            what=f"from_dlpack with __dlpack_device__() -> {device!r}",
            classes=DOCUMENTED_OR_HOSTILE)  # fmt: skip


for _name in BAD_DEVICES:
    cases.add("dlpack_device_" + _name.replace(" ", "_"), functools.partial(_bad_device, _name))


@cases.case
def dlpack_device_is_read_once():
    """``__dlpack_device__()``'s answer was iterated twice (unpacked, then compared with the
    tensor's device through tuple()): an answer that gives (1, 0) once and then iterates
    forever hung the import after the capsule was consumed. One reading decides."""
    from helpers.hostile_objects import EndlessSequence

    class Answer:
        reads = 0

        def __iter__(self):
            self.reads += 1
            return iter((1, 0)) if self.reads == 1 else iter(EndlessSequence())

    block = Poisoned(1024)
    producer = HostileProducer(_base(block))
    producer.__dlpack_device__ = Answer
    view = StridedMemoryView.from_dlpack(producer, -1)
    check_view(view, "a __dlpack_device__ answer that changes on its second reading")
    del view
    _deleters_once(producer, "a __dlpack_device__ answer read once")


# ------------------------------------------------------------------ lifetimes
@cases.case
def dlpack_same_capsule_returned_twice():
    """A producer that hands out one capsule twice: the second import is refused."""
    block = Poisoned(1024)
    producer = HostileProducer(_base(block))
    capsule = producer.__dlpack__()
    producer.returns = lambda p: capsule
    first = StridedMemoryView.from_dlpack(producer, -1)
    refused(StridedMemoryView.from_dlpack, producer, -1, what="importing a used capsule",
            classes=(BufferError,))  # fmt: skip
    check_view(first, "the first import")
    del first
    _deleters_once(producer, "one capsule imported twice")


@cases.case
def dlpack_export_of_a_view_past_2_64():
    """The issue's follow-on: a view imported with data + byte_offset >= 2**64 was exported
    by packing the pointer, where ``struct.error`` escaped (and the block leaked)."""
    block = Poisoned(1024)
    producer = HostileProducer(_base(block), data=2**64 - 8, byte_offset=16)
    ok, view = refused_or_ok(StridedMemoryView.from_dlpack, producer, -1)
    if ok:
        for versioned in ((1, 0), None):
            refused_or_ok(view.__dlpack__, max_version=versioned,
                          what="exporting a view whose pointer is past 2**64")  # fmt: skip
        refused_or_ok(getattr, view, "__array_interface__", what="its __array_interface__")
    del view
    _deleters_once(producer, "a capsule past 2**64")


@cases.case
def dlpack_deleter_that_raises():
    """A deleter that raises: no crash, called once, the error goes nowhere harmful."""
    block = Poisoned(1024)
    producer = HostileProducer(_base(block), deleter="raise")
    view = StridedMemoryView.from_dlpack(producer, -1)
    check_view(view, "a producer whose deleter raises")
    del view
    gc.collect()
    check(producer.deleted == 1, f"the raising deleter ran {producer.deleted} times")
    refused(StridedMemoryView.from_dlpack, HostileProducer(_base(block), deleter="raise",
            dtype=(2, 32, 4)), -1, what="a refused import whose deleter raises",
            classes=DOCUMENTED_OR_HOSTILE)  # fmt: skip
    gc.collect()


@cases.case
def dlpack_null_deleter():
    """DLPack allows a NULL deleter: nothing is called, nothing crashes."""
    block = Poisoned(1024)
    producer = HostileProducer(_base(block), deleter="null")
    view = StridedMemoryView.from_dlpack(producer, -1)
    check_view(view, "a capsule with a NULL deleter")
    del view
    gc.collect()
    check(producer.deleted == 0, "a NULL deleter was replaced by the producer's callback?")


@cases.case
def dlpack_read_only_flag_is_kept_and_honoured():
    block = Poisoned(1024)
    producer = HostileProducer(_base(block), flags=1)
    view = StridedMemoryView.from_dlpack(producer, -1)
    check(view.readonly, "FLAG_READ_ONLY was lost")
    source = StridedMemoryView.from_array_interface(np.zeros(4))
    refused(view.copy_from, source, what="copy into a read-only DLPack import")
    for alias in (lambda: StridedMemoryView.from_buffer(view.buffer, view.layout, view.dtype),
                  lambda: view.view(view.layout)):  # fmt: skip
        ok, other = refused_or_ok(alias)
        if ok:
            check(other.readonly, "a view of the same read-only memory is writable")
            refused(other.copy_from, source, what="copy into a re-made view of read-only memory")
    block.untouched("copies into read-only DLPack memory")


@cases.case
def dlpack_junk_strides_that_address_nothing():
    """Strides of a tensor without elements, or of an extent-1 axis, address nothing, and
    producers leave junk there: NumPy and cuda.core read such tensors, but a stride whose
    byte value left int64 (2**62 elements of 8 bytes, -2**63) was refused with
    OverflowError. It becomes 0; a view reads what NumPy does, deleter once."""
    block = Poisoned(1024)
    array = block.array(np.float64, (4,))
    for shape, strides in (((0, 3), (2**62, 7)), ((0, 3), (2**62, -(2**63))),
                           ((0,), (2**63 - 1,)), ((1, 3), (2**62, 1)), ((3, 1), (1, -(2**63)))):  # fmt: skip
        note((shape, strides))
        what = f"a capsule of shape {shape} with strides {strides}"
        for versioned in (True, False):
            producer = HostileProducer(array, shape=shape, strides=strides, versioned=versioned)
            view = StridedMemoryView.from_dlpack(producer, -1)
            check_view(view, what)
            check(view.shape == shape and view.ptr == array.ctypes.data, f"{what}: {view}")
            unused = 0 in shape  # with extent-1 axes: their strides are never used
            expected = as_strided(array, shape, tuple(0 if unused or e == 1 else 8 * s
                                                      for e, s in zip(shape, strides)))  # fmt: skip
            check(np.array_equal(np.from_dlpack(view), expected), f"{what}: other elements")
            del view
            _deleters_once(producer, what)
    block.untouched("imports of junk strides that address nothing")


@cases.case
def dlpack_byte_offset_is_honoured():
    """DECISIONS 13: the view starts at data + byte_offset."""
    block = Poisoned(1024)
    array = block.array(np.float64, (6,), offset=24)
    producer = HostileProducer(array, byte_offset=24)
    view = StridedMemoryView.from_dlpack(producer, -1)
    check(view.ptr == array.ctypes.data, f"ptr {view.ptr:#x}, expected {array.ctypes.data:#x}")
    check(np.array_equal(np.from_dlpack(view), array), "byte_offset read the wrong elements")


# ------------------------------------------------------------------ DLPack 1.3's exchange API
def _exchange_type(module, managed=None, dltensor=None, bases=(), attributes=None):
    """A tensor type in ``module`` whose ``__dlpack_c_exchange_api__`` table holds these
    Python functions (``fn(obj, out)`` returning the C status) as ctypes callbacks."""
    import ctypes

    from layoutkit.interop import dlpack, exchange

    from_py = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)
    stream = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.c_void_p)
    callbacks = [from_py(managed or (lambda obj, out: -1)),
                 from_py(dltensor) if dltensor else None, stream(lambda *args: 0)]  # fmt: skip
    at = [ctypes.cast(c, ctypes.c_void_p).value if c else 0 for c in callbacks]
    table = ctypes.create_string_buffer(exchange._API.size)
    exchange._API.pack_into(table, 0, 1, 3, 0, 0, at[0], 0, at[1], at[2])
    name = ctypes.create_string_buffer(b"dlpack_exchange_api\0")
    capsule = dlpack._new_capsule(ctypes.addressof(table), ctypes.addressof(name), None)
    kind = type("Tensor", bases, {"__dlpack_c_exchange_api__": capsule,
                                  "_keep": (callbacks, table, name), **(attributes or {})})  # fmt: skip
    kind.__module__ = module
    return kind


@cases.case
def exchange_api_null_shape_or_null_managed_tensor():
    """A borrowed DLTensor with dimensions but a NULL shape (torch's path), and a managed
    tensor pointer left NULL with success reported: refused, not read at address 0; a
    look-alike in a module named torch is no torch tensor (no AttributeError)."""
    from layoutkit.interop import exchange
    from layoutkit.interop._native import WRITABLE_MEMORY

    block = Poisoned(1024)

    def null_shape(obj, out):
        exchange._TENSOR.pack_into(WRITABLE_MEMORY, out,
                                   block.address, 1, 0, 2, *FLOAT64, 0, 0, 0)  # fmt: skip
        return 0

    def null_managed(obj, out):
        exchange._POINTER.pack_into(WRITABLE_MEMORY, out, 0)
        return 0

    import sys
    import types

    # torch's own tensors take the borrowed path: a stand-in torch module, for this case only
    real = sys.modules.get("torch")
    torch = sys.modules["torch"] = types.ModuleType("torch")
    torch.Tensor = _exchange_type("torch", None, null_shape, attributes={
        "requires_grad": False, "is_conj": lambda self: False, "is_neg": lambda self: False,
        "untyped_storage": lambda self: object(),
    })  # fmt: skip
    try:
        for what, kind in (
            ("a borrowed DLTensor with ndim 2 and a NULL shape", torch.Tensor),
            ("a NULL managed tensor reported as success", _exchange_type("lookalike", null_managed)),
            # not a torch.Tensor: its attributes (requires_grad, ...) are not read
            ("a look-alike torch type", _exchange_type("torch", None, null_shape)),
        ):  # fmt: skip
            refused(StridedMemoryView.from_dlpack, kind(), -1, what=what, classes=(BufferError,))
    finally:
        if real is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = real
    block.untouched("exchange API imports")


# ------------------------------------------------------------------ hypothesis: random fields
_NUMPY_DTYPES = {(0, 8): "i1", (0, 16): "i2", (0, 32): "i4", (0, 64): "i8", (1, 8): "u1",
                 (1, 16): "u2", (1, 32): "u4", (1, 64): "u8", (2, 16): "f2", (2, 32): "f4",
                 (2, 64): "f8", (5, 64): "c8", (5, 128): "c16", (6, 8): "b1"}  # fmt: skip


@st.composite
def capsule_fields(draw, block):
    """Random DLPack fields: mostly a valid tensor inside ``block``, a few fields hostile."""
    code, bits = draw(st.sampled_from(sorted(_NUMPY_DTYPES)))
    lanes = 1
    ndim = draw(st.integers(0, 4))
    shape = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
    strides = draw(st.one_of(st.none(), st.lists(st.integers(-5, 5), min_size=ndim,
                                                 max_size=ndim)))  # fmt: skip
    fields = dict(
        data=block.address + 8 * draw(st.integers(0, 64)),
        byte_offset=draw(st.sampled_from([0, 0, 8, 16, 40])),
        shape=shape, strides=strides, dtype=(code, bits, lanes), ndim=None,
        device=(1, 0), flags=draw(st.sampled_from([0, 0, 1])), versioned=draw(st.booleans()),
        major=1,
    )  # fmt: skip
    huge = st.sampled_from([2**31, 2**32, 2**61 - 1, 2**62, 2**63 - 1, -(2**63), -1, -(2**62)])
    hostile = {
        "data": st.one_of(st.sampled_from([0, 8, 2**63, 2**64 - 8, 2**64 - 1]),
                          st.integers(0, 2**64 - 1)),
        "byte_offset": st.one_of(st.sampled_from([1, 3, 2**63, 2**64 - 8, 2**64 - 1]),
                                 st.integers(0, 2**64 - 1)),
        "shape[i]": st.one_of(huge, st.integers(-3, 10)),
        "strides[i]": st.one_of(huge, st.integers(-(2**63), 2**63 - 1)),
        "ndim": st.one_of(st.integers(-3, 8), st.sampled_from([64, 65, 2**31 - 1, -(2**31)])),
        "dtype": st.tuples(st.integers(0, 255), st.sampled_from([0, 1, 2, 4, 6, 8, 12, 16, 32,
                           64, 128, 255]), st.sampled_from([0, 1, 2, 4, 65535])),
        "device": st.tuples(st.sampled_from([0, 1, 2, 3, 4, 13, 99, -1]), st.integers(-1, 3)),
        "flags": st.integers(0, 2**64 - 1),
        "major": st.sampled_from([0, 2, 255]),
    }  # fmt: skip
    for key in draw(st.lists(st.sampled_from(sorted(hostile)), max_size=2)):
        value = draw(hostile[key])
        if key.endswith("[i]"):
            name = key[:-3]
            if fields[name]:
                fields[name] = list(fields[name])
                fields[name][draw(st.integers(0, len(fields[name]) - 1))] = value
        else:
            fields[key] = value
    return fields


def _make_producer(fields):
    """A producer with exactly ``fields`` (the array it is given only fills defaults)."""
    fields = dict(fields)
    shape = fields.pop("shape")
    return HostileProducer(np.zeros(1), shape=shape, **fields)


def _oracle(fields, block):
    """NumPy's reading of a valid CPU tensor whose bytes lie inside ``block``, or None."""
    key = tuple(fields["dtype"][:2])
    if (fields["dtype"][2] != 1 or key not in _NUMPY_DTYPES or fields["device"][0] != 1
            or fields["major"] != 1 or not 0 <= (fields["ndim"] or 0) <= 64
            or (fields["ndim"] is not None and fields["ndim"] != len(fields["shape"]))):  # fmt: skip
        return None
    dtype = np.dtype(_NUMPY_DTYPES[key])
    shape = tuple(fields["shape"])
    if any(e < 0 for e in shape):
        return None
    strides = fields["strides"]
    if strides is None:
        strides = [int(np.prod(shape[k + 1 :])) for k in range(len(shape))]
    start = fields["data"] + fields["byte_offset"]
    if 0 in shape:
        return np.empty(shape, dtype)
    low = start + sum((e - 1) * s for e, s in zip(shape, strides) if s < 0) * dtype.itemsize
    high = start + (sum((e - 1) * s for e, s in zip(shape, strides) if s > 0) + 1) * dtype.itemsize
    if low < block.address or high > block.address + block.nbytes:
        return None
    base = block.array(np.uint8)
    first = np.ndarray((1,), dtype, buffer=base, offset=start - block.address)
    return as_strided(first, shape, tuple(s * dtype.itemsize for s in strides))


def _fuzz_capsule(data):
    block = Poisoned(1024)
    fields = data.draw(capsule_fields(block), label="fields")
    note(fields)
    producer = _make_producer(fields)
    what = f"from_dlpack of a capsule with {fields}"
    ok, view = refused_or_ok(StridedMemoryView.from_dlpack, producer, -1, what=what,
                             classes=DOCUMENTED_OR_HOSTILE)  # fmt: skip
    if ok:
        cpu = fields["device"][0] == 1
        check_view(view, what, where=cpu)
        expected = _oracle(fields, block)
        if cpu and expected is not None:
            check(view.shape == expected.shape, f"{what}: shape {view.shape}, expected "
                  f"{expected.shape}")  # fmt: skip
            if view.size:
                got = np.zeros(view.shape, expected.dtype)
                layoutkit.copy(StridedMemoryView.from_array_interface(got), view)
                # bytes, not values: NumPy's == of bools whose bytes are not 0 or 1 (random
                # memory read as kDLBool) says False for equal bytes
                check(got.tobytes() == np.ascontiguousarray(expected).tobytes(),
                      f"{what}: the view reads other elements than data + byte_offset with "
                      "these shape and strides")  # fmt: skip
            if fields["flags"] & 1 and fields["versioned"]:
                check(view.readonly, f"{what}: FLAG_READ_ONLY set, the view is writable")
    del view  # the view, or the exception whose traceback holds the consumer's frames
    _deleters_once(producer, what)
    block.untouched(what)



@cases.case
def export_arguments_are_named():
    """``__dlpack__(copy="no")`` said "copy=True", ``dl_device=5`` raised Python's "'int'
    object is not iterable" and an endless iterable as dl_device hung in tuple(): copy and
    dl_device are read by one rule each (interop/dlpack.py), naming what they got."""
    import itertools

    array = np.arange(4.0)
    for export in (StridedMemoryView.from_array_interface(array).__dlpack__,
                   layoutkit.Buffer.from_handle(array.ctypes.data, 32, owner=array).__dlpack__):  # fmt: skip
        for copy in ("no", 1.5, 1, 0, [], np.float64(1)):
            exc = refused(export, copy=copy, classes=(TypeError,))
            check("copy" in str(exc) and repr(copy) in str(exc), f"copy={copy!r}: {exc}")
        for copy in (True, np.True_):
            refused(export, copy=copy, classes=(BufferError,))
        for copy in (None, False, np.False_):
            export(copy=copy)
        for device in (5, "cpu", (1,), (1, 0, 0), ("a", 0), (1.0, 0), {1: 0},
                       itertools.count(), (True, 0)):  # fmt: skip
            note(device)
            exc = refused(export, dl_device=device, classes=(TypeError,))
            check("dl_device" in str(exc), f"dl_device={device!r}: {exc}")
        refused(export, dl_device=(2, 0), classes=(BufferError,))
        export(dl_device=(1, 0))
        export(dl_device=[np.int64(1), 0])


cases.add("fuzz_dlpack_capsules", fuzz_case(_fuzz_capsule, 250, None), timeout=300)
cases.add("fuzz_dlpack_capsules_long", fuzz_case(_fuzz_capsule, 250, 20000), timeout=1800, slow=True)


cases.export(globals())
