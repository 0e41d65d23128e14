"""Execute every notebook in this folder in place, saving the outputs.

Usage: ``python notebooks/execute.py [NOTEBOOK ...] [--timeout SECONDS]``.

The kernel is always the interpreter running this script (a ``python3`` kernelspec pointing
at ``sys.executable`` is written to a temporary Jupyter path), so the notebooks see the same
packages, and this checkout's ``layoutkit`` comes first on the kernel's ``PYTHONPATH``. Needs only ``nbformat``, ``nbclient`` and ``ipykernel``. On a GPU
machine the cells tagged ``gpu`` run; elsewhere they print ``skipped: no GPU``.
"""

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parent


@contextlib.contextmanager
def _environment(**changes):
    saved = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


@contextlib.contextmanager
def this_interpreter_as_kernel():
    """Make the ``python3`` kernel run ``sys.executable``, importing this checkout first."""
    with tempfile.TemporaryDirectory() as jupyter_path:
        spec_dir = Path(jupyter_path, "kernels", "python3")
        spec_dir.mkdir(parents=True)
        spec = {
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (layoutkit)",
            "language": "python",
        }
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
        paths = {
            name: os.pathsep.join(filter(None, [first, os.environ.get(name)]))
            for name, first in [("JUPYTER_PATH", jupyter_path), ("PYTHONPATH", str(REPOSITORY))]
        }
        with _environment(**paths):
            yield


def execute(path, timeout=600):
    """Run the notebook at ``path`` top to bottom and return it with its outputs.

    Raises ``nbclient.exceptions.CellExecutionError`` when a cell fails.
    """
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(Path(path).parent)}},
    )
    with this_interpreter_as_kernel():
        client.execute()
    return notebook


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: all in notebooks/")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (600)")
    args = parser.parse_args(argv)
    for path in args.notebooks or sorted(HERE.glob("*.ipynb")):
        print(f"executing {path} ...", flush=True)
        nbformat.write(execute(path, args.timeout), path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
