#!/usr/bin/env bash
# f24.sh: whole-step capture on the GPU (issue 24 item 3): the graph_step tests and the capture
# bench (MLP, small CNN, LM d256: torchlean eager / graph vs torch eager / graph). Runs from the
# repo root after `make -j16 stub cuda`; writes $OUT/graph-step.md. About 60 s.
set -u
OUT=${OUT:-/tmp/f24-out}
mkdir -p "$OUT"
export TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== graph_step tests"
timeout 25 python3 -m pytest -q -rf --tb=short tests/test_graph_step.py 2>&1 | tail -60
echo "=== bench"
timeout 40 python3 bench/bench_graph_step.py --steps 20 --repeats 3 --out "$OUT/graph-step.md" 2>&1 | tail -12
