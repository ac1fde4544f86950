#!/usr/bin/env bash
# f24.sh: whole-step capture on the GPU (issue 24 item 3): the graph_step tests, the related
# suites whose code it touches (rng, optimizers, CUDA runtime, memory), and the capture bench.
# Runs from the repo root after `make -j16 stub cuda`; writes under $OUT.
set -u
OUT=${OUT:-/tmp/f24-out}
mkdir -p "$OUT"
export TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "=== graph_step tests"
timeout 240 python3 -m pytest -q -rf --tb=short tests/test_graph_step.py 2>&1 | tail -80
echo "=== related suites"
timeout 180 python3 -m pytest -q -x -rf --tb=short tests/test_rng.py tests/test_session_rng_methods.py \
  tests/test_optim.py tests/test_optim_kernels.py tests/test_cuda_runtime.py tests/test_memory.py \
  tests/test_exact_version.py 2>&1 | tail -30
echo "=== bench"
timeout 240 python3 bench/bench_graph_step.py --out "$OUT/graph-step.md" 2>&1 | tail -30
echo "=== examples --graph"
for ex in mlp_digits digits_cnn char_transformer; do
  if grep -q -- "--graph" examples/$ex.py; then
    timeout 60 python3 examples/$ex.py --graph --steps 60 --no-progress 2>&1 | tail -2
    timeout 60 python3 examples/$ex.py --steps 60 --no-progress 2>&1 | tail -1
  fi
done
