"""Views under the CUDA simulator: a Python object with the compiled view's meaning.

``NUMBA_ENABLE_CUDASIM=1`` runs kernels as Python code, so a view argument must behave
like the compiled :class:`~layoutkit._numba_view.StridedViewType` in plain Python. It has
the same members (the buffer's elements, shape, strides, offset) and applies the same
rules: an index is planned by :func:`layoutkit._numba_index.plan_for_values` (the
planner compiled code types with), slices follow :func:`layoutkit._kernels.slice_one`,
``permuted`` and ``with_layout`` check their arguments as compiled code does. Every
index is range-checked (``AxisError``, an ``IndexError``), as compiled code does with
``boundscheck``.
"""

import numpy as np

from layoutkit import _kernels
from layoutkit._errors import AxisError
from layoutkit._numba_checks import status_error
from layoutkit._numba_index import plan_for_values
from layoutkit._numba_view import buffer_limit, layout_status


class SimulatedView:
    """Host view with the semantics that compiled kernels see.

    Parameters
    ----------
    elements : numpy.ndarray
        The 1-d array of the buffer's elements, aliased (not copied).
    shape, strides : tuple of int
        Extents and strides in elements.
    offset : int
        Offset of element ``(0, ..., 0)`` in ``elements`` (the layout's slice offset).
    readonly : bool
        Refuse stores.
    owner : object, optional
        Kept alive with the view (what owns the memory).

    Examples
    --------
    >>> import numpy as np
    >>> from layoutkit import StridedMemoryView
    >>> base = np.arange(12.0)
    >>> view = SimulatedView.from_view(StridedMemoryView.from_array_interface(base))
    >>> view = view.with_layout(view.layout.reshaped((3, 4)))[:, ::-2]
    >>> view.shape, view.strides, float(view[0, 0]), view[1:, 1].shape
    ((3, 2), (4, -2), 3.0, (2,))
    >>> view[-1, -1] = 7.0
    >>> float(base[9])
    7.0
    """

    __slots__ = ("_elements", "_shape", "_strides", "_offset", "_readonly", "_owner")

    def __init__(self, elements, shape, strides, offset, readonly=False, owner=None):
        self._elements = elements
        self._shape = tuple(shape)
        self._strides = tuple(strides)
        self._offset = int(offset)
        self._readonly = bool(readonly)
        self._owner = owner  # keeps the memory alive

    @classmethod
    def from_view(cls, view):
        """Wrap a host-accessible ``StridedMemoryView`` without copying.

        Raises
        ------
        BufferError
            For a view without memory (its buffer closed, or a null pointer with
            elements), as a device kernel argument is refused (``check_memory``).
        """
        from layoutkit.memoryview import check_memory

        check_memory(view, "kernel argument")
        layout = view.layout
        dtype = np.dtype(view.dtype)
        start = view.ptr - layout.slice_offset_in_bytes
        elements = _aliasing_array(start, buffer_limit(view), dtype, view.readonly)
        return cls(
            elements, layout.shape, layout._strides, layout.slice_offset, view.readonly, view
        )

    @classmethod
    def from_argument(cls, arg):
        """The kernel argument the simulator passes for ``arg``: a ``SimulatedView`` for a
        ``StridedMemoryView`` or a ``BoundsCheckedView`` (whose checks every simulated
        index makes anyway), anything else as it is."""
        from layoutkit._numba_view import BoundsCheckedView
        from layoutkit.memoryview import StridedMemoryView

        if issubclass(type(arg), BoundsCheckedView):  # not isinstance: __class__ may lie
            arg = arg.view
        if issubclass(type(arg), StridedMemoryView):
            return cls.from_view(arg)
        return arg

    @property
    def shape(self):
        return self._shape

    @property
    def strides(self):
        """Strides in elements."""
        return self._strides

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def size(self):
        size = 1
        for extent in self._shape:
            size *= extent
        return size

    @property
    def readonly(self):
        return self._readonly

    @property
    def dtype(self):
        """The element type (a NumPy dtype)."""
        return self._elements.dtype

    @property
    def ptr(self):
        """Address of element ``(0, ..., 0)`` (``int``)."""
        return self._elements.ctypes.data + self._offset * self._elements.itemsize

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d view")
        return self._shape[0]

    def __iter__(self):
        """``view[0]``, ``view[1]``, ... as compiled code iterates; TypeError if 0-d."""
        if not self._shape:
            raise TypeError("iteration over a 0-d view")
        return map(self.__getitem__, range(self._shape[0]))

    def __getattr__(self, name):
        # what compiled code refuses (layoutkit._numba_view), refused here by name too
        why = _PYTHON_ONLY.get(name)
        if why is None:
            raise AttributeError(f"'SimulatedView' object has no attribute {name!r}")
        raise AttributeError(f"StridedMemoryView.{name} {why}")

    @property
    def layout(self):
        """The :class:`~layoutkit.StridedLayout` of this view, relative to its buffer."""
        from layoutkit.layout import StridedLayout

        return StridedLayout._numba_box(
            self._shape, self._strides, self._elements.itemsize, self._offset
        )

    def with_layout(self, layout):
        """The view of the same buffer with ``layout`` (the checks of compiled code)."""
        status = layout_status(layout, self._elements.itemsize, len(self._elements), self._readonly)
        if status:
            raise status_error(status, "with_layout")
        return self._derived(layout.shape, layout._strides, layout.slice_offset)

    def view(self, layout=None, dtype=None):
        """This view's buffer with another layout and/or dtype (the checks of compiled
        code: the layout must fit the buffer and have the dtype's itemsize).

        Examples
        --------
        >>> import numpy as np
        >>> from layoutkit import StridedMemoryView
        >>> view = SimulatedView.from_view(StridedMemoryView.from_array_interface(np.ones(2)))
        >>> bits = view.view(dtype=np.uint64)
        >>> hex(int(bits[0])), bits.dtype, len(bits), bits.ptr == view.ptr
        ('0x3ff0000000000000', dtype('uint64'), 2, True)
        """
        new_dtype = self._elements.dtype if dtype is None else np.dtype(dtype)
        if layout is None:
            if new_dtype == self._elements.dtype:
                return self
            layout = self.layout
        elements = self._elements
        if new_dtype != elements.dtype:
            count = len(elements) * elements.itemsize // new_dtype.itemsize
            elements = _aliasing_array(elements.ctypes.data, count, new_dtype, self._readonly)
        status = layout_status(layout, elements.itemsize, len(elements), self._readonly)
        if status:
            raise status_error(status, "view")
        return SimulatedView(
            elements, layout.shape, layout._strides, layout.slice_offset, self._readonly, self
        )

    def permuted(self, axis_order):
        """The view with its axes reordered (the layout's ``permuted``, checks included)."""
        permuted = self.layout.permuted(axis_order)
        return self._derived(permuted.shape, permuted._strides, permuted.slice_offset)

    def _derived(self, shape, strides, offset):
        return SimulatedView(self._elements, shape, strides, offset, self._readonly, self)

    def _apply(self, index):
        """(plan, element offset, shape, strides) of a basic index, as compiled code does
        (see :func:`layoutkit._numba_index.lower_index`, with every index checked)."""
        plan = plan_for_values(index, len(self._shape))
        entries = index if type(index) is tuple else (index,)
        itemsize = self._elements.itemsize
        offset = self._offset
        shape, strides = [], []
        axis = 0
        for op, position in plan.steps:
            if op == "new":
                shape.append(1)
                strides.append(0)
                continue
            extent, stride = self._shape[axis], self._strides[axis]
            if op == "int":
                value = int(entries[position])
                value = value + extent if value < 0 else value
                if not 0 <= value < extent:
                    raise AxisError(f"view index out of bounds on axis {axis}")
                status, offset = _kernels.step_offset(offset, value, stride)
                if status:
                    raise OverflowError(
                        f"view index on axis {axis}: the offset does not fit in int64"
                    )
            elif op == "slice":
                entry = entries[position]
                step = 1 if entry.step is None else _bound(entry.step)
                if step == 0:
                    raise ValueError("slice step cannot be zero")
                status, offset, length, new_stride = _kernels.slice_one(
                    offset, extent, stride, _bound(entry.start), _bound(entry.stop), step,
                    entry.start is not None, entry.stop is not None, itemsize,
                )  # fmt: skip
                if status:
                    raise OverflowError(
                        f"view index on axis {axis}: the new offset or stride does not fit "
                        "in int64 in bytes"
                    )
                shape.append(length)
                strides.append(new_stride)
            else:
                shape.append(extent)
                strides.append(stride)
            axis += 1
        if 0 in shape and not _kernels.mul_fits(offset, itemsize):
            raise OverflowError("view index: the offset in bytes does not fit in int64")
        return plan, offset, shape, strides

    def __getitem__(self, index):
        plan, offset, shape, strides = self._apply(index)
        if plan.is_element:
            return self._elements[offset]
        return self._derived(shape, strides, offset)

    def __setitem__(self, index, value):
        """One element, or a sub-view filled with a number, as compiled kernels store
        (a view or array value is refused there: see ``layoutkit._numba_assign``)."""
        if self._readonly:
            raise TypeError("cannot store into this view: the view is read-only")
        plan, offset, shape, strides = self._apply(index)
        if plan.is_element:
            self._elements[offset] = value
            return
        if not isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
            raise TypeError(
                "assigning a view or array to a sub-view is not available in CUDA kernels "
                "(a number fills a sub-view); assign element by element"
            )
        elements = self._elements
        itemsize = elements.itemsize
        target = np.lib.stride_tricks.as_strided(
            elements[offset:], shape, [stride * itemsize for stride in strides]
        )
        target[...] = value

    def __repr__(self):
        return (
            f"SimulatedView(shape={self._shape}, strides={self._strides}, "
            f"dtype={self._elements.dtype})"
        )


_OBJECT = (
    "is a Python object, which compiled code has no type for; read it in Python and pass "
    "what the code needs (the view, its ptr or layout)"
)
_DRIVER = (
    "is found through the CUDA driver, which compiled code cannot call; read it in Python "
    "and pass it as an argument"
)
_PYTHON_ONLY = {
    "buffer": _OBJECT, "exporting_obj": _OBJECT, "device_id": _DRIVER,
    "is_device_accessible": _DRIVER,
    "copy_from": "(copies are planned and launched from Python)",
    "copy_to": "(copies are planned and launched from Python)",
    **dict.fromkeys(
        ("from_any_interface", "from_array_interface", "from_buffer",
         "from_cuda_array_interface", "from_dlpack"),
        "(imports Python objects: make the view in Python and pass it)",
    ),
}  # fmt: skip


def _bound(value):
    """A slice bound as the int64 compiled code sees (clamped: slicing clamps it anyway)."""
    if value is None:
        return 0
    return max(_kernels.INT64_MIN, min(int(value), _kernels.INT64_MAX))


def _aliasing_array(pointer, count, dtype, readonly):
    """A 1-d NumPy array of ``count`` elements of ``dtype`` at ``pointer`` (not copied)."""
    interface = {
        "version": 3,
        "data": (pointer, bool(readonly)),
        "shape": (count,),
        "typestr": f"|V{dtype.itemsize}",
    }
    holder = type("_ArrayInterface", (), {"__array_interface__": interface})()
    return np.asarray(holder).view(dtype)
