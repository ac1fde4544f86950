"""ConvTranspose2d / F.conv_transpose2d output_padding against a float64 scatter loop written
from torch's definition, with central finite differences of that loop."""
import numpy as np
import pytest

from torchlean import nn
from torchlean.nn import functional as F
from torchlean.session import Session, manual_seed


def _ref(x, w, b, stride, padding, output_padding):
    """y[o, i s + a - p] += x[c, i] w[c, o, a] over both spatial axes, out = (in - 1) s - 2 p
    + k + output_padding."""
    batched = x.ndim == 4
    x = x if batched else x[None]
    n, cin, h, wd = x.shape
    _, cout, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw) = stride, padding, output_padding
    oh, ow = (h - 1) * sh - 2 * ph + kh + oph, (wd - 1) * sw - 2 * pw + kw + opw
    y = np.zeros((n, cout, oh, ow)) + b[None, :, None, None]
    for i in range(h):
        for j in range(wd):
            for a in range(kh):
                for c in range(kw):
                    r, q = i * sh + a - ph, j * sw + c - pw
                    if 0 <= r < oh and 0 <= q < ow:
                        y[:, :, r, q] += x[:, :, i, j] @ w[:, :, a, c]
    return y if batched else y[0]


def _fd(f, a, wgt, coords=15, eps=1e-4):
    out = {}
    for i in np.random.default_rng(2).permutation(a.size)[:coords]:
        ap, am = a.copy().reshape(-1), a.copy().reshape(-1)
        ap[i] += eps
        am[i] -= eps
        out[i] = (np.sum(wgt * f(ap.reshape(a.shape))) - np.sum(wgt * f(am.reshape(a.shape)))) / (2 * eps)
    return out


@pytest.mark.parametrize("shape,cout,k,stride,padding,opad", [
    ((2, 3, 4, 5), 2, 3, (2, 2), (1, 1), (1, 1)),
    ((1, 2, 3, 3), 3, 2, (3, 2), (0, 0), (2, 1)),      # output_padding > padding: zero cells
    ((2, 3, 3), 2, 3, (2, 3), (1, 0), (0, 2)),          # (C, H, W) input, one axis padded only
    ((1, 1, 1, 1), 1, 1, (2, 2), (0, 0), (1, 1)),
])
def test_conv_transpose2d_output_padding(shape, cout, k, stride, padding, opad):
    manual_seed(4)
    m = nn.ConvTranspose2d(shape[-3], cout, k, stride=stride, padding=padding,
                           output_padding=opad)
    wt, b = m.weight.numpy().astype(np.float64), m.bias.numpy().astype(np.float64)
    a = np.random.default_rng(5).uniform(-1, 1, size=shape).astype(np.float32)
    s = Session()
    x = s.tensor(a, requires_grad=True)
    y = m(x)
    want = _ref(a.astype(np.float64), wt, b, stride, padding, opad)
    assert y.shape == want.shape
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    g = np.random.default_rng(6).uniform(-1, 1, size=want.shape)
    (y * s.tensor(g)).sum().backward()
    for i, v in _fd(lambda v: _ref(v, wt, b, stride, padding, opad), a.astype(np.float64), g).items():
        assert x.grad.reshape(-1)[i] == pytest.approx(v, rel=1e-3, abs=1e-4)
    for i, v in _fd(lambda v: _ref(a.astype(np.float64), v, b, stride, padding, opad), wt, g).items():
        assert m.weight.grad.reshape(-1)[i] == pytest.approx(v, rel=1e-3, abs=1e-4)
    np.testing.assert_allclose(m.bias.grad, g.reshape((-1,) + g.shape[-3:]).sum(axis=(0, 2, 3)),
                               rtol=1e-4, atol=1e-5)


def test_conv_transpose2d_functional_plain_and_bad_inputs():
    rng = np.random.default_rng(0)
    a, w = rng.uniform(-1, 1, size=(1, 2, 3, 3)), rng.uniform(-1, 1, size=(2, 3, 2, 2))
    s = Session()
    y = F.conv_transpose2d(s.tensor(a), s.tensor(w), stride=2)
    np.testing.assert_allclose(y.numpy(), _ref(a, w, np.zeros(3), (2, 2), (0, 0), (0, 0)),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"conv_transpose2d: output_padding \(2, 2\).*stride \(2, 2\)"):
        F.conv_transpose2d(s.tensor(a), s.tensor(w), stride=2, output_padding=2)
    with pytest.raises(ValueError, match=r"conv_transpose2d: expected weight.*\(1, 3, 3, 3\)"):
        F.conv_transpose2d(s.tensor(np.ones((1, 3, 3, 3))), s.tensor(w), stride=2,
                           output_padding=1)
    with pytest.raises(NotImplementedError, match="conv_transpose2d: groups"):
        F.conv_transpose2d(s.tensor(a), s.tensor(w), groups=2)
