"""Functional forms; each dispatches to the session of its Tensor arguments."""
from __future__ import annotations

import math

import numpy as np

from torchlean.session import Tensor, Parameter, default_session


def _sess(*xs):
    return next((x.session for x in xs if isinstance(x, Tensor)), None) or default_session()


def linear(input, weight, bias=None):
    """y = input @ weight^T + bias (torch.nn.functional.linear) for input (..., in), weight
    (out, in), bias (out,) or None; returns (..., out).

    One fused registry `linear` op: leading axes are folded into rows by a reshape view (the op
    takes (in,) or (N, in)) and unfolded after; a missing bias is a zero (out,) constant."""
    s = _sess(input, weight, bias)
    x, w = s.as_tensor(input), s.as_tensor(weight)
    b = None if bias is None else s.as_tensor(bias)
    if (x.ndim < 1 or w.ndim != 2 or x.shape[-1] != w.shape[1]
            or (b is not None and b.shape != (w.shape[0],))):
        raise ValueError(f"linear: expected input (..., in), weight (out, in) and bias (out,) or "
                         f"None, got input {x.shape}, weight {w.shape}, "
                         f"bias {None if b is None else b.shape}")
    if b is None:
        b = s.tensor(np.zeros(w.shape[0], np.float32))
    if x.ndim <= 2:
        return s.op("linear", w, b, x)
    lead = x.shape[:-1]
    y = s.op("linear", w, b, s.op("reshape", x, shape=(math.prod(lead), x.shape[-1])))
    return s.op("reshape", y, shape=lead + (w.shape[0],))


def mse_loss(yhat, target):
    s = _sess(yhat, target)
    return s.op("mse_loss", yhat, target)


def cross_entropy(logits, labels):
    """mean over rows of -log_softmax(logits)[row, label]; labels: integer array (no grad)."""
    s = _sess(logits)
    logits = s.as_tensor(logits)
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    n, c = logits.shape
    lp = s.op("log_softmax", logits)
    picked = s.op("gather_vec", s.op("reshape", lp, shape=(n * c,)),
                  indices=np.arange(n, dtype=np.int64) * c + labels)
    return picked.sum() * (-1.0 / n)


def dropout(x, p=0.5, training=True):
    return _sess(x).dropout(x, p, training)


def relu(x):
    return _sess(x).op("relu", x)


_GELU_OPS = {"none": "gelu_erf", "tanh": "gelu"}


def gelu(x, approximate="none"):
    """torch's GELU: approximate="none" (the default) is the exact erf form, "tanh" the tanh
    approximation (the registry's gelu op)."""
    op = _GELU_OPS.get(approximate)
    if op is None:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _sess(x).op(op, x)


def softplus(x, beta=1.0, threshold=20.0):
    """torch's softplus: log(1 + exp(beta x)) / beta, and x where beta x > threshold."""
    return _sess(x).op("softplus_beta", x, beta=float(beta), threshold=float(threshold))


def tanh(x):
    return _sess(x).op("tanh", x)


def sigmoid(x):
    return _sess(x).op("sigmoid", x)


def softmax(x):
    return _sess(x).op("softmax", x)


def log_softmax(x):
    return _sess(x).op("log_softmax", x)
