#!/bin/bash
# Issue 24, items 1-2 on the GPU (repo root, after `make -j16 stub cuda`; $OUT: output folder):
# the attention CUDA tests under each backward variant, the attention bench against SDPA for
# each variant, and the GPT-width step. About 4 minutes; every step has its own timeout.
set -u
export TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/f24a-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T="tests/test_attention_tiles.py tests/test_attention.py tests/test_attention_api.py"
NOEMU="not emulation and not tiled_ and not exact_kernels and not onepass and not 32_key"  # CPU-only
echo "== smoke: one-pass backward against the two kernels at bench sizes"
if ! timeout 60 python3 bench/attention_smoke.py; then
    echo "one-pass backward FAILED or hung: its bench columns are not valid"
fi
echo "== CUDA tests, default (two-kernel backward; the one-pass one in the smoke above)"
timeout 150 python3 -m pytest -q -x $T -k "$NOEMU" 2>&1 | tail -25
echo "== CUDA tests, TORCHLEAN_ATTN_BWD=two TORCHLEAN_ATTN_FWD_KEYS=32"
TORCHLEAN_ATTN_BWD=two TORCHLEAN_ATTN_FWD_KEYS=32 timeout 60 python3 -m pytest -q -x tests/test_attention.py tests/test_attention_tiles.py -k "($NOEMU) and (float64 or deterministic or head_dims)" 2>&1 | tail -25
echo "== CUDA tests, norm, fused ops (linear_residual), their registry cases"
timeout 90 python3 -m pytest -q -x tests/test_norm.py tests/test_fused_ops.py tests/test_registry_ops.py -k "not registry or linear_residual or linear_gelu or layer_norm or cross_entropy_rows" 2>&1 | tail -25
echo "== attention bench (forward key tile 64)"
timeout 120 python3 bench/bench_attention.py --reps 10 --out "$OUT/attention.md" 2>&1
echo "== attention bench, TORCHLEAN_ATTN_FWD_KEYS=32 (forward columns)"
TORCHLEAN_ATTN_FWD_KEYS=32 timeout 60 python3 bench/bench_attention.py --reps 10 --shapes 0,3,4 --out "$OUT/attention-k32.md" 2>&1
echo "== GPT-width step"
timeout 120 python3 bench/bench_gpt_step.py --out "$OUT/gpt-step.md" 2>&1
echo "== GPT-width step, kernels by time (torch.profiler)"
timeout 60 python3 bench/profile_gpt_step.py --steps 3 --top 22 2>&1 | tail -52
