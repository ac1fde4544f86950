"""conv1d/2d/3d with groups (depthwise included) and dilation, functional and modules, against
a float64 NumPy reference that loops over groups and reads dilated windows directly; gradients
of input, weight and bias against central differences of that reference; bad input."""
import numpy as np
import pytest

from torchlean import nn
from torchlean.nn import functional as F
from torchlean.random import manual_seed
from torchlean.session import Session


def _data(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(np.float32)


def _conv_ref(x, w, b, stride, padding, dilation, groups):
    """float64 grouped, dilated cross-correlation; x (N, C_in, *S), w (C_out, C_in/g, *k)"""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n = w.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    ke = [d * (k - 1) + 1 for k, d in zip(w.shape[2:], dilation)]
    win = np.lib.stride_tricks.sliding_window_view(x, ke, axis=tuple(range(2, 2 + n)))
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)
              + tuple(slice(None, None, d) for d in dilation)]
    cin_g, cout_g = w.shape[1], w.shape[0] // groups
    sub = "pqr"[:n]
    outs = []
    for g in range(groups):
        xg = win[:, g * cin_g:(g + 1) * cin_g]
        wg = w[g * cout_g:(g + 1) * cout_g]
        outs.append(np.einsum(f"nc{sub.upper()}{sub},oc{sub}->no{sub.upper()}", xg, wg))
    y = np.concatenate(outs, axis=1)
    return y + (0 if b is None else b.astype(np.float64).reshape((1, -1) + (1,) * n))


def _fd(f, a, w, coords=12, eps=1e-3):
    rng = np.random.default_rng(5)
    flat = rng.choice(a.size, min(coords, a.size), replace=False)
    est = []
    for c in flat:
        p, m = a.astype(np.float64).copy(), a.astype(np.float64).copy()
        p.flat[c] += eps
        m.flat[c] -= eps
        est.append((np.sum(w * f(p)) - np.sum(w * f(m))) / (2 * eps))
    return flat, np.array(est)


CASES = [  # rank, input shape, C_out, kernel, stride, padding, dilation, groups
    (1, (2, 4, 11), 6, 3, 1, 1, 2, 2),
    (1, (1, 3, 9), 3, 3, 2, 0, 3, 3),            # depthwise
    (2, (2, 4, 7, 8), 4, (3, 2), 1, (2, 1), (2, 3), 4),   # depthwise, dilated
    (2, (1, 6, 6, 5), 9, 3, (2, 1), 1, 1, 3),
    (2, (2, 2, 5, 5), 4, 2, 1, 0, 2, 1),         # dilation only
    (3, (1, 4, 5, 4, 6), 2, (2, 1, 3), 1, (1, 0, 2), (2, 1, 2), 2),
    (1, (1, 1, 1), 1, 1, 1, 0, 4, 1),            # size 1
]


@pytest.mark.parametrize("rank,shape,cout,k,stride,padding,dilation,groups", CASES)
def test_grouped_dilated_conv_matches_reference(rank, shape, cout, k, stride, padding, dilation, groups):
    tup = lambda v: (v,) * rank if isinstance(v, int) else tuple(v)  # noqa: E731
    ks, st, pd, dl = tup(k), tup(stride), tup(padding), tup(dilation)
    x = _data(*shape, seed=1)
    w = _data(cout, shape[1] // groups, *ks, seed=2)
    b = _data(cout, seed=3)
    s = Session()
    tx, tw, tb = (s.tensor(v, requires_grad=True) for v in (x, w, b))
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[rank]
    y = fn(tx, tw, tb, stride=stride, padding=padding, dilation=dilation, groups=groups)
    want = _conv_ref(x, w, b, st, pd, dl, groups)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    g = np.random.default_rng(4).uniform(-1, 1, size=want.shape)
    (y * s.tensor(g)).sum().backward()
    for t, v, f in ((tx, x, lambda a: _conv_ref(a, w, b, st, pd, dl, groups)),
                    (tw, w, lambda a: _conv_ref(x, a, b, st, pd, dl, groups)),
                    (tb, b, lambda a: _conv_ref(x, w, a, st, pd, dl, groups))):
        coords, est = _fd(f, v, g)
        np.testing.assert_allclose(t.grad.reshape(-1)[coords], est, rtol=1e-3, atol=1e-3)


def test_depthwise_module_and_same_padding_with_dilation():
    manual_seed(4)
    conv = nn.Conv1d(4, 8, 3, padding="same", dilation=2, groups=4, bias=False)
    assert conv.weight.shape == (8, 1, 3)
    x = _data(2, 4, 10, seed=6)
    s = Session()
    y = conv(s.tensor(x))
    assert y.shape == (2, 8, 10)
    np.testing.assert_allclose(y.numpy(), _conv_ref(x, conv.weight.numpy(), None, (1,), (2,), (2,), 4),
                               rtol=1e-5, atol=1e-5)
    c2 = nn.Conv2d(6, 3, 3, padding=2, dilation=2, groups=3)
    x2 = _data(2, 6, 7, 5, seed=8)
    assert c2.weight.shape == (3, 2, 3, 3)
    np.testing.assert_allclose(c2(s.tensor(x2)).numpy(),
                               _conv_ref(x2, c2.weight.numpy(), c2.bias.numpy(), (1, 1), (2, 2), (2, 2), 3),
                               rtol=1e-5, atol=1e-5)
    c3 = nn.Conv3d(2, 4, 3, dilation=(1, 2, 1), groups=2)
    x3 = _data(1, 2, 4, 6, 4, seed=7)
    np.testing.assert_allclose(c3(s.tensor(x3)).numpy(),
                               _conv_ref(x3, c3.weight.numpy(), c3.bias.numpy(), (1,) * 3, (0,) * 3,
                                         (1, 2, 1), 2), rtol=1e-5, atol=1e-5)


def test_grouped_conv_bad_input():
    s = Session()
    x = s.tensor(_data(1, 4, 8))
    with pytest.raises(ValueError, match=r"conv1d: groups=3 needs C_in \(4\)"):
        F.conv1d(x, s.tensor(_data(6, 1, 3)), groups=3)
    with pytest.raises(ValueError, match=r"conv1d: groups=2 .*weight \(6, 1, 3\)"):
        F.conv1d(x, s.tensor(_data(6, 1, 3)), groups=2)
    with pytest.raises(ValueError, match="conv2d: dilation must be >= 1"):
        F.conv2d(s.tensor(_data(1, 2, 5, 5)), s.tensor(_data(2, 2, 3, 3)), dilation=0)
    with pytest.raises(NotImplementedError, match="padding='same'"):
        nn.Conv1d(2, 2, 2, padding="same", dilation=1)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv1d(4, 6, 3, groups=4)
    with pytest.raises(ValueError, match=r"Conv2d: in_channels \(3\)"):
        nn.Conv2d(3, 6, 3, groups=2)
