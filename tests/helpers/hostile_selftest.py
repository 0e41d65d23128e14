"""Cases that misbehave on purpose, to check that :mod:`helpers.hostile` catches each way.

Used only by ``tests/test_fuzz_harness.py``, which runs them through
:func:`helpers.hostile.run_cases` and checks the outcomes it reports.
"""

import atexit
import ctypes
import os
import time

from helpers.hostile import Cases, note

cases = Cases(__name__)


@cases.case
def passes():
    pass


@cases.case
def fails():
    raise AssertionError("this case fails")


@cases.case
def segfaults():
    note("reading address 8")
    ctypes.string_at(8)


@cases.case
def aborts():
    os.abort()


@cases.case(timeout=3)
def hangs():
    note("sleeping")
    time.sleep(60)


@cases.case
def dies_at_exit():
    atexit.register(os._exit, 3)


@cases.case
def passes_after():
    pass
