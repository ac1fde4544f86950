"""Pooling options composed from the registry pools: max/avg ceil_mode, count_include_pad=False,
divisor_override, max dilation and return_indices, adaptive max pooling; against float64 NumPy
loops written from torch's definitions and central finite differences of those loops."""
import numpy as np
import pytest

from torchlean import nn
from torchlean.nn import functional as F
from torchlean.session import Session


def _out_len(n, k, s, p, d, ceil_mode):
    """torch's pooling_output_shape."""
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _max_ref(x, k, s, p, d=(1, 1), ceil_mode=False):
    """Float64 max pooling and torch's indices (first row-major maximum, flat h * W + w)."""
    H, W = x.shape[-2:]
    oh, ow = (_out_len(n, *a, ceil_mode) for n, a in zip((H, W), zip(k, s, p, d)))
    planes = x.reshape(-1, H, W)
    y = np.empty((planes.shape[0], oh, ow))
    idx = np.empty(y.shape, np.int64)
    for c in range(planes.shape[0]):
        for i in range(oh):
            for j in range(ow):
                best, at = -np.inf, -1
                for a in range(k[0]):
                    for b in range(k[1]):
                        h, w = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
                        if 0 <= h < H and 0 <= w < W and (at < 0 or planes[c, h, w] > best):
                            best, at = planes[c, h, w], h * W + w
                y[c, i, j], idx[c, i, j] = best, at
    return y.reshape(x.shape[:-2] + (oh, ow)), idx.reshape(x.shape[:-2] + (oh, ow))


def _avg_ref(x, k, s, p, ceil_mode=False, count_include_pad=True, divisor_override=None):
    H, W = x.shape[-2:]
    oh, ow = (_out_len(n, *a, 1, ceil_mode) for n, a in zip((H, W), zip(k, s, p)))
    planes = x.reshape(-1, H, W)
    y = np.empty((planes.shape[0], oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs, ws = i * s[0] - p[0], j * s[1] - p[1]
            he, we = min(hs + k[0], H + p[0]), min(ws + k[1], W + p[1])
            size = (he - hs) * (we - ws)
            hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, H), min(we, W)
            total = planes[:, hs:he, ws:we].sum(axis=(1, 2))
            div = divisor_override or (size if count_include_pad else (he - hs) * (we - ws))
            y[:, i, j] = total / div
    return y.reshape(x.shape[:-2] + (oh, ow))


def _adaptive_max_ref(x, oh, ow):
    H, W = x.shape[-2:]
    planes = x.reshape(-1, H, W)
    y = np.empty((planes.shape[0], oh, ow))
    idx = np.empty(y.shape, np.int64)
    for i in range(oh):
        h0, h1 = (i * H) // oh, -(-((i + 1) * H) // oh)
        for j in range(ow):
            w0, w1 = (j * W) // ow, -(-((j + 1) * W) // ow)
            win = planes[:, h0:h1, w0:w1].reshape(planes.shape[0], -1)
            a = np.argmax(win, axis=1)
            y[:, i, j] = win[np.arange(len(a)), a]
            idx[:, i, j] = (h0 + a // (w1 - w0)) * W + w0 + a % (w1 - w0)
    return y.reshape(x.shape[:-2] + (oh, ow)), idx.reshape(x.shape[:-2] + (oh, ow))


def _distinct(shape, seed):
    """Values at least 0.01 apart (no ties, so max gradients have a unique target)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return ((rng.permutation(n) - n / 2) * 0.01 + rng.uniform(0, 1e-3, n)).reshape(shape)


def _run(f, a):
    s = Session()
    x = s.tensor(a.astype(np.float32), requires_grad=True)
    out = f(x)
    y = out[0] if isinstance(out, tuple) else out
    w = np.random.default_rng(3).uniform(-1, 1, size=y.shape)
    (y * s.tensor(w)).sum().backward()
    return out, y.numpy().astype(np.float64), x.grad, w


def _fd_check(ref, a, w, g, coords=30, eps=1e-4):
    a = a.astype(np.float32).astype(np.float64)
    for i in np.random.default_rng(1).permutation(a.size)[:coords]:
        ap, am = a.copy().reshape(-1), a.copy().reshape(-1)
        ap[i] += eps
        am[i] -= eps
        want = (np.sum(w * ref(ap.reshape(a.shape))) - np.sum(w * ref(am.reshape(a.shape)))) / (2 * eps)
        assert g.reshape(-1)[i] == pytest.approx(want, rel=2e-3, abs=2e-4), i


MAX_CASES = [
    ((2, 3, 7, 6), (3, 3), (2, 2), (1, 1), (1, 1), True),
    ((1, 1, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), True),
    ((1, 2, 4, 4), (2, 2), (3, 3), (1, 1), (1, 1), True),     # last window dropped (torch rule)
    ((2, 7, 8), (3, 2), (1, 2), (1, 1), (2, 3), False),        # dilation, (C, H, W) input
    ((1, 1, 9, 7), (3, 3), (2, 3), (1, 0), (2, 1), True),      # dilation with ceil_mode
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0), (1, 1), True),
]


@pytest.mark.parametrize("shape,k,st,p,d,ceil", MAX_CASES)
def test_max_pool2d_options_forward_indices_and_gradient(shape, k, st, p, d, ceil):
    a = _distinct(shape, seed=sum(shape))
    (y, idx), got, g, w = _run(lambda x: F.max_pool2d(x, k, st, p, d, ceil, return_indices=True), a)
    want, want_idx = _max_ref(a.astype(np.float32).astype(np.float64), k, st, p, d, ceil)
    np.testing.assert_array_equal(got, want)
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx, want_idx)
    _fd_check(lambda v: _max_ref(v, k, st, p, d, ceil)[0], a, w, g)


def test_max_pool2d_indices_ties_take_the_first_and_module_returns_pair():
    a = np.ones((1, 1, 5, 5), np.float32)
    s = Session()
    y, idx = nn.MaxPool2d(3, 2, 1, return_indices=True, ceil_mode=True)(s.tensor(a))
    np.testing.assert_array_equal(y.numpy(), np.ones((1, 1, 3, 3)))
    # first real (row-major) cell of each window: rows/cols 0, 1, 3 start the windows
    starts = np.array([0, 1, 3])
    np.testing.assert_array_equal(idx[0, 0], starts[:, None] * 5 + starts[None, :])
    plain = nn.MaxPool2d(2)(s.tensor(a))                       # plain: the registry op
    assert plain.shape == (1, 1, 2, 2)


AVG_CASES = [
    ((2, 3, 7, 6), (3, 3), (2, 2), (1, 1), True, True, None),
    ((2, 3, 7, 6), (3, 3), (2, 2), (1, 1), True, False, None),
    ((1, 2, 5, 8), (3, 2), (2, 3), (1, 1), False, False, None),
    ((1, 2, 4, 4), (2, 2), (3, 3), (1, 1), True, False, None),
    ((3, 5, 5), (2, 3), (2, 2), (0, 1), True, True, 4),
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0), True, False, None),
]


@pytest.mark.parametrize("shape,k,st,p,ceil,incl,div", AVG_CASES)
def test_avg_pool2d_options_forward_and_gradient(shape, k, st, p, ceil, incl, div):
    a = np.random.default_rng(sum(shape)).uniform(-2, 2, size=shape)
    _, got, g, w = _run(lambda x: F.avg_pool2d(x, k, st, p, ceil, incl, div), a)
    ref = lambda v: _avg_ref(v, k, st, p, ceil, incl, div)
    np.testing.assert_allclose(got, ref(a.astype(np.float32).astype(np.float64)), rtol=1e-5,
                               atol=1e-6)
    _fd_check(ref, a, w, g)


def test_avg_pool2d_module_matches_functional():
    a = np.random.default_rng(0).uniform(-1, 1, size=(2, 2, 6, 5)).astype(np.float32)
    s = Session()
    m = nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)
    np.testing.assert_allclose(m(s.tensor(a)).numpy(),
                               _avg_ref(a.astype(np.float64), (3, 3), (2, 2), (1, 1), True, False),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,out", [((2, 3, 8, 6), (4, 3)), ((1, 2, 7, 5), (3, 4)),
                                       ((3, 5, 5), (5, 2)), ((1, 1, 3, 3), (1, 1))])
def test_adaptive_max_pool2d(shape, out):
    a = _distinct(shape, seed=7)
    (y, idx), got, g, w = _run(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True), a)
    want, want_idx = _adaptive_max_ref(a.astype(np.float32).astype(np.float64), *out)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(idx, want_idx)
    _fd_check(lambda v: _adaptive_max_ref(v, *out)[0], a, w, g)
    s = Session()
    m = nn.AdaptiveMaxPool2d(out)
    np.testing.assert_array_equal(m(s.tensor(a)).numpy(), want)


def test_pool_option_bad_inputs():
    s = Session()
    x = s.tensor(np.ones((1, 1, 4, 4)))
    with pytest.raises(ValueError, match="max_pool2d: padding 2 must be at most half"):
        F.max_pool2d(x, 3, padding=2, ceil_mode=True)
    with pytest.raises(ValueError, match=r"avg_pool2d: expected input \(N, C, H, W\).*\(4, 4\)"):
        F.avg_pool2d(s.tensor(np.ones((4, 4))), 2, count_include_pad=False)
    with pytest.raises(ValueError, match="max_pool2d: the window"):
        F.max_pool2d(x, 3, dilation=2)
    with pytest.raises(ValueError, match="avg_pool2d: divisor_override"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(ValueError, match="adaptive_max_pool2d: output size"):
        F.adaptive_max_pool2d(x, 0)
