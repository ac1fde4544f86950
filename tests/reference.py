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

# -------------------------------------------------------------------- end of section: conv_pool


# ==================================================================== section: norm_attention

# -------------------------------------------------------------------- end of section: norm_attention


# ==================================================================== section: spectral_scan

# -------------------------------------------------------------------- end of section: spectral_scan


# ==================================================================== section: elementwise

# -------------------------------------------------------------------- end of section: elementwise


# ==================================================================== section: reduce_views

# -------------------------------------------------------------------- end of section: reduce_views
