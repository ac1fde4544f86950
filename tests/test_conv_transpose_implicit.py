"""Transposed convolutions with one and two spatial axes (on CUDA the implicit GEMMs of the
convolution they are the adjoint of, native/cuda/conv_igemm.cu) against float64 NumPy: the
forward, input, kernel and bias gradients over strides 1, 2 and 3 (and a stride past the kernel,
which leaves cells no tap writes), paddings 0..3, 1x1 to 7x7 kernels, odd channel counts, batch
1, 1-D; output_padding through F.conv_transpose2d and nn.ConvTranspose2d; bit-identical repeats
in the default and the deterministic mode."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn
from torchlean.nn import functional as F
from torchlean.session import Session
from harness import assert_sums_close


def _reference(x, w, b, g, stride, padding, output_padding=(0, 0)):
    """float64 y, dx, dw, db of y = conv_transpose2d(x, w) + b, x (N, C_in, H, W), w (C_in,
    C_out, kh, kw), upstream gradient g: input cell (i, j) adds x w[:, :, a, c] to output cell
    (i s_h + a - p_h, j s_w + c - p_w); the full result ((in - 1) s + k, plus output_padding
    zeros) cropped by the padding on both sides."""
    x, w, g = (a.astype(np.float64) for a in (x, w, g))
    n, cin, h, wd = x.shape
    _, cout, kh, kw = w.shape
    (sh, sw), (ph, pw) = stride, padding
    fh, fw = (h - 1) * sh + kh + output_padding[0], (wd - 1) * sw + kw + output_padding[1]
    oh, ow = fh - 2 * ph, fw - 2 * pw
    full = np.zeros((n, cout, fh, fw))
    gfull = np.zeros_like(full)
    gfull[:, :, ph:ph + oh, pw:pw + ow] = g
    dx, dw = np.zeros_like(x), np.zeros_like(w)
    for a in range(kh):
        for c in range(kw):
            cells = (slice(None), slice(None), slice(a, a + sh * (h - 1) + 1, sh),
                     slice(c, c + sw * (wd - 1) + 1, sw))
            full[cells] += np.einsum("bihw,io->bohw", x, w[:, :, a, c])
            dx += np.einsum("bohw,io->bihw", gfull[cells], w[:, :, a, c])
            dw[:, :, a, c] = np.einsum("bihw,bohw->io", x, gfull[cells])
    y = full[:, :, ph:ph + oh, pw:pw + ow] + b.astype(np.float64)[None, :, None, None]
    return y, dx, dw, g.sum(axis=(0, 2, 3))


def _out_len(n, k, s, p, op=0):
    return (n - 1) * s - 2 * p + k + op


def _data(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def _compare(got, x, w, b, g, stride, padding, output_padding=(0, 0)):
    """the four results against the reference, each within float32 accumulation error"""
    want = _reference(x, w, b, g, stride, padding, output_padding)
    sq = _reference(x ** 2, w ** 2, np.zeros_like(b), g ** 2, stride, padding, output_padding)
    n, cin, h, wd = x.shape
    _, cout, kh, kw = w.shape
    terms = (cin * kh * kw, cout * kh * kw, n * h * wd, g.size // cout)
    for name, gv, wv, s2, t in zip(("y", "dx", "dw", "db"), got, want, sq, terms):
        assert_sums_close(name, np.asarray(gv).reshape(wv.shape), wv, s2, t)


def _run(x, w, b, g, stride, padding, rank=2):
    """y, dx, dw, db from the tape's conv_transpose2d (rank 2) or N-D conv_transpose (rank 1)"""
    t = tl.Tape()
    iw, ib, ix = t.leaf(w), t.leaf(b), t.leaf(x)
    op = t.conv_transpose2d if rank == 2 else t.conv_transpose
    out = op(iw, ib, ix, stride=stride, padding=padding)
    y = t.value(out).to_numpy()
    grads = t.backward(out, seed=g, wrt=[iw, ib, ix])
    res = y, grads[ix].to_numpy(), grads[iw].to_numpy(), grads[ib].to_numpy()
    t.release()
    return res


CASES_2D = [  # N, C_in, C_out, (H, W), (kh, kw), stride, padding
    (1, 1, 1, (1, 1), (1, 1), (1, 1), (0, 0)),          # size 1
    (2, 5, 3, (4, 5), (3, 3), (2, 2), (1, 1)),
    (3, 9, 70, (6, 5), (4, 4), (2, 2), (1, 1)),         # DCGAN-style 4x4 s2, 70 rows
    (2, 66, 17, (5, 6), (2, 2), (2, 2), (0, 0)),        # U-Net-style 2x2 s2
    (1, 12, 10, (7, 7), (3, 3), (1, 1), (1, 1)),        # stride 1, batch 1
    (2, 3, 6, (6, 4), (3, 5), (1, 2), (0, 2)),          # mixed strides and paddings
    (2, 130, 3, (8, 8), (3, 3), (1, 1), (1, 1)),        # 3 output channels, 130 input ones
    (1, 7, 5, (5, 4), (7, 7), (2, 2), (3, 3)),          # 7x7: 49 taps
    (2, 4, 6, (3, 4), (2, 2), (3, 3), (0, 0)),          # stride past the kernel: bias-only cells
    (1, 3, 4, (6, 6), (3, 3), (2, 2), (2, 2)),          # padding 2 on a 3x3
    (2, 16, 24, (5, 7), (3, 3), (3, 2), (1, 0)),        # stride 3
]


@pytest.mark.parametrize("n,cin,cout,hw,k,stride,padding", CASES_2D)
def test_conv_transpose2d_matches_float64_reference(n, cin, cout, hw, k, stride, padding):
    rng = np.random.default_rng(n * 7919 + cin * 101 + cout * 13 + hw[1] + k[0])
    oh, ow = (_out_len(hw[i], k[i], stride[i], padding[i]) for i in range(2))
    x = _data(rng, (n, cin) + hw)
    w = _data(rng, (cin, cout) + k, -0.5, 0.5)
    b = _data(rng, (cout,))
    g = _data(rng, (n, cout, oh, ow))
    _compare(_run(x, w, b, g, stride, padding), x, w, b, g, stride, padding)


@pytest.mark.parametrize("n,cin,cout,length,k,stride,padding", [
    (3, 7, 5, 9, 3, 2, 1),
    (1, 2, 3, 1, 1, 1, 0),
    (2, 20, 9, 13, 4, 2, 1),
])
def test_conv_transpose1d_matches_float64_reference(n, cin, cout, length, k, stride, padding):
    rng = np.random.default_rng(length * 31 + cout)
    x = _data(rng, (n, cin, length))
    w = _data(rng, (cin, cout, k), -0.5, 0.5)
    b = _data(rng, (cout,))
    g = _data(rng, (n, cout, _out_len(length, k, stride, padding)))
    got = _run(x, w, b, g, (stride,), (padding,), rank=1)
    as4 = lambda a: a[:, :, None, :]  # noqa: E731 - height 1
    got = (as4(got[0]), as4(got[1]), got[2][:, :, None, :], got[3])
    _compare(got, as4(x), w[:, :, None, :], b, as4(g), (1, stride), (0, padding))


@pytest.mark.parametrize("n,cin,cout,hw,k,stride,padding,opad", [
    (1, 5, 7, (6, 5), 4, (2, 2), (1, 1), (1, 1)),
    (2, 3, 9, (4, 7), 3, (2, 3), (1, 0), (1, 2)),       # output_padding past the padding
    (3, 8, 4, (5, 5), 2, (2, 2), (0, 0), (1, 0)),
])
def test_conv_transpose2d_output_padding_through_nn(n, cin, cout, hw, k, stride, padding, opad):
    """nn.ConvTranspose2d with output_padding runs the unpadded op and crops; forward and the
    three gradients against the reference over the padded result"""
    tl.manual_seed(3)
    m = nn.ConvTranspose2d(cin, cout, k, stride=stride, padding=padding, output_padding=opad)
    rng = np.random.default_rng(cin + cout)
    x = _data(rng, (n, cin) + hw)
    oh, ow = (_out_len(hw[i], k, stride[i], padding[i], opad[i]) for i in range(2))
    g = _data(rng, (n, cout, oh, ow))
    s = Session()
    xt = s.tensor(x, requires_grad=True)
    y = m(xt)
    (y * s.tensor(g)).sum().backward()
    got = (y.numpy(), xt.grad, m.weight.grad, m.bias.grad)
    _compare(got, x, m.weight.numpy(), m.bias.numpy(), g, stride, padding, opad)


def test_conv_transpose2d_functional_matches_the_tape_op():
    """F.conv_transpose2d without output_padding is the registry op: the same bits"""
    rng = np.random.default_rng(12)
    x, w, b = _data(rng, (2, 6, 5, 5)), _data(rng, (6, 4, 3, 3)), _data(rng, (4,))
    g = _data(rng, (2, 4, 9, 9))
    s = Session()
    xt, wt, bt = (s.tensor(v, requires_grad=True) for v in (x, w, b))
    y = F.conv_transpose2d(xt, wt, bt, stride=2, padding=1)
    (y * s.tensor(g)).sum().backward()
    tape = _run(x, w, b, g, (2, 2), (1, 1))
    for name, a, c in zip(("y", "dx", "dw", "db"), (y.numpy(), xt.grad, wt.grad, bt.grad), tape):
        np.testing.assert_array_equal(a, c, err_msg=name)


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_transpose_repeats_bit_for_bit_in_both_modes(stride):
    rng = np.random.default_rng(21)
    x = _data(rng, (4, 24, 7, 7))
    w = _data(rng, (24, 40, 3, 3), -0.5, 0.5)
    b = _data(rng, (40,))
    oh = _out_len(7, 3, stride, 1)
    g = _data(rng, (4, 40, oh, oh))
    first = _run(x, w, b, g, (stride, stride), (1, 1))
    again = _run(x, w, b, g, (stride, stride), (1, 1))
    tl.set_deterministic(True)
    try:
        det = _run(x, w, b, g, (stride, stride), (1, 1))
    finally:
        tl.set_deterministic(False)
    for name, a, c, d in zip(("y", "dx", "dw", "db"), first, again, det):
        np.testing.assert_array_equal(a, c, err_msg=f"{name}: repeat")
        np.testing.assert_array_equal(a, d, err_msg=f"{name}: deterministic mode")


@pytest.mark.parametrize("kernel_size", [(3, 5), (2, 1)])
def test_conv_modules_take_a_kernel_size_pair(kernel_size):
    """nn.Conv2d and nn.ConvTranspose2d accept kernel_size=(kh, kw) as torch does: weight shapes
    follow it and the outputs match a float64 NumPy direct convolution / its adjoint."""
    from torchlean import nn
    from torchlean.session import Session
    kh, kw = kernel_size
    r = np.random.default_rng(kh * 10 + kw)
    x = r.uniform(-1, 1, (2, 3, 6, 7)).astype(np.float32)
    s = Session()
    conv = nn.Conv2d(3, 4, kernel_size, padding=1)
    assert conv.weight.shape == (4, 3, kh, kw)
    w, b = conv.weight.numpy().astype(np.float64), conv.bias.numpy().astype(np.float64)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    want = np.zeros((2, 4, oh, ow)) + b[None, :, None, None]
    for i in range(kh):
        for j in range(kw):
            want += np.einsum("oc,nchw->nohw", w[:, :, i, j], xp[:, :, i:i + oh, j:j + ow])
    got = conv(s.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    tconv = nn.ConvTranspose2d(3, 4, kernel_size, stride=2)
    assert tconv.weight.shape == (3, 4, kh, kw)
    wt, bt = tconv.weight.numpy().astype(np.float64), tconv.bias.numpy().astype(np.float64)
    H, W = x.shape[2:]
    want_t = np.zeros((2, 4, (H - 1) * 2 + kh, (W - 1) * 2 + kw)) + bt[None, :, None, None]
    for i in range(kh):
        for j in range(kw):
            want_t[:, :, i:i + 2 * H:2, j:j + 2 * W:2] += np.einsum(
                "co,nchw->nohw", wt[:, :, i, j], x.astype(np.float64))
    np.testing.assert_allclose(tconv(s.tensor(x)).numpy(), want_t, rtol=1e-5, atol=1e-5)
    s.step()
