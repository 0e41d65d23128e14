"""Print the parity table: ``python -m helpers.parity_audit [python njit cuda sim]``
(run from ``tests/``; ``sim`` runs in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``)."""

import json
import os
import subprocess
import sys

from helpers import parity as P


def outcome(function, *args):
    """``"ok"``, ``"refused: <first line>"`` (a TypingError) or the exception class name."""
    from numba.core.errors import TypingError

    try:
        return "ok", function(*args)
    except TypingError as error:
        return "refused: " + _message(error), None
    except Exception as error:  # noqa: BLE001 - the class is the result
        return type(error).__name__ + ": " + str(error).splitlines()[0][:80], None


def _message(error):
    lines = [line for line in str(error).splitlines() if line.strip()]
    for line in lines:
        if "StridedLayout" in line or "view" in line.lower() or "compiled" in line:
            return line.strip()[:160]
    return lines[0][:160] if lines else ""


def python_column(entry):
    return outcome(P.python_function(entry), P.subject(entry))


def njit_column(entry):
    from numba import njit

    x = P.subject(entry)
    status, value = outcome(njit(P.python_function(entry)), x)
    if status == "ok":
        python_status, expected = outcome(P.python_function(entry), x)
        if python_status != "ok" or not P.same_result(expected, value, entry.kind):
            return f"differs: {value!r} vs Python {expected!r}"
    return status


def cuda_column(entry):
    import types

    import numba.cuda.dispatcher as dispatcher
    from numba import cuda
    from numba import types as nt

    import layoutkit.cuda  # noqa: F401 - registers the CUDA side
    from layoutkit._numba_layout import layout_type
    from layoutkit._numba_view import view_numba_type

    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
    x = P.subject(entry)
    arg = layout_type(x.ndim) if entry.subject == "layout" else view_numba_type(x, for_cuda=True)
    status, _ = outcome(lambda: cuda.compile_ptx(P.make_kernel(entry), (nt.int64[:], arg), cc=(9, 0)))
    return status


def sim_column(entry):
    import numpy as np

    import layoutkit.cuda

    kernel = layoutkit.cuda.jit(P.make_kernel(entry))
    out = np.zeros(1, np.int64)

    def launch(x):
        kernel[1, 1](out, x)
        return int(out[0])

    return outcome(launch, P.subject(entry))[0]


def main(columns):
    if "sim" in columns and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        sim = subprocess.run(
            [sys.executable, "-m", "helpers.parity_audit", "--json", "sim"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        simulated = json.loads(sim.splitlines()[-1])
        columns = [c for c in columns if c != "sim"]
    else:
        simulated = None
    table = []
    for entry in P.ENTRIES:
        row = {"name": entry.name, "subject": entry.subject, "expr": entry.expr}
        for column in columns:
            function = globals()[f"{column}_column"]
            result = function(entry)
            row[column] = result[0] if isinstance(result, tuple) else result
        table.append(row)
    if simulated is not None:
        for row, sim_row in zip(table, simulated, strict=True):
            row["sim"] = sim_row["sim"]
    return table


if __name__ == "__main__":
    as_json = "--json" in sys.argv
    columns = [a for a in sys.argv[1:] if not a.startswith("--")] or ["python", "njit", "cuda", "sim"]
    table = main(columns)
    if as_json:
        print(json.dumps(table))
    else:
        for row in table:
            cells = " | ".join(str(row.get(c, "")) for c in ["python", "njit", "cuda", "sim"])
            print(f"{row['subject']:6} {row['expr']:70} | {cells}")
