#!/usr/bin/env bash
# The audit on the GPU machine, in one command (carry .whl; see ../shared/device/README.md):
# build both libraries, record examples in exact mode on CUDA and on the stub and diff the two
# records (they must be identical), print certificates, time recording's cost on both backends
# and run tests/test_audit.py on CUDA. Everything goes to $OUT/audit_gpu.log.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/torchlean-gpu-out}
mkdir -p "$OUT"
LOG="$OUT/audit_gpu.log"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/build.log" 2>&1
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  s=$(date +%s)
  make -j"$(nproc)" stub cuda >>"$OUT/build.log" 2>&1 && echo "build ok ($(( $(date +%s) - s )) s)" \
    || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
  R=/tmp/records
  mkdir -p $R
  for ex in ${AUDIT_EXAMPLES:-two_layer_net cnn_classifier char_transformer fno_burgers selective_scan_seq gpt_char}; do
    for be in cuda stub; do
      TORCHLEAN_BACKEND=$be timeout 200 python3 -m torchlean.audit run --out $R/$ex.$be.tlaudit \
        -- python3 examples/$ex.py --steps ${AUDIT_STEPS:-3} --exact --no-progress 2>&1 | tail -1
    done
    echo "\$ python -m torchlean.audit diff $ex.cuda.tlaudit $ex.stub.tlaudit"
    python3 -m torchlean.audit diff $R/$ex.cuda.tlaudit $R/$ex.stub.tlaudit; echo "exit $?"
    python3 -m torchlean.audit certificate $R/$ex.cuda.tlaudit | tail -2
    python3 -m torchlean.audit certificate $R/$ex.stub.tlaudit | tail -2
  done
  echo "\$ python3 bench/gpu_audit_batch.py   (digest_batch on CUDA = stub's digests)"
  TORCHLEAN_BACKEND=cuda python3 bench/gpu_audit_batch.py; echo "exit $?"
  for m in digits_cnn mlp_digits; do
    TORCHLEAN_BACKEND=cuda python3 bench/bench_audit.py --model $m
    OMP_NUM_THREADS=1 TORCHLEAN_BACKEND=stub python3 bench/bench_audit.py --model $m
  done
  TORCHLEAN_BACKEND=cuda timeout 300 python3 -m pytest -q -x -p no:cacheprovider tests/test_audit.py tests/test_audit_batch.py 2>&1 | tail -5
} 2>&1 | tee "$LOG"
