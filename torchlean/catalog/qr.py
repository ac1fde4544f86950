"""Householder QR as a composition of tape ops (LAPACK's geqrf convention: beta = -sign(a_kk)
||x||, tau = (beta - a_kk) / beta, unit-leading reflectors), and what builds on it: qr,
geqrf, householder_product, ormqr, and full-rank least squares (lstsq). One reflector per
column, each a masked rank-1 update of the whole (batch, m, n) stack."""
from __future__ import annotations

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c, _lu
from torchlean.catalog.reduce import root
from torchlean.int_tensor import IntTensor

EXPORTS = {"linalg": ("qr", "householder_product", "lstsq"),
           "torch": ("geqrf", "ormqr", "qr")}
METHODS = ("geqrf", "ormqr", "qr")


def _stack(op, A):
    x = c.tensor(op, A, "A")
    if x.ndim < 2:
        raise RuntimeError(f"{op}: A must have at least 2 dimensions, got shape "
                           f"{tuple(x.shape)}")
    return x.reshape(-1, x.shape[-2], x.shape[-1]), tuple(x.shape[:-2])


def _mask(s, a):
    return s.tensor(np.asarray(a, np.float32))


def householder(A):
    """(R work matrix, [v_k (B, m, 1)], [tau_k (B, 1, 1)]) for A (B, m, n)."""
    s = A.session
    b, m, n = A.shape
    rows = np.arange(m)
    vs, taus = [], []
    for k in range(min(m, n)):
        below = _mask(s, (rows > k).reshape(1, m, 1))
        col = A[:, :, k:k + 1]
        alpha = A[:, k:k + 1, k:k + 1]
        tail = col * below
        tail_sq = (tail * tail).sum(1, keepdim=True)
        host_alpha = alpha.numpy().reshape(b)
        trivial = tail_sq.numpy().reshape(b) == 0
        sign = np.where(host_alpha >= 0, 1.0, -1.0).astype(np.float32).reshape(b, 1, 1)
        beta = -(root(alpha * alpha + tail_sq, 2)) * s.tensor(sign)
        triv = _mask(s, trivial.reshape(b, 1, 1))
        denom = s.op("where", triv, 1.0, alpha - beta)
        unit = _mask(s, (rows == k).reshape(1, m, 1))
        v = s.op("where", triv, unit, tail / denom + unit)
        tau = s.op("where", triv, 0.0, (beta - alpha) / s.op("where", triv, 1.0, beta))
        right = _mask(s, (np.arange(n) >= k).reshape(1, 1, n))
        w = (v.mT @ A) * right                               # (B, 1, n)
        A = A - (v * tau) * w
        vs.append(v)
        taus.append(tau)
    return A, vs, taus


def _apply(C, vs, taus, order, side):
    """C multiplied by the reflectors H_k = I - tau_k v_k v_k^T in `order`, from `side`."""
    for k in order:
        v, tau = vs[k], taus[k]
        if side == "left":
            C = C - (v * tau) @ (v.mT @ C)
        else:
            C = C - ((C @ v) * tau) @ v.mT
    return C


def qr(A, mode="reduced", *, some=None):
    """(Q, R) with A = Q R: mode 'reduced' (Q m x k), 'complete' (Q m x m) or 'r' (Q empty);
    torch.qr's some=True / False is 'reduced' / 'complete'."""
    op = "linalg.qr"
    if isinstance(mode, bool) or some is not None:
        mode = "reduced" if (mode if some is None else some) else "complete"
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"{op}: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    x, batch = _stack(op, A)
    b, m, n = x.shape
    s = x.session
    work, vs, taus = householder(x)
    k = min(m, n)
    rows_r = m if mode == "complete" else k
    R = s.op("where", _mask(s, np.triu(np.ones((m, n), bool))), work, 0.0)[:, :rows_r]
    if mode == "r":
        return s.tensor(np.zeros(0, np.float32)), R.reshape(batch + (rows_r, n))
    cols_q = m if mode == "complete" else k
    eye = s.tensor(np.broadcast_to(np.eye(m, cols_q, dtype=np.float32), (b, m, cols_q)).copy())
    Q = _apply(eye, vs, taus, reversed(range(k)), "left")
    return Q.reshape(batch + (m, cols_q)), R.reshape(batch + (rows_r, n))


def geqrf(input):
    """(a, tau): R on and above the diagonal, the reflectors' tails below it (LAPACK)."""
    x, batch = _stack("geqrf", input)
    b, m, n = x.shape
    s = x.session
    work, vs, taus = householder(x)
    k = min(m, n)
    upper = _mask(s, np.triu(np.ones((m, n), bool)))
    if k:
        tails = c.expand(s.tensor(np.zeros((1, m, n), np.float32)), (b, m, n))
        for j, v in enumerate(vs):
            col = _mask(s, (np.arange(n) == j).reshape(1, 1, n))
            tails = tails + v * col
        out = s.op("where", upper, work, tails)
        tau = composite.cat(taus, 1).reshape(batch + (k,))
    else:
        out, tau = work, s.tensor(np.zeros(batch + (0,), np.float32))
    return out.reshape(batch + (m, n)), tau


def _reflectors(op, A, tau):
    a, batch = _stack(op, A)
    b, m, n = a.shape
    t = c.operand(a.session, op, tau, "tau")
    k = t.shape[-1] if t.ndim else 0
    if k > min(m, n) or tuple(t.shape[:-1]) != batch:
        raise RuntimeError(f"{op}: tau of shape {tuple(t.shape)} does not fit A of shape "
                           f"{batch + (m, n)} (need batch {batch} and at most {min(m, n)})")
    s = a.session
    t = t.reshape(b, 1, k)
    rows = np.arange(m)
    vs = [s.op("where", _mask(s, (rows == j).reshape(1, m, 1)), 1.0,
               a[:, :, j:j + 1] * _mask(s, (rows > j).reshape(1, m, 1))) for j in range(k)]
    taus = [t[:, :, j:j + 1] for j in range(k)]
    return a, vs, taus, batch


def householder_product(A, tau):
    """The first n columns of H_0 H_1 ... H_{k-1} from geqrf's (A, tau)."""
    a, vs, taus, batch = _reflectors("linalg.householder_product", A, tau)
    b, m, n = a.shape
    if n > m:
        raise RuntimeError(f"linalg.householder_product: A must have at least as many rows as "
                           f"columns, got shape {tuple(A.shape)}")
    eye = a.session.tensor(np.broadcast_to(np.eye(m, n, dtype=np.float32), (b, m, n)).copy())
    return _apply(eye, vs, taus, reversed(range(len(vs))), "left").reshape(batch + (m, n))


def ormqr(input, tau, other, left=True, transpose=False):
    """other multiplied by Q (or Q^T) of geqrf's (input, tau), from the left or the right."""
    a, vs, taus, batch = _reflectors("ormqr", input, tau)
    o = c.operand(a.session, "ormqr", other, "other")
    m = a.shape[1]
    if o.ndim < 2 or (o.shape[-2] if left else o.shape[-1]) != m:
        raise RuntimeError(f"ormqr: other of shape {tuple(o.shape)} does not fit Q of order {m}")
    C = c.expand(o, batch + tuple(o.shape[-2:])).reshape(-1, *o.shape[-2:])
    forward = list(range(len(vs)))
    order = forward if left == transpose else list(reversed(forward))
    return _apply(C, vs, taus, order, "left" if left else "right").reshape(
        batch + tuple(o.shape[-2:]))


def lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of min ||A X - B|| for full-rank A by QR:
    tall A solves R X = Q^T B; wide A takes the minimum-norm X = Q R^-T B from A^T's QR.
    Residuals (m > n) are the squared column norms of A X - B; singular values are not
    computed (empty), and rank-deficient A raises."""
    op = "linalg.lstsq"
    a, batch = _stack(op, A)
    b_, m, n = a.shape
    rhs = c.operand(a.session, op, B, "B")
    vector = rhs.ndim == len(batch) + 1
    bm = rhs.unsqueeze(-1) if vector else rhs
    if bm.shape[-2] != m:
        raise RuntimeError(f"{op}: A of shape {tuple(A.shape)} and B of shape "
                           f"{tuple(rhs.shape)} need the same number of rows")
    bb = c.expand(bm, batch + tuple(bm.shape[-2:])).reshape(b_, m, -1)
    tall = m >= n
    q, r = qr(a if tall else a.mT)
    diag = np.abs(r.diagonal(0, -2, -1).numpy())
    scale = np.abs(a.numpy()).max(initial=0.0)
    tol = (rcond if rcond is not None else np.finfo(np.float32).eps * max(m, n)) * scale
    if diag.size and (diag <= tol).any():
        raise NotImplementedError(f"{op}: A is rank-deficient (|R_ii| <= {tol:.3g}); "
                                  "rank-revealing drivers are not supported")
    if tall:
        x = _lu.substitute(r, q.mT @ bb, lower=False, unit=False)
    else:
        x = q @ _lu.substitute(r.mT, bb, lower=True, unit=False)
    out_shape = batch + (n,) + (() if vector else (bb.shape[-1],))
    residuals = a.session.tensor(np.zeros(0, np.float32))
    if m > n:
        err = a @ x - bb
        residuals = (err * err).sum(-2).reshape(batch + (() if vector else (bb.shape[-1],)))
    rank = IntTensor(np.full(batch, min(m, n), np.int64))
    return x.reshape(out_shape), residuals, rank, a.session.tensor(np.zeros(0, np.float32))
