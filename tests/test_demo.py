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
    assert "--count must be >= 0 and at most 1000000, got -1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seed", "-1"], "--seed must be >= 0, got -1"),
        (["--count", "1000001"], "--count must be >= 0 and at most 1000000, got 1000001"),
        (["--count", str(10**30)], "--count must be >= 0 and at most 1000000"),
        (["--count", "1e3"], "argument --count: invalid int value: '1e3'"),
        (["--ndim", "x"], "argument --ndim: invalid int value: 'x'"),
        (["--ndim", "33"], "--ndim must be between 1 and 32, got 33"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--no-tour=1"], "ignored explicit argument '1'"),
    ],
)
def test_bad_options_are_usage_errors_not_tracebacks(args, message):
    """Every bad option ends with argparse's usage line and status 2: a negative seed was
    NumPy's ValueError with a traceback ('expected non-negative integer')."""
    result = run_demo(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.startswith("usage: python -m layoutkit")


def test_many_dimensions_keep_the_volume_bounded():
    """--ndim 32 drew extents 2-7 on every axis: dense((5, 5, 3, ...)) overflowed int64
    (an OverflowError traceback), and 12-14 dimensions built NumPy arrays of gigabytes."""
    result = run_demo("--no-tour", "--count", "4", "--ndim", "32", "--seed", "3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "4 of 4 layouts match NumPy"
    for _, layout, _, base in random_cases(20, 14, seed=1):
        assert base.size <= 2**20 and layout.ndim == 14
    assert run(random_cases(20, 14, seed=1)) == 0


def test_output_that_cannot_be_written_ends_without_a_traceback():
    """`python -m layoutkit | head -1` and a full disk raised BrokenPipeError / OSError from
    print with a traceback (and again at exit): now status 1, one line at most."""
    process = subprocess.Popen(
        [sys.executable, "-m", "layoutkit", "--count", "5000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    process.stdout.readline()
    process.stdout.close()  # the reader goes away, as head does
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=300) == 1
    assert stderr == "", stderr
    if sys.platform.startswith("linux"):
        with open("/dev/full", "w") as full:
            result = subprocess.run(
                [sys.executable, "-m", "layoutkit"], stdout=full, stderr=subprocess.PIPE,
                text=True, timeout=300,
            )  # fmt: skip
        assert result.returncode == 1
        assert result.stderr.strip() == (
            "python -m layoutkit: error: cannot write the output: [Errno 28] No space left on "
            "device"
        )
