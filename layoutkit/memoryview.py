"""StridedMemoryView: memory (a Buffer) + layout + dtype + device + read-only flag.

A view is made from any tensor that speaks DLPack, the CUDA array interface, the
NumPy array interface or the buffer protocol, or from a :class:`~layoutkit.Buffer`
and a :class:`~layoutkit.StridedLayout`. It exports itself through the same protocols
without copying, so NumPy, CuPy, torch and JAX can read it, and it keeps the memory
alive for as long as any consumer holds it.

Every door reads its producer into one :class:`~layoutkit.interop.record.ImportRecord`
(see :mod:`layoutkit.interop`), checked before a view exists; a view is that record
plus, made on first use, its buffer and where its memory lives. A view describes what
it was made with: changing the producer's metadata afterwards (``array.shape = ...``)
does not change the view.

Address rule: ``view.layout`` is relative to ``view.buffer``, so
``view.ptr == view.buffer.ptr + view.layout.slice_offset_in_bytes``. For an imported
tensor the buffer spans exactly the bytes its elements occupy, starting at the lowest
addressed one; a tensor with negative strides therefore has a layout whose
``slice_offset`` points back at its element ``(0, ..., 0)``.

Read-only is a property of the memory: a view of read-only memory, every view derived
from it and every view of its buffer are read-only; so are views whose layout is not
unique (broadcasts, as in NumPy) unless ``from_buffer(..., is_readonly=False)`` asks.

Host memory needs no CUDA driver: NumPy arrays, buffer-protocol objects and CPU
DLPack tensors give views whose buffer knows it is host memory (DECISIONS 12).

Views cannot be pickled or deep-copied (``TypeError``, as for ``Buffer``): they refer to
process-local memory whose owner must stay unique; ``copy.copy`` returns the view itself.

Examples
--------
>>> import numpy as np
>>> from layoutkit import StridedMemoryView
>>> a = np.arange(12, dtype=np.int32).reshape(3, 4)
>>> view = StridedMemoryView.from_dlpack(a[:, ::-2], stream_ptr=-1)
>>> view.shape, view.strides, view.dtype, view.device_id
((3, 2), (4, -2), dtype('int32'), -1)
>>> np.from_dlpack(view).tolist() == a[:, ::-2].tolist()
True
>>> int(view[1, 0]), view[1:, 0].shape
(7, (2,))
"""

import _thread
import functools
import operator
import warnings

import numpy as np

from . import _driver
from ._dtypes import as_dtype, to_dlpack_dtype
from ._errors import SealedClass
from .interop import dlpack as _dlpack
from .interop import fastpaths as _fastpaths
from .interop._native import MEMORY, WRITABLE_MEMORY
from .interop.cai import cuda_interface_dict, read_cuda_array_interface
from .interop.exchange import ExchangeCapsule
from .interop.fastpaths import fast_record
from .interop.host import interface_dict, ndarray_record, read_array_interface
from .interop.record import CURRENT_DEVICE, HOST, ImportRecord
from .layout import StridedLayout, _as_index, _check_itemsize, _describe, plain_layout
from .memory import Buffer

__all__ = ["StridedMemoryView", "args_viewable_as_strided_memory", "check_memory"]

_kDLCPU = _dlpack.kDLCPU
_kDLCUDA = _dlpack.kDLCUDA
_kDLCUDAHost = _dlpack.kDLCUDAHost
_kDLCUDAManaged = _dlpack.kDLCUDAManaged
_CPU_DEVICE = (_kDLCPU, 0)
_STREAMS = 2**64  # the stream_ptr ints a door passes on unread: -1 and [0, 2**64)
_PUBLISH_LOCK = _thread.allocate_lock()  # a view's one publication of its Buffer
_attribute = operator.attrgetter


def _has(obj, name):
    """``hasattr``, where an attribute whose lookup raises (not AttributeError) counts as
    present: the protocol's reader then reports the producer's failure, named."""
    try:
        return hasattr(obj, name)
    except Exception:
        return True


def _is_dlpack(obj):
    return _has(obj, "__dlpack__") and _has(obj, "__dlpack_device__")


class _NoRecord:
    """The record of an empty view (the deprecated ``StridedMemoryView()``): no layout."""

    def __getattr__(self, name):
        raise ValueError(
            "Cannot infer layout: this StridedMemoryView was made empty (StridedMemoryView() "
            "without an object); it has no memory and no layout"
        )


_NO_RECORD = _NoRecord()
_NO_OBJECT = object()  # StridedMemoryView() without an object; None is an object with no interface


class StridedMemoryView(metaclass=SealedClass):
    """A strided tensor in memory: pointer, layout, dtype, device, read-only flag.

    Build views with :meth:`from_dlpack`, :meth:`from_cuda_array_interface`,
    :meth:`from_array_interface`, :meth:`from_any_interface` or :meth:`from_buffer`
    (``StridedMemoryView(obj, stream_ptr)`` still works, as :meth:`from_any_interface`,
    but is deprecated as in cuda.core; ``StridedMemoryView()`` without an object is
    cuda.core's empty view, whose layout raises ``ValueError``). All attributes are
    read-only.

    Attributes
    ----------
    ptr : int
        Address of element ``(0, ..., 0)``.
    layout : StridedLayout
        Shape, strides (in elements) and itemsize, relative to :attr:`buffer`.
    shape, strides : tuple of int
        The layout's; ``strides`` are in elements (``layout.strides_in_bytes`` gives bytes).
    ndim, size : int
        Number of dimensions and of elements.
    dtype : numpy.dtype or None
        ``None`` only for a :meth:`from_buffer` view made without a dtype.
    device_id : int
        The device holding the memory; -1 for host memory.
    is_device_accessible : bool
        Whether GPU kernels can access the memory.
    readonly : bool
        Whether the memory must not be written through this view.
    exporting_obj : object
        The imported object, or the Buffer a :meth:`from_buffer` view was made from.
    buffer : Buffer
        The memory the layout addresses (made on first use for imported tensors).

    Examples
    --------
    >>> import numpy as np
    >>> from layoutkit import StridedMemoryView
    >>> view = StridedMemoryView.from_array_interface(np.ones((2, 3), dtype=np.float32))
    >>> view.size, view.readonly, view.is_device_accessible
    (6, False, False)
    """

    __slots__ = (
        "_record",  # the ImportRecord the view was made from (never changes)
        "_location",  # where the memory lives, once known (a record may leave it open)
        "_buffer",  # Buffer, or None until made (only a made buffer can have been closed)
        "_numba_record",  # what @njit code reads of the view (layoutkit._numba_view), or None
        "_exports",  # what exports describe, once made (the record never changes), or None
        "__weakref__",
    )

    def __new__(cls, obj=_NO_OBJECT, stream_ptr=None):
        # the constructor is __new__ (as for StridedLayout): StridedMemoryView.__new__(cls)
        # makes the complete empty view, never one whose slots are unset
        warnings.warn(
            "StridedMemoryView(obj, stream_ptr) is deprecated; use "
            "StridedMemoryView.from_any_interface(obj, stream_ptr) or the from_dlpack / "
            "from_cuda_array_interface / from_array_interface constructors",
            DeprecationWarning,
            stacklevel=2,
        )
        if obj is _NO_OBJECT:  # StridedMemoryView(): cuda.core's empty view (no layout)
            return _made(cls, _NO_RECORD, None, None)
        other = cls.from_any_interface(obj, stream_ptr)
        return _made(cls, other._record, other._location, other._buffer)

    # ------------------------------------------------------------------ construction
    @classmethod
    def _from_record(cls, record, buffer=None):
        """The one place a view is made: from a checked :class:`ImportRecord`."""
        if not record.ptr and buffer is None and record.layout.volume:
            buffer = _NO_MEMORY  # a description only (CUDA array interface): see check_memory
        self = _made(cls, record, record.location, buffer)
        if not record.readonly and not record.layout.is_unique:
            # aliasing views are read-only (NumPy's rule), but the memory is not: its
            # buffer, made first, stays writable for from_buffer(..., is_readonly=False)
            if buffer is not _NO_MEMORY:
                self.buffer  # noqa: B018 (made for its read-only flag)
            self._record = record._replace(readonly=True)
        return self

    @classmethod
    def from_dlpack(cls, obj, stream_ptr=None):
        """A view of an object that supports DLPack (``__dlpack__`` and ``__dlpack_device__``).

        A versioned (DLPack 1.x) capsule is requested, with a fall-back to the legacy
        protocol; the read-only flag and ``byte_offset`` are honoured. The producer's
        deleter runs exactly once, when the last view or buffer using the tensor dies.
        NumPy arrays, torch tensors (through DLPack 1.3's C exchange API) and CuPy and
        JAX arrays are read by fast paths with the same result.

        Parameters
        ----------
        obj : object
            The producer.
        stream_ptr : int, stream object or None
            The consumer stream handle; ``-1`` means no synchronization. ``None`` is
            ambiguous for a CUDA tensor; a CPU tensor needs no stream (DECISIONS 12).

        Raises
        ------
        TypeError
            When ``obj`` does not support DLPack or ``stream_ptr`` is not a stream.
        BufferError
            For an ambiguous stream, an unsupported device, or a bad capsule.
        ValueError, OverflowError
            For a negative extent, an invalid stride or values beyond int64.

        Examples
        --------
        >>> import numpy as np
        >>> a = np.arange(6.0).reshape(2, 3)
        >>> StridedMemoryView.from_dlpack(a.T).strides
        (1, 3)
        """
        if stream_ptr is not None and (type(stream_ptr) is not int or not -1 <= stream_ptr < _STREAMS):
            stream_ptr = _dlpack.consumer_stream(stream_ptr)  # refused, or read: before any import
        if type(obj) is _ndarray and (stream_ptr is None or stream_ptr == -1 or stream_ptr == 0):
            record = ndarray_record(obj, True)  # the NumPy fast path, inline: the common case
            if record is not None:
                return _made(cls, record, HOST, None)
        record = fast_record(obj, stream_ptr, True)
        if record is None:
            if not _is_dlpack(obj):
                raise TypeError(
                    f"{type(obj).__name__} object does not support DLPack (needs __dlpack__ "
                    "and __dlpack_device__)"
                )
            record = _dlpack.import_dlpack(obj, stream_ptr)
        return cls._from_record(record)

    @classmethod
    def from_cuda_array_interface(cls, obj, stream_ptr=None):
        """A view of an object with ``__cuda_array_interface__`` (version 3 or newer).

        Parameters
        ----------
        obj : object
            The producer.
        stream_ptr : int
            The consumer stream handle. Unless it is ``-1``, the consumer stream waits
            for the producer's stream when the two differ. ``None`` raises ``BufferError``.

        Raises
        ------
        TypeError
            When ``obj`` has no CUDA array interface.
        BufferError
            For ``stream_ptr=None``, a version below 3, a mask or a malformed entry.
        ValueError, OverflowError
            For a negative extent, a stride that is no multiple of the itemsize or
            values beyond int64.

        Notes
        -----
        A null ``data`` pointer with elements is accepted, as cuda.core 1.2.2 does: the
        view describes memory that does not exist, so everything that would touch it
        (copies, exports, element access, kernels, ``@njit``, :attr:`buffer`, sub-views)
        raises ``BufferError`` (see :func:`check_memory`).

        A producer whose type has the interface and a fast path
        (:mod:`layoutkit.interop.fastpaths`) is read through the fast path when that
        gives device-accessible memory, as cuda.core 1.2.2 reads ``torch.Tensor``
        through its torch bridge whichever door is used: torch still exports version 2,
        which this door refuses from other producers. An object without the interface is
        refused, whatever else it exports. The view then describes what the interface
        would: C-contiguous memory has implicit strides (``strides is None``), as CuPy,
        JAX and torch export it, and a view's own (explicit) strides for a view.
        """
        if stream_ptr is not None and _has(type(obj), "__cuda_array_interface__"):
            if type(stream_ptr) is not int or not -1 <= stream_ptr < _STREAMS:
                stream_ptr = _dlpack.consumer_stream(stream_ptr)  # refused, or read
            record = fast_record(obj, stream_ptr, False)
            if record is not None and record.location is not None and (
                record.location.is_device_accessible
            ):
                layout = record.layout
                if layout.strides is not None and layout.is_contiguous_c and not (
                    issubclass(type(obj), StridedMemoryView)  # its interface is explicit
                ):
                    record = record._replace(
                        layout=StridedLayout(layout.shape, None, layout.itemsize)
                    )
                return cls._from_record(record)
        return cls._from_record(read_cuda_array_interface(obj, stream_ptr))

    @classmethod
    def from_array_interface(cls, obj):
        """A view of host memory: ``__array_interface__`` (v3) or the buffer protocol.

        No CUDA driver is needed. The view is host-accessible only (``device_id`` -1).

        Raises
        ------
        TypeError
            When ``obj`` has neither interface.
        BufferError
            For a version below 3, a mask, a malformed entry, or an array that does not
            fit in the buffer its ``data`` names.
        ValueError, OverflowError
            For a negative extent, a stride that is no multiple of the itemsize or
            values beyond int64.

        Examples
        --------
        >>> view = StridedMemoryView.from_array_interface(bytearray(b"abcd"))
        >>> view.shape, view.dtype, view.readonly
        ((4,), dtype('uint8'), False)
        >>> StridedMemoryView.from_array_interface(b"abcd").readonly
        True
        """
        if type(obj) is _ndarray:
            record = ndarray_record(obj)
            if record is not None:
                return _made(cls, record, HOST, None)
        return cls._from_record(read_array_interface(obj))

    @classmethod
    def from_any_interface(cls, obj, stream_ptr=None):
        """A view through the best protocol ``obj`` supports.

        The producer's fast path if its type has one, else DLPack, then
        ``__cuda_array_interface__``, then host memory through ``__array_interface__``
        or the buffer protocol (where ``stream_ptr`` is unused). Host producers need no
        ``stream_ptr``. NumPy arrays (subclasses included) are read through their array
        interface, which carries the dtypes DLPack has no code for (structured, strings,
        datetimes, other byte orders).

        Raises
        ------
        TypeError
            When ``obj`` supports none of them.

        Examples
        --------
        >>> import numpy as np
        >>> StridedMemoryView.from_any_interface(np.zeros((2, 3))).shape
        (2, 3)
        """
        if stream_ptr is not None and (type(stream_ptr) is not int or not -1 <= stream_ptr < _STREAMS):
            stream_ptr = _dlpack.consumer_stream(stream_ptr)  # refused, or read: before any import
        if type(obj) is _ndarray and (stream_ptr is None or stream_ptr == -1 or stream_ptr == 0):
            record = ndarray_record(obj)
            if record is not None:
                return _made(cls, record, HOST, None)
        record = fast_record(obj, stream_ptr, False)
        if record is not None:
            return cls._from_record(record)
        if isinstance(obj, _ndarray):  # host memory: its interface carries every dtype
            return cls._from_record(read_array_interface(obj))
        if _is_dlpack(obj):
            return cls._from_record(_dlpack.import_dlpack(obj, stream_ptr))
        if _has(obj, "__cuda_array_interface__"):
            return cls._from_record(read_cuda_array_interface(obj, stream_ptr))
        if not _has(obj, "__array_interface__"):
            try:
                memoryview(obj).release()
            except TypeError:
                raise TypeError(
                    f"{type(obj).__name__} object supports none of DLPack, "
                    "__cuda_array_interface__, __array_interface__ or the buffer protocol"
                ) from None
        return cls._from_record(read_array_interface(obj))

    @classmethod
    def from_buffer(cls, buffer, *args, shape=None, strides=None, layout=None, itemsize=None,
                    dtype=None, is_readonly=None):  # fmt: skip
        """A view of ``buffer``: ``ptr = buffer.ptr + layout.slice_offset_in_bytes``.

        Two call forms, as in cuda.core (DECISIONS 20)::

            from_buffer(buffer, layout, dtype=None, is_readonly=None)
            from_buffer(buffer, shape, strides=None, *, itemsize=None, dtype=None,
                        is_readonly=None)

        Parameters
        ----------
        buffer : Buffer
            Open buffer; every element the layout addresses must lie inside it.
        layout : StridedLayout
            Shape, strides and itemsize, relative to ``buffer.ptr``.
        shape, strides : sequence of int
            Instead of ``layout``: extents and strides in elements (``None``: C order).
        itemsize : int, optional
            With ``shape``: bytes per element; may be left out when ``dtype`` is given.
        dtype : optional
            Anything :func:`numpy.dtype` accepts (or an ml_dtypes name); its itemsize must
            be the layout's. ``None`` leaves the view without a dtype.
        is_readonly : bool or None
            ``True``: read-only. ``None``: read-only if the buffer's memory is or the
            layout is not unique (DECISIONS 19). ``False``: writable, even for a layout
            that aliases elements; refused for read-only memory. Other values are read by
            their truth value (``0``, ``np.False_``: ``False``), as cuda.core reads them.

        Raises
        ------
        TypeError
            For a non-Buffer, a non-layout, an unknown call form, or a value that is
            not a dtype.
        ValueError
            For a closed buffer, a dtype whose itemsize differs from the layout's,
            neither ``itemsize`` nor ``dtype`` in the shape form, a layout that reaches
            outside the buffer (DECISIONS 14), or ``is_readonly=False`` for read-only
            memory.

        Examples
        --------
        >>> import numpy as np
        >>> from layoutkit import StridedLayout
        >>> a = np.arange(8, dtype=np.int64)
        >>> buf = StridedMemoryView.from_array_interface(a).buffer  # host memory, 64 bytes
        >>> view = StridedMemoryView.from_buffer(buf, StridedLayout.dense((2, 4), 8)[:, 1::2], np.int64)
        >>> np.from_dlpack(view).tolist()
        [[1, 3], [5, 7]]
        >>> StridedMemoryView.from_buffer(buf, shape=(2, 2), strides=(4, 1), dtype=np.int64).shape
        (2, 2)
        >>> StridedMemoryView.from_buffer(buf, StridedLayout.dense((3, 4), 8), "i8")
        Traceback (most recent call last):
        ...
        ValueError: layout ... reaches byte 96, past the end of the buffer. Expected at least 96 bytes, got 64 bytes...
        """
        layout, dtype, is_readonly = _buffer_arguments(
            args, shape, strides, layout, itemsize, dtype, is_readonly
        )
        if is_readonly is not None:  # its truth value, as cuda.core reads it (0 is False)
            is_readonly = bool(is_readonly)
        if not issubclass(type(buffer), Buffer):  # not isinstance: __class__ may lie
            raise TypeError(f"buffer must be a layoutkit Buffer, got {type(buffer).__name__}")
        if buffer.is_closed:
            raise ValueError("buffer is closed: a view needs an open Buffer")
        if is_readonly is False and buffer.is_readonly:
            raise ValueError(
                "is_readonly=False, but the buffer's memory is read-only (it came from a "
                "read-only tensor); a writable view of it cannot be made"
            )
        readonly = bool(is_readonly) or buffer.is_readonly
        view = cls._over_buffer(buffer, layout, dtype, readonly, buffer, None, None)
        if is_readonly is False and view._record.readonly:  # asked for: writable aliasing
            view._record = view._record._replace(readonly=False)
        return view

    @classmethod
    def _over_buffer(cls, buffer, layout, dtype, readonly, exporter, location, dl_device):
        _check_layout_argument(layout)
        layout = plain_layout(layout)  # a subclass's properties may lie
        if dtype is not None:
            dtype = as_dtype(dtype)
            if dtype.itemsize != layout.itemsize:
                raise ValueError(
                    f"dtype {dtype} has itemsize {dtype.itemsize} but the layout's itemsize "
                    f"is {layout.itemsize}; pass a layout of itemsize {dtype.itemsize} with "
                    f"it (layout.repacked({dtype.itemsize}) reads the same bytes)"
                )
        # one reading of the buffer, after the dtype (whose conversion may run the caller's
        # code, which may close the buffer): what keeps the memory first, then its checks
        owner = buffer._keeper
        base, size = buffer._ptr, buffer._size
        if buffer._closed:
            raise ValueError("buffer is closed: a view needs an open Buffer")
        low, high = layout.offset_bounds
        if low <= high:  # a layout with no elements fits any buffer
            end = (high + 1) * layout.itemsize
            if low < 0:
                raise ValueError(
                    f"layout {layout!r} reaches offset {low}, before the start of the buffer; "
                    "use to_dense() for a layout that starts at the buffer"
                )
            if end > size:
                raise ValueError(
                    f"layout {layout!r} reaches byte {end}, past the end of the buffer. "
                    f"Expected at least {end} bytes, got {size} bytes. Use to_dense() "
                    "for a layout without gaps"
                )
        ptr = base + layout.slice_offset_in_bytes
        # the record keeps the memory (not only the Buffer, which close() empties) alive
        if owner is None:
            owner = buffer
        record = ImportRecord(ptr, layout, dtype, location, readonly, exporter, owner, dl_device)
        return cls._from_record(record, buffer)

    def view(self, layout=None, dtype=None):
        """This view's memory with another layout and/or dtype.

        ``layout`` is relative to :attr:`buffer`, like :attr:`layout` (so
        ``view.view(view.layout[::2])`` takes every other element). A missing argument
        keeps this view's; with both missing, the view itself is returned. The result
        keeps the read-only flag (and is read-only where ``layout`` is not unique) and
        the exporting object. No CUDA driver is needed for host memory. Compiled code
        (``@njit``, kernels) has the same method, with a dtype known when it compiles.

        Raises
        ------
        ValueError
            For an itemsize mismatch or a layout that reaches outside the buffer.

        Examples
        --------
        >>> import numpy as np
        >>> view = StridedMemoryView.from_dlpack(np.arange(8, dtype=np.int32), -1)
        >>> pairs = view.view(view.layout.repacked(8), np.int64)
        >>> pairs.shape, pairs.dtype
        ((4,), dtype('int64'))
        """
        if layout is None and dtype is None:
            return self
        self._check_open("view")
        record = self._record
        if layout is None:
            layout = record.layout
        if dtype is None:
            dtype = record.dtype
        return self._over_buffer(
            self.buffer, layout, dtype, record.readonly, record.exporter, self._location,
            record.dl_device,
        )  # fmt: skip

    def with_layout(self, layout):
        """The view of the same memory with ``layout`` (relative to :attr:`buffer`).

        The same as ``view(layout)``, and what ``v.with_layout(layout)`` means in
        compiled code; the itemsize must stay the dtype's.

        Examples
        --------
        >>> import numpy as np
        >>> view = StridedMemoryView.from_array_interface(np.arange(6.0).reshape(2, 3))
        >>> view.with_layout(view.layout.permuted((1, 0))).shape
        (3, 2)
        """
        if not isinstance(layout, StridedLayout):
            raise TypeError(
                f"with_layout() needs a StridedLayout, got {_describe(layout)} of type "
                f"{type(layout).__name__}"
            )
        return self.view(layout)

    def permuted(self, axis_order):
        """The view with its axes in ``axis_order`` (as ``layout.permuted``; a transpose).

        Examples
        --------
        >>> import numpy as np
        >>> view = StridedMemoryView.from_array_interface(np.zeros((2, 3, 4)))
        >>> view.permuted((2, 0, 1)).shape
        (4, 2, 3)
        """
        return self.view(self._record.layout.permuted(axis_order))

    # ------------------------------------------------------------------ attributes
    ptr = property(_attribute("_record.ptr"), doc="Address of element ``(0, ..., 0)`` (``int``).")
    layout = property(
        _attribute("_record.layout"), doc="The :class:`StridedLayout`, relative to :attr:`buffer`."
    )
    _layout = layout  # cuda.core's name for it
    shape = property(_attribute("_record.layout.shape"), doc="Extents (``tuple`` of ``int``).")
    strides = property(
        _attribute("_record.layout.strides"),
        doc="Strides in elements (``tuple`` of ``int``), or ``None`` for implicit C strides "
        "(a producer that gave none), as ``layout.strides`` and cuda.core 1.2.2 have it.",
    )
    size = property(_attribute("_record.layout.volume"), doc="Number of elements.")
    ndim = property(_attribute("_record.layout.ndim"), doc="Number of dimensions.")
    dtype = property(
        _attribute("_record.dtype"),
        doc="The element type (:class:`numpy.dtype`), or ``None`` if the view has none.",
    )
    readonly = property(
        _attribute("_record.readonly"),
        doc="Whether the memory must not be written through this view.",
    )
    exporting_obj = property(
        _attribute("_record.exporter"),
        doc="The imported object, or the Buffer a :meth:`from_buffer` view was made from.",
    )

    def _where(self):
        """Where the memory lives (a :class:`~layoutkit._driver.Location`), found once."""
        location = self._location
        if location is None or location.device_id is None:
            if location is CURRENT_DEVICE:  # an empty CUDA tensor without a pointer
                location = location._replace(device_id=_driver.ensure_context())
            else:
                location = self.buffer._location("device_id")
            self._location = location
        return location

    @property
    def device_id(self):
        """Device ordinal of the memory; -1 for host memory."""
        return self._where()[0]

    @property
    def is_device_accessible(self):
        """Whether GPU kernels can access the memory."""
        return self._where()[1]

    @property
    def buffer(self):
        """The :class:`~layoutkit.Buffer` that :attr:`layout` addresses (made on first use)."""
        buffer = self._buffer
        if buffer is _NO_MEMORY:
            check_memory(self, "buffer")  # raises: there is no memory to make a Buffer of
        if buffer is None:
            record = self._record
            layout = record.layout
            base = record.ptr - layout.slice_offset_in_bytes
            size = (layout.max_offset + 1) * layout.itemsize
            location = self._location
            if location is CURRENT_DEVICE:  # (CLAIMED_DEVICE: the Buffer asks the driver)
                location = self._where()
            made = Buffer._from_known(
                base, size, owner=record.owner, location=location, readonly=record.readonly
            )
            with _PUBLISH_LOCK:  # one Buffer per view: closing it is closing the view's
                buffer = self._buffer
                if buffer is None:
                    buffer = self._buffer = made
        return buffer

    # ------------------------------------------------------------------ element access
    def _check_open(self, operation):
        """Refuse ``operation`` on memory the view does not have (see :func:`check_memory`)."""
        check_memory(self, operation)

    def _element_address(self, index, operation):
        """Address of the element ``index`` names, or ``None`` when it names a sub-view."""
        record = self._record
        layout = record.layout
        sub = layout.sliced(index)
        if sub.ndim or not _all_integers(index, layout.ndim):
            return sub, None
        self._check_open(operation)
        if not self._where()[2]:
            raise ValueError(
                f"{operation}: the view is device memory (device {self.device_id}), which the "
                "host cannot read; copy it to host memory, or index it inside a kernel"
            )
        if record.dtype is None:
            raise TypeError(f"{operation}: the view has no dtype; make one with view(dtype=...)")
        return sub, record.ptr + (sub.slice_offset - layout.slice_offset) * layout.itemsize

    def __getitem__(self, index):
        """``v[i, j]``: the element (a NumPy scalar); slices, ``None``, ``...``: a view.

        Indices follow NumPy's basic indexing (negative indices count from the end); an
        index outside its extent raises ``AxisError`` (an ``IndexError``). Elements are
        read from host memory only: device views raise ``ValueError`` (their sub-views
        are views as any other). An element of a structured or subarray dtype is a
        read-only copy (NumPy's would be a view of memory it does not keep alive).
        """
        sub, address = self._element_address(index, "indexing")
        if address is None:
            return self.view(sub)
        return _element(self._record.dtype, address)

    def __setitem__(self, index, value):
        """``v[i, j] = x`` stores one element (cast to the dtype); ``v[1:] = x`` copies.

        Host memory only for elements; read-only views raise ``ValueError``. A slice
        assignment copies ``x`` (a view, an array or a scalar, broadcast as NumPy does)
        with :func:`layoutkit.copy`, read as NumPy's assignment reads it (see
        ``_assignment_source``: casts), where the host can read it (:func:`layoutkit.copy`
        itself drops leading extent-1 axes and reads overlapping sources first, as
        ``np.copyto`` does, but does not cast).
        """
        record = self._record
        if record.readonly:
            raise ValueError("item assignment: the view is read-only")
        sub, address = self._element_address(index, "item assignment")
        if address is None:
            from .copy import copy

            target = self.view(sub)
            copy(target, _assignment_source(target, value))
            return
        if issubclass(type(value), StridedMemoryView):
            value = np.asarray(value)  # NumPy reads an array (a size-1 one, or it raises)
        if id(type(value)) not in _PLAIN_SCALARS:
            # its conversion may run the caller's code (__float__, __index__, ...), which may
            # close the buffer: converted first (NumPy's element assignment), checked after
            element = np.empty((), record.dtype)
            element[()] = value
            self._check_open("item assignment")
            value = element
        np.frombuffer(WRITABLE_MEMORY, record.dtype, 1, address)[0] = value

    def __len__(self):
        layout = self._record.layout
        if not layout.ndim:
            raise TypeError("len() of a 0-d view")
        return layout.shape[0]

    def __iter__(self):
        """``for x in view``: ``view[0]``, ``view[1]``, ... as NumPy iterates (elements of
        a 1-d view, views of one dimension fewer otherwise); a 0-d view raises
        ``TypeError``, as a 0-d array does."""
        layout = self._record.layout
        if not layout.ndim:
            raise TypeError("iteration over a 0-d view")
        return map(self.__getitem__, range(layout.shape[0]))

    # ------------------------------------------------------------------ copies
    def copy_from(self, other, stream=None, allocator=None, blocking=None):
        """Copy the elements of ``other`` into this view (see :func:`layoutkit.copy`).

        ``other`` may be a view or anything :meth:`from_any_interface` accepts;
        ``allocator`` and ``blocking`` are cuda.core's (see :func:`layoutkit.copy`).
        """
        from .copy import copy

        return copy(self, other, stream, allocator, blocking)

    def copy_to(self, other, stream=None, allocator=None, blocking=None):
        """Copy the elements of this view into ``other`` (see :func:`layoutkit.copy`).

        ``other`` may be a view or anything :meth:`from_any_interface` accepts;
        ``allocator`` and ``blocking`` are cuda.core's (see :func:`layoutkit.copy`).
        """
        from .copy import copy

        return copy(other, self, stream, allocator, blocking)

    # ------------------------------------------------------------------ export
    def __dlpack_device__(self):
        """``(device_type, device_id)`` as DLPack names them."""
        self._check_open("__dlpack_device__")
        device = self._record.dl_device
        if device is not None:
            return device
        device_id, device_accessible, host_accessible, managed = self._where()
        if device_accessible:
            if not host_accessible:
                return (_kDLCUDA, device_id)
            return (_kDLCUDAManaged if managed else _kDLCUDAHost, 0)
        if host_accessible:
            return _CPU_DEVICE
        raise BufferError("buffer is neither device-accessible nor host-accessible")

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export the view as a DLPack capsule, without a copy.

        The capsule keeps this view (and so its memory) alive until the consumer's
        deleter runs. A versioned (DLPack 1.x) capsule is made when ``max_version`` is
        at least ``(1, 0)``; it carries the read-only flag. ``stream`` needs no action:
        a view has no pending work of its own. bfloat16 and float8 views are exported
        with their DLPack type codes.

        Raises
        ------
        BufferError
            Without a dtype, for a dtype DLPack cannot carry, for ``copy=True``, for
            another ``dl_device`` (a host-accessible view may be asked for ``(1, 0)``,
            the CPU), for a read-only view asked for a legacy capsule (unless its
            memory came through one and it does not alias: JAX's arrays), for a
            ``max_version`` tuple that is not ``(major, minor)``, or for a closed buffer.
        TypeError
            When ``max_version`` is not a tuple.
        """
        # the arguments first: reading them may run the caller's code (__index__, a
        # stream's __cuda_stream__), which may close the buffer; the memory is checked
        # after that
        versioned = _dlpack.wants_versioned(max_version)
        _dlpack.refuse_copy(copy, "StridedMemoryView")
        dl_device = _dlpack.requested_device(dl_device)
        if stream is not None:
            _dlpack.consumer_stream(stream)
        exports = self._exports
        if dl_device is None and exports is not None:
            header = exports.get(versioned)
            if header is not None:  # exported before: every check below passed then and
                # depends only on what never changes (the record, where the memory lives),
                # but for a closed buffer
                self._check_open("__dlpack__")
                return _dlpack.export_header(self, header, versioned)
        self._check_open("__dlpack__")
        record = self._record
        device = record.dl_device or self.__dlpack_device__()
        if dl_device is not None and dl_device != device:
            if dl_device != _CPU_DEVICE or not self._where()[2]:
                raise BufferError(
                    f"dl_device={dl_device!r}: the view lives on {device} and is not copied"
                )
            device = _CPU_DEVICE  # pinned or managed memory, read as host memory
        if record.readonly and not versioned and not _legacy_memory(record):
            raise BufferError(
                "a read-only view needs a versioned DLPack capsule (max_version >= (1, 0)); "
                "the legacy protocol cannot mark data read-only"
            )
        if exports is None:
            exports = self._exports = {}
        key = versioned if dl_device is None else (device, versioned)  # the header's bytes
        header = exports.get(key)
        if header is None:
            header = exports[key] = self._dlpack_header(device, versioned)
        return _dlpack.export_header(self, header, versioned)

    def _dlpack_header(self, device, versioned):
        """The bytes of this view's DLPack managed tensor (shape and strides: the layout's)."""
        _, ptr, shape, _, dtype_triple, device, flags = self._export_fields(device)
        if flags & _dlpack.FLAG_IS_SUBBYTE_TYPE_PADDED and not versioned:
            raise BufferError(f"{self._record.dtype} needs a versioned DLPack capsule")
        ndim = len(shape)
        shape_at = self._record.layout._lay().buffer_info()[0] if ndim else 0  # lives as the view
        return _dlpack.managed_header(
            self, ptr, ndim, shape_at, shape_at + 8 * ndim if ndim else 0, dtype_triple, device,
            flags, versioned,
        )  # fmt: skip

    def _export_fields(self, device=None):
        """What a DLPack export of this view says (``pack_managed``'s arguments)."""
        record = self._record
        dtype = record.dtype
        if dtype is None:
            raise BufferError("the view has no dtype; DLPack export needs one")
        code, bits, lanes, padded = to_dlpack_dtype(dtype)
        flags = _dlpack.FLAG_READ_ONLY if record.readonly else 0
        if padded:
            flags |= _dlpack.FLAG_IS_SUBBYTE_TYPE_PADDED
        layout = record.layout
        ptr = record.ptr if layout.volume else 0
        if device is None:
            device = record.dl_device or self.__dlpack_device__()
        return self, ptr, layout.shape, layout._strides, (code, bits, lanes), device, flags

    def _interface(self, make):
        """A new copy of the interface dict ``make`` describes this view with (cached)."""
        exports = self._exports
        if exports is None:
            exports = self._exports = {}
        interface = exports.get(make)
        if interface is None:
            record = self._record
            layout = record.layout
            interface = make(
                record.ptr, record.readonly, layout.shape, layout._byte_strides(), record.dtype,
                layout.itemsize,
            )  # fmt: skip
            if type(interface.get("descr")) is list:
                return interface  # a structured dtype's descr list: mutable, not cached
            exports[make] = interface
        return dict(interface)  # a consumer may change its dict; the cached one stays right

    @property
    def __array_interface__(self):
        """The NumPy array interface (v3) of a host-accessible view.

        ml_dtypes types (bfloat16, float8, ...) come back as themselves from
        ``numpy.asarray(view)`` (their dtype is given as ``descr``).
        """
        self._check_open("__array_interface__")
        if not self._where()[2]:
            raise AttributeError(
                "__array_interface__: the view's memory is not host-accessible "
                "(use __cuda_array_interface__)"
            )
        return self._interface(interface_dict)

    @property
    def __cuda_array_interface__(self):
        """The CUDA array interface (v3) of a device-accessible view (``stream`` None)."""
        self._check_open("__cuda_array_interface__")
        if not self._where()[1]:
            raise AttributeError(
                "__cuda_array_interface__: the view's memory is not device-accessible "
                "(use __array_interface__)"
            )
        return self._interface(cuda_interface_dict)

    @property
    def _numba_type_(self):
        """The Numba type of this view (lets ``@njit`` code take views as arguments)."""
        record = self._numba_record
        if record is None:
            record = _numba_view_record(self)
        return record[0]

    def __copy__(self):
        return self  # immutable: a copy is the view itself

    def __reduce_ex__(self, protocol):
        raise TypeError(
            "cannot pickle or deep-copy a StridedMemoryView: it refers to process-local memory "
            "whose owner must stay unique; copy the data (e.g. numpy.array(view)) instead"
        )

    def __setstate__(self, state):
        # a crafted pickle (copyreg.__newobj__ + BUILD) would set the record to any pointer
        raise TypeError(
            "a StridedMemoryView cannot be unpickled: views are made by an import or from_buffer"
        )

    def _repr_html_(self):
        """Jupyter: a picture of the layout and a table of the view's properties."""
        from .display import view_html

        return view_html(self)

    def __repr__(self):
        record = getattr(self, "_record", None)
        if record is None:  # object.__new__(StridedMemoryView): repr must not raise
            return "StridedMemoryView(never initialised)"
        if record is _NO_RECORD:
            return "StridedMemoryView(empty)"
        layout = record.layout
        dtype = record.dtype
        return (
            f"StridedMemoryView(ptr=0x{record.ptr:x},\n"
            f"                  shape={layout.shape},\n"
            f"                  strides={layout.strides},\n"
            f"                  itemsize={layout.itemsize},\n"
            f"                  dtype={dtype if dtype is None else dtype.name},\n"
            f"                  device_id={_or_unknown(lambda: self.device_id)},\n"
            f"                  is_device_accessible={_or_unknown(lambda: self.is_device_accessible)},\n"
            f"                  readonly={record.readonly},\n"
            f"                  exporting_obj={type(record.exporter).__name__})"
        )


def _or_unknown(read):
    """``read()``, or ``"unknown"`` where only a CUDA driver could say (``repr`` never fails)."""
    try:
        return read()
    except (RuntimeError, _driver.CUDAError):  # NoDriverError is a RuntimeError
        return "unknown"


class _NoMemory:
    """The buffer of a view of a null pointer with elements: memory that does not exist.

    It reads as a closed Buffer does (closed, no bytes, handle 0), so every check that
    refuses closed buffers refuses it too.
    """

    is_closed = True
    is_readonly = True
    size = 0
    handle = 0

    def __repr__(self):
        return "<no memory>"


_NO_MEMORY = _NoMemory()


def check_memory(view, operation):
    """Refuse ``operation`` (``BufferError``) where ``view`` has no memory to touch.

    The one check before anything reads or writes a view's memory (copies, exports that
    hand the pointer on, element access, kernel arguments, ``@njit`` unboxing, the
    buffer): the view's buffer was closed (whatever the view cached before), or the view
    describes a null pointer with elements (a CUDA array interface may: cuda.core 1.2.2
    accepts one; such a view is a description only). ``view`` may be any view-like
    object with ``ptr`` and ``layout``.

    Examples
    --------
    >>> class Described:  # a CUDA array interface without memory behind it
    ...     __cuda_array_interface__ = {"version": 3, "shape": (2,), "typestr": "<f4",
    ...                                 "data": (0, False)}
    >>> view = StridedMemoryView.from_cuda_array_interface(Described(), -1)
    >>> view.shape, view.ptr
    ((2,), 0)
    >>> check_memory(view, "copy")
    Traceback (most recent call last):
    ...
    BufferError: copy: the view has a null data pointer but 2 elements; it describes memory that does not exist
    """
    buffer = getattr(view, "_buffer", None)  # only a made buffer can have been closed
    if buffer is not None and buffer.is_closed:
        if buffer is _NO_MEMORY:
            raise BufferError(_null_memory(operation, view.layout.volume))
        raise BufferError(f"{operation}: the view's buffer is closed; there is no memory")
    if buffer is None and not issubclass(type(view), StridedMemoryView):
        layout = view.layout
        if not view.ptr and layout.volume:
            raise BufferError(_null_memory(operation, layout.volume))


def _null_memory(operation, volume):
    return (
        f"{operation}: the view has a null data pointer but {volume} elements; it describes "
        "memory that does not exist"
    )


def _made(cls, record, location, buffer):
    """A view of ``record`` (final: read-only where it must be); see ``_from_record``.

    NumPy records (:func:`~layoutkit.interop.host.ndarray_record`) are final (writable
    aliasing arrays are left to the protocol), so the fast path builds views here.
    """
    self = _new_object(cls)
    self._record = record
    self._location = location
    self._buffer = buffer
    self._exports = self._numba_record = None
    return self


_new_object = object.__new__
# The exact types whose conversion runs none of the caller's code, by identity: a type's
# metaclass may make it equal (and hash as) float, its __class__ may claim numpy.float64
# (isinstance believes it), and a Python subclass of a NumPy scalar converts through its
# own __int__ / __float__
_PLAIN_SCALARS = frozenset(map(id, {int, float, complex, bool, *np.sctypeDict.values()}))
_ndarray = np.ndarray


def _legacy_memory(record):
    """Whether a read-only view may still go out in a legacy DLPack capsule.

    Its memory came in through a legacy capsule (as JAX exports its immutable arrays),
    whose producer gives it to any consumer without a read-only flag: a legacy export
    of a view that does not alias widens nobody's access, and lets such arrays round
    trip (``jax.dlpack.from_dlpack(view)`` asks for a legacy capsule).
    """
    owner = record.owner
    return (
        type(owner) is _dlpack.ImportedTensor
        and not owner.versioned
        and record.layout.is_unique
    )


def _element(dtype, address):
    """The element of ``dtype`` at host ``address``, owning its bytes.

    NumPy gives the element of a structured (``np.void``) or subarray dtype as a view of
    the array's memory; over :data:`MEMORY` that view would not keep the buffer alive,
    so such elements are read from a read-only copy of their bytes.
    """
    element = np.frombuffer(MEMORY, dtype, 1, address)
    if dtype.kind == "V":
        element = element.copy()
        element.flags.writeable = False
    return element[0]


def _all_integers(index, ndim):
    items = index if type(index) is tuple else (index,)
    return len(items) == ndim and all(
        type(i) is int or (type(i) is not bool and hasattr(type(i), "__index__")) for i in items
    )


def _assigned(value, dtype, ndim):
    """What a slice assignment of ``value`` to a view of ``dtype`` copies from.

    Arrays and views of ``dtype`` (or of memory the host cannot read) as they are; other
    values as NumPy's assignment reads them, so with the same values and errors: a
    scalar (Python's or NumPy's) is stored as one element is (``OverflowError`` for an
    integer out of range, ``ValueError`` for NaN into integers), arrays are cast
    (``casting="unsafe"``), and a nested sequence may have at most ``ndim`` (the
    target's) dimensions.
    """
    if not _is_array_like(value):
        array = np.asarray(value, dtype=dtype)
        if array.ndim > ndim:
            raise ValueError(
                f"setting an array element with a sequence: the value has {array.ndim} "
                f"dimensions, more than the {ndim} of the view assigned to"
            )
        return array
    if dtype is None or getattr(value, "dtype", dtype) == dtype:
        return value
    if isinstance(value, np.generic):  # NumPy packs a scalar as it stores an element
        element = np.empty((), dtype)
        element[()] = value
        return element
    if not issubclass(type(value), StridedMemoryView):
        if isinstance(value, np.ndarray):
            return value.astype(dtype)
        value = StridedMemoryView.from_any_interface(value, -1)
    if value.dtype is None or value.dtype == dtype or not value._where()[2]:
        return value  # copy refuses what it must (other dtypes in device memory)
    return np.asarray(value).astype(dtype)


def _assignment_source(target, value):
    """The view ``target[...] = value`` copies from, as NumPy's assignment reads ``value``.

    Cast to the target's dtype (:func:`_assigned`). :func:`layoutkit.copy.copy` itself
    drops the leading extent-1 axes that the target does not have (NumPy drops them:
    ``a[0] = [[1, 2, 3]]``) and reads a source that overlaps the target first
    (``v[1:] = v[:-1]`` shifts).
    """
    source = _assigned(value, target.dtype, target.ndim)
    if not issubclass(type(source), StridedMemoryView):
        source = StridedMemoryView.from_any_interface(source, 0)  # as copy() reads it
    return source


def _is_array_like(value):
    return issubclass(type(value), StridedMemoryView) or any(
        hasattr(value, name)
        for name in ("__dlpack__", "__cuda_array_interface__", "__array_interface__")
    )


def _buffer_arguments(args, shape, strides, layout, itemsize, dtype, is_readonly):
    """Read ``from_buffer``'s two call forms into ``(layout, dtype, is_readonly)``."""
    if itemsize is not None:  # an integer in both forms, before it is compared with any
        itemsize = _check_itemsize(itemsize)
    if args and isinstance(args[0], StridedLayout):  # (buffer, layout, dtype, is_readonly)
        if len(args) > 3 or layout is not None or shape is not None or strides is not None:
            raise TypeError(
                "from_buffer(buffer, layout, dtype=None, is_readonly=None): got more "
                "positional arguments, or shape/strides/layout besides a layout"
            )
        layout = args[0]
        if len(args) > 1:
            dtype = args[1] if dtype is None else _twice("dtype")
        if len(args) > 2:
            is_readonly = args[2] if is_readonly is None else _twice("is_readonly")
    elif layout is not None:
        if args or shape is not None or strides is not None:
            raise TypeError("from_buffer: give layout=, or shape (and strides), not both")
        _check_layout_argument(layout)  # before its itemsize is compared
    else:  # (buffer, shape, strides=None, *, itemsize=None, dtype=None, is_readonly=None)
        if len(args) > 2:
            raise TypeError(
                "from_buffer(buffer, shape, strides=None, *, itemsize=None, dtype=None, "
                f"is_readonly=None) takes at most 2 positional arguments after buffer, got {len(args)}"
            )
        if args:
            shape = args[0] if shape is None else _twice("shape")
        if len(args) > 1:
            strides = args[1] if strides is None else _twice("strides")
        if shape is None:
            raise TypeError("from_buffer needs a layout, or a shape (and strides)")
        if dtype is not None:
            dtype = as_dtype(dtype)
        if itemsize is None and dtype is None:
            raise ValueError(
                "from_buffer(buffer, shape, ...): itemsize or dtype must be specified"
            )
        if itemsize is not None and dtype is not None and itemsize != dtype.itemsize:
            raise ValueError(
                f"itemsize ({itemsize}) does not match dtype.itemsize ({dtype.itemsize})"
            )
        layout = StridedLayout(shape, strides, dtype.itemsize if dtype is not None else itemsize)
        return layout, dtype, is_readonly
    if itemsize is not None and itemsize != layout.itemsize:
        raise ValueError(f"itemsize ({itemsize}) does not match the layout's ({layout.itemsize})")
    return layout, dtype, is_readonly


def _check_layout_argument(layout):
    """TypeError for a ``layout`` argument that is not a StridedLayout, saying what to pass."""
    if not isinstance(layout, StridedLayout):
        raise TypeError(
            "layout must be a StridedLayout (view.layout[...], StridedLayout.dense(shape, "
            f"itemsize), ...), got {_describe(layout)} of type {type(layout).__name__}; "
            "to change only the dtype, pass dtype="
        )


def _twice(name):
    raise TypeError(f"from_buffer got {name} both as a positional and as a keyword argument")


def _view_of_view(view, stream_ptr, dlpack_only):
    """A view imported from a view: the same memory, kept alive by the view imported."""
    view._check_open("import")
    record = view._record
    if dlpack_only and record.dtype is None:
        return None  # the DLPack export refuses it, as it must
    if dlpack_only:
        try:
            to_dlpack_dtype(record.dtype)
        except BufferError:
            return None
    return record._replace(location=view._location, exporter=view, owner=view)


_fastpaths.register(StridedMemoryView, _view_of_view)
StridedMemoryView.__dlpack_c_exchange_api__ = ExchangeCapsule(
    lambda obj: _exportable(obj)._export_fields(),
    lambda obj: _borrowed_fields(_exportable(obj)),
    lambda address: StridedMemoryView._from_record(_dlpack.managed_record(address)),
)
StridedMemoryView.__c_dlpack_exchange_api__ = vars(StridedMemoryView)["__dlpack_c_exchange_api__"]


def _exportable(obj):
    if not issubclass(type(obj), StridedMemoryView):
        raise TypeError(f"py_object must be a StridedMemoryView, not {type(obj).__name__}")
    obj._check_open("DLPack export")
    return obj


def _borrowed_fields(view):
    """DLTensor fields pointing at the layout's own int64 shape|strides array."""
    _, ptr, shape, _, dtype_triple, device, _ = view._export_fields()
    ndim = len(shape)
    if not ndim:
        return ptr, device, dtype_triple, 0, 0, 0
    address = view._record.layout._lay().buffer_info()[0]  # lives as long as the layout
    return ptr, device, dtype_triple, ndim, address, address + 8 * ndim


def _numba_view_record(view):
    """Make the record compiled code keeps on a view (numba is imported only here)."""
    global _numba_view_record
    from ._numba_view import view_record

    _numba_view_record = view_record  # later calls skip the import statement
    return view_record(view)


class _ViewableArgument:
    """Stands for an argument of a decorated function; ``.view(stream_ptr)`` makes the view."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def view(self, stream_ptr=None):
        """A :class:`StridedMemoryView` of the argument (see ``from_any_interface``)."""
        return StridedMemoryView.from_any_interface(self.obj, stream_ptr)

    def __repr__(self):
        return f"<viewable {type(self.obj).__name__} argument>"


def args_viewable_as_strided_memory(arg_indices):
    """Decorator: positional arguments at ``arg_indices`` arrive as viewable proxies.

    Each proxy has ``.view(stream_ptr=None)``, which returns a
    :class:`StridedMemoryView` of the original argument (``.obj``).

    Parameters
    ----------
    arg_indices : tuple of int
        Positions of the arguments to wrap.

    Raises
    ------
    TypeError
        When ``arg_indices`` is not a tuple of ints (bools are no positions).
    ValueError
        When a position repeats (``-1`` and the last one count as one only when called).
    IndexError
        When the decorated function is called with no argument at a position.

    Examples
    --------
    >>> import numpy as np
    >>> @args_viewable_as_strided_memory((0,))
    ... def total_bytes(x):
    ...     view = x.view(stream_ptr=-1)
    ...     return view.size * view.dtype.itemsize
    >>> total_bytes(np.zeros((3, 4)))
    96
    """
    if type(arg_indices) is not tuple:
        raise TypeError(f"arg_indices must be a tuple of ints, got {arg_indices!r}")
    indices = tuple(_as_index(i, f"arg_indices[{k}]") for k, i in enumerate(arg_indices))
    if len(set(indices)) != len(indices):
        raise ValueError(f"arg_indices {indices} names a position more than once")

    def decorator(function):
        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            args = list(args)
            n = len(args)
            positions = {index % n if -n <= index < n else None for index in indices}
            if None in positions or len(positions) != len(indices):
                raise IndexError(
                    f"{function.__name__}: arg_indices {indices} name positions that "
                    f"{n} positional argument(s) do not have, or one position twice"
                )
            for index in positions:
                args[index] = _ViewableArgument(args[index])
            return function(*args, **kwargs)

        return wrapped

    return decorator
