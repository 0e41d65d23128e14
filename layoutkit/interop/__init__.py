"""Import and export of tensors through the array protocols, one protocol a module.

* :mod:`layoutkit.interop.dlpack`: DLPack capsules (versioned and legacy), deleters, stream rules.
* :mod:`layoutkit.interop.cai`: ``__cuda_array_interface__`` (v3) import and export.
* :mod:`layoutkit.interop.host`: ``__array_interface__`` and the buffer protocol (PEP 3118),
  on the host, with no CUDA driver.

:class:`layoutkit.StridedMemoryView` is the public face of all three.
"""
