"""nn.MultiHeadAttention's PyTorch features (is_causal, projection biases, cross attention,
key_padding_mask, float additive masks) and F.scaled_dot_product_attention, against float64
NumPy references and central finite differences of those references."""
import numpy as np
import pytest

from torchlean import nn
from torchlean.nn import functional as F
from torchlean.session import Session, manual_seed


def _softmax_rows(z, allowed):
    """Softmax over the last axis where allowed; fully blocked rows give 0 (float64)."""
    z = np.where(allowed, z, -np.inf)
    top = np.max(z, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(allowed, np.exp(z - top), 0.0)
    den = e.sum(-1, keepdims=True)
    return np.divide(e, den, out=np.zeros_like(e), where=den > 0)


def _sdpa_ref(q, k, v, allowed=None, additive=None, scale=None):
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    z = q @ np.swapaxes(k, -1, -2) * scale
    if additive is not None:
        z = z + additive
    allowed = np.ones(z.shape, bool) if allowed is None else np.broadcast_to(allowed, z.shape)
    return _softmax_rows(z, allowed) @ v


def _mha_ref(p, xq, xk, xv, heads, allowed=None, additive=None):
    """Float64 multi-head attention with (in, out) weights and optional biases; allowed and
    additive broadcast to (B, H, T, S)."""
    def proj(x, w, b):
        y = x @ w + (0.0 if b is None else b)
        bsz, n, d = y.shape
        return y.reshape(bsz, n, heads, d // heads).transpose(0, 2, 1, 3)
    q = proj(xq, p["Wq"], p.get("bq"))
    k = proj(xk, p["Wk"], p.get("bk"))
    v = proj(xv, p["Wv"], p.get("bv"))
    o = _sdpa_ref(q, k, v, allowed, additive)                  # (B, H, T, hd)
    bsz, _, t, _ = o.shape
    y = o.transpose(0, 2, 1, 3).reshape(bsz, t, -1) @ p["Wo"]
    return y + (0.0 if p.get("bo") is None else p["bo"])


def _params(att, rng=None):
    """The module's parameters as float64; biases set to random values so they matter."""
    out = {k: v.numpy().astype(np.float64) for k, v in att.named_parameters()}
    if rng is not None:
        for k in ("bq", "bk", "bv", "bo"):
            if k in out:
                out[k] = rng.uniform(-0.5, 0.5, size=out[k].shape)
                getattr(att, k).set(out[k])
                out[k] = getattr(att, k).numpy().astype(np.float64)
    return out


def _fd(f, a, w, coords=12, eps=1e-5, seed=1):
    flat = np.random.default_rng(seed).permutation(a.size)[:coords]
    out = {}
    for i in flat:
        ap, am = a.copy().reshape(-1), a.copy().reshape(-1)
        ap[i] += eps
        am[i] -= eps
        out[i] = (np.sum(w * f(ap.reshape(a.shape))) - np.sum(w * f(am.reshape(a.shape)))) / (2 * eps)
    return out


def _check(g, fd, rtol=2e-3, atol=2e-4):
    for i, v in fd.items():
        assert g.reshape(-1)[i] == pytest.approx(v, rel=rtol, abs=atol), i


def _run_mha(att, xq, xk=None, xv=None, **kw):
    """Output, gradients of loss = sum(w * y) for query/key/value and w."""
    s = Session()
    q = s.tensor(xq, requires_grad=True)
    k = None if xk is None else s.tensor(xk, requires_grad=True)
    v = None if xv is None else s.tensor(xv, requires_grad=True)
    y = att(q, k, v, **kw)
    out = y.numpy().astype(np.float64)
    w = np.random.default_rng(9).uniform(-1, 1, size=out.shape)
    (y * s.tensor(w)).sum().backward()
    grads = [None if t is None else t.grad for t in (q, k, v)]
    return out, grads, w


def _check_all_grads(att, p, xq, xk, xv, heads, grads, w, allowed=None, additive=None):
    xs = {"q": xq, "k": xk, "v": xv}
    for j, name in enumerate("qkv"):
        def f(a, name=name):
            args = dict(xs, **{name: a})
            return _mha_ref(p, args["q"], args["k"], args["v"], heads, allowed, additive)
        _check(grads[j], _fd(f, xs[name].astype(np.float64), w))
    for pname in p:
        def f(a, pname=pname):
            return _mha_ref(dict(p, **{pname: a}), xq, xk, xv, heads, allowed, additive)
        _check(getattr(att, pname).grad, _fd(f, p[pname], w, coords=6))


def test_cross_attention_with_biases_forward_and_gradients():
    manual_seed(4)
    rng = np.random.default_rng(0)
    att = nn.MultiHeadAttention(6, 3, bias=True, kdim=5, vdim=4)
    p = _params(att, rng)
    xq, xk, xv = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 7, 5)), rng.normal(size=(2, 7, 4))
    out, grads, w = _run_mha(att, xq.astype(np.float32), xk.astype(np.float32),
                             xv.astype(np.float32))
    np.testing.assert_allclose(out, _mha_ref(p, xq, xk, xv, 3), rtol=1e-4, atol=1e-5)
    _check_all_grads(att, p, xq, xk, xv, 3, grads, w)


def test_key_padding_mask_and_float_attn_mask_combined():
    manual_seed(1)
    rng = np.random.default_rng(2)
    att = nn.MultiHeadAttention(4, 2)
    p = _params(att)
    xq, xkv = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 6, 4))
    kpm = np.zeros((3, 6), bool)
    kpm[0, 4:] = True           # batch 0: last two keys are padding
    kpm[2, :] = True            # batch 2: every key is padding -> rows of 0
    fmask = rng.uniform(-1, 1, size=(5, 6))
    fmask[1, 0] = -np.inf       # a float mask's -inf blocks that entry
    out, grads, w = _run_mha(att, xq.astype(np.float32), xkv.astype(np.float32),
                             xkv.astype(np.float32), key_padding_mask=kpm, attn_mask=fmask)
    allowed = ~kpm[:, None, None, :] & (fmask != -np.inf)
    additive = np.where(np.isinf(fmask), 0.0, fmask)
    want = _mha_ref(p, xq, xkv, xkv, 2, allowed, additive)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(out[2], 0.0)      # every key padded: rows of 0, no NaN
    # key and value are the same array given twice: both get gradients
    for j, name in enumerate("kv"):
        def f(a, name=name):
            k, v = (a, xkv) if name == "k" else (xkv, a)
            return _mha_ref(p, xq, k, v, 2, allowed, additive)
        _check(grads[j + 1], _fd(f, xkv, w))
    _check(grads[0], _fd(lambda a: _mha_ref(p, a, xkv, xkv, 2, allowed, additive), xq, w))


def test_bool_attn_mask_is_torch_convention_and_mask_is_torchlean_convention():
    manual_seed(2)
    rng = np.random.default_rng(3)
    att = nn.MultiHeadAttention(4, 1)
    x = rng.normal(size=(2, 4, 4)).astype(np.float32)
    blocked = rng.uniform(size=(4, 4)) < 0.4
    blocked[:, 0] = False
    s = Session()
    a = att(s.tensor(x), attn_mask=blocked).numpy()         # torch: True = blocked
    b = att(s.tensor(x), mask=~blocked).numpy()             # torchlean: True = may attend
    want = _mha_ref(_params(att), x.astype(np.float64), x, x, 1, ~blocked)
    np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bias", [False, True])
def test_is_causal_equals_explicit_mask_and_is_uploaded_once(bias):
    manual_seed(5)
    rng = np.random.default_rng(4)
    att = nn.MultiHeadAttention(6, 2, bias=bias)
    p = _params(att, rng)
    x = rng.normal(size=(2, 5, 6)).astype(np.float32)
    out, grads, w = _run_mha(att, x, is_causal=True)
    causal = np.tril(np.ones((5, 5), bool))
    want = _mha_ref(p, x.astype(np.float64), x, x, 2, causal)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    explicit, g2, _ = _run_mha(att, x, mask=causal)
    np.testing.assert_allclose(out, explicit, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grads[0], g2[0], rtol=1e-5, atol=1e-6)
    _check(grads[0], _fd(lambda a: _mha_ref(p, a, a, a, 2, causal), x.astype(np.float64), w))
    if not bias:                                        # the fused op's causal attr: no mask
        assert att._causal == {}
        return
    first = att._causal[(5, 5)]
    _run_mha(att, x, is_causal=True)
    assert att._causal[(5, 5)] is first                 # reused, not uploaded again
    _run_mha(att, x[:, :3], is_causal=True)
    assert set(att._causal) == {(5, 5), (3, 3)}


def test_unbatched_input_and_fused_path_matches_composed():
    manual_seed(6)
    rng = np.random.default_rng(5)
    att = nn.MultiHeadAttention(4, 2)
    x = rng.normal(size=(3, 4)).astype(np.float32)
    s = Session()
    fused = att(s.tensor(x)).numpy()
    composed = att(s.tensor(x), key_padding_mask=np.zeros(3, bool)).numpy()
    want = _mha_ref(_params(att), x[None].astype(np.float64), x[None], x[None], 2)[0]
    np.testing.assert_allclose(fused, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(composed, want, rtol=1e-4, atol=1e-5)


def test_mha_bad_inputs():
    att = nn.MultiHeadAttention(4, 2)
    s = Session()
    x = s.tensor(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match=r"MultiHeadAttention.*key_padding_mask.*\(2, 3\)"):
        att(x, key_padding_mask=np.zeros((3, 2), bool))
    with pytest.raises(ValueError, match=r"MultiHeadAttention.*query \(2, 3, 4\).*key \(2, 3, 5\)"):
        att(x, s.tensor(np.ones((2, 3, 5))))
    with pytest.raises(ValueError, match=r"MultiHeadAttention.*is_causal"):
        att(x, is_causal=True, mask=np.ones((3, 3), bool))
    with pytest.raises(TypeError, match=r"MultiHeadAttention.*mask="):
        att(x, np.ones((3, 3), bool))
    with pytest.raises(ValueError, match=r"MultiHeadAttention.*mask of shape \(2, 2\)"):
        att(x, attn_mask=np.ones((2, 2), bool))
    with pytest.raises(ValueError, match=r"MultiHeadAttention.*NaN"):
        att(x, attn_mask=np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match=r"MultiHeadAttention.*divisible"):
        nn.MultiHeadAttention(5, 2)


# ------------------------------------------------------------------ scaled_dot_product_attention

def _run_sdpa(q, k, v, **kw):
    s = Session()
    ts = [s.tensor(a, requires_grad=True) for a in (q, k, v)]
    y = F.scaled_dot_product_attention(*ts, **kw)
    out = y.numpy().astype(np.float64)
    w = np.random.default_rng(7).uniform(-1, 1, size=out.shape)
    (y * s.tensor(w)).sum().backward()
    return out, [t.grad for t in ts], w


@pytest.mark.parametrize("lead,l,sk,e,ev", [((2, 3), 4, 5, 3, 2), ((), 1, 1, 1, 1),
                                          ((1,), 5, 3, 4, 6)])
def test_sdpa_plain_and_bool_mask(lead, l, sk, e, ev):
    rng = np.random.default_rng(11)
    q, k, v = (rng.normal(size=lead + sh).astype(np.float32)
               for sh in ((l, e), (sk, e), (sk, ev)))
    f64 = [a.astype(np.float64) for a in (q, k, v)]
    out, grads, w = _run_sdpa(q, k, v, scale=0.7)
    np.testing.assert_allclose(out, _sdpa_ref(*f64, scale=0.7), rtol=1e-4, atol=1e-5)
    mshape = (lead[0], 1, l, sk) if len(lead) == 2 else (l, sk)   # (2, 1, L, S): per batch
    allowed = rng.uniform(size=mshape) < 0.7
    out, grads, w = _run_sdpa(q, k, v, attn_mask=allowed)
    np.testing.assert_allclose(out, _sdpa_ref(*f64, allowed), rtol=1e-4, atol=1e-5)
    for j in range(3):
        def f(a, j=j):
            xs = list(f64)
            xs[j] = a
            return _sdpa_ref(*xs, allowed)
        _check(grads[j], _fd(f, f64[j], w))


def test_sdpa_is_causal_equals_tril_mask_and_float_mask_is_added():
    rng = np.random.default_rng(12)
    q, k, v = (rng.normal(size=(2, 4, 3)).astype(np.float32) for _ in range(3))
    k, v = k[:, :3], v[:, :3]                          # L = 4 queries, S = 3 keys
    a, _, _ = _run_sdpa(q, k, v, is_causal=True)
    b, _, _ = _run_sdpa(q, k, v, attn_mask=np.tril(np.ones((4, 3), bool)))
    np.testing.assert_array_equal(a, b)
    f64 = [x.astype(np.float64) for x in (q, k, v)]
    np.testing.assert_allclose(a, _sdpa_ref(*f64, np.tri(4, 3, dtype=bool)), rtol=1e-4,
                               atol=1e-5)
    fm = rng.uniform(-2, 2, size=(2, 1, 3))             # per batch, broadcast over queries
    fm[1, 0, 2] = -np.inf
    out, grads, w = _run_sdpa(q, k, v, attn_mask=fm)
    want = _sdpa_ref(*f64, np.isfinite(fm), np.where(np.isfinite(fm), fm, 0.0))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    _check(grads[0], _fd(lambda x: _sdpa_ref(x, *f64[1:], np.isfinite(fm),
                                             np.where(np.isfinite(fm), fm, 0.0)), f64[0], w))


def test_sdpa_tensor_float_mask_gets_gradient_and_bad_inputs():
    rng = np.random.default_rng(13)
    q, k, v = (rng.normal(size=(3, 2)).astype(np.float32) for _ in range(3))
    bias = rng.normal(size=(3, 3)).astype(np.float32)
    s = Session()
    tb = s.tensor(bias, requires_grad=True)
    y = F.scaled_dot_product_attention(s.tensor(q), s.tensor(k), s.tensor(v), attn_mask=tb)
    f64 = [x.astype(np.float64) for x in (q, k, v)]
    np.testing.assert_allclose(y.numpy(), _sdpa_ref(*f64, None, bias), rtol=1e-4, atol=1e-5)
    w = rng.uniform(-1, 1, size=(3, 2))
    (y * s.tensor(w)).sum().backward()
    _check(tb.grad, _fd(lambda b: _sdpa_ref(*f64, None, b), bias.astype(np.float64), w))
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*query \(3, 2\).*key \(3, 3\)"):
        F.scaled_dot_product_attention(s.tensor(q), s.tensor(np.ones((3, 3))), s.tensor(v))
    with pytest.raises(ValueError, match="scaled_dot_product_attention.*not both"):
        F.scaled_dot_product_attention(s.tensor(q), s.tensor(k), s.tensor(v),
                                       attn_mask=np.ones((3, 3), bool), is_causal=True)
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*\(4,\)"):
        F.scaled_dot_product_attention(s.tensor(q), s.tensor(k), s.tensor(v),
                                       attn_mask=np.ones(4, bool))
    with pytest.raises(TypeError, match=r"scaled_dot_product_attention.*dtype"):
        F.scaled_dot_product_attention(s.tensor(q), s.tensor(k), s.tensor(v),
                                       attn_mask=np.array([["a"] * 3] * 3))
