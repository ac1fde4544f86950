"""torch.nn.functional.multi_head_attention_forward: the functional core of nn.MultiheadAttention
(sequence-first layout), written out as projections, one batched score matmul, a masked
softmax and the output projection, so the attention weights can be returned."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c
from torchlean.nn import functional as F

EXPORTS = {"nn.functional": ("multi_head_attention_forward",)}


def _host_bool(m):
    a = np.asarray(m.numpy() if hasattr(m, "numpy") else m)
    return a


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """(attn_output (L, N, E), attn_weights (N, L, S) averaged over heads, or (N, H, L, S),
    or None) for query (L, N, E), key and value (S, N, E) (or unbatched (L, E), (S, E)).
    Boolean masks mark positions that may NOT be attended; a float attn_mask is added."""
    op = "multi_head_attention_forward"
    q_in = c.tensor(op, query, "query")
    s = q_in.session
    k_in, v_in = c.operand(s, op, key, "key"), c.operand(s, op, value, "value")
    if static_k is not None or static_v is not None:
        raise NotImplementedError(f"{op}: static_k / static_v are not supported")
    unbatched = q_in.ndim == 2
    if unbatched:
        q_in, k_in, v_in = q_in.unsqueeze(1), k_in.unsqueeze(1), v_in.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = _host_bool(key_padding_mask)[None]
    if q_in.ndim != 3 or k_in.ndim != 3 or v_in.ndim != 3 or k_in.shape[:2] != v_in.shape[:2]:
        raise RuntimeError(f"{op}: expected query (L, N, E) and key, value (S, N, E), got "
                           f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    length, n, e = q_in.shape
    if e != embed_dim_to_check or e % num_heads:
        raise RuntimeError(f"{op}: embedding dim {e} must equal embed_dim_to_check "
                           f"{embed_dim_to_check} and divide by num_heads {num_heads}")
    hd = e // num_heads
    if use_separate_proj_weight:
        ws = [c.operand(s, op, w, "proj_weight") for w in (q_proj_weight, k_proj_weight,
                                                            v_proj_weight)]
    else:
        ws = list(composite.split(c.operand(s, op, in_proj_weight, "in_proj_weight"), e, 0))
    bs = [None] * 3 if in_proj_bias is None else \
        list(composite.split(c.operand(s, op, in_proj_bias, "in_proj_bias"), e, 0))
    q, k, v = (F.linear(x, w, b) for x, w, b in zip((q_in, k_in, v_in), ws, bs))
    kpm = None if key_padding_mask is None else _host_bool(key_padding_mask).astype(bool)
    mask = attn_mask
    if is_causal and mask is None:
        mask = np.triu(np.ones((length, k.shape[0]), bool), 1)
    if bias_k is not None and bias_v is not None:
        k = composite.cat([k, c.operand(s, op, bias_k).reshape(1, 1, e).expand(1, n, e)], 0)
        v = composite.cat([v, c.operand(s, op, bias_v).reshape(1, 1, e).expand(1, n, e)], 0)
    if add_zero_attn:
        zeros = s.tensor(np.zeros((1, n, e), np.float32))
        k, v = composite.cat([k, zeros], 0), composite.cat([v, zeros], 0)
    total = k.shape[0]

    def heads(t, steps):
        return t.reshape(steps, n * num_heads, hd).transpose(0, 1)     # (N*H, steps, hd)
    qh, kh, vh = heads(q, length), heads(k, total), heads(v, total)
    scores = composite.matmul(qh, kh.mT) * (1.0 / math.sqrt(hd))      # (N*H, L, S')
    scores = scores.reshape(n, num_heads, length, total)
    if mask is not None:
        m = mask if hasattr(mask, "session") else np.asarray(
            mask.numpy() if hasattr(mask, "numpy") else mask)
        if not hasattr(m, "session") and m.dtype == np.bool_:
            m = np.where(m, -np.inf, 0.0).astype(np.float32)
        m = c.operand(s, op, m, "attn_mask")
        if m.ndim == 3:
            m = m.reshape(n, num_heads, length, m.shape[-1])
        if m.shape[-1] < total:
            m = F.pad(m, (0, total - m.shape[-1]))
        scores = scores + m
    if kpm is not None:
        pad = np.zeros((n, total), bool)
        pad[:, :kpm.shape[1]] = kpm
        scores = scores + s.tensor(np.where(pad, -np.inf, 0.0).astype(np.float32)
                                   .reshape(n, 1, 1, total))
    weights = scores.softmax(-1)
    dropped = F.dropout(weights, dropout_p, training) if dropout_p > 0 else weights
    out = composite.matmul(dropped.reshape(n * num_heads, length, total), vh)
    out = out.transpose(0, 1).reshape(length, n, e)
    out = F.linear(out, c.operand(s, op, out_proj_weight, "out_proj_weight"),
                   None if out_proj_bias is None else c.operand(s, op, out_proj_bias))
    w_out = None
    if need_weights:
        w_out = weights.mean(1) if average_attn_weights else weights
        if unbatched:
            w_out = w_out.squeeze(0)
    return (out.squeeze(1) if unbatched else out), w_out
