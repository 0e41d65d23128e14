"""Calls into the ``@njit`` kernels of :mod:`layoutkit._kernels` from Python, cheaply.

A :class:`KernelCall` compiles (or loads from Numba's cache) its kernel on first use and
then calls the single specialisation's entry point directly, skipping the dispatcher's
type resolution (about 0.6 µs a call). Numba is imported on the first call, not before.
"""

__all__ = ["KernelCall", "entry_point"]


def entry_point(dispatcher, args):
    """What later calls of ``dispatcher`` with arguments of ``args``' types should call.

    The compiled specialisation's entry point once ``dispatcher(*args)`` has run, or the
    kernel itself where there is no compiled code: under ``NUMBA_DISABLE_JIT=1`` the
    kernels of :mod:`layoutkit._kernels` are plain Python functions (no ``overloads``).
    """
    overloads = getattr(dispatcher, "overloads", None)
    if overloads is None:
        return dispatcher
    return overloads[tuple(map(dispatcher.typeof_pyval, args))].entry_point


class KernelCall:
    """Call the kernel ``name`` through its compiled entry point (one specialisation).

    Examples
    --------
    >>> import array
    >>> volume = KernelCall("volume_of")
    >>> volume(array.array("q", [3, 4, 1, 1]), 2)
    12
    """

    __slots__ = ("_name", "_entry")

    def __init__(self, name):
        self._name = name
        self._entry = None

    def __call__(self, *args):
        entry = self._entry
        if entry is None:
            from . import _kernels

            dispatcher = getattr(_kernels, self._name)
            result = dispatcher(*args)
            self._entry = entry_point(dispatcher, args)
            return result
        return entry(*args)
