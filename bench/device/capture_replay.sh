#!/usr/bin/env bash
# GPU call for a captured step's host time per replay (nvidia-h200), run from the project root
# with .whl and torchlean/lib/libtorchlean_cuda.so (built with `make cuda`) in place: graph_step's
# tests on CUDA, the staging race probe, the replay's host-time split, --python-only and the
# graph-step table beside PyTorch. BASE (optional): another checkout, with its own CUDA library,
# whose replay split is measured first in the same call (the numbers before a change).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/build.log" 2>&1
export PYTHONPATH="/tmp/site:$PWD"
make -j16 stub >>"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
{ nvidia-smi -L; cat REV 2>/dev/null; date -u; } | tee "$OUT/device.txt"
export TORCHLEAN_BACKEND=cuda
if [ -n "${BASE:-}" ]; then
  (cd "$BASE" && make -j16 stub >/dev/null 2>&1 &&
   PYTHONPATH="/tmp/site:$BASE" timeout 90 python3 bench/probes/replay_host.py) \
    2>&1 | tee "$OUT/replay-host-base.txt"
fi
TORCHLEAN_REQUIRE_CUDA=1 timeout 150 python3 -m pytest -q -p no:cacheprovider \
  tests/test_graph_step.py tests/test_graph_step_host.py tests/test_mutation_capture.py \
  >"$OUT/tests-cuda.txt" 2>&1
tail -3 "$OUT/tests-cuda.txt"
timeout 60 python3 bench/probes/staging_race.py 2>&1 | tee "$OUT/staging-race.txt"
timeout 90 python3 bench/probes/replay_host.py 2>&1 | tee "$OUT/replay-host.txt"
timeout 60 python3 bench/bench_graph_step.py --python-only 2>&1 | tail -4 | tee "$OUT/python-only.txt"
timeout 200 python3 bench/bench_graph_step.py >"$OUT/bench-graph-step.txt" 2>&1
tail -6 "$OUT/bench-graph-step.txt"
