"""Load and store one unit of 1, 2, 4, 8 or 16 bytes at a raw address, in compiled code.

Two Numba intrinsics shared by the CPU (``@njit``) and GPU (``@cuda.jit``) copy kernels.
The unit's type is given by a prototype value: ``uint8`` ... ``uint64`` for 1 to 8 bytes,
a pair of ``uint64`` for 16 bytes (one vector access: ``ld.global.v2.u64`` on a GPU).
Addresses must be aligned to the unit size; the planner guarantees it. Both take the
unit's width from a prototype argument, so the width of every access is fixed by the
caller, not by how Numba types the value.

On a GPU the accesses go through the global address space.
"""

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: A prototype value of each unit size, passed to the kernels to select the unit type.
UNIT_PROTOTYPES = {
    1: np.uint8(0),
    2: np.uint16(0),
    4: np.uint32(0),
    8: np.uint64(0),
    16: (np.uint64(0), np.uint64(0)),
}

_PAIR = ir.VectorType(ir.IntType(64), 2)


def _is_cuda(context):
    return type(context).__module__.startswith("numba.cuda")


def _pointer(context, builder, address, value_type):
    space = 1 if _is_cuda(context) else 0
    return builder.inttoptr(address, ir.PointerType(value_type, addrspace=space))


def _check_unit(unit):
    if isinstance(unit, types.UniTuple) and unit.count == 2 and unit.dtype == types.uint64:
        return True
    return isinstance(unit, types.Integer) and not unit.signed and unit.bitwidth <= 64


@intrinsic
def load_unit(typingctx, address, prototype):
    """Load the unit at integer ``address``; its type is that of ``prototype``."""
    if not isinstance(address, types.Integer) or not _check_unit(prototype):
        return None

    def codegen(context, builder, signature, args):
        address_value = builder.zext(args[0], ir.IntType(64)) if address.bitwidth < 64 else args[0]
        if isinstance(prototype, types.UniTuple):
            vector = builder.load(_pointer(context, builder, address_value, _PAIR), align=16)
            parts = [
                builder.extract_element(vector, ir.Constant(ir.IntType(32), i)) for i in (0, 1)
            ]
            return context.make_tuple(builder, signature.return_type, parts)
        value_type = ir.IntType(prototype.bitwidth)
        pointer = _pointer(context, builder, address_value, value_type)
        return builder.load(pointer, align=prototype.bitwidth // 8)

    return prototype(address, prototype), codegen


@intrinsic
def store_unit(typingctx, address, value, prototype):
    """Store ``value`` at integer ``address`` as a unit of ``prototype``'s type.

    The width of the store is the prototype's, never the value's: Numba types arithmetic
    on narrow unsigned integers as 64-bit (``np.uint32(a) | np.uint32(b)`` is a
    ``uint64``), so a value built from shifts and masks would otherwise be stored 8 bytes
    wide. An integer value is truncated or zero-extended to the prototype's width; a
    16-byte unit needs a pair of ``uint64``.
    """
    if not isinstance(address, types.Integer) or not _check_unit(prototype):
        return None
    pair = isinstance(prototype, types.UniTuple)
    if pair != isinstance(value, types.UniTuple) or not _check_unit(value):
        return None

    def codegen(context, builder, signature, args):
        address_value = builder.zext(args[0], ir.IntType(64)) if address.bitwidth < 64 else args[0]
        if pair:
            vector = ir.Constant(_PAIR, ir.Undefined)
            for i in (0, 1):
                part = builder.extract_value(args[1], i)
                vector = builder.insert_element(vector, part, ir.Constant(ir.IntType(32), i))
            builder.store(vector, _pointer(context, builder, address_value, _PAIR), align=16)
        else:
            value_type = ir.IntType(prototype.bitwidth)
            stored = args[1]
            if value.bitwidth > prototype.bitwidth:
                stored = builder.trunc(stored, value_type)
            elif value.bitwidth < prototype.bitwidth:
                stored = builder.zext(stored, value_type)
            pointer = _pointer(context, builder, address_value, value_type)
            builder.store(stored, pointer, align=prototype.bitwidth // 8)
        return context.get_dummy_value()

    return types.none(address, value, prototype), codegen


@intrinsic
def copy_bytes(typingctx, dst, src, nbytes):
    """``memcpy(dst, src, nbytes)`` between integer addresses (CPU kernels only)."""
    if not all(isinstance(t, types.Integer) for t in (dst, src, nbytes)):
        return None

    def codegen(context, builder, signature, args):
        byte_pointer = ir.IntType(8).as_pointer()
        dst_pointer = builder.inttoptr(args[0], byte_pointer)
        src_pointer = builder.inttoptr(args[1], byte_pointer)
        cgutils.raw_memcpy(builder, dst_pointer, src_pointer, args[2], 1)
        return context.get_dummy_value()

    return types.none(dst, src, nbytes), codegen
