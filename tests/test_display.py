"""The layout and view pictures are well-formed: parsed as XML / HTML, one cell per index,
the offsets written in the cells equal NumPy's (byte offset / itemsize), shared offsets and
negative strides are marked, large layouts fall back to text, and all text is escaped."""

import itertools
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pytest
from helpers.strategies import layouts
from hypothesis import given, settings

from layoutkit import StridedLayout
from layoutkit.display import MAX_CELLS, layout_html, layout_svg, view_html

SVG = "{http://www.w3.org/2000/svg}"


def numpy_offsets(layout):
    """Element offset of every index, read from a NumPy view with the same layout."""
    if layout.volume == 0:
        return {}
    low, high = layout.offset_bounds
    memory = np.arange(low, high + 1, dtype=np.int64)  # memory[k] holds offset low + k
    view = np.lib.stride_tricks.as_strided(
        memory[layout.slice_offset - low :],
        shape=layout.shape,
        strides=[s * memory.itemsize for s in layout.strides],
    )
    return {index: int(view[index]) for index in itertools.product(*map(range, layout.shape))}


def drawn_cells(svg):
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    cells = {}
    for rect in root.iter(f"{SVG}rect"):
        if rect.get("class") == "cell":
            index = tuple(int(i) for i in rect.get("data-index").split(",") if i)
            assert index not in cells, f"index {index} drawn twice"
            cells[index] = int(rect.get("data-offset"))
    written = [int(t.text) for t in root.iter(f"{SVG}text") if t.get("class") == "offset"]
    return root, cells, written


base = StridedLayout.dense((3, 4, 5), 4)
LAYOUTS = {
    "0-d": StridedLayout((), (), 8),
    "1-d": StridedLayout.dense((7,), 2),
    "1-d reversed": StridedLayout.dense((7,), 2)[::-1],
    "2-d C": StridedLayout.dense((3, 4), 4),
    "2-d F": StridedLayout.dense((3, 4), 4, stride_order="F"),
    "2-d negative steps": base[1, ::-1, 4:0:-2],
    "2-d broadcast": StridedLayout.dense((1, 4), 4).broadcast_to((3, 4)),
    "overlapping": StridedLayout((3, 3), (1, 1), 4),
    "3-d sliced": base[:, 1:, ::2],
    "4-d permuted": StridedLayout.dense((2, 3, 2, 4), 8).permuted((3, 1, 0, 2)),
    "offset": base[2, 3:],
    "empty": base[:, 2:2],
}


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_svg_draws_every_index_at_numpys_offset(layout):
    root, cells, written = drawn_cells(layout_svg(layout))
    expected = numpy_offsets(layout)
    assert len(cells) == layout.volume
    assert cells == expected
    assert sorted(written) == sorted(expected.values())


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_svg_summary_states_the_layout(layout):
    root, _, _ = drawn_cells(layout_svg(layout))
    summary = " ".join(t.text for t in root.iter(f"{SVG}text") if t.get("class") == "summary")
    assert f"shape {layout.shape}" in summary
    assert f"strides {layout.strides}" in summary
    assert f"itemsize {layout.itemsize}" in summary
    assert f"slice_offset {layout.slice_offset}" in summary
    assert f"is_unique {layout.is_unique}" in summary


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_any_layout_is_drawn_at_numpys_offsets_or_summarised(layout):
    svg = layout_svg(layout)
    page = parse_html(layout_html(layout))
    if svg is None:
        assert "too large to draw" in "".join(page.pre)
        return
    _, cells, written = drawn_cells(svg)
    assert cells == numpy_offsets(layout)
    assert len(written) == page.cells == layout.volume


def shared_indices(svg):
    root = ET.fromstring(svg)
    rects = list(root.iter(f"{SVG}rect"))
    # a "shared" overlay follows the cell it covers
    return {
        rects[k - 1].get("data-index")
        for k, rect in enumerate(rects)
        if rect.get("class") == "shared"
    }


def test_shared_offsets_are_hatched_and_unique_ones_are_not():
    broadcast = LAYOUTS["2-d broadcast"]
    assert len(shared_indices(layout_svg(broadcast))) == broadcast.volume
    assert "zero stride (broadcast axis)" in layout_svg(broadcast)
    overlapping = LAYOUTS["overlapping"]
    counts = {}
    for offset in numpy_offsets(overlapping).values():
        counts[offset] = counts.get(offset, 0) + 1
    expected = {
        ",".join(map(str, index))
        for index, offset in numpy_offsets(overlapping).items()
        if counts[offset] > 1
    }
    assert shared_indices(layout_svg(overlapping)) == expected
    assert shared_indices(layout_svg(LAYOUTS["2-d negative steps"])) == set()


def axis_labels(svg):
    root = ET.fromstring(svg)
    return [(t.text, t.get("fill")) for t in root.iter(f"{SVG}text") if t.get("class") == "axis"]


def test_negative_strides_get_red_arrows():
    negative = axis_labels(layout_svg(LAYOUTS["2-d negative steps"]))
    assert ("\u2190 -2", "#c62828") in negative  # columns: offsets fall to the right
    assert ("\u2191", "#c62828") in negative  # rows: offsets fall downwards
    positive = axis_labels(layout_svg(LAYOUTS["2-d C"]))
    assert ("\u2192 1", "#444") in positive and ("\u2193", "#444") in positive
    assert "negative stride" in layout_svg(LAYOUTS["1-d reversed"])
    assert "negative stride" not in layout_svg(LAYOUTS["2-d C"])


def test_higher_dimensions_draw_one_grid_per_leading_index():
    layout = LAYOUTS["4-d permuted"]
    root = ET.fromstring(layout_svg(layout))
    grids = [g for g in root.iter(f"{SVG}g") if g.get("class") == "grid"]
    leading = [",".join(map(str, i)) for i in itertools.product(*map(range, layout.shape[:2]))]
    assert [g.get("data-leading-index") for g in grids] == leading


class TagCounter(HTMLParser):
    """Checks that every opened tag is closed in order and counts cells and rows."""

    VOID = {"br", "hr", "img", "input", "meta", "link", "col", "area", "base", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack, self.cells, self.headers, self.pre = [], 0, [], []
        self.in_th = self.in_pre = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("class") == "cell":
            self.cells += 1
        self.in_th, self.in_pre = tag == "th", tag == "pre"
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        if dict(attrs).get("class") == "cell":
            self.cells += 1

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()
        self.in_th = self.in_pre = False

    def handle_data(self, data):
        if self.in_th:
            self.headers.append(data)
        if self.in_pre:
            self.pre.append(data)


def parse_html(page):
    parser = TagCounter()
    parser.feed(page)
    parser.close()
    assert parser.stack == [], f"unclosed tags {parser.stack}"
    return parser


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_html_is_well_formed_with_picture_and_properties(layout):
    parsed = parse_html(layout_html(layout))
    assert parsed.cells == layout.volume
    for name in ("shape", "strides", "itemsize", "slice_offset", "is_contiguous_c", "is_unique"):
        assert name in parsed.headers


@pytest.mark.parametrize(
    "layout",
    [
        StridedLayout.dense((1000, 1000), 4),
        StridedLayout.dense((3, 200), 4)[:, ::-1],
        StridedLayout.dense((100, 2, 2), 4),
        StridedLayout.dense((5, 7, 9, 11), 2),
    ],
    ids=["million", "wide", "many-grids", "4-d"],
)
def test_large_layouts_fall_back_to_text(layout):
    assert layout.volume > MAX_CELLS or max(layout.shape) > 64 or layout.shape[0] > 64
    assert layout_svg(layout) is None
    parsed = parse_html(layout_html(layout))
    assert parsed.cells == 0
    text = "".join(parsed.pre)
    assert "too large to draw" in text
    first = layout.slice_offset
    last_column = first + (layout.shape[-1] - 1) * layout.strides[-1]
    assert text.split("\n")[2].split()[0] == str(first)
    assert text.split("\n")[2].split()[-1] == str(last_column)


def test_text_is_escaped():
    class Shaped:
        shape, strides, itemsize, slice_offset = (2,), (1,), 4, 0

    class Hostile:
        layout = Shaped()
        dtype = "<script>alert(1)</script>"
        readonly = "a & b"

    page = view_html(Hostile())
    assert "<script>" not in page and "&lt;script&gt;" in page and "a &amp; b" in page
    parse_html(page)


def test_view_picture_shows_dtype_pointer_and_offsets():
    from layoutkit import StridedMemoryView

    array = np.arange(24, dtype=np.float32).reshape(4, 6)[::-2, 1::2]
    view = StridedMemoryView.from_array_interface(array)
    parsed = parse_html(view_html(view))
    assert parsed.cells == array.size
    for name in ("dtype", "ptr", "device_id", "readonly", "shape", "strides"):
        assert name in parsed.headers
    page = view_html(view)
    assert "float32" in page and hex(view.ptr) in page
    _, cells, _ = drawn_cells(layout_svg(view.layout))
    assert cells == numpy_offsets(view.layout)


def test_layouts_render_in_jupyter_through_these_functions():
    layout = LAYOUTS["2-d negative steps"]
    assert layout._repr_html_() == layout_html(layout)


def test_views_render_in_jupyter_through_these_functions():
    from layoutkit import StridedMemoryView

    view = StridedMemoryView.from_array_interface(np.arange(12.0).reshape(3, 4)[::-1, ::2])
    assert view._repr_html_() == view_html(view)


PATHOLOGICAL = {
    "empty beside 10**12": "StridedLayout((0, 10**12, 2, 2), None, 1)",
    "empty last": "StridedLayout((10**12, 2, 0), None, 1)",
    "empty, huge extents": "StridedLayout((2**62, 2**62, 0), None, 1)",
    "empty, 64-d": "StridedLayout((0,) + (2**62,) * 63, None, 1)",
    "64-d of extent 1": "StridedLayout((1,) * 64, None, 4)",
    "62-d of extent 2": "StridedLayout((2,) * 62 + (1, 1), (0,) * 64, 4)",
    "huge extents": "StridedLayout((10**9, 10**9), (0, 0), 1)",
    "huge strides": "StridedLayout((2, 3), (2**62, -(2**61)), 1)",
    "huge negative": "StridedLayout((3, 2**40), (2**20, -1), 8)[::-1]",
}


@pytest.mark.parametrize("code", PATHOLOGICAL.values(), ids=PATHOLOGICAL.keys())
def test_every_layout_renders_at_once(code):
    """No picture enumerates more than it draws: in a fresh process (a hang or a memory
    blow-up is a failure, not a stuck test run), each renders and the page parses."""
    probe = (
        "from layoutkit import StridedLayout\n"
        f"layout = {code}\n"
        "page = layout._repr_html_()\n"
        "print(len(page))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    page = layout_html(eval(code, {"StridedLayout": StridedLayout}))  # noqa: S307
    assert len(page) == int(result.stdout)
    parse_html(page)


def test_a_view_of_a_closed_buffer_still_displays():
    """view_html (Jupyter's _repr_html_) read device_id with hasattr, which lets everything
    but AttributeError through: a view of a closed buffer raised the buffer's RuntimeError
    ('cannot read device_id of a closed Buffer') where repr(view) works. Properties that
    cannot be read now say why; the picture and the layout's rows are drawn."""
    from layoutkit import HostMemoryResource, StridedMemoryView

    buffer = HostMemoryResource().allocate(96)
    view = StridedMemoryView.from_buffer(buffer, StridedLayout.dense((3, 4), 8), np.float64)
    buffer.close()
    for page in (view_html(view), view._repr_html_()):
        assert page.count('class="cell"') == 12 and "float64" in page
        assert "unknown (RuntimeError: buffer is closed" in page

    class Raising:
        layout = StridedLayout.dense((2, 2), 4)
        ptr = "not an int"

        @property
        def dtype(self):
            raise KeyError("dtype")

    page = view_html(Raising())
    assert "unknown (KeyError" in page and "not an int" in page and "device_id" not in page
