"""PyTorch's reductions composed from registry ops: sum, mean, amax and amin over any dims
(chains of single-axis reductions), var, std, logsumexp, argmax/argmin and max/min over a dim
(values with indices). Indices come back as int64 IntTensors, as torch returns them.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from torchlean import indexing
from torchlean.composite_shape import reshape, session_op, unchanged
from torchlean.int_tensor import IntTensor
from torchlean.return_types import MinMaxResult
from torchlean.tape import no_grad

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _keep(x, y, dims, keepdim):
    if not keepdim:
        return y
    return reshape(y, tuple(1 if i in dims else n for i, n in enumerate(x.shape)))


def reduce(x, kind, dim=None, keepdim=False):
    """kind in sum, mean, amax, amin over `dim` (None: every axis) with torch's keepdim."""
    dims = indexing.normalize_dims(dim, x.ndim, kind)
    if kind in ("amax", "amin"):
        for d in dims:
            if x.shape[d] == 0:
                raise ValueError(f"{kind}: cannot reduce over the empty axis {d} of shape "
                                 f"{tuple(x.shape)} (no identity)")
    if not dims:        # a 0-d tensor, or dim=() as NumPy: nothing to reduce
        return unchanged(x)
    if kind in ("sum", "mean") and len(dims) == x.ndim:
        total = session_op(x, "sum")
        if kind == "mean":
            n = math.prod(x.shape)
            total = total * (1.0 / n) if n else total * float("nan")
        return _keep(x, total, dims, keepdim)
    if kind == "amin":
        return -reduce(-x, "amax", dims, keepdim)
    name = {"sum": "reduce_sum", "mean": "reduce_mean", "amax": "reduce_max"}[kind]
    y = x
    for d in reversed(dims):        # highest axis first so the lower ones keep their numbers
        y = session_op(y, name, axis=d)
    return _keep(x, y, dims, keepdim)


def _count(x, dims):
    return math.prod(x.shape[d] for d in dims)


def var(x, dim=None, unbiased=None, keepdim=False, correction=None, op="var"):
    """Variance with torch's correction (default 1, Bessel); unbiased=False is correction=0."""
    if unbiased is not None and correction is not None:
        raise ValueError(f"{op}: pass either unbiased or correction, not both")
    c = 1 if correction is None and unbiased is None else (
        correction if correction is not None else (1 if unbiased else 0))
    dims = indexing.normalize_dims(dim, x.ndim, op)
    m = reduce(x, "mean", dims, keepdim=True)
    d = x - m
    ss = reduce(d * d, "sum", dims, keepdim)
    denom = _count(x, dims) - c
    if denom > 0:
        return ss * (1.0 / denom)
    # torch divides by max(0, N - correction): 0/0 is nan (one element, unbiased), else inf
    warnings.warn(f"{op}: degrees of freedom <= 0 for correction {c} over {_count(x, dims)} "
                  f"element(s) of shape {tuple(x.shape)}", RuntimeWarning, stacklevel=4)
    return session_op(ss, "div", x.session.tensor(np.float32(0.0)))


def std(x, dim=None, unbiased=None, keepdim=False, correction=None):
    return session_op(var(x, dim, unbiased, keepdim, correction, "std"), "sqrt")


def logsumexp(x, dim, keepdim=False):
    """log(sum(exp(x))) shifted by the (detached, clamped finite) max for stability: an all
    -inf slice gives -inf and a +inf entry gives +inf, as torch."""
    dims = indexing.normalize_dims(dim, x.ndim, "logsumexp")
    if _count(x, dims) == 0:       # an empty sum: log(0) = -inf, as torch
        return session_op(reduce(x, "sum", dims, keepdim), "log")
    with no_grad():
        m = session_op(reduce(x, "amax", dims, keepdim=True), "clamp",
                lo=-_FLOAT32_MAX, hi=_FLOAT32_MAX)
    s = reduce(session_op(x - m, "exp"), "sum", dims, keepdim=True)
    return reshape(session_op(s, "log") + m, _keep_shape(x, dims, keepdim))


def _keep_shape(x, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(x.shape))
    return tuple(n for i, n in enumerate(x.shape) if i not in dims)



def _index_result(x, y, d, keepdim):
    """An argmax-style float Tensor of whole numbers as the int64 tensor torch would return."""
    out = y.numpy().astype(np.int64)
    if keepdim:
        out = out.reshape(tuple(1 if i == d else n for i, n in enumerate(x.shape)))
    return IntTensor(out)


def _arg_prepare(x, kind, dim):
    """(tensor to reduce, axis) for argmax/argmin/max/min; a 0-d tensor acts as shape (1,)."""
    if dim is None or x.ndim == 0:
        if dim is not None:
            indexing.normalize_dim(dim, 1, kind)   # a 0-d tensor accepts dim 0 and -1, as torch
        flat = reshape(x, (-1,))
        if flat.shape[0] == 0:
            raise ValueError(f"{kind}: expected a non-empty tensor, got shape {tuple(x.shape)}")
        return flat, 0
    d = indexing.normalize_dim(dim, x.ndim, kind)
    if x.shape[d] == 0:
        raise ValueError(f"{kind}: cannot reduce over the empty dim {d} of shape "
                         f"{tuple(x.shape)} (no identity)")
    return x, d


def argreduce(x, kind, dim=None, keepdim=False):
    """torch.argmax/argmin: an int64 IntTensor of indices (first one on ties; a NaN wins)."""
    y, d = _arg_prepare(x, kind, dim)
    idx = session_op(y, kind, axis=d)
    if dim is None:
        out = idx.numpy().astype(np.int64)
        return IntTensor(out.reshape((1,) * x.ndim) if keepdim else out.reshape(()))
    if x.ndim == 0:
        return IntTensor(idx.numpy().astype(np.int64).reshape(()))
    return _index_result(x, idx, d, keepdim)


def max_min(x, kind, dim=None, keepdim=False):
    """torch.max/min: no dim -> the 0-d extreme (ties share the gradient, as amax); with dim ->
    (values, indices) where values' gradient goes to the chosen index only."""
    if isinstance(dim, (str, bytes, float, bool, np.floating, np.bool_)):
        raise TypeError(f"{kind}: dim must be an int (or a Tensor for the elementwise "
                        f"{kind}imum), got {type(dim).__name__} {dim!r}")
    if dim is not None and not isinstance(dim, (int, np.integer)):    # max(other): elementwise
        return session_op(x, "maximum" if kind == "max" else "minimum", dim)
    if dim is None:
        if keepdim:
            raise ValueError(f"{kind}: keepdim needs a dim")
        y, _ = _arg_prepare(x, kind, None)
        return reduce(x, "amax" if kind == "max" else "amin")
    y, d = _arg_prepare(x, kind, dim)
    idx = session_op(y, "argmax" if kind == "max" else "argmin", axis=d)
    values = session_op(y, "select_along_axis", idx, axis=d)
    if x.ndim == 0:
        return MinMaxResult(reshape(values, ()),
                            IntTensor(idx.numpy().astype(np.int64).reshape(())))
    indices = _index_result(x, idx, d, keepdim)
    return MinMaxResult(_keep(x, values, (d,), keepdim), indices)
