#!/usr/bin/env bash
# Everything that needs a GPU, in one run on the device machine (see BENCHMARKS.md):
# the `cuda`-marked tests, compute-sanitizer's memcheck on the copy and view kernels, the
# GPU benchmarks, and the notebooks executed in place (when nbclient is installed there).
# Usage there, from the repository root: bash benchmarks/gpu_session.sh OUTDIR
set -u
out=${1:?usage: gpu_session.sh OUTDIR}
mkdir -p "$out"
if [ -d .whl ]; then  # the GPU image's numpy 2.5 breaks numba-cuda: bring numpy 2.4
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD"
fi
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import sys, numpy, numba, numba.cuda, cuda.bindings; print(sys.version.split()[0], 'numpy', numpy.__version__, 'numba', numba.__version__, 'numba-cuda', numba.cuda.__version__ if hasattr(numba.cuda, '__version__') else '?')"
    python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__)"
} > "$out/machine.txt" 2>&1

bash benchmarks/gpu_tests.sh "$out/tests" > "$out/cuda_tests.log" 2>&1

if ! python3 -c "import nbclient, nbformat, ipykernel" 2>/dev/null && [ -d .whl-nb ]; then
    # the GPU image has no Jupyter: carried wheels (pip download nbclient nbformat ipykernel)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/nbsite .whl-nb/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/nbsite"
fi
if python3 -c "import nbclient, nbformat, ipykernel" 2>/dev/null; then
    timeout 150 python3 notebooks/execute.py > "$out/notebooks.log" 2>&1
    echo "exit: $?" >> "$out/notebooks.log"
    mkdir -p "$out/nb" && cp notebooks/*.ipynb "$out/nb/"
else
    echo "nbclient/ipykernel not installed on this machine" > "$out/notebooks.log"
fi

# bench_layout.py is CPU-only: its anchors (cuda.core, NumPy) are measured on the dev machine
{
    for run in "bench_launch.py:60" "bench_views.py:40" "bench_copy.py:140"; do
        script=${run%%:*}
        echo "===== $script"
        timeout "${run##*:}" python3 "benchmarks/$script"
        echo "exit: $?"
    done
} > "$out/benchmarks.txt" 2>&1
