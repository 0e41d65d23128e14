"""Half-built objects: ``Cls.__new__(Cls)`` without the constructor.

The rule: a public class's constructor is its ``__new__`` (StridedLayout, StridedMemoryView,
BoundsCheckedView, Device), or its ``__new__`` refuses (Buffer), so ``Cls.__new__(Cls)``
gives a complete object or a ``TypeError``; a memory resource, whose subclasses are
initialised by ``__init__``, names the state its ``__init__`` never set with a
``TypeError`` (``MemoryResource.__getattr__``, reached only for missing names).
"""

import copy
import functools
import pickle
import warnings

import numpy as np
from helpers.hostile import Cases
from helpers.hostile_checks import check, refused

import layoutkit
from layoutkit import (
    BoundsCheckedView,
    Buffer,
    DeviceMemoryResource,
    HostMemoryResource,
    ManagedMemoryResource,
    PinnedMemoryResource,
    StridedLayout,
    StridedMemoryView,
)

cases = Cases(__name__)


def _uses(obj):
    """Every public attribute, method without arguments and protocol of ``obj``."""
    for name in sorted(n for n in dir(type(obj)) if not n.startswith("_")):
        yield f".{name}", functools.partial(_touch, obj, name)
    yield "repr", functools.partial(repr, obj)
    yield "==", lambda: obj == obj  # noqa: PLR0124
    yield "hash", functools.partial(hash, obj)
    yield "pickle", lambda: pickle.loads(pickle.dumps(obj))
    yield "copy.copy", functools.partial(copy.copy, obj)
    yield "copy.deepcopy", functools.partial(copy.deepcopy, obj)
    yield "np.asarray", functools.partial(np.asarray, obj)
    yield "bool", functools.partial(bool, obj)


def _touch(obj, name):
    value = getattr(obj, name)
    if callable(value) and not isinstance(value, type):
        try:
            return value()
        except TypeError as exc:
            if "argument" not in str(exc):
                raise
    return value


def _no_attribute_errors(obj, what):
    for label, use in _uses(obj):
        try:
            use()
        except AttributeError as exc:
            raise AssertionError(f"{what}{label}: AttributeError escaped: {exc}") from exc
        except (TypeError, ValueError, BufferError, OverflowError, IndexError, RuntimeError):
            pass  # RuntimeError: a closed buffer's or a missing driver's documented class


@cases.case
def buffer_new_is_refused():
    """``Buffer.__new__(Buffer)`` made a Buffer with no slots set (AttributeError from
    every attribute); the refusal of ``Buffer()`` is ``__new__``'s now, a RuntimeError (as
    in cuda.core) that is also a TypeError."""
    for call in (lambda: Buffer.__new__(Buffer), Buffer, lambda: Buffer(8, 8)):
        exc = refused(call, what="Buffer.__new__(Buffer)")
        check(isinstance(exc, RuntimeError), f"not a RuntimeError: {exc!r}")
        check("from_handle" in str(exc), f"message does not say how: {exc}")


@cases.case
def view_new_is_the_empty_view():
    """``StridedMemoryView.__new__(StridedMemoryView)`` left every slot unset; it is
    ``StridedMemoryView()`` now, cuda.core's empty view (ValueError from its layout)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        view = StridedMemoryView.__new__(StridedMemoryView)
        full = StridedMemoryView.__new__(StridedMemoryView, np.arange(3.0), -1)
    _no_attribute_errors(view, "StridedMemoryView.__new__(StridedMemoryView)")
    refused(getattr, view, "layout", classes=(ValueError,))
    check(full.shape == (3,) and full.dtype == np.float64, f"__new__(obj) gave {full!r}")
    refused(layoutkit.copy, view, full, what="copy into the empty view")
    refused(layoutkit.copy, full, view, what="copy from the empty view")


@cases.case
def bounds_checked_view_needs_its_view():
    refused(BoundsCheckedView.__new__, BoundsCheckedView, classes=(TypeError,))
    bare = object.__new__(BoundsCheckedView)  # its __getattr__ defers to a view it lacks
    exc = refused(getattr, bare, "shape", classes=(TypeError,))
    check("never initialised" in str(exc), f"message: {exc}")
    _no_attribute_errors(bare, "object.__new__(BoundsCheckedView)")


@cases.case
def memory_resources_without_init():
    for cls in (HostMemoryResource, DeviceMemoryResource, ManagedMemoryResource,
                PinnedMemoryResource):  # fmt: skip
        for make in (cls.__new__, object.__new__):
            resource = make(cls)
            _no_attribute_errors(resource, f"{make.__qualname__}({cls.__name__})")
            for call in (lambda r=resource: r.allocate(64), lambda r=resource: r.deallocate(64, 64)):
                try:
                    call()
                except AttributeError as exc:
                    raise AssertionError(f"{cls.__name__}: AttributeError: {exc}") from exc
                except (TypeError, ValueError, RuntimeError):
                    pass
    check(not hasattr(HostMemoryResource(), "no_such_name"), "hasattr of a missing name")


@cases.case
def repr_of_an_uninitialised_object_never_raises():
    """``repr`` (what debuggers, pytest and logs call first) of an object whose
    constructor never ran says so instead of raising AttributeError or TypeError."""
    for cls in (Buffer, StridedMemoryView, StridedLayout, BoundsCheckedView):
        bare = object.__new__(cls)
        for text in (repr(bare), str(bare)):
            check("never initialised" in text and cls.__name__ in text,
                  f"repr(object.__new__({cls.__name__})) = {text!r}")  # fmt: skip


@cases.case
def layout_new_needs_its_values():
    refused(StridedLayout.__new__, StridedLayout, classes=(TypeError,))


cases.export(globals())
