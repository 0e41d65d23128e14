"""Exception classes shared by every layoutkit module (all importable from ``layoutkit``)."""

__all__ = ["AxisError", "CUDAError", "DtypeMismatchError", "NoDriverError"]


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


class DtypeMismatchError(TypeError, ValueError):
    """A copy's two sides hold different dtypes or itemsizes (copies do not convert).

    A :class:`TypeError`, as Python names a mismatch of types, and a :class:`ValueError`,
    the class cuda.core's strided copies raise, so code written against either catches it.

    Examples
    --------
    >>> import numpy as np
    >>> from layoutkit import DtypeMismatchError, copy
    >>> try:
    ...     copy(np.zeros(2, np.float32), np.zeros(2, np.int32))
    ... except ValueError as exc:
    ...     print(type(exc).__name__, isinstance(exc, TypeError))
    DtypeMismatchError True
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

    Every class the attribute lookup of a subclass's objects passes before the base is
    sealed too: a mixin must be listed after the layoutkit class (``class
    Sub(StridedMemoryView, Mixin)``), since a mixin ahead of it could be given a
    ``layout`` later, where this metaclass does not see it. ``__getattribute__`` is the
    base's own (its objects' every attribute read goes through it), so neither a subclass
    nor a mixin after the base replaces it, and the subclass's metaclass is this one
    (a metaclass of its own could set attributes past :meth:`__setattr__`).

    Raises
    ------
    TypeError
        Naming the attribute, the mixin or the metaclass.
    """

    def __new__(mcs, name, bases, namespace, **kwargs):
        if not any(isinstance(base, SealedClass) for base in bases):
            # a sealed base owns the lookup of its objects' attributes: otherwise a mixin
            # listed after it (object's comes last) could supply one
            namespace = {"__getattribute__": object.__getattribute__, **namespace}
        return super().__new__(mcs, name, bases, namespace, **kwargs)

    def __init__(cls, name, bases, namespace, **kwargs):
        super().__init__(name, bases, namespace, **kwargs)
        base = _sealed_base(cls)
        if base is cls:
            return
        if type(cls) is not SealedClass:
            raise TypeError(
                f"{cls.__qualname__} has the metaclass {type(cls).__qualname__}: a "
                f"{base.__name__} subclass has layoutkit's own (SealedClass), since another "
                f"could replace the {base.__name__}'s attributes after the check made here"
            )
        mro = cls.__mro__
        ahead = [kind for kind in mro[: mro.index(base)] if not isinstance(kind, SealedClass)]
        if ahead:
            raise TypeError(
                f"{cls.__qualname__} lists {', '.join(k.__qualname__ for k in ahead)} before "
                f"{base.__name__}: list mixins after it (class {cls.__name__}("
                f"{base.__name__}, {ahead[0].__name__})), since an attribute given to a mixin "
                f"ahead of it later would replace the {base.__name__}'s own, which layoutkit "
                "trusts to address memory"
            )
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


def _trusted(name, base):
    """Whether ``name`` is one of ``base``'s attributes that layoutkit trusts: every one
    but the special methods, and ``__getattribute__`` (through which all are read)."""
    special = name.startswith("__") and name.endswith("__") and name != "__getattribute__"
    return not special and hasattr(base, name)


def _refuse_replacing(cls, name, how):
    base = _sealed_base(cls)
    if _trusted(name, base):
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
    special (dunder) methods but ``__getattribute__``.

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
        if _trusted(name, base)
    })  # fmt: skip
    if redefined:
        raise TypeError(
            f"{subclass.__qualname__} redefines {', '.join(redefined)} of {base.__name__}: "
            f"a {base.__name__} subclass may add attributes and methods but not replace "
            f"the {base.__name__}'s own (layoutkit trusts them to address memory)"
        )

