"""The hostile-case harness itself: crashes, aborts, hangs and exit crashes are failures
that name the case, and the cases around them still run."""

from helpers import hostile, hostile_selftest


def outcomes(*names):
    return hostile.run_cases("helpers.hostile_selftest", list(names), hostile_selftest.cases.cases)


def test_pass_and_fail_are_reported_per_case():
    results = outcomes("passes", "fails", "passes_after")
    assert results["passes"]["outcome"] == "pass"
    assert results["passes_after"]["outcome"] == "pass"
    assert results["fails"]["outcome"] == "fail"
    assert "this case fails" in results["fails"]["message"]


def test_a_crash_names_its_case_and_the_rest_still_run():
    results = outcomes("passes", "segfaults", "aborts", "passes_after")
    assert results["passes"]["outcome"] == "pass"
    assert results["passes_after"]["outcome"] == "pass"
    segfault = results["segfaults"]["message"]
    assert "SIGSEGV" in segfault and "reading address 8" in segfault
    assert "segfaults" in segfault  # faulthandler's stack names the case function
    assert "SIGABRT" in results["aborts"]["message"]


def test_a_hang_is_killed_after_the_case_timeout():
    results = outcomes("hangs", "passes_after")
    assert "a hang" in results["hangs"]["message"]
    assert "sleeping" in results["hangs"]["message"]
    assert results["passes_after"]["outcome"] == "pass"


def test_a_crash_at_exit_is_traced_to_its_case():
    results = outcomes("passes", "dies_at_exit", "passes_after")
    assert results["passes"]["outcome"] == "pass"
    assert results["passes_after"]["outcome"] == "pass"
    assert results["dies_at_exit"]["outcome"] == "fail"
    assert "at exit" in results["dies_at_exit"]["message"]


def test_a_child_that_cannot_start_fails_every_case():
    from helpers.hostile import run_cases

    results = run_cases("helpers.no_such_module", ["passes"], hostile_selftest.cases.cases)
    assert results["passes"]["outcome"] == "fail"
    assert "before running any case" in results["passes"]["message"]
    assert "ModuleNotFoundError" in results["passes"]["message"]
