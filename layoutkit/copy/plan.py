"""Copy planning: two layouts in, a plan out. Pure integer arithmetic, no Numba CUDA and no
driver.

A copy moves every element of a source layout (already broadcast to the destination's
shape with ``StridedLayout.broadcast_to``) to the same index of a destination layout.
Planning has three steps.

1. **Coalesce** (:func:`coalesced`): the element's bytes become an innermost axis of
   stride 1 on both sides, and :func:`layoutkit._kernels.coalesce_pair` drops extent-1
   axes, flips axes whose destination stride is negative, sorts the axes by the
   destination's stride order and merges axes contiguous on both sides. Strides and
   offsets are in bytes from here on; the last axis is the destination's fastest.
2. **Widen** the unit of transfer to the largest power of two (at most 16 bytes) that
   divides the innermost run of bytes contiguous on both sides, every other stride and
   both addresses.
3. **Choose** how to move the units, from the shape of the problem:

   * one contiguous run: ``memcpy``;
   * a host side that is not device-accessible: ``memcpy``, a driver 2-d copy
     (``copy2d``) for long rows at a pitch, else ``staged`` (see ``copy._transfer``);
   * both sides on the host: ``host`` (see ``copy.cpu``);
   * otherwise ``kernel``: one or more launches of the device kernels in ``copy.gpu``.

Device kernels by the shape of the problem
------------------------------------------
``a`` is the source's fastest axis (smallest non-zero source stride), ``b`` the
destination's (the last axis).

* ``direct`` (:func:`direct_launch`): ``a`` is ``b`` and the run along it is long (at least
  ``RUN_DIRECT`` bytes) or strided on the source. Each thread moves units straight from
  source to destination; a tile is a chunk of ``b`` times a few rows (the next
  destination axes, several small ones folded together), so short rows fill a tile as
  well as long ones. Also the fill of a broadcast source (a source unit repeated into a
  16-byte destination unit) and the edges of the other kernels.
* ``block`` (:func:`block_launch`): a transpose of 1- or 2-byte units. Each thread loads a
  block of units with vector loads along the source's runs, transposes it in registers and
  stores it with vector stores along the destination's runs. Three shapes of block: a
  square of ``k x k`` units; a *deinterleave* (``a`` is short, at most 16 units, and
  ``b`` continues it in the source: the thread reads one contiguous run holding all of
  ``a`` for ``k`` positions of ``b`` and writes ``k`` units to each of ``a``'s planes,
  as DALI's HWC->CHW does); and the mirror *interleave*. Extents that blocks do not
  divide leave edges, planned as separate launches.
* ``tiled`` (:func:`tiled_launch`): every other transpose. A tile goes through shared
  memory; it is the product of the source's contiguous *chain* (``a`` and the axes that
  continue it contiguously in the source) and the destination's chain (``b`` and its
  continuations), each chain grown in turn until the tile holds ``THREADS *
  ITEMS[unit]`` units, so both sides read and write runs of similar length in bytes. A
  short axis is taken whole and its continuation chunked: a 5-element fastest axis gives
  a thin 5 x 512 tile, not a square one. Rows of a tile are addressed through a small
  table in shared memory, so any number of small axes fold into a tile; partly filled
  tiles are masked, not sent down a slow path. The shared-memory pitch is chosen by
  simulating one warp's accesses against the 32 banks.

* ``gather`` (:func:`gather_launch`): a ``tiled`` plan one of whose runs is short (see
  ``GATHER_RULES``) where walking the destination in element order still reads the
  source's sectors well: each thread takes elements in the destination's order, with
  both offsets from the element's number (torch's elementwise copy, with every load of a
  thread issued before its stores).

Every kernel walks a grid of tiles (chunks of the chunked axes, then the remaining
"batch" axes); :mod:`layoutkit.copy.gpu` sizes the grid by bytes in flight per SM.
"""

import array
import functools
from dataclasses import dataclass, field

import numpy as np

from layoutkit._errors import DtypeMismatchError
from layoutkit._kernel_calls import KernelCall
from layoutkit.layout import StridedLayout, plain_layout

__all__ = ["CopyPlan", "Launch", "check_layouts", "coalesced", "plan_copy", "planned"]

#: Largest unit of transfer in bytes (a 16-byte vector load / store).
MAX_UNIT = 16

NONE = "none"  #: nothing to copy: zero volume
MEMCPY = "memcpy"  #: one contiguous run of ``nbytes`` bytes on both sides
COPY2D = "copy2d"  #: host <-> device rows of contiguous bytes at a pitch (driver 2-d copy)
HOST = "host"  #: both sides in host memory: the ``@njit`` kernels of ``copy.cpu``
KERNEL = "kernel"  #: device kernel launches (``Launch`` objects)
STAGED = "staged"  #: host <-> device through staging buffers (``copy._transfer``)

DIRECT = "direct"
TILED = "tiled"
BLOCK = "block"
GATHER = "gather"

#: Threads per block of every device kernel.
THREADS = 256
#: Units each thread moves per tile, by unit size: 64 bytes in flight per thread for 4-16
#: byte units, 16 or 32 for the narrow units (registers).
ITEMS = {1: 16, 2: 16, 4: 16, 8: 8, 16: 4}
#: Most rows of a ``direct`` tile and of each phase of a ``tiled`` tile (entries of the
#: row tables in shared memory: 16 bytes each, 24 with 64-bit offsets). A run of ``r``
#: units needs ``THREADS * ITEMS / r`` rows to give every thread its items.
DIRECT_ROWS = 1024
TILED_ROWS = 512
#: Offsets within a tile fit in 32 bits below this span (bytes); larger tiles use 64-bit
#: offsets (the ``wide`` kernels).
NARROW_SPAN = 1 << 31
#: Axes folded into the rows of a ``direct`` or ``tiled`` tile.
ROW_AXES = 6
#: Chunked axes of a ``direct`` or ``tiled`` tile (its first grid axes; their remaining
#: extents mask a partly filled tile).
MASK_AXES = 3
#: Grid axes are padded to one of these counts (fewer kernel specialisations). An unused
#: axis costs about 14 instructions per tile (its product with both grid strides and its
#: odometer step): with 8 as the smallest size, a tile of 64 bytes per thread spent a
#: quarter of its ~240 instructions on axes of extent 1.
GRID_SIZES = (4, 6, 8, 16, 66)
#: A run along the destination's fastest axis that is contiguous on both sides and at
#: least this long (bytes) is moved by ``direct``: a warp then reads whole 32-byte sectors
#: of the source without a transpose. Shorter common runs (a transpose of 12-byte
#: records) go through a tile that folds them with the axes that differ.
RUN_DIRECT = 128
#: Thread-axis entries and mask slots of the ``block`` kernel.
BLOCK_THREAD_AXES = 6
BLOCK_SLOTS = 4
#: Largest block of units one thread of the ``block`` kernel holds in registers (bytes).
BLOCK_BYTES = 128
#: Square blocks by unit size: the vector access in bytes (8 x 8 bytes for 1-byte units,
#: 8 x 8 float16 in 16-byte vectors; on an H200 these beat 16-byte and 4-byte ones for
#: uint8, see BENCHMARKS.md).
BLOCK_VECTOR = {1: 8, 2: 16}
#: A square ``block`` needs vectors of at least this many bytes on one side (the other
#: side may move single units: odd strides); else ``tiled``.
BLOCK_NARROW = 4
#: Largest share of a copy left to the edges of ``block`` launches (else ``tiled``).
BLOCK_EDGES = 0.125
#: Lanes of a warp along the source's chain in the ``block`` kernel (8 x 16-byte vectors:
#: a 128-byte line); the other 4 lanes run along the destination's chain.
BLOCK_SOURCE_LANES = 8
#: A ``block`` launch whose blocks would leave most threads idle (the thread axes found
#: no room) is refused for ``tiled`` past this many tiles; below it the copy is small
#: and latency-bound either way.
BLOCK_IDLE_TILES = 1024
#: When a ``tiled`` or ``direct`` plan moves through ``gather`` instead (where that kernel
#: can take the problem, see :func:`gather_launch`): ``(run bytes, measure, efficiency,
#: broadcast)`` rules, the first whose run bytes exceed the tile's shorter run (``direct``:
#: its tile's run) deciding; unless ``broadcast``, only for a source that moves along every
#: axis but the last. The tile loses to ``gather`` where gather reads the source at least
#: ``efficiency`` well by the ``measure``: ``"block"``, the sectors of gather's first block
#: against the source's own order (:func:`gather_reading`: the L2 transactions a warp's
#: loads cost), or ``"window"``, the lesser of that and the share of the source sectors'
#: bytes used while gather writes its first ``GATHER_WINDOW`` bytes
#: (:func:`gather_window_efficiency`: the memory traffic, the L2 cache keeping a sector
#: between its uses); a source strided along the destination's order would fetch a sector
#: per element, where a tile reads whole runs. Measured on the H200
#: (``benchmarks/tune_copy_gpu.py``):
#:
#: - seeds 100-102: a tile of runs under 32 bytes moves them a few bytes at a time through
#:   shared memory (gather 1.4x); up to 256-byte runs gather was 1.0-1.7x faster where it
#:   reads at least 0.8 as well (14 cases) and 0.4-0.9x where it reads 0.37-0.5 (3 cases);
#: - seeds 7311-7314 (``--random-only --only "gather always" --torch --json``, 100 cases):
#:   tiles whose shorter run is 2-28 bytes ran at 0.22-1.37 TB/s; gather beat them in 7 of
#:   8 (1.09-2.8x), 6 of them with a first-block reading of 0.08-0.33 (below the 0.35 the
#:   first rule asked then) and a window efficiency of 0.18-0.5; the one loss (0.44x: a
#:   2-byte source strided 56 KB along the destination's fastest axis, whose sectors' other
#:   bytes come back 15 MB of destination later) and one small win (0.22 -> 0.35 TB/s) had
#:   a window efficiency of 0.06. Checked on seeds 8411-8413 (34 cases, the window alone):
#:   of the two tiles it sent to gather, one ran 1.59x faster, the other (1-byte units, a
#:   warp's 32 loads in 32 sectors: first-block reading 0.03, window 0.22) 0.36x, so the
#:   first block's reading bounds the window's; with that bound the rule keeps 5 of the 7
#:   wins above (dropped: the small one, and a 1.09x win whose first-block reading was
#:   0.08) and neither loss. Not yet run on a seed that it was not fitted to;
#: - seed 4242: ``direct`` tiles of 2 and 4 units along a 9-unit run (fewest tiles) ran at
#:   0.27x and 0.61x torch's elementwise copy;
#: - seeds 301-303 (``--only "no gather" "gather always" --torch --json``, 119 cases): with
#:   runs of any length, where gather reads at least 0.8 as well, it was faster in 19 of
#:   23 plans (1.05-3.4x; tiles of 8- and 16-byte units with long runs at 1.1-1.3x), the
#:   4 others at 0.78-0.97x. Sources broadcast along the destination's runs: gather 1.5x
#:   and 1.6x (seeds 302, 306); along other axes (a row read again for every row
#:   written): not measured, left to the tiles.
GATHER_RULES = ((32, "window", 0.1, True), (256, "block", 0.75, True),
                (1 << 62, "block", 0.8, False))  # fmt: skip
#: Bytes of destination over which :func:`gather_window_efficiency` counts a source sector's
#: uses (a small share of the H200's 50 MB L2, which both sides stream through; 1 and 8 MB
#: classified the fitting cases above alike).
GATHER_WINDOW = 1 << 20
#: A ``block`` plan whose vectors are narrower than 16 bytes on a side yields (to the
#: ``tiled`` rules, and so to ``gather``) where gather reads a source without broadcast
#: axes at least this well (:func:`gather_reading`). Seeds 301-303: such blocks ran at
#: 0.23-1.33x the better peer and gather at 1.02-2.08x (5 cases, one of them even); the
#: one block with 16-byte vectors on both sides in that class (CHW -> HWC, uint8) ran 1.4x
#: faster than gather.
BLOCK_YIELD = 0.9
#: Most coalesced axes of a ``gather`` launch (each costs about 8 instructions an element).
GATHER_AXES = 6
#: ``gather`` splits element numbers with unsigned 32-bit divisions: volumes below this.
GATHER_VOLUME = 1 << 31
#: Host <-> device: rows of a driver 2-d copy shorter than this (bytes) are staged instead
#: (the copy engine's per-row cost).
COPY2D_MIN_ROW = 512
#: Largest row pitch the driver's 2-d copies accept (bytes).
MAX_PITCH = 2**31 - 1

_BIG = 1 << 62  # a remaining extent that never masks anything


# ----------------------------------------------------------------------------- plans
@dataclass(frozen=True, eq=False)
class Launch:
    """One kernel launch of a device plan (see :mod:`layoutkit.copy.gpu`).

    Compared and hashed by identity (a plan's launches key the prepared launchers, once
    per copy call); :attr:`identity` holds what defines the launch.

    Attributes
    ----------
    kernel : str
        ``"direct"``, ``"tiled"`` or ``"block"``.
    key : tuple
        Compile-time parameters: the kernel specialisation.
    args : tuple
        Runtime arguments after the two addresses (ints and tuples of ints).
    dst_offset, src_offset : int
        Bytes from the plan's bases (``ptr + plan.*_offset``) to this launch's.
    tiles : int
        Number of tiles: the most blocks the launch can use.
    in_flight : int
        Bytes each block keeps loading at once (for sizing the grid).
    text : str
        What the launch does, for benchmark tables.
    """

    kernel: str
    key: tuple
    args: tuple
    dst_offset: int
    src_offset: int
    tiles: int
    in_flight: int
    text: str

    @property
    def identity(self):
        """The kernel, its specialisation, arguments and offsets: equal for equal launches."""
        return (self.kernel, self.key, self.args, self.dst_offset, self.src_offset)


@dataclass(frozen=True)
class CopyPlan:
    """How one copy is executed. Strides and offsets are in bytes.

    Attributes
    ----------
    method : str
        ``"none"``, ``"memcpy"``, ``"copy2d"``, ``"host"``, ``"kernel"`` or ``"staged"``.
    shape : tuple of int
        Coalesced extents in destination order (fastest destination axis last).
    dst_strides, src_strides : tuple of int
        Byte strides of the coalesced axes.
    dst_offset, src_offset : int
        Bytes added to each side's element-zero address (non-zero after axis flips).
    unit : int
        Bytes moved per coalesced element: 1, 2, 4, 8 or 16.
    launches : tuple of Launch
        For ``"kernel"``: the launches, the bulk first.

    Examples
    --------
    >>> from layoutkit import StridedLayout
    >>> a = StridedLayout.dense((4, 6), 4)
    >>> p = plan_copy(a, a)
    >>> p.method, p.nbytes, p.unit
    ('memcpy', 96, 16)
    >>> plan_copy(a, StridedLayout.dense((6, 4), 4).permuted((1, 0)), 0, 0, True, True).describe()
    'gather/4B 4x6'
    >>> b = StridedLayout.dense((1024, 1024), 4)
    >>> plan_copy(b, b.permuted((1, 0)), 0, 0, True, True).describe()
    'tiled/4B 64x64 runs 256/256B'
    """

    method: str
    shape: tuple
    dst_strides: tuple
    src_strides: tuple
    dst_offset: int
    src_offset: int
    unit: int
    launches: tuple = field(default=())

    @property
    def ndim(self):
        """Number of coalesced axes."""
        return len(self.shape)

    @property
    def volume(self):
        """Number of units moved."""
        n = 1
        for e in self.shape:
            n *= e
        return n

    @property
    def nbytes(self):
        """Number of bytes written to the destination."""
        return self.volume * self.unit

    def describe(self):
        """A short text: the method, the unit and each launch.

        Examples
        --------
        >>> from layoutkit import StridedLayout
        >>> a = StridedLayout.dense((4, 6), 4)
        >>> plan_copy(a, a).describe()
        'memcpy/16B'
        """
        text = f"{self.method}/{self.unit}B"
        if self.launches:
            text = " + ".join(launch.text for launch in self.launches)
        return text


# ----------------------------------------------------------------------------- coalescing
_COALESCE_PAIR = KernelCall("coalesce_pair")


def coalesced(dst_layout, src_layout):
    """The copy of ``src_layout`` into ``dst_layout`` as a problem over byte axes.

    Returns ``(shape, dst_strides, src_strides, dst_offset, src_offset)``: the element's
    bytes are the innermost axis (extent ``itemsize``, stride 1 on both sides), and
    :func:`layoutkit._kernels.coalesce_pair` has simplified the axes. The offsets are
    bytes from each side's element zero. ``src_layout`` has ``dst_layout``'s shape.

    Examples
    --------
    >>> from layoutkit import StridedLayout
    >>> dst = StridedLayout.dense((3, 4), 2)
    >>> coalesced(dst, dst)
    ((24,), (1,), (1,), 0, 0)
    >>> coalesced(dst, StridedLayout.dense((4, 3), 2).permuted((1, 0)))
    ((3, 4, 2), (8, 2, 1), (2, 6, 1), 0, 0)
    >>> coalesced(dst[::-1], dst)  # a flipped destination axis moves both bases
    ((3, 8), (8, 1), (-8, 1), -16, 16)
    """
    itemsize = dst_layout.itemsize
    n = dst_layout.ndim + 1
    pair = array.array(
        "q",
        (*dst_layout.shape, itemsize, *dst_layout._byte_strides(), 1,
         *src_layout._byte_strides(), 1),
    )  # fmt: skip
    out = array.array("q", bytes(32 * n))
    m, dst_offset, src_offset = _COALESCE_PAIR(pair, n, out, n)
    values = out.tolist()
    return (
        tuple(values[:m]),
        tuple(values[n : n + m]),
        tuple(values[2 * n : 2 * n + m]),
        dst_offset,
        src_offset,
    )


def _pow2_dividing(values, limit=MAX_UNIT):
    """Largest power of two up to ``limit`` that divides every value."""
    unit = limit
    while unit > 1 and any(v % unit for v in values):
        unit //= 2
    return unit


def _widen(shape, dst_strides, src_strides, dst_address, src_address):
    """Step 2: the unit size and the problem with the innermost byte run in units."""
    if not shape or dst_strides[-1] != 1 or src_strides[-1] != 1:
        return 1, shape, dst_strides, src_strides
    unit = _pow2_dividing(
        (shape[-1], dst_address, src_address, *dst_strides[:-1], *src_strides[:-1])
    )
    runs = shape[-1] // unit
    if runs == 1:
        return unit, shape[:-1], dst_strides[:-1], src_strides[:-1]
    return (unit, shape[:-1] + (runs,), dst_strides[:-1] + (unit,),
            src_strides[:-1] + (unit,))  # fmt: skip


# ----------------------------------------------------------------------------- planning
def plan_copy(dst_layout, src_layout, dst_ptr=0, src_ptr=0, dst_on_device=False,
              src_on_device=False):  # fmt: skip
    """Plan the copy of a view with ``src_layout`` into one with ``dst_layout``.

    Parameters
    ----------
    dst_layout, src_layout : StridedLayout
        The two layouts, of one shape and itemsize (broadcast the source first). The
        destination must be unique; the source may have zero strides.
    dst_ptr, src_ptr : int
        Addresses of element zero of each side (only their alignment is used).
    dst_on_device, src_on_device : bool
        Whether each side is device-accessible memory.

    Returns
    -------
    CopyPlan

    Examples
    --------
    A step-2 slice copied into a dense host array: one strided axis of 8-byte units.

    >>> from layoutkit import StridedLayout
    >>> p = plan_copy(StridedLayout.dense((3, 4), 8), StridedLayout.dense((3, 8), 8)[:, ::2])
    >>> p.method, p.shape, p.dst_strides, p.src_strides, p.unit
    ('host', (12,), (8,), (16,), 8)

    Raises
    ------
    TypeError
        When a layout is not a ``StridedLayout``, the itemsizes differ, or a pointer is
        not an integer.
    ValueError
        When the shapes differ, or the destination is not unique (and not empty).
    OverflowError
        When a pointer is outside ``[0, 2**64)``.
    """
    dst_layout, src_layout = check_layouts(dst_layout, src_layout)
    return planned(
        dst_layout, src_layout, _address(dst_ptr, "dst_ptr"), _address(src_ptr, "src_ptr"),
        dst_on_device, src_on_device,
    )  # fmt: skip


def check_layouts(dst_layout, src_layout):
    """Refuse two layouts no copy exists for: other types, itemsizes or shapes, or an
    aliasing destination (a copy's source is broadcast to the destination's shape first).

    Returns both as plain ``StridedLayout`` objects, read from their slots: a subclass's
    properties may lie (``shape``, ``volume``, ``is_unique``); the checks and the plan use
    the values its constructor checked.
    """
    for name, layout in (("dst_layout", dst_layout), ("src_layout", src_layout)):
        if not isinstance(layout, StridedLayout):
            raise TypeError(f"{name} must be a StridedLayout, got {type(layout).__name__}")
    dst_layout, src_layout = plain_layout(dst_layout), plain_layout(src_layout)
    if dst_layout.itemsize != src_layout.itemsize:
        raise DtypeMismatchError(
            f"dst itemsize {dst_layout.itemsize} and src itemsize {src_layout.itemsize} differ; "
            "copy does not convert"
        )
    if dst_layout.shape != src_layout.shape:
        raise ValueError(
            f"dst shape {dst_layout.shape} and src shape {src_layout.shape} differ: broadcast "
            "the source to the destination's shape first (src_layout.broadcast_to)"
        )
    if dst_layout.volume and not dst_layout.is_unique:
        raise ValueError(
            f"destination layout is non-unique (shape {dst_layout.shape}, strides "
            f"{dst_layout._strides}): a broadcast destination cannot be written"
        )
    return dst_layout, src_layout


def _address(ptr, name):
    from layoutkit.memory import _uint64

    return _uint64(name, ptr)


def planned(dst_layout, src_layout, dst_ptr, src_ptr, dst_on_device, src_on_device):
    """:func:`plan_copy` of layouts and addresses already checked (``check_layouts``)."""
    return _plan(
        dst_layout, src_layout, dst_ptr % MAX_UNIT, src_ptr % MAX_UNIT,
        bool(dst_on_device), bool(src_on_device),
    )  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _plan(dst_layout, src_layout, dst_ptr, src_ptr, dst_on_device, src_on_device):
    """:func:`plan_copy` on hashable arguments; only the pointers' alignment matters."""
    if dst_layout.volume == 0:
        return CopyPlan(NONE, (0,), (0,), (0,), 0, 0, 1)
    shape, ds, ss, dst_off, src_off = coalesced(dst_layout, src_layout)
    unit, shape, ds, ss = _widen(shape, ds, ss, dst_ptr + dst_off, src_ptr + src_off)

    def make(method, launches=()):
        return CopyPlan(method, shape, ds, ss, dst_off, src_off, unit, launches)

    if len(shape) == 0 or (len(shape) == 1 and ds[0] == unit and ss[0] == unit):
        return make(MEMCPY)
    if not dst_on_device and not src_on_device:
        return make(HOST)
    if dst_on_device != src_on_device:
        if _fits_copy2d(shape, ds, ss, unit):
            return make(COPY2D)
        return make(STAGED)
    launches = device_launches(
        shape, ds, ss, unit, (dst_ptr + dst_off) % MAX_UNIT, (src_ptr + src_off) % MAX_UNIT
    )
    return make(KERNEL, launches)


def _fits_copy2d(shape, dst_strides, src_strides, unit):
    return (
        len(shape) == 2
        and max(dst_strides[0], abs(src_strides[0])) <= MAX_PITCH
        and src_strides[0] > 0
        and dst_strides[1] == unit
        and src_strides[1] == unit
        and shape[1] * unit >= COPY2D_MIN_ROW
        and dst_strides[0] >= shape[1] * unit
        and src_strides[0] >= shape[1] * unit
    )


def device_launches(shape, ds, ss, unit, dst_address=0, src_address=0, allow_block=True):
    """The kernel launches of a device copy of the coalesced problem (see the module doc).

    ``dst_address`` and ``src_address`` are the two bases modulo 16 (alignment).

    Examples
    --------
    >>> [x.kernel for x in device_launches((1024, 1024), (4096, 4), (4, 4096), 4)]
    ['tiled']
    >>> [x.kernel for x in device_launches((3, 1024), (1024, 1), (1, 3), 1)]  # HWC -> CHW
    ['block']
    >>> [x.kernel for x in device_launches((3, 1001), (1024, 1), (1, 3), 1)]  # and an edge
    ['block', 'gather']
    """
    last = len(shape) - 1
    moving = [k for k in range(len(shape)) if ss[k] != 0]
    if ss[last] == 0:  # a source broadcast along the destination's runs: a fill
        return (_direct_or_fill(shape, ds, ss, unit, dst_address),)
    fast = min(moving, key=lambda k: (abs(ss[k]), k != last, -shape[k]))
    if fast == last and (abs(ss[last]) != unit or shape[last] * unit >= RUN_DIRECT or last == 0):
        return (_direct_or_fill(shape, ds, ss, unit, dst_address),)
    if allow_block and unit in BLOCK_VECTOR and fast != last:
        launches = block_launches(shape, ds, ss, unit, fast, dst_address, src_address)
        if launches:
            return launches
    return (tiled_launch(shape, ds, ss, unit, fast),)


def _volume(values):
    n = 1
    for v in values:
        n *= v
    return n


def _pad(values, size, fill):
    return tuple(values) + (fill,) * (size - len(values))


def _grid_size(count):
    for size in GRID_SIZES:
        if size >= count:
            return size
    raise ValueError(f"a copy kernel cannot walk {count} grid axes")


def _grid(shape, ds, ss, chunked, batch):
    """Grid axes: ``chunked`` is a list of ``(axis, tile extent)`` (the first grid axes, in
    order; ``None`` for an unused chunk slot), then the ``batch`` axes, fastest first.

    Returns ``(count, dst_step, src_step, mask_extent, mask_tile, n_tiles)`` tuples padded
    to a size of ``GRID_SIZES``.
    """
    count, dst_step, src_step, mask_extent, mask_tile = [], [], [], [], []
    for entry in chunked:
        if entry is None:
            count.append(1), dst_step.append(0), src_step.append(0)
            mask_extent.append(_BIG), mask_tile.append(0)
            continue
        axis, tile = entry
        count.append(-(-shape[axis] // tile))
        dst_step.append(tile * ds[axis])
        src_step.append(tile * ss[axis])
        mask_extent.append(shape[axis])
        mask_tile.append(tile)
    for axis in batch:
        count.append(shape[axis]), dst_step.append(ds[axis]), src_step.append(ss[axis])
    size = _grid_size(len(count))
    return (
        _pad(count, size, 1),
        _pad(dst_step, size, 0),
        _pad(src_step, size, 0),
        tuple(mask_extent),
        tuple(mask_tile),
        _volume(count),
    )


def _by_dst_order(axes):
    """Batch axes fastest first (the coalesced axes are sorted slowest first)."""
    return sorted(axes, reverse=True)


# ----------------------------------------------------------------------------- mappings
def _mappings(run, rows, items):
    """Thread mappings ``(tx, ir, kq)`` covering a ``run x rows`` tile.

    ``tx`` threads (a power of two) run along the run, ``THREADS // tx`` along the rows;
    each thread takes ``ir`` run positions of ``kq`` rows, ``ir`` 1 or ``items`` (other
    splits would add kernel specialisations for little gain). Sorted best first: the
    least run beyond the lanes, then the fewest rows per thread.
    """
    out = []
    tx = 1
    while tx <= THREADS:
        ty = THREADS // tx
        for ir in (1, items):
            kq = items // ir
            if tx * ir >= run and ty * kq >= rows and ty * kq <= TILED_ROWS:
                out.append((tx, ir, kq))
        tx *= 2
    # fewest slots beyond the run per lane row, then fewest table rows per thread
    return sorted(out, key=lambda m: (m[0] * m[1] - run if m[0] * m[1] >= run else run, m[2]))


def _span(rows, tile, strides, run_axis, run_slots):
    """Largest offset (bytes, in magnitude) within a tile that a phase computes: its rows'
    offsets plus ``run_slots`` positions along the run (lanes past the run included)."""
    span = (run_slots - 1) * abs(strides[run_axis])
    return span + sum((tile[k] - 1) * abs(strides[k]) for k in rows)


def _row_arguments(shape, strides_a, strides_b, row_axes, tile):
    """Row-table arguments: extents, first and second strides, chunked row axis last."""
    extents = [tile[k] for k in row_axes]
    return (
        _pad(extents, ROW_AXES, 1),
        _pad([strides_a[k] for k in row_axes], ROW_AXES, 0),
        _pad([strides_b[k] for k in row_axes], ROW_AXES, 0),
    )


def _order_rows(axes, strides, tile, shape):
    """Row axes, the side's fastest first (so neighbouring rows are near in memory), or
    None with more than two chunked axes (a row table masks two)."""
    if sum(tile[k] < shape[k] for k in axes) > 2:
        return None
    return sorted(axes, key=lambda k: abs(strides[k]))


def _row_masks(rows, tile, shape, chunk_axes):
    """Mask arguments of a row table: ``(inner, extent, sel)`` of its first chunked axis,
    then of its second (sel: the chunk's grid axis; ``MASK_AXES`` when there is none). A
    row ``q``'s coordinate along such an axis is ``q // inner % extent``."""
    out = []
    for position, axis in enumerate(rows):
        if tile[axis] < shape[axis]:
            inner = _volume(tile[k] for k in rows[:position])
            out.append((inner, tile[axis], chunk_axes.index(axis)))
    out += [(1, _BIG, MASK_AXES)] * (2 - len(out))
    return out[0] + out[1]


# ----------------------------------------------------------------------------- direct
def _direct_or_fill(shape, ds, ss, unit, dst_address):
    """``direct``, with wide destination units made of repeated source units where the
    source does not move along the destination's fastest axis (a broadcast)."""
    last = len(shape) - 1
    if ss[last] == 0 and ds[last] == unit and unit < MAX_UNIT:
        wide = _pow2_dividing((shape[last] * unit, dst_address, *ds[:last]))
        if wide > unit:
            wide_shape = shape[:last] + (shape[last] * unit // wide,)
            if wide_shape[last] == 1 and last > 0:
                return direct_launch(shape[:last], ds[:last], ss[:last], wide, unit)
            return direct_launch(wide_shape, ds[:last] + (wide,), ss, wide, unit)
    return direct_launch(shape, ds, ss, unit)


def _run_efficiency(lanes, run_stride, row_align, unit):
    """Bytes used of the 32-byte sectors a warp touches where ``lanes`` adjacent lanes
    move along the run (each such group one row), rows aligned to ``row_align`` bytes.

    A contiguous run (``run_stride == unit``) gives each row a segment of ``lanes *
    unit`` bytes, which starts where the rows' alignment allows (up to 31 bytes into a
    sector); a strided run gives each lane its own sector unless the stride is short.

    Examples
    --------
    >>> _run_efficiency(4, 4, 32, 4)  # 16 bytes of each row's sector
    0.5
    >>> _run_efficiency(32, 4, 32, 4), _run_efficiency(32, 4, 8, 4)
    (1.0, 0.8421052631578947)
    """
    if abs(run_stride) != unit:
        return unit / min(32, max(unit, abs(run_stride)))
    segment = lanes * unit
    return segment / max(32, segment + 32 - row_align)


def direct_launch(shape, ds, ss, unit, src_unit=0, dst_offset=0, src_offset=0):
    """A ``direct`` launch: the run is the last axis, rows the next destination axes.

    ``src_unit`` (a fill) makes each ``unit``-byte destination unit from one repeated
    ``src_unit``-byte source unit. The mapping with the most useful slots wins (short
    rows are folded together, several small axes into one tile) and so the fewest tiles,
    then the one with the widest lanes along the run and the fewest rows per thread.
    """
    items = ITEMS[unit]
    m = len(shape)
    run_axis = m - 1
    best = None
    sides = [(side[run_axis], [_pow2_dividing((v,), 32) for v in side]) for side in (ds, ss)]
    for tx in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        ty = THREADS // tx
        for ir in (1, items):
            kq = items // ir
            capacity = min(ty * kq, DIRECT_ROWS)
            run = min(shape[run_axis], tx * ir)
            rows, tile, volume = [], {}, 1
            for k in range(run_axis - 1, -1, -1):  # the next destination axes, fastest first
                take = min(shape[k], capacity // volume)
                if len(rows) == ROW_AXES or take < 2:
                    break
                rows.append(k)
                tile[k] = take
                volume *= take
                if take < shape[k]:
                    break
            # fewest tiles (a partly filled tile costs a whole one: 11 = 8 + 3 along the
            # run was two tiles where one of 11 fits), each weighed by the sectors its
            # warps touch per byte on both sides (a few lanes along the run each of many
            # rows: 4 x 4 bytes per row and warp use half of each sector)
            tiles = -(-shape[run_axis] // run) * _volume(
                -(-shape[k] // tile.get(k, 1)) for k in range(run_axis))
            sectors = sum(1 / _run_efficiency(min(tx, run), run_stride, min(
                (aligns[k] for k in rows), default=32), unit)
                for run_stride, aligns in sides)  # fmt: skip
            score = (-tiles * sectors, min(tx, 32), ir)
            if best is None or score > best[0]:
                best = (score, tx, ir, kq, run, rows, tile)
    _, tx, ir, kq, run, rows, tile = best
    # runs of 1- or 2-byte units contiguous on both sides stay: there gather's arithmetic
    # per element is the bottleneck (seed 301: a reversed uint8 run, gather 0.78x)
    narrow_runs = unit < 4 and abs(ds[run_axis]) == unit and abs(ss[run_axis]) == unit
    if not src_unit and not narrow_runs and _gather_wins(shape, ss, unit, run * unit):
        return gather_launch(shape, ds, ss, unit, dst_offset, src_offset)
    chunk_row = rows[-1] if rows and tile[rows[-1]] < shape[rows[-1]] else None
    chunk_axes = (run_axis if run < shape[run_axis] else None, chunk_row, None)
    tile[run_axis] = run
    chunked = [(axis, tile[axis]) if axis is not None else None for axis in chunk_axes]
    batch = [k for k in range(run_axis) if k not in tile]
    count, dst_step, src_step, mask_extent, mask_tile, n_tiles = _grid(
        shape, ds, ss, chunked, _by_dst_order(batch)
    )
    row_extent, row_dst, row_src = _row_arguments(shape, ds, ss, rows, tile)
    rows_count = _volume(tile[k] for k in rows)
    wide = max(_span(rows, tile, side, run_axis, tx * ir) for side in (ds, ss)) >= NARROW_SPAN
    key = (unit, src_unit, ir, kq, len(count), int(wide))
    args = (tx, run, ds[run_axis], ss[run_axis], rows_count,
            *_row_masks(rows, tile, shape, chunk_axes), row_extent, row_dst, row_src, count,
            dst_step, src_step, mask_extent, mask_tile, n_tiles)  # fmt: skip
    fill = f"<-{src_unit}B" if src_unit else ""
    text = f"direct/{unit}B{fill} {run}x{rows_count}"
    return Launch(DIRECT, key, args, dst_offset, src_offset, n_tiles,
                  THREADS * items * (src_unit or unit), text)  # fmt: skip


# ----------------------------------------------------------------------------- tiled
#: Contiguous bytes each run of a ``tiled`` tile grows to before the tile grows otherwise.
RUN_BYTES = 256
#: Shared memory of a ``tiled`` tile, in units per item of a thread (``THREADS * 5 / 4``:
#: a tile of ``THREADS * ITEMS`` units and its padding).
SHARED_UNITS = THREADS * 5 // 4


def _chain(shape, strides, first):
    """``first`` and the axes that continue it contiguously on one side, in order."""
    chain = [first]
    while True:
        prev = chain[-1]
        target = strides[prev] * shape[prev]
        nxt = [k for k in range(len(shape)) if k not in chain and strides[k] == target]
        if not nxt:
            return chain
        chain.append(nxt[0])


def _run_of(chain, tile, shape):
    """The prefix of ``chain`` contiguous within the tile: whole axes, then one more."""
    run = []
    for axis in chain:
        if tile.get(axis, 1) < 2:
            break
        run.append(axis)
        if tile[axis] < shape[axis]:
            break
    return run


class _Tile:
    """A tile being grown: extents by axis and the two runs (lists of axes)."""

    def __init__(self, shape, unit, volume_limit):
        self.shape, self.unit, self.limit = shape, unit, volume_limit
        self.extent = {}
        self.runs = ([], [])

    def volume(self):
        return _volume(self.extent.values())

    def run_bytes(self, side):
        return self.unit * _volume(self.extent[k] for k in self.runs[side])

    def fits(self):
        """Whether the volume is within the limit and what both phases' mappings cover."""
        volume = self.volume()
        items = self.limit // THREADS
        return volume <= self.limit and all(
            volume <= _capacity(_volume(self.extent[k] for k in run), items)
            for run in self.runs if run
        )

    def double(self, axis, run=None):
        """Double the tile along ``axis`` (up to its extent; added to ``run`` if new) if it
        still fits."""
        present = axis in self.extent
        have = self.extent.get(axis, 1)
        new = min(self.shape[axis], 2 * have)
        if new == have:
            return False
        self.extent[axis] = new
        joined = run is not None and axis not in run
        if joined:
            run.append(axis)
        if self.fits():
            return True
        if joined:
            run.pop()
        if present:
            self.extent[axis] = have
        else:
            del self.extent[axis]
        return False

    def grow_run(self, side, chain):
        """Grow run ``side`` one step along ``chain``: its last axis until whole, then the
        chain's next axis unless the other run holds it."""
        run = self.runs[side]
        if run and self.extent[run[-1]] < self.shape[run[-1]]:
            return self.double(run[-1])
        if run:
            position = chain.index(run[-1]) + 1
        else:  # start after the axes the other run holds
            position = 0
            while position < len(chain) and chain[position] in self.extent:
                position += 1
        if position >= len(chain) or len(self.extent) > ROW_AXES:
            return False
        axis = chain[position]
        return axis not in self.extent and self.double(axis, run)


def _tile_candidates(shape, ds, ss, unit, fast):
    """Tiles for a transpose: ``(extents, run1 axes, run2 axes, primary side)``.

    Disjoint runs are grown in turn (the shorter in bytes first) along the source's chain
    from ``fast`` and the destination's from the last axis, each to ``RUN_BYTES``; an axis
    on both chains goes to the run that takes it first (both orders are tried). Then more
    axes join (the chains' next, then any) until the tile holds ``THREADS * ITEMS[unit]``
    units; a tile still short of that also comes with its runs lengthened (see
    :func:`_lengthen_runs`). A deinterleave tile (the source's chain reaches the destination's fastest
    axis after a few short axes) and its mirror share one axis between the two runs.
    """
    last = len(shape) - 1
    limit = THREADS * ITEMS[unit]
    chains = (_chain(shape, ss, fast), _chain(shape, ds, last))
    for first in (0, 1):
        tile = _Tile(shape, unit, limit)
        while True:
            sides = sorted((first, 1 - first), key=tile.run_bytes)
            if not any(tile.run_bytes(side) < RUN_BYTES and tile.grow_run(side, chains[side])
                       for side in sides):  # fmt: skip
                break
        _fill(tile, chains, ss)
        yield dict(tile.extent), tile.runs[0], tile.runs[1], 0
        if _lengthen_runs(tile, chains):
            yield dict(tile.extent), tile.runs[0], tile.runs[1], 0
    for side in (0, 1):  # a run through a few short axes into the other side's fastest axis
        chain, target = chains[side], chains[1 - side][0]
        if target not in chain or chain.index(target) == 0:
            continue
        head = chain[: chain.index(target)]
        if _volume(shape[k] for k in head) > 16:
            continue
        tile = _Tile(shape, unit, limit)
        runs = [None, None]
        runs[side], runs[1 - side] = head + [target], [target]
        tile.runs = tuple(runs)
        tile.extent = {k: shape[k] for k in head}
        tile.extent[target] = 1
        while tile.double(target):
            pass
        if tile.extent[target] < 2:
            continue
        _fill(tile, chains, ss)
        yield dict(tile.extent), runs[0], runs[1], side


def _capacity(run, items):
    """Most units a phase mapping covers in a tile whose run is ``run`` units long."""
    best = 0
    tx = 1
    while tx <= THREADS:
        for ir in (1, items):
            if tx * ir >= run:
                best = max(best, run * min(TILED_ROWS, THREADS // tx * (items // ir)))
        tx *= 2
    return best


def _lengthen_runs(tile, chains):
    """Grow the runs of a tile that is still short of its volume (no other axis could
    fill it: a 2-d transpose, or a short axis with nothing beside it), the shorter in
    bytes first, each until whole or the tile full. Returns whether the tile grew.

    Without this a 2-d transpose of 16-byte units kept 16 x 16 tiles: a quarter of the
    block's ``THREADS * ITEMS`` slots, every tile paying the whole block's index work.
    """
    grew = False
    while tile.volume() * 2 <= tile.limit:
        sides = sorted((0, 1), key=tile.run_bytes)
        if not any(tile.runs[side] and tile.grow_run(side, chains[side]) for side in sides):
            break
        grew = True
    return grew


def _fill(tile, chains, ss):
    """Grow a tile to its volume along axes beyond the runs (the chains' next first), no
    further than both phases' mappings cover."""
    shape = tile.shape
    rest = [k for k in range(len(shape)) if k not in tile.extent]
    following = []
    for chain in chains:
        following += [k for k in chain if k in rest and k not in following]
    following += sorted((k for k in rest if k not in following), key=lambda k: abs(ss[k]))
    for axis in following:
        if len(tile.extent) > ROW_AXES:
            return
        if axis not in tile.extent and tile.volume() * 2 > tile.limit:
            return
        while tile.double(axis):
            pass
        if tile.extent.get(axis, 1) < 2:
            tile.extent.pop(axis, None)
        elif tile.extent[axis] < shape[axis]:
            return  # one chunked axis beyond the runs at most


def _bank_degree(addresses, unit):
    """Shared-memory passes one warp access needs (1: no bank conflict).

    ``addresses`` are the byte addresses of the 32 lanes (None: an idle lane). 8- and
    16-byte accesses are served in half- and quarter-warp passes.
    """
    group = 32 * 4 // max(unit, 4)
    degree = 0
    for start in range(0, 32, group):
        words = {}
        for address in addresses[start : start + group]:
            if address is None:
                continue
            for word in range(address // 4, (address + max(unit, 4) - 1) // 4 + 1):
                words.setdefault(word % 32, set()).add(word)
        degree += max((len(w) for w in words.values()), default=0)
    return max(degree * group // 32, 1)


def _sector_efficiency(addresses, unit):
    """Bytes used of the 32-byte sectors one warp access touches (1.0: all of them)."""
    sectors, used = set(), 0
    for address in addresses:
        if address is not None:
            used += unit
            sectors.update(range(address // 32, (address + unit - 1) // 32 + 1))
    return used / (32 * len(sectors)) if sectors else 1.0


def _row_offsets(rows, tile, strides, count):
    """Offsets (by ``strides``) of the first ``count`` rows; None past the last row."""
    out = []
    total = _volume(tile[k] for k in rows)
    for q in range(count):
        offset, rest = 0, q
        for k in rows:
            offset += rest % tile[k] * strides[k]
            rest //= tile[k]
        out.append(offset if q < total else None)
    return out


def _warp_addresses(tx, run_len, run_stride, rows, tile, strides, scale):
    """Addresses (``scale`` bytes per stride unit) of the 32 lanes of a phase's first warp."""
    row_offsets = _row_offsets(rows, tile, strides, max(1, 32 // tx))
    out = []
    for lane in range(32):
        r, q = lane % tx, lane // tx
        row = row_offsets[q] if q < len(row_offsets) else None
        out.append(None if row is None or r >= run_len else (row + r * run_stride) * scale)
    return out


#: Issue cost of a ``tiled`` item taken as one of a thread's rows (``kq > 1``) relative to
#: one taken along the run: each row reads its table entries and forms its own addresses
#: (SASS of the full-tile loop, 4-byte units: about 26 and 17 instructions per row item in
#: phases 1 and 2, 6 along the run). 2, not 3-4: the sector model sees one warp
#: instruction, and a thread's run items reuse the sectors of its previous ones.
ROW_ITEM_COST = 2


def _best_mapping(run, rows, tile, side_strides, h, unit):
    """The mapping of one phase with the lowest cost, and that cost (per byte moved).

    The cost adds the sectors of the global access (by the efficiency of one warp) and the
    issue slots of all warp instructions (a row item counting ``ROW_ITEM_COST``) plus the
    shared-memory passes they take.
    """
    items = ITEMS[unit]
    run_len = _volume(tile[k] for k in run)
    rows_count = _volume(tile[k] for k in rows)
    volume_bytes = run_len * rows_count * unit
    best = None
    for tx, ir, kq in _mappings(run_len, rows_count, items):
        glob = _warp_addresses(tx, run_len, side_strides[run[0]], rows, tile, side_strides, 1)
        shared = _warp_addresses(tx, run_len, h[run[0]], rows, tile, h, unit)
        efficiency = _sector_efficiency(glob, unit)
        degree = _bank_degree(shared, unit)
        issue = (ROW_ITEM_COST if kq > 1 else 1) + degree
        cost = 1 / (32 * efficiency) + THREADS * items / 32 * issue / volume_bytes
        if best is None or cost < best[0]:
            best = (cost, (tx, ir, kq))
    return best


def tiled_launch(shape, ds, ss, unit, fast, dst_offset=0, src_offset=0):
    """A ``tiled`` launch (see the module docstring), or ``direct`` when no tile fits."""
    m = len(shape)
    best = None
    for tile, run1, run2, primary in _tile_candidates(shape, ds, ss, unit, fast):
        candidate = _tiled_layout(shape, ds, ss, unit, tile, run1, run2, primary)
        if candidate is None:
            continue
        # a partly filled tile costs a whole one: the cost per byte of the copy grows by
        # the slots of the chunked axes' last tiles (17 = 16 + 1 is twice 17)
        waste = _volume(-(-shape[k] // e) * e / shape[k] for k, e in tile.items())
        candidate = (candidate[0] * waste, *candidate[1:])
        if best is None or candidate[0] < best[0]:
            best = candidate
    if best is None:
        return direct_launch(shape, ds, ss, unit, 0, dst_offset, src_offset)
    _, tile, phases, h, shared_units, chunk_axes = best
    run_bytes = [unit * _volume(tile[k] for k in run) for run, _, _ in phases]
    if _gather_wins(shape, ss, unit, min(run_bytes)):
        return gather_launch(shape, ds, ss, unit, dst_offset, src_offset)
    batch = [k for k in range(m) if k not in tile]
    chunked = [(axis, tile[axis]) if axis is not None else None for axis in chunk_axes]
    count, dst_step, src_step, mask_extent, mask_tile, n_tiles = _grid(
        shape, ds, ss, chunked, _by_dst_order(batch)
    )
    phase_args, key_parts, wide = [], [], False
    for side_strides, (run, rows, (tx, ir, kq)) in zip((ss, ds), phases, strict=True):
        wide |= _span(rows, tile, side_strides, run[0], tx * ir) >= NARROW_SPAN
        run_len = _volume(tile[k] for k in run)
        run_sel, run_mult = MASK_AXES, 1
        if tile[run[-1]] < shape[run[-1]]:
            run_sel = chunk_axes.index(run[-1])
            run_mult = _volume(tile[k] for k in run[:-1])
        row_extent, row_global, row_shared = _row_arguments(shape, side_strides, h, rows, tile)
        phase_args += [tx, run_len, side_strides[run[0]], h[run[0]], run_mult, run_sel,
                       _volume(tile[k] for k in rows), *_row_masks(rows, tile, shape, chunk_axes),
                       row_extent, row_global, row_shared]  # fmt: skip
        key_parts += [ir, kq]
    key = (unit, *key_parts, len(count), shared_units, int(wide))
    args = (*phase_args, count, dst_step, src_step, mask_extent, mask_tile, n_tiles)
    runs = "/".join(str(size) for size in run_bytes)
    text = f"tiled/{unit}B {'x'.join(str(tile[k]) for k in sorted(tile))} runs {runs}B"
    return Launch(TILED, key, args, dst_offset, src_offset, n_tiles, THREADS * ITEMS[unit] * unit,
                  text)  # fmt: skip


# ----------------------------------------------------------------------------- gather
def divider(extent):
    """``(magic, shift)`` of the unsigned division by ``extent`` that ``gather`` uses:
    ``n // extent == ((n * magic >> 32) + n) >> shift`` for every ``0 <= n < 2**31``
    (``1 <= extent < 2**31``; ``magic < 2**32``), as torch's ``IntDivider`` does.

    Examples
    --------
    >>> magic, shift = divider(3)
    >>> [((n * magic >> 32) + n) >> shift for n in (0, 2, 3, 2**31 - 1)] == [0, 0, 1, (2**31 - 1) // 3]
    True
    """
    shift = (extent - 1).bit_length()
    return (((1 << shift) - extent) << 32) // extent + 1, shift


def gathers(shape, unit):
    """Whether ``gather`` can take a coalesced problem of extents ``shape``: element
    numbers up to the last tile's end fit its 32-bit divisions."""
    return (2 <= len(shape) <= GATHER_AXES
            and _volume(shape) + THREADS * ITEMS[unit] <= GATHER_VOLUME)  # fmt: skip


def gather_efficiency(shape, ss, unit):
    """Bytes used of the 32-byte source sectors that the first block of a ``gather``
    launch reads (its ``THREADS * ITEMS[unit]`` first elements in destination order;
    above 1 where a broadcast source reads sectors again).

    Examples
    --------
    >>> gather_efficiency((1000, 3), (12, 2), 2)  # 6-byte rows 12 bytes apart
    0.5
    >>> round(gather_efficiency((1000, 1000), (2, 2000), 2), 3)  # a transpose
    0.256
    """
    count = min(THREADS * ITEMS[unit], _volume(shape))
    number = np.arange(count, dtype=np.int64)
    offsets = np.zeros(count, dtype=np.int64)
    for extent, stride in zip(reversed(shape), reversed(ss), strict=True):
        offsets += number % extent * stride
        number //= extent
    return _sector_efficiency(offsets.tolist(), unit)


def gather_window_efficiency(shape, ss, unit, window=None):
    """Bytes used of the 32-byte source sectors that ``gather`` reads while it writes its
    first ``window`` bytes of destination (default ``GATHER_WINDOW``): a sector whose bytes
    are all used within the window is fetched from memory once, the L2 cache keeping it
    between its uses. Above 1 where a broadcast source reads sectors again.

    The window's elements are a box (the destination's fastest axes, the last one
    partly); its axes are taken by increasing source stride while each stride stays
    within the span of those before it plus a sector (their sectors may be shared), the
    rest only repeat that footprint elsewhere.

    Examples
    --------
    >>> gather_window_efficiency((1000, 3), (12, 2), 2)  # 6-byte rows 12 bytes apart
    0.5
    >>> round(gather_window_efficiency((1000, 1000), (2, 2000), 2), 2)  # rows come back
    0.99
    >>> gather_window_efficiency((1000, 10**6), (2, 2000), 2)  # rows longer than the window
    0.0625
    >>> gather_window_efficiency((1000, 1000), (2, 0), 2) > 1  # each unit read for a row
    True
    """
    count = (GATHER_WINDOW if window is None else window) // unit
    box, repeats = [], 1  # (extent, |stride|) of the window's source axes; broadcast reads
    for extent, stride in zip(reversed(shape), reversed(ss), strict=True):
        if count <= 1:
            break
        taken = min(extent, count)
        count //= taken
        if stride:
            box.append((taken, abs(stride)))
        else:
            repeats *= taken
    offsets = np.zeros(1, dtype=np.int64)
    span = unit
    for extent, stride in sorted(box, key=lambda axis: axis[1]):
        if stride > span + 32:
            break
        extent = min(extent, max(1, 4096 // len(offsets)))  # a sample of a long run
        offsets = (offsets[:, None] + np.arange(extent, dtype=np.int64) * stride).ravel()
        span += (extent - 1) * stride
    sectors = np.union1d(offsets // 32, (offsets + unit - 1) // 32)
    return len(offsets) * repeats * unit / (32 * len(sectors))


def _gather_wins(shape, ss, unit, run_bytes):
    """Whether ``gather`` takes a problem whose tile's (shorter) run is ``run_bytes`` long
    (see ``GATHER_RULES``)."""
    for below, measure, efficiency, broadcast in GATHER_RULES:
        if run_bytes < below:
            if not ((broadcast or 0 not in ss[:-1]) and gathers(shape, unit)):
                return False
            reading = gather_reading(shape, ss, unit)
            if measure == "window":
                reading = min(reading, gather_window_efficiency(shape, ss, unit))
            return reading >= efficiency
    return False


def gather_reading(shape, ss, unit):
    """How well ``gather`` reads the source: :func:`gather_efficiency` over that of the
    source's distinct elements in its own order (the axes by decreasing stride, broadcast
    axes left out), which is what any kernel's reads reach.

    Examples
    --------
    >>> gather_reading((1000, 3), (12, 2), 2)  # 6-byte rows 12 bytes apart: as read
    1.0
    >>> round(gather_reading((1000, 1000), (2, 2000), 2), 3)  # a transpose
    0.256
    """
    axes = sorted((k for k in range(len(shape)) if ss[k]), key=lambda k: -abs(ss[k]))
    own = gather_efficiency([shape[k] for k in axes], [abs(ss[k]) for k in axes], unit)
    return gather_efficiency(shape, ss, unit) / own


def gather_launch(shape, ds, ss, unit, dst_offset=0, src_offset=0):
    """A ``gather`` launch: the destination walked in element order, each thread taking
    ``ITEMS[unit]`` elements a block apart (so a warp's lanes take consecutive elements),
    each element's two offsets from the digits of its number (see :func:`divider`).

    No tile, no shared memory: the kernel for problems whose runs are short on one side
    (``tiled`` would move them through shared memory a few bytes at a time), as torch's
    elementwise copy does, with every load of a thread issued before its first store.

    Examples
    --------
    >>> gather_launch((1000, 3), (6, 2), (12, 2), 2).text  # 6-byte rows 12 bytes apart
    'gather/2B 1000x3'
    """
    items = ITEMS[unit]
    per_tile = THREADS * items
    fastest_first = list(reversed(range(len(shape))))
    dividers = [divider(shape[k]) for k in fastest_first]
    volume = _volume(shape)
    n_tiles = -(-volume // per_tile)
    args = (
        tuple(shape[k] for k in fastest_first),
        tuple(ds[k] for k in fastest_first),
        tuple(ss[k] for k in fastest_first),
        tuple(magic for magic, _ in dividers),
        tuple(shift for _, shift in dividers),
        volume,
        n_tiles,
    )
    wide = max(_span(range(len(shape)), shape, side, 0, 1) for side in (ds, ss)) >= NARROW_SPAN
    text = f"gather/{unit}B {'x'.join(map(str, shape))}"
    return Launch(GATHER, (unit, items, len(shape), int(wide)), args, dst_offset, src_offset,
                  n_tiles, per_tile * unit, text)  # fmt: skip


def _tiled_layout(shape, ds, ss, unit, tile, run1, run2, primary):
    """The shared layout and both phase mappings of a tile, or None.

    The primary side's run is stored densely, padded to a pitch; the other run's axes
    follow, then the remaining tile axes. The secondary run keeps its prefix that is
    linear in that layout. The pitch is chosen among a few paddings by the cost of the
    two phases (:func:`_best_mapping`).

    Returns ``(cost, tile, phases, h, shared_units, chunk_axes)``: ``phases`` holds
    ``(run axes, row axes, (tx, ir, kq))`` of the source and destination phases, ``h``
    the shared stride (in units) of every tile axis.
    """
    if not run1 or not run2:
        return None
    chunks = [k for k in tile if tile[k] < shape[k]]
    if len(chunks) > MASK_AXES:
        return None
    chunk_axes = _pad(chunks, MASK_AXES, None)
    runs = (run1, run2)
    dense_run, other_run = runs[primary], runs[1 - primary]
    others = [k for k in other_run if k not in dense_run]
    others += sorted(k for k in tile if k not in dense_run and k not in others)
    dense_len = _volume(tile[k] for k in dense_run)
    best = None
    for pad in (0, 1, 2, 3, 4, 8) if others else (0,):
        h, step = {}, 1
        for k in dense_run:
            h[k], step = step, step * tile[k]
        step = dense_len + pad
        for k in others:
            h[k], step = step, step * tile[k]
        linear = []
        for k in other_run:
            if linear and h[k] != h[linear[-1]] * tile[linear[-1]]:
                break
            linear.append(k)
        phase_runs = [None, None]
        phase_runs[primary], phase_runs[1 - primary] = dense_run, linear
        phases, cost = [], pad / 1024
        for run, strides in zip(phase_runs, (ss, ds), strict=True):
            rows = _order_rows([k for k in tile if k not in run], strides, tile, shape)
            if rows is None or len(rows) > ROW_AXES:
                return None
            found = _best_mapping(run, rows, tile, strides, h, unit)
            if found is None:
                break
            cost += found[0]
            phases.append((run, rows, found[1]))
        if len(phases) < 2:
            continue
        shared_units = 1 + sum((tile[k] - 1) * h[k] for k in tile)
        if shared_units > SHARED_UNITS * ITEMS[unit]:
            continue
        shared_units = SHARED_UNITS * ITEMS[unit]
        if best is None or cost < best[0]:
            best = (cost, tile, phases, h, shared_units, chunk_axes)
    return best


# ----------------------------------------------------------------------------- block
def block_launches(shape, ds, ss, unit, fast, dst_address=0, src_address=0):
    """``block`` launches (the bulk, then edges planned without blocks), or ``()`` when no
    block fits the layouts."""
    a, b = fast, len(shape) - 1
    if ss[a] != unit or ds[b] != unit:
        return ()
    block = _block_shape(shape, ds, ss, unit, a, b, dst_address, src_address)
    if block is None or (min(block[2], block[3]) < MAX_UNIT and 0 not in ss
                         and gathers(shape, unit)
                         and gather_reading(shape, ss, unit) >= BLOCK_YIELD):  # fmt: skip
        return ()
    ka, kb = block[0], block[1]
    bulk = list(shape)
    bulk[a] -= shape[a] % ka
    bulk[b] -= shape[b] % kb
    if bulk[a] * bulk[b] < (1 - BLOCK_EDGES) * shape[a] * shape[b]:
        return ()  # the edges would be too much of the copy: one tiled launch instead
    launch = _block_bulk(tuple(bulk), ds, ss, unit, a, b, block)
    if launch is None:
        return ()
    launches = [launch]
    # edges: the rest of axis a over all of b, then the rest of b over the bulk of a
    for axis, start, other, extent in ((a, bulk[a], b, shape[b]), (b, bulk[b], a, bulk[a])):
        if start == shape[axis]:
            continue
        edge = list(shape)
        edge[axis] = shape[axis] - start
        edge[other] = extent
        for part in device_launches(tuple(edge), ds, ss, unit, allow_block=False):
            launches.append(_shifted(part, start * ds[axis], start * ss[axis]))
    return tuple(launches)


def _shifted(launch, dst_offset, src_offset):
    return Launch(launch.kernel, launch.key, launch.args, launch.dst_offset + dst_offset,
                  launch.src_offset + src_offset, launch.tiles, launch.in_flight,
                  launch.text)  # fmt: skip


def _block_shape(shape, ds, ss, unit, a, b, dst_address, src_address):
    """``(ka, kb, vs, vd, src_step, dst_step, ns, nd)`` of a thread's block, or None.

    The block is ``ka`` units along ``a`` times ``kb`` along ``b``; the thread loads it
    as rows of ``ns`` adjacent vectors of ``vs`` bytes, rows ``src_step`` bytes apart,
    and stores it as rows of ``nd`` vectors of ``vd`` bytes ``dst_step`` apart. Every
    vector must be aligned: its size divides the base address and every stride of its
    side that moves between vectors.
    """
    others = [k for k in range(len(shape)) if k not in (a, b)]
    src_align = (src_address, *(ss[k] for k in others))
    dst_align = (dst_address, *(ds[k] for k in others))
    if shape[a] <= 16 and ss[b] == shape[a] * unit:  # deinterleave: one source run
        ka = shape[a]
        for vd in (16, 8, 4):
            kb = vd // unit
            if ka * vd <= BLOCK_BYTES and shape[b] >= kb and vd <= _pow2_dividing((*dst_align, ds[a])):
                vs = _pow2_dividing((ka * vd, *src_align))
                return ka, kb, vs, vd, vs, ds[a], 1, 1
        return None
    if shape[b] <= 16 and ds[a] == shape[b] * unit:  # interleave: one destination run
        kb = shape[b]
        for vs in (16, 8, 4):
            ka = vs // unit
            if kb * vs <= BLOCK_BYTES and shape[a] >= ka and vs <= _pow2_dividing((*src_align, ss[b])):
                vd = _pow2_dividing((kb * vs, *dst_align))
                return ka, kb, vs, vd, ss[b], vd, 1, 1
        return None
    vector = BLOCK_VECTOR[unit]
    k = vector // unit
    if shape[a] < k or shape[b] < k:
        return None
    # each row of the square in vectors as wide as its side's alignment allows: a side
    # with odd strides moves single units, the other still whole vectors
    vs = min(vector, _pow2_dividing((*src_align, ss[b])))
    vd = min(vector, _pow2_dividing((*dst_align, ds[a])))
    if max(vs, vd) < BLOCK_NARROW:
        return None
    return k, k, vs, vd, ss[b], ds[a], vector // vs, vector // vd


def _block_bulk(shape, ds, ss, unit, a, b, block):
    """The ``block`` launch over a bulk whose extents along ``a`` and ``b`` the block
    divides, or None.

    Threads are spread over the axes in mixed radix: lanes first along the direction in
    which neighbouring blocks are contiguous in the source (``BLOCK_SOURCE_LANES`` of
    them), then in the destination; warps next along the side whose runs in the tile are
    shorter, then over any axis with room left. A deinterleave (or interleave) block
    already holds a run of both sides, so its lanes all run along ``b`` (``a``).
    """
    ka, kb, vs, vd, src_step, dst_step, ns, nd = block
    m = len(shape)
    units = {k: 1 for k in range(m)}
    units[a], units[b] = ka, kb
    capacity = {k: shape[k] // units[k] for k in range(m)}
    used = {k: 1 for k in range(m)}
    entries = []  # (axis, count, units per digit)

    def assign(chain, threads):
        for axis in chain:
            if threads == 1:
                break
            take = 1
            while take * 2 <= min(capacity[axis] // used[axis], threads):
                take *= 2
            new_axis = axis not in (a, b) and used[axis] == 1
            slots = 2 + len({e[0] for e in entries if e[0] not in (a, b)})
            if take > 1 and not (new_axis and slots >= BLOCK_SLOTS):
                if len(entries) == BLOCK_THREAD_AXES:
                    break
                entries.append((axis, take, units[axis] * used[axis]))
                used[axis] *= take
                threads //= take
            if used[axis] < capacity[axis]:
                break
        return threads

    if ka == shape[a] and ss[b] == ka * unit:  # deinterleave: runs of both sides along b
        src_dir = dst_dir = [b] + [k for k in _chain(shape, ds, b) if k not in (a, b)]
    elif kb == shape[b] and ds[a] == kb * unit:  # interleave: runs of both sides along a
        src_dir = dst_dir = [a] + [k for k in _chain(shape, ss, a) if k not in (a, b)]
    else:
        src_dir = [k for k in _chain(shape, ss, a) if k != b]
        dst_dir = [k for k in _chain(shape, ds, b) if k != a]
    if src_dir == dst_dir:
        left = assign(src_dir, 32)
    else:
        left = assign(src_dir, BLOCK_SOURCE_LANES)
        left = assign(dst_dir, 32 // BLOCK_SOURCE_LANES * left)
    threads = THREADS // 32 * left
    while threads > 1:
        src_bytes = unit * _volume(units[k] * used[k] for k in _run_of(src_dir, {
            k: units[k] * used[k] for k in range(m)}, shape))
        dst_bytes = unit * _volume(units[k] * used[k] for k in _run_of(dst_dir, {
            k: units[k] * used[k] for k in range(m)}, shape))
        first, second = (dst_dir, src_dir) if dst_bytes <= src_bytes else (src_dir, dst_dir)
        before = threads
        threads = assign(first, threads)
        if threads == before:
            threads = assign(second, threads)
        if threads == before:  # any axis with room, nearest in memory first
            rest = sorted((k for k in range(m) if used[k] < capacity[k]),
                          key=lambda k: min(abs(ss[k]), abs(ds[k])))  # fmt: skip
            for axis in rest:
                threads = assign([axis], threads)
        if threads == before:
            break
    slots = [a, b] + sorted({e[0] for e in entries} - {a, b})
    tile = {k: units[k] * used[k] for k in slots}
    padded_slots = _pad(slots, BLOCK_SLOTS, -1)
    coord = []
    for axis, _, step in entries:
        coord += [step if slot == axis else 0 for slot in padded_slots]
    coord += [0] * (BLOCK_SLOTS * (BLOCK_THREAD_AXES - len(entries)))
    chunked = [(k, tile[k]) for k in slots] + [None] * (BLOCK_SLOTS - len(slots))
    batch = [k for k in range(m) if k not in slots]
    count, dst_grid, src_grid, mask_extent, mask_tile, n_tiles = _grid(
        shape, ds, ss, chunked, _by_dst_order(batch)
    )
    if _volume(e[1] for e in entries) * 2 < THREADS and n_tiles > BLOCK_IDLE_TILES:
        return None  # most threads of many blocks would idle: a tiled launch instead
    counts = _pad([e[1] for e in entries], BLOCK_THREAD_AXES, 1)
    dst_thread = _pad([e[2] * ds[e[0]] for e in entries], BLOCK_THREAD_AXES, 0)
    src_thread = _pad([e[2] * ss[e[0]] for e in entries], BLOCK_THREAD_AXES, 0)
    key = (unit, ka, kb, vs, vd, len(count), ns, nd)
    args = (counts, dst_thread, src_thread, tuple(coord), src_step, dst_step, count, dst_grid,
            src_grid, mask_extent, mask_tile, n_tiles)  # fmt: skip
    text = f"block/{unit}B {ka}x{kb} v{vs}/{vd} tile {'x'.join(str(tile[k]) for k in slots)}"
    return Launch(BLOCK, key, args, 0, 0, n_tiles, THREADS * ka * kb * unit, text)
