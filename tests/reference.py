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
def matmul(a, b):
    return a @ b


def bmm(a, b):
    return a @ b


def linear(w, b, x):
    return x @ w.T + b


def mse_loss(yhat, target):
    return np.asarray(np.mean((yhat - target) ** 2))


def concat1d(a, b):
    return np.concatenate([a, b])


def concat0(a, b):
    return np.concatenate([a, b], axis=0)


def slice1d(x, start, length):
    return x[start:start + length].copy()


def slice_range0(x, start, length):
    return x[start:start + length].copy()


def _gather_rows(x, idx):
    idx = np.asarray(idx, dtype=np.int64)
    out = np.zeros(idx.shape + x.shape[1:])
    for j, i in np.ndenumerate(idx):
        if i < x.shape[0]:
            out[j] = x[i]
    return out


def gather(x, index):
    return _gather_rows(x, index)


def gather_row(x, index):
    return _gather_rows(x, index)


def gather_vec(x, indices):
    return _gather_rows(x, indices)


def gather_rows(x, indices):
    return _gather_rows(x, indices)


def scatter_add_vec(x, values, indices):
    y = x.copy()
    for j, i in enumerate(np.asarray(indices, dtype=np.int64).reshape(-1)):
        if i < x.shape[0]:
            y[i] += values.reshape(-1)[j]
    return y


def scatter_add_row(x, values, index):
    y = x.copy()
    y[int(index)] += values
    return y


# -------------------------------------------------------------------- end of section: linalg_index


# ==================================================================== section: conv_pool
# Direct float64 loops. Inputs are (C, spatial...) or (N, C, spatial...); the N-less form is
# computed as N = 1 and the axis dropped again.
import itertools as _it


def _cp_axes(v, r):
    return (int(v),) * r if np.isscalar(v) else tuple(int(e) for e in v)


def _cp_conv_size(i, k, s, p):
    return 0 if k == 0 or i + 2 * p < k else (i + 2 * p - k) // s + 1


def _cp_batch(x, r):
    return (x[None], True) if x.ndim == r + 1 else (x, False)


def conv(kernel, bias, input, stride=1, padding=0):
    r = kernel.ndim - 2
    x, nob = _cp_batch(input, r)
    s, p = _cp_axes(stride, r), _cp_axes(padding, r)
    k = kernel.shape[2:]
    out = [_cp_conv_size(i, kk, ss, pp) for i, kk, ss, pp in zip(x.shape[2:], k, s, p)]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pp, pp) for pp in p])
    y = np.zeros((x.shape[0], kernel.shape[0]) + tuple(out))
    for o in _it.product(*[range(d) for d in out]):
        sl = tuple(slice(oo * ss, oo * ss + kk) for oo, ss, kk in zip(o, s, k))
        win = xp[(slice(None), slice(None)) + sl]  # (N, C_in, k...)
        y[(slice(None), slice(None)) + o] = np.tensordot(win, kernel, axes=(
            list(range(1, r + 2)), list(range(1, r + 2)))) + bias
    return y[0] if nob else y


def conv_transpose(kernel, bias, input, stride=1, padding=0):
    r = kernel.ndim - 2
    x, nob = _cp_batch(input, r)
    s, p = _cp_axes(stride, r), _cp_axes(padding, r)
    k = kernel.shape[2:]
    full = [(i - 1) * ss + kk if i and kk else 0 for i, ss, kk in zip(x.shape[2:], s, k)]
    yf = np.zeros((x.shape[0], kernel.shape[1]) + tuple(full))
    for i in _it.product(*[range(d) for d in x.shape[2:]]):
        sl = tuple(slice(ii * ss, ii * ss + kk) for ii, ss, kk in zip(i, s, k))
        # contribution x[n, ci, i] * W[ci, co, k...]
        yf[(slice(None), slice(None)) + sl] += np.tensordot(
            x[(slice(None), slice(None)) + i], kernel, axes=([1], [0]))
    out = [max(0, f - 2 * pp) if f else 0 for f, pp in zip(full, p)]
    sl = tuple(slice(pp, pp + o) for pp, o in zip(p, out))
    y = yf[(slice(None), slice(None)) + sl] + bias.reshape((1, -1) + (1,) * r)
    return y[0] if nob else y


def _cp_pool(input, kernel_size, stride, padding, fn, pad_value, rank=None):
    r = rank
    if r is None:
        r = next(len(v) for v in (kernel_size, stride, padding) if not np.isscalar(v))
    x, nob = _cp_batch(input, r)
    k, s, p = _cp_axes(kernel_size, r), _cp_axes(stride, r), _cp_axes(padding, r)
    out = [0 if i == 0 or kk == 0 or pp > kk // 2 else _cp_conv_size(i, kk, ss, pp)
           for i, kk, ss, pp in zip(x.shape[2:], k, s, p)]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pp, pp) for pp in p], constant_values=pad_value)
    y = np.zeros(x.shape[:2] + tuple(out))
    for o in _it.product(*[range(d) for d in out]):
        sl = tuple(slice(oo * ss, oo * ss + kk) for oo, ss, kk in zip(o, s, k))
        win = xp[(slice(None), slice(None)) + sl].reshape(x.shape[0], x.shape[1], -1)
        y[(slice(None), slice(None)) + o] = fn(win)
    return y[0] if nob else y


def max_pool(input, kernel_size, stride=1, padding=0, rank=None):
    return _cp_pool(input, kernel_size, stride, padding,
                    lambda w: np.maximum(w.max(axis=-1), -np.finfo(np.float32).max), -np.inf, rank)


def max_pool2d(input, kernel_size, stride=1, padding=0):
    return max_pool(input, kernel_size, stride, padding, 2)


def avg_pool(input, kernel_size, stride=1, padding=0, rank=None):
    return _cp_pool(input, kernel_size, stride, padding, lambda w: w.mean(axis=-1), 0.0, rank)


def avg_pool2d(input, kernel_size, stride=1, padding=0):
    return avg_pool(input, kernel_size, stride, padding, 2)


def smooth_max_pool(input, kernel_size, beta, stride=1, padding=0, rank=None):
    b = float(np.float32(beta))

    def lse(w):
        piv = w.max(axis=-1, keepdims=True) if b > 0 else w.min(axis=-1, keepdims=True)
        return (piv + np.log(np.exp(b * (w - piv)).sum(axis=-1, keepdims=True)) / b)[..., 0]
    return _cp_pool(input, kernel_size, stride, padding, lse, 0.0, rank)


def smooth_max_pool2d(input, kernel_size, beta, stride=1, padding=0):
    return smooth_max_pool(input, kernel_size, beta, stride, padding, 2)


def conv2d(kernel, bias, input, stride=1, padding=0):
    return conv(kernel, bias, input, stride, padding)


def conv_transpose2d(kernel, bias, input, stride=1, padding=0):
    return conv_transpose(kernel, bias, input, stride, padding)


def conv_grouped(kernel, bias, input, stride=1, padding=0, dilation=1, groups=1):
    """The dense float64 convolution of the block-diagonal, zero-dilated kernel."""
    r = kernel.ndim - 2
    d = _cp_axes(dilation, r)
    cout, cin_g, ks = kernel.shape[0], kernel.shape[1], kernel.shape[2:]
    span = tuple(dd * (k - 1) + 1 for dd, k in zip(d, ks))
    dense = np.zeros((cout, cin_g * groups) + span)
    per = cout // groups
    taps = tuple(slice(None, None, dd) for dd in d)
    for o in range(cout):
        g = o // per
        dense[(o, slice(g * cin_g, (g + 1) * cin_g)) + taps] = kernel[o]
    return conv(dense, bias, input, stride, padding)


# -------------------------------------------------------------------- end of section: conv_pool


# ==================================================================== section: norm_attention

def layer_norm(x, gamma, beta, eps=1e-6):
    """Over the last axis: biased variance, eps inside the sqrt."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def rms_norm(x, weight, eps=1.1920928955078125e-07):
    """Over the last axis, as torch.nn.RMSNorm."""
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight


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


def multi_head_attention(wq, wk, wv, wo, x, num_heads, mask=None, use_flash=True, causal=False):
    """Plain float64 multi-head attention; mask True = may attend, causal blocks keys j > i
    (both apply together), blocked rows give 0."""
    batched = x.ndim == 3
    xb = x if batched else x[None]
    B, n, _ = xb.shape
    hh = wq.shape[1]
    hd = hh // num_heads
    allowed = np.ones((n, n), bool) if mask is None else np.asarray(mask, dtype=bool)
    if causal:
        allowed = allowed & np.tri(n, dtype=bool)
    q, k, v = (np.ascontiguousarray((xb @ w).reshape(B, n, num_heads, hd).transpose(0, 2, 1, 3))
               for w in (wq, wk, wv))
    s = np.where(allowed, q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2)) / np.sqrt(hd), -np.inf)
    top = s.max(axis=-1, keepdims=True)
    e = np.where(allowed, np.exp(s - np.where(np.isfinite(top), top, 0.0)), 0.0)
    den = e.sum(axis=-1, keepdims=True)
    p = e / np.where(den > 0, den, 1.0)
    out = (p @ v).transpose(0, 2, 1, 3).reshape(B, n, hh)
    y = out @ wo
    return y if batched else y[0]


def attention(q, k, v, mask=None, use_flash=True, causal=False):
    """softmax(q k^T / sqrt(E)) v per leading index over allowed keys (mask True = may attend,
    causal blocks keys j > i); fully blocked rows give 0."""
    n, e = q.shape[-2:]
    allowed = np.ones((n, n), bool) if mask is None else np.asarray(mask, dtype=bool)
    if causal:
        allowed = allowed & np.tri(n, dtype=bool)
    s = np.where(allowed, q @ np.swapaxes(k, -1, -2) / np.sqrt(e), -np.inf)
    top = s.max(axis=-1, keepdims=True)
    ex = np.where(allowed, np.exp(s - np.where(np.isfinite(top), top, 0.0)), 0.0)
    den = ex.sum(axis=-1, keepdims=True)
    return (ex / np.where(den > 0, den, 1.0)) @ v


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

def sub(a, b):
    return a - b


def div(a, b):
    return a / b


def maximum(a, b):
    return np.maximum(a, b)


def minimum(a, b):
    return np.minimum(a, b)


def scale(x, c):
    return c * x


def axpy(a, b, c):
    return a + c * b


def abs(x):  # noqa: A001 - registry name
    return np.abs(x)


def sqrt(x):
    return np.sqrt(x)


def reciprocal(x):
    return 1.0 / x


def exp(x):
    return np.exp(x)


def log(x):
    return np.log(x)


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def tanh(x):
    return np.tanh(x)


def silu(x):
    return x / (1.0 + np.exp(-x))


def softplus(x):
    return np.logaddexp(0.0, x)


def safe_log(x, eps=1e-6):
    return np.log(np.logaddexp(0.0, x) + eps)


def clamp(x, lo, hi):
    return np.clip(x, lo, hi)

# -------------------------------------------------------------------- end of section: elementwise


# ==================================================================== section: reduce_views

def reduce_sum(x, axis):
    return np.asarray(x.sum(axis=axis))


def reduce_mean(x, axis):
    if x.shape[axis] == 0:
        return np.full(np.delete(x.shape, axis if axis >= 0 else x.ndim + axis), np.nan)
    return np.asarray(x.mean(axis=axis))


def reduce_max(x, axis):
    if x.shape[axis] == 0:
        return np.zeros(np.delete(x.shape, axis if axis >= 0 else x.ndim + axis))
    return np.asarray(x.max(axis=axis))


def flatten(x):
    return x.reshape(-1)


def transpose2d(x):
    assert x.ndim == 2
    return x.T.copy()


def swap_adjacent(x, depth):
    if depth + 1 >= x.ndim:
        return x.copy()
    return np.swapaxes(x, depth, depth + 1).copy()


def permute3d_bca(x):
    return np.transpose(x, (1, 2, 0)).copy()


def permute3d_cab(x):
    return np.transpose(x, (2, 0, 1)).copy()


def swap_last2(x):
    return np.transpose(x, (0, 2, 1)).copy()


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def masked_softmax(x, mask):
    m = np.broadcast_to(np.asarray(mask, dtype=bool), x.shape)
    out = np.zeros_like(x)
    xf = x.reshape(-1, x.shape[-1])
    mf = m.reshape(-1, x.shape[-1])
    of = out.reshape(-1, x.shape[-1])
    for r in range(xf.shape[0]):
        allowed = mf[r]
        if not allowed.any():
            continue
        z = xf[r][allowed]
        e = np.exp(z - z.max())
        of[r][allowed] = e / e.sum()
    return out

# -------------------------------------------------------------------- end of section: reduce_views


# ==================================================================== section: api_ops
def lt(a, b):
    return (a < b).astype(np.float64)


def le(a, b):
    return (a <= b).astype(np.float64)


def gt(a, b):
    return (a > b).astype(np.float64)


def ge(a, b):
    return (a >= b).astype(np.float64)


def eq(a, b):
    return (a == b).astype(np.float64)


def ne(a, b):
    return (a != b).astype(np.float64)


def where(cond, a, b):
    return np.where(cond != 0, a, b)


def argmax(x, axis):
    return np.argmax(x, axis=axis).astype(np.float64)


def argmin(x, axis):
    return np.argmin(x, axis=axis).astype(np.float64)


def select_along_axis(x, idx, axis):
    """x[..., idx, ...] per position; indices outside [0, len) read 0."""
    n = x.shape[axis]
    k = np.asarray(idx, dtype=np.int64)
    inside = (k >= 0) & (k < n)
    got = np.take_along_axis(x, np.expand_dims(np.where(inside, k, 0), axis), axis)
    return np.where(inside, np.squeeze(got, axis), 0.0)


def pow(a, b):  # noqa: A001 - registry name
    with np.errstate(all="ignore"):
        return np.power(a, b)


def pow_scalar(x, p):
    with np.errstate(all="ignore"):
        return np.power(x, p)


def erf(x):
    """erf in float64 via math.erf (the standard library's, independent of torchlean)."""
    import math
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def gelu_erf(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def softplus_beta(x, beta=1.0, threshold=20.0):
    bx = beta * x
    return np.where(bx > threshold, x, np.logaddexp(0.0, bx) / beta)


def cross_entropy_rows(x, labels):
    """-log softmax(x)[r, t_r] per row; a label outside [0, V) gives 0."""
    t = np.asarray(labels, dtype=np.int64).reshape(-1)
    m = x.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]
    ok = (t >= 0) & (t < x.shape[1])
    picked = x[np.arange(x.shape[0]), np.where(ok, t, 0)]
    return np.where(ok, lse - picked, 0.0)


def linear_residual(w, b, x, r):
    """x W^T + b + r."""
    return x @ w.T + b + r


def linear_gelu(w, b, x):
    """gelu(x W^T + b), the tanh form."""
    z = x @ w.T + b
    return 0.5 * z * (1.0 + np.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3)))


# ---------------------------------------------------------------- sort family (rows)

def _rows(x):
    x = np.asarray(x, dtype=np.float64)
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def argsort_rows(x, descending=0):
    """Stable sort positions per row; NaN largest, -0 equal to +0 (NumPy's stable sort keys)."""
    r = _rows(x)
    key = np.where(np.isnan(r), np.inf, r)
    key = np.where(r == 0, 0.0, key)
    rank_nan = np.isnan(r).astype(np.int8)        # NaN after +inf
    if descending:
        key, rank_nan = -key, -rank_nan
    out = np.stack([np.lexsort((key_row, nan_row)) for key_row, nan_row in zip(key, rank_nan)])
    return out.astype(np.float64).reshape(np.shape(x))


def topk_rows(x, k, descending=0):
    """The first k stable-sort positions per row (argsort_rows's first k columns)."""
    full = argsort_rows(x, descending)
    return full.reshape(-1, np.shape(x)[-1] if np.ndim(x) else 1)[:, :k].reshape(
        tuple(np.shape(x)[:-1]) + (k,))


def take_rows(x, idx, distinct=0):
    r = _rows(x)
    k = np.asarray(idx, dtype=np.int64)
    k = k.reshape(-1, k.shape[-1])
    inside = (k >= 0) & (k < r.shape[1])
    got = np.take_along_axis(r, np.where(inside, k, 0), axis=1)
    return np.where(inside, got, 0.0).reshape(np.shape(idx))


def put_add_rows(x, idx, values):
    """x with values added at positions idx along each row, in index order; others skipped."""
    r = _rows(x).copy()
    k = np.asarray(idx, dtype=np.float64).reshape(r.shape[0], -1)
    v = np.asarray(values, dtype=np.float64).reshape(k.shape)
    for i in range(r.shape[0]):
        for j in range(k.shape[1]):
            c = k[i, j]
            if 0 <= c < r.shape[1]:
                r[i, int(c)] += v[i, j]
    return r.reshape(np.shape(x))


def triangle(x, diagonal=0, upper=0):
    x = np.asarray(x, dtype=np.float64)
    m, n = x.shape[-2:]
    keep = np.triu(np.ones((m, n), bool), diagonal) if upper else \
        np.tril(np.ones((m, n), bool), diagonal)
    return np.where(keep, x, 0.0)


def fill_masked(mask, x, value):
    return np.where(np.asarray(mask) != 0, float(np.float32(value)), x)


def cumsum_rows(x, reverse=0):
    r = _rows(x)
    y = np.flip(np.cumsum(np.flip(r, 1), axis=1), 1) if reverse else np.cumsum(r, axis=1)
    return y.reshape(np.shape(x))


def cumprod_rows(x, reverse=0):
    r = _rows(x)
    y = np.flip(np.cumprod(np.flip(r, 1), axis=1), 1) if reverse else np.cumprod(r, axis=1)
    return y.reshape(np.shape(x))


def cumarg_rows(x, kind=0):
    """Position of the running max (kind 0) / min (kind 1): the last of equal values, NaN sticks."""
    r = _rows(x)
    out = np.zeros_like(r)
    for i, row in enumerate(r):
        best, at = row[0], 0
        for j, v in enumerate(row):
            if np.isnan(v) or (not np.isnan(best) and (v >= best if kind == 0 else v <= best)):
                best, at = v, j
            out[i, j] = at
    return out.reshape(np.shape(x))


def logcumsumexp_rows(x, reverse=0):
    r = _rows(x)
    if reverse:
        r = np.flip(r, 1)
    y = np.logaddexp.accumulate(r, axis=1)
    return (np.flip(y, 1) if reverse else y).reshape(np.shape(x))


def scatter_add_rows(x, values, indices):
    y = x.copy()
    for j, i in enumerate(np.asarray(indices, dtype=np.int64).reshape(-1)):
        if 0 <= i < x.shape[0]:
            y[i] += values[j]
    return y

# ---------------------------------------------------------------- pointwise math catalog
# (float64 NumPy; the rounding functions and fmod are exact, so these are bit references)
log1p = np.log1p
sin = np.sin
cos = np.cos
tan = np.tan
sinc = np.sinc   # sin(pi x) / (pi x), 1 at 0
expm1 = np.expm1
log2 = np.log2
log10 = np.log10
exp2 = np.exp2
sinh = np.sinh
cosh = np.cosh
asinh = np.arcsinh
acosh = np.arccosh
atanh = np.arctanh
atan = np.arctan
asin = np.arcsin
acos = np.arccos
atan2 = np.arctan2
hypot = np.hypot
signbit = np.signbit
trunc = np.trunc
ceil = np.ceil
fmod = np.fmod
copysign = np.copysign


def sign(x):
    return np.sign(np.nan_to_num(x, nan=0.0))


def round(x):  # noqa: A001 - registry name
    return np.round(x)   # half to even, as torch.round


def frac(x):
    return x - np.trunc(x)


def remainder(a, b):
    """torch.remainder: fmod, plus b where the signs differ (Python's %, sign of the divisor)."""
    m = np.fmod(a, b)
    return np.where((m != 0) & ((b < 0) != (m < 0)), m + b, m)


def xlogy(a, b):
    with np.errstate(all="ignore"):
        return np.where((a == 0) & ~np.isnan(b), 0.0, a * np.log(b))


def xlog1py(a, b):
    with np.errstate(all="ignore"):
        return np.where((a == 0) & ~np.isnan(b), 0.0, a * np.log1p(b))


logaddexp = np.logaddexp
logaddexp2 = np.logaddexp2


def logit(x, eps=-1.0):
    z = x if eps < 0 else np.clip(x, eps, 1.0 - eps)
    with np.errstate(all="ignore"):
        return np.log(z / (1.0 - z))


def nan_to_num(x, nan=0.0, posinf=3.4028234663852886e38, neginf=-3.4028234663852886e38):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


# ---------------------------------------------------------------- special functions
# (mpmath at 30 digits, rounded to float64: independent of torchlean's algorithms)

def _mp(fn, *xs):
    import mpmath as mp

    def one(*v):
        with mp.workdps(30):
            try:
                r = fn(*[mp.mpf(float(u)) for u in v])
            except (ValueError, ZeroDivisionError):
                return float("nan")
            return float(r.real) if isinstance(r, mp.mpc) else float(r)
    return np.vectorize(one, otypes=[np.float64])(*np.broadcast_arrays(*xs))


def erfc(x):
    import mpmath as mp
    return _mp(mp.erfc, x)


def erfcx(x):
    import mpmath as mp
    return _mp(lambda v: mp.erfc(v) * mp.exp(v * v), x)


def erfinv(x):
    import mpmath as mp
    return _mp(mp.erfinv, x)


def ndtr(x):
    import mpmath as mp
    return _mp(mp.ncdf, x)


def ndtri(x):
    import mpmath as mp
    return _mp(lambda p: mp.sqrt(2) * mp.erfinv(2 * p - 1), x)


def log_ndtr(x):
    import mpmath as mp
    return _mp(lambda v: mp.log(mp.ncdf(v)), x)


def lgamma(x):
    import mpmath as mp
    return _mp(lambda v: mp.log(abs(mp.gamma(v))), x)


def digamma(x):
    import mpmath as mp
    return _mp(mp.digamma, x)


def polygamma(x, order=0):
    import mpmath as mp
    return _mp(lambda v: mp.polygamma(order, v), x)


def zeta(x, q):
    import mpmath as mp
    return _mp(mp.zeta, x, q)


def _bessel(kind, order, scale=None):
    def f(x):
        import mpmath as mp
        fn = getattr(mp, kind)
        if scale is None:
            return _mp(lambda v: fn(order, v), x)
        return _mp(lambda v: fn(order, v) * mp.exp(scale(v)), x)
    return f


i0 = _bessel("besseli", 0)
i1 = _bessel("besseli", 1)
i0e = _bessel("besseli", 0, lambda v: -abs(v))
i1e = _bessel("besseli", 1, lambda v: -abs(v))
bessel_j0 = _bessel("besselj", 0)
bessel_j1 = _bessel("besselj", 1)
bessel_y0 = _bessel("bessely", 0)
bessel_y1 = _bessel("bessely", 1)
modified_bessel_k0 = _bessel("besselk", 0)
modified_bessel_k1 = _bessel("besselk", 1)
scaled_modified_bessel_k0 = _bessel("besselk", 0, lambda v: v)
scaled_modified_bessel_k1 = _bessel("besselk", 1, lambda v: v)


def spherical_bessel_j0(x):
    with np.errstate(all="ignore"):
        return np.where(x == 0, 1.0, np.sin(x) / np.where(x == 0, 1.0, x))


def orthogonal_polynomial(x, degree, kind=0):
    """mpmath's polynomials (V, W from U: V_n = U_n - U_(n-1), W_n = U_n + U_(n-1); He from H)."""
    import mpmath as mp

    def one(v, d):
        n = int(d)
        if n < 0:
            return 0.0
        z = 2 * v - 1 if 4 <= kind <= 7 else v
        k = kind & 3 if kind <= 7 else kind
        if kind <= 7 and k == 0:
            return mp.chebyt(n, z)
        if kind <= 7 and k == 1:
            return mp.chebyu(n, z)
        if kind <= 7:
            prev = mp.chebyu(n - 1, z) if n > 0 else 0
            return mp.chebyu(n, z) + (prev if k == 3 else -prev)
        if kind == 8:
            return mp.hermite(n, v)
        if kind == 9:
            return mp.hermite(n, v / mp.sqrt(2)) / mp.sqrt(2) ** n
        if kind == 10:
            return mp.laguerre(n, 0, v)
        return mp.legendre(n, v)
    return _mp(one, x, degree)


# ---------------------------------------------------------------- bit-level ops (exact)

def nextafter(a, b):
    return np.nextafter(np.float32(a), np.float32(b)).astype(np.float64)


def frexp_mantissa(x):
    return np.frexp(np.float32(x))[0].astype(np.float64)


def frexp_exponent(x):
    return np.frexp(np.float32(x))[1].astype(np.float64)


def airy_ai(x):
    import mpmath as mp
    return _mp(mp.airyai, x)
