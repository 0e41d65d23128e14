"""``StridedLayout`` inside compiled code: a Numba type, its data model and its methods.

Importing this module registers, for ``@njit`` and (completed when ``layoutkit.cuda`` is
imported) ``@cuda.jit`` code:

* ``StridedLayoutType(ndim)``: the type of a layout with ``ndim`` dimensions, a struct of
  ``shape`` and ``strides`` (int64 tuples), ``itemsize`` and ``slice_offset``;
* unboxing of Python ``StridedLayout`` arguments (read from the layout's slots) and boxing
  of returned layouts (checked as every Python layout is). Compiled layouts always have
  explicit strides: an implicit-C argument (``strides`` None in Python) arrives with its C
  strides, ``layout.strides`` is never None there, and a returned layout is explicit;
* ``StridedLayout(shape, strides, itemsize, divide_strides=False)``,
  ``StridedLayout.dense(shape, itemsize, stride_order)``, ``StridedLayout.dense_like``,
  ``==``, ``!=`` and ``hash()`` (Python's value; ``@njit`` only: numba-cuda has no
  ``hash``), every argument also by keyword, with Python's defaults;
* the properties, and every transform whose number of dimensions is known when the code
  is compiled: ``permuted``, ``reshaped``, ``broadcast_to``, ``unsqueezed``, ``repacked``
  (``keep_dim=True``), ``to_dense``, ``sliced`` and ``layout[...]`` (ints, slices,
  ``None``, ``...``), plus ``max_compatible_itemsize``, ``required_size_in_bytes``,
  ``flattened_axis_mask`` and ``offset_of(index)``. ``squeezed`` and ``flattened`` give a
  number of dimensions that depends on run-time values, so compiled code cannot type their
  result; calling them is a typing error that says so, as is ``repr()`` / ``str()``.

Arguments are checked as the Python class checks them, with the same exception classes
(``AxisError`` for an axis or index out of range, ``ValueError``, ``OverflowError``) and
fixed messages; a wrong number of entries in a tuple argument is a typing error. Every
method that can raise is inlined into the calling function, so that a ``@cuda.jit``
kernel compiled with ``debug=True`` reports the exception (kernels compiled without it
stop the thread instead). Layouts made in compiled code are canonical as Python ones are
(a zero-volume layout has zero strides and offset). ``is_unique`` runs the Python class's
exact search (``unique_by_search``); only where that search gives up (a layout with
very many near-collisions) it answers the conservative False, where the Python class
enumerates small volumes.

Scratch space lives on the stack (an intrinsic that ``alloca``s a fixed number of int64
slots), so nothing allocates and the same code compiles for CUDA.
"""

import operator
from functools import cache

from llvmlite import binding, ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.imputils import lower_constant
from numba.core.typing.templates import Signature, infer_global
from numba.extending import (
    NativeValue,
    box,
    intrinsic,
    lower_builtin,
    make_attribute_wrapper,
    models,
    overload,
    overload_attribute,
    overload_method,
    register_jitable,
    register_model,
    type_callable,
    typeof_impl,
    unbox,
)

from . import _kernels as K
from . import _numba_checks as S
from . import _numba_fingerprint as _fingerprint
from ._errors import AxisError
from ._numba_boxing import (
    Objects,
    call_python,
    failed,
    getattr_fast,
    linked_class,
    read_int64s,
)
from ._numba_checks import (
    checked_index,
    inline_classmethod,
    inline_method,
    raise_status,
    status_raiser,
)
from ._numba_index import lower_index, plan_for_type
from .layout import StridedLayout, plain_layout

__all__ = ["StridedLayoutType", "layout_type", "make_layout"]

MAX_NDIM = 64
_ITEMSIZE_LIMIT = 2**31


class StridedLayoutType(types.Type):
    """Numba type of a ``StridedLayout`` with ``ndim`` dimensions.

    Its key holds the fingerprint of layoutkit's compiled side
    (:mod:`layoutkit._numba_fingerprint`), so that a ``cache=True`` function compiled
    with another layoutkit is compiled again rather than loaded.
    """

    def __init__(self, ndim):
        self.ndim = ndim
        self.fingerprint = _fingerprint.FINGERPRINT
        super().__init__(name=f"StridedLayout(ndim={ndim})")

    @property
    def key(self):
        # a type unpickled from an older cache index may have no fingerprint
        return self.ndim, getattr(self, "fingerprint", None)


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


def _is_int_tuple(typ, length=None):
    return (
        isinstance(typ, types.BaseTuple)
        and (length is None or len(typ) == length)
        and all(isinstance(t, types.Integer) for t in typ)
    )


# ------------------------------------------------------------------ boxing
def _not_a_layout(obj):
    """Raise for an object typed as a layout whose slots are not a layout's (unbox)."""
    raise TypeError(
        f"{type(obj).__name__} object passed as a StridedLayout has malformed shape or strides"
    )


def layout_for_compiled(obj):
    """``obj`` as a plain ``StridedLayout`` for compiled code, made of its checked values.

    Compiled code takes the shape, strides, itemsize and offset as facts (offsets are
    computed without overflow checks): any object may claim the layout type through
    ``_numba_type_`` (or a ``__class__`` property), and a subclass may shadow the slots
    (``_shape = property(...)``), so anything but exactly a ``StridedLayout`` is read
    through :func:`~layoutkit.layout.plain_layout`, which rebuilds it from its slots
    with every check. Shared by the ``@njit`` unboxer and the CUDA argument handler.

    Raises
    ------
    TypeError
        For an object that is not a ``StridedLayout`` (or whose slots were never set).
    """
    if type(obj) is StridedLayout:
        return obj
    if not issubclass(type(obj), StridedLayout):  # not isinstance: __class__ may lie
        raise TypeError(
            f"{type(obj).__name__} object claims a StridedLayout Numba type (_numba_type_) "
            "but is not a StridedLayout; compiled code takes layouts only"
        )
    return plain_layout(obj)


_LAYOUT_CLASS_SYMBOL = "layoutkit_StridedLayout_class"
binding.add_symbol(_LAYOUT_CLASS_SYMBOL, id(StridedLayout))


def _is_plain_layout(c, obj):
    """An ``i1``: whether ``obj``'s real type is exactly ``StridedLayout`` (a class
    symbol, as the view unboxer links the view class, so cached code finds it)."""
    layout_class = linked_class(c, _LAYOUT_CLASS_SYMBOL)
    return c.builder.icmp_unsigned("==", c.pyapi.get_type(obj), layout_class)


@unbox(StridedLayoutType)
def _unbox_layout(typ, obj, c):
    # the four slots the layout class keeps for compiled code (see layoutkit.layout), of
    # exactly a StridedLayout: anything else is first made one (layout_for_compiled)
    n = typ.ndim
    objects = Objects(c)
    checked = cgutils.alloca_once_value(c.builder, obj)
    with c.builder.if_then(c.builder.not_(_is_plain_layout(c, obj)), likely=False):
        c.builder.store(call_python(c, objects, layout_for_compiled, [obj]), checked)
    obj = c.builder.load(checked)

    def bad_argument():
        c.pyapi.decref(call_python(c, objects, _not_a_layout, [obj]))

    shape = read_int64s(c, getattr_fast(c, objects, obj, "_shape"), n, bad_argument)
    strides = read_int64s(c, getattr_fast(c, objects, obj, "_strides"), n, bad_argument)
    scalars = []
    for name in ("_itemsize", "_offset"):
        value = cgutils.alloca_once_value(c.builder, ir.Constant(ir.IntType(64), 0))
        item = getattr_fast(c, objects, obj, name)
        with c.builder.if_then(cgutils.is_not_null(c.builder, item), likely=True):
            c.builder.store(c.pyapi.long_as_longlong(item), value)
        scalars.append(c.builder.load(value))
    layout = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    layout.shape = c.context.make_tuple(c.builder, _int_tuple(n), shape)
    layout.strides = c.context.make_tuple(c.builder, _int_tuple(n), strides)
    layout.itemsize, layout.slice_offset = scalars
    is_error = failed(c)
    objects.release()
    return NativeValue(layout._getvalue(), is_error=is_error)


def _from_compiled(shape, strides, itemsize, slice_offset):
    """A Python layout from values returned by compiled code (checked for overflow)."""
    return StridedLayout._numba_box(shape, strides, itemsize, slice_offset)


@box(StridedLayoutType)
def _box_layout(typ, val, c):
    layout = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val)
    objects = Objects(c)
    args = [
        objects.keep(c.box(_int_tuple(typ.ndim), layout.shape)),
        objects.keep(c.box(_int_tuple(typ.ndim), layout.strides)),
        objects.keep(c.box(types.int64, layout.itemsize)),
        objects.keep(c.box(types.int64, layout.slice_offset)),
    ]
    result = cgutils.alloca_once_value(c.builder, c.pyapi.get_null_object())
    with c.builder.if_then(c.builder.not_(failed(c)), likely=True):
        callee = c.pyapi.unserialize(c.pyapi.serialize_object(_from_compiled))
        c.builder.store(c.pyapi.call_function_objargs(callee, args), result)
        c.pyapi.decref(callee)
    objects.release()
    return c.builder.load(result)


# ------------------------------------------------------------------ intrinsics
@intrinsic
def make_layout(typingctx, shape, strides, itemsize, slice_offset):
    """A layout value from int tuples ``shape``, ``strides`` and two ints (not checked).

    The values are taken as they are: a zero-volume layout keeps its strides and offset,
    as a Python layout does.
    """
    if not (_is_int_tuple(shape) and _is_int_tuple(strides, len(shape))):
        return None
    n = len(shape)
    sig = layout_type(n)(shape, strides, itemsize, slice_offset)

    def codegen(context, builder, sig, args):
        return _layout_value(
            context, builder, sig.return_type,
            _int64_values(context, builder, args[0], sig.args[0]),
            _int64_values(context, builder, args[1], sig.args[1]),
            context.cast(builder, args[2], sig.args[2], types.int64),
            context.cast(builder, args[3], sig.args[3], types.int64),
        )  # fmt: skip

    return sig, codegen


def _layout_value(context, builder, typ, shape, strides, itemsize, offset):
    """A layout struct from int64 LLVM values."""
    layout = cgutils.create_struct_proxy(typ)(context, builder)
    layout.shape = context.make_tuple(builder, _int_tuple(typ.ndim), shape)
    layout.strides = context.make_tuple(builder, _int_tuple(typ.ndim), strides)
    layout.itemsize = itemsize
    layout.slice_offset = offset
    return layout._getvalue()


def _int64_values(context, builder, value, typ):
    """The entries of an integer tuple (or one integer) as a list of int64 LLVM values."""
    if not isinstance(typ, types.BaseTuple):
        return [context.cast(builder, value, typ, types.int64)]
    items = cgutils.unpack_tuple(builder, value, len(typ))
    return [context.cast(builder, v, t, types.int64) for v, t in zip(items, typ, strict=True)]


def _below_zero(value):
    """Whether an integer argument is negative (never for an unsigned type, whose values
    beyond 2**63 an int64 comparison would read as negative)."""
    return value < 0


@overload(_below_zero)
def _below_zero_impl(value):
    if isinstance(value, types.Integer) and not value.signed:
        return lambda value: False
    return lambda value: value < 0


def _address_residue(address, modulus):
    """``address % modulus`` for an address (not negative) and a positive modulus."""
    return address % modulus


@overload(_address_residue)
def _address_residue_impl(address, modulus):
    # an unsigned address of 2**63 or more wraps to a negative int64 in mixed arithmetic,
    # which reads it modulo a modulus that does not divide 2**64 (12, 24) wrongly: the
    # residue is taken in uint64
    if isinstance(address, types.Integer) and not address.signed:
        return lambda address, modulus: types.int64(types.uint64(address) % types.uint64(modulus))
    return lambda address, modulus: address % modulus


@intrinsic
def _axes_tuple(typingctx, values):
    """Axes (an integer tuple, or one integer) as a ``UniTuple(int64)``.

    As ``_int64_tuple``, except that an unsigned 64-bit axis of 2**63 or more becomes
    the largest int64 (out of range for every layout, as it is in Python) instead of
    wrapping around to a negative axis that may be valid.
    """
    if isinstance(values, types.Integer):
        entry_types = (values,)
    elif _is_int_tuple(values):
        entry_types = tuple(values)
    else:
        return None

    def codegen(context, builder, sig, args):
        arg_type = sig.args[0]
        items = (
            cgutils.unpack_tuple(builder, args[0], len(arg_type))
            if isinstance(arg_type, types.BaseTuple)
            else [args[0]]
        )
        int64 = ir.IntType(64)
        largest = ir.Constant(int64, 2**63 - 1)
        values = []
        for value, typ in zip(items, entry_types, strict=True):
            cast = context.cast(builder, value, typ, types.int64)
            if not typ.signed and typ.bitwidth >= 64:
                beyond = builder.icmp_signed("<", cast, ir.Constant(int64, 0))
                cast = builder.select(beyond, largest, cast)
            values.append(cast)
        return context.make_tuple(builder, sig.return_type, values)

    return _int_tuple(len(entry_types))(values), codegen


@intrinsic
def _int64_tuple(typingctx, values):
    """An integer tuple of any entry types, or one integer, as a ``UniTuple(int64)``."""
    if isinstance(values, types.Integer):
        n = 1
    elif _is_int_tuple(values):
        n = len(values)
    else:
        return None

    def codegen(context, builder, sig, args):
        items = _int64_values(context, builder, args[0], sig.args[0])
        return context.make_tuple(builder, sig.return_type, items)

    return _int_tuple(n)(values), codegen


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


# ------------------------------------------------------------------ checks
# Each returns a status code of layoutkit._numba_checks (0: fine) and never raises; the
# methods raise through an intrinsic made by status_raiser, in the calling function. The
# arithmetic is the layout kernel the Python class runs for the same operation, after
# the argument checks the class makes first, in its order.


@register_jitable
def _kernel_status(status):
    """The status of compiled methods for a layout kernel's extent or overflow status."""
    if status == K.OK:
        return S.OK
    if status == K.NEGATIVE_EXTENT:
        return S.NEGATIVE_EXTENT
    if status == K.NOT_A_MULTIPLE:
        return S.STRIDE_NOT_MULTIPLE
    if status == K.OVERFLOW_VOLUME:
        return S.VOLUME_OVERFLOW
    if status == K.OVERFLOW_OFFSET:
        return S.OFFSET_OVERFLOW
    return S.BYTES_OVERFLOW


@register_jitable
def _dense_status(status):
    """``_kernel_status`` for a dense layout, whose byte overflow is its size in bytes."""
    if status == K.OVERFLOW_BYTES:
        return S.SIZE_OVERFLOW
    return _kernel_status(status)


@register_jitable
def _itemsize_status(itemsize):
    if itemsize <= 0:
        return S.ITEMSIZE_NOT_POSITIVE
    if itemsize >= _ITEMSIZE_LIMIT:
        return S.ITEMSIZE_TOO_LARGE
    return S.OK


@register_jitable
def _extents_into(shape, lay):
    """Copy the extents of int64 tuple ``shape`` to ``lay``; NEGATIVE_EXTENT if one is < 0."""
    for i in range(len(shape)):
        if shape[i] < 0:
            return S.NEGATIVE_EXTENT
        lay[i] = shape[i]
    return S.OK


@register_jitable(forceinline=True)
def _permutation_into(order, n, out, base):
    """Write the axes of int64 tuple ``order``, normalised, to ``out[base:base+n]``.

    As the Python class: an axis out of range anywhere is reported before a repeat.
    Branch-free (the axes' bits must cover ``0..n-1`` exactly), as it runs inlined.
    """
    in_range = True
    seen = 0
    for i in range(n):
        a = order[i]
        in_range &= (a >= -n) & (a < n)
        a = (a + n if a < 0 else a) & 63  # in 0..63 even when out of range
        seen |= 1 << a
        out[base + i] = a
    if not in_range:
        return S.AXIS_OUT_OF_RANGE
    if seen != _ALL_AXES[n]:
        return S.REPEATED_AXIS
    return S.OK


_ALL_AXES = tuple((1 << n) - 1 if n < 64 else -1 for n in range(MAX_NDIM + 1))


@register_jitable
def _axis_status(axis, n):
    if axis < -n or axis >= n:
        return S.AXIS_OUT_OF_RANGE
    return S.OK


@register_jitable
def _strided_into(shape, strides, itemsize, divide, lay):
    """``StridedLayout(shape, strides, itemsize, divide)`` into ``lay``.

    The Python constructor's order: the extents, the itemsize, then the ``check``
    kernel (dividing byte strides by the itemsize when ``divide``).
    """
    n = len(shape)
    status = _extents_into(shape, lay)
    if status == S.OK:
        status = _itemsize_status(itemsize)
    if status == S.OK:
        for i in range(n):
            lay[n + i] = strides[i]
        status = _kernel_status(K.check(lay, n, itemsize, 0, 1 if divide else 0)[0])
    return status


@register_jitable
def _c_dense_into(shape, itemsize, lay):
    """``StridedLayout(shape, None, itemsize)`` into ``lay``: the extents, the itemsize,
    then the ``dense_layout`` kernel (C order)."""
    status = _extents_into(shape, lay)
    if status == S.OK:
        status = _itemsize_status(itemsize)
    if status == S.OK:
        status = _dense_status(K.dense_layout(lay, len(shape), itemsize, 0)[0])
    return status


@register_jitable
def _no_order(stride_order, n, out, base):
    return S.OK


@register_jitable
def _given_order(stride_order, n, out, base):
    return _permutation_into(_axes_tuple(stride_order), n, out, base)


def _order_kind(stride_order, n, allow_k):
    """``(kind, filler)`` for the ``stride_order`` argument of ``dense`` / ``dense_like``.

    ``kind`` is the kernels' (0 C, 1 Fortran, 2 an axis order, 3 the layout's own stride
    order); ``filler(stride_order, n, out, base)`` writes a given axis order, checked
    as the Python class checks it, to ``out[base:base+n]`` and returns a status.
    ``None`` is ``"K"`` for ``dense_like`` and ``"C"`` for ``dense``, as in Python.
    """
    value = _literal(stride_order)
    if value is None or isinstance(value, types.NoneType):
        value = "K" if allow_k else "C"
    letters = ("K", "C", "F") if allow_k else ("C", "F")
    if isinstance(value, str) and value in letters:
        return {"C": 0, "F": 1, "K": 3}[value], _no_order
    if _is_int_tuple(stride_order, n):
        return 2, _given_order
    raise TypingError(
        f"stride_order in compiled code is one of the literals {', '.join(letters)} or a "
        f"tuple of {n} axes, got {stride_order}"
    )


_raise_dense = status_raiser("StridedLayout.dense")


# ------------------------------------------------------------------ construction
infer_global(StridedLayout, types.TypeRef(StridedLayoutType))


@type_callable(StridedLayoutType)
def _type_constructor(context):
    def typer(shape, strides, itemsize, divide_strides=None):
        if not _is_int_tuple(shape):
            raise TypingError(f"StridedLayout() needs a tuple of integer extents, got {shape}")
        n = len(shape)
        if n > MAX_NDIM:
            raise TypingError(f"StridedLayout() supports at most {MAX_NDIM} dimensions, got {n}")
        if not (isinstance(strides, types.NoneType) or _is_int_tuple(strides, n)):
            raise TypingError(f"StridedLayout() needs None or a tuple of {n} strides, got {strides}")
        if not isinstance(itemsize, types.Integer):
            raise TypingError(f"StridedLayout() needs an integer itemsize, got {itemsize}")
        args = [shape, strides, itemsize]
        if divide_strides is not None:
            if not isinstance(divide_strides, types.Boolean):
                raise TypingError(f"divide_strides must be a bool, got {divide_strides}")
            args.append(divide_strides)
        return Signature(layout_type(n), tuple(types.unliteral(a) for a in args), None)

    return typer


@cache
def _constructor_function(n, c_order, by_bytes):
    """``(shape, strides, itemsize[, divide]) -> (status, layout)`` for ``StridedLayout(...)``."""
    n2 = 2 * n
    if c_order:

        def build(shape, strides, itemsize):
            lay = _stack_int64(n2)
            status = _c_dense_into(_int64_tuple(shape), itemsize, lay)
            return status, make_layout(_tuple_from(lay, 0, n), _tuple_from(lay, n, n), itemsize, 0)

    elif by_bytes:

        def build(shape, strides, itemsize, divide_strides):
            lay = _stack_int64(n2)
            status = _strided_into(
                _int64_tuple(shape), _int64_tuple(strides), itemsize, divide_strides, lay
            )
            return status, make_layout(_tuple_from(lay, 0, n), _tuple_from(lay, n, n), itemsize, 0)

    else:

        def build(shape, strides, itemsize):
            lay = _stack_int64(n2)
            status = _strided_into(_int64_tuple(shape), _int64_tuple(strides), itemsize, False, lay)
            return status, make_layout(_tuple_from(lay, 0, n), _tuple_from(lay, n, n), itemsize, 0)

    return build


@lower_builtin(types.TypeRef(StridedLayoutType), types.VarArg(types.Any))
def _lower_constructor(context, builder, sig, args):
    # lowered here rather than through numba_typeref_ctor (a separate function), so that
    # a failed check raises in the caller (see layoutkit._numba_checks)
    typ = sig.return_type
    build = _constructor_function(
        typ.ndim, isinstance(sig.args[1], types.NoneType), len(sig.args) > 3
    )
    result_type = types.Tuple((types.int64, typ))
    result = context.compile_internal(builder, build, result_type(*sig.args), args)
    status, layout = cgutils.unpack_tuple(builder, result, 2)
    raise_status(context, builder, status, "StridedLayout")
    return layout


@register_jitable(forceinline=True)
def _dense_into(shape, itemsize, kind, order_status, lay):
    """``StridedLayout.dense`` into ``lay``: the itemsize, the axis order (whose status
    ``order_status`` its filler gave), then the ``dense_layout`` kernel of ``kind``.

    The checks branch here rather than in the method, which is inlined at the level of
    Numba IR: a branch there, inlined twice in one function, makes Numba warn that a
    variable is not in scope (NumbaIRAssumptionWarning, Numba issue 9489).
    """
    n = len(shape)
    status = _itemsize_status(itemsize)
    if status == S.OK:
        status = order_status
    if status == S.OK:
        for i in range(n):
            lay[i] = shape[i]
        status = _dense_status(K.dense_layout(lay, n, itemsize, kind)[0])
    return status


def _dense(cls, shape, itemsize, stride_order="C"):
    """``StridedLayout.dense(shape, itemsize, stride_order="C")`` in compiled code.

    The Python class's order: the itemsize, the axis order, then the ``dense_layout``
    kernel (which checks the extents).
    """
    if not _is_int_tuple(shape):
        raise TypingError(f"StridedLayout.dense() needs a tuple of integer extents, got {shape}")
    n = len(shape)
    if n > MAX_NDIM:
        raise TypingError(f"StridedLayout.dense() supports at most {MAX_NDIM} dimensions")
    kind, fill_order = _order_kind(stride_order, n, allow_k=False)
    n2 = 2 * n
    n3 = 3 * n

    def impl(cls, shape, itemsize, stride_order="C"):
        lay = _stack_int64(n3)  # shape | strides | the axis order of kind 2
        order_status = fill_order(stride_order, n, lay, n2)
        _raise_dense(_dense_into(_int64_tuple(shape), itemsize, kind, order_status, lay))
        return make_layout(_tuple_from(lay, 0, n), _tuple_from(lay, n, n), itemsize, 0)

    return impl


def _dense_like(cls, other, stride_order="K"):
    """``StridedLayout.dense_like(other, stride_order="K")`` in compiled code."""
    if not isinstance(other, StridedLayoutType):
        raise TypingError(f"StridedLayout.dense_like() needs a layout, got {other}")
    return lambda cls, other, stride_order="K": other.to_dense(stride_order)


inline_classmethod(StridedLayoutType, "dense")(_dense)
inline_classmethod(StridedLayoutType, "dense_like")(_dense_like)


# ------------------------------------------------------------------ equality
@overload(operator.eq)
def _eq(a, b):
    if not (isinstance(a, StridedLayoutType) and isinstance(b, StridedLayoutType)):
        return None
    if a.ndim != b.ndim:
        return lambda a, b: False
    n = a.ndim

    def impl(a, b):
        # as the Python class: equal when every index maps to the same offset, so the
        # strides of extent-1 axes do not count, and zero-volume layouts of one shape
        # and itemsize are equal whatever their strides and offsets
        if a.itemsize != b.itemsize:
            return False
        empty = False
        for i in range(n):
            if a.shape[i] != b.shape[i]:
                return False
            empty |= a.shape[i] == 0
        if empty:
            return True
        if a.slice_offset != b.slice_offset:
            return False
        for i in range(n):  # noqa: SIM110 - no generator expressions in compiled code
            if a.shape[i] != 1 and a.strides[i] != b.strides[i]:
                return False
        return True

    return impl


@overload(operator.ne)
def _ne(a, b):
    if isinstance(a, StridedLayoutType) and isinstance(b, StridedLayoutType):
        return lambda a, b: not a == b  # noqa: SIM201 - a != b would call this overload
    return None


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
                    return True  # a layout with no elements is contiguous and unique
            return kernel(lay, n)

        return impl

    return typer


overload_attribute(StridedLayoutType, "is_contiguous_c", jit_options={"forceinline": True})(
    _flag_property("is_contiguous_c")
)
overload_attribute(StridedLayoutType, "is_contiguous_f", jit_options={"forceinline": True})(
    _flag_property("is_contiguous_f")
)


def _over_stride_order(kernel, unsorted, n):
    """A compiled test of a layout of ``n`` dimensions by ``kernel`` over its stride order
    (``unsorted`` without sorting, for a few dimensions); True for an empty layout."""
    n2 = 2 * n

    @register_jitable
    def test(layout):
        lay = _stack_int64(n2)
        _pack(layout, lay)
        for i in range(n):
            if layout.shape[i] == 0:
                return True
        if n <= _UNSORTED_NDIM:
            return unsorted(lay, n)
        order = _stack_int64(n)
        K.stride_order(lay, n, order, 0)
        return kernel(lay, n, order, 0)

    return test


_UNSORTED_NDIM = 8  # up to this many dimensions, n**2 straight-line tests beat a sort
_INLINED = {"forceinline": True}


@overload_attribute(StridedLayoutType, "is_contiguous_any", jit_options=_INLINED)
def _is_contiguous_any(layout):
    test = _over_stride_order(K.is_contiguous_along, K.is_contiguous_unsorted, layout.ndim)
    return lambda layout: test(layout)


@overload_attribute(StridedLayoutType, "is_unique", jit_options=_INLINED)
def _is_unique(layout):
    """The nesting test, then the exact search Python runs (``unique_by_search``)."""
    n = layout.ndim
    n2 = 2 * n
    slots = 6 * n
    budget = K.UNIQUE_SEARCH_BUDGET
    nested = _over_stride_order(K.is_unique_nested, K.is_unique_unsorted, n)

    def impl(layout):
        if nested(layout):
            return True
        lay = _stack_int64(n2)
        _pack(layout, lay)
        return K.unique_by_search(lay, n, _stack_int64(slots), budget) == 1

    return impl


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


_raise_required_size = status_raiser("required_size_in_bytes")


@inline_method(StridedLayoutType, "required_size_in_bytes")
def _required_size_in_bytes(layout):
    def impl(layout):
        status, size = _required_size(layout)
        _raise_required_size(status)
        return size

    return impl


@register_jitable(forceinline=True)
def _required_size(layout):
    """``(status, size in bytes)`` of ``required_size_in_bytes`` (the branch out of the
    IR-inlined method: see ``_dense_into``)."""
    lo, hi = layout.offset_bounds
    return (S.REACHES_BEFORE_START if lo < 0 else S.OK), (hi + 1) * layout.itemsize


@inline_method(StridedLayoutType, "offset_of")
def _offset_of(layout, index):
    n = layout.ndim
    if not _is_int_tuple(index, n):
        raise TypingError(f"offset_of needs a tuple of {n} integers, got {index}")
    return lambda layout, index: _checked_offset(layout, index)


@intrinsic
def _checked_offset(typingctx, layout, index):
    """Offset of ``index`` (negative entries count from the end; AxisError if out of range)."""

    def codegen(context, builder, sig, args):
        typ, index_type = sig.args
        struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
        shape = cgutils.unpack_tuple(builder, struct.shape, typ.ndim)
        strides = cgutils.unpack_tuple(builder, struct.strides, typ.ndim)
        entries = cgutils.unpack_tuple(builder, args[1], typ.ndim)
        offset = struct.slice_offset
        for axis, (value, value_type) in enumerate(zip(entries, index_type, strict=True)):
            value = checked_index(
                context, builder, value, value_type, shape[axis], True, AxisError,
                f"offset_of: index out of bounds on axis {axis}",
            )  # fmt: skip
            offset = builder.add(offset, builder.mul(value, strides[axis]))
        return offset

    return types.int64(layout, index), codegen


# ------------------------------------------------------------------ transforms
# Each method is a small wrapper inlined into the caller: the arithmetic (a function that
# returns a status) runs as a call, the raise in place (see layoutkit._numba_checks).


@register_jitable(forceinline=True)
def _permute_into(layout, axis_order, lay, order, out):
    n = len(layout.shape)
    status = _permutation_into(axis_order, n, order, 0)
    if status == S.OK:
        _pack(layout, lay)
        for i in range(n):  # a gather from the stack, not a switch over tuple entries
            out[i] = lay[order[i]]
            out[n + i] = lay[n + order[i]]
    return status


_raise_permuted = status_raiser("permuted")


@inline_method(StridedLayoutType, "permuted")
def _permuted(layout, axis_order):
    n = layout.ndim
    n2 = 2 * n
    if not _is_int_tuple(axis_order, n):
        raise TypingError(f"permuted needs a tuple of {n} axes, got {axis_order}")

    def impl(layout, axis_order):
        out = _stack_int64(n2)
        _raise_permuted(
            _permute_into(layout, _axes_tuple(axis_order), _stack_int64(n2), _stack_int64(n), out)
        )
        return make_layout(
            _tuple_from(out, 0, n), _tuple_from(out, n, n), layout.itemsize, layout.slice_offset
        )

    return impl


@register_jitable
def _reshape_into(layout, shape, lay, out):
    """Reshape to int64 tuple ``shape`` (one -1 allowed): shape ``out[0:m]``, strides
    ``out[m:2m]``.

    The Python class's steps: the extents checked and a -1 inferred as its
    ``_infer_extent`` does (exact products: one beyond int64 exceeds any volume), then
    the ``reshape_layout`` kernel.
    """
    n = len(layout.shape)
    m = len(shape)
    _pack(layout, lay)
    volume = K.volume_of(lay, n)
    unknown = -1
    known = 1
    beyond = False  # the product of the known extents exceeds int64
    zero = False
    for i in range(m):
        e = shape[i]
        out[i] = e
        if e == -1:
            if unknown >= 0:
                return S.TWO_UNKNOWN_EXTENTS
            unknown = i
        elif e < 0:
            return S.NEGATIVE_EXTENT
        elif e == 0:
            zero = True
        elif not beyond:
            if K.mul_fits(known, e):
                known *= e
            else:
                beyond = True
    if zero:
        known = 0
        beyond = False
    if unknown >= 0:
        if zero:
            return S.AMBIGUOUS_UNKNOWN_EXTENT
        if beyond:  # volume % known is the volume itself
            if volume != 0:
                return S.INDIVISIBLE_VOLUME
            out[unknown] = 0
        elif volume % known != 0:
            return S.INDIVISIBLE_VOLUME
        else:
            out[unknown] = volume // known
    elif beyond or known != volume:
        return S.VOLUMES_DIFFER
    status = K.reshape_layout(lay, n, out, m, layout.itemsize, volume)
    if status == K.OK:
        return S.OK
    if status == K.OVERFLOW_OFFSET:
        return S.BYTES_OVERFLOW
    return S.RESHAPE_NEEDS_COPY  # the extents were checked: the strides do not allow it


@register_jitable(forceinline=True)
def _reshape_contiguous(layout, shape, out):
    """The common case of ``_reshape_into``, straight-line once inlined: a C-contiguous
    non-empty layout takes the dense C strides of any shape of its volume (the answer
    of the ``reshape_layout`` kernel: volumes below 2**31 keep every byte stride within
    int64).

    Returns ``NOT_HANDLED`` (and writes nothing meaningful) for every other case, which
    ``_reshape_into`` then settles, errors included.
    """
    n = len(layout.shape)
    m = len(shape)
    volume = 1
    contiguous = True
    for k in range(n):  # from the last axis: C-contiguity, extent-1 axes skipped
        i = n - 1 - k
        e = layout.shape[i]
        contiguous &= (e == 1) | (layout.strides[i] == volume)
        volume *= e
    # volumes below 2**31 keep every product below 2**62: no overflow to check
    valid = contiguous & (volume > 0) & (volume < _SMALL_VOLUME)
    known = 1
    unknown = -1
    for i in range(m):
        e = shape[i]
        unknown = i if e == -1 else unknown
        valid &= (e == -1) | ((e > 0) & (e <= volume))
        known = min(known * (1 if e == -1 else e), _SMALL_VOLUME)
    for i in range(m):
        valid &= (shape[i] != -1) | (i == unknown)
    if unknown >= 0:
        valid &= known > 0 and volume % known == 0
    else:
        valid &= known == volume
    if not valid:
        return _NOT_HANDLED
    stride = 1
    for k in range(m):
        i = m - 1 - k
        e = volume // known if i == unknown else shape[i]
        out[i] = e
        out[m + i] = stride
        stride *= e
    return S.OK


@register_jitable(forceinline=True)
def _reshape_status(layout, shape, lay, out):
    """``_reshape_contiguous``, then ``_reshape_into`` (a call) for what it leaves; the
    branch is here, out of the IR-inlined method (see ``_dense_into``)."""
    status = _reshape_contiguous(layout, shape, out)
    if status == _NOT_HANDLED:
        status = _reshape_into(layout, shape, lay, out)
    return status


_NOT_HANDLED = -1
_SMALL_VOLUME = 2**31
_raise_reshaped = status_raiser("reshaped")


@inline_method(StridedLayoutType, "reshaped")
def _reshaped(layout, shape):
    n = layout.ndim
    n2 = 2 * n
    if not (_is_int_tuple(shape) or isinstance(shape, types.Integer)):
        raise TypingError(f"reshaped needs a tuple of extents, got {shape}")
    m = len(shape) if isinstance(shape, types.BaseTuple) else 1
    if m > MAX_NDIM:
        raise TypingError(f"reshaped supports at most {MAX_NDIM} dimensions, got {m}")
    m2 = 2 * m

    def impl(layout, shape):
        values = _int64_tuple(shape)
        out = _stack_int64(m2)
        _raise_reshaped(_reshape_status(layout, values, _stack_int64(n2), out))
        return make_layout(
            _tuple_from(out, 0, m), _tuple_from(out, m, m), layout.itemsize, layout.slice_offset
        )

    return impl


@register_jitable
def _broadcast_into(layout, shape, lay, out):
    """The ``broadcast_layout`` kernel; a negative extent is named as such (as in Python)."""
    n = len(layout.shape)
    m = len(shape)
    _pack(layout, lay)
    negative = False
    for i in range(m):
        out[i] = shape[i]
        negative |= shape[i] < 0
    status = K.broadcast_layout(lay, n, out, m, layout.itemsize, layout.slice_offset)[0]
    if status == K.OK:
        return S.OK
    if negative:
        return S.NEGATIVE_EXTENT
    if status == K.INCOMPATIBLE:
        return S.BROADCAST_MISMATCH
    return _kernel_status(status)


_raise_broadcast_to = status_raiser("broadcast_to")


@inline_method(StridedLayoutType, "broadcast_to")
def _broadcast_to(layout, shape):
    n = layout.ndim
    n2 = 2 * n
    if not _is_int_tuple(shape) or len(shape) < n:
        raise TypingError(f"broadcast_to needs a tuple of at least {n} extents, got {shape}")
    m = len(shape)
    if m > MAX_NDIM:
        raise TypingError(f"broadcast_to supports at most {MAX_NDIM} dimensions, got {m}")
    m2 = 2 * m

    def impl(layout, shape):
        out = _stack_int64(m2)
        _raise_broadcast_to(_broadcast_into(layout, _int64_tuple(shape), _stack_int64(n2), out))
        return make_layout(
            _tuple_from(out, 0, m), _tuple_from(out, m, m), layout.itemsize, layout.slice_offset
        )

    return impl


@register_jitable
def _unsqueeze_into(layout, axes, lay, out):
    """Insert extent-1 axes at int64 tuple ``axes`` (of the result) into ``out``.

    Each axis is checked in turn as the Python class does (out of range, then repeated),
    then the ``unsqueeze`` kernel inserts them.
    """
    n = len(layout.shape)
    k = len(axes)
    m = n + k
    new_axes = 0
    for j in range(k):
        a = axes[j]
        if a < -m or a >= m:
            return S.AXIS_OUT_OF_RANGE
        bit = 1 << (a + m if a < 0 else a)
        if new_axes & bit:
            return S.REPEATED_AXIS
        new_axes |= bit
    _pack(layout, lay)
    K.unsqueeze(lay, n, new_axes, m, layout.itemsize, out)
    return S.OK


_raise_unsqueezed = status_raiser("unsqueezed")


@inline_method(StridedLayoutType, "unsqueezed")
def _unsqueezed(layout, axis):
    n = layout.ndim
    n2 = 2 * n
    if isinstance(axis, types.Integer):
        k = 1
    elif _is_int_tuple(axis):
        k = len(axis)
    else:
        raise TypingError(f"unsqueezed needs an integer or a tuple of integers, got {axis}")
    m = n + k
    if m > MAX_NDIM:
        raise TypingError(f"unsqueezed would give {m} dimensions; at most {MAX_NDIM} are supported")
    m2 = 2 * m

    def impl(layout, axis):
        out = _stack_int64(m2)
        _raise_unsqueezed(_unsqueeze_into(layout, _axes_tuple(axis), _stack_int64(n2), out))
        return make_layout(
            _tuple_from(out, 0, m), _tuple_from(out, m, m), layout.itemsize, layout.slice_offset
        )

    return impl


def _literal(value):
    """The Python value of a literal or omitted argument type (or the value itself)."""
    if isinstance(value, types.Omitted):
        return value.value
    if isinstance(value, types.Literal):
        return value.literal_value
    return value


@register_jitable
def _repack_into(layout, itemsize, data_ptr, axis, lay, out):
    """Repack to ``itemsize`` along ``axis`` into ``out``: returns (status, new offset).

    The Python class's checks in its order, then the ``repack_layout`` kernel; an
    unchanged itemsize gives the layout itself (``out`` holds it) once the axis is known
    to be valid.
    """
    n = len(layout.shape)
    old = layout.itemsize
    axis = _axes_tuple(axis)[0]  # int64 (an unsigned axis made arithmetic float64)
    _pack(layout, lay)
    _pack(layout, out)
    status = _itemsize_status(itemsize)
    if status != S.OK:
        return status, 0
    if _below_zero(data_ptr):  # Python refuses an address outside [0, 2**64)
        return S.DATA_PTR_OUT_OF_RANGE, 0
    if itemsize == old:
        return (_axis_status(axis, n) if n > 0 else S.OK), layout.slice_offset
    status = _axis_status(axis, n)
    if status != S.OK:
        return status, 0
    ax = axis + n if axis < 0 else axis
    if itemsize > old:
        if itemsize % old != 0:
            return S.PACK_NOT_MULTIPLE, 0
        if _address_residue(data_ptr, itemsize) != 0:
            return S.PACK_MISALIGNED, 0
    elif old % itemsize != 0:
        return S.UNPACK_NOT_DIVISOR, 0
    status, offset, _, _, _ = K.repack_layout(lay, n, layout.slice_offset, old, itemsize, ax, out)
    if status == K.OK:
        return S.OK, offset
    if status == K.INCOMPATIBLE:
        return S.REPACK_INCOMPATIBLE, 0
    return _kernel_status(status), 0


_raise_repacked = status_raiser("repacked")


@inline_method(StridedLayoutType, "repacked")
def _repacked(layout, itemsize, data_ptr=0, axis=-1, keep_dim=True):
    n = layout.ndim
    n2 = 2 * n
    if _literal(keep_dim) is not True:
        raise TypingError(
            "repacked in compiled code keeps the packed axis: keep_dim must be the literal True "
            "(keep_dim=False gives a number of dimensions that depends on run-time values)"
        )

    def impl(layout, itemsize, data_ptr=0, axis=-1, keep_dim=True):
        out = _stack_int64(n2)
        status, offset = _repack_into(layout, itemsize, data_ptr, axis, _stack_int64(n2), out)
        _raise_repacked(status)
        return make_layout(_tuple_from(out, 0, n), _tuple_from(out, n, n), itemsize, offset)

    return impl


@register_jitable
def _max_compatible(layout, max_itemsize, data_ptr, axis, lay):
    """``max_compatible_itemsize``'s checks, then its kernel: (status, itemsize)."""
    n = len(layout.shape)
    axis = _axes_tuple(axis)[0]
    if max_itemsize <= 0:
        return S.MAX_ITEMSIZE_NOT_POSITIVE, 0
    if _below_zero(data_ptr):
        return S.DATA_PTR_OUT_OF_RANGE, 0
    status = _axis_status(axis, n)
    if status != S.OK:
        return status, 0
    if max_itemsize < layout.itemsize:
        return S.MAX_ITEMSIZE_TOO_SMALL, 0
    _pack(layout, lay)
    ax = axis + n if axis < 0 else axis
    residue = _address_residue(data_ptr, max_itemsize)
    return S.OK, K.max_compatible_itemsize(
        lay, n, layout.slice_offset, layout.itemsize, max_itemsize, residue, ax
    )


_raise_max_compatible_itemsize = status_raiser("max_compatible_itemsize")


@inline_method(StridedLayoutType, "max_compatible_itemsize")
def _max_compatible_itemsize(layout, max_itemsize=16, data_ptr=0, axis=-1):
    n2 = 2 * layout.ndim

    def impl(layout, max_itemsize=16, data_ptr=0, axis=-1):
        status, result = _max_compatible(layout, max_itemsize, data_ptr, axis, _stack_int64(n2))
        _raise_max_compatible_itemsize(status)
        return result

    return impl


_raise_to_dense = status_raiser("to_dense")


@inline_method(StridedLayoutType, "to_dense")
def _to_dense(layout, stride_order="K"):
    n = layout.ndim
    n2 = 2 * n
    n3 = 3 * n
    kind, fill_order = _order_kind(stride_order, n, allow_k=True)

    def impl(layout, stride_order="K"):
        out = _stack_int64(n3)  # shape | strides | the axis order (given, or "K"'s)
        order_status = fill_order(stride_order, n, out, n2)
        status, keep = _to_dense_status(layout, kind, order_status, _stack_int64(n2), out)
        _raise_to_dense(status)
        # already dense in that order: the layout itself, as in Python
        return _either(
            keep, layout, make_layout(layout.shape, _tuple_from(out, n, n), layout.itemsize, 0)
        )

    return impl


@register_jitable(forceinline=True)
def _to_dense_status(layout, kind, order_status, lay, out):
    """``(status, keep)`` of ``to_dense``: the strides of the ``dense_like`` kernel of
    ``kind`` in ``out``, the axis order given there with its filler's status
    ``order_status``; ``keep`` when the layout itself is the result. The branches are
    here, out of the IR-inlined method (see ``_dense_into``)."""
    status = order_status
    same = 0
    if status == S.OK:
        _pack(layout, lay)
        kernel_status, _, _, _, same = K.dense_like(lay, len(layout.shape), layout.itemsize, kind, out)
        status = _dense_status(kernel_status)
    # as the Python class: an explicit order (kind 2) makes a new layout
    return status, kind != 2 and same != 0 and layout.slice_offset == 0


@register_jitable(forceinline=True)
def _either(condition, if_true, if_false):
    """``if_true if condition else if_false``, a select for IR-inlined methods (which
    must not branch: see ``_dense_into``)."""
    return if_true if condition else if_false


def _no_static_ndim(name):
    return (
        f"StridedLayout.{name}() gives a number of dimensions that depends on run-time "
        "values, which compiled code cannot type; call it from Python, or use "
        "reshaped() with the shape you expect"
    )


@overload_method(StridedLayoutType, "squeezed")
def _squeezed(layout):
    raise TypingError(_no_static_ndim("squeezed"))


@overload_method(StridedLayoutType, "flattened")
def _flattened(layout, start_axis=0, end_axis=-1, mask=None):  # Python's arguments
    raise TypingError(_no_static_ndim("flattened"))


def python_only(owner, name, why, method=True):
    """Register ``name`` on ``owner`` (a compiled type) as a one-line typing error.

    For what only Python has (strings, Python objects, the driver): compiled code that
    uses it fails to compile with ``why`` instead of Numba's generic "Unknown attribute"
    (or, for ``repr``/``str``, a placeholder string).
    """

    def typer(value, *args, **kwargs):
        raise TypingError(why)

    register = overload_method if method else overload_attribute
    register(owner, name)(typer)


_NO_REPR = (
    "a StridedLayout has no repr() or str() in compiled code (Numba strings are not "
    "Python's); return the layout (or its shape and strides) and format it in Python"
)
python_only(StridedLayoutType, "__repr__", _NO_REPR)
python_only(StridedLayoutType, "__str__", _NO_REPR)


@overload_method(StridedLayoutType, "__hash__")
def _hash(layout):
    """``hash(layout)``: the Python class's hash (the same key tuple, hashed as CPython
    hashes tuples of ints), so that equal layouts hash alike in both worlds."""
    n = layout.ndim

    if n == 0:  # Numba cannot hash (): the key's () entries are given by their hash
        empty = _prehashed_constant(hash(()))
        return lambda layout: hash((empty, empty, layout.itemsize, layout.slice_offset))

    def impl(layout):
        used = _stack_int64(n)  # the strides with those of extent-1 axes (never used) 0
        empty = False
        for i in range(n):
            empty |= layout.shape[i] == 0
            used[i] = 0 if layout.shape[i] == 1 else layout.strides[i]
        if empty:
            return hash((layout.shape, layout.itemsize))
        return hash((layout.shape, _tuple_from(used, 0, n), layout.itemsize, layout.slice_offset))

    return impl


class _Prehashed(types.Type):
    """A value that stands for an object whose hash is known (``hash(x)`` is the value)."""

    def __init__(self):
        super().__init__(name="prehashed")


_PREHASHED = _Prehashed()


@register_model(_Prehashed)
class _PrehashedModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.IntType(64))


class _PrehashedConstant:
    """A constant whose hash is ``value`` (typed ``_Prehashed``, lowered as ``value``)."""

    def __init__(self, value):
        self.value = value


def _prehashed_constant(value):
    return _PrehashedConstant(value)


@typeof_impl.register(_PrehashedConstant)
def _typeof_prehashed(value, context):
    return _PREHASHED


@lower_constant(_Prehashed)
def _constant_prehashed(context, builder, typ, value):
    return ir.Constant(ir.IntType(64), value.value)


@intrinsic
def _prehashed_value(typingctx, value):
    if not isinstance(value, _Prehashed):
        return None
    return types.int64(value), lambda context, builder, sig, args: args[0]


@overload_method(_Prehashed, "__hash__")
def _prehashed_hash(value):
    return lambda value: _prehashed_value(value)


# ------------------------------------------------------------------ indexing
@type_callable(operator.getitem)
def _type_getitem(context):
    def typer(layout, index):
        if not isinstance(layout, StridedLayoutType):
            return None
        plan = plan_for_type(index, layout.ndim)
        if plan.ndim > MAX_NDIM:
            raise TypingError(f"the indexed layout would have {plan.ndim} dimensions")
        return Signature(layout_type(plan.ndim), (layout, index), None)

    return typer


@lower_builtin(operator.getitem, StridedLayoutType, types.Any)
def _lower_getitem(context, builder, sig, args):
    typ, index_type = sig.args
    plan = plan_for_type(index_type, typ.ndim)
    struct = cgutils.create_struct_proxy(typ)(context, builder, value=args[0])
    offset, shape, strides = lower_index(
        context, builder, plan, index_type, args[1],
        cgutils.unpack_tuple(builder, struct.shape, typ.ndim),
        cgutils.unpack_tuple(builder, struct.strides, typ.ndim),
        struct.slice_offset, struct.itemsize, True, "index",
    )  # fmt: skip
    return _layout_value(context, builder, sig.return_type, shape, strides, struct.itemsize, offset)


@inline_method(StridedLayoutType, "sliced")
def _sliced(layout, slices):
    return lambda layout, slices: layout[slices]
