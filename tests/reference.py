"""Float64 NumPy references for every tape op, by registry name (or the entry's test.ref).

Independent of torchlean on purpose: nothing here imports it. Each function takes float64
arrays (the op's tensor inputs, in registry order) and the op's attrs as keywords, and returns
the op's value. VJP tests differentiate these by central finite differences.
"""
from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------- views
def broadcast_to(x, shape):
    return np.broadcast_to(x, tuple(shape)).copy()


def sum_to(x, shape):
    shape = tuple(shape)
    lead = x.ndim - len(shape)
    y = x.sum(axis=tuple(range(lead))) if lead else x
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and y.shape[i] != 1)
    return y.sum(axis=axes, keepdims=True).reshape(shape) if axes else y.reshape(shape)


def reshape(x, shape):
    return x.reshape(tuple(shape))


# ---------------------------------------------------------------- elementwise
def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def relu(x):
    return np.where(x > 0, x, 0.0)


# ---------------------------------------------------------------- reductions
def sum(x):  # noqa: A001 - registry name
    return np.asarray(x.sum())


# ==================================================================== section: linalg_index

# -------------------------------------------------------------------- end of section: linalg_index


# ==================================================================== section: conv_pool

# -------------------------------------------------------------------- end of section: conv_pool


# ==================================================================== section: norm_attention

def layer_norm(x, gamma, beta, eps=1e-6):
    """Over the last axis: biased variance, eps inside the sqrt."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def batchnorm_channel_first(x, gamma, beta, eps=1e-6):
    """x (C, ...) or (N, C, H, W): statistics per channel over every other axis."""
    batched = x.ndim == 4
    xb = x if batched else x[None]
    xr = xb.reshape(xb.shape[0], xb.shape[1], -1)
    mean = xr.mean(axis=(0, 2), keepdims=True)
    var = ((xr - mean) ** 2).mean(axis=(0, 2), keepdims=True)
    y = (xr - mean) / np.sqrt(var + eps) * gamma[None, :, None] + beta[None, :, None]
    y = y.reshape(xb.shape)
    return y if batched else y[0]


def multi_head_attention(wq, wk, wv, wo, x, num_heads, mask=None, use_flash=True):
    """Plain float64 multi-head attention; mask True = may attend, blocked rows give 0."""
    batched = x.ndim == 3
    xb = x if batched else x[None]
    B, n, _ = xb.shape
    hh = wq.shape[1]
    hd = hh // num_heads
    scale = 1.0 / np.sqrt(hd)
    m = None if mask is None else np.asarray(mask, dtype=bool)
    out = np.zeros((B, n, hh))
    for b in range(B):
        q, k, v = xb[b] @ wq, xb[b] @ wk, xb[b] @ wv
        for h in range(num_heads):
            sl = slice(h * hd, (h + 1) * hd)
            s = q[:, sl] @ k[:, sl].T * scale
            for i in range(n):
                allowed = np.ones(n, bool) if m is None else m[i]
                if not allowed.any():
                    continue
                z = np.where(allowed, s[i], -np.inf)
                p = np.exp(z - z.max())
                p = p / p.sum()
                out[b, i, sl] = p @ v[:, sl]
    y = out @ wo
    return y if batched else y[0]


# -------------------------------------------------------------------- end of section: norm_attention


# ==================================================================== section: spectral_scan

# -------------------------------------------------------------------- end of section: spectral_scan


# ==================================================================== section: elementwise

# -------------------------------------------------------------------- end of section: elementwise


# ==================================================================== section: reduce_views

# -------------------------------------------------------------------- end of section: reduce_views
