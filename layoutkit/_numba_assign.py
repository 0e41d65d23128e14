"""Sub-view assignment in compiled code: ``view[index] = value`` for an index that selects
a sub-view, with NumPy's meaning.

``_numba_view``'s ``setitem`` types and lowers the index (the planner and lowering of
:mod:`layoutkit._numba_index`) and hands the selected sub-view here. ``value`` may be:

* a number or bool: every element of the sub-view is set to it, cast to the dtype as
  one element store casts (``@njit`` and CUDA kernels);
* a view or a NumPy array (``@njit`` only): broadcast to the sub-view's shape as NumPy
  broadcasts an assigned array (aligned from the right, an extent 1 stretches, extra
  leading axes must have extent 1), else ``ValueError`` with NumPy's message ("could
  not broadcast input array from shape (3,) into shape (2,)"); elements are cast as
  Numba's ``ndarray.__setitem__`` casts them (to a number type the value's converts to);
  when the memory of the value and of the sub-view may overlap, the value is copied to a
  temporary first, so ``v[1:] = v[:-1]`` shifts as in NumPy. Elements that are not
  numbers (structured, datetime) are copied as bytes, only between the same dtype.

What is refused is a one-line ``TypingError``: stores into a read-only view (in
``_numba_view``), lists and tuples (pass ``numpy.array(...)``), views or arrays in CUDA
kernels (an overlapping value needs a temporary, which kernels cannot allocate: assign
element by element there), element types compiled code cannot read (float16 in ``@njit``,
ml_dtypes types, as for one element) and non-number dtypes that differ.
"""

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.extending import intrinsic, overload, register_jitable

__all__ = ["check_assignment", "lower_assignment"]


def _is_cuda(context):
    """Whether a typing or target context is numba-cuda's."""
    return type(context).__module__.startswith("numba.cuda")


def _is_operand(value):
    from ._numba_view import StridedViewType

    return isinstance(value, (StridedViewType, types.Array))


def _is_number(dtype):
    return isinstance(dtype, (types.Number, types.Boolean))


def check_assignment(context, target, value):
    """Raise a one-line ``TypingError`` unless ``target[...] = value`` can be compiled.

    Parameters
    ----------
    context : numba typing context
    target : StridedViewType
        The (writable) sub-view the index selects.
    value : numba type
        The assigned value's type.
    """
    from ._numba_view import _check_element_type, _unaligned_record

    if isinstance(value, (types.BaseTuple, types.Sequence, types.ListType)):
        raise TypingError(
            f"cannot assign a {value} to a sub-view of {target}: lists and tuples are not "
            "assigned in compiled code; pass a NumPy array (numpy.array(...)) or a view"
        )
    if _is_number(value):
        _check_element_type(target)
        if context.can_convert(value, target.dtype) is None:
            raise TypingError(f"cannot assign a {value} to a sub-view of {target}")
        return
    if not _is_operand(value):
        raise TypingError(
            f"cannot assign a {value} to a sub-view of {target}: the value must be a number, "
            "a view or a NumPy array"
        )
    if _is_cuda(context):
        raise TypingError(
            "assigning a view or array to a sub-view is not available in CUDA kernels: the "
            "value's memory may overlap the sub-view's, which needs a temporary that a "
            "kernel cannot allocate; assign element by element (dst[i, j] = src[i, j])"
        )
    for operand in (target, value):
        if not isinstance(operand.dtype, types.Record) and not isinstance(operand, types.Array):
            _check_element_type(operand)  # elements compiled code has no type for
    if _is_number(target.dtype) and _is_number(value.dtype):
        if context.can_convert(value.dtype, target.dtype) is None:
            raise TypingError(f"cannot assign a {value} to a sub-view of {target}")
    elif _unaligned_record(target.dtype) != _unaligned_record(value.dtype):
        # a record's alignment is its view's, not its dtype's: the bytes are copied unaligned
        raise TypingError(
            f"cannot assign a {value} to a sub-view of {target}: elements that are not "
            "numbers (structured, datetime) are copied only between the same dtype"
        )


def lower_assignment(context, builder, target_type, target, value_type, value):
    """Emit ``target[...] = value`` (types checked by :func:`check_assignment`)."""
    if _is_number(value_type):
        _copy_elements(context, builder, target_type, target, value_type, value)
        return
    # called as a jitted function (compile_internal would lose the message's arguments)
    typing = context.typing_context
    function_type = typing.resolve_value_type(_assign_operand)
    sig = function_type.get_call_type(typing, (target_type, value_type), {})
    context.get_function(function_type, sig)(builder, (target, value))


@register_jitable
def _assign_operand(target, source):
    """``target[...] = source`` for a view or array ``source`` (compiled per type pair)."""
    if not _broadcasts(target, source):
        raise ValueError(
            "could not broadcast input array from shape " + _shape_text(source.shape, target.ndim)
            + " into shape " + _shape_text(target.shape, target.ndim)
        )  # fmt: skip
    if _may_overlap(target, source):
        temporary = np.empty(source.shape, source.dtype)
        _copy(temporary, source)
        _copy(target, temporary)
    else:
        _copy(target, source)


def _shape_text(shape, ndim):
    """A shape as NumPy's messages write it (``()``, ``(3,)``, ``(2,3)``), less the leading
    extents 1 that NumPy drops while the shape has more than ``ndim`` dimensions."""
    raise NotImplementedError("compiled code only")


@overload(_shape_text)
def _ov_shape_text(shape, ndim):
    n = len(shape)
    if n == 0:
        return lambda shape, ndim: "()"

    def impl(shape, ndim):
        first = 0
        while first < n - ndim and shape[first] == 1:
            first += 1
        if first == n:
            return "()"
        text = "(" + str(shape[first])
        for i in range(first + 1, n):
            text += "," + str(shape[i])
        return text + ("," if n - first == 1 else "") + ")"

    return impl


# ---------------------------------------------------------------------------------------
# code generation


def _operand(context, builder, typ, value):
    """``(data pointer, shape, strides in bytes)`` of a view or array as LLVM values."""
    from ._numba_view import StridedViewType

    if isinstance(typ, StridedViewType):
        struct = cgutils.create_struct_proxy(typ)(context, builder, value=value)
        itemsize = ir.Constant(ir.IntType(64), typ.itemsize)
        strides = cgutils.unpack_tuple(builder, struct.strides, typ.ndim)
        strides = [builder.mul(stride, itemsize) for stride in strides]
        return struct.data, cgutils.unpack_tuple(builder, struct.shape, typ.ndim), strides
    array = context.make_array(typ)(context, builder, value=value)
    shape = cgutils.unpack_tuple(builder, array.shape, typ.ndim)
    return array.data, shape, cgutils.unpack_tuple(builder, array.strides, typ.ndim)


def _itemsize(context, typ):
    return context.get_abi_sizeof(context.get_data_type(typ.dtype))


@intrinsic
def _broadcasts(typingctx, target, source):
    """Whether ``source``'s shape broadcasts to ``target``'s as NumPy assigns: aligned
    from the right, each extent equal or 1, extra leading extents 1."""

    def codegen(context, builder, sig, args):
        target_type, source_type = sig.args
        _, target_shape, _ = _operand(context, builder, target_type, args[0])
        _, source_shape, _ = _operand(context, builder, source_type, args[1])
        one = ir.Constant(ir.IntType(64), 1)
        lead = source_type.ndim - target_type.ndim
        fits = cgutils.true_bit
        for axis, extent in enumerate(source_shape):
            fit = builder.icmp_signed("==", extent, one)
            if axis >= lead:
                same = builder.icmp_signed("==", extent, target_shape[axis - lead])
                fit = builder.or_(fit, same)
            fits = builder.and_(fits, fit)
        return fits

    return types.boolean(target, source), codegen


def _byte_range(context, builder, typ, value):
    """``(empty, first byte, byte after the last)`` of the memory an operand spans."""
    int64 = ir.IntType(64)
    data, shape, strides = _operand(context, builder, typ, value)
    low = high = builder.ptrtoint(data, int64)
    empty = cgutils.false_bit
    zero = ir.Constant(int64, 0)
    for extent, stride in zip(shape, strides, strict=True):
        empty = builder.or_(empty, builder.icmp_signed("==", extent, zero))
        span = builder.mul(builder.sub(extent, ir.Constant(int64, 1)), stride)
        negative = builder.icmp_signed("<", span, zero)
        low = builder.add(low, builder.select(negative, span, zero))
        high = builder.add(high, builder.select(negative, zero, span))
    return empty, low, builder.add(high, ir.Constant(int64, _itemsize(context, typ)))


@intrinsic
def _may_overlap(typingctx, target, source):
    """Whether the byte ranges of two operands (neither empty) intersect."""

    def codegen(context, builder, sig, args):
        ranges = [
            _byte_range(context, builder, typ, value)
            for typ, value in zip(sig.args, args, strict=True)
        ]
        (empty_a, low_a, high_a), (empty_b, low_b, high_b) = ranges
        meet = builder.and_(
            builder.icmp_unsigned("<", low_a, high_b), builder.icmp_unsigned("<", low_b, high_a)
        )
        return builder.and_(meet, builder.not_(builder.or_(empty_a, empty_b)))

    return types.boolean(target, source), codegen


@intrinsic
def _copy(typingctx, target, source):
    """``target[...] = source`` element by element, ``source`` broadcast (checked first)."""

    def codegen(context, builder, sig, args):
        _copy_elements(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        return context.get_dummy_value()

    return types.none(target, source), codegen


def _copy_elements(context, builder, target_type, target, source_type, source):
    """The loop over ``target``'s elements, in C order, storing ``source``'s: a number
    (cast once), or a view or array read with broadcast strides (0 where an extent is 1,
    extra leading axes dropped), each element cast, or copied as bytes if not a number."""
    int64 = ir.IntType(64)
    data, shape, strides = _operand(context, builder, target_type, target)
    dtype = target_type.dtype
    if _is_number(source_type):
        stored = context.cast(builder, source, source_type, dtype)
    else:
        source_data, source_shape, source_strides = _operand(context, builder, source_type, source)
        lead = source_type.ndim - target_type.ndim
        one, zero = ir.Constant(int64, 1), ir.Constant(int64, 0)
        steps = [zero] * max(0, -lead)  # target axes the source does not have
        for axis in range(max(0, lead), source_type.ndim):
            stretched = builder.icmp_signed("==", source_shape[axis], one)
            steps.append(builder.select(stretched, zero, source_strides[axis]))
    with cgutils.loop_nest(builder, shape, int64) as indices:
        pointer = cgutils.pointer_add(builder, data, _dot(builder, indices, strides))
        if _is_number(source_type):
            context.pack_value(builder, dtype, stored, pointer, _alignment(target_type))
        else:
            offset = _dot(builder, indices, steps)
            source_pointer = cgutils.pointer_add(builder, source_data, offset)
            if _is_number(dtype):
                loaded = context.unpack_value(builder, source_type.dtype, source_pointer,
                                              _alignment(source_type))  # fmt: skip
                value = context.cast(builder, loaded, source_type.dtype, dtype)
                context.pack_value(builder, dtype, value, pointer, _alignment(target_type))
            else:  # the same dtype, not a number (check_assignment): its bytes
                size = _itemsize(context, target_type)
                cgutils.raw_memcpy(builder, pointer, source_pointer, ir.Constant(int64, 1), size)


def _alignment(typ):
    """The alignment of element accesses through a view or array type: None (natural) or
    1 for unaligned memory (see ``StridedViewType.aligned``; ``types.Array.aligned``)."""
    if isinstance(typ, types.Array):
        return None if typ.aligned else 1
    return typ.element_alignment


def _dot(builder, indices, strides):
    """``sum(i * s)``: the byte offset of an index."""
    offset = ir.Constant(ir.IntType(64), 0)
    for index, stride in zip(indices, strides, strict=True):
        offset = builder.add(offset, builder.mul(index, stride))
    return offset
