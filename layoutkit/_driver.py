"""The CUDA driver, reached through cuda-bindings.

This is the only layoutkit module that imports ``cuda.bindings``, and it does so
lazily, inside functions, so ``import layoutkit`` stays cheap and works on machines
without CUDA. Every driver call goes through :func:`_call`, which

* initialises the driver (``cuInit``) the first time a call reports
  ``CUDA_ERROR_NOT_INITIALIZED``, then retries the call once;
* turns a failing ``CUresult`` into :class:`CUDAError` naming the call and the error;
* turns a missing ``libcuda`` (or a missing cuda-bindings) into :class:`NoDriverError`,
  whose message starts with ``"no CUDA driver was found"``.

Pointers, sizes and stream handles are plain Python ``int`` values on both sides.

Examples
--------
Stream normalisation and the signed device ordinal need no driver:

>>> from layoutkit import _driver
>>> _driver.stream_handle(None), _driver.stream_handle(7)
(0, 7)
>>> _driver.signed_ordinal(4294967294)
-2
"""

import contextlib
import ctypes
import numbers
import operator
import struct
import threading
from typing import NamedTuple

from layoutkit._errors import CUDAError, NoDriverError

__all__ = [
    "CLAIMED_DEVICE",
    "CUDAError",
    "HOST",
    "Location",
    "NoDriverError",
    "classify_pointer",
    "current_device_id",
    "device_context",
    "device_count",
    "device_name",
    "driver_found",
    "ensure_context",
    "handle_int",
    "init",
    "KernelLauncher",
    "device_can_access_peer",
    "enable_peer_access",
    "event_create",
    "event_destroy",
    "event_record",
    "event_synchronize",
    "max_active_blocks_per_sm",
    "memcpy_2d_async",
    "multiprocessor_count",
    "stream_is_capturing",
    "mem_alloc",
    "mem_alloc_async",
    "mem_alloc_managed",
    "mem_free",
    "mem_free_async",
    "mem_free_host",
    "mem_host_alloc",
    "mem_host_register",
    "mem_host_unregister",
    "memcpy",
    "memcpy_async",
    "pointer_info",
    "order_after",
    "primary_context",
    "set_current_device",
    "signed_ordinal",
    "stream_create",
    "stream_destroy",
    "stream_handle",
    "stream_synchronize",
    "synchronize_device",
]

NO_DRIVER_MESSAGE = "no CUDA driver was found"

# CUmemorytype values as the pointer-attribute query returns them (0: unregistered host memory)
_MEMORYTYPE_UNREGISTERED = 0
_MEMORYTYPE_HOST = 1
_MEMORYTYPE_DEVICE = 2
_MEMORYTYPE_UNIFIED = 4

# cuMemHostAlloc / cuMemHostRegister flags: usable from every context, mapped into the device
_HOST_FLAGS_PORTABLE_DEVICEMAP = 0x1 | 0x2
_MEM_ATTACH_GLOBAL = 0x1

_bindings_module = None
_initialized = False
_init_lock = threading.Lock()
_primary_contexts = {}
_primary_lock = threading.Lock()


class Location(NamedTuple):
    """Where memory lives, in layoutkit's terms: the one record for it.

    Buffers, views and the pointer-attribute query all describe memory with it.
    ``device_id`` is ``-1`` for host memory not tied to a device.
    """

    device_id: int
    is_device_accessible: bool
    is_host_accessible: bool
    is_managed: bool


HOST = Location(-1, False, True, False)  # ordinary host memory (NumPy, bytes, CPU DLPack)
# CUDA memory by its producer's word (a CUDA array interface), whose device only the driver
# can name: the pointer-attribute query says where it lives; with no driver to ask it is
# never taken for host memory (the host must not read what may be a device address)
CLAIMED_DEVICE = Location(None, True, None, False)


def _bindings():
    """Return ``cuda.bindings.driver``, imported on first use."""
    global _bindings_module
    if _bindings_module is None:
        try:
            from cuda.bindings import driver
        except ImportError as exc:
            raise NoDriverError(
                f"{NO_DRIVER_MESSAGE}: cuda-bindings is not installed ({exc})"
            ) from exc
        _bindings_module = driver
    return _bindings_module


def _is_missing_library(exc):
    """Whether ``exc`` is how cuda-bindings reports that ``libcuda`` cannot be loaded."""
    if any(cls.__name__ == "DynamicLibNotFoundError" for cls in type(exc).__mro__):
        return True
    return isinstance(exc, OSError | RuntimeError) and "dlopen" in str(exc)


def _invoke(name, args):
    """Call driver function ``name``; a missing driver library becomes NoDriverError."""
    function = getattr(_bindings(), name)
    try:
        return function(*args)
    except Exception as exc:
        if _is_missing_library(exc):
            raise NoDriverError(f"{NO_DRIVER_MESSAGE} (calling {name}: {exc})", call=name) from exc
        raise


def _error_description(error):
    """The driver's description of ``error``, or ``""`` when it has none."""
    try:
        status, text = _bindings().cuGetErrorString(error)
    except Exception:  # the description is a courtesy; never mask the real error
        return ""
    if status != _bindings().CUresult.CUDA_SUCCESS or not text:
        return ""
    return text.decode(errors="replace") if isinstance(text, bytes) else str(text)


def _raise_for(name, error):
    """Raise CUDAError for a failed ``CUresult`` returned by call ``name``."""
    error_name = getattr(error, "name", None) or f"CUresult {int(error)}"
    description = _error_description(error)
    detail = f": {description}" if description else ""
    raise CUDAError(f"{name} failed with {error_name}{detail}", call=name, error_name=error_name)


def _call(name, *args):
    """Call driver function ``name`` and return its results without the status.

    Initialises the driver and retries once on ``CUDA_ERROR_NOT_INITIALIZED``.
    Returns ``None``, the single result, or a tuple of results. Sibling modules use
    it (with :func:`_bindings` for enums and handle types) for driver calls that
    have no named helper here, e.g. ``_call("cuEventCreate", 0x2)``.
    """
    result = _invoke(name, args)
    driver = _bindings()
    if result[0] == driver.CUresult.CUDA_ERROR_NOT_INITIALIZED and name != "cuInit":
        init()
        result = _invoke(name, args)
    if result[0] != driver.CUresult.CUDA_SUCCESS:
        _raise_for(name, result[0])
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else tuple(result[1:])


def init():
    """Initialise the CUDA driver (``cuInit(0)``) once per process.

    Raises
    ------
    NoDriverError
        When ``libcuda`` cannot be loaded.
    CUDAError
        When ``cuInit`` fails (for instance ``CUDA_ERROR_NO_DEVICE``).
    """
    global _initialized
    if _initialized:
        return
    with _init_lock:
        if not _initialized:
            _call("cuInit", 0)
            _initialized = True


def driver_found():
    """Whether a CUDA driver library can be loaded and initialised here.

    Returns
    -------
    bool
        False when ``libcuda`` is missing or ``cuInit`` fails.
    """
    try:
        init()
    except CUDAError:
        return False
    return True


def device_count():
    """Number of CUDA devices visible to this process."""
    return int(_call("cuDeviceGetCount"))


def device_name(device_id):
    """The driver's name for device ``device_id``, e.g. ``"NVIDIA H200"``."""
    name = _call("cuDeviceGetName", 256, _call("cuDeviceGet", device_id))
    if isinstance(name, bytes):
        name = name.split(b"\0", 1)[0].decode(errors="replace")
    return str(name)


def primary_context(device_id):
    """Retain the primary context of device ``device_id`` (once) and return it.

    The context stays retained for the life of the process, as in cuda.core and
    numba-cuda; it is shared with every other user of the device's primary context.
    """
    context = _primary_contexts.get(device_id)
    if context is None:
        with _primary_lock:
            context = _primary_contexts.get(device_id)
            if context is None:
                device = _call("cuDeviceGet", device_id)
                context = _call("cuDevicePrimaryCtxRetain", device)
                _primary_contexts[device_id] = context
    return context


def set_current_device(device_id):
    """Make the primary context of ``device_id`` current on the calling thread."""
    _call("cuCtxSetCurrent", primary_context(device_id))


def current_device_id():
    """The device of the calling thread's current context, or ``None`` when none is current."""
    context = _call("cuCtxGetCurrent")
    if context is None or int(context) == 0:
        return None
    return int(_call("cuCtxGetDevice"))


def ensure_context():
    """Make sure a context is current, choosing device 0's primary context if none is.

    Returns
    -------
    int
        The id of the current device.
    """
    device_id = current_device_id()
    if device_id is None:
        set_current_device(0)
        device_id = 0
    return device_id


@contextlib.contextmanager
def device_context(device_id):
    """Run a block with the primary context of ``device_id`` current.

    The context is pushed only when a different one (or none) is current, and
    popped afterwards, so the caller's current context is left as it was.
    """
    context = primary_context(device_id)
    current = _call("cuCtxGetCurrent")
    if current is not None and int(current) == int(context):
        yield
        return
    _call("cuCtxPushCurrent", context)
    try:
        yield
    finally:
        _call("cuCtxPopCurrent")


def synchronize_device(device_id):
    """Wait until all work on device ``device_id`` (its primary context) has finished."""
    with device_context(device_id):
        _call("cuCtxSynchronize")


def handle_int(value, name):
    """Read a pointer or handle argument as a Python ``int``; no driver needed.

    Accepts ``int`` and NumPy integers (``operator.index``), ``ctypes.c_void_p``
    (``None`` value means 0) and cuda-bindings handle objects such as ``CUdeviceptr``
    or ``CUstream`` (through ``int()``). Range checks are the caller's job.

    Raises
    ------
    TypeError
        For bools (NumPy's too), floats, strings, arrays (a 0-d integer array reads as its
        value, through ``operator.index``) and other objects, naming ``name``.

    Examples
    --------
    >>> import ctypes
    >>> handle_int(ctypes.c_void_p(None), "ptr"), handle_int(ctypes.c_void_p(64), "ptr")
    (0, 64)
    >>> handle_int(1.5, "ptr")
    Traceback (most recent call last):
    ...
    TypeError: ptr must be an integer, got 1.5 of type float
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not a bool ({value!r})")
    try:
        return operator.index(value)
    except TypeError:
        pass
    if isinstance(value, ctypes.c_void_p):
        return value.value or 0
    kind = type(value)
    # handle objects (cuda-bindings' CUdeviceptr, ...) convert with int(); numbers, strings
    # and arrays (NumPy's, whose int() truncates a float array and takes a bool) do not
    if (not isinstance(value, numbers.Number | str | bytes) and hasattr(kind, "__int__")
            and not hasattr(kind, "__array__")):  # fmt: skip
        return int(value)
    raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")


def _stream_value(value, stream):
    """The handle ``value`` read from ``stream``, as a checked ``int``."""
    try:
        handle = handle_int(value, "stream")
    except TypeError:
        raise TypeError(
            "stream must be None, an int handle, or an object with __cuda_stream__, "
            f".cuda_stream, .ptr or .handle; got {_shown(stream)} of type "
            f"{type(stream).__name__}"
        ) from None
    if not 0 <= handle < 2**64:
        raise ValueError(
            f"stream handle must be in [0, 2**64), got {handle} from {_shown(stream)}"
        )
    return handle


def stream_handle(stream):
    """Normalise a stream argument to the driver's ``int`` handle.

    Parameters
    ----------
    stream : None, int, or stream object
        ``None`` means the legacy default stream (handle 0). An ``int`` (or NumPy
        integer) is used as is. Objects are read, in this order, through
        ``__cuda_stream__()`` (returns ``(version, handle)``), ``.cuda_stream``
        (torch), ``.ptr`` (CuPy) or ``.handle`` (cuda.core, numba-cuda); each of
        these may itself be an int, a ctypes pointer or a cuda-bindings ``CUstream``.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        For anything else (floats, bools, strings, unrelated objects).
    ValueError
        For a handle outside ``[0, 2**64)``, or a ``__cuda_stream__`` version other than 0.

    Examples
    --------
    >>> import numpy as np
    >>> stream_handle(None), stream_handle(np.int64(5))
    (0, 5)
    >>> class CuPyLike:
    ...     ptr = 1234
    >>> stream_handle(CuPyLike())
    1234
    >>> class ProtocolStream:
    ...     def __cuda_stream__(self):
    ...         return (0, 99)
    >>> stream_handle(ProtocolStream())
    99
    """
    if stream is None:
        return 0
    if type(stream) is int:
        return _stream_value(stream, stream)
    try:
        return _stream_object(stream)
    except (TypeError, ValueError):
        raise
    except Exception as exc:  # a stream object's own failure: still the argument's fault
        raise TypeError(
            f"stream {_shown(stream)} of type {type(stream).__name__} could not be read as a "
            f"stream: {type(exc).__name__}: {exc}"
        ) from exc


def _stream_object(stream):
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        info = protocol() if callable(protocol) else protocol
        if type(info) is not tuple or len(info) != 2:
            raise TypeError(
                f"__cuda_stream__ must return (version, handle), got {_shown(info)} from "
                f"{_shown(stream)}"
            )
        version = info[0]
        if type(version) is bool or not isinstance(version, numbers.Integral) or version != 0:
            # as cuda.core: a later version may mean something else by the second member
            raise ValueError(
                f"__cuda_stream__ must return protocol version 0, got {_shown(version)} from "
                f"{_shown(stream)}"
            )
        return _stream_value(info[1], stream)
    for attribute in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attribute, None)
        if value is not None:
            return _stream_value(value, stream)
    return _stream_value(stream, stream)


def _shown(value):
    """``repr(value)``, short, or the type's name where the repr fails."""
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__} object>"
    return text if len(text) <= 200 else text[:200] + "..."


def stream_synchronize(stream=None):
    """Wait until all work queued on ``stream`` (see :func:`stream_handle`) has finished."""
    _call("cuStreamSynchronize", stream_handle(stream))


def stream_device_id(handle):
    """The device of stream ``handle``'s context (the current device for the legacy and
    per-thread default streams, handles 0-2, which belong to whichever context is
    current)."""
    if handle <= 2:
        return ensure_context()
    context = _call("cuStreamGetCtx", _bindings().CUstream(handle))
    _call("cuCtxPushCurrent", context)
    try:
        return int(_call("cuCtxGetDevice"))
    finally:
        _call("cuCtxPopCurrent")


def stream_create(device_id, nonblocking=True):
    """A new stream of device ``device_id`` (its primary context), as an ``int`` handle.

    ``nonblocking`` streams do not synchronise with the legacy default stream
    (``CU_STREAM_NON_BLOCKING``).
    """
    with device_context(device_id):
        return int(_call("cuStreamCreate", 0x1 if nonblocking else 0x0))


def stream_destroy(handle):
    """Destroy a stream from :func:`stream_create` (queued work still completes)."""
    _call("cuStreamDestroy", _bindings().CUstream(handle))


def mem_alloc(size):
    """Allocate ``size`` bytes of device memory in the current context (``cuMemAlloc``)."""
    return int(_call("cuMemAlloc", size))


def mem_free(ptr):
    """Free device or managed memory from :func:`mem_alloc` / :func:`mem_alloc_managed`."""
    _call("cuMemFree", ptr)


def mem_alloc_async(size, stream=None):
    """Allocate ``size`` bytes of device memory ordered on ``stream`` (``cuMemAllocAsync``).

    The memory comes from the current pool of the stream's device; with the default
    stream that is the device of the current context.
    """
    return int(_call("cuMemAllocAsync", size, stream_handle(stream)))


def mem_free_async(ptr, stream=None):
    """Free memory from :func:`mem_alloc_async`, ordered on ``stream`` (``cuMemFreeAsync``)."""
    _call("cuMemFreeAsync", ptr, stream_handle(stream))


def mem_alloc_managed(size):
    """Allocate ``size`` bytes of managed (unified) memory, attached globally."""
    return int(_call("cuMemAllocManaged", size, _MEM_ATTACH_GLOBAL))


def mem_host_alloc(size):
    """Allocate ``size`` bytes of pinned host memory, portable and device-mapped."""
    return int(_call("cuMemHostAlloc", size, _HOST_FLAGS_PORTABLE_DEVICEMAP))


def mem_free_host(ptr):
    """Free pinned host memory from :func:`mem_host_alloc` (``cuMemFreeHost``)."""
    _call("cuMemFreeHost", ptr)


def mem_host_register(ptr, size):
    """Page-lock and map existing host memory ``[ptr, ptr + size)`` (``cuMemHostRegister``)."""
    _call("cuMemHostRegister", ptr, size, _HOST_FLAGS_PORTABLE_DEVICEMAP)


def mem_host_unregister(ptr):
    """Undo :func:`mem_host_register` for the range starting at ``ptr``."""
    _call("cuMemHostUnregister", ptr)


def memcpy(dst, src, size):
    """Copy ``size`` bytes between any two pointers the driver can reach (``cuMemcpy``).

    Synchronous with respect to the host; the direction is inferred from the
    pointers (unified addressing).
    """
    _call("cuMemcpy", dst, src, size)


def memcpy_async(dst, src, size, stream=None):
    """Queue a copy of ``size`` bytes on ``stream`` (``cuMemcpyAsync``)."""
    _call("cuMemcpyAsync", dst, src, size, stream_handle(stream))


def signed_ordinal(value):
    """Read a device ordinal returned as unsigned 32-bit as the signed value it means.

    The driver reports "no device" as -2 (``CU_DEVICE_INVALID``), which the Python
    bindings hand back as 4294967294.

    Examples
    --------
    >>> signed_ordinal(0), signed_ordinal(3), signed_ordinal(4294967294), signed_ordinal(-1)
    (0, 3, -2, -1)
    """
    value = int(value) & 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


def classify_pointer(memory_type, is_managed, ordinal):
    """Turn raw pointer attributes into a :class:`Location`.

    Parameters
    ----------
    memory_type : int
        ``CU_POINTER_ATTRIBUTE_MEMORY_TYPE``: 0 for memory the driver does not know,
        1 for host (pinned or registered), 2 for device memory.
    is_managed : bool
        ``CU_POINTER_ATTRIBUTE_IS_MANAGED``.
    ordinal : int
        ``CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL``, signed or unsigned.

    Raises
    ------
    ValueError
        For any other memory type (arrays are not addressable memory).

    Examples
    --------
    >>> classify_pointer(0, False, 4294967294)
    Location(device_id=-1, is_device_accessible=False, is_host_accessible=True, is_managed=False)
    >>> classify_pointer(2, False, 1)
    Location(device_id=1, is_device_accessible=True, is_host_accessible=False, is_managed=False)
    >>> classify_pointer(2, True, 0)
    Location(device_id=0, is_device_accessible=True, is_host_accessible=True, is_managed=True)
    """
    memory_type = int(memory_type)
    is_managed = bool(is_managed)
    if is_managed or memory_type == _MEMORYTYPE_HOST:
        return Location(signed_ordinal(ordinal), True, True, is_managed)
    if memory_type == _MEMORYTYPE_UNREGISTERED:
        return HOST
    if memory_type == _MEMORYTYPE_DEVICE:
        return Location(signed_ordinal(ordinal), True, False, False)
    raise ValueError(f"unsupported memory type {memory_type} reported for the pointer")


def pointer_info(ptr):
    """Ask the driver where the memory at ``ptr`` lives (``cuPointerGetAttributes``).

    Queries memory type, managed flag and device ordinal in one call; initialises
    the driver and retries if it was not initialised yet.

    Raises
    ------
    NoDriverError
        When no CUDA driver is installed (the message says so).
    CUDAError
        When the query fails.
    """
    attribute = _bindings().CUpointer_attribute
    attributes = [
        attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        attribute.CU_POINTER_ATTRIBUTE_IS_MANAGED,
        attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    ]
    memory_type, is_managed, ordinal = _call("cuPointerGetAttributes", 3, attributes, ptr)
    return classify_pointer(memory_type, is_managed, ordinal)


# ----------------------------------------------------------------------- stream ordering
_EVENT_DISABLE_TIMING = 0x2


def order_after(consumer, producer):
    """Make stream ``consumer`` wait for the work queued so far on stream ``producer``.

    An event is recorded on ``producer`` and ``consumer`` waits on it, as DLPack and the
    CUDA array interface ask of a consumer whose stream differs from the producer's; the
    host does not wait. Both are driver stream handles (``int``; 0 is the legacy default
    stream). Nothing is done when they are the same stream.

    Raises
    ------
    CUDAError
        When a handle is not a stream of the current context.
    """
    if consumer == producer:
        return
    event = _call("cuEventCreate", _EVENT_DISABLE_TIMING)
    try:
        _call("cuEventRecord", event, producer)
        _call("cuStreamWaitEvent", consumer, event, 0)
    finally:
        _call("cuEventDestroy", event)  # released by the driver once the wait is done


class KernelLauncher:
    """``cuLaunchKernel`` for one compiled kernel, from a parameter buffer packed in place.

    numba-cuda converts every kernel parameter on every launch; this keeps the kernel
    handle, one 8-byte slot per parameter (``slots``, written with ``packer``) and the
    array of pointers to those slots that the driver reads when the kernel is launched.

    Parameters
    ----------
    cufunction : int
        The ``CUfunction`` handle of the compiled kernel.
    parameter_format : str
        ``struct`` format of the parameters, one 8-byte slot each (little-endian).
    """

    def __init__(self, cufunction, parameter_format):
        bindings = _bindings()
        self.packer = struct.Struct("<" + parameter_format)
        count = max(self.packer.size // 8, 1)
        self.slots = (ctypes.c_int64 * count)()
        base = ctypes.addressof(self.slots)
        self._pointers = (ctypes.c_void_p * count)(*(base + 8 * k for k in range(count)))
        self._pointer_address = ctypes.addressof(self._pointers)
        self.function_handle = int(cufunction)
        self._function = bindings.CUfunction(cufunction)
        self._launch_kernel = bindings.cuLaunchKernel
        self._stream_type = bindings.CUstream
        self._success = bindings.CUresult.CUDA_SUCCESS

    def stream(self, handle):
        """The driver's stream object for an int handle (0: the legacy default stream)."""
        return self._stream_type(handle)

    def launch(self, grid, block, sharedmem, stream):
        """Launch with the parameters now in ``slots``; ``grid``/``block`` are 3-tuples."""
        (error,) = self._launch_kernel(
            self._function, *grid, *block, sharedmem, stream, self._pointer_address, 0
        )
        if error != self._success:
            _raise_for("cuLaunchKernel", error)


# ----------------------------------------------------------------------------- copies
# Driver calls of layoutkit.copy and of the one prepared kernel launcher.

_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
_multiprocessors = {}


def multiprocessor_count(device_id):
    """Number of streaming multiprocessors of device ``device_id`` (cached)."""
    count = _multiprocessors.get(device_id)
    if count is None:
        attribute = _bindings().CUdevice_attribute(_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        count = int(_call("cuDeviceGetAttribute", attribute, _call("cuDeviceGet", device_id)))
        _multiprocessors[device_id] = count
    return count


def max_active_blocks_per_sm(cufunction, threads, dynamic_shared_bytes=0):
    """Blocks of ``threads`` threads of a kernel that one SM holds at once (occupancy)."""
    function = _bindings().CUfunction(cufunction)
    return int(
        _call("cuOccupancyMaxActiveBlocksPerMultiprocessor", function, threads,
              dynamic_shared_bytes)
    )  # fmt: skip


def device_can_access_peer(device_id, peer_id):
    """Whether device ``device_id`` can read and write memory of device ``peer_id``."""
    return bool(
        _call("cuDeviceCanAccessPeer", _call("cuDeviceGet", device_id), _call("cuDeviceGet", peer_id))
    )


def enable_peer_access(device_id, peer_id):
    """Let the primary context of ``device_id`` access memory of ``peer_id`` (idempotent)."""
    driver = _bindings()
    with device_context(device_id):
        (error,) = _invoke("cuCtxEnablePeerAccess", (primary_context(peer_id), 0))
    if error not in (driver.CUresult.CUDA_SUCCESS,
                     driver.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED):  # fmt: skip
        _raise_for("cuCtxEnablePeerAccess", error)


def memcpy_2d_async(dst, dst_pitch, dst_on_device, src, src_pitch, src_on_device, width,
                    height, stream=None):  # fmt: skip
    """Queue a copy of ``height`` rows of ``width`` bytes at a pitch (``cuMemcpy2DAsync``).

    ``*_on_device`` says whether each side is device-accessible memory (unified
    addressing) or host memory the driver pins for the copy.
    """
    driver = _bindings()
    params = driver.CUDA_MEMCPY2D()
    for prefix, address, pitch, on_device in (
        ("src", src, src_pitch, src_on_device),
        ("dst", dst, dst_pitch, dst_on_device),
    ):
        kind = _MEMORYTYPE_UNIFIED if on_device else _MEMORYTYPE_HOST
        setattr(params, prefix + "MemoryType", driver.CUmemorytype(kind))
        setattr(params, prefix + ("Device" if on_device else "Host"), address)
        setattr(params, prefix + "Pitch", pitch)
    params.WidthInBytes = width
    params.Height = height
    _call("cuMemcpy2DAsync", params, stream_handle(stream))


def stream_is_capturing(stream=None):
    """Whether work queued on ``stream`` would be captured into a CUDA graph.

    True while the stream is capturing, and for the legacy default stream while another
    stream captures (queueing work there would break that capture).
    """
    driver = _bindings()
    result = _invoke("cuStreamIsCapturing", (stream_handle(stream),))
    if result[0] == driver.CUresult.CUDA_ERROR_NOT_INITIALIZED:
        init()
        result = _invoke("cuStreamIsCapturing", (stream_handle(stream),))
    if result[0] == driver.CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
        return True
    if result[0] != driver.CUresult.CUDA_SUCCESS:
        _raise_for("cuStreamIsCapturing", result[0])
    return int(result[1]) != 0  # CU_STREAM_CAPTURE_STATUS_NONE


def event_create():
    """A new event without timing (``CU_EVENT_DISABLE_TIMING``), as an ``int`` handle."""
    return int(_call("cuEventCreate", 0x2))


def event_record(event, stream=None):
    """Record ``event`` on ``stream``."""
    _call("cuEventRecord", _bindings().CUevent(event), stream_handle(stream))


def event_synchronize(event):
    """Wait until the work before the last record of ``event`` has finished."""
    _call("cuEventSynchronize", _bindings().CUevent(event))


def event_destroy(event):
    """Destroy an event from :func:`event_create`."""
    _call("cuEventDestroy", _bindings().CUevent(event))
