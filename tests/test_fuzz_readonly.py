"""Read-only memory stays read-only, and aliasing views are read-only (DECISIONS 19).

Read-only is a property of the memory: a view re-made from a read-only view's ``buffer``
(``from_buffer``), or with another layout (``view()``), is read-only too, whatever
``is_readonly`` says, and no copy writes through it (a ``bytes`` object is never written).
A view that layoutkit makes with a non-unique layout (a broadcast) is read-only unless the
caller asks otherwise; exports say read-only where the view is.
"""

import functools

import numpy as np
from helpers.hostile import Cases
from helpers.hostile_checks import Poisoned, check, host_view, refused, refused_or_ok
from helpers.hostile_dlpack import HostileProducer

import layoutkit
from layoutkit import HostMemoryResource, StridedLayout, StridedMemoryView

cases = Cases(__name__)


def _bytes_view():
    data = bytes(range(64))
    return StridedMemoryView.from_array_interface(data), data, lambda: bytes(data)


def _readonly_ndarray_view():
    array = np.arange(8.0)
    array.flags.writeable = False
    return StridedMemoryView.from_array_interface(array), array, array.copy


def _readonly_dlpack_view():
    block = Poisoned(256)
    array = block.array(np.float64, (8,))
    producer = HostileProducer(array, flags=1)
    view = StridedMemoryView.from_dlpack(producer, -1)
    return view, (block, producer), lambda: block.raw.copy()


def _readonly_numpy_dlpack_view():
    array = np.arange(8.0)
    array.flags.writeable = False
    return StridedMemoryView.from_dlpack(array, -1), array, array.copy


SOURCES = {
    "bytes": _bytes_view,
    "readonly_ndarray": _readonly_ndarray_view,
    "readonly_dlpack_capsule": _readonly_dlpack_view,
    "readonly_ndarray_dlpack": _readonly_numpy_dlpack_view,
}

ALIASES = {
    "from_buffer": lambda v: StridedMemoryView.from_buffer(v.buffer, v.layout, v.dtype),
    "from_buffer_is_readonly_false": lambda v: StridedMemoryView.from_buffer(
        v.buffer, v.layout, v.dtype, is_readonly=False
    ),
    "view_other_layout": lambda v: v.view(v.layout[::2]),
    "view_same_layout_and_dtype": lambda v: v.view(v.layout, v.dtype),
}


def _alias_stays_readonly(source, alias):
    view, keep, snapshot = SOURCES[source]()
    check(view.readonly, f"a view of {source} memory is not read-only")
    before = snapshot()
    ok, other = refused_or_ok(ALIASES[alias], view, what=f"{alias} of a {source} view")
    if ok:
        check(other.readonly,
              f"{alias} of a read-only {source} view gives a writable view: read-only must "
              "survive .buffer, from_buffer and view()")  # fmt: skip
        source_view = host_view(np.zeros(other.shape, other.dtype or np.uint8))
        refused(other.copy_from, source_view, what=f"copy into {alias} of a {source} view")
        refused(layoutkit.copy, other, source_view, what=f"layoutkit.copy into {alias}")
        exported = np.from_dlpack(other)
        check(not exported.flags.writeable, f"NumPy can write the export of {alias} of {source}")
    check(np.array_equal(snapshot(), before), f"{source} memory was written")
    del keep


for _source in SOURCES:
    for _alias in ALIASES:
        cases.add(f"readonly_{_source}_{_alias}",
                  functools.partial(_alias_stays_readonly, _source, _alias))  # fmt: skip


@cases.case
def readonly_view_exports_read_only():
    view, keep, _ = _readonly_ndarray_view()
    check(view.__array_interface__["data"][1] is True, "__array_interface__ says writable")
    check(not np.from_dlpack(view).flags.writeable, "np.from_dlpack export is writable")
    refused(view.__dlpack__, what="a legacy (unversioned) DLPack export of read-only memory",
            classes=(BufferError,))  # fmt: skip


# ------------------------------------------------------------------ aliasing (broadcast) views
def _broadcast_layout():
    return StridedLayout.dense((3,), 8).broadcast_to((4, 3))


def _host_buffer():
    return HostMemoryResource().allocate(3 * 8)


BROADCASTS = {
    "from_buffer": lambda: StridedMemoryView.from_buffer(
        _host_buffer(), _broadcast_layout(), np.float64
    ),
    "view": lambda: host_view(np.arange(3.0)).view(_broadcast_layout()),
    "from_buffer_zero_stride_3d": lambda: StridedMemoryView.from_buffer(
        _host_buffer(), StridedLayout((2, 3, 2), (0, 1, 0), 8), np.float64
    ),
    "from_buffer_overlapping": lambda: StridedMemoryView.from_buffer(
        _host_buffer(), StridedLayout((2, 2), (1, 1), 8), np.float64
    ),
}


def _broadcast_is_readonly(name):
    view = BROADCASTS[name]()
    check(not view.layout.is_unique, "test premise: the layout aliases")
    check(view.readonly,
          f"a view with a non-unique layout ({name}: shape {view.shape}, strides "
          f"{view.strides}) is writable; NumPy makes aliasing views read-only")  # fmt: skip
    check(not np.from_dlpack(view).flags.writeable,
          "NumPy can write through the export of an aliasing view")  # fmt: skip


for _name in BROADCASTS:
    cases.add(
        f"aliasing_view_{_name}_is_readonly", functools.partial(_broadcast_is_readonly, _name)
    )


@cases.case
def broadcast_copy_destination_is_refused():
    block = Poisoned(24)
    view = host_view(block.array(np.float64, (3,))).view(_broadcast_layout())
    ok, _ = refused_or_ok(layoutkit.copy, view, host_view(np.ones((4, 3))))
    check(not ok, "a copy into a broadcast view was accepted")
    block.untouched("a refused copy into a broadcast view")


@cases.case
def compiled_write_through_a_broadcast_is_refused():
    """Compiled code cannot make a writable view's type read-only at run time: it refuses
    the aliasing layout before the store (nothing written)."""
    from numba import njit

    @njit
    def store_through(view, layout):
        moved = view.with_layout(layout)
        moved[0, 0] = 7.0

    block = Poisoned(24)
    view = host_view(block.array(np.float64, (3,)))
    refused(store_through, view, _broadcast_layout(), classes=(ValueError,))
    block.untouched("a compiled store through a broadcast layout")


cases.export(globals())
