#!/usr/bin/env bash
# One GPU call: the whole CUDA suite on the carried CUDA library, the catalog table against
# torch, and the audit's CUDA checks (stub = CUDA records, batched digests, recording cost).
# Carry .whl, torchlean/lib/libtorchlean_cuda.so; logs land in $OUT.
set -u
OUT=${OUT:-/tmp/torchlean-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/build.log" 2>&1
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
make -j16 stub >>"$OUT/build.log" 2>&1 && make symbols-check 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
s=$(date +%s)
TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 timeout ${SUITE_S:-330} python3 -m pytest -q \
  -p no:cacheprovider -rfE -n 14 tests >"$OUT/suite.log" 2>&1
echo "suite rc=$? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/suite.log")" | tee -a "$OUT/summary.txt"
grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | head -40 | tee -a "$OUT/summary.txt"
TORCHLEAN_BACKEND=cuda timeout 100 python3 bench/bench_catalog_cuda.py --out "$OUT/catalog-cuda.md" \
  >"$OUT/catalog.log" 2>&1; echo "catalog rc=$?" | tee -a "$OUT/summary.txt"
{
  R=/tmp/records; mkdir -p $R
  for ex in two_layer_net cnn_classifier; do
    for be in cuda stub; do
      TORCHLEAN_BACKEND=$be timeout 60 python3 -m torchlean.audit run --out $R/$ex.$be.tlaudit \
        -- python3 examples/$ex.py --steps 3 --exact --no-progress 2>&1 | tail -1
    done
    python3 -m torchlean.audit diff $R/$ex.cuda.tlaudit $R/$ex.stub.tlaudit; echo "diff exit $?"
  done
  TORCHLEAN_BACKEND=cuda timeout 60 python3 bench/gpu_audit_batch.py; echo "batch exit $?"
  for m in digits_cnn mlp_digits; do
    TORCHLEAN_BACKEND=cuda timeout 60 python3 bench/bench_audit.py --model $m
  done
} >"$OUT/audit.log" 2>&1
tail -30 "$OUT/audit.log"
