"""Checks for hostile cases: what may escape, canary memory, and views and layouts that
must be exactly what validation makes of their numbers.

Cases run in child interpreters without pytest's assertion rewriting (see
:mod:`helpers.hostile`), so these helpers make the messages: each names what was tried
and what came back.
"""

import math

import numpy as np

import layoutkit
from layoutkit import StridedLayout

# ------------------------------------------------------------------ what is allowed to escape
#: The exception classes layoutkit documents for bad input (``AxisError`` is a ValueError).
DOCUMENTED = (TypeError, ValueError, BufferError, OverflowError)
_DOCUMENTED_NAMES = "TypeError / ValueError / BufferError / OverflowError / AxisError"


class HostileError(Exception):
    """Raised by the hostile objects of the fuzz suite; layoutkit may let it propagate."""


#: What a call given a hostile object may raise: a documented class, or the object's own error.
DOCUMENTED_OR_HOSTILE = (*DOCUMENTED, HostileError)


# ------------------------------------------------------------------ checks
def describe(value, limit=200):
    """``repr(value)``, shortened to ``limit`` characters; never raises."""
    try:
        text = repr(value)
    except Exception as exc:  # a hostile object's repr may raise
        text = f"<{type(value).__name__} whose repr raises {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def refused(call, *args, what=None, classes=DOCUMENTED, **kwargs):
    """Call ``call(*args, **kwargs)``; it must raise one of ``classes``. Returns the exception.

    An exception of another class, or a return, fails the case with a message naming
    ``what`` (default: the call) and what happened instead.
    """
    what = what or _call_text(call, args, kwargs)
    try:
        result = call(*args, **kwargs)
    except classes as exc:
        return exc
    except Exception as exc:
        raise AssertionError(
            f"{what}: raised {type(exc).__name__}: {exc}; expected one of {_class_names(classes)}"
        ) from exc
    raise AssertionError(
        f"{what}: accepted and returned {describe(result)}; expected one of {_class_names(classes)}"
    )


def refused_or_ok(call, *args, what=None, classes=DOCUMENTED, **kwargs):
    """Call it; return ``(True, result)`` or ``(False, exception)`` for a documented class.

    Anything else that escapes (``struct.error``, ``ctypes.ArgumentError``, ``MemoryError``,
    ``NotImplementedError``, ``AttributeError``, ...) fails the case.
    """
    try:
        return True, call(*args, **kwargs)
    except classes as exc:
        return False, exc
    except Exception as exc:
        what = what or _call_text(call, args, kwargs)
        raise AssertionError(
            f"{what}: raised {type(exc).__name__}: {exc}; only {_class_names(classes)} may escape"
        ) from exc


def _class_names(classes):
    if classes is DOCUMENTED:
        return _DOCUMENTED_NAMES
    if classes is DOCUMENTED_OR_HOSTILE:
        return _DOCUMENTED_NAMES + " (or the hostile object's own error)"
    return " / ".join(c.__name__ for c in classes)


def _call_text(call, args, kwargs):
    name = getattr(call, "__qualname__", None) or describe(call)
    parts = [describe(a, 80) for a in args] + [f"{k}={describe(v, 80)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def check(condition, message):
    """``assert`` with a message that survives running without pytest's rewriting."""
    if not condition:
        raise AssertionError(message)


class Poisoned:
    """Host memory with canary bytes around it and inside it, to prove what was written.

    ``nbytes`` bytes of deterministic garbage, with ``guard`` more bytes of garbage on
    each side. :meth:`array` gives NumPy arrays over the inner bytes; :meth:`untouched`
    checks that no byte (inner or guard) changed since the block was made (or since
    :meth:`reset`); :meth:`only_changed` checks the guards and compares the inner bytes
    with what they should now be.
    """

    def __init__(self, nbytes, guard=64, seed=0):
        rng = np.random.default_rng(seed)
        self.guard = guard
        self.nbytes = nbytes
        # 0x7F is avoided so that float data read back is never accidentally NaN-equal
        self.raw = rng.integers(0, 256, nbytes + 2 * guard, dtype=np.uint8)
        self.inner = self.raw[guard : guard + nbytes]
        self.snapshot = self.raw.copy()

    @property
    def address(self):
        """Address of the first inner byte."""
        return self.inner.__array_interface__["data"][0]

    def array(self, dtype, shape=None, strides=None, offset=0):
        """An ndarray over the inner bytes (``strides`` in bytes, ``offset`` in bytes)."""
        dtype = np.dtype(dtype)
        if shape is None:
            shape = ((self.nbytes - offset) // dtype.itemsize,)
        return np.ndarray(shape, dtype, buffer=self.inner, offset=offset, strides=strides)

    def reset(self):
        """Take the current bytes as the reference for :meth:`untouched`."""
        self.snapshot = self.raw.copy()

    def _diff(self, expected_raw):
        changed = np.flatnonzero(self.raw != expected_raw)
        if not changed.size:
            return None
        where = [int(i) - self.guard for i in changed[:8]]
        return (
            f"{changed.size} byte(s) differ, first at inner offsets {where} "
            f"(negative or >= {self.nbytes}: in a guard)"
        )

    def untouched(self, what):
        """Fail unless every byte is as it was: ``what`` names the operation tried."""
        diff = self._diff(self.snapshot)
        check(diff is None, f"{what} wrote memory it must not write: {diff}")

    def only_changed(self, expected_inner, what):
        """Fail unless the guards are intact and the inner bytes equal ``expected_inner``."""
        expected = self.snapshot.copy()
        expected[self.guard : self.guard + self.nbytes] = np.frombuffer(
            np.ascontiguousarray(expected_inner).tobytes(), np.uint8
        )
        diff = self._diff(expected)
        check(diff is None, f"{what}: memory differs from the expected result: {diff}")


def host_view(array):
    """A view of a NumPy array through ``from_array_interface`` (its buffer knows it is host)."""
    return layoutkit.StridedMemoryView.from_array_interface(array)


def check_view(view, what, where=True, within=None):
    """Read every attribute of an imported view; each must work and agree with the others.

    An import that returns a view must have validated everything: an exception from any
    attribute here is an error that came too late. ``where=False`` skips what needs to know
    where the memory lives (``device_id``, ``buffer``: a driver query for CUDA array
    interface imports). ``within=(address, nbytes)``: the memory the producer's description
    is known to lie in (a buffer object's length); the view must stay inside it.
    """

    def read(name, getter):
        try:
            return getter()
        except Exception as exc:
            raise AssertionError(
                f"{what} returned a view whose {name} raises {type(exc).__name__}: {exc} "
                "(the import should have refused it)"
            ) from exc

    layout = read(".layout", lambda: view.layout)
    shape = read(".shape", lambda: view.shape)
    strides = read(".strides", lambda: view.strides)
    dtype = read(".dtype", lambda: view.dtype)
    ptr = read(".ptr", lambda: view.ptr)
    size = read(".size", lambda: view.size)
    read(".readonly", lambda: view.readonly)
    check(type(layout) is StridedLayout, f"{what}: view.layout is a {type(layout).__name__}")
    check(shape == layout.shape and strides == layout.strides, f"{what}: shape/strides disagree")
    check(size == math.prod(shape), f"{what}: size {size} is not the product of {shape}")
    check(type(ptr) is int and 0 <= ptr < 2**64, f"{what}: ptr {ptr!r} is not a 64-bit address")
    if dtype is not None:
        check(
            dtype.itemsize == layout.itemsize,
            f"{what}: dtype {dtype} has itemsize {dtype.itemsize}, layout {layout.itemsize}",
        )
    read(
        "layout (re-validated)",
        lambda: StridedLayout(layout.shape, layout.strides, layout.itemsize),
    )
    low, high = layout.offset_bounds
    first = ptr + (low - layout.slice_offset) * layout.itemsize  # lowest byte of an element
    end = ptr + (high - layout.slice_offset + 1) * layout.itemsize
    if size:
        check(first >= 0 and end <= 2**64,
              f"{what}: the view's bytes [{first:#x}, {end:#x}) leave the 64-bit address "
              "space")  # fmt: skip
        if within is not None:
            start, nbytes = within
            check(start <= first and end <= start + nbytes,
                  f"{what}: the view's bytes [{first:#x}, {end:#x}) leave the producer's "
                  f"{nbytes}-byte buffer at {start:#x}")  # fmt: skip
    if where:
        read(".device_id", lambda: view.device_id)
        read("repr()", lambda: repr(view))
        buffer = read(".buffer", lambda: view.buffer)
        if size:
            check(low >= 0 and (high + 1) * layout.itemsize <= buffer.size,
                  f"{what}: layout {layout!r} leaves its {buffer.size}-byte buffer")  # fmt: skip
            check(buffer.ptr + layout.slice_offset_in_bytes == ptr,
                  f"{what}: ptr is not buffer.ptr + slice_offset_in_bytes")  # fmt: skip
    return view


#: Readers of a layout's derived properties (the values computed from its numbers, some
#: lazily or carried over from the layout it was made from), by name; none of them tells
#: implicit C strides from the same explicit ones.
DERIVED_PROPERTIES = {
    "volume": lambda x: x.volume,
    "offset_bounds": lambda x: x.offset_bounds,
    "min_offset": lambda x: x.min_offset,
    "max_offset": lambda x: x.max_offset,
    "is_unique": lambda x: x.is_unique,
    "is_contiguous_c": lambda x: x.is_contiguous_c,
    "is_contiguous_f": lambda x: x.is_contiguous_f,
    "is_contiguous_any": lambda x: x.is_contiguous_any,
    "is_dense": lambda x: x.is_dense,
    "stride_order": lambda x: x.stride_order,
    "flattened_axis_mask()": lambda x: x.flattened_axis_mask(),
    "slice_offset_in_bytes": lambda x: x.slice_offset_in_bytes,
}


def derived_values(layout):
    """Every derived value of a layout, each read as its value or its exception's class name.

    Transforms (``flattened``, ``squeezed``, ``to_dense``) are given as plain tuples
    ``(shape, strides, itemsize, slice_offset)``.
    """
    readers = {
        **DERIVED_PROPERTIES,
        "strides_in_bytes": lambda x: x.strides_in_bytes,  # None for implicit C
        "flattened()": lambda x: plain(x.flattened()),
        "squeezed()": lambda x: plain(x.squeezed()),
        "to_dense()": lambda x: plain(x.to_dense()),
        "hash": hash,
    }
    values = {}
    for name, read in readers.items():
        ok, value = refused_or_ok(read, layout, what=f"layout.{name}")
        values[name] = value if ok else type(value).__name__
    return values


def plain(layout):
    """``(shape, strides, itemsize, slice_offset)`` of a layout."""
    return (layout.shape, layout.strides, layout.itemsize, layout.slice_offset)


def check_layout(layout, what):
    """``layout`` must be exactly what validation makes of its numbers: its re-validated
    copy (through the pickle path, which re-runs every check) is equal and has equal
    derived values, and every derived value can be read."""
    import pickle

    check(isinstance(layout, StridedLayout), f"{what} gave a {type(layout).__name__}")
    ok, rebuilt = refused_or_ok(
        lambda: pickle.loads(pickle.dumps(layout)), what=f"re-validating the layout from {what}"
    )
    check(ok, f"{what} gave a layout that its own validation refuses ({rebuilt!r})")
    check(layout == rebuilt, f"{what}: layout != its validated rebuild {rebuilt!r}")
    mine, valid = derived_values(layout), derived_values(rebuilt)
    wrong = {k: (mine[k], valid[k]) for k in valid if mine[k] != valid[k]}
    check(not wrong, f"{what} gave a layout with forged derived values {{name: (layout, "
                     f"validated)}}: {wrong}")  # fmt: skip
    return layout
