"""The doors of layoutkit: every way memory comes in and goes out, one job a module.

Every door returns one :class:`~layoutkit.interop.record.ImportRecord` (pointer, checked
layout, dtype, location, read-only flag, exporter, owner), from which
:class:`layoutkit.StridedMemoryView` is built in one place.

* :mod:`~layoutkit.interop.record`: the record, the shared layout cache and the checks
  every door makes (layout, pointer range within 64 bits).
* :mod:`~layoutkit.interop.dlpack`: DLPack capsules (versioned and legacy), deleters, the
  one reading of a consumer's stream argument and DLPack's stream rules; export.
* :mod:`~layoutkit.interop.exchange`: DLPack 1.3's C exchange API, imported through
  (torch) and exported by views.
* :mod:`~layoutkit.interop.cai`: ``__cuda_array_interface__`` import and export.
* :mod:`~layoutkit.interop.host`: ``__array_interface__`` and the buffer protocol (PEP 3118),
  on the host, with no CUDA driver.
* :mod:`~layoutkit.interop.fastpaths`: the producer fast paths, a table keyed by type
  (NumPy, torch, CuPy, JAX), each falling back to the protocol.
* :mod:`~layoutkit.interop._native`: direct reads of NumPy and capsule fields (with an off
  switch).
* :mod:`~layoutkit.interop._packer`: native code from llvmlite: the DLPack capsule of an
  export made by one compiled call (where it can be compiled), and the exchange API's
  trampolines, which raise a callback's exception in its C caller.

Ownership: who frees what is decided by one object per import, the record's ``owner``: the
producer object itself (kept alive), an :class:`~layoutkit.interop.dlpack.ImportedTensor`
(which calls the producer's deleter exactly once, when its last user dies) or, for a view
of a :class:`~layoutkit.Buffer`, what keeps the buffer's memory (its owner, or the
allocation its memory resource frees when nothing holds it), so that memory outlives
``Buffer.close()`` while views and their exports still read it.
"""
