"""Integer kernels of the layout algebra, compiled with Numba.

Every function here is ``@njit(cache=True)`` over int64 values and allocates nothing, so
the same code compiles for the CPU (called from :mod:`layoutkit.layout`, from users'
``@njit`` code) and for CUDA devices (inside ``@cuda.jit`` kernels).

Conventions
-----------
* ``lay`` is an int64 buffer holding ``shape`` in ``lay[0:n]`` and ``strides`` (in
  elements) in ``lay[n:2n]``; ``n`` is the number of dimensions.
* Outputs are written to ``out`` buffers the caller provides, in the same
  ``shape | strides`` arrangement with room for ``cap`` dimensions
  (``out[0:cap]`` shape, ``out[cap:2*cap]`` strides).
* Inputs have been validated by the caller: kernels do not bounds-check and never raise.
  Kernels that can fail return a status code; 0 means success.
* Overflow is checked explicitly (Numba integers wrap silently).
"""

from numba import njit

INT64_MAX = 9223372036854775807
INT64_MIN = -9223372036854775808

# status codes returned by kernels (translated to exceptions by layoutkit.layout)
OK = 0
OVERFLOW_VOLUME = 1
OVERFLOW_OFFSET = 2
OVERFLOW_BYTES = 3
INCOMPATIBLE = 4

# bits of the ``flags`` word computed by analyze()
FLAG_C = 1
FLAG_F = 2
FLAG_ANY = 4
FLAG_UNIQUE = 8

# layout of the ``info`` buffer filled by analyze()
INFO_VOLUME = 0
INFO_MIN = 1
INFO_MAX = 2
INFO_FLAGS = 3
INFO_MASK = 4
INFO_ORDER = 5  # stride order occupies info[5:5+n]


@njit(cache=True)
def mul_fits(a, b):
    """Whether ``a * b`` fits in int64."""
    if a == 0 or b == 0:
        return True
    if a > 0:
        if b > 0:
            return a <= INT64_MAX // b
        return b >= INT64_MIN // a
    if b > 0:
        return a >= INT64_MIN // b
    return a >= INT64_MAX // b


@njit(cache=True)
def add_fits(a, b):
    """Whether ``a + b`` fits in int64."""
    if b > 0:
        return a <= INT64_MAX - b
    return a >= INT64_MIN - b


@njit(cache=True)
def volume_of(shape, n):
    """Product of ``shape[0:n]``, 0 if any extent is 0, -1 if it overflows int64."""
    for i in range(n):
        if shape[i] == 0:
            return 0
    v = 1
    for i in range(n):
        if not mul_fits(v, shape[i]):
            return -1
        v *= shape[i]
    return v


@njit(cache=True, forceinline=True)
def _precedes(lay, n, a, b):
    """Whether axis ``a`` comes before axis ``b`` in stride order (slowest first).

    Larger ``abs(stride)`` first, then larger extent, then lower axis index; written
    without branches (it runs n**2 times in the unsorted flag tests below).
    """
    sa = abs(lay[n + a])
    sb = abs(lay[n + b])
    ea = lay[a]
    eb = lay[b]
    return (sa > sb) | ((sa == sb) & ((ea > eb) | ((ea == eb) & (a < b))))


@njit(cache=True)
def stride_order(lay, n, out, base):
    """Write the stride order of the axes into ``out[base:base+n]``.

    Axes are sorted by decreasing ``abs(stride)``, ties by decreasing extent, then by
    increasing axis index (the reference's rule). Insertion sort: n <= 64.
    """
    for i in range(n):
        j = i
        while j > 0 and _precedes(lay, n, i, out[base + j - 1]):
            out[base + j] = out[base + j - 1]
            j -= 1
        out[base + j] = i


@njit(cache=True)
def can_merge(group_extent, group_stride, extent, stride):
    """Whether an axis ``(extent, stride)`` continues a C-order group of axes.

    Extent-1 axes never block a merge, on either side (as NumPy's reshape).
    """
    if group_extent == 1 or extent == 1:
        return True
    if not mul_fits(stride, extent):
        return False
    return group_stride == stride * extent


@njit(cache=True)
def merge_mask(lay, n):
    """Bit ``j`` (1 <= j < n) is set when axis ``j`` merges into the group ending at ``j-1``."""
    mask = 0
    if n == 0:
        return mask
    ge = lay[0]
    gs = lay[n]
    for j in range(1, n):
        e = lay[j]
        s = lay[n + j]
        if can_merge(ge, gs, e, s):
            mask |= 1 << j
            if e != 1:
                gs = s
            ge = ge * e if ge != 0 and e != 0 else 0
        else:
            ge = e
            gs = s
    return mask


@njit(cache=True)
def is_contiguous_along(lay, n, order, base):
    """C-contiguity along the axis order ``order[base:base+n]`` (slowest first)."""
    expected = 1
    for k in range(n - 1, -1, -1):
        ax = order[base + k]
        e = lay[ax]
        if e == 1:
            continue
        if lay[n + ax] != expected:
            return False
        expected *= e
    return True


@njit(cache=True)
def _is_contiguous_in_index_order(lay, n, fortran):
    """Contiguity with the last axis fastest (C) or the first axis fastest (Fortran)."""
    expected = 1
    for k in range(n):
        ax = k if fortran else n - 1 - k
        e = lay[ax]
        if e == 1:
            continue
        if lay[n + ax] != expected:
            return False
        expected *= e
    return True


@njit(cache=True)
def is_contiguous_c(lay, n):
    """C-contiguity: the last axis fastest; extent-1 axes may have any stride."""
    return _is_contiguous_in_index_order(lay, n, False)


@njit(cache=True)
def is_contiguous_f(lay, n):
    """Fortran contiguity: the first axis fastest; extent-1 axes may have any stride."""
    return _is_contiguous_in_index_order(lay, n, True)


@njit(cache=True)
def is_unique_nested(lay, n, order, base):
    """Whether no two indices share an offset (sufficient test; see StridedLayout.is_unique).

    Walking from the fastest axis, each axis must step over everything the faster axes
    reach. This is exact for layouts whose sorted strides nest (every layout built from a
    dense one by slicing, permuting, reshaping and repacking) and conservative (may say
    False) for interleaved layouts such as shape (2, 3), strides (3, 2); the caller
    settles those exactly by enumeration when the volume is small.
    """
    reach = 0
    for k in range(n - 1, -1, -1):
        ax = order[base + k]
        e = lay[ax]
        if e == 1:
            continue
        s = abs(lay[n + ax])
        if s <= reach:
            return False
        reach += s * (e - 1)
    return True


@njit(cache=True, forceinline=True)
def is_contiguous_unsorted(lay, n):
    """``is_contiguous_along`` over the stride order, without computing the order.

    Each axis of extent above 1 must have as stride the product of the extents of the
    axes after it in stride order. n**2 branch-free comparisons: for compiled code with
    a few dimensions, where it straight-lines; the same answer as sorting first.
    """
    ok = True
    for a in range(n):
        expected = 1
        for b in range(n):
            faster = (b != a) & (lay[b] != 1) & _precedes(lay, n, a, b)
            expected *= lay[b] if faster else 1
        ok &= (lay[a] == 1) | (lay[n + a] == expected)
    return ok


@njit(cache=True, forceinline=True)
def is_unique_unsorted(lay, n):
    """``is_unique_nested`` over the stride order, without computing the order.

    Each axis of extent above 1 must step over everything the axes after it in stride
    order reach (see ``is_contiguous_unsorted`` for when to use it).
    """
    ok = True
    for a in range(n):
        reach = 0
        for b in range(n):
            faster = (b != a) & (lay[b] != 1) & _precedes(lay, n, a, b)
            reach += abs(lay[n + b]) * (lay[b] - 1) if faster else 0
        ok &= (lay[a] == 1) | (abs(lay[n + a]) > reach)
    return ok


@njit(cache=True)
def analyze(lay, n, itemsize, offset, info):
    """Fill ``info`` with every derived property and check that all numbers fit in int64.

    ``info`` receives volume, min offset, max offset, flags, merge mask and the stride
    order (see the ``INFO_*`` constants). Returns a status code: ``OVERFLOW_VOLUME``,
    ``OVERFLOW_OFFSET`` (element offsets) or ``OVERFLOW_BYTES`` (byte strides or byte
    offsets) when a number does not fit; nothing overflows for a zero volume.
    """
    vol = volume_of(lay, n)
    if vol < 0:
        return OVERFLOW_VOLUME
    info[INFO_VOLUME] = vol
    stride_order(lay, n, info, INFO_ORDER)
    if vol == 0:
        info[INFO_MIN] = 0
        info[INFO_MAX] = -1
        info[INFO_FLAGS] = FLAG_C | FLAG_F | FLAG_ANY | FLAG_UNIQUE
        info[INFO_MASK] = merge_mask(lay, n)
        return OK
    lo = offset
    hi = offset
    for i in range(n):
        s = lay[n + i]
        if not mul_fits(s, itemsize):
            return OVERFLOW_BYTES
        if not mul_fits(s, lay[i] - 1):
            return OVERFLOW_OFFSET
        span = s * (lay[i] - 1)
        if span < 0:
            if not add_fits(lo, span):
                return OVERFLOW_OFFSET
            lo += span
        else:
            if not add_fits(hi, span):
                return OVERFLOW_OFFSET
            hi += span
    # the end of the last element, (hi + 1) * itemsize, is the required size in bytes
    if not mul_fits(lo, itemsize) or not add_fits(hi, 1) or not mul_fits(hi + 1, itemsize):
        return OVERFLOW_BYTES
    info[INFO_MIN] = lo
    info[INFO_MAX] = hi
    flags = 0
    if is_contiguous_c(lay, n):
        flags |= FLAG_C
    if is_contiguous_f(lay, n):
        flags |= FLAG_F
    if is_contiguous_along(lay, n, info, INFO_ORDER):
        flags |= FLAG_ANY
    if is_unique_nested(lay, n, info, INFO_ORDER):
        flags |= FLAG_UNIQUE
    info[INFO_FLAGS] = flags
    info[INFO_MASK] = merge_mask(lay, n)
    return OK


@njit(cache=True)
def offsets_are_distinct(lay, n, offset, volume, scratch):
    """Exact uniqueness test by enumeration (CPU only: it sorts ``scratch`` with NumPy).

    ``scratch`` is an int64 NumPy array of ``volume`` slots.
    """
    c_offsets(lay, n, offset, scratch)
    scratch.sort()
    return not (scratch[1:] == scratch[:-1]).any()


@njit(cache=True)
def c_offsets(lay, n, offset, out):
    """Write the element offset of every index, in C (row-major) index order, to ``out``."""
    vol = volume_of(lay, n)
    for lin in range(vol):
        rem = lin
        cur = offset
        for ax in range(n - 1, -1, -1):
            e = lay[ax]
            cur += (rem % e) * lay[n + ax]
            rem //= e
        out[lin] = cur


@njit(cache=True)
def offset_of(lay, n, offset, index):
    """Element offset of the multi-index ``index[0:n]``."""
    off = offset
    for i in range(n):
        off += index[i] * lay[n + i]
    return off


@njit(cache=True)
def dense_strides(shape, n, order, out, base):
    """Dense strides for ``shape`` with axes ``order`` (slowest first) into ``out[base:]``.

    A zero volume gives all-zero strides. Otherwise the running product never exceeds
    the volume, which the caller has checked fits in int64.
    """
    for i in range(n):
        if shape[i] == 0:
            for j in range(n):
                out[base + j] = 0
            return
    running = 1
    for k in range(n - 1, -1, -1):
        ax = order[k]
        out[base + ax] = running
        running *= shape[ax]


@njit(cache=True)
def flatten(lay, n, mask, out, cap):
    """Merge runs of axes allowed by ``mask`` (bit j: axis j may join axis j-1).

    Writes the merged layout to ``out`` and returns its number of dimensions. A 0-d
    layout flattens to shape (1,), strides (1,).
    """
    if n == 0:
        out[0] = 1
        out[cap] = 1
        return 1
    m = 0
    ge = lay[0]
    gs = lay[n]
    for j in range(1, n):
        e = lay[j]
        s = lay[n + j]
        if (mask >> j) & 1 and can_merge(ge, gs, e, s):
            if e != 1:
                gs = s
            ge = ge * e if ge != 0 and e != 0 else 0
        else:
            out[m] = ge
            out[cap + m] = gs
            m += 1
            ge = e
            gs = s
    out[m] = ge
    out[cap + m] = gs
    return m + 1


@njit(cache=True)
def reshape(lay, n, new_shape, m, out, cap):
    """Strides for viewing a non-empty layout with ``new_shape[0:m]`` (same volume).

    NumPy's no-copy reshape: extent-1 axes are dropped, the remaining old axes and the new
    axes are matched in groups of equal volume; each old group must be C-contiguous. New
    extent-1 axes take the running stride of their group. Returns ``INCOMPATIBLE`` when a
    group is not contiguous. ``out[0:cap]`` receives the new shape, ``out[cap:2*cap]`` the
    strides; ``out[2*cap:2*cap+2*n]`` is scratch space for the old non-unit axes.
    """
    scratch = 2 * cap
    k = 0
    for i in range(n):
        if lay[i] != 1:
            out[scratch + k] = lay[i]
            out[scratch + n + k] = lay[n + i]
            k += 1
    for i in range(m):
        out[i] = new_shape[i]
    oi = 0
    oj = 1
    ni = 0
    nj = 1
    while ni < m and oi < k:
        np_ = new_shape[ni]
        op = out[scratch + oi]
        while np_ != op:
            if np_ < op:
                np_ *= new_shape[nj]
                nj += 1
            else:
                op *= out[scratch + oj]
                oj += 1
        for ok in range(oi, oj - 1):
            nxt_e = out[scratch + ok + 1]
            nxt_s = out[scratch + n + ok + 1]
            if not mul_fits(nxt_e, nxt_s) or out[scratch + n + ok] != nxt_e * nxt_s:
                return INCOMPATIBLE
        out[cap + nj - 1] = out[scratch + n + oj - 1]
        for nk in range(nj - 1, ni, -1):
            out[cap + nk - 1] = out[cap + nk] * new_shape[nk]
        ni = nj
        nj += 1
        oi = oj
        oj += 1
    last = out[cap + ni - 1] if ni >= 1 else 1
    for nk in range(ni, m):
        out[cap + nk] = last
    return OK


@njit(cache=True)
def broadcast(lay, n, new_shape, m, out, cap):
    """Broadcast to ``new_shape[0:m]`` (m >= n), aligning axes from the right.

    Returns 0 on success, or ``-(axis + 1)`` for the first new axis that an old extent
    cannot broadcast to.
    """
    lead = m - n
    for i in range(m):
        out[i] = new_shape[i]
        if i < lead:
            out[cap + i] = 0
            continue
        e = lay[i - lead]
        if e == new_shape[i]:
            out[cap + i] = lay[n + i - lead]
        elif e == 1:
            out[cap + i] = 0
        else:
            return -(i + 1)
    return OK


@njit(cache=True)
def slice_axis(extent, start, stop, step, has_start, has_stop):
    """Python's ``slice(start, stop, step).indices(extent)``: returns (start, length)."""
    if step > 0:
        lower = 0
        upper = extent
    else:
        lower = -1
        upper = extent - 1
    if not has_start:
        s = upper if step < 0 else lower
    else:
        s = start
        if s < 0:
            s += extent
            if s < lower:
                s = lower
        elif s > upper:
            s = upper
    if not has_stop:
        t = lower if step < 0 else upper
    else:
        t = stop
        if t < 0:
            t += extent
            if t < lower:
                t = lower
        elif t > upper:
            t = upper
    # (t - s - 1) // step + 1 cannot overflow, even for a step near the int64 limits
    if step == 1 or step == -1:  # the common steps need no division
        length = (t - s) * step
        return s, length if length > 0 else 0
    if step > 0:
        length = (t - s - 1) // step + 1 if t > s else 0
    else:
        length = (s - t - 1) // (-step) + 1 if s > t else 0
    return s, length


# kinds of index items for apply_index (4 int64 per item: kind, a, b, c)
ITEM_INT = 0
ITEM_SLICE = 1  # a = start, b = stop, c = step; bit flags in the kind word say which given
ITEM_NEWAXIS = 2
ITEM_HAS_START = 8
ITEM_HAS_STOP = 16


@njit(cache=True)
def step_offset(offset, index, stride):
    """``offset + index * stride`` with an overflow check: returns (status, offset)."""
    if not mul_fits(index, stride) or not add_fits(offset, index * stride):
        return OVERFLOW_OFFSET, offset
    return OK, offset + index * stride


@njit(cache=True)
def slice_one(offset, extent, stride, start, stop, step, has_start, has_stop):
    """Slice one axis: returns (status, offset, extent, stride) of the result.

    ``offset`` grows by the start's offset when the slice is not empty. The status is
    ``OVERFLOW_OFFSET`` when that or ``stride * step`` (for an extent above 1) overflows.
    """
    first, length = slice_axis(extent, start, stop, step, has_start, has_stop)
    if length > 0:
        status, offset = step_offset(offset, first, stride)
        if status:
            return status, offset, 0, 0
    if mul_fits(stride, step):
        return OK, offset, length, stride * step
    if length > 1:
        return OVERFLOW_OFFSET, offset, 0, 0
    return OK, offset, length, stride  # the stride of an extent-1 axis is never used


@njit(cache=True)
def apply_index(lay, n, offset, items, k, out, cap):
    """Apply ``k`` basic-index items (ints, slices, new axes; Ellipsis already expanded).

    ``items[4*i:4*i+4]`` is (kind, a, b, c). Integer indices were range-checked by the
    caller. Writes the result layout to ``out`` and returns (status, ndim, offset); the
    status is ``OVERFLOW_OFFSET`` when a stride times a step or the offset overflows.
    """
    m = 0
    ax = 0
    off = offset
    for i in range(k):
        kind = items[4 * i]
        base = kind & 7
        if base == ITEM_NEWAXIS:
            out[m] = 1
            out[cap + m] = 0  # NumPy's stride for a new axis
            m += 1
            continue
        e = lay[ax]
        s = lay[n + ax]
        ax += 1
        if base == ITEM_INT:
            idx = items[4 * i + 1]
            status, off = step_offset(off, idx + e if idx < 0 else idx, s)
            if status:
                return status, 0, 0
            continue
        status, off, length, stride = slice_one(
            off, e, s, items[4 * i + 1], items[4 * i + 2], items[4 * i + 3],
            (kind & ITEM_HAS_START) != 0, (kind & ITEM_HAS_STOP) != 0,
        )
        if status:
            return status, 0, 0
        out[m] = length
        out[cap + m] = stride
        m += 1
    for j in range(ax, n):
        out[m] = lay[j]
        out[cap + m] = lay[n + j]
        m += 1
    return OK, m, off


@njit(cache=True)
def repack(lay, n, offset, itemsize, new_itemsize, axis, out, cap):
    """Reinterpret elements of ``itemsize`` bytes as elements of ``new_itemsize`` bytes.

    The stride along ``axis`` must be 1 (unless the volume is 0 or the extent 1). Packing (larger items)
    needs ``new_itemsize % itemsize == 0`` and the extent along ``axis``, the offset and
    every other stride (of an extent above 1) divisible by the ratio; unpacking needs ``itemsize % new_itemsize
    == 0``. Returns (status, new offset); the status is ``INCOMPATIBLE`` with a reason
    code in the offset slot: 1 stride not 1, 2 extent, 3 offset, 4 another stride
    (its axis in ``out[0]``).
    """
    vol = volume_of(lay, n)
    for i in range(n):
        out[i] = lay[i]
        out[cap + i] = lay[n + i]
    if vol != 0 and lay[axis] != 1 and lay[n + axis] != 1:
        return INCOMPATIBLE, 1
    if vol != 0:
        out[cap + axis] = 1  # an extent-1 axis may have had any stride
    if new_itemsize > itemsize:
        k = new_itemsize // itemsize
        if lay[axis] % k != 0:
            return INCOMPATIBLE, 2
        out[axis] = lay[axis] // k
        if vol == 0:
            return OK, 0
        if offset % k != 0:
            return INCOMPATIBLE, 3
        for i in range(n):
            if i == axis:
                continue
            if lay[n + i] % k != 0 and lay[i] != 1:
                out[0] = i
                return INCOMPATIBLE, 4
            out[cap + i] = lay[n + i] // k  # extent-1 axes: any stride will do
        return OK, offset // k
    k = itemsize // new_itemsize
    out[axis] = lay[axis] * k
    if vol == 0:
        return OK, 0
    for i in range(n):
        if i != axis:
            out[cap + i] = lay[n + i] * k
    return OK, offset * k


@njit(cache=True)
def _gcd(a, b):
    a = abs(a)
    b = abs(b)
    while b:
        a, b = b, a % b
    return a


@njit(cache=True)
def max_compatible_itemsize(lay, n, offset, itemsize, max_itemsize, ptr_residue, axis):
    """Largest multiple of ``itemsize`` that divides every byte quantity ``repack`` needs.

    ``ptr_residue`` is ``data_ptr % max_itemsize``. The result divides ``max_itemsize``,
    the data pointer, the byte offset, the byte extent along ``axis`` and every other byte
    stride, so ``repack`` accepts it; it is ``itemsize`` when nothing larger fits.
    Like ``repack``, it ignores the stride along ``axis`` for a zero volume or extent 1.
    """
    if volume_of(lay, n) != 0 and lay[axis] != 1 and lay[n + axis] != 1:
        return itemsize
    g = _gcd(max_itemsize, ptr_residue)  # > 0: max_itemsize > 0
    g = _gcd(g, offset % g * itemsize % g)
    g = _gcd(g, lay[axis] % g * itemsize % g)
    for i in range(n):
        if i != axis and lay[i] != 1:
            g = _gcd(g, abs(lay[n + i]) % g * itemsize % g)
    if g > itemsize and g % itemsize == 0:
        return g
    return itemsize
