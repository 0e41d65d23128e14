"""Native code from llvmlite: a DLPack capsule made by one call, and trampolines.

:func:`compile_trampolines` makes the native entry points of the DLPack exchange API's
ctypes callbacks, which raise a failing callback's exception in its C caller (see there).
The rest of this module is the packer: allocate, copy, take a reference, wrap.

From Python, a capsule of a new managed tensor takes three ctypes calls
(``PyMem_Malloc``, ``Py_IncRef``, ``PyCapsule_New``), about 0.5 µs of the 0.7 µs an
export costs on the CPU machine. :func:`compile_packer` has llvmlite (Numba's code
generator, installed with it) compile, once per process, the function below, which
makes the same C calls from native code in one ctypes call (about 0.2 µs)::

    PyObject *pack(PyObject *exporter, const char *header) {
        void *block = PyMem_Malloc(SIZE);
        if (!block) return PyErr_NoMemory();
        memcpy(block, header, SIZE);       /* the managed tensor's bytes */
        Py_IncRef(exporter);               /* manager_ctx's reference */
        PyObject *capsule = PyCapsule_New(block, NAME, DESTRUCTOR);
        if (!capsule) DELETER(block);      /* frees the block, drops the reference */
        return capsule;
    }

``SIZE``, ``NAME``, ``DESTRUCTOR`` and ``DELETER`` are constants of the process (the
compiled code is never cached). The deleter must be a C function that frees the block
and drops one reference without disturbing a pending exception (NumPy's, see
:mod:`~layoutkit.interop.dlpack`). Where llvmlite cannot compile, ``None`` is
returned and the caller keeps its ctypes calls.

Examples
--------
>>> import ctypes
>>> from layoutkit.interop._packer import function_address
>>> function_address(ctypes.pythonapi.Py_IncRef) != 0
True
"""

import ctypes
import threading

__all__ = ["compile_packer", "compile_trampolines", "function_address"]

_lock = threading.Lock()
_engines = []  # the JIT engines (their code lives as long as they do): kept for good


def function_address(function):
    """The address of the C function behind a ctypes function object."""
    return ctypes.cast(function, ctypes.c_void_p).value


def compile_packer(size, name, destructor, deleter):
    """``pack(id(exporter), header_address)`` for managed tensors of ``size`` bytes, or None.

    Parameters
    ----------
    size : int
        Bytes of the managed tensor (``header_address`` points at that many).
    name, destructor, deleter : int
        Addresses of the capsule's name (a C string that lives for good), its
        destructor and the tensor's deleter.

    Returns
    -------
    callable or None
        ``pack(id(exporter), header_address)`` returns the new capsule (the caller keeps
        ``exporter`` alive during the call) and raises what
        ``PyMem_Malloc`` / ``PyCapsule_New`` report (``MemoryError``); None where
        llvmlite is missing or cannot compile for this machine.
    """
    try:
        address = _compile(size, name, destructor, deleter)
    except Exception:  # no llvmlite, or no native target: the ctypes calls stay
        return None
    # the exporter goes in as id(exporter): c_void_p arguments convert fastest
    return ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p)(address)


def _compile(size, name, destructor, deleter):
    from llvmlite import ir

    api = ctypes.pythonapi
    word = ir.IntType(64 if ctypes.sizeof(ctypes.c_void_p) == 8 else 32)
    module = ir.Module(name="layoutkit_packer")
    function = ir.Function(module, ir.FunctionType(word, [word, word]), name="pack")
    exporter, header = function.args
    builder = ir.IRBuilder(function.append_basic_block("entry"))

    def call(address, returns, *args):
        return _call(builder, word, address, returns, *args)

    void = ir.VoidType()
    zero = ir.Constant(word, 0)
    block = call(function_address(api.PyMem_Malloc), word, ir.Constant(word, size))
    with builder.if_then(builder.icmp_unsigned("==", block, zero), likely=False):
        builder.ret(call(function_address(api.PyErr_NoMemory), word))
    call(function_address(ctypes.memmove), word, block, header, ir.Constant(word, size))
    call(function_address(api.Py_IncRef), void, exporter)
    capsule = call(
        function_address(api.PyCapsule_New), word, block, ir.Constant(word, name),
        ir.Constant(word, destructor),
    )  # fmt: skip
    with builder.if_then(builder.icmp_unsigned("==", capsule, zero), likely=False):
        call(deleter, void, block)
    builder.ret(capsule)

    return _native(module, ["pack"])[0]


def compile_trampolines(functions):
    """Native entry points for ctypes callbacks that report a Python exception to C.

    A ctypes callback cannot return to C with a Python exception set: ctypes prints an
    exception that escapes it and clears it. C APIs whose functions return "-1 with a
    Python exception set" (DLPack's exchange API) need one set, so for each callback this
    compiles a native function with the callback's arguments that passes it one more, a
    place for the exception to raise, and raises it there once the callback returned::

        int trampoline(args...) {
            if (!object_arg) {                          /* each "o" argument */
                PyGILState_STATE gil = PyGILState_Ensure();
                PyErr_SetString(PyExc_RuntimeError, "NAME: py_object cannot be NULL");
                PyGILState_Release(gil);
                return -1;
            }
            PyObject *raised[3] = {NULL, NULL, NULL};  /* type, value, traceback */
            int result = callback(args..., raised);
            if (raised[0]) {                            /* the callback stored an exception */
                PyGILState_STATE gil = PyGILState_Ensure();
                PyErr_Restore(raised[0], raised[1], raised[2]);  /* takes the references */
                PyGILState_Release(gil);
            }
            return result;
        }

    A NULL object never reaches the callback: ctypes cannot convert it to a ``py_object``
    argument, and then skips the callback and returns an unset C int (0 as often as not,
    which the caller would read as success).

    Parameters
    ----------
    functions : sequence of (str, str, int)
        For each callback, the name its failures are reported under, its C arguments
        (``"p"`` a pointer, ``"o"`` a ``PyObject *`` that must not be NULL, ``"i"`` a
        32-bit int, one letter each) and its address; it takes one more pointer argument,
        ``raised``, and returns a C int. A callback that fails stores new references to the
        exception's type, value and traceback (or NULL) at ``raised`` and returns its
        failure value.

    Returns
    -------
    list of int
        The trampolines' addresses, in the order of ``functions``. They live for good.

    Raises
    ------
    ImportError, RuntimeError
        Where llvmlite is missing or cannot compile for this machine.
    """
    from llvmlite import ir

    api = ctypes.pythonapi
    word = ir.IntType(64 if ctypes.sizeof(ctypes.c_void_p) == 8 else 32)
    int32 = ir.IntType(32)
    module = ir.Module(name="layoutkit_trampolines")
    runtime_error = ctypes.c_void_p.in_dll(api, "PyExc_RuntimeError").value
    names = []
    for number, (name, arguments, callback) in enumerate(functions):
        types = [int32 if kind == "i" else word for kind in arguments]
        function = ir.Function(module, ir.FunctionType(int32, types), name=f"t{number}")
        builder = ir.IRBuilder(function.append_basic_block("entry"))
        for kind, argument in zip(arguments, function.args):
            if kind != "o":
                continue
            null = builder.icmp_unsigned("==", argument, ir.Constant(word, 0))
            with builder.if_then(null, likely=False):
                gil = _call(builder, word, function_address(api.PyGILState_Ensure), int32)
                message = _c_string(module, f"m{number}", f"{name}: py_object cannot be NULL")
                _call(builder, word, function_address(api.PyErr_SetString), ir.VoidType(),
                      ir.Constant(word, runtime_error), builder.ptrtoint(message, word))  # fmt: skip
                _call(builder, word, function_address(api.PyGILState_Release), ir.VoidType(), gil)
                builder.ret(ir.Constant(int32, -1))
        raised = builder.alloca(word, 3)
        for at in range(3):
            builder.store(ir.Constant(word, 0), builder.gep(raised, [ir.Constant(int32, at)]))
        inner = ir.FunctionType(int32, [*types, word]).as_pointer()
        result = builder.call(
            builder.inttoptr(ir.Constant(word, callback), inner),
            [*function.args, builder.ptrtoint(raised, word)],
        )
        kind = builder.load(raised)
        with builder.if_then(builder.icmp_unsigned("!=", kind, ir.Constant(word, 0))):
            gil = _call(builder, word, function_address(api.PyGILState_Ensure), int32)
            values = [builder.load(builder.gep(raised, [ir.Constant(int32, at)])) for at in range(3)]
            _call(builder, word, function_address(api.PyErr_Restore), ir.VoidType(), *values)
            _call(builder, word, function_address(api.PyGILState_Release), ir.VoidType(), gil)
        builder.ret(result)
        names.append(function.name)
    return _native(module, names)


def _c_string(module, name, text):
    """A constant NUL-terminated string in ``module`` (a pointer to its first byte)."""
    from llvmlite import ir

    data = bytearray(text.encode() + b"\0")
    kind = ir.ArrayType(ir.IntType(8), len(data))
    variable = ir.GlobalVariable(module, kind, name=name)
    variable.initializer = ir.Constant(kind, data)
    variable.global_constant = True
    return variable.gep([ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 0)])


def _call(builder, word, address, returns, *args):
    from llvmlite import ir

    kind = ir.FunctionType(returns, [arg.type for arg in args])
    return builder.call(builder.inttoptr(ir.Constant(word, address), kind.as_pointer()), args)


def _native(module, names):
    """Compile ``module`` with MCJIT and return the addresses of ``names`` (kept for good)."""
    import llvmlite.binding as llvm

    with _lock:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        machine = llvm.Target.from_default_triple().create_target_machine()
        parsed = llvm.parse_assembly(str(module))
        parsed.verify()
        engine = llvm.create_mcjit_compiler(parsed, machine)
        engine.finalize_object()
        _engines.append(engine)
        return [engine.get_function_address(name) for name in names]
