"""Crafted pickles: layout, buffer and view state built without the validated constructors.

A pickle that names only ``layoutkit.layout.StridedLayout`` (or ``Buffer``, or
``StridedMemoryView``) can make a bare instance with ``copyreg.__newobj__`` and set its
slots with ``BUILD``. The rule (issue 9: "Layout state can be built only through validated
paths, pickling included"): loading such a pickle either refuses (``TypeError`` /
``ValueError`` / ``OverflowError`` / ``pickle.UnpicklingError``) or gives an object whose
every derived value is what the validated constructor gives for the same numbers. A
``Buffer`` or a view cannot be unpickled into this process at all: their state is
process-local memory.
"""

import contextlib
import functools
import math
import pickle
from array import array

import numpy as np
from helpers.hostile import Cases
from helpers.hostile_checks import (
    Poisoned,
    check,
    check_layout,
    derived_values,
    host_view,
    refused,
    refused_or_ok,
)
from helpers.hostile_objects import crafted_call, crafted_pickle

from layoutkit import Buffer, HostMemoryResource, StridedLayout, StridedMemoryView

cases = Cases(__name__)
LOAD_REFUSALS = (TypeError, ValueError, OverflowError, pickle.UnpicklingError)


def _slot_names(cls):
    names = []
    for klass in cls.__mro__:
        for name in getattr(klass, "__slots__", ()):
            if name not in ("__weakref__", "__dict__") and name not in names:
                names.append(name)
    return names


def _state_of(obj, **overrides):
    """``obj``'s slot values with ``overrides`` (only slots the class has: the attacker
    reads the class first)."""
    names = _slot_names(type(obj))
    state = {}
    for name in names:
        with contextlib.suppress(AttributeError):
            state[name] = getattr(obj, name)
    for name in ("_packed", "_memo", "_finalizer"):  # caches and finalizers: not picklable
        if name in state:
            state[name] = None
    state.update({k: v for k, v in overrides.items() if k in names})
    return state


# ------------------------------------------------------------------ layouts
def _loads_layout(data, what, small_buffer_bytes=None):
    ok, loaded = refused_or_ok(pickle.loads, data, what=what, classes=LOAD_REFUSALS)
    if not ok:
        return
    check_layout(loaded, what)
    if small_buffer_bytes is not None:
        block = Poisoned(small_buffer_bytes)
        buffer = host_view(block.inner).buffer
        refused(StridedMemoryView.from_buffer, buffer, loaded, np.uint8, what=f"from_buffer of "
                f"a {small_buffer_bytes}-byte buffer with the layout from {what}")  # fmt: skip


_TEMPLATE = StridedLayout.dense((1,), 1)

FORGED_LAYOUTS = {
    # the example: a 1 MiB layout whose stored bounds say one element
    "forged_bounds": dict(
        _shape=(1 << 20,),
        _strides=(1,),
        _bounds=(0, 0),
        _min_offset=0,
        _max_offset=0,
        _volume=1,
    ),  # fmt: skip
    "forged_volume": dict(
        _shape=(4, 4),
        _strides=(4, 1),
        _volume=0,
        _bounds=(0, -1),
        _min_offset=0,
        _max_offset=-1,
    ),  # fmt: skip
    "forged_contiguity": dict(
        _shape=(8,), _strides=(3,), _bounds=(0, 7), _max_offset=7, _volume=8
    ),  # fmt: skip
    "forged_unique_broadcast": dict(
        _shape=(4, 3), _strides=(0, 1), _is_unique=True, _volume=12, _bounds=(0, 2), _max_offset=2
    ),  # fmt: skip
    "forged_packed": dict(
        _shape=(4,),
        _strides=(1,),
        _volume=4,
        _bounds=(0, 3),
        _max_offset=3,
        _packed=array("q", [1 << 20, 1]),
    ),  # fmt: skip
    "forged_offset": dict(_offset=-(1 << 40)),
    "list_shape": dict(_shape=[4, 4], _strides=[4, 1]),
    "string_shape": dict(_shape="ab", _strides="cd"),
    "float_itemsize": dict(_itemsize=2.5),
    "negative_itemsize": dict(_itemsize=-8),
    "zero_itemsize": dict(_itemsize=0),
    "huge_itemsize": dict(_itemsize=1 << 40),
    "strides_too_short": dict(_shape=(4, 4), _strides=(1,)),
    "strides_too_long": dict(_shape=(4,), _strides=(1, 1, 1, 1, 1, 1, 1, 1)),
    "negative_extent": dict(_shape=(-5,), _strides=(1,)),
    "volume_overflow": dict(_shape=(2**62, 4), _strides=(4, 1)),
    "stride_overflow": dict(_shape=(2,), _strides=(2**63 - 1,), _itemsize=8),
    "too_many_dims": dict(_shape=(1,) * 65, _strides=(1,) * 65),
    "bool_values": dict(_shape=(True, True), _strides=(True, False), _itemsize=True),
    "numpy_values": dict(_shape=(np.int64(3),), _strides=(np.int64(1),), _itemsize=np.int64(4)),
}


def _forged_layout(name, constructor):
    slots = _state_of(_TEMPLATE, **FORGED_LAYOUTS[name])
    data = crafted_pickle(StridedLayout, slots, constructor)
    shape = slots["_shape"]
    needed = None
    with contextlib.suppress(TypeError):
        needed = math.prod(shape) * slots["_itemsize"]
    small = 4096 if isinstance(needed, int) and needed > 4096 else None
    _loads_layout(data, f"a crafted StridedLayout pickle ({name}, {constructor})", small)


for _name in FORGED_LAYOUTS:
    cases.add(f"crafted_layout_{_name}", functools.partial(_forged_layout, _name, "newobj"))
cases.add(
    "crafted_layout_forged_bounds_reconstructor",
    functools.partial(_forged_layout, "forged_bounds", "reconstructor"),
)


@cases.case
def crafted_layout_missing_slots():
    """Only the shape and strides set: the object must not load half-made."""
    data = crafted_pickle(StridedLayout, {"_shape": (4,), "_strides": (1,)})
    _loads_layout(data, "a crafted StridedLayout pickle with most slots missing")


@cases.case
def crafted_layout_forged_bounds_then_copy():
    """The issue's full example: forged bounds, from_buffer of a small buffer, a copy."""
    slots = _state_of(_TEMPLATE, **FORGED_LAYOUTS["forged_bounds"])
    ok, layout = refused_or_ok(pickle.loads, crafted_pickle(StridedLayout, slots),
                               classes=LOAD_REFUSALS)  # fmt: skip
    if not ok:
        return
    block = Poisoned(4096)
    ok, view = refused_or_ok(
        StridedMemoryView.from_buffer, host_view(block.inner).buffer, layout, np.uint8
    )
    if ok:
        source = host_view(np.ones(layout.shape, np.uint8))
        refused(view.copy_from, source, what="a copy into a 1 MiB layout over 4096 bytes")
    block.untouched("from_buffer and a copy with a forged layout")


REBUILD_CALLS = {
    "offset_overflow": ((4,), (1,), 1, 2**70),
    "float_offset": ((4,), (1,), 1, 1.5),
    "negative_extent": ((-4,), None, 1, 0),
    "zero_itemsize": ((4,), (1,), 0, 0),
    "string_strides": ((4,), "x", 1, 0),
    "offset_past_int64_bytes": ((2,), (1,), 8, 2**62),
}


def _rebuild_call(name):
    args = REBUILD_CALLS[name]
    data = crafted_call("layoutkit.layout", "_rebuild", *args)
    refused(pickle.loads, data, what=f"a pickle calling _rebuild{args}", classes=LOAD_REFUSALS)


for _name in REBUILD_CALLS:
    cases.add(f"crafted_rebuild_{_name}", functools.partial(_rebuild_call, _name))


@cases.case
def crafted_rebuild_negative_offset_is_refused_by_from_buffer():
    data = crafted_call("layoutkit.layout", "_rebuild", (4,), (1,), 8, -2)
    ok, layout = refused_or_ok(pickle.loads, data, classes=LOAD_REFUSALS)
    if ok:
        check_layout(layout, "a pickle calling _rebuild with slice_offset -2")
        block = Poisoned(64)
        refused(StridedMemoryView.from_buffer, host_view(block.inner).buffer, layout, np.float64,
                what="from_buffer with a layout starting 2 elements before the buffer")  # fmt: skip


@cases.case
def layout_pickle_round_trips_keep_every_value():
    """Legitimate pickles (every protocol) give equal layouts with equal derived values."""
    base = StridedLayout((3, 1, 4, 5), (20, 999, -5, 1), 8)
    layouts = [base, base[1:, :, ::-2, 1:], base.broadcast_to((2, 3, 1, 4, 5)),
               StridedLayout.dense((0, 3), 2), StridedLayout((), None, 4)]  # fmt: skip
    for layout in layouts:
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            loaded = pickle.loads(pickle.dumps(layout, protocol))
            check(loaded == layout and hash(loaded) == hash(layout),
                  f"protocol {protocol}: {loaded!r} != {layout!r}")  # fmt: skip
            check(
                derived_values(loaded) == derived_values(layout),
                f"protocol {protocol}: derived values",
            )


# ------------------------------------------------------------------ buffers and views
def _forged_buffer_state():
    buffer = HostMemoryResource().allocate(64)
    state = _state_of(
        buffer, _ptr=8, _size=1 << 20, _owner=None, _mr=None, _info=(-1, False, True, False),
        _closed=False, _hash=hash((8, 1 << 20)),
    )  # fmt: skip
    buffer.close()
    return state


@cases.case
def crafted_buffer_pickle():
    """A Buffer over address 8 of 1 MiB, made by a pickle: loading must refuse."""
    data = crafted_pickle(Buffer, _forged_buffer_state())
    ok, buffer = refused_or_ok(pickle.loads, data, classes=LOAD_REFUSALS)
    check(not ok, f"a crafted pickle made {buffer!r}: a Buffer of memory nobody allocated "
                  "(a copy into a view of it writes at address 8)")  # fmt: skip


def _legit_view():
    return StridedMemoryView.from_array_interface(np.zeros((16, 16)))


VIEW_FORGERIES = {
    "address_8": dict(_ptr=8, _exporting_obj=None, _owner=None, _buffer=None),
    "pointer_read_from_an_int": dict(_ptr=None, _exporting_obj=12345, _owner=12345, _buffer=None),
    "writable_bytes": dict(
        _ptr=None, _readonly=False, _exporting_obj=b"x" * 2048, _owner=b"x" * 2048, _buffer=None
    ),  # fmt: skip
}


def _forged_view(name):
    view = _legit_view()
    view.layout  # noqa: B018 (built, so the forged state holds a real layout)
    state = _state_of(view, **VIEW_FORGERIES[name])
    ok, loaded = refused_or_ok(pickle.loads, crafted_pickle(StridedMemoryView, state),
                               classes=LOAD_REFUSALS)  # fmt: skip
    check(not ok, f"a crafted pickle made a StridedMemoryView ({name}) without any import "
                  "validating it: copies into it write wherever the pickle says")  # fmt: skip


for _name in VIEW_FORGERIES:
    cases.add(f"crafted_view_{_name}", functools.partial(_forged_view, _name))


cases.export(globals())
