"""torch.linalg's solves, inverses, determinants and factorizations (LU with partial pivoting,
Cholesky), built on catalog/_lu.py's tape-op compositions, so every result differentiates
through the registry VJPs. Singular (or not positive-definite) input raises torch's error,
or reports it in `info` for the *_ex forms."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c, _lu
from torchlean.catalog.reduce import prod
from torchlean.int_tensor import IntTensor

EXPORTS = {"linalg": ("solve", "solve_ex", "inv", "inv_ex", "det", "slogdet", "cholesky",
                      "cholesky_ex", "solve_triangular", "lu_factor", "lu_factor_ex", "lu",
                      "lu_solve", "tensorinv", "tensorsolve", "matrix_exp"),
           "torch": ("det", "logdet", "slogdet", "inverse", "cholesky", "cholesky_solve",
                     "cholesky_inverse", "triangular_solve", "lu_unpack", "lu_solve",
                     "matrix_exp")}
METHODS = ("det", "logdet", "slogdet", "inverse", "cholesky", "cholesky_solve",
           "cholesky_inverse", "triangular_solve", "lu_solve", "matrix_exp")


def _singular(op, info):
    if (info > 0).any():
        k = int(info[info > 0][0])
        raise RuntimeError(f"{op}: The solver failed because the input matrix is singular "
                           f"(pivot {k} is zero)")


def _rhs(op, A, B, batch, left):
    """B as (Bt, n, m) matching A's batch, whether it was a vector, and B's batch shape."""
    n = A.shape[-1]
    b = c.operand(A.session, op, B, "B")
    vector = b.ndim == 1 or (left and tuple(b.shape) == batch + (n,))
    mat = b.unsqueeze(-1) if vector else b
    if not left:
        mat = mat.mT
    if mat.shape[-2] != n:
        raise RuntimeError(f"{op}: incompatible shapes of A {batch + (n, n)} and B "
                           f"{tuple(b.shape)}")
    full = c.broadcast_shapes(op, batch, tuple(mat.shape[:-2]))
    a = c.expand(A.reshape(batch + (n, n)), full + (n, n)).reshape(-1, n, n)
    m = c.expand(mat, full + tuple(mat.shape[-2:])).reshape(-1, n, mat.shape[-1])
    return a, m, vector, full


def _solve(op, A, B, left=True):
    Ab, batch = _lu.as_batch(op, A)
    a, m, vector, full = _rhs(op, Ab, B, batch, left)
    LU, perm, info = _lu.lu(a if left else a.mT)        # X A = B  <=>  A^T X^T = B^T
    x = _lu.lu_solve(LU, perm, m)
    x = x.reshape(full + tuple(x.shape[-2:]))
    x = x if left else x.mT
    return (x.squeeze(-1) if vector else x), info.reshape(full)


def solve(A, B, *, left=True):
    x, info = _solve("linalg.solve", A, B, left)
    _singular("linalg.solve", info)
    return x


def solve_ex(A, B, *, left=True, check_errors=False):
    x, info = _solve("linalg.solve_ex", A, B, left)
    if check_errors:
        _singular("linalg.solve_ex", info)
    return x, IntTensor(info.astype(np.int64))


def _inverse(op, A):
    Ab, batch = _lu.as_batch(op, A)
    n = Ab.shape[-1]
    eye = Ab.session.tensor(np.broadcast_to(np.eye(n, dtype=np.float32), tuple(Ab.shape)).copy())
    LU, perm, info = _lu.lu(Ab)
    return _lu.lu_solve(LU, perm, eye).reshape(batch + (n, n)), info.reshape(batch)


def inv(A):
    x, info = _inverse("linalg.inv", A)
    _singular("linalg.inv", info)
    return x


inverse = inv


def inv_ex(A, *, check_errors=False):
    x, info = _inverse("linalg.inv_ex", A)
    if check_errors:
        _singular("linalg.inv_ex", info)
    return x, IntTensor(info.astype(np.int64))


def _diag_and_parity(op, A):
    Ab, batch = _lu.as_batch(op, A)
    n = Ab.shape[-1]
    if n == 0:
        ones = Ab.session.tensor(np.ones(batch + (0,), np.float32))
        return ones, np.ones(batch), batch
    LU, perm, _ = _lu.lu(Ab)
    parity = np.array([_permutation_sign(p) for p in perm], np.float32).reshape(batch)
    return LU.diagonal(0, -2, -1).reshape(batch + (n,)), parity, batch


def _permutation_sign(p):
    seen, sign = np.zeros(len(p), bool), 1.0
    for i in range(len(p)):
        if not seen[i]:
            j, length = i, 0
            while not seen[j]:
                seen[j], j, length = True, p[j], length + 1
            sign *= -1.0 if length % 2 == 0 else 1.0
    return sign


def det(A):
    """The product of U's diagonal times the pivots' sign (0 for a singular matrix)."""
    d, parity, _ = _diag_and_parity("linalg.det", A)
    return prod(d, -1) * d.session.tensor(parity)


def slogdet(A):
    """(sign, log|det|): sign 0 and -inf for a singular matrix."""
    d, parity, _ = _diag_and_parity("linalg.slogdet", A)
    s = d.session
    signs = s.op("where", d.gt(0.0), 1.0, s.op("where", d.lt(0.0), -1.0, 0.0))
    sign = prod(signs.detach(), -1) * s.tensor(parity)
    return sign, d.abs().log().sum(-1)


def logdet(A):
    """log det(A): NaN where det < 0, -inf where it is 0."""
    sign, logabs = slogdet(A)
    s = sign.session
    return s.op("where", sign.lt(0.0), math.nan, logabs)


def _cholesky(op, A):
    """Lower L with L L^T = A, reading A's lower triangle; info = order of the first leading
    minor that is not positive-definite (0 if none)."""
    Ab, batch = _lu.as_batch(op, A)
    s = Ab.session
    b, n, _ = Ab.shape
    rows = np.arange(n)
    info = np.zeros(b, np.int64)
    columns, work = [], Ab
    for k in range(n):
        d = work.numpy()[:, k, k]
        bad = ~(d > 0)
        info[(info == 0) & bad] = k + 1
        dk = s.op("where", s.tensor(bad.reshape(b, 1, 1).astype(np.float32)), math.nan,
                  work[:, k:k + 1, k:k + 1]).sqrt()
        col = (work[:, :, k:k + 1] / dk) * s.tensor((rows >= k).reshape(1, n, 1).astype(
            np.float32))
        columns.append(col)
        trailing = col * s.tensor((rows > k).reshape(1, n, 1).astype(np.float32))
        work = work - trailing * trailing.mT
    L = composite.cat(columns, -1) if n else Ab
    return L.reshape(batch + (n, n)), info.reshape(batch)


def cholesky(A, upper=False, *, out=None):
    L, info = _cholesky("linalg.cholesky", A)
    if (info > 0).any():
        raise RuntimeError(f"linalg.cholesky: The factorization could not be completed because "
                           f"the input is not positive-definite (the leading minor of order "
                           f"{int(info[info > 0][0])} is not positive-definite)")
    return L.mT if upper else L


def cholesky_ex(A, *, upper=False, check_errors=False):
    L, info = _cholesky("linalg.cholesky_ex", A)
    if check_errors and (info > 0).any():
        cholesky(A)
    return (L.mT if upper else L), IntTensor(info)


def _triangular(op, A, B, upper, left, unit):
    """X with A X = B (left) or X A = B for triangular A; B at least 2-D, batches broadcast."""
    a = c.tensor(op, A, "A")
    b = c.operand(a.session, op, B, "B")
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{op}: expected square matrices A and a matrix B, got shapes "
                           f"{tuple(a.shape)} and {tuple(b.shape)}")
    if not left:               # X A = B  <=>  A^T X^T = B^T
        a, b, upper = a.mT, b.mT, not upper
    n, m = a.shape[-1], b.shape[-1]
    if b.shape[-2] != n:
        raise RuntimeError(f"{op}: incompatible shapes of A {tuple(a.shape)} and B "
                           f"{tuple(b.shape)}")
    batch = c.broadcast_shapes(op, tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    ab = c.expand(a, batch + (n, n)).reshape(-1, n, n)
    bb = c.expand(b, batch + (n, m)).reshape(-1, n, m)
    x = _lu.substitute(ab, bb, lower=not upper, unit=unit).reshape(batch + (n, m))
    return x if left else x.mT


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    return _triangular("linalg.solve_triangular", A, B, upper, left, unitriangular)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """(X, A clone) with op(A) X = b, op(A) = A or A^T (torch's older argument order)."""
    a = c.tensor("triangular_solve", A, "A")
    t = a.mT if transpose else a
    x = _triangular("triangular_solve", t, b, upper != transpose, True, unitriangular)
    return x, a.clone()


def cholesky_solve(B, L, upper=False):
    """X with L L^T X = B (upper: U^T U X = B)."""
    low = c.tensor("cholesky_solve", L, "L")
    low = low.mT if upper else low
    y = _triangular("cholesky_solve", low, B, False, True, False)
    return _triangular("cholesky_solve", low.mT, y, True, True, False)


def cholesky_inverse(L, upper=False):
    low = c.tensor("cholesky_inverse", L, "L")
    n = low.shape[-1]
    eye = low.session.tensor(np.eye(n, dtype=np.float32))
    return cholesky_solve(c.expand(eye, tuple(low.shape)), low, upper)


def _lu_parts(op, A):
    Ab, batch = _lu.as_batch(op, A)
    LU, perm, info = _lu.lu(Ab)
    n = Ab.shape[-1]
    return LU.reshape(batch + (n, n)), perm, info, batch


def lu_factor(A, *, pivot=True):
    """(LU, pivots): LAPACK's 1-based row interchanges."""
    if not pivot:
        raise NotImplementedError("linalg.lu_factor: pivot=False is not supported")
    LU, perm, _, batch = _lu_parts("linalg.lu_factor", A)
    return LU, IntTensor(_lu.pivots_from_perm(perm).reshape(batch + (perm.shape[-1],)))


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    LU, perm, info, batch = _lu_parts("linalg.lu_factor_ex", A)
    if check_errors:
        _singular("linalg.lu_factor_ex", info)
    pivots = IntTensor(_lu.pivots_from_perm(perm).reshape(batch + (perm.shape[-1],)))
    return LU, pivots, IntTensor(info.reshape(batch))


def lu(A, *, pivot=True):
    """(P, L, U) with A = P L U."""
    if not pivot:
        raise NotImplementedError("linalg.lu: pivot=False is not supported")
    LU, perm, _, batch = _lu_parts("linalg.lu", A)
    n = LU.shape[-1]
    L, U = _lu.unpack(LU.reshape(-1, n, n))
    P = LU.session.tensor(_lu.permutation_matrices(perm).reshape(batch + (n, n)))
    return P, L.reshape(batch + (n, n)), U.reshape(batch + (n, n))


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    data = c.tensor("lu_unpack", LU_data, "LU_data")
    n = data.shape[-1]
    batch = tuple(data.shape[:-2])
    perm = _lu.perm_from_pivots(np.asarray(LU_pivots))
    L, U = _lu.unpack(data.reshape(-1, n, n))
    P = data.session.tensor(_lu.permutation_matrices(perm).reshape(batch + (n, n)))
    return P, L.reshape(batch + (n, n)), U.reshape(batch + (n, n))


def _lu_apply(op, LU, pivots, B, left, adjoint):
    data = c.tensor(op, LU, "LU")
    n = data.shape[-1]
    if adjoint or not left:
        raise NotImplementedError(f"{op}: only left=True, adjoint=False is supported")
    perm = _lu.perm_from_pivots(np.asarray(pivots))
    b = c.operand(data.session, op, B, "B")
    batch = c.broadcast_shapes(op, tuple(data.shape[:-2]), tuple(b.shape[:-2]))
    bb = c.expand(b, batch + tuple(b.shape[-2:])).reshape(-1, n, b.shape[-1])
    lu_b = c.expand(data, batch + (n, n)).reshape(-1, n, n)
    perm = np.broadcast_to(perm.reshape(tuple(data.shape[:-2]) + (n,)), batch + (n,)).reshape(
        -1, n)
    return _lu.lu_solve(lu_b, perm, bb).reshape(batch + tuple(b.shape[-2:]))


def lu_solve(*args, **kwargs):
    """linalg.lu_solve(LU, pivots, B, *, left, adjoint) or the older torch.lu_solve(b, LU_data,
    LU_pivots): the older form is told apart by its integer third argument."""
    third = args[2] if len(args) >= 3 else None
    older = "LU_pivots" in kwargs or (third is not None and not hasattr(third, "session")
                                      and np.asarray(third).dtype.kind in "iu")
    if older:
        b, data, pivots = (list(args) + [kwargs.get("LU_data"), kwargs.get("LU_pivots")])[:3]
        return _lu_apply("lu_solve", data, pivots, b, True, False)
    LU, pivots, B = (list(args) + [None] * 3)[:3]
    B = kwargs.get("B", B)
    return _lu_apply("linalg.lu_solve", LU, pivots, B, kwargs.get("left", True),
                     kwargs.get("adjoint", False))


def tensorinv(A, ind=2):
    a = c.tensor("linalg.tensorinv", A, "A")
    out_shape, in_shape = tuple(a.shape[:ind]), tuple(a.shape[ind:])
    if ind <= 0 or math.prod(out_shape) != math.prod(in_shape):
        raise RuntimeError(f"linalg.tensorinv: expected prod(A.shape[:ind]) == "
                           f"prod(A.shape[ind:]) for ind {ind}, got shape {tuple(a.shape)}")
    n = math.prod(out_shape)
    return inv(a.reshape(n, n)).reshape(in_shape + out_shape)


def tensorsolve(A, B, dims=None):
    a = c.tensor("linalg.tensorsolve", A, "A")
    b = c.operand(a.session, "linalg.tensorsolve", B, "B")
    if dims is not None:
        ds = [c.dim("linalg.tensorsolve", d, a.ndim) for d in dims]
        a = a.permute([i for i in range(a.ndim) if i not in ds] + ds)
    x_shape = tuple(a.shape[b.ndim:])
    if tuple(a.shape[:b.ndim]) != tuple(b.shape) or math.prod(x_shape) != math.prod(b.shape):
        raise RuntimeError(f"linalg.tensorsolve: A of shape {tuple(a.shape)} does not fit B of "
                           f"shape {tuple(b.shape)}")
    n = math.prod(b.shape)
    return solve(a.reshape(n, n), b.reshape(n)).reshape(x_shape)


_PADE6 = [1.0, 1 / 2, 5 / 44, 1 / 66, 1 / 792, 1 / 15840, 1 / 665280]


def matrix_exp(A):
    """exp(A) by scaling and squaring: A / 2^s with 1-norm <= 1/2, the (6, 6) Pade
    approximant N / D (one solve), then s squarings."""
    Ab, batch = _lu.as_batch("matrix_exp", A)
    n = Ab.shape[-1]
    norm1 = np.abs(Ab.numpy()).sum(-2).max() if n else 0.0
    steps = max(0, int(math.ceil(math.log2(norm1 / 0.5)))) if norm1 > 0.5 else 0
    X = Ab * (0.5 ** steps)
    eye = Ab.session.tensor(np.broadcast_to(np.eye(n, dtype=np.float32), tuple(Ab.shape)).copy())
    num, den, power = eye * _PADE6[0], eye * _PADE6[0], eye
    for k in range(1, 7):
        power = composite.matmul(power, X)
        term = power * _PADE6[k]
        num = num + term
        den = den + (term if k % 2 == 0 else -term)
    LU, perm, _ = _lu.lu(den)
    R = _lu.lu_solve(LU, perm, num)
    for _ in range(steps):
        R = composite.matmul(R, R)
    return R.reshape(batch + (n, n))
