"""Raising from compiled code in place, so that CUDA kernels report the right exception.

numba-cuda reports a device exception (with ``debug=True``) by looking its code up in the
*kernel's* own table; an exception raised in a called device function has a code from
that function's table, so the kernel reports an unknown or a wrong exception. Every check
of layoutkit's compiled methods therefore runs in two parts: the arithmetic, compiled
once as an ordinary function that returns a status code (0 for success, one of
the codes below otherwise), and a raise emitted into the caller by :func:`status_raiser`
(methods are small wrappers inlined into the caller: :func:`inline_method`). Indexing,
``offset_of`` and the constructor raise through :func:`raise_in_place` directly.

Inlined methods are registered once per target: numba-cuda inlines the Numba IR of an
overload registered with Numba's own ``extending`` module as if it were its own, and
fails on a function with more than one block.
"""

import functools

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload_classmethod, overload_method

from ._errors import AxisError

__all__ = [
    "checked_index",
    "inline_classmethod",
    "inline_method",
    "raise_in_place",
    "raise_status",
    "register_cuda_inline",
    "status_error",
    "status_raiser",
]


# Status codes returned by the checks of compiled layout methods (0: success).
OK = 0
ITEMSIZE_NOT_POSITIVE = 1
ITEMSIZE_TOO_LARGE = 2
NEGATIVE_EXTENT = 3
VOLUME_OVERFLOW = 4
OFFSET_OVERFLOW = 5
BYTES_OVERFLOW = 6
STRIDE_NOT_MULTIPLE = 7
AXIS_OUT_OF_RANGE = 8
REPEATED_AXIS = 9
TWO_UNKNOWN_EXTENTS = 10
AMBIGUOUS_UNKNOWN_EXTENT = 11
INDIVISIBLE_VOLUME = 12
VOLUMES_DIFFER = 13
RESHAPE_NEEDS_COPY = 14
BROADCAST_MISMATCH = 15
PACK_NOT_MULTIPLE = 16
PACK_MISALIGNED = 17
UNPACK_NOT_DIVISOR = 18
REPACK_INCOMPATIBLE = 19
MAX_ITEMSIZE_NOT_POSITIVE = 20
MAX_ITEMSIZE_TOO_SMALL = 21
REACHES_BEFORE_START = 22
ITEMSIZE_DIFFERS = 23
REACHES_BEFORE_BUFFER = 24
REACHES_PAST_BUFFER = 25
SIZE_OVERFLOW = 26
NOT_UNIQUE_WRITABLE = 27
DATA_PTR_OUT_OF_RANGE = 28


_MESSAGES = {
    ITEMSIZE_NOT_POSITIVE: (ValueError, "itemsize must be positive"),
    ITEMSIZE_TOO_LARGE: (OverflowError, "itemsize is too large (limit 2**31 - 1)"),
    NEGATIVE_EXTENT: (ValueError, "an extent is negative"),
    VOLUME_OVERFLOW: (OverflowError, "the volume does not fit in int64"),
    OFFSET_OVERFLOW: (OverflowError, "the element offsets do not fit in int64"),
    BYTES_OVERFLOW: (OverflowError, "the byte strides or byte offsets do not fit in int64"),
    STRIDE_NOT_MULTIPLE: (ValueError, "a stride in bytes is not a multiple of itemsize"),
    AXIS_OUT_OF_RANGE: (AxisError, "axis out of range"),
    REPEATED_AXIS: (ValueError, "repeated axis"),
    TWO_UNKNOWN_EXTENTS: (ValueError, "more than one -1 extent"),
    AMBIGUOUS_UNKNOWN_EXTENT: (ValueError, "the -1 extent is ambiguous with a zero extent"),
    INDIVISIBLE_VOLUME: (ValueError, "the volume is not divisible by the known extents"),
    VOLUMES_DIFFER: (ValueError, "the volumes differ"),
    RESHAPE_NEEDS_COPY: (
        ValueError, "the strides are incompatible (a copy would be needed)",
    ),
    BROADCAST_MISMATCH: (ValueError, "extents do not match"),
    PACK_NOT_MULTIPLE: (ValueError, "the new itemsize is not a multiple of the old one"),
    PACK_MISALIGNED: (ValueError, "data_ptr is not aligned to the new itemsize"),
    UNPACK_NOT_DIVISOR: (ValueError, "the new itemsize does not divide the old one"),
    REPACK_INCOMPATIBLE: (
        ValueError, "the layout is not compatible with the new itemsize",
    ),
    MAX_ITEMSIZE_NOT_POSITIVE: (ValueError, "max_itemsize must be positive"),
    MAX_ITEMSIZE_TOO_SMALL: (ValueError, "max_itemsize is smaller than the itemsize"),
    REACHES_BEFORE_START: (
        ValueError, "the layout reaches before its start: the size it needs is ambiguous",
    ),
    ITEMSIZE_DIFFERS: (ValueError, "the layout's itemsize differs from the view's"),
    REACHES_BEFORE_BUFFER: (ValueError, "the layout reaches before the view's buffer"),
    REACHES_PAST_BUFFER: (ValueError, "the layout reaches past the end of the view's buffer"),
    SIZE_OVERFLOW: (OverflowError, "the size in bytes does not fit in int64"),
    DATA_PTR_OUT_OF_RANGE: (OverflowError, "data_ptr must be an address in [0, 2**64)"),
    NOT_UNIQUE_WRITABLE: (
        ValueError,
        "the layout is not unique (a broadcast) and the view is writable: pass a read-only "
        "view (from_buffer(..., is_readonly=True))",
    ),
}  # fmt: skip


def status_error(status, operation):
    """The exception compiled code raises for a non-zero ``status`` (for Python callers)."""
    exc, message = _MESSAGES[status]
    return exc(f"{operation}: {message}")


def raise_in_place(context, builder, exc, message):
    """Raise ``exc(message)`` from the function being lowered (CPU or CUDA).

    numba-cuda keeps the calling convention on the function descriptor (its
    ``Context.call_conv`` is deprecated); the CPU target has it on the context.
    """
    call_conv = getattr(getattr(context, "fndesc", None), "call_conv", None)
    if call_conv is None:
        call_conv = context.call_conv
    call_conv.return_user_exc(builder, exc, (message,))


def raise_status(context, builder, status, operation):
    """Raise the error of a non-zero ``status`` (an LLVM int) in place, named ``operation``."""
    with cgutils.if_unlikely(builder, cgutils.is_not_null(builder, status)):
        for value, (exc, message) in _MESSAGES.items():
            with builder.if_then(builder.icmp_signed("==", status, status.type(value))):
                raise_in_place(context, builder, exc, f"{operation}: {message}")


def status_raiser(operation):
    """An intrinsic ``raiser(status)`` doing :func:`raise_status` in its caller.

    Messages are prefixed with ``operation`` (e.g. ``"permuted: repeated axis"``).
    """

    @intrinsic
    def raiser(typingctx, status):
        if not isinstance(status, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            raise_status(context, builder, args[0], operation)
            return context.get_dummy_value()

        return types.none(status), codegen

    return raiser


def checked_index(context, builder, value, value_type, extent, check, exc, message):
    """``value`` as int64, negative values counted from ``extent``; range-checked if ``check``."""
    value = context.cast(builder, value, value_type, types.int64)
    if value_type.signed:
        negative = builder.icmp_signed("<", value, ir.Constant(value.type, 0))
        value = builder.select(negative, builder.add(value, extent), value)
    if check:
        with cgutils.if_unlikely(builder, builder.icmp_unsigned(">=", value, extent)):
            raise_in_place(context, builder, exc, message)
    return value


# (register, type, name, typer) of every inlined method, for register_cuda_inline()
_INLINED = []


def inline_method(typ, name):
    """Decorator: ``overload_method(typ, name, inline="always")``, for the CPU now and for
    numba-cuda when :func:`register_cuda_inline` runs."""

    def decorate(typer):
        overload_method(typ, name, target="cpu", inline="always")(typer)
        _INLINED.append(("overload_method", typ, name, typer))
        return typer

    return decorate


def inline_classmethod(typ, name):
    """Decorator: :func:`inline_method` for a class method (``overload_classmethod``)."""

    def decorate(typer):
        overload_classmethod(typ, name, target="cpu", inline="always")(typer)
        _INLINED.append(("overload_classmethod", typ, name, typer))
        return typer

    return decorate


def register_cuda_inline():
    """Register every inlined method with numba-cuda (once; on import of layoutkit.cuda)."""
    from numba.cuda import extending as cuda_extending

    while _INLINED:
        register, typ, name, typer = _INLINED.pop(0)
        # a function object of its own: the same one in both registries would make
        # numba-cuda resolve calls between inlined methods to the CPU registration
        own = functools.wraps(typer)(lambda *args, typer=typer, **kwargs: typer(*args, **kwargs))
        getattr(cuda_extending, register)(typ, name, target="cuda", inline="always")(own)
