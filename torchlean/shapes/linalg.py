"""Matrix products: matmul, bmm, the transposed GEMM matmul_t, linear and host dgemm."""
from __future__ import annotations

from .core import ShapeError, require_rank, shape


def matmul(a, b):
    require_rank(a, 2, 2, "a")
    require_rank(b, 2, 2, "b")
    if a[1] != b[0]:
        raise ShapeError(f"inner dimensions differ: a {tuple(a)} @ b {tuple(b)}; "
                         "expected a.shape[1] == b.shape[0]")
    return (a[0], b[1])


def bmm(a, b):
    require_rank(a, 3, 3, "a")
    require_rank(b, 3, 3, "b")
    if a[0] != b[0] or a[2] != b[1]:
        raise ShapeError(f"expected a (B, m, n) and b (B, n, p), got a {tuple(a)} and b {tuple(b)}")
    return (a[0], a[1], b[2])


def gemm_t(a, b, trans_a, trans_b):
    """Shape of op(a) @ op(b) for rank-2 or rank-3 (batched) operands; op = transpose if flagged."""
    require_rank(a, 2, 3, "a")
    if len(b) != len(a):
        raise ShapeError(f"a and b must have the same rank, got {tuple(a)} and {tuple(b)}")
    ta = tuple(a[:-2]) + ((a[-1], a[-2]) if trans_a else (a[-2], a[-1]))
    tb = tuple(b[:-2]) + ((b[-1], b[-2]) if trans_b else (b[-2], b[-1]))
    if ta[:-2] != tb[:-2] or ta[-1] != tb[-2]:
        raise ShapeError(f"op(a) {ta} and op(b) {tb} do not multiply")
    return ta[:-1] + (tb[-1],)


def gemm_m(a, trans_a):
    return a[-1] if trans_a else a[-2]


def gemm_n(a, trans_a):
    return a[-2] if trans_a else a[-1]


def gemm_p(b, trans_b):
    return b[-2] if trans_b else b[-1]


def linear(w, b, x):
    """y = W x + b; x is (in,) or (N, in) with a batch axis."""
    require_rank(w, 2, 2, "W")
    require_rank(b, 1, 1, "b")
    require_rank(x, 1, 2, "x")
    if b[0] != w[0] or x[-1] != w[1]:
        raise ShapeError(f"expected W (out, in), b (out,), x (..., in); got W {tuple(w)}, "
                         f"b {tuple(b)}, x {tuple(x)}")
    return tuple(x[:-1]) + (w[0],)


def batch_rows(x):
    """Rows of a (in,) or (N, in) input: 1 or N."""
    return 1 if len(x) == 1 else x[0]


def linear_dw(g, x):
    """Shape of dW = g^T x for linear: (out, in)."""
    require_rank(g, 1, 2, "g")
    if len(g) != len(x) or tuple(g[:-1]) != tuple(x[:-1]):
        raise ShapeError(f"g {tuple(g)} and x {tuple(x)} must share the batch axis")
    return (g[-1], x[-1])


def linear_db(g):
    require_rank(g, 1, 2, "g")
    return (g[-1],)


def dgemm(a, b):
    """(m, k) @ (k, n) -> (m, n) for host float64 arrays."""
    a, b = shape(a), shape(b)
    if len(a) != 2 or len(b) != 2:
        raise ShapeError(f"expected 2-D arrays a (m, k) and b (k, n), got a {a} and b {b}")
    if a[1] != b[0]:
        raise ShapeError(f"inner dimensions differ: a {a} @ b {b}; expected a.shape[1] == b.shape[0]")
    return (a[0], b[1])
