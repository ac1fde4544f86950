"""Jacobi rotations as tape ops: the two-sided method for symmetric eigenproblems and the
one-sided (Hestenes) method for singular values. Each rotation is one (batch, n, n) matrix J
built from masks and per-batch (c, s); sweeps over all pairs (p, q) repeat until the
off-diagonal part is below float32's resolution (checked on the host), at most 30 sweeps.
Accurate to a few ulps of the largest value; O(sweeps n^2) tape ops of O(n^3) work each, for
the small matrices a training step decomposes. Gradients flow through every rotation."""
from __future__ import annotations

import numpy as np

from torchlean.catalog._common import rearrange

_EPS = float(np.finfo(np.float32).eps)
MAX_SWEEPS = 30


def _rotation(s, n, b, p, q, cos, sin):
    """J with J[p,p] = J[q,q] = cos, J[p,q] = sin, J[q,p] = -sin, identity elsewhere."""
    eye = np.eye(n, dtype=np.float32)
    diag_pq = np.zeros((n, n), np.float32)
    diag_pq[p, p] = diag_pq[q, q] = 1.0
    skew = np.zeros((n, n), np.float32)
    skew[p, q], skew[q, p] = 1.0, -1.0
    return s.tensor((eye - diag_pq)[None]) + cos * s.tensor(diag_pq[None]) + \
        sin * s.tensor(skew[None])


def _angle(s, diff, off):
    """(cos, sin) zeroing `off` for the 2 x 2 problem with diagonal difference `diff`:
    t = 2 off sign(diff) / (|diff| + sqrt(diff^2 + 4 off^2)) (the usual
    sign(theta) / (|theta| + sqrt(theta^2 + 1)) with theta = diff / (2 off), written without
    dividing by a tiny off); off == 0 gives the identity."""
    zero = off.numpy() == 0
    z = s.tensor(zero.astype(np.float32))
    sign = s.tensor(np.where(diff.numpy() >= 0, 1.0, -1.0).astype(np.float32))
    root = (diff * diff + off * off * 4.0 + z).sqrt()
    t = (off * 2.0 * sign) / (diff.abs() + root)
    cos = (t * t + 1.0).rsqrt()
    return cos, t * cos


def symmetric_eigen(A):
    """(eigenvalues ascending (B, n), eigenvectors (B, n, n)) of symmetric A (B, n, n)."""
    s = A.session
    b, n, _ = A.shape
    V = s.tensor(np.broadcast_to(np.eye(n, dtype=np.float32), (b, n, n)).copy())
    off_mask = ~np.eye(n, dtype=bool)
    for _ in range(MAX_SWEEPS):
        a = A.numpy()
        total = np.sqrt((a * a).sum((1, 2)))
        if (np.sqrt((a[:, off_mask] ** 2).sum(1)) <= _EPS * total * 0.1 + 1e-30).all():
            break
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = A[:, p:p + 1, q:q + 1]
                cos, sin = _angle(s, A[:, q:q + 1, q:q + 1] - A[:, p:p + 1, p:p + 1], apq)
                J = _rotation(s, n, b, p, q, cos, sin)
                A = J.mT @ A @ J
                V = V @ J
    values = A.diagonal(0, -2, -1)
    order = np.argsort(values.numpy(), axis=1, kind="stable")
    return _take_columns(values.unsqueeze(1), order).squeeze(1), _take_columns(V, order)


def _take_columns(M, order):
    """M (B, r, n) with its columns reordered per batch."""
    b, r, n = M.shape
    pos = (np.arange(b)[:, None, None] * r + np.arange(r)[None, :, None]) * n + order[:, None, :]
    return rearrange(M, pos)


def one_sided_svd(A):
    """(W, V) with A V = W, W's columns orthogonal, for A (B, m, n) with m >= n: the singular
    values are W's column norms, sorted descending by the caller."""
    s = A.session
    b, m, n = A.shape
    V = s.tensor(np.broadcast_to(np.eye(n, dtype=np.float32), (b, n, n)).copy())
    W = A
    for _ in range(MAX_SWEEPS):
        w = W.numpy().astype(np.float64)
        gram = np.einsum("bmi,bmj->bij", w, w)
        d = np.sqrt(np.einsum("bii->bi", gram))
        scale = d[:, :, None] * d[:, None, :] + 1e-300
        off = np.abs(gram) / scale
        off[:, np.arange(n), np.arange(n)] = 0
        if (off <= _EPS * 0.5).all():
            break
        for p in range(n - 1):
            for q in range(p + 1, n):
                wp, wq = W[:, :, p:p + 1], W[:, :, q:q + 1]
                alpha = (wp * wp).sum(1, keepdim=True)
                beta = (wq * wq).sum(1, keepdim=True)
                gamma = (wp * wq).sum(1, keepdim=True)
                cos, sin = _angle(s, beta - alpha, gamma)
                J = _rotation(s, n, b, p, q, cos, sin)
                W = W @ J
                V = V @ J
    return W, V
