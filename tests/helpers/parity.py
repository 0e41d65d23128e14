"""The parity table of issue 11: every public name of ``StridedLayout`` and
``StridedMemoryView``, and what it does in Python, in ``@njit`` code, in CUDA kernels
(``compile_ptx``) and in the CUDA simulator.

Each :class:`Entry` is one use of a name, written as a Python expression over ``x`` (the
layout or view), ``L`` (``StridedLayout``) and ``np``. ``compiled`` says what compiled
code does with it: ``"same"`` (types, and gives Python's value or Python's exception
class) or ``"refused"`` (a one-line ``TypingError`` whose message contains ``why``).
``tests/test_parity.py`` walks the table, so a name added to either class without an
entry, or a compiled behaviour that drifts from Python, fails CI.
"""

from typing import NamedTuple

import numpy as np

from layoutkit import StridedLayout, StridedMemoryView


class Entry(NamedTuple):
    name: str  # the public name (or operator) the entry exercises
    subject: str  # "layout" or "view"
    expr: str  # a Python expression over x, L and np
    kind: str  # result: "int", "tuple", "layout", "view", "dtype", "none"
    compiled: str = "same"  # "same" or "refused"
    why: str = ""  # part of the TypingError message, for "refused"
    statement: bool = False  # expr is a statement (an assignment), result None
    cuda_why: str = ""  # set where CUDA kernels refuse what @njit code has (a TypingError)


L = StridedLayout


def layout_subject():
    """A 3-d layout with a slice offset and a negative stride (not dense, unique)."""
    return StridedLayout.dense((3, 4, 5), 4)[:, ::-1, 1:]


def view_subject():
    """A writable float32 view of the same shape as ``layout_subject`` (a fresh array)."""
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    return StridedMemoryView.from_array_interface(base[:, ::-1, 1:])


_LAYOUT = [
    # stored and derived properties
    ("ndim", "x.ndim", "int"),
    ("shape", "x.shape", "tuple"),
    ("strides", "x.strides", "tuple"),
    ("itemsize", "x.itemsize", "int"),
    ("slice_offset", "x.slice_offset", "int"),
    ("volume", "x.volume", "int"),
    ("offset_bounds", "x.offset_bounds", "tuple"),
    ("strides_in_bytes", "x.strides_in_bytes", "tuple"),
    ("slice_offset_in_bytes", "x.slice_offset_in_bytes", "int"),
    ("min_offset", "x.min_offset", "int"),
    ("max_offset", "x.max_offset", "int"),
    ("is_contiguous_c", "x.is_contiguous_c", "int"),
    ("is_contiguous_f", "x.is_contiguous_f", "int"),
    ("is_contiguous_any", "x.is_contiguous_any", "int"),
    ("is_dense", "x.is_dense", "int"),
    ("stride_order", "x.stride_order", "tuple"),
    ("is_unique", "x.is_unique", "int"),
    # methods, positional and keyword arguments, defaults
    ("required_size_in_bytes", "x.required_size_in_bytes()", "int"),
    ("flattened_axis_mask", "x.flattened_axis_mask()", "int"),
    ("offset_of", "x.offset_of((1, 2, -1))", "int"),
    ("offset_of", "x.offset_of(index=(1, 2, 3))", "int"),
    ("permuted", "x.permuted((2, 0, 1))", "layout"),
    ("permuted", "x.permuted(axis_order=(2, 0, 1))", "layout"),
    ("unsqueezed", "x.unsqueezed(0)", "layout"),
    ("unsqueezed", "x.unsqueezed(axis=(0, -1))", "layout"),
    ("broadcast_to", "x.broadcast_to((2, 3, 4, 4))", "layout"),
    ("broadcast_to", "x.broadcast_to(shape=(2, 3, 4, 4))", "layout"),
    ("reshaped", "x.to_dense().reshaped((12, 4))", "layout"),
    ("reshaped", "x.to_dense().reshaped(shape=(-1,))", "layout"),
    ("reshaped", "x.to_dense().reshaped(48)", "layout"),
    ("repacked", "x.to_dense().repacked(8)", "layout"),
    ("repacked", "x.to_dense().repacked(8, 0, -1, True)", "layout"),
    ("repacked", "x.to_dense().repacked(8, data_ptr=0, axis=-1, keep_dim=True)", "layout"),
    ("repacked", "x.to_dense('F').repacked(itemsize=2, axis=0)", "layout"),
    ("repacked", "x.repacked(itemsize=2, axis=0)", "layout"),  # ValueError in each
    ("max_compatible_itemsize", "x.to_dense().max_compatible_itemsize()", "int"),
    ("max_compatible_itemsize", "x.to_dense().max_compatible_itemsize(8)", "int"),
    (
        "max_compatible_itemsize",
        "x.to_dense().max_compatible_itemsize(max_itemsize=16, data_ptr=0, axis=-1)",
        "int",
    ),
    ("sliced", "x.sliced((1, slice(None, None, -2)))", "layout"),
    ("sliced", "x.sliced(slices=(slice(1, None), None, Ellipsis))", "layout"),
    ("sliced", "x.sliced(1)", "layout"),
    ("to_dense", "x.to_dense()", "layout"),
    ("to_dense", "x.to_dense('F')", "layout"),
    ("to_dense", "x.to_dense(stride_order='C')", "layout"),
    ("to_dense", "x.to_dense(stride_order=(2, 0, 1))", "layout"),
    ("to_dense", "x.to_dense(None)", "layout"),
    # constructors
    ("StridedLayout", "L((2, 3), (3, 1), 4)", "layout"),
    ("StridedLayout", "L((2, 3), None, 4)", "layout"),
    ("StridedLayout", "L((2, 3), (12, 4), 4, True)", "layout"),
    ("StridedLayout", "L((2, 3), (12, 4), 4, divide_strides=True)", "layout"),
    ("StridedLayout", "L(shape=(2, 3), strides=(3, 1), itemsize=4)", "layout"),
    ("dense", "L.dense((2, 3), 4)", "layout"),
    ("dense", "L.dense((2, 3), 4, 'F')", "layout"),
    ("dense", "L.dense((2, 3), 4, stride_order=(1, 0))", "layout"),
    ("dense", "L.dense(shape=(2, 3), itemsize=4)", "layout"),
    ("dense", "L.dense((2, 3), 4, None)", "layout"),
    ("dense_like", "L.dense_like(x)", "layout"),
    ("dense_like", "L.dense_like(x, 'F')", "layout"),
    ("dense_like", "L.dense_like(x, stride_order=(2, 1, 0))", "layout"),
    ("dense_like", "L.dense_like(other=x)", "layout"),
    # operators
    ("==", "x == x.permuted((0, 1, 2))", "int"),
    ("==", "x == x.to_dense()", "int"),
    ("!=", "x != x.to_dense()", "int"),
    ("hash", "hash(x)", "int", "same", "", False, "no hash()"),
    (
        "hash",
        "hash(L((2, 1), (1, 7), 4)) == hash(L((2, 1), (1, 0), 4))",
        "int", "same", "", False, "no hash()",
    ),  # fmt: skip
    ("hash", "hash(L((), (), 8))", "int", "same", "", False, "no hash()"),
    ("[]", "x[1]", "layout"),
    ("[]", "x[:, ::2, None, ...]", "layout"),
    ("[]", "x[-1, 1, 2].slice_offset", "int"),
    # what compiled code cannot type
    ("squeezed", "x.squeezed()", "layout", "refused", "number of dimensions"),
    ("flattened", "x.flattened()", "layout", "refused", "number of dimensions"),
    ("flattened", "x.flattened(1, 2)", "layout", "refused", "number of dimensions"),
    ("flattened", "x.flattened(mask=6)", "layout", "refused", "number of dimensions"),
    (
        "repacked",
        "x.to_dense().repacked(8, keep_dim=False)",
        "layout",
        "refused",
        "keep_dim must be the literal True",
    ),
    ("repr", "repr(x)", "none", "refused", "repr"),
    ("str", "str(x)", "none", "refused", "repr"),
]

#: why CUDA kernels refuse to assign a view or array to a sub-view (a temporary)
_NO_KERNEL_COPY = "assigning a view or array to a sub-view is not available in CUDA kernels"

_VIEW = [
    ("ndim", "x.ndim", "int"),
    ("shape", "x.shape", "tuple"),
    ("strides", "x.strides", "tuple"),
    ("size", "x.size", "int"),
    ("layout", "x.layout", "layout"),
    ("readonly", "x.readonly", "int"),
    ("dtype", "x.dtype", "dtype"),
    ("ptr", "x.ptr", "int"),
    ("ptr", "x[1, 2].ptr - x.ptr", "int"),
    ("len", "len(x)", "int"),
    ("[]", "x[1, 2, 3]", "scalar"),
    ("[]", "x[-1, -2, -3]", "scalar"),
    ("[]", "x[1, ::-1, None]", "view"),
    ("[]=", "x[1, 2, 3] = 7.0", "none", "same", "", True),
    ("[]=", "x[1] = 7.0", "none", "same", "", True),  # a sub-view: filled
    ("[]=", "x[1, ::-1, None] = 7", "none", "same", "", True),
    ("[]=", "x[1:] = x[:-1]", "none", "same", "", True, _NO_KERNEL_COPY),  # overlapping
    ("[]=", "x[1] = x[2].view(dtype=np.int32)", "none", "same", "", True, _NO_KERNEL_COPY),  # cast
    ("iter", "next(iter(x))", "view"),  # for y in x: x[0], x[1], ...
    ("iter", "next(iter(x[1, 2]))", "scalar"),
    ("permuted", "x.permuted((2, 0, 1))", "view"),
    ("permuted", "x.permuted(axis_order=(2, 0, 1))", "view"),
    ("with_layout", "x.with_layout(x.layout[::-1])", "view"),
    ("with_layout", "x.with_layout(layout=x.layout.permuted((1, 0, 2)))", "view"),
    ("view", "x.view(x.layout[:, 1])", "view"),
    ("view", "x.view(layout=x.layout[1:])", "view"),
    ("view", "x.view()", "view"),
    ("view", "x.view(dtype=np.int32)", "view"),
    ("view", "x.view(x.layout[1], np.uint32)", "view"),
    # what only Python has: objects, the driver, copies
    ("buffer", "x.buffer", "none", "refused", "Python"),
    ("exporting_obj", "x.exporting_obj", "none", "refused", "Python"),
    ("device_id", "x.device_id", "none", "refused", "Python"),
    ("is_device_accessible", "x.is_device_accessible", "none", "refused", "Python"),
    ("copy_from", "x.copy_from(x)", "none", "refused", "Python"),
    ("copy_to", "x.copy_to(x)", "none", "refused", "Python"),
    ("from_any_interface", "x.from_any_interface(x)", "none", "refused", "Python"),
    ("from_array_interface", "x.from_array_interface(x)", "none", "refused", "Python"),
    ("from_buffer", "x.from_buffer(x)", "none", "refused", "Python"),
    ("from_cuda_array_interface", "x.from_cuda_array_interface(x)", "none", "refused", "Python"),
    ("from_dlpack", "x.from_dlpack(x)", "none", "refused", "Python"),
    ("repr", "repr(x)", "none", "refused", "repr"),
    ("str", "str(x)", "none", "refused", "repr"),
]


def _entries(subject, rows):
    return [Entry(row[0], subject, *row[1:]) for row in rows]


ENTRIES = _entries("layout", _LAYOUT) + _entries("view", _VIEW)


def compiled_names(numba_type_class):
    """The names registered on a compiled type: ``overload_attribute`` / ``overload_method``
    templates and ``make_attribute_wrapper`` struct members (Numba's CPU registry)."""
    from numba.core.typing.templates import builtin_registry

    names = set()
    for template in builtin_registry.attributes:
        if getattr(template, "key", None) is not numba_type_class:
            continue
        name = getattr(template, "_attr", None)
        if name is None:  # a struct member: the name is in generic_resolve's closure
            resolve = template.generic_resolve
            cells = dict(zip(resolve.__code__.co_freevars, resolve.__closure__ or (), strict=True))
            name = cells["python_attr"].cell_contents if "python_attr" in cells else None
        if name is not None:
            names.add(name)
    return names


def public_names(cls):
    """The public attributes of ``cls`` (``dir()`` without underscored names)."""
    return {name for name in dir(cls) if not name.startswith("_")}


def subject(entry):
    return layout_subject() if entry.subject == "layout" else view_subject()


def python_function(entry, times=1):
    """``f(x)`` running the entry's expression in Python, ``times`` times in one function
    (the last result returned): Numba inlines methods into the calling function, and
    the same method inlined twice must compile as once does."""
    return _function(entry, "f", _uses(entry, times) + ("" if entry.statement else "return r"))


def _uses(entry, times):
    """The entry's expression ``times`` times, each a line (of the function's body) of
    its own; the result of an expression in ``r``."""
    use = entry.expr if entry.statement else f"r = {entry.expr}"
    return f"{use}\n    " * times


def _function(entry, name, body):
    source = f"def {name}(x):\n    {body}\n"
    scope = {"L": StridedLayout, "np": np}
    exec(compile(source, f"<parity {entry.expr}>", "exec"), scope)
    return scope[name]


_SCALAR = {
    "int": "r",
    "scalar": "int(r)",
    "tuple": "r[0]",
    "layout": "r.volume + r.max_offset + r.slice_offset + r.itemsize",
    "view": "r.shape[0] + r.strides[0]",
    "dtype": "1",
    "none": "1",
}


def kernel_function(entry, times=1):
    """``k(out, x)`` writing an integer made from the entry's result to ``out[0]``
    (for compile_ptx and the simulator); ``times`` as in :func:`python_function`."""
    result = "1" if entry.statement else _SCALAR[entry.kind]
    body = f"{_uses(entry, times)}out[0] = {result}"
    return _function(entry, "k", body).__code__, body


def make_kernel(entry, times=1):
    source = f"def k(out, x):\n    {kernel_function(entry, times)[1]}\n"
    scope = {"L": StridedLayout, "np": np}
    exec(compile(source, f"<parity kernel {entry.expr}>", "exec"), scope)
    return scope["k"]


def same_result(python, compiled, kind):
    """Whether a compiled result means what Python's does."""
    if kind == "layout":
        return (
            compiled == python
            and compiled.shape == python.shape
            and compiled.itemsize == python.itemsize
            and compiled.slice_offset == python.slice_offset
        )
    if kind == "view":
        return (
            compiled.shape == python.shape
            and compiled.strides == python.strides
            and compiled.ptr == python.ptr
            and compiled.dtype == python.dtype
            and compiled.readonly == python.readonly
            and compiled.layout == python.layout
            and compiled.exporting_obj is python.exporting_obj
        )
    if kind == "scalar":  # an element: a NumPy scalar in Python, a Python number compiled
        return compiled == python.item() and type(compiled) is type(python.item())
    return type(compiled) is type(python) and compiled == python


# ---------------------------------------------------------------------------------------
# random drivers (tests/test_parity.py): NumPy arrays of random layouts and dtypes, and
# basic indices with entries out of range, extreme slice bounds and any integer type

#: Element types of the random view drivers: bool, integers, floats, complex, float16
#: (no elements in ``@njit``: README's table) and a structured dtype (a Numba record).
DTYPES = tuple(
    np.dtype(d)
    for d in (
        np.bool_, np.int8, np.uint16, np.int32, np.int64, np.uint64, np.float32, np.float64,
        np.complex64, np.complex128, np.float16, [("a", "<i4"), ("b", "<f8")],
    )
)  # fmt: skip
#: The dtypes whose elements ``@njit`` refuses to type (a documented ``TypingError``).
NO_NJIT_ELEMENTS = (np.dtype(np.float16),)


def values_of(dtype, count, seed=0):
    """``count`` distinct-ish valid values of ``dtype`` (a 1-d array; bools alternate)."""
    numbers = np.arange(seed, seed + count)
    if dtype.names:
        values = np.zeros(count, dtype)
        values["a"], values["b"] = numbers, numbers / 4
        return values
    if dtype.kind == "b":
        return numbers % 3 == 1
    if dtype.kind == "c":
        return (numbers + 1j * (numbers + 0.5)).astype(dtype)
    if dtype.kind == "f":
        return (numbers / 4).astype(dtype)
    return (numbers % (127 if dtype.itemsize == 1 else 1 << 15)).astype(dtype)


def array_of(layout, dtype, base=None):
    """``(base, array)``: a NumPy array of ``dtype`` with ``layout``'s shape and element
    strides over the real 1-d buffer ``base`` (made of ``values_of`` when not given), the
    layout's lowest offset at ``base[0]``."""
    shape, strides = layout.shape, layout._strides
    if 0 in shape:
        low, high = 0, 0
    else:
        low = sum(s * (e - 1) for e, s in zip(shape, strides, strict=True) if s < 0)
        high = sum(s * (e - 1) for e, s in zip(shape, strides, strict=True) if s > 0)
    if base is None:
        base = values_of(dtype, high - low + 1)
    array = np.lib.stride_tricks.as_strided(
        base[-low:], shape, [s * dtype.itemsize for s in strides]
    )
    return base, array


def with_extremes(draw, st, index):
    """``index`` (from ``helpers.strategies.basic_indices``) with, at random, an integer
    entry moved out of range, a slice given int64-limit bounds or steps, and the integers
    given one NumPy or Python integer type."""
    items = list(index) if type(index) is tuple else [index]
    ints = [k for k, e in enumerate(items) if type(e) is int]
    if ints and draw(st.booleans()):
        items[draw(st.sampled_from(ints))] = draw(
            st.sampled_from([5, 6, -6, 2**40, -(2**40), 2**63 - 1, -(2**63)])
        )
    slices = [k for k, e in enumerate(items) if type(e) is slice]
    if slices and draw(st.booleans()):
        bound = st.sampled_from([None, 0, -1, 1, 2**62, -(2**62), 2**63 - 1, -(2**63)])
        step = st.sampled_from([None, 1, -1, 2**62, 2**63 - 1, -(2**63)])
        items[draw(st.sampled_from(slices))] = slice(draw(bound), draw(bound), draw(step))
    kind = draw(st.sampled_from([int, np.int64, np.int32, np.int8, np.uint64, np.uint8]))
    for k in ints:
        value = items[k]
        info = np.iinfo(kind) if kind is not int else None
        if info is None or info.min <= value <= info.max:
            items[k] = kind(value)
    if type(index) is not tuple and draw(st.booleans()):
        return items[0]
    return tuple(items)


def outcome(function, *args):
    """``("ok", result)``, or ``(exception class, None)``; a TypingError propagates."""
    from numba.core.errors import TypingError

    try:
        return "ok", function(*args)
    except TypingError:
        raise
    except Exception as error:  # noqa: BLE001 - the class is what is compared
        return type(error), None


def exact_layout(layout):
    """What two layouts must share to mean the same (strides of extent-1 axes too)."""
    return layout.shape, layout._strides, layout.itemsize, layout.slice_offset


def same_element(python, compiled):
    """An element read in compiled code is the Python view's (a NumPy scalar): the same
    value and Python type (NaN equal to NaN; a record equal field by field)."""
    expected = python.item()
    if isinstance(expected, tuple):  # a structured element: a Numba record in compiled code
        return tuple(compiled[name] for name in python.dtype.names) == expected
    same = compiled == expected or (compiled != compiled and expected != expected)
    return bool(same) and type(compiled) is type(expected)
