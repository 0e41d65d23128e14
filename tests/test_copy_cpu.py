"""Host-to-host copies: every byte of both buffers checked against ``np.copyto``."""

import numpy as np
import pytest
from helpers.copy_cases import (
    ALIAS_ELEMENTS,
    ClaimsDevice,
    DeviceView,
    SeededRandom,
    alias_view,
    aliased_case,
    copy_cases,
    expected_bytes,
    host_view,
    numpy_items,
)
from hypothesis import given, settings
from numpy.lib.stride_tricks import as_strided

import layoutkit
from layoutkit import Buffer, StridedLayout, StridedMemoryView
from layoutkit._driver import Location
from layoutkit.copy import copy
from layoutkit.copy._api import shares_bytes


def view(array, writable=False):
    return host_view(array, writable)


@settings(max_examples=300, deadline=None)
@given(copy_cases())
def test_random_layouts_match_copyto(case):
    dst_buffer, dst, src_buffer, src = case
    expected = expected_bytes(dst_buffer, dst, src)
    source_before = src_buffer.copy()
    copy(view(dst), view(src))
    np.testing.assert_array_equal(dst_buffer, expected)
    np.testing.assert_array_equal(src_buffer, source_before)


@pytest.mark.parametrize("dtype", ["u1", "i2", "f4", "f8", "c16", "V3", "V12"])
@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.T,
        lambda a: a[::-1, ::2],
        lambda a: a[1:, :-1].T[::-1],
        lambda a: a[:, 3],
        lambda a: a[2],
        lambda a: a[..., None, :],
    ],
    ids=["transpose", "reverse-step", "slice-transpose", "column", "row", "newaxis"],
)
def test_named_layouts(dtype, make):
    rng = np.random.default_rng(0)
    base = np.frombuffer(rng.bytes(37 * 41 * np.dtype(dtype).itemsize), dtype=dtype).reshape(37, 41)
    src = make(base)
    dst = np.zeros(src.shape, dtype)
    copy(view(dst), view(src))
    assert dst.tobytes() == np.ascontiguousarray(src).tobytes()


def test_broadcast_source_and_zero_d():
    dst = np.zeros((3, 4), np.float32)
    copy(view(dst), view(np.arange(4, dtype=np.float32)))
    np.testing.assert_array_equal(dst, np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)))
    scalar = np.zeros((), np.float64)
    copy(view(scalar), view(np.array(2.5)))
    assert scalar == 2.5
    copy(view(np.zeros((0, 3), "i4")), view(np.ones(3, "i4")))


@pytest.mark.parametrize("dtype", ["u1", "u2", "f4", "c16", "V3", "V12"])
@pytest.mark.parametrize("cols", [15, 16, 17, 1000, 5000])
def test_fill_rows_match_copyto(dtype, cols):
    """A source constant along the destination's rows (a broadcast column, a scalar,
    ``Buffer.fill``) is filled by doubling a stored unit, in blocks up to ``FILL_BLOCK``
    bytes (it ran one unit per store, 10-30x slower than ``np.copyto`` for 1-byte units):
    rows shorter and longer than ``FILL_UNITS`` and than a block, misaligned and with a
    gap between rows, reversed sources; every byte of the buffer checked."""
    from layoutkit.copy.cpu import FILL_BLOCK, FILL_UNITS

    assert 15 < FILL_UNITS < 1000 and 5000 * np.dtype(dtype).itemsize > FILL_BLOCK  # both sides
    rng = np.random.default_rng(cols)
    itemsize, rows = np.dtype(dtype).itemsize, 3
    for offset, gap in ((0, 0), (1, 2), (4, 1)):
        shape, strides = (rows, cols), ((cols + gap) * itemsize, itemsize)
        raw = np.frombuffer(rng.bytes(rows * (cols + gap) * itemsize + offset + 16), np.uint8).copy()
        column = np.frombuffer(rng.bytes(rows * itemsize), dtype).reshape(rows, 1)[::-1]
        expected = raw.copy()
        np.copyto(np.ndarray(shape, dtype, expected, offset, strides), np.broadcast_to(column, shape))
        copy(view(np.ndarray(shape, dtype, raw, offset, strides)), view(column))
        np.testing.assert_array_equal(raw, expected)
        scalar = np.frombuffer(rng.bytes(itemsize), dtype).reshape(())
        np.copyto(np.ndarray(shape, dtype, expected, offset, strides), scalar)
        copy(view(np.ndarray(shape, dtype, raw, offset, strides)), view(scalar))
        np.testing.assert_array_equal(raw, expected)


def test_large_transpose_matches_numpy():
    src = np.arange(700 * 900, dtype=np.uint16).reshape(700, 900)
    dst = np.empty((900, 700), np.uint16)
    copy(view(dst), view(src.T))
    np.testing.assert_array_equal(dst, src.T)


def test_same_view_is_a_no_op():
    a = np.arange(10.0)
    copy(view(a), view(a))
    np.testing.assert_array_equal(a, np.arange(10.0))


@pytest.mark.parametrize(
    ("dst", "src", "error", "message"),
    [
        (
            np.zeros(3, "f4"),
            np.zeros(4, "f4"),
            ValueError,
            r"src shape \(4,\) and dst shape \(3,\) cannot be broadcast together",
        ),
        (
            np.zeros(3, "f4"),
            np.zeros(3, "i4"),
            TypeError,
            "dtypes differ: dst dtype float32 and src dtype int32",
        ),
        (
            np.zeros(3, "f4"),
            np.zeros(3, "f8"),
            ValueError,
            "dtypes differ: dst dtype float32 and src dtype float64",
        ),
        (np.broadcast_to(np.zeros(1, "f4"), (3,)), np.ones(3, "f4"), ValueError, "non-unique"),
        (np.frombuffer(bytes(12), "f4"), np.ones(3, "f4"), ValueError, "dst is read-only"),
    ],
)
def test_bad_input_writes_nothing(dst, src, error, message):
    before = dst.copy()
    with pytest.raises(error, match=message):
        copy(view(dst), view(src))
    np.testing.assert_array_equal(dst, before)


@pytest.mark.parametrize(
    ("dst_shape", "src_shape"),
    [((3,), (1, 3)), ((), (1, 1)), ((2, 3), (1, 1, 1, 3)), ((2, 0), (1, 1, 0)), ((4,), (1,) * 63)],
)
def test_leading_unit_axes_of_the_source_are_dropped_as_copyto_does(dst_shape, src_shape):
    """``np.copyto(zeros(3), ones((1, 3)))`` works (NumPy drops a source's leading extent-1
    axes beyond the destination's); copy refused it ("cannot be broadcast"), also through
    a shared source read through a temporary. Other extra axes are still refused."""
    rng = np.random.default_rng(0)
    src = rng.integers(0, 100, src_shape).astype("i2")
    dst, expected = np.zeros(dst_shape, "i2"), np.zeros(dst_shape, "i2")
    np.copyto(expected, src)
    copy(view(dst), view(src))
    np.testing.assert_array_equal(dst, expected)
    a = np.arange(8, dtype="i2")
    copy(view(a[1:4], writable=True), view(a[None, :3]))  # shares memory: read first
    np.testing.assert_array_equal(a, [0, 0, 1, 2, 4, 5, 6, 7])
    refusal = r"src shape \(2, 3\) and dst shape \(3,\) cannot be broadcast together"
    with pytest.raises(ValueError, match=refusal):
        copy(view(np.zeros(3, "i2")), view(np.zeros((2, 3), "i2")))


def test_broadcast_destination_is_refused():
    target = np.zeros(1, "f4")
    dst = np.lib.stride_tricks.as_strided(target, shape=(3,), strides=(0,))
    with pytest.raises(ValueError, match="destination layout is non-unique"):
        copy(view(dst, writable=True), view(np.ones(3, "f4")))
    assert target[0] == 0


def test_overlap_reads_the_source_first_as_numpy_does():
    a = np.arange(10, dtype=np.int32)
    copy(view(a[1:], writable=True), view(a[:-1]))  # a shift: the source as it was
    np.testing.assert_array_equal(a, [0, *range(9)])
    b = np.arange(10, dtype=np.int32)
    copy(view(b[::-1], writable=True), view(b))  # a reversal onto itself
    np.testing.assert_array_equal(b, np.arange(10)[::-1])
    c = np.arange(10, dtype=np.int32)
    copy(view(c[:5]), view(c[5:]))
    np.testing.assert_array_equal(c[:5], np.arange(5, 10))


def test_overlap_of_an_aligned_struct_moves_every_byte():
    """The temporary of a shared source was ``np.array(src)``, read through the view's array
    interface: for an aligned ``'i1,f4'`` (padding NumPy names like a field) it raised
    ``ValueError`` ("field 'f1' occurs more than once"), and for other padded structs it
    copied field by field, so the padding written was the temporary's, not the source's
    (a direct copy moves every byte). The temporary holds the source's bytes."""
    for dtype in (np.dtype("i1,f4", align=True), np.dtype([("a", "u1"), ("b", "<i4")], align=True)):
        raw = np.arange(48, dtype=np.uint8)
        a = raw.view(dtype)
        copy(view(a[1:]), view(a[:-1]))  # shares memory: read first, as memmove reads it
        assert raw.tolist() == [*range(8), *range(40)]


def test_interleaved_views_share_no_byte_and_copy_directly():
    a = np.arange(12, dtype=np.int16)
    even, odd = view(a[::2], writable=True), view(a[1::2])
    assert not shares_bytes(even, odd, even.layout, odd.layout)  # one span, no byte shared
    copy(even, odd)
    np.testing.assert_array_equal(a[::2], np.arange(1, 12, 2))
    # a byte of each 2-byte element: shared, though no element starts where another does
    bytes_ = np.arange(8, dtype=np.uint8)
    first = np.ndarray((3,), np.int16, buffer=bytes_, offset=0, strides=(2,))
    shifted = np.ndarray((3,), np.int16, buffer=bytes_, offset=1, strides=(2,))
    assert shares_bytes(view(first), view(shifted), view(first).layout, view(shifted).layout)


#: Pairs ``(dst, src)`` of views of one array, for every kind of sharing: interleaved,
#: partial overlaps whose elements do or do not meet, reversals, transposes of a square
#: block onto itself, broadcast sources inside the destination, 0-d and empty views,
#: leading extent-1 axes and extent-1 axes with junk strides.
ALIASING = {
    "interleaved": lambda a: (a[:64:2], a[1:64:2]),
    "interleaved-reversed": lambda a: (a[:64:2], a[63::-2]),
    "shift-up": lambda a: (a[1:], a[:-1]),
    "shift-down": lambda a: (a[:-1], a[1:]),
    "reversal": lambda a: (a[::-1], a),
    "half-onto-reversed-half": lambda a: (a[:32], a[32:64][::-1]),
    "steps-3-and-2-meet": lambda a: (a[0:60:3], a[0:40:2]),
    "steps-3-and-2-miss": lambda a: (a[1:61:3], a[0:40:2]),
    "transpose": lambda a: (a[:64].reshape(8, 8), a[:64].reshape(8, 8).T),
    "transpose-flipped": lambda a: (a[:64].reshape(8, 8)[::-1], a[:64].reshape(8, 8).T),
    "transpose-of-a-block": lambda a: (a[:64].reshape(8, 8)[1:5, 2:6],
                                       a[:64].reshape(8, 8)[1:5, 2:6].T),  # fmt: skip
    "axes-rotated": lambda a: (a[:64].reshape(4, 4, 4), a[:64].reshape(4, 4, 4).transpose(2, 0, 1)),
    "broadcast-row": lambda a: (a[:64].reshape(8, 8), a[8:16]),
    "broadcast-column": lambda a: (a[:64].reshape(8, 8),
                                   as_strided(a[3:], (8, 8), (a.strides[0], 0))),  # fmt: skip
    "broadcast-element": lambda a: (a[:64], as_strided(a[17:], (64,), (0,))),
    "broadcast-first-element": lambda a: (a[:64], a[0:1]),
    "zero-d": lambda a: (a[5:6].reshape(()), a[6:7].reshape(())),
    "zero-d-itself": lambda a: (a[5:6].reshape(()), a[5:6].reshape(())),
    "empty": lambda a: (a[3:3], a[4:4]),
    "leading-unit-axes": lambda a: (a[:8], a[4:12].reshape(1, 1, 8)),
    "junk-unit-strides": lambda a: (as_strided(a[1:], (1, 8, 1), (10**6, a.strides[0], -7)),
                                    as_strided(a, (1, 8, 1), (3, a.strides[0], 99))),  # fmt: skip
}
ALIAS_DTYPES = ["u1", "i2", "V3", "f4", "V5", "f8", "V12", "c16", "V32",
                np.dtype("i1,f4", align=True), np.dtype([("a", "u1"), ("b", "<i8")])]  # fmt: skip


@pytest.mark.parametrize("make", ALIASING.values(), ids=ALIASING.keys())
def test_views_of_one_array_copy_as_copyto_does(make):
    """Each pair, each dtype, each of ``copy``, ``copy_from`` and ``copy_to``: the bytes
    ``np.copyto(dst, src.copy())`` leaves between arrays that alias the same way (opaque
    items, so padding moves too): the source as it was before the copy. (``np.copyto(dst,
    src)`` itself is not that for 1-d views with strides of one sign that differ: NumPy
    2.4 copies ``a[::2] <- a[:6]`` element by element, giving ``[0, 1, 1, 3, 1, 5]``.)"""
    rng = np.random.default_rng(0)
    for dtype in map(np.dtype, ALIAS_DTYPES):
        items = np.dtype(f"V{dtype.itemsize}")
        for call in ("copy", "copy_from", "copy_to"):
            memory = np.frombuffer(rng.bytes(72 * dtype.itemsize), items).copy()
            expected = memory.copy()
            expected_dst, expected_src = make(expected)
            np.copyto(expected_dst, expected_src.copy())
            dst, src = (view(side.view(dtype)) for side in make(memory))
            if call == "copy":
                copy(dst, src)
            elif call == "copy_from":
                dst.copy_from(src)
            else:
                src.copy_to(dst)
            assert memory.tobytes() == expected.tobytes(), (dtype, call)


@pytest.mark.parametrize("first", range(0, 2000, 500))
def test_seeded_copies_between_views_of_one_buffer(first):
    """The seeded driver of :func:`helpers.copy_cases.aliased_case` (the fuzz of
    ``test_fuzz_copy`` draws the same cases with hypothesis): views by ``from_buffer`` over
    one Buffer, ``np.copyto(dst, src.copy())`` between arrays that alias the same way as
    the oracle (see ``test_views_of_one_array_copy_as_copyto_does``); a
    destination that aliases itself is refused and nothing is written."""
    for seed in range(first, first + 500):
        case = aliased_case(SeededRandom(seed))
        if case is None:
            continue
        itemsize, dst_side, src_side = case
        memory = np.frombuffer(np.random.default_rng(seed).bytes(ALIAS_ELEMENTS * itemsize),
                               np.uint8).copy()  # fmt: skip
        buffer = view(memory).buffer
        dst = alias_view(memory, buffer, dst_side, itemsize, None, "from_buffer", False)
        src = alias_view(memory, buffer, src_side, itemsize, None, "from_buffer")
        expected = memory.copy()
        if dst.size and not dst.layout.is_unique:
            with pytest.raises(ValueError, match="destination layout is non-unique"):
                copy(dst, src)
        else:
            np.copyto(numpy_items(expected, dst_side, itemsize),
                      numpy_items(expected, src_side, itemsize).copy())  # fmt: skip
            copy(dst, src)
        assert memory.tobytes() == expected.tobytes(), (seed, itemsize, dst_side, src_side)


def test_device_accessible_memory_shared_by_both_sides_is_refused():
    # device memory, and pinned memory (host-accessible too: a host read through a
    # temporary would not wait for work queued on the copy's stream)
    a = np.arange(10, dtype=np.int32)
    device = DeviceView(a, 0)
    pinned_buffer = Buffer._from_known(a.ctypes.data, a.nbytes, owner=a,
                                       location=Location(0, True, True, False))  # fmt: skip
    pinned = StridedMemoryView.from_buffer(pinned_buffer, StridedLayout.dense((10,), 4),
                                           np.int32, False)  # fmt: skip
    assert pinned.is_device_accessible and pinned.buffer.is_host_accessible
    for view in (device, pinned):
        with pytest.raises(ValueError, match="dst and src share device-accessible memory"):
            copy(view.view(view.layout[1:]), view.view(view.layout[:-1]))
    np.testing.assert_array_equal(a, np.arange(10))


def test_not_a_view():
    with pytest.raises(TypeError, match="dst must be a strided memory view or an array"):
        copy(object(), view(np.zeros(3)))


class RefusingProducer:
    """A producer whose array interface refuses with a BufferError."""

    @property
    def __array_interface__(self):
        raise BufferError("no memory here")


def test_a_producer_refusal_names_the_side():
    """A producer's BufferError said what the producer said but not which argument it was
    (found by the API matrix); the class stays BufferError."""
    with pytest.raises(BufferError, match="^src: .*no memory here"):
        copy(np.zeros(3), RefusingProducer())
    with pytest.raises(BufferError, match="^dst: .*no memory here"):
        copy(RefusingProducer(), np.zeros(3))


def test_package_is_callable_as_layoutkit_copy():
    a = np.arange(4, dtype=np.int8)
    b = np.zeros(4, dtype=np.int8)
    layoutkit.copy(view(b), view(a[::-1]))
    np.testing.assert_array_equal(b, a[::-1])


def test_strided_memory_view_copy_from_and_copy_to():

    src = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    dst = np.zeros((4, 3, 2))
    StridedMemoryView.from_array_interface(dst).copy_from(
        StridedMemoryView.from_array_interface(src.transpose(2, 1, 0))
    )
    np.testing.assert_array_equal(dst, src.transpose(2, 1, 0))
    back = np.zeros_like(src)
    StridedMemoryView.from_array_interface(dst).copy_to(
        StridedMemoryView.from_array_interface(back.transpose(2, 1, 0))
    )
    np.testing.assert_array_equal(back, src)


def test_read_only_view_refused():

    frozen = np.zeros(4)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="dst is read-only"):
        copy(StridedMemoryView.from_array_interface(frozen), view(np.ones(4)))
    assert not frozen.any()


def array_of(view):
    """The NumPy array behind a test view (``host_view`` or ``DeviceView``)."""
    resource = view.buffer.memory_resource
    return resource.array if isinstance(resource, ClaimsDevice) else view.exporting_obj


def test_devices_without_peer_access_are_refused_before_any_copy(monkeypatch):
    from layoutkit import _driver

    calls = []

    def fake_call(name, *args):
        calls.append(name)
        return 0  # cuDeviceGet -> device 0 handle; cuDeviceCanAccessPeer -> no access

    monkeypatch.setattr(_driver, "_call", fake_call)
    dst = np.zeros((4, 5), np.float32)
    with pytest.raises(
        ValueError, match="dst is on device 0 and src on device 1, which has no peer"
    ):
        copy(DeviceView(dst, 0), DeviceView(np.ones((5, 4), np.float32).T, 1))
    assert "cuDeviceCanAccessPeer" in calls
    assert not any(name.startswith("cuMemcpy") or name == "cuLaunchKernel" for name in calls)
    assert not dst.any()


@pytest.mark.parametrize(
    "first", ["import layoutkit; layoutkit.copy", "import layoutkit.copy", "import layoutkit"]
)
def test_layoutkit_copy_is_callable_whichever_import_comes_first(first):
    import subprocess
    import sys

    script = (
        f"{first}\n"
        "import numpy as np, layoutkit\n"
        "from layoutkit import StridedMemoryView as V\n"
        "from layoutkit.copy import copy, plan\n"
        "a = np.arange(6.0).reshape(2, 3); b = np.zeros((3, 2))\n"
        "layoutkit.copy(V.from_array_interface(b), V.from_array_interface(a.T))\n"
        "copy(V.from_array_interface(b[::-1]), V.from_array_interface(a.T))\n"
        "assert b.tolist() == a.T[::-1].tolist(), b\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


class FakeDriver:
    """The driver calls of host<->device copies, executed on host memory (no GPU needed).

    "Device" memory is host memory here, so only transfers whose device side needs no
    kernel run: 2-d copies and staging through the pinned ring into (or from) a device
    side that is already dense in the host side's order.
    """

    def __init__(self, monkeypatch, capturing=False, kernels=False):
        import contextlib
        import ctypes

        from layoutkit import _driver
        from layoutkit.copy import _transfer
        from layoutkit.copy.cpu import run_host_plan
        from layoutkit.copy.plan import planned

        self.calls = []
        self.keep = []
        memmove = ctypes.memmove

        def host_alloc(size):
            buffer = np.zeros(size, np.uint8)
            self.keep.append(buffer)
            return buffer.ctypes.data

        def call(name, *args):
            self.calls.append(name)
            if name == "cuMemcpy2DAsync":
                params = args[0]
                src = int(params.srcDevice) or int(params.srcHost)
                dst = int(params.dstDevice) or int(params.dstHost)
                for row in range(params.Height):
                    memmove(dst + row * params.dstPitch, src + row * params.srcPitch,
                            params.WidthInBytes)  # fmt: skip
                return None
            raise AssertionError(f"unexpected driver call {name}")

        def memcpy_async(dst, src, size, stream=None):
            self.calls.append("memcpy")
            memmove(dst, src, size)

        def record(name, result=None):
            return lambda *args: self.calls.append(name) or result

        fakes = {
            "_call": call,
            "device_context": lambda device: contextlib.nullcontext(),
            "stream_synchronize": record("sync"),
            "stream_is_capturing": lambda stream=None: capturing,
            "mem_host_alloc": host_alloc,
            "mem_free_host": record("free_host"),
            "mem_alloc_async": lambda size, stream=None: host_alloc(size),
            "mem_free_async": record("free"),
            "memcpy_async": memcpy_async,
            "event_create": record("event_create", 0),
            "event_record": record("event_record"),
            "event_synchronize": record("event_synchronize"),
            "event_destroy": record("event_destroy"),
        }
        for name, fake in fakes.items():
            monkeypatch.setattr(_driver, name, fake)
        if kernels:  # the device kernels of staged copies, run as host copies

            def device_copy(dst_ptr, dst_layout, src_ptr, src_layout, stream, device_id):
                self.calls.append("kernel")
                plan = planned(dst_layout, src_layout, dst_ptr, src_ptr, False, False)
                run_host_plan(plan, dst_ptr, src_ptr)

            monkeypatch.setattr(_transfer, "_device_copy", device_copy)
        monkeypatch.setattr(_transfer, "_staging", {})
        monkeypatch.setattr(_transfer, "STAGING_BYTES", 64)  # many chunks, ring reused
        monkeypatch.setattr(_transfer, "STAGING_BUFFERS", 2)


@pytest.mark.parametrize(
    ("make_dst", "make_src", "expected_calls"),
    [
        # host step-2 rows of 640 bytes into dense device memory: a 2-d driver copy
        (
            lambda: DeviceView(np.zeros((6, 160), "f4"), 0),
            lambda a: view(a[::2]),
            ["cuMemcpy2DAsync"],
        ),
        # dense device memory into a host view with a step on both axes: unpack from pinned
        (
            lambda: view(np.zeros((12, 320), "f4")[::2, ::2]),
            lambda a: DeviceView(a[:6, :160].copy(), 0),
            ["memcpy", "event_synchronize"],
        ),
        # host step-2 columns into dense device memory: pack into pinned, chunk by chunk
        (
            lambda: DeviceView(np.zeros((12, 80), "f4"), 0),
            lambda a: view(a[:, ::2]),
            ["memcpy", "event_record"],
        ),
        # host step-2 rows of 20 bytes: too short for a 2-d copy, staged
        (lambda: DeviceView(np.zeros((6, 5), "f4"), 0), lambda a: view(a[::2, :5]), ["memcpy"]),
    ],
    ids=["copy2d", "staged-d2h", "staged-h2d", "short-rows-staged"],
)
def test_transfers_with_a_fake_driver(monkeypatch, make_dst, make_src, expected_calls):
    fake = FakeDriver(monkeypatch)
    source = np.arange(12 * 160, dtype="f4").reshape(12, 160)
    dst, src = make_dst(), make_src(source)
    copy(dst, src)
    expected = np.broadcast_to(array_of(src), array_of(dst).shape)
    np.testing.assert_array_equal(array_of(dst), expected)
    for name in expected_calls:
        assert name in fake.calls
    assert "free" not in fake.calls  # the device side was dense: no temporary


def test_staged_copy_refuses_a_capturing_stream(monkeypatch):
    fake = FakeDriver(monkeypatch, capturing=True)
    dst = DeviceView(np.zeros((12, 80), "f4"), 0)
    with pytest.raises(RuntimeError, match="cannot be captured: stream 0x7 is capturing"):
        copy(dst, view(np.ones((12, 160), "f4")[:, ::2]), stream=7)
    assert not fake.calls
    assert not array_of(dst).any()


class RecordingResource(layoutkit.MemoryResource):
    """Allocates NumPy memory, recording ``(size, stream)`` of each call; its buffers claim
    device 0 (``device=True``, for a ``FakeDriver`` copy) or the host. ``spare`` bytes
    fewer than asked make it a lying resource."""

    def __init__(self, device, short=0, result=None):
        self.device, self.short, self.result = device, short, result
        self.recorded, self.freed, self.arrays = [], [], []

    def allocate(self, size, stream=None):
        self.recorded.append((size, stream))
        if self.result is not None:
            return self.result
        array = np.zeros(size - self.short, np.uint8)
        self.arrays.append(array)
        return Buffer.from_handle(array.ctypes.data, array.size, mr=self)

    def deallocate(self, ptr, size, stream=None):
        self.freed.append((size, stream))

    device_id = property(lambda self: 0 if self.device else -1)
    is_device_accessible = property(lambda self: self.device)
    is_host_accessible = property(lambda self: not self.device)


def _host_and_device_pair(to_device):
    """As in cuda.core's allocator test: a host side with gaps and a device side that is no
    dense layout (reversed, sliced), so both temporaries are needed. Returns the views
    ``(dst, src)`` and the arrays ``(src, dst)`` behind them."""
    def gappy():
        return np.zeros((111, 122), np.float32)[:, ::-2]

    def reversed_columns():
        return np.zeros((122, 111), np.float32).T[::-1, :61]

    host, device = gappy(), reversed_columns()
    values = np.arange(host.size, dtype=np.float32).reshape(host.shape)
    if to_device:
        host[...] = values
        return DeviceView(device, 0), view(host), host, device
    device[...] = values
    return view(host), DeviceView(device, 0), device, host


@pytest.mark.parametrize("to_device", [True, False], ids=["h2d", "d2h"])
@pytest.mark.parametrize("as_dict", [True, False], ids=["dict", "options"])
def test_allocator_resources_make_the_temporaries(monkeypatch, to_device, as_dict):
    """``copy(..., allocator=)`` takes cuda.core's allocator forms (a dict or
    ``CopyAllocatorOptions``); each temporary comes from its side's resource, once, with
    the copy's stream, and goes back to it; the host buffer is waited for before it is
    freed."""
    fake = FakeDriver(monkeypatch, kernels=True)
    dst, src, a, b = _host_and_device_pair(to_device)
    nbytes = a.nbytes
    host, device = RecordingResource(False), RecordingResource(True)
    allocator = {"host": host, "device": device} if as_dict else (
        layoutkit.CopyAllocatorOptions(host=host, device=device))  # fmt: skip
    dst.copy_from(src, 7, allocator=allocator, blocking=True)
    np.testing.assert_array_equal(b, a)
    assert host.recorded == [(nbytes, 7)] and device.recorded == [(nbytes, 7)]
    assert host.freed == [(nbytes, 7)] and device.freed == [(nbytes, 7)]
    assert "kernel" in fake.calls and "sync" in fake.calls
    assert "free" not in fake.calls  # no temporary of the driver's allocator


class HostileRepr:
    """Its ``repr`` raises: an error message must not run it."""

    def __repr__(self):
        raise RuntimeError("repr ran")

    __hash__ = object.__hash__


class RaisingAllocate:
    @property
    def allocate(self):
        raise RuntimeError("allocate read")


@pytest.mark.parametrize(
    ("allocator", "error", "message"),
    [
        (5, TypeError, "allocator must be None, a CopyAllocatorOptions or a dict"),
        ({"pinned": None}, ValueError, "takes only the keys 'host' and 'device', got the key "
         "'pinned'"),
        ({1: None}, ValueError, "'device', got a key of type int"),
        ({"host": None, "pinned": HostileRepr()}, ValueError, "got the key 'pinned'"),
        ({HostileRepr(): None}, ValueError, "got a key of type HostileRepr"),
        ({"device": RaisingAllocate()}, TypeError,
         "allocator's device resource must be a memory resource"),
        ({"host": object()}, TypeError, "allocator's host resource must be a memory resource"),
        ({"host": RecordingResource(False, result=b"x")}, TypeError,
         "allocate\\(\\) returned bytes, not a layoutkit Buffer"),
        ({"host": RecordingResource(False, short=4)}, ValueError,
         "host resource gave a closed buffer or one of 27080 bytes \\(27084 needed\\)"),
        ({"host": RecordingResource(True)}, ValueError,
         "host resource gave memory the host cannot access"),
        ({"device": RecordingResource(False)}, ValueError,
         "device resource gave memory device 0 cannot access"),
    ],
    ids=["int", "key", "int-key", "hostile-repr-value", "hostile-repr-key",
         "raising-allocate-attribute", "no-allocate", "not-a-buffer", "too-small", "host-unreachable",
         "device-unreachable"],
)
def test_bad_allocators_are_refused_before_a_temporary_is_written(monkeypatch, allocator,
                                                                  error, message):
    FakeDriver(monkeypatch, kernels=True)
    dst, src, _, b = _host_and_device_pair(True)
    with pytest.raises(error, match=message):
        copy(dst, src, allocator=allocator)
    assert not b.any()
    for resource in allocator.values() if isinstance(allocator, dict) else ():
        if isinstance(resource, RecordingResource) and resource.arrays:
            assert resource.freed and not resource.arrays[0].any()  # closed, never written


@pytest.mark.parametrize("blocking", ["yes", 1, np.bool_(True)])
def test_blocking_must_be_a_bool(blocking):
    dst = np.zeros(3)
    with pytest.raises(TypeError, match="blocking must be None, True or False"):
        copy(dst, np.ones(3), blocking=blocking)
    assert not dst.any()


@pytest.mark.parametrize(
    ("make_dst", "make_src", "blocking", "waits"),
    [
        # host -> device: waits unless asked not to (cuda.core's default for host sides)
        (lambda: DeviceView(np.zeros((6, 160), "f4"), 0), lambda a: view(a[::2]), None, True),
        (lambda: DeviceView(np.zeros((6, 160), "f4"), 0), lambda a: view(a[::2]), False, False),
        (lambda: DeviceView(np.zeros((12, 80), "f4"), 0), lambda a: view(a[:, ::2]), False,
         False),
        # device -> host: waits by default; the driver returns with the data in any case
        (lambda: view(np.zeros((6, 160), "f4")), lambda a: DeviceView(a[:6].copy(), 0), None,
         True),
        (lambda: view(np.zeros((6, 160), "f4")), lambda a: DeviceView(a[:6].copy(), 0), False,
         False),
        # device -> device: only queued, unless blocking=True
        (lambda: DeviceView(np.zeros((12, 160), "f4"), 0), lambda a: DeviceView(a, 0), None,
         False),
        (lambda: DeviceView(np.zeros((12, 160), "f4"), 0), lambda a: DeviceView(a, 0), True,
         True),
    ],
    ids=["h2d", "h2d-nonblocking", "h2d-staged-nonblocking", "d2h", "d2h-nonblocking", "d2d",
         "d2d-blocking"],
)
def test_blocking_decides_whether_the_copy_waits(monkeypatch, caplog, make_dst, make_src,
                                                 blocking, waits):
    fake = FakeDriver(monkeypatch)
    source = np.arange(12 * 160, dtype="f4").reshape(12, 160)
    dst, src = make_dst(), make_src(source)
    with caplog.at_level("DEBUG", logger="layoutkit.copy"):
        copy(dst, src, stream=7, blocking=blocking)
    np.testing.assert_array_equal(array_of(dst), np.broadcast_to(array_of(src), dst.shape))
    assert ("sync" in fake.calls) == waits
    assert ("Syncing stream 7" in caplog.text) == waits


@pytest.mark.parametrize("to_device", [True, False], ids=["h2d", "d2h"])
def test_a_failed_staged_copy_waits_before_freeing_its_host_temporary(monkeypatch, to_device):
    """A pack or unpack that failed half-way freed the allocator's host buffer at once,
    with transfers queued to or from it still running (the wait came after the pack)."""
    from layoutkit.copy import cpu

    fake = FakeDriver(monkeypatch, kernels=True)
    dst, src, _, _ = _host_and_device_pair(to_device)
    host = RecordingResource(False)
    monkeypatch.setattr(host, "deallocate", lambda ptr, size, stream=None:
                        fake.calls.append("host freed"))  # fmt: skip

    real, calls = cpu.copy_problem, []

    def failing(*args):  # the pack (h2d: the first host copy) or the unpack (d2h: the second)
        calls.append(args)
        if len(calls) == (1 if to_device else 2):
            raise RuntimeError("the host side could not be read")
        return real(*args)

    monkeypatch.setattr(cpu, "copy_problem", failing)
    with pytest.raises(RuntimeError, match="could not be read"):
        copy(dst, src, allocator={"host": host})
    assert "host freed" in fake.calls and "sync" in fake.calls
    assert fake.calls.index("sync") < fake.calls.index("host freed")


class HostileResource(RecordingResource):
    """A :class:`RecordingResource` that runs ``hook(resource, buffer)`` after making each
    buffer and returns what the hook returns instead, when that is not None."""

    def __init__(self, device, hook):
        super().__init__(device)
        self.hook, self.made = hook, []

    def allocate(self, size, stream=None):
        buffer = super().allocate(size, stream)
        self.made.append(buffer)
        return self.hook(self, buffer) or buffer


def _over(array):
    """A hook that hands out ``array``'s memory (of whatever size was asked) instead."""
    def hook(resource, buffer):
        memory = array.base if array.base is not None else array
        return Buffer.from_handle(memory.ctypes.data, memory.nbytes, mr=resource)
    return hook


@pytest.mark.parametrize(
    ("to_device", "side", "hook", "error", "message"),
    [
        (True, "host", lambda d, s, a, b: _over(b), ValueError, "host resource gave memory "
         "that overlaps dst"),
        (True, "host", lambda d, s, a, b: _over(a), ValueError, "host resource gave memory "
         "that overlaps src"),
        (False, "device", lambda d, s, a, b: _over(a), ValueError, "device resource gave "
         "memory that overlaps src"),
        (True, "device", lambda d, s, a, b: lambda r, buf: d.buffer.close(), BufferError,
         "dst: the view's buffer is closed"),
        (False, "host", lambda d, s, a, b: lambda r, buf: s.buffer.close(), BufferError,
         "src: the view's buffer is closed"),
        (True, "host", "device-temporary", ValueError, "after closing the copy's earlier "
         "temporary"),
    ],
    ids=["host-over-dst", "host-over-src", "device-over-src", "closes-dst", "closes-src",
         "closes-device-temporary"],
)
def test_hostile_allocate_is_refused_before_anything_is_written(monkeypatch, to_device, side,
                                                                hook, error, message):
    """``allocate`` is foreign code: memory it hands out must not overlap the copy's views
    or temporaries, and whatever it closed is noticed before anything is written; every
    temporary made is freed exactly once."""
    FakeDriver(monkeypatch, kernels=True)
    dst, src, a, b = _host_and_device_pair(to_device)
    before = a.copy()
    other = RecordingResource(side == "host")
    if hook == "device-temporary":
        hook = lambda resource, buffer: other.made[0].close()  # noqa: E731
        other = HostileResource(True, lambda resource, buffer: None)
    else:
        hook = hook(dst, src, a, b)
    hostile = HostileResource(side == "device", hook)
    allocator = {side: hostile, ("device" if side == "host" else "host"): other}
    with pytest.raises(error, match=message):
        copy(dst, src, allocator=allocator)
    np.testing.assert_array_equal(a, before)
    if not (to_device and side == "device"):  # a closed dst may be neither
        assert not b.any()
    for resource in (hostile, other):
        assert len(resource.freed) == len(resource.recorded)  # each made one freed once


def test_a_raising_deallocate_propagates_after_the_copy_is_done(monkeypatch):
    """Temporaries are freed only once everything is written: an error of ``deallocate``
    propagates, with the copy complete and each temporary freed once."""
    FakeDriver(monkeypatch, kernels=True)
    dst, src, a, b = _host_and_device_pair(True)

    class Raising(RecordingResource):
        def deallocate(self, ptr, size, stream=None):
            super().deallocate(ptr, size, stream)
            raise OSError(f"deallocate {'device' if self.device else 'host'}")

    host, device = Raising(False), Raising(True)
    with pytest.raises(OSError, match="deallocate device") as info:
        copy(dst, src, allocator={"host": host, "device": device})
    assert "deallocate host" in repr(info.value.__context__)
    np.testing.assert_array_equal(b, a)
    assert len(host.freed) == 1 and len(device.freed) == 1
