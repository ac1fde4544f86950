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

# -------------------------------------------------------------------- end of section: norm_attention


# ==================================================================== section: spectral_scan
def rfft(x):
    """Unnormalised real DFT over the last axis, packed [re, im] per bin."""
    z = np.fft.rfft(x, axis=-1)
    return np.stack([z.real, z.imag], axis=-1)


def _edge_imag_zeroed(x, n):
    z = x[..., 0] + 1j * x[..., 1]
    z[..., 0] = z[..., 0].real
    if n % 2 == 0:
        z[..., n // 2] = z[..., n // 2].real
    return z


def irfft(x, n):
    """1/n-normalised inverse; the DC and (even n) Nyquist imaginary parts are ignored."""
    return np.fft.irfft(_edge_imag_zeroed(np.asarray(x, dtype=np.float64), n), n=n, axis=-1)


def spectral_conv1d_rfft(x, w_re, w_im):
    """FNO spectral convolution by np.fft: X = rfft over the grid axis, mix the first `modes`
    bins with W[k, in, out], zero the rest, irfft back (1/grid)."""
    grid = x.shape[-2]
    modes = w_re.shape[0]
    X = np.fft.rfft(x, axis=-2)                       # (..., grid//2+1, width)
    W = w_re + 1j * w_im                              # (modes, in, out)
    Z = np.zeros_like(X)
    Z[..., :modes, :] = np.einsum("...kc,kco->...ko", X[..., :modes, :], W)
    Z[..., 0, :] = Z[..., 0, :].real
    if grid % 2 == 0:
        Z[..., grid // 2, :] = Z[..., grid // 2, :].real
    return np.fft.irfft(Z, n=grid, axis=-2)


def selective_scan(a, b, x, h0):
    """h_t = a_t h_{t-1} + b_t x_t by a direct loop; a, b of shape (D,), (T, D) or (B, T, D)."""
    batched = x.ndim == 3
    xb = x if batched else x[None]
    hb = h0 if batched else h0[None]
    B, T, D = xb.shape

    def coef(c, i, t):
        return c if c.ndim == 1 else c[t] if c.ndim == 2 else c[i, t]

    y = np.zeros((B, T, D))
    for i in range(B):
        h = hb[i].copy()
        for t in range(T):
            h = coef(a, i, t) * h + coef(b, i, t) * xb[i, t]
            y[i, t] = h
    return y if batched else y[0]


# -------------------------------------------------------------------- end of section: spectral_scan


# ==================================================================== section: elementwise

# -------------------------------------------------------------------- end of section: elementwise


# ==================================================================== section: reduce_views

# -------------------------------------------------------------------- end of section: reduce_views
