#!/usr/bin/env bash
# Where data parallelism's time goes on short steps (device kind nvidia-h200-x2 or -x4; about 4 min):
# W = 1, 2 (4 where seen) for the VGG-style CNN and the small LM (default mode), PyTorch DDP beside, and
# bench_ddp.py's --diag variants with --timeline at the largest W. Carries the CUDA library built here.
#     OUT=/tmp/o bash bench/device/ddp_diag.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ddp-diag}
. bench/device/ddp_env.sh
J="$OUT/diag.jsonl"; : >"$J"
M=${MODELS:-cnn,lm}
NG=$(nvidia-smi -L | wc -l); WS="1 2"; [ "$NG" -ge 4 ] && WS="1 2 4"; WM=${WS##* }
for n in $WS; do
  timeout 60 "${MPIRUN[@]}" -n $n python3 bench/bench_ddp.py run --model $M --timeline --steps 30 --out "$J"
  timeout 60 python3 -m torch.distributed.run --standalone --nproc_per_node $n \
    bench/bench_ddp_torch.py --model $M --steps 30 --out "$J"
done
for d in ${DIAGS:-solo after nocheck highprio hostwait}; do
  timeout 40 "${MPIRUN[@]}" -n $WM python3 bench/bench_ddp.py run --model $M --diag $d --timeline --steps 30 --out "$J"
done
timeout 60 "${MPIRUN[@]}" -n 2 python3 bench/bench_ddp.py run --model cnn --profile 5 --tag prof --steps 10 --out "$J"
python3 bench/bench_ddp.py table "$J"
