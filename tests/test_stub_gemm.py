"""The stub's blocked GEMM keeps the naive per-element fma chain, bit for bit.

native/stub/linalg.c packs panels, tiles registers, splits k into slices and runs tasks in
parallel; none of that may change a bit: every C element must equal the float32 chain
c = 0; c = fma(a[i, k], b[k, j], c) for k = 0, 1, ... (rule 3's float32 chain; the exact GEMM's order
up to exact_version 6 while k <= 256; from version 7 the exact GEMM chains in float64).
tests/exact_fma.py's independent float32 fma, applied one k at a time, is the oracle. Shapes
straddle the micro-tile (8 x 32), k slice (at most 384, equal slices), row block (192), the
B panels packed 8 at a time for one row block, and in-place B (one tile row, or m <= 64 with
B in L2), and take the narrow road (p <= 16 outputs per row: A read in place, 8-row tiles, k
passes of 256) and the short road (k <= 16: nothing packed, 4 x 64 tiles, single vectors, then
scalar columns).
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torchlean as tl
from torchlean import ops
from exact_fma import fma_chain_reference, gemm_exact_reference

pytestmark = pytest.mark.skipif(tl.backend() != "stub", reason="checks the stub's GEMM order")

rng = np.random.default_rng(11)


def f32(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def sequential(a, b, c0=None):
    """float32 a @ b as one fma chain per element in increasing k, from c0 (zeros by default)."""
    return fma_chain_reference(a, b, None if c0 is None else np.asarray(c0, np.float32))


def buf(x):
    return tl.AnyBuffer.from_numpy(np.ascontiguousarray(x))


SHAPES = [(1, 1, 1), (3, 5, 7), (8, 256, 32), (9, 257, 33), (7, 255, 15), (17, 300, 16),
          (64, 40, 31), (65, 70, 65), (130, 513, 47), (33, 20, 300), (1, 600, 129),
          (9, 385, 33), (20, 769, 40),
          # narrow: p <= 16, k past one and several passes of 256, rows past one 8-row tile
          (130, 1000, 10), (9, 600, 1), (17, 257, 16), (8, 513, 3),
          # short: k <= 16, columns past whole 64-column tiles, single vectors, a scalar tail
          (128, 10, 300), (5, 16, 83), (3, 1, 70), (70, 7, 17), (9, 2, 1030)]


@pytest.mark.parametrize("m,n,p", SHAPES)
def test_matmul_is_the_sequential_sum(m, n, p):
    a, b = f32(m, n), f32(n, p)
    y = ops.matmul(buf(a), buf(b)).to_numpy()
    assert np.array_equal(y.view(np.uint32), sequential(a, b).view(np.uint32))


@pytest.mark.parametrize("ta,tb", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("m,n,p", [(9, 257, 33), (70, 30, 40)])
def test_transposed_operands_same_bits(m, n, p, ta, tb):
    a, b = f32(m, n), f32(n, p)
    sa = a.T.copy() if ta else a
    sb = b.T.copy() if tb else b
    y = ops.matmul_t(buf(sa[None]), buf(sb[None]), trans_a=ta, trans_b=tb).to_numpy()[0]
    assert np.array_equal(y.view(np.uint32), sequential(a, b).view(np.uint32))


def test_bmm_threads_over_the_batch_same_bits():
    # small products in a large batch run one product per thread: still the sequential sums
    a, b = f32(6, 40, 70), f32(6, 70, 50)
    y = ops.bmm(buf(a), buf(b)).to_numpy()
    for s in range(6):
        assert np.array_equal(y[s].view(np.uint32), sequential(a[s], b[s]).view(np.uint32))


def test_linear_accumulates_onto_the_bias_in_order():
    w, bias, x = f32(45, 300), f32(45), f32(70, 300)
    y = ops.linear(buf(w), buf(bias), buf(x)).to_numpy()
    want = sequential(x, w.T.copy(), np.broadcast_to(bias, (70, 45)))
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("rows,fin,fout", [(128, 2000, 10), (37, 700, 1), (7, 300, 16), (70, 12, 300)])
def test_linear_narrow_and_short_products_accumulate_onto_the_bias_in_order(rows, fin, fout):
    w, bias, x, g = f32(fout, fin), f32(fout), f32(rows, fin), f32(rows, fout)
    y = ops.linear(buf(w), buf(bias), buf(x)).to_numpy()
    want = sequential(x, w.T.copy(), np.broadcast_to(bias, (rows, fout)))
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))
    dx = ops.linear_backward_x(buf(g), buf(w), buf(x)).to_numpy()
    assert np.array_equal(dx.view(np.uint32), sequential(g, w).view(np.uint32))
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T.astype(np.float64) + bias, rtol=1e-4,
                               atol=1e-4 * np.sqrt(fin))


def test_narrow_and_short_products_carry_inf_and_nan_to_their_outputs_only():
    x, w = f32(20, 600), f32(600, 5)
    x[3, 100], w[7, 2] = np.inf, np.nan
    y = ops.matmul(buf(x), buf(w)).to_numpy()
    assert np.array_equal(y.view(np.uint32), sequential(x, w).view(np.uint32))
    assert np.isnan(y[:, 2]).all() and np.isinf(y[3, [0, 1, 3, 4]]).all()
    g, v = f32(40, 10), f32(10, 100)
    g[5, 4] = np.nan
    z = ops.matmul(buf(g), buf(v)).to_numpy()
    assert np.isnan(z[5]).all() and np.isfinite(np.delete(z, 5, axis=0)).all()
    assert np.array_equal(z.view(np.uint32), sequential(g, v).view(np.uint32))


# sizes from {1, 7, 31, 33, 129, 385, 777}: every blocking road of the packed GEMM with tails
ODD = [(7, 777, 385),    # one tile row (B read in place), three k slices
       (31, 129, 385),   # a few tile rows, B in L2: read in place
       (33, 385, 385),   # one row block: B packed 8 panels at a time, 12 panels and a column
       (129, 777, 33),   # one row block, a partial panel past a whole one, three k slices
       (1, 777, 129),    # a single row
       (385, 33, 777),   # row blocks of 192 and a tail, all of B packed ahead
       (777, 385, 31),   # many row blocks, one partial panel, two k slices
       (129, 129, 129)]


@pytest.mark.parametrize("m,n,p", ODD)
def test_odd_sizes_every_layout_is_the_sequential_sum(m, n, p):
    a, b = f32(m, n), f32(n, p)
    want = sequential(a, b)
    for ta, tb in [(False, False), (False, True), (True, False), (True, True)]:
        sa = a.T.copy() if ta else a
        sb = b.T.copy() if tb else b
        y = ops.matmul_t(buf(sa), buf(sb), trans_a=ta, trans_b=tb).to_numpy()
        assert np.array_equal(y.view(np.uint32), want.view(np.uint32)), (ta, tb)
    np.testing.assert_allclose(want, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4,
                               atol=1e-5 * np.sqrt(n))


# a transposed A is packed k by k across its row block: row counts that leave partial 8-row
# panels (in one row block and past a block of 192), single rows, odd k slices
@pytest.mark.parametrize("m,n,p", [(127, 513, 255), (197, 60, 50), (13, 300, 40), (1, 600, 40),
                                   (200, 390, 33), (385, 20, 17)])
def test_transposed_a_partial_panels_are_the_sequential_sum(m, n, p):
    a, b = f32(m, n), f32(n, p)
    want = sequential(a, b)
    for tb in (False, True):
        y = ops.matmul_t(buf(a.T.copy()), buf(b.T.copy() if tb else b), trans_a=True,
                         trans_b=tb).to_numpy()
        assert np.array_equal(y.view(np.uint32), want.view(np.uint32)), tb


@pytest.mark.parametrize("rows,fin,fout", [(7, 385, 777), (33, 777, 129), (385, 129, 33),
                                           (129, 31, 385), (777, 33, 7)])
def test_odd_sizes_linear_and_its_gradients_accumulate_in_order(rows, fin, fout):
    # linear starts each chain at the bias (the accumulate path) and reads W transposed; its
    # gradients take the transposed-A (dW = g^T x) and plain (dx = g W) layouts
    w, bias, x, g = f32(fout, fin), f32(fout), f32(rows, fin), f32(rows, fout)
    y = ops.linear(buf(w), buf(bias), buf(x)).to_numpy()
    want = sequential(x, w.T.copy(), np.broadcast_to(bias, (rows, fout)))
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))
    dw = ops.linear_backward_w(buf(g), buf(x)).to_numpy()
    assert np.array_equal(dw.view(np.uint32), sequential(g.T.copy(), x).view(np.uint32))
    dx = ops.linear_backward_x(buf(g), buf(w), buf(x)).to_numpy()
    assert np.array_equal(dx.view(np.uint32), sequential(g, w).view(np.uint32))
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T.astype(np.float64) + bias,
                               rtol=1e-4, atol=1e-5 * np.sqrt(fin))


@pytest.mark.parametrize("m,n,p", [(7, 129, 385), (33, 255, 385), (129, 33, 777),
                                   (385, 129, 33), (1, 256, 31)])
def test_odd_sizes_default_and_exact_gemm_follow_their_rules(m, n, p):
    # k <= 256: the blocked GEMM computes one float32 fma chain per output in k order, the exact
    # GEMM (gemm.c, a separate routine) one float64 chain rounded once (exact_version 7), plain
    # and from the bias
    a, b, bias = f32(m, n), f32(n, p), f32(p)
    got = _default_and_exact(a, b, bias)
    bias_rows = np.broadcast_to(bias, (m, p))
    assert np.array_equal(got[False][0].view(np.uint32), sequential(a, b).view(np.uint32))
    assert np.array_equal(got[False][1].view(np.uint32), sequential(a, b, bias_rows).view(np.uint32))
    assert np.array_equal(got[True][0].view(np.uint32), gemm_exact_reference(a, b).view(np.uint32))
    assert np.array_equal(got[True][1].view(np.uint32),
                          gemm_exact_reference(a, b, bias_rows).view(np.uint32))


def test_bits_do_not_depend_on_thread_count():
    code = ("import sys, hashlib, numpy as np; sys.path.insert(0, %r); import torchlean as tl; "
            "r = np.random.default_rng(3); a = r.uniform(-1, 1, (300, 270)).astype(np.float32); "
            "b = r.uniform(-1, 1, (270, 310)).astype(np.float32); "
            "y = tl.ops.matmul(tl.AnyBuffer.from_numpy(a), tl.AnyBuffer.from_numpy(b)).to_numpy(); "
            "c = r.uniform(-1, 1, (6, 40, 70)).astype(np.float32); "
            "d = r.uniform(-1, 1, (6, 70, 50)).astype(np.float32); "
            "z = tl.ops.bmm(tl.AnyBuffer.from_numpy(c), tl.AnyBuffer.from_numpy(d)).to_numpy(); "
            "e = r.uniform(-1, 1, (130, 3000)).astype(np.float32); "
            "f = r.uniform(-1, 1, (3000, 10)).astype(np.float32); "
            "u = tl.ops.matmul(tl.AnyBuffer.from_numpy(e), tl.AnyBuffer.from_numpy(f)).to_numpy(); "
            "v = tl.ops.matmul(tl.AnyBuffer.from_numpy(e[:, :10].copy()), "
            "tl.AnyBuffer.from_numpy(e[:10].copy())).to_numpy(); "
            "h = r.uniform(-1, 1, (70, 300)).astype(np.float32); "
            "k = r.uniform(-1, 1, (300, 1500)).astype(np.float32); "
            "w = tl.ops.matmul(tl.AnyBuffer.from_numpy(h), tl.AnyBuffer.from_numpy(k)).to_numpy(); "
            "x = tl.ops.matmul(tl.AnyBuffer.from_numpy(h[:7].copy()), "
            "tl.AnyBuffer.from_numpy(k)).to_numpy(); "
            "print(hashlib.sha256(y.tobytes() + z.tobytes() + u.tobytes() + v.tobytes() "
            "+ w.tobytes() + x.tobytes()).hexdigest())") % str(Path(__file__).resolve().parent.parent)
    digests = set()
    for threads in ("1", "2", "3"):
        env = dict(os.environ, OMP_NUM_THREADS=threads, TORCHLEAN_BACKEND="stub")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def _default_and_exact(a, b, bias):
    was = tl.is_exact()
    try:
        got = {}
        for exact in (False, True):
            tl.set_exact(exact)
            got[exact] = (ops.matmul(buf(a), buf(b)).to_numpy(),
                          ops.linear(buf(b.T.copy()), buf(bias), buf(a)).to_numpy())
    finally:
        tl.set_exact(was)
    return got


def test_within_one_chunk_the_exact_gemm_rounds_once_and_the_default_per_product():
    # k <= 256: the default is one float32 fma chain per element, the exact GEMM one float64
    # chain rounded once (exact_version 7): the bits differ somewhere at this size
    a, b, bias = f32(70, 233), f32(233, 41), f32(41)
    got = _default_and_exact(a, b, bias)
    assert np.array_equal(got[True][0].view(np.uint32), gemm_exact_reference(a, b).view(np.uint32))
    assert np.array_equal(got[False][0].view(np.uint32), sequential(a, b).view(np.uint32))
    assert not np.array_equal(got[True][0], got[False][0])


def test_past_one_chunk_the_exact_gemm_folds_float64_chunks_and_the_default_keeps_one_chain():
    a, b, bias = f32(70, 333), f32(333, 41), f32(41)
    got = _default_and_exact(a, b, bias)
    bias_rows = np.broadcast_to(bias, (70, 41))
    assert np.array_equal(got[False][0].view(np.uint32), sequential(a, b).view(np.uint32))
    assert np.array_equal(got[False][1].view(np.uint32), sequential(a, b, bias_rows).view(np.uint32))
    assert np.array_equal(got[True][0].view(np.uint32), gemm_exact_reference(a, b).view(np.uint32))
    assert np.array_equal(got[True][1].view(np.uint32),
                          gemm_exact_reference(a, b, bias_rows).view(np.uint32))
    assert not np.array_equal(got[True][0], got[False][0])  # the rules differ at this size
