"""linalg solves, inverses, determinants and factorizations of the catalog against float64
NumPy (forward; gradients by central differences of the float64 reference), torch as an
extra reference, singular and non-positive-definite input, and bad shapes."""
import numpy as np
import pytest

import torchlean as tl
from catalog_check import check, rand, torch

T = torch
A = rand(2, 4, 4) + 2.5 * np.eye(4, dtype=np.float32)      # well conditioned, odd pivots
A1 = rand(3, 3, seed=4)
B = rand(2, 4, 3, seed=1)
SPD = (A @ A.transpose(0, 2, 1) + np.eye(4)).astype(np.float32)
LOW = np.tril(A1) + 3 * np.eye(3, dtype=np.float32)
UP = np.triu(A1) + 3 * np.eye(3, dtype=np.float32)


def _chol_lower(a):
    """np.linalg.cholesky of the lower triangle's symmetric completion (what it reads)."""
    low = np.tril(a)
    return np.linalg.cholesky(low + np.swapaxes(np.tril(a, -1), -1, -2))


def _lu_perm(a):
    p, low, up = [], [], []
    for m in a.reshape(-1, a.shape[-1], a.shape[-1]):
        n = m.shape[0]
        u, perm, lo = m.copy(), np.arange(n), np.eye(n)
        for k in range(n):
            j = k + np.abs(u[k:, k]).argmax()
            u[[k, j]], perm[[k, j]] = u[[j, k]], perm[[j, k]]
            lo[[k, j], :k] = lo[[j, k], :k]
            for i in range(k + 1, n):
                lo[i, k] = u[i, k] / u[k, k]
                u[i] -= lo[i, k] * u[k]
        pm = np.zeros((n, n))
        pm[perm, np.arange(n)] = 1
        p.append(pm)
        low.append(lo)
        up.append(np.triu(u))
    shape = a.shape
    return (np.stack(p).reshape(shape), np.stack(low).reshape(shape),
            np.stack(up).reshape(shape))


def _expm(a):
    """exp(a) by a 30-term Taylor series after scaling by 2^-6 (float64)."""
    x = a / 64.0
    out, term = np.eye(a.shape[-1]), np.eye(a.shape[-1])
    for k in range(1, 30):
        term = term @ x / k
        out = out + term
    for _ in range(6):
        out = out @ out
    return out


CASES = {
    "linalg.solve": (lambda a, b: tl.linalg.solve(a, b), np.linalg.solve, [A, B],
                     lambda a, b: T.linalg.solve(a, b)),
    "linalg.solve_vector_broadcast": (lambda a, b: tl.linalg.solve(a, b),
                                      lambda a, b: np.linalg.solve(a, b[..., None])[..., 0],
                                      [A, B[:, :, 0]], None),
    "linalg.solve_left_false": (lambda a, b: tl.linalg.solve(a, b, left=False),
                                lambda a, b: np.swapaxes(np.linalg.solve(
                                    np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)), -1, -2),
                                [A, np.swapaxes(B, -1, -2)], None),
    "linalg.solve_ex": (lambda a, b: tl.linalg.solve_ex(a, b)[0], np.linalg.solve, [A, B], None),
    "linalg.inv": (lambda a: tl.linalg.inv(a), np.linalg.inv, [A], lambda a: T.linalg.inv(a)),
    "inverse_method": (lambda a: a.inverse(), np.linalg.inv, [A1 + 2 * np.eye(3)], None),
    "linalg.inv_ex": (lambda a: tl.linalg.inv_ex(a)[0], np.linalg.inv, [A], None),
    "linalg.det": (lambda a: tl.linalg.det(a), np.linalg.det, [A], lambda a: T.linalg.det(a)),
    "det_pivoting": (lambda a: a.det(), np.linalg.det, [A1], None),
    "linalg.slogdet": (lambda a: tl.linalg.slogdet(a)[1], lambda a: np.linalg.slogdet(a)[1],
                       [A1], None),
    "logdet": (lambda a: tl.logdet(a), lambda a: np.log(np.linalg.det(a)), [SPD], None),
    "linalg.cholesky": (lambda a: tl.linalg.cholesky(a), _chol_lower, [SPD],
                        lambda a: T.linalg.cholesky(a)),
    "linalg.cholesky_upper": (lambda a: tl.linalg.cholesky(a, upper=True),
                              lambda a: np.swapaxes(_chol_lower(a), -1, -2), [SPD[0]], None),
    "linalg.cholesky_ex": (lambda a: tl.linalg.cholesky_ex(a)[0], _chol_lower, [SPD], None),
    "linalg.solve_triangular_upper": (lambda a, b: tl.linalg.solve_triangular(a, b, upper=True),
                                      lambda a, b: np.linalg.solve(np.triu(a), b), [UP, B[0, :3]],
                                      lambda a, b: T.linalg.solve_triangular(a, b, upper=True)),
    "linalg.solve_triangular_left_unit": (
        lambda a, b: tl.linalg.solve_triangular(a, b, upper=False, left=False,
                                                unitriangular=True),
        lambda a, b: b @ np.linalg.inv(np.tril(a, -1) + np.eye(3)), [LOW, B[0, :, :3]], None),
    "triangular_solve": (lambda b, a: tl.triangular_solve(b, a, upper=False, transpose=True)[0],
                         lambda b, a: np.linalg.solve(np.tril(a).T, b), [B[0, :3], LOW], None),
    "cholesky_solve": (lambda b, low: tl.cholesky_solve(b, low),
                       lambda b, low: np.linalg.solve(np.tril(low) @ np.tril(low).T, b),
                       [B[0, :3], LOW], None),
    "cholesky_inverse_upper": (lambda up: tl.cholesky_inverse(up, upper=True),
                               lambda up: np.linalg.inv(np.triu(up).T @ np.triu(up)), [UP], None),
    "linalg.lu_factor": (lambda a: tl.linalg.lu_factor(a)[0],
                         lambda a: (lambda p, lo, u: u + lo - np.eye(4))(*_lu_perm(a)), [A],
                         lambda a: T.linalg.lu_factor(a)[0]),
    "linalg.lu": (lambda a: tl.linalg.lu(a), _lu_perm, [A1], lambda a: T.linalg.lu(a)),
    "linalg.lu_solve": (lambda a, b: tl.linalg.lu_solve(*tl.linalg.lu_factor(a), b),
                        np.linalg.solve, [A, B], None),
    "lu_solve_older_order": (lambda a, b: b.lu_solve(*tl.linalg.lu_factor(a)), np.linalg.solve,
                             [A, B], None),
    "linalg.tensorinv": (lambda a: tl.linalg.tensorinv(a.reshape(2, 2, 4)),
                         lambda a: np.linalg.tensorinv(a.reshape(2, 2, 4)), [A[0]], None),
    "linalg.tensorsolve": (lambda a, b: tl.linalg.tensorsolve(a.reshape(2, 2, 2, 2), b),
                           lambda a, b: np.linalg.tensorsolve(a.reshape(2, 2, 2, 2), b),
                           [A[1], rand(2, 2, seed=6)], None),
    "linalg.cond_fro": (lambda a: tl.linalg.cond(a, "fro"),
                        lambda a: np.linalg.cond(a, "fro"), [A], None),
    "linalg.cond_inf": (lambda a: tl.linalg.cond(a, np.inf), lambda a: np.linalg.cond(a, np.inf),
                        [A1 + 2 * np.eye(3)], None),
    "linalg.matrix_exp": (lambda a: tl.linalg.matrix_exp(a), _expm, [A1 * 0.3],
                          lambda a: T.linalg.matrix_exp(a)),
    "matrix_exp_scaled": (lambda a: a.matrix_exp(), _expm, [A * 0.8], None,
                          {"rtol": 2e-5, "atol": 2e-5}),
    "matrix_power_negative": (lambda a: tl.linalg.matrix_power(a, -3),
                              lambda a: np.linalg.matrix_power(a, -3), [A], None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient(name):
    tl_fn, np_fn, arrays, torch_fn, *opts = CASES[name]
    kw = {"rtol": 1e-5, "atol": 2e-6, "grad_tol": (3e-3, 5e-4)}
    kw.update(opts[0] if opts else {})
    check(tl_fn, np_fn, *arrays, torch_fn=torch_fn, **kw)


def test_pivots_match_lapack():
    _, piv = tl.linalg.lu_factor(tl.tensor(A))
    if torch is not None:
        np.testing.assert_array_equal(piv.numpy(), T.linalg.lu_factor(T.tensor(A))[1].numpy())
    lu, piv2, info = tl.linalg.lu_factor_ex(tl.tensor(A1))
    p, lo, up = tl.lu_unpack(lu, piv2)
    np.testing.assert_allclose((p.numpy() @ lo.numpy() @ up.numpy()), A1, atol=2e-6)
    assert info.numpy().tolist() == 0


def test_singular_and_indefinite_input():
    z = tl.zeros(3, 3)
    with pytest.raises(RuntimeError, match="linalg.solve.*singular"):
        tl.linalg.solve(z, tl.ones(3))
    with pytest.raises(RuntimeError, match="linalg.inv.*singular"):
        tl.linalg.inv(z)
    assert tl.linalg.det(z).item() == 0.0
    sign, logabs = tl.linalg.slogdet(z)
    assert sign.item() == 0.0 and logabs.item() == -np.inf
    assert tl.linalg.inv_ex(z)[1].numpy().tolist() == 1
    assert tl.linalg.solve_ex(tl.zeros(2, 3, 3), tl.ones(2, 3))[1].numpy().tolist() == [1, 1]
    assert np.isnan(tl.logdet(tl.tensor(-np.eye(3, dtype=np.float32))).item())
    with pytest.raises(RuntimeError, match="linalg.cholesky.*positive-definite.*order 2"):
        tl.linalg.cholesky(tl.tensor([[1.0, 2.0], [2.0, 1.0]]))
    assert tl.linalg.cholesky_ex(tl.tensor([[1.0, 2.0], [2.0, 1.0]]))[1].numpy().tolist() == 2


BAD = [
    (lambda: tl.linalg.solve(tl.zeros(2, 3), tl.zeros(2)), RuntimeError, "linalg.solve"),
    (lambda: tl.linalg.solve(tl.eye(2), tl.zeros(3, 1)), RuntimeError, "linalg.solve"),
    (lambda: tl.linalg.inv(tl.zeros(3)), RuntimeError, "linalg.inv"),
    (lambda: tl.linalg.det([[1.0]]), TypeError, "linalg.det"),
    (lambda: tl.linalg.cholesky(tl.zeros(2, 3)), RuntimeError, "linalg.cholesky"),
    (lambda: tl.linalg.solve_triangular(tl.eye(2), tl.zeros(2), upper=True), RuntimeError,
     "solve_triangular"),
    (lambda: tl.linalg.solve_triangular(tl.eye(2), tl.zeros(3, 1), upper=True), RuntimeError,
     "solve_triangular"),
    (lambda: tl.linalg.tensorinv(tl.zeros(2, 3), 1), RuntimeError, "tensorinv"),
    (lambda: tl.linalg.tensorsolve(tl.zeros(2, 3), tl.zeros(3)), RuntimeError, "tensorsolve"),
    (lambda: tl.linalg.lu_factor(tl.eye(2), pivot=False), NotImplementedError, "lu_factor"),
    (lambda: tl.linalg.matrix_exp(tl.zeros(2, 3)), RuntimeError, "matrix_exp"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind, name = BAD[i]
    with pytest.raises(kind, match=name):
        fn()
