"""CUDA streams a :class:`~layoutkit.Device` makes: ``Device.create_stream()``.

What cuda.core 1.2.2's ``Device.create_stream()`` returns, for the calls that take a
stream (``from_dlpack(obj, stream_ptr=stream.handle)``, ``copy(..., stream=stream)``,
``Buffer.close(stream)``): a handle, the ``__cuda_stream__`` protocol, ``sync()`` and
``close()``. A stream made here is owned by its :class:`Stream` object alone, which
destroys it once (on ``close()``, leaving a ``with`` block, or when the object dies); a
stream wrapped from another object (``create_stream(obj)``) belongs to that object and
is never destroyed here, as are ``Stream.from_handle(handle)`` and ``Device.default_stream``.
"""

import weakref

from . import _driver

__all__ = ["Stream"]


class Stream:
    """A CUDA stream of one device. Make one with :meth:`Device.create_stream`.

    Attributes are read-only. After :meth:`close`, :attr:`handle` is 0 (as a closed
    buffer's is) and the stream can no longer be used. Streams cannot be pickled or
    copied: they refer to process-local driver state.

    Examples
    --------
    >>> Stream()
    Traceback (most recent call last):
    ...
    TypeError: Stream cannot be created directly: use Device.create_stream()
    """

    __slots__ = ("_handle", "_device_id", "_owner", "_finalizer", "__weakref__")

    def __new__(cls, *args, **kwargs):
        raise TypeError("Stream cannot be created directly: use Device.create_stream()")

    @classmethod
    def _made(cls, handle, device_id, owner):
        """A stream object for ``handle`` (``owner``: the foreign object it belongs to, or
        None when this object owns the handle and destroys it)."""
        self = object.__new__(cls)
        self._handle = handle
        self._device_id = device_id
        self._owner = owner
        self._finalizer = None
        if owner is None:
            self._finalizer = weakref.finalize(self, _driver.stream_destroy, handle)
            self._finalizer.atexit = False  # the process frees its streams at exit
        return self

    @staticmethod
    def from_handle(handle):
        """A :class:`Stream` for a foreign stream ``handle``, as in cuda.core.

        The stream is not owned: it is never destroyed here (:meth:`close` only closes
        this object), and whoever made it must keep it alive while this object is used.

        Parameters
        ----------
        handle : int
            The ``CUstream`` (anything ``copy(stream=...)`` takes works too).

        Raises
        ------
        TypeError, ValueError
            For a handle that names no stream (:func:`layoutkit._driver.stream_handle`).
        """
        if handle is None:  # not the legacy default stream: Device.default_stream is that
            raise TypeError("Stream.from_handle(handle): handle must name a stream, got None")
        value = _driver.stream_handle(handle)
        return Stream._made(value, _driver.stream_device_id(value), handle)

    @property
    def handle(self):
        """The driver's ``CUstream`` as an ``int`` (0 once closed)."""
        return self._handle

    @property
    def device_id(self):
        """The device the stream belongs to."""
        return self._device_id

    @property
    def is_closed(self):
        """Whether :meth:`close` was called."""
        return self._device_id is None

    def __cuda_stream__(self):
        """``(0, handle)``: the CUDA stream protocol."""
        self._check_open("__cuda_stream__")
        return (0, self._handle)

    def sync(self):
        """Wait until all work queued on the stream has finished."""
        self._check_open("sync")
        _driver.stream_synchronize(self._handle)

    def close(self):
        """Destroy the stream (work already queued still completes). Idempotent."""
        finalizer = self._finalizer
        self._finalizer = None
        self._handle = 0
        self._device_id = None
        self._owner = None
        if finalizer is not None:
            finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_open(self, operation):
        if self._device_id is None:
            raise RuntimeError(f"{operation}: the stream was closed")

    def __reduce_ex__(self, protocol):
        raise TypeError("cannot pickle or copy a Stream: it refers to process-local driver state")

    def __copy__(self):
        raise TypeError("cannot copy a Stream: it refers to process-local driver state")

    def __deepcopy__(self, memo):
        raise TypeError("cannot copy a Stream: it refers to process-local driver state")

    def __eq__(self, other):
        return self is other or (
            isinstance(other, Stream) and not self.is_closed and other._handle == self._handle
        )

    def __hash__(self):
        return id(self)

    def __repr__(self):
        if self.is_closed:
            return "<Stream (closed)>"
        return f"<Stream {self._handle:#x} on device {self._device_id}>"


def create_stream(device_id, obj=None, options=None):
    """The :class:`Stream` of ``Device(device_id).create_stream(obj, options)``."""
    if obj is not None:
        if options is not None:
            raise TypeError("create_stream(obj, options): options apply to new streams only")
        return Stream._made(_driver.stream_handle(obj), device_id, obj)
    nonblocking = True
    if options is not None:
        value = options.get("nonblocking") if isinstance(options, dict) else getattr(
            options, "nonblocking", None)  # fmt: skip
        if isinstance(options, dict):
            unknown = set(options) - {"nonblocking"}
        else:  # cuda.core's StreamOptions(nonblocking=True, priority=None)
            unknown = {"priority"} if getattr(options, "priority", None) is not None else set()
        if unknown or type(value) is not bool:
            raise TypeError(
                f"options={options!r}: layoutkit's streams take only nonblocking=True or "
                "False (a dict or an object with that attribute, e.g. cuda.core's "
                "StreamOptions)"
            )
        nonblocking = value
    return Stream._made(_driver.stream_create(device_id, nonblocking), device_id, None)
