"""Basic indexing in compiled code: one planner and one lowering, for layouts and views.

An index is one entry or a tuple of entries: integers, slices, ``None`` (a new axis of
extent 1) and at most one ``...``. Only the *kinds* of the entries decide the shape of the
result, so :func:`plan_index` works on kinds: compiled code plans from the entry types
when it is typed (:func:`plan_for_type`), the CUDA simulator from the entry values
(:func:`plan_for_values`), and both apply the same plan.

:func:`lower_index` emits the arithmetic of a plan in place, in the function being
compiled (CPU or CUDA): a failed check raises there, so a kernel compiled with
``debug=True`` reports it (an exception raised in a called device function would not be).
Slices follow Python's ``slice.indices``, computed by :func:`layoutkit._kernels.slice_axis`,
the same rule the Python ``StridedLayout`` uses.
"""

from functools import cache
from typing import NamedTuple

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.typing import signature

from . import _kernels
from ._errors import AxisError
from ._numba_checks import checked_index, raise_in_place

__all__ = ["IndexPlan", "lower_index", "plan_for_type", "plan_for_values", "plan_index"]


class IndexPlan(NamedTuple):
    """What an index does, axis by axis.

    Attributes
    ----------
    steps : tuple of (str, int or None)
        One ``(op, position)`` per consumed or created axis, in order: ``op`` is ``"int"``
        (drop the axis at that index), ``"slice"``, ``"new"`` (insert an extent-1 axis) or
        ``"keep"`` (an axis the index does not mention, ``position`` None); ``position``
        is the entry's place in the index.
    ndim : int
        Number of dimensions of the result.
    is_element : bool
        Whether the index names one element (an integer for every axis and no ``...``),
        as NumPy returns a scalar for ``a[1, 2]`` but a 0-d array for ``a[1, 2, ...]``.
    """

    steps: tuple
    ndim: int
    is_element: bool


def plan_index(kinds, ndim):
    """Plan an index whose entries have ``kinds`` for an operand of ``ndim`` dimensions.

    Parameters
    ----------
    kinds : sequence of {"int", "slice", "new", "ellipsis"}
    ndim : int

    Raises
    ------
    IndexError
        For two ellipses, or more integers and slices than dimensions.

    Examples
    --------
    >>> plan_index(("int", "ellipsis", "new"), 3)
    IndexPlan(steps=(('int', 0), ('keep', None), ('keep', None), ('new', 2)), ndim=3, is_element=False)
    >>> plan_index(("int", "int"), 2).is_element
    True
    """
    consumed = sum(kind == "int" or kind == "slice" for kind in kinds)
    ellipses = sum(kind == "ellipsis" for kind in kinds)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise IndexError(f"too many indices: {consumed} for {ndim} dimensions")
    rest = (("keep", None),) * (ndim - consumed)
    steps = []
    for position, kind in enumerate(kinds):
        if kind == "ellipsis":
            steps.extend(rest)
        else:
            steps.append((kind, position))
    if not ellipses:
        steps.extend(rest)
    result_ndim = sum(op != "int" for op, _ in steps)
    return IndexPlan(tuple(steps), result_ndim, result_ndim == 0 and not ellipses)


def _entries(index, is_tuple):
    return tuple(index) if is_tuple else (index,)


@cache
def plan_for_type(index_type, ndim):
    """The plan of a Numba index type (a type or a tuple type); TypingError if unsupported."""
    kinds = []
    for entry in _entries(index_type, isinstance(index_type, types.BaseTuple)):
        if isinstance(entry, types.Integer):
            kinds.append("int")
        elif isinstance(entry, types.SliceType):
            kinds.append("slice")
        elif isinstance(entry, types.NoneType):
            kinds.append("new")
        elif isinstance(entry, types.EllipsisType):
            kinds.append("ellipsis")
        else:
            raise TypingError(
                f"index entries must be integers, slices, None or ..., got {entry} "
                "(compiled code has basic indexing only)"
            )
    try:
        return plan_index(kinds, ndim)
    except IndexError as error:
        raise TypingError(str(error)) from None


def plan_for_values(index, ndim):
    """The plan of a Python index value (as ``plan_for_type`` for its types).

    Raises
    ------
    TypeError
        For an entry that is not an integer, a slice, None or Ellipsis (booleans
        included: NumPy reads them as masks).
    IndexError
        As :func:`plan_index`.
    """
    kinds = []
    for entry in _entries(index, type(index) is tuple):
        if entry is None:
            kinds.append("new")
        elif entry is Ellipsis:
            kinds.append("ellipsis")
        elif isinstance(entry, slice):
            kinds.append("slice")
        elif hasattr(entry, "__index__") and not isinstance(entry, bool):
            kinds.append("int")
        else:
            raise TypeError(
                f"index entries must be integers, slices, None or ..., got {entry!r}"
            )
    return plan_index(kinds, ndim)


# ---------------------------------------------------------------------------------------
# lowering


_SLICE_ONE_SIGNATURE = signature(
    types.UniTuple(types.int64, 4), *(types.int64,) * 6, types.boolean, types.boolean, types.int64
)
_STEP_OFFSET_SIGNATURE = signature(types.UniTuple(types.int64, 2), *(types.int64,) * 3)
_MUL_FITS_SIGNATURE = signature(types.boolean, types.int64, types.int64)


def lower_index(
    context, builder, plan, index_type, index, shape, strides, offset, itemsize, check, what
):
    """Emit a planned basic index: returns (element offset, new shape, new strides).

    The rule of :func:`layoutkit._kernels.apply_index` (NumPy's basic indexing), applied
    entry by entry with its building blocks, so that nothing is stored: slices are
    :func:`~layoutkit._kernels.slice_one` (an empty slice keeps the stride and the
    offset; a new stride must fit in int64 in bytes, ``OverflowError`` otherwise), an
    integer adds its element's offset (range-checked if ``check``), a new axis has
    extent 1 and stride 0.

    Parameters
    ----------
    plan : IndexPlan
    index_type, index : numba type and LLVM value of the index
    shape, strides : lists of int64 LLVM values (strides in elements)
    offset : int64 LLVM value
        The operand's slice offset; the returned offset includes it.
    itemsize : int64 LLVM value
        Bytes per element (the byte limit of new strides).
    check : bool
        Range-check integer entries (``AxisError``, an ``IndexError``, with a message
        naming the axis: the class Python's layouts and views raise), and check
        what ``apply_index`` checks of the offset: that it fits in int64 (in bytes for
        an empty result), which only a zero-volume operand can break.
    what : str
        How messages name the operand, e.g. ``"view index"``.
    """
    int64 = ir.IntType(64)
    is_tuple = isinstance(index_type, types.BaseTuple)
    entry_types = _entries(index_type, is_tuple)
    entries = cgutils.unpack_tuple(builder, index, len(entry_types)) if is_tuple else [index]
    new_shape, new_strides = [], []
    axis = 0
    for op, position in plan.steps:
        if op == "new":
            new_shape.append(ir.Constant(int64, 1))
            new_strides.append(ir.Constant(int64, 0))  # NumPy's stride for a new axis
            continue
        extent, stride = shape[axis], strides[axis]
        if op == "int":
            value = checked_index(
                context, builder, entries[position], entry_types[position], extent, check,
                AxisError, f"{what} out of bounds on axis {axis}",
            )  # fmt: skip
            if check:
                status, offset = _call(
                    context, builder, _kernels.step_offset, _STEP_OFFSET_SIGNATURE,
                    (offset, value, stride),
                )  # fmt: skip
                _raise_if(context, builder, status, f"{what} on axis {axis}: the offset does not fit in int64")
            else:
                offset = builder.add(offset, builder.mul(value, stride))
        elif op == "slice":
            slice_type = entry_types[position]
            sl = context.make_helper(builder, slice_type, entries[position])
            step = sl.step if slice_type.has_step else ir.Constant(int64, 1)
            with cgutils.if_unlikely(builder, cgutils.is_scalar_zero(builder, step)):
                raise_in_place(context, builder, ValueError, "slice step cannot be zero")
            yes = ir.Constant(ir.IntType(1), 1)
            # numba gives a missing start/stop a value that clamps to the same bound
            status, offset, length, new_stride = _call(
                context, builder, _kernels.slice_one, _SLICE_ONE_SIGNATURE,
                (offset, extent, stride, sl.start, sl.stop, step, yes, yes, itemsize),
            )  # fmt: skip
            _raise_if(
                context, builder, status,
                f"{what} on axis {axis}: the new offset or stride does not fit in int64 in bytes",
            )  # fmt: skip
            new_shape.append(length)
            new_strides.append(new_stride)
        else:
            new_shape.append(extent)
            new_strides.append(stride)
        axis += 1
    if check:
        empty = cgutils.false_bit
        for extent in new_shape:
            empty = builder.or_(empty, builder.icmp_signed("==", extent, ir.Constant(int64, 0)))
        with builder.if_then(empty, likely=False):
            fits = context.compile_internal(
                builder, _kernels.mul_fits.py_func, _MUL_FITS_SIGNATURE, (offset, itemsize)
            )
            with cgutils.if_unlikely(builder, builder.not_(fits)):
                raise_in_place(
                    context, builder, OverflowError, f"{what}: the offset in bytes does not fit in int64"
                )
    return offset, new_shape, new_strides


def _call(context, builder, kernel, sig, args):
    """The values of the tuple ``kernel(*args)`` returns (compiled in the current target)."""
    result = context.compile_internal(builder, kernel.py_func, sig, args)
    return cgutils.unpack_tuple(builder, result, len(sig.return_type))


def _raise_if(context, builder, status, message):
    """Raise ``OverflowError(message)`` in place if ``status`` is not 0 (a kernel's)."""
    with cgutils.if_unlikely(builder, cgutils.is_not_null(builder, status)):
        raise_in_place(context, builder, OverflowError, message)
