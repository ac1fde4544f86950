"""Householder QR and what builds on it (qr, geqrf, householder_product, ormqr, lstsq) against
float64 NumPy (LAPACK's conventions, so signs agree), gradients by central differences, torch
as an extra reference, and bad input."""
import numpy as np
import pytest

import torchlean as tl
from catalog_check import check, rand, torch

T = torch
TALL = rand(5, 3)
WIDE = rand(3, 5, seed=1)
BATCH = rand(2, 4, 4, seed=2)


def np_qr(a, mode="reduced"):
    if a.ndim == 3:
        parts = [np_qr(m, mode) for m in a]
        return tuple(np.stack(p) for p in zip(*parts))
    return np.linalg.qr(a, mode=mode)


def np_geqrf(a):
    h, tau = np.linalg.qr(a, mode="raw")
    return h.T, tau


def np_householder_q(a, tau, cols):
    m = a.shape[0]
    q = np.eye(m)
    for k in range(len(tau)):
        v = np.zeros(m)
        v[k] = 1.0
        v[k + 1:] = a[k + 1:, k]
        q = q @ (np.eye(m) - tau[k] * np.outer(v, v))
    return q[:, :cols]


CASES = {
    "qr_tall": (lambda a: tl.linalg.qr(a), np_qr, [TALL], lambda a: T.linalg.qr(a)),
    "qr_wide_complete": (lambda a: tl.linalg.qr(a, "complete"),
                         lambda a: np_qr(a, "complete"), [WIDE], None),
    "qr_batched": (lambda a: tl.linalg.qr(a), np_qr, [BATCH], None),
    "qr_r": (lambda a: tl.linalg.qr(a, "r")[1], lambda a: np.linalg.qr(a, mode="r"), [TALL],
             None),
    "torch_qr_some": (lambda a: a.qr(some=False), lambda a: np_qr(a, "complete"), [TALL], None),
    "geqrf": (lambda a: tl.geqrf(a), np_geqrf, [TALL], lambda a: T.geqrf(a)),
    "householder_product": (lambda a, t: tl.linalg.householder_product(a, t),
                            lambda a, t: np_householder_q(a, t, 3),
                            [np_geqrf(TALL.astype(np.float64))[0],
                             np_geqrf(TALL.astype(np.float64))[1]], None),
    "ormqr_left_transpose": (lambda c: tl.ormqr(*tl.geqrf(tl.tensor(TALL)), c, True, True),
                             lambda c: np.linalg.qr(TALL.astype(np.float64), "complete")[0].T @ c,
                             [rand(5, 2, seed=3)], None),
    "ormqr_right": (lambda c: tl.ormqr(*tl.geqrf(tl.tensor(TALL)), c, False, False),
                    lambda c: c @ np.linalg.qr(TALL.astype(np.float64), "complete")[0],
                    [rand(2, 5, seed=3)], None),
    "lstsq_tall": (lambda a, b: tl.linalg.lstsq(a, b)[0],
                   lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], [TALL, rand(5, 2, seed=4)],
                   None),
    "lstsq_residuals": (lambda a, b: tl.linalg.lstsq(a, b)[1],
                        lambda a, b: np.linalg.lstsq(a, b, rcond=None)[1],
                        [TALL, rand(5, 2, seed=4)], None),
    "lstsq_wide_min_norm": (lambda a, b: tl.linalg.lstsq(a, b)[0],
                            lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0],
                            [WIDE, rand(3, seed=5)], None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient(name):
    tl_fn, np_fn, arrays, torch_fn = CASES[name]
    check(tl_fn, np_fn, *arrays, torch_fn=torch_fn, rtol=1e-5, atol=2e-6,
          grad_tol=(3e-3, 5e-4))


def test_q_is_orthonormal_and_reconstructs():
    q, r = tl.linalg.qr(tl.tensor(BATCH))
    qn = q.numpy().astype(np.float64)
    np.testing.assert_allclose(qn.transpose(0, 2, 1) @ qn, np.broadcast_to(np.eye(4), qn.shape),
                               atol=1e-6)
    np.testing.assert_allclose(qn @ r.numpy(), BATCH, atol=2e-6)
    assert tl.linalg.lstsq(tl.tensor(TALL), tl.tensor(rand(5, seed=6)))[2].numpy().tolist() == 3


BAD = [
    (lambda: tl.linalg.qr(tl.zeros(3)), RuntimeError, "linalg.qr"),
    (lambda: tl.linalg.qr(tl.zeros(3, 3), "full"), ValueError, "linalg.qr"),
    (lambda: tl.linalg.householder_product(tl.zeros(2, 3), tl.zeros(2)), RuntimeError,
     "householder_product"),
    (lambda: tl.linalg.householder_product(tl.zeros(3, 2), tl.zeros(3)), RuntimeError,
     "householder_product"),
    (lambda: tl.ormqr(tl.zeros(3, 2), tl.zeros(2), tl.zeros(4, 1)), RuntimeError, "ormqr"),
    (lambda: tl.linalg.lstsq(tl.zeros(4, 2), tl.zeros(3)), RuntimeError, "linalg.lstsq"),
    (lambda: tl.linalg.lstsq(tl.tensor(np.ones((3, 2), np.float32)), tl.zeros(3)),
     NotImplementedError, "rank-deficient"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind, name = BAD[i]
    with pytest.raises(kind, match=name):
        fn()
