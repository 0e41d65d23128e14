"""Exception classes shared by every layoutkit module."""

__all__ = ["AxisError"]


class AxisError(IndexError, ValueError):
    """An axis or index is out of range.

    Derives from both :class:`IndexError` and :class:`ValueError`, as NumPy's
    ``AxisError`` does, so code written against either convention catches it.

    Examples
    --------
    >>> from layoutkit import AxisError
    >>> issubclass(AxisError, IndexError) and issubclass(AxisError, ValueError)
    True
    """
