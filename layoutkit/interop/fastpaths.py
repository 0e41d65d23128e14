"""Producer fast paths: one table keyed by the producer's type, each entry a record reader.

A protocol reader asks an object for a generic description (a DLPack capsule, an
interface dict) and decodes it; a fast path reads the same facts the quickest documented
way the producer's own type offers:

============== ===================================================================
type           fast path
============== ===================================================================
numpy.ndarray  its attributes (``shape``, ``strides``, ``dtype``, ``flags``) and
               data pointer (see :mod:`~layoutkit.interop._native`)
torch.Tensor   DLPack 1.3's C exchange API, found on the type, read as a borrowed
               DLTensor kept alive by the tensor's storage (``torch.Tensor`` and
               ``torch.nn.Parameter`` only: a subclass's ``__dlpack__`` and
               ``__torch_function__`` are honoured, through the protocol; other types
               with ``__dlpack_c_exchange_api__`` take an owned managed tensor through
               it, which carries the read-only flag)
cupy.ndarray   its attributes (``data.ptr``, ``shape``, ``strides``, ``dtype``,
               ``__dlpack_device__()``), the current CuPy stream ordered before the
               consumer's as CuPy's ``__dlpack__`` would
jax.Array      DLPack, the route JAX documents (``__dlpack__``); read-only (JAX arrays
               are immutable), and a deleted array is refused
a view         its own record (registered by :mod:`layoutkit.memoryview`)
============== ===================================================================

An entry returns ``None`` where its preconditions fail (a dtype it does not carry, a
stream it cannot order), and the caller falls back to the protocol, whose errors are
then the ones raised. Every entry returns a checked
:class:`~layoutkit.interop.record.ImportRecord`, as the protocol readers do.

Examples
--------
>>> import numpy as np
>>> from layoutkit.interop.fastpaths import fast_record
>>> fast_record(np.arange(6.0).reshape(2, 3), -1, True).layout.shape
(2, 3)
>>> fast_record(object(), -1, True) is None
True
"""

import sys

import numpy as np

from .._driver import order_after
from .cai import driver_stream
from .dlpack import consumer_stream, import_dlpack, location_of
from .exchange import exchange_api, exchange_record
from .host import ndarray_record
from .record import ImportRecord, checked_layout

__all__ = ["fast_record", "reader_for", "register"]


def _numpy(array, stream_ptr, dlpack_only):
    if not (stream_ptr is None or stream_ptr == -1 or stream_ptr == 0):
        return None  # a stream for a CPU tensor: the protocol decides
    return ndarray_record(array, dlpack_only, final=False)  # fast_record's go through _from_record


def _torch_reader(api):
    def _torch(tensor, stream_ptr, dlpack_only):
        # torch's exchange functions ignore autograd and the lazy conjugate and negative
        # bits; __dlpack__ refuses the first two, and exports the third as if it were unset
        if tensor.requires_grad or tensor.is_conj():
            return None  # torch's own refusal
        _refuse_negative(tensor)
        # the storage, not the tensor, keeps the memory: tensor.set_() and tensor.data = ...
        # give the tensor other memory and free this one unless someone else holds it
        # (resizing the storage in place frees it under every DLPack consumer: torch's rule)
        try:
            storage = tensor.untyped_storage()
        except Exception:  # noqa: BLE001 (sparse and other layouts: torch's __dlpack__ refuses)
            return None
        return exchange_record(tensor, api, stream_ptr, storage, lambda: _torch_name(tensor))

    return _torch


def _torch_subclass_reader(torch_dlpack):
    def _torch_subclass(tensor, stream_ptr, dlpack_only):
        # a subclass may redefine __dlpack__ or __torch_function__ (which torch's own
        # __dlpack__ honours and the exchange functions bypass): the protocol decides
        if type(tensor).__dlpack__ is torch_dlpack:
            _refuse_negative(tensor)
        return None

    return _torch_subclass


def _refuse_negative(tensor):
    if tensor.is_neg():
        raise BufferError(
            "the torch tensor has its negative bit set (its memory holds the values "
            "negated); call tensor.resolve_neg() first"
        )


def _torch_name(tensor):
    """How errors name a torch tensor: its dtype, layout and device (formatted on error)."""
    try:
        return f"torch.Tensor (dtype {tensor.dtype}, layout {tensor.layout}, device {tensor.device})"
    except Exception:  # noqa: BLE001 (a name for a message only)
        return "torch.Tensor"


def _exchange_reader(api):
    def _exchange(obj, stream_ptr, dlpack_only):
        return exchange_record(obj, api, stream_ptr, False, None)

    return _exchange


def _cupy(array, stream_ptr, dlpack_only):
    stream = consumer_stream(stream_ptr)
    if stream is None:
        return None  # ambiguous: the protocol raises

    ptr = array.data.ptr
    dtype = array.dtype
    layout = checked_layout(array.shape, array.strides, dtype.itemsize, True, ptr, "CuPy array")
    device = array.__dlpack_device__()
    location = location_of(device)
    if stream != -1 and device[0] == 2:  # kDLCUDA: CuPy's current stream before the consumer's
        order_after(
            driver_stream(stream), driver_stream(sys.modules["cupy"].cuda.get_current_stream().ptr)
        )
    return ImportRecord(ptr, layout, dtype, location, False, array, array, tuple(device))


def _jax(array, stream_ptr, dlpack_only):
    # JAX arrays are immutable (one buffer may back several arrays and compiled constants):
    # their views are read-only, as numpy.asarray(array) is. JAX exports legacy capsules,
    # which cannot say so.
    is_deleted = getattr(type(array), "is_deleted", None)
    if is_deleted is not None and _deleted(is_deleted, array):
        raise BufferError(
            f"the JAX array ({type(array).__name__}) was deleted (Array.delete() or a "
            "donation): it has no memory to view"
        )
    record = import_dlpack(array, stream_ptr)
    return record if record.readonly else record._replace(readonly=True)


def _deleted(is_deleted, array):
    try:
        return is_deleted(array) is True
    except Exception:  # noqa: BLE001 (the protocol's own errors are then raised)
        return False


# id(kind) -> (kind, reader). Keyed by identity, never by the type's own __eq__ and
# __hash__: a metaclass may make a type hash as numpy.ndarray and equal it, and a reader
# given another type's objects reads raw memory (the NumPy one reads the data pointer and
# flags at id(obj) + offset). The entry holds the type, so its id is not reused meanwhile.
_registered = {id(np.ndarray): (np.ndarray, _numpy)}
_readers = dict(_registered)


def register(kind, reader):
    """Make ``reader(obj, stream_ptr, dlpack_only)`` the fast path of exactly type ``kind``."""
    _registered[id(kind)] = _readers[id(kind)] = (kind, reader)


def reader_for(kind):
    """The fast-path reader of producer type ``kind``, or ``None`` (cached per type)."""
    entry = _readers.get(id(kind))
    if entry is not None and entry[0] is kind:
        return entry[1]
    package = (getattr(kind, "__module__", None) or "").partition(".")[0]
    if package == "cupy" and kind is getattr(sys.modules.get("cupy"), "ndarray", None):
        reader = _cupy  # CuPy's own class only: a look-alike's attributes are not trusted
    elif package in ("jax", "jaxlib") and hasattr(kind, "__dlpack__"):
        reader = _jax
    elif (torch := _torch_of(kind)) is not None and kind is not torch.Tensor and kind is not (
        getattr(getattr(torch, "nn", None), "Parameter", None)
    ):
        # a subclass's __dlpack__ / __torch_function__ are honoured: the protocol reads it
        reader = _torch_subclass_reader(torch.Tensor.__dlpack__)
    elif (api := exchange_api(kind)) is not None:
        # torch's own tensors only are borrowed: a look-alike's attributes are not trusted
        reader = (_exchange_reader if torch is None else _torch_reader)(api)
    else:
        reader = None
    if len(_readers) >= 256:
        _readers.clear()
        _readers.update(_registered)
    _readers[id(kind)] = (kind, reader)
    return reader


def _torch_of(kind):
    """The torch module where ``kind`` is ``torch.Tensor`` or a subclass of it, else None."""
    torch = sys.modules.get("torch")
    tensor_type = getattr(torch, "Tensor", None) if torch is not None else None
    # identity, not ``in`` (which compares with ==: a metaclass may make a type equal torch.Tensor)
    if not isinstance(tensor_type, type) or not any(
        base is tensor_type for base in getattr(kind, "__mro__", ())
    ):
        return None
    return torch


def fast_record(obj, stream_ptr, dlpack_only):
    """``obj``'s record through its type's fast path, or ``None`` for the protocols.

    ``dlpack_only``: the caller asked for DLPack, so a dtype DLPack cannot carry is left
    to the protocol (which refuses it).
    """
    kind = type(obj)
    entry = _readers.get(id(kind))
    reader = entry[1] if entry is not None and entry[0] is kind else reader_for(kind)
    return None if reader is None else reader(obj, stream_ptr, dlpack_only)
