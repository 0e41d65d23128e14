"""Code generation for unboxers and boxers: read Python objects at C speed.

Numba's own helpers look attributes up by C string (a new ``str`` per call) and call
Python helpers through a pickle cache. The unboxers of layouts and views run at every
``@njit`` call, so these helpers keep interned attribute names in module globals (null
when the compiled code is loaded, so cached code stays valid in a new process) and read
tuples of ints with the C API directly.

Failures follow the C API convention: a Python exception is set and the caller checks
:func:`failed` once, at the end (every helper skips its work once an exception is set).
"""

from llvmlite import ir
from numba.core import cgutils

__all__ = ["Objects", "cached_name", "call_python", "failed", "getattr_fast", "linked_class",
           "read_int64s"]


def cached_name(c, name):
    """The interned ``str`` ``name`` as a ``PyObject*`` (made once per process), or NULL."""
    builder = c.builder
    module = builder.module
    symbol = f"_layoutkit_name_{name}"
    slot = module.globals.get(symbol)
    if slot is None:
        slot = ir.GlobalVariable(module, c.pyapi.pyobj, symbol)
        slot.linkage = "internal"
        slot.initializer = ir.Constant(c.pyapi.pyobj, None)
    with builder.if_then(cgutils.is_null(builder, builder.load(slot)), likely=False):
        fnty = ir.FunctionType(c.pyapi.pyobj, [c.pyapi.cstring])
        intern = c.pyapi._get_function(fnty, name="PyUnicode_InternFromString")
        builder.store(builder.call(intern, [c.context.insert_const_string(module, name)]), slot)
    return builder.load(slot)


def linked_class(c, symbol):
    """The class that ``symbol`` names (``llvmlite.binding.add_symbol(symbol, id(cls))``),
    as a ``PyObject*`` in the function being compiled: an external symbol, declared in its
    module once, which cached code links to in a new process as Numba links
    ``_Py_NoneStruct``."""
    module = c.builder.module
    slot = module.globals.get(symbol)
    if slot is None:
        slot = ir.GlobalVariable(module, ir.IntType(8), symbol)
        slot.linkage = "external"
    return c.builder.bitcast(slot, c.pyapi.pyobj)


def failed(c):
    """An ``i1``: whether a Python exception is set."""
    return cgutils.is_not_null(c.builder, c.pyapi.err_occurred())


class Objects:
    """New references made while unboxing one argument, released together (NULL-safe)."""

    def __init__(self, c):
        self._c = c
        self._slots = []

    def keep(self, value):
        slot = cgutils.alloca_once_value(self._c.builder, value)
        self._slots.append(slot)
        return value

    def release(self):
        for slot in self._slots:
            self._c.pyapi.decref(self._c.builder.load(slot))


def getattr_fast(c, objects, obj, name):
    """``obj.name`` (a new reference kept in ``objects``), or NULL with an exception set."""
    builder = c.builder
    result = cgutils.alloca_once_value(builder, c.pyapi.get_null_object())
    with builder.if_then(builder.not_(failed(c)), likely=True):
        name_obj = cached_name(c, name)
        with builder.if_then(cgutils.is_not_null(builder, name_obj), likely=True):
            builder.store(c.pyapi.object_getattr(obj, name_obj), result)
    return objects.keep(builder.load(result))


def read_int64s(c, tup, count, bad_argument):
    """The ``count`` ints of tuple ``tup`` as int64 values (zeros after a failure).

    A NULL ``tup`` is a failure already reported; anything but a tuple of ``count``
    items calls ``bad_argument()``, which must set an exception.
    """
    builder = c.builder
    int64 = ir.IntType(64)
    slots = [cgutils.alloca_once_value(builder, ir.Constant(int64, 0)) for _ in range(count)]
    with builder.if_then(builder.not_(failed(c)), likely=True):
        size = c.pyapi.tuple_size(tup)
        right = builder.icmp_signed("==", size, ir.Constant(size.type, count))
        with builder.if_else(right, likely=True) as (good, bad):
            with good:
                for position, slot in enumerate(slots):
                    item = c.pyapi.tuple_getitem(tup, position)
                    builder.store(c.pyapi.long_as_longlong(item), slot)
            with bad:
                c.pyapi.err_clear()  # PyTuple_Size of a non-tuple: replaced by our message
                bad_argument()
    return [builder.load(slot) for slot in slots]


def call_python(c, objects, function, args):
    """Call the module-level Python ``function`` with ``args`` (PyObject*): a new reference.

    The function is found through Numba's pickle cache, which costs about a microsecond:
    for boxing and error paths, not for the unboxing fast path.
    """
    callee = c.pyapi.unserialize(c.pyapi.serialize_object(function))
    result = objects.keep(c.pyapi.call_function_objargs(callee, args))
    c.pyapi.decref(callee)
    return result
