"""Random copy cases for the copy tests and ``benchmarks/bench_copy_random.py``.

Two sources of cases, both NumPy arrays over padded byte buffers so a test can compare
every byte of each buffer, including the bytes a copy must not touch (``np.copyto`` is
the oracle):

* :func:`copy_cases`, a hypothesis strategy of small edge cases (0-size, 0-d, extent 1,
  itemsizes 3, 6 and 12, broadcasting);
* :func:`random_pair_spec`, the seeded generator of the random-layout benchmark: a
  :class:`PairSpec` says how to build a source and a destination of a given size, and
  :func:`numpy_pair` builds it in host memory (the benchmark builds the same spec in
  device memory). The tests run it at small sizes, the benchmark at 64-256 MB.
"""

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from layoutkit import Buffer, MemoryResource, StridedLayout, StridedMemoryView

ITEMSIZES = (1, 2, 3, 4, 6, 8, 12, 16)
#: Itemsizes of the benchmark generator and the NumPy / CuPy / torch dtype of each.
SPEC_ITEMSIZES = (1, 2, 4, 8, 16)
SPEC_DTYPES = {1: "uint8", 2: "float16", 4: "float32", 8: "float64", 16: "complex128"}


def layout_of(array):
    """The ``StridedLayout`` of a NumPy array (strides in elements)."""
    return StridedLayout(array.shape, array.strides, array.itemsize, divide_strides=True)


def host_view(array, writable=False):
    """A ``StridedMemoryView`` of a NumPy array (through its array interface).

    ``writable=True`` asks for a writable view explicitly, as a broadcast destination
    needs (aliasing views are read-only by default).
    """
    view = StridedMemoryView.from_array_interface(array)
    if writable:
        view = StridedMemoryView.from_buffer(view.buffer, view.layout, view.dtype, False)
    return view


class _Mirror:
    """Describes ``array``'s elements at ``ptr`` through the CUDA array interface."""

    def __init__(self, ptr, array):
        self.__cuda_array_interface__ = {
            "version": 3,
            "data": (ptr, False),
            "shape": array.shape,
            "strides": array.strides,
            "typestr": array.dtype.str,
            "stream": None,
        }


def mirrored_view(ptr, array, base):
    """A view of ``array``'s elements in a copy of its byte buffer ``base`` that starts at
    ``ptr`` (pinned or device memory), through the CUDA array interface."""
    address = ptr + (array.__array_interface__["data"][0] - base.ctypes.data)
    return StridedMemoryView.from_cuda_array_interface(_Mirror(address, array), -1)


def strided_view(shape, itemsize, order, steps, pad, misalign, fill):
    """A view of ``shape`` into a fresh byte buffer.

    ``order`` is the memory order of the axes (a permutation, slowest first), ``steps``
    the per-axis slice step (negative reverses), ``pad`` extra elements per axis before
    slicing and ``misalign`` a byte offset of the whole array inside its buffer.
    """
    big = tuple(e * abs(s) + p for e, s, p in zip(shape, steps, pad, strict=True))
    nbytes = int(np.prod(big, dtype=np.int64)) * itemsize
    buffer = np.frombuffer(fill(nbytes + misalign + 16), dtype=np.uint8).copy()
    base = buffer[misalign : misalign + nbytes].view(np.dtype((np.void, itemsize)))
    stored = base.reshape(tuple(big[k] for k in order))
    inverse = np.argsort(order)
    array = stored.transpose(inverse)
    if shape:
        array = array[tuple(slice(None, None, s) for s in steps)]
        array = array[tuple(slice(0, e) for e in shape)]
    return buffer, array


@st.composite
def view_specs(draw, shape, itemsize):
    ndim = len(shape)
    order = draw(st.permutations(range(ndim))) if ndim else []
    steps = draw(st.lists(st.sampled_from((1, 1, 2, -1, -2)), min_size=ndim, max_size=ndim))
    pad = draw(st.lists(st.integers(0, 1), min_size=ndim, max_size=ndim))
    misalign = draw(st.sampled_from((0, 0, 1, 2, 4, 8)))
    return tuple(order), tuple(steps), tuple(pad), misalign


def _random_bytes(seed):
    rng = np.random.default_rng(seed)
    return lambda n: rng.integers(0, 256, n, dtype=np.uint8).tobytes()


@st.composite
def copy_cases(draw, max_ndim=4, max_extent=5, itemsizes=ITEMSIZES):
    """Draw ``(dst_buffer, dst, src_buffer, src)``; ``src`` may broadcast to ``dst``."""
    itemsize = draw(st.sampled_from(itemsizes))
    shape = tuple(draw(st.lists(st.integers(0, max_extent), max_size=max_ndim)))
    seed = draw(st.integers(0, 2**32 - 1))
    dst_buffer, dst = strided_view(
        shape, itemsize, *draw(view_specs(shape, itemsize)), fill=lambda n: bytes(n)
    )
    src_shape = list(shape)
    lead = draw(st.integers(0, len(shape)))
    for k in range(lead, len(shape)):
        if draw(st.integers(0, 4)) == 0:
            src_shape[k] = 1
    src_shape = tuple(src_shape[draw(st.integers(0, lead)) :])
    src_buffer, src = strided_view(
        src_shape, itemsize, *draw(view_specs(src_shape, itemsize)), fill=_random_bytes(seed)
    )
    return dst_buffer, dst, src_buffer, src


def expected_bytes(dst_buffer, dst, src):
    """The destination buffer after ``np.copyto(dst, src)`` (computed on copies)."""
    offset = dst.__array_interface__["data"][0] - dst_buffer.ctypes.data
    expected_buffer = dst_buffer.copy()
    if dst.size == 0:
        return expected_buffer
    twin = np.ndarray(
        dst.shape, dst.dtype, buffer=expected_buffer, offset=offset, strides=dst.strides
    )
    np.copyto(twin, src)
    return expected_buffer


# ----------------------------------------------------------------------------- the generator
@dataclass(frozen=True)
class PairSpec:
    """One random copy: a source view and a destination view of ``shape``.

    The source is a slice (``steps``: per-axis step, negative reverses; ``pad``: spare
    elements per axis) of an array stored in axis order ``src_order`` (slowest first);
    axes in ``broadcast`` have extent 1 in the source (it broadcasts along them). The
    destination is dense, stored in axis order ``dst_order``.
    """

    itemsize: int
    shape: tuple
    src_order: tuple
    steps: tuple
    pad: tuple
    broadcast: tuple
    dst_order: tuple

    @property
    def nbytes(self):
        """Bytes of the destination."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.itemsize

    @property
    def src_shape(self):
        return tuple(1 if k in self.broadcast else e for k, e in enumerate(self.shape))

    def describe(self):
        """A short text: shape, dtype, the source's order and steps, the destination's order."""
        steps = "" if set(self.steps) == {1} else f" steps {self.steps}"
        cast = f" bcast {self.broadcast}" if self.broadcast else ""
        dst = "" if self.dst_order == tuple(range(len(self.shape))) else f" dst {self.dst_order}"
        return (f"{self.shape} {SPEC_DTYPES[self.itemsize]} src {self.src_order}{steps}{cast}"
                f"{dst}")  # fmt: skip


def _extents(rng, ndim, volume):
    """``ndim`` extents: some small (2-16) in random positions, the others large, whose
    product is about ``volume``."""
    shape = [0] * ndim
    n_small = int(rng.integers(0, ndim))  # at least one large axis
    small = set(rng.choice(ndim, n_small, replace=False).tolist())
    for k in small:
        shape[k] = int(rng.integers(2, 17))
    large = [k for k in range(ndim) if k not in small]
    rest = max(volume / np.prod([shape[k] for k in small] or [1]), 2.0 ** len(large))
    weights = rng.dirichlet(np.ones(len(large)))
    for k, w in zip(large, weights, strict=True):
        shape[k] = max(2, int(round(rest**w)))
    return tuple(shape)


def random_pair_spec(rng, nbytes, max_ndim=6):
    """A random copy of about ``nbytes`` destination bytes (see :class:`PairSpec`).

    2 to ``max_ndim`` axes; extents 2-16 in random positions and large ones; itemsizes
    1, 2, 4, 8, 16; a source in a random axis order, with steps and negative steps on
    some axes (1 in 3 cases), cropped from a larger array along some axes (1 in 4),
    broadcast along one axis (1 in 20); a destination dense in C order (half the cases)
    or in a random axis order.
    """
    ndim = int(rng.integers(2, max_ndim + 1))
    itemsize = int(rng.choice(SPEC_ITEMSIZES))
    shape = _extents(rng, ndim, nbytes / itemsize)
    src_order = tuple(int(k) for k in rng.permutation(ndim))
    steps = [1] * ndim
    if rng.random() < 1 / 3:
        for k in rng.choice(ndim, int(rng.integers(1, min(ndim, 2) + 1)), replace=False):
            steps[int(k)] = int(rng.choice([2, 3, -1, -2]))
    pad = [0] * ndim
    if rng.random() < 1 / 4:  # a crop of a larger array along one or two axes
        for k in rng.choice(ndim, int(rng.integers(1, min(ndim, 2) + 1)), replace=False):
            pad[int(k)] = int(rng.integers(1, 4))
    broadcast = ()
    if rng.random() < 1 / 20:
        broadcast = (int(rng.integers(0, ndim)),)
    dst_order = tuple(range(ndim))
    if rng.random() < 1 / 2:
        dst_order = tuple(int(k) for k in rng.permutation(ndim))
    return PairSpec(itemsize, shape, src_order, tuple(steps), tuple(pad), broadcast, dst_order)


def numpy_pair(spec, seed=0, misalign=0):
    """``(dst_buffer, dst, src_buffer, src)`` of a spec in host memory (padded buffers).

    The destination buffer is zeros, the source random bytes.
    """
    dst_buffer, dst = strided_view(spec.shape, spec.itemsize, spec.dst_order,
                                   (1,) * len(spec.shape), (0,) * len(spec.shape), misalign,
                                   lambda n: bytes(n))  # fmt: skip
    src_buffer, src = strided_view(spec.src_shape, spec.itemsize, spec.src_order, spec.steps,
                                   spec.pad, misalign, _random_bytes(seed))  # fmt: skip
    return dst_buffer, dst, src_buffer, src


def small_specs(seed, count, nbytes=(256, 65536)):
    """``count`` specs of the benchmark generator at test sizes (log-uniform bytes)."""
    rng = np.random.default_rng(seed)
    low, high = np.log(nbytes[0]), np.log(nbytes[1])
    return [random_pair_spec(rng, float(np.exp(rng.uniform(low, high)))) for _ in range(count)]


class ClaimsDevice(MemoryResource):
    """A resource whose buffers say they are on ``device_id``: host memory of ``array``,
    which the resource (so the buffer, so the view) keeps alive."""

    def __init__(self, device_id, array):
        self._device_id = device_id
        self.array = array

    def allocate(self, size, stream=None):
        raise AssertionError("not used")

    def deallocate(self, ptr, size, stream=None):
        pass

    device_id = property(lambda self: self._device_id)
    is_device_accessible = property(lambda self: True)
    is_host_accessible = property(lambda self: False)


def DeviceView(array, device_id):
    """A view of ``array`` that claims to be on ``device_id``."""
    host = host_view(array)
    resource = ClaimsDevice(device_id, array)
    buffer = Buffer.from_handle(host.buffer.ptr, host.buffer.size, mr=resource)
    return StridedMemoryView.from_buffer(buffer, host.layout, host.dtype)


# ----------------------------------------------------------------------------- aliasing
#: Itemsizes of the aliasing cases: odd ones, and items wider than the widest unit (16).
ALIAS_ITEMSIZES = (1, 2, 3, 4, 5, 8, 12, 16, 32)
#: Elements of the one buffer both sides of an aliasing case view.
ALIAS_ELEMENTS = 160
#: Strides of extent-1 axes, which no element uses (DECISIONS 6): any value goes.
JUNK_STRIDES = (0, 1, -1, 7, 10**6, -(10**9), 2**40)
#: How the source of an aliasing case relates to the destination (see :func:`aliased_case`).
RELATIONS = ("independent", "shifted", "permuted", "reversed", "broadcast", "scaled")


class DrawRandom:
    """The three draws :func:`aliased_case` makes, from hypothesis's ``data`` (shrinkable)."""

    def __init__(self, data):
        self._data = data

    def integers(self, low, high):
        """An int in ``[low, high]``."""
        return self._data.draw(st.integers(low, high))

    def choice(self, values):
        return self._data.draw(st.sampled_from(values))

    def random(self):
        return self._data.draw(st.floats(0, 1, exclude_max=True))


class SeededRandom:
    """The same draws from a seeded ``random.Random`` (the seeded drivers)."""

    def __init__(self, seed):
        import random

        self._rng = random.Random(seed)

    def integers(self, low, high):
        return self._rng.randint(low, high)

    def choice(self, values):
        return self._rng.choice(values)

    def random(self):
        return self._rng.random()


def offset_layout(shape, strides, itemsize, offset):
    """``StridedLayout(shape, strides, itemsize)`` with slice offset ``offset`` (>= 0), made
    through public slicing only (also at 64 dimensions)."""
    shape, strides = tuple(shape), tuple(strides)
    if len(shape) < 64:
        return StridedLayout((offset + 1, *shape), (1, *strides), itemsize)[offset]
    k = shape.index(1)  # at 64 dimensions, most axes have extent 1: slice one of them
    index = [slice(None)] * len(shape)
    index[k] = slice(offset, offset + 1)
    wide = StridedLayout(shape[:k] + (offset + 1,) + shape[k + 1 :],
                         strides[:k] + (1,) + strides[k + 1 :], itemsize)  # fmt: skip
    return wide[tuple(index)]


def _place(rng, shape, strides, capacity, near=None):
    """An offset that keeps every element of ``(shape, strides)`` in ``[0, capacity)``
    (near ``near`` when given), or None when they cannot fit."""
    used = [(e, s) for e, s in zip(shape, strides, strict=True) if e > 1]
    low = sum((e - 1) * s for e, s in used if s < 0)
    high = sum((e - 1) * s for e, s in used if s > 0)
    if 0 in shape:
        return rng.integers(0, capacity - 1)
    if high - low >= capacity:
        return None
    first, last = -low, capacity - 1 - high
    if near is not None:
        reach = high - low + 1
        first, last = max(first, near - reach), min(last, near + reach)
        if first > last:
            return None
    return rng.integers(first, last)


def _random_strides(rng, shape):
    """Strides in ``[-9, 9]``; junk ones on half the extent-1 axes."""
    return [rng.choice(JUNK_STRIDES) if e == 1 and rng.random() < 0.5 else rng.integers(-9, 9)
            for e in shape]  # fmt: skip


def _related_strides(rng, relation, shape, strides):
    """The source's strides for ``relation`` to a destination of ``(shape, strides)``."""
    strides = list(strides)
    n = len(shape)
    if relation == "permuted":  # a transpose onto itself: swap axes of equal extent
        for _ in range(n):
            a, b = rng.integers(0, n - 1), rng.integers(0, n - 1)
            if shape[a] == shape[b]:
                strides[a], strides[b] = strides[b], strides[a]
    elif relation == "reversed":
        strides = [-s if rng.random() < 0.5 else s for s in strides]
    elif relation == "broadcast":  # the source repeats some of the destination's elements
        strides = [0 if rng.random() < 0.4 else s for s in strides]
    elif relation == "scaled":  # a[::2] <- a[::3], a[::2] <- a[1::2], ...
        factor = rng.choice((-3, -2, -1, 2, 3))
        strides = [s * factor for s in strides]
    return strides


def aliased_case(rng, max_ndim=64):
    """A random copy between two views of one buffer: ``(itemsize, dst, src)``.

    ``dst`` and ``src`` are ``(shape, strides, offset)`` in elements of ``ALIAS_ELEMENTS``
    elements of ``itemsize`` bytes; ``src``'s shape broadcasts to ``dst``'s (a suffix,
    extent-1 axes, leading extent-1 axes beyond ``dst``'s). ``src`` relates to ``dst`` as
    one of ``RELATIONS`` says: independent strides, the same strides elsewhere (partial
    overlaps whose elements do or do not intersect), axes of equal extent swapped
    (transposes onto themselves), axes reversed, stride 0 (a broadcast source that aliases
    the destination) or scaled strides (interleaved views). Extent-1 axes take junk
    strides; up to ``max_ndim`` dimensions, at most 4 of extent above 1. ``rng`` is a
    :class:`DrawRandom` or a :class:`SeededRandom`; returns None for a draw that does not
    fit in the buffer.
    """
    itemsize = rng.choice(ALIAS_ITEMSIZES)
    ndim = rng.choice((0, 1, 1, 2, 2, 3, 3, 4, 5, 12, max_ndim))
    ndim = min(ndim, max_ndim)
    shape = [1] * ndim
    for _ in range(min(ndim, 4)):
        shape[rng.integers(0, ndim - 1)] = rng.choice((0, 1, 2, 2, 3, 3, 4, 4, 5, 6))
    strides = _random_strides(rng, shape)
    dst_offset = _place(rng, shape, strides, ALIAS_ELEMENTS)
    if dst_offset is None:
        return None
    relation = rng.choice(RELATIONS)
    if relation == "independent":
        src_strides = _random_strides(rng, shape)
    else:
        src_strides = _related_strides(rng, relation, shape, strides)
    src_shape = list(shape)
    for k in range(ndim):  # extent-1 axes that broadcast
        if rng.random() < 0.15:
            src_shape[k] = 1
    src_strides = [rng.choice(JUNK_STRIDES) if e == 1 and s != o else o
                   for e, s, o in zip(src_shape, shape, src_strides, strict=True)]  # fmt: skip
    drop = rng.integers(0, ndim) if rng.random() < 0.2 else 0  # fewer dimensions
    src_shape, src_strides = src_shape[drop:], src_strides[drop:]
    if ndim < max_ndim and rng.random() < 0.1:  # leading extent-1 axes np.copyto drops
        src_shape, src_strides = [1, *src_shape], [rng.choice(JUNK_STRIDES), *src_strides]
    near = None if relation == "independent" else dst_offset
    src_offset = _place(rng, src_shape, src_strides, ALIAS_ELEMENTS, near)
    if src_offset is None:
        return None
    return itemsize, (tuple(shape), tuple(strides), dst_offset), \
        (tuple(src_shape), tuple(src_strides), src_offset)  # fmt: skip


def alias_dtypes(itemsize):
    """Dtypes of ``itemsize`` bytes for views of an aliasing case: none (a view without a
    dtype), opaque bytes, a struct with padding, and a NumPy number where one exists."""
    dtypes = [None, np.dtype(f"V{itemsize}"),
              np.dtype({"names": ["last"], "formats": ["u1"], "offsets": [itemsize - 1],
                        "itemsize": itemsize})]  # fmt: skip
    numbers = {1: "u1", 2: "i2", 4: "f4", 8: "f8", 16: "c16"}
    if itemsize in numbers:
        dtypes.append(np.dtype(numbers[itemsize]))
    if itemsize == 8:
        dtypes.append(np.dtype("i1,f4", align=True))  # padding NumPy names like a field
    return dtypes


def numpy_items(memory, side, itemsize):
    """The ``V<itemsize>`` ndarray over ``memory`` (a uint8 array) that ``side``
    (``(shape, strides, offset)`` in elements) describes: an oracle for its bytes."""
    shape, strides, offset = side
    byte_strides = tuple(s * itemsize for s in strides)  # junk ones too: NumPy ignores them
    if 0 in shape:
        return np.empty(shape, f"V{itemsize}")
    return np.ndarray(shape, f"V{itemsize}", memory, offset * itemsize, byte_strides)


def alias_view(memory, buffer, side, itemsize, dtype, how, is_readonly=None):
    """A view of ``side`` in ``memory`` made ``how`` says: ``"from_buffer"`` over ``buffer``
    (with ``is_readonly``), ``"view"`` of a view of all of ``buffer``, or
    ``"array_interface"`` of an ndarray over ``memory`` (its own Buffer)."""
    shape, strides, offset = side
    layout = offset_layout(shape, strides, itemsize, offset)
    if how == "from_buffer":
        return StridedMemoryView.from_buffer(buffer, layout, dtype, is_readonly)
    if how == "view":
        whole = StridedLayout.dense((buffer.size // itemsize,), itemsize)
        return StridedMemoryView.from_buffer(buffer, whole, dtype).view(layout)
    items = numpy_items(memory, side, itemsize).view(dtype or f"V{itemsize}")
    return StridedMemoryView.from_array_interface(items)
