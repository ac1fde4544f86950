"""torch's attention in functional form: masks as PyTorch writes them (boolean or additive,
causal), the fused kernel where it fits, and scaled_dot_product_attention over any leading
batch shape. nn.MultiheadAttention and the transformer layers run on these."""
from __future__ import annotations

import math

import numpy as np

from torchlean.nn.functional_base import session_of
from torchlean.session import Parameter, Tensor


def split_attention_mask(op, mask, shape, blocked_when=False):
    """A PyTorch attention mask as (allowed, additive) for scores of `shape` (..., L, S).

    Boolean masks give `allowed` (True = may attend; blocked_when=True reads True as blocked,
    nn.MultiheadAttention's convention); float masks are added to the scores, their -inf entries
    becoming blocked entries of `allowed` (masked_softmax gives them exactly 0 and never
    computes inf - inf) and the rest an additive constant. A Tensor float mask is added as is
    (differentiable). Returns host arrays broadcast to `shape` when not (L, S)."""
    if mask is None:
        return None, None
    if isinstance(mask, (Tensor, Parameter)):
        return None, mask
    a = np.asarray(mask)
    target = tuple(shape[-2:]) if a.ndim <= 2 else tuple(shape)
    try:
        fits = np.broadcast_shapes(a.shape, target) == target
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{op}: attention mask of shape {a.shape} does not broadcast to the "
                         f"scores (..., L, S) = {tuple(shape)}")
    a = np.broadcast_to(a, target)
    if a.dtype == np.bool_:
        return (~a if blocked_when else a), None
    if a.dtype.kind != "f":
        # torch raises too: an integer 0/1 mask added as a float would block nothing
        raise TypeError(f"{op}: attention mask must be boolean (or float, added to the scores), "
                        f"got dtype {a.dtype}; an integer mask such as np.tril(np.ones((T, T), "
                        "int)) must be converted with .astype(bool)")
    a = a.astype(np.float64)
    if np.isnan(a).any() or (a == np.inf).any():
        raise ValueError(f"{op}: a float attention mask may hold finite values and -inf, got "
                         "NaN or +inf")
    blocked = a == -np.inf
    allowed = ~blocked if blocked.any() else None
    additive = np.where(blocked, 0.0, a).astype(np.float32) if (a[~blocked] != 0).any() else None
    return allowed, additive


def causal_mask(l, s):
    """torch's is_causal mask for L queries and S keys: query i may attend keys j <= i (the
    lower triangle of an L x S matrix, aligned top left)."""
    return np.tri(l, s, dtype=bool)


def fused_attention_fits(l, s, allowed, additive) -> bool:
    """Whether the fused attention kernels can run this attention: self-shaped (as many keys as
    queries), no additive mask, and a boolean mask, if any, of shape (L, L). The one test
    F.scaled_dot_product_attention and nn.MultiheadAttention share (each adds its own limits)."""
    return l == s and additive is None and (allowed is None or np.shape(allowed) == (l, l))


def attention_core(q, k, v, allowed=None, additive=None, scale=None, dropout_p=0.0,
                   training=True):
    """softmax(q @ k^T * scale + additive, over keys where `allowed`) @ v for q (N, L, E),
    k (N, S, E), v (N, S, Ev), all registry ops (bmm, masked_softmax/softmax), so it is
    differentiable and exact-mode safe. allowed: None, a boolean (L, S) or (N, L, S) array or a
    DeviceMask; additive: None, a float array or a Tensor broadcasting to (N, L, S)."""
    s = session_of(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = s.op("bmm", q, k.transpose(-2, -1)) * scale
    if additive is not None:
        scores = scores + additive
    if allowed is None:
        p = s.op("softmax", scores)
    else:
        p = s.op("masked_softmax", scores, mask=allowed)
    if dropout_p > 0.0:
        p = s.dropout(p, dropout_p, training)
    return s.op("bmm", p, v)


# the fused attention op runs (batch x heads) on one CUDA grid axis
_FUSED_MAX_BATCH = 65535


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """torch's F.scaled_dot_product_attention for query (..., L, E), key (..., S, E), value
    (..., S, Ev) with the same leading axes: softmax(q k^T * scale + mask) v, scale defaulting
    to 1/sqrt(E). A boolean attn_mask means True = may attend; a float one is added to the
    scores (-inf blocks). is_causal applies the lower-triangular (L, S) mask (not together with
    attn_mask, as torch). Rows with every key blocked give 0 (torch gives NaN).

    Self-shaped calls (S = L, Ev = E, the default scale, no dropout, no float mask, a boolean
    mask of shape (L, L) if any) run the fused `attention` op, which never stores the L x L
    scores and takes is_causal as its attr; the others compose bmm and masked_softmax."""
    op = "scaled_dot_product_attention"
    s = session_of(query, key, value)
    q, k, v = s.as_tensor(query), s.as_tensor(key), s.as_tensor(value)
    if (q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim or q.shape[:-2] != k.shape[:-2]
            or k.shape[:-2] != v.shape[:-2] or q.shape[-1] != k.shape[-1]
            or k.shape[-2] != v.shape[-2]):
        raise ValueError(f"{op}: expected query (..., L, E), key (..., S, E) and value "
                         f"(..., S, Ev) with the same leading axes, got query {q.shape}, key "
                         f"{k.shape}, value {v.shape}")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{op}: give either attn_mask or is_causal=True, not both (as torch)")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1), got {dropout_p}")
    lead, (l, e), (sk, ev) = tuple(q.shape[:-2]), q.shape[-2:], v.shape[-2:]
    n = math.prod(lead)
    scores = lead + (l, sk)
    allowed, additive = (None, None) if is_causal else split_attention_mask(op, attn_mask, scores)
    if (e == ev and scale is None and dropout_p == 0.0 and 0 < n <= _FUSED_MAX_BATCH
            and fused_attention_fits(l, sk, allowed, additive)):
        # self-shaped: the fused attention op (causal as its attr, no mask buffer)
        y = s.op("attention", q.reshape(n, l, e), k.reshape(n, l, e), v.reshape(n, l, e),
                 mask=allowed, causal=bool(is_causal))
        return y.reshape(lead + (l, ev))
    if is_causal:
        allowed = causal_mask(l, sk)
    if allowed is not None and allowed.ndim > 2:
        allowed = allowed.reshape(n, l, sk)
    if additive is not None:
        if isinstance(additive, np.ndarray):
            additive = s.tensor(additive.reshape((n, l, sk) if additive.ndim > 2 else (l, sk)))
        else:
            additive = s.as_tensor(additive)
            if len(additive.shape) > 2:
                additive = additive.expand(*scores).reshape(n, l, sk)
    y = attention_core(q.reshape(n, l, e), k.reshape(n, sk, e), v.reshape(n, sk, ev), allowed,
                       additive, scale, dropout_p)
    return y.reshape(lead + (l, ev))
