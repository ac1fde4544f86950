"""Reductions beyond sum/mean/amax/var: products, truth tests, NaN-ignoring sums, p-norms and
paired statistics. Truth tests (all, any) give 0/1 float32 Tensors, as torchlean's comparisons
do; counts give int64 tensors. Norms have torch's subgradient 0 at a zero vector."""
from __future__ import annotations

import collections
import math

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c
from torchlean.int_tensor import IntTensor
from torchlean.tape import no_grad

METHODS = ("prod", "all", "any", "count_nonzero", "nansum", "nanmean", "aminmax", "norm",
           "dist", "renorm")
INPLACE = ("renorm",)
EXPORTS = {"torch": ("prod", "all", "any", "count_nonzero", "nansum", "nanmean", "aminmax",
                     "std_mean", "var_mean", "norm", "dist", "renorm")}

MinMax = collections.namedtuple("aminmax", ["min", "max"])


def _last(x, d):
    """x with axis d moved last and flattened to (rows, n)."""
    y = x if d == x.ndim - 1 else composite.transpose(x, d, -1)
    return y.reshape(-1, x.shape[d])


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product in a balanced tree of elementwise products (a zero factor gives the others'
    product as its gradient, as torch)."""
    x = c.tensor("prod", input)
    if dim is None:
        if keepdim:
            raise TypeError("prod: keepdim needs a dim")
        return prod(x.reshape(-1), 0) if x.ndim else x.clone()
    d = c.dim("prod", dim, x.ndim)
    if x.ndim == 0:
        return x.clone()
    out_shape = tuple(1 if i == d else n for i, n in enumerate(x.shape)) if keepdim else \
        tuple(n for i, n in enumerate(x.shape) if i != d)
    n = x.shape[d]
    if n == 0 or math.prod(x.shape) == 0:
        return x.session.tensor(np.ones(out_shape, np.float32))
    y = _last(x, d)
    while n > 1:
        h = n // 2
        pair = y[:, :h] * y[:, h:2 * h]
        y = composite.cat([pair, y[:, 2 * h:]], 1) if n % 2 else pair
        n = h + n % 2
    return y.reshape(out_shape)


def _truth(op, input, dim, keepdim, kind):
    x = c.tensor(op, input)
    nz = x.ne(0.0)
    if math.prod(x.shape) == 0 and dim is None:
        return x.session.tensor(np.float32(kind == "amin"))
    return composite.reduce(nz, kind, dim, keepdim) if x.ndim else nz


def all(input, dim=None, keepdim=False):  # noqa: A001 - torch's name
    """1 where every element is nonzero (NaN counts as nonzero), else 0."""
    return _truth("all", input, dim, keepdim, "amin")


def any(input, dim=None, keepdim=False):  # noqa: A001 - torch's name
    return _truth("any", input, dim, keepdim, "amax")


def count_nonzero(input, dim=None):
    x = c.tensor("count_nonzero", input)
    ds = c.dims("count_nonzero", dim, x.ndim)
    return IntTensor(np.count_nonzero(x.numpy(), axis=ds).astype(np.int64))


def _not_nan(x):
    return x.eq(x)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    x = c.tensor("nansum", input)
    return x.session.op("where", _not_nan(x), x, 0.0).sum(dim=dim, keepdim=keepdim)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean of the non-NaN elements (NaN where there are none, as torch)."""
    x = c.tensor("nanmean", input)
    keep = _not_nan(x)
    total = x.session.op("where", keep, x, 0.0).sum(dim=dim, keepdim=keepdim)
    return total / keep.sum(dim=dim, keepdim=keepdim)


def aminmax(input, *, dim=None, keepdim=False):
    x = c.tensor("aminmax", input)
    if math.prod(x.shape) == 0:
        raise RuntimeError(f"aminmax: cannot reduce an empty tensor of shape {tuple(x.shape)}")
    return MinMax(x.amin(dim, keepdim), x.amax(dim, keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    x = c.tensor("std_mean", input)
    return (x.std(dim, unbiased, keepdim, correction=correction), x.mean(dim, keepdim))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    x = c.tensor("var_mean", input)
    return (x.var(dim, unbiased, keepdim, correction=correction), x.mean(dim, keepdim))


def root(s, p):
    """s ** (1 / p) for s >= 0, with gradient 0 (not inf * 0) where s is 0."""
    with no_grad():
        zero = s.eq(0.0)
    t = s + zero
    r = t.sqrt() if p == 2 else t ** (1.0 / p)
    return r * (1.0 - zero)


def pnorm(op, x, p, dims, keepdim):
    """The vector p-norm of x over `dims` (a tuple, () for none): torch's vector_norm."""
    if isinstance(p, str) or not isinstance(p, c.NUMBER):
        raise ValueError(f"{op}: ord must be a number or inf, got {p!r}")
    p = float(p)
    if math.prod(x.shape[d] for d in dims) == 0 and (p < 0 or p == math.inf):
        raise RuntimeError(f"{op}: ord {p} over an empty dim of shape {tuple(x.shape)} has "
                           "no identity")
    if not dims and x.ndim:
        return x.abs()
    if p == math.inf:
        return x.abs().amax(dims, keepdim)
    if p == -math.inf:
        return x.abs().amin(dims, keepdim)
    if p == 0:
        return x.ne(0.0).sum(dims, keepdim)
    if p == 1:
        return x.abs().sum(dims, keepdim)
    if p == 2:
        return root((x * x).sum(dims, keepdim), 2)
    return root((x.abs() ** p).sum(dims, keepdim), p)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: 'fro' (or 2) and any number p are vector norms over dim (every axis by
    default); 'nuc' needs singular values, which torchlean does not compute."""
    x = c.tensor("norm", input)
    if p == "nuc":
        raise NotImplementedError("norm: p='nuc' needs an SVD, which torchlean does not have")
    if p == "fro" or p is None:
        p = 2
    return pnorm("norm", x, p, c.dims("norm", dim, x.ndim), keepdim)


def dist(input, other, p=2):
    x = c.tensor("dist", input)
    o = c.operand(x.session, "dist", other)
    c.broadcast_shapes("dist", x.shape, o.shape)
    d = x - o
    return pnorm("dist", d, p, tuple(range(d.ndim)), False)


def renorm(input, p, dim, maxnorm):
    """Each slice along dim whose p-norm exceeds maxnorm scaled to maxnorm (norm + 1e-7 in
    the denominator, as torch)."""
    x = c.tensor("renorm", input)
    if x.ndim < 2:
        raise ValueError(f"renorm: input needs at least 2 dims, got shape {tuple(x.shape)}")
    d = c.dim("renorm", dim, x.ndim)
    if not p > 0 or maxnorm < 0:
        raise ValueError(f"renorm: p must be positive and maxnorm non-negative, got {p}, "
                         f"{maxnorm}")
    n = pnorm("renorm", x, p, tuple(i for i in range(x.ndim) if i != d), True)
    with no_grad():
        over = n.gt(float(maxnorm))
    scale = x.session.op("where", over, float(maxnorm) / (n + 1e-7), 1.0)
    return x * scale
