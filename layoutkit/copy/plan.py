"""Copy planning: pure integer arithmetic on two layouts, no Numba and no driver.

A plan describes how to move every element of a source view into a destination view of
the same shape. It is built in four steps:

1. drop extent-1 axes, turn strides into bytes and flip every axis whose destination
   stride is negative (moving both base addresses to that axis' last element);
2. sort the axes by the destination's strides, largest first, and append the element's
   bytes as an innermost axis of stride 1 on both sides;
3. merge neighbouring axes that are contiguous on both sides;
4. widen the unit of transfer to the largest power of two (at most 16 bytes) that divides
   the innermost run of bytes, every other stride and both base addresses.

The result is a :class:`CopyPlan`: coalesced extents (destination order, fastest axis
last), byte strides and byte offsets of both sides, the unit size, and the method that
executes it. Byte address of coalesced index ``idx`` on a side is
``ptr + offset + sum(idx[k] * strides[k])``, where ``ptr`` is the address of the view's
element ``(0, ..., 0)``.
"""

import functools
from dataclasses import dataclass

__all__ = ["CopyPlan", "plan_copy", "byte_extent"]

#: Largest unit of transfer in bytes (a 16-byte vector load / store).
MAX_UNIT = 16

NONE = "none"  #: nothing to copy: zero volume
MEMCPY = "memcpy"  #: one contiguous run of ``nbytes`` bytes on both sides
COPY2D = "copy2d"  #: rows of contiguous bytes at a fixed pitch on both sides (driver 2-d copy)
ELEMENTWISE = "elementwise"  #: one unit per index, fastest destination axis innermost
TRANSPOSE = "transpose"  #: tiles through fast memory: the two sides' fastest axes differ
FILL = "fill"  #: elementwise; each source unit repeats to fill a wider destination unit
STAGE_DEVICE = "stage_device"  #: host side contiguous: move it whole, rearrange on the device
STAGE_HOST = "stage_host"  #: host side strided: pack/unpack it on the host, then transfer

#: Tile edge (in units) of the shared-memory transpose, by unit size. On an H200 64-unit
#: tiles (16 units in flight per thread) beat 32-unit ones: 16384**2 float32 3.04 TB/s
#: against 1.49, float64 3.27 against 2.70, 16-byte units 3.77 against 3.42.
TRANSPOSE_TILE = {1: 64, 2: 64, 4: 64, 8: 64, 16: 64}
#: Edge of the shared-memory tile when the groups cannot fill a ``TRANSPOSE_TILE`` one (a
#: partly filled tile takes the kernel's slow checked path: a 32**5 float32 permutation
#: whose rows span 32 units ran at 0.19 TB/s in 64-unit tiles, 0.72 in 32-unit ones).
SMALL_TILE = 32
#: Accesses (bytes, widest first) of the register-block transpose by unit size. On an
#: H200 16384**2 uint8 moved 2.21 TB/s in 8-byte blocks (0.87 in 16-byte, 0.71 in 4-byte
#: ones, 0.95 through shared memory), float16 3.03 in 16-byte and 1.98 in 8-byte blocks
#: (1.82 through shared memory). 4-byte units take blocks only where the groups cannot
#: fill a 64-unit shared tile (float32 16384**2: 2.72 in blocks, 3.04 in shared tiles).
BLOCK_VECTORS = {1: (8,), 2: (16, 8), 4: (16,)}
#: Most axes folded into one edge of a transpose tile.
MAX_GROUP = 3


@dataclass(frozen=True)
class CopyPlan:
    """How one copy is executed. All strides and offsets are in bytes.

    Attributes
    ----------
    method : str
        One of ``"none"``, ``"memcpy"``, ``"copy2d"``, ``"elementwise"``, ``"transpose"``,
        ``"fill"``, ``"stage_device"``, ``"stage_host"``.
    shape : tuple of int
        Coalesced extents in destination order (fastest destination axis last).
    dst_strides, src_strides : tuple of int
        Byte strides of the coalesced axes.
    dst_offset, src_offset : int
        Bytes added to each side's element-zero address (non-zero after axis flips).
    unit : int
        Bytes moved per coalesced element: 1, 2, 4, 8 or 16.
    row_axes : tuple of int
        For ``"transpose"``: the coalesced axes that form a tile's rows, fastest first:
        the source's fastest axis, then (while the tile is not filled) the axes that
        continue it contiguously in the source. Empty otherwise.
    col_axes : tuple of int
        For ``"transpose"``: the axes that form a tile's columns, fastest first: the last
        axis (the destination's fastest) and the axes that continue it in the
        destination. Empty otherwise.
    tile : int
        For ``"transpose"``: the tile edge in units that the row and column groups were
        folded to fill; 0 otherwise.
    vector : int
        For ``"transpose"``: bytes per access of the register-block kernel, which moves
        blocks of ``vector // unit`` squared units with vector loads and stores; 0 for the
        shared-memory tile kernel (and for every other method).
    src_unit : int
        For ``"fill"`` (a device copy whose source does not move along the destination's
        innermost axis): the source unit's size; each destination unit of ``unit`` bytes
        is that source unit repeated. 0 otherwise.

    Examples
    --------
    >>> p = plan_copy((4, 6), (6, 1), (6, 1), 4)
    >>> p.method, p.nbytes, p.unit
    ('memcpy', 96, 16)
    >>> plan_copy((4, 6), (6, 1), (1, 4), 4).method
    'transpose'
    """

    method: str
    shape: tuple
    dst_strides: tuple
    src_strides: tuple
    dst_offset: int
    src_offset: int
    unit: int
    row_axes: tuple = ()
    col_axes: tuple = ()
    tile: int = 0
    src_unit: int = 0
    vector: int = 0

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


def byte_extent(shape, strides, itemsize):
    """Byte range ``(lo, hi)`` touched by a view, relative to its element zero.

    ``hi`` is exclusive; a zero-volume view touches nothing and gives ``(0, 0)``.

    Examples
    --------
    >>> byte_extent((3, 4), (-4, 1), 2)
    (-16, 8)
    >>> byte_extent((0, 4), (4, 1), 2)
    (0, 0)
    """
    lo = hi = 0
    for extent, stride in zip(shape, strides, strict=True):
        if extent == 0:
            return 0, 0
        span = (extent - 1) * stride
        if span < 0:
            lo += span
        else:
            hi += span
    return lo * itemsize, (hi + 1) * itemsize


def _broadcast_strides(dst_shape, src_shape, src_strides):
    """Source strides broadcast to the destination shape (NumPy rules), or None."""
    nd, ns = len(dst_shape), len(src_shape)
    if ns > nd:
        return None
    out = [0] * (nd - ns)
    for d_ext, s_ext, s_str in zip(dst_shape[nd - ns :], src_shape, src_strides, strict=True):
        if s_ext == d_ext:
            out.append(s_str if s_ext != 1 else 0)
        elif s_ext == 1:
            out.append(0)
        else:
            return None
    return tuple(out)


def broadcast_source_strides(dst_shape, src_shape, src_strides):
    """Return the source strides broadcast to ``dst_shape``.

    Raises
    ------
    ValueError
        When ``src_shape`` cannot be broadcast to ``dst_shape``.

    Examples
    --------
    >>> broadcast_source_strides((2, 3), (3,), (1,))
    (0, 1)
    """
    out = _broadcast_strides(tuple(dst_shape), tuple(src_shape), tuple(src_strides))
    if out is None:
        raise ValueError(
            f"src shape {tuple(src_shape)} cannot be broadcast to dst shape {tuple(dst_shape)}"
        )
    return out


def _coalesce(shape, strides_by_side, itemsize, offsets):
    """Steps 1-3: flip, sort by the first side's strides, merge. Strides in bytes.

    Returns ``(shape, strides_by_side, offsets)`` with the element's bytes as the last axis
    (extent ``itemsize``, stride 1) merged where possible; extent-1 axes removed.
    """
    first = strides_by_side[0]
    axes = [k for k, e in enumerate(shape) if e != 1]
    offsets = list(offsets)
    strides = [[s[k] * itemsize for k in axes] for s in strides_by_side]
    extents = [shape[k] for k in axes]
    for j in range(len(axes)):
        if first[axes[j]] < 0:
            for side, s in enumerate(strides):
                offsets[side] += (extents[j] - 1) * s[j]
                s[j] = -s[j]
    order = sorted(range(len(axes)), key=lambda j: (strides[0][j], extents[j]), reverse=True)
    extents = [extents[j] for j in order] + [itemsize]
    strides = [[s[j] for j in order] + [1] for s in strides]
    merged_ext, merged_str = [extents[0]], [[s[0]] for s in strides]
    for j in range(1, len(extents)):
        if all(m[-1] == extents[j] * s[j] for m, s in zip(merged_str, strides, strict=True)):
            merged_ext[-1] *= extents[j]
            for m, s in zip(merged_str, strides, strict=True):
                m[-1] = s[j]
        else:
            merged_ext.append(extents[j])
            for m, s in zip(merged_str, strides, strict=True):
                m.append(s[j])
    keep = [j for j, e in enumerate(merged_ext) if e != 1]
    return (
        tuple(merged_ext[j] for j in keep),
        [tuple(m[j] for j in keep) for m in merged_str],
        offsets,
    )


def _widen(shape, strides_by_side, addresses):
    """Step 4: the unit size and the shape/strides with the innermost byte run in units."""
    if not shape or any(s[-1] != 1 for s in strides_by_side):
        return 1, tuple(shape), [tuple(s) for s in strides_by_side]
    unit = MAX_UNIT
    values = [shape[-1], *addresses]
    for s in strides_by_side:
        values.extend(s[:-1])
    while unit > 1 and any(v % unit for v in values):
        unit //= 2
    runs = shape[-1] // unit
    if runs == 1:
        return unit, tuple(shape[:-1]), [tuple(s[:-1]) for s in strides_by_side]
    return (
        unit,
        tuple(shape[:-1]) + (runs,),
        [tuple(s[:-1]) + (unit,) for s in strides_by_side],
    )


def _is_contiguous_run(shape, strides, unit):
    """True when the coalesced axes of one side form a single increasing unit run."""
    return len(shape) == 0 or (len(shape) == 1 and strides[0] == unit)


def _host_side_contiguous(shape, strides, itemsize):
    """True when one side alone (any axis order) covers a dense range of bytes."""
    c_shape, (c_strides,), _ = _coalesce(shape, [strides], itemsize, [0])
    return len(c_shape) <= 1 and all(s == 1 for s in c_strides)


#: Largest row pitch the driver's 2-d copies accept (bytes).
MAX_PITCH = 2**31 - 1


def _fits_copy2d(shape, dst_strides, src_strides, unit):
    return (
        len(shape) == 2
        and max(dst_strides[0], src_strides[0]) <= MAX_PITCH
        and dst_strides[1] == unit
        and src_strides[1] == unit
        and dst_strides[0] >= shape[1] * unit
        and src_strides[0] >= shape[1] * unit
    )


def _fill_unit(shape, dst_strides, dst_address, unit):
    """Widest destination unit made of repeated ``unit``-byte source units (alignment)."""
    wide = MAX_UNIT
    values = [shape[-1] * unit, dst_address, *dst_strides[:-1]]
    while wide > unit and any(v % wide for v in values):
        wide //= 2
    return wide


def _tile_groups(shape, dst_strides, src_strides, fastest, tile):
    """Axes of a transpose tile's rows (source order) and columns (destination order).

    Small extents are folded together so that a tile is filled: the columns continue the
    last axis through the destination's next axes while they are contiguous with it, the
    rows continue the source's fastest axis through the axis whose source stride equals
    the run covered so far.
    """
    last = len(shape) - 1
    cols = [last]
    run = shape[last]
    k = last - 1
    while run < tile and len(cols) < MAX_GROUP and k >= 0 and k != fastest:
        if dst_strides[k] != run * dst_strides[last]:
            break
        cols.append(k)
        run *= shape[k]
        k -= 1
    rows = [fastest]
    unit = abs(src_strides[fastest])
    run = shape[fastest]
    while run < tile and len(rows) < MAX_GROUP:
        nxt = [j for j in range(len(shape)) if j not in rows and j not in cols
               and abs(src_strides[j]) == run * unit]  # fmt: skip
        if not nxt:
            break
        rows.append(nxt[0])
        run *= shape[nxt[0]]
    return tuple(rows), tuple(cols)


def _volume(shape, axes):
    volume = 1
    for axis in axes:
        volume *= shape[axis]
    return volume


def _block_vector(shape, dst_strides, src_strides, unit, rows, cols, dst_address, src_address):
    """Widest access of a register-block transpose, or 0 when none fits (see ``vector``).

    A block of ``k x k`` units (``k = vector // unit``) is loaded as ``k`` vectors along
    the source's fastest axis (which must run forwards) and stored as ``k`` vectors along
    the destination's: ``k`` must divide the first axis of the row and of the column
    group, and the vector must divide both addresses and every other stride of its side.
    """
    for vector in BLOCK_VECTORS.get(unit, ()):
        k = vector // unit
        src_values = [src_address] + [s for j, s in enumerate(src_strides) if j != rows[0]]
        dst_values = [dst_address] + [s for j, s in enumerate(dst_strides) if j != cols[0]]
        if (
            src_strides[rows[0]] == unit
            and shape[rows[0]] % k == 0
            and shape[cols[0]] % k == 0
            and all(v % vector == 0 for v in src_values + dst_values)
        ):
            return vector
    return 0


def plan_copy(
    shape,
    dst_strides,
    src_strides,
    itemsize,
    dst_ptr=0,
    src_ptr=0,
    dst_on_device=False,
    src_on_device=False,
):
    """Plan the copy of ``src`` into ``dst``; both views have ``shape`` and ``itemsize``.

    Parameters
    ----------
    shape : sequence of int
        The destination shape (the source is already broadcast to it).
    dst_strides, src_strides : sequence of int
        Strides in elements. The destination must be unique (no two indices share an
        offset); the source may have zero strides.
    itemsize : int
        Bytes per element.
    dst_ptr, src_ptr : int
        Addresses of element zero of each side (only their alignment is used).
    dst_on_device, src_on_device : bool
        Where each side lives; when exactly one is on the device the plan is a transfer.

    Returns
    -------
    CopyPlan

    Examples
    --------
    A step-2 slice copied into a dense array: one strided axis of 8-byte units.

    >>> p = plan_copy((3, 4), (4, 1), (8, 2), 8)
    >>> p.method, p.shape, p.dst_strides, p.src_strides, p.unit
    ('elementwise', (12,), (8,), (16,), 8)

    A reversed source: the destination order is kept, the source stride is negative.

    >>> p = plan_copy((5,), (1,), (-1,), 4)
    >>> p.shape, p.src_strides, p.unit
    ((5,), (-4,), 4)
    """
    return _plan(
        tuple(shape),
        tuple(dst_strides),
        tuple(src_strides),
        itemsize,
        dst_ptr % MAX_UNIT,
        src_ptr % MAX_UNIT,
        bool(dst_on_device),
        bool(src_on_device),
    )


@functools.lru_cache(maxsize=4096)
def _plan(
    shape, dst_strides, src_strides, itemsize, dst_ptr, src_ptr, dst_on_device, src_on_device
):
    """:func:`plan_copy` on hashable arguments; only the pointers' alignment matters."""
    for e in shape:
        if e == 0:
            return CopyPlan(NONE, (0,), (0,), (0,), 0, 0, 1)
    c_shape, (c_dst, c_src), (dst_off, src_off) = _coalesce(
        shape, [dst_strides, src_strides], itemsize, [0, 0]
    )
    unit, c_shape, (c_dst, c_src) = _widen(
        c_shape, [c_dst, c_src], [dst_ptr + dst_off, src_ptr + src_off]
    )

    def make(method, row_axes=(), col_axes=(), tile=0, vector=0):
        return CopyPlan(
            method, c_shape, c_dst, c_src, dst_off, src_off, unit, row_axes, col_axes, tile,
            vector=vector,
        )  # fmt: skip

    if _is_contiguous_run(c_shape, c_dst, unit) and _is_contiguous_run(c_shape, c_src, unit):
        return make(MEMCPY)
    if dst_on_device != src_on_device:
        if _fits_copy2d(c_shape, c_dst, c_src, unit):
            return make(COPY2D)
        host_strides = src_strides if dst_on_device else dst_strides
        if _host_side_contiguous(shape, tuple(host_strides), itemsize):
            return make(STAGE_DEVICE)
        return make(STAGE_HOST)
    if len(c_shape) >= 2 and c_dst[-1] == unit and c_src[-1] != unit:
        fastest = min(range(len(c_shape)), key=lambda k: (abs(c_src[k]), -c_shape[k]))
        if abs(c_src[fastest]) == unit and fastest != len(c_shape) - 1:
            tile = TRANSPOSE_TILE[unit]
            rows, cols = _tile_groups(c_shape, c_dst, c_src, fastest, tile)
            filled = all(_volume(c_shape, group) >= tile for group in (rows, cols))
            vector = 0
            if unit in BLOCK_VECTORS and (unit < 4 or not filled):
                vector = _block_vector(
                    c_shape, c_dst, c_src, unit, rows, cols, dst_ptr + dst_off, src_ptr + src_off
                )
            if not vector and not filled:
                tile = SMALL_TILE
                rows, cols = _tile_groups(c_shape, c_dst, c_src, fastest, tile)
            return make(TRANSPOSE, rows, cols, tile, vector)
    if dst_on_device and c_shape and c_src[-1] == 0 and c_dst[-1] == unit:
        wide = _fill_unit(c_shape, c_dst, dst_ptr + dst_off, unit)
        if wide > unit:
            return CopyPlan(
                FILL,
                c_shape[:-1] + (c_shape[-1] * unit // wide,),
                c_dst[:-1] + (wide,),
                c_src,
                dst_off,
                src_off,
                wide,
                src_unit=unit,
            )
    return make(ELEMENTWISE)
