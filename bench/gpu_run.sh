#!/usr/bin/env bash
# One GPU run, everything batched: build, symbol check, the CUDA suite, benchmarks, and a
# compute-sanitizer pass over a test subset. Run on the device machine from the repo root,
# carrying .whl (see ../shared/device/README.md):   bash bench/gpu_run.sh
#
# It keeps going past failures (each step's status goes to summary.txt) and stays inside a
# total budget (GPU_RUN_BUDGET_S, default 510 s, under the 10-minute command limit): every step
# gets at most its own limit and never more than what is left. The benchmark runs before the
# sanitizer so the table exists even when time runs short.
# Files left in $OUT: summary.txt build.log test-cuda.log bench.log cuda.md examples.md
# sanitize.log.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/torchlean-gpu-out}
mkdir -p "$OUT"
BUDGET=${GPU_RUN_BUDGET_S:-510}
START=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"

. bench/gpu_steps.sh   # note and step (the script runs from the repo root)

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  python3 --version
  /usr/local/cuda/bin/nvcc --version | tail -n 2
} | tee -a "$SUMMARY"

# cffi and pycparser are not on the GPU machine: install the carried wheels
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >>"$OUT/build.log" 2>&1 \
    || note "wheel install failed (see build.log)"
else
  note "no .whl/ carried: cffi may be missing"
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"

JOBS=$(nproc 2>/dev/null || echo 8)
step "build (make stub cuda)" "$OUT/build.log" 240 make -j"$JOBS" stub cuda
step "symbols-check" "$OUT/build.log" 30 make symbols-check
step "test-cuda" "$OUT/test-cuda.log" ${TEST_CUDA_LIMIT_S:-300} make test-cuda PYTEST_ARGS="${TEST_CUDA_ARGS:-}"
note "test-cuda result: $(grep -E '(passed|failed|error)' "$OUT/test-cuda.log" | tail -n 1)"
step "bench-cuda" "$OUT/bench.log" ${BENCH_CUDA_LIMIT_S:-240} make bench-cuda
[ -f bench/results/cuda.md ] && cp bench/results/cuda.md "$OUT/cuda.md"
[ -f bench/results/models.md ] && cp bench/results/models.md "$OUT/models.md"
if [ -f bench/bench_examples.py ]; then
  step "bench-examples" "$OUT/bench.log" 120 env TORCHLEAN_BACKEND=cuda \
    python3 bench/bench_examples.py --out bench/results/examples.md
  [ -f bench/results/examples.md ] && cp bench/results/examples.md "$OUT/examples.md"
fi
step "sanitize-cuda (subset)" "$OUT/sanitize.log" 150 make sanitize-cuda
note "sanitize result: $(grep -E 'ERROR SUMMARY|(passed|failed)' "$OUT/sanitize.log" | tail -n 2 | tr '\n' ' ')"
note "total $(($(date +%s) - START)) s"
exit 0
