"""Convolutions with one and two spatial axes (on CUDA the implicit-GEMM kernels of
native/cuda/conv_igemm.cu) against a float64 NumPy reference: forward, input, kernel and bias
gradients over odd channel counts, batch 1 and odd batches, 1x1 to 7x7 kernels (8x8: past the
implicit kernels' 63 taps), strides 1 and 2 (and 3 and 4: stride residue classes no tap reads),
paddings 0..3 and non-square images, first layers and layers of at most 8 rows (the CUDA
kernels that keep every row in registers); a kernel gradient summed over more than 100k
positions (split over K on CUDA, the bias gradient in the same pass); NaN propagation; and
bit-identical repeats in the default and the deterministic mode."""
from __future__ import annotations

import os

import numpy as np
import pytest

import torchlean as tl
from torchlean.nn import functional as F
from torchlean.session import Session
from harness import assert_sums_close as _check


def _windows(x, kh, kw, sh, sw, ph, pw):
    """(N, C, OH, OW, kh, kw) float64 windows of x (N, C, H, W) zero-padded by (ph, pw)"""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    return win[:, :, ::sh, ::sw]


def _reference(x, w, b, g, stride, padding):
    """float64 y, dx, dw, db of y = conv2d(x, w) + b with upstream gradient g (all 4-D)"""
    (sh, sw), (ph, pw) = stride, padding
    kh, kw = w.shape[2:]
    w64, g64 = w.astype(np.float64), g.astype(np.float64)
    win = _windows(x, kh, kw, sh, sw, ph, pw)
    y = np.tensordot(win, w64, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    y = y + b.astype(np.float64)[None, :, None, None]
    dw = np.tensordot(g64, win, axes=([0, 2, 3], [0, 2, 3]))
    db = g64.sum(axis=(0, 2, 3))
    n, _, h, wd = x.shape
    oh, ow = g.shape[2:]
    dxp = np.zeros((n, x.shape[1], h + 2 * ph, wd + 2 * pw))
    for i in range(kh):
        for j in range(kw):
            part = np.tensordot(g64, w64[:, :, i, j], axes=([1], [0])).transpose(0, 3, 1, 2)
            dxp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += part
    return y, dxp[:, :, ph:ph + h, pw:pw + wd], dw, db


def _run(x, w, b, g, stride, padding, rank):
    """y, dx, dw, db from the tape (conv2d, or the N-D conv for rank 1) with seed g"""
    t = tl.Tape()
    iw, ib, ix = t.leaf(w), t.leaf(b), t.leaf(x)
    if rank == 2:
        out = t.conv2d(iw, ib, ix, stride=stride, padding=padding)
    else:
        out = t.conv(iw, ib, ix, stride=stride, padding=padding)
    y = t.value(out).to_numpy()
    grads = t.backward(out, seed=g, wrt=[iw, ib, ix])
    res = y, grads[ix].to_numpy(), grads[iw].to_numpy(), grads[ib].to_numpy()
    t.release()
    return res


def _data(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def _out_len(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def _compare(x, w, b, g, stride, padding, rank, got=None):
    """run (unless given) and compare all four results with the float64 reference"""
    got = got or _run(x, w, b, g, stride, padding, rank)
    as4 = (lambda a: a[:, :, None, :]) if rank == 1 else (lambda a: a)
    st = (1, stride[0]) if rank == 1 else stride
    pd = (0, padding[0]) if rank == 1 else padding
    x4, w4, g4 = as4(x), as4(w), as4(g)
    want = _reference(x4, w4, b, g4, st, pd)
    sq = _reference(x4 ** 2, w4 ** 2, np.zeros_like(b), g4 ** 2, st, pd)  # sums of squared terms
    n, cin = x.shape[:2]
    cout, kk = w.shape[0], int(np.prod(w.shape[2:]))
    positions = n * int(np.prod(g.shape[2:]))
    for name, gv, wv, s2, terms in zip(
            ("y", "dx", "dw", "db"), got, want, sq,
            (cin * kk, cout * kk, positions, positions)):
        gv = np.asarray(gv).reshape(wv.shape) if name != "db" else np.asarray(gv)
        _check(name, gv, wv, s2, terms)
    return got


CASES_2D = [  # N, C_in, C_out, (H, W), (kh, kw), stride, padding
    (1, 1, 1, (1, 1), (1, 1), (1, 1), (0, 0)),          # size 1
    (2, 3, 5, (7, 9), (3, 3), (1, 1), (1, 1)),
    (3, 5, 65, (9, 8), (3, 3), (2, 2), (1, 1)),         # 65 rows: a partial row tile
    (1, 65, 130, (6, 11), (3, 3), (1, 1), (1, 1)),      # 130 rows, 130 gradient rows...
    (3, 130, 3, (5, 7), (1, 1), (1, 1), (0, 0)),        # 1x1, 3 output channels
    (1, 3, 130, (8, 10), (1, 1), (2, 2), (0, 0)),       # 1x1 stride 2: odd cells get no tap
    (5, 9, 17, (8, 8), (1, 1), (2, 2), (0, 0)),
    (2, 12, 12, (11, 13), (5, 5), (1, 1), (2, 2)),      # 5x5
    (1, 16, 24, (12, 9), (5, 5), (2, 2), (2, 2)),
    (3, 7, 10, (10, 6), (3, 2), (2, 1), (0, 1)),        # mixed strides and paddings
    (2, 20, 24, (9, 9), (2, 2), (4, 3), (0, 2)),        # stride > kernel
    (1, 6, 9, (5, 5), (3, 3), (1, 1), (2, 2)),          # padding 2 on a 3x3
    (7, 32, 64, (12, 12), (3, 3), (1, 1), (1, 1)),      # VGG-like, odd batch
    (1, 64, 33, (15, 17), (3, 3), (2, 2), (1, 1)),      # stride-2 3x3, odd image
    (2, 3, 64, (32, 32), (3, 3), (1, 1), (1, 1)),       # first layer: 27-deep forward, 3-row dx
    (2, 40, 3, (11, 9), (5, 3), (1, 1), (2, 1)),        # 3 output rows, 5 tap rows
    (3, 7, 2, (12, 10), (3, 3), (2, 2), (1, 1)),        # 7 dx rows over stride classes
    (2, 6, 5, (10, 9), (2, 2), (1, 1), (0, 0)),         # 2x2, few rows both ways
    (2, 3, 9, (13, 11), (7, 7), (2, 2), (3, 3)),        # 7x7 stem: 49 taps
    (2, 36, 5, (9, 10), (7, 7), (1, 1), (3, 3)),        # 7x7 stride 1: 49 taps per dx class
    (1, 4, 6, (10, 9), (8, 8), (1, 1), (3, 4)),         # 8x8: 64 taps (CUDA: im2col)
]


@pytest.mark.parametrize("n,cin,cout,hw,k,stride,padding", CASES_2D)
def test_conv2d_matches_float64_reference(n, cin, cout, hw, k, stride, padding):
    rng = np.random.default_rng(n * 100003 + cin * 1009 + cout * 31 + hw[0] * 7 + k[0])
    oh, ow = (_out_len(hw[i], k[i], stride[i], padding[i]) for i in range(2))
    x = _data(rng, (n, cin) + hw)
    w = _data(rng, (cout, cin) + k, -0.5, 0.5)
    b = _data(rng, (cout,))
    g = _data(rng, (n, cout, oh, ow))
    _compare(x, w, b, g, stride, padding, 2)


CASES_1D = [  # N, C_in, C_out, L, k, stride, padding
    (1, 1, 1, 1, 1, 1, 0),
    (3, 7, 12, 29, 4, 3, 2),
    (2, 65, 5, 40, 3, 2, 1),
    (1, 3, 130, 17, 5, 1, 2),
    (5, 16, 16, 64, 1, 2, 0),
]


@pytest.mark.parametrize("n,cin,cout,length,k,stride,padding", CASES_1D)
def test_conv1d_matches_float64_reference(n, cin, cout, length, k, stride, padding):
    rng = np.random.default_rng(length * 131 + cout)
    x = _data(rng, (n, cin, length))
    w = _data(rng, (cout, cin, k), -0.5, 0.5)
    b = _data(rng, (cout,))
    g = _data(rng, (n, cout, _out_len(length, k, stride, padding)))
    _compare(x, w, b, g, (stride,), (padding,), 1)


def test_kernel_gradient_over_more_than_100k_positions():
    """N*P = 25 * 64 * 64 = 102400 positions: on CUDA the kernel gradient splits K into chunks
    whose partials are summed in order; the same data through torchlean.nn.functional.conv2d
    with autograd (stride 1, padding 1) gives the same four results."""
    rng = np.random.default_rng(11)
    x = _data(rng, (25, 2, 64, 64))
    w = _data(rng, (3, 2, 3, 3), -0.5, 0.5)
    b = _data(rng, (3,))
    g = _data(rng, (25, 3, 64, 64))
    got = _compare(x, w, b, g, (1, 1), (1, 1), 2)
    s = Session()
    tx, tw, tb = (s.tensor(v, requires_grad=True) for v in (x, w, b))
    y = F.conv2d(tx, tw, tb, padding=1)
    (y * s.tensor(g)).sum().backward()
    _compare(x, w, b, g, (1, 1), (1, 1), 2,
             got=(y.numpy(), tx.grad, tw.grad, tb.grad))
    np.testing.assert_array_equal(tw.grad, got[2])  # same kernels, same bits


@pytest.mark.parametrize("stride", [1, 2])
def test_nan_in_input_propagates(stride):
    """A NaN input cell makes NaN exactly the outputs whose window reads it and the kernel-
    gradient taps that read it; the input gradient does not depend on x and stays finite.
    A NaN in the upstream gradient reaches dx through every tap that reads it, dw and db."""
    rng = np.random.default_rng(5)
    x = _data(rng, (3, 5, 9, 10))
    x[1, 2, 4, 3] = np.nan
    w = _data(rng, (65, 5, 3, 3), -0.5, 0.5)
    b = _data(rng, (65,))
    oh, ow = _out_len(9, 3, stride, 1), _out_len(10, 3, stride, 1)
    g = _data(rng, (3, 65, oh, ow))
    y, dx, dw, db = _compare(x, w, b, g, (stride, stride), (1, 1), 2)
    assert np.isnan(y).any() and not np.isnan(y).all()
    assert np.isfinite(dx).all() and np.isfinite(db).all()
    assert np.isnan(dw[:, 2]).any() and np.isfinite(np.delete(dw, 2, axis=1)).all()
    x[1, 2, 4, 3] = 0.5
    g[2, 7, 1, 2] = np.nan
    _, dx, dw, db = _compare(x, w, b, g, (stride, stride), (1, 1), 2)
    assert np.isnan(dx[2]).any() and np.isfinite(dx[:2]).all()
    assert np.isnan(dw[7]).all() and np.isfinite(np.delete(dw, 7, axis=0)).all()
    assert np.isnan(db[7]) and np.isfinite(np.delete(db, 7)).all()


@pytest.mark.parametrize("stride", [1, 2])
def test_results_repeat_bit_for_bit_in_both_modes(stride):
    """Two runs give the same bits, and the deterministic mode gives the default mode's bits:
    no atomics anywhere, one set of kernels for both."""
    rng = np.random.default_rng(9)
    x = _data(rng, (6, 24, 14, 14))
    w = _data(rng, (40, 24, 3, 3), -0.5, 0.5)
    b = _data(rng, (40,))
    oh = _out_len(14, 3, stride, 1)
    g = _data(rng, (6, 40, oh, oh))
    first = _run(x, w, b, g, (stride, stride), (1, 1), 2)
    again = _run(x, w, b, g, (stride, stride), (1, 1), 2)
    tl.set_deterministic(True)
    try:
        det = _run(x, w, b, g, (stride, stride), (1, 1), 2)
    finally:
        tl.set_deterministic(False)
    for name, a, c, d in zip(("y", "dx", "dw", "db"), first, again, det):
        np.testing.assert_array_equal(a, c, err_msg=f"{name}: repeat")
        np.testing.assert_array_equal(a, d, err_msg=f"{name}: deterministic mode")


@pytest.mark.cuda
def test_cuda_backward_scratch_is_a_small_workspace():
    """conv_backward of 32 x 64 x 32 x 32 with a 64 x 64 x 3 x 3 kernel: the implicit kernels
    need the kernel's k-major copy and at most 16 MiB of kernel-gradient partials beyond the
    three gradients, where im2col (TORCHLEAN_CONV_IGEMM=0) holds 576 x 32768 columns (72 MiB)."""
    rng = np.random.default_rng(2)
    x = tl.AnyBuffer.from_numpy(_data(rng, (32, 64, 32, 32)))
    w = tl.AnyBuffer.from_numpy(_data(rng, (64, 64, 3, 3)))
    g = tl.AnyBuffer.from_numpy(_data(rng, (32, 64, 32, 32)))
    tl.synchronize()
    tl.reset_peak_memory_stats()
    before = tl.memory_stats()
    grads = tl.ops.conv_backward(w, x, g, padding=1)
    tl.synchronize()
    extra = tl.memory_stats()["peak_bytes"] - before["live_bytes"]
    outputs = sum(4 * int(np.prod(t.shape)) for t in grads)
    weight = 4 * 64 * 64 * 9
    if os.environ.get("TORCHLEAN_CONV_IGEMM") == "0":
        assert extra >= outputs + 576 * 32768 * 4
    else:
        assert outputs <= extra <= outputs + (16 << 20) + 2 * weight + (64 << 10)
    for t in (x, w, g) + tuple(grads):
        t.release()
