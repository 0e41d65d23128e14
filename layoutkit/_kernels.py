"""Integer kernels of the layout algebra, compiled with Numba.

Every function here is ``@njit(cache=True)`` over int64 values and allocates nothing, so
the same code compiles for the CPU (users' ``@njit`` code, the copy planner) and for
CUDA devices (inside ``@cuda.jit`` kernels). Python's :class:`layoutkit.StridedLayout`
computes the same results in plain Python (faster there than a call into compiled code);
``tests/test_layout_kernels.py`` checks that both agree on random layouts.

Conventions
-----------
* ``lay`` is an int64 buffer holding ``shape`` in ``lay[0:n]`` and ``strides`` (in
  elements) in ``lay[n:2n]``; ``n`` is the number of dimensions.
* Outputs are written to ``out`` buffers the caller provides, in the same
  ``shape | strides`` arrangement with room for ``cap`` dimensions
  (``out[0:cap]`` shape, ``out[cap:2*cap]`` strides).
* Inputs have been validated by the caller: kernels do not bounds-check and never raise.
  Kernels that can fail return a status code; 0 means success.
* Overflow is checked explicitly (Numba integers wrap silently): no kernel wraps around,
  whatever its (validated) layout holds; a result that would not fit is a status code.
"""

from numba import njit

INT64_MAX = 9223372036854775807
INT64_MIN = -9223372036854775808

ITEMSIZE_LIMIT = 2**31  # itemsizes are below this (a C int, as in the reference)

# status codes returned by kernels (compiled callers raise their exceptions)
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
    """Bit ``j`` (1 <= j < n) is set when axis ``j`` merges into the group ending at ``j-1``.

    A merged extent must fit in int64: only a zero-volume layout (all strides 0) has
    groups whose extents multiply beyond it, and those stay apart.
    """
    mask = 0
    if n == 0:
        return mask
    ge = lay[0]
    gs = lay[n]
    for j in range(1, n):
        e = lay[j]
        s = lay[n + j]
        if can_merge(ge, gs, e, s) and mul_fits(ge, e):
            mask |= 1 << j
            if e != 1:
                gs = s
            ge *= e
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
        # beyond int64 no later (int64) stride can step over the reach: saturate, never wrap
        if mul_fits(s, e - 1) and add_fits(reach, s * (e - 1)):
            reach += s * (e - 1)
        else:
            reach = INT64_MAX
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
            step = abs(lay[n + b])
            # saturate beyond int64, as is_unique_nested does: no int64 stride steps over it
            if not faster:
                span = 0
            elif mul_fits(step, lay[b] - 1):
                span = step * (lay[b] - 1)
            else:
                span = INT64_MAX
            reach = reach + span if add_fits(reach, span) else INT64_MAX
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
def reshape(lay, n, new_shape, m, out, cap):
    """Strides for viewing a non-empty layout with ``new_shape[0:m]`` (same volume).

    NumPy's no-copy reshape: extent-1 axes are dropped, the remaining old axes and the new
    axes are matched in groups of equal volume; each old group must be C-contiguous. Within
    a group each new stride is the next one times the next extent; a new extent-1 axis
    whose stride would not fit in int64 takes the next stride instead (it is never used),
    any other makes the status ``OVERFLOW_OFFSET``. Returns ``INCOMPATIBLE`` when a group
    is not contiguous, or when the volumes differ after all (the walk never reads past
    either shape). ``out[0:cap]`` receives the new shape,
    ``out[cap:2*cap]`` the strides; ``out[2*cap:2*cap+2*n]`` is scratch space for the old
    non-unit axes.
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
                if nj == m or not mul_fits(np_, new_shape[nj]):
                    return INCOMPATIBLE
                np_ *= new_shape[nj]
                nj += 1
            else:
                if oj == k or not mul_fits(op, out[scratch + oj]):
                    return INCOMPATIBLE
                op *= out[scratch + oj]
                oj += 1
        for ok in range(oi, oj - 1):
            nxt_e = out[scratch + ok + 1]
            nxt_s = out[scratch + n + ok + 1]
            if not mul_fits(nxt_e, nxt_s) or out[scratch + n + ok] != nxt_e * nxt_s:
                return INCOMPATIBLE
        running = out[scratch + n + oj - 1]
        out[cap + nj - 1] = running
        beyond = False  # the true running stride no longer fits in int64
        for nk in range(nj - 1, ni, -1):
            if not beyond and mul_fits(running, new_shape[nk]):
                running *= new_shape[nk]
                out[cap + nk - 1] = running
            elif new_shape[nk - 1] == 1:  # never used: any stride serves an extent-1 axis
                beyond = True
                out[cap + nk - 1] = out[cap + nk]
            else:
                return OVERFLOW_OFFSET
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
def repack(lay, n, offset, itemsize, new_itemsize, axis, out, cap):
    """Reinterpret elements of ``itemsize`` bytes as elements of ``new_itemsize`` bytes.

    The stride along ``axis`` must be 1 (unless the volume is 0 or the extent 1). Packing (larger items)
    needs ``new_itemsize % itemsize == 0`` and the extent along ``axis``, the offset and
    every other stride (of an extent above 1) divisible by the ratio; unpacking needs ``itemsize % new_itemsize
    == 0``. Returns (status, new offset); the status is ``INCOMPATIBLE`` with a reason
    code in the offset slot: 1 stride not 1, 2 extent, 3 offset, 4 another stride
    (its axis in ``out[0]``), or ``OVERFLOW_VOLUME`` when unpacking makes the extent or
    the volume too large for int64 (strides and offsets keep their byte values, which fit).
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
    if not mul_fits(lay[axis], k) or not mul_fits(vol, k):
        return OVERFLOW_VOLUME, 0
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
def _mulmod(a, b, m):
    """``(a * b) % m`` for ``0 <= a < m``, ``b >= 0``: by doubling, so nothing overflows."""
    r = 0
    while b:
        if b & 1:
            r = r - (m - a) if r >= m - a else r + a
        a = a - (m - a) if a >= m - a else a + a
        b >>= 1
    return r


@njit(cache=True)
def reduced_below(q, bound):
    """``q`` divided by its smallest prime factors (below 2**16) until it is <= ``bound``.

    A divisor of ``q``; the largest one for a power of two (1 if ``q`` has no small factor
    left to remove). ``StridedLayout.max_compatible_itemsize`` applies the same rule.
    """
    p = 2
    while q > bound:
        while p < 65536 and q % p != 0:
            p += 1
        if p >= 65536:
            return 1
        q //= p
    return q


@njit(cache=True)
def max_compatible_itemsize(lay, n, offset, itemsize, max_itemsize, ptr_residue, axis):
    """Largest multiple of ``itemsize`` that divides every byte quantity ``repack`` needs.

    ``ptr_residue`` is ``data_ptr % max_itemsize``. The result divides ``max_itemsize``,
    the data pointer, the byte offset, the byte extent along ``axis`` and every other byte
    stride, so ``repack`` accepts it; it is ``itemsize`` when nothing larger fits, and
    below ``ITEMSIZE_LIMIT`` (see :func:`reduced_below`). Like ``repack``, it ignores the
    stride along ``axis`` for a zero volume or extent 1. Products are taken modulo the
    running divisor, so any int64 ``max_itemsize`` works.
    """
    if volume_of(lay, n) != 0 and lay[axis] != 1 and lay[n + axis] != 1:
        return itemsize
    g = _gcd(max_itemsize, ptr_residue)  # > 0: max_itemsize > 0
    g = _gcd(g, _mulmod(offset % g, itemsize, g))
    g = _gcd(g, _mulmod(lay[axis] % g, itemsize, g))
    for i in range(n):
        if i != axis and lay[i] != 1:
            g = _gcd(g, _mulmod(abs(lay[n + i]) % g, itemsize, g))
    if g % itemsize != 0:
        return itemsize
    if g < ITEMSIZE_LIMIT:
        return g
    return itemsize * reduced_below(g // itemsize, (ITEMSIZE_LIMIT - 1) // itemsize)


# ----------------------------------------------------------------------------- two layouts
# A copy moves every element of one layout to the same index of another of the same shape.
# ``pair`` holds that shape in ``pair[0:n]``, the first layout's strides in ``pair[n:2n]``
# and the second's in ``pair[2n:3n]``.


@njit(cache=True)
def _precedes_pair(pair, n, a, b):
    """Axis order of :func:`coalesce_pair`: the first layout's stride order (the rule of
    :func:`stride_order`), with equal first strides ordered by the second's, largest first."""
    if abs(pair[n + a]) == abs(pair[n + b]):
        second_a = abs(pair[2 * n + a])
        second_b = abs(pair[2 * n + b])
        if second_a != second_b:
            return second_a > second_b
    return _precedes(pair, n, a, b)


@njit(cache=True)
def coalesce_pair(pair, n, out, cap):
    """Simplify two layouts of one shape without changing which offsets meet at an index.

    Drops extent-1 axes; flips every axis whose first stride is negative (both strides
    change sign and both base offsets move to that axis' last index); sorts the axes by
    the first layout's stride order (slowest first, ties by the second's strides); merges
    neighbouring axes that are contiguous on both sides. The pairs ``(first offset,
    second offset)`` over all indices are the same before and after, as a multiset.

    Writes the result to ``out`` (``4 * cap`` slots): shape ``out[0:cap]``, first strides
    ``out[cap:2*cap]``, second strides ``out[2*cap:3*cap]``; ``out[3*cap:4*cap]`` is
    scratch. Returns ``(ndim, first_offset, second_offset)``: the offsets are added to the
    bases of both sides. A zero volume gives shape ``(0,)`` and strides ``(0,)``; a 0-d or
    all-extent-1 layout gives ``ndim`` 0.
    """
    order = 3 * cap
    for i in range(n):
        if pair[i] == 0:
            out[0] = 0
            out[cap] = 0
            out[2 * cap] = 0
            return 1, 0, 0
    k = 0
    for i in range(n):
        if pair[i] == 1:
            continue
        j = k
        while j > 0 and _precedes_pair(pair, n, i, out[order + j - 1]):
            out[order + j] = out[order + j - 1]
            j -= 1
        out[order + j] = i
        k += 1
    first_offset = 0
    second_offset = 0
    m = 0
    for j in range(k):
        ax = out[order + j]
        e = pair[ax]
        first = pair[n + ax]
        second = pair[2 * n + ax]
        if first < 0:
            first_offset += (e - 1) * first
            second_offset += (e - 1) * second
            first = -first
            second = -second
        if (
            m > 0
            and can_merge(out[m - 1], out[cap + m - 1], e, first)
            and can_merge(out[m - 1], out[2 * cap + m - 1], e, second)
        ):
            out[m - 1] *= e
            out[cap + m - 1] = first
            out[2 * cap + m - 1] = second
        else:
            out[m] = e
            out[cap + m] = first
            out[2 * cap + m] = second
            m += 1
    return m, first_offset, second_offset
