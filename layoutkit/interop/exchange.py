"""DLPack 1.3's C exchange API (``__dlpack_c_exchange_api__``): import through it, and export.

A tensor type may carry, as the class attribute ``__dlpack_c_exchange_api__``, a
``"dlpack_exchange_api"`` capsule pointing at a static ``DLPackExchangeAPI`` table of C
functions (``dlpack.h``): ``managed_tensor_allocator``,
``managed_tensor_from_py_object_no_sync``, ``managed_tensor_to_py_object_no_sync``,
``dltensor_from_py_object_no_sync`` (may be NULL) and ``current_work_stream``. torch
2.10 and newer provide it.

Import (:func:`exchange_api`, :func:`exchange_record`): the table is read once per type.
``dltensor_from_py_object_no_sync`` fills a DLTensor in a per-thread scratch struct
without any Python-level protocol work; the record's owner is the tensor object, which
keeps its memory alive as an ndarray does. Where that function is NULL,
``managed_tensor_from_py_object_no_sync`` gives an owned tensor whose deleter runs once.
The functions do not synchronise: unless the consumer passes ``-1``, the producer's
``current_work_stream`` of the tensor's device is ordered before the consumer's stream
(an event recorded on the one, waited on by the other), as ``__dlpack__(stream=)`` would.

Export (:func:`exchange_capsule`): ``StridedMemoryView.__dlpack_c_exchange_api__``. The
table's functions call ctypes callbacks into this module, so C consumers can take views
without ``__dlpack__``; they cost a Python call each (no "C speed" without a compiled
extension). As ``dlpack.h`` asks, a failing call returns -1 with a Python exception set
(the caller holds the GIL): each function is a small native trampoline, compiled by
llvmlite when the capsule is first read, which raises the exception its callback
reports (a ctypes callback cannot return one to C). ``current_work_stream`` gives NULL:
a view has no stream of its own.

Examples
--------
>>> from layoutkit import StridedMemoryView
>>> from layoutkit.interop._native import capsule_fields, c_string_is
>>> _, name = capsule_fields(StridedMemoryView.__dlpack_c_exchange_api__)
>>> c_string_is(name, b"dlpack_exchange_api\\0")
True
"""

import contextlib
import ctypes
import struct
import threading

from .._driver import order_after
from . import dlpack
from ._native import MEMORY, WRITABLE_MEMORY, CapsuleType, c_string_is, capsule_fields
from ._packer import compile_trampolines
from .cai import driver_stream
from .dlpack import fields_record, kDLCPU

__all__ = ["ExchangeAPI", "ExchangeCapsule", "exchange_api", "exchange_capsule", "exchange_record"]

# DLPackExchangeAPI: header {version {major, minor}, prev_api}, then five function pointers
_API = struct.Struct("@IIP5P")
_TENSOR = struct.Struct("@" + dlpack._TENSOR_FORMAT)  # DLTensor
_POINTER = struct.Struct("@P")
_NAME = b"dlpack_exchange_api\0"

_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)
_STREAM = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.c_void_p)


class ExchangeAPI:
    """A producer type's exchange table, with its functions bound for calls from Python.

    Attributes
    ----------
    version : tuple
        ``(major, minor)`` the producer reports.
    dltensor_from_py_object : callable or None
        ``dltensor_from_py_object_no_sync(obj, DLTensor*)``; ``None`` where NULL.
    managed_tensor_from_py_object : callable
        ``managed_tensor_from_py_object_no_sync(obj, DLManagedTensorVersioned**)``.
    current_work_stream : callable
        ``current_work_stream(device_type, device_id, void**)``.
    """

    __slots__ = (
        "version", "dltensor_from_py_object", "managed_tensor_from_py_object",
        "current_work_stream", "_capsule",
    )  # fmt: skip


_apis = {}  # id(kind) -> (kind, api): by identity, as fastpaths._readers (see there)


def exchange_api(kind):
    """The :class:`ExchangeAPI` of tensor type ``kind``, or ``None`` (cached per type).

    ``None`` when the type has no ``__dlpack_c_exchange_api__`` capsule named
    ``"dlpack_exchange_api"``, when its major version is not 1, or when a function
    this module needs is NULL: the caller then uses ``__dlpack__``.
    """
    entry = _apis.get(id(kind))
    if entry is not None and entry[0] is kind:
        return entry[1]
    api = _read_api(getattr(kind, "__dlpack_c_exchange_api__", None))
    if len(_apis) >= 256:
        _apis.clear()
    _apis[id(kind)] = (kind, api)
    return api


def _read_api(capsule):
    if type(capsule) is not CapsuleType:
        return None
    address, name = capsule_fields(capsule)
    if not (address and name and c_string_is(name, _NAME)):
        return None
    major, minor, _prev, _allocator, managed_from, _to_py, dltensor_from, stream = (
        _API.unpack_from(MEMORY, address)
    )
    if major != 1 or not (managed_from and stream):
        return None
    api = ExchangeAPI()
    api.version = (major, minor)
    api.dltensor_from_py_object = _FROM_PY(dltensor_from) if dltensor_from else None
    api.managed_tensor_from_py_object = _FROM_PY(managed_from)
    api.current_work_stream = _STREAM(stream)
    api._capsule = capsule  # the table lives as long as the producer's module; keep its capsule
    return api


class _Scratch(threading.local):
    """Per-thread out-parameters for exchange calls (another thread may call meanwhile)."""

    def __init__(self):
        self.tensor = ctypes.create_string_buffer(_TENSOR.size)
        self.tensor_address = ctypes.addressof(self.tensor)
        self.pointer = ctypes.c_void_p()
        self.pointer_address = ctypes.addressof(self.pointer)


_scratch = _Scratch()
def exchange_record(obj, api, stream_ptr, borrow, what=None):
    """Import ``obj`` through its type's exchange ``api``: an :class:`ImportRecord`.

    Parameters
    ----------
    obj : object
        An instance of the type ``api`` was read from.
    api : ExchangeAPI
    stream_ptr : int, None or stream object
        The consumer stream (``-1``: no ordering), with the rules of ``__dlpack__``.
    borrow : bool or object
        Read a borrowed DLTensor (``dltensor_from_py_object_no_sync``): for producers whose
        tensors are always writable and whose memory something keeps while alive (torch).
        The record's owner is ``borrow`` itself, or ``obj`` where it is ``True``.
        Otherwise (``False``, or where that function is NULL) take an owned managed
        tensor, which also carries the read-only and sub-byte flags.
    what : callable or None
        Makes the tensor's name for an error (default: its type's name).

    Raises
    ------
    BufferError
        For an ambiguous stream, an unsupported device, a producer that reports a
        failure without an exception, or a producer whose function raised anything but
        ``TypeError``, ``ValueError`` or ``BufferError`` (torch's ``RuntimeError`` for a
        dtype, layout or device DLPack cannot carry): chained, naming the tensor. Those
        three propagate, as they do from ``__dlpack__``.
    """
    scratch = _scratch
    from_py = api.dltensor_from_py_object
    if borrow is not False and from_py is not None:
        address = scratch.tensor_address
        try:
            failed = from_py(obj, address)
        except (TypeError, ValueError, BufferError):
            raise
        except Exception as exc:
            raise _producer_failure(obj, what, "dltensor_from_py_object_no_sync", exc) from exc
        if failed:
            raise BufferError(f"{_name(obj, what)}: dltensor_from_py_object_no_sync failed")
        data, device_type, device_id, ndim, code, bits, lanes, shape_at, strides_at, offset = (
            _TENSOR.unpack_from(MEMORY, address)
        )
        shape, strides = dlpack.read_extents(
            ndim, shape_at, strides_at, lambda: f"{type(obj).__name__} tensor")
        device = (device_type, device_id)
        if device_type != kDLCPU or not (stream_ptr is None or stream_ptr == -1 or stream_ptr == 0):
            _order_streams(api, device, stream_ptr)
        return fields_record(
            data, offset, device, (code, bits, lanes), False, shape, strides, False, obj,
            obj if borrow is True else borrow,
        )  # fmt: skip
    try:
        failed = api.managed_tensor_from_py_object(obj, scratch.pointer_address)
    except (TypeError, ValueError, BufferError):
        raise
    except Exception as exc:
        raise _producer_failure(obj, what, "managed_tensor_from_py_object_no_sync", exc) from exc
    if failed:
        raise BufferError(f"{_name(obj, what)}: managed_tensor_from_py_object_no_sync failed")
    (address,) = _POINTER.unpack_from(MEMORY, scratch.pointer_address)
    tensor = dlpack.versioned_tensor(address, f"{type(obj).__name__}'s exchange API result")
    try:
        _order_streams(api, tensor.device, stream_ptr)
    except BaseException:
        tensor._free()
        raise
    return dlpack.tensor_record(tensor, obj)


def _name(obj, what):
    return type(obj).__name__ if what is None else what()


def _producer_failure(obj, what, function, exc):
    """The BufferError for a producer's own exception (its first line: torch's add a C++ trace)."""
    message = str(exc).strip().partition("\n")[0]
    return BufferError(f"{_name(obj, what)}: {function} raised {type(exc).__name__}: {message}")


def _order_streams(api, device, stream_ptr):
    """Order the producer's current work stream before the consumer's, unless ``-1``."""
    device_type = device[0]
    if device_type == kDLCPU and (stream_ptr is None or stream_ptr == -1 or stream_ptr == 0):
        return
    consumer = dlpack.producer_stream(device_type, stream_ptr)  # the __dlpack__ rules
    if consumer is None or consumer == -1 or device_type != dlpack.kDLCUDA:
        return
    scratch = _scratch
    if api.current_work_stream(device_type, device[1], scratch.pointer_address):
        raise BufferError("current_work_stream failed")
    producer = scratch.pointer.value or 0
    order_after(driver_stream(consumer), driver_stream(producer))


# ----------------------------------------------------------------------------------- export
# The table's functions are native trampolines (:func:`~._packer.compile_trampolines`)
# around these callbacks, each of which takes one more argument: where to store the
# exception it fails with, so that the trampoline raises it in the C caller.
_ALLOCATOR = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.c_void_p)  # fmt: skip
_SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
_EXPORT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p)
_TO_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_WORK_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.c_void_p,
                                ctypes.c_void_p)  # fmt: skip
_RAISED = struct.Struct("@PPP")  # the trampoline's PyObject *raised[3]: type, value, traceback
_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]


def _failed(raised, exc):
    """Store new references to ``exc`` at ``raised`` for the trampoline to raise; -1."""
    parts = (type(exc), exc, exc.__traceback__)
    for part in parts:
        if part is not None:
            _incref(part)
    _RAISED.pack_into(WRITABLE_MEMORY, raised, *(0 if part is None else id(part) for part in parts))
    return -1


def _null(function, argument):
    return RuntimeError(f"{function}: {argument} cannot be NULL")


def exchange_capsule(describe, borrowed, from_managed):
    """Build the ``"dlpack_exchange_api"`` capsule of a view type.

    Its functions follow ``dlpack.h``: 0 on success, -1 with a Python exception set on
    failure (the caller holds the GIL): ``RuntimeError`` for a NULL object, output or tensor
    pointer, and what ``describe``, ``borrowed`` or ``from_managed`` raise.
    ``managed_tensor_allocator`` always fails: through ``SetError`` where one is given,
    else with ``NotImplementedError``.

    Parameters
    ----------
    describe : callable
        ``describe(obj)`` returns ``(exporter, ptr, shape, strides, dtype_triple, device,
        flags)`` as :func:`~layoutkit.interop.dlpack.pack_managed` takes them, or raises.
    borrowed : callable
        ``borrowed(obj)`` returns ``(ptr, device, dtype_triple, ndim, shape_address,
        strides_address)`` whose arrays live as long as ``obj``, or raises.
    from_managed : callable
        ``from_managed(address)`` returns a new object owning the managed tensor at
        ``address`` (its deleter runs once), or raises (having called the deleter).

    Raises
    ------
    ImportError, RuntimeError
        Where llvmlite (Numba's code generator) cannot compile the trampolines.
    """

    def allocator(prototype, out, error_ctx, set_error, raised):
        if out:
            _POINTER.pack_into(WRITABLE_MEMORY, out, 0)
        message = "layoutkit views do not allocate memory: managed_tensor_allocator is not supported"
        if set_error:
            _SET_ERROR(set_error)(error_ctx, b"NotImplementedError", message.encode())
            return -1
        return _failed(raised, NotImplementedError(message))

    def managed_from_py(obj, out, raised):
        try:
            if not out:
                raise _null("managed_tensor_from_py_object_no_sync", "out")
            _POINTER.pack_into(WRITABLE_MEMORY, out, 0)
            address = dlpack.pack_managed(*describe(obj), True)
        except BaseException as exc:  # KeyboardInterrupt too: ctypes would drop it
            return _failed(raised, exc)
        _POINTER.pack_into(WRITABLE_MEMORY, out, address)
        return 0

    def managed_to_py(address, out, raised):
        try:
            if out:
                _POINTER.pack_into(WRITABLE_MEMORY, out, 0)
            if not address:
                raise _null("managed_tensor_to_py_object_no_sync", "tensor")
            if not out:
                with contextlib.suppress(Exception):
                    from_managed(address)  # the tensor is ours (dlpack.h): it dies here
                raise _null("managed_tensor_to_py_object_no_sync", "out_py_object")
            obj = from_managed(address)
        except BaseException as exc:
            return _failed(raised, exc)
        _incref(obj)  # the new reference the caller receives
        _POINTER.pack_into(WRITABLE_MEMORY, out, id(obj))
        return 0

    def dltensor_from_py(obj, out, raised):
        try:
            if not out:
                raise _null("dltensor_from_py_object_no_sync", "out")
            ptr, device, dtype_triple, ndim, shape_at, strides_at = borrowed(obj)
            _TENSOR.pack_into(
                WRITABLE_MEMORY, out, ptr, *device, ndim, *dtype_triple, shape_at, strides_at, 0
            )
        except BaseException as exc:
            return _failed(raised, exc)
        return 0

    def work_stream(device_type, device_id, out, raised):
        if not out:
            return _failed(raised, _null("current_work_stream", "out_current_stream"))
        _POINTER.pack_into(WRITABLE_MEMORY, out, 0)
        return 0

    callbacks = (
        _ALLOCATOR(allocator), _EXPORT(managed_from_py), _TO_PY(managed_to_py),
        _EXPORT(dltensor_from_py), _WORK_STREAM(work_stream),
    )  # fmt: skip
    signatures = (
        ("managed_tensor_allocator", "pppp"), ("managed_tensor_from_py_object_no_sync", "op"),
        ("managed_tensor_to_py_object_no_sync", "pp"), ("dltensor_from_py_object_no_sync", "op"),
        ("current_work_stream", "iip"),
    )  # fmt: skip
    addresses = compile_trampolines([
        (name, kinds, ctypes.cast(c, ctypes.c_void_p).value)
        for (name, kinds), c in zip(signatures, callbacks)
    ])  # fmt: skip
    table = ctypes.create_string_buffer(_API.size)
    _API.pack_into(table, 0, *dlpack.DLPACK_VERSION, 0, *addresses)
    name = ctypes.create_string_buffer(_NAME)
    capsule = dlpack._new_capsule(ctypes.addressof(table), ctypes.addressof(name), None)
    _keep.append((callbacks, table, name, capsule))  # C holds these addresses for good
    return capsule


class ExchangeCapsule:
    """A class attribute holding :func:`exchange_capsule`'s capsule, built on first access.

    Building it compiles the table's trampolines (llvmlite, some tens of milliseconds), so
    importing the view type does not.
    """

    def __init__(self, describe, borrowed, from_managed):
        self._arguments = (describe, borrowed, from_managed)
        self._capsule = None
        self._lock = threading.Lock()

    def __get__(self, obj, owner=None):
        capsule = self._capsule
        if capsule is None:
            with self._lock:
                if self._capsule is None:
                    self._capsule = exchange_capsule(*self._arguments)
                capsule = self._capsule
        return capsule


_keep = []
