#!/usr/bin/env bash
# The data-parallel table on 4 GPUs in one call of about 6 minutes (device kind nvidia-h200-x4):
# REPS interleaved rounds of W = 1, 2, 4 over NVLink, torchlean default and exact against
# PyTorch DDP, the three models of bench_ddp.py; the emulated network (NCCL_P2P_DISABLE=1
# NCCL_SHM_DISABLE=1: NCCL's socket transport) at W = 4; all-reduce cost per size on both
# transports at W = 4; the scaling model's fits, check and predictions. Writes ddp-h200x4.md.
#     OUT=/tmp/o bash bench/device/ddp_final.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ddp-final}
. bench/device/ddp_env.sh
J="$OUT/ddp.jsonl"; S="$OUT/socket.jsonl"; A="$OUT/allreduce.jsonl"; : >"$J"; : >"$S"; : >"$A"
for rep in $(seq ${REPS:-2}); do
  for n in 1 2 4; do
    for mode in default exact; do
      timeout 90 "${MPIRUN[@]}" -n $n python3 bench/bench_ddp.py run --model cnn,lm,gpt --mode $mode \
        --steps 30 --out "$J" 2>&1 | q
    done
    timeout 90 "${TR[@]}" $n bench/bench_ddp_torch.py --model cnn,lm,gpt --steps 30 --out "$J" 2>&1 | q
  done
done
for mode in default exact; do
  timeout 90 "${SOCKET[@]}" "${MPIRUN[@]}" -n 4 python3 bench/bench_ddp.py run --model cnn,lm,gpt \
    --mode $mode --steps 20 --out "$S" 2>&1 | q
done
timeout 90 "${SOCKET[@]}" "${TR[@]}" 4 bench/bench_ddp_torch.py --model cnn,lm,gpt --steps 20 \
  --out "$S" 2>&1 | q
timeout 40 "${MPIRUN[@]}" -n 4 python3 bench/bench_ddp_model.py allreduce --tag nvlink --out "$A" 2>&1 | q
timeout 60 "${SOCKET[@]}" "${MPIRUN[@]}" -n 4 python3 bench/bench_ddp_model.py allreduce --tag socket \
  --out "$A" 2>&1 | q
grep '"world": 1' "$J" >>"$S"
MD="$OUT/ddp-h200x4.md"
{
  timeout 20 python3 bench/bench_ddp.py table "$J"
  echo; echo "## Emulated network at W = 4 (socket transport; the 1-GPU column is the NVLink run's)"
  echo; timeout 20 python3 bench/bench_ddp.py table "$S" | tail -n +2
  echo; timeout 60 python3 bench/bench_ddp_model.py predict --allreduce "$A" --steps "$J" \
    --socket-steps "$S"
} >"$MD"
cat "$MD"
