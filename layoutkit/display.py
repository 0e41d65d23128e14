"""Pictures of layouts and views for Jupyter, made without a plotting library.

A layout is drawn as its index grid: one cell per index, showing the element offset
that index maps to (``slice_offset + sum(index[k] * strides[k])``) and coloured by that
offset. Cells whose offset is shared with another index (broadcast or overlapping
strides) are hatched, and the arrows beside each grid point the way memory offsets grow
along that axis (a red arrow for a negative stride, ``=`` for a zero stride). Layouts of
more than two dimensions are drawn as one grid per leading index; layouts too large to
draw get a plain-text summary instead.

Jupyter shows them on its own (``StridedLayout._repr_html_`` and
``StridedMemoryView._repr_html_`` call this module lazily, so importing layoutkit never
imports it); call the functions to get the SVG or HTML text yourself.

Examples
--------
>>> from layoutkit import StridedLayout
>>> svg = layout_svg(StridedLayout((2, 3), (1, 2), 4))
>>> svg.startswith("<svg") and svg.count('class="cell"')
6
>>> layout_svg(StridedLayout.dense((1000, 1000), 4)) is None
True
>>> "too large to draw" in layout_html(StridedLayout.dense((1000, 1000), 4))
True
"""

import html
import itertools
import math

__all__ = ["layout_html", "layout_svg", "view_html"]

MAX_CELLS = 1024
"""Most cells drawn in one picture; larger layouts get the text summary."""
MAX_GRID_SIDE = 64
"""Most rows or columns in one grid."""
MAX_GRIDS = 64
"""Most grids (leading indices) drawn for a layout of more than two dimensions."""

_CELL = 34
_GAP = 22
_MARGIN = 44
_FONT = "font-family:monospace"
_NEGATIVE_COLOUR = "#c62828"
_SHARED_COLOUR = "#d81b60"
# Viridis anchors (perceptually uniform), interpolated linearly.
_VIRIDIS = (
    (68, 1, 84),
    (72, 40, 120),
    (62, 74, 137),
    (49, 104, 142),
    (38, 130, 142),
    (31, 158, 137),
    (53, 183, 121),
    (109, 205, 89),
    (180, 222, 44),
    (253, 231, 37),
)


def layout_svg(layout):
    """Return an SVG picture of ``layout``, or ``None`` when it is too large to draw.

    Parameters
    ----------
    layout : StridedLayout
        Or any object with ``shape``, ``strides``, ``itemsize`` and ``slice_offset``
        (strides and offset in elements), drawn as the layout with those values.

    Returns
    -------
    str or None
        A standalone ``<svg>`` document: one ``rect`` of class ``cell`` per index, its
        offset as ``text`` of class ``offset``, and the layout's properties below.

    Examples
    --------
    >>> from layoutkit import StridedLayout
    >>> svg = layout_svg(StridedLayout((3,), (-1,), 8)[::-1])
    >>> svg.count('class="cell"'), 'data-offset="0"' in svg
    (3, True)
    """
    layout = _as_layout(layout)
    if not _drawable(layout.shape):
        return None
    return _svg(layout, _summary_lines(layout))


def layout_html(layout):
    """Return an HTML block for ``layout``: the picture beside a table of properties.

    Layouts too large to draw (more than ``MAX_CELLS`` indices, or more than
    ``MAX_GRID_SIDE`` rows or columns, or ``MAX_GRIDS`` grids) show the table and a
    plain-text summary of the offsets of the corner indices instead.

    Examples
    --------
    >>> from layoutkit import StridedLayout
    >>> page = layout_html(StridedLayout.dense((2, 2), 4, stride_order="F"))
    >>> page.startswith("<div") and "<svg" in page and "is_contiguous_f" in page
    True
    """
    layout = _as_layout(layout)
    return _html_block("StridedLayout", layout, _property_rows(layout))


def view_html(view):
    """Return an HTML block for a memory view: its layout picture and its properties.

    Parameters
    ----------
    view : StridedMemoryView
        Any object with a ``layout`` (or ``_layout``) plus ``dtype``, ``ptr``,
        ``device_id``, ``is_device_accessible`` and ``readonly`` attributes; missing
        attributes are left out of the table.

    Examples
    --------
    >>> import numpy as np
    >>> from layoutkit import StridedMemoryView
    >>> view = StridedMemoryView.from_array_interface(np.zeros((2, 3), np.float32)[:, ::2])
    >>> page = view_html(view)
    >>> "float32" in page and page.count('class="cell"')
    4
    """
    layout = getattr(view, "layout", None)
    if layout is None:
        layout = getattr(view, "_layout", None)
    if layout is None:
        raise TypeError(
            f"view must be a StridedMemoryView or have a layout, got {type(view).__name__}"
        )
    layout = _as_layout(layout, "view.layout")
    rows = []
    for name in ("dtype", "ptr", "device_id", "is_device_accessible", "readonly"):
        value = _attribute(view, name)
        if value is not _MISSING:
            rows.append((name, hex(value) if name == "ptr" and type(value) is int else value))
    return _html_block(type(view).__name__, layout, rows + _property_rows(layout))


_MISSING = object()


def _attribute(view, name):
    """``view.name`` for the table; ``_MISSING`` where it has none, and the reason where
    reading it raises (a closed buffer, no CUDA driver to ask): a picture never fails
    because a property cannot be read now."""
    try:
        return getattr(view, name)
    except AttributeError:
        return _MISSING
    except Exception as exc:
        return f"unknown ({type(exc).__name__}: {exc})"


def _drawable(shape):
    """Whether a picture of ``shape`` stays within the limits (an empty one always does)."""
    if 0 in shape:
        return True
    if len(shape) <= 1:
        return math.prod(shape) <= MAX_CELLS and all(n <= MAX_GRID_SIDE for n in shape)
    rows, cols = shape[-2:]
    grids = math.prod(shape[:-2])
    return (
        rows <= MAX_GRID_SIDE
        and cols <= MAX_GRID_SIDE
        and grids <= MAX_GRIDS
        and grids * rows * cols <= MAX_CELLS
    )


def _as_layout(layout, name="layout"):
    """``layout`` as a :class:`~layoutkit.StridedLayout` (whose methods give the offsets).

    Another object's values are read through the validating path of unpickling, so a
    look-alike whose values do not make a layout is refused as any constructor refuses
    them; one without the four attributes is a ``TypeError`` naming ``name``.
    """
    from .layout import StridedLayout, _rebuild

    if isinstance(layout, StridedLayout):
        return layout
    try:
        values = layout.shape, layout.strides, layout.itemsize, layout.slice_offset
    except AttributeError:
        raise TypeError(
            f"{name} must be a StridedLayout or have shape, strides, itemsize and "
            f"slice_offset attributes, got {type(layout).__name__}"
        ) from None
    return _rebuild(*values, what="layout to draw")  # strides None: implicit C


def _offset(layout, index):
    return layout.offset_of(index)


def _grid_shape(shape):
    """Rows and columns of each grid; 0-d and 1-d layouts are one row."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, shape[0]
    return shape[-2], shape[-1]


def _colour(fraction):
    position = min(max(fraction, 0.0), 1.0) * (len(_VIRIDIS) - 1)
    low = min(int(position), len(_VIRIDIS) - 2)
    t = position - low
    rgb = [round(a + (b - a) * t) for a, b in zip(_VIRIDIS[low], _VIRIDIS[low + 1], strict=True)]
    light = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] > 140
    return "#{:02x}{:02x}{:02x}".format(*rgb), "#000" if light else "#fff"


def _arrow(stride, horizontal):
    """Glyph and colour telling which way offsets grow along an axis."""
    if stride == 0:
        return "=", _SHARED_COLOUR
    if horizontal:
        return ("\u2192", "#444") if stride > 0 else ("\u2190", _NEGATIVE_COLOUR)
    return ("\u2193", "#444") if stride > 0 else ("\u2191", _NEGATIVE_COLOUR)


def _text(x, y, content, *, size=12, anchor="middle", colour="#222", css_class=None, bold=False):
    attributes = f'x="{x:g}" y="{y:g}" font-size="{size:g}" text-anchor="{anchor}" fill="{colour}"'
    if css_class:
        attributes += f' class="{css_class}"'
    if bold:
        attributes += ' font-weight="bold"'
    return f'<text {attributes} style="{_FONT}">{html.escape(str(content))}</text>'


def _svg(layout, summary):
    shape = layout.shape
    strides = layout._strides
    rows, cols = _grid_shape(shape)
    if 0 in shape:  # nothing to draw (whatever the other extents): one empty grid, a note
        rows, cols, leading, indices = 0, 0, [()], []
    else:  # _drawable: at most MAX_CELLS indices
        leading = list(itertools.product(*(range(n) for n in shape[:-2])))
        indices = list(itertools.product(*(range(n) for n in shape)))
    offsets = {index: _offset(layout, index) for index in indices}
    counts = {}
    for offset in offsets.values():
        counts[offset] = counts.get(offset, 0) + 1
    low = min(offsets.values(), default=0)
    span = max(max(offsets.values(), default=0) - low, 1)
    digits = max((len(str(v)) for v in offsets.values()), default=1)
    font = min(12.0, 1.7 * _CELL / max(digits, 1))

    grid_width = cols * _CELL + _MARGIN
    grid_height = (
        rows * _CELL + _MARGIN + (18 if len(shape) > 2 else 0) + (20 if not indices else 0)
    )
    per_line = max(1, min(len(leading), 720 // max(grid_width + _GAP, 1)))
    lines_of_grids = math.ceil(len(leading) / per_line)
    text_width = 2 * _GAP + 6.7 * max(len(line) for line in summary)
    width = math.ceil(max(per_line * (grid_width + _GAP) + _GAP, text_width))
    grids_height = lines_of_grids * (grid_height + _GAP) + _GAP
    height = grids_height + 18 * len(summary) + 10

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" class="layoutkit-layout">',
        f"<title>{html.escape(summary[0])}</title>",
        '<defs><pattern id="lk-shared" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" '
        f'stroke="{_SHARED_COLOUR}" stroke-width="2"/></pattern></defs>',
    ]
    col_stride = strides[-1] if shape else 0
    row_stride = strides[-2] if len(shape) >= 2 else None
    for number, lead in enumerate(leading):
        x0 = _GAP + (number % per_line) * (grid_width + _GAP)
        y0 = _GAP + (number // per_line) * (grid_height + _GAP)
        parts.append(f'<g class="grid" data-leading-index="{",".join(map(str, lead))}">')
        if len(shape) > 2 and lead:
            label = "[" + ", ".join(map(str, lead)) + ", :, :]"
            parts.append(_text(x0, y0 + 12, label, anchor="start", bold=True))
            y0 += 18
        gx, gy = x0 + _MARGIN, y0 + _MARGIN
        if shape and indices:
            glyph, colour = _arrow(col_stride, horizontal=True)
            parts.append(
                _text(
                    gx + cols * _CELL / 2,
                    gy - 17,
                    f"{glyph} {col_stride}",
                    colour=colour,
                    css_class="axis",
                )
            )
        if row_stride is not None and indices:
            glyph, colour = _arrow(row_stride, horizontal=False)
            parts.append(
                _text(
                    gx - 20,
                    gy + rows * _CELL / 2,
                    glyph,
                    anchor="end",
                    size=16,
                    colour=colour,
                    css_class="axis",
                )
            )
            parts.append(
                _text(
                    gx - 20,
                    gy + rows * _CELL / 2 + 14,
                    row_stride,
                    anchor="end",
                    size=9,
                    colour=colour,
                    css_class="axis",
                )
            )
        if indices and shape:  # index numbers along the top (last axis) and left side
            for c in range(cols):
                parts.append(
                    _text(
                        gx + (c + 0.5) * _CELL, gy - 4, c, size=8, colour="#777", css_class="index"
                    )
                )
            for r in range(rows if len(shape) >= 2 else 0):
                parts.append(
                    _text(
                        gx - 4,
                        gy + (r + 0.5) * _CELL + 3,
                        r,
                        size=8,
                        anchor="end",
                        colour="#777",
                        css_class="index",
                    )
                )
        cells = itertools.product(range(rows), range(cols)) if shape else [(0, 0)]
        for r, c in cells:
            index = lead + ((r, c) if len(shape) >= 2 else (c,) if shape else ())
            offset = offsets[index]
            fill, ink = _colour((offset - low) / span)
            x, y = gx + c * _CELL, gy + r * _CELL
            label = ",".join(map(str, index))
            shared = counts[offset] > 1
            parts.append(
                f'<rect class="cell" data-index="{label}" data-offset="{offset}" '
                f'x="{x}" y="{y}" width="{_CELL}" height="{_CELL}" fill="{fill}" '
                'stroke="#fff" stroke-width="1"><title>'
                f"index ({html.escape(label)}) \u2192 offset {offset}"
                f"{' (shared)' if shared else ''}</title></rect>"
            )
            if shared:
                parts.append(
                    f'<rect class="shared" x="{x + 1}" y="{y + 1}" width="{_CELL - 2}" '
                    f'height="{_CELL - 2}" fill="url(#lk-shared)" fill-opacity="0.4" '
                    f'stroke="{_SHARED_COLOUR}" stroke-width="2"/>'
                )
            parts.append(
                _text(
                    x + _CELL / 2,
                    y + _CELL / 2 + font / 3,
                    offset,
                    size=font,
                    colour=ink,
                    css_class="offset",
                )
            )
        if not indices:
            parts.append(_text(gx, gy + 14, "empty (volume 0)", anchor="start"))
        parts.append("</g>")
    y = grids_height
    for line in summary:
        y += 18
        parts.append(_text(_GAP, y, line, anchor="start", size=11, css_class="summary"))
    parts.append("</svg>")
    return "".join(parts)


def _flags(layout):
    names = ("is_contiguous_c", "is_contiguous_f", "is_dense", "is_unique")
    return [(name, getattr(layout, name)) for name in names]


def _property_rows(layout):
    rows = [
        ("shape", layout.shape),
        ("strides", layout.strides),
        ("itemsize", layout.itemsize),
        ("slice_offset", layout.slice_offset),
    ]
    rows.append(("volume", layout.volume))
    rows.append(("offset_bounds", layout.offset_bounds))
    return rows + _flags(layout)


def _summary_lines(layout):
    strides = layout._strides
    lines = [
        f"shape {layout.shape}  strides {strides} (elements)",
        f"itemsize {layout.itemsize}  slice_offset {layout.slice_offset}",
        "  ".join(f"{name} {value}" for name, value in _flags(layout)),
        "cell: element offset of that index; colour: dark = low, yellow = high",
    ]
    if any(s < 0 for s in strides):
        lines.append("red arrow: negative stride (offsets fall along that axis)")
    if 0 not in layout.shape and any(
        s == 0 and n > 1 for s, n in zip(strides, layout.shape, strict=True)
    ):
        lines.append("'=': zero stride (broadcast axis)")
    if not layout.is_unique:  # exact: a drawable layout has few indices
        lines.append("hatched: offset shared by several indices")
    return [line for line in lines if line]


def _edge(n, keep=3):
    """Indices 0..n-1 with the middle elided to ``None`` when ``n > 2 * keep``."""
    if n <= 2 * keep:
        return list(range(n))
    return [*range(keep), None, *range(n - keep, n)]


def _text_summary(layout):
    """Offsets of the corner indices of the first grid, NumPy-summary style."""
    shape = layout.shape
    lead = (0,) * max(len(shape) - 2, 0)
    if 0 in shape:
        return "empty (volume 0): no offsets"
    row_indices = _edge(shape[-2]) if len(shape) >= 2 else [()]
    col_indices = _edge(shape[-1]) if shape else [()]
    table = []
    for r in row_indices:
        line = []
        for c in col_indices:
            if r is None or c is None:
                line.append("\u2026")
                continue
            index = lead + ((r,) if len(shape) >= 2 else ()) + ((c,) if shape else ())
            line.append(str(_offset(layout, index)))
        table.append(line)
    width = max(len(item) for line in table for item in line)
    prefix = f"offsets of [{', '.join(['0'] * len(lead) + [':'] * min(len(shape), 2))}]:\n"
    return prefix + "\n".join(" ".join(item.rjust(width) for item in line) for line in table)


def _html_block(title, layout, rows):
    svg = layout_svg(layout)
    table = "".join(
        f'<tr><th style="text-align:left;padding-right:1em">{html.escape(str(name))}</th>'
        f'<td style="{_FONT}">{html.escape(str(value))}</td></tr>'
        for name, value in rows
    )
    if svg is None:
        picture = (
            f'<pre class="layoutkit-summary">too large to draw '
            f"(volume {layout.volume}; drawn up to {MAX_CELLS} cells, "
            f"{MAX_GRID_SIDE} per side)\n{html.escape(_text_summary(layout))}</pre>"
        )
    else:
        picture = svg
    return (
        '<div class="layoutkit" style="display:flex;flex-wrap:wrap;gap:1.5em;'
        'align-items:flex-start">'
        f"<div>{picture}</div>"
        f'<table><caption style="text-align:left;font-weight:bold">{html.escape(title)}'
        f"</caption>{table}</table></div>"
    )
