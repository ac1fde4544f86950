#!/usr/bin/env bash
# Issue 34's one GPU run: build, the capture tests on CUDA (graph_step's replay path), then
# bench_models_cuda.py's whole table (seven models default/exact/torch, BatchNorm, attention,
# exact GEMM, captured-step host time), kernel profiles of the models where exact mode is
# slowest (default and exact), and graph_step's Python time per replay. Run on the
# device machine from the repo root, carrying .whl (cffi) and, to skip most of the build,
# build and torchlean/lib:   bash bench/gpu_models_exact.sh
# Every step runs under its own limit inside GPU_RUN_BUDGET_S (default 470 s); a failing step
# never stops the run. Files left in $OUT: summary.txt build.log tests.log bench.log
# models-exact.md profile-exact.txt python-replay.txt.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/torchlean-gpu-out}
mkdir -p "$OUT"
BUDGET=${GPU_RUN_BUDGET_S:-470}
START=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
. bench/gpu_steps.sh

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)" 2>&1
} | tee -a "$SUMMARY"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >>"$OUT/build.log" 2>&1 \
    || note "wheel install failed (see build.log)"
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"

step "build (make stub cuda)" "$OUT/build.log" 200 make -j"$(nproc)" stub cuda
step "capture tests (CUDA)" "$OUT/tests.log" 90 env TORCHLEAN_BACKEND=cuda python3 -m pytest -q \
  -p no:cacheprovider tests/test_graph_step.py tests/test_graph_step_host.py \
  tests/test_mutation_capture.py tests/test_optim.py
note "capture tests: $(grep -E '(passed|failed|error)' "$OUT/tests.log" | tail -n 1)"
step "bench_models_cuda" "$OUT/bench.log" 330 env TORCHLEAN_BACKEND=cuda \
  python3 bench/bench_models_cuda.py --out "$OUT/models-exact.md" \
  --budget-s $((BUDGET - ($(date +%s) - START) - 150))
step "exact-mode profiles" "$OUT/profile-exact.txt" 100 env TORCHLEAN_BACKEND=cuda \
  python3 bench/profile_models.py --models vgg,resnet,lm,gpt --modes default,exact --steps 3 --top 12
step "graph_step python side" "$OUT/python-replay.txt" 30 env TORCHLEAN_BACKEND=cuda \
  python3 bench/bench_graph_step.py --python-only
note "total $(($(date +%s) - START)) s"
exit 0
