"""Run hostile test cases in subprocesses, so that a crash, an abort or a hang is a failure.

A fuzz module declares its cases with a :class:`Cases` registry and turns them into
pytest tests with :meth:`Cases.export`::

    cases = Cases(__name__)

    @cases.case
    def copy_into_closed_buffer():
        ...  # plain Python; raise AssertionError (or anything) to fail

    cases.export(globals())  # defines test_copy_into_closed_buffer

Every case is one named pytest test, but cases do not get a process each: the first test of
a group starts one child interpreter that runs every selected case of the group in turn and
reports per-case outcomes as JSON lines through a pipe. If the child dies (signal, abort,
non-zero exit) the case it was running is re-run alone, to tell a case that crashes by
itself from one that dies of memory an earlier case corrupted, and the cases after it run
in a fresh child. A case that reports nothing within its timeout is a hang: the child is
killed and the case fails with the last input it noted. A child that crashes at exit,
after every case passed, has its cases re-run one by one to name the culprit.

Cases run without pytest's assertion rewriting, so they check through the helpers of
:mod:`helpers.hostile_checks` (``refused``, ``refused_or_ok``, ``Poisoned``,
``check_view``, ...), whose messages name what was tried and what came back.

The child is ``python -m helpers.hostile MODULE CASE...`` with ``tests/`` on ``sys.path``;
``faulthandler`` is on, so a crash's message includes the Python stack of the fault.
"""

import contextlib
import faulthandler
import functools
import gc
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback

from helpers.hostile_checks import describe

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TIMEOUT = 60.0  # seconds per case: generous, the machine is shared and Numba compiles
_GROUP_SIZE = 60


def slow_enabled():
    """Whether the long fuzz runs are asked for (``--runslow`` or ``LAYOUTKIT_SLOW=1``)."""
    return os.environ.get("LAYOUTKIT_SLOW", "") not in ("", "0")


# ------------------------------------------------------------------ inputs noted for crashes
_NOTES = None  # the child's report pipe (a file), or None in the parent


def note(value):
    """Record the input about to be tried, so a crash or hang can name it."""
    if _NOTES is not None:
        _emit({"note": describe(value, 2000)})


def _emit(record):
    _NOTES.write(json.dumps(record) + "\n")
    _NOTES.flush()


# ------------------------------------------------------------------ the registry
class Case:
    __slots__ = ("name", "function", "timeout", "slow", "env", "marks")

    def __init__(self, name, function, timeout, slow, env, marks):
        self.name = name
        self.function = function
        self.timeout = timeout
        self.slow = slow
        self.env = env
        self.marks = marks

    @property
    def group_key(self):
        return (self.slow, tuple(sorted(self.env.items())))


class Cases:
    """The hostile cases of one test module (see the module docstring)."""

    def __init__(self, module_name, group_size=_GROUP_SIZE):
        self.module_name = module_name
        self.group_size = group_size
        self.cases = {}
        self._results = {}

    def case(self, function=None, *, name=None, timeout=DEFAULT_TIMEOUT, slow=False, env=None,
             marks=()):  # fmt: skip
        """Register a case (decorator). ``env`` adds environment variables for its child."""
        if function is None:
            return functools.partial(
                self.case, name=name, timeout=timeout, slow=slow, env=env, marks=marks
            )
        name = name or function.__name__
        if name in self.cases:
            raise ValueError(f"duplicate hostile case {name!r}")
        self.cases[name] = Case(name, function, timeout, slow, dict(env or {}), tuple(marks))
        return function

    def add(self, name, function, **options):
        """Register ``function`` (taking no arguments) as case ``name``."""
        return self.case(function, name=name, **options)

    # -------------------------------------------------------------- pytest side
    def export(self, namespace):
        """Define one pytest test ``test_<case name>`` per case in ``namespace``."""
        import pytest

        for case in self.cases.values():

            def test(request, _name=case.name):
                self.check(_name, request)

            test.__name__ = test.__qualname__ = f"test_{case.name}"
            test.__doc__ = case.function.__doc__
            test.__module__ = self.module_name
            test._hostile_case = (self.module_name, case.name)
            for mark in case.marks:
                test = mark(test)
            if case.slow:
                test = pytest.mark.slow(test)
            namespace[test.__name__] = test

    def check(self, name, request=None):
        """Run ``name`` (with the other selected cases of its group) and fail as it did."""
        import pytest

        if name not in self._results:
            self._run_group(name, request)
        outcome = self._results[name]
        if outcome["outcome"] != "pass":
            pytest.fail(f"hostile case {name!r}: {outcome['message']}", pytrace=False)

    def _selected(self, request):
        if request is None:
            return None
        names = set()
        for item in request.session.items:
            marker = getattr(getattr(item, "function", None), "_hostile_case", None)
            if item.get_closest_marker("skip") is not None:
                continue
            if marker and marker[0] == self.module_name:
                names.add(marker[1])
        return names

    def _run_group(self, name, request):
        key = self.cases[name].group_key
        selected = self._selected(request)
        group = [
            c.name
            for c in self.cases.values()
            if c.group_key == key
            and c.name not in self._results
            and (selected is None or c.name in selected or c.name == name)
        ]
        start = group.index(name)
        chunk = group[start : start + self.group_size]
        self._results.update(run_cases(self.module_name, chunk, self.cases))


# ------------------------------------------------------------------ the parent: spawn and watch
def run_cases(module_name, names, cases):
    """Run cases ``names`` of ``module_name`` in child processes; return {name: outcome}."""
    results = {}
    pending = list(names)
    while pending:
        run = _spawn(module_name, pending, cases)
        results.update(run["results"])
        done = [n for n in pending if n in run["results"]]
        if run["status"] == "ok":
            for n in pending:
                results.setdefault(n, _failure(f"the child never reported it\n{run['log']}"))
            break
        culprit = run["culprit"]
        if culprit is None and not done:  # died before its first case (e.g. an import error)
            for n in pending:
                results[n] = _failure(
                    f"the child interpreter died ({run['status']}) before running any case\n"
                    f"{run['log']}"
                )
            break
        if culprit is None:  # every case reported, then the child died (at exit)
            if len(pending) == 1:
                results[pending[0]] = _failure(
                    f"passed, but its interpreter then died ({run['status']}) at exit: memory "
                    f"freed twice or corrupted?\n{run['log']}"
                )
            else:
                for n in done:
                    alone = _spawn(module_name, [n], cases)
                    if alone["status"] != "ok":
                        results[n] = _failure(
                            f"run alone, its interpreter died ({alone['status']}) at exit\n"
                            f"{alone['log']}"
                        )
                    else:
                        results[n] = alone["results"].get(n, results[n])
            break
        index = pending.index(culprit)
        message = run["message"]
        if run["status"] != "hang" and index > 0:
            alone = _spawn(module_name, [culprit], cases)
            if (
                alone["status"] == "ok"
                and alone["results"].get(culprit, {}).get("outcome") == "pass"
            ):
                message = (
                    f"{message}\nRun alone it passes: an earlier case in the same child may "
                    f"have corrupted memory (run before it: {', '.join(pending[:index])})"
                )
        results[culprit] = _failure(message)
        pending = pending[index + 1 :]
    return results


def _failure(message):
    return {"outcome": "fail", "message": message}


def _signal_name(returncode):
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def _spawn(module_name, names, cases):
    """One child running ``names``; returns results, how it ended and who it ended on."""
    with tempfile.TemporaryFile() as log:
        run = _watch(module_name, names, cases, log)
        run["log"] = _tail(log)
    noted = f"\nlast input noted: {run['note']}" if run["note"] else ""
    if run["status"] == "hang":
        current = run["culprit"]
        timeout = cases[current].timeout if current else DEFAULT_TIMEOUT
        run["message"] = f"no result within {timeout:.0f} s (a hang){noted}\n{run['log']}"
    else:
        run["message"] = f"the interpreter died ({run['status']}) running it{noted}\n{run['log']}"
    return run


def _watch(module_name, names, cases, log):
    """Start the child and follow its reports, killing it when a case overruns."""
    env = dict(os.environ)
    env.update(cases[names[0]].env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [TESTS_DIR, env.get("PYTHONPATH")]))
    env["PYTHONFAULTHANDLER"] = "1"
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-m", "helpers.hostile", module_name, str(write_fd), *names],
        cwd=TESTS_DIR,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        pass_fds=(write_fd,),
    )
    os.close(write_fd)
    results = {}
    current = None
    last_note = None
    deadline = time.monotonic() + DEFAULT_TIMEOUT
    pending = b""
    status = None
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                child.kill()
                child.wait()
                status = "hang"
                break
            ready, _, _ = select.select([pipe], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = pipe.read(65536)
            if not chunk:  # the child closed the pipe: it ended
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                record = json.loads(line)
                if "start" in record:
                    current = record["start"]
                    last_note = None
                    deadline = time.monotonic() + cases[current].timeout
                elif "note" in record:
                    last_note = record["note"]
                elif "end" in record:
                    results[record["end"]] = record
                    current = None
                    deadline = time.monotonic() + DEFAULT_TIMEOUT
    if status is None:
        try:
            returncode = child.wait(timeout=DEFAULT_TIMEOUT)
        except subprocess.TimeoutExpired:
            child.kill()
            returncode = child.wait()
            status = "hang"
        else:
            status = "ok" if returncode == 0 else _signal_name(returncode)
    return {"results": results, "status": status, "culprit": current, "note": last_note}


def _tail(log, limit=6000):
    """The last ``limit`` characters the child printed."""
    log.seek(0)
    data = log.read().decode("utf-8", "replace")
    if not data.strip():
        return "(no output)"
    return "output (tail):\n" + data[-limit:]


# ------------------------------------------------------------------ the child
def _child_main(argv):
    global _NOTES
    module_name, fd, *names = argv
    _NOTES = os.fdopen(int(fd), "w", buffering=1)
    faulthandler.enable()
    module = importlib.import_module(module_name)
    registry = next(v for v in vars(module).values() if isinstance(v, Cases))
    for name in names:
        _emit({"start": name})
        try:
            registry.cases[name].function()
            gc.collect()  # deleters and finalizers run inside the case that made them
        except BaseException as exc:
            record = {
                "end": name,
                "outcome": "fail",
                "message": "".join(traceback.format_exception(exc)),
            }
        else:
            record = {"end": name, "outcome": "pass"}
        _emit(record)
    with contextlib.suppress(Exception):
        _NOTES.close()


if __name__ == "__main__":  # run as ``-m helpers.hostile``: use the importable module's state
    from helpers import hostile

    hostile._child_main(sys.argv[1:])
