"""Junk into every ``StridedMemoryView`` constructor and method, and into the exports.

The rule: only ``TypeError`` / ``ValueError`` / ``BufferError`` / ``OverflowError`` /
``AxisError`` (or a hostile object's own error) escape; a view that comes back passes
:func:`~helpers.hostile.check_view`; an exported capsule can be consumed by NumPy and
describes the view; nothing is written.
"""

import functools
import warnings

import numpy as np
from helpers.hostile import Cases, note
from helpers.hostile_checks import (
    DOCUMENTED_OR_HOSTILE,
    Poisoned,
    check,
    check_view,
    host_view,
    refused,
    refused_or_ok,
)
from helpers.hostile_dlpack import SameCapsule
from helpers.hostile_objects import FakeInterface, RaisingAttribute
from helpers.hostile_strategies import fuzz_case, int_likes, int_sequences, junk
from hypothesis import strategies as st

import layoutkit
from layoutkit import Buffer, HostMemoryResource, StridedLayout, StridedMemoryView

cases = Cases(__name__)


def _sample_views(block):
    array = block.array(np.float64, (4, 6))
    buffer = host_view(block.array(np.uint8)).buffer
    return [
        host_view(array),
        host_view(array[::2, ::-3]),
        StridedMemoryView.from_dlpack(array.T, -1),
        StridedMemoryView.from_buffer(buffer, StridedLayout.dense((8,), 8), None),
        StridedMemoryView.from_array_interface(bytes(16)),
        host_view(np.zeros((0, 3), np.int16)),
        host_view(np.float32(3.0).reshape(())),
    ]


_stream = st.one_of(st.none(), st.sampled_from([-1, 0, 1, 2]), int_likes, junk)
_layouts = st.one_of(
    st.sampled_from([
        StridedLayout.dense((4, 6), 8), StridedLayout.dense((100,), 8), StridedLayout((2,), (-1,), 8),
        StridedLayout.dense((6, 4), 8).permuted((1, 0)), StridedLayout.dense((3,), 8).broadcast_to((2, 3)),
        StridedLayout.dense((48,), 4), StridedLayout.dense((192,), 1), StridedLayout((), None, 8),
    ]),
    junk,
)  # fmt: skip
_dtypes = st.one_of(
    st.sampled_from([None, np.float64, "f8", "i8", "u1", "f4", "V8", object, "O", "M8[s]",
                     ">f8", "bfloat16", "not a dtype", np.dtype([("a", "<f4"), ("b", "<i4")])]),
    junk,
)  # fmt: skip
_max_versions = st.one_of(
    st.sampled_from([None, (1, 0), (1, 3), (0, 9), (2, 0), (True, 0), (1,), (1, 0, 0), [1, 0]]),
    st.tuples(int_likes, int_likes), junk,
)  # fmt: skip
_dl_devices = st.one_of(
    st.sampled_from([None, (1, 0), (2, 0), (1, 1), (13, 0), (1,), "cpu", 5]),
    st.tuples(int_likes, int_likes), junk,
)  # fmt: skip

OPERATIONS = {
    "from_dlpack": lambda d, v: StridedMemoryView.from_dlpack(
        d.draw(st.one_of(st.just(np.arange(3.0)), junk)), d.draw(_stream)),
    "from_array_interface": lambda d, v: StridedMemoryView.from_array_interface(
        d.draw(st.one_of(junk, st.just(FakeInterface(None)),
                         st.just(RaisingAttribute("__array_interface__"))))),
    "from_cuda_array_interface": lambda d, v: StridedMemoryView.from_cuda_array_interface(
        d.draw(st.one_of(junk, st.just(RaisingAttribute("__cuda_array_interface__")))),
        d.draw(_stream)),
    "from_any_interface": lambda d, v: StridedMemoryView.from_any_interface(
        d.draw(st.one_of(junk, st.just(np.arange(3.0)), st.just(bytearray(8)))), d.draw(_stream)),
    "from_buffer": lambda d, v: StridedMemoryView.from_buffer(
        d.draw(st.one_of(st.just(v.buffer), junk)), d.draw(_layouts), d.draw(_dtypes),
        d.draw(st.one_of(st.booleans(), junk))),
    "view": lambda d, v: v.view(d.draw(st.one_of(st.none(), _layouts)), d.draw(_dtypes)),
    "__dlpack__": lambda d, v: v.__dlpack__(
        stream=d.draw(_stream), max_version=d.draw(_max_versions), dl_device=d.draw(_dl_devices),
        copy=d.draw(st.one_of(st.none(), st.booleans(), junk))),
    "copy_from": lambda d, v: v.copy_from(d.draw(st.one_of(junk, st.just(v))),
                                          stream=d.draw(_stream)),
    "copy": lambda d, v: layoutkit.copy(v, d.draw(st.one_of(junk, st.just(v))), d.draw(_stream)),
    "deprecated_constructor": lambda d, v: StridedMemoryView(
        d.draw(st.one_of(junk, st.just(np.arange(3.0)))), d.draw(_stream)),
    "args_viewable": lambda d, v: layoutkit.args_viewable_as_strided_memory(
        d.draw(st.one_of(int_sequences(), junk)))(lambda *a: a)(v, v, v),
    "Buffer.from_handle": lambda d, v: Buffer.from_handle(
        d.draw(st.one_of(int_likes, junk)), d.draw(st.one_of(int_likes, junk)),
        d.draw(st.one_of(st.none(), junk)), d.draw(st.one_of(st.none(), junk))),
    "HostMemoryResource.allocate": lambda d, v: HostMemoryResource().allocate(
        d.draw(st.one_of(st.integers(-2, 4096), junk))),
}  # fmt: skip


def _check_result(name, result, what):
    if isinstance(result, StridedMemoryView):
        check_view(result, what, where=name != "from_cuda_array_interface")
    elif name == "__dlpack__":
        exported = np.from_dlpack(SameCapsule(result))
        check(exported.shape == () or exported.ndim >= 0, f"{what}: unreadable capsule")
    elif isinstance(result, Buffer):
        result.close()


def _junk_call(data):
    block = Poisoned(512)
    views = _sample_views(block)
    view = data.draw(st.sampled_from(views), label="view")
    name = data.draw(st.sampled_from(sorted(OPERATIONS)), label="operation")
    note((name, view))
    what = f"{name} on {view.shape} {view.dtype}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        # an argument index past the call's arguments: IndexError, as Python's own
        classes = (*DOCUMENTED_OR_HOSTILE, IndexError) if name == "args_viewable" else (
            DOCUMENTED_OR_HOSTILE)  # fmt: skip
        ok, result = refused_or_ok(OPERATIONS[name], data, view, what=what, classes=classes)
    if ok:
        _check_result(name, result, what)
    if name not in ("copy_from", "copy"):
        block.untouched(what)
    del result



cases.add("fuzz_view_entry_points_with_junk", fuzz_case(_junk_call, 500), timeout=600)
cases.add("fuzz_view_entry_points_with_junk_long", fuzz_case(_junk_call, 1000, 40000), timeout=3600, slow=True)


# ------------------------------------------------------------------ named export cases
EXPORT_JUNK = {
    "max_version_bool_major": dict(max_version=(True, 0)),
    "max_version_one_entry": dict(max_version=(1,)),
    "max_version_list": dict(max_version=[1, 0]),
    "max_version_strings": dict(max_version=("1", "0")),
    "max_version_huge": dict(max_version=(2**70, 0)),
    "dl_device_string": dict(max_version=(1, 0), dl_device="cpu"),
    "dl_device_three": dict(max_version=(1, 0), dl_device=(1, 0, 0)),
    "dl_device_int": dict(max_version=(1, 0), dl_device=1),
    "stream_object": dict(max_version=(1, 0), stream=object()),
    "stream_float": dict(max_version=(1, 0), stream=1.5),
    "copy_true": dict(max_version=(1, 0), copy=True),
}


def _export_junk(name):
    view = host_view(np.arange(6.0))
    ok, capsule = refused_or_ok(view.__dlpack__, what=f"__dlpack__(**{EXPORT_JUNK[name]})",
                                **EXPORT_JUNK[name])  # fmt: skip
    if ok:
        exported = np.from_dlpack(SameCapsule(capsule))
        check(exported.tolist() == list(range(6)), f"__dlpack__(**{EXPORT_JUNK[name]})")


for _name in EXPORT_JUNK:
    cases.add(f"dlpack_export_{_name}", functools.partial(_export_junk, _name))


@cases.case
def dlpack_export_max_version_entries_that_are_no_ints():
    """A view's and a Buffer's ``__dlpack__`` read ``max_version`` by one rule: entries that
    are no ints (strings, floats, bools) are a TypeError naming ``max_version`` (a bare
    ``'>=' not supported`` escaped before, and the two messages for a wrong length differed)."""
    view = host_view(np.arange(6.0))
    for exporter in (view, view.buffer):
        for version in (("a", "b"), (1.0, 0), (True, 0), (1, None)):
            exc = refused(exporter.__dlpack__, max_version=version, classes=(TypeError,),
                          what=f"{type(exporter).__name__}.__dlpack__(max_version={version!r})")  # fmt: skip
            check("max_version" in str(exc), f"max_version={version!r}: message {exc}")


@cases.case
def cpu_tensor_with_a_stream_handle():
    """Found by the fuzz: a stream handle for a CPU producer reached NumPy's ``__dlpack__``
    (DLPack gives CPU producers ``stream=None``) and NumPy's RuntimeError escaped."""
    for stream in (1, 2, 7, 2**40):
        for door in (StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface):
            ok, view = refused_or_ok(door, np.arange(3.0), stream,
                                     what=f"{door.__name__}(ndarray, stream_ptr={stream})")  # fmt: skip
            if ok:
                check_view(view, f"{door.__name__}(ndarray, {stream})")


class _LyingBounds(StridedLayout):
    """Says its elements span one item, whatever its shape."""

    offset_bounds = (0, 0)
    volume = 1
    is_unique = True


@cases.case
def layout_subclass_with_lying_bounds_cannot_reach_past_the_buffer():
    """``from_buffer`` / ``view`` / ``with_layout`` checked a layout subclass's own
    ``offset_bounds``: a 2**20-element view of a 32-byte buffer was made (reads and copies
    past it). The layout's checked values decide, and the view's layout is a plain one."""
    block = Poisoned(32)
    view = host_view(block.array(np.float64, (4,)))
    liar = _LyingBounds((1 << 20,), (1,), 8)
    for what, make in (
        ("from_buffer", lambda: StridedMemoryView.from_buffer(view.buffer, liar, np.float64)),
        ("view", lambda: view.view(liar)),
        ("with_layout", lambda: view.with_layout(liar)),
    ):
        refused(make, what=f"{what} with a {liar!r} whose offset_bounds say (0, 0)",
                classes=(ValueError,))  # fmt: skip
    fits = _LyingBounds((2,), (2,), 8)
    made = view.view(fits)
    check(type(made.layout) is StridedLayout and made.layout.offset_bounds == (0, 2),
          f"view of a layout subclass has layout {made.layout!r} of {type(made.layout)}")  # fmt: skip
    block.untouched("views of a lying layout subclass")


@cases.case
def args_viewable_positions_are_checked_when_decorating_and_calling():
    """``args_viewable_as_strided_memory`` took ``True`` as position 1 and a repeated
    position (``(0, 0)``, or ``(-1, 1)`` with two arguments), wrapping that argument
    twice: its ``.view()`` then failed late with a TypeError about the proxy. Bools and
    repeats are refused when decorating, positions the call lacks when calling."""
    decorate = layoutkit.args_viewable_as_strided_memory
    refused(decorate, (True,), classes=(TypeError,))
    refused(decorate, (0, 0), classes=(ValueError,))
    for indices, args in (((-1, 1), (1, 2)), ((3,), (1,)), ((-5,), (1,)), ((0,), ())):
        refused(decorate(indices)(lambda *a: a), *args, classes=(IndexError,))
    wrapped = decorate((-1, 0))(lambda a, b: (a.view(-1).shape, b.view(-1).shape))
    check(wrapped(np.zeros(2), np.zeros(3)) == ((2,), (3,)), "positions -1 and 0 of two")


@cases.case
def export_of_a_view_without_dtype_is_refused():
    buffer = host_view(np.zeros(8)).buffer
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((8,), 8), None)
    refused(view.__dlpack__, max_version=(1, 0), what="__dlpack__ of a view without a dtype",
            classes=(BufferError,))  # fmt: skip
    interface = view.__array_interface__
    check(np.asarray(FakeInterface(interface)).nbytes == 64, "void export of a dtype-less view")


@cases.case
def object_arrays_are_refused_by_every_door():
    array = np.array([object(), object()])
    for door, call in {
        "from_array_interface": lambda: StridedMemoryView.from_array_interface(array),
        "from_dlpack": lambda: StridedMemoryView.from_dlpack(array, -1),
        "from_any_interface": lambda: StridedMemoryView.from_any_interface(array, -1),
        "view(dtype=object)": lambda: host_view(np.zeros(2)).view(None, object),
    }.items():
        refused(call, what=f"{door} of Python objects")


cases.export(globals())
