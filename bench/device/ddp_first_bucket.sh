#!/usr/bin/env bash
# The first bucket's cap, A/B at W = 2 and 4 (WS; device kind nvidia-h200-x4 or -x2; ~3 min): REPS
# interleaved rounds of W = 1, then W = 2 and 4 with every bucket up to bucket_cap_mb (--diag
# firstcap, torchlean's within one host) and with the first capped at 1 MB (--diag first1mb,
# PyTorch's, and torchlean's over a network), default mode, cnn and lm. NCCL_P2P_DISABLE=1
# NCCL_SHM_DISABLE=1 in the environment (forwarded) measures the same over the socket transport.
#     OUT=/tmp/o bash bench/device/ddp_first_bucket.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ddp-first-bucket}
. bench/device/ddp_env.sh
J="$OUT/first.jsonl"; : >"$J"
B="bench/bench_ddp.py run --model cnn,lm --steps 30 --out $J"
for rep in $(seq ${REPS:-3}); do
  timeout 60 "${MPIRUN[@]}" -n 1 python3 $B --tag "w1" >/dev/null 2>&1
  for n in ${WS:-2 4}; do
    timeout 60 "${MPIRUN[@]}" -n $n python3 $B --diag firstcap >/dev/null 2>&1
    timeout 60 "${MPIRUN[@]}" -n $n python3 $B --diag first1mb >/dev/null 2>&1
  done
done
python3 bench/bench_ddp.py runs "$J"
