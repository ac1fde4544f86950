#!/bin/bash
# f20 on a GPU: the CUDA suites of what this branch touched (generated normalize kernels and
# rms_norm, softmax and cross_entropy_rows on the stub's formulas in default mode, rand_normal's
# one transform, attention backward's shared staging, scan), exact parity included; then
# default- and exact-mode times of those ops beside torch. Run from the repo root after
# `make -j16 stub cuda`; F20_SKIP_TESTS=1 times only.
set -u
cd "$(dirname "$0")/../.."
export TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
if [ "${F20_SKIP_TESTS:-0}" != 1 ]; then
  echo "== CUDA tests (exact parity first)"
  timeout 400 python3 -m pytest -q -n 8 --maxfail=40 -p no:cacheprovider \
    tests/test_exact_parity.py tests/test_exact_pointwise.py tests/test_exact_reduce.py \
    tests/test_exact_attention_spectral_scan.py tests/test_exact_linalg.py tests/test_silu_rms_norm.py \
    tests/test_norm.py tests/test_softmax.py tests/test_fused_ops.py tests/test_rng.py tests/test_session_rng_methods.py tests/test_scan.py \
    tests/test_elementwise.py tests/test_attention.py tests/test_attention_api.py 2>&1 | tail -40
  echo "== registry ops on CUDA (rms_norm, softmax, cross_entropy, sigmoid family, scan, attention)"
  timeout 200 python3 -m pytest -q -n 8 --maxfail=20 -p no:cacheprovider tests/test_registry_ops.py \
    -k "rms or softmax or cross_entropy or sigmoid or softplus or safe_log or scan or attention or normal" \
    2>&1 | tail -15
fi
echo "== times (ms per call, median of 5 batches; torch CUDA events)"
timeout 240 python3 - <<'PY'
import math, statistics, time
import numpy as np
import torchlean as tl
from torchlean import AnyBuffer, ops
try:
    import torch
except ImportError:
    torch = None

def rel(o):
    for b in (o if isinstance(o, (tuple, list)) else [o]):
        b.release()

def t_tl(fn, reps=5):
    rel(fn()); tl.synchronize()
    t0 = time.perf_counter(); rel(fn()); tl.synchronize()
    it = max(1, min(200, math.ceil(0.05 / max(time.perf_counter() - t0, 1e-6))))
    out = []
    for _ in range(reps):
        tl.synchronize(); t0 = time.perf_counter()
        for _ in range(it):
            rel(fn())
        tl.synchronize(); out.append((time.perf_counter() - t0) / it * 1e3)
    return statistics.median(out)

def t_torch(fn, reps=20):
    if torch is None:
        return float("nan")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        s.record(); fn(); e.record(); e.synchronize(); out.append(s.elapsed_time(e))
    return statistics.median(out)

rng = np.random.default_rng(0)
up = AnyBuffer.from_numpy
print(f"{'op':44s} {'default':>9s} {'exact':>9s} {'torch':>9s}")
def row(name, fn, tfn=None):
    d = t_tl(fn)
    tl.set_exact(True)
    try:
        x = t_tl(fn)
    finally:
        tl.set_exact(False)
    tt = t_torch(tfn) if tfn else float("nan")
    print(f"{name:44s} {d:9.4f} {x:9.4f} {tt:9.4f}", flush=True)

for r, c in [(16384, 4096), (65536, 1024), (65536, 256)]:
    a = rng.standard_normal((r, c)).astype(np.float32)
    X, G = up(a), up(rng.standard_normal((r, c)).astype(np.float32))
    XT = torch.from_numpy(a).cuda() if torch else None
    Y = ops.softmax(X)
    row(f"softmax {r}x{c}", lambda: ops.softmax(X), (lambda: torch.softmax(XT, -1)) if torch else None)
    row(f"softmax_backward {r}x{c}", lambda: ops.softmax_backward(Y, G))
    row(f"log_softmax {r}x{c}", lambda: ops.log_softmax(X), (lambda: torch.log_softmax(XT, -1)) if torch else None)
    rel(Y); rel(X); rel(G)
for r, c in [(8192, 768), (4096, 4096), (65536, 64)]:
    a = rng.standard_normal((r, c)).astype(np.float32)
    X, W, G = up(a), up(rng.uniform(0.5, 1.5, c).astype(np.float32)), up(rng.standard_normal((r, c)).astype(np.float32))
    XT = torch.from_numpy(a).cuda() if torch else None
    WT = torch.ones(c, device="cuda") if torch else None
    y, inv = ops.rms_norm(X, W)
    tfn = (lambda: torch.nn.functional.rms_norm(XT, (c,), WT, 1.1920928955078125e-07)) if torch else None
    row(f"rms_norm {r}x{c}", lambda: ops.rms_norm(X, W), tfn)
    row(f"rms_norm_backward {r}x{c}", lambda: ops.rms_norm_backward(G, X, inv, W))
    rel((y, inv, X, W, G))
for r, c in [(8192, 8192), (4096, 32000)]:
    a = rng.standard_normal((r, c)).astype(np.float32)
    lab = rng.integers(0, c, r)
    X = up(a)
    XT, LT = (torch.from_numpy(a).cuda(), torch.from_numpy(lab).cuda()) if torch else (None, None)
    loss, m, ls = ops.cross_entropy_rows(X, labels=lab)
    G = up(np.ones(r, np.float32))
    row(f"cross_entropy_rows {r}x{c}", lambda: ops.cross_entropy_rows(X, labels=lab),
        (lambda: torch.nn.functional.cross_entropy(XT, LT, reduction="none")) if torch else None)
    row(f"cross_entropy_rows_backward {r}x{c}", lambda: ops.cross_entropy_rows_backward(G, X, m, ls, labels=lab))
    rel((loss, m, ls, X, G))
row("rand_normal 16M", lambda: ops.rand_normal(n=1 << 24, key=7), (lambda: torch.randn(1 << 24, device="cuda")) if torch else None)
PY
