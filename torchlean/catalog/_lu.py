"""LU with partial pivoting and triangular substitution as compositions of tape ops, so the
factorizations and solves of torch.linalg differentiate through the registry's VJPs.

LU runs n elimination steps over the whole (batch, n, n) stack: each step picks the pivot
row on the host (the largest |a_ik|, LAPACK's rule), swaps it up with one gather, and
subtracts the outer product of the multipliers with the pivot row, masked to the trailing
block. Substitution is n steps of the same kind. Cost: O(n) tape ops of O(n^2) work each,
fine for the small matrices training uses them on; there is no blocked kernel."""
from __future__ import annotations

import numpy as np

from torchlean.catalog import _common as c


def as_batch(op, A):
    """A (..., n, n) as (B, n, n) and its leading shape."""
    x = c.tensor(op, A, "A")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are "
                           f"{x.shape[-2] if x.ndim >= 2 else None} by "
                           f"{x.shape[-1] if x.ndim else None} matrices (shape "
                           f"{tuple(x.shape)})")
    return x.reshape(-1, x.shape[-1], x.shape[-1]), tuple(x.shape[:-2])


def _mask(s, a):
    return s.tensor(np.asarray(a, np.float32))


def lu(A):
    """(LU, perm, singular) of a (B, n, n) stack: LU holds unit-lower L below the diagonal and
    U on and above it; perm[b] lists the original row of each final row; singular[b] is the
    first zero pivot's 1-based index (0 if none), as LAPACK's info."""
    s = A.session
    b, n, _ = A.shape
    perm = np.tile(np.arange(n), (b, 1))
    info = np.zeros(b, np.int64)
    rows = np.arange(n)
    for k in range(n):
        a = A.numpy()
        piv = k + np.abs(a[:, k:, k]).argmax(1)
        if (piv != k).any():
            order = np.tile(np.arange(n), (b, 1))
            order[np.arange(b), k], order[np.arange(b), piv] = piv, k
            perm = np.take_along_axis(perm, order, 1)
            pos = (np.arange(b)[:, None, None] * n + order[:, :, None]) * n + rows[None, None, :]
            A = c.rearrange(A, pos)
            a = np.take_along_axis(a, order[:, :, None], 1)
        zero = a[:, k, k] == 0
        info[(info == 0) & zero] = k + 1
        if k == n - 1:
            break
        pivot = s.op("where", _mask(s, zero.reshape(b, 1, 1)), 1.0, A[:, k:k + 1, k:k + 1])
        below = _mask(s, (rows > k).reshape(1, n, 1))
        right = _mask(s, (rows > k).reshape(1, 1, n))
        multipliers = (A[:, :, k:k + 1] / pivot) * below
        A = A - multipliers * (A[:, k:k + 1, :] * right)
        column = _mask(s, (rows[:, None] > k) & (rows[None, :] == k))
        A = s.op("where", column, multipliers, A)
    return A, perm, info


def substitute(T, B, lower, unit):
    """X with T X = B for triangular T (B, n, n) and B (B, n, m), column by column."""
    s = T.session
    n = T.shape[-1]
    rows = np.arange(n)
    X = B
    for j in (range(n) if lower else reversed(range(n))):
        xj = X[:, j:j + 1, :]
        if not unit:
            xj = xj / T[:, j:j + 1, j:j + 1]
        rest = _mask(s, ((rows > j) if lower else (rows < j)).reshape(1, n, 1))
        update = X - (T[:, :, j:j + 1] * rest) * xj
        X = s.op("where", _mask(s, (rows == j).reshape(1, n, 1)), xj, update) if not unit \
            else update
    return X


def permute_rows(B, perm):
    """B's rows reordered so row i is B's row perm[i] (per batch): P B for LU's P."""
    b, n, m = B.shape
    pos = (np.arange(b)[:, None, None] * n + perm[:, :, None]) * m + np.arange(m)[None, None, :]
    return c.rearrange(B, pos)


def lu_solve(LU, perm, B):
    """X with A X = B from A's LU factors (B: (B, n, m))."""
    y = substitute(LU, permute_rows(B, perm), lower=True, unit=True)
    return substitute(LU, y, lower=False, unit=False)


def unpack(LU):
    """(L, U) of a combined LU stack."""
    s = LU.session
    n = LU.shape[-1]
    strict_lower = np.tri(n, n, -1, dtype=bool)
    L = s.op("where", _mask(s, strict_lower), LU, _mask(s, np.eye(n)))
    U = s.op("where", _mask(s, ~strict_lower), LU, 0.0)
    return L, U


def permutation_matrices(perm):
    """P with A = P L U: column i of P is the unit vector of row perm[i]."""
    b, n = perm.shape
    P = np.zeros((b, n, n), np.float32)
    P[np.arange(b)[:, None], perm, np.arange(n)[None, :]] = 1.0
    return P


def pivots_from_perm(perm):
    """LAPACK's 1-based sequential row interchanges (int32) that produce perm."""
    b, n = perm.shape
    piv = np.zeros((b, n), np.int32)
    for i in range(b):
        cur = list(range(n))
        where_is = {v: k for k, v in enumerate(cur)}
        for k in range(n):
            j = where_is[perm[i, k]]
            piv[i, k] = j + 1
            where_is[cur[k]], where_is[cur[j]] = j, k
            cur[k], cur[j] = cur[j], cur[k]
    return piv


def perm_from_pivots(piv):
    """The row order that LAPACK's 1-based interchanges (b, n) produce."""
    piv = np.asarray(piv, np.int64).reshape(-1, piv.shape[-1])
    b, n = piv.shape
    perm = np.tile(np.arange(n), (b, 1))
    for i in range(b):
        for k in range(n):
            j = piv[i, k] - 1
            perm[i, k], perm[i, j] = perm[i, j], perm[i, k]
    return perm
