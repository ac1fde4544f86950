#!/usr/bin/env bash
# GPU calls of this round (nvidia-h200). Carry .whl, torchlean/lib/libtorchlean_cuda.so and
# build/cuda-bench/libtorchlean_cuda.so; the stub is built there; logs and tables in $OUT.
#   OUT=/tmp/o STEPS="suite catalog special" bash bench/device/round42.sh   # first call
#   OUT=/tmp/o STEPS="models audit" bash bench/device/round42.sh            # second call
# suite: the whole CUDA suite; catalog: the heavy catalog ops against PyTorch; special: the
# exhaustive ndtri check on the host's threads; models: issue 34's table; audit: recording on
# CUDA against the stub, and its cost.
set -u
OUT=${OUT:-/tmp/torchlean-gpu-out}; mkdir -p "$OUT"
STEPS=${STEPS:-suite}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/build.log" 2>&1
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
make -j16 stub >>"$OUT/build.log" 2>&1 && make symbols-check 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
if has suite; then
  s=$(date +%s)
  TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 timeout ${SUITE_S:-330} python3 -m pytest -q \
    -p no:cacheprovider -rfE -n 14 tests >"$OUT/suite.log" 2>&1
  echo "suite rc=$? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/suite.log")" | tee -a "$OUT/summary.txt"
  grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | head -40 | tee -a "$OUT/summary.txt"
fi
if has catalog; then
  TORCHLEAN_BACKEND=cuda timeout 150 python3 bench/bench_catalog_cuda.py --out "$OUT/catalog-cuda.md" \
    >"$OUT/catalog.log" 2>&1
  echo "catalog rc=$?" | tee -a "$OUT/summary.txt"
fi
if has special; then
  make build/check_special >>"$OUT/build.log" 2>&1
  OMP_NUM_THREADS=$(nproc) timeout ${SPECIAL_S:-200} build/check_special ${SPECIAL_FNS:-ndtri} 2>&1 \
    | tee "$OUT/check-special.txt" | tail -6 | tee -a "$OUT/summary.txt"
fi
if has models; then
  TORCHLEAN_BACKEND=cuda timeout $(( ${MODELS_S:-200} + 40 )) python3 bench/bench_models_cuda.py \
    --sections ${MODEL_SECTIONS:-gemm,models} --out "$OUT/models-exact.md" --budget-s ${MODELS_S:-200} \
    >"$OUT/models.log" 2>&1
  echo "models rc=$?" | tee -a "$OUT/summary.txt"; grep "^|" "$OUT/models-exact.md" | head -40
fi
if has audit; then
  {
    R=/tmp/records; mkdir -p $R
    for ex in two_layer_net cnn_classifier; do
      for be in cuda stub; do
        TORCHLEAN_BACKEND=$be timeout 60 python3 -m torchlean.audit run --out $R/$ex.$be.tlaudit \
          -- python3 examples/$ex.py --steps 3 --exact --no-progress 2>&1 | tail -1
      done
      python3 -m torchlean.audit diff $R/$ex.cuda.tlaudit $R/$ex.stub.tlaudit; echo "diff exit $?"
    done
    timeout 150 python3 bench/bench_audit.py --backend cuda --model digits_cnn mlp_digits \
      --out "$OUT/audit-cost-cuda.md"; cat "$OUT/audit-cost-cuda.md"
  } >"$OUT/audit.log" 2>&1
  tail -20 "$OUT/audit.log"
fi
exit 0
