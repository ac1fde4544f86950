#!/usr/bin/env bash
# f21 (issue 21): exact GEMM tiles against cuBLAS, their parity with the stub, the exact
# gemm/linalg/spectral tests on CUDA, the FNO and LM models' exact/default, and where the FNO's
# exact step spends its time. Runs from the repo root after `make -j16 stub cuda`; about 4 min.
set -u
OUT=${OUT:-/tmp/f21-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
git log --oneline -1 2>/dev/null

echo "=== exact GEMM: every tile, parity with the stub and % of cuBLAS"
TORCHLEAN_BACKEND=cuda timeout 130 python3 bench/bench_gemm_exact.py --reps 3 --out "$OUT/gemm-exact.md"
echo "gemm bench rc=$?"

echo "=== exact tests on CUDA (gemm, linalg, spectral, registry parity of those ops)"
TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 timeout 60 python3 -m pytest -q -x \
  tests/test_exact_gemm.py tests/test_exact_linalg.py tests/test_spectral.py \
  tests/test_exact_attention_spectral_scan.py 2>&1 | tail -n 4
TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 timeout 40 python3 -m pytest -q -x \
  tests/test_exact_parity.py -k "gemm or matmul or bmm or linear or spectral or rfft or conv" 2>&1 | tail -n 3

echo "=== models: exact/default (torchlean only)"
TORCHLEAN_BACKEND=cuda timeout 70 python3 bench/bench_models.py --models fno,lm --no-torch \
  --budget-s 2 --out "$OUT/models.md" 2>&1 | grep -v '^$'

echo "=== FNO and LM kernels per step, default vs exact"
TORCHLEAN_BACKEND=cuda timeout 45 python3 bench/profile_models.py --models fno,lm --modes default,exact \
  --steps 3 --top 12 2>&1 | grep -v Warning
