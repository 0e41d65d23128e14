"""`python -m layoutkit` (the README's demo) checks layouts against NumPy and says so."""

import subprocess
import sys

import pytest

from layoutkit.__main__ import main, random_cases, run, tour_cases


def run_demo(*args):
    return subprocess.run(
        [sys.executable, "-m", "layoutkit", *args], capture_output=True, text=True, timeout=300
    )


def test_demo_runs_and_every_line_matches_numpy():
    result = run_demo()
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    checks = [line for line in lines if line.startswith(("OK", "FAIL"))]
    assert len(checks) == len(tour_cases()) + 8
    assert all(line.startswith("OK") for line in checks)
    assert lines[-1] == f"{len(checks)} of {len(checks)} layouts match NumPy"


@pytest.mark.parametrize("ndim", [1, 2, 4, 6])
def test_random_layouts_of_any_ndim_match_numpy(ndim, capsys):
    assert run(random_cases(40, ndim, seed=ndim)) == 0
    assert capsys.readouterr().out.count("OK") == 40


def test_a_wrong_layout_is_reported_and_fails():
    (description, layout, array, base), *_ = tour_cases()
    assert run([("permuted by mistake", layout.permuted((1, 0, 2)), array, base)]) == 1


def test_options_and_their_errors(capsys):
    assert main(["--no-tour", "--count", "3", "--ndim", "5", "--seed", "7"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "3 of 3 layouts match NumPy"
    with pytest.raises(SystemExit):
        main(["--ndim", "0"])
    assert "--ndim must be between 1 and 32, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--count", "-1"])
    assert "--count must be >= 0, got -1" in capsys.readouterr().err
