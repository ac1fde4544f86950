"""The direct grouped/dilated convolution kernels (registry op conv_grouped): with groups = 1
and dilation 1 they give the dense convolution's bits in exact mode (the same orders, written
without im2col); depthwise 3x3 and 7x7 against float64; NaN and inf propagate as in the dense
arithmetic (a padding tap multiplies 0); bad geometry is a clear error naming the op."""
import numpy as np
import pytest

import torchlean as tl
from torchlean._generated import ops as O
from torchlean.buffer import AnyBuffer
from tests import reference as R


def _data(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(np.float32)


@pytest.fixture
def exact():
    was = tl.is_exact()
    tl.set_exact(True)
    yield
    tl.set_exact(was)


def _bits(buf):
    return buf.to_numpy().view(np.uint32)


@pytest.mark.parametrize("kshape,xshape,stride,padding", [
    ((3, 2, 3, 3), (2, 2, 7, 6), 1, 1),
    ((4, 3, 2, 3), (3, 5, 9), (2, 1), (0, 2)),
    ((2, 3, 3), (2, 3, 300), 2, 1),              # a bias gradient over more than one chunk
    ((2, 1, 2, 2, 2), (1, 1, 3, 4, 3), 1, 1),
])
def test_groups_one_is_the_dense_convolution_bit_for_bit(exact, kshape, xshape, stride, padding):
    k, b, x = _data(*kshape, seed=1), _data(kshape[0], seed=2), _data(*xshape, seed=3)
    K, B, X = (AnyBuffer.from_numpy(a) for a in (k, b, x))
    dense = O.conv(K, B, X, stride=stride, padding=padding)
    grouped = O.conv_grouped(K, B, X, stride=stride, padding=padding)
    np.testing.assert_array_equal(_bits(grouped), _bits(dense))
    G = AnyBuffer.from_numpy(_data(*dense.shape, seed=4))
    want = O.conv_backward(K, X, G, stride=stride, padding=padding)
    got = O.conv_grouped_backward(K, X, G, stride=stride, padding=padding)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(_bits(g), _bits(w))


@pytest.mark.parametrize("ks,dilation,stride", [(3, 1, 1), (7, 1, 1), (3, 2, 1), (3, 1, 2),
                                                (5, 1, 3)])
def test_depthwise_against_float64(ks, dilation, stride):
    c, pad = 5, dilation * (ks // 2)
    k, b, x = _data(c, 1, ks, ks, seed=5), _data(c, seed=6), _data(3, c, 13, 11, seed=7)
    s = tl.Session()
    X = s.tensor(x, requires_grad=True)
    K, B = s.tensor(k, requires_grad=True), s.tensor(b, requires_grad=True)
    y = tl.nn.functional.conv2d(X, K, B, stride=stride, padding=pad, dilation=dilation, groups=c)
    want = R.conv_grouped(k.astype(np.float64), b.astype(np.float64), x.astype(np.float64),
                          stride=stride, padding=pad, dilation=dilation, groups=c)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    g = _data(*want.shape, seed=8).astype(np.float64)
    (y * s.tensor(g)).sum().backward()
    # the reference is linear in each argument: dL/dk[c, 0, i, j] = <reference(e_cij), g>
    dk = np.zeros_like(k, np.float64)
    for idx in np.ndindex(k.shape):
        e = np.zeros_like(k, np.float64)
        e[idx] = 1
        dk[idx] = np.sum(R.conv_grouped(e, np.zeros(c), x.astype(np.float64), stride=stride,
                                        padding=pad, dilation=dilation, groups=c) * g)
    np.testing.assert_allclose(K.grad.numpy() if hasattr(K.grad, "numpy") else K.grad,
                               dk, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(B.grad.numpy() if hasattr(B.grad, "numpy") else B.grad,
                               g.sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-4)
    # dx: each tap carries w * g back to the input cell it read
    dx = np.zeros(x.shape)
    oy, ox = np.arange(g.shape[2]), np.arange(g.shape[3])
    for ky in range(ks):
        for kx in range(ks):
            iy, ix = oy * stride - pad + ky * dilation, ox * stride - pad + kx * dilation
            ry, rx = (iy >= 0) & (iy < x.shape[2]), (ix >= 0) & (ix < x.shape[3])
            wk = k[:, 0, ky, kx].astype(np.float64)[None, :, None, None]
            contrib = g[:, :, ry][:, :, :, rx] * wk
            dx[:, :, iy[ry][:, None], ix[rx][None, :]] += contrib
    np.testing.assert_allclose(X.grad.numpy() if hasattr(X.grad, "numpy") else X.grad, dx,
                               rtol=1e-4, atol=1e-4)
    s.close() if hasattr(s, "close") else None


def test_nan_and_inf_propagate_like_the_dense_arithmetic():
    k = _data(2, 1, 3, 3, seed=9)
    k[1, 0, 0, 0] = np.inf                    # an inf weight meets a padding zero: NaN, as im2col
    x = _data(1, 2, 4, 4, seed=10)
    x[0, 0, 2, 2] = np.nan
    y = O.conv_grouped(*(AnyBuffer.from_numpy(a) for a in (k, np.zeros(2, np.float32), x)),
                       padding=1, groups=2).to_numpy()
    nan0 = np.zeros((4, 4), bool)
    nan0[1:4, 1:4] = True                     # every window holding x[2, 2]
    nan1 = np.zeros((4, 4), bool)
    nan1[0, :] = nan1[:, 0] = True            # the inf tap reads padding: inf * 0
    np.testing.assert_array_equal(np.isnan(y[0, 0]), nan0)   # groups keep NaN in their channel
    np.testing.assert_array_equal(np.isnan(y[0, 1]), nan1)
    assert np.isinf(y[0, 1, 1:, 1:]).all()


@pytest.mark.parametrize("kshape,xshape,attrs,match", [
    ((4, 2, 3, 3), (1, 6, 5, 5), {"groups": 2}, r"groups=2 needs C_in \(6\)"),
    ((3, 1, 3, 3), (1, 2, 5, 5), {"groups": 2}, r"groups=2 needs C_in \(2\) and C_out \(3\)"),
    ((2, 1, 3, 3), (1, 2, 5, 5), {"groups": 2, "dilation": 0}, r"dilation must be >= 1"),
    ((2, 1, 3, 3), (1, 2, 2, 2), {"groups": 2, "dilation": 2}, r"larger than the padded input"),
    ((2, 1, 1, 1, 1, 1), (1, 2, 1, 1, 1, 1), {"groups": 2}, r"1..3 spatial axes"),
])
def test_bad_geometry_names_the_op(kshape, xshape, attrs, match):
    args = [AnyBuffer.from_numpy(_data(*sh)) for sh in (kshape, (kshape[0],), xshape)]
    with pytest.raises(ValueError, match="conv_grouped") as e:
        O.conv_grouped(*args, **attrs)
    assert e.match(match)


@pytest.mark.parametrize("groups,cin", [(4, 1), (2, 3)])
def test_backward_over_many_slices_is_close_to_float64_and_the_same_twice(groups, cin):
    """N * H * W past one kernel-gradient slice (16384 positions on CUDA): kernel and bias
    gradients against float64, and two runs give the same bits (every mode is deterministic)"""
    n, hw, ks = 3, (83, 70), 3
    k, b = _data(groups * 2, cin, ks, ks, seed=11), _data(groups * 2, seed=12)
    x, g = _data(n, groups * cin, *hw, seed=13), _data(n, groups * 2, *hw, seed=14)
    K, B, X, G = (AnyBuffer.from_numpy(a) for a in (k, b, x, g))
    runs = [[o.to_numpy() for o in O.conv_grouped_backward(K, X, G, padding=1, groups=groups)]
            for _ in range(2)]
    for a, c in zip(*runs):
        np.testing.assert_array_equal(a.view(np.uint32), c.view(np.uint32))
    dk, db, dx = runs[0]
    np.testing.assert_allclose(db, g.astype(np.float64).sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-4)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    for idx in [(0, 0, 0, 0), (groups * 2 - 1, cin - 1, 2, 1), (1, 0, 1, 1)]:
        e = np.zeros(k.shape)
        e[idx] = 1
        want = np.sum(R.conv_grouped(e, np.zeros(b.shape), x64, padding=1, groups=groups) * g64)
        np.testing.assert_allclose(dk[idx], want, rtol=1e-4, atol=1e-3)
