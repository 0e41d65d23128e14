"""Exception classes shared by every layoutkit module (all importable from ``layoutkit``)."""

__all__ = ["AxisError", "CUDAError", "NoDriverError"]


class AxisError(IndexError, ValueError):
    """An axis or index is out of range.

    Derives from both :class:`IndexError` and :class:`ValueError`, as NumPy's
    ``AxisError`` does, so code written against either convention catches it.

    Examples
    --------
    >>> from layoutkit import AxisError
    >>> issubclass(AxisError, IndexError) and issubclass(AxisError, ValueError)
    True
    """


class CUDAError(RuntimeError):
    """A CUDA driver call failed.

    Parameters
    ----------
    message : str
        The full message.
    call : str, optional
        The driver function that failed, e.g. ``"cuMemAllocAsync"``.
    error_name : str, optional
        The driver's name for the error, e.g. ``"CUDA_ERROR_OUT_OF_MEMORY"``.

    Examples
    --------
    >>> err = CUDAError("cuMemAlloc failed", call="cuMemAlloc", error_name="CUDA_ERROR_OUT_OF_MEMORY")
    >>> isinstance(err, RuntimeError), err.call, err.error_name
    (True, 'cuMemAlloc', 'CUDA_ERROR_OUT_OF_MEMORY')
    """

    def __init__(self, message, call=None, error_name=None):
        super().__init__(message)
        self.call = call
        self.error_name = error_name


class NoDriverError(CUDAError):
    """No CUDA driver was found: ``libcuda`` (or cuda-bindings) cannot be loaded.

    Host memory never needs one; this is raised only by what needs a GPU.

    Examples
    --------
    >>> from layoutkit import NoDriverError, CUDAError
    >>> issubclass(NoDriverError, CUDAError) and issubclass(NoDriverError, RuntimeError)
    True
    """


class ConstructionError(RuntimeError, TypeError):
    """A class was called (or its ``__new__``) the way it cannot be made.

    A ``RuntimeError`` as in cuda.core (``Buffer()``) and a ``TypeError``, the class
    every other wrong call of a constructor raises, so code written against either
    convention catches it.
    """


def never_initialised(obj, how):
    """The ``TypeError`` for ``obj`` whose constructor never ran (``how`` makes one)."""
    name = type(obj).__name__
    return TypeError(
        f"this {name} was never initialised (made by {name}.__new__ or object.__new__ "
        f"without its constructor running); make one with {how}"
    )


class SealedClass(type):
    """Metaclass of the classes whose attributes layoutkit trusts to address memory.

    Views, buffers and bounds-checked views: a subclass may add attributes and methods and
    define special methods, but may not replace the sealed base's own
    (:func:`refuse_redefinitions`, when the subclass is made), and no attribute of the base
    may be set or deleted later on the base or any subclass (``Sub.layout = property(...)``
    would otherwise pass the check made when ``Sub`` was defined).

    Raises
    ------
    TypeError
        Naming the attribute.
    """

    def __init__(cls, name, bases, namespace, **kwargs):
        super().__init__(name, bases, namespace, **kwargs)
        base = _sealed_base(cls)
        if base is not cls:
            refuse_redefinitions(cls, base)

    def __setattr__(cls, name, value):
        _refuse_replacing(cls, name, "set")
        super().__setattr__(name, value)

    def __delattr__(cls, name):
        _refuse_replacing(cls, name, "delete")
        super().__delattr__(name)


def _sealed_base(cls):
    """The class that brought :class:`SealedClass` into ``cls``'s hierarchy."""
    return [kind for kind in cls.__mro__ if isinstance(kind, SealedClass)][-1]


def _refuse_replacing(cls, name, how):
    base = _sealed_base(cls)
    if not (name.startswith("__") and name.endswith("__")) and hasattr(base, name):
        raise TypeError(
            f"cannot {how} {cls.__qualname__}.{name}: it is {base.__name__}'s own, which "
            "layoutkit trusts to address memory"
        )


def refuse_redefinitions(subclass, base):
    """Refuse a subclass of ``base`` (a view, a buffer) that redefines one of its attributes.

    layoutkit reads a view's or buffer's pointer, layout, size, read-only flag and private
    state as facts it validated, and hands them to kernels that do not check: a subclass
    redefining them (``ptr = property(lambda self: 8)``) would have copies and compiled
    code write where it says. Subclasses may add attributes and methods, and define the
    special (dunder) methods.

    Raises
    ------
    TypeError
        Naming the attributes redefined.
    """
    mro = subclass.__mro__
    ahead = mro[: mro.index(base)]  # the subclass and any mixin it puts before base
    redefined = sorted({
        name
        for kind in ahead
        for name in vars(kind)
        if not (name.startswith("__") and name.endswith("__")) and hasattr(base, name)
    })  # fmt: skip
    if redefined:
        raise TypeError(
            f"{subclass.__qualname__} redefines {', '.join(redefined)} of {base.__name__}: "
            f"a {base.__name__} subclass may add attributes and methods but not replace "
            f"the {base.__name__}'s own (layoutkit trusts them to address memory)"
        )

