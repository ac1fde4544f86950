"""Functional forms; each dispatches to the session of its Tensor arguments."""
from __future__ import annotations

import numpy as np

from torchlean.session import Tensor, Parameter, default_session


def _sess(*xs):
    return next((x.session for x in xs if isinstance(x, Tensor)), None) or default_session()


def linear(x, W, b=None):
    """y = x W^T + b for x (..., in), W (out, in); 1-D x uses the registry's linear(W, b, x).
    Leading axes of an N-D x are folded into rows (reshape is a view) for one 2-D matmul."""
    s = _sess(x)
    x = s.as_tensor(x)
    if x.ndim == 1 and b is not None:
        return s.op("linear", W, b, x)
    lead = x.shape[:-1]
    if x.ndim > 2:
        x = s.op("reshape", x, shape=(-1, x.shape[-1]))
    y = s.op("matmul", x, s.op("transpose2d", W))
    if b is not None:
        y = y + s.as_tensor(b)
    if len(lead) > 1:
        y = s.op("reshape", y, shape=tuple(lead) + (y.shape[-1],))
    return y


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


def gelu(x):
    return _sess(x).op("gelu", x)


def tanh(x):
    return _sess(x).op("tanh", x)


def sigmoid(x):
    return _sess(x).op("sigmoid", x)


def softmax(x):
    return _sess(x).op("softmax", x)


def log_softmax(x):
    return _sess(x).op("log_softmax", x)
