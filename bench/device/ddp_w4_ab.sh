#!/usr/bin/env bash
# Exact data parallel's all-to-all reduction on 4 GPUs, and the default mode's bucket and NCCL
# variants, interleaved (device kind nvidia-h200-x4; about 6 min): the CUDA distributed tests
# that run 2-4 GPUs, exact mode at W = 1, 2, 4 for the three models, then REPS rounds of
# W = 1 default, W = 4 default, W = 4 one bucket, W = 4 NCCL_MAX_CTAS=4 for cnn and lm.
#     OUT=/tmp/o bash bench/device/ddp_w4_ab.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ddp-w4-ab}
. bench/device/ddp_env.sh
J="$OUT/ab.jsonl"; : >"$J"
R() { timeout 90 "${MPIRUN[@]}" "$@" 2>&1 | grep -v '^{' | grep -v "^ *$" | tail -4; }
TORCHLEAN_REQUIRE_CUDA=1 timeout 200 python3 -m pytest -q -rfEs -p no:cacheprovider \
  tests/test_distributed.py tests/test_distributed_dp.py -k "gpu or cuda or four or three or exact or default_mode" 2>&1 | tail -6
for n in 1 2 4; do
  R -n $n python3 bench/bench_ddp.py run --model cnn,lm,gpt --mode exact --timeline --steps 30 --out "$J"
done
for rep in $(seq ${REPS:-2}); do
  R -n 1 python3 bench/bench_ddp.py run --model cnn,lm --steps 30 --out "$J"
  R -n 4 python3 bench/bench_ddp.py run --model cnn,lm --steps 30 --timeline --tag "r$rep" --out "$J"
  R -n 4 python3 bench/bench_ddp.py run --model cnn,lm --diag onebucket --tag "r$rep" --steps 30 --timeline --out "$J"
  NCCL_MAX_CTAS=4 R -x NCCL_MAX_CTAS -n 4 python3 bench/bench_ddp.py run --model cnn,lm --steps 30 --tag "ctas4r$rep" --timeline --out "$J"
done
python3 bench/bench_ddp.py table "$J" | tee "$OUT/ddp-w4-ab.md"
