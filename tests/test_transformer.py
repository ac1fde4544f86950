"""nn.TransformerEncoderLayer / TransformerEncoder / TransformerDecoderLayer / TransformerDecoder /
Transformer against a float64 NumPy re-implementation of the same layers in eval mode (post-norm
and pre-norm, relu and gelu, batch_first both ways, odd sizes, boolean, float and key-padding
masks), gradients against central differences of that reference, and, where torch imports,
torch's own modules with their state_dict loaded strictly."""
import math

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn

RNG = np.random.default_rng(0)


# ------------------------------------------------------------------ the float64 reference

def _gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


ACTS = {"relu": lambda x: np.maximum(x, 0), "gelu": _gelu}


def _ln(x, sd, name, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    y = (x - m) / np.sqrt(v + eps) * sd[name + ".weight"]
    return y + sd[name + ".bias"] if name + ".bias" in sd else y


def _lin(x, sd, name):
    y = x @ sd[name + ".weight"].T
    return y + sd[name + ".bias"] if name + ".bias" in sd else y


def _mha(q, kv, sd, name, h, add):
    """Batch-first (N, L, E) attention; add: (N, L, S) float64 with -inf where blocked."""
    n, length, e = q.shape
    d = e // h
    w, b = sd[name + ".in_proj_weight"], sd.get(name + ".in_proj_bias", np.zeros(3 * e))
    Q = q @ w[:e].T + b[:e]
    K = kv @ w[e:2 * e].T + b[e:2 * e]
    V = kv @ w[2 * e:].T + b[2 * e:]
    split = lambda t: t.reshape(n, t.shape[1], h, d).transpose(0, 2, 1, 3)  # noqa: E731
    s = split(Q) @ split(K).transpose(0, 1, 3, 2) / math.sqrt(d) + add[:, None]
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = (p @ split(V)).transpose(0, 2, 1, 3).reshape(n, length, e)
    return _lin(o, sd, name + ".out_proj")


def _additive(n, length, s, mask=None, kpm=None):
    add = np.zeros((n, length, s))
    if mask is not None:
        m = np.asarray(mask)
        add = add + (np.where(m, -np.inf, 0.0) if m.dtype == np.bool_ else m.astype(np.float64))
    if kpm is not None:
        add = add + np.where(np.asarray(kpm), -np.inf, 0.0)[:, None, :]
    return add


def _enc_ref(x, sd, h, act, norm_first, add, p=""):
    f = ACTS[act]
    sa = lambda t: _mha(t, t, sd, p + "self_attn", h, add)  # noqa: E731
    ff = lambda t: _lin(f(_lin(t, sd, p + "linear1")), sd, p + "linear2")  # noqa: E731
    if norm_first:
        x = x + sa(_ln(x, sd, p + "norm1"))
        return x + ff(_ln(x, sd, p + "norm2"))
    x = _ln(x + sa(x), sd, p + "norm1")
    return _ln(x + ff(x), sd, p + "norm2")


def _dec_ref(x, mem, sd, h, act, norm_first, add_t, add_m, p=""):
    f = ACTS[act]
    sa = lambda t: _mha(t, t, sd, p + "self_attn", h, add_t)  # noqa: E731
    ca = lambda t: _mha(t, mem, sd, p + "multihead_attn", h, add_m)  # noqa: E731
    ff = lambda t: _lin(f(_lin(t, sd, p + "linear1")), sd, p + "linear2")  # noqa: E731
    if norm_first:
        x = x + sa(_ln(x, sd, p + "norm1"))
        x = x + ca(_ln(x, sd, p + "norm2"))
        return x + ff(_ln(x, sd, p + "norm3"))
    x = _ln(x + sa(x), sd, p + "norm1")
    x = _ln(x + ca(x), sd, p + "norm2")
    return _ln(x + ff(x), sd, p + "norm3")


def _sd64(module, perturb=True):
    """The module's state as float64, with the LayerNorm affines moved off 1 / 0 so that they
    are tested too."""
    sd = {}
    for k, v in module.state_dict().items():
        v = np.asarray(v, dtype=np.float64)
        if perturb and ("norm" in k or k.endswith("bias")):
            v = v + RNG.uniform(-0.3, 0.3, v.shape)
        sd[k] = v
    module.load_state_dict({k: v.astype(np.float32) for k, v in sd.items()})
    return {k: v.astype(np.float32).astype(np.float64) for k, v in sd.items()}


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _to_layout(a, batch_first):
    return a if batch_first else np.ascontiguousarray(a.transpose(1, 0, 2))


# ------------------------------------------------------------------ forward

@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_encoder_layer_matches_reference(norm_first, act, batch_first):
    n, length, e, h, ff = 3, 5, 6, 3, 7
    layer = nn.TransformerEncoderLayer(e, h, ff, dropout=0.1, activation=act,
                                       batch_first=batch_first, norm_first=norm_first).eval()
    sd = _sd64(layer)
    x = _x(n, length, e)
    mask = nn.Transformer.generate_square_subsequent_mask(length)
    kpm = np.zeros((n, length), dtype=bool)
    kpm[0, -2:] = True
    kpm[2, -1] = True
    out = layer(tl.tensor(_to_layout(x, batch_first)), src_mask=mask,
                src_key_padding_mask=kpm).detach().numpy()
    ref = _enc_ref(x.astype(np.float64), sd, h, act, norm_first,
                   _additive(n, length, length, mask.numpy(), kpm))
    np.testing.assert_allclose(_to_layout(out, batch_first), ref, rtol=2e-4, atol=2e-5)


def test_encoder_layer_bool_mask_unbatched_and_is_causal():
    e, h, length = 4, 2, 6
    layer = nn.TransformerEncoderLayer(e, h, 9, batch_first=True).eval()
    sd = _sd64(layer)
    x = _x(1, length, e)
    blocked = RNG.random((length, length)) < 0.3
    np.fill_diagonal(blocked, False)
    out = layer(tl.tensor(x[0]), src_mask=blocked).detach().numpy()
    ref = _enc_ref(x.astype(np.float64), sd, h, "relu", False, _additive(1, length, length,
                                                                          blocked))
    np.testing.assert_allclose(out, ref[0], rtol=2e-4, atol=2e-5)
    causal = layer(tl.tensor(x), is_causal=True).detach().numpy()
    tri = np.triu(np.ones((length, length), dtype=bool), 1)
    ref = _enc_ref(x.astype(np.float64), sd, h, "relu", False, _additive(1, length, length, tri))
    np.testing.assert_allclose(causal, ref, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_reference(norm_first):
    n, lt, ls, e, h = 2, 4, 7, 6, 2
    layer = nn.TransformerDecoderLayer(e, h, 5, activation="gelu", norm_first=norm_first,
                                       batch_first=True).eval()
    sd = _sd64(layer)
    tgt, mem = _x(n, lt, e), _x(n, ls, e)
    tmask = nn.Transformer.generate_square_subsequent_mask(lt)
    mkpm = np.zeros((n, ls), dtype=bool)
    mkpm[1, 4:] = True
    mmask = RNG.uniform(-1, 1, (lt, ls)).astype(np.float32)
    out = layer(tl.tensor(tgt), tl.tensor(mem), tgt_mask=tmask, memory_mask=mmask,
                memory_key_padding_mask=mkpm).detach().numpy()
    ref = _dec_ref(tgt.astype(np.float64), mem.astype(np.float64), sd, h, "gelu", norm_first,
                   _additive(n, lt, lt, tmask.numpy()), _additive(n, lt, ls, mmask, mkpm))
    np.testing.assert_allclose(out, ref, rtol=2e-4, atol=2e-5)


def test_stacks_and_transformer_match_reference():
    e, h, ff, n, ls, lt = 4, 2, 6, 2, 5, 3
    model = nn.Transformer(e, h, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=ff,
                           dropout=0.2).eval()
    sd = _sd64(model)
    src, tgt = _x(ls, n, e), _x(lt, n, e)                # batch_first=False: (L, N, E)
    tmask = nn.Transformer.generate_square_subsequent_mask(lt)
    out = model(tl.tensor(src), tl.tensor(tgt), tgt_mask=tmask).detach().numpy()
    x = src.transpose(1, 0, 2).astype(np.float64)
    for i in range(2):
        x = _enc_ref(x, sd, h, "relu", False, _additive(n, ls, ls), f"encoder.layers.{i}.")
    mem = _ln(x, sd, "encoder.norm")
    y = tgt.transpose(1, 0, 2).astype(np.float64)
    for i in range(2):
        y = _dec_ref(y, mem, sd, h, "relu", False, _additive(n, lt, lt, tmask.numpy()),
                     _additive(n, lt, ls), f"decoder.layers.{i}.")
    ref = _ln(y, sd, "decoder.norm").transpose(1, 0, 2)
    np.testing.assert_allclose(out, ref, rtol=3e-4, atol=3e-5)


def test_state_dict_names_and_layer_copies():
    layer = nn.TransformerEncoderLayer(8, 2, 16, bias=False)
    assert sorted(layer.state_dict()) == sorted([
        "self_attn.in_proj_weight", "self_attn.out_proj.weight", "linear1.weight",
        "linear2.weight", "norm1.weight", "norm2.weight"])
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 3, norm=nn.LayerNorm(8))
    keys = enc.state_dict()
    assert "layers.2.linear2.bias" in keys and "norm.weight" in keys
    a, b = keys["layers.0.linear1.weight"], keys["layers.2.linear1.weight"]
    np.testing.assert_array_equal(a, b)                 # deep copies start equal, as torch's
    enc.layers[0].linear1.weight.set(np.zeros_like(a))
    np.testing.assert_array_equal(enc.state_dict()["layers.1.linear1.weight"], b)  # not shared
    dec = nn.TransformerDecoderLayer(4, 2, 8)
    assert {"multihead_attn.in_proj_weight", "norm3.bias"} <= set(dec.state_dict())


def test_transformer_weight_matrices_start_xavier_uniform():
    tl.manual_seed(0)
    model = nn.Transformer(16, 4, 1, 1, 32)
    w = np.asarray(model.state_dict()["encoder.layers.0.linear1.weight"])
    bound = math.sqrt(6 / (16 + 32))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound


def test_generate_square_subsequent_mask_closed_form():
    m = nn.Transformer.generate_square_subsequent_mask(4).numpy()
    expect = np.array([[0, -np.inf, -np.inf, -np.inf], [0, 0, -np.inf, -np.inf],
                       [0, 0, 0, -np.inf], [0, 0, 0, 0]], dtype=np.float32)
    np.testing.assert_array_equal(m, expect)


def test_dropout_acts_in_train_mode_only():
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.5, batch_first=True)
    x = tl.tensor(_x(2, 3, 4))
    a, b = layer(x).detach().numpy(), layer(x).detach().numpy()
    assert not np.array_equal(a, b)
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(4, 2, activation="tanh")
    with pytest.raises(AssertionError, match="divisible"):
        nn.TransformerEncoderLayer(6, 4)
    with pytest.raises(TypeError, match="d_model must be a positive int"):
        nn.TransformerDecoderLayer(4.5, 2)
    model = nn.Transformer(4, 2, 1, 1, 8)
    with pytest.raises(RuntimeError, match="batch number of src and tgt must be equal"):
        model(tl.tensor(_x(3, 2, 4)), tl.tensor(_x(3, 5, 4)))
    with pytest.raises(RuntimeError, match="feature number"):
        model(tl.tensor(_x(3, 2, 4)), tl.tensor(_x(3, 2, 6)))


def test_custom_activation_callable():
    layer = nn.TransformerEncoderLayer(4, 2, 6, activation=lambda t: t * 0.5,
                                       batch_first=True).eval()
    sd = _sd64(layer)
    ACTS["half"] = lambda t: t * 0.5
    x = _x(2, 3, 4)
    ref = _enc_ref(x.astype(np.float64), sd, 2, "half", False, _additive(2, 3, 3))
    np.testing.assert_allclose(layer(tl.tensor(x)).detach().numpy(), ref, rtol=2e-4, atol=2e-5)


# ------------------------------------------------------------------ gradients

@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_gradients_against_central_differences(norm_first):
    n, length, e, h, ff = 2, 3, 4, 2, 5
    layer = nn.TransformerEncoderLayer(e, h, ff, batch_first=True, norm_first=norm_first,
                                       activation="gelu").eval()
    sd = _sd64(layer)
    x = _x(n, length, e)
    R = RNG.standard_normal((n, length, e))
    kpm = np.array([[False, False, True], [False, False, False]])
    add = _additive(n, length, length, None, kpm)
    out = layer(tl.tensor(x), src_key_padding_mask=kpm)
    (out * tl.tensor(R.astype(np.float32))).sum().backward()
    params = dict(layer.named_parameters())
    for name in ("self_attn.in_proj_weight", "self_attn.out_proj.bias", "linear1.weight",
                 "linear2.bias", "norm1.weight", "norm2.bias"):
        got = np.asarray(params[name].grad, dtype=np.float64)
        num = np.zeros_like(sd[name])
        step = 1e-6
        for i in np.ndindex(sd[name].shape):
            for sign in (1, -1):
                s2 = dict(sd)
                s2[name] = sd[name].copy()
                s2[name][i] += sign * step
                num[i] += sign * (_enc_ref(x.astype(np.float64), s2, h, "gelu", norm_first, add)
                                  * R).sum() / (2 * step)
        np.testing.assert_allclose(got, num, rtol=2e-3, atol=2e-4, err_msg=name)


# ------------------------------------------------------------------ torch itself

def _load_torch(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()},
                         strict=True)


def test_torch_weights_load_strictly_and_agree():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    t_enc = torch.nn.TransformerEncoderLayer(6, 3, 10, dropout=0.1, activation="gelu",
                                             batch_first=True, norm_first=True).eval()
    ours = nn.TransformerEncoderLayer(6, 3, 10, activation="gelu", batch_first=True,
                                      norm_first=True).eval()
    _load_torch(ours, t_enc)
    x = _x(2, 5, 6)
    kpm = np.array([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        want = t_enc(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(kpm)).numpy()
    got = ours(tl.tensor(x), src_key_padding_mask=kpm).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    t_model = torch.nn.Transformer(8, 2, 2, 1, 12, dropout=0.0).eval()
    model = nn.Transformer(8, 2, 2, 1, 12, dropout=0.0).eval()
    _load_torch(model, t_model)
    src, tgt = _x(5, 3, 8), _x(4, 3, 8)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(nn.Transformer.generate_square_subsequent_mask(4).numpy(),
                                  tmask.numpy())
    with torch.no_grad():
        want = t_model(torch.from_numpy(src), torch.from_numpy(tgt), tgt_mask=tmask).numpy()
    got = model(tl.tensor(src), tl.tensor(tgt),
                tgt_mask=nn.Transformer.generate_square_subsequent_mask(4)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
