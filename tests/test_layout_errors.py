"""Bad input to every StridedLayout entry point: the documented exception, a useful message.

Each row of ``BAD_CALLS`` is one call with a bad argument, the exception class it must
raise and a pattern that the message must match: the pattern names the argument and
its value. A hypothesis fuzz then throws arbitrary junk at every entry point and accepts
only the documented exception classes (arguments are checked in Python before a kernel
sees them, and kernels report what does not fit as status codes: nothing reaches
compiled code with a value it cannot handle).
"""

import pickle

import pytest
from helpers.strategies import assert_properties, layouts
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutkit import AxisError, StridedLayout

L = StridedLayout.dense((2, 3, 4), 4)  # a 3-d layout for the transforms
EMPTY = StridedLayout.dense((2, 0), 4)
SCALAR = StridedLayout((), (), 8)
TOO_MANY = (1,) * 65


BAD_CALLS = {
    # ---------------------------------------------------------------- constructor
    "shape None": (lambda: StridedLayout(None, None, 4), TypeError, r"shape.*None"),
    "shape float": (lambda: StridedLayout(3.0, None, 4), TypeError, r"shape.*3\.0"),
    "shape entry float": (lambda: StridedLayout((2, 3.0), None, 4), TypeError, r"shape\[1\].*3\.0"),
    "shape entry None": (lambda: StridedLayout((2, None), None, 4), TypeError, r"shape\[1\].*None"),
    "shape string": (lambda: StridedLayout("23", None, 4), TypeError, r"shape.*'23'"),
    "shape negative": (lambda: StridedLayout((2, -1), None, 4), ValueError, r"shape\[1\] = -1"),
    "shape 65 dims": (lambda: StridedLayout(TOO_MANY, None, 4), ValueError, r"shape has 65 dim"),
    "shape beyond int64": (
        lambda: StridedLayout((2**63,), None, 1), OverflowError, r"shape\[0\] = 9223372036854775808"
    ),
    "shape 2**70": (lambda: StridedLayout((2**70,), (0,), 1), OverflowError, r"shape\[0\] = 1180"),
    "strides float": (lambda: StridedLayout((2,), (1.5,), 4), TypeError, r"strides\[0\].*1\.5"),
    "strides string": (lambda: StridedLayout((2,), "1", 4), TypeError, r"strides.*'1'"),
    "strides length": (
        lambda: StridedLayout((2, 3), (1,), 4), ValueError, r"strides \(1,\) has 1 entries"
    ),
    "strides beyond int64": (
        lambda: StridedLayout((2,), (2**63,), 1), OverflowError, r"strides\[0\] = 9223372036854775808"
    ),
    "strides below int64": (
        lambda: StridedLayout((2,), (-(2**64),), 1), OverflowError, r"strides\[0\] = -18446744073709551616"
    ),
    "stride -2**63 (no negation in int64)": (
        lambda: StridedLayout((2,), (-(2**63),), 1), OverflowError,
        r"strides\[0\] = -9223372036854775808 is int64's most negative value",
    ),
    "itemsize None": (lambda: StridedLayout((2,), None, None), TypeError, r"itemsize.*None"),
    "itemsize float": (lambda: StridedLayout((2,), None, 4.0), TypeError, r"itemsize.*4\.0"),
    "itemsize zero": (lambda: StridedLayout((2,), None, 0), ValueError, r"itemsize.* 0"),
    "itemsize negative": (lambda: StridedLayout((2,), None, -4), ValueError, r"itemsize.*-4"),
    "itemsize 2**31": (lambda: StridedLayout((2,), None, 2**31), OverflowError, r"itemsize = 2147483648"),
    "divide_strides remainder": (
        lambda: StridedLayout((2, 3), (12, 6), 4, divide_strides=True),
        ValueError,
        r"strides\[1\] = 6 bytes.*itemsize 4",
    ),
    "volume overflow": (
        lambda: StridedLayout((2**32, 2**32), (0, 0), 1), OverflowError, r"shape=\(4294967296, 4294967296\).*volume"
    ),
    "offset overflow": (
        lambda: StridedLayout((2, 2), (2**62, 2**62), 1), OverflowError, r"strides=\(4611686018427387904.*offsets"
    ),
    "required size overflow": (
        lambda: StridedLayout((2**62,), (1,), 2), OverflowError, r"shape=\(4611686018427387904,\).*byte"
    ),
    "byte stride overflow": (
        lambda: StridedLayout((2,), (2**62,), 4), OverflowError, r"strides=\(4611686018427387904,\).*byte"
    ),
    # ---------------------------------------------------------------- dense / dense_like
    "dense order K": (lambda: StridedLayout.dense((2, 3), 4, "K"), ValueError, r"stride_order.*'K'"),
    "dense order lowercase": (lambda: StridedLayout.dense((2, 3), 4, "c"), ValueError, r"stride_order.*'c'"),
    "dense order int": (lambda: StridedLayout.dense((2, 3), 4, 1), ValueError, r"stride_order.*got 1$"),
    "dense order bool": (lambda: StridedLayout.dense((2, 3), 4, True), TypeError, r"stride_order.*True"),
    "dense order 1-d int": (lambda: StridedLayout.dense((3,), 4, 0), ValueError, r"stride_order.*got 0$"),
    "dense order length": (
        lambda: StridedLayout.dense((2, 3), 4, (0, 1, 2)), ValueError, r"stride_order \(0, 1, 2\) has 3"
    ),
    "dense order range": (lambda: StridedLayout.dense((2, 3), 4, (0, 2)), AxisError, r"stride_order 2"),
    "dense order repeat": (
        lambda: StridedLayout.dense((2, 3), 4, (1, -1)), ValueError, r"stride_order \(1, -1\) repeats"
    ),
    "dense order string entry": (
        lambda: StridedLayout.dense((2, 3), 4, ("a", 0)), TypeError, r"stride_order\[0\].*'a'"
    ),
    "dense shape list entry": (
        lambda: StridedLayout.dense([[2], 3], 4), TypeError, r"shape\[0\].*\[2\]"
    ),
    "dense negative": (lambda: StridedLayout.dense((-2, 3), 4), ValueError, r"shape\[0\] = -2"),
    "dense 65 dims": (lambda: StridedLayout.dense(TOO_MANY, 4), ValueError, r"65"),
    "dense itemsize": (lambda: StridedLayout.dense((2,), 0), ValueError, r"itemsize.* 0"),
    "dense volume overflow": (
        lambda: StridedLayout.dense((2**32, 2**32), 1), OverflowError, r"\(4294967296, 4294967296\).*int64"
    ),
    "dense byte overflow": (
        lambda: StridedLayout.dense((2**31, 2**31), 4), OverflowError, r"2147483648.*int64"
    ),
    "dense_like not a layout": (
        lambda: StridedLayout.dense_like((2, 3)), TypeError, r"other.*tuple"
    ),
    "dense_like order": (lambda: StridedLayout.dense_like(L, "X"), ValueError, r"'K', 'C', 'F'.*'X'"),
    "to_dense order": (lambda: L.to_dense("A"), ValueError, r"stride_order.*'A'"),
    "to_dense order repeat": (lambda: L.to_dense((0, 0, 1)), ValueError, r"stride_order \(0, 0, 1\)"),
    # ---------------------------------------------------------------- permuted
    "permuted None": (lambda: L.permuted(None), TypeError, r"axis_order.*None"),
    "permuted float": (lambda: L.permuted((0, 1, 2.0)), TypeError, r"axis_order\[2\].*2\.0"),
    "permuted length": (lambda: L.permuted((0, 1)), ValueError, r"axis_order \(0, 1\) has 2"),
    "permuted range": (lambda: L.permuted((0, 1, 3)), AxisError, r"axis_order 3 .*3 dim"),
    "permuted negative range": (lambda: L.permuted((0, 1, -4)), AxisError, r"axis_order -4"),
    "permuted repeat": (lambda: L.permuted((2, 0, -1)), ValueError, r"axis_order \(2, 0, -1\) repeats"),
    "permuted huge": (lambda: L.permuted((0, 1, 2**70)), AxisError, r"axis_order 1180591620717411303424"),
    # ---------------------------------------------------------------- reshaped
    "reshaped None": (lambda: L.reshaped(None), TypeError, r"shape.*None"),
    "reshaped float": (lambda: L.reshaped((24.0,)), TypeError, r"shape\[0\].*24\.0"),
    "reshaped volume": (lambda: L.reshaped((5, 5)), ValueError, r"volume 24 to shape \(5, 5\)"),
    "reshaped two -1": (lambda: L.reshaped((-1, -1)), ValueError, r"shape \(-1, -1\).*-1"),
    "reshaped -2": (lambda: L.reshaped((-2, -12)), ValueError, r"shape\[0\] = -2"),
    "reshaped -1 indivisible": (lambda: L.reshaped((5, -1)), ValueError, r"shape \(5, -1\).*24"),
    "reshaped -1 with zero": (lambda: EMPTY.reshaped((0, -1)), ValueError, r"shape \(0, -1\).*ambiguous"),
    "reshaped 65 dims": (lambda: L.reshaped(TOO_MANY), ValueError, r"shape has 65"),
    "reshaped huge": (lambda: L.reshaped((2**64, 2**64)), OverflowError, r"shape\[0\] = 18446744073709551616"),
    "reshaped huge empty": (
        lambda: EMPTY.reshaped((0, 2**64)), OverflowError, r"shape\[1\] = 18446744073709551616"
    ),
    "reshaped needs copy": (
        lambda: L.permuted((2, 0, 1)).reshaped((8, 3)), ValueError, r"to shape \(8, 3\).*incompatible"
    ),
    # ---------------------------------------------------------------- flattened
    "flattened start": (lambda: L.flattened(3, -1), AxisError, r"start_axis 3"),
    "flattened end": (lambda: L.flattened(0, -4), AxisError, r"end_axis -4"),
    "flattened start float": (lambda: L.flattened(0.0, 1), TypeError, r"start_axis.*0\.0"),
    "flattened scalar axes": (lambda: SCALAR.flattened(0, 0), AxisError, r"start_axis 0 .*0 dim"),
    "flattened mask negative": (lambda: L.flattened(mask=-1), OverflowError, r"mask = -1"),
    "flattened mask 2**64": (lambda: L.flattened(mask=2**64), OverflowError, r"mask = 18446744073709551616"),
    "flattened mask float": (lambda: L.flattened(mask=1.0), TypeError, r"mask.*1\.0"),
    # ---------------------------------------------------------------- unsqueezed
    "unsqueezed None": (lambda: L.unsqueezed(None), TypeError, r"axis.*None"),
    "unsqueezed float": (lambda: L.unsqueezed(1.0), TypeError, r"axis.*1\.0"),
    "unsqueezed range": (lambda: L.unsqueezed(4), AxisError, r"axis 4 .*4 dim"),
    "unsqueezed range list": (lambda: L.unsqueezed([0, -6]), AxisError, r"axis -6 .*5 dim"),
    "unsqueezed repeat": (lambda: L.unsqueezed((1, -4)), ValueError, r"axis \(1, -4\) repeats"),
    "unsqueezed 65 dims": (
        lambda: StridedLayout.dense((1,) * 64, 1).unsqueezed(0), ValueError, r"axis 0: .*65 dim"
    ),
    "unsqueezed too many axes": (  # the message names the argument that added them
        lambda: L.unsqueezed(TOO_MANY), ValueError, r"axis \(1, 1, .*: the unsqueezed .*68 dim"
    ),
    "unsqueezed memoryview": (  # bytes-likes are not sequences of axes (as bytes are not)
        lambda: L.unsqueezed(memoryview(b"\x00\x01")), TypeError, r"axis .*memoryview"
    ),
    "shape memoryview": (
        lambda: StridedLayout(memoryview(b"\x02\x03"), None, 4), TypeError, r"shape .*memoryview"
    ),
    # ---------------------------------------------------------------- broadcast_to
    "broadcast None": (lambda: L.broadcast_to(None), TypeError, r"shape.*None"),
    "broadcast float": (lambda: L.broadcast_to((2, 3, 4.0)), TypeError, r"shape\[2\].*4\.0"),
    "broadcast fewer dims": (lambda: L.broadcast_to((3, 4)), ValueError, r"to shape \(3, 4\) with fewer"),
    "broadcast mismatch": (
        lambda: L.broadcast_to((2, 5, 4)), ValueError, r"extent 3 does not match 5 at axis 1"
    ),
    "broadcast zero to one": (
        lambda: EMPTY.broadcast_to((2, 1)), ValueError, r"extent 0 does not match 1"
    ),
    "broadcast negative": (lambda: L.broadcast_to((-1, 2, 3, 4)), ValueError, r"shape\[0\] = -1"),
    "broadcast 65 dims": (lambda: SCALAR.broadcast_to(TOO_MANY), ValueError, r"shape has 65"),
    "broadcast overflow": (
        lambda: SCALAR.broadcast_to((2**32, 2**32)), OverflowError, r"\(4294967296, 4294967296\).*volume"
    ),
    # ---------------------------------------------------------------- repacked
    "repacked itemsize None": (lambda: L.repacked(None), TypeError, r"itemsize.*None"),
    "repacked itemsize zero": (lambda: L.repacked(0), ValueError, r"itemsize.* 0"),
    "repacked itemsize 2**31": (lambda: L.repacked(2**31), OverflowError, r"itemsize = 2147483648"),
    "repacked not a multiple": (lambda: L.repacked(6), ValueError, r"itemsize 6.*multiple"),
    "repacked not a divisor": (lambda: L.repacked(3), ValueError, r"itemsize 3.*divisor"),
    "repacked axis": (lambda: L.repacked(8, axis=3), AxisError, r"axis 3 .*3 dim"),
    "repacked same size axis": (lambda: L.repacked(4, axis=-4), AxisError, r"axis -4"),
    "repacked scalar": (lambda: SCALAR.repacked(16), AxisError, r"axis -1 .*0 dim"),
    "repacked data_ptr type": (lambda: L.repacked(8, data_ptr="0"), TypeError, r"data_ptr.*'0'"),
    "repacked data_ptr": (lambda: L.repacked(8, data_ptr=4), ValueError, r"data_ptr 0x4 .*itemsize 8"),
    "repacked stride": (lambda: L.repacked(8, axis=0), ValueError, r"axis 0: its stride there is 12"),
    "repacked extent": (
        lambda: StridedLayout.dense((2, 3), 4).repacked(8), ValueError, r"extent 3 .*divisible by 2"
    ),
    "repacked offset": (lambda: L[..., 1:3].repacked(8), ValueError, r"slice offset 1 .*divisible by 2"),
    "repacked other stride": (
        lambda: StridedLayout((3, 4), (5, 1), 2).repacked(4), ValueError, r"stride of axis 0 .*by 2"
    ),
    # ---------------------------------------------------------------- max_compatible_itemsize
    "max itemsize zero": (lambda: L.max_compatible_itemsize(0), ValueError, r"max_itemsize.* 0"),
    "max itemsize small": (lambda: L.max_compatible_itemsize(2), ValueError, r"max_itemsize 2 .*itemsize 4"),
    "max itemsize float": (lambda: L.max_compatible_itemsize(16.0), TypeError, r"max_itemsize.*16\.0"),
    "max axis": (lambda: L.max_compatible_itemsize(16, axis=3), AxisError, r"axis 3"),
    "max scalar": (lambda: SCALAR.max_compatible_itemsize(16), AxisError, r"axis -1 .*0 dim"),
    "max data_ptr": (lambda: L.max_compatible_itemsize(16, data_ptr=None), TypeError, r"data_ptr.*None"),
    # ---------------------------------------------------------------- sliced / []
    "index out of range": (lambda: L[:, 3], AxisError, r"index 3 .*axis 1 with extent 3"),
    "index negative out of range": (lambda: L[-3], AxisError, r"index -3 .*axis 0 with extent 2"),
    "index huge": (lambda: L[2**70], AxisError, r"index 1180591620717411303424"),
    "too many indices": (lambda: L[0, 0, 0, 0], AxisError, r"too many indices: 4 .*3 dim"),
    "scalar index": (lambda: SCALAR[0], AxisError, r"too many indices: 1 .*0 dim"),
    "two ellipses": (lambda: L[..., 0, ...], IndexError, r"single ellipsis"),
    "index float": (lambda: L[1.0], TypeError, r"1\.0.*float"),
    "index string": (lambda: L["a"], TypeError, r"'a'.*str"),
    "index list": (lambda: L[[0, 1]], TypeError, r"\[0, 1\].*list"),
    "index bool": (lambda: L[True], TypeError, r"True.*bool"),
    "slice step zero": (lambda: L[:, ::0], ValueError, r"step cannot be zero \(axis 1\)"),
    "slice step float": (lambda: L[::1.0], TypeError, r"slice step.*1\.0"),
    "slice start string": (lambda: L["a":], TypeError, r"slice start.*'a'"),
    "index 65 dims": (
        lambda: StridedLayout.dense((1,) * 64, 1)[None], ValueError, r"65 dim"
    ),
    "sliced list": (lambda: L.sliced([0, 1]), TypeError, r"\[0, 1\]"),
    # an offset beyond int64 is named as an offset (not as a stride times a step); only
    # zero-volume layouts get there (every element of a valid layout has an int64 offset)
    "index offset overflow": (
        lambda: StridedLayout((3, 0), (2**62, 1), 1)[2], OverflowError,
        r"offset of index 2 on axis 0 does not fit in int64",
    ),
    "slice offset overflow": (
        lambda: StridedLayout((3, 0), (2**62, 1), 1)[2:], OverflowError,
        r"on axis 0 the offset of the slice's first element does not fit",
    ),
    "slice stride overflow": (
        lambda: StridedLayout((3, 0), (2**61, 1), 2)[::2], OverflowError,
        r"on axis 0 .*the stride of axis 0 times the step does not fit in int64 in bytes",
    ),
    # an empty result whose slice offset in bytes does not fit: its byte offsets
    "empty index byte offset": (
        lambda: StridedLayout((3, 0), (2**61, 1), 2)[2:3], OverflowError,
        r"with slice\(2, 3, None\): its byte offsets do not fit in int64",
    ),
    # ---------------------------------------------------------------- queries
    "required size negative": (
        lambda: StridedLayout((3,), (-2,), 4).required_size_in_bytes(),
        ValueError,
        r"reaches offset -4 before its start",
    ),
    "unpickle overflow": (
        lambda: pickle.loads(pickle.dumps(L))
        .__reduce__()[0]((2,), (1,), 4, 2**63),
        OverflowError,
        r"slice_offset = 9223372036854775808",
    ),
    "unpickle bad shape": (
        lambda: L.__reduce__()[0]((2, -1), (1, 1), 4, 0), ValueError, r"shape\[1\] = -1"
    ),
}


@pytest.mark.parametrize("case", BAD_CALLS, ids=str)
def test_bad_input_raises_documented_error(case):
    call, exception, pattern = BAD_CALLS[case]
    with pytest.raises(exception, match=pattern) as info:
        call()
    # AxisError is one exception for both conventions; nothing else is an IndexError
    if isinstance(info.value, IndexError) and exception is not IndexError:
        assert isinstance(info.value, AxisError)


# ------------------------------------------------------------------------- fuzz
DOCUMENTED = (TypeError, ValueError, OverflowError, IndexError)

huge = st.sampled_from(
    [2**31, 2**62, 2**63, 2**64, 2**70, -(2**63), -(2**63) - 1, 2**63 - 1, -(2**70)]
)
scalars = st.one_of(
    st.integers(-3, 5),
    huge,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.none(),
    st.just(Ellipsis),
    st.booleans(),
    st.builds(slice, st.integers(-3, 3) | st.none(), st.integers(-3, 3) | st.none(),
              st.sampled_from([None, 1, -1, 0, 2**70, 1.5])),
)
junk = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.lists(inner, max_size=5).map(tuple),
    max_leaves=12,
)
# nearly valid arguments: short sequences of small or extreme integers
int_lists = st.lists(st.integers(-2, 4) | huge, max_size=6)
arguments = st.one_of(junk, int_lists, int_lists.map(tuple), st.integers(-4, 4) | huge)


def _calls(layout, a, b, c):
    return [
        lambda: StridedLayout(a, b, c),
        lambda: StridedLayout(a, None, 4),
        lambda: StridedLayout((2, 3), a, 4, divide_strides=True),
        lambda: StridedLayout.dense(a, 4),
        lambda: StridedLayout.dense((2, 3), a, b),
        lambda: StridedLayout.dense_like(a, b),
        lambda: StridedLayout.dense_like(layout, a),
        lambda: layout.to_dense(a),
        lambda: layout.permuted(a),
        lambda: layout.reshaped(a),
        lambda: layout.flattened(a, b),
        lambda: layout.flattened(mask=a),
        lambda: layout.unsqueezed(a),
        lambda: layout.broadcast_to(a),
        lambda: layout.repacked(a, b, c),
        lambda: layout.repacked(4, a, b, c),
        lambda: layout.max_compatible_itemsize(a, b, c),
        lambda: layout.sliced(a),
        lambda: layout[a],
        lambda: layout[a, b],
        lambda: layout == a,
    ]


@settings(max_examples=300, deadline=None)
@given(layouts(), arguments, arguments, arguments)
def test_junk_raises_only_documented_errors(layout, a, b, c):
    for call in _calls(layout, a, b, c):
        try:
            result = call()
        except DOCUMENTED as exc:
            assert str(exc)  # every error explains itself
        else:
            assert isinstance(result, (StridedLayout, int, bool)), result
            if isinstance(result, StridedLayout):
                assert_valid(result)


def assert_valid(layout):
    """Every number of an accepted layout fits in int64, and its properties work."""
    int64 = range(-(2**63), 2**63)
    assert all(type(e) is int and 0 <= e < 2**63 for e in layout.shape)
    assert all(type(s) is int and s in int64 for s in layout._strides)  # None: implicit C
    assert layout.slice_offset in int64 and 0 < layout.itemsize < 2**31
    assert layout.volume in int64
    assert all(b * layout.itemsize in int64 for b in layout.offset_bounds)
    layout.is_unique, layout.is_contiguous_any, layout.flattened()  # noqa: B018
    if layout.volume <= 4096:
        assert_properties(layout)


# cuda.core 1.2.2's phrase for each of these failures (what code and tests written against
# it match), with our naming of the argument and its value beside it (DECISIONS 18)
REFERENCE_PHRASES = {
    "permuted length": (
        lambda: L.permuted((0, 1)), ValueError,
        r"axis_order \(0, 1\) .*the same length as the number of dimensions",
    ),
    "permuted repeated": (
        lambda: L.permuted((1, 0, 1)), ValueError,
        r"axis_order \(1, 0, 1\) .*axis 1 appears multiple times",
    ),
    "permuted out of range": (
        lambda: L.permuted((1, -2000, 0)), AxisError,
        r"axis_order -2000 .*axis -2000 out of range for",
    ),
    "index out of range": (lambda: L[0, 1, 5], AxisError, r"index 5 .*out of range for axis 2"),
    "index beyond int64": (lambda: L[2**70], AxisError, r"index \d+ .*out of range for axis 0"),
    "too many indices": (
        lambda: L[0, 0, 0, 0], AxisError, r"4 .*is greater than the number of dimensions 3"
    ),
    "index type": (lambda: L["abc"], TypeError, r"'abc'.*Expected slice instance or integer"),
    "slice step 0": (lambda: L[:, ::0], ValueError, r"slice step cannot be zer"),
    "reshape volume": (
        lambda: L.reshaped((5,)), ValueError,
        r"\(5,\).*The original volume 24 and the new volume 5 must be equal\.",
    ),
    "reshape negative": (
        lambda: L.reshaped((-2, 12)), ValueError, r"shape\[0\] = -2.*Extents must be non-negative",
    ),
    "reshape two -1": (
        lambda: L.reshaped((-1, 6, -1)), ValueError,
        r"\(-1, 6, -1\).*There can be at most one -1 extent in a shape",
    ),
    "reshape ambiguous -1": (
        lambda: L.reshaped((5, 0, -1)), ValueError,
        r"\(5, 0, -1\).*The -1 extent is ambiguous when the specified sub-volume is 0",
    ),
    "reshape indivisible": (
        lambda: L.reshaped((7, -1)), ValueError,
        r"\(7, -1\).*The original volume 24 must be divisible by the specified sub-volume 7",
    ),
    "reshape strides": (
        lambda: L.permuted((1, 0, 2)).reshaped((24,)), ValueError,
        r"\(24,\).*Layout strides are incompatible with the new shape",
    ),
    "dense_like order": (
        lambda: StridedLayout.dense_like(L, "X"), ValueError,
        r"stride_order must be 'K', 'C', 'F', or a permutation.*'X'",
    ),
    "broadcast fewer dims": (
        lambda: L.broadcast_to((3,)), ValueError, r"\(3,\).*must be greater than or equal to",
    ),
    "broadcast extent": (
        lambda: L.broadcast_to((2, 5, 4)), ValueError, r"3 .*5.*cannot be broadcast together",
    ),
    "unsqueezed axis": (lambda: L.unsqueezed(9), AxisError, r"Invalid axis.*axis 9"),
    "unsqueezed repeated": (
        lambda: L.unsqueezed((0, 0)), ValueError, r"\(0, 0\).*axis 0 appears multiple times"
    ),
    "repacked axis": (lambda: L.repacked(8, axis=5), AxisError, r"Invalid axis.*axis 5"),
    "repacked data_ptr": (
        lambda: L.repacked(8, data_ptr=4), ValueError,
        r"data_ptr 0x4 .*must be aligned to the packed itemsize",
    ),
    "repacked stride": (
        lambda: StridedLayout((4, 5), (5, 1), 4).repacked(8, axis=0), ValueError,
        r"stride there is 5.*axis 0 stride must be 1",
    ),
    "repacked extent": (
        lambda: StridedLayout.dense((5, 3), 4).repacked(8, axis=1), ValueError,
        r"extent 3 .*must be divisible by 2",
    ),
    "repacked slice offset": (
        lambda: StridedLayout.dense((5, 6), 4)[:, 1:5].repacked(8, axis=1), ValueError,
        r"slice offset 1 must be divisible by 2",
    ),
    "repacked other stride": (
        lambda: StridedLayout((3, 4), (5, 1), 4).repacked(8, axis=1), ValueError,
        r"stride of axis 0 \(5\) must be divisible by 2",
    ),
    "repacked unpack stride": (
        lambda: StridedLayout((4, 5), (5, 1), 8).repacked(4, axis=0), ValueError,
        r"axis 0 stride must be 1",
    ),
    "repacked itemsize 0": (
        lambda: L.repacked(0), ValueError, r"itemsize .*0.*new itemsize must be greater than zero"
    ),
    "max_itemsize 0": (
        lambda: L.max_compatible_itemsize(max_itemsize=0), ValueError,
        r"max_itemsize must be greater than zero, got 0",
    ),
    "max_itemsize axis": (
        lambda: L.max_compatible_itemsize(axis=9), AxisError, r"Invalid axis.*axis 9"
    ),
    "max_itemsize small": (
        lambda: StridedLayout.dense((5, 4), 8).max_compatible_itemsize(max_itemsize=4),
        ValueError, r"max_itemsize 4 cannot be less than itemsize 8",
    ),
}


@pytest.mark.parametrize("case", REFERENCE_PHRASES, ids=str)
def test_messages_carry_the_reference_phrase(case):
    call, exception, pattern = REFERENCE_PHRASES[case]
    with pytest.raises(exception, match=pattern):
        call()
