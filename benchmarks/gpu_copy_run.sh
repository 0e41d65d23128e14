#!/usr/bin/env bash
# The copy engine's GPU run (issue 13) in one device call of under 8 minutes.
# Usage from the repository root on the GPU machine, after the numpy wheel is installed:
#   bash benchmarks/gpu_copy_run.sh OUTDIR bench   # kernel warm-up, cuda copy tests,
#                                                  # random-layout benchmark (summary last)
#   bash benchmarks/gpu_copy_run.sh OUTDIR tune    # warm-up, tuning variants, memcheck,
#                                                  # the named cases of bench_copy.py
#   bash benchmarks/gpu_copy_run.sh OUTDIR check SEED  # warm-up, the cuda copy tests in
#       # separate processes (a fault that poisons one CUDA context cannot fail the rest),
#       # memcheck, the random benchmark on SEED, the named cases; summary last
# Every step has its own time limit and log under OUTDIR; a failing step does not stop
# the others.
set -u
out=${1:?usage: gpu_copy_run.sh OUTDIR bench|tune|check [SEED]}
mode=${2:-bench}
seed=${3:-913}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/numba-cache}
start=$(date +%s)
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import sys, numpy, numba, numba.cuda, cuda.bindings; print(sys.version.split()[0], 'numpy', numpy.__version__, 'numba', numba.__version__)"
    python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__)"
    nproc
} > "$out/machine.txt" 2>&1

step() {
    local name=$1 limit=$2
    shift 2
    local begin=$(date +%s)
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    local status=$?
    echo "== $name: exit $status after $(( $(date +%s) - begin ))s (limit ${limit}s; total $(( $(date +%s) - start ))s)"
    tail -n 4 "$out/$name.log" | cut -c1-300
}

if [ "$mode" = check ]; then  # at most 7.3 minutes of step limits
    step warm 70 python3 benchmarks/warm_copy_kernels.py --seeds "$seed"
    tests="python3 -m pytest -m cuda -q -p no:cacheprovider tests/test_copy_cuda.py"
    step cuda_random 40 $tests -k "test_random_layouts"
    step cuda_generator 40 $tests -k "test_generator_layouts"
    step cuda_named 40 $tests -k "not sanitizer and not test_random_layouts and not test_generator_layouts"
    step memcheck 70 $tests -k sanitizer
    step random 130 python3 benchmarks/bench_copy_random.py --seeds "$seed" --cases 100 \
        --time-limit 95 --no-transfers --log "$out/random_cases.log"
    step named 45 python3 benchmarks/bench_copy.py --quick
    echo
    echo "== summary (seed $seed; logs in $out)"
    for name in warm cuda_random cuda_generator cuda_named memcheck random named; do
        printf '%-15s %s\n' "$name" "$(grep -E '(passed|failed|error|compiled|skipped)' "$out/$name.log" | tail -n 1 | cut -c1-150)"
    done
    echo
    sed -n '/^Device copies on/,$p' "$out/named.log" | head -n 45
    echo
    sed -n '/^Random layouts on/,$p' "$out/random.log"
    echo "total $(( $(date +%s) - start ))s"
    exit 0
fi
step warm 90 python3 benchmarks/warm_copy_kernels.py
if [ "$mode" = bench ]; then
    step cuda_tests 120 python3 -m pytest -m cuda -q -p no:cacheprovider -k "not sanitizer" \
        tests/test_copy_cuda.py
    step random 220 python3 benchmarks/bench_copy_random.py --time-limit 150 \
        --log "$out/random_cases.log"
    echo
    sed -n '/^Random layouts on/,$p' "$out/random.log"
else
    step tune 180 python3 benchmarks/tune_copy_gpu.py --time-limit 140 --log "$out/tune_cases.log"
    step memcheck 110 python3 -m pytest -m cuda -q -p no:cacheprovider -k sanitizer \
        tests/test_copy_cuda.py
    step named 60 python3 benchmarks/bench_copy.py --quick
    echo
    sed -n '/^variant /,$p' "$out/tune.log"
fi
echo "total $(( $(date +%s) - start ))s"
