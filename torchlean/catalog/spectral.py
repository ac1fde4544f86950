"""Symmetric eigendecompositions and singular value decompositions by Jacobi rotations
(catalog/_jacobi.py), and what needs singular values: pinv, matrix_rank. Eigenvalues come
ascending and singular values descending, as torch; eigenvectors and singular vectors are
unique only up to sign (torch's are too), and the sign here need not match LAPACK's."""
from __future__ import annotations

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c, _jacobi
from torchlean.catalog.qr import qr
from torchlean.catalog.reduce import root
from torchlean.int_tensor import IntTensor

EXPORTS = {"linalg": ("eigh", "eigvalsh", "svd", "svdvals", "pinv", "matrix_rank", "polar",
                      "matrix_sqrth"),
           "torch": ("pinverse", "svd_lowrank", "pca_lowrank")}
METHODS = ("pinverse",)


def _square_stack(op, A):
    x = c.tensor(op, A, "A")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise RuntimeError(f"{op}: A must be batches of square matrices, got shape "
                           f"{tuple(x.shape)}")
    return x.reshape(-1, x.shape[-1], x.shape[-1]), tuple(x.shape[:-2])


def _symmetric(op, A, UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"{op}: UPLO must be 'L' or 'U', got {UPLO!r}")
    x, batch = _square_stack(op, A)
    tri = x.tril() if UPLO == "L" else x.triu()
    strict = x.tril(-1) if UPLO == "L" else x.triu(1)
    return tri + strict.mT, batch


def eigh(A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of the symmetric matrix whose lower
    (UPLO='L') or upper triangle A holds."""
    sym, batch = _symmetric("linalg.eigh", A, UPLO)
    n = sym.shape[-1]
    if n == 0:
        return sym.sum(-1).reshape(batch + (0,)), sym.reshape(batch + (0, 0))
    w, v = _jacobi.symmetric_eigen(sym)
    return w.reshape(batch + (n,)), v.reshape(batch + (n, n))


def eigvalsh(A, UPLO="L"):
    return eigh(A, UPLO)[0]


def _svd(op, A, full_matrices):
    x = c.tensor(op, A, "A")
    if x.ndim < 2:
        raise RuntimeError(f"{op}: A must have at least 2 dimensions, got shape "
                           f"{tuple(x.shape)}")
    batch = tuple(x.shape[:-2])
    m, n = x.shape[-2:]
    a = x.reshape(-1, m, n)
    wide = m < n
    if wide:
        a = a.mT
    mm, nn = a.shape[-2:]
    k = nn
    W, V = _jacobi.one_sided_svd(a)
    sig = root((W * W).sum(1), 2)
    order = np.argsort(-sig.numpy(), axis=1, kind="stable")
    sig = _jacobi._take_columns(sig.unsqueeze(1), order).squeeze(1)
    W, V = _jacobi._take_columns(W, order), _jacobi._take_columns(V, order)
    s = a.session
    small = sig.numpy() <= 0
    safe = s.op("where", s.tensor(small.astype(np.float32)), 1.0, sig)
    U = W / safe.unsqueeze(1)
    if small.any() or (full_matrices and mm > k):
        U = _complete(U, small, mm if full_matrices else k)
    if wide:
        U, V = V, U
    U = U.reshape(batch + tuple(U.shape[-2:]))
    Vh = V.mT.reshape(batch + (V.shape[-1], V.shape[-2]))
    return U, sig.reshape(batch + (k,)), Vh


def _complete(U, small, cols):
    """U's columns (zero ones, for zero singular values, replaced) extended to `cols`
    orthonormal columns, from a complete QR of U with R's diagonal signs put back."""
    s = U.session
    b, m, k = U.shape
    keep = s.tensor((~small).astype(np.float32)[:, None, :])
    Q, R = qr(U * keep, "complete")
    signs = np.where(np.diagonal(R.numpy(), 0, -2, -1)[:, :k] < 0, -1.0, 1.0)
    signs = np.concatenate([signs, np.ones((b, m - k))], 1).astype(np.float32)
    Q = Q * s.tensor(signs[:, None, :])
    mixed = s.op("where", keep, U, Q[:, :, :k])
    return composite.cat([mixed, Q[:, :, k:cols]], 2) if cols > k else mixed


def svd(A, full_matrices=True, *, driver=None):
    """linalg.svd: (U, S, Vh) with A = U diag(S) Vh, S descending (torch.svd, which returns V,
    is in svd_legacy.py)."""
    return _svd("linalg.svd", A, full_matrices)


def svdvals(A, *, driver=None):
    return _svd("linalg.svdvals", A, False)[1]


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """V diag(1 / s) U^T over the singular values s > max(atol, rtol * s_max) (rtol default
    eps * max(m, n) when neither is given, as torch)."""
    x = c.tensor("linalg.pinv", A, "A")
    if x.ndim < 2:
        raise RuntimeError(f"linalg.pinv: A must have at least 2 dimensions, got shape "
                           f"{tuple(x.shape)}")
    m, n = x.shape[-2:]
    U, S, Vh = _svd("linalg.pinv", x, False)
    if atol is None and rtol is None:
        rtol = float(np.finfo(np.float32).eps) * max(m, n)
    smax = S.numpy().max(-1, keepdims=True) if S.shape[-1] else np.zeros(S.shape[:-1] + (1,))
    cut = np.maximum(atol or 0.0, (rtol or 0.0) * smax)
    keep = S.numpy() > cut
    s = x.session
    inv_s = s.op("where", s.tensor(keep.astype(np.float32)), 1.0 / s.op(
        "where", s.tensor(keep.astype(np.float32)), S, 1.0), 0.0)
    return (Vh.mT * inv_s.unsqueeze(-2)) @ U.mT


def pinverse(input, rcond=1e-15):
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    x = c.tensor("linalg.matrix_rank", A, "A")
    if x.ndim < 2:
        raise RuntimeError(f"linalg.matrix_rank: A must have at least 2 dimensions, got shape "
                           f"{tuple(x.shape)}")
    m, n = x.shape[-2:]
    S = svdvals(x).numpy()
    if atol is None and rtol is None:
        rtol = float(np.finfo(np.float32).eps) * max(m, n)
    smax = S.max(-1, keepdims=True) if S.shape[-1] else np.zeros(S.shape[:-1] + (1,))
    return IntTensor((S > np.maximum(atol or 0.0, (rtol or 0.0) * smax)).sum(-1))


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) of the best rank-q approximation of A - M: torch finds it by randomized
    subspace iteration; here it is the exact truncated SVD (niter is not needed)."""
    x = c.tensor("svd_lowrank", A, "A")
    if M is not None:
        x = x - c.operand(x.session, "svd_lowrank", M, "M")
    if x.ndim < 2 or not 0 < int(q) <= min(x.shape[-2:]):
        raise RuntimeError(f"svd_lowrank: q {q} must be in [1, {min(x.shape[-2:]) if x.ndim >= 2 else 0}]"
                           f" for A of shape {tuple(x.shape)}")
    U, S, Vh = _svd("svd_lowrank", x, False)
    q = int(q)
    return U[..., :q], S[..., :q], Vh.mT[..., :q]


def pca_lowrank(A, q=None, center=True, niter=2):
    """svd_lowrank of A with each column's mean removed (center), q = min(6, m, n) by default."""
    x = c.tensor("pca_lowrank", A, "A")
    if x.ndim < 2:
        raise RuntimeError(f"pca_lowrank: A must have at least 2 dimensions, got shape "
                           f"{tuple(x.shape)}")
    q = min(6, *x.shape[-2:]) if q is None else q
    return svd_lowrank(x - x.mean(-2, keepdim=True) if center else x, q)


def polar(A):
    """(U, H) with A = U H, U with orthonormal columns and H symmetric positive-semidefinite
    (m >= n): U = U_svd Vh and H = V diag(S) Vh."""
    x = c.tensor("linalg.polar", A, "A")
    if x.ndim < 2 or x.shape[-2] < x.shape[-1]:
        raise RuntimeError(f"linalg.polar: A must be (..., m, n) with m >= n, got shape "
                           f"{tuple(x.shape)}")
    U, S, Vh = _svd("linalg.polar", x, False)
    return U @ Vh, (Vh.mT * S.unsqueeze(-2)) @ Vh


def matrix_sqrth(A):
    """The symmetric positive-definite X with X X = A: V diag(sqrt(w)) V^T from eigh."""
    w, V = eigh(A)
    if (w.numpy() <= 0).any():
        raise RuntimeError("linalg.matrix_sqrth: A must be positive-definite (an eigenvalue "
                           f"is {float(w.numpy().min()):.3g})")
    return (V * w.sqrt().unsqueeze(-2)) @ V.mT
