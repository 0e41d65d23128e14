"""Every notebook runs top to bottom without errors (on CPU in CI), and its GPU cells say
whether they ran."""

import importlib.util
from pathlib import Path

import pytest
from conftest import gpu_unavailable_reason

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
GPU_SKIP_MESSAGE = "skipped: no GPU"

pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


def load_executor():
    spec = importlib.util.spec_from_file_location("execute_notebooks", NOTEBOOKS / "execute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cell_text(cell):
    parts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            parts.append(output["text"])
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
    return "".join(parts)


def test_there_are_notebooks():
    assert len(sorted(NOTEBOOKS.glob("*.ipynb"))) >= 4


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_notebook_runs_without_errors(path):
    notebook = load_executor().execute(path, timeout=600)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells and all(cell.execution_count for cell in code_cells)
    errors = [o for c in code_cells for o in c.outputs if o["output_type"] == "error"]
    assert not errors
    gpu_cells = [cell for cell in code_cells if "gpu" in cell.metadata.get("tags", [])]
    for cell in gpu_cells:
        skipped = GPU_SKIP_MESSAGE in cell_text(cell)
        assert skipped == bool(gpu_unavailable_reason()), cell.source
