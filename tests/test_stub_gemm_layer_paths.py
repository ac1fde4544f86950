"""The stub GEMM's paths for linear layers' shapes keep every output's fma chain, bit for bit.

native/stub/linalg.c has two paths for a linear layer's odd shapes: narrow products by rows
(p <= 12 outputs per row, m >= 16 rows: 16 rows of A transposed into the vector lanes, a
classifier head such as VGG's 8192 -> 10) and short-and-wide products (8 < m <= 12 rows, p >= 64
columns: one tile over all rows, B read in place, the weight gradient of such a head). Each
output must stay the float32 chain c = start; c = fma(a[i, k], b[k, j], c) for k = 0, 1, ...:
checked against tests/exact_fma.py's independent chain, against a float64 product (tolerance),
and against the paths these products took before (TORCHLEAN_STUB_GEMM_OLDER_PATHS=1, another
process) at 1 and 2 threads.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torchlean as tl
from torchlean import ops
from exact_fma import fma_chain_reference

pytestmark = pytest.mark.skipif(tl.backend() != "stub", reason="checks the stub's GEMM order")

ROOT = Path(__file__).resolve().parent.parent

# (m, k, p): narrow by rows (p <= 12, m >= 16: rows past a 16-row block, k past 16-k transposes
# and 128-k blocks), the row tiles beside them (m < 16, p 13..16), short-and-wide (m 9..12, p
# past 32- and 16-column tiles with a scalar tail, k past the short road's 16), the blocked path
# beside it (m 8 and 13, p < 64), and odd sizes: M = 1, K = 1, N = 1..47
NARROW = [(m, k, p) for m in (16, 17, 33, 128) for k in (1, 15, 17, 129, 300) for p in (1, 5, 10, 12)]
NARROW += [(15, 130, 10), (128, 8192, 10), (20, 257, 13), (40, 100, 16)]
TALL = [(m, k, p) for m in (9, 10, 12) for k in (17, 128) for p in (64, 65, 79, 80, 97, 200)]
TALL += [(8, 40, 100), (13, 40, 100), (10, 40, 63), (10, 128, 8192)]
ODD = [(m, k, p) for m in (1, 9, 16) for k in (1, 17) for p in range(1, 48)]
SHAPES = NARROW + TALL + ODD


def inputs(s, m, k, p):
    r = np.random.default_rng(s)
    a = r.uniform(-1, 1, (m, k)).astype(np.float32)
    b = r.uniform(-1, 1, (k, p)).astype(np.float32)
    bias = r.uniform(-1, 1, p).astype(np.float32)
    return a, b, bias


def buf(x):
    return tl.AnyBuffer.from_numpy(np.ascontiguousarray(x))


def products(a, b, bias):
    """the layer's three ways to this product: matmul, linear (onto the bias, W stored (p, k)),
    and a transposed A (a weight gradient's g^T)"""
    return {"nn": ops.matmul(buf(a), buf(b)).to_numpy(),
            "lin": ops.linear(buf(b.T), buf(bias), buf(a)).to_numpy(),
            "tn": ops.matmul_t(buf(a.T[None]), buf(b[None]), trans_a=True).to_numpy()[0]}


@pytest.mark.parametrize("m,k,p", NARROW + TALL[:6] + TALL[-4:])
def test_each_output_is_the_fma_chain(m, k, p):
    a, b, bias = inputs(0, m, k, p)
    got = products(a, b, bias)
    chain = fma_chain_reference(a, b)
    on_bias = fma_chain_reference(a, b, np.broadcast_to(bias, (m, p)))
    for name, want in (("nn", chain), ("lin", on_bias), ("tn", chain)):
        assert np.array_equal(got[name].view(np.uint32), want.view(np.uint32)), name
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got["nn"], exact, rtol=0, atol=1e-5 * max(k, 1) ** 0.5 * 4)
    np.testing.assert_allclose(got["lin"], exact + bias, rtol=0, atol=1e-5 * max(k, 1) ** 0.5 * 4)


def test_linear_layer_gradients_are_the_fma_chains():
    # VGG's classifier head, batch 128: forward (narrow by rows), dW = g^T x (short and wide),
    # dX = g W (the short road)
    r = np.random.default_rng(5)
    x, w = r.uniform(-1, 1, (128, 8192)).astype(np.float32), r.uniform(-1, 1, (10, 8192)).astype(np.float32)
    g = r.uniform(-1, 1, (128, 10)).astype(np.float32)
    dw = ops.linear_backward_w(buf(g), buf(x)).to_numpy()
    assert np.array_equal(dw.view(np.uint32), fma_chain_reference(g.T, x).view(np.uint32))
    dx = ops.linear_backward_x(buf(g), buf(w), buf(x)).to_numpy()
    assert np.array_equal(dx.view(np.uint32), fma_chain_reference(g, w).view(np.uint32))


def test_inf_and_nan_propagate_as_in_the_chain():
    a, b, bias = inputs(3, 33, 40, 10)
    a[2, 5], a[20, 7], b[3, 4] = np.inf, np.nan, -np.inf
    got = products(a, b, bias)
    want = fma_chain_reference(a, b)
    assert np.array_equal(np.isnan(got["nn"]), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got["nn"][ok].view(np.uint32), want[ok].view(np.uint32))
    a, b, bias = inputs(4, 10, 40, 100)
    a[2, 5], b[3, 40] = np.inf, -np.inf
    got, want = products(a, b, bias)["tn"], fma_chain_reference(a, b)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))


def _dump(path, threads, older):
    code = ("import json, sys\n"
            "import numpy as np\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "sys.path.insert(0, sys.argv[2])\n"
            "from test_stub_gemm_layer_paths import SHAPES, inputs, products\n"
            "out = {}\n"
            "for s, (m, k, p) in enumerate(SHAPES):\n"
            "    for name, y in products(*inputs(s, m, k, p)).items():\n"
            "        out[f'{m}x{k}x{p}_{s}_{name}'] = y\n"
            "np.savez(sys.argv[3], **out)\n")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TORCHLEAN_BACKEND="stub")
    env.pop("TORCHLEAN_STUB_GEMM_OLDER_PATHS", None)
    if older:
        env["TORCHLEAN_STUB_GEMM_OLDER_PATHS"] = "1"
    subprocess.run([sys.executable, "-c", code, str(ROOT), str(ROOT / "tests"), str(path)],
                   env=env, check=True, capture_output=True, text=True)
    return np.load(path)


def test_same_bits_as_the_older_paths_at_1_and_2_threads(tmp_path):
    old = _dump(tmp_path / "old.npz", 1, True)
    for threads in (1, 2):
        new = _dump(tmp_path / f"new{threads}.npz", threads, False)
        assert sorted(new.files) == sorted(old.files)
        bad = [k for k in old.files if not np.array_equal(old[k].view(np.uint32), new[k].view(np.uint32))]
        assert not bad, (threads, bad[:10])
