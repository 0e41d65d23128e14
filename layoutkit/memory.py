"""Memory: :class:`Buffer` (a pointer, a size and who keeps it alive) and memory resources.

A :class:`Buffer` is made in one of three ownership modes, as in cuda.core:

* ``Buffer.from_handle(ptr, size, owner=obj)`` keeps ``obj`` alive until ``close()``
  (how NumPy, CuPy or torch memory is wrapped);
* ``Buffer.from_handle(ptr, size, mr=resource)`` owns the memory: ``resource.deallocate``
  runs exactly once, on ``close()`` or when the buffer is garbage collected;
* neither: a non-owning reference to memory someone else keeps alive.

Memory resources allocate buffers: :class:`DeviceMemoryResource` (stream-ordered device
memory), :class:`PinnedMemoryResource` (page-locked host memory),
:class:`ManagedMemoryResource` (unified memory) and :class:`HostMemoryResource` (ordinary
host memory, no CUDA needed). :class:`Device` ties a device id to its memory resource.
Only :mod:`layoutkit._driver` talks to the CUDA driver; nothing here imports it eagerly.

Examples
--------
>>> import numpy as np
>>> from layoutkit import Buffer
>>> a = np.arange(4, dtype=np.float32)
>>> with Buffer.from_handle(a.ctypes.data, a.nbytes, owner=a) as buf:
...     buf.size, buf.owner is a
(16, True)
>>> buf.is_closed
True
"""

import abc
import operator
import sys
import weakref

import numpy as np

from layoutkit import _driver
from layoutkit._errors import AxisError, ConstructionError, SealedClass, never_initialised

__all__ = [
    "Buffer",
    "Device",
    "DeviceMemoryResource",
    "HostMemoryResource",
    "ManagedMemoryResource",
    "MemoryResource",
    "PinnedMemoryResource",
]

_HOST_ALIGNMENT = 64


def _uint64(name, value):
    """``value`` as an ``int`` in ``[0, 2**64)``; TypeError/OverflowError naming ``name``."""
    value = _driver.handle_int(value, name)
    if not 0 <= value < 2**64:
        raise OverflowError(f"{name} must be in [0, 2**64), got {value}")
    return value


def _check_stream(stream):
    """Refuse a ``stream`` argument that names no stream: a ``TypeError`` / ``ValueError``
    from :func:`layoutkit._driver.stream_handle` (no driver needed), before the caller
    allocates, frees or records anything. Resources get the stream as given."""
    if stream is not None:
        _driver.stream_handle(stream)
    return stream


def _device_id(device_id):
    """Validate a device id against the devices the driver reports."""
    if isinstance(device_id, bool):
        raise TypeError(f"device_id must be an integer, not a bool ({device_id!r})")
    try:
        device_id = operator.index(device_id)
    except TypeError:
        raise TypeError(
            f"device_id must be an integer, got {device_id!r} of type {type(device_id).__name__}"
        ) from None
    if device_id < 0:
        raise AxisError(f"device_id must be >= 0, got {device_id}")
    count = _driver.device_count()
    if device_id >= count:
        raise AxisError(f"device_id {device_id} is out of range: {count} CUDA device(s) found")
    return device_id


class Buffer(metaclass=SealedClass):
    """A range of memory: a pointer, a size, and what keeps the memory alive.

    Do not call ``Buffer(...)``; use :meth:`from_handle` or a memory resource's
    ``allocate(size)``.

    Attributes are read-only. After :meth:`close` (or leaving a ``with`` block),
    :attr:`is_closed` is True, :attr:`size` and :attr:`handle` are 0 (as in cuda.core),
    :attr:`owner` and :attr:`memory_resource` are ``None``, and :attr:`ptr`,
    :attr:`device_id` and the accessibility flags raise ``RuntimeError``.

    Where the memory lives (:attr:`device_id`, :attr:`is_device_accessible`,
    :attr:`is_host_accessible`, :attr:`is_managed`) comes from the memory resource
    when there is one, from what the creator knew (NumPy and other host memory), or
    else from one query of the CUDA driver's pointer attributes, cached. Without a CUDA
    driver there is no device memory, so such a pointer is host memory (DECISIONS 12).

    Buffers compare and hash by ``(ptr, size)``; a closed buffer equals only itself.
    They export themselves through DLPack as 1-d ``int8`` tensors of ``size`` elements,
    and copy (:meth:`copy_to`, :meth:`copy_from`) and :meth:`fill` their bytes as in
    cuda.core, through :func:`layoutkit.copy`.
    """

    # _keeper: what keeps the memory alive (the owner, or the allocation of a resource, which
    # is deallocated when it dies), or None; views of the buffer hold it too
    __slots__ = ("_ptr", "_size", "_owner", "_mr", "_keeper", "_finalizer", "_info", "_hash",
                 "_closed", "_readonly", "__weakref__")

    def __new__(cls, *args, **kwargs):
        # the refusal is __new__'s, so Buffer.__new__(Buffer) cannot make an empty Buffer
        # either (layoutkit makes buffers with object.__new__ and fills every slot)
        raise ConstructionError(
            "Buffer objects cannot be created directly; use "
            "Buffer.from_handle(ptr, size, mr=None, owner=None) or a memory resource's "
            "allocate(size)"
        )

    @classmethod
    def from_handle(cls, ptr, size, mr=None, owner=None, *, stream=None):
        """Wrap existing memory ``[ptr, ptr + size)`` in a Buffer.

        Parameters
        ----------
        ptr : int
            Address of the first byte: an ``int``, NumPy integer, ``ctypes.c_void_p``
            or cuda-bindings pointer object, in ``[0, 2**64)``.
        size : int
            Size in bytes; ``ptr + size`` must not pass ``2**64``. A null ``ptr`` needs
            ``size == 0``.
        mr : MemoryResource, optional
            The resource that owns the memory: ``mr.deallocate(ptr, size, stream)``
            runs exactly once, on :meth:`close` or garbage collection.
        owner : object, optional
            Any object kept alive until :meth:`close` (or until the buffer is
            collected). Exclusive with ``mr``.
        stream : optional
            Stream to deallocate on (anything :func:`layoutkit._driver.stream_handle`
            accepts); only with ``mr``. ``close(stream)`` can override it.

        Raises
        ------
        TypeError
            ``ptr`` or ``size`` not an integer, or ``mr`` not a :class:`MemoryResource`.
        OverflowError
            ``ptr`` or ``size`` outside ``[0, 2**64)``, or ``ptr + size`` beyond ``2**64``.
        ValueError
            A null ``ptr`` with non-zero ``size``; both ``mr`` and ``owner``;
            ``stream`` without ``mr``.

        Examples
        --------
        >>> import numpy as np
        >>> a = np.zeros(8, dtype=np.uint8)
        >>> buf = Buffer.from_handle(a.ctypes.data, a.nbytes, owner=a)
        >>> buf.ptr == a.ctypes.data, buf.size, buf.device_id
        (True, 8, -1)
        >>> Buffer.from_handle(0, 16)
        Traceback (most recent call last):
        ...
        ValueError: ptr is 0 (null) but size is 16; a null pointer can only describe an empty buffer
        >>> Buffer.from_handle(2**64 - 8, 16)
        Traceback (most recent call last):
        ...
        OverflowError: the buffer's 16 bytes at 0xfffffffffffffff8 reach beyond the 64-bit address space
        """
        ptr = _uint64("ptr", ptr)
        size = _uint64("size", size)
        if ptr == 0 and size != 0:
            raise ValueError(
                f"ptr is 0 (null) but size is {size}; a null pointer can only describe an "
                "empty buffer"
            )
        if ptr + size > 2**64:
            raise OverflowError(
                f"the buffer's {size} bytes at {ptr:#x} reach beyond the 64-bit address space"
            )
        if mr is not None and owner is not None:
            raise ValueError(
                "owner and memory resource cannot be both specified together: give either mr "
                "(the buffer owns the memory and frees it) or owner (an object kept alive "
                "while the buffer is open)"
            )
        if mr is not None and not isinstance(mr, MemoryResource):
            raise TypeError(
                f"mr must be a layoutkit MemoryResource, got {mr!r} of type {type(mr).__name__}"
            )
        if stream is not None and mr is None:
            raise ValueError("stream is the deallocation stream and needs mr; got mr=None")
        _check_stream(stream)
        return cls._new(ptr, size, owner, mr, stream, None, False)

    @classmethod
    def _from_known(cls, ptr, size, *, owner=None, mr=None, stream=None, location=None,
                    readonly=False):  # fmt: skip
        """Trusted constructor for memory whose values were checked by the caller.

        For callers that produced or checked the values themselves (imported tensors,
        memory resources): no validation. ``ptr`` and ``size`` must be ``int`` with
        ``ptr + size <= 2**64`` and ``size == 0`` when ``ptr == 0``; ``owner`` and ``mr``
        must not both be given. ``location`` (a :class:`~layoutkit._driver.Location`)
        says where the memory lives, ``None`` to ask the memory resource or the driver;
        ``readonly`` marks read-only memory (every view of the buffer is read-only).

        Examples
        --------
        >>> import numpy as np
        >>> from layoutkit._driver import HOST
        >>> a = np.ones(3)
        >>> buf = Buffer._from_known(a.ctypes.data, a.nbytes, owner=a, location=HOST)
        >>> buf.device_id, buf.is_host_accessible, buf.is_device_accessible, buf.is_managed
        (-1, True, False, False)
        """
        return cls._new(ptr, size, owner, mr, stream, location, readonly)

    @classmethod
    def _new(cls, ptr, size, owner, mr, stream, location, readonly):
        self = object.__new__(cls)
        self._ptr = ptr
        self._size = size
        self._owner = owner
        self._mr = mr
        self._info = location
        self._hash = hash((ptr, size))
        self._closed = False
        self._readonly = readonly
        self._finalizer = None
        self._keeper = owner
        if mr is not None:
            allocation = self._keeper = _Allocation()
            self._finalizer = _deallocation(allocation, mr.deallocate, ptr, size, stream)
        return self

    def close(self, stream=None):
        """Release the memory: deallocate through the memory resource, or drop the owner.

        Idempotent. ``stream`` overrides the deallocation stream recorded at creation.
        If the resource's ``deallocate`` raises, the buffer is closed anyway and the
        error propagates (the memory is not freed twice). Views of the buffer refuse
        every operation that touches memory from then on.

        Memory still read by something made from a view of the buffer (a NumPy array
        of ``numpy.asarray(view)``, a DLPack consumer's tensor) is not freed under it:
        views keep the memory (not the buffer) alive, so the deallocation then runs when
        the last of them dies, on ``stream``. Closing a buffer nothing else uses frees
        the memory at once.

        ``close()`` neither waits nor is refused while other threads use the buffer's
        views: an operation that began before it completes on the memory its view keeps
        alive, and every operation after it refuses the views (``BufferError``), including
        one whose arguments' code (an ``__index__``, a stream object, a producer's
        ``__dlpack__``) closed the buffer mid-call.

        Raises
        ------
        TypeError, ValueError
            For a ``stream`` that names no stream (:func:`_check_stream`), before anything
            is closed or freed.
        """
        _check_stream(stream)
        if self._closed:
            return
        keeper, finalizer = self._keeper, self._finalizer
        self._closed = True
        self._ptr = 0
        self._size = 0
        self._owner = None
        self._mr = None
        self._keeper = None
        self._info = None
        self._finalizer = None
        if finalizer is None:
            return  # an owner: views of the buffer keep it as long as they need it
        if stream is not None:
            pending = finalizer.detach()
            if pending is None:
                return
            deallocate, (ptr, size, _recorded_stream) = pending[1:3]
            del pending  # it holds the keeper, which the count below must not see
            finalizer = _deallocation(keeper, deallocate, ptr, size, stream)
        if sys.getrefcount(keeper) <= 2:  # this frame's name and the argument: no view left
            finalizer()  # now, so that an error of deallocate propagates

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        self.close()

    def _closed_error(self, attribute):
        return RuntimeError(f"buffer is closed: cannot read {attribute} of a closed Buffer")

    @property
    def ptr(self):
        """Address of the first byte (``int``); ``RuntimeError`` once closed."""
        if self._closed:
            raise self._closed_error("ptr")
        return self._ptr

    @property
    def handle(self):
        """Address of the first byte (``int``); 0 once closed, as in cuda.core."""
        return self._ptr

    @property
    def size(self):
        """Size in bytes (0 once closed)."""
        return self._size

    @property
    def owner(self):
        """The object kept alive for this buffer, or ``None``."""
        return self._owner

    @property
    def memory_resource(self):
        """The :class:`MemoryResource` that owns the memory, or ``None``."""
        return self._mr

    @property
    def is_closed(self):
        """Whether :meth:`close` has run."""
        return self._closed

    @property
    def is_readonly(self):
        """Whether the memory is read-only (it came from a read-only tensor).

        Every view of a read-only buffer is read-only.
        """
        return self._readonly

    @property
    def is_mapped(self):
        """Whether the buffer is mapped into this process through IPC (never, here)."""
        return False

    def _location(self, attribute):
        """Where the memory lives, as one :class:`~layoutkit._driver.Location`, cached."""
        info = self._info
        if info is None or info is _driver.CLAIMED_DEVICE:
            if self._closed:
                raise self._closed_error(attribute)
            mr = self._mr
            if mr is not None:
                info = _resource_location(mr)
            else:
                info = _pointer_location(self._ptr, claimed=info is not None)
            self._info = info
        return info

    def _check_open(self, attribute):
        if self._closed:
            raise self._closed_error(attribute)

    @property
    def device_id(self):
        """Device ordinal of the memory; -1 for host memory not tied to a device."""
        mr = self._mr
        if mr is not None and self._info is None:
            return mr.device_id
        return self._location("device_id")[0]

    @property
    def is_device_accessible(self):
        """Whether kernels on a GPU can read and write the memory."""
        mr = self._mr
        if mr is not None and self._info is None:
            return bool(mr.is_device_accessible)
        return self._location("is_device_accessible")[1]

    @property
    def is_host_accessible(self):
        """Whether the CPU can read and write the memory."""
        mr = self._mr
        if mr is not None and self._info is None:
            return bool(mr.is_host_accessible)
        return self._location("is_host_accessible")[2]

    @property
    def is_managed(self):
        """Whether the memory is CUDA managed (unified) memory."""
        mr = self._mr
        if mr is not None and self._info is None:
            return bool(mr.is_managed)
        return self._location("is_managed")[3]

    def __dlpack_device__(self):
        """``(device_type, device_id)`` of the memory, as DLPack names them."""
        self._check_open("__dlpack_device__")
        device_accessible = self.is_device_accessible
        host_accessible = self.is_host_accessible
        if device_accessible and not host_accessible:
            return (_kDLCUDA, self.device_id)
        if device_accessible:
            return (_kDLCUDAManaged if self.is_managed else _kDLCUDAHost, 0)
        if host_accessible:
            return (_kDLCPU, 0)
        raise BufferError("buffer is neither device-accessible nor host-accessible")

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export the memory as a DLPack capsule of ``size`` ``int8`` elements (no copy).

        As in cuda.core: no stream ordering (``stream`` is ignored, as if -1), and the
        capsule keeps the buffer (not only its memory) alive until the consumer is done.
        A read-only buffer exports a read-only versioned capsule and refuses the legacy
        one.

        Raises
        ------
        BufferError
            For ``copy=True``, another ``dl_device``, a ``max_version`` tuple that is not
            ``(major, minor)``, a buffer that is neither host- nor device-accessible, or
            a read-only buffer asked for a legacy capsule.
        TypeError
            When ``max_version`` is not a tuple.
        RuntimeError
            For a closed buffer.

        Examples
        --------
        >>> import numpy as np
        >>> a = np.arange(4, dtype=np.uint8)
        >>> np.from_dlpack(Buffer.from_handle(a.ctypes.data, 4, owner=a)).tolist()
        [0, 1, 2, 3]
        """
        from layoutkit.interop.dlpack import (
            FLAG_READ_ONLY,
            consumer_stream,
            export_capsule,
            refuse_copy,
            requested_device,
            wants_versioned,
        )

        self._check_open("__dlpack__")
        consumer_stream(stream)  # ignored (as -1), but only if it is a stream (or -1)
        versioned = wants_versioned(max_version)
        refuse_copy(copy, "Buffer")
        dl_device = requested_device(dl_device)
        # one reading of the memory, checked open after it: reading the arguments may have
        # run the caller's code, and another thread may close the buffer at any point (what
        # keeps the memory is read first, so a close from then on leaves it to the capsule)
        keeper = self._keeper
        ptr, size = self._ptr, self._size
        self._check_open("__dlpack__")
        try:
            device = self.__dlpack_device__()
        except BufferError:
            raise BufferError(
                "invalid buffer: it is neither device-accessible nor host-accessible"
            ) from None
        if dl_device is not None and dl_device != device:
            raise BufferError(f"dl_device={dl_device!r}: the buffer lives on {device}")
        if self._readonly and not versioned:
            raise BufferError("a read-only buffer needs a versioned DLPack capsule")
        flags = FLAG_READ_ONLY if self._readonly else 0
        keeper = (self, keeper)  # the memory outlives close() while the consumer reads it
        return export_capsule(
            keeper, ptr if size else 0, (size,), (1,), (0, 8, 1), device, flags, versioned
        )

    # ------------------------------------------------------------------ byte copies
    def copy_to(self, dst=None, *, stream=None, options=None):
        """Copy every byte of this buffer into ``dst``; returns ``dst``.

        As in cuda.core: ``dst`` must have the same size; ``dst=None`` allocates one from
        this buffer's memory resource. The copy is :func:`layoutkit.copy` of the two
        buffers viewed as bytes, so it runs host to host, host to device, device to host
        or device to device, queued on ``stream`` where device memory is involved
        (``None``: the legacy default stream; cuda.core requires the argument).

        Parameters
        ----------
        dst : Buffer, optional
        stream : int or stream object, optional
        options : None
            cuda.core's transfer hints (``CopyOptions``) have no equivalent here; only
            ``None`` is accepted.

        Raises
        ------
        TypeError
            When ``dst`` is not a Buffer, or ``options`` is given.
        ValueError
            For buffers of different sizes, device-accessible (device, pinned or managed)
            buffers that overlap (host-only buffers that overlap copy as ``memmove``
            does), a read-only ``dst``, or ``dst=None`` without a memory resource.
        RuntimeError
            When either buffer is closed.

        Examples
        --------
        >>> import ctypes
        >>> mr = HostMemoryResource()
        >>> src, dst = mr.allocate(4), mr.allocate(4)
        >>> src.fill(b"\\x01\\x02")
        >>> ctypes.string_at(src.copy_to(dst).ptr, 4)
        b'\\x01\\x02\\x01\\x02'
        """
        self._check_open("copy_to")
        _no_copy_options(options)
        _check_stream(stream)  # before a destination is allocated
        if dst is None:
            if self._mr is None:
                raise ValueError(
                    "copy_to: a destination buffer must be given (this buffer has no memory "
                    "resource to allocate one from)"
                )
            dst = self._mr.allocate(self._size, stream)
        _copy_bytes(dst, self, stream, "copy_to")
        return dst

    def copy_from(self, src, *, stream=None, options=None):
        """Copy every byte of ``src`` (a Buffer of the same size) into this buffer.

        See :meth:`copy_to`; the same rules, with this buffer the destination.
        """
        self._check_open("copy_from")
        _no_copy_options(options)
        _copy_bytes(self, src, stream, "copy_from")

    def fill(self, value, *, stream=None):
        """Fill the buffer with a repeated byte pattern, as cuda.core does.

        Parameters
        ----------
        value : int or buffer
            An ``int`` in ``[0, 256)`` (one byte), or an object with the buffer protocol
            holding 1, 2 or 4 bytes (``b"\\x12\\x34"``, ``numpy.uint32(7)``, ...), written in
            that byte order.
        stream : int or stream object, optional
            Orders the fill where the memory is device memory (``None``: the legacy
            default stream).

        Raises
        ------
        TypeError
            When ``value`` is neither an int nor a buffer.
        OverflowError
            For an int outside ``[0, 256)``.
        ValueError
            For a pattern of another length, a size that is no multiple of its length, a
            pointer not aligned to it, or a read-only buffer.
        RuntimeError
            When the buffer is closed.

        Examples
        --------
        >>> import ctypes
        >>> buffer = HostMemoryResource().allocate(8)
        >>> buffer.fill(np.uint16(0x0102))
        >>> ctypes.string_at(buffer.ptr, 8)
        b'\\x02\\x01\\x02\\x01\\x02\\x01\\x02\\x01'
        """
        self._check_open("fill")
        _check_stream(stream)
        pattern = _fill_pattern(value)
        width = len(pattern)
        if self._size % width or self._ptr % width:
            raise ValueError(
                f"fill: a {width}-byte pattern needs a buffer whose size ({self._size}) and "
                f"address ({self._ptr:#x}) are multiples of {width}"
            )
        if self._readonly:
            raise ValueError("fill: the buffer's memory is read-only")
        if not self._size:
            return
        from layoutkit.copy import copy
        from layoutkit.layout import StridedLayout
        from layoutkit.memoryview import StridedMemoryView

        dtype = _PATTERN_DTYPES[width]
        layout = StridedLayout.dense((self._size // width,), width)
        element = np.frombuffer(pattern, dtype).reshape(())  # broadcast to every element
        copy(StridedMemoryView.from_buffer(self, layout, dtype), element, stream=stream)

    def __eq__(self, other):
        if not issubclass(type(other), Buffer):
            return NotImplemented
        if self._closed or other._closed:
            return self is other
        return self._ptr == other._ptr and self._size == other._size

    def __hash__(self):
        return self._hash

    def __copy__(self):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError("cannot pickle or deep-copy a Buffer: it refers to process-local memory")

    def __setstate__(self, state):
        # a crafted pickle (copyreg.__newobj__ + BUILD) would set the slots to any address
        raise TypeError("a Buffer cannot be unpickled: make one with from_handle or a resource")

    def __repr__(self):
        # cuda.core's form (its own tests match it whole), and what only layoutkit has
        if not hasattr(self, "_closed"):  # object.__new__(Buffer): repr must not raise
            return "<Buffer never initialised>"
        if self._closed:
            return "<Buffer ptr=0x0 size=0 closed>"
        readonly = " readonly" if self._readonly else ""
        return f"<Buffer ptr=0x{self._ptr:x} size={self._size}{readonly}>"


_kDLCPU, _kDLCUDA, _kDLCUDAHost, _kDLCUDAManaged = 1, 2, 3, 13


class _Allocation:
    """Stands for memory a resource allocated: deallocated (once) when nothing holds it.

    The buffer holds it until closed, and views of the buffer hold it too, so memory that
    a view's exports still read outlives ``close()``. ``memory`` holds what the memory is
    made of where the resource can say (the NumPy array of a host allocation).
    """

    __slots__ = ("__weakref__", "memory")


def _deallocation(allocation, deallocate, ptr, size, stream):
    """``deallocate(ptr, size, stream)`` when ``allocation`` dies, or when called (once)."""
    finalizer = weakref.finalize(allocation, deallocate, ptr, size, stream)
    finalizer.atexit = False  # the process frees everything at exit; no driver calls then
    return finalizer
_PATTERN_DTYPES = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32)}


def _no_copy_options(options):
    if options is not None:
        raise TypeError(
            f"options={options!r}: layoutkit has no copy options (cuda.core's CopyOptions); "
            "pass None"
        )


def _copy_bytes(dst, src, stream, operation):
    """``layoutkit.copy`` of two same-sized buffers viewed as bytes."""
    _check_stream(stream)  # empty buffers too
    for name, buffer in (("dst", dst), ("src", src)):
        if not issubclass(type(buffer), Buffer):
            raise TypeError(
                f"{operation}: {name} must be a layoutkit Buffer, got {type(buffer).__name__}"
            )
        buffer._check_open(operation)
    if dst._size != src._size:
        raise ValueError(
            f"{operation}: buffer sizes mismatch between src and dst (sizes are: "
            f"src={src._size}, dst={dst._size})"
        )
    if not dst._size:
        return
    from layoutkit.copy import copy
    from layoutkit.layout import StridedLayout
    from layoutkit.memoryview import StridedMemoryView

    layout = StridedLayout.dense((dst._size,), 1)
    copy(
        StridedMemoryView.from_buffer(dst, layout, _PATTERN_DTYPES[1]),
        StridedMemoryView.from_buffer(src, layout, _PATTERN_DTYPES[1]),
        stream=stream,
    )


def _fill_pattern(value):
    """The bytes ``Buffer.fill`` repeats: one for an int, a buffer's 1, 2 or 4 otherwise."""
    if isinstance(value, int):
        value = operator.index(value)  # a plain int: a subclass's comparisons may lie
        if not 0 <= value < 256:
            raise OverflowError(f"fill value {value} must be in [0, 256) (one byte)")
        return bytes((value,))
    try:
        pattern = memoryview(value).tobytes()
    except TypeError:
        raise TypeError(
            f"fill value must be an int or a buffer of 1, 2 or 4 bytes, got "
            f"{type(value).__name__}"
        ) from None
    if len(pattern) not in _PATTERN_DTYPES:
        raise ValueError(f"fill value holds {len(pattern)} bytes; 1, 2 or 4 are supported")
    return pattern


def _resource_location(mr):
    """Where a memory resource's memory lives. A resource whose ``device_id`` raises (as
    cuda.core's host and pinned test resources do: "not bound to any GPU") holds host
    memory of no device (-1) if the host can access it; otherwise the error stands."""
    device_accessible = bool(mr.is_device_accessible)
    host_accessible = bool(mr.is_host_accessible)
    try:
        device_id = mr.device_id
    except Exception:
        if not host_accessible:
            raise
        device_id = -1
    if isinstance(device_id, Device):  # cuda.core's test resources answer with the device
        device_id = device_id.device_id
    elif type(device_id) is bool or not hasattr(device_id, "__index__"):
        raise TypeError(
            f"{type(mr).__name__}.device_id is {device_id!r} of type {type(device_id).__name__}: "
            "a device ordinal (int) or a Device is needed"
        )
    device_id = operator.index(device_id)
    return _driver.Location(device_id, device_accessible, host_accessible, bool(mr.is_managed))


def _pointer_location(ptr, claimed=False):
    """Where memory at ``ptr`` lives: the driver's answer.

    Where there is no driver or no device, memory of unknown origin is host memory (no
    device memory can exist then: DECISIONS 12). Memory its producer calls CUDA memory
    (``claimed``: :data:`~layoutkit._driver.CLAIMED_DEVICE`) is not: its pointer may be
    a device address of another process or machine, which the host must never read, so
    the driver's error stands, naming the memory.
    """
    try:
        return _driver.pointer_info(ptr)
    except _driver.CUDAError as exc:
        if not isinstance(exc, _driver.NoDriverError) and exc.error_name != "CUDA_ERROR_NO_DEVICE":
            raise
        if not claimed:
            return _driver.HOST
        raise type(exc)(
            f"the memory at {ptr:#x} is CUDA memory by its producer's word (a CUDA array "
            f"interface), but {exc}: where it lives cannot be known, and the host does not "
            "read it",
            call=exc.call, error_name=exc.error_name,
        ) from exc


class MemoryResource(abc.ABC):
    """Something that allocates and frees memory, and says where that memory lives.

    Subclasses implement :meth:`allocate`, :meth:`deallocate` and the
    ``device_id`` / ``is_device_accessible`` / ``is_host_accessible`` properties;
    ``is_managed`` defaults to False. Buffers from :meth:`allocate` hold the
    resource and call ``deallocate(ptr, size, stream)`` exactly once.
    """

    @abc.abstractmethod
    def allocate(self, size, stream=None):
        """Allocate ``size`` bytes and return them as a :class:`Buffer` owning them."""

    @abc.abstractmethod
    def deallocate(self, ptr, size, stream=None):
        """Free memory from :meth:`allocate` (called by the Buffer; do not call twice)."""

    @property
    @abc.abstractmethod
    def device_id(self):
        """Device ordinal of the memory; -1 for host memory."""

    @property
    @abc.abstractmethod
    def is_device_accessible(self):
        """Whether GPU kernels can access the memory."""

    @property
    @abc.abstractmethod
    def is_host_accessible(self):
        """Whether the CPU can access the memory."""

    @property
    def is_managed(self):
        """Whether the memory is CUDA managed memory (False unless a subclass says so)."""
        return False

    def __getattr__(self, name):
        # reached only for a name not found: the state a resource's __init__ sets is missing
        # when __init__ never ran (Resource.__new__(Resource), a subclass that skips it)
        if name in _RESOURCE_STATE:
            raise never_initialised(self, f"{type(self).__name__}(...)")
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self
        )

    def _buffer(self, ptr, size, stream=None):
        """A Buffer owning ``[ptr, ptr + size)`` on behalf of this resource."""
        location = _driver.Location(
            self.device_id, self.is_device_accessible, self.is_host_accessible, self.is_managed
        )
        return Buffer._from_known(ptr, size, mr=self, stream=stream, location=location)


_RESOURCE_STATE = frozenset({"_storage", "_device_id"})  # what the __init__s below set


class HostMemoryResource(MemoryResource):
    """Ordinary host memory from NumPy, 64-byte aligned; needs no CUDA driver.

    Examples
    --------
    >>> import ctypes
    >>> import numpy as np
    >>> mr = HostMemoryResource()
    >>> buf = mr.allocate(100)
    >>> buf.ptr % 64, buf.size, buf.device_id, buf.is_host_accessible
    (0, 100, -1, True)
    >>> data = np.ctypeslib.as_array((ctypes.c_uint8 * buf.size).from_address(buf.ptr))
    >>> data[:] = 7
    >>> int(data.sum())
    700
    >>> del data
    >>> buf.close()
    """

    def __init__(self):
        self._storage = {}  # aligned address -> the NumPy array that holds the bytes

    def allocate(self, size, stream=None):
        """Allocate ``size`` bytes (uninitialised); ``stream`` is ignored.

        Raises
        ------
        OverflowError
            For a size outside ``[0, 2**64)`` or one no process can address.
        MemoryError
            When the memory is not there.
        """
        size = _uint64("size", size)
        _check_stream(stream)  # ignored, but only if it is a stream
        if size > sys.maxsize - _HOST_ALIGNMENT:
            raise OverflowError(
                f"size {size} is more bytes than a process can address ({sys.maxsize})"
            )
        try:
            storage = np.empty(size + _HOST_ALIGNMENT, dtype=np.uint8)
        except (MemoryError, ValueError) as exc:
            raise MemoryError(f"cannot allocate {size} bytes of host memory: {exc}") from exc
        base = storage.ctypes.data
        ptr = (base + _HOST_ALIGNMENT - 1) // _HOST_ALIGNMENT * _HOST_ALIGNMENT
        self._storage[ptr] = storage
        buffer = self._buffer(ptr, size)
        buffer._keeper.memory = storage  # what the buffer's views keep alive
        return buffer

    def deallocate(self, ptr, size, stream=None):
        """Release memory from :meth:`allocate`; ``size`` and ``stream`` are not needed.

        The memory is freed once nothing uses it: a buffer from :meth:`allocate` and its
        views keep it, so a call before the buffer's own (a second owner made with
        ``Buffer.from_handle(ptr, size, mr=resource)``, or a direct call) frees nothing
        in use; the buffer's own call then raises ``ValueError``, as any second call does.
        """
        ptr = _uint64("ptr", ptr)
        _uint64("size", size)  # not needed, but an argument like any other
        if self._storage.pop(ptr, None) is None:
            raise ValueError(
                f"ptr 0x{ptr:x} was not allocated by this HostMemoryResource or is already freed"
            )

    @property
    def device_id(self):
        return -1

    @property
    def is_device_accessible(self):
        return False

    @property
    def is_host_accessible(self):
        return True

    def __repr__(self):
        return "HostMemoryResource()"


class DeviceMemoryResource(MemoryResource):
    """Device memory on ``device_id``, allocated and freed in stream order.

    ``allocate(size, stream)`` uses ``cuMemAllocAsync`` on ``stream`` (default: the
    legacy default stream) from the device's current memory pool; the buffer frees it
    with ``cuMemFreeAsync`` on the same stream (or the one given to ``close``). The
    device's primary context is made current around each call when needed.

    Examples
    --------
    >>> DeviceMemoryResource(-1)
    Traceback (most recent call last):
    ...
    layoutkit._errors.AxisError: device_id must be >= 0, got -1
    """

    def __init__(self, device_id=0):
        self._device_id = _device_id(device_id)

    def allocate(self, size, stream=None):
        """Allocate ``size`` bytes of device memory ordered on ``stream``."""
        size = _uint64("size", size)
        _check_stream(stream)  # reject a bad stream before allocating
        if size == 0:
            return self._buffer(0, 0, stream)
        with _driver.device_context(self._device_id):
            ptr = _driver.mem_alloc_async(size, stream)
        return self._buffer(ptr, size, stream)

    def deallocate(self, ptr, size, stream=None):
        """Free device memory from :meth:`allocate` in stream order.

        A deallocation can run long after its stream was chosen (the last view of a
        closed buffer dies): a stream closed since (a :class:`~layoutkit.Stream`) no
        longer orders anything, so the device is waited for and the memory freed on the
        legacy default stream instead.
        """
        if ptr == 0:
            return
        with _driver.device_context(self._device_id):
            try:
                handle = _driver.stream_handle(stream)
            except TypeError:  # a stream object that no longer names a stream
                _driver.synchronize_device(self._device_id)
                handle = 0
            _driver.mem_free_async(ptr, handle)

    @property
    def device_id(self):
        return self._device_id

    @property
    def is_device_accessible(self):
        return True

    @property
    def is_host_accessible(self):
        return False

    def __repr__(self):
        return f"DeviceMemoryResource({self._device_id})"


class PinnedMemoryResource(MemoryResource):
    """Page-locked host memory (``cuMemHostAlloc``), mapped for every device.

    Accessible from the host and from GPU kernels; ``device_id`` is -1 because the
    memory belongs to no single device. Needs a CUDA driver; a context is made
    current (device 0's primary context) if none is.
    """

    def allocate(self, size, stream=None):
        """Allocate ``size`` bytes of pinned host memory; ``stream`` is ignored."""
        size = _uint64("size", size)
        _check_stream(stream)
        if size == 0:
            return self._buffer(0, 0)
        _driver.ensure_context()
        return self._buffer(_driver.mem_host_alloc(size), size)

    def deallocate(self, ptr, size, stream=None):
        """Free pinned memory from :meth:`allocate` (``cuMemFreeHost``)."""
        if ptr != 0:
            _driver.mem_free_host(ptr)

    @property
    def device_id(self):
        return -1

    @property
    def is_device_accessible(self):
        return True

    @property
    def is_host_accessible(self):
        return True

    def __repr__(self):
        return "PinnedMemoryResource()"


class ManagedMemoryResource(MemoryResource):
    """Managed (unified) memory (``cuMemAllocManaged``), associated with ``device_id``.

    Accessible from the host and from GPU kernels; the driver migrates pages.

    Examples
    --------
    >>> ManagedMemoryResource("0")
    Traceback (most recent call last):
    ...
    TypeError: device_id must be an integer, got '0' of type str
    """

    def __init__(self, device_id=0):
        self._device_id = _device_id(device_id)

    def allocate(self, size, stream=None):
        """Allocate ``size`` bytes of managed memory; ``stream`` is ignored."""
        size = _uint64("size", size)
        _check_stream(stream)
        if size == 0:
            return self._buffer(0, 0)
        with _driver.device_context(self._device_id):
            ptr = _driver.mem_alloc_managed(size)
        return self._buffer(ptr, size)

    def deallocate(self, ptr, size, stream=None):
        """Free managed memory from :meth:`allocate` (``cuMemFree``)."""
        if ptr == 0:
            return
        with _driver.device_context(self._device_id):
            _driver.mem_free(ptr)

    @property
    def device_id(self):
        return self._device_id

    @property
    def is_device_accessible(self):
        return True

    @property
    def is_host_accessible(self):
        return True

    @property
    def is_managed(self):
        return True

    def __repr__(self):
        return f"ManagedMemoryResource({self._device_id})"


class Device:
    """A CUDA device: its id, its primary context and its default memory resource.

    ``Device(n)`` returns the same object for the same ``n``; so do ``copy.copy``,
    ``copy.deepcopy`` and a pickle round trip of it. The id is checked against the devices
    the driver reports.

    Parameters
    ----------
    device_id : int, default 0

    Raises
    ------
    TypeError
        ``device_id`` not an integer.
    AxisError
        ``device_id`` negative or not below the number of devices.
    NoDriverError
        No CUDA driver on this machine (a ``RuntimeError``).

    Examples
    --------
    >>> Device(-1)
    Traceback (most recent call last):
    ...
    layoutkit._errors.AxisError: device_id must be >= 0, got -1
    """

    __slots__ = ("_device_id", "_memory_resource")
    _instances = {}

    def __new__(cls, device_id=0):
        # one object per (class, id): a subclass's D(0) is not Device(0), nor the other way
        existing = cls._instances.get((cls, device_id)) if type(device_id) is int else None
        if existing is not None:
            return existing
        device_id = _device_id(device_id)
        device = object.__new__(cls)
        device._device_id = device_id
        device._memory_resource = None
        return cls._instances.setdefault((cls, device_id), device)

    def __reduce__(self):
        # Device(n) again, one object per id: the default reduction (object.__new__ via
        # Device.__new__() then the pickled slots) wrote device n's id into Device(0)
        return type(self), (self._device_id,)

    @property
    def device_id(self):
        """The device ordinal."""
        return self._device_id

    def __int__(self):
        """The device ordinal, as cuda.core's ``int(device)`` gives it."""
        return self._device_id

    @property
    def name(self):
        """The driver's name for the device, e.g. ``"NVIDIA H200"``."""
        return _driver.device_name(self._device_id)

    @property
    def memory_resource(self):
        """This device's :class:`DeviceMemoryResource` (one per device)."""
        if self._memory_resource is None:
            self._memory_resource = DeviceMemoryResource(self._device_id)
        return self._memory_resource

    def set_current(self):
        """Make this device's primary context current on the calling thread."""
        _driver.set_current_device(self._device_id)

    def allocate(self, size, stream=None):
        """Allocate ``size`` bytes of device memory (see :class:`DeviceMemoryResource`)."""
        return self.memory_resource.allocate(size, stream)

    def sync(self):
        """Wait until all work on this device has finished."""
        _driver.synchronize_device(self._device_id)

    @property
    def default_stream(self):
        """The legacy default stream (handle 0) as a :class:`~layoutkit.Stream` of this
        device, as in cuda.core; never destroyed (closing the object closes only it)."""
        from .stream import Stream

        return Stream._made(0, self._device_id, self)

    def create_stream(self, obj=None, options=None):
        """A new non-blocking :class:`~layoutkit.Stream` of this device, as in cuda.core.

        Parameters
        ----------
        obj : object, optional
            Wrap this object's stream instead (anything ``copy(..., stream=)`` takes,
            e.g. with ``__cuda_stream__``); it stays the object's and is not destroyed.
        options : dict or object, optional
            ``nonblocking`` (bool), as a dict key or an attribute (cuda.core's
            ``StreamOptions``; a ``priority`` is refused).
        """
        from .stream import create_stream

        return create_stream(self._device_id, obj, options)

    def __repr__(self):
        try:
            return f"<Device {self._device_id} ({self.name})>"
        except _driver.CUDAError:
            return f"<Device {self._device_id}>"
