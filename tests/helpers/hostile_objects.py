"""Hostile objects: crafted pickles, integer-likes that misbehave, lying sequences, objects
whose attributes change between reads, and fake array-interface producers.

Each misbehaving object raises :class:`~helpers.hostile.HostileError` when it refuses to
work, so a test can tell the object's own error (which layoutkit may let through) from an
error of layoutkit's.
"""

import pickle

import numpy as np

from helpers.hostile_checks import HostileError


# ------------------------------------------------------------------ crafted pickles
def _body(obj):
    """The opcodes that push ``obj`` (a pickle of it without PROTO and STOP)."""
    data = pickle.dumps(obj, protocol=2)
    assert data[:2] == b"\x80\x02" and data[-1:] == b"."
    return data[2:-1]


def crafted_pickle(cls, slots, constructor="newobj"):
    """Pickle bytes that make a bare ``cls`` instance and set its slots directly.

    Written opcode by opcode, as an attacker would: ``copyreg.__newobj__(cls)`` (or
    ``copyreg._reconstructor(cls, object, None)`` with ``constructor="reconstructor"``)
    followed by ``BUILD`` with the slot-state tuple ``(None, slots)``. Nothing but ``cls``
    and the values in ``slots`` is named, so loading it runs no layoutkit code unless the
    class defines ``__setstate__`` (or similar) to validate or refuse.
    """
    name = f"{cls.__module__}\n{cls.__qualname__}\n".encode()
    if constructor == "newobj":
        make = b"ccopyreg\n__newobj__\n" + b"c" + name + b"\x85" + b"R"  # TUPLE1, REDUCE
    elif constructor == "reconstructor":
        make = (
            b"ccopyreg\n_reconstructor\n" + b"c" + name + b"c__builtin__\nobject\n" + b"N"
            b"\x87" + b"R"  # TUPLE3, REDUCE
        )
    else:
        raise ValueError(constructor)
    return b"\x80\x02" + make + _body((None, dict(slots))) + b"b" + b"."  # BUILD, STOP


def crafted_call(module, qualname, *args):
    """Pickle bytes that call ``module.qualname(*args)`` (a REDUCE naming that function)."""
    name = f"{module}\n{qualname}\n".encode()
    return b"\x80\x02" + b"c" + name + _body(tuple(args)) + b"R" + b"."


# ------------------------------------------------------------------ integer-likes
class RaisingIndex:
    """``__index__`` raises :class:`HostileError`."""

    def __index__(self):
        raise HostileError("__index__ refuses")

    def __repr__(self):
        return "RaisingIndex()"


class NonIntIndex:
    """``__index__`` returns something that is not an int."""

    def __init__(self, value=1.5):
        self.value = value

    def __index__(self):
        return self.value

    def __repr__(self):
        return f"NonIntIndex({self.value!r})"


class CountingIndex:
    """``__index__`` returns 1, then 2, then 3... (a different value on every read)."""

    def __init__(self, start=1, step=1):
        self.value = start - step
        self.step = step

    def __index__(self):
        self.value += self.step
        return self.value

    def __repr__(self):
        return f"CountingIndex(now={self.value})"


class IntSubclass(int):
    """An ``int`` subclass whose ``__index__`` lies about its value."""

    def __index__(self):
        return int(self) + 1000


class EqualsAnything(int):
    """An ``int`` subclass equal to everything, hashing as ``hash_as``: it matches any
    cache key of that hash while its own value is another."""

    def __new__(cls, value, hash_as):
        self = super().__new__(cls, value)
        self.hash_as = hash_as
        return self

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __hash__(self):
        return hash(self.hash_as)

    def __index__(self):
        return self

    def __repr__(self):
        return f"EqualsAnything({int(self)}, hash_as={self.hash_as})"


def type_equal_to(target, name, bases, namespace):
    """A class ``name(*bases)`` whose metaclass makes it equal to ``target`` and hash as it:
    a dict or set keyed by types, or a ``==`` test on types, finds ``target`` for it."""

    class EqualMeta(type):
        def __eq__(cls, other):
            return True

        def __ne__(cls, other):
            return False

        def __hash__(cls):
            return hash(target)

    return EqualMeta(name, bases, namespace)


# ------------------------------------------------------------------ sequences that lie
class LyingLength:
    """Claims ``length`` entries but iterates over ``items``; indexing gives ``items``."""

    def __init__(self, items, length):
        self.items = list(items)
        self.length = length

    def __len__(self):
        return self.length

    def __iter__(self):
        return iter(self.items)

    def __getitem__(self, index):
        return self.items[index]

    def __repr__(self):
        return f"LyingLength({self.items!r}, len={self.length})"


class ShiftingSequence:
    """Every iteration yields a different sequence (first ``first``, then ``then``)."""

    def __init__(self, first, then):
        self.first = list(first)
        self.then = list(then)
        self.reads = 0

    def _current(self):
        self.reads += 1
        return self.first if self.reads == 1 else self.then

    def __len__(self):
        return len(self._current())

    def __iter__(self):
        return iter(self._current())

    def __getitem__(self, index):
        return self._current()[index]

    def __repr__(self):
        return f"ShiftingSequence({self.first!r} then {self.then!r})"


class RaisingIteration:
    """A sequence whose iteration raises :class:`HostileError` after ``after`` items."""

    def __init__(self, after=1):
        self.after = after

    def __len__(self):
        return self.after + 1

    def __iter__(self):
        yield from range(1, self.after + 1)
        raise HostileError("iteration refuses")

    def __getitem__(self, index):
        if index >= self.after:
            raise HostileError("indexing refuses")
        return index + 1

    def __repr__(self):
        return f"RaisingIteration(after={self.after})"


class IterationLimit(BaseException):
    """An endless iterable was read far past any sane length (it would hang for real).

    A ``BaseException``, so no ``except Exception`` in the code under test swallows it.
    """


class EndlessSequence:
    """Iterates "forever": after ``limit`` items it raises :class:`IterationLimit`, so a
    consumer that does not stop at a sane length fails fast instead of hanging."""

    def __init__(self, limit=10_000):
        self.limit = limit

    def __iter__(self):
        for _ in range(self.limit):
            yield 1
        raise IterationLimit(f"read more than {self.limit} items of an endless iterable")

    def __repr__(self):
        return "EndlessSequence()"


# ------------------------------------------------------------------ producers
class FakeInterface:
    """An object with ``__array_interface__`` (or another name) set to a given value."""

    def __init__(self, interface, name="__array_interface__", keep=None):
        self._interface = interface
        self._name = name
        self.keep = keep

    def __getattr__(self, name):
        if name == self.__dict__.get("_name"):
            return self._interface
        raise AttributeError(name)

    def __repr__(self):
        return f"FakeInterface({self._name}={self._interface!r})"


class ShiftingInterface:
    """``__array_interface__`` (or ``name``) returns ``first`` on the first read, then
    ``then`` (time-of-check to time-of-use: the object changes between reads)."""

    def __init__(self, first, then, name="__array_interface__", keep=None):
        self.first = first
        self.then = then
        self.reads = 0
        self._name = name
        self.keep = keep

    def __getattr__(self, name):
        if name == self.__dict__.get("_name"):
            self.reads += 1
            return self.first if self.reads == 1 else self.then
        raise AttributeError(name)

    def __repr__(self):
        return f"ShiftingInterface({self.first!r} then {self.then!r})"


class RaisingAttribute:
    """Reading ``name`` raises ``error`` (an instance or class)."""

    def __init__(self, name, error=None):
        self._name = name
        self._error = HostileError("attribute refuses") if error is None else error

    def __getattr__(self, name):
        if name == self.__dict__.get("_name"):
            raise self._error
        raise AttributeError(name)

    def __repr__(self):
        return f"RaisingAttribute({self._name})"


def numpy_reading(obj):
    """How NumPy reads ``obj`` (an array it builds without copying), or the exception."""
    try:
        return np.asarray(obj)
    except Exception as exc:
        return exc


# ------------------------------------------------------------------ the API-wide catalogue
class Index:
    """An integer-like through ``__index__`` only, returning ``value`` (any object)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value

    def __repr__(self):
        return f"Index({self.value!r})"


class IntRaisingIndex(int):
    """An ``int`` subclass whose ``__index__`` raises (its value is still an int's)."""

    def __index__(self):
        raise HostileError("__index__ of an int subclass refuses")

    def __repr__(self):
        return f"IntRaisingIndex({int(self)})"


class LyingTuple(tuple):
    """A tuple subclass whose ``__len__`` claims ``length`` entries."""

    def __new__(cls, items, length):
        self = super().__new__(cls, items)
        self.length = length
        return self

    def __len__(self):
        return self.length

    def __repr__(self):
        return f"LyingTuple({tuple(self)!r}, len={self.length})"


class RaisingList(list):
    """A list subclass whose ``__iter__`` raises :class:`HostileError` half-way."""

    def __iter__(self):
        yield from list.__iter__(self[: len(self) // 2])
        raise HostileError("list iteration refuses half-way")


class DisagreeingList(list):
    """A list subclass whose ``__getitem__`` and ``__iter__`` give other values than its
    items (and each other)."""

    def __iter__(self):
        return iter([v + 1 for v in list.__iter__(self)])

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list.__getitem__(self, index)
        return list.__getitem__(self, index) + 2


class MutatingList(list):
    """A list subclass that appends to itself while it is iterated (capped, so that a
    consumer reading it to the end stops)."""

    def __iter__(self):
        for index, value in enumerate(list.__iter__(self)):
            if index < 100:
                self.append(value)
            yield value


class RaisingDunder:
    """An object whose special method ``name`` (``__eq__``, ``__hash__``, ``__bool__``,
    ``__repr__``, ``__str__``, ...) raises :class:`HostileError`."""

    def __init__(self, name):
        self.name = name

    def _raise(self, *args):
        raise HostileError(f"{self.name} refuses")

    def __eq__(self, other):
        if self.name == "__eq__":
            self._raise()
        return self is other

    def __hash__(self):
        if self.name == "__hash__":
            self._raise()
        return id(self) >> 4

    def __bool__(self):
        if self.name == "__bool__":
            self._raise()
        return True

    def __repr__(self):
        if self.name == "__repr__":
            self._raise()
        return f"RaisingDunder({self.name})"

    def __str__(self):
        if self.name == "__str__":
            self._raise()
        return repr(self)


class RaisingDLPack:
    """A DLPack producer whose ``__dlpack__`` and ``__dlpack_device__`` raise."""

    def __dlpack__(self, *args, **kwargs):
        raise HostileError("__dlpack__ refuses")

    def __dlpack_device__(self):
        raise HostileError("__dlpack_device__ refuses")

    def __repr__(self):
        return "RaisingDLPack()"


def recursive_list():
    """A list that contains itself."""
    items = [1]
    items.append(items)
    return items
