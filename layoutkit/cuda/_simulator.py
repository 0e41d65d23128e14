"""Views under the CUDA simulator: a Python object with the compiled view's meaning.

``NUMBA_ENABLE_CUDASIM=1`` runs kernels as Python code, so a view argument must behave
like the compiled :class:`~layoutkit._numba_view.StridedViewType` in plain Python: same
indexing (negative indices count from the end, slices and ``None`` give sub-views), same
``shape``/``strides`` (in elements)/``ndim``/``size``, ``permuted``, and no stores into
read-only views.
"""

import numpy as np


class SimulatedView:
    """Host view with the semantics that compiled kernels see.

    Parameters
    ----------
    array : numpy.ndarray
        The elements, aliased (not copied).
    readonly : bool
        Refuse stores.
    slice_offset : int
        ``slice_offset`` of ``array``'s first element in its buffer, in elements.

    Examples
    --------
    >>> import numpy as np
    >>> view = SimulatedView(np.arange(12.0).reshape(3, 4)[:, ::-2])
    >>> view.shape, view.strides, float(view[0, 0]), view[1:, 1].shape
    ((3, 2), (4, -2), 3.0, (2,))
    >>> view[-1, -1] = 7.0
    >>> float(view[2, 1])
    7.0
    """

    __slots__ = ("_array", "_readonly", "_slice_offset", "_owner")

    def __init__(self, array, readonly=False, slice_offset=0, owner=None):
        self._array = array
        self._readonly = bool(readonly)
        self._slice_offset = int(slice_offset)
        self._owner = owner  # keeps the memory alive

    @classmethod
    def from_view(cls, view):
        """Wrap a host-accessible ``StridedMemoryView`` without copying."""
        layout = view.layout
        array = _aliasing_array(view.ptr, layout, np.dtype(view.dtype), view.readonly)
        return cls(array, view.readonly, layout.slice_offset, owner=view)

    def with_layout(self, layout):
        """The view of the same memory with ``layout`` (same buffer, same itemsize)."""
        shift = (layout.slice_offset - self._slice_offset) * self._array.itemsize
        pointer = self._array.__array_interface__["data"][0] + shift
        array = _aliasing_array(pointer, layout, self._array.dtype, self._readonly)
        return SimulatedView(array, self._readonly, layout.slice_offset, owner=self)

    @property
    def shape(self):
        return self._array.shape

    @property
    def strides(self):
        itemsize = self._array.itemsize
        return tuple(s // itemsize for s in self._array.strides)

    @property
    def ndim(self):
        return self._array.ndim

    @property
    def size(self):
        return self._array.size

    @property
    def readonly(self):
        return self._readonly

    @property
    def layout(self):
        """The :class:`~layoutkit.StridedLayout` of this view, with its ``slice_offset``."""
        from layoutkit.layout import StridedLayout

        return StridedLayout._trusted(
            self.shape, self.strides, self._array.itemsize, self._slice_offset
        )

    def permuted(self, axis_order):
        """The view with its axes reordered (``numpy.transpose``)."""
        array = self._array.transpose(axis_order)
        return SimulatedView(array, self._readonly, self._slice_offset, owner=self)

    def __getitem__(self, index):
        result = self._array[index]
        if not isinstance(result, np.ndarray):
            return result
        moved = result.__array_interface__["data"][0] - self._array.__array_interface__["data"][0]
        offset = self._slice_offset + moved // max(self._array.itemsize, 1)
        return SimulatedView(result, self._readonly, offset, owner=self)

    def __setitem__(self, index, value):
        if self._readonly:
            raise TypeError("cannot store into this view: the view is read-only")
        self._array[index] = value

    def __repr__(self):
        return (
            f"SimulatedView(shape={self.shape}, strides={self.strides}, dtype={self._array.dtype})"
        )


def _aliasing_array(pointer, layout, dtype, readonly):
    """A NumPy array over the memory at ``pointer`` with ``layout`` (strides in elements)."""
    interface = {
        "version": 3,
        "data": (pointer, bool(readonly)),
        "shape": tuple(layout.shape),
        "strides": tuple(s * dtype.itemsize for s in layout.strides),
        "typestr": f"|V{dtype.itemsize}",
    }
    holder = type("_ArrayInterface", (), {"__array_interface__": interface})()
    return np.asarray(holder).view(dtype)
