"""``StridedLayout`` inside compiled code: a Numba type, its data model and its methods.

Importing this module registers, for both ``@njit`` and ``@cuda.jit`` code (generic
``numba.extending`` registrations serve both targets):

* ``StridedLayoutType(ndim)``: the type of a layout with ``ndim`` dimensions, a struct of
  ``shape`` and ``strides`` (int64 tuples), ``itemsize`` and ``slice_offset``;
* unboxing of Python ``StridedLayout`` arguments and boxing of returned layouts;
* the properties, and every transform whose number of dimensions is known when the
  code is compiled: ``permuted``, ``reshaped``, ``broadcast_to``, ``unsqueezed``,
  ``repacked`` (``keep_dim=True``), ``to_dense``, ``sliced`` and ``layout[...]``
  (ints, slices, ``None``, ``...``), plus ``max_compatible_itemsize``,
  ``required_size_in_bytes``, ``flattened_axis_mask`` and ``offset_of(index)``.
  ``squeezed`` and ``flattened`` give a number of dimensions that depends on run-time
  values, so compiled code cannot type their result; calling them is a typing error that
  says so.

Differences from the Python class, all on the compiled side: transforms and properties
work on values (a layout is a small struct, copied, no Python objects) and raise
``ValueError`` with fixed messages (inside ``@cuda.jit`` kernels exceptions are only
reported with ``debug=True``); ``is_unique`` is the conservative test (it never says
True for a layout with repeated offsets, but may say False for some interleaved unique
layouts that the Python class settles exactly by enumeration).

Scratch space lives on the stack (an intrinsic that ``alloca``s a fixed number of int64
slots), so nothing allocates and the same code compiles for CUDA.
"""

import operator

from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import (
    NativeValue,
    box,
    intrinsic,
    make_attribute_wrapper,
    models,
    overload,
    overload_attribute,
    overload_method,
    register_jitable,
    register_model,
    unbox,
)

from . import _kernels as K
from .layout import StridedLayout

__all__ = ["StridedLayoutType", "layout_type", "make_layout"]


class StridedLayoutType(types.Type):
    """Numba type of a ``StridedLayout`` with ``ndim`` dimensions."""

    def __init__(self, ndim):
        self.ndim = ndim
        super().__init__(name=f"StridedLayout(ndim={ndim})")

    @property
    def key(self):
        return self.ndim


_TYPES = {}


def layout_type(ndim):
    """The (cached) ``StridedLayoutType`` for ``ndim`` dimensions."""
    t = _TYPES.get(ndim)
    if t is None:
        t = _TYPES[ndim] = StridedLayoutType(ndim)
    return t


def _int_tuple(n):
    return types.UniTuple(types.int64, n)


@register_model(StridedLayoutType)
class _StridedLayoutModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [
            ("shape", _int_tuple(fe_type.ndim)),
            ("strides", _int_tuple(fe_type.ndim)),
            ("itemsize", types.int64),
            ("slice_offset", types.int64),
        ]
        super().__init__(dmm, fe_type, members)


for _field in ("shape", "strides", "itemsize", "slice_offset"):
    make_attribute_wrapper(StridedLayoutType, _field, _field)


# ------------------------------------------------------------------ boxing
@unbox(StridedLayoutType)
def _unbox_layout(typ, obj, c):
    layout = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    failed = cgutils.alloca_once_value(c.builder, cgutils.false_bit)
    for attr, field, fetype in (
        ("_shape", "shape", _int_tuple(typ.ndim)),
        ("_strides", "strides", _int_tuple(typ.ndim)),
        ("_itemsize", "itemsize", types.int64),
        ("_offset", "slice_offset", types.int64),
    ):
        value_obj = c.pyapi.object_getattr_string(obj, attr)
        native = c.unbox(fetype, value_obj)
        c.pyapi.decref(value_obj)
        setattr(layout, field, native.value)
        with c.builder.if_then(native.is_error, likely=False):
            c.builder.store(cgutils.true_bit, failed)
    return NativeValue(layout._getvalue(), is_error=c.builder.load(failed))


@box(StridedLayoutType)
def _box_layout(typ, val, c):
    layout = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val)
    shape = c.box(_int_tuple(typ.ndim), layout.shape)
    strides = c.box(_int_tuple(typ.ndim), layout.strides)
    itemsize = c.box(types.int64, layout.itemsize)
    offset = c.box(types.int64, layout.slice_offset)
    rebuild = c.pyapi.unserialize(c.pyapi.serialize_object(_from_compiled))
    result = c.pyapi.call_function_objargs(rebuild, (shape, strides, itemsize, offset))
    for obj in (shape, strides, itemsize, offset, rebuild):
        c.pyapi.decref(obj)
    return result


def _from_compiled(shape, strides, itemsize, slice_offset):
    """A Python layout from values returned by compiled code (checked for overflow)."""
    return StridedLayout._checked(
        shape, strides, itemsize, slice_offset, "layout returned from compiled code"
    )


# ------------------------------------------------------------------ intrinsics
@intrinsic
def make_layout(typingctx, shape, strides, itemsize, slice_offset):
    """Build a layout value from int64 tuples ``shape``, ``strides`` and two ints."""
    if not all(
        isinstance(t, types.UniTuple) or (isinstance(t, types.Tuple) and len(t) == 0)
        for t in (shape, strides)
    ):
        return None
    n = len(shape)
    if len(strides) != n:
        return None
    sig = layout_type(n)(shape, strides, itemsize, slice_offset)

    def codegen(context, builder, sig, args):
        layout = cgutils.create_struct_proxy(sig.return_type)(context, builder)
        target = _int_tuple(n)
        layout.shape = context.cast(builder, args[0], sig.args[0], target)
        layout.strides = context.cast(builder, args[1], sig.args[1], target)
        layout.itemsize = context.cast(builder, args[2], sig.args[2], types.int64)
        layout.slice_offset = context.cast(builder, args[3], sig.args[3], types.int64)
        return layout._getvalue()

    return sig, codegen


@intrinsic
def _stack_int64(typingctx, size):
    """An int64 array of ``size`` (a compile-time constant) slots on the stack."""
    if not isinstance(size, types.IntegerLiteral):
        return None
    n = max(size.literal_value, 1)
    arrty = types.Array(types.int64, 1, "C")

    def codegen(context, builder, sig, args):
        data = cgutils.alloca_once(builder, context.get_value_type(types.int64), size=n)
        array = context.make_array(arrty)(context, builder)
        itemsize = context.get_constant(types.intp, 8)
        context.populate_array(
            array,
            data=data,
            shape=[context.get_constant(types.intp, n)],
            strides=[itemsize],
            itemsize=itemsize,
            meminfo=None,
        )
        return array._getvalue()

    return arrty(size), codegen


@intrinsic
def _tuple_from(typingctx, array, start, count):
    """The tuple ``(array[start], ..., array[start + count - 1])``; count is a constant."""
    if not isinstance(count, types.IntegerLiteral):
        return None
    n = count.literal_value
    tupty = _int_tuple(n)

    def codegen(context, builder, sig, args):
        arr = context.make_array(sig.args[0])(context, builder, args[0])
        base = context.cast(builder, args[1], sig.args[1], types.intp)
        values = []
        for i in range(n):
            index = builder.add(base, context.get_constant(types.intp, i))
            values.append(builder.load(builder.gep(arr.data, [index])))
        return context.make_tuple(builder, tupty, values)

    return tupty(array, start, count), codegen


@register_jitable
def _pack(layout, lay):
    """Copy a layout's shape and strides into ``lay`` (the kernels' shape | strides form)."""
    n = len(layout.shape)
    for i in range(n):
        lay[i] = layout.shape[i]
        lay[n + i] = layout.strides[i]


# ------------------------------------------------------------------ properties
@overload_attribute(StridedLayoutType, "ndim")
def _ndim(layout):
    n = layout.ndim
    return lambda layout: n


@overload_attribute(StridedLayoutType, "volume")
def _volume(layout):
    n = layout.ndim

    def impl(layout):
        v = 1
        for i in range(n):
            v *= layout.shape[i]
        return v

    return impl


@overload_attribute(StridedLayoutType, "strides_in_bytes")
def _strides_in_bytes(layout):
    n = layout.ndim

    def impl(layout):
        out = _stack_int64(n)
        for i in range(n):
            out[i] = layout.strides[i] * layout.itemsize
        return _tuple_from(out, 0, n)

    return impl


@overload_attribute(StridedLayoutType, "slice_offset_in_bytes")
def _slice_offset_in_bytes(layout):
    return lambda layout: layout.slice_offset * layout.itemsize


@overload_attribute(StridedLayoutType, "offset_bounds")
def _offset_bounds(layout):
    n = layout.ndim

    def impl(layout):
        lo = layout.slice_offset
        hi = layout.slice_offset
        for i in range(n):
            e = layout.shape[i]
            if e == 0:
                return 0, -1
            span = layout.strides[i] * (e - 1)
            if span < 0:
                lo += span
            else:
                hi += span
        return lo, hi

    return impl


@overload_attribute(StridedLayoutType, "min_offset")
def _min_offset(layout):
    return lambda layout: layout.offset_bounds[0]


@overload_attribute(StridedLayoutType, "max_offset")
def _max_offset(layout):
    return lambda layout: layout.offset_bounds[1]


def _flag_property(kernel_name):
    def typer(layout):
        n = layout.ndim
        n2 = 2 * n
        kernel = getattr(K, kernel_name)

        def impl(layout):
            lay = _stack_int64(n2)
            _pack(layout, lay)
            for i in range(n):
                if layout.shape[i] == 0:
                    return True
            return kernel(lay, n)

        return impl

    return typer


overload_attribute(StridedLayoutType, "is_contiguous_c")(_flag_property("is_contiguous_c"))
overload_attribute(StridedLayoutType, "is_contiguous_f")(_flag_property("is_contiguous_f"))


def _ordered_flag_property(kernel_name):
    def typer(layout):
        n = layout.ndim
        n2 = 2 * n
        kernel = getattr(K, kernel_name)

        def impl(layout):
            lay = _stack_int64(n2)
            order = _stack_int64(n)
            _pack(layout, lay)
            for i in range(n):
                if layout.shape[i] == 0:
                    return True
            K.stride_order(lay, n, order, 0)
            return kernel(lay, n, order, 0)

        return impl

    return typer


overload_attribute(StridedLayoutType, "is_contiguous_any")(
    _ordered_flag_property("is_contiguous_along")
)
overload_attribute(StridedLayoutType, "is_unique")(_ordered_flag_property("is_unique_nested"))


@overload_attribute(StridedLayoutType, "is_dense")
def _is_dense(layout):
    return lambda layout: layout.slice_offset == 0 and layout.is_contiguous_any


@overload_attribute(StridedLayoutType, "stride_order")
def _stride_order(layout):
    n = layout.ndim
    n2 = 2 * n

    def impl(layout):
        lay = _stack_int64(n2)
        order = _stack_int64(n)
        _pack(layout, lay)
        K.stride_order(lay, n, order, 0)
        return _tuple_from(order, 0, n)

    return impl


@overload_method(StridedLayoutType, "flattened_axis_mask")
def _flattened_axis_mask(layout):
    n = layout.ndim
    n2 = 2 * n

    def impl(layout):
        lay = _stack_int64(n2)
        _pack(layout, lay)
        return _as_uint64(K.merge_mask(lay, n))

    return impl


@intrinsic
def _as_uint64(typingctx, value):
    """Reinterpret an int64 bit mask as uint64 (the Python class returns it unsigned)."""
    def codegen(context, builder, sig, args):
        return args[0]

    return types.uint64(types.int64), codegen


@overload_method(StridedLayoutType, "required_size_in_bytes")
def _required_size_in_bytes(layout):
    def impl(layout):
        lo, hi = layout.offset_bounds
        if lo < 0:
            raise ValueError("layout reaches before its start: required size is ambiguous")
        return (hi + 1) * layout.itemsize

    return impl


@overload_method(StridedLayoutType, "offset_of")
def _offset_of(layout, index):
    n = layout.ndim
    if not isinstance(index, (types.UniTuple, types.Tuple)) or len(index) != n:
        raise TypingError(f"offset_of needs a tuple of {n} integers, got {index}")

    def impl(layout, index):
        off = layout.slice_offset
        for i in range(n):
            off += index[i] * layout.strides[i]
        return off

    return impl


# ------------------------------------------------------------------ transforms
@overload_method(StridedLayoutType, "permuted")
def _permuted(layout, axis_order):
    n = layout.ndim
    n2 = 2 * n
    if not isinstance(axis_order, (types.UniTuple, types.Tuple)) or len(axis_order) != n:
        raise TypingError(f"permuted needs a tuple of {n} axes, got {axis_order}")

    def impl(layout, axis_order):
        out = _stack_int64(n2)
        seen = 0
        for i in range(n):
            a = axis_order[i]
            if a < -n or a >= n:
                raise ValueError("permuted: axis out of range")
            if a < 0:
                a += n
            if (seen >> a) & 1:
                raise ValueError("permuted: repeated axis")
            seen |= 1 << a
            out[i] = layout.shape[a]
            out[n + i] = layout.strides[a]
        return make_layout(
            _tuple_from(out, 0, n), _tuple_from(out, n, n), layout.itemsize, layout.slice_offset
        )

    return impl


@overload_method(StridedLayoutType, "reshaped")
def _reshaped(layout, shape):
    n = layout.ndim
    n2 = 2 * n
    if not isinstance(shape, (types.UniTuple, types.Tuple)):
        raise TypingError(f"reshaped needs a tuple of extents, got {shape}")
    m = len(shape)
    mn2 = 2 * m + 2 * n

    def impl(layout, shape):
        lay = _stack_int64(n2)
        new_shape = _stack_int64(m)
        out = _stack_int64(mn2)
        _pack(layout, lay)
        volume = K.volume_of(lay, n)
        unknown = -1
        known = 1
        for i in range(m):
            e = shape[i]
            new_shape[i] = e
            if e == -1:
                if unknown >= 0:
                    raise ValueError("reshaped: more than one -1 extent")
                unknown = i
            elif e < 0:
                raise ValueError("reshaped: negative extent")
            else:
                known *= e
        if unknown >= 0:
            if known == 0 or volume % known != 0:
                raise ValueError("reshaped: cannot infer the -1 extent")
            new_shape[unknown] = volume // known
        elif known != volume:
            raise ValueError("reshaped: the volumes differ")
        if volume == 0:
            for i in range(m):
                out[m + i] = 0
            return make_layout(_tuple_from(new_shape, 0, m), _tuple_from(out, m, m),
                               layout.itemsize, 0)
        if K.reshape(lay, n, new_shape, m, out, m) != 0:
            raise ValueError("reshaped: the strides are incompatible (a copy would be needed)")
        return make_layout(
            _tuple_from(new_shape, 0, m), _tuple_from(out, m, m), layout.itemsize,
            layout.slice_offset,
        )

    return impl


@overload_method(StridedLayoutType, "broadcast_to")
def _broadcast_to(layout, shape):
    n = layout.ndim
    n2 = 2 * n
    if not isinstance(shape, (types.UniTuple, types.Tuple)) or len(shape) < n:
        raise TypingError(f"broadcast_to needs a tuple of at least {n} extents, got {shape}")
    m = len(shape)
    m2 = 2 * m

    def impl(layout, shape):
        lay = _stack_int64(n2)
        new_shape = _stack_int64(m)
        out = _stack_int64(m2)
        _pack(layout, lay)
        for i in range(m):
            if shape[i] < 0:
                raise ValueError("broadcast_to: negative extent")
            new_shape[i] = shape[i]
        if K.broadcast(lay, n, new_shape, m, out, m) != 0:
            raise ValueError("broadcast_to: extents do not match")
        offset = layout.slice_offset
        if K.volume_of(new_shape, m) == 0:
            for i in range(m):
                out[m + i] = 0
            offset = 0
        return make_layout(
            _tuple_from(out, 0, m), _tuple_from(out, m, m), layout.itemsize, offset
        )

    return impl


@overload_method(StridedLayoutType, "unsqueezed")
def _unsqueezed(layout, axis):
    n = layout.ndim
    if isinstance(axis, types.Integer):
        return _unsqueezed_impl(n, 1, lambda axis, j: axis)
    if isinstance(axis, (types.UniTuple, types.Tuple)) and all(
        isinstance(t, types.Integer) for t in axis.types
    ):
        return _unsqueezed_impl(n, len(axis), lambda axis, j: axis[j])
    raise TypingError(f"unsqueezed needs an integer or a tuple of integers, got {axis}")


def _unsqueezed_impl(n, k, pick):
    m = n + k
    m2 = 2 * m
    pick = register_jitable(pick)

    def impl(layout, axis):
        new = _stack_int64(m)
        for i in range(m):
            new[i] = 0
        for j in range(k):
            a = pick(axis, j)
            if a < -m or a >= m:
                raise ValueError("unsqueezed: axis out of range")
            if a < 0:
                a += m
            if new[a] != 0:
                raise ValueError("unsqueezed: repeated axis")
            new[a] = 1
        out = _stack_int64(m2)
        old = 0
        for i in range(m):
            if new[i] == 0:
                out[i] = layout.shape[old]
                out[m + i] = layout.strides[old]
                old += 1
            else:
                out[i] = 1
        following = layout.strides[n - 1] if n > 0 else 1
        for i in range(m - 1, -1, -1):
            if new[i] == 1:
                out[m + i] = following
            else:
                following = out[m + i] * out[i]
        return make_layout(
            _tuple_from(out, 0, m), _tuple_from(out, m, m), layout.itemsize, layout.slice_offset
        )

    return impl


@overload_method(StridedLayoutType, "repacked")
def _repacked(layout, itemsize, data_ptr=0, axis=-1, keep_dim=True):
    n = layout.ndim
    n2 = 2 * n
    keep = keep_dim
    if isinstance(keep_dim, types.Type):
        keep = getattr(keep_dim, "literal_value", getattr(keep_dim, "value", None))
    if keep is not True:
        raise TypingError(
            "repacked in compiled code keeps the packed axis: keep_dim must be the literal True"
        )

    def impl(layout, itemsize, data_ptr=0, axis=-1, keep_dim=True):
        old = layout.itemsize
        if itemsize <= 0:
            raise ValueError("repacked: itemsize must be positive")
        if itemsize == old:
            return layout
        if axis < -n or axis >= n:
            raise ValueError("repacked: axis out of range")
        ax = axis + n if axis < 0 else axis
        if itemsize > old:
            if itemsize % old != 0:
                raise ValueError("repacked: new itemsize is not a multiple of the old one")
            if data_ptr % itemsize != 0:
                raise ValueError("repacked: data_ptr is not aligned to the new itemsize")
        elif old % itemsize != 0:
            raise ValueError("repacked: new itemsize does not divide the old one")
        lay = _stack_int64(n2)
        out = _stack_int64(n2)
        _pack(layout, lay)
        status, offset = K.repack(lay, n, layout.slice_offset, old, itemsize, ax, out, n)
        if status != 0:
            raise ValueError("repacked: the layout is not compatible with the new itemsize")
        return make_layout(_tuple_from(out, 0, n), _tuple_from(out, n, n), itemsize, offset)

    return impl


@overload_method(StridedLayoutType, "max_compatible_itemsize")
def _max_compatible_itemsize(layout, max_itemsize=16, data_ptr=0, axis=-1):
    n = layout.ndim
    n2 = 2 * n

    def impl(layout, max_itemsize=16, data_ptr=0, axis=-1):
        if max_itemsize <= 0 or max_itemsize < layout.itemsize:
            raise ValueError("max_compatible_itemsize: max_itemsize is below the itemsize")
        if axis < -n or axis >= n:
            raise ValueError("max_compatible_itemsize: axis out of range")
        ax = axis + n if axis < 0 else axis
        lay = _stack_int64(n2)
        _pack(layout, lay)
        return K.max_compatible_itemsize(
            lay, n, layout.slice_offset, layout.itemsize, max_itemsize,
            data_ptr % max_itemsize, ax,
        )

    return impl


@register_jitable
def _order_k(lay, n, order):
    K.stride_order(lay, n, order, 0)


@register_jitable
def _order_c(lay, n, order):
    for i in range(n):
        order[i] = i


@register_jitable
def _order_f(lay, n, order):
    for i in range(n):
        order[i] = n - 1 - i


@register_jitable
def _keep_k(layout):
    return layout.is_dense


@register_jitable
def _keep_c(layout):
    return layout.is_dense and layout.is_contiguous_c


@register_jitable
def _keep_f(layout):
    return layout.is_dense and layout.is_contiguous_f


# per stride order: (fill the axis order, whether the layout already is that dense layout)
_ORDER_FILLERS = {"K": (_order_k, _keep_k), "C": (_order_c, _keep_c), "F": (_order_f, _keep_f)}


@overload_method(StridedLayoutType, "to_dense")
def _to_dense(layout, stride_order="K"):
    n = layout.ndim
    n2 = 2 * n
    if isinstance(stride_order, types.Omitted):
        value = stride_order.value
    else:
        value = getattr(stride_order, "literal_value", stride_order)
    fillers = _ORDER_FILLERS.get(value) if isinstance(value, str) else None
    if fillers is None:
        raise TypingError(
            f"to_dense in compiled code takes the literal 'K', 'C' or 'F', got {stride_order}"
        )

    fill_order, already_dense = fillers

    def impl(layout, stride_order="K"):
        if already_dense(layout):
            return layout  # as the Python class: a dense layout is its own dense version
        lay = _stack_int64(n2)
        order = _stack_int64(n)
        out = _stack_int64(n)
        _pack(layout, lay)
        fill_order(lay, n, order)
        K.dense_strides(lay, n, order, out, 0)
        return make_layout(layout.shape, _tuple_from(out, 0, n), layout.itemsize, 0)

    return impl


def _no_static_ndim(name):
    def typer(layout, *args):
        raise TypingError(
            f"StridedLayout.{name}() gives a number of dimensions that depends on run-time "
            "values, which compiled code cannot type; call it from Python, or use "
            "reshaped() with the shape you expect"
        )

    return typer


overload_method(StridedLayoutType, "squeezed")(_no_static_ndim("squeezed"))
overload_method(StridedLayoutType, "flattened")(_no_static_ndim("flattened"))


# ------------------------------------------------------------------ indexing
def _index_items(index):
    if isinstance(index, types.BaseTuple):
        return list(index.types)
    return [index]


def _index_plan(n, items):
    """Kinds of the index items with Ellipsis expanded, and the result's ndim."""
    kinds = []
    consumed = sum(
        1 for t in items if not isinstance(t, (types.NoneType, types.EllipsisType))
    )
    if sum(1 for t in items if isinstance(t, types.EllipsisType)) > 1:
        raise TypingError("an index can only have a single ellipsis ('...')")
    if consumed > n:
        raise TypingError(f"too many indices: {consumed} for a layout of {n} dimensions")
    for position, t in enumerate(items):
        if isinstance(t, types.NoneType):
            kinds.append(("new", position))
        elif isinstance(t, types.EllipsisType):
            kinds.extend(("all", position) for _ in range(n - consumed))
        elif isinstance(t, types.SliceType):
            kinds.append(("slice", position))
        elif isinstance(t, types.Integer):
            kinds.append(("int", position))
        else:
            raise TypingError(f"unsupported index item of type {t}")
    m = sum(1 for kind, _ in kinds if kind != "int") + n - sum(
        1 for kind, _ in kinds if kind in ("int", "slice", "all")
    )
    return kinds, m


def _make_index_impl(n, index, argname):
    """Straight-line code for one index type: each item's kind is known at compile time."""
    items = _index_items(index)
    is_tuple = isinstance(index, types.BaseTuple)
    kinds, m = _index_plan(n, items)
    source = [f"def impl(layout, {argname}):", "    off = layout.slice_offset"]
    extents = []
    strides = []
    axis = 0
    for j, (kind, position) in enumerate(kinds):
        item = f"{argname}[{position}]" if is_tuple else argname
        if kind == "new":
            extents.append("1")
            strides.append("0")  # NumPy's stride for a new axis
            continue
        if kind == "all":
            extents.append(f"layout.shape[{axis}]")
            strides.append(f"layout.strides[{axis}]")
        elif kind == "slice":
            source += [
                f"    sl = {item}",
                "    if sl.step == 0:",
                "        raise ValueError('slice step cannot be zero')",
                f"    status, off, e{j}, s{j} = slice_one(off, layout.shape[{axis}],",
                f"        layout.strides[{axis}], sl.start, sl.stop, sl.step, True, True)",
                "    if status != 0:",
                "        raise OverflowError('indexing: offsets overflow int64')",
            ]
            extents.append(f"e{j}")
            strides.append(f"s{j}")
        else:
            source += [
                f"    ix = {item}",
                f"    e = layout.shape[{axis}]",
                "    if ix < -e or ix >= e:",
                "        raise IndexError('index out of bounds')",
                f"    status, off = step_offset(off, ix + e if ix < 0 else ix, "
                f"layout.strides[{axis}])",
                "    if status != 0:",
                "        raise OverflowError('indexing: offsets overflow int64')",
            ]
        axis += 1
    for rest in range(axis, n):
        extents.append(f"layout.shape[{rest}]")
        strides.append(f"layout.strides[{rest}]")
    shape = "(" + "".join(f"{e}, " for e in extents) + ")"
    canonical = "(" + "0, " * m + ")"
    if m:
        empty = " or ".join(f"{e} == 0" for e in extents)
        source += [
            f"    if {empty}:",
            f"        return make_layout({shape}, {canonical}, layout.itemsize, 0)",
        ]
    source.append(
        f"    return make_layout({shape}, ({''.join(f'{s}, ' for s in strides)}), "
        "layout.itemsize, off)"
    )
    namespace = {
        # a real module name: Numba's on-disk cache re-imports it for users' cache=True code
        "__name__": __name__,
        "make_layout": make_layout,
        "slice_one": K.slice_one,
        "step_offset": K.step_offset,
    }
    exec("\n".join(source), namespace)  # noqa: S102 - source built from constants above
    return namespace["impl"]


@overload(operator.getitem)
def _getitem(layout, index):
    if isinstance(layout, StridedLayoutType):
        return _make_index_impl(layout.ndim, index, "index")
    return None


@overload_method(StridedLayoutType, "sliced")
def _sliced(layout, slices):
    return _make_index_impl(layout.ndim, slices, "slices")
