"""Calls into the ``@njit`` kernels of :mod:`layoutkit._kernels` from Python, cheaply.

A :class:`KernelCall` compiles (or loads from Numba's cache) its kernel on first use and
then calls the single specialisation's entry point directly, skipping the dispatcher's
type resolution (about 0.6 µs a call). Numba is imported on the first call, not before.
"""

__all__ = ["KernelCall"]


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
            from numba import typeof

            from . import _kernels

            dispatcher = getattr(_kernels, self._name)
            result = dispatcher(*args)
            types = tuple(typeof(a) for a in args)
            (signature,) = [s for s in dispatcher.signatures if tuple(s) == types]
            self._entry = dispatcher.overloads[signature].entry_point
            return result
        return entry(*args)
