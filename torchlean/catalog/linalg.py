"""torch.linalg's names that compose from products and reductions: vector and matrix norms
(those without singular values), vecdot, cross, multi_dot, matrix_power, vander and cond.
Solves and factorizations are in linalg_solve.py, singular values in spectral.py."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c
from torchlean.catalog.linalg_solve import inv
from torchlean.catalog.products import cross as _cross
from torchlean.catalog.spectral import svdvals
from torchlean.catalog.reduce import pnorm

EXPORTS = {"linalg": ("vector_norm", "matrix_norm", "norm", "vecdot", "cross", "multi_dot",
                      "matrix_power", "vander", "diagonal", "cond"),
           "torch": ("matrix_power",)}
METHODS = ("matrix_power",)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    t = c.tensor("linalg.vector_norm", x)
    return pnorm("linalg.vector_norm", t, ord, c.dims("linalg.vector_norm", dim, t.ndim),
                 keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002
    """'fro', 'nuc', 1, -1, 2, -2, inf, -inf over the two axes `dim` (2, -2 and 'nuc' from the
    singular values)."""
    op = "linalg.matrix_norm"
    t = c.tensor(op, A)
    if t.ndim < 2:
        raise RuntimeError(f"{op}: expected a tensor with 2 or more dims, got shape "
                           f"{tuple(t.shape)}")
    r, k = (c.dim(op, d, t.ndim) for d in dim)
    if r == k:
        raise RuntimeError(f"{op}: dims {tuple(dim)} must name two different axes")
    if ord == "fro":
        return pnorm(op, t, 2, tuple(sorted((r, k))), keepdim)
    if ord in ("nuc", 2, -2):
        moved = t.movedim((r, k), (-2, -1))
        sv = svdvals(moved)
        out = sv.sum(-1) if ord == "nuc" else (sv.amax(-1) if ord == 2 else sv.amin(-1))
        if keepdim:
            for d in sorted((r, k)):
                out = out.unsqueeze(d)
        return out
    if ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"{op}: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, "
                           f"got {ord!r}")
    # 1-norms sum over rows (axis r) then take the extreme over columns; inf-norms the reverse
    total_axis, extreme_axis = (r, k) if abs(ord) == 1 else (k, r)
    sums = t.abs().sum(total_axis, keepdim=True)
    out = sums.amax(extreme_axis, keepdim=True) if ord > 0 else \
        sums.amin(extreme_axis, keepdim=True)
    return out if keepdim else out.squeeze(tuple(sorted((r, k))))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """linalg.norm: a vector norm for one dim (or a 1-D input), a matrix norm for two."""
    t = c.tensor("linalg.norm", A)
    if dim is not None:
        ds = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
        if len(ds) == 2:
            return matrix_norm(t, "fro" if ord is None else ord, ds, keepdim)
        return vector_norm(t, 2 if ord is None else ord, ds, keepdim)
    if ord is None:
        return vector_norm(t, 2, None, keepdim)
    if t.ndim == 1:
        return vector_norm(t, ord, None, keepdim)
    if t.ndim == 2:
        return matrix_norm(t, ord, (-2, -1), keepdim)
    raise RuntimeError(f"linalg.norm: ord {ord!r} without dim needs a 1-D or 2-D input, got "
                       f"shape {tuple(t.shape)}")


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return c.tensor("linalg.diagonal", A).diagonal(offset, dim1, dim2)


def vecdot(x, y, *, dim=-1):
    a = c.tensor("linalg.vecdot", x)
    b = c.operand(a.session, "linalg.vecdot", y, "y")
    shape = c.broadcast_shapes("linalg.vecdot", a.shape, b.shape)
    d = c.dim("linalg.vecdot", dim, len(shape))
    return (a * b).sum(d)


def cross(input, other, *, dim=-1):
    return _cross(input, other, dim)


def multi_dot(tensors):
    """A chain of matmuls (the first may be 1-D, a row; the last 1-D, a column), multiplied in
    the order that costs fewest multiply-adds."""
    ts = [c.tensor("linalg.multi_dot", t, "tensors") for t in tensors]
    if len(ts) < 2:
        raise RuntimeError(f"linalg.multi_dot: expected at least 2 tensors, got {len(ts)}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    ms = [ts[0].reshape(1, -1) if first_vec else ts[0]] + ts[1:-1] + \
         [ts[-1].reshape(-1, 1) if last_vec else ts[-1]]
    if any(m.ndim != 2 for m in ms) or any(a.shape[1] != b.shape[0] for a, b in zip(ms, ms[1:])):
        raise RuntimeError(f"linalg.multi_dot: shapes {[tuple(t.shape) for t in ts]} do not "
                           "chain (1-D only at the ends)")
    dims = [ms[0].shape[0]] + [m.shape[1] for m in ms]
    n = len(ms)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min(
                (cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                for k in range(i, j))

    def product(i, j):
        if i == j:
            return ms[i]
        k = split[i][j]
        return composite.matmul(product(i, k), product(k + 1, j))

    out = product(0, n - 1)
    if first_vec:
        out = out.squeeze(0)
    if last_vec:
        out = out.squeeze(-1)
    return out


def matrix_power(A, n):
    """A^n by repeated squaring (n < 0: of the inverse)."""
    t = c.tensor("matrix_power", A)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise RuntimeError(f"matrix_power: expected a (batch of) square matrices, got shape "
                           f"{tuple(t.shape)}")
    n = int(n)
    if n < 0:
        return matrix_power(inv(t), -n)
    if n == 0:
        eye = np.broadcast_to(np.eye(t.shape[-1], dtype=np.float32), t.shape)
        return t.session.tensor(np.ascontiguousarray(eye))
    result, base = None, t
    while n:
        if n & 1:
            result = base if result is None else composite.matmul(result, base)
        n >>= 1
        if n:
            base = composite.matmul(base, base)
    return result.clone() if result is t else result


def vander(x, N=None):
    """Columns x^0, x^1, ..., x^(N-1) (increasing powers, as torch.linalg.vander)."""
    t = c.tensor("linalg.vander", x)
    if t.ndim < 1:
        raise RuntimeError("linalg.vander: expected a tensor of at least 1 dim, got a 0-d one")
    n = t.shape[-1] if N is None else int(N)
    if n < 0:
        raise ValueError(f"linalg.vander: N must be non-negative, got {n}")
    cols = [t.session.tensor(np.ones(t.shape, np.float32))] + [t] * min(n - 1, 1)
    for _ in range(2, n):
        cols.append(cols[-1] * t)
    return composite.stack(cols[:n], -1) if n else t.unsqueeze(-1)[..., :0]


def cond(A, p=None):
    """s_max / s_min for p None or 2 (s_min / s_max for -2), else norm(A, p) norm(inv(A), p)."""
    if p in (None, 2, -2):
        sv = svdvals(A)
        ratio = sv.amax(-1) / sv.amin(-1)
        return ratio if p != -2 else 1.0 / ratio
    return matrix_norm(A, p) * matrix_norm(inv(A), p)
