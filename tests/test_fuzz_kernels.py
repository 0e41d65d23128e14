"""``layoutkit.cuda.jit`` doors that need no GPU: what it decorates, its options, launch
configurations and argument counts, in the CUDA simulator and through the launch path of a
machine without a driver. Each case runs in a child interpreter (``helpers.hostile``).

Everything here is refused when the kernel is decorated or indexed (``kernel[config]``),
before any argument is read or any driver call is made; numba-cuda left most of it to
its launch (AttributeError / CudaSupportError from deep inside), accepted it silently
(``boundscheck="yes"``, unknown keywords), or, in the simulator, kept a launch's sharedmem
for every later launch of the kernel.
"""

import asyncio  # noqa: F401 (the coroutine case)

import numpy as np
from helpers.hostile import Cases
from helpers.hostile_checks import check, refused

from layoutkit import StridedMemoryView

cases = Cases(__name__)
SIM = {"NUMBA_ENABLE_CUDASIM": "1"}
_BYTE = np.dtype(np.uint8)


def _kernel_function(a, f):
    pass


def _generator(a):
    yield a


async def _coroutine(a):
    pass


class _Class:
    def __call__(self, a):
        pass


def _bad_functions():
    import numba

    import layoutkit.cuda

    return {
        "class": _Class,
        "instance with __call__": _Class(),
        "builtin": len,
        "int": 5,
        "None via positional-only is the decorator form": None,
        "signature string": "void(float64[:])",
        "signature list": ["void(int32)"],
        "generator function": _generator,
        "coroutine function": _coroutine,
        "numba njit dispatcher": numba.njit(_kernel_function),
        "ViewKernel": layoutkit.cuda.jit(_kernel_function),
        "functools.partial": __import__("functools").partial(_kernel_function, 1),
    }


BAD_OPTIONS = {
    "boundscheck='yes'": {"boundscheck": "yes"},
    "boundscheck=None": {"boundscheck": None},
    "boundscheck=2": {"boundscheck": 2},
    "debug='x'": {"debug": "x"},
    "opt=1": {"opt": 1},
    "lineinfo='x'": {"lineinfo": "x"},
    "fastmath=3": {"fastmath": 3},
    "cache='x'": {"cache": "x"},
    "unknown keyword": {"foo": 1},
    "func keyword": {"func": _kernel_function},
    "extensions=5": {"extensions": 5},
    "extensions=None": {"extensions": None},
    "device=True": {"device": True},
}

BAD_CONFIGURATIONS = {
    "griddim 0": (0, 1),
    "griddim -1": (-1, 1),
    "blockdim 0": (1, 0),
    "blockdim (8, 0)": (1, (8, 0)),
    "float griddim": (1.5, 1),
    "float in a tuple": ((2, 2.0), 1),
    "bool griddim": (True, 32),
    "numpy bool": (np.bool_(True), 32),
    "None": (None, None),
    "string": ("4", 32),
    "empty tuples": ((), ()),
    "4-d griddim": ((1, 1, 1, 1), 1),
    "griddim past 2**31-1": (2**31, 1),
    "griddim y past 65535": ((1, 65536), 1),
    "huge griddim": (2**70, 1),
    "blockdim 2048": (1, 2048),
    "blockdim z 65": (1, (1, 1, 65)),
    "blockdim (64, 32): 2048 threads": (1, (64, 32)),
    "stream string": (1, 1, "s"),
    "stream float": (1, 1, 1.5),
    "stream -1": (1, 1, -1),
    "sharedmem -5": (1, 1, 0, -5),
    "sharedmem float": (1, 1, 0, 8.0),
    "sharedmem past 2**32": (1, 1, 0, 2**32),
    "five entries": (1, 1, 0, 0, 0),
    "one entry": (1,),
    "not a tuple": 4,
}


def _all_refused(what):
    import layoutkit.cuda

    jit = layoutkit.cuda.jit
    if what == "functions":
        for name, function in _bad_functions().items():
            if function is None:
                check(callable(jit(None)), f"{name}: jit(None) is not a decorator")
                continue
            error = refused(jit, function, what=f"jit({name})", classes=(TypeError,))
            check("kernel" in str(error) or "compiled" in str(error), f"{name}: {error}")
    elif what == "options":
        for name, options in BAD_OPTIONS.items():
            for form in ("direct", "decorator"):
                call = (lambda o=options: jit(_kernel_function, **o)) if form == "direct" else (
                    lambda o=options: jit(**o)(_kernel_function))  # fmt: skip
                error = refused(call, what=f"jit({name}) {form}", classes=(TypeError, ValueError))
                key = next(iter(options))
                check(key in str(error), f"jit({name}): the message does not name it: {error}")
    elif what == "configurations":
        kernel = jit(_kernel_function)
        for name, config in BAD_CONFIGURATIONS.items():
            refused(lambda c=config: kernel[c](1, 2.0), what=f"kernel[{name}]",
                    classes=(TypeError, ValueError))  # fmt: skip
    elif what == "counts":
        kernel = jit(_kernel_function)
        view = StridedMemoryView.from_array_interface(np.zeros(4))
        for args in ((), (view,), (view, 1.0, 2)):
            error = refused(kernel[1, 32], *args, classes=(TypeError,))
            check(f"takes 2 arguments, got {len(args)}" in str(error), str(error))
        defaults = jit(lambda a, f=1.0, *rest: None)
        refused(defaults[1, 32], classes=(TypeError,))


for _what in ("functions", "options", "configurations", "counts"):
    cases.add(f"jit_refuses_bad_{_what}", lambda w=_what: _all_refused(w))
    cases.add(f"simulator_jit_refuses_bad_{_what}", lambda w=_what: _all_refused(w), env=SIM)


@cases.case
def launch_without_a_driver_is_no_driver_error():
    """On a machine without a driver a launch (of scalars: views of host memory are
    refused first) and prepare() raise NoDriverError, not numba-cuda's CudaSupportError."""
    import layoutkit
    import layoutkit.cuda
    from layoutkit._driver import driver_found

    if driver_found():
        return  # nothing to check on a GPU machine
    kernel = layoutkit.cuda.jit(_kernel_function)
    for call in (lambda: kernel[1, 32](1, 2.0), lambda: kernel.prepare(1, 32, 1, 2.0),
                 lambda: kernel[(2, 2), (8, 4), 0, 0](np.zeros(3), 1.0)):  # fmt: skip
        error = refused(call, classes=(layoutkit.NoDriverError,))
        check("no CUDA driver was found" in str(error), str(error))
        check(isinstance(error, RuntimeError), "NoDriverError is a RuntimeError")


@cases.case(env=SIM)
def simulator_launch_keeps_no_configuration_between_launches():
    """numba-cuda's simulator stores kernel[grid, block, stream, sharedmem] on the kernel:
    a later kernel[grid, block] ran with the earlier sharedmem (after sharedmem=-5, every
    launch failed with NumPy's 'negative dimensions are not allowed')."""
    global cuda  # the simulator swaps a kernel's global `cuda` module for its own
    from numba import cuda

    import layoutkit.cuda

    @layoutkit.cuda.jit
    def shared_size(out):
        out[0] = cuda.shared.array(0, _BYTE).size

    view = StridedMemoryView.from_array_interface(out := np.zeros(1, np.int64))
    shared_size[1, 1, 0, 64](view)
    check(out[0] == 64, f"sharedmem 64: {out[0]}")
    shared_size[1, 1](view)
    check(out[0] == 0, f"a launch without sharedmem saw {out[0]} bytes")
    refused(lambda: shared_size[1, 1, 0, -5](view), classes=(ValueError,))
    shared_size[np.int64(1), np.int32(1)](view)
    check(out[0] == 0, f"after a refused sharedmem: {out[0]}")


cases.export(globals())
