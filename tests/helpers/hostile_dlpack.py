"""DLPack producers with hostile capsules, built on the ctypes structures of
:mod:`helpers.producers`: any field value, wrong capsule names, deleters that raise or are
NULL, ``ndim`` that disagrees with the shape, and ``__dlpack__`` that returns junk.

:class:`HostileProducer` keeps every capsule it hands out, so a test can tell consumed
capsules (renamed ``used_dltensor*``) from unconsumed ones and check that the deleter ran
once per consumed capsule, never for an unconsumed one.
"""

import ctypes

from helpers.hostile_checks import HostileError
from helpers.producers import DELETER, Producer, new_capsule

_capsule_name = ctypes.PyDLL(None, handle=ctypes.pythonapi._handle).PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]


class HostileProducer(Producer):
    """A :class:`~helpers.producers.Producer` whose capsule can be made hostile.

    Parameters (besides Producer's)
    ----------
    ndim : int, optional
        Written into the tensor's ``ndim`` after the shape (shape and strides arrays get
        ``min(ndim, 64)`` entries, padded with 1, so a reader of up to 64 entries stays in
        bounds).
    null_shape : bool
        Set the shape pointer to NULL.
    tensor_device : tuple, optional
        The device written into the tensor (``__dlpack_device__`` still says ``device``).
    name : bytes or None or "default"
        The capsule name (None: a NULL name).
    deleter : {"count", "raise", "null"}
        Count calls; count and then raise :class:`HostileError`; or a NULL deleter.
    returns : callable, optional
        ``__dlpack__`` returns ``returns(self)`` instead of a capsule.
    """

    def __init__(self, array, *, ndim=None, null_shape=False, tensor_device=None,
                 name="default", deleter="count", returns=None, shape=None, strides="array",
                 **kwargs):  # fmt: skip
        self.deleter_kind = deleter
        shape = array.shape if shape is None else tuple(shape)
        if strides == "array":
            strides = tuple(s // array.itemsize for s in array.strides)
        entries = max(len(shape), min(ndim if ndim is not None else 0, 64))
        padded_shape = tuple(shape) + (1,) * (entries - len(shape))
        padded_strides = (
            None if strides is None else tuple(strides) + (1,) * (entries - len(strides))
        )
        super().__init__(array, shape=padded_shape, strides=padded_strides, **kwargs)
        tensor = self.managed.dl_tensor
        tensor.ndim = len(shape) if ndim is None else ndim
        if null_shape:
            tensor.shape = None
        if tensor_device is not None:
            tensor.device.device_type, tensor.device.device_id = tensor_device
        if deleter == "null":
            self.managed.deleter = DELETER()
        self.name = name
        self.returns = returns
        self.capsules = []

    def _on_delete(self, address):
        self.deleted += 1
        if self.deleter_kind == "raise":
            raise HostileError("the producer's deleter raises")

    def __dlpack__(self, stream=None, **kwargs):
        if self.legacy_only and "max_version" in kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.requests.append(dict(stream=stream, **kwargs))
        if self.returns is not None:
            return self.returns(self)
        if self.name == "default":
            name = b"dltensor_versioned" if self.versioned else b"dltensor"
        else:
            name = self.name
        self._name_bytes = name  # the capsule keeps a pointer to it
        capsule = new_capsule(ctypes.addressof(self.managed), name, None)
        self.capsules.append((capsule, name))
        return capsule

    def consumed(self):
        """How many of the capsules handed out were consumed (renamed ``used_...``)."""
        count = 0
        for capsule, given in self.capsules:
            name = _capsule_name(capsule)
            if name != given and name is not None and name.startswith(b"used_"):
                count += 1
        return count


class SameCapsule:
    """A host producer that hands out one capsule object on every call."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)
