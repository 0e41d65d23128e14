"""The README's commands and code are tested: every Python block runs, `.ci/run` runs exactly
the README's test command, and every relative link points to a file in the repository."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
GPU_MARK = "# needs: gpu"


def fenced_blocks(language):
    """Bodies of the README's fenced code blocks written in ``language``."""
    pattern = rf"^```{language}[ \t]*\n(.*?)^```[ \t]*$"
    return [textwrap.dedent(body) for body in re.findall(pattern, README, re.M | re.S)]


def shell_commands():
    return [line.strip() for block in fenced_blocks("bash") for line in block.splitlines()]


def python_block_params():
    params = []
    for number, block in enumerate(fenced_blocks("python"), start=1):
        first_line = block.strip().splitlines()[0]
        marks = [pytest.mark.cuda] if first_line.strip() == GPU_MARK else []
        params.append(pytest.param(block, id=f"block{number}", marks=marks))
    return params


def test_readme_has_python_examples():
    assert len(fenced_blocks("python")) >= 4


@pytest.mark.parametrize("block", python_block_params())
def test_python_block_runs(block):
    # each block is a complete script, run on its own like a user pasting it
    result = subprocess.run(
        [sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"README block failed:\n{block}\n{result.stderr}"


def test_readme_gives_one_line_demo_and_test_commands():
    commands = shell_commands()
    demo = [c for c in commands if c.endswith("python -m layoutkit")]
    tests = [c for c in commands if '".[test]"' in c
             and c.endswith("python -m pytest -n auto --dist loadfile")]
    assert len(demo) == 1 and demo[0].startswith("python3 -m venv .venv && ")
    assert len(tests) == 1 and tests[0].startswith("python3 -m venv .venv && ")


def test_ci_runs_exactly_the_readme_test_command_then_ruff():
    (test_command,) = [c for c in shell_commands() if '".[test]"' in c]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f"readme_test_command='{test_command}'" in ci
    assert 'eval "$readme_test_command"' in ci
    assert "set -euo pipefail" in ci
    assert ci.index('eval "$readme_test_command"') < ci.index("\nruff check .")


def test_relative_links_point_to_files():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    relative = [link for link in links if "://" not in link and not link.startswith("mailto:")]
    assert relative, "the README links its notebooks and documents"
    missing = [link for link in relative if not (ROOT / link).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_readme_links_every_notebook():
    notebooks = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for notebook in notebooks:
        assert f"({notebook})" in README, f"README does not link {notebook}"
