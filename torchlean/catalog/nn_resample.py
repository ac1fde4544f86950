"""torch.nn.functional's channel-wise and alpha dropouts, the upsample aliases of interpolate,
and the 1-D / 3-D forms of transposed convolution and adaptive pooling (the registry's N-D
conv_transpose; separable per-axis averaging and window maxima)."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c
from torchlean.nn import functional as F

EXPORTS = {"nn.functional": ("alpha_dropout", "feature_alpha_dropout", "dropout1d",
                             "dropout3d", "upsample", "upsample_nearest", "upsample_bilinear",
                             "adaptive_avg_pool3d", "adaptive_max_pool3d", "conv_transpose1d",
                             "conv_transpose3d", "max_unpool1d", "max_unpool2d", "max_unpool3d"),
           "torch": ("alpha_dropout", "feature_alpha_dropout", "conv_transpose1d",
                     "conv_transpose3d")}

_SELU_ALPHA_PRIME = 1.7580993408473766      # -SELU_SCALE * SELU_ALPHA: selu's negative limit


def _check_p(op, p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


def _alpha(op, input, p, training, mask_shape):
    """torch's alpha dropout: dropped elements take selu's negative limit, then an affine map
    a x + b keeps mean 0 and variance 1 for unit-normal input."""
    x = c.tensor(op, input)
    _check_p(op, p)
    if not training or p == 0.0 or not x.shape or 0 in x.shape:
        return x
    if p == 1.0:
        return x * 0.0
    a = 1.0 / np.sqrt((_SELU_ALPHA_PRIME ** 2 * p + 1) * (1 - p))
    keep = x.session.bernoulli_mask(mask_shape(x), 1.0 - p)
    b = (keep - 1.0) * (_SELU_ALPHA_PRIME * a) + _SELU_ALPHA_PRIME * a * p
    return x * (keep * float(a)) + b


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha("alpha_dropout", input, p, training, lambda x: tuple(x.shape))


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels: one draw per (sample, channel)."""
    return _alpha("feature_alpha_dropout", input, p, training,
                  lambda x: tuple(x.shape[:2]) + (1,) * (x.ndim - 2))


def _channel_dropout(op, input, p, training, spatial):
    x = c.tensor(op, input)
    if x.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{op}: expected input with {spatial + 1} or {spatial + 2} dims "
                         f"((C, ...) or (N, C, ...)), got {tuple(x.shape)}")
    _check_p(op, p)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    lead = x.ndim - spatial
    keep = x.session.bernoulli_mask(tuple(x.shape[:lead]) + (1,) * spatial, 1.0 - p)
    return x * keep * (1.0 / (1.0 - p))


def dropout1d(input, p=0.5, training=True, inplace=False):
    return _channel_dropout("dropout1d", input, p, training, 1)


def dropout3d(input, p=0.5, training=True, inplace=False):
    return _channel_dropout("dropout3d", input, p, training, 3)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return F.interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return F.interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Bilinear with align_corners=True, as torch's deprecated upsample_bilinear."""
    return F.interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _windows(n_in, n_out):
    """torch's adaptive windows [floor(i n / m), ceil((i + 1) n / m)) for i < m."""
    return [((i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)) for i in range(n_out)]


def _sizes3(op, x, output_size):
    if x.ndim not in (4, 5):
        raise ValueError(f"{op}: expected input (N, C, D, H, W) or (C, D, H, W), got "
                         f"{tuple(x.shape)}")
    out = (output_size,) * 3 if isinstance(output_size, (int, np.integer)) or \
        output_size is None else tuple(output_size)
    if len(out) != 3:
        raise ValueError(f"{op}: output_size must be an int or 3 sizes, got {output_size!r}")
    sizes = tuple(n if o is None else int(o) for o, n in zip(out, x.shape[-3:]))
    if any(o < 1 for o in sizes) or any(n < 1 for n in x.shape[-3:]):
        raise ValueError(f"{op}: output size {sizes} and input size {tuple(x.shape[-3:])} must "
                         "be positive")
    return sizes


def adaptive_avg_pool3d(input, output_size):
    """Window means, one averaging matrix per spatial axis (the mean is separable)."""
    x = c.tensor("adaptive_avg_pool3d", input)
    sizes = _sizes3("adaptive_avg_pool3d", x, output_size)
    y = x
    for axis, m in zip((-3, -2, -1), sizes):
        n = x.shape[axis]
        avg = np.zeros((m, n), np.float32)
        for i, (lo, hi) in enumerate(_windows(n, m)):
            avg[i, lo:hi] = 1.0 / (hi - lo)
        moved = composite.transpose(y, axis, -1)
        y = composite.transpose(composite.matmul(moved, y.session.tensor(avg.T)), axis, -1)
    return y


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Window maxima, one axis at a time (the maximum is separable): each axis's windows are
    gathered (a short window repeats its last element) and reduced with amax."""
    x = c.tensor("adaptive_max_pool3d", input)
    if return_indices:
        raise NotImplementedError("adaptive_max_pool3d: return_indices is not supported")
    sizes = _sizes3("adaptive_max_pool3d", x, output_size)
    y = x
    for axis, m in zip((-3, -2, -1), sizes):
        n = y.shape[axis]
        wins = _windows(n, m)
        width = max(hi - lo for lo, hi in wins)
        take = np.array([[min(lo + j, hi - 1) for j in range(width)] for lo, hi in wins])
        moved = composite.transpose(y, axis, -1)
        pos = c.positions(tuple(moved.shape))
        picked = c.rearrange(moved, np.take(pos, take, axis=-1))       # (..., m, width)
        y = composite.transpose(picked.amax(-1), axis, -1)
    return y


def _conv_transpose_nd(op, rank, input, weight, bias, stride, padding, output_padding, groups,
                       dilation):
    x, w = c.tensor(op, input), c.tensor(op, weight, "weight")
    s = x.session

    def per_axis(v, what):
        t = (int(v),) * rank if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)
        if len(t) != rank:
            raise ValueError(f"{op}: {what} must be an int or {rank} ints, got {v!r}")
        return t
    if int(groups) != 1 or per_axis(dilation, "dilation") != (1,) * rank:
        raise NotImplementedError(f"{op}: groups and dilation other than 1 are not supported")
    st, p, opad = per_axis(stride, "stride"), per_axis(padding, "padding"), \
        per_axis(output_padding, "output_padding")
    if w.ndim != rank + 2 or x.ndim not in (rank + 1, rank + 2) or x.shape[-rank - 1] != w.shape[0]:
        raise ValueError(f"{op}: expected weight (C_in, C_out, k...) with {rank} kernel axes and "
                         f"input (N, C_in, ...) or (C_in, ...), got weight {tuple(w.shape)}, "
                         f"input {tuple(x.shape)}")
    if any(o < 0 or o >= a for o, a in zip(opad, st)):
        raise ValueError(f"{op}: output_padding {opad} must be >= 0 and smaller than the "
                         f"stride {st}")
    zero_bias = s.tensor(np.zeros(w.shape[1], np.float32))
    b = zero_bias if bias is None else c.operand(s, op, bias, "bias")
    if not any(opad):
        return s.op("conv_transpose", w, b, x, stride=st, padding=p)
    full = s.op("conv_transpose", w, zero_bias, x, stride=st, padding=(0,) * rank)
    out = tuple(f - 2 * a + o for f, a, o in zip(full.shape[-rank:], p, opad))
    key = (Ellipsis,) + tuple(slice(a, a + o) for a, o in zip(p, out))
    y = full[key]
    short = tuple(o - n for o, n in zip(out, y.shape[-rank:]))
    if any(short):
        pads = [v for k in reversed(short) for v in (0, k)]
        y = F.pad(y, pads)
    return y + b.reshape((-1,) + (1,) * rank)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transpose_nd("conv_transpose1d", 1, input, weight, bias, stride, padding,
                              output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transpose_nd("conv_transpose3d", 3, input, weight, bias, stride, padding,
                              output_padding, groups, dilation)


def _max_unpool(op, rank, input, indices, kernel_size, stride, padding, output_size):
    """Zeros of the unpooled size with each input element at its per-plane flat index (the
    indices max_pool returns); a position named twice takes the later element."""
    x = c.tensor(op, input)
    if x.ndim not in (rank + 1, rank + 2):
        raise ValueError(f"{op}: expected input (N, C, ...) or (C, ...) with {rank} spatial "
                         f"dims, got {tuple(x.shape)}")
    idx = np.asarray(indices.numpy() if hasattr(indices, "numpy") else indices)
    if idx.dtype.kind not in "iu" or idx.shape != tuple(x.shape):
        raise TypeError(f"{op}: indices must be an int64 tensor of the input's shape "
                        f"{tuple(x.shape)}, got {idx.dtype} {idx.shape}")

    def per_axis(v, what):
        t = (int(v),) * rank if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)
        if len(t) != rank:
            raise ValueError(f"{op}: {what} must be an int or {rank} ints, got {v!r}")
        return t
    k = per_axis(kernel_size, "kernel_size")
    st = k if stride is None else per_axis(stride, "stride")
    p = per_axis(padding, "padding")
    spatial = tuple(x.shape[-rank:])
    if output_size is None:
        out = tuple((n - 1) * s - 2 * q + kk for n, s, q, kk in zip(spatial, st, p, k))
    else:
        out = tuple(int(v) for v in tuple(output_size)[-rank:])
    plane = math.prod(out)
    if idx.size and (idx.min() < 0 or idx.max() >= plane):
        raise IndexError(f"{op}: index out of range [0, {plane}) of the output size {out}")
    lead = tuple(x.shape[:-rank])
    planes = math.prod(lead)
    at = idx.reshape(planes, -1) + (np.arange(planes, dtype=np.int64) * plane)[:, None]
    zeros = x.session.tensor(np.zeros(lead + out, np.float32))
    return c.embed(zeros, x.reshape(at.shape), at)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                       output_size)
