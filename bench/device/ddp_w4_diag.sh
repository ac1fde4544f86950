#!/usr/bin/env bash
# Where the time of data parallelism at W = 4 goes (device kind nvidia-h200-x4; about 6 min):
# the GPUs' links, cnn and lm in default and exact mode at W = 1, 2, 4 with host timelines,
# PyTorch DDP at W = 1, 2, 4, bench_ddp.py's --diag variants at W = 4, NCCL's CTA cap and
# protocol as tagged variants, and rank 0's kernels at W = 4. Carries the CUDA library built here.
#     OUT=/tmp/o bash bench/device/ddp_w4_diag.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ddp-w4-diag}
. bench/device/ddp_env.sh
nvidia-smi topo -m
J="$OUT/diag.jsonl"; : >"$J"
M=${MODELS:-cnn,lm}
R() { timeout 60 "${MPIRUN[@]}" "$@" 2>&1 | grep -v '^{'; }
for n in 1 2 4; do
  for mode in default exact; do
    R -n $n python3 bench/bench_ddp.py run --model $M --mode $mode --timeline --steps 30 --out "$J"
  done
  timeout 60 python3 -m torch.distributed.run --standalone --nproc_per_node $n \
    bench/bench_ddp_torch.py --model $M --steps 30 --out "$J" 2>&1 | grep -v '^{' | tail -2
done
for d in ${DIAGS:-solo after nocheck}; do
  R -n 4 python3 bench/bench_ddp.py run --model $M --diag $d --timeline --steps 30 --out "$J"
done
R -n 4 python3 bench/bench_ddp.py run --model $M --mode exact --diag solo --timeline --steps 30 --out "$J"
for v in "NCCL_MAX_CTAS=4 ctas4" "NCCL_MAX_CTAS=16 ctas16" "NCCL_PROTO=Simple simple" "NCCL_ALGO=Tree tree"; do
  set -- $v
  env "$1" "${MPIRUN[@]}" -x "${1%%=*}" -n 4 python3 bench/bench_ddp.py run --model $M --tag "$2" \
    --timeline --steps 30 --out "$J" 2>&1 | grep -v '^{'
done
R -n 4 python3 bench/bench_ddp.py run --model cnn --profile 5 --tag prof --steps 10 --out "$J"
R -n 4 python3 bench/bench_ddp.py run --model lm --mode exact --profile 5 --tag prof --steps 10 --out "$J"
python3 bench/bench_ddp.py table "$J" | tee "$OUT/ddp-w4-diag.md"
