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


def softplus(x):
    return np.logaddexp(0.0, x)


def safe_log(x, eps=1e-6):
    return np.log(np.logaddexp(0.0, x) + eps)


def clamp(x, lo, hi):
    return np.clip(x, lo, hi)

# -------------------------------------------------------------------- end of section: elementwise


# ==================================================================== section: reduce_views

# -------------------------------------------------------------------- end of section: reduce_views
