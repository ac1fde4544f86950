"""Products and differences of vectors and matrices: dot, outer, the add-product family
(addmm, baddbmm, ...), tensordot, cross products, distance matrices, covariance, finite
differences and trapezoid integrals. All are matmul, bmm, elementwise ops and slices."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c
from torchlean.catalog.reduce import pnorm

METHODS = ("dot", "vdot", "inner", "outer", "ger", "mv", "addmm", "addmv", "addr", "baddbmm",
           "addbmm", "cross", "diff", "cov", "corrcoef", "tensordot")
INPLACE = ("addmm", "addmv", "addr", "baddbmm", "addbmm")
EXPORTS = {"torch": ("dot", "vdot", "inner", "outer", "ger", "mv", "addmm", "addmv", "addr",
                     "baddbmm", "addbmm", "chain_matmul", "tensordot", "cross", "cdist", "cov",
                     "corrcoef", "diff", "gradient", "trapezoid", "trapz")}


def _pair(op, input, other, what="other"):
    a = c.tensor(op, input)
    return a, c.operand(a.session, op, other, what)


def _ranks(op, shapes, ranks):
    if tuple(len(s) for s in shapes) != ranks:
        raise RuntimeError(f"{op}: expected tensors of ranks {ranks}, got shapes "
                           f"{[tuple(s) for s in shapes]}")


def dot(input, other):
    a, b = _pair("dot", input, other, "tensor")
    _ranks("dot", (a.shape, b.shape), (1, 1))
    if a.shape != b.shape:
        raise RuntimeError(f"dot: inconsistent tensor size, expected tensors of the same "
                           f"size, got {tuple(a.shape)} and {tuple(b.shape)}")
    return composite.matmul(a, b)


vdot = dot


def inner(input, other):
    a, b = _pair("inner", input, other)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner: last dims of shapes {tuple(a.shape)} and {tuple(b.shape)} "
                           "differ")
    return tensordot(a, b, ([-1], [-1]))


def outer(input, vec2):
    a, b = _pair("outer", input, vec2, "vec2")
    _ranks("outer", (a.shape, b.shape), (1, 1))
    return a.reshape(-1, 1) * b.reshape(1, -1)


ger = outer


def mv(input, vec):
    a, v = _pair("mv", input, vec, "vec")
    _ranks("mv", (a.shape, v.shape), (2, 1))
    return composite.matmul(a, v)


def _add_product(op, input, product, beta, alpha):
    x = c.tensor(op, input)
    if c.broadcast_shapes(op, x.shape, product.shape) != tuple(product.shape):
        raise RuntimeError(f"{op}: input of shape {tuple(x.shape)} does not broadcast to the "
                           f"product's shape {tuple(product.shape)}")
    p = product if alpha == 1 else product * float(alpha)
    if beta == 0:                  # torch ignores input (NaN and inf included) when beta is 0
        return p
    return (x if beta == 1 else x * float(beta)) + p


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    a, b = _pair("addmm", mat1, mat2, "mat2")
    _ranks("addmm", (a.shape, b.shape), (2, 2))
    return _add_product("addmm", input, composite.matmul(a, b), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    return _add_product("addmv", input, mv(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    return _add_product("addr", input, outer(vec1, vec2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    a, b = _pair("baddbmm", batch1, batch2, "batch2")
    _ranks("baddbmm", (a.shape, b.shape), (3, 3))
    return _add_product("baddbmm", input, composite.matmul(a, b), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    a, b = _pair("addbmm", batch1, batch2, "batch2")
    _ranks("addbmm", (a.shape, b.shape), (3, 3))
    return _add_product("addbmm", input, composite.matmul(a, b).sum(0), beta, alpha)


def chain_matmul(*matrices):
    ms = [c.tensor("chain_matmul", m, "matrices") for m in matrices]
    if not ms or any(m.ndim != 2 for m in ms):
        raise RuntimeError(f"chain_matmul: expects one or more matrices, got shapes "
                           f"{[tuple(m.shape) for m in ms]}")
    out = ms[0]
    for m in ms[1:]:
        out = composite.matmul(out, m)
    return out


def tensordot(a, b, dims=2):
    """Contract a's axes dims[0] with b's dims[1] (an int n: a's last n with b's first n):
    both permuted to (free, contracted) / (contracted, free) and one matmul."""
    x, y = _pair("tensordot", a, b, "b")
    if isinstance(dims, (int, np.integer)):
        if dims < 0 or dims > min(x.ndim, y.ndim):
            raise RuntimeError(f"tensordot: dims {dims} out of range for shapes "
                               f"{tuple(x.shape)} and {tuple(y.shape)}")
        da, db = list(range(x.ndim - dims, x.ndim)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, (int, np.integer)) else list(d) for d in dims)
        da = [c.dim("tensordot", d, x.ndim) for d in da]
        db = [c.dim("tensordot", d, y.ndim) for d in db]
    if len(da) != len(db) or any(x.shape[i] != y.shape[j] for i, j in zip(da, db)):
        raise RuntimeError(f"tensordot: contracted dims {da} of {tuple(x.shape)} and {db} of "
                           f"{tuple(y.shape)} must pair up with equal sizes")
    fa = [i for i in range(x.ndim) if i not in da]
    fb = [j for j in range(y.ndim) if j not in db]
    k = math.prod(x.shape[i] for i in da)
    xm = x.permute(fa + da).reshape(-1, k) if x.ndim else x.reshape(1, 1)
    ym = y.permute(db + fb).reshape(k, -1) if y.ndim else y.reshape(1, 1)
    out = composite.matmul(xm, ym)
    return out.reshape([x.shape[i] for i in fa] + [y.shape[j] for j in fb])


def cross(input, other, dim=None):
    """The 3-vector cross product along dim (None: the first axis of size 3, as torch)."""
    a, b = _pair("cross", input, other)
    shape = c.broadcast_shapes("cross", a.shape, b.shape)
    a, b = c.expand(a, shape), c.expand(b, shape)
    if dim is None:
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError(f"cross: no dim of size 3 in shape {shape}")
    d = c.dim("cross", dim, len(shape))
    if shape[d] != 3:
        raise RuntimeError(f"cross: dim {d} of shape {shape} must have size 3")
    ai = [a.select(d, i) for i in range(3)]
    bi = [b.select(d, i) for i in range(3)]
    parts = [ai[1] * bi[2] - ai[2] * bi[1], ai[2] * bi[0] - ai[0] * bi[2],
             ai[0] * bi[1] - ai[1] * bi[0]]
    return composite.stack(parts, d)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """Distances between the rows of x1 (..., P, M) and x2 (..., R, M): (..., P, R)."""
    a, b = _pair("cdist", x1, x2, "x2")
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"cdist: expected (..., P, M) and (..., R, M), got "
                           f"{tuple(a.shape)} and {tuple(b.shape)}")
    if p < 0:
        raise RuntimeError(f"cdist: p must be non-negative, got {p}")
    d = a.unsqueeze(-2) - b.unsqueeze(-3)
    return pnorm("cdist", d, p, (d.ndim - 1,), False)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    x = c.tensor("diff", input)
    if x.ndim == 0:
        raise RuntimeError("diff: expects a tensor of at least 1 dim, got a 0-d tensor")
    d = c.dim("diff", dim, x.ndim)
    parts = [c.operand(x.session, "diff", t) for t in (prepend,) if t is not None] + [x] + \
            [c.operand(x.session, "diff", t) for t in (append,) if t is not None]
    if len(parts) > 1:
        x = composite.cat([p if p.ndim else c.expand(p.reshape([1] * x.ndim),
                                                      x.shape[:d] + (1,) + x.shape[d + 1:])
                           for p in parts], d)
    for _ in range(int(n)):
        m = x.shape[d]
        if m == 0:
            break
        x = x.narrow(d, 1, m - 1) - x.narrow(d, 0, m - 1)
    return x


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Central differences inside, one-sided (edge_order 1) at the ends, per dim; spacing a
    number or one number per dim (coordinate arrays are not supported)."""
    x = c.tensor("gradient", input)
    ds = [c.dim("gradient", d, x.ndim) for d in
          (range(x.ndim) if dim is None else (dim if isinstance(dim, (list, tuple)) else [dim]))]
    hs = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(ds)
    if len(hs) != len(ds) or any(hasattr(h, "shape") and len(h.shape) for h in hs):
        raise NotImplementedError(f"gradient: spacing must be a number or one number per dim, "
                                  f"got {spacing!r}")
    if edge_order != 1:
        raise NotImplementedError("gradient: only edge_order=1 is supported")
    out = []
    for d, h in zip(ds, hs):
        n, h = x.shape[d], float(h)
        if n < 2:
            raise RuntimeError(f"gradient: dim {d} of shape {tuple(x.shape)} needs at least 2 "
                               "points")
        first = (x.narrow(d, 1, 1) - x.narrow(d, 0, 1)) * (1.0 / h)
        last = (x.narrow(d, n - 1, 1) - x.narrow(d, n - 2, 1)) * (1.0 / h)
        mid = [(x.narrow(d, 2, n - 2) - x.narrow(d, 0, n - 2)) * (0.5 / h)] if n > 2 else []
        out.append(composite.cat([first] + mid + [last], d))
    return tuple(out)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    t = c.tensor("trapezoid", y)
    d = c.dim("trapezoid", dim, t.ndim)
    n = t.shape[d]
    if n == 0:
        return t.sum(d)
    pair = t.narrow(d, 1, n - 1) + t.narrow(d, 0, n - 1)
    if x is None:
        return pair.sum(d) * (0.5 * (1.0 if dx is None else float(dx)))
    xs = c.operand(t.session, "trapezoid", x, "x")
    xd = diff(xs, dim=-1 if xs.ndim == 1 else d)
    if xs.ndim == 1:
        xd = xd.reshape([n - 1 if i == d else 1 for i in range(t.ndim)])
    return (pair * xd).sum(d) * 0.5


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def _centered(op, input, correction, fweights, aweights):
    x = c.tensor(op, input)
    if x.ndim > 2:
        raise RuntimeError(f"{op}: expected a 1-D or 2-D tensor, got shape {tuple(x.shape)}")
    x = x.reshape(1, -1) if x.ndim < 2 else x
    s, n = x.session, x.shape[1]
    w = None
    for name, v in (("fweights", fweights), ("aweights", aweights)):
        if v is not None:
            v = c.operand(s, op, v, name)
            if tuple(v.shape) != (n,):
                raise RuntimeError(f"{op}: {name} must have shape ({n},), got "
                                   f"{tuple(v.shape)}")
            w = v if w is None else w * v
    if w is None:
        mean = x.mean(1, keepdim=True)
        return x, x - mean, None, s.tensor(np.float32(max(n - correction, 0)))
    wsum = w.sum()
    mean = (x * w).sum(1, keepdim=True) / wsum
    norm = wsum - (w * c.operand(s, op, aweights)).sum() / wsum * float(correction) \
        if aweights is not None else wsum - float(correction)
    return x, x - mean, w, norm


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the rows (variables) over the columns (observations)."""
    x, xc, w, norm = _centered("cov", input, correction, fweights, aweights)
    xw = xc if w is None else xc * w
    out = composite.matmul(xw, xc.transpose(0, 1)) / norm
    return out.reshape(()) if c.tensor("cov", input).ndim < 2 else out


def corrcoef(input):
    cv = cov(input)
    if cv.ndim == 0:
        return cv / cv
    d = cv.diagonal().sqrt()
    r = cv / d.reshape(-1, 1) / d.reshape(1, -1)
    return r.clamp(-1.0, 1.0)
