"""Jacobi eigendecompositions and SVDs of the catalog against float64 NumPy (values directly,
vectors up to sign, reconstructions), gradients of eigenvalues, singular values, pinv and the
2-norms by central differences, torch as an extra reference, and bad input."""
import numpy as np
import pytest

import torchlean as tl
from catalog_check import check, rand, torch

T = torch
SYM_SRC = rand(2, 4, 4)
TALL = rand(5, 3, seed=1)
WIDE = rand(2, 3, 5, seed=2)


def _sign_fixed(v):
    """Columns scaled so each one's largest-magnitude entry is positive."""
    idx = np.abs(v).argmax(-2)
    signs = np.sign(np.take_along_axis(v, idx[..., None, :], -2))
    return v * signs


CASES = {
    "linalg.eigvalsh": (lambda a: tl.linalg.eigvalsh(a), lambda a: np.linalg.eigvalsh(a, "L"),
                        [SYM_SRC], lambda a: T.linalg.eigvalsh(a)),
    "linalg.eigvalsh_upper": (lambda a: tl.linalg.eigvalsh(a, "U"),
                              lambda a: np.linalg.eigvalsh(a, "U"), [SYM_SRC[0]], None),
    "linalg.eigh_values": (lambda a: tl.linalg.eigh(a)[0], lambda a: np.linalg.eigh(a)[0],
                           [SYM_SRC], None),
    "linalg.svdvals": (lambda a: tl.linalg.svdvals(a), lambda a: np.linalg.svd(a, compute_uv=False),
                       [TALL], lambda a: T.linalg.svdvals(a)),
    "linalg.svdvals_wide_batched": (lambda a: tl.linalg.svdvals(a),
                                    lambda a: np.linalg.svd(a, compute_uv=False), [WIDE], None),
    "linalg.pinv": (lambda a: tl.linalg.pinv(a), np.linalg.pinv, [TALL],
                    lambda a: T.linalg.pinv(a)),
    "pinverse_wide": (lambda a: a.pinverse(), np.linalg.pinv, [WIDE[0]], None),
    "linalg.matrix_norm_2": (lambda a: tl.linalg.matrix_norm(a, 2), lambda a: np.linalg.norm(
        a, 2, axis=(-2, -1)), [WIDE], None),
    "linalg.matrix_norm_nuc": (lambda a: tl.linalg.matrix_norm(a, "nuc", (0, 2)),
                               lambda a: np.linalg.norm(a, "nuc", axis=(0, 2)), [WIDE], None),
    "linalg.matrix_norm_m2": (lambda a: tl.linalg.matrix_norm(a, -2), lambda a: np.linalg.norm(
        a, -2), [TALL], None),
    "linalg.cond_2": (lambda a: tl.linalg.cond(a), np.linalg.cond, [SYM_SRC], None),
    "linalg.polar": (lambda a: tl.linalg.polar(a), lambda a: _np_polar(a), [TALL],
                     (lambda a: T.linalg.polar(a)) if T is not None and hasattr(T.linalg, "polar") else None),
    "linalg.matrix_sqrth": (lambda a: tl.linalg.matrix_sqrth(a), lambda a: _np_sqrth(a),
                            [(SYM_SRC[0] @ SYM_SRC[0].T + np.eye(4)).astype(np.float32)], None),
}


def _np_polar(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u @ vh, vh.T @ np.diag(s) @ vh


def _np_sqrth(a):
    sym = np.tril(a) + np.tril(a, -1).T
    w, v = np.linalg.eigh(sym)
    return v @ np.diag(np.sqrt(w)) @ v.T


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient(name):
    tl_fn, np_fn, arrays, torch_fn = CASES[name]
    check(tl_fn, np_fn, *arrays, torch_fn=torch_fn, rtol=2e-5, atol=2e-6,
          grad_tol=(3e-3, 5e-4))


def test_eigh_vectors_up_to_sign_and_reconstruction():
    a = SYM_SRC.astype(np.float64)
    sym = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    w, v = tl.linalg.eigh(tl.tensor(SYM_SRC))
    _, v_ref = np.linalg.eigh(sym)
    np.testing.assert_allclose(_sign_fixed(v.numpy()), _sign_fixed(v_ref), atol=2e-5)
    vn = v.numpy().astype(np.float64)
    np.testing.assert_allclose(vn @ (w.numpy()[..., None] * np.swapaxes(vn, -1, -2)), sym,
                               atol=5e-6)


@pytest.mark.parametrize("shape,full", [((5, 3), True), ((5, 3), False), ((3, 5), True),
                                        ((2, 4, 4), False)])
def test_svd_factors(shape, full):
    a = rand(*shape, seed=3)
    U, S, Vh = tl.linalg.svd(tl.tensor(a), full_matrices=full)
    Ur, Sr, Vhr = np.linalg.svd(a.astype(np.float64), full_matrices=full)
    assert U.shape == Ur.shape and S.shape == Sr.shape and Vh.shape == Vhr.shape
    np.testing.assert_allclose(S.numpy(), Sr, rtol=2e-6, atol=2e-6)
    k = S.shape[-1]
    u, vh = U.numpy().astype(np.float64), Vh.numpy().astype(np.float64)
    np.testing.assert_allclose((u[..., :k] * S.numpy()[..., None, :]) @ vh[..., :k, :], a,
                               atol=3e-6)
    for q in (u, np.swapaxes(vh, -1, -2)):
        eye = np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2)
        np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, eye, atol=2e-6)
    np.testing.assert_allclose(_sign_fixed(u[..., :k]), _sign_fixed(Ur[..., :k]), atol=2e-5)
    legacy = tl.svd(tl.tensor(a), some=not full)
    np.testing.assert_allclose(legacy[2].numpy(), np.swapaxes(vh, -1, -2), atol=1e-7)


def test_rank_deficient_pinv_and_rank():
    low = (rand(5, 2, seed=4).astype(np.float64) @ rand(2, 4, seed=5)).astype(np.float32)
    assert tl.linalg.matrix_rank(tl.tensor(low)).numpy().tolist() == 2
    assert tl.linalg.matrix_rank(tl.tensor(np.eye(3, dtype=np.float32))).numpy().tolist() == 3
    # the float64 reference cuts the float32 rounding noise at the same relative tolerance
    ref = np.linalg.pinv(low.astype(np.float64), rcond=np.finfo(np.float32).eps * 5)
    np.testing.assert_allclose(tl.linalg.pinv(tl.tensor(low)).numpy(), ref, atol=2e-5)
    U, S, Vh = tl.linalg.svd(tl.tensor(low))
    u = U.numpy().astype(np.float64)
    np.testing.assert_allclose(u.T @ u, np.eye(5), atol=2e-6)        # completed basis


def test_low_rank_is_the_truncated_svd():
    a = rand(2, 6, 5, seed=6)
    U, S, V = tl.svd_lowrank(tl.tensor(a), q=3)
    Ur, Sr, Vhr = np.linalg.svd(a.astype(np.float64), full_matrices=False)
    np.testing.assert_allclose(S.numpy(), Sr[..., :3], rtol=2e-6)
    np.testing.assert_allclose(_sign_fixed(V.numpy()), _sign_fixed(np.swapaxes(Vhr, -1, -2)[..., :3]),
                               atol=2e-5)
    centered = a - a.mean(-2, keepdims=True)
    _, Sp, _ = tl.pca_lowrank(tl.tensor(a))
    np.testing.assert_allclose(Sp.numpy(), np.linalg.svd(centered, compute_uv=False)[..., :5],
                               rtol=2e-5, atol=2e-6)
    with pytest.raises(RuntimeError, match="svd_lowrank"):
        tl.svd_lowrank(tl.tensor(a), q=7)


BAD = [
    (lambda: tl.linalg.eigh(tl.zeros(2, 3)), RuntimeError, "linalg.eigh"),
    (lambda: tl.linalg.eigh(tl.eye(2), "X"), RuntimeError, "linalg.eigh"),
    (lambda: tl.linalg.svd(tl.zeros(3)), RuntimeError, "linalg.svd"),
    (lambda: tl.linalg.svdvals([[1.0]]), TypeError, "linalg.svdvals"),
    (lambda: tl.linalg.pinv(tl.zeros(2)), RuntimeError, "linalg.pinv"),
    (lambda: tl.linalg.polar(tl.zeros(2, 3)), RuntimeError, "linalg.polar"),
    (lambda: tl.linalg.matrix_sqrth(-tl.eye(2)), RuntimeError, "linalg.matrix_sqrth"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind, name = BAD[i]
    with pytest.raises(kind, match=name):
        fn()
