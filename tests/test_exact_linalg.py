"""Exact mode for the linalg, conv_pool and dgemm families equals the canonical order bit for bit.

Each reference below is an independent NumPy emulation of the rules of native/common/tl_math.h
(README "Reproducibility levels"): rule 3 (one fma chain per output in k order, from 0 or from
the bias; exact_fma.py), rule 4 (chunks of 256 summed in order from their first value, then the
pairwise tree), col2im adding each cell's taps in kernel-offset order, pooling backward adding
each window's shares window by window. Shapes go past one chunk (256) and one GEMM tile, with odd
sizes and size 1. The same tests run on CUDA, where passing means CUDA gives the stub's bits.
Results are also checked against float64 NumPy, so a shared wrong formula cannot pass.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import torchlean as tl
from torchlean import ops
from torchlean.dgemm import dgemm

from exact_fma import gemm_exact_reference, gemm_fma_reference

CHUNK = 256


@pytest.fixture(autouse=True)
def exact_mode():
    tl.set_exact(True)
    yield
    tl.set_exact(False)


def buf(x):
    return tl.AnyBuffer.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def same_bits(got, want):
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float32)
    assert got.shape == want.shape
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    bad = np.argwhere(~same)
    assert bad.size == 0, f"{len(bad)} of {got.size} differ; first at {bad[0]}: {got[tuple(bad[0])]!r} vs {want[tuple(bad[0])]!r}"


def rule4_rows(x):
    """Rule 4 along the last axis of float32 x, for every leading index at once."""
    x = np.asarray(x, np.float32)
    n = x.shape[-1]
    parts = []
    for c0 in range(0, n, CHUNK):
        s = x[..., c0].copy()
        for j in range(c0 + 1, min(n, c0 + CHUNK)):
            s = (s + x[..., j]).astype(np.float32)
        parts.append(s)
    if not parts:
        return np.zeros(x.shape[:-1], np.float32)
    while len(parts) > 1:
        nxt = [(parts[2 * i] + parts[2 * i + 1]).astype(np.float32) for i in range(len(parts) // 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


def rng_f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- matmul, bmm, linear, mse

@pytest.mark.parametrize("m,n,p", [(1, 1, 1), (7, 300, 5), (130, 9, 129), (3, 1, 70)])
def test_matmul_is_one_fma_chain_per_output(m, n, p):
    rng = np.random.default_rng(m * 1000 + n + p)
    a, b = rng_f32(rng, m, n), rng_f32(rng, n, p)
    y = ops.matmul(buf(a), buf(b)).to_numpy()
    same_bits(y, gemm_exact_reference(a, b))
    np.testing.assert_allclose(y, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ta,tb", [(False, True), (True, False), (True, True)])
def test_matmul_t_transposed_operands(ta, tb):
    rng = np.random.default_rng(5)
    a, b = rng_f32(rng, 2, 33, 270), rng_f32(rng, 2, 270, 17)
    sa = np.swapaxes(a, 1, 2).copy() if ta else a
    sb = np.swapaxes(b, 1, 2).copy() if tb else b
    y = ops.matmul_t(buf(sa), buf(sb), trans_a=ta, trans_b=tb).to_numpy()
    for s in range(2):
        same_bits(y[s], gemm_exact_reference(a[s], b[s]))


def test_bmm_every_product_is_the_chain():
    rng = np.random.default_rng(6)
    a, b = rng_f32(rng, 5, 9, 40), rng_f32(rng, 5, 40, 11)
    y = ops.bmm(buf(a), buf(b)).to_numpy()
    for s in range(5):
        same_bits(y[s], gemm_exact_reference(a[s], b[s]))


def test_linear_chain_starts_at_the_bias():
    rng = np.random.default_rng(7)
    w, bias, x = rng_f32(rng, 45, 300), rng_f32(rng, 45) * 100, rng_f32(rng, 70, 300)
    y = ops.linear(buf(w), buf(bias), buf(x)).to_numpy()
    same_bits(y, gemm_exact_reference(x, w.T.copy(), np.broadcast_to(bias, (70, 45))))
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T + bias, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("rows,cols", [(1, 1), (255, 3), (256, 5), (257, 7), (1000, 33), (2 * CHUNK * 3 + 1, 2)])
def test_linear_bias_grad_is_rule4_down_each_column(rows, cols):
    rng = np.random.default_rng(rows + cols)
    g = (rng_f32(rng, rows, cols) * np.exp(rng.uniform(-6, 6, (rows, cols)))).astype(np.float32)
    db = ops.linear_backward_b(buf(g)).to_numpy()
    same_bits(db, rule4_rows(g.T))
    np.testing.assert_allclose(db, g.astype(np.float64).sum(0), rtol=1e-4, atol=1e-3 * np.abs(g).sum(0).max())


def test_linear_weight_and_input_grads_are_chains():
    rng = np.random.default_rng(8)
    g, x, w = rng_f32(rng, 300, 13), rng_f32(rng, 300, 21), rng_f32(rng, 13, 21)
    dw = ops.linear_backward_w(buf(g), buf(x)).to_numpy()
    same_bits(dw, gemm_exact_reference(g.T.copy(), x))
    dx = ops.linear_backward_x(buf(g), buf(w), buf(x)).to_numpy()
    same_bits(dx, gemm_exact_reference(g, w))


@pytest.mark.parametrize("n", [1, 7, 256, 257, 1000, 5 * CHUNK + 3])
def test_mse_loss_is_rule4_over_squares_then_divided(n):
    rng = np.random.default_rng(n)
    a, t = rng_f32(rng, n), rng_f32(rng, n)
    y = ops.mse_loss(buf(a), buf(t)).to_numpy()
    d = (a - t).astype(np.float32)
    want = np.float32(rule4_rows((d * d).astype(np.float32)) / np.float32(n))
    same_bits(y.reshape(()), want)
    np.testing.assert_allclose(float(y), np.mean((a.astype(np.float64) - t) ** 2), rtol=1e-5)


def test_mse_loss_propagates_nan_and_inf():
    a = np.array([1.0, np.inf, 2.0], np.float32)
    assert np.isinf(ops.mse_loss(buf(a), buf(np.zeros(3))).to_numpy())
    a[0] = np.nan
    assert np.isnan(ops.mse_loss(buf(a), buf(np.zeros(3))).to_numpy())


def test_mse_loss_backward_formula():
    rng = np.random.default_rng(9)
    a, t = rng_f32(rng, 301), rng_f32(rng, 301)
    g = np.array([0.37], np.float32)
    d = ops.mse_loss_backward(buf(a), buf(t), buf(g)).to_numpy()
    scale = np.float32(g[0] * np.float32(np.float32(2) / np.float32(301)))
    same_bits(d, ((a - t).astype(np.float32) * scale).astype(np.float32))


# ---------------------------------------------------------------- convolution (2-D emulation)

def im2col(img, kh, kw, stride, pad, oh, ow):
    """img (C, H, W) -> col (C*kh*kw, oh*ow), col[(c, ky, kx), (oy, ox)] = img[c, oy s + ky - p, ...]."""
    c, h, w = img.shape
    col = np.zeros((c, kh, kw, oh, ow), np.float32)
    for ky in range(kh):
        for kx in range(kw):
            for oy in range(oh):
                iy = oy * stride[0] + ky - pad[0]
                if not 0 <= iy < h:
                    continue
                for ox in range(ow):
                    ix = ox * stride[1] + kx - pad[1]
                    if 0 <= ix < w:
                        col[:, ky, kx, oy, ox] = img[:, iy, ix]
    return col.reshape(c * kh * kw, oh * ow)


def col2im(col, start, kh, kw, stride, pad, oh, ow):
    """start (C, H, W) plus the taps of col added cell by cell in kernel-offset order."""
    img = np.array(start, np.float32, copy=True)
    c, h, w = img.shape
    col = col.reshape(c, kh, kw, oh, ow)
    for ky in range(kh):
        for kx in range(kw):      # one kernel offset touches each cell at most once
            for oy in range(oh):
                iy = oy * stride[0] + ky - pad[0]
                if not 0 <= iy < h:
                    continue
                for ox in range(ow):
                    ix = ox * stride[1] + kx - pad[1]
                    if 0 <= ix < w:
                        img[:, iy, ix] = (img[:, iy, ix] + col[:, ky, kx, oy, ox]).astype(np.float32)
    return img


def conv_out(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def kernel_grad_reference(a, cols):
    """The exact kernel gradient: per sample b the rule-3 chain a_b (C_a, P) @ cols_b^T over b's
    positions from 0, then rule 4 over the samples (chunks of 256 samples, then the tree)."""
    parts = np.stack([gemm_fma_reference(a[i], cols[i].T.copy()) for i in range(len(cols))], -1)
    return rule4_rows(parts)


CONV_CASES = [  # (N, C_in, C_out, H, W, kh, kw, stride, pad): N P above one chunk, odd sizes
    (3, 2, 3, 11, 13, 3, 3, (1, 1), (1, 1)),
    (2, 3, 2, 9, 7, 2, 3, (2, 1), (0, 2)),
    (1, 1, 1, 1, 1, 1, 1, (1, 1), (0, 0)),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_forward_and_backward_bits(case):
    N, ci, co, H, W, kh, kw, st, pd = case
    rng = np.random.default_rng(sum(case[:7]))
    k, b, x = rng_f32(rng, co, ci, kh, kw), rng_f32(rng, co), rng_f32(rng, N, ci, H, W)
    oh, ow = conv_out(H, kh, st[0], pd[0]), conv_out(W, kw, st[1], pd[1])
    P, CK = oh * ow, ci * kh * kw
    y = ops.conv2d(buf(k), buf(b), buf(x), stride=st, padding=pd).to_numpy()
    cols = [im2col(x[i], kh, kw, st, pd, oh, ow) for i in range(N)]
    want = np.stack([gemm_fma_reference(k.reshape(co, CK), cols[i], np.repeat(b[:, None], P, 1))
                     for i in range(N)]).reshape(N, co, oh, ow)
    same_bits(y, want)

    g = rng_f32(rng, N, co, oh, ow)
    dk, db, dx = (t.to_numpy() for t in ops.conv_backward(buf(k), buf(x), buf(g), stride=st, padding=pd))
    g_cm = g.reshape(N, co, P).transpose(1, 0, 2).reshape(co, N * P)    # (sample, position) order
    same_bits(dk.reshape(co, CK), kernel_grad_reference(g.reshape(N, co, P), cols))
    same_bits(db, rule4_rows(g_cm))
    want_dx = np.stack([col2im(gemm_fma_reference(k.reshape(co, CK).T.copy(), g[i].reshape(co, P)),
                               np.zeros((ci, H, W), np.float32), kh, kw, st, pd, oh, ow)
                        for i in range(N)])
    same_bits(dx, want_dx)
    # and the float64 meaning of the three gradients
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    cols64 = np.concatenate([im2col(x64[i].astype(np.float32), kh, kw, st, pd, oh, ow) for i in range(N)], 1)
    np.testing.assert_allclose(dk.reshape(co, CK), g_cm.astype(np.float64) @ cols64.T.astype(np.float64),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, g64.sum((0, 2, 3)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n,h,w", [(2, 17, 19), (3, 37, 41)])
def test_conv_bias_grad_past_one_chunk_per_channel(n, h, w):
    # N P = 646 values per channel (three chunks) and 4551 (eighteen): chunks, then the tree
    rng = np.random.default_rng(12 + n)
    k, x = rng_f32(rng, 3, 1, 1, 1), rng_f32(rng, n, 1, h, w)
    g = (rng_f32(rng, n, 3, h, w) * np.exp(rng.uniform(-8, 8, (n, 3, h, w)))).astype(np.float32)
    _, db, _ = (t.to_numpy() for t in ops.conv_backward(buf(k), buf(x), buf(g)))
    same_bits(db, rule4_rows(g.transpose(1, 0, 2, 3).reshape(3, -1)))
    np.testing.assert_allclose(db, g.astype(np.float64).sum((0, 2, 3)), rtol=1e-4,
                               atol=1e-6 * np.abs(g).sum((0, 2, 3)).max())


@pytest.mark.parametrize("n", [1, 256, 257, 700])
def test_conv_kernel_grad_is_rule4_over_per_sample_chains(n):
    # 700 samples: chunks of 256, 256 and 188, then the tree; 257 puts one sample in a second chunk
    ci, co, h, w, kh, kw, st, pd = 2, 3, 3, 4, 2, 2, (1, 2), (1, 0)
    rng = np.random.default_rng(40 + n)
    k, x = rng_f32(rng, co, ci, kh, kw), rng_f32(rng, n, ci, h, w)
    oh, ow = conv_out(h, kh, st[0], pd[0]), conv_out(w, kw, st[1], pd[1])
    # gradients over a wide range, so a different summation order shows in the bits
    g = (rng_f32(rng, n, co, oh, ow) * np.exp(rng.uniform(-6, 6, (n, co, oh, ow)))).astype(np.float32)
    dk, _, _ = (t.to_numpy() for t in ops.conv_backward(buf(k), buf(x), buf(g), stride=st, padding=pd))
    cols = [im2col(x[i], kh, kw, st, pd, oh, ow) for i in range(n)]
    same_bits(dk.reshape(co, -1), kernel_grad_reference(g.reshape(n, co, -1), cols))
    # the order is not the single chain over (sample, position): that one differs somewhere
    if n > 1:
        g_cm = g.reshape(n, co, -1).transpose(1, 0, 2).reshape(co, -1)
        one_chain = gemm_fma_reference(g_cm, np.concatenate(cols, 1).T.copy())
        assert (one_chain.view(np.uint32) != dk.reshape(co, -1).view(np.uint32)).any()
    want = np.einsum("bop,bcp->oc", g.reshape(n, co, -1).astype(np.float64),
                     np.stack(cols).astype(np.float64))
    scale = np.einsum("bop,bcp->oc", np.abs(g.reshape(n, co, -1)).astype(np.float64),
                      np.abs(np.stack(cols)).astype(np.float64))
    assert np.all(np.abs(dk.reshape(co, -1) - want) <= 1e-5 * scale + 1e-30)


def test_conv_transpose_kernel_grad_is_rule4_over_per_sample_chains():
    # the transposed conv's kernel gradient: x_b (C_in, H W) against the columns of g_b
    n, ci, co, h, w, kh, kw, st, pd = 300, 2, 3, 3, 2, 3, 2, (2, 1), (1, 0)
    rng = np.random.default_rng(14)
    k, x = rng_f32(rng, ci, co, kh, kw), rng_f32(rng, n, ci, h, w)
    oh, ow = (h - 1) * st[0] + kh - 2 * pd[0], (w - 1) * st[1] + kw - 2 * pd[1]
    g = (rng_f32(rng, n, co, oh, ow) * np.exp(rng.uniform(-6, 6, (n, co, oh, ow)))).astype(np.float32)
    dk, _, dx = (t.to_numpy() for t in ops.conv_transpose_backward(buf(k), buf(x), buf(g), stride=st,
                                                                   padding=pd))
    cols = [im2col(g[i], kh, kw, st, pd, h, w) for i in range(n)]    # the grad's columns (co K, h w)
    same_bits(dk.reshape(ci, -1), kernel_grad_reference(x.reshape(n, ci, -1), cols))
    want_dx = np.stack([gemm_fma_reference(k.reshape(ci, -1), cols[i]) for i in range(n)])
    same_bits(dx.reshape(n, ci, -1), want_dx)


def test_conv_transpose2d_forward_gathers_from_the_bias():
    N, ci, co, H, W, kh, kw, st, pd = 2, 3, 2, 5, 6, 3, 2, (2, 1), (1, 0)
    rng = np.random.default_rng(13)
    k, b, x = rng_f32(rng, ci, co, kh, kw), rng_f32(rng, co) * 10, rng_f32(rng, N, ci, H, W)
    OH, OW = (H - 1) * st[0] + kh - 2 * pd[0], (W - 1) * st[1] + kw - 2 * pd[1]
    y = ops.conv_transpose2d(buf(k), buf(b), buf(x), stride=st, padding=pd).to_numpy()
    CK = co * kh * kw
    want = np.stack([col2im(gemm_fma_reference(k.reshape(ci, CK).T.copy(), x[i].reshape(ci, H * W)),
                            np.broadcast_to(b[:, None, None], (co, OH, OW)), kh, kw, st, pd, H, W)
                     for i in range(N)])
    same_bits(y, want)


# ---------------------------------------------------------------- pooling

def windows(x, kh, kw, st, pd, fill):
    """(C, OH, OW, kh*kw) window values in row-major kernel order, padding = fill."""
    c, h, w = x.shape
    xp = np.full((c, h + 2 * pd[0] + kh, w + 2 * pd[1] + kw), fill, np.float32)
    xp[:, pd[0]:pd[0] + h, pd[1]:pd[1] + w] = x
    oh, ow = conv_out(h, kh, st[0], pd[0]), conv_out(w, kw, st[1], pd[1])
    out = np.empty((c, oh, ow, kh * kw), np.float32)
    for oy in range(oh):
        for ox in range(ow):
            win = xp[:, oy * st[0]:oy * st[0] + kh, ox * st[1]:ox * st[1] + kw]
            out[:, oy, ox] = win.reshape(c, -1)
    return out


@pytest.mark.parametrize("shape,ks,st,pd", [((2, 23, 21), (17, 16), (3, 2), (1, 2)),   # 272-tap windows
                                            ((1, 5, 6), (2, 3), (1, 2), (1, 1)),
                                            ((1, 1, 1), (1, 1), (1, 1), (0, 0))])
def test_avg_pool2d_window_sums_are_rule4(shape, ks, st, pd):
    rng = np.random.default_rng(sum(shape))
    x = (rng_f32(rng, *shape) * np.exp(rng.uniform(-5, 5, shape))).astype(np.float32)
    y = ops.avg_pool2d(buf(x), kernel_size=ks, stride=st, padding=pd).to_numpy()
    win = windows(x, *ks, st, pd, 0.0)
    same_bits(y, (rule4_rows(win) / np.float32(ks[0] * ks[1])).astype(np.float32))
    np.testing.assert_allclose(y, win.astype(np.float64).mean(-1), rtol=1e-5, atol=1e-5 * np.abs(x).max())

    g = rng_f32(rng, *y.shape)
    dx = ops.avg_pool_backward(buf(x), buf(g), kernel_size=ks, stride=st, padding=pd, rank=2).to_numpy()
    # window by window in row-major output order, each adding g / window size to its cells
    c, h, w = shape
    acc = np.zeros((c, h + 2 * pd[0] + ks[0], w + 2 * pd[1] + ks[1]), np.float32)
    share = (g / np.float32(ks[0] * ks[1])).astype(np.float32)
    for oy in range(y.shape[1]):
        for ox in range(y.shape[2]):
            sl = np.s_[:, oy * st[0]:oy * st[0] + ks[0], ox * st[1]:ox * st[1] + ks[1]]
            acc[sl] = (acc[sl] + share[:, oy, ox, None, None]).astype(np.float32)
    same_bits(dx, acc[:, pd[0]:pd[0] + h, pd[1]:pd[1] + w])


def test_max_pool_nan_wins_and_its_gradient_goes_there():
    x = np.array([[[1.0, np.nan, 3.0, 2.0], [0.0, 5.0, -1.0, 4.0]]], np.float32)
    y = ops.max_pool2d(buf(x), kernel_size=2, stride=2).to_numpy()
    assert np.isnan(y[0, 0, 0]) and y[0, 0, 1] == 4.0
    dx = ops.max_pool_backward(buf(x), buf(np.array([[[2.0, 3.0]]])), kernel_size=2, stride=2,
                               rank=2).to_numpy()
    same_bits(dx, np.array([[[0, 2, 0, 0], [0, 0, 0, 3]]], np.float32))


def test_max_pool_overlapping_windows_sum_their_grads():
    rng = np.random.default_rng(14)
    x = rng_f32(rng, 2, 9, 10)
    x[:, 4, 5] = 50.0                       # the max of every window that covers it
    y = ops.max_pool2d(buf(x), kernel_size=3, stride=1, padding=1).to_numpy()
    g = (rng_f32(rng, *y.shape) * 1e3).astype(np.float32)
    dx = ops.max_pool_backward(buf(x), buf(g), kernel_size=3, stride=1, padding=1, rank=2).to_numpy()
    want = np.float32(0)
    for oy in range(3, 6):                  # windows in row-major order, summed from 0
        for ox in range(4, 7):
            want = np.float32(want + g[0, oy, ox])
    same_bits(dx[0, 4, 5], want)


@pytest.mark.parametrize("beta", [2.0, -1.5])
def test_smooth_max_pool_against_float64(beta):
    rng = np.random.default_rng(15)
    x = rng_f32(rng, 2, 19, 18)
    ks, st, pd = (17, 16), (1, 2), (1, 1)   # 272-value windows: rule 4 past one chunk
    y = ops.smooth_max_pool2d(buf(x), kernel_size=ks, beta=beta, stride=st, padding=pd).to_numpy()
    win = windows(x, *ks, st, pd, 0.0).astype(np.float64)
    want = np.log(np.exp(beta * win).sum(-1)) / beta
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- dgemm

def fma64_chain(a, b):
    """C = A B with every output fma(a, b, c) in k order from 0, each step rounded once (exact
    rational arithmetic, then one correctly rounded conversion)."""
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            acc = 0.0
            for kk in range(k):
                acc = float(Fraction(a[i, kk]) * Fraction(b[kk, j]) + Fraction(acc))
            c[i, j] = acc
    return c


def test_dgemm_is_the_fma_chain_in_k_order():
    rng = np.random.default_rng(16)
    a, b = rng.standard_normal((5, 40)), rng.standard_normal((40, 7))
    got = dgemm(a, b)
    want = fma64_chain(a, b)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
    # the test can tell: rounding each product separately gives other bits somewhere
    unfused = np.zeros((5, 7))
    for kk in range(40):
        unfused = unfused + np.outer(a[:, kk], b[kk])
    assert not np.array_equal(unfused, want)
