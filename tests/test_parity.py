"""One API (issue 11): what works on a layout or view in compiled code works in Python,
with the same names and meaning, and the other way round.

The table is ``tests/helpers/parity.py``. Each entry is checked in ``@njit`` code (the
same value, or the same exception class, as Python; or a one-line ``TypingError`` that
says why), compiled for CUDA with ``compile_ptx`` and run in the CUDA simulator (in its
own process). A public name added to ``StridedLayout`` or ``StridedMemoryView`` without
an entry fails here, and so does a name registered on a compiled type that Python lacks.
"""

import functools
import itertools
import json
import os
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest
from helpers import parity as P
from helpers.chains import HypothesisDraw, run_compiled_chain
from helpers.strategies import assert_same_mapping, basic_indices, enumerable, layouts, numpy_view
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit, typeof
from numba.core.errors import NumbaIRAssumptionWarning, TypingError

from layoutkit import BoundsCheckedView, StridedLayout, StridedMemoryView

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
not_simulated = pytest.mark.skipif(SIMULATED, reason="this is the simulator process")
ENTRIES = [pytest.param(entry, id=f"{entry.subject}-{entry.expr}") for entry in P.ENTRIES]
COMPILED = [param for param in ENTRIES if param.values[0].compiled == "same"]
# Python-only dunders that compiled code spells as operators, and names the table does not
# exercise through an attribute: constructors, classmethods and operators have entries
_OPERATORS = {"__hash__": "hash", "__repr__": "repr", "__str__": "str"}


# ------------------------------------------------------------------ the table is complete
@not_simulated
@pytest.mark.parametrize(
    ("cls", "subject"), [(StridedLayout, "layout"), (StridedMemoryView, "view")]
)
def test_every_public_python_name_has_an_entry(cls, subject):
    covered = {entry.name for entry in P.ENTRIES if entry.subject == subject}
    assert P.public_names(cls) <= covered, P.public_names(cls) - covered


@not_simulated
@pytest.mark.parametrize("subject", ["layout", "view"])
def test_every_compiled_name_is_a_python_name(subject):
    from layoutkit._numba_layout import StridedLayoutType
    from layoutkit._numba_view import StridedViewType

    numba_type = StridedLayoutType if subject == "layout" else StridedViewType
    cls = StridedLayout if subject == "layout" else StridedMemoryView
    covered = {entry.name for entry in P.ENTRIES if entry.subject == subject}
    for name in P.compiled_names(numba_type):
        if name in ("_slice_offset", "_limit"):  # the view struct's own members
            continue
        assert hasattr(cls, name), f"compiled {subject}s have {name}, Python's do not"
        assert _OPERATORS.get(name, name) in covered, f"{name} has no entry in the table"


# ------------------------------------------------------------------ @njit
@not_simulated
@pytest.mark.parametrize("entry", ENTRIES)
def test_njit_agrees_with_python(entry):
    x = P.subject(entry)
    function = P.python_function(entry)
    compiled = njit(function)
    if entry.compiled == "refused":
        with pytest.raises(TypingError) as info:
            compiled(x)
        message = str(info.value)
        assert entry.why in message
        # the reason is one line of its own in Numba's report
        assert any(entry.why in line and len(line) < 400 for line in message.splitlines())
        return
    status, value = P.outcome(compiled, x)
    python_status, expected = P.outcome(function, P.subject(entry) if entry.statement else x)
    assert status == python_status
    if status == "ok":
        assert P.same_result(expected, value, entry.kind), (expected, value)


@not_simulated
@pytest.mark.parametrize("entry", COMPILED)
def test_njit_twice_in_one_function_agrees_with_python(entry):
    # Numba inlines methods into the calling function at the level of its IR; one whose
    # inlined body branched, inlined twice in one function, made Numba warn that a
    # variable is not in scope and ask for a bug report (NumbaIRAssumptionWarning,
    # Numba issue 9489)
    x = P.subject(entry)
    function = P.python_function(entry, times=2)
    compiled = njit(function)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumbaIRAssumptionWarning)
        compiled.compile((typeof(x),))
    status, value = P.outcome(compiled, x)
    python_status, expected = P.outcome(function, P.subject(entry) if entry.statement else x)
    assert status == python_status
    if status == "ok":
        assert P.same_result(expected, value, entry.kind), (expected, value)


# ------------------------------------------------------------------ CUDA, compile only
@pytest.fixture
def compile_ptx(monkeypatch):
    cuda = pytest.importorskip("numba.cuda")
    pytest.importorskip("layoutkit.cuda")
    import numba.cuda.dispatcher as dispatcher

    from tests.conftest import gpu_unavailable_reason

    if gpu_unavailable_reason() is not None:  # see test_layout_cuda_compile.compile_ptx
        monkeypatch.setattr(
            dispatcher,
            "get_current_device",
            lambda: types.SimpleNamespace(compute_capability=(9, 0)),
        )
    return lambda kernel, signature: cuda.compile_ptx(kernel, signature, cc=(9, 0))


@not_simulated
@pytest.mark.parametrize("entry", ENTRIES)
def test_cuda_compiles_what_njit_compiles(entry, compile_ptx):
    from numba import types as nt

    from layoutkit._numba_layout import layout_type
    from layoutkit._numba_view import view_numba_type

    x = P.subject(entry)
    arg = layout_type(x.ndim) if entry.subject == "layout" else view_numba_type(x, for_cuda=True)
    kernel = P.make_kernel(entry)
    why = entry.why if entry.compiled == "refused" else entry.cuda_why
    if why:
        with pytest.raises(TypingError, match=why.replace("(", r"\(").replace(")", r"\)")):
            compile_ptx(kernel, (nt.int64[:], arg))
    else:
        ptx, _ = compile_ptx(kernel, (nt.int64[:], arg))
        assert ".visible .entry" in ptx


@not_simulated
@pytest.mark.parametrize("entry", [p for p in COMPILED if not p.values[0].cuda_why])
def test_cuda_compiles_twice_in_one_kernel(entry, compile_ptx):
    # as test_njit_twice_in_one_function_agrees_with_python, in numba-cuda's inliner
    from numba import types as nt
    from numba.cuda.core.errors import NumbaIRAssumptionWarning as CudaIRAssumptionWarning

    from layoutkit._numba_layout import layout_type
    from layoutkit._numba_view import view_numba_type

    x = P.subject(entry)
    arg = layout_type(x.ndim) if entry.subject == "layout" else view_numba_type(x, for_cuda=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CudaIRAssumptionWarning)  # numba-cuda's own class
        ptx, _ = compile_ptx(P.make_kernel(entry, times=2), (nt.int64[:], arg))
    assert ".visible .entry" in ptx


# ------------------------------------------------------------------ the CUDA simulator
def _simulated_outcomes():
    """Run every entry's kernel in the simulator: ``[(status, out[0]), ...]``."""
    import layoutkit.cuda

    results = []
    for entry in P.ENTRIES:
        kernel = layoutkit.cuda.jit(P.make_kernel(entry))
        out = np.zeros(1, np.int64)
        try:
            kernel[1, 1](out, P.subject(entry))
            results.append(("ok", int(out[0])))
        except Exception as error:  # noqa: BLE001 - the class is what is compared
            results.append((type(error).__name__, str(error)))
    return results


@pytest.mark.skipif(not SIMULATED, reason="runs in the simulator process")
def test_simulator_outcomes():
    print("OUTCOMES " + json.dumps(_simulated_outcomes()))


@not_simulated
def test_simulator_agrees_with_python():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         f"{__file__}::test_simulator_outcomes"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("OUTCOMES "))
    outcomes = json.loads(line[len("OUTCOMES ") :])
    for entry, (status, value) in zip(P.ENTRIES, outcomes, strict=True):
        if entry.subject == "view" and entry.compiled == "refused" and entry.name not in ("repr", "str"):
            # the simulated view refuses what compiled code refuses, naming it
            assert status == "AttributeError" and entry.name in value, (entry, status, value)
            continue
        if entry.subject == "view" and entry.cuda_why:
            # what kernels refuse to type, the simulated view refuses, saying so
            assert status == "TypeError" and entry.cuda_why in value, (entry, status, value)
            continue
        if entry.subject == "layout" and entry.compiled == "refused":
            continue  # layouts are Python objects in the simulator: Python's methods work
        if entry.name in ("repr", "str"):
            continue
        # the same kernel run in Python on the Python view or layout
        out = np.zeros(1, np.int64)
        python_status, _ = P.outcome(P.make_kernel(entry), out, P.subject(entry))
        expected = "ok" if python_status == "ok" else python_status.__name__
        assert status == expected, (entry, status, value)
        if status == "ok" and entry.expr != "x.ptr":  # (another process: other addresses)
            assert value == int(out[0]), (entry, value, int(out[0]))


# ------------------------------------------------------------------ properties
@njit
def _hash(layout):
    return hash(layout)


@njit
def _view_facts(view):
    return view.ptr, view.readonly, len(view), view.dtype


@njit
def _retyped(view, layout, dtype):
    return view.view(layout, dtype)


@njit
def _own_layout_retyped(view, dtype):
    return view.view(dtype=dtype)


_small_layouts = st.builds(
    lambda shape, order, itemsize, step: StridedLayout.dense(shape, itemsize, order)[::step],
    st.lists(st.integers(0, 4), min_size=1, max_size=4).map(tuple),
    st.sampled_from(["C", "F"]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, -1, 2, -2]),
)


@not_simulated
@settings(max_examples=60, deadline=None)
@given(_small_layouts, st.booleans())
def test_hash_in_njit_is_python_hash(layout, implicit):
    if implicit and layout.is_contiguous_c and not layout.slice_offset:
        layout = StridedLayout(layout.shape, None, layout.itemsize)
    assert _hash(layout) == hash(layout)
    assert _hash(layout.unsqueezed(0)) == hash(layout.unsqueezed(0))


_DTYPES = [np.uint8, np.int16, np.float32, np.int64, np.complex128]


@not_simulated
@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
    st.sampled_from(_DTYPES),
    st.sampled_from(_DTYPES),
    st.integers(0, 3),
    st.booleans(),
)
def test_view_retyping_agrees_with_python(shape, dtype, new_dtype, start, readonly):
    base = np.zeros(shape, dtype)
    base.flags.writeable = not readonly
    view = StridedMemoryView.from_array_interface(base)
    assert _view_facts(view) == (view.ptr, view.readonly, len(view), view.dtype)
    new = np.dtype(new_dtype)
    buffer_elements = view.buffer.size // new.itemsize
    candidates = [
        StridedLayout.dense((buffer_elements,), new.itemsize)[start:],
        StridedLayout.dense((buffer_elements + 1,), new.itemsize),  # past the end
        StridedLayout.dense(shape, view.layout.itemsize),  # the itemsize differs if retyped
    ]
    for layout in candidates:
        python_status, expected = P.outcome(view.view, layout, new)
        status, value = P.outcome(_retyped, view, layout, new)
        assert status == python_status, (layout, new)
        if status == "ok":
            assert P.same_result(expected, value, "view")
    python_status, expected = P.outcome(lambda: view.view(dtype=new))
    status, value = P.outcome(_own_layout_retyped, view, new)
    assert status == python_status
    if status == "ok":
        assert P.same_result(expected, value, "view")


def test_len_of_a_0d_view_is_a_typing_error():
    view = StridedMemoryView.from_array_interface(np.zeros(()))
    with pytest.raises(TypeError):
        len(view)
    with pytest.raises(TypingError, match="len\\(\\) of a 0-d view"):
        njit(lambda v: len(v))(view)


# ------------------------------------------------------------------ random drivers
# Random layouts of any ndim (0-d, zero volume, extent-1 axes with any stride, negative
# and zero strides, up to 64 dimensions), random dtypes and random basic indices (entries
# out of range, int64-limit slice bounds, NumPy integer types): Python, @njit and NumPy
# agree, errors included (the same exception class; compiled code checks view indices in
# BoundsCheckedView arguments).
_NDIMS = st.sampled_from([0, 1, 2, 3, 4, 9, 32, 64])
_RANDOM = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@njit(cache=True)
def _get(x, index):
    return x[index]


@njit(cache=True)
def _put(view, index, value):
    view[index] = value


def _random_index(data, shape):
    return P.with_extremes(data.draw, st, data.draw(basic_indices(shape)))


@not_simulated
@_RANDOM
@given(st.data())
def test_random_layout_indices_agree_with_python_and_numpy(data):
    layout = data.draw(layouts(data.draw(_NDIMS)))
    index = _random_index(data, layout.shape)
    python = P.outcome(layout.__getitem__, index)
    compiled = P.outcome(_get, layout, index)
    assert compiled[0] == python[0], (layout, index, python, compiled)  # "ok", or the class
    if python[0] != "ok":
        return
    assert P.exact_layout(compiled[1]) == P.exact_layout(python[1]), (layout, index)
    if enumerable(layout):
        assert_same_mapping(compiled[1], numpy_view(layout)[index])


def _elements_typed(dtype, readonly):
    """Whether @njit types single elements of such a view (README's table)."""
    return dtype not in P.NO_NJIT_ELEMENTS and not (dtype.names and readonly)


@not_simulated
@_RANDOM
@given(st.data())
def test_random_view_indices_agree_with_python_and_numpy(data):
    dtype = data.draw(st.sampled_from(P.DTYPES))
    _, array = P.array_of(data.draw(layouts(data.draw(_NDIMS))), dtype)
    view = StridedMemoryView.from_array_interface(array)
    index = _random_index(data, array.shape)
    python = P.outcome(view.__getitem__, index)
    numpy = P.outcome(array.__getitem__, index)
    what = (array.shape, array.strides, dtype, index, python)
    if python[0] != "ok":
        assert numpy[0] != "ok", what
        # compiled code checks indices of a BoundsCheckedView: the same class as Python
        assert P.outcome(_get, BoundsCheckedView(view), index) == python, what
        return
    assert numpy[0] == "ok", what
    python, expected = python[1], numpy[1]
    if not isinstance(python, StridedMemoryView):  # an element
        if not _elements_typed(dtype, view.readonly):
            with pytest.raises(TypingError, match="cannot be read"):
                _get(view, index)
            return
        for compiled in (_get(view, index), _get(BoundsCheckedView(view), index)):
            assert P.same_element(python, compiled) and P.same_element(expected, compiled), what
        return
    compiled = _get(view, index)
    assert P.same_result(python, compiled, "view"), what
    assert P.exact_layout(compiled.layout) == P.exact_layout(python.layout), what
    assert compiled.ptr == expected.__array_interface__["data"][0], what
    assert np.asarray(compiled).tobytes() == expected.tobytes(), what
    checked = _get(BoundsCheckedView(view), index)
    assert P.exact_layout(checked.layout) == P.exact_layout(python.layout), what
    if _elements_typed(dtype, compiled.readonly):  # element by element, in compiled code
        for position in itertools.islice(np.ndindex(expected.shape), 32):
            position = tuple(int(i) for i in position)
            assert P.same_element(expected[position], _get(compiled, position)), what


@not_simulated
@_RANDOM
@given(st.data())
def test_random_view_stores_agree_with_python_and_numpy(data):
    dtype = data.draw(st.sampled_from([d for d in P.DTYPES if _elements_typed(d, False)]))
    layout = data.draw(layouts(data.draw(_NDIMS)))
    base, array = P.array_of(layout, dtype)
    view = StridedMemoryView.from_array_interface(array)
    position = tuple(data.draw(st.integers(-e - 1, e)) for e in array.shape)
    if data.draw(st.booleans()):
        position = P.with_extremes(data.draw, st, position)
    value = P.values_of(dtype, 1, seed=data.draw(st.integers(0, 300)))[0]
    if not dtype.names and data.draw(st.booleans()):
        value = value.item()  # a Python bool, int, float or complex
    what = (array.shape, array.strides, dtype, position, value)
    if view.readonly:  # not unique (a zero stride): read-only, as in NumPy (DECISIONS 19)
        with pytest.raises(TypingError, match="read-only"):
            _put(view, position, value)
        return
    results = {}  # world: (outcome, the buffer's bytes after the store)
    for world in ("python", "numpy", "checked", "njit"):
        copy = base.copy()
        _, target = P.array_of(layout, dtype, copy)
        if world == "numpy":
            store = target.__setitem__
        elif world == "python":
            store = StridedMemoryView.from_array_interface(target).__setitem__
        elif world == "checked":
            store = functools.partial(_put, BoundsCheckedView(_host_view(target)))
        elif results["python"][0][0] == "ok":  # unchecked compiled code: indices in range
            store = functools.partial(_put, _host_view(target))
        else:
            continue
        results[world] = P.outcome(store, position, value), copy.tobytes()
    python = results["python"]
    assert results["checked"] == python, (what, results)  # the same class, the same bytes
    assert results["numpy"][1] == python[1], what
    # NumPy's IndexError, ours AxisError: whether each raised
    assert (results["numpy"][0][0] == "ok") == (python[0][0] == "ok"), what
    if "njit" in results:
        assert results["njit"] == python, what


def _host_view(array):
    return StridedMemoryView.from_array_interface(array)


@njit(cache=True)
def _high_ndim_transforms(layout, order, index, other):
    rebuilt = StridedLayout(layout.shape, layout.strides, layout.itemsize)
    return (
        layout.permuted(order), layout.to_dense(order), layout.offset_of(index),
        rebuilt, rebuilt == other, layout.broadcast_to((2,) + layout.shape[1:])
        if layout.ndim and layout.shape[0] == 1 else rebuilt,
    )  # fmt: skip


@not_simulated
@_RANDOM
@given(st.data())
def test_random_high_ndim_transforms_agree_with_python_and_numpy(data):
    """permuted, to_dense, offset_of, StridedLayout(...), == and broadcast_to at 32 and 64
    dimensions, with axis orders and indices in and out of range."""
    n = data.draw(st.sampled_from([32, 64]))
    layout = data.draw(layouts(n))
    order = data.draw(st.one_of(
        st.permutations(range(n)).map(tuple),
        st.lists(st.integers(-n - 1, n), min_size=n, max_size=n).map(tuple),
    ))  # fmt: skip
    index = tuple(data.draw(st.integers(-e - 1, e)) for e in layout.shape)
    other = data.draw(st.one_of(st.just(layout), layouts(n)))
    python = P.outcome(_high_ndim_transforms.py_func, layout, order, index, other)
    compiled = P.outcome(_high_ndim_transforms, layout, order, index, other)
    assert compiled[0] == python[0], (layout, order, index, python, compiled)  # or the class
    if python[0] != "ok":
        return
    for got, expected in zip(compiled[1], python[1], strict=True):
        if isinstance(expected, StridedLayout):
            assert P.exact_layout(got) == P.exact_layout(expected), (layout, order)
        else:
            assert got == expected and type(got) is type(expected), (layout, order, index)
    if enumerable(layout) and layout.volume:
        assert compiled[1][2] == numpy_view(layout)[index]


@not_simulated
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_transform_chains_agree_with_python(data):
    """5-15 ndim-keeping transforms as data for one compiled function (3-d: one compile):
    the same outcome and the same properties after every step as in Python."""
    run_compiled_chain(HypothesisDraw(data), ndims=(3,))


@pytest.mark.slow
@not_simulated
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_transform_chains_agree_with_python_long(data):
    """As above for 0-d to 4-d layouts (a compile per number of dimensions)."""
    run_compiled_chain(HypothesisDraw(data))
