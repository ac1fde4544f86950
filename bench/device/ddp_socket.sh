#!/usr/bin/env bash
# Data parallel over NCCL's socket transport (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, as between
# nodes) at W = SW (default 2; device kind nvidia-h200-x2, about 4 minutes): REPS interleaved
# rounds of W = 1 and W = SW, torchlean default and exact against PyTorch DDP, the three models
# of bench_ddp.py. Under these variables distributed.crosses_network() holds, so torchlean caps
# the first bucket at 1 MB; the runs print it. Writes ddp-socket.md.
#     OUT=/tmp/o bash bench/device/ddp_socket.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ddp-socket}
. bench/device/ddp_env.sh
SW=${SW:-2}
S="$OUT/socket.jsonl"; : >"$S"
"${SOCKET[@]}" "${MPIRUN[@]}" -n "$SW" python3 -c "
import torchlean.distributed as d; d.init()
print('rank', d.get_rank(), 'crosses_network', d.crosses_network())
d.destroy_process_group()" 2>&1 | grep crosses
for rep in $(seq ${REPS:-2}); do
  for mode in default exact; do
    timeout 90 "${MPIRUN[@]}" -n 1 python3 bench/bench_ddp.py run --model cnn,lm,gpt --mode $mode \
      --steps 20 --out "$S" 2>&1 | q
    timeout 90 "${SOCKET[@]}" "${MPIRUN[@]}" -n "$SW" python3 bench/bench_ddp.py run --model cnn,lm,gpt \
      --mode $mode --steps 20 --out "$S" 2>&1 | q
  done
  timeout 90 "${TR[@]}" 1 bench/bench_ddp_torch.py --model cnn,lm,gpt --steps 20 --out "$S" 2>&1 | q
  timeout 90 "${SOCKET[@]}" "${TR[@]}" "$SW" bench/bench_ddp_torch.py --model cnn,lm,gpt --steps 20 \
    --out "$S" 2>&1 | q
done
MD="$OUT/ddp-socket.md"
{ echo "## Socket transport at W = $SW (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1; W = 1 without)"
  echo; timeout 20 python3 bench/bench_ddp.py table "$S"; } >"$MD"
cat "$MD"
timeout 20 python3 bench/bench_ddp.py runs "$S"
