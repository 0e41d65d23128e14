"""Hostile re-entrancy, shared capsules and interpreter shutdown.

Each case runs in a child interpreter (``helpers.hostile``), so a double free or a use of
freed memory that crashes is a failure naming the case.

The rules held to:

* a DLPack capsule is consumed once, whoever asks and from how many threads: its
  producer's deleter runs exactly once, the other consumers get ``BufferError``;
* the caller's code that runs while an operation reads its arguments (an ``__index__``,
  a dtype's ``dtype`` property, a stream's ``__cuda_stream__``, a producer's interface)
  may close the buffer: the operation then refuses it as closed (``BufferError`` for
  views, ``ValueError`` for ``from_buffer``, ``RuntimeError`` for the buffer's own
  methods) and writes nothing;
* an interpreter that exits with views, exports, consumed and unconsumed capsules alive
  (in module globals and in reference cycles, which die after layoutkit's modules are
  torn down) exits with status 0 and prints nothing on stderr.
"""

import gc
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
from helpers.hostile import Cases
from helpers.hostile_checks import check, refused
from helpers.hostile_dlpack import SameCapsule
from helpers.hostile_objects import type_equal_to
from helpers.producers import Producer

import layoutkit
from layoutkit import HostMemoryResource, StridedLayout, StridedMemoryView

cases = Cases(__name__)


# ------------------------------------------------------------------ one capsule, many consumers
@cases.case(timeout=300)
def one_capsule_consumed_by_threads_runs_its_deleter_once():
    """Found while fuzzing: threads given one capsule (a producer returning the same object
    every time) each read its name as unconsumed before any renamed it, so several views
    owned the tensor and its deleter ran once per view (a double free). One consumer
    wins; the others get BufferError."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for trial in range(200):
            producer = Producer(np.arange(4.0))
            same = SameCapsule(producer.__dlpack__(max_version=(1, 0)))
            views, unexpected = [], []
            barrier = threading.Barrier(4)

            def consume(same=same, views=views, unexpected=unexpected, barrier=barrier):
                barrier.wait()
                try:
                    views.append(StridedMemoryView.from_dlpack(same, -1))
                except BufferError:
                    pass
                except BaseException as exc:  # reported below
                    unexpected.append(exc)

            threads = [threading.Thread(target=consume) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            check(not unexpected, f"trial {trial}: a consumer raised {unexpected[:1]!r}")
            count = len(views)
            del views, same, consume, threads
            gc.collect()
            check(count == 1 and producer.deleted == 1,
                  f"trial {trial}: one capsule gave {count} views and its deleter ran "
                  f"{producer.deleted} times (must be one view, one deleter call)")  # fmt: skip
    finally:
        sys.setswitchinterval(old)


@cases.case
def capsule_consumed_by_numpy_or_renamed_is_refused():
    producer = Producer(np.arange(3.0))
    capsule = producer.__dlpack__(max_version=(1, 0))
    np.from_dlpack(SameCapsule(capsule))
    refused(StridedMemoryView.from_dlpack, SameCapsule(capsule), -1, classes=(BufferError,),
            what="from_dlpack of a capsule NumPy consumed")  # fmt: skip
    gc.collect()
    check(producer.deleted == 1, f"the deleter ran {producer.deleted} times")


# ------------------------------------------------------------------ the caller's code closes
class _Closing:
    """Closes ``buffer`` when any of its conversions runs."""

    def __init__(self, buffer, value=0):
        self.buffer, self.value = buffer, value

    def __index__(self):
        self.buffer.close()
        return self.value

    def __float__(self):
        self.buffer.close()
        return float(self.value)

    @property
    def dtype(self):  # numpy.dtype(obj) reads it
        self.buffer.close()
        return np.dtype(np.float64)

    def __cuda_stream__(self):
        self.buffer.close()
        return (0, 0)

    @property
    def __array_interface__(self):  # a source whose import closes the destination
        self.buffer.close()
        return np.ones(8).__array_interface__


_ClosingEqualToFloat = type_equal_to(float, "_ClosingEqualToFloat", (_Closing,), {
    "__doc__": "A ``_Closing`` whose type compares equal to ``float``.",
})  # fmt: skip


class _ClosingClaimingFloat64(_Closing):
    """A ``_Closing`` whose ``__class__`` says ``numpy.float64`` (``isinstance`` believes it)."""

    __class__ = property(lambda self: np.float64)


class _ClosingInt64(np.int64):
    """A NumPy scalar subclass: NumPy converts it through its own ``__int__``."""

    def __int__(self):
        self.buffer.close()
        return 5


def _closing_int64(buffer):
    value = _ClosingInt64(5)
    value.buffer = buffer
    return value


def _fresh():
    buffer = HostMemoryResource().allocate(64)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((8,), 8), np.float64)
    view.copy_from(np.arange(8.0))
    return buffer, view


CLOSED_MIDCALL = {
    # name: (operation given the buffer and its view, classes)
    "from_buffer_dtype": (lambda b, v: StridedMemoryView.from_buffer(
        b, StridedLayout.dense((8,), 8), _Closing(b)), (ValueError,)),
    "from_buffer_empty_dtype": (lambda b, v: StridedMemoryView.from_buffer(
        b, StridedLayout.dense((0,), 8), _Closing(b)), (ValueError,)),
    "view_dtype": (lambda b, v: v.view(dtype=_Closing(b)), (ValueError,)),
    "copy_source_import": (lambda b, v: layoutkit.copy(v, _Closing(b)), (BufferError,)),
    "copy_from_source_import": (lambda b, v: v.copy_from(_Closing(b)), (BufferError,)),
    "setitem_value": (lambda b, v: v.__setitem__(0, _Closing(b, 5)), (BufferError,)),
    "setitem_index": (lambda b, v: v.__setitem__(_Closing(b, 1), 5.0), (BufferError,)),
    # element assignment converted these without converting them first: they closed the
    # buffer and the element was written into freed memory
    "setitem_value_type_equal_to_float": (
        lambda b, v: v.__setitem__(0, _ClosingEqualToFloat(b, 5)), (BufferError,)),
    "setitem_value_claiming_float64": (
        lambda b, v: v.__setitem__(0, _ClosingClaimingFloat64(b, 5)), (BufferError,)),
    "setitem_value_numpy_scalar_subclass": (
        lambda b, v: v.__setitem__(0, _closing_int64(b)), (BufferError,)),
    "view_dlpack_stream": (lambda b, v: v.__dlpack__(stream=_Closing(b), max_version=(1, 0)),
                           (BufferError,)),
    "view_dlpack_max_version": (lambda b, v: v.__dlpack__(max_version=(_Closing(b, 1), 0)),
                                (BufferError,)),
    "buffer_dlpack_stream": (lambda b, v: b.__dlpack__(stream=_Closing(b), max_version=(1, 0)),
                             (RuntimeError,)),
    "buffer_dlpack_max_version": (lambda b, v: b.__dlpack__(max_version=(_Closing(b, 1), 0)),
                                  (RuntimeError,)),
}  # fmt: skip


def _closed_midcall(name):
    operation, classes = CLOSED_MIDCALL[name]
    buffer, view = _fresh()
    keeper = buffer._keeper.memory  # the allocation's bytes, alive while this frame holds them
    before = keeper.copy()
    refused(operation, buffer, view, classes=classes,
            what=f"{name}: an operation whose argument closes the buffer mid-call")  # fmt: skip
    check(buffer.is_closed, f"{name}: the buffer is not closed")
    check(np.array_equal(keeper, before),
          f"{name}: the operation wrote into the memory of the buffer it saw closed")  # fmt: skip


for _name in CLOSED_MIDCALL:
    cases.add(f"closed_midcall_{_name}", lambda _name=_name: _closed_midcall(_name))


# ------------------------------------------------------------------ simulated kernel arguments
_SIMULATOR = {"NUMBA_ENABLE_CUDASIM": "1"}


def _simulated_kernel_refuses(which):
    """Found while fuzzing: the CUDA simulator wrapped a view of a closed buffer (or of a
    null pointer with elements) without asking whether it has memory; the kernel then
    failed with NumPy's IndexError ("out of bounds for axis 0 with size 0") where a GPU
    launch refuses the argument with BufferError. Both refuse it now, writing nothing."""
    from numba import cuda

    import layoutkit.cuda

    @layoutkit.cuda.jit
    def store(dst, src):
        i = cuda.grid(1)
        if i < dst.shape[0]:
            dst[i] = src[i]

    buffer, view = _fresh()
    memory = buffer._keeper.memory
    before = memory.copy()
    other = StridedMemoryView.from_array_interface(np.full(8, 9.0))
    if which == "null":
        described = type("Described", (), {"__cuda_array_interface__": {
            "version": 3, "shape": (8,), "typestr": "<f8", "data": (0, False)}})()  # fmt: skip
        bad = StridedMemoryView.from_cuda_array_interface(described, -1)
        arguments = (bad, other)
    else:
        buffer.close()
        arguments = (view, other) if which == "closed_dst" else (other, view)
    refused(store[1, 8], *arguments, classes=(BufferError,),
            what=f"a simulated kernel given a {which} view")  # fmt: skip
    check(np.array_equal(memory, before), f"{which}: the kernel wrote into the closed memory")
    check(np.array_equal(np.from_dlpack(other), np.full(8, 9.0)),
          f"{which}: the kernel wrote into the other argument")  # fmt: skip


for _which in ("closed_dst", "closed_src", "null"):
    cases.add(f"simulated_kernel_refuses_{_which}",
              lambda _which=_which: _simulated_kernel_refuses(_which), env=_SIMULATOR,
              timeout=300)  # fmt: skip


# ------------------------------------------------------------------ interpreter shutdown
def _exit_cleanly(source, what):
    """Run ``source`` in a fresh interpreter; it must exit 0 with nothing on stderr."""
    env = dict(os.environ)
    tests = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tests, env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=env,
                            capture_output=True, text=True, timeout=240)  # fmt: skip
    check(result.returncode == 0 and not result.stderr.strip(),
          f"{what}: exit status {result.returncode}, stderr:\n{result.stderr[-3000:]}")  # fmt: skip


_SHUTDOWN_SETUP = """
import numpy as np
import layoutkit
from layoutkit import HostMemoryResource, StridedLayout, StridedMemoryView
from layoutkit.interop.dlpack import consume_capsule

class Cycle:
    pass

cycle = Cycle()
cycle.cycle = cycle
import builtins

builtins.kept_until_the_end = cycle  # builtins are cleared after layoutkit's modules
"""

SHUTDOWN = {
    # a NumPy capsule consumed (renamed to layoutkit's "used_dltensor_versioned"): NumPy's
    # destructor read the freed name at exit ("PyCapsule_GetPointer called with incorrect name")
    "consumed_numpy_capsule_in_cycle": """
        cycle.capsule = np.arange(3.0).__dlpack__(max_version=(1, 0))
        cycle.tensor = consume_capsule(cycle.capsule)
        cycle.legacy = np.arange(3.0).__dlpack__()
        cycle.view = StridedMemoryView.from_dlpack(type("P", (), {
            "__dlpack__": lambda self, **k: cycle.legacy,
            "__dlpack_device__": lambda self: (1, 0)})(), -1)
    """,
    # an imported tensor's __del__ ran after the module's globals were cleared:
    # "Exception ignored in: ImportedTensor._free ... 'NoneType' object is not callable"
    "imported_tensor_in_cycle": """
        class Owner:  # a producer whose deleter needs nothing at shutdown
            def __init__(self):
                self.array = np.arange(4.0)
            def __dlpack__(self, **kwargs):
                return self.array.__dlpack__(**kwargs)
            def __dlpack_device__(self):
                return (1, 0)
        cycle.view = StridedMemoryView.from_dlpack(Owner(), -1)
        cycle.sub = cycle.view.view(cycle.view.layout[::2])
    """,
    "exports_and_buffers_in_cycle": """
        mr = HostMemoryResource()
        buffer = mr.allocate(1 << 20)
        cycle.view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((1 << 17,), 8),
                                                   np.float64)
        cycle.versioned = cycle.view.__dlpack__(max_version=(1, 0))
        cycle.legacy = cycle.view.__dlpack__()
        cycle.buffer_capsule = buffer.__dlpack__(max_version=(1, 0))
        cycle.exported = np.from_dlpack(cycle.view)
        cycle.buffer = mr.allocate(128)
        exported_global = np.asarray(cycle.view)
        buffer.close()
    """,
    # everything at once, with compiled code holding a view's Numba record: imported
    # tensors died after the module's globals were cleared ("Exception ignored in:
    # ImportedTensor._free ... 'NoneType' object is not callable")
    "everything_with_njit": """
        from helpers.producers import Producer
        from numba import njit

        class QuietProducer(Producer):  # its deleter needs no module global at shutdown
            def _on_delete(self, address):
                self.deleted += 1

        mr = HostMemoryResource()
        buffer = mr.allocate(1 << 20)
        view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((1 << 17,), 8),
                                             np.float64)
        capsules = [view.__dlpack__(max_version=(1, 0)), view.__dlpack__(),
                    buffer.__dlpack__(max_version=(1, 0))]
        exported = np.from_dlpack(view)
        producer = QuietProducer(np.arange(4.0))
        imported = StridedMemoryView.from_dlpack(producer, -1)
        numpy_view = StridedMemoryView.from_dlpack(np.arange(5.0), -1)
        numpy_capsule = numpy_view.__dlpack__(max_version=(1, 0))
        cycle.producer = QuietProducer(np.arange(3.0))
        cycle.view = StridedMemoryView.from_dlpack(cycle.producer, -1)
        cycle.buffer = mr.allocate(128)
        cycle.capsule = cycle.view.__dlpack__(max_version=(1, 0))

        @njit
        def first(v):
            return v[0]

        first(view)
        first(cycle.view)
        buffer.close()
    """,
    # the Python fallbacks (used where NumPy's C deleter cannot be borrowed) as the last
    # capsules die
    "python_fallback_capsules_in_cycle": """
        from layoutkit.interop import dlpack
        dlpack._FUNCTIONS.update(dlpack._PYTHON_FUNCTIONS)
        dlpack._packers.clear()
        view = StridedMemoryView.from_dlpack(np.arange(5.0), -1)
        cycle.versioned = view.__dlpack__(max_version=(1, 0))
        cycle.legacy = view.__dlpack__()
        cycle.exported = np.from_dlpack(StridedMemoryView.from_dlpack(np.arange(2.0), -1))
        del view
    """,
}


for _name, _body in SHUTDOWN.items():
    cases.add(
        f"shutdown_{_name}",
        lambda _name=_name, _body=_body: _exit_cleanly(
            _SHUTDOWN_SETUP + textwrap.dedent(_body), f"exit with {_name}"
        ),
        timeout=300,
    )


cases.export(globals())
