"""Integer kernels of the layout algebra, compiled with Numba: its one implementation.

Every function here is ``@njit(cache=True)`` over int64 values and allocates nothing, so
the same code compiles for the CPU (called by :class:`layoutkit.StridedLayout`, by users'
``@njit`` code and by the compiled layout methods) and for CUDA devices (inside
``@cuda.jit`` kernels).

Two kinds of kernels:

* building blocks (``stride_order``, ``merge_mask``, ``reshape``, ``broadcast``,
  ``slice_one``, ``repack``, ...), which compiled code combines as it needs;
* *layout kernels*, one per operation of the Python class (``check``, ``analyze``,
  ``dense_layout``, ``dense_like``, ``reshape_layout``, ``broadcast_layout``, ``flatten``,
  ``unsqueeze``, ``apply_index``, ``repack_layout``, ``max_compatible_itemsize``,
  ``offset_of``, ``byte_strides``, ``offsets_are_distinct``): each does a whole
  operation in one call, including the int64 checks of its result, and reports the
  bounds and volume of the layout it makes, so that Python pays for one call.

Conventions
-----------
* ``lay`` is an int64 buffer holding ``shape`` in ``lay[0:n]`` and ``strides`` (in
  elements) in ``lay[n:2n]``; ``n`` is the number of dimensions.
* Outputs are written to ``out`` buffers the caller provides, in the same
  ``shape | strides`` arrangement with room for ``cap`` dimensions
  (``out[0:cap]`` shape, ``out[cap:2*cap]`` strides). Several kernels read their
  argument shape from ``out[0:m]`` and write the result's strides beside it, so one
  buffer carries the argument in and the result out.
* Kernels never index a buffer with a value they were given (only with counts and axes
  the caller checked) and never raise: a kernel that can fail returns a status code
  (0 means success), and the caller turns it into an exception with a message.
* Overflow is checked explicitly (Numba integers wrap silently): no kernel wraps around,
  whatever its buffers hold; a result that would not fit is a status code. A layout is
  *valid* when ``check`` accepts it: every extent >= 0, every byte stride within
  ``[-INT64_MAX, INT64_MAX]``, and for a non-zero volume the volume, every element
  offset and every byte offset (to the end of the last element) fit in int64.
"""

from ._jit import njit
from ._kernel_codes import (  # noqa: F401 - re-exported for compiled callers
    EXACT_UNIQUE_LIMIT,
    FLAG_ANY,
    FLAG_C,
    FLAG_F,
    FLAG_UNIQUE,
    INCOMPATIBLE,
    INFO_FLAGS,
    INFO_MASK,
    INFO_MAX,
    INFO_MIN,
    INFO_ORDER,
    INFO_VOLUME,
    INT64_MAX,
    INT64_MIN,
    ITEM_INDEX,
    ITEM_NEWAXIS,
    ITEM_WHOLE,
    ITEMSIZE_LIMIT,
    NEGATIVE_EXTENT,
    NOT_A_MULTIPLE,
    OK,
    OUT_OF_RANGE,
    OVERFLOW_BYTES,
    OVERFLOW_OFFSET,
    OVERFLOW_VOLUME,
    UNIQUE_SEARCH_BUDGET,
)

# ------------------------------------------------------------------------- arithmetic
_SMALL = 2**31  # a product of two integers below this in magnitude fits in int64


@njit(cache=True)
def mul_fits(a, b):
    """Whether ``a * b`` fits in int64.

    Factors below ``2**31`` in magnitude (most of them) are settled without a division.
    """
    if (-_SMALL < a < _SMALL) & (-_SMALL < b < _SMALL):
        return True
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


# ------------------------------------------------------------------------- checks
@njit(cache=True)
def check(lay, n, itemsize, offset, divide):
    """Check that a layout is valid: returns ``(status, volume, low, high)``.

    ``low`` and ``high`` are the smallest and largest element offset (``(0, -1)`` for a
    zero volume). With ``divide`` the strides in ``lay`` are in bytes and are first
    divided by ``itemsize`` in place (``NOT_A_MULTIPLE`` if one is not a multiple).
    Failures, in this order: ``NEGATIVE_EXTENT``, ``NOT_A_MULTIPLE``,
    ``OVERFLOW_VOLUME``, ``OVERFLOW_BYTES`` for a byte stride (any extent: a
    zero-volume layout keeps its strides, which must fit as bytes too),
    ``OVERFLOW_OFFSET`` for an element offset, ``OVERFLOW_BYTES`` for a byte offset
    (``low * itemsize`` and the end of the last element, ``(high + 1) * itemsize``; for
    a zero volume the slice offset in bytes). On failure the second value is the axis at
    fault, or -1.
    """
    empty = False
    for i in range(n):
        if lay[i] < 0:
            return NEGATIVE_EXTENT, i, 0, -1
        if lay[i] == 0:
            empty = True
    if divide:
        for i in range(n):
            s = lay[n + i]
            if s % itemsize != 0:
                return NOT_A_MULTIPLE, i, 0, -1
            lay[n + i] = s // itemsize
    vol = 0
    if not empty:
        vol = 1
        for i in range(n):
            if not mul_fits(vol, lay[i]):
                return OVERFLOW_VOLUME, -1, 0, -1
            vol *= lay[i]
    limit = INT64_MAX // itemsize
    for i in range(n):
        s = lay[n + i]
        if s < -limit or s > limit:
            return OVERFLOW_BYTES, i, 0, -1
    if empty:
        if not mul_fits(offset, itemsize):
            return OVERFLOW_BYTES, -1, 0, -1
        return OK, 0, 0, -1
    lo = offset
    hi = offset
    for i in range(n):
        s = lay[n + i]
        if not mul_fits(s, lay[i] - 1):
            return OVERFLOW_OFFSET, i, 0, -1
        span = s * (lay[i] - 1)
        if span < 0:
            if not add_fits(lo, span):
                return OVERFLOW_OFFSET, i, 0, -1
            lo += span
        else:
            if not add_fits(hi, span):
                return OVERFLOW_OFFSET, i, 0, -1
            hi += span
    if not mul_fits(lo, itemsize) or not add_fits(hi, 1) or not mul_fits(hi + 1, itemsize):
        return OVERFLOW_BYTES, -1, 0, -1
    return OK, vol, lo, hi


# ------------------------------------------------------------------------- properties
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
    increasing axis index (the reference's rule). Insertion sort: n <= 64, and the axes
    of most layouts come nearly in order.
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
def _merges(group_extent, group_stride, extent, stride, empty):
    """Whether an axis merges into a group: the strides allow it (any strides do in a
    zero-volume layout, which addresses nothing) and the merged extent fits in int64.

    Only a zero-volume layout has groups whose extents multiply beyond int64 (a zero
    extent later on makes the volume 0); those stay apart.
    """
    return (empty or can_merge(group_extent, group_stride, extent, stride)) and mul_fits(
        group_extent, extent
    )


@njit(cache=True)
def merge_mask(lay, n):
    """Bit ``j`` (1 <= j < n) is set when axis ``j`` merges into the group ending at ``j-1``.

    The rule of :func:`flatten`, which merges exactly these axes when every merge is
    allowed.
    """
    mask = 0
    if n == 0:
        return mask
    empty = volume_of(lay, n) == 0
    ge = lay[0]
    gs = lay[n]
    for j in range(1, n):
        e = lay[j]
        s = lay[n + j]
        if _merges(ge, gs, e, s, empty):
            # bit 63 is the int64 sign bit: compiled code's 1 << 63 wraps to it, Python's
            # (NUMBA_DISABLE_JIT) would be 2**63, which no int64 holds
            mask |= (1 << j) if j < 63 else -(1 << 62) * 2
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
    False) for interleaved layouts such as shape (2, 3), strides (3, 2), which
    :func:`offsets_are_distinct` settles exactly.
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
    """Check a layout (as :func:`check`) and fill ``info`` with its derived properties.

    ``info`` receives the volume, the offset bounds, the flags (``FLAG_*``: C, Fortran
    and any-order contiguity, and the nesting test of uniqueness), the merge mask and
    the stride order (see the ``INFO_*`` constants). A zero-volume layout is contiguous
    in every order and unique. Returns the status of :func:`check`; ``info`` is filled
    only when it is ``OK``.
    """
    status, vol, lo, hi = check(lay, n, itemsize, offset, False)
    if status != OK:
        return status
    info[INFO_VOLUME] = vol
    info[INFO_MIN] = lo
    info[INFO_MAX] = hi
    stride_order(lay, n, info, INFO_ORDER)
    flags = FLAG_C | FLAG_F | FLAG_ANY | FLAG_UNIQUE
    if vol != 0:
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
def _sift_down(values, start, end):
    root = start
    while 2 * root + 1 < end:
        child = 2 * root + 1
        if child + 1 < end and values[child] < values[child + 1]:
            child += 1
        if values[root] >= values[child]:
            return
        values[root], values[child] = values[child], values[root]
        root = child


@njit(cache=True)
def _heap_sort(values, count):
    """Sort ``values[0:count]`` in place (heapsort: no allocation, any target)."""
    for start in range(count // 2 - 1, -1, -1):
        _sift_down(values, start, count)
    for end in range(count - 1, 0, -1):
        values[0], values[end] = values[end], values[0]
        _sift_down(values, 0, end)


@njit(cache=True)
def offsets_are_distinct(lay, n, offset, scratch):
    """Exact uniqueness: whether no two indices of a valid layout share an offset.

    Writes the offset of every index to ``scratch`` (room for the volume), sorts them
    and looks for a repeat: for small volumes (``EXACT_UNIQUE_LIMIT``).
    """
    vol = volume_of(lay, n)
    for lin in range(vol):
        rem = lin
        cur = offset
        for ax in range(n - 1, -1, -1):
            e = lay[ax]
            cur += (rem % e) * lay[n + ax]
            rem //= e
        scratch[lin] = cur
    _heap_sort(scratch, vol)
    for i in range(1, vol):  # noqa: SIM110 - no generators in device code
        if scratch[i] == scratch[i - 1]:
            return False
    return True


@njit(cache=True)
def unique_by_search(lay, n, scratch, budget):
    """Exact uniqueness of a valid layout without enumerating its offsets.

    Two indices share an offset exactly when some nonzero vector ``c`` with
    ``|c[a]| <= extent[a] - 1`` has ``sum(c[a] * |stride[a]|) == 0`` (flipping an axis
    does not change which indices collide). A depth-first search over ``c``, from the
    largest stride down, prunes every partial sum the remaining axes cannot cancel, and
    counts only vectors whose first nonzero entry is positive (``-c`` is the same
    collision). Strides that nest (``is_unique_nested``) are settled in one pass; others
    in a few steps unless many partial sums cancel. ``scratch`` holds ``6 * n`` slots.

    Returns 1 (unique), 0 (two indices share an offset) or -1 (undecided: more than
    ``budget`` nodes, or a partial sum beyond int64). The caller checked that no extent
    is 0.
    """
    s_at = 0
    e_at = n
    c_at = 2 * n
    h_at = 3 * n
    p_at = 4 * n
    r_at = 5 * n
    m = 0
    for ax in range(n):
        e = lay[ax]
        if e == 1:
            continue
        st = lay[n + ax]
        if st == 0:
            return 0  # a broadcast axis: index 0 and 1 meet
        if st == INT64_MIN:
            return -1
        if st < 0:
            st = -st
        j = m
        while j > 0 and scratch[s_at + j - 1] < st:  # largest stride first
            scratch[s_at + j] = scratch[s_at + j - 1]
            scratch[e_at + j] = scratch[e_at + j - 1]
            j -= 1
        scratch[s_at + j] = st
        scratch[e_at + j] = e
        m += 1
    if m == 0:
        return 1
    # reach after level k: the largest |sum| the levels below it can make (saturated)
    scratch[r_at + m - 1] = 0
    for k in range(m - 2, -1, -1):
        st = scratch[s_at + k + 1]
        e1 = scratch[e_at + k + 1] - 1
        below = scratch[r_at + k + 1]
        if mul_fits(st, e1) and add_fits(below, st * e1):
            scratch[r_at + k] = below + st * e1
        else:
            scratch[r_at + k] = INT64_MAX
    nodes = 0
    first = m  # the first level with a nonzero coefficient at or above the current one
    k = 0
    scratch[p_at] = 0
    enter = True
    while True:
        if enter:
            partial = scratch[p_at + k]
            st = scratch[s_at + k]
            e1 = scratch[e_at + k] - 1
            reach = scratch[r_at + k]
            hi = e1
            lo = -e1
            magnitude = partial if partial >= 0 else -partial
            if add_fits(reach, magnitude):  # keep partial + c * st within [-reach, reach]
                up = (reach - partial) // st
                down = -((reach + partial) // st)
                hi = up if up < hi else hi
                lo = down if down > lo else lo
            if first >= k and lo < 0:
                lo = 0  # all coefficients above are 0: count c and -c once
            scratch[c_at + k] = lo
            scratch[h_at + k] = hi
            enter = False
            advance = False
        else:
            advance = True
        if advance:
            scratch[c_at + k] += 1
        c = scratch[c_at + k]
        if c > scratch[h_at + k]:
            k -= 1  # this level is exhausted: back to the one above
            if k < 0:
                return 1
            if first > k:
                first = m
            continue
        nodes += 1
        if nodes > budget:
            return -1
        if first >= k:
            first = k if c != 0 else m
        st = scratch[s_at + k]
        if not mul_fits(c, st):
            return -1
        partial = scratch[p_at + k]
        if not add_fits(partial, c * st):
            return -1
        partial += c * st
        if partial == 0 and first <= k:
            return 0  # a nonzero vector sums to 0 (the levels below take 0)
        if k == m - 1:
            continue
        k += 1
        scratch[p_at + k] = partial
        enter = True


@njit(cache=True)
def byte_strides(lay, n, itemsize, out):
    """Write the strides of a valid layout in bytes into ``out[0:n]`` (they fit)."""
    for i in range(n):
        out[i] = lay[n + i] * itemsize


@njit(cache=True)
def offset_of(lay, n, offset, index):
    """Element offset of the multi-index ``index[0:n]`` (NumPy's negative indices).

    Returns ``(OK, offset)``, or ``(OUT_OF_RANGE, axis)`` for the first index outside
    ``[-extent, extent)``. The offset of an index of a valid layout fits in int64.
    """
    off = offset
    for i in range(n):
        e = lay[i]
        k = index[i]
        if k < -e or k >= e:
            return OUT_OF_RANGE, i
        if k < 0:
            k += e
        off += k * lay[n + i]
    return OK, off


# ------------------------------------------------------------------------- dense layouts
@njit(cache=True)
def _dense_into(shape, n, kind, order, order_base, out, base):
    """Dense strides for ``shape`` into ``out[base:base+n]``: C order (``kind`` 0),
    Fortran order (1) or the axis order ``order[order_base:order_base+n]`` (2, slowest
    first). A zero volume gives all-zero strides; otherwise the running product never
    exceeds the volume, which the caller has checked fits in int64."""
    for i in range(n):
        if shape[i] == 0:
            for j in range(n):
                out[base + j] = 0
            return
    running = 1
    for k in range(n - 1, -1, -1):
        if kind == 0:
            ax = k
        elif kind == 1:
            ax = n - 1 - k
        else:
            ax = order[order_base + k]
        out[base + ax] = running
        running *= shape[ax]


@njit(cache=True)
def dense_strides(shape, n, order, out, base):
    """Dense strides for ``shape`` with axes ``order`` (slowest first) into ``out[base:]``.

    A zero volume gives all-zero strides. Otherwise the running product never exceeds
    the volume, which the caller has checked fits in int64.
    """
    _dense_into(shape, n, 2, order, 0, out, base)


@njit(cache=True)
def _dense_status(shape, n, itemsize):
    """``(status, volume)`` of a dense layout of ``shape``: whether its extents are valid
    and its size in bytes fits in int64."""
    for i in range(n):
        if shape[i] < 0:
            return NEGATIVE_EXTENT, i
    vol = volume_of(shape, n)
    if vol < 0:
        return OVERFLOW_VOLUME, -1
    if not mul_fits(vol, itemsize):
        return OVERFLOW_BYTES, -1
    return OK, vol


@njit(cache=True)
def dense_layout(lay, n, itemsize, kind):
    """The dense layout of the shape in ``lay[0:n]``: returns ``(status, volume, low, high)``.

    The strides are written to ``lay[n:2n]`` in C order (``kind`` 0), Fortran order (1)
    or the axis order (slowest first) the caller wrote to ``lay[2n:3n]`` (2). Fails with
    ``NEGATIVE_EXTENT`` (the axis second), ``OVERFLOW_VOLUME`` or ``OVERFLOW_BYTES`` (the
    size in bytes does not fit). A zero volume gives all-zero strides.
    """
    status, vol = _dense_status(lay, n, itemsize)
    if status != OK:
        return status, vol, 0, -1
    _dense_into(lay, n, kind, lay, 2 * n, lay, n)
    return OK, vol, 0, vol - 1


@njit(cache=True)
def dense_like(lay, n, itemsize, kind, out):
    """The dense layout with the shape of a valid layout ``lay``, into ``out[0:2n]``.

    ``kind``: 0 C order, 1 Fortran order, 2 the axis order in ``out[2n:3n]``, 3 the
    stride order of ``lay`` (written to ``out[2n:3n]``). Returns ``(status, volume, low,
    high, same)``: the status is ``OVERFLOW_BYTES`` when the size in bytes does not fit
    (a broadcast layout can have more elements than bytes), ``same`` is 1 when ``lay``
    already is contiguous in that order (for a zero volume: all its strides are 0, so
    that no other strides are passed on).
    """
    for i in range(n):
        out[i] = lay[i]
    status, vol = _dense_status(lay, n, itemsize)
    if status != OK:
        return status, vol, 0, -1, 0
    if kind == 3:
        stride_order(lay, n, out, 2 * n)
    _dense_into(lay, n, kind if kind < 3 else 2, out, 2 * n, out, n)
    same = True
    if vol == 0:
        for i in range(n):
            if lay[n + i] != 0:
                same = False
    elif kind == 0:
        same = is_contiguous_c(lay, n)
    elif kind == 1:
        same = is_contiguous_f(lay, n)
    else:
        same = is_contiguous_along(lay, n, out, 2 * n)
    return OK, vol, 0, vol - 1, 1 if same else 0


# ------------------------------------------------------------------------- transforms
@njit(cache=True)
def _next_axis(lay, n, i):
    """The first axis from ``i`` on whose extent is not 1 (``n`` if there is none)."""
    while i < n and lay[i] == 1:
        i += 1
    return i


@njit(cache=True)
def _reshape(lay, n, new_shape, m, out, cap, limit):
    """:func:`reshape` with strides limited to ``[-limit, limit]``."""
    for i in range(m):
        out[i] = new_shape[i]
    if volume_of(lay, n) == 0:
        for i in range(m):
            out[cap + i] = 0
        return OK
    oi = _next_axis(lay, n, 0)
    ni = 0
    while ni < m and oi < n:
        # one group: new axes ni..nj-1 and old non-unit axes oi..last of equal volume
        nj = ni + 1
        new_volume = new_shape[ni]
        last = oi
        oj = _next_axis(lay, n, oi + 1)
        old_volume = lay[oi]
        while new_volume != old_volume:
            if new_volume < old_volume:
                if nj == m or not mul_fits(new_volume, new_shape[nj]):
                    return INCOMPATIBLE
                new_volume *= new_shape[nj]
                nj += 1
            else:
                if oj == n or not mul_fits(old_volume, lay[oj]):
                    return INCOMPATIBLE
                old_volume *= lay[oj]
                last = oj
                oj = _next_axis(lay, n, oj + 1)
        a = oi  # the old group must be C-contiguous
        while a != last:
            b = _next_axis(lay, n, a + 1)
            if not mul_fits(lay[b], lay[n + b]) or lay[n + a] != lay[b] * lay[n + b]:
                return INCOMPATIBLE
            a = b
        running = lay[n + last]
        out[cap + nj - 1] = running
        beyond = False  # the true running stride no longer fits within the limit
        for nk in range(nj - 1, ni, -1):
            if (
                not beyond
                and mul_fits(running, new_shape[nk])
                and -limit <= running * new_shape[nk] <= limit
            ):
                running *= new_shape[nk]
                out[cap + nk - 1] = running
            elif new_shape[nk - 1] == 1:  # never used: any stride serves an extent-1 axis
                beyond = True
                out[cap + nk - 1] = out[cap + nk]
            else:
                return OVERFLOW_OFFSET
        ni = nj
        oi = oj
    if oi < n:
        return INCOMPATIBLE  # old axes left over: the volumes differ
    stride = out[cap + ni - 1] if ni >= 1 else 1
    for nk in range(ni, m):
        if new_shape[nk] != 1:
            return INCOMPATIBLE
        out[cap + nk] = stride  # new extent-1 axes after every group
    return OK


@njit(cache=True)
def reshape(lay, n, new_shape, m, out, cap):
    """Strides for viewing a layout with ``new_shape[0:m]`` (same volume), without a copy.

    NumPy's no-copy reshape: extent-1 axes are dropped, the remaining old axes and the new
    axes are matched in groups of equal volume; each old group must be C-contiguous. Within
    a group each new stride is the next one times the next extent; a new extent-1 axis
    whose stride would not fit in int64 takes the next stride instead (it is never used),
    any other makes the status ``OVERFLOW_OFFSET``. Returns ``INCOMPATIBLE`` when a group
    is not contiguous, or when the volumes differ after all (the walk never reads past
    either shape). A zero volume gives all-zero strides. ``out[0:cap]`` receives the new
    shape (``new_shape`` may be ``out`` itself), ``out[cap:2*cap]`` the strides.
    """
    return _reshape(lay, n, new_shape, m, out, cap, INT64_MAX)


@njit(cache=True)
def reshape_layout(lay, n, out, m, itemsize, volume):
    """Reshape to the shape in ``out[0:m]``, strides into ``out[m:2m]``: returns a status.

    As :func:`reshape`, with strides kept within int64 in bytes. Checks the new shape
    first: ``NEGATIVE_EXTENT`` for an extent below 0, ``INCOMPATIBLE`` when its volume
    is not ``volume`` (the layout's). The result has the layout's offsets and bounds.
    """
    for i in range(m):
        if out[i] < 0:
            return NEGATIVE_EXTENT
    if volume_of(out, m) != volume:
        return INCOMPATIBLE
    return _reshape(lay, n, out, m, out, m, INT64_MAX // itemsize)


@njit(cache=True)
def broadcast(lay, n, new_shape, m, out, cap):
    """Broadcast to ``new_shape[0:m]`` (m >= n), aligning axes from the right.

    Returns 0 on success, or ``-(axis + 1)`` for the first new axis that an old extent
    cannot broadcast to. ``new_shape`` may be ``out`` itself.
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
def broadcast_layout(lay, n, out, m, itemsize, offset):
    """Broadcast to the shape in ``out[0:m]``, strides into ``out[m:2m]``.

    Returns the result's ``(status, volume, low, high)`` as :func:`check` does, or
    ``(INCOMPATIBLE, axis, 0, -1)`` for the first new axis the layout cannot broadcast
    to. New and stretched axes get stride 0; the slice offset is kept.
    """
    status = broadcast(lay, n, out, m, out, m)
    if status != OK:
        return INCOMPATIBLE, -status - 1, 0, -1
    return check(out, m, itemsize, offset, False)


@njit(cache=True)
def flatten(lay, n, mask, out, cap):
    """Merge axis ``j`` into the group before it where bit ``j`` of ``mask`` allows it
    and :func:`merge_mask`'s rule does; returns ``m``, the number of dimensions of the
    result.

    ``out`` has room for ``2 * cap`` values (``cap >= max(n, 1)``); the merged shape is
    written to ``out[0:m]`` and its strides right after it, to ``out[m:2m]``. A 0-d
    layout flattens to shape (1,), strides (1,).
    """
    if n == 0:
        out[0] = 1
        out[1] = 1
        return 1
    m = 0
    empty = volume_of(lay, n) == 0
    ge = lay[0]
    gs = lay[n]
    for j in range(1, n):
        e = lay[j]
        s = lay[n + j]
        if (mask >> j) & 1 and _merges(ge, gs, e, s, empty):
            if e != 1:
                gs = s
            ge *= e
        else:
            out[m] = ge
            out[cap + m] = gs
            m += 1
            ge = e
            gs = s
    out[m] = ge
    out[cap + m] = gs
    m += 1
    for i in range(m):  # the strides right after the shape (m <= cap: reads stay ahead)
        out[m + i] = out[cap + i]
    return m


@njit(cache=True)
def unsqueeze(lay, n, new_axes, m, itemsize, out):
    """Insert extent-1 axes where bit ``i`` of ``new_axes`` is set (axes of the result).

    Writes the ``m``-d result to ``out`` (shape ``out[0:m]``, strides ``out[m:2m]``). A new
    axis gets the stride ``extent * stride`` of the next original axis, or that stride
    itself when the product does not fit in int64 in bytes; new axes after every original
    one get the last stride (1 for a 0-d layout).
    """
    limit = INT64_MAX // itemsize
    following = lay[2 * n - 1] if n > 0 else 1
    old = n
    for i in range(m - 1, -1, -1):
        if (new_axes >> i) & 1:
            out[i] = 1
            out[m + i] = following
        else:
            old -= 1
            e = lay[old]
            s = lay[n + old]
            out[i] = e
            out[m + i] = s
            following = e * s if mul_fits(e, s) and -limit <= e * s <= limit else s
    return OK


# ------------------------------------------------------------------------- indexing
@njit(cache=True)
def _range_length(start, stop, step):
    """``len(range(start, stop, step))`` (step != 0, |step| <= INT64_MAX); no overflow."""
    if step == 1 or step == -1:  # the common steps need no division
        length = (stop - start) * step
        return length if length > 0 else 0
    if step > 0:
        return (stop - start - 1) // step + 1 if stop > start else 0
    return (start - stop - 1) // (-step) + 1 if start > stop else 0


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
    return s, _range_length(s, t, step)


@njit(cache=True)
def step_offset(offset, index, stride):
    """``offset + index * stride`` with an overflow check: returns (status, offset)."""
    if not mul_fits(index, stride) or not add_fits(offset, index * stride):
        return OVERFLOW_OFFSET, offset
    return OK, offset + index * stride


@njit(cache=True)
def _sliced_axis(offset, stride, first, length, step, itemsize):
    """One axis sliced to ``length`` elements from index ``first`` by ``step``: returns
    ``(status, offset, length, stride)``.

    As in NumPy, an empty slice keeps the axis' stride and adds nothing to the offset;
    otherwise the offset grows by the first element's and the stride is ``stride *
    step``: ``OVERFLOW_OFFSET`` if the offset does not fit in int64, or the new stride
    not in int64 in bytes (elements of ``itemsize`` bytes); an axis of extent 1 keeps
    its stride when the product would not fit (it is never used).
    """
    if length == 0:
        return OK, offset, 0, stride
    status, offset = step_offset(offset, first, stride)
    if status:
        return status, offset, 0, 0
    if mul_fits(stride, step):
        product = stride * step
        # below 2**31 every product fits in bytes (itemsizes are below 2**31): no division
        if (-_SMALL < product < _SMALL) or -(INT64_MAX // itemsize) <= product <= (
            INT64_MAX // itemsize
        ):
            return OK, offset, length, product
    if length > 1:
        return OVERFLOW_OFFSET, offset, 0, 0
    return OK, offset, length, stride


@njit(cache=True)
def slice_one(offset, extent, stride, start, stop, step, has_start, has_stop, itemsize):
    """Slice one axis with Python's slice rules: returns (status, offset, extent, stride).

    The rule of :func:`apply_index` for one slice (elements of ``itemsize`` bytes), for
    compiled code that slices axis by axis: :func:`slice_axis`, then
    :func:`_sliced_axis`. A step of ``INT64_MIN`` counts as ``-INT64_MAX`` (either
    leaves at most one element), as the Python class passes it to :func:`apply_index`.
    """
    if step == INT64_MIN:
        step = -INT64_MAX
    first, length = slice_axis(extent, start, stop, step, has_start, has_stop)
    return _sliced_axis(offset, stride, first, length, step, itemsize)


@njit(cache=True)
def apply_index(lay, n, offset, itemsize, items, out, m):
    """Apply basic-index items to a valid layout: NumPy's basic indexing.

    Item ``i`` is ``items[3*i:3*i+3] = (a, b, c)`` (``items`` holds whole items only): with ``c != 0`` a slice already
    normalised by Python's ``slice.indices`` (``range(a, b, c)`` of the next axis,
    ``|c| <= INT64_MAX``); otherwise ``b`` says what it is (``ITEM_INDEX``: the integer
    index ``a`` into the next axis, range-checked here; ``ITEM_NEWAXIS``: a new axis of
    extent 1 and stride 0; ``ITEM_WHOLE``: ``a`` axes kept whole). The caller has checked
    that the items use at most ``n`` axes and counted ``m``, the result's number of
    dimensions; the axes after the last item are kept.

    Writes the result to ``out`` (shape ``out[0:m]``, strides ``out[m:2m]``) and returns
    ``(status, offset, volume, low, high)``. Failures name the axis and the item at
    fault: ``(OUT_OF_RANGE, axis, item, 0, -1)`` for an index outside ``[-extent,
    extent)``; ``(OVERFLOW_OFFSET, axis, item, 0, -1)`` when the offset of an index or
    of a slice's first element does not fit in int64, or a stride times a step does not
    fit in int64 in bytes (for a result extent above 1); ``(status, axis, -1, 0, -1)``
    when the result fails :func:`check` (its axis at fault or -1, no item: for an empty
    result, its slice offset in bytes does not fit). Strides follow NumPy, also for an
    empty result (see :func:`_sliced_axis`).
    """
    r = 0
    ax = 0
    off = offset
    for i in range(len(items) // 3):
        a = items[3 * i]
        b = items[3 * i + 1]
        c = items[3 * i + 2]
        if c != 0:
            status, off, length, stride = _sliced_axis(
                off, lay[n + ax], a, _range_length(a, b, c), c, itemsize
            )
            if status:
                return status, ax, i, 0, -1
            out[r] = length
            out[m + r] = stride
            r += 1
            ax += 1
        elif b == ITEM_INDEX:
            e = lay[ax]
            if a < -e or a >= e:
                return OUT_OF_RANGE, ax, i, 0, -1
            status, off = step_offset(off, a + e if a < 0 else a, lay[n + ax])
            if status:
                return status, ax, i, 0, -1
            ax += 1
        elif b == ITEM_NEWAXIS:
            out[r] = 1
            out[m + r] = 0
            r += 1
        else:
            for _ in range(a):
                out[r] = lay[ax]
                out[m + r] = lay[n + ax]
                r += 1
                ax += 1
    for j in range(ax, n):
        out[r] = lay[j]
        out[m + r] = lay[n + j]
        r += 1
    status, vol, lo, hi = check(out, m, itemsize, off, False)
    if status:
        return status, vol, -1, 0, -1  # check's axis at fault (or -1); no item
    return status, off, vol, lo, hi


# ------------------------------------------------------------------------- repacking
@njit(cache=True)
def repack(lay, n, offset, itemsize, new_itemsize, axis, out, cap):
    """Reinterpret elements of ``itemsize`` bytes as elements of ``new_itemsize`` bytes.

    The stride along ``axis`` must be 1 (unless the volume is 0 or the extent 1). Packing
    (larger items) needs ``new_itemsize % itemsize == 0`` and the extent along ``axis``,
    the offset and every other stride (of an extent above 1) divisible by the ratio;
    unpacking needs ``itemsize % new_itemsize == 0``. Returns (status, new offset); the
    status is ``INCOMPATIBLE`` with a reason code in the offset slot: 1 stride not 1,
    2 extent, 3 offset, 4 another stride (its axis in ``out[0]``), or ``OVERFLOW_VOLUME``
    when unpacking makes the extent or the volume too large for int64 (strides and
    offsets keep their byte values, which fit). A zero-volume result gets all-zero
    strides and offset 0 (it addresses nothing: the dense empty layout).
    """
    vol = volume_of(lay, n)
    for i in range(n):
        out[i] = lay[i]
        out[cap + i] = lay[n + i]
    if vol != 0 and lay[axis] != 1 and lay[n + axis] != 1:
        return INCOMPATIBLE, 1
    out[cap + axis] = 1  # an extent-1 axis may have had any stride
    if new_itemsize > itemsize:
        k = new_itemsize // itemsize
        if lay[axis] % k != 0:
            return INCOMPATIBLE, 2
        out[axis] = lay[axis] // k
        if vol != 0:
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
    else:
        k = itemsize // new_itemsize
        if not mul_fits(lay[axis], k) or not mul_fits(vol, k):
            return OVERFLOW_VOLUME, 0
        out[axis] = lay[axis] * k
        if vol != 0:
            for i in range(n):
                if i != axis:
                    out[cap + i] = lay[n + i] * k
            return OK, offset * k
    for i in range(n):
        out[cap + i] = 0
    return OK, 0


@njit(cache=True)
def repack_layout(lay, n, offset, itemsize, new_itemsize, axis, out):
    """:func:`repack` to ``out`` (cap ``n``), then :func:`check` of the result.

    Returns ``(status, value, volume, low, high)``: on success ``value`` is the new
    offset; for ``INCOMPATIBLE`` it is the reason code of :func:`repack` and ``volume``
    the axis of reason 4.
    """
    status, value = repack(lay, n, offset, itemsize, new_itemsize, axis, out, n)
    if status != OK:
        return status, value, out[0], 0, -1
    status, vol, lo, hi = check(out, n, new_itemsize, value, False)
    return status, value, vol, lo, hi


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
    left to remove).
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
    stride along ``axis`` for extent 1, and every stride and the offset for a zero
    volume (whose repacked strides are all 0). Products are taken modulo the
    running divisor, so any int64 ``max_itemsize`` works.
    """
    empty = volume_of(lay, n) == 0
    if not empty and lay[axis] != 1 and lay[n + axis] != 1:
        return itemsize
    g = _gcd(max_itemsize, ptr_residue)  # > 0: max_itemsize > 0
    g = _gcd(g, _mulmod(lay[axis] % g, itemsize, g))
    if not empty:  # a zero volume repacks to all-zero strides and offset
        g = _gcd(g, _mulmod(offset % g, itemsize, g))
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
