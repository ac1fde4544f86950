"""Layer norm, channel-first batch norm, multi-head attention and its core (attention)."""
from __future__ import annotations

import math

from .core import ShapeError, require_rank


def ln_out(x, gamma, beta=None):
    """layer_norm (gamma, beta) and rms_norm (weight): each (cols,), matching x's last axis."""
    require_rank(x, 1, None, "x")
    params = {"weight": gamma} if beta is None else {"gamma": gamma, "beta": beta}
    for name, p in params.items():
        require_rank(p, 1, 1, name)
    if any(p[0] != x[-1] for p in params.values()):
        got = ", ".join(f"{name} {tuple(p)}" for name, p in params.items())
        raise ShapeError(f"expected {' and '.join(params)} of shape ({x[-1]},) matching the last axis "
                         f"of x {tuple(x)}; got {got}")
    if x[-1] == 0:
        raise ShapeError("the last axis of x must not be empty")
    return tuple(x)


def ln_stats(x):
    """One statistic per row (leading axes folded)."""
    return (math.prod(x[:-1]),)


def ln_param(g, gamma):
    if tuple(gamma) != (g[-1],):
        raise ShapeError(f"expected gamma ({g[-1]},), got {tuple(gamma)}")
    return tuple(gamma)


def _bn_split(x):
    require_rank(x, 2, 4, "x")
    if len(x) == 4:
        return x[0], x[1], x[2] * x[3]
    return 1, x[0], math.prod(x[1:])


def bn_out(x, gamma, beta):
    """batchnorm_channel_first: x (C, L), (C, H, W) or (N, C, H, W); gamma, beta (C,)."""
    n, c, s = _bn_split(x)
    if tuple(gamma) != (c,) or tuple(beta) != (c,):
        raise ShapeError(f"expected gamma and beta of shape ({c},) (channels of x {tuple(x)}); "
                         f"got gamma {tuple(gamma)}, beta {tuple(beta)}")
    if n * s == 0:
        raise ShapeError("each channel needs at least one element")
    return tuple(x)


def bn_stats(x):
    return (_bn_split(x)[1],)


def bn_n(x):
    return _bn_split(x)[0]


def bn_c(x):
    return _bn_split(x)[1]


def bn_s(x):
    return _bn_split(x)[2]


def mha_out(wq, wk, wv, wo, x, num_heads, mask):
    """multi_head_attention: x (n, d) or (B, n, d); Wq/Wk/Wv (d, H*hd); Wo (H*hd, d)."""
    require_rank(x, 2, 3, "x")
    for nm, w in (("Wq", wq), ("Wk", wk), ("Wv", wv), ("Wo", wo)):
        require_rank(w, 2, 2, nm)
    d = x[-1]
    hh = wq[1]
    if tuple(wk) != tuple(wq) or tuple(wv) != tuple(wq) or wq[0] != d or tuple(wo) != (hh, d):
        raise ShapeError(f"expected Wq, Wk, Wv of shape (d_model, H*hd) = ({d}, k) and Wo (k, {d}); "
                         f"got Wq {tuple(wq)}, Wk {tuple(wk)}, Wv {tuple(wv)}, Wo {tuple(wo)}")
    if num_heads <= 0 or hh % num_heads:
        raise ShapeError(f"num_heads={num_heads} must be positive and divide the projection width "
                         f"{hh} (Wq {tuple(wq)})")
    if mask is not None:
        n = x[-2]
        if tuple(mask.shape) != (n, n):
            raise ShapeError(f"mask must have shape ({n}, {n}) for x {tuple(x)}, got "
                             f"{tuple(mask.shape)}")
    return tuple(x)


def mha_proj(x, wq):
    return tuple(x[:-1]) + (wq[1],)


def mha_lse(x, num_heads):
    return tuple(x[:-2]) + (num_heads, x[-2])


def mha_hd(wq, num_heads):
    require_rank(wq, 2, 2, "Wq")
    return wq[1] // num_heads if num_heads > 0 else 0


def attn_out(q, k, v, mask):
    """attention: q, k, v of one shape (N, n, E) or (n, E); mask (n, n)."""
    require_rank(q, 2, 3, "q")
    if tuple(k) != tuple(q) or tuple(v) != tuple(q):
        raise ShapeError(f"expected q, k and v of one shape (N, n, E) or (n, E); got q {tuple(q)}, "
                         f"k {tuple(k)}, v {tuple(v)}")
    n = q[-2]
    if mask is not None and tuple(mask.shape) != (n, n):
        raise ShapeError(f"mask must have shape ({n}, {n}) for q {tuple(q)}, got {tuple(mask.shape)}")
    return tuple(q)


def attn_lse(q):
    """One log-sum-exp per query row: q's shape without its last axis."""
    return tuple(q[:-1])
