#!/usr/bin/env bash
# Data parallel at W = 1, 2, 4 over NVLink in one call of about 6 minutes (device kind
# nvidia-h200-x4): torchlean default and exact against PyTorch DDP for the three models of
# bench_ddp.py, then exact data parallel at W = 3 and 4 on CUDA against accumulation (tests).
# Carries .whl and torchlean/lib/libtorchlean_cuda.so (built here); builds only the stub.
#     OUT=/tmp/o bash bench/device/ddp_w4.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ddp-w4}
. bench/device/ddp_env.sh
J="$OUT/ddp.jsonl"; : >"$J"
for n in 1 2 4; do
  for mode in default exact; do
    timeout 75 "${MPIRUN[@]}" -n $n python3 bench/bench_ddp.py run --model cnn,lm,gpt --mode $mode \
      --steps 20 --out "$J" | grep -v "^{"
  done
  timeout 75 python3 -m torch.distributed.run --standalone --nproc_per_node $n \
    bench/bench_ddp_torch.py --model cnn,lm,gpt --steps 20 --out "$J" 2>&1 | grep -v "^{" | tail -2
done
TORCHLEAN_REQUIRE_CUDA=1 timeout 120 python3 -m pytest -q -rfEs -p no:cacheprovider \
  tests/test_distributed.py -k "four_gpus or four_ranks or three_ranks or exact_equals or default_mode" 2>&1 | tail -5
python3 bench/bench_ddp.py table "$J" > "$OUT/ddp-h200x4.md"
cat "$OUT/ddp-h200x4.md"
