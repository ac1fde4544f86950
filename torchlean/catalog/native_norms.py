"""torch.native_layer_norm / native_batch_norm / native_group_norm: the normalized output with
the statistics torch saves for backward (mean and 1 / sqrt(var + eps)), composed from the
catalog's normalizations' formulas so both agree."""
from __future__ import annotations

import math

import numpy as np

from torchlean.catalog import _common as c
from torchlean.catalog.nn_layers import batch_norm

EXPORTS = {"torch": ("native_layer_norm", "native_batch_norm", "native_group_norm")}


def _normalize(x, axes, eps):
    mean = x.mean(axes, keepdim=True)
    rstd = (x.var(axes, keepdim=True, correction=0) + float(eps)).rsqrt()
    return (x - mean) * rstd, mean, rstd


def _scale_shift(s, y, weight, bias, shape, op):
    if weight is not None:
        y = y * c.operand(s, op, weight, "weight").reshape(shape)
    if bias is not None:
        y = y + c.operand(s, op, bias, "bias").reshape(shape)
    return y


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """(out, mean, rstd) over the trailing normalized_shape axes (statistics keep those axes
    as size 1)."""
    op = "native_layer_norm"
    x = c.tensor(op, input)
    ns = tuple(normalized_shape)
    k = len(ns)
    if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k:]) != ns:
        raise RuntimeError(f"{op}: normalized_shape {ns} does not match the trailing axes of "
                           f"input shape {tuple(x.shape)}")
    y, mean, rstd = _normalize(x, tuple(range(x.ndim - k, x.ndim)), eps)
    return _scale_shift(x.session, y, weight, bias, ns, op), mean, rstd


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(out, save_mean, save_invstd) of shape (C,) when training; in eval the output uses the
    running statistics and the saved ones are empty, as torch."""
    op = "native_batch_norm"
    x = c.tensor(op, input)
    if x.ndim < 2:
        raise RuntimeError(f"{op}: expected input (N, C, ...), got {tuple(x.shape)}")
    s = x.session
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if not training:
        if running_mean is None or running_var is None:
            raise RuntimeError(f"{op}: running_mean and running_var are needed in eval")
        m = c.operand(s, op, running_mean).reshape(shape)
        v = c.operand(s, op, running_var).reshape(shape)
        y = (x - m) * (v + float(eps)).rsqrt()
        empty = s.tensor(np.zeros(0, np.float32))
        return _scale_shift(s, y, weight, bias, shape, op), empty, empty
    axes = (0,) + tuple(range(2, x.ndim))
    y, mean, rstd = _normalize(x, axes, eps)
    if running_mean is not None or running_var is not None:
        batch_norm(x.detach(), running_mean, running_var, training=True, momentum=momentum,
                   eps=eps)
    return (_scale_shift(s, y, weight, bias, shape, op), mean.reshape(-1), rstd.reshape(-1))


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """(out, mean, rstd), statistics of shape (N, group)."""
    op = "native_group_norm"
    x = c.tensor(op, input)
    if math.prod(x.shape) != N * C * HxW or C % group:
        raise RuntimeError(f"{op}: input of shape {tuple(x.shape)} is not N={N}, C={C}, "
                           f"HxW={HxW} with C divisible by group={group}")
    g = x.reshape(N, group, -1)
    y, mean, rstd = _normalize(g, (2,), eps)
    shape = (1, C) + (1,) * (x.ndim - 2)
    out = _scale_shift(x.session, y.reshape(tuple(x.shape)), weight, bias, shape, op)
    return out, mean.reshape(N, group), rstd.reshape(N, group)
