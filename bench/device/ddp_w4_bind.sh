#!/usr/bin/env bash
# Whether binding each rank to its own cores steadies short data-parallel steps on 4 GPUs
# (device kind nvidia-h200-x4; about 2 min): REPS rounds of W = 1 and W = 4, default mode, cnn
# and lm, unbound (--bind-to none) and bound (--map-by slot:PE=8 --bind-to core).
#     OUT=/tmp/o bash bench/device/ddp_w4_bind.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ddp-w4-bind}
. bench/device/ddp_env.sh
J="$OUT/bind.jsonl"; : >"$J"
lscpu | grep -E "^(Model name|Socket|Core|Thread|CPU\(s\)|NUMA)" || true
BOUND=(mpirun --map-by slot:PE=8 --bind-to core --report-bindings -x NCCL_NVLS_ENABLE -x PYTHONPATH
       -x TORCHLEAN_BACKEND -x TORCHLEAN_DIST_TIMEOUT_S -x LD_LIBRARY_PATH -x PATH)
B="bench/bench_ddp.py run --model cnn,lm --steps 40 --timeline --out $J"
for rep in $(seq ${REPS:-2}); do
  for n in 1 4; do
    timeout 90 "${MPIRUN[@]}" -n $n python3 $B --tag "none$n.$rep" 2>&1 | grep "^## " | tail -2
    timeout 90 "${BOUND[@]}" -n $n python3 $B --tag "bound$n.$rep" 2>&1 | grep "^## \|bound to" | tail -6
  done
done
python3 bench/bench_ddp.py runs "$J"
