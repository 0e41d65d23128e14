"""Strided views inside compiled code: one Numba type and data model for ``@njit`` and ``@cuda.jit``.

The static structure of a view (dtype, ndim, layout kind, read-only, bounds checking)
lives in :class:`StridedViewType`; the runtime numbers live in a struct model:

======== ======================= ===================================================
member   Numba type              meaning
======== ======================= ===================================================
data     ``CPointer(dtype)``     address of element ``(0, ..., 0)``
shape    ``UniTuple(int64, n)``  extents
strides  ``UniTuple(int64, n)``  strides in elements (may be 0 or negative)
offset   ``int64``               ``slice_offset`` of the layout, in elements
======== ======================= ===================================================

Element ``idx`` lives at ``data + sum(idx[k] * strides[k]) * itemsize``, which is the
issue's ``ptr + (offset + sum(idx[k] * strides[k])) * itemsize`` with the buffer pointer
``ptr`` and the offset folded together once, on the host. Only the argument marshalling
differs between targets: ``@njit`` unboxes the Python object here, CUDA launches pass the
flattened integers (see :func:`view_arguments`).

The layout kind ``"C"`` / ``"F"`` lets the compiler treat the innermost / outermost stride
as the constant 1 (``"A"`` is any layout). Registrations go through ``numba.extending``,
which serves both the CPU target and numba-cuda.

In compiled code a view ``v`` supports:

* ``v[i, j]`` loads and stores (negative indices count from the end, as in NumPy; values
  are cast to the dtype); stores into a read-only view are a ``TypingError`` saying so;
* basic indexing with slices (any step), ``None`` and ``...``, giving a view;
* ``v.shape``, ``v.strides`` (elements), ``v.ndim``, ``v.size``;
* ``v.permuted(axis_order)``, ``v.layout`` (the compiled ``StridedLayout`` of
  ``layoutkit._numba_layout``, with its properties and transforms) and
  ``v.with_layout(layout)``, the view of the same memory with another layout;
* bounds checking, for views typed with ``boundscheck=True`` (:class:`BoundsCheckedView`
  for ``@njit``, ``layoutkit.cuda.jit(boundscheck=True)`` for kernels): an index outside
  its extent raises ``IndexError`` (kernels report it when compiled with ``debug=True``).

Views derived inside compiled code have layout kind ``"A"`` and keep the parent's
read-only and bounds-checking flags. A view derived in compiled code with zero elements
keeps the strides it was computed with (the Python class makes them 0).
"""

import operator
from functools import cache

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.cpython import slicing
from numba.extending import (
    NativeValue,
    intrinsic,
    lower_builtin,
    make_attribute_wrapper,
    models,
    overload_attribute,
    overload_method,
    register_model,
    type_callable,
    typeof_impl,
    unbox,
)
from numba.np import numpy_support

_LAYOUT_KINDS = ("C", "F", "A")


class StridedViewType(types.Type):
    """Numba type of a strided view: dtype, ndim, layout kind, read-only, bounds checking.

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
        Every integer index is checked against its extent (``IndexError``).

    Examples
    --------
    >>> from numba import types
    >>> StridedViewType(types.float32, 2, "C")
    StridedView(float32, 2d, C)
    >>> StridedViewType(types.int8, 1, "A", readonly=True, boundscheck=True)
    StridedView(int8, 1d, A, readonly, boundscheck)
    """

    def __init__(self, dtype, ndim, layout="A", readonly=False, boundscheck=False):
        if layout not in _LAYOUT_KINDS:
            raise ValueError(f"layout must be one of {_LAYOUT_KINDS}, got {layout!r}")
        self.dtype = dtype
        self.ndim = int(ndim)
        self.layout = layout
        self.readonly = bool(readonly)
        self.boundscheck = bool(boundscheck)
        flags = "".join(
            f", {flag}" for flag, on in (("readonly", readonly), ("boundscheck", boundscheck)) if on
        )
        super().__init__(f"StridedView({dtype}, {self.ndim}d, {layout}{flags})")

    def copy(self, **changes):
        """Return this type with some of ``dtype, ndim, layout, readonly, boundscheck`` changed."""
        fields = dict(
            dtype=self.dtype,
            ndim=self.ndim,
            layout=self.layout,
            readonly=self.readonly,
            boundscheck=self.boundscheck,
        )
        fields.update(changes)
        return strided_view_type(**fields)

    @property
    def mangling_args(self):
        return "StridedView", (
            self.dtype,
            self.ndim,
            self.layout,
            int(self.readonly),
            int(self.boundscheck),
        )


@cache
def strided_view_type(dtype, ndim, layout="A", readonly=False, boundscheck=False):
    """Return the (cached) :class:`StridedViewType` for these static properties."""
    return StridedViewType(dtype, ndim, layout, readonly, boundscheck)


@cache
def _numba_dtype(dtype):
    return numpy_support.from_dtype(dtype)


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


def view_numba_type(view, boundscheck=False):
    """Return the :class:`StridedViewType` of a ``StridedMemoryView`` (or look-alike).

    Parameters
    ----------
    view : StridedMemoryView
        Anything with ``dtype``, ``layout`` (a StridedLayout) and ``readonly``.
    boundscheck : bool
        Type for the bounds-checked variant.
    """
    layout = view.layout
    return strided_view_type(
        _numba_dtype(view.dtype),
        layout.ndim,
        layout_kind(layout),
        view.readonly,
        boundscheck,
    )


def view_arguments(view):
    """Return the flattened runtime values of a view: ``(data, *shape, *strides, offset)``.

    This is the order of the struct model's members, so the tuple is both the CUDA kernel
    parameter list of one view argument and what ``@njit`` unboxes.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> layout = NS(shape=(2, 3), strides=(3, 1), slice_offset=4)
    >>> view_arguments(NS(ptr=1000, layout=layout))
    (1000, 2, 3, 3, 1, 4)
    """
    layout = view.layout
    return (view.ptr, *layout.shape, *layout.strides, layout.slice_offset)


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
    from layoutkit.memoryview import check_memory

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
    elif device_accessible and not _is_host_accessible(view):
        raise ValueError(
            f"{name}: a device-only view (device_id={view.device_id}) cannot be passed to "
            "@njit code; copy it to host memory first"
        )


def _is_host_accessible(view):
    buffer = getattr(view, "buffer", None)
    return buffer is not None and bool(buffer.is_host_accessible)


def _host_arguments(view):
    """Validate a view for ``@njit`` and return its flattened values (called by unbox)."""
    check_view_accessible(view, "view argument", on_device=False)
    return view_arguments(view)


# ---------------------------------------------------------------------------------------
# data model and Python -> native conversion


@register_model(StridedViewType)
class _StridedViewModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        extents = types.UniTuple(types.int64, fe_type.ndim)
        members = [
            ("data", types.CPointer(fe_type.dtype)),
            ("shape", extents),
            ("strides", extents),
            ("offset", types.int64),
        ]
        super().__init__(dmm, fe_type, members)


make_attribute_wrapper(StridedViewType, "shape", "shape")
make_attribute_wrapper(StridedViewType, "strides", "strides")
make_attribute_wrapper(StridedViewType, "offset", "_slice_offset")


def _register_strided_memory_view():
    """Let ``@njit`` type ``StridedMemoryView`` arguments (unless the class says itself)."""
    from layoutkit.memoryview import StridedMemoryView

    if not hasattr(StridedMemoryView, "_numba_type_"):
        typeof_impl.register(StridedMemoryView)(lambda view, context: view_numba_type(view))


_register_strided_memory_view()


@unbox(StridedViewType)
def _unbox_view(typ, obj, c):
    builder = c.builder
    n_values = 2 * typ.ndim + 2
    values_type = types.UniTuple(types.int64, n_values)
    struct = cgutils.create_struct_proxy(typ)(c.context, builder)
    struct_ptr = cgutils.alloca_once_value(builder, struct._getvalue())
    failed = cgutils.alloca_once_value(builder, cgutils.true_bit)

    helper = c.pyapi.unserialize(c.pyapi.serialize_object(_host_arguments))
    values_obj = c.pyapi.call_function_objargs(helper, [obj])
    with builder.if_then(cgutils.is_not_null(builder, values_obj)):
        native = c.unbox(values_type, values_obj)
        c.pyapi.decref(values_obj)
        with builder.if_then(builder.not_(native.is_error)):
            values = cgutils.unpack_tuple(builder, native.value, n_values)
            filled = _make_view(
                c.context,
                builder,
                typ,
                builder.inttoptr(values[0], struct.data.type),
                values[1 : 1 + typ.ndim],
                values[1 + typ.ndim : 1 + 2 * typ.ndim],
                values[-1],
            )
            builder.store(filled._getvalue(), struct_ptr)
            builder.store(cgutils.false_bit, failed)
    return NativeValue(builder.load(struct_ptr), is_error=builder.load(failed))


# ---------------------------------------------------------------------------------------
# code generation helpers


def _int64(context, builder, value, ty):
    return context.cast(builder, value, ty, types.int64)


def _make_view(context, builder, typ, data, shape, strides, offset):
    view = cgutils.create_struct_proxy(typ)(context, builder)
    view.data = data
    view.shape = _pack_int64s(context, builder, shape)
    view.strides = _pack_int64s(context, builder, strides)
    view.offset = offset
    return view


def _pack_int64s(context, builder, values):
    tuple_type = context.get_value_type(types.UniTuple(types.int64, len(values)))
    packed = ir.Constant(tuple_type, ir.Undefined)
    for position, value in enumerate(values):
        packed = builder.insert_value(packed, value, position)
    return packed


def _effective_strides(builder, typ, view):
    """Strides with the one the layout kind fixes to 1 replaced by the constant."""
    strides = cgutils.unpack_tuple(builder, view.strides, typ.ndim)
    one = ir.Constant(ir.IntType(64), 1)
    if typ.ndim and typ.layout == "C":
        strides[-1] = one
    elif typ.ndim and typ.layout == "F":
        strides[0] = one
    return strides


def _call_conv(context):
    """The calling convention that raises exceptions (numba-cuda keeps it on ``fndesc``)."""
    call_conv = getattr(getattr(context, "fndesc", None), "call_conv", None)
    return call_conv if call_conv is not None else context.call_conv


def _wrapped_index(context, builder, typ, index, index_type, extent, axis, message=None):
    """Index as int64, negative values counted from the end, checked if the type asks."""
    index = _int64(context, builder, index, index_type)
    if index_type.signed:
        negative = builder.icmp_signed("<", index, ir.Constant(index.type, 0))
        index = builder.select(negative, builder.add(index, extent), index)
    if typ.boundscheck:
        out_of_range = builder.icmp_unsigned(">=", index, extent)
        with cgutils.if_unlikely(builder, out_of_range):
            _call_conv(context).return_user_exc(
                builder, IndexError, (message or f"view index out of bounds on axis {axis}",)
            )
    return index


# ---------------------------------------------------------------------------------------
# indexing


def _index_plan(typ, index_type):
    """Turn an index type into per-entry operations; raise TypingError if unsupported.

    Returns ``(plan, result_ndim, is_element)`` where plan holds tuples
    ``(op, position)`` with op one of ``"int"``, ``"slice"``, ``"new"``, ``"full"``.
    """
    entries = tuple(index_type) if isinstance(index_type, types.BaseTuple) else (index_type,)
    consuming = 0
    ellipses = 0
    for entry in entries:
        if isinstance(entry, (types.Integer, types.SliceType)):
            consuming += 1
        elif isinstance(entry, types.EllipsisType):
            ellipses += 1
        elif not isinstance(entry, types.NoneType):
            raise TypingError(
                f"view index entries must be integers, slices, None or ..., got {entry}"
            )
    if ellipses > 1:
        raise TypingError("a view index can only have a single ellipsis ('...')")
    if consuming > typ.ndim:
        raise TypingError(f"too many indices for a {typ.ndim}-d view: {consuming}")
    plan = []
    for position, entry in enumerate(entries):
        if isinstance(entry, types.Integer):
            plan.append(("int", position))
        elif isinstance(entry, types.SliceType):
            plan.append(("slice", position))
        elif isinstance(entry, types.NoneType):
            plan.append(("new", position))
        else:
            plan.extend([("full", None)] * (typ.ndim - consuming))
    if not ellipses:
        plan.extend([("full", None)] * (typ.ndim - consuming))
    result_ndim = sum(op != "int" for op, _ in plan)
    is_element = result_ndim == 0 and not ellipses
    return plan, result_ndim, is_element


def _apply_index(context, builder, typ, view, index_type, index, plan):
    """Return (element offset, new shape, new strides) of a basic index."""
    if isinstance(index_type, types.BaseTuple):
        entry_types = tuple(index_type)
        entries = cgutils.unpack_tuple(builder, index, len(entry_types))
    else:
        entry_types, entries = (index_type,), [index]
    shape = cgutils.unpack_tuple(builder, view.shape, typ.ndim)
    strides = _effective_strides(builder, typ, view)
    zero = ir.Constant(ir.IntType(64), 0)
    offset = zero
    new_shape, new_strides = [], []
    axis = 0
    for op, position in plan:
        if op == "new":
            new_shape.append(ir.Constant(ir.IntType(64), 1))
            new_strides.append(zero)
            continue
        extent, stride = shape[axis], strides[axis]
        if op == "int":
            value = _wrapped_index(
                context, builder, typ, entries[position], entry_types[position], extent, axis
            )
            offset = builder.add(offset, builder.mul(value, stride))
        elif op == "slice":
            slice_type = entry_types[position]
            sl = context.make_helper(builder, slice_type, entries[position])
            slicing.guard_invalid_slice(context, builder, slice_type, sl)
            slicing.fix_slice(builder, sl, extent)
            new_shape.append(slicing.get_slice_length(builder, sl))
            new_strides.append(builder.mul(stride, sl.step))
            offset = builder.add(offset, builder.mul(sl.start, stride))
        else:
            new_shape.append(extent)
            new_strides.append(stride)
        axis += 1
    return offset, new_shape, new_strides


def _element_pointer(context, builder, typ, view, index_type, index):
    plan, _, _ = _index_plan(typ, index_type)
    offset, _, _ = _apply_index(context, builder, typ, view, index_type, index, plan)
    return builder.gep(view.data, [offset])


# Indexing is typed and lowered directly (not through ``@overload``): numba-cuda compiles
# an overload as a separate device function, and an IndexError raised there cannot be
# reported by the kernel (debug mode shows "unknown error"); lowered in place it can.


@type_callable(operator.getitem)
def _type_getitem(context):
    def typer(view, index):
        if not isinstance(view, StridedViewType):
            return None
        _, result_ndim, is_element = _index_plan(view, index)
        if is_element:
            return view.dtype
        return view.copy(ndim=result_ndim, layout="A")

    return typer


@type_callable(operator.setitem)
def _type_setitem(context):
    def typer(view, index, value):
        if not isinstance(view, StridedViewType):
            return None
        if view.readonly:
            raise TypingError(f"cannot store into {view}: the view is read-only")
        _, _, is_element = _index_plan(view, index)
        if not is_element:
            raise TypingError(
                f"{view}: only single elements can be assigned (index {index} selects a sub-view)"
            )
        if not isinstance(value, (types.Number, types.Boolean)) or not isinstance(
            view.dtype, (types.Number, types.Boolean)
        ):
            raise TypingError(f"cannot store a {value} into {view}")
        return types.none

    return typer


@lower_builtin(operator.getitem, StridedViewType, types.Any)
def _lower_getitem(context, builder, sig, args):
    typ, index_type = sig.args
    plan, _, is_element = _index_plan(typ, index_type)
    struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
    offset, shape, strides = _apply_index(context, builder, typ, struct, index_type, args[1], plan)
    pointer = builder.gep(struct.data, [offset])
    if is_element:
        return context.unpack_value(builder, typ.dtype, pointer)
    new = _make_view(
        context,
        builder,
        sig.return_type,
        pointer,
        shape,
        strides,
        builder.add(struct.offset, offset),
    )
    return new._getvalue()


@lower_builtin(operator.setitem, StridedViewType, types.Any, types.Any)
def _lower_setitem(context, builder, sig, args):
    typ, index_type, value_type = sig.args
    struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
    pointer = _element_pointer(context, builder, typ, struct, index_type, args[1])
    stored = context.cast(builder, args[2], value_type, typ.dtype)
    context.pack_value(builder, typ.dtype, stored, pointer)
    return context.get_dummy_value()


# ---------------------------------------------------------------------------------------
# attributes and derived views


@overload_attribute(StridedViewType, "ndim")
def _ov_ndim(view):
    ndim = view.ndim
    return lambda view: ndim


@overload_attribute(StridedViewType, "size")
def _ov_size(view):
    return lambda view: _view_size(view)


@intrinsic
def _view_size(typingctx, view):
    def codegen(context, builder, sig, args):
        typ = sig.args[0]
        struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
        size = ir.Constant(ir.IntType(64), 1)
        for extent in cgutils.unpack_tuple(builder, struct.shape, typ.ndim):
            size = builder.mul(size, extent)
        return size

    return types.int64(view), codegen


@overload_attribute(StridedViewType, "layout")
def _ov_layout(view):
    from layoutkit._numba_layout import make_layout

    itemsize = numpy_support.as_dtype(view.dtype).itemsize
    return lambda view: make_layout(view.shape, view.strides, itemsize, view._slice_offset)


@overload_method(StridedViewType, "with_layout")
def _ov_view(view, layout):
    from layoutkit._numba_layout import StridedLayoutType

    if not isinstance(layout, StridedLayoutType):
        raise TypingError(f"with_layout() of {view} needs a StridedLayout, got {layout}")
    return lambda view, layout: _view_with_layout(view, layout)


@intrinsic
def _view_with_layout(typingctx, view, layout):
    result = view.copy(ndim=layout.ndim, layout="A")

    def codegen(context, builder, sig, args):
        typ, layout_type = sig.args
        struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
        new_layout = cgutils.create_struct_proxy(layout_type)(context, builder, value=args[1])
        ndim = layout_type.ndim
        shift = builder.sub(new_layout.slice_offset, struct.offset)
        new = _make_view(
            context,
            builder,
            sig.return_type,
            builder.gep(struct.data, [shift]),
            cgutils.unpack_tuple(builder, new_layout.shape, ndim),
            cgutils.unpack_tuple(builder, new_layout.strides, ndim),
            new_layout.slice_offset,
        )
        return new._getvalue()

    return result(view, layout), codegen


@overload_method(StridedViewType, "permuted", inline="always")
def _ov_permuted(view, axis_order):
    if not (
        isinstance(axis_order, types.BaseTuple)
        and len(axis_order) == view.ndim
        and all(isinstance(t, types.Integer) for t in axis_order)
    ):
        raise TypingError(
            f"permuted() of a {view.ndim}-d view needs a tuple of {view.ndim} integers, "
            f"got {axis_order}"
        )
    return lambda view, axis_order: _view_permuted(view, axis_order)


@intrinsic
def _view_permuted(typingctx, view, axis_order):
    result = view.copy(layout="A")

    def codegen(context, builder, sig, args):
        typ, order_type = sig.args
        struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
        shape_array = _stack_array(builder, cgutils.unpack_tuple(builder, struct.shape, typ.ndim))
        stride_array = _stack_array(builder, _effective_strides(builder, typ, struct))
        order = cgutils.unpack_tuple(builder, args[1], typ.ndim)
        new_shape, new_strides = [], []
        for axis, (position, position_type) in enumerate(zip(order, order_type, strict=True)):
            source = _wrapped_index(
                context,
                builder,
                typ,
                position,
                position_type,
                ir.Constant(ir.IntType(64), typ.ndim),
                axis,
                f"permuted: axis_order[{axis}] is out of range for a {typ.ndim}-d view",
            )
            new_shape.append(builder.load(builder.gep(shape_array, [source])))
            new_strides.append(builder.load(builder.gep(stride_array, [source])))
        new = _make_view(
            context, builder, sig.return_type, struct.data, new_shape, new_strides, struct.offset
        )
        return new._getvalue()

    return result(view, axis_order), codegen


def _stack_array(builder, values):
    """Store int64 values in a stack array and return a pointer to its first element."""
    array = cgutils.alloca_once(builder, ir.IntType(64), size=max(len(values), 1))
    for position, value in enumerate(values):
        builder.store(value, builder.gep(array, [ir.Constant(ir.IntType(64), position)]))
    return array


class BoundsCheckedView:
    """A view whose indexing in compiled code checks every index against its extent.

    Pass it to ``@njit`` functions (or ``@cuda.jit(debug=True)`` kernels) in place of the
    view: an out-of-range index raises ``IndexError`` instead of touching memory outside
    the view. Attributes are those of the wrapped view.

    Parameters
    ----------
    view : StridedMemoryView
        The view to check.
    """

    __slots__ = ("view", "__weakref__")

    def __init__(self, view):
        self.view = view

    @property
    def _numba_type_(self):
        return view_numba_type(self.view, boundscheck=True)

    def __getattr__(self, name):
        return getattr(self.view, name)
