#!/usr/bin/env bash
# One GPU call for exact_version 3 (rule 3's k chunks): builds nothing. Runs the exact-parity and
# exact-GEMM tests on the carried CUDA library (stub = CUDA bit for bit, the chunk rule against
# its closed form, split-K and in-kernel fold shapes), then the GEMM rows of
# bench/bench_models_cuda.py (exact GEMM vs cuBLAS). With BEFORE_LIB_DIR set (a directory holding
# an exact_version 2 libtorchlean_cuda.so), the GEMM rows run on it too, for before/after.
# Carry .whl, torchlean/lib/libtorchlean_cuda.so; logs land in $OUT.
set -u
OUT=${OUT:-/tmp/torchlean-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/install.log" 2>&1
  export PYTHONPATH="/tmp/site:$PWD"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
s=$(date +%s)
TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 timeout ${TESTS_S:-300} python3 -m pytest -q \
  -p no:cacheprovider -rfE -n ${JOBS:-8} tests/test_exact_parity.py tests/test_exact_gemm.py \
  tests/test_exact_linalg.py tests/test_exact_attention_spectral_scan.py tests/test_exact_version.py \
  >"$OUT/tests.log" 2>&1
echo "exact tests rc=$? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/tests.log")" | tee -a "$OUT/summary.txt"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -40 | tee -a "$OUT/summary.txt"
gemm_rows() {  # $1: label, $2: markdown out
  TORCHLEAN_BACKEND=cuda timeout ${GEMM_S:-150} python3 bench/bench_models_cuda.py --sections gemm \
    --no-torch --out "$2" >"$OUT/gemm-$1.log" 2>&1
  echo "gemm ($1) rc=$?" | tee -a "$OUT/summary.txt"
  grep "^|" "$2" | tee -a "$OUT/summary.txt"
}
gemm_rows after "$OUT/gemm-after.md"
if [ -n "${BEFORE_LIB_DIR:-}" ]; then
  TORCHLEAN_LIB_DIR="$BEFORE_LIB_DIR" gemm_rows before "$OUT/gemm-before.md"
fi
