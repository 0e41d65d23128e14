"""StridedMemoryView: memory (a Buffer) + layout + dtype + device + read-only flag.

A view is made from any tensor that speaks DLPack, the CUDA array interface, the
NumPy array interface or the buffer protocol, or from a :class:`~layoutkit.Buffer`
and a :class:`~layoutkit.StridedLayout`. It exports itself through the same protocols
without copying, so NumPy, CuPy, torch and JAX can read it, and it keeps the memory
alive for as long as any consumer holds it.

Address rule: ``view.layout`` is relative to ``view.buffer``, so
``view.ptr == view.buffer.ptr + view.layout.slice_offset_in_bytes``. For an imported
tensor the buffer spans exactly the bytes its elements occupy, starting at the lowest
addressed one; a tensor with negative strides therefore has a layout whose
``slice_offset`` points back at its element ``(0, ..., 0)``.

Host memory needs no CUDA driver: NumPy arrays, buffer-protocol objects and CPU
DLPack tensors give views whose buffer knows it is host memory (DECISIONS 12).

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
"""

import functools
import operator
import warnings

import numpy as np

from . import _dtypes
from ._dtypes import as_dtype, dlpack_itemsize, from_dlpack_dtype, to_dlpack_dtype
from .interop import dlpack as _dlpack
from .interop._native import ndarray_data_pointer
from .interop.cai import cuda_interface_dict, read_cuda_array_interface
from .interop.host import interface_dict, read_array_interface
from .layout import StridedLayout
from .memory import Buffer

__all__ = ["StridedMemoryView", "args_viewable_as_strided_memory"]

_kDLCPU = _dlpack.kDLCPU
_kDLCUDA = _dlpack.kDLCUDA
_kDLCUDAHost = _dlpack.kDLCUDAHost
_kDLCUDAManaged = _dlpack.kDLCUDAManaged
_FLAG_READ_ONLY = _dlpack.FLAG_READ_ONLY
_FLAG_IS_SUBBYTE_TYPE_PADDED = _dlpack.FLAG_IS_SUBBYTE_TYPE_PADDED
_export_capsule = _dlpack.export_capsule
_import_dlpack = _dlpack.import_dlpack
_ndarray = np.ndarray
_INT64_MAX = 2**63 - 1
_HOST = (-1, False, True, False)  # where host memory is: see StridedMemoryView._where
_CPU_DEVICE = (_kDLCPU, 0)
# the native-byte-order NumPy dtypes DLPack carries (what NumPy's own export accepts)
_NATIVE_DLPACK_DTYPES = frozenset(
    dtype
    for dtype in map(np.dtype, np.typecodes["All"])
    if dtype.isnative and _dtypes.is_numpy_dlpack_dtype(dtype)
)


def _is_dlpack(obj):
    return hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")


def _check_null(shape, what):
    """Refuse a null data pointer for a tensor that has elements."""
    volume = 1
    for extent in shape:
        volume *= extent
    if volume:
        raise BufferError(f"{what} has a null data pointer but {volume} elements")


def _shifted(layout):
    """``layout`` moved so that its lowest offset is 0 (the buffer's first byte)."""
    low, high = layout.offset_bounds
    if low >= 0:
        return layout
    itemsize = layout.itemsize
    if (high - low + 1) * itemsize > _INT64_MAX:
        raise OverflowError(f"{layout!r} spans more than 2**63 bytes")
    return StridedLayout._trusted(layout.shape, layout.strides, itemsize, layout.slice_offset - low)


# Layouts are immutable, so those of imported NumPy and DLPack tensors are shared between
# views of tensors with the same metadata (a program tends to see the same few shapes
# again and again): one dict per kind of import, keyed by (shape, strides, itemsize).
_LAYOUT_CACHE_LIMIT = 1024
_NOT_WHOLE_ELEMENTS = object()  # an ndarray layout whose byte strides are no multiples


def _cached(builder):
    layouts = {}

    @functools.wraps(builder)
    def build(shape, strides, itemsize):
        key = (shape, strides, itemsize)
        layout = layouts.get(key)
        if layout is None:
            layout = builder(shape, strides, itemsize)
            if len(layouts) >= _LAYOUT_CACHE_LIMIT:
                layouts.clear()
            layouts[key] = layout
        return layout

    build.cache = layouts
    return build


@_cached
def _layout_of_ndarray(shape, byte_strides, itemsize):
    """NumPy's own (valid, int64-safe) values: no checks beyond the itemsize division.

    Returns ``_NOT_WHOLE_ELEMENTS`` where a byte stride is not a multiple of the itemsize.
    """
    strides = []
    low = 0
    for extent, byte_stride in zip(shape, byte_strides):  # noqa: B905 (same length)
        stride, remainder = divmod(byte_stride, itemsize)
        if remainder:
            return _NOT_WHOLE_ELEMENTS
        strides.append(stride)
        if stride < 0:
            low += (extent - 1) * stride
    return StridedLayout._trusted(shape, tuple(strides), itemsize, -low)


_ndarray_layouts = _layout_of_ndarray.cache


@_cached
def _layout_of_dlpack(shape, strides, itemsize):
    """A DLPack tensor's int64 values, strides in elements, checked here in plain Python.

    The checks are the ones ``StridedLayout`` makes (ndim, extents, int64 overflow of the
    volume, byte strides and byte span); doing them here avoids a compiled-kernel call per
    import.
    """
    ndim = len(shape)
    if ndim > 64 or any(extent < 0 for extent in shape):
        raise BufferError(f"DLPack tensor has an invalid shape {shape}")
    if strides is None:  # a legacy producer's NULL strides: C order
        return StridedLayout(shape, None, itemsize)
    strides = _signed_strides(strides, itemsize)
    volume = 1
    low = high = 0
    for extent, stride in zip(shape, strides):  # noqa: B905 (both have ndim entries)
        volume *= extent
        if abs(stride) * itemsize > _INT64_MAX:
            raise OverflowError(f"DLPack tensor stride {stride} does not fit in int64 bytes")
        if stride < 0:
            low += (extent - 1) * stride
        else:
            high += (extent - 1) * stride
    if volume == 0:
        return StridedLayout._trusted(shape, strides, itemsize, 0)
    if volume > _INT64_MAX or (high - low + 1) * itemsize > _INT64_MAX:
        raise OverflowError(
            f"DLPack tensor shape {shape}, strides {strides} spans more than int64 allows"
        )
    return StridedLayout._trusted(shape, strides, itemsize, -low)


_dlpack_layouts = _layout_of_dlpack.cache


def _signed_strides(strides, itemsize):
    """Undo a producer's unsigned division of a negative byte stride.

    CuPy 14 exports the DLPack stride of a negative byte stride ``b`` as
    ``(2**64 + b) // itemsize`` (an unsigned division), a value whose byte stride cannot
    fit in int64. Such a stride is read back as the negative stride it encodes; any other
    stride is kept, and the checks that follow reject what is still out of range.
    """
    if all(abs(s) * itemsize <= _INT64_MAX for s in strides) or 2**64 % itemsize:
        return strides
    wrap = 2**64 // itemsize
    return tuple(
        s - wrap if s * itemsize > _INT64_MAX and (wrap - s) * itemsize <= _INT64_MAX else s
        for s in strides
    )


def _layout_of_interface(shape, byte_strides, itemsize):
    """An array interface dict's values: fully validated, strides in bytes (None: C order).

    Cached only where every value is an ``int``: a float or bool that equals one would
    otherwise find the int's layout where the constructor refuses it.
    """
    types = set(map(type, shape))
    if byte_strides is not None:
        types.update(map(type, byte_strides))
    if not types <= _INT_TYPE:
        return _shifted(StridedLayout(shape, byte_strides, itemsize, divide_strides=True))
    key = (shape, byte_strides, itemsize)
    layout = _interface_layouts.get(key)
    if layout is None:
        layout = _shifted(StridedLayout(shape, byte_strides, itemsize, divide_strides=True))
        if len(_interface_layouts) >= _LAYOUT_CACHE_LIMIT:
            _interface_layouts.clear()
        _interface_layouts[key] = layout
    return layout


_interface_layouts = {}
_INT_TYPE = frozenset((int,))


def _view_of_ndarray(cls, array, dlpack_dtypes_only):
    """A ``cls`` view of a NumPy array, read directly, as its DLPack export or array interface
    would describe it. The data pointer is read on first use.

    Returns None where the protocol's own path has to decide (for DLPack, dtypes it
    cannot carry; object dtypes; strides that are not multiples of the itemsize), so
    its errors are kept.
    """
    dtype = array.dtype
    if dtype not in _NATIVE_DLPACK_DTYPES:
        if dlpack_dtypes_only:
            try:  # ml_dtypes types: ours to carry (NumPy's export refuses them)
                to_dlpack_dtype(dtype)
            except BufferError:
                return None
        elif dtype.hasobject:
            return None
    shape = array.shape
    strides = array.strides
    itemsize = dtype.itemsize
    layout = _ndarray_layouts.get((shape, strides, itemsize))
    if layout is None:
        layout = _layout_of_ndarray(shape, strides, itemsize)
    if layout is _NOT_WHOLE_ELEMENTS:
        return None
    self = object.__new__(cls)
    self._ptr = None
    self._layout = layout
    self._layout_args = None
    self._dtype = dtype
    self._dl_dtype = None
    self._readonly = not array.flags.writeable
    self._where = _HOST
    self._dl_device = _CPU_DEVICE
    self._exporting_obj = self._owner = array
    self._buffer = None
    self._numba_record = None
    return self


class StridedMemoryView:
    """A strided tensor in memory: pointer, layout, dtype, device, read-only flag.

    Build views with :meth:`from_dlpack`, :meth:`from_cuda_array_interface`,
    :meth:`from_array_interface`, :meth:`from_any_interface` or :meth:`from_buffer`
    (``StridedMemoryView(obj, stream_ptr)`` still works, as :meth:`from_any_interface`,
    but is deprecated as in cuda.core). All attributes are read-only.

    Attributes
    ----------
    ptr : int
        Address of element ``(0, ..., 0)``.
    layout : StridedLayout
        Shape, strides (in elements) and itemsize, relative to :attr:`buffer`. For an
        imported tensor it is built on first use.
    shape, strides : tuple of int
        The layout's; ``strides`` are in elements (``layout.strides_in_bytes`` gives bytes).
    dtype : numpy.dtype or None
        ``None`` only for a :meth:`from_buffer` view made without a dtype.
    size : int
        Number of elements.
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
        "_ptr",  # int, or None until read from the exporting NumPy array
        "_layout",  # StridedLayout, or None until built from _layout_args
        "_layout_args",  # (builder, shape, strides, itemsize) for the lazy layout
        "_dtype",  # numpy dtype, or None
        "_dl_dtype",  # (code, bits, lanes, padded) of a DLPack import until dtype is read
        "_readonly",
        # where the memory lives: (device_id, is_device_accessible, is_host_accessible,
        # is_managed), or None to ask the buffer when first needed; device_id None: the
        # current device (an empty CAI tensor with a null pointer)
        "_where",
        "_dl_device",  # (device_type, device_id) of a DLPack import, else None
        "_exporting_obj",
        # what keeps the memory alive: the exporter, a DLPack tensor or a Buffer; an ndarray
        # here always has exactly the view's pointer, layout and dtype
        "_owner",
        "_buffer",  # Buffer, or None until made
        "_numba_record",  # what @njit code reads of the view (layoutkit._numba_view), or None
        "__weakref__",
    )

    def __init__(self, obj, stream_ptr=None):
        warnings.warn(
            "StridedMemoryView(obj, stream_ptr) is deprecated; use "
            "StridedMemoryView.from_any_interface(obj, stream_ptr) or the from_dlpack / "
            "from_cuda_array_interface / from_array_interface constructors",
            DeprecationWarning,
            stacklevel=2,
        )
        other = type(self).from_any_interface(obj, stream_ptr)
        for name in StridedMemoryView.__slots__[:-1]:
            setattr(self, name, getattr(other, name))

    # ------------------------------------------------------------------ construction
    @classmethod
    def _new(cls, ptr, readonly, exporting_obj, owner, where, layout_args):
        self = object.__new__(cls)
        self._ptr = ptr
        self._layout = None
        self._layout_args = layout_args
        self._dtype = None
        self._dl_dtype = None
        self._readonly = readonly
        self._where = where
        self._dl_device = None
        self._exporting_obj = exporting_obj
        self._owner = owner
        self._buffer = None
        self._numba_record = None
        return self

    @classmethod
    def from_dlpack(cls, obj, stream_ptr=None):
        """A view of an object that supports DLPack (``__dlpack__`` and ``__dlpack_device__``).

        A versioned (DLPack 1.x) capsule is requested, with a fall-back to the legacy
        protocol; the read-only flag and ``byte_offset`` are honoured. The producer's
        deleter runs exactly once, when the last view or buffer using the tensor dies.

        Parameters
        ----------
        obj : object
            The producer.
        stream_ptr : int or None
            The consumer stream handle; ``-1`` means no synchronization. A CPU tensor
            needs ``-1`` (or 0); ``None`` is ambiguous for CPU and CUDA tensors.

        Raises
        ------
        TypeError
            When ``obj`` does not support DLPack or ``stream_ptr`` is not an int.
        BufferError
            For an ambiguous stream, an unsupported device, or a bad capsule.

        Examples
        --------
        >>> import numpy as np
        >>> a = np.arange(6.0).reshape(2, 3)
        >>> StridedMemoryView.from_dlpack(a.T, stream_ptr=-1).strides
        (1, 3)
        >>> StridedMemoryView.from_dlpack(a, stream_ptr=None)
        Traceback (most recent call last):
        ...
        BufferError: stream_ptr=None is ambiguous for a CPU tensor: pass -1 for no synchronization
        """
        if type(obj) is _ndarray and (stream_ptr == -1 or stream_ptr == 0):
            view = _view_of_ndarray(cls, obj, True)
            if view is not None:
                return view
        elif not _is_dlpack(obj):
            raise TypeError(
                f"{type(obj).__name__} object does not support DLPack (needs __dlpack__ and "
                "__dlpack_device__)"
            )
        tensor = _import_dlpack(obj, stream_ptr)
        device_type, device_id = device = tensor.device
        if device_type == _kDLCPU:
            where = _HOST
        elif device_type == _kDLCUDA:
            where = (device_id, True, False, False)
        elif device_type in (_kDLCUDAHost, _kDLCUDAManaged):
            where = (device_id, True, True, device_type == _kDLCUDAManaged)
        else:
            tensor.release()
            name = _dlpack.DEVICE_TYPE_NAMES.get(device_type, "unknown")
            raise BufferError(f"DLPack device type {device_type} ({name}) is not supported")
        code, bits, lanes = tensor.dtype_triple
        padded = tensor.padded
        if lanes == 1 and bits > 0 and not bits & 7:  # whole bytes, as dlpack_itemsize says
            itemsize = bits >> 3
        else:
            itemsize = dlpack_itemsize(code, bits, lanes, padded)
        ptr = tensor.ptr
        shape = tensor.shape
        if ptr == 0:
            _check_null(shape, f"{type(obj).__name__} DLPack tensor")
        strides = tensor.strides
        self = object.__new__(cls)
        self._ptr = ptr
        self._layout = layout = _dlpack_layouts.get((shape, strides, itemsize))
        self._layout_args = (
            (_layout_of_dlpack, shape, strides, itemsize) if layout is None else None
        )
        self._dtype = None
        self._dl_dtype = (code, bits, lanes, padded)
        self._readonly = tensor.readonly
        self._where = where
        self._dl_device = device
        self._exporting_obj = obj
        self._owner = tensor
        self._buffer = None
        self._numba_record = None
        return self

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
        """
        info = read_cuda_array_interface(obj, stream_ptr)
        where = None
        if info.ptr == 0:
            _check_null(info.shape, f"{type(obj).__name__}.__cuda_array_interface__")
            where = (None, True, False, False)
        layout_args = (_layout_of_interface, info.shape, info.strides, info.dtype.itemsize)
        self = cls._new(info.ptr, info.readonly, obj, info.keeper, where, layout_args)
        self._dtype = info.dtype
        return self

    @classmethod
    def from_array_interface(cls, obj):
        """A view of host memory: ``__array_interface__`` (v3) or the buffer protocol.

        No CUDA driver is needed. The view is host-accessible only (``device_id`` -1).

        Raises
        ------
        TypeError
            When ``obj`` has neither interface.
        BufferError
            For a version below 3, a mask or a malformed entry.

        Examples
        --------
        >>> view = StridedMemoryView.from_array_interface(bytearray(b"abcd"))
        >>> view.shape, view.dtype, view.readonly
        ((4,), dtype('uint8'), False)
        >>> StridedMemoryView.from_array_interface(b"abcd").readonly
        True
        """
        if type(obj) is _ndarray:
            view = _view_of_ndarray(cls, obj, False)
            if view is not None:
                return view
        info = read_array_interface(obj)
        if info.ptr == 0:
            _check_null(info.shape, f"{type(obj).__name__}.__array_interface__")
        layout_args = (_layout_of_interface, info.shape, info.strides, info.dtype.itemsize)
        self = cls._new(info.ptr, info.readonly, obj, info.keeper, _HOST, layout_args)
        self._dtype = info.dtype
        return self

    @classmethod
    def from_any_interface(cls, obj, stream_ptr=None):
        """A view through the best protocol ``obj`` supports.

        DLPack first, then ``__cuda_array_interface__``, then host memory through
        ``__array_interface__`` or the buffer protocol (where ``stream_ptr`` is unused).

        Raises
        ------
        TypeError
            When ``obj`` supports none of them.
        """
        if type(obj) is _ndarray:
            if stream_ptr == -1 or stream_ptr == 0:  # from_dlpack's fast path, one call less
                view = _view_of_ndarray(cls, obj, True)
                if view is not None:
                    return view
            return cls.from_dlpack(obj, stream_ptr)
        if _is_dlpack(obj):
            return cls.from_dlpack(obj, stream_ptr)
        if hasattr(obj, "__cuda_array_interface__"):
            return cls.from_cuda_array_interface(obj, stream_ptr)
        if hasattr(obj, "__array_interface__"):
            return cls.from_array_interface(obj)
        try:
            memoryview(obj).release()
        except TypeError:
            raise TypeError(
                f"{type(obj).__name__} object supports none of DLPack, "
                "__cuda_array_interface__, __array_interface__ or the buffer protocol"
            ) from None
        return cls.from_array_interface(obj)

    @classmethod
    def from_buffer(cls, buffer, layout, dtype=None, is_readonly=False):
        """A view of ``buffer`` with ``layout``: ``ptr = buffer.ptr + layout.slice_offset_in_bytes``.

        Parameters
        ----------
        buffer : Buffer
            Open buffer; every element the layout addresses must lie inside it.
        layout : StridedLayout
            Shape, strides and itemsize, relative to ``buffer.ptr``.
        dtype : optional
            Anything :func:`numpy.dtype` accepts (or an ml_dtypes name); its itemsize must
            be the layout's. ``None`` leaves the view without a dtype.
        is_readonly : bool
            Mark the view read-only.

        Raises
        ------
        TypeError
            For a non-Buffer, a non-layout, or a value that is not a dtype.
        ValueError
            For a closed buffer, a dtype whose itemsize differs from the layout's, or a
            layout that reaches outside the buffer (DECISIONS 14).

        Examples
        --------
        >>> import numpy as np
        >>> from layoutkit import StridedLayout
        >>> a = np.arange(8, dtype=np.int64)
        >>> buf = StridedMemoryView.from_array_interface(a).buffer  # host memory, 64 bytes
        >>> view = StridedMemoryView.from_buffer(buf, StridedLayout.dense((2, 4), 8)[:, 1::2], np.int64)
        >>> np.from_dlpack(view).tolist()
        [[1, 3], [5, 7]]
        >>> StridedMemoryView.from_buffer(buf, StridedLayout.dense((3, 4), 8), "i8")
        Traceback (most recent call last):
        ...
        ValueError: layout ... reaches byte 96 but the buffer has 64 bytes...
        """
        if not isinstance(buffer, Buffer):
            raise TypeError(f"buffer must be a layoutkit Buffer, got {type(buffer).__name__}")
        if buffer.is_closed:
            raise ValueError("buffer is closed: a view needs an open Buffer")
        return cls._over_buffer(buffer, layout, dtype, bool(is_readonly), buffer)

    @classmethod
    def _over_buffer(cls, buffer, layout, dtype, readonly, exporting_obj, dl_device=None):
        if not isinstance(layout, StridedLayout):
            raise TypeError(f"layout must be a StridedLayout, got {type(layout).__name__}")
        if dtype is not None:
            dtype = as_dtype(dtype)
            if dtype.itemsize != layout.itemsize:
                raise ValueError(
                    f"dtype {dtype} has itemsize {dtype.itemsize} but the layout's itemsize "
                    f"is {layout.itemsize}"
                )
        low, high = layout.offset_bounds
        if low <= high:  # a layout with no elements fits any buffer
            end = (high + 1) * layout.itemsize
            if low < 0:
                raise ValueError(
                    f"layout {layout!r} reaches offset {low}, before the start of the buffer; "
                    "use to_dense() for a layout that starts at the buffer"
                )
            if end > buffer.size:
                raise ValueError(
                    f"layout {layout!r} reaches byte {end} but the buffer has {buffer.size} "
                    "bytes; use to_dense() for a layout without gaps"
                )
        # where the memory lives is the buffer's to say, when first asked
        ptr = buffer.ptr + layout.slice_offset_in_bytes
        self = cls._new(ptr, readonly, exporting_obj, buffer, None, None)
        self._layout = layout
        self._dtype = dtype
        self._buffer = buffer
        self._dl_device = dl_device
        return self

    def view(self, layout=None, dtype=None):
        """This view's memory with another layout and/or dtype.

        ``layout`` is relative to :attr:`buffer`, like :attr:`layout` (so
        ``view.view(view.layout[::2])`` takes every other element). A missing argument
        keeps this view's; with both missing, the view itself is returned. The result
        keeps the read-only flag and exporting object. No CUDA driver is needed for
        host memory.

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
        if layout is None:
            layout = self.layout
        if dtype is None:
            dtype = self.dtype
        return self._over_buffer(
            self.buffer, layout, dtype, self._readonly, self._exporting_obj, self._dl_device
        )

    # ------------------------------------------------------------------ attributes
    @property
    def ptr(self):
        """Address of element ``(0, ..., 0)`` (``int``)."""
        ptr = self._ptr
        if ptr is None:
            ptr = self._ptr = ndarray_data_pointer(self._exporting_obj)
        return ptr

    @property
    def layout(self):
        """The :class:`StridedLayout`, relative to :attr:`buffer`; built on first use."""
        layout = self._layout
        if layout is None:
            build, shape, strides, itemsize = self._layout_args
            layout = self._layout = build(shape, strides, itemsize)
            self._layout_args = None
        return layout

    @property
    def shape(self):
        """Extents (``tuple`` of ``int``)."""
        return (self._layout or self.layout).shape

    @property
    def strides(self):
        """Strides in elements (``tuple`` of ``int``)."""
        return (self._layout or self.layout).strides

    @property
    def size(self):
        """Number of elements."""
        return (self._layout or self.layout).volume

    @property
    def dtype(self):
        """The element type (:class:`numpy.dtype`), or ``None`` if the view has none."""
        dtype = self._dtype
        if dtype is None and self._dl_dtype is not None:
            dtype = self._dtype = from_dlpack_dtype(*self._dl_dtype)
        return dtype

    def _location(self):
        where = self._where
        if where is None:
            buffer = self.buffer
            where = self._where = (
                buffer.device_id, buffer.is_device_accessible, buffer.is_host_accessible,
                buffer.is_managed,
            )  # fmt: skip
        elif where[0] is None:  # an empty CAI tensor with a null pointer: the current device
            from . import _driver

            where = self._where = (_driver.ensure_context(), *where[1:])
        return where

    @property
    def device_id(self):
        """Device ordinal of the memory; -1 for host memory."""
        return self._location()[0]

    @property
    def is_device_accessible(self):
        """Whether GPU kernels can access the memory."""
        return self._location()[1]

    @property
    def readonly(self):
        """Whether the memory must not be written through this view."""
        return self._readonly

    @property
    def exporting_obj(self):
        """The imported object, or the Buffer a :meth:`from_buffer` view was made from."""
        return self._exporting_obj

    @property
    def buffer(self):
        """The :class:`~layoutkit.Buffer` that :attr:`layout` addresses (made on first use)."""
        buffer = self._buffer
        if buffer is None:
            layout = self.layout
            base = self.ptr - layout.slice_offset_in_bytes
            high = layout.max_offset
            size = (high + 1) * layout.itemsize if high >= 0 else 0
            where = self._where
            if where is None:  # a CAI import: the driver knows where the memory is
                buffer = Buffer.from_handle(base, size, owner=self._owner)
            else:
                device_id, device_accessible, host_accessible, managed = self._location()
                buffer = Buffer._from_known(
                    base, size, owner=self._owner, device_id=device_id,
                    is_device_accessible=device_accessible, is_host_accessible=host_accessible,
                    is_managed=managed,
                )  # fmt: skip
            self._buffer = buffer
        return buffer

    # ------------------------------------------------------------------ copies
    def copy_from(self, other, stream=None):
        """Copy the elements of view ``other`` into this view (see :func:`layoutkit.copy`)."""
        from .copy import copy

        return copy(self, other, stream=stream)

    def copy_to(self, other, stream=None):
        """Copy the elements of this view into view ``other`` (see :func:`layoutkit.copy`)."""
        from .copy import copy

        return copy(other, self, stream=stream)

    # ------------------------------------------------------------------ export
    def _check_open(self):
        buffer = self._buffer
        if buffer is not None and buffer.is_closed:
            raise BufferError("the view's buffer is closed: there is no memory to export")

    def __dlpack_device__(self):
        """``(device_type, device_id)`` as DLPack names them."""
        self._check_open()
        device = self._dl_device
        if device is not None:
            return device
        device_id, device_accessible, host_accessible, managed = self._location()
        if not device_accessible:
            return _CPU_DEVICE
        if not host_accessible:
            return (_kDLCUDA, device_id)
        return (_kDLCUDAManaged if managed else _kDLCUDAHost, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export the view as a DLPack capsule, without a copy.

        The capsule keeps this view (and so its memory) alive until the consumer's
        deleter runs. A versioned (DLPack 1.x) capsule is made when ``max_version`` is
        at least ``(1, 0)``; it carries the read-only flag. ``stream`` needs no action:
        a view has no pending work of its own.

        Raises
        ------
        BufferError
            Without a dtype, for a dtype DLPack cannot carry, for ``copy=True``, for
            another ``dl_device`` (a host-accessible view may be asked for ``(1, 0)``,
            the CPU), for a read-only view asked for a legacy capsule, or
            for a closed buffer.
        TypeError
            When ``max_version`` is not a ``(major, minor)`` tuple.
        """
        buffer = self._buffer
        if buffer is not None and buffer.is_closed:
            raise BufferError("the view's buffer is closed: there is no memory to export")
        if max_version is None:
            versioned = False
        elif type(max_version) is tuple and len(max_version) == 2:
            versioned = max_version[0] >= 1
        else:
            raise TypeError(f"max_version={max_version!r} must be a (major, minor) tuple")
        if copy:
            raise BufferError("copy=True: a StridedMemoryView exports its memory without a copy")
        device = self._dl_device or self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            if tuple(dl_device) != _CPU_DEVICE or not self._location()[2]:
                raise BufferError(
                    f"dl_device={dl_device!r}: the view lives on {device} and is not copied"
                )
            device = _CPU_DEVICE  # pinned or managed memory, read as host memory
        if stream is not None:
            _dlpack._int_stream(stream)
        owner = self._owner
        if type(owner) is _ndarray:  # the view is exactly this array: NumPy's export is faster
            try:
                return owner.__dlpack__(max_version=max_version)
            except BufferError:  # e.g. ml_dtypes types, which only our export carries
                pass
        dtype = self._dtype
        if dtype is None:
            dtype = self.dtype
            if dtype is None:
                raise BufferError("the view has no dtype; DLPack export needs one")
        code, bits, lanes, padded = to_dlpack_dtype(dtype)
        flags = 0
        if self._readonly:
            if not versioned:
                raise BufferError(
                    "a read-only view needs a versioned DLPack capsule (max_version >= (1, 0)); "
                    "the legacy protocol cannot mark data read-only"
                )
            flags = _FLAG_READ_ONLY
        if padded:
            if not versioned:
                raise BufferError(f"{dtype} needs a versioned DLPack capsule")
            flags |= _FLAG_IS_SUBBYTE_TYPE_PADDED
        layout = self._layout or self.layout
        shape = layout.shape
        ptr = 0 if 0 in shape else self._ptr or self.ptr
        return _export_capsule(
            self, ptr, shape, layout.strides, (code, bits, lanes), device, flags, versioned
        )

    def _interface(self, make):
        layout = self.layout
        return make(
            self.ptr, self._readonly, layout.shape, layout.strides_in_bytes, self.dtype,
            layout.itemsize,
        )  # fmt: skip

    @property
    def __array_interface__(self):
        """The NumPy array interface (v3) of a host-accessible view."""
        self._check_open()
        if not self._location()[2]:
            raise AttributeError(
                "__array_interface__: the view's memory is not host-accessible "
                "(use __cuda_array_interface__)"
            )
        return self._interface(interface_dict)

    @property
    def __cuda_array_interface__(self):
        """The CUDA array interface (v3) of a device-accessible view (``stream`` None)."""
        self._check_open()
        if not self.is_device_accessible:
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

    def _repr_html_(self):
        """Jupyter: a picture of the layout and a table of the view's properties."""
        from ._display import view_html

        return view_html(self)

    def __repr__(self):
        layout = self.layout
        dtype = self.dtype
        return (
            f"StridedMemoryView(ptr=0x{self.ptr:x},\n"
            f"                  shape={layout.shape},\n"
            f"                  strides={layout.strides},\n"
            f"                  itemsize={layout.itemsize},\n"
            f"                  dtype={dtype if dtype is None else dtype.name},\n"
            f"                  device_id={self.device_id},\n"
            f"                  is_device_accessible={self.is_device_accessible},\n"
            f"                  readonly={self._readonly},\n"
            f"                  exporting_obj={type(self._exporting_obj).__name__})"
        )


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
        When ``arg_indices`` is not a tuple of ints.

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
    indices = tuple(operator.index(i) for i in arg_indices)

    def decorator(function):
        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            args = list(args)
            for index in indices:
                args[index] = _ViewableArgument(args[index])
            return function(*args, **kwargs)

        return wrapped

    return decorator
