"""Hostile stream arguments, at every door that takes one, on host memory (no driver).

The rule: a stream argument is ``None``, an int handle in ``[0, 2**64)`` (``-1``, no
synchronisation, where DLPack allows it: ``stream_ptr`` and ``__dlpack__(stream=)``), or
an object naming one (``__cuda_stream__() -> (version, handle)``, ``.cuda_stream``,
``.ptr``, ``.handle``). Anything else is refused with a ``TypeError`` / ``ValueError``
before anything is imported, allocated, copied or freed, also where a host operation
would ignore the stream. Before, host doors ignored the stream unread: ``Buffer.close
(stream="x")`` freed the memory, ``copy(dst, src, stream=1.5)`` copied, and a
``__cuda_stream__`` that raised escaped as its own exception class, and one of a
protocol version other than 0 was read as if it were version 0.
"""

import functools

import numpy as np
from helpers.hostile import Cases, note
from helpers.hostile_checks import Poisoned, check, refused

import layoutkit
from layoutkit import Buffer, HostMemoryResource, StridedMemoryView

cases = Cases(__name__)


class ProtocolStream:
    """``__cuda_stream__`` returning ``value`` (or raising it, for an exception)."""

    def __init__(self, value):
        self.value = value

    def __cuda_stream__(self):
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value

    def __repr__(self):
        return f"ProtocolStream({self.value!r})"


class RaisingEquality:
    """A stream-like object whose comparisons and truth raise (the doors compare to -1)."""

    def __eq__(self, other):
        raise RuntimeError("no comparisons")

    __hash__ = None

    def __bool__(self):
        raise RuntimeError("no truth")


BAD_STREAMS = {
    "str": "x",
    "float": 1.5,
    "numpy_float": np.float32(1),
    # int() of NumPy's bool and of a 0-d float array (the handle objects' fallback) gave 1
    "numpy_bool": np.True_,
    "numpy_float_array": np.array(1.5),
    "bool": True,
    "bytes": b"\x00",
    "list": [1],
    "object": object(),
    "negative": -2,
    "two_64": 2**64,
    "two_70": 2**70,
    "numpy_negative": np.int64(-2),
    "protocol_short_tuple": ProtocolStream((0,)),
    "protocol_long_tuple": ProtocolStream((0, 5, 6)),
    "protocol_none": ProtocolStream(None),
    "protocol_str_handle": ProtocolStream((0, "x")),
    "protocol_negative_handle": ProtocolStream((0, -1)),
    "protocol_huge_handle": ProtocolStream((0, 2**64)),
    # only version 0 exists; a handle read from another version's tuple went unchecked
    "protocol_version_1": ProtocolStream((1, 5)),
    "protocol_version_false": ProtocolStream((False, 5)),
    "protocol_version_float": ProtocolStream((0.0, 5)),
    "protocol_raises_runtime": ProtocolStream(RuntimeError("boom")),
    "protocol_raises_key": ProtocolStream(KeyError("k")),
    "protocol_raises_attribute": ProtocolStream(AttributeError("a")),
    "raising_equality": RaisingEquality(),
}
NO_MINUS_ONE = {"minus_one": -1}  # a handle nowhere but in DLPack's stream arguments


class Tracked(HostMemoryResource):
    def __init__(self):
        super().__init__()
        self.freed = []

    def deallocate(self, ptr, size, stream=None):
        self.freed.append(ptr)
        super().deallocate(ptr, size, stream)


def _close(stream):
    resource = Tracked()
    buffer = resource.allocate(64)
    ptr = buffer.ptr
    refused(buffer.close, stream=stream, what=f"Buffer.close(stream={stream!r})")
    check(not buffer.is_closed and not resource.freed, f"close(stream={stream!r}) freed")
    buffer.close()
    check(resource.freed == [ptr], "the real close did not free")


def _copies(stream):
    block = Poisoned(64)
    dst = block.array(np.float64, (8,))
    src = np.arange(8.0)
    doors = {
        "copy(view, view)": lambda: layoutkit.copy(StridedMemoryView.from_array_interface(dst),
                                                   StridedMemoryView.from_array_interface(src),
                                                   stream=stream),
        "copy(ndarray, ndarray)": lambda: layoutkit.copy(dst, src, stream=stream),
        "view.copy_from": lambda: StridedMemoryView.from_array_interface(dst).copy_from(
            StridedMemoryView.from_array_interface(src), stream=stream),
        "view.copy_to": lambda: StridedMemoryView.from_array_interface(src).copy_to(
            StridedMemoryView.from_array_interface(dst), stream=stream),
        "buffer.copy_from": lambda: Buffer.from_handle(block.address, 64, owner=block).copy_from(
            Buffer.from_handle(src.ctypes.data, 64, owner=src), stream=stream),
        "buffer.fill": lambda: Buffer.from_handle(block.address, 64, owner=block).fill(
            7, stream=stream),
        "empty buffer.fill": lambda: Buffer.from_handle(block.address, 0, owner=block).fill(
            7, stream=stream),
    }  # fmt: skip
    for name, door in doors.items():
        note((name, stream))
        refused(door, what=f"{name} with stream={stream!r}")
        block.untouched(f"{name} with stream={stream!r}")


def _allocations(stream):
    resource = Tracked()
    refused(resource.allocate, 64, stream, what=f"HostMemoryResource.allocate(64, {stream!r})")
    check(not resource._storage, "allocated despite the stream")
    buffer = resource.allocate(64)
    refused(buffer.copy_to, stream=stream, what=f"copy_to(stream={stream!r})")
    check(len(resource._storage) == 1, "copy_to allocated a destination despite the stream")
    array = np.zeros(8)
    refused(Buffer.from_handle, array.ctypes.data, 64, mr=Tracked(), stream=stream,
            what=f"from_handle(..., mr=, stream={stream!r})")  # fmt: skip


def _imports(stream):
    array = np.arange(6.0)

    class InterfaceOnly:
        __array_interface__ = array.__array_interface__

    doors = {
        "from_dlpack(ndarray)": lambda: StridedMemoryView.from_dlpack(array, stream),
        "from_any_interface(ndarray)": lambda: StridedMemoryView.from_any_interface(array, stream),
        "from_any_interface(bytearray)": lambda: StridedMemoryView.from_any_interface(
            bytearray(8), stream),
        "from_any_interface(__array_interface__)": lambda: StridedMemoryView.from_any_interface(
            InterfaceOnly(), stream),
        "view.__dlpack__": lambda: StridedMemoryView.from_array_interface(array).__dlpack__(
            stream=stream),
        "buffer.__dlpack__": lambda: Buffer.from_handle(array.ctypes.data, 8, owner=array)
            .__dlpack__(stream=stream),
    }  # fmt: skip
    for name, door in doors.items():
        note((name, stream))
        refused(door, what=f"{name} with stream {stream!r}")


for _name, _stream in BAD_STREAMS.items():
    cases.add(f"close_{_name}", functools.partial(_close, _stream))
    cases.add(f"copies_{_name}", functools.partial(_copies, _stream))
    cases.add(f"allocations_{_name}", functools.partial(_allocations, _stream))
    cases.add(f"imports_{_name}", functools.partial(_imports, _stream))
for _name, _stream in NO_MINUS_ONE.items():
    cases.add(f"close_{_name}", functools.partial(_close, _stream))
    cases.add(f"copies_{_name}", functools.partial(_copies, _stream))


@cases.case
def good_streams_still_work_on_host():
    """None, handles, -1 (DLPack doors) and protocol objects are accepted; host copies
    ignore them."""
    array = np.arange(4.0)
    for stream in (None, 0, 7, np.uint64(5), ProtocolStream((0, 9)),
                   ProtocolStream((np.int64(0), 9))):
        dst = np.zeros(4)
        layoutkit.copy(dst, array, stream=stream)
        check(dst.tolist() == array.tolist(), f"copy with stream {stream!r}")
        check(StridedMemoryView.from_dlpack(array, stream).shape == (4,), f"from_dlpack {stream!r}")
        buffer = HostMemoryResource().allocate(8)
        buffer.close(stream=stream)
        check(buffer.is_closed, "close with a good stream")
    for stream in (-1, np.int64(-1)):
        StridedMemoryView.from_any_interface(array, stream)
        Buffer.from_handle(array.ctypes.data, 8, owner=array).__dlpack__(stream=stream)


cases.export(globals())
