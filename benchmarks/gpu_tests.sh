#!/usr/bin/env bash
# Every `cuda`-marked test on the device machine, in parallel processes, with one log each,
# and the producer tests that need the image's torch, CuPy and JAX.
# A cold run is mostly kernel compilation (one core per process), so the copy tests are
# split by case family and run side by side; a fault that poisons one CUDA context fails
# only its own group. Usage from the repository root, after the numpy wheel is installed:
#   bash benchmarks/gpu_tests.sh OUTDIR [LIMIT_SECONDS]
set -u
out=${1:?usage: gpu_tests.sh OUTDIR [LIMIT_SECONDS]}
limit=${2:-420}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/numba-cache}
start=$(date +%s)
copy=tests/test_copy_cuda.py

group() {  # group NAME PYTEST-ARGS...: one pytest process in the background
    local name=$1
    shift
    (
        timeout "$limit" python3 -m pytest -q -p no:cacheprovider -rfEs \
            -W ignore::numba.core.errors.NumbaPerformanceWarning "$@" > "$out/$name.log" 2>&1
        echo "exit $? after $(( $(date +%s) - start ))s" >> "$out/$name.log"
    ) &
}

group views -m cuda --ignore="$copy" tests
# not cuda-marked, but torch, CuPy and JAX are installed on the GPU image only
group producers -m "not cuda" tests/test_interop_producers.py tests/test_dlpack.py
group copy_random -m cuda "$copy" -k test_random_layouts
group generator_device -m cuda "$copy" -k "test_generator_layouts and device-device"
group generator_other -m cuda "$copy" -k "test_generator_layouts and not device-device"
for itemsize in 1 2 3 4 8 12 16; do
    group "named_$itemsize" -m cuda "$copy" -k "test_named_layouts and -$itemsize]"
done
group copy_other -m cuda "$copy" -k "not test_random_layouts and not test_generator_layouts and not test_named_layouts"
wait

echo "== cuda tests, $(( $(date +%s) - start ))s (logs in $out)"
for log in "$out"/*.log; do
    printf '%-18s %s | %s\n' "$(basename "$log" .log)" \
        "$(grep -E '(passed|failed|error|skipped|no tests ran)' "$log" | tail -n 1 | cut -c1-120)" \
        "$(tail -n 1 "$log")"
done
grep -hE '^(FAILED|ERROR) ' "$out"/*.log | cut -c1-300
