"""Every door a host view can come in by, each giving a view of known contents.

:func:`open_door` returns a :class:`Door`: the view, a NumPy array over the same memory
(``expected`` holds the values the view must have) and, for DLPack capsule doors, the
:class:`~helpers.producers.Producer` whose deleter count tells whether it ran exactly once.
Host memory only; the GPU doors are in ``tests/test_fuzz_cuda.py``.
"""

import ctypes

import numpy as np

from helpers.producers import Producer
from layoutkit import HostMemoryResource, StridedLayout, StridedMemoryView

SHAPE = (4, 6)
DTYPE = np.dtype(np.float64)


class InterfaceOnly:
    """Exposes an array only through ``__array_interface__`` (no fast path applies)."""

    def __init__(self, array):
        self._array = array
        self.__array_interface__ = dict(array.__array_interface__)


class DLPackOnly:
    """Exposes an ndarray only through its DLPack methods (not the ndarray fast path)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class Door:
    """A view made through one door, with what is known about its memory."""

    def __init__(self, name, view, array, producer=None, buffer=None, keep=()):
        self.name = name
        self.view = view
        self.array = array  # ndarray over the view's memory (shape and strides of the view)
        self.expected = array.copy()
        self.producer = producer
        self.buffer = buffer  # the Buffer a from_buffer door was made from
        self.keep = keep


def _values(shape=SHAPE, dtype=DTYPE):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) + 1


def _from_host_resource():
    data = _values()
    buffer = HostMemoryResource().allocate(data.nbytes)
    array = np.ndarray(
        data.shape, data.dtype, buffer=(ctypes.c_char * data.nbytes).from_address(buffer.ptr)
    )
    array[...] = data
    layout = StridedLayout.dense(data.shape, data.itemsize)
    view = StridedMemoryView.from_buffer(buffer, layout, data.dtype)
    return Door("from_buffer(host resource)", view, array, buffer=buffer)


def _sub_view():
    door = _from_host_resource()
    view = door.view.view(door.view.layout[::2, 1:])
    return Door("view.view(layout[::2, 1:])", view, door.array[::2, 1:], buffer=door.buffer)


def _array_interface_ndarray():
    array = _values()
    return Door(
        "from_array_interface(ndarray)", StridedMemoryView.from_array_interface(array), array
    )


def _array_interface_object():
    array = _values()[:, ::-1]
    view = StridedMemoryView.from_array_interface(InterfaceOnly(array))
    return Door("from_array_interface(__array_interface__ object)", view, array)


def _buffer_protocol():
    storage = bytearray(_values().tobytes())
    view = StridedMemoryView.from_array_interface(storage)
    array = np.frombuffer(storage, np.uint8)
    return Door("from_array_interface(bytearray)", view, array, keep=(storage,))


def _dlpack_ndarray():
    array = _values()
    return Door("from_dlpack(ndarray, -1)", StridedMemoryView.from_dlpack(array, -1), array)


def _dlpack_protocol():
    array = _values()[1:, ::2]
    view = StridedMemoryView.from_dlpack(DLPackOnly(array), -1)
    return Door("from_dlpack(NumPy's capsule)", view, array)


def _dlpack_capsule(versioned=True):
    array = _values()
    producer = Producer(array, versioned=versioned, legacy_only=not versioned)
    view = StridedMemoryView.from_dlpack(producer, -1)
    kind = "versioned" if versioned else "legacy"
    return Door(f"from_dlpack(ctypes {kind} capsule)", view, array, producer=producer)


def _any_interface():
    array = _values().T
    return Door(
        "from_any_interface(ndarray, -1)", StridedMemoryView.from_any_interface(array, -1), array
    )


DOORS = {
    "array_interface_ndarray": _array_interface_ndarray,
    "array_interface_object": _array_interface_object,
    "buffer_protocol": _buffer_protocol,
    "dlpack_ndarray": _dlpack_ndarray,
    "dlpack_numpy_capsule": _dlpack_protocol,
    "dlpack_versioned_capsule": lambda: _dlpack_capsule(True),
    "dlpack_legacy_capsule": lambda: _dlpack_capsule(False),
    "any_interface": _any_interface,
    "from_buffer": _from_host_resource,
    "view_of_view": _sub_view,
}


def open_door(name):
    """The :class:`Door` called ``name`` (a key of :data:`DOORS`)."""
    return DOORS[name]()


def scratch_like(view):
    """A fresh writable host view with ``view``'s shape and dtype (and its array)."""
    array = np.zeros(view.shape, view.dtype)
    return StridedMemoryView.from_array_interface(array), array
