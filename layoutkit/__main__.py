"""Demo: build, transform and check strided layouts against NumPy.

Run ``python -m layoutkit`` (``--help`` for the options). Every line builds a layout with
layoutkit, applies the same operation to a NumPy array, and compares shape, byte strides
and the byte offset of every index. The exit status is 1 when any line fails.
"""

import argparse
import os
import sys

import numpy as np

from layoutkit import StridedLayout

_DTYPES = {1: np.uint8, 2: np.float16, 4: np.float32, 8: np.float64, 16: np.complex128}
#: Most elements of a random layout: each case builds a NumPy array of its whole volume
#: (extents 2-7 in 32 dimensions would be about 10**27 elements).
MAX_VOLUME = 2**20
#: Most random layouts one run checks (about two minutes on one core).
MAX_COUNT = 10**6


def _numpy_dense(shape, itemsize, order):
    """A NumPy array of ``shape`` stored densely with axis ``order[-1]`` fastest."""
    order = tuple(order)
    storage = np.arange(int(np.prod(shape)), dtype=_DTYPES[itemsize])
    return storage.reshape([shape[axis] for axis in order]).transpose(np.argsort(order))


def _layout_byte_offsets(layout):
    """Byte offset of every index of ``layout``, as an array of its shape."""
    offsets = np.full(layout.shape, layout.slice_offset, dtype=np.int64)
    for axis, (extent, stride) in enumerate(zip(layout.shape, layout._strides, strict=True)):
        steps = np.arange(extent, dtype=np.int64) * stride
        offsets = offsets + steps.reshape((-1,) + (1,) * (layout.ndim - axis - 1))
    return offsets * layout.itemsize


def _numpy_byte_offsets(array, base):
    """Byte offset, from ``base``'s first element, of every index of the NumPy view ``array``."""
    start = array.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    offsets = np.full(array.shape, start, dtype=np.int64)
    for axis, (extent, stride) in enumerate(zip(array.shape, array.strides, strict=True)):
        steps = np.arange(extent, dtype=np.int64) * stride
        offsets = offsets + steps.reshape((-1,) + (1,) * (array.ndim - axis - 1))
    return offsets


def _strides_that_matter(shape, strides):
    """Strides of the axes that move: extent-1 axes, and every axis of an empty array, may
    carry any stride (NumPy and layoutkit choose differently) without changing an offset."""
    if 0 in shape:
        return ()
    return tuple(stride for extent, stride in zip(shape, strides, strict=True) if extent > 1)


def check(layout, array, base):
    """Return the differences between ``layout`` and the NumPy view ``array`` of ``base``."""
    problems = []
    if layout.shape != array.shape:
        problems.append(f"shape {layout.shape} != numpy {array.shape}")
    elif _strides_that_matter(layout.shape, layout._byte_strides()) != _strides_that_matter(
        array.shape, array.strides
    ):
        problems.append(f"byte strides {layout._byte_strides()} != numpy {array.strides}")
    elif not np.array_equal(_layout_byte_offsets(layout), _numpy_byte_offsets(array, base)):
        problems.append("byte offsets differ from numpy's")
    if layout.itemsize != array.itemsize:
        problems.append(f"itemsize {layout.itemsize} != numpy {array.itemsize}")
    return problems


def tour_cases():
    """(description, layoutkit layout, NumPy view, NumPy base) for the guided tour."""
    c = StridedLayout.dense((3, 4, 5), 4)
    a = _numpy_dense((3, 4, 5), 4, (0, 1, 2))
    f = StridedLayout.dense((3, 4, 5), 4, stride_order="F")
    af = _numpy_dense((3, 4, 5), 4, (2, 1, 0))
    p = StridedLayout.dense((3, 4, 5), 8, stride_order=(1, 2, 0))
    ap = _numpy_dense((3, 4, 5), 8, (1, 2, 0))
    m = StridedLayout.dense((4, 6), 4)
    am = _numpy_dense((4, 6), 4, (0, 1))
    row = StridedLayout.dense((1, 4), 8)
    arow = _numpy_dense((1, 4), 8, (0, 1))
    dense_copy = np.empty_like(af[:, ::-1], order="K")
    unit = StridedLayout((4, 1, 6), (6, 100, 1), 4)
    aunit = np.lib.stride_tricks.as_strided(am, (4, 1, 6), (24, 400, 4))
    return [
        ("dense C (3, 4, 5)", c, a, a),
        ("dense F (3, 4, 5)", f, af, af),
        ("dense, stride_order (1, 2, 0)", p, ap, ap),
        ("slice [1:, ::-2, 3:0:-2]", c[1:, ::-2, 3:0:-2], a[1:, ::-2, 3:0:-2], a),
        ("index [..., None, 2]", c[..., None, 2], a[..., None, 2], a),
        ("permuted (2, 0, 1)", c.permuted((2, 0, 1)), a.transpose(2, 0, 1), a),
        (
            "broadcast (1, 4) to (3, 4)",
            row.broadcast_to((3, 4)),
            np.broadcast_to(arow, (3, 4)),
            arow,
        ),
        ("reshaped (4, 6) to (2, 3, 4)", m.reshaped((2, 3, 4)), am.reshape(2, 3, 4), am),
        (
            "permuted F, reshaped to (20, 3)",
            f.permuted((2, 1, 0)).reshaped((20, 3)),
            af.transpose(2, 1, 0).reshape(20, 3),
            af,
        ),
        ("flattened (extent-1 stride ignored)", unit.flattened(), aunit.reshape(24), am),
        ("flattened axes 1..2 of [::2]", c[::2].flattened(1, 2), a[::2].reshape(2, 20), a),
        ("empty slice [:, 2:2]", c[:, 2:2], a[:, 2:2], a),
        ("squeezed", c[:, None, 1:2].squeezed(), a[:, None, 1:2].squeeze(), a),
        ("unsqueezed (1)", c.unsqueezed(1), a[:, None], a),
        ("repacked float32 -> 8 bytes", m.repacked(8), am.view(np.float64), am),
        ("repacked 8 bytes -> float32", m.repacked(8).repacked(4), am, am),
        (
            "to_dense of a reversed F slice",
            f[:, ::-1].to_dense(),
            dense_copy,
            dense_copy,
        ),
    ]


def random_cases(count, ndim, seed):
    """Random dense layouts, sliced (negative steps included) and permuted, with NumPy twins."""
    rng = np.random.default_rng(seed)
    for number in range(count):
        itemsize = int(rng.choice(list(_DTYPES)))
        shape = _bounded(tuple(int(n) for n in rng.integers(2, 8, ndim)))
        order = tuple(int(axis) for axis in rng.permutation(ndim))
        layout = StridedLayout.dense(shape, itemsize, stride_order=order)
        base = _numpy_dense(shape, itemsize, order)
        slices = []
        for extent in shape:
            step = int(rng.choice([-2, -1, 1, 2]))
            if step > 0:  # from somewhere in the first half to the end
                start = int(rng.integers(0, extent // 2 + 1))
            else:  # from somewhere in the second half down to index 0
                start = int(rng.integers(extent // 2, extent))
            slices.append(slice(start, None, step))
        axes = tuple(int(axis) for axis in rng.permutation(ndim))
        yield (
            f"random #{number}: order {order}, sliced, permuted {axes}",
            layout[tuple(slices)].permuted(axes),
            base[tuple(slices)].transpose(axes),
            base,
        )


def _bounded(shape, limit=MAX_VOLUME):
    """``shape`` with the extents that would take its volume past ``limit`` lowered to 1.

    Examples
    --------
    >>> _bounded((4, 5, 6), limit=25)
    (4, 5, 1)
    """
    bounded, volume = [], 1
    for extent in shape:
        extent = extent if volume * extent <= limit else 1
        volume *= extent
        bounded.append(extent)
    return tuple(bounded)


def run(cases, out=None):
    """Check every case, print one OK/FAIL line each, and return the number of failures."""
    out = sys.stdout if out is None else out
    failures = 0
    for description, layout, array, base in cases:
        problems = check(layout, array, base)
        failures += bool(problems)
        status = "FAIL" if problems else "OK"
        print(
            f"{status:4} {description:38} shape {layout.shape} strides {layout.strides} "
            f"itemsize {layout.itemsize} offset {layout.slice_offset}",
            file=out,
        )
        for problem in problems:
            print(f"       {problem}", file=out)
    return failures


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m layoutkit",
        description="Build, transform and check strided layouts against NumPy views.",
    )
    parser.add_argument(
        "--count", type=int, default=8, help=f"random layouts to check, at most {MAX_COUNT} (8)"
    )
    parser.add_argument(
        "--ndim", type=int, default=3, help="dimensions of random layouts, 1 to 32 (3)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed for random layouts, an integer >= 0 (0)"
    )
    parser.add_argument("--no-tour", action="store_true", help="check only random layouts")
    args = parser.parse_args(argv)
    if not 0 <= args.count <= MAX_COUNT:
        parser.error(f"--count must be >= 0 and at most {MAX_COUNT}, got {args.count}")
    if args.seed < 0:  # NumPy's generators take non-negative seeds only
        parser.error(f"--seed must be >= 0, got {args.seed}")
    if not 1 <= args.ndim <= 32:
        parser.error(f"--ndim must be between 1 and 32, got {args.ndim}")

    cases = [] if args.no_tour else tour_cases()
    print(
        "Each line builds a layout with layoutkit and the same view with NumPy, and compares\n"
        "shape, byte strides and the byte offset of every index (OK / FAIL).\n"
    )
    failures = run([*cases, *random_cases(args.count, args.ndim, args.seed)])
    total = len(cases) + args.count
    print(f"{total - failures} of {total} layouts match NumPy")
    return 1 if failures else 0


def _command_line():
    """``main()`` for ``python -m layoutkit``: output that cannot be written (a closed pipe,
    as in ``| head``, or a full disk) ends the run with status 1 and one line, not a
    traceback."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        status = 1  # the reader has gone: nothing more to say
    except OSError as exc:
        print(f"python -m layoutkit: error: cannot write the output: {exc}", file=sys.stderr)
        status = 1
    else:
        return status
    # Python flushes stdout again at exit, which would fail (and print) once more
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return status


if __name__ == "__main__":
    sys.exit(_command_line())
