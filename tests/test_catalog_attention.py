"""multi_head_attention_forward against a float64 NumPy multi-head attention written here
(outputs and weights; gradients by central differences), torch as an extra reference, masks,
bias_k / bias_v, add_zero_attn, unbatched input and bad input."""
import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.functional as F
from catalog_check import check, rand, torch

L_, S_, N_, E_, H_ = 3, 4, 2, 6, 2
Q, K, V = rand(L_, N_, E_), rand(S_, N_, E_, seed=1), rand(S_, N_, E_, seed=2)
W_IN, B_IN = rand(3 * E_, E_, seed=3) * 0.4, rand(3 * E_, seed=4)
W_OUT, B_OUT = rand(E_, E_, seed=5) * 0.4, rand(E_, seed=6)
KPM = np.array([[False, False, True, False], [False, True, False, False]])


def np_mha(q, k, v, w_in, b_in, w_out, b_out, kpm=None, mask=None, bias_kv=None, zero=False):
    e, h = q.shape[-1], H_
    hd = e // h
    wq, wk, wv = np.split(w_in, 3)
    bq, bk, bv = np.split(b_in, 3)
    qp, kp, vp = q @ wq.T + bq, k @ wk.T + bk, v @ wv.T + bv
    n = q.shape[1]
    if bias_kv is not None:
        kp = np.concatenate([kp, np.broadcast_to(bias_kv[0], (1, n, e))])
        vp = np.concatenate([vp, np.broadcast_to(bias_kv[1], (1, n, e))])
    if zero:
        kp = np.concatenate([kp, np.zeros((1, n, e))])
        vp = np.concatenate([vp, np.zeros((1, n, e))])
    s = kp.shape[0]
    qh = qp.reshape(-1, n, h, hd).transpose(1, 2, 0, 3)
    kh = kp.reshape(s, n, h, hd).transpose(1, 2, 0, 3)
    vh = vp.reshape(s, n, h, hd).transpose(1, 2, 0, 3)
    scores = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(hd)
    if mask is not None:
        full = np.zeros(scores.shape[-2:])
        full[:, :mask.shape[1]] = np.where(mask, -np.inf, 0) if mask.dtype == bool else mask
        scores = scores + full
    if kpm is not None:
        pad = np.zeros((n, s), bool)
        pad[:, :kpm.shape[1]] = kpm
        scores = scores + np.where(pad, -np.inf, 0)[:, None, None, :]
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    out = (w @ vh).transpose(2, 0, 1, 3).reshape(-1, n, e) @ w_out.T + b_out
    return out, w.mean(1)


def _tl(q, k, v, w_in, b_in, w_out, b_out, **kw):
    return F.multi_head_attention_forward(q, k, v, E_, H_, w_in, b_in, kw.pop("bk", None),
                                          kw.pop("bv", None), kw.pop("zero", False), 0.0, w_out,
                                          b_out, **kw)


def test_plain_with_gradients():
    check(lambda q, k, w: _tl(q, k, tl.tensor(V), w, tl.tensor(B_IN), tl.tensor(W_OUT),
                              tl.tensor(B_OUT)),
          lambda q, k, w: np_mha(q, k, V.astype(np.float64), w, B_IN, W_OUT, B_OUT),
          Q, K, W_IN, rtol=2e-5, atol=2e-6, grad_tol=(3e-3, 5e-4),
          torch_fn=(lambda q, k, w: torch.nn.functional.multi_head_attention_forward(
              q, k, torch.tensor(V), E_, H_, w, torch.tensor(B_IN), None, None, False, 0.0,
              torch.tensor(W_OUT), torch.tensor(B_OUT))) if torch else None)


@pytest.mark.parametrize("case", ["key_padding", "bool_mask", "float_mask", "bias_kv_zero"])
def test_masks_and_extra_keys(case):
    kw, ref_kw = {}, {}
    if case == "key_padding":
        kw["key_padding_mask"] = ref_kw["kpm"] = KPM
    if case == "bool_mask":
        kw["attn_mask"] = ref_kw["mask"] = np.triu(np.ones((L_, S_), bool), 2)
    if case == "float_mask":
        kw["attn_mask"] = ref_kw["mask"] = rand(L_, S_, seed=7)
    if case == "bias_kv_zero":
        bk, bv = rand(1, 1, E_, seed=8), rand(1, 1, E_, seed=9)
        kw.update(bk=tl.tensor(bk), bv=tl.tensor(bv), zero=True, key_padding_mask=KPM)
        ref_kw.update(bias_kv=(bk, bv), zero=True, kpm=KPM)
    out, w = _tl(*[tl.tensor(a) for a in (Q, K, V, W_IN, B_IN, W_OUT, B_OUT)], **kw)
    r_out, r_w = np_mha(*[a.astype(np.float64) for a in (Q, K, V, W_IN, B_IN, W_OUT, B_OUT)],
                        **ref_kw)
    np.testing.assert_allclose(out.numpy(), r_out, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(w.numpy(), r_w, rtol=2e-5, atol=2e-6)


def test_unbatched_per_head_weights_and_no_weights():
    args = [tl.tensor(a) for a in (Q[:, 0], K[:, 0], V[:, 0], W_IN, B_IN, W_OUT, B_OUT)]
    out, w = _tl(*args, average_attn_weights=False)
    r_out, _ = np_mha(*[a.astype(np.float64) for a in (Q[:, :1], K[:, :1], V[:, :1], W_IN, B_IN,
                                                        W_OUT, B_OUT)])
    assert out.shape == (L_, E_) and w.shape == (H_, L_, S_)
    np.testing.assert_allclose(out.numpy(), r_out[:, 0], rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(w.numpy().sum(-1), np.ones((H_, L_)), rtol=1e-6)
    assert _tl(*args, need_weights=False)[1] is None


BAD = [
    (lambda: _tl(*[tl.tensor(a) for a in (Q, K, V[:3], W_IN, B_IN, W_OUT, B_OUT)]),
     RuntimeError),
    (lambda: F.multi_head_attention_forward(tl.tensor(Q), tl.tensor(K), tl.tensor(V), 5, H_,
                                            tl.tensor(W_IN), None, None, None, False, 0.0,
                                            tl.tensor(W_OUT), None), RuntimeError),
    (lambda: _tl(*[tl.tensor(a) for a in (Q, K, V, W_IN, B_IN, W_OUT, B_OUT)],
                 static_k=tl.tensor(K)), NotImplementedError),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind = BAD[i]
    with pytest.raises(kind, match="multi_head_attention_forward"):
        fn()
