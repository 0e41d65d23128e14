"""Strided views inside compiled code: one Numba type for ``@njit`` and ``@cuda.jit``.

The static structure of a view (dtype, ndim, layout kind, read-only, bounds checking,
alignment) lives in :class:`StridedViewType`; the runtime numbers live in a struct:

========= ======================= =====================================================
member    Numba type              meaning
========= ======================= =====================================================
data      ``CPointer(dtype)``     address of element ``(0, ..., 0)``
shape     ``UniTuple(int64, n)``  extents
strides   ``UniTuple(int64, n)``  strides in elements (may be 0 or negative)
offset    ``int64``               ``slice_offset`` of the layout, in elements, relative to
                                  the start of the view's buffer
limit     ``int64``               elements in the buffer: every offset a derived view
                                  reaches lies in ``[0, limit)``
========= ======================= =====================================================

Element ``idx`` lives at ``data + sum(idx[k] * strides[k]) * itemsize``. On the CPU the
struct also holds ``meminfo`` and ``parent``, as Numba arrays do: the view object it was
unboxed from, kept alive while compiled code holds the struct, and turned back into a
``StridedMemoryView`` when a view is returned. CUDA kernels get the five members above
as ``2 * ndim + 3`` integer parameters (:func:`view_arguments`).

The layout kind ``"C"`` / ``"F"`` lets the compiler treat the innermost / outermost stride
as the constant 1 (``"A"`` is any layout).

A view whose pointer is not a multiple of its dtype's alignment (NumPy's
``flags.aligned == False``: a view at an odd byte offset into a buffer, a producer's odd
pointer) has an *unaligned* type: its elements are loaded and stored a byte at a time, as
Numba does for unaligned arrays, since a GPU faults on a misaligned wide access (and
kills the context). Views derived from it in compiled code stay unaligned, and so does a
reinterpretation (``view(dtype=...)``) as a dtype of larger alignment than the view's
own, whose pointer the type cannot vouch for. Where an aligned and an unaligned view
meet (the branches of an ``if``), the variable is unaligned.

In compiled code a view ``v`` supports:

* ``v[i, j]`` loads and stores (negative indices count from the end, as in NumPy; values
  are cast to the dtype); stores into a read-only view are a ``TypingError`` saying so;
* basic indexing with slices (any step), ``None`` and ``...``, giving a view;
* ``v[index] = value`` where ``index`` selects a sub-view: a number fills it, a view or
  NumPy array (``@njit`` only) is broadcast, cast and copied as NumPy assigns, through a
  temporary where the memories may overlap (:mod:`layoutkit._numba_assign`);
* ``for x in v`` (and ``enumerate(v)``, ``next(iter(v))``): ``v[0]``, ``v[1]``, ... as
  NumPy iterates, elements of a 1-d view and views otherwise; iterating a 0-d view is a
  ``TypingError`` (NumPy's ``TypeError``);
* ``v.shape``, ``v.strides`` (elements), ``v.ndim``, ``v.size``, ``len(v)``,
  ``v.readonly`` (a constant), ``v.ptr`` (the address of element ``(0, ..., 0)``) and
  ``v.dtype`` (``numpy.empty(n, v.dtype)`` works; returned to Python it is the NumPy
  dtype);
* ``v.view(layout=None, dtype=None)``, as in Python: the same buffer with another
  layout and/or element type (a NumPy type or dtype known when the code is compiled),
  checked as Python checks it (``ValueError``);
* ``v.permuted(axis_order)``, ``v.layout`` (the compiled ``StridedLayout`` of
  ``layoutkit._numba_layout``, with its properties and transforms) and
  ``v.with_layout(layout)``, the view of the same buffer with another layout, which must
  fit in the buffer and have the view's itemsize (``ValueError`` otherwise); on a
  writable view the layout must be unique too (Python makes a view of a broadcast
  read-only, and compiled code cannot change a view's type at run time: pass a read-only
  view to read through a broadcast);
* returning views to Python (``@njit``): they come back as ``StridedMemoryView`` objects
  of the same buffer and exporting object, as ``view.view(layout, dtype)`` makes them
  in Python (the very argument when nothing changed).

What only Python has is a one-line ``TypingError`` that says why: ``buffer`` and
``exporting_obj`` (Python objects), ``device_id`` and ``is_device_accessible`` (the
driver), ``copy_from`` / ``copy_to`` and the ``from_*`` importers, ``repr`` / ``str``.

Indices are checked against their extents (``AxisError``, an ``IndexError``, as in Python)
in ``@njit(boundscheck=True)`` functions, under ``NUMBA_BOUNDSCHECK=1``, for
:class:`BoundsCheckedView` arguments and in ``layoutkit.cuda.jit(boundscheck=True)``
kernels (reported with ``debug=True``).
Transforms (``permuted``, ``with_layout``) are always checked, as in Python.

Element types: every NumPy number type and bool. float16 elements can be read and written
in CUDA kernels but not in ``@njit`` code (Numba's CPU target has no float16), bfloat16
only in CUDA kernels, the other ml_dtypes types, non-native byte orders and sub-array
dtypes (``'(2,3)f4'``) nowhere (no Numba type for such an element): a view of such a
dtype still has its shape, strides and layout in compiled code, and its element access is
a one-line typing error that says what to pass instead. An element of a structured dtype
is a Numba record, a reference to the view's memory that Numba lets code write through:
of a read-only view, element access is a typing error.
"""

import operator
import struct
from functools import cache

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core import ir_utils as numba_ir_utils
from numba.core.errors import NumbaError, TypingError
from numba.core.imputils import impl_ret_borrowed, impl_ret_new_ref
from numba.core.typeconv import Conversion
from numba.core.typing.templates import AttributeTemplate, Signature
from numba.extending import (
    NativeValue,
    box,
    infer_getattr,
    intrinsic,
    lower_builtin,
    lower_cast,
    lower_getattr,
    models,
    overload,
    overload_attribute,
    register_jitable,
    register_model,
    type_callable,
    typeof_impl,
    unbox,
)
from numba.np import numpy_support

from . import _numba_checks as S
from . import _numba_fingerprint as _fingerprint
from ._errors import SealedClass, never_initialised
from ._numba_assign import check_assignment, lower_assignment  # registered before any compile
from ._numba_boxing import Objects, call_python, failed, getattr_fast, linked_class
from ._numba_checks import inline_method, status_raiser
from ._numba_index import lower_index, plan_for_type
from ._numba_layout import StridedLayoutType, make_layout
from .memoryview import check_memory  # loaded first: views reach compiled code only from it

_LAYOUT_KINDS = ("C", "F", "A")
_FLOAT16 = np.dtype(np.float16)


class OpaqueElement(types.Type):
    """Element type of a dtype Numba has no type for (ml_dtypes types): bytes, unreadable.

    ``alignment`` is the dtype's (``dtype.alignment``): what an aligned view of such
    elements guarantees of its pointer when compiled code reinterprets it as another dtype.

    Examples
    --------
    >>> OpaqueElement("float8_e4m3fn", 1)
    opaque float8_e4m3fn
    """

    def __init__(self, dtype_name, itemsize, alignment=1):
        self.dtype_name = dtype_name
        self.itemsize = itemsize
        self.alignment = alignment
        super().__init__(name=f"opaque {dtype_name}")

    @property
    def key(self):
        # Numba interns types by key: the alignment too tells two of them apart (equal
        # sub-array dtypes of aligned and packed structs, named alike by str(dtype))
        return self.dtype_name, self.itemsize, self.alignment


@register_model(OpaqueElement)
class _OpaqueElementModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.IntType(8 * fe_type.itemsize))


class StridedViewType(types.IterableType):
    """Numba type of a strided view: dtype, ndim, layout kind, read-only, bounds checking,
    alignment.

    Parameters
    ----------
    dtype : numba.types.Type
        Element type.
    ndim : int
        Number of dimensions.
    layout : {"C", "F", "A"}
        ``"C"``: the innermost stride is 1 (C-contiguous); ``"F"``: the outermost stride is
        1; ``"A"``: any strides.
    readonly : bool
        Stores into the view fail to compile.
    boundscheck : bool
        Every integer index is checked against its extent (``AxisError``, an ``IndexError``).
    aligned : bool
        The data pointer is a multiple of the dtype's alignment (:func:`is_aligned`), as
        NumPy's ``flags.aligned``. Elements of an unaligned view are loaded and stored a
        byte at a time (alignment 1): a GPU faults on a misaligned wide access. A
        structured element type is made unaligned too (its fields are accessed the same
        way).

    Examples
    --------
    >>> from numba import types
    >>> StridedViewType(types.float32, 2, "C")
    StridedView(float32, 2d, C)
    >>> StridedViewType(types.int8, 1, "A", readonly=True, boundscheck=True)
    StridedView(int8, 1d, A, readonly, boundscheck)
    >>> StridedViewType(types.float64, 1, "C", aligned=False)
    StridedView(float64, 1d, C, unaligned)
    >>> StridedViewType(types.float32, 2, "C").parameter_count  # in a CUDA kernel
    7
    """

    def __init__(self, dtype, ndim, layout="A", readonly=False, boundscheck=False, aligned=True):
        if layout not in _LAYOUT_KINDS:
            raise ValueError(f"layout must be one of {_LAYOUT_KINDS}, got {layout!r}")
        self.aligned = bool(aligned)
        self.dtype = dtype if self.aligned else _unaligned_record(dtype)
        self.ndim = int(ndim)
        self.layout = layout
        self.readonly = bool(readonly)
        self.boundscheck = bool(boundscheck)
        self.fingerprint = _fingerprint.FINGERPRINT  # see StridedLayoutType
        flags = "".join(
            f", {flag}"
            for flag, on in (
                ("readonly", readonly), ("boundscheck", boundscheck), ("unaligned", not aligned)
            )
            if on
        )  # fmt: skip
        super().__init__(f"StridedView({self.dtype}, {self.ndim}d, {layout}{flags})")

    def copy(self, **changes):
        """Return this type with some of ``dtype, ndim, layout, readonly, boundscheck,
        aligned`` changed."""
        fields = dict(
            dtype=self.dtype,
            ndim=self.ndim,
            layout=self.layout,
            readonly=self.readonly,
            boundscheck=self.boundscheck,
            aligned=self.aligned,
        )
        fields.update(changes)
        return strided_view_type(**fields)

    @property
    def key(self):
        # the name alone would make a view of an opaque float16 and one of float16 equal;
        # the fingerprint keeps cached code compiled with another layoutkit from loading
        return (
            self.dtype, self.ndim, self.layout, self.readonly, self.boundscheck, self.aligned,
            getattr(self, "fingerprint", None),
        )  # fmt: skip

    def can_convert_to(self, typingctx, other):
        """A view converts safely to the type of a view that assumes less of it: the
        same but for layout kind ``"A"`` in place of ``"C"`` / ``"F"``, or unaligned."""
        if not isinstance(other, StridedViewType):
            return None
        if (self.ndim, self.readonly, self.boundscheck) != (
            other.ndim, other.readonly, other.boundscheck,
        ) or (other.aligned and not self.aligned):  # fmt: skip
            return None
        if other.layout not in (self.layout, "A"):
            return None
        if other.dtype != (self.dtype if other.aligned else _unaligned_record(self.dtype)):
            return None
        return Conversion.safe

    def unify(self, typingctx, other):
        """The type of either of two views (the two branches of an ``if``): unaligned if
        one is, layout kind ``"A"`` where the kinds differ (as Numba unifies arrays)."""
        if not isinstance(other, StridedViewType):
            return None
        merged = self.copy(
            layout=self.layout if self.layout == other.layout else "A",
            aligned=self.aligned and other.aligned,
        )
        if self.can_convert_to(typingctx, merged) and other.can_convert_to(typingctx, merged):
            return merged
        return None

    @property
    def element_alignment(self):
        """The alignment compiled code gives element loads and stores: None (the
        element type's natural alignment) for an aligned view, 1 for an unaligned one."""
        return None if self.aligned else 1

    @property
    def itemsize(self):
        """Bytes per element."""
        return _itemsize_of(self.dtype)

    @property
    def iterator_type(self):
        """The type of ``iter(view)`` (``for x in view``); a TypingError for a 0-d view."""
        return view_iterator_type(self)

    @property
    def parameter_count(self):
        """Kernel parameters of one view argument: data, shape, strides, offset, limit."""
        return 2 * self.ndim + 3

    @property
    def mangling_args(self):
        return "StridedView", (
            self.dtype,
            self.ndim,
            self.layout,
            int(self.readonly),
            int(self.boundscheck),
            int(self.aligned),
        )


class StridedViewIterator(types.SimpleIteratorType):
    """Numba type of ``iter(view)``: yields ``view[0]``, ``view[1]``, ... as indexing does
    (elements of a 1-d view, sub-views of one dimension fewer otherwise).

    Examples
    --------
    >>> from numba import types
    >>> StridedViewType(types.float32, 2, "C").iterator_type.yield_type
    StridedView(float32, 1d, A)
    """

    def __init__(self, view_type):
        self.view_type = view_type
        super().__init__(f"iter({view_type})", _item_type(view_type))

    @property
    def key(self):
        return self.view_type


@cache
def view_iterator_type(view_type):
    """Return the (cached) :class:`StridedViewIterator` of a :class:`StridedViewType`."""
    return StridedViewIterator(view_type)


def _item_type(view):
    """The type of ``view[i]`` for an integer ``i`` (what iterating ``view`` yields)."""
    if view.ndim == 0:
        raise TypingError(f"iteration over a 0-d view ({view}), as over a 0-d array")
    if view.ndim == 1:
        _check_element_type(view)
        return view.dtype
    return view.copy(ndim=view.ndim - 1, layout="A")


@cache
def strided_view_type(dtype, ndim, layout="A", readonly=False, boundscheck=False, aligned=True):
    """Return the (cached) :class:`StridedViewType` for these static properties."""
    return StridedViewType(dtype, ndim, layout, readonly, boundscheck, aligned)


def is_aligned(ptr, dtype):
    """Whether a view of ``dtype`` elements at address ``ptr`` is aligned (NumPy's rule).

    NumPy's ``flags.aligned`` asks that the pointer and every byte stride be multiples of
    ``dtype.alignment``. NumPy makes every itemsize a multiple of the alignment (a
    structured dtype whose itemsize is not is refused), and a view's strides count whole
    elements, so the pointer alone decides.

    Examples
    --------
    >>> import numpy as np
    >>> is_aligned(4096, np.dtype(np.float64)), is_aligned(4097, np.dtype(np.float64))
    (True, False)
    >>> is_aligned(4097, np.dtype(np.uint8))
    True
    """
    return ptr % dtype.alignment == 0


@cache
def _unaligned_record(dtype):
    """``dtype``, or for a structured (Record) type of aligned fields, the same record
    whose fields, nested records' too, Numba loads and stores with alignment 1."""
    if not isinstance(dtype, types.Record) or not dtype.aligned:
        return dtype
    fields = [
        (name, {"type": _unaligned_record(field.type), "offset": field.offset,
                "alignment": field.alignment, "title": field.title})
        for name, field in dtype.fields.items()
    ]  # fmt: skip
    return types.Record(fields, dtype.size, aligned=False)


def _has_nested_array(dtype):
    """Whether a Record element type has a sub-array field, its nested records included."""
    if not isinstance(dtype, types.Record):
        return False
    return any(
        isinstance(field.type, types.NestedArray) or _has_nested_array(field.type)
        for field in dtype.fields.values()
    )


@cache
def _alignment_of(dtype):
    """The alignment (bytes) of a Numba element type's NumPy dtype: what the pointer of an
    aligned view of such elements is a multiple of."""
    if isinstance(dtype, OpaqueElement):
        return dtype.alignment
    try:
        return numpy_support.as_dtype(dtype).alignment
    except (NotImplementedError, NumbaError, TypeError):  # numba-cuda's bfloat16
        return _itemsize_of(dtype)


@cache
def _itemsize_of(dtype):
    if isinstance(dtype, OpaqueElement):
        return dtype.itemsize
    bitwidth = getattr(dtype, "bitwidth", None)
    if isinstance(dtype, types.Number) and bitwidth:  # numba-cuda's bfloat16 has no dtype
        return bitwidth // 8
    return numpy_support.as_dtype(dtype).itemsize


_VOID = np.dtypes.VoidDType


def dtype_key(dtype):
    """``dtype`` as a cache key of what depends on its Numba element type.

    That is the dtype itself, but for a void dtype (structured, sub-array): NumPy's dtype
    equality ignores whether a structured dtype is an aligned struct (``align=True``), at
    any depth, so two such dtypes compare and hash equal, yet Numba makes an aligned
    ``Record`` of one and an unaligned one of the other, and their alignments differ. A
    void dtype's key adds its alignment and aligned-struct flag, and those of every void
    dtype in it.

    Examples
    --------
    >>> import numpy as np
    >>> fields = {"names": ["a", "b"], "formats": ["f8", "i8"]}
    >>> packed, aligned = np.dtype(fields), np.dtype(fields, align=True)
    >>> packed == aligned, dtype_key(packed) == dtype_key(aligned)
    (True, False)
    >>> dtype_key(np.dtype(np.float32))
    dtype('float32')
    """
    if type(dtype) is not _VOID:
        return dtype
    return (dtype, *_void_flags(dtype))


def _void_flags(dtype):
    """:func:`dtype_key`'s flags of a void dtype, depth first."""
    base = dtype.base  # a sub-array's element dtype, else the dtype itself
    flags = [dtype.alignment, base.isalignedstruct]
    if base.fields is not None:
        for field in base.fields.values():
            if type(field[0]) is _VOID:
                flags.extend(_void_flags(field[0]))
    return flags


def numba_dtype(dtype, for_cuda=False):
    """The Numba element type of a NumPy dtype (``for_cuda``: numba-cuda's, with bfloat16).

    dtypes the target has no type for (ml_dtypes types; float16 on the CPU, where Numba
    has no data model for it; non-native byte order) give an :class:`OpaqueElement`, named
    by ``str(dtype)`` (``'>u2'``, not ``'uint16'``). So does a sub-array dtype
    (``'(2,3)f4'``): Numba's type for it (a nested array) describes a field of a record,
    whose elements are an array structure in compiled code, not the element's 24 bytes,
    so a view of them would load and step through memory by that structure.
    """
    return _numba_dtype(dtype_key(dtype), for_cuda)


@cache
def _numba_dtype(key, for_cuda):
    dtype = key[0] if type(key) is tuple else key
    if dtype.subdtype is not None:
        return OpaqueElement(str(dtype), dtype.itemsize, dtype.alignment)
    if for_cuda:
        from numba.cuda.np import numpy_support as support
    else:
        support = numpy_support
        if dtype == _FLOAT16:
            return OpaqueElement("float16", 2, 2)
    try:
        return support.from_dtype(dtype)
    except (NotImplementedError, NumbaError, KeyError, TypeError):
        return OpaqueElement(str(dtype), dtype.itemsize, dtype.alignment)


def layout_kind(layout):
    """Return ``"C"``, ``"F"`` or ``"A"``: which stride the compiler may take as 1.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> layout_kind(NS(is_contiguous_c=False, is_contiguous_f=True))
    'F'
    """
    if layout.is_contiguous_c:
        return "C"
    if layout.is_contiguous_f:
        return "F"
    return "A"


def view_numba_type(view, boundscheck=False, for_cuda=False):
    """Return the :class:`StridedViewType` of a ``StridedMemoryView`` (or look-alike).

    Parameters
    ----------
    view : StridedMemoryView
        Anything with ``dtype``, ``layout`` (a StridedLayout), ``readonly`` and ``ptr``
        (which decides whether the type is aligned: :func:`is_aligned`).
    boundscheck : bool
        Type for the bounds-checked variant.
    for_cuda : bool
        Element types as numba-cuda has them (bfloat16 is a type there).

    Raises
    ------
    TypeError
        For a view without a dtype.
    """
    dtype = view.dtype
    if dtype is None:
        raise _without_dtype()
    return cached_view_type(
        dtype, view.layout, bool(view.readonly), is_aligned(view.ptr, dtype), bool(boundscheck),
        bool(for_cuda),
    )  # fmt: skip


def _without_dtype():
    return TypeError(
        "a view without a dtype cannot be passed to compiled code; give it one with "
        "view.view(dtype=...)"
    )


def cached_view_type(dtype, layout, readonly, aligned, boundscheck=False, for_cuda=False):
    """The :class:`StridedViewType` of a view of ``dtype`` elements laid out as ``layout``.

    Looked up in a dict keyed by plain values, the ones that decide the type: the NumPy
    dtype (its hash is computed in C and kept on it; :func:`dtype_key`), the number of
    dimensions, the layout's two contiguity flags (read from the slots the
    layout fills on first use, so a layout already analysed is not analysed again), and
    the four flags. No Numba type is hashed.

    Parameters
    ----------
    dtype : numpy.dtype
        The element type.
    layout : StridedLayout
        A plain StridedLayout (views hold no subclass: see ``plain_layout``).
    readonly, aligned, boundscheck, for_cuda : bool
        As :func:`strided_view_type` has them (``aligned``: :func:`is_aligned`);
        ``for_cuda`` as :func:`numba_dtype`. Bools: the key holds them as given
        (:func:`view_numba_type` converts its arguments).

    Examples
    --------
    >>> import numpy as np
    >>> from layoutkit import StridedLayout
    >>> f_order = StridedLayout.dense((2, 3), 4, "F")
    >>> cached_view_type(np.dtype(np.float32), f_order, True, True)
    StridedView(float32, 2d, F, readonly)
    >>> cached_view_type(np.dtype(np.float32), f_order[:, ::2], False, False)
    StridedView(float32, 2d, A, unaligned)
    """
    if layout._order is None:
        layout.is_contiguous_c  # noqa: B018 (fills _is_c and _is_f, from one analysis)
    key = (
        dtype_key(dtype), len(layout._shape), layout._is_c, layout._is_f, readonly, boundscheck,
        aligned, for_cuda,
    )  # fmt: skip
    try:
        return _VIEW_TYPES[key]
    except KeyError:  # the first view of these properties
        numba_type = _VIEW_TYPES[key] = strided_view_type(
            numba_dtype(dtype, for_cuda), key[1], layout_kind(layout), *key[4:7]
        )
        return numba_type


_VIEW_TYPES = {}


def buffer_limit(view):
    """Elements of the view's buffer: every layout of the view lies in ``[0, limit)``.

    ``view`` is a view or the import record of one (a kernel argument converted straight
    from a producer). The buffer made on demand for an imported view ends after the
    view's last element.
    """
    # only a buffer already made can be larger
    return _buffer_limit(view.layout, getattr(view, "_buffer", None))


def _buffer_limit(layout, buffer):
    """:func:`buffer_limit` of a view's layout and buffer (``None``: not made)."""
    if buffer is not None:
        return buffer.size // layout.itemsize
    return layout.offset_bounds[1] + 1  # max_offset + 1


def view_arguments(view):
    """Return the flattened runtime values of a view: ``(data, *shape, *strides, offset, limit)``.

    This is the order of the CUDA struct's members, so the tuple is the kernel parameter
    list of one view argument.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> layout = NS(shape=(2, 3), _strides=(3, 1), slice_offset=4, offset_bounds=(4, 9),
    ...             itemsize=8)
    >>> view_arguments(NS(ptr=1000, layout=layout, _buffer=None))
    (1000, 2, 3, 3, 1, 4, 10)
    """
    layout = view.layout
    # _strides: explicit also for implicit C (whose public strides are None)
    return (view.ptr, *layout.shape, *layout._strides, layout.slice_offset, buffer_limit(view))


def check_view_accessible(view, name, on_device, device_id=None):
    """Raise a clear error when ``view`` cannot be used by the code about to run.

    Parameters
    ----------
    view : StridedMemoryView
        The argument.
    name : str
        How to name the argument in messages.
    on_device : bool
        True for a GPU kernel, False for ``@njit`` (host) code.
    device_id : int or callable, optional
        The device the kernel runs on (or a function returning it, called only when the
        view's device must be compared); checked when ``on_device``.
    """
    check_memory(view, name)  # a closed buffer, or a null pointer with elements: BufferError
    device_accessible = view.is_device_accessible
    if on_device:
        if not device_accessible:
            raise ValueError(
                f"{name}: a host-only view (device_id={view.device_id}) cannot be passed to "
                "a GPU kernel; copy it to device memory first"
            )
        if callable(device_id):
            device_id = device_id()
        if device_id is not None and view.device_id != device_id and not _is_host_accessible(view):
            raise ValueError(
                f"{name}: the view lives on device {view.device_id} but the kernel runs on "
                f"device {device_id}"
            )
    elif not _is_host_accessible(view):  # the host cannot reach it: device-only, or neither
        what = f"a device-only view (device_id={view.device_id})" if device_accessible else (
            "a view of memory neither the host nor a device can access"
        )
        raise ValueError(
            f"{name}: {what} cannot be passed to @njit code; copy it to host memory first"
        )


def _is_host_accessible(view):
    buffer = getattr(view, "buffer", None)
    return buffer is not None and bool(buffer.is_host_accessible)


# ---------------------------------------------------------------------------------------
# the per-view record read by @njit typing and unboxing

_HOST_ACCESSIBLE = 1  # bit of the record's flags word
_HEADER = 4  # flags, data, offset, limit; then shape and strides


def view_record(view):
    """``(numba type, packed int64 values)`` of a view for ``@njit``, made once per view.

    The values are ``flags, data, offset, limit, *shape, *strides``; the unboxer reads
    them straight from the bytes object. A view never changes its pointer, layout, dtype,
    read-only flag or device, so the record is kept on the view (``_numba_record``); only
    whether its buffer was closed is checked at every call. Everything is read from the
    view's import record and the layout's slots, which hold it already: this runs for
    every new view passed to compiled code.
    """
    record = getattr(view, "_numba_record", None)
    if record is not None:
        return record
    if view._buffer is not None:  # (check_memory refuses nothing else of a view)
        check_memory(view, "view argument")  # closed before its device was known: BufferError
    imported = view._record
    dtype = imported.dtype
    if dtype is None:
        raise _without_dtype()
    layout = imported.layout
    ptr = imported.ptr
    numba_type = cached_view_type(dtype, layout, imported.readonly, is_aligned(ptr, dtype))
    flags = _HOST_ACCESSIBLE if view._where()[2] else 0  # (may make the buffer: read after)
    # shape and strides: the int64s the layout holds already (its packed array may go on)
    shape_strides = (layout._packed or layout._lay()).tobytes()[: 16 * len(layout._shape)]
    header = _PACK_HEADER(flags, ptr, layout._offset, _buffer_limit(layout, view._buffer))
    record = view._numba_record = (numba_type, header + shape_strides)
    return record


_PACK_HEADER = struct.Struct(f"{_HEADER}q").pack  # native int64s, as the unboxer reads them


def _not_a_view(obj):
    raise TypeError(
        f"{type(obj).__name__} object claims a StridedView Numba type (_numba_type_) but is "
        "not a StridedMemoryView; compiled code takes views only"
    )


# the StridedMemoryView class as a symbol compiled (and cached) unboxers link to, as Numba
# links _Py_NoneStruct: unbox checks the argument's class before it trusts any attribute
_VIEW_CLASS_SYMBOL = "layoutkit_StridedMemoryView_class"


def _register_view_class():
    from llvmlite import binding

    from layoutkit.memoryview import StridedMemoryView

    binding.add_symbol(_VIEW_CLASS_SYMBOL, id(StridedMemoryView))


def _is_view(c, view):
    """An ``i1``: whether ``view`` is a StridedMemoryView (exactly, or a subclass).

    Its real type is asked (``PyType_IsSubtype``), not ``PyObject_IsInstance``, which
    believes a ``__class__`` property: such an object would have its ``_numba_record``
    (pointer, shape, strides) trusted.
    """
    builder = c.builder
    view_class = linked_class(c, _VIEW_CLASS_SYMBOL)
    result = cgutils.alloca_once_value(
        builder, builder.icmp_unsigned("==", c.pyapi.get_type(view), view_class)
    )
    with builder.if_then(builder.not_(builder.load(result)), likely=False):
        subtype_type = ir.FunctionType(ir.IntType(32), [c.pyapi.pyobj, c.pyapi.pyobj])
        is_subtype = builder.call(
            c.pyapi._get_function(subtype_type, name="PyType_IsSubtype"),
            [c.pyapi.get_type(view), view_class],
        )
        builder.store(builder.icmp_signed("!=", is_subtype, is_subtype.type(0)), result)
    return builder.load(result)


def _refuse_view(view):
    """Raise the error that keeps ``view`` out of @njit code (unbox's slow path)."""
    check_view_accessible(view, "view argument", on_device=False)
    _malformed_record(view)


def _malformed_record(view):
    raise TypeError(
        f"view argument: the _numba_record of this {type(view).__name__} object was not made "
        "by layoutkit"
    )


# ---------------------------------------------------------------------------------------
# data models


def _cuda_members(fe_type):
    extents = types.UniTuple(types.int64, fe_type.ndim)
    return [
        ("data", types.CPointer(fe_type.dtype)),
        ("shape", extents),
        ("strides", extents),
        ("offset", types.int64),
        ("limit", types.int64),
    ]


@register_model(StridedViewType)
class _StridedViewModel(models.StructModel):
    """CPU: the kernel members plus what keeps the Python view alive and finds it again."""

    def __init__(self, dmm, fe_type):
        members = [
            ("meminfo", types.MemInfoPointer(types.voidptr)),
            ("parent", types.pyobject),
            *_cuda_members(fe_type),
        ]
        super().__init__(dmm, fe_type, members)


def _iterator_members(fe_type):
    return [("index", types.EphemeralPointer(types.int64)), ("view", fe_type.view_type)]


@register_model(StridedViewIterator)
class _StridedViewIteratorModel(models.StructModel):
    """The position of ``iter(view)`` (a pointer to a stack slot, as Numba's array
    iterators keep it) and the view."""

    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _iterator_members(fe_type))


def register_cuda_model():
    """Give views their kernel-parameter struct (no meminfo, no parent) in numba-cuda,
    and their iterators theirs."""
    from numba.cuda.datamodel.models import StructModel
    from numba.cuda.models import register_model as register_cuda

    @register_cuda(StridedViewType)
    class _CudaStridedViewModel(StructModel):
        def __init__(self, dmm, fe_type):
            super().__init__(dmm, fe_type, _cuda_members(fe_type))

    @register_cuda(StridedViewIterator)
    class _CudaStridedViewIteratorModel(StructModel):
        def __init__(self, dmm, fe_type):
            super().__init__(dmm, fe_type, _iterator_members(fe_type))

    @register_cuda(OpaqueElement)
    class _CudaOpaqueElementModel(_OpaqueElementModel):
        pass


def _member_attribute(member, name):
    """``view.<name>`` reads the struct member ``member``, in every target.

    Typed from the members themselves (``_cuda_members``), not from a data model as
    ``make_attribute_wrapper`` types: the CPU has no model for the members of a kernel's
    float16 view (its ``data`` points to float16), so ``v.shape`` failed to compile there.
    """

    @infer_getattr
    class _Member(AttributeTemplate):
        key = StridedViewType

        def generic_resolve(self, typ, attr):
            if attr == name:
                return dict(_cuda_members(typ))[member]

    @lower_getattr(StridedViewType, name)
    def _lower_member(context, builder, typ, value):
        struct = cgutils.create_struct_proxy(typ)(context, builder, value=value)
        member_type = dict(_cuda_members(typ))[member]
        return impl_ret_borrowed(context, builder, member_type, getattr(struct, member))


_member_attribute("shape", "shape")
_member_attribute("strides", "strides")
_member_attribute("offset", "_slice_offset")
_member_attribute("limit", "_limit")


def _register_strided_memory_view():
    """Let ``@njit`` type ``StridedMemoryView`` arguments (unless the class says itself)."""
    from layoutkit.memoryview import StridedMemoryView

    if not hasattr(StridedMemoryView, "_numba_type_"):
        typeof_impl.register(StridedMemoryView)(lambda view, context: view_numba_type(view))


_register_strided_memory_view()
_register_view_class()


# ---------------------------------------------------------------------------------------
# Python <-> native


def _record_for_unbox(view):
    """The view's record (unbox's slow path, for a view typed but without a record yet)."""
    return view_record(view)


@unbox(StridedViewType)
def _unbox_view(typ, obj, c):
    builder = c.builder
    int64 = ir.IntType(64)
    count = _HEADER + 2 * typ.ndim
    objects = Objects(c)
    view = getattr_fast(c, objects, obj, "view") if typ.boundscheck else obj
    # any object may claim the type through _numba_type_: only a view's record is trusted
    with (
        builder.if_then(builder.not_(failed(c)), likely=True),  # view is not NULL
        builder.if_then(builder.not_(_is_view(c, view)), likely=False),  # it cannot raise
    ):
        call_python(c, objects, _not_a_view, [view])
    record = cgutils.alloca_once_value(builder, getattr_fast(c, objects, view, "_numba_record"))
    with builder.if_then(builder.not_(failed(c)), likely=True):
        none = c.pyapi.borrow_none()
        with builder.if_then(builder.icmp_unsigned("==", builder.load(record), none)):
            builder.store(call_python(c, objects, _record_for_unbox, [view]), record)
    values = [cgutils.alloca_once_value(builder, ir.Constant(int64, 0)) for _ in range(count)]
    with builder.if_then(builder.not_(failed(c)), likely=True):
        packed = c.pyapi.tuple_getitem(builder.load(record), 1)  # borrowed
        with builder.if_then(cgutils.is_not_null(builder, packed), likely=True):
            size_type = ir.FunctionType(c.pyapi.py_ssize_t, [c.pyapi.pyobj])
            size = builder.call(c.pyapi._get_function(size_type, name="PyBytes_Size"), [packed])
            right = builder.icmp_signed("==", size, size.type(8 * count))
            with builder.if_else(right, likely=True) as (good, bad):
                with good:
                    words = builder.bitcast(c.pyapi.bytes_as_string(packed), int64.as_pointer())
                    for position, slot in enumerate(values):
                        builder.store(builder.load(builder.gep(words, [int64(position)])), slot)
                with bad:  # not a record this unboxer made (a hostile or stale attribute)
                    c.pyapi.err_clear()
                    call_python(c, objects, _malformed_record, [view])
    values = [builder.load(slot) for slot in values]
    # the buffer is checked at every call: it may have been closed since the record was made
    with builder.if_then(builder.not_(failed(c)), likely=True):
        host_only = builder.and_(values[0], int64(_HOST_ACCESSIBLE))
        refused = cgutils.alloca_once_value(builder, builder.icmp_signed("==", host_only, int64(0)))
        buffer = getattr_fast(c, objects, view, "_buffer")
        with builder.if_then(builder.icmp_unsigned("!=", buffer, c.pyapi.borrow_none())):
            closed = getattr_fast(c, objects, buffer, "is_closed")
            with builder.if_then(cgutils.is_not_null(builder, closed), likely=True):
                is_true = c.pyapi.object_istrue(closed)
                is_closed = builder.icmp_signed("!=", is_true, is_true.type(0))
                builder.store(builder.or_(builder.load(refused), is_closed), refused)
        with builder.if_then(builder.and_(builder.load(refused), builder.not_(failed(c)))):
            call_python(c, objects, _refuse_view, [view])
    struct = cgutils.create_struct_proxy(typ)(c.context, builder)
    data = builder.inttoptr(values[1], struct.data.type)
    meminfo = cgutils.alloca_once_value(builder, cgutils.get_null_value(struct.meminfo.type))
    with builder.if_then(builder.not_(failed(c)), likely=True):
        # the meminfo owns a reference to the view: it stays alive while the struct lives
        made = c.pyapi.nrt_meminfo_new_from_pyobject(builder.bitcast(data, cgutils.voidptr_t), view)
        builder.store(made, meminfo)
    extents = types.UniTuple(types.int64, typ.ndim)
    struct.meminfo = builder.load(meminfo)
    struct.parent = view
    struct.data = data
    struct.offset = values[2]
    struct.limit = values[3]
    struct.shape = c.context.make_tuple(builder, extents, values[_HEADER : _HEADER + typ.ndim])
    struct.strides = c.context.make_tuple(builder, extents, values[_HEADER + typ.ndim :])
    is_error = failed(c)
    objects.release()
    return NativeValue(struct._getvalue(), is_error=is_error)


def _from_compiled(parent, shape, strides, offset, readonly, boundscheck, dtype=None):
    """The Python view a view returned by compiled code stands for (box).

    A derived view is made as ``parent.view(layout, dtype)`` makes it in Python: of the
    same buffer and exporting object, read-only where the parent is, and where its layout
    is not unique (DECISIONS 19). ``dtype`` is the NumPy dtype of the returned view's
    element type, or None where it is the parent's (an element type without a NumPy
    dtype keeps the parent's).
    """
    from .memoryview import StridedMemoryView

    layout = parent.layout
    if dtype is None or dtype == parent.dtype:
        dtype = parent.dtype
    if (
        shape == layout.shape
        and strides == layout._strides
        and offset == layout.slice_offset
        and readonly == parent.readonly
        and dtype is parent.dtype
    ):
        view = parent
    else:
        new_layout = type(layout)._numba_box(shape, strides, dtype.itemsize, offset)
        view = parent.view(new_layout, dtype)
        if readonly and not view.readonly:  # a read-only type of writable memory
            view = StridedMemoryView.from_buffer(
                parent.buffer, new_layout, dtype, is_readonly=True
            )
    return BoundsCheckedView(view) if boundscheck else view


def _numpy_dtype(dtype):
    """The NumPy dtype of a view's Numba element type, or None (opaque, or none known)."""
    if isinstance(dtype, OpaqueElement):
        return None
    try:
        return numpy_support.as_dtype(dtype)
    except (NotImplementedError, NumbaError, TypeError):
        return None


@box(StridedViewType)
def _box_view(typ, val, c):
    struct = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val)
    extents = types.UniTuple(types.int64, typ.ndim)
    objects = Objects(c)
    args = [
        struct.parent,
        objects.keep(c.box(extents, struct.shape)),
        objects.keep(c.box(extents, struct.strides)),
        objects.keep(c.box(types.int64, struct.offset)),
        objects.keep(c.box(types.boolean, cgutils.true_bit if typ.readonly else cgutils.false_bit)),
        objects.keep(c.box(types.boolean, cgutils.true_bit if typ.boundscheck else cgutils.false_bit)),
        objects.keep(c.pyapi.unserialize(c.pyapi.serialize_object(_numpy_dtype(typ.dtype)))),
    ]
    result = cgutils.alloca_once_value(c.builder, c.pyapi.get_null_object())
    with c.builder.if_then(c.builder.not_(failed(c)), likely=True):
        callee = c.pyapi.unserialize(c.pyapi.serialize_object(_from_compiled))
        c.builder.store(c.pyapi.call_function_objargs(callee, args), result)
        c.pyapi.decref(callee)
    objects.release()
    # boxing consumes the native value (as Numba's boxers of arrays and lists do): the
    # Python view made above holds what keeps the memory alive now
    c.context.nrt.decref(c.builder, typ, val)
    return c.builder.load(result)


# ---------------------------------------------------------------------------------------
# code generation helpers


def _has_member(context, typ, name):
    return name in context.data_model_manager[typ]._fields


def _derived_view(context, builder, typ, parent, parent_type, data, shape, strides, offset):
    """A view struct of type ``typ`` sharing ``parent``'s buffer (a new reference)."""
    view = cgutils.create_struct_proxy(typ)(context, builder)
    if _has_member(context, typ, "meminfo"):
        view.meminfo = parent.meminfo
        view.parent = parent.parent
    view.data = data
    view.shape = context.make_tuple(builder, types.UniTuple(types.int64, typ.ndim), shape)
    view.strides = context.make_tuple(builder, types.UniTuple(types.int64, typ.ndim), strides)
    view.offset = offset
    view.limit = parent.limit
    return impl_ret_borrowed(context, builder, typ, view._getvalue())


def _effective_strides(builder, typ, view):
    """Strides with the one the layout kind fixes to 1 replaced by the constant.

    Only for the address of one element: the layout kind fixes that stride only where it
    is ever multiplied by a nonzero index (an extent-1 axis, or a zero volume, may keep
    any stride), so a sub-view keeps the real strides, as Python's does.
    """
    strides = cgutils.unpack_tuple(builder, view.strides, typ.ndim)
    one = ir.Constant(ir.IntType(64), 1)
    if typ.ndim and typ.layout == "C":
        strides[-1] = one
    elif typ.ndim and typ.layout == "F":
        strides[0] = one
    return strides


def _check_element_type(view):
    """TypingError for element access where the target has no type for the elements."""
    dtype = view.dtype
    if view.readonly and isinstance(dtype, types.Record):
        # Numba's records (and their nested-array fields) are references to the memory,
        # and Numba lets every one be written (r.x = 1, r["x"] = 1, r.x[0] = 1): a
        # read-only view must not hand one out (Python's view gives a read-only copy)
        raise TypingError(
            f"elements of a read-only {dtype} view cannot be read in compiled code: a "
            "structured element is a reference to the view's memory there, which compiled "
            "code could write through; read a field through a view of it (view(layout, "
            "dtype=<the field's type>)), or pass a writable view"
        )
    if not view.aligned and _has_nested_array(dtype):
        # Numba gives a sub-array field its natural alignment whatever the record's
        raise TypingError(
            f"elements of an unaligned {dtype} view cannot be accessed in compiled code: "
            "its sub-array fields would be read with their natural alignment, which the "
            "view's pointer does not have (a GPU faults on it); read a field through a view "
            "of it (view(layout, dtype=<the field's type>)), or pass an aligned copy"
        )
    if not isinstance(dtype, OpaqueElement):
        return
    if dtype.dtype_name == "float16":
        raise TypingError(
            "elements of a float16 view cannot be read or written in @njit code: Numba's CPU "
            "target has no float16 type; pass a float32 copy, or a uint16 view of the same "
            "memory (view.view(dtype=numpy.uint16)) to move the raw bits (layoutkit.cuda.jit "
            "kernels support float16)"
        )
    name, itemsize = dtype.dtype_name, dtype.itemsize
    if itemsize in (1, 2, 4, 8):
        raw = f"an integer dtype of {itemsize} byte(s) (view.view(dtype=numpy.uint{8 * itemsize}))"
    else:  # no integer type of that size: its bytes, one per element
        raw = "numpy.uint8 (view.view(view.layout.repacked(1), numpy.uint8))"
    raise TypingError(
        f"elements of a {name} view cannot be read or written in compiled code: Numba has "
        f"no type for {name} elements here; pass a view of the same memory with {raw} to "
        "move the raw bits"
    )


def _boundscheck(context, typ):
    """Whether indices of a view of type ``typ`` are checked in this compilation."""
    return typ.boundscheck or bool(context.enable_boundscheck)


def _apply_index(context, builder, typ, struct, index_type, index, plan):
    """(element shift from the view's data, new offset, shape, strides) of an index."""
    shape = cgutils.unpack_tuple(builder, struct.shape, typ.ndim)
    if plan.is_element:
        strides = _effective_strides(builder, typ, struct)
    else:
        strides = cgutils.unpack_tuple(builder, struct.strides, typ.ndim)
    offset, shape, strides = lower_index(
        context, builder, plan, index_type, index, shape, strides,
        struct.offset, ir.Constant(ir.IntType(64), typ.itemsize), _boundscheck(context, typ),
        "view index",
    )  # fmt: skip
    return builder.sub(offset, struct.offset), offset, shape, strides


# ---------------------------------------------------------------------------------------
# indexing (typed and lowered in place: see layoutkit._numba_index)


@lower_cast(StridedViewType, StridedViewType)
def _cast_view(context, builder, fromty, toty, val):
    # only to a type that assumes less (can_convert_to): the same struct
    return val


@type_callable(operator.getitem)
def _type_getitem(context):
    def typer(view, index):
        if not isinstance(view, StridedViewType):
            return None
        plan = plan_for_type(index, view.ndim)
        if plan.is_element:
            _check_element_type(view)
            return Signature(view.dtype, (view, index), None)
        return Signature(view.copy(ndim=plan.ndim, layout="A"), (view, index), None)

    return typer


@type_callable(operator.setitem)
def _type_setitem(context):
    def typer(view, index, value):
        if not isinstance(view, StridedViewType):
            return None
        if view.readonly:
            raise TypingError(f"cannot store into {view}: the view is read-only")
        plan = plan_for_type(index, view.ndim)
        if not plan.is_element:  # a sub-view: a fill or a copy (layoutkit._numba_assign)
            check_assignment(context, view.copy(ndim=plan.ndim, layout="A"), value)
            return Signature(types.none, (view, index, value), None)
        _check_element_type(view)
        if context.can_convert(value, view.dtype) is None:
            raise TypingError(f"cannot store a {value} into {view}")
        return Signature(types.none, (view, index, value), None)

    return typer


@lower_builtin(operator.getitem, StridedViewType, types.Any)
def _lower_getitem(context, builder, sig, args):
    typ, index_type = sig.args
    plan = plan_for_type(index_type, typ.ndim)
    struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
    shift, offset, shape, strides = _apply_index(
        context, builder, typ, struct, index_type, args[1], plan
    )
    pointer = builder.gep(struct.data, [shift])
    if plan.is_element:
        return context.unpack_value(builder, typ.dtype, pointer, typ.element_alignment)
    return _derived_view(
        context, builder, sig.return_type, struct, typ, pointer, shape, strides, offset
    )


@lower_builtin(operator.setitem, StridedViewType, types.Any, types.Any)
def _lower_setitem(context, builder, sig, args):
    typ, index_type, value_type = sig.args
    plan = plan_for_type(index_type, typ.ndim)
    struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
    shift, offset, shape, strides = _apply_index(
        context, builder, typ, struct, index_type, args[1], plan
    )
    if not plan.is_element:
        target_type = typ.copy(ndim=plan.ndim, layout="A")
        target = _derived_view(
            context, builder, target_type, struct, typ, builder.gep(struct.data, [shift]),
            shape, strides, offset,
        )  # fmt: skip
        lower_assignment(context, builder, target_type, target, value_type, args[2])
        if context.enable_nrt:  # _derived_view's new reference
            context.nrt.decref(builder, target_type, target)
        return context.get_dummy_value()
    stored = context.cast(builder, args[2], value_type, typ.dtype)
    pointer = builder.gep(struct.data, [shift])
    context.pack_value(builder, typ.dtype, stored, pointer, typ.element_alignment)
    return context.get_dummy_value()


# ---------------------------------------------------------------------------------------
# iteration: for x in view (typed by StridedViewType.iterator_type)


@lower_builtin("getiter", StridedViewType)
def _lower_getiter(context, builder, sig, args):
    (typ,) = sig.args
    iterator = context.make_helper(builder, sig.return_type)
    iterator.index = cgutils.alloca_once_value(builder, ir.Constant(ir.IntType(64), 0))
    iterator.view = args[0]
    if context.enable_nrt:  # the iterator holds the view (as Numba's array iterators do)
        context.nrt.incref(builder, typ, args[0])
    return impl_ret_new_ref(context, builder, sig.return_type, iterator._getvalue())


@lower_builtin("iternext", StridedViewIterator)
def _lower_iternext(context, builder, sig, args):
    """The pair ``(view[index], index < len(view))``, a new reference, as Numba's
    ``iternext_impl(RefType.NEW)`` makes it (written out: numba-cuda takes no lowering
    whose function comes from a ``numba`` module, as that decorator's wrapper does)."""
    (iterator_type,) = sig.args
    view_type = iterator_type.view_type
    iterator = context.make_helper(builder, iterator_type, value=args[0])
    struct = cgutils.create_struct_proxy(view_type)(context, builder, value=iterator.view)
    index = builder.load(iterator.index)
    valid = builder.icmp_signed("<", index, builder.extract_value(struct.shape, 0))
    pair = context.make_helper(builder, sig.return_type)
    pair.second = valid
    with builder.if_then(valid):
        item_sig = Signature(iterator_type.yield_type, (view_type, types.int64), None)
        pair.first = _lower_getitem(context, builder, item_sig, (iterator.view, index))
        builder.store(builder.add(index, index.type(1)), iterator.index)
    return pair._getvalue()


# ---------------------------------------------------------------------------------------
# attributes and derived views


@overload_attribute(StridedViewType, "ndim")
def _ov_ndim(view):
    ndim = view.ndim
    return lambda view: ndim


@overload_attribute(StridedViewType, "size")
def _ov_size(view):
    ndim = view.ndim

    def impl(view):
        size = 1
        for i in range(ndim):
            size *= view.shape[i]
        return size

    return impl


@overload_attribute(StridedViewType, "readonly")
def _ov_readonly(view):
    readonly = view.readonly
    return lambda view: readonly


@overload_attribute(StridedViewType, "ptr")
def _ov_ptr(view):
    return lambda view: _data_address(view)


@intrinsic
def _data_address(typingctx, view):
    """The address of element ``(0, ..., 0)`` (the view's ``ptr``) as an unsigned int."""

    def codegen(context, builder, sig, args):
        struct = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=args[0])
        return builder.ptrtoint(struct.data, context.get_value_type(types.uintp))

    return types.uintp(view), codegen


@overload_attribute(StridedViewType, "dtype")
def _ov_dtype(view):
    if isinstance(view.dtype, OpaqueElement):
        raise TypingError(
            f"the dtype of a {view.dtype.dtype_name} view has no Numba type here, so compiled "
            "code cannot return or use it; read view.dtype in Python"
        )
    return lambda view: _dtype_of(view)


@intrinsic
def _dtype_of(typingctx, view):
    """The view's dtype: a ``DType`` value (a NumPy dtype when returned to Python, usable
    as ``numpy.empty(n, view.dtype)`` in compiled code)."""

    def codegen(context, builder, sig, args):
        return context.get_dummy_value()

    return types.DType(view.dtype)(view), codegen


@overload(len)
def _ov_len(view):
    if not isinstance(view, StridedViewType):
        return None
    if view.ndim == 0:
        raise TypingError(f"len() of a 0-d view ({view}): use view.shape or view.size")
    return lambda view: view.shape[0]


def _python_only_names():
    """What only a Python view has: each is a one-line typing error in compiled code."""
    from ._numba_layout import python_only

    objects = (
        "is a Python object, which compiled code has no type for; read it in Python and "
        "pass what the code needs (the view, its ptr or layout)"
    )
    driver = (
        "is found through the CUDA driver, which compiled code cannot call; read it in "
        "Python and pass it as an argument"
    )
    for name, why in [("buffer", objects), ("exporting_obj", objects),
                      ("device_id", driver), ("is_device_accessible", driver)]:  # fmt: skip
        python_only(StridedViewType, name, f"StridedMemoryView.{name} {why}", method=False)
    for name in ("copy_from", "copy_to"):
        python_only(
            StridedViewType, name,
            f"StridedMemoryView.{name}() plans and launches copies from Python; call it "
            "from Python, or copy element by element (dst[i, j] = src[i, j]) in compiled code",
        )  # fmt: skip
    for name in ("from_any_interface", "from_array_interface", "from_buffer",
                 "from_cuda_array_interface", "from_dlpack"):  # fmt: skip
        python_only(
            StridedViewType, name,
            f"StridedMemoryView.{name}() imports Python objects; make the view in Python "
            "and pass it to the compiled function",
        )  # fmt: skip
    no_repr = (
        "a view has no repr() or str() in compiled code (Numba strings are not Python's); "
        "return the view and format it in Python"
    )
    python_only(StridedViewType, "__repr__", no_repr)
    python_only(StridedViewType, "__str__", no_repr)


_python_only_names()


@overload_attribute(StridedViewType, "layout")
def _ov_layout(view):
    itemsize = view.itemsize
    return lambda view: make_layout(view.shape, view.strides, itemsize, view._slice_offset)


@inline_method(StridedViewType, "with_layout")
def _ov_with_layout(view, layout):
    if not isinstance(layout, StridedLayoutType):
        raise TypingError(f"with_layout() of {view} needs a StridedLayout, got {layout}")
    itemsize = view.itemsize
    readonly = view.readonly

    def impl(view, layout):
        _raise_with_layout(layout_status(layout, itemsize, view._limit, readonly))
        return _view_with_layout(view, layout)

    return impl


def _element_type_of(dtype, view):
    """The Numba element type a ``dtype`` argument of ``view()`` names (or a TypingError)."""
    if dtype is None or isinstance(dtype, (types.NoneType, types.Omitted)):
        return view.dtype
    if isinstance(dtype, types.NumberClass):
        return dtype.instance_type
    if isinstance(dtype, types.DType):
        return dtype.dtype
    raise TypingError(
        f"view() of {view} needs a dtype known when the code is compiled (numpy.int32, "
        f"numpy.dtype(...) passed in), got {dtype}"
    )


@inline_method(StridedViewType, "view")
def _ov_view(view, layout=None, dtype=None):
    """``view.view(layout=None, dtype=None)``: the view's memory with another layout and/or
    dtype, checked as Python checks it (the layout must fit the buffer and have the
    dtype's itemsize: ``ValueError``)."""
    no_layout = layout is None or isinstance(layout, (types.NoneType, types.Omitted))
    if not (no_layout or isinstance(layout, StridedLayoutType)):
        raise TypingError(f"view() of {view} needs a StridedLayout or None, got {layout}")
    element = _element_type_of(dtype, view)
    if no_layout and element == view.dtype:
        return lambda view, layout=None, dtype=None: view
    # the new elements are aligned where the view's pointer guarantees their alignment
    aligned = view.aligned and _alignment_of(view.dtype) % _alignment_of(element) == 0
    result = view.copy(dtype=element, aligned=aligned)
    old = view.itemsize
    new = result.itemsize
    readonly = view.readonly
    chosen = _own_layout if no_layout else _given_layout

    def impl(view, layout=None, dtype=None):
        new_layout = chosen(view, layout)
        limit = view._limit * old // new  # elements of the new itemsize in the buffer
        _raise_view(layout_status(new_layout, new, limit, readonly))
        return _view_as(view, new_layout, result, limit)

    return impl


@register_jitable
def _own_layout(view, layout):
    return view.layout


@register_jitable
def _given_layout(view, layout):
    return layout


_raise_view = status_raiser("view")


@register_jitable
def fit_status(layout_itemsize, low, high, itemsize, limit):
    """Whether a layout (itemsize, offset bounds) fits a view's buffer of ``limit`` elements.

    The checks of ``StridedMemoryView.view(layout)``, shared by compiled code and the
    CUDA simulator: the view's itemsize, no offset below 0 or at ``limit`` or above (a
    layout with no elements fits any buffer).
    """
    if layout_itemsize != itemsize:
        return S.ITEMSIZE_DIFFERS
    if low <= high:
        if low < 0:
            return S.REACHES_BEFORE_BUFFER
        if high >= limit:
            return S.REACHES_PAST_BUFFER
    return S.OK


@register_jitable
def writes_status(readonly_or_unique):
    """Whether compiled code may give a view's type to a layout (DECISIONS 19).

    In Python a view of a layout that is not unique (a broadcast) is read-only; compiled
    code cannot change a view's type at run time, so ``with_layout`` of such a layout on
    a writable view is refused, and a read-only view takes it.
    """
    return S.OK if readonly_or_unique else S.NOT_UNIQUE_WRITABLE


@register_jitable
def layout_status(layout, itemsize, limit, readonly):
    """The status of giving ``layout`` to a view of ``itemsize`` over a buffer of ``limit``
    elements, read-only or not: :func:`fit_status`, then :func:`writes_status`.

    Shared by compiled code and the CUDA simulator. The checks branch here rather than
    in the methods, which are inlined at the level of Numba IR: a branch there, inlined
    twice in one function, makes Numba warn that a variable is not in scope
    (NumbaIRAssumptionWarning, Numba issue 9489).
    """
    lo, hi = layout.offset_bounds
    status = fit_status(layout.itemsize, lo, hi, itemsize, limit)
    if status == S.OK:
        status = writes_status(readonly or layout.is_unique)
    return status


_raise_with_layout = status_raiser("with_layout")


@inline_method(StridedViewType, "permuted")
def _ov_permuted(view, axis_order):
    # the layout's permuted() checks the axes as Python does; offsets do not change
    return lambda view, axis_order: _view_with_layout(view, view.layout.permuted(axis_order))


@intrinsic
def _view_as(typingctx, view, layout, result, limit):
    """The view of ``view``'s buffer with ``layout`` and the element type of ``result``
    (a ``StridedViewType`` value standing for the type), ``limit`` elements of the new
    itemsize in the buffer (checked by the caller)."""
    new_type = result.instance_type if isinstance(result, types.TypeRef) else result
    new_type = new_type.copy(ndim=layout.ndim, layout="A")

    def codegen(context, builder, sig, args):
        typ, layout_type = sig.args[0], sig.args[1]
        struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
        new_layout = cgutils.create_struct_proxy(layout_type)(context, builder, value=args[1])
        ndim = layout_type.ndim
        int64 = ir.IntType(64)
        # the buffer's start, in bytes, then the new element (0, ..., 0)
        base = builder.sub(
            builder.ptrtoint(struct.data, int64),
            builder.mul(struct.offset, int64(typ.itemsize)),
        )
        data = builder.add(base, builder.mul(new_layout.slice_offset, int64(new_type.itemsize)))
        pointer_type = context.get_value_type(types.CPointer(new_type.dtype))
        view = _derived_view(
            context, builder, sig.return_type, struct, typ, builder.inttoptr(data, pointer_type),
            cgutils.unpack_tuple(builder, new_layout.shape, ndim),
            cgutils.unpack_tuple(builder, new_layout.strides, ndim),
            new_layout.slice_offset,
        )  # fmt: skip
        out = cgutils.create_struct_proxy(sig.return_type)(context, builder, value=view)
        out.limit = args[3]
        return out._getvalue()

    return new_type(view, layout, result, limit), codegen


@intrinsic
def _view_with_layout(typingctx, view, layout):
    """The view of ``view``'s buffer with ``layout`` (checked by the caller)."""
    result = view.copy(ndim=layout.ndim, layout="A")

    def codegen(context, builder, sig, args):
        typ, layout_type = sig.args
        struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
        new_layout = cgutils.create_struct_proxy(layout_type)(context, builder, value=args[1])
        ndim = layout_type.ndim
        shift = builder.sub(new_layout.slice_offset, struct.offset)
        return _derived_view(
            context, builder, sig.return_type, struct, typ, builder.gep(struct.data, [shift]),
            cgutils.unpack_tuple(builder, new_layout.shape, ndim),
            cgutils.unpack_tuple(builder, new_layout.strides, ndim),
            new_layout.slice_offset,
        )  # fmt: skip

    return result(view, layout), codegen


def register_view_aliases(ir_utils):
    """Tell a Numba ``ir_utils`` (Numba's, or numba-cuda's own copy) that the views
    :func:`_view_as` and :func:`_view_with_layout` return share their first argument's
    memory, so that its dead-code elimination keeps a store through one:
    ``view.with_layout(layout)[i] = x`` in one statement was removed as a store to a
    temporary nothing reads, and the view's memory was never written."""

    def aliases_its_view(lhs, args, alias_map, arg_aliases):
        ir_utils._add_alias(lhs, args[0].name, alias_map, arg_aliases)

    for intrinsic_ in (_view_as, _view_with_layout):
        ir_utils.alias_func_extensions[(intrinsic_._name, __name__)] = aliases_its_view


register_view_aliases(numba_ir_utils)


# ---------------------------------------------------------------------------------------
# the public bounds-checked mode


class BoundsCheckedView(metaclass=SealedClass):
    """A view whose indices are checked against their extents in compiled code.

    Pass it to ``@njit`` functions in place of the view: an index outside its extent
    raises ``AxisError`` (an ``IndexError``, as Python's view raises) instead of reaching
    memory outside the view, without recompiling the function with ``boundscheck=True``.
    (``@njit(boundscheck=True)`` and ``NUMBA_BOUNDSCHECK=1`` check the indices of every
    view; in kernels, ``layoutkit.cuda.jit(boundscheck=True, debug=True)`` does.) A view
    returned from compiled code comes back as a ``BoundsCheckedView`` too, and so does a
    sub-view taken in Python (``checked[1:]``, iteration). Other attributes are the
    wrapped view's.

    Parameters
    ----------
    view : StridedMemoryView
        The view to check.

    Examples
    --------
    >>> import numpy as np
    >>> from numba import njit
    >>> from layoutkit import BoundsCheckedView, StridedMemoryView
    >>> @njit
    ... def third(v):
    ...     return v[2]
    >>> checked = BoundsCheckedView(StridedMemoryView.from_array_interface(np.arange(3.0)))
    >>> third(checked)
    2.0
    >>> third(BoundsCheckedView(StridedMemoryView.from_array_interface(np.arange(2.0))))
    Traceback (most recent call last):
    ...
    layoutkit._errors.AxisError: view index out of bounds on axis 0
    >>> checked[1:][1], len(checked), type(checked[1:]).__name__
    (np.float64(2.0), 3, 'BoundsCheckedView')
    """

    # read-only: the Numba type is made for the view given, so another view put in its
    # place (another dtype, read-only memory) would be read and written as the first
    __slots__ = ("_view", "_type", "__weakref__")

    def __new__(cls, view):
        # the constructor is __new__: BoundsCheckedView.__new__(cls) needs the view too
        from layoutkit.memoryview import StridedMemoryView

        if issubclass(type(view), BoundsCheckedView):  # not isinstance: __class__ may lie
            view = view.view
        if not issubclass(type(view), StridedMemoryView):  # compiled code unboxes only views
            raise TypeError(f"view must be a StridedMemoryView, got {type(view).__name__}")
        self = object.__new__(cls)
        self._view = view
        self._type = view_numba_type(view, boundscheck=True)
        return self

    @property
    def view(self):
        """The wrapped :class:`~layoutkit.StridedMemoryView`."""
        return self._view

    @property
    def _numba_type_(self):
        return self._type

    def __getattr__(self, name):
        try:
            view = object.__getattribute__(self, "_view")
        except AttributeError:  # object.__new__(BoundsCheckedView): no view to defer to
            raise never_initialised(self, "BoundsCheckedView(view)") from None
        return getattr(view, name)

    # Python's view checks every index already; these give the wrapped view's element
    # access, with sub-views wrapped again (as compiled code returns them)
    def __getitem__(self, index):
        return _checked(self.view[index])

    def __setitem__(self, index, value):
        self.view[index] = value.view if issubclass(type(value), BoundsCheckedView) else value

    def __len__(self):
        return len(self.view)

    def __iter__(self):
        return map(_checked, iter(self.view))

    def __repr__(self):
        try:
            view = object.__getattribute__(self, "_view")
        except AttributeError:  # object.__new__(BoundsCheckedView): repr must not raise
            return "BoundsCheckedView(never initialised)"
        return f"BoundsCheckedView({view!r})"


def _checked(value):
    """``value`` as a :class:`BoundsCheckedView` if it is a view (an element stays as is)."""
    from layoutkit.memoryview import StridedMemoryView

    return BoundsCheckedView(value) if issubclass(type(value), StridedMemoryView) else value
