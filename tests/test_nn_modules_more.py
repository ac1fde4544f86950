"""torch.nn modules added for PyTorch programs (activations, Dropout2d, 1-D / 3-D pooling,
interpolate, LSTM, GRU, MultiheadAttention, Embedding(padding_idx), bias-free convolutions),
each against a float64 NumPy reference written from torch's documented formulas, gradients
against central finite differences."""
import math

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn
from torchlean.nn import functional as F
from torchlean.session import Session


def _rng(seed):
    return np.random.default_rng(seed)


def _fd(fref, a, w, eps=1e-4, coords=24):
    """Central differences of sum(w * fref(a)) at up to `coords` coordinates of a."""
    a = a.astype(np.float64)
    out = {}
    for i in _rng(1).permutation(a.size)[:coords]:
        p, m = a.copy().reshape(-1), a.copy().reshape(-1)
        p[i] += eps
        m[i] -= eps
        out[i] = (np.sum(w * fref(p.reshape(a.shape))) - np.sum(w * fref(m.reshape(a.shape)))) / (2 * eps)
    return out


def _check(fn, fref, a, rtol=1e-5, atol=1e-5, gtol=2e-3):
    s = Session()
    x = s.tensor(a, requires_grad=True)
    y = fn(x)
    ref = fref(a.astype(np.float64))
    np.testing.assert_allclose(y.numpy(), ref, rtol=rtol, atol=atol)
    w = _rng(7).uniform(-1, 1, size=ref.shape)
    (y * s.tensor(w)).sum().backward()
    for i, v in _fd(fref, a, w).items():
        assert x.grad.reshape(-1)[i] == pytest.approx(v, rel=gtol, abs=gtol), i


# ------------------------------------------------------------------- activations

def test_silu_leaky_relu_elu_identity():
    a = _rng(0).normal(size=(3, 7)) * 3
    a[0, 0] = 0.25
    sig = lambda v: 1 / (1 + np.exp(-v))
    _check(nn.SiLU(), lambda v: v * sig(v), a)
    _check(F.silu, lambda v: v * sig(v), a)
    _check(nn.LeakyReLU(0.2), lambda v: np.where(v > 0, v, 0.2 * v), a)
    _check(nn.LeakyReLU(), lambda v: np.where(v > 0, v, 0.01 * v), a)
    _check(nn.ELU(alpha=1.5), lambda v: np.where(v > 0, v, 1.5 * np.expm1(v)), a)
    s = Session()
    x = s.tensor(a)
    assert nn.Identity(3, foo=1)(x) is x


def test_dropout2d_zeroes_whole_channels():
    tl.manual_seed(3)
    s = Session()
    a = _rng(1).uniform(1, 2, size=(8, 16, 3, 5))
    y = nn.Dropout2d(p=0.25)(s.tensor(a)).numpy()
    per = y.reshape(8, 16, -1)
    zero = np.all(per == 0, axis=-1)
    kept = ~zero
    np.testing.assert_allclose(per[kept], (a.reshape(8, 16, -1) / 0.75)[kept], rtol=1e-6)
    assert 0 < zero.sum() < zero.size          # some channels dropped, whole channels only
    m = nn.Dropout2d(0.5).eval()
    np.testing.assert_array_equal(m(s.tensor(a)).numpy(), a.astype(np.float32))
    with pytest.raises(ValueError, match="Dropout2d: p must be in"):
        nn.Dropout2d(1.5)


# ------------------------------------------------------------------- pooling

def _pool_ref(x, k, st, p, kind, ceil_mode=False, count_include_pad=True, divisor=None):
    """Direct N-D pooling over the trailing len(k) axes with torch's output-size rules."""
    r = len(k)
    sp = x.shape[-r:]
    outs = []
    for n, a, b, c in zip(sp, k, st, p):
        span = n + 2 * c - a
        o = (-(-span // b) if ceil_mode else span // b) + 1
        if ceil_mode and (o - 1) * b >= n + c:
            o -= 1
        outs.append(o)
    y = np.zeros(x.shape[:-r] + tuple(outs))
    for idx in np.ndindex(*outs):
        lo = [i * b - c for i, b, c in zip(idx, st, p)]
        hi = [min(l + a, n + c) for l, a, n, c in zip(lo, k, sp, p)]
        clo = [max(l, 0) for l in lo]
        chi = [min(h, n) for h, n in zip(hi, sp)]
        win = x[(Ellipsis,) + tuple(slice(a, b) for a, b in zip(clo, chi))]
        win = win.reshape(x.shape[:-r] + (-1,))
        if kind == "max":
            y[(Ellipsis,) + idx] = win.max(-1)
        else:
            if divisor is not None:
                d = divisor
            elif count_include_pad:
                d = math.prod(h - l for h, l in zip(hi, lo))
            else:
                d = math.prod(h - l for h, l in zip(chi, clo))
            y[(Ellipsis,) + idx] = win.sum(-1) / d
    return y


@pytest.mark.parametrize("k, st, p, ceil", [(3, 2, 1, False), (2, None, 0, True), (3, 2, 1, True),
                                            (1, 1, 0, False)])
def test_pool1d(k, st, p, ceil):
    a = _rng(2).normal(size=(2, 3, 8))
    s_ = k if st is None else st
    _check(nn.MaxPool1d(k, st, p, ceil_mode=ceil),
           lambda v: _pool_ref(v, (k,), (s_,), (p,), "max", ceil), a)
    for cip in (True, False):
        _check(nn.AvgPool1d(k, st, p, ceil_mode=ceil, count_include_pad=cip),
               lambda v: _pool_ref(v, (k,), (s_,), (p,), "avg", ceil, cip), a)
    # unbatched (C, L)
    s = Session()
    got = F.max_pool1d(s.tensor(a[0]), k, st, p, ceil_mode=ceil).numpy()
    np.testing.assert_allclose(got, _pool_ref(a[0], (k,), (s_,), (p,), "max", ceil), rtol=1e-6)


def test_max_pool1d_return_indices():
    a = _rng(3).permutation(14).reshape(2, 7).astype(np.float64)
    s = Session()
    y, idx = F.max_pool1d(s.tensor(a[None]), 3, 2, return_indices=True)
    win = np.stack([a[:, i:i + 3] for i in (0, 2, 4)], -1)
    np.testing.assert_array_equal(idx[0], (np.argmax(win, 1) + np.array([0, 2, 4])))
    np.testing.assert_array_equal(y.numpy()[0], win.max(1))


@pytest.mark.parametrize("k, st, p, ceil", [((2, 2, 2), None, 0, False), (3, 2, 1, True),
                                            ((2, 3, 1), (2, 2, 1), (1, 1, 0), True)])
def test_pool3d(k, st, p, ceil):
    a = _rng(4).normal(size=(2, 2, 5, 6, 4))
    kk = (k,) * 3 if isinstance(k, int) else k
    ss = kk if st is None else ((st,) * 3 if isinstance(st, int) else st)
    pp = (p,) * 3 if isinstance(p, int) else p
    _check(nn.MaxPool3d(k, st, p, ceil_mode=ceil),
           lambda v: _pool_ref(v, kk, ss, pp, "max", ceil), a)
    for cip in (True, False):
        _check(nn.AvgPool3d(k, st, p, ceil_mode=ceil, count_include_pad=cip),
               lambda v: _pool_ref(v, kk, ss, pp, "avg", ceil, cip), a)
    _check(lambda x: F.avg_pool3d(x, k, st, p, ceil, divisor_override=5),
           lambda v: _pool_ref(v, kk, ss, pp, "avg", ceil, divisor=5), a)


def test_pool_bad_arguments():
    s = Session()
    with pytest.raises(ValueError, match=r"max_pool1d: expected input \(N, C, L\)"):
        F.max_pool1d(s.tensor(np.ones((1, 2, 3, 4))), 2)
    with pytest.raises(ValueError, match=r"avg_pool3d: expected input \(N, C, D, H, W\)"):
        F.avg_pool3d(s.tensor(np.ones((2, 3, 4))), 2)
    with pytest.raises(NotImplementedError, match="max_pool3d: dilation"):
        F.max_pool3d(s.tensor(np.ones((1, 1, 4, 4, 4))), 2, dilation=2)


# ------------------------------------------------------------------- interpolate

def _nearest_ref(x, outs, exact=False):
    ins = x.shape[2:]
    idx = []
    for n, o in zip(ins, outs):
        d = np.arange(o)
        src = np.floor((d + 0.5) * n / o) if exact else np.floor(d * np.float32(n / o))
        idx.append(np.minimum(src.astype(int), n - 1))
    return x[np.ix_(np.arange(x.shape[0]), np.arange(x.shape[1]), *idx)]


def _bilinear_ref(x, outs, align_corners, scales=None):
    """Per-pixel bilinear sampling; source scale in / out unless `scales` (torch uses
    1 / scale_factor when a scale factor is given)."""
    n_h, n_w = x.shape[2:]
    scales = scales or (n_h / outs[0], n_w / outs[1])
    y = np.zeros(x.shape[:2] + tuple(outs))
    for j in range(outs[0]):
        for i in range(outs[1]):
            coords = []
            for d, n, o, sc in ((j, n_h, outs[0], scales[0]), (i, n_w, outs[1], scales[1])):
                if align_corners:
                    c = d * (n - 1) / (o - 1) if o > 1 else 0.0
                else:
                    c = max((d + 0.5) * sc - 0.5, 0.0)
                coords.append(c)
            (ch, cw) = coords
            h0, w0 = min(int(ch), n_h - 1), min(int(cw), n_w - 1)
            h1, w1 = min(h0 + 1, n_h - 1), min(w0 + 1, n_w - 1)
            lh, lw = ch - h0, cw - w0
            y[:, :, j, i] = ((1 - lh) * ((1 - lw) * x[:, :, h0, w0] + lw * x[:, :, h0, w1])
                             + lh * ((1 - lw) * x[:, :, h1, w0] + lw * x[:, :, h1, w1]))
    return y


@pytest.mark.parametrize("outs", [(7, 9), (2, 3), (4, 6), (1, 1)])
def test_interpolate_nearest_and_bilinear(outs):
    a = _rng(5).normal(size=(2, 3, 4, 5))
    _check(lambda x: F.interpolate(x, size=outs), lambda v: _nearest_ref(v, outs), a)
    _check(lambda x: F.interpolate(x, size=outs, mode="nearest-exact"),
           lambda v: _nearest_ref(v, outs, exact=True), a)
    for ac in (False, True):
        _check(lambda x: F.interpolate(x, size=outs, mode="bilinear", align_corners=ac),
               lambda v: _bilinear_ref(v, outs, ac), a)


def test_upsample_scale_factor_and_affine_exactness():
    # bilinear reproduces an affine image exactly at align_corners=True
    h, w = np.meshgrid(np.arange(4.0), np.arange(5.0), indexing="ij")
    img = (0.5 * h - 0.25 * w + 1.0)[None, None]
    s = Session()
    y = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)(s.tensor(img)).numpy()
    hh, ww = np.meshgrid(np.arange(8) * 3 / 7, np.arange(10) * 4 / 9, indexing="ij")
    np.testing.assert_allclose(y[0, 0], 0.5 * hh - 0.25 * ww + 1.0, rtol=1e-5, atol=1e-5)
    y = nn.Upsample(scale_factor=2)(s.tensor(img)).numpy()
    np.testing.assert_array_equal(y[0, 0], np.repeat(np.repeat(img[0, 0], 2, 0), 2, 1))
    x1 = _rng(6).normal(size=(1, 2, 5))
    _check(lambda x: F.interpolate(x, scale_factor=1.5, mode="linear"),
           lambda v: _bilinear_ref(v[:, :, None, :], (1, 7), False, (1.0, 1 / 1.5))[:, :, 0], x1)


def _linear_axis_ref(x, axis, n_out, align_corners):
    """1-D linear resampling of x along `axis` by torch's source rule (scale in / out)."""
    n = x.shape[axis]
    xm = np.moveaxis(x, axis, -1)
    out = np.zeros(xm.shape[:-1] + (n_out,))
    for j in range(n_out):
        if align_corners:
            c = j * (n - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            c = max((j + 0.5) * n / n_out - 0.5, 0.0)
        i0 = min(int(c), n - 1)
        i1, l1 = min(i0 + 1, n - 1), c - i0
        out[..., j] = (1 - l1) * xm[..., i0] + l1 * xm[..., i1]
    return np.moveaxis(out, -1, axis)


def test_interpolate_whole_number_nearest_and_trilinear():
    a = _rng(57).normal(size=(1, 2, 4, 5))
    _check(lambda x: F.interpolate(x, scale_factor=(2, 3)), lambda v: _nearest_ref(v, (8, 15)), a)
    b = _rng(58).normal(size=(1, 2, 3, 4, 2))
    outs = (5, 4, 3)
    for ac in (False, True):
        def ref(v, ac=ac):
            for axis, o in zip((2, 3, 4), outs):
                v = _linear_axis_ref(v, axis, o, ac)
            return v
        _check(lambda x, ac=ac: F.interpolate(x, size=outs, mode="trilinear", align_corners=ac),
               ref, b)
    c = _rng(59).normal(size=(2, 3, 4))
    _check(lambda x: nn.Upsample(size=7)(x), lambda v: _nearest_ref(v[:, :, None], (1, 7))[:, :, 0], c)


def test_interpolate_bad_arguments():
    s = Session()
    x = s.tensor(np.ones((1, 1, 3, 3)))
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="mode 'linear' needs 3-D input"):
        F.interpolate(x, size=4, mode="linear")
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.interpolate(x, size=4, mode="bicubic")
    with pytest.raises(ValueError, match="align_corners may only be set"):
        F.interpolate(x, size=4, align_corners=True)


# ------------------------------------------------------------------- recurrent

def _sig(v):
    return 1 / (1 + np.exp(-v))


def _lstm_ref(sd, x, layers, h, bidirectional, batch_first):
    """torch's LSTM equations over x (L, N, in) (transposed when batch_first)."""
    if batch_first:
        x = x.transpose(1, 0, 2)
    dirs = 2 if bidirectional else 1
    hn, cn = [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            tag = f"l{layer}" + ("_reverse" if d else "")
            wih, whh = sd[f"weight_ih_{tag}"], sd[f"weight_hh_{tag}"]
            b = sd[f"bias_ih_{tag}"] + sd[f"bias_hh_{tag}"]
            hh = np.zeros((x.shape[1], h))
            cc = np.zeros((x.shape[1], h))
            ys = [None] * x.shape[0]
            for t in (range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])):
                g = x[t] @ wih.T + hh @ whh.T + b
                i, f, gg, o = np.split(g, 4, axis=1)
                cc = _sig(f) * cc + _sig(i) * np.tanh(gg)
                hh = _sig(o) * np.tanh(cc)
                ys[t] = hh
            outs.append(np.stack(ys))
            hn.append(hh)
            cn.append(cc)
        x = np.concatenate(outs, -1)
    out = x.transpose(1, 0, 2) if batch_first else x
    return out, np.stack(hn), np.stack(cn)


def _gru_ref(sd, x, h0):
    hh = h0
    ys = []
    wih, whh, bih, bhh = (sd[k] for k in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
                                          "bias_hh_l0"))
    for t in range(x.shape[0]):
        gi, gh = x[t] @ wih.T + bih, hh @ whh.T + bhh
        r = _sig(gi[:, :len(hh[0])] + gh[:, :len(hh[0])])
        hs = hh.shape[1]
        z = _sig(gi[:, hs:2 * hs] + gh[:, hs:2 * hs])
        n = np.tanh(gi[:, 2 * hs:] + r * gh[:, 2 * hs:])
        hh = (1 - z) * n + z * hh
        ys.append(hh)
    return np.stack(ys), hh


@pytest.mark.parametrize("layers, bidir, batch_first", [(1, False, False), (2, True, True),
                                                         (2, False, True)])
def test_lstm_matches_torch_equations(layers, bidir, batch_first):
    tl.manual_seed(1)
    m = nn.LSTM(3, 5, num_layers=layers, bidirectional=bidir, batch_first=batch_first)
    sd = {k: v.astype(np.float64) for k, v in m.state_dict().items()}
    names = [f"{k}_l{i}{r}" for i in range(layers) for r in ([""] + (["_reverse"] if bidir else []))
             for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    assert list(sd) == names
    assert sd["weight_ih_l0"].shape == (20, 3) and sd["weight_hh_l0"].shape == (20, 5)
    a = _rng(8).normal(size=(4, 2, 3))
    out_ref, h_ref, c_ref = _lstm_ref(sd, a, layers, 5, bidir, batch_first)
    s = Session()
    x = s.tensor(a, requires_grad=True)
    out, (hn, cn) = m(x)
    np.testing.assert_allclose(out.numpy(), out_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hn.numpy(), h_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cn.numpy(), c_ref, rtol=1e-5, atol=1e-6)
    w = _rng(9).uniform(-1, 1, size=out_ref.shape)
    (out * s.tensor(w)).sum().backward()
    for i, v in _fd(lambda v: _lstm_ref(sd, v, layers, 5, bidir, batch_first)[0], a, w,
                    coords=8).items():
        assert x.grad.reshape(-1)[i] == pytest.approx(v, rel=2e-3, abs=2e-3)


def test_gru_with_initial_state_unbatched_and_strict_load():
    tl.manual_seed(2)
    m = nn.GRU(4, 3)
    sd = {k: _rng(10 + i).normal(size=v.shape) * 0.5 for i, (k, v) in enumerate(m.state_dict().items())}
    m.load_state_dict(sd)                     # torch's names load strictly
    a = _rng(11).normal(size=(5, 2, 4))
    h0 = _rng(12).normal(size=(1, 2, 3))
    ref_out, ref_h = _gru_ref(sd, a, h0[0])
    s = Session()
    out, hn = m(s.tensor(a), s.tensor(h0))
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hn.numpy(), ref_h[None], rtol=1e-5, atol=1e-6)
    out1, h1 = m(s.tensor(a[:, 0]))          # unbatched (L, in)
    np.testing.assert_allclose(out1.numpy(), _gru_ref(sd, a[:, :1], np.zeros((1, 3)))[0][:, 0],
                               rtol=1e-5, atol=1e-6)
    assert h1.shape == (1, 3)
    with pytest.raises(ValueError, match=r"GRU: expected h_0 of shape \(1, 2, 3\)"):
        m(s.tensor(a), s.tensor(np.zeros((2, 2, 3))))
    with pytest.raises(ValueError, match=r"GRU: expected input \(L, N, 4\)"):
        m(s.tensor(np.zeros((5, 2, 3))))


# ------------------------------------------------------------------- attention

def _mha_ref(sd, q, k, v, heads, blocked=None, kpm=None):
    """torch's MultiheadAttention (batch first here): outputs and head-averaged weights."""
    e = q.shape[-1]
    w, b = sd["in_proj_weight"], sd["in_proj_bias"]
    proj = [t @ w[i * e:(i + 1) * e].T + b[i * e:(i + 1) * e] for i, t in enumerate((q, k, v))]
    n, l, s_ = q.shape[0], q.shape[1], k.shape[1]
    hd = e // heads
    qh, kh, vh = (p.reshape(n, -1, heads, hd).transpose(0, 2, 1, 3) for p in proj)
    sc = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(hd)
    if blocked is not None:
        sc = np.where(blocked, -np.inf, sc)
    if kpm is not None:
        sc = np.where(kpm[:, None, None, :], -np.inf, sc)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = (p @ vh).transpose(0, 2, 1, 3).reshape(n, l, e)
    return o @ sd["out_proj.weight"].T + sd["out_proj.bias"], p.mean(1)


def test_multihead_attention_loads_torch_state_and_returns_averaged_weights():
    tl.manual_seed(4)
    m = nn.MultiheadAttention(8, 2, batch_first=True)
    assert list(m.state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                    "out_proj.bias"]
    sd = {k: _rng(20 + i).normal(size=v.shape) * 0.4 for i, (k, v) in enumerate(m.state_dict().items())}
    m.load_state_dict(sd)
    q, k = _rng(30).normal(size=(2, 4, 8)), _rng(31).normal(size=(2, 6, 8))
    s = Session()
    out, w = m(s.tensor(q), s.tensor(k), s.tensor(k))
    ref_o, ref_w = _mha_ref(sd, q, k, k, 2)
    np.testing.assert_allclose(out.numpy(), ref_o, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-5, atol=1e-6)
    blocked = np.triu(np.ones((4, 6), bool), 1)
    kpm = np.zeros((2, 6), bool)
    kpm[1, 5] = True
    out, w = m(s.tensor(q), s.tensor(k), s.tensor(k), attn_mask=blocked, key_padding_mask=kpm)
    ref_o, ref_w = _mha_ref(sd, q, k, k, 2, blocked, kpm)
    np.testing.assert_allclose(out.numpy(), ref_o, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-5, atol=1e-6)
    # sequence-first default layout and per-head weights
    m2 = nn.MultiheadAttention(8, 2)
    m2.load_state_dict(sd)
    out, w = m2(*(s.tensor(q.transpose(1, 0, 2)),) * 3, average_attn_weights=False)
    ref_o, _ = _mha_ref(sd, q, q, q, 2)
    np.testing.assert_allclose(out.numpy(), ref_o.transpose(1, 0, 2), rtol=1e-5, atol=1e-5)
    assert w.shape == (2, 2, 4, 4)
    assert m2(*(s.tensor(q.transpose(1, 0, 2)),) * 3, need_weights=False)[1] is None
    # need_weights=False takes F.scaled_dot_product_attention (fused where it fits): same output
    qs = s.tensor(q)
    for kw in ({}, {"is_causal": True}, {"attn_mask": np.triu(np.ones((4, 4), bool), 1)},
               {"key_padding_mask": np.array([[False] * 3 + [True], [False] * 4])},
               {"attn_mask": np.where(np.eye(4, dtype=bool), -1.5, 0.0)}):
        a1 = m(qs, qs, qs, **kw)[0].numpy()
        a2, none = m(qs, qs, qs, need_weights=False, **kw)
        assert none is None
        np.testing.assert_allclose(a2.numpy(), a1, rtol=1e-5, atol=1e-6)


def test_integer_attention_mask_raises_as_torch():
    s = Session()
    x = s.tensor(_rng(40).normal(size=(2, 5, 8)))
    mask = np.tril(np.ones((5, 5), int))
    with pytest.raises(TypeError, match="attention mask must be boolean"):
        nn.MultiheadAttention(8, 2, batch_first=True)(x, x, x, attn_mask=mask)
    with pytest.raises(TypeError, match="attention mask must be boolean"):
        nn.MultiHeadAttention(8, 2)(x, mask=mask)
    with pytest.raises(TypeError, match="attention mask must be boolean"):
        F.scaled_dot_product_attention(x, x, x, attn_mask=mask)


# ------------------------------------------------------------------- embedding, convolution

def test_embedding_padding_idx_row_is_zero_and_gets_no_gradient():
    tl.manual_seed(5)
    e = nn.Embedding(6, 3, padding_idx=2)
    np.testing.assert_array_equal(e.weight.numpy()[2], 0.0)
    w = _rng(41).normal(size=(6, 3))
    w[2] = [1.0, 2.0, 3.0]                    # a loaded non-zero padding row is still read
    e.load_state_dict({"weight": w})
    idx = np.array([[2, 0, 2], [5, 2, 1]], np.int64)
    s = Session()
    y = e(idx, session=s)
    np.testing.assert_allclose(y.numpy(), w[idx], rtol=1e-6)
    g = _rng(42).normal(size=(2, 3, 3))
    (y * s.tensor(g)).sum().backward()
    ref = np.zeros((6, 3))
    np.add.at(ref, idx[idx != 2], g[idx != 2])
    np.testing.assert_allclose(e.weight.grad, ref, rtol=1e-5, atol=1e-6)
    assert nn.Embedding(4, 2, padding_idx=-1).padding_idx == 3


@pytest.mark.parametrize("cls, shape", [(nn.Conv1d, (2, 4, 9)), (nn.Conv2d, (2, 4, 6, 5)),
                                        (nn.Conv3d, (1, 4, 4, 5, 3))])
def test_convolutions_without_bias_load_torch_state_strictly(cls, shape):
    m = cls(4, 6, 3, padding=1, bias=False)
    assert list(m.state_dict()) == ["weight"]
    w = _rng(43).normal(size=m.weight.shape)
    m.load_state_dict({"weight": w})
    a = _rng(44).normal(size=shape)
    s = Session()
    y = m(s.tensor(a)).numpy()
    r = len(shape) - 2
    xp = np.pad(a, [(0, 0), (0, 0)] + [(1, 1)] * r)
    win = np.lib.stride_tricks.sliding_window_view(xp, (3,) * r, axis=tuple(range(2, 2 + r)))
    letters = "xyz"[:r]
    ref = np.einsum(f"nc{letters}{letters.upper()},oc{letters.upper()}->no{letters}", win, w)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(KeyError, match="unexpected keys"):
        m.load_state_dict({"weight": w, "bias": np.zeros(6)})


# ------------------------------------------------------------------- tensor forms

def _softmax(v, axis):
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dim", [0, 1, -1, -3])
def test_softmax_and_log_softmax_over_any_dim(dim):
    a = _rng(50).normal(size=(3, 4, 5)) * 2
    _check(lambda x: x.softmax(dim), lambda v: _softmax(v, dim), a)
    _check(lambda x: F.log_softmax(x, dim=dim), lambda v: np.log(_softmax(v, dim)), a)
    _check(lambda x: tl.softmax(x, dim), lambda v: _softmax(v, dim), a)
    s = Session()
    np.testing.assert_allclose(F.softmax(s.tensor(a)).numpy(), _softmax(a, -1), rtol=1e-5)
    with pytest.raises(IndexError, match="softmax: dim 3 is out of range"):
        s.tensor(a).softmax(3)


def test_clamp_min_max_as_torch():
    a = np.array([-np.inf, -2.0, -0.5, 0.0, 0.7, 3.0, np.inf, np.nan])
    s = Session()
    x = s.tensor(a)
    for kw, ref in (({"min": -1.0, "max": 1.0}, np.clip(a, -1, 1)),
                    ({"min": 0.0}, np.maximum(a, 0.0)),
                    ({"max": 0.5}, np.minimum(a, 0.5))):
        np.testing.assert_array_equal(x.clamp(**kw).numpy(), ref.astype(np.float32))
    np.testing.assert_array_equal(x.clamp(-1.0, 1.0).numpy(), np.clip(a, -1, 1).astype(np.float32))
    np.testing.assert_array_equal(x.clamp(lo=-1.0, hi=1.0).numpy(),
                                  np.clip(a, -1, 1).astype(np.float32))
    lo = s.tensor(np.full(8, -0.25))
    np.testing.assert_array_equal(x.clamp(min=lo).numpy(), np.maximum(a, -0.25).astype(np.float32))
    with pytest.raises(ValueError, match="at least one of 'min' or 'max'"):
        x.clamp()
    b = _rng(51).normal(size=(4, 3))
    _check(lambda t: t.clamp(min=-0.5, max=0.5), lambda v: np.clip(v, -0.5, 0.5), b)


@pytest.mark.parametrize("sa, sb", [((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)),
                                    ((3, 2, 4), (4,)), ((4,), (2, 4, 3)),
                                    ((3, 2, 4), (4, 5)), ((3, 2, 4), (3, 4, 5)),
                                    ((2, 1, 2, 4), (3, 4, 1)), ((2, 4), (3, 4, 2)),
                                    ((1, 1), (1, 1))])
def test_matmul_one_d_and_broadcast_batched(sa, sb):
    a, b = _rng(52).normal(size=sa), _rng(53).normal(size=sb)
    _check(lambda x: x @ b, lambda v: v @ b, a, rtol=1e-5, atol=1e-5)
    _check(lambda y: torch_matmul(a, y), lambda v: a @ v, b, rtol=1e-5, atol=1e-5)


def torch_matmul(a, y):
    return y.session.tensor(a).matmul(y)


def test_matmul_shape_errors():
    s = Session()
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4,\) cannot be multiplied"):
        s.tensor(np.ones((2, 3))) @ s.tensor(np.ones(4))
    with pytest.raises(ValueError, match=r"matmul: batch shapes \(2,\) and \(3,\)"):
        s.tensor(np.ones((2, 2, 3))) @ s.tensor(np.ones((3, 3, 2)))


def test_floor_and_trunc_division():
    a = np.array([7.0, -7.0, 7.5, -7.5, 0.0, -0.0, 1e9, -3.25, 6.0, 5.0, np.inf, np.nan])
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 7.0, 0.5, -3.0, 0.25, 2.0, 1.0])
    s = Session()
    x = s.tensor(a)
    q = (a.astype(np.float32) / b.astype(np.float32)).astype(np.float64)
    np.testing.assert_array_equal((x // s.tensor(b)).numpy(), np.floor(q).astype(np.float32))
    np.testing.assert_array_equal(x.div(s.tensor(b), rounding_mode="trunc").numpy(),
                                  np.trunc(q).astype(np.float32))
    fin = np.isfinite(a)          # inf // 2 is inf here, NaN in torch and NumPy (fmod-based)
    with np.errstate(invalid="ignore"):
        ref = np.floor_divide(a, b)[fin].astype(np.float32)
    np.testing.assert_array_equal(x.div(s.tensor(b), rounding_mode="floor").numpy()[fin], ref)
    np.testing.assert_array_equal((x // 4).numpy(), np.floor(a / 4).astype(np.float32))
    np.testing.assert_array_equal((10.0 // s.tensor(b[:4])).numpy(),
                                  np.floor(10.0 / b[:4]).astype(np.float32))
    # every float32 in a range: floor is exact, including halves and values near 2^23
    v = np.concatenate([np.linspace(-20, 20, 4001), 8388608.0 + np.arange(-4, 4) * 0.5,
                        -8388608.0 + np.arange(-4, 4) * 0.5]).astype(np.float32)
    np.testing.assert_array_equal(s.tensor(v).floor().numpy(), np.floor(v))
    np.testing.assert_array_equal(s.tensor(v).trunc().numpy(), np.trunc(v))
    with pytest.raises(ValueError, match="rounding_mode must be None, 'floor' or 'trunc'"):
        x.div(2.0, rounding_mode="round")


@pytest.mark.parametrize("ns", [(5,), (3, 5), 5])
def test_functional_layer_norm(ns):
    a = _rng(54).normal(size=(2, 3, 5)) * 3 + 1
    shape = (ns,) if isinstance(ns, int) else ns
    axes = tuple(range(-len(shape), 0))
    w, b = _rng(55).normal(size=shape), _rng(56).normal(size=shape)

    def ref(v, w=w, b=b):
        m = v.mean(axes, keepdims=True)
        var = ((v - m) ** 2).mean(axes, keepdims=True)
        return (v - m) / np.sqrt(var + 1e-5) * w + b
    _check(lambda x: F.layer_norm(x, ns, w, b), ref, a, rtol=1e-4, atol=1e-4)
    _check(lambda x: F.layer_norm(x, ns), lambda v: ref(v, 1.0, 0.0), a, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"layer_norm: expected input with trailing shape \(4,\)"):
        F.layer_norm(Session().tensor(a), 4)


def test_rnn_relu_and_tanh():
    for nl, act in (("tanh", np.tanh), ("relu", lambda v: np.maximum(v, 0))):
        tl.manual_seed(6)
        m = nn.RNN(3, 4, 2, nl, batch_first=True)
        sd = {k: v.astype(np.float64) for k, v in m.state_dict().items()}
        assert sd["weight_ih_l1"].shape == (4, 4) and sd["bias_hh_l0"].shape == (4,)
        a = _rng(60).normal(size=(2, 5, 3))
        x, hs = a.transpose(1, 0, 2), []
        for layer in range(2):
            h, ys = np.zeros((2, 4)), []
            for t in range(5):
                h = act(x[t] @ sd[f"weight_ih_l{layer}"].T + sd[f"bias_ih_l{layer}"]
                        + h @ sd[f"weight_hh_l{layer}"].T + sd[f"bias_hh_l{layer}"])
                ys.append(h)
            x = np.stack(ys)
            hs.append(h)
        out, hn = m(Session().tensor(a))
        np.testing.assert_allclose(out.numpy(), x.transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(hn.numpy(), np.stack(hs), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")


def test_torch_constructor_options_and_small_modules():
    from collections import OrderedDict
    s = Session()
    a = _rng(61).normal(size=(2, 12))
    x = s.tensor(a)
    m = nn.Sequential(OrderedDict(fc=nn.Linear(12, 6), act=nn.ReLU(inplace=True),
                                  drop=nn.Dropout(0.1, inplace=True), un=nn.Unflatten(1, (2, 3))))
    assert list(m.state_dict()) == ["fc.weight", "fc.bias"]
    m.eval()
    y = m(x)
    ref = np.maximum(a @ m.fc.weight.numpy().T.astype(np.float64) + m.fc.bias.numpy(), 0)
    np.testing.assert_allclose(y.numpy(), ref.reshape(2, 2, 3), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.Flatten()(y).numpy(), ref, rtol=1e-5, atol=1e-6)
    assert nn.Flatten(0, 1)(y).shape == (4, 3)
    np.testing.assert_allclose(nn.Softmax(dim=1)(x).numpy(), _softmax(a, 1), rtol=1e-5)
    np.testing.assert_allclose(nn.LogSoftmax(dim=-1)(x).numpy(), np.log(_softmax(a, 1)),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"Unflatten: unflattened_size \(5, 3\)"):
        nn.Unflatten(1, (5, 3))(x)
    with pytest.raises(TypeError, match="Sequential: 0 is not a Module"):
        nn.Sequential(3)


def test_multihead_attention_gradients_and_separate_projections():
    tl.manual_seed(7)
    m = nn.MultiheadAttention(4, 2, batch_first=True)
    sd = {k: _rng(70 + i).normal(size=v.shape) * 0.5 for i, (k, v) in enumerate(m.state_dict().items())}
    m.load_state_dict(sd)
    q = _rng(75).normal(size=(1, 3, 4))
    blocked = np.array([[False, True, True], [False, False, True], [False, False, False]])
    _check(lambda x: m(x, x, x, attn_mask=blocked)[0],
           lambda v: _mha_ref(sd, v, v, v, 2, blocked)[0], q, rtol=1e-4, atol=1e-5)
    # the weights' gradient: in_proj_weight by central differences of the reference
    m.zero_grad()
    s = Session()
    out, w = m(s.tensor(q), s.tensor(q), s.tensor(q))
    g = _rng(76).uniform(-1, 1, size=(1, 3, 4))
    (out * s.tensor(g)).sum().backward()

    def f(wv):
        return _mha_ref(dict(sd, in_proj_weight=wv), q, q, q, 2)[0]
    for i, v in _fd(f, sd["in_proj_weight"], g, coords=10).items():
        assert m.in_proj_weight.grad.reshape(-1)[i] == pytest.approx(v, rel=2e-3, abs=2e-3)
    k = nn.MultiheadAttention(4, 2, kdim=3, vdim=5)
    assert list(k.state_dict()) == ["q_proj_weight", "k_proj_weight", "v_proj_weight",
                                    "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    out, w = k(s.tensor(np.ones((2, 1, 4))), s.tensor(np.ones((6, 1, 3))), s.tensor(np.ones((6, 1, 5))))
    assert out.shape == (2, 1, 4) and w.shape == (1, 2, 6)
    np.testing.assert_allclose(w.numpy().sum(-1), 1.0, rtol=1e-6)
    with pytest.raises(AssertionError, match="divisible by num_heads"):
        nn.MultiheadAttention(5, 2)


@pytest.mark.parametrize("out", [1, 3, 4, 7])
def test_adaptive_pool1d(out):
    a = _rng(80).normal(size=(2, 3, 7))

    def ref(v, kind):
        cols = []
        for i in range(out):
            lo, hi = (i * 7) // out, -((-(i + 1) * 7) // out)
            w = v[..., lo:hi]
            cols.append(w.mean(-1) if kind == "avg" else w.max(-1))
        return np.stack(cols, -1)
    _check(nn.AdaptiveAvgPool1d(out), lambda v: ref(v, "avg"), a)
    _check(nn.AdaptiveMaxPool1d(out), lambda v: ref(v, "max"), a)
    y, idx = F.adaptive_max_pool1d(Session().tensor(a[0]), out, return_indices=True)
    assert idx.shape == (3, out)
    np.testing.assert_allclose(np.take_along_axis(a[0], idx, -1), y.numpy(), rtol=1e-6)


@pytest.mark.parametrize("mode, npmode", [("constant", "constant"), ("reflect", "reflect"),
                                          ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes(mode, npmode):
    a = _rng(81).normal(size=(2, 3, 4, 5))
    pads = (2, 1, 0, 3)                       # last axis (2, 1), then H (0, 3)
    width = [(0, 0), (0, 0), (0, 3), (2, 1)]
    _check(lambda x: F.pad(x, pads, mode=mode), lambda v: np.pad(v, width, mode=npmode), a)
    s = Session()
    with pytest.raises(ValueError, match="pad: pad must hold"):
        F.pad(s.tensor(a), (1, 2, 3))


def test_pad_constant_value_crop_and_channel_axis():
    a = _rng(82).normal(size=(2, 3, 4))
    s = Session()
    got = F.pad(s.tensor(a), (-1, 2, 0, 0, 1, 1), value=2.5).numpy()
    ref = np.pad(a[:, :, 1:], [(1, 1), (0, 0), (0, 2)], constant_values=2.5)
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    with pytest.raises(ValueError, match="reflect padding"):
        F.pad(s.tensor(a), (4, 0), mode="reflect")
    with pytest.raises(NotImplementedError, match="mode 'mirror'"):
        F.pad(s.tensor(a), (1, 1), mode="mirror")


@pytest.mark.parametrize("p, dim", [(2.0, 1), (1.0, -1), (3.0, 0)])
def test_normalize(p, dim):
    a = _rng(83).normal(size=(3, 4))
    a[1] = 0.0                                 # a zero row: divided by eps, stays 0
    def ref(v):
        n = (np.abs(v) ** p).sum(axis=dim, keepdims=True) ** (1 / p)
        return v / np.maximum(n, 1e-12)
    s = Session()
    np.testing.assert_allclose(F.normalize(s.tensor(a), p, dim).numpy(), ref(a), rtol=1e-5,
                               atol=1e-6)
    b = _rng(84).normal(size=(3, 4))
    _check(lambda x: F.normalize(x, p, dim), ref, b, rtol=1e-5, atol=1e-5)
