"""Reductions, logic, products, einsum and linalg names of the catalog against float64 NumPy
references written here (forward; gradients by central differences), torch as an extra
reference, and bad input raising torch's kind of error naming the op."""
import math

import numpy as np
import pytest

import torchlean as tl
from catalog_check import check, rand, torch

T = torch
A = rand(3, 4, 5)
M = rand(4, 6, seed=1)
V = rand(5, seed=2)
SQ = rand(4, 4, seed=3)


def _np_norm(a, p, axis=None, keepdims=False):
    a = np.abs(a)
    if p == math.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if p == -math.inf:
        return a.min(axis=axis, keepdims=keepdims)
    return (a ** p).sum(axis=axis, keepdims=keepdims) ** (1.0 / p)


def _np_cross(a, b, axis):
    return np.cross(a, b, axisa=axis, axisb=axis, axisc=axis)


def _np_renorm(a, p, d, maxnorm):
    axes = tuple(i for i in range(a.ndim) if i != d)
    n = _np_norm(a, p, axes, True)
    return a * np.where(n > maxnorm, maxnorm / (n + 1e-7), 1.0)


def _np_gradient(a, axis):
    return np.gradient(a, axis=axis)


def _np_cov(x, correction=1, fw=None, aw=None):
    w = np.ones(x.shape[1])
    if fw is not None:
        w = w * fw
    if aw is not None:
        w = w * aw
    avg = (x * w).sum(1, keepdims=True) / w.sum()
    norm = w.sum() - correction * ((w * aw).sum() / w.sum() if aw is not None else 1)
    xc = x - avg
    return (xc * w) @ xc.T / norm


def _np_lerp(a, b, w):
    return np.where(w < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


CASES = {
    # reductions
    "prod_dim": (lambda x: x.prod(1), lambda a: a.prod(1), [A], lambda x: x.prod(1)),
    "prod_keepdim_neg": (lambda x: tl.prod(x, -1, keepdim=True),
                         lambda a: a.prod(-1, keepdims=True), [A], None),
    "prod_all": (lambda x: x.prod(), lambda a: a.prod(), [M[:2]], lambda x: x.prod()),
    "prod_with_zero": (lambda x: x.prod(0), lambda a: a.prod(0),
                       [np.array([[0.0, 2.0], [3.0, 0.0], [5.0, 7.0]])], None),
    "nansum": (lambda x: x.nansum(0), lambda a: np.nansum(a, 0),
               [np.where(M > 1, np.nan, M)], None),
    "nanmean": (lambda x: tl.nanmean(x, 1, keepdim=True),
                lambda a: np.nanmean(a, 1, keepdims=True), [np.where(M > 1, np.nan, M)],
                lambda x: T.nanmean(x, 1, keepdim=True)),
    "aminmax": (lambda x: tl.aminmax(x, dim=-1), lambda a: (a.min(-1), a.max(-1)), [A],
                lambda x: tuple(T.aminmax(x, dim=-1))),
    "std_mean": (lambda x: tl.std_mean(x, 1), lambda a: (a.std(1, ddof=1), a.mean(1)), [A],
                 lambda x: T.std_mean(x, 1)),
    "var_mean": (lambda x: tl.var_mean(x, (0, 2), correction=0, keepdim=True),
                 lambda a: (a.var((0, 2), keepdims=True), a.mean((0, 2), keepdims=True)), [A],
                 None),
    "norm_fro": (lambda x: x.norm(), lambda a: np.sqrt((a * a).sum()), [A],
                 lambda x: x.norm()),
    "norm_p3_dim": (lambda x: tl.norm(x, 3, dim=(0, 2), keepdim=True),
                    lambda a: _np_norm(a, 3, (0, 2), True), [A], None),
    "norm_1": (lambda x: x.norm(1, -1), lambda a: _np_norm(a, 1, -1), [A], None),
    "norm_inf": (lambda x: x.norm(math.inf, 1), lambda a: _np_norm(a, math.inf, 1), [M], None),
    "norm_ninf": (lambda x: x.norm(-math.inf, 0), lambda a: _np_norm(a, -math.inf, 0), [M],
                  None),
    "dist": (lambda x, y: tl.dist(x, y, 3), lambda a, b: _np_norm(a - b, 3), [M, V[:1]],
             lambda x, y: T.dist(x, y, 3)),
    "renorm": (lambda x: x.renorm(2, 0, 2.0), lambda a: _np_renorm(a, 2, 0, 2.0), [A],
               lambda x: x.renorm(2, 0, 2.0)),
    # logic-driven elementwise ops (differentiable)
    "masked_fill": (lambda x: x.masked_fill(np.array([True, False, True, False, False, True]),
                                            -2.0),
                    lambda a: np.where([True, False, True, False, False, True], -2.0, a), [M],
                    None),
    "masked_fill_tensor_value": (lambda x, v: tl.masked_fill(x, x > 0.5, v),
                                 lambda a, v: np.where(a > 0.5, v, a), [M, V[0]], None),
    "clamp_min": (lambda x: x.clamp_min(0.2), lambda a: np.maximum(a, 0.2), [M],
                  lambda x: x.clamp_min(0.2)),
    "clamp_max_tensor": (lambda x, y: tl.clamp_max(x, y), np.minimum, [M, V[:1] + 0.0], None),
    "fmax": (lambda x, y: x.fmax(y), np.fmax,
             [np.where(M > 1, np.nan, M), np.where(M < -1, np.nan, M[::-1] * 0.7)],
             lambda x, y: x.fmax(y)),
    "fmin": (lambda x, y: tl.fmin(x, y), np.fmin, [np.where(M > 1, np.nan, M), rand(6, seed=8)],
             None),
    "lerp_scalar": (lambda x, y: x.lerp(y, 0.3), lambda a, b: _np_lerp(a, b, 0.3), [M, M[::-1]],
                    lambda x, y: x.lerp(y, 0.3)),
    "lerp_tensor": (lambda x, y, w: tl.lerp(x, y, w), _np_lerp,
                    [M, V[:1] * 0 + M[0], rand(4, 1, seed=9)], None),
    "addcmul": (lambda x, y, z: x.addcmul(y, z, value=-0.5),
                lambda a, b, c: a - 0.5 * b * c, [M, V[:1] + M, M[:1]],
                lambda x, y, z: x.addcmul(y, z, value=-0.5)),
    "addcdiv": (lambda x, y, z: tl.addcdiv(x, y, z, value=2),
                lambda a, b, c: a + 2 * b / c, [M, M[::-1], np.abs(M) + 1], None),
    # products
    "dot": (lambda x, y: x.dot(y), np.dot, [V, V[::-1] * 2], lambda x, y: x.dot(y)),
    "vdot": (lambda x, y: tl.vdot(x, y), np.vdot, [V, V * 3], None),
    "inner": (lambda x, y: x.inner(y), np.inner, [A, M[:2, :5]], lambda x, y: x.inner(y)),
    "outer": (lambda x, y: tl.outer(x, y), np.outer, [V, M[0]], lambda x, y: T.outer(x, y)),
    "ger": (lambda x, y: x.ger(y), np.outer, [V, M[0]], None),
    "mv": (lambda m, v: m.mv(v), np.dot, [M[:, :5], V], lambda m, v: m.mv(v)),
    "addmm": (lambda x, a, b: tl.addmm(x, a, b, beta=0.5, alpha=2),
              lambda x, a, b: 0.5 * x + 2 * a @ b, [V[:1], M, rand(6, 3, seed=4)],
              lambda x, a, b: T.addmm(x, a, b, beta=0.5, alpha=2)),
    "addmv": (lambda x, a, v: x.addmv(a, v), lambda x, a, v: x + a @ v, [M[:, 0], M[:, :5], V],
              None),
    "addr": (lambda x, u, v: tl.addr(x, u, v, alpha=3), lambda x, u, v: x + 3 * np.outer(u, v),
             [M[:, :5], M[:, 1], V], None),
    "baddbmm": (lambda x, a, b: x.baddbmm(a, b), lambda x, a, b: x + a @ b,
                [M[:1, :3], A, rand(3, 5, 3, seed=5)], lambda x, a, b: x.baddbmm(a, b)),
    "addbmm": (lambda x, a, b: tl.addbmm(x, a, b, beta=2),
               lambda x, a, b: 2 * x + (a @ b).sum(0), [M[:4, :3], A, rand(3, 5, 3, seed=5)],
               None),
    "chain_matmul": (lambda a, b, c: tl.chain_matmul(a, b, c), lambda a, b, c: a @ b @ c,
                     [M, rand(6, 2, seed=6), rand(2, 3, seed=7)], None),
    "tensordot_int": (lambda x, y: tl.tensordot(x, y, 2),
                      lambda a, b: np.tensordot(a, b, 2), [A, rand(4, 5, 2, seed=8)],
                      lambda x, y: T.tensordot(x, y, 2)),
    "tensordot_lists": (lambda x, y: x.tensordot(y, ([0, 2], [2, 0])),
                        lambda a, b: np.tensordot(a, b, ([0, 2], [2, 0])),
                        [A, rand(5, 2, 3, seed=9)], None),
    "cross_dim_none": (lambda x, y: tl.cross(x, y), lambda a, b: _np_cross(a, b, 0),
                       [A[:, :2, :2], rand(3, 2, 2, seed=3)], None),
    "linalg.cross": (lambda x, y: tl.linalg.cross(x, y), lambda a, b: np.cross(a, b),
                     [rand(4, 3, seed=1), rand(1, 3, seed=2)],
                     lambda x, y: T.linalg.cross(x, y)),
    "cdist": (lambda x, y: tl.cdist(x, y), lambda a, b: np.sqrt(
        ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)), [M, rand(3, 6, seed=4)],
        lambda x, y: T.cdist(x, y)),
    "cdist_p1_batched": (lambda x, y: tl.cdist(x, y, 1.0), lambda a, b: np.abs(
        a[:, :, None, :] - b[:, None, :, :]).sum(-1), [A, rand(3, 2, 5, seed=4)], None),
    "diff": (lambda x: x.diff(), lambda a: np.diff(a), [A], lambda x: x.diff()),
    "diff_n2_prepend": (lambda x, p: tl.diff(x, 2, 0, prepend=p),
                        lambda a, p: np.diff(a, 2, 0, prepend=p), [M, M[:1] * 2], None),
    "gradient": (lambda x: tl.gradient(x), lambda a: np.gradient(a), [A], None),
    "gradient_spacing": (lambda x: tl.gradient(x, spacing=2.0, dim=1),
                         lambda a: [np.gradient(a, 2.0, axis=1)], [M], None),
    "trapezoid": (lambda y: tl.trapezoid(y), lambda a: np.trapezoid(a), [A],
                  lambda y: T.trapezoid(y)),
    "trapezoid_dx": (lambda y: tl.trapz(y, dx=0.5, dim=0), lambda a: np.trapezoid(a, dx=0.5,
                                                                                axis=0), [M],
                     None),
    "trapezoid_x": (lambda y, x: tl.trapezoid(y, x), lambda a, x: np.trapezoid(a, x),
                    [M, np.sort(rand(6, seed=2))], None),
    "cov": (lambda x: x.cov(), np.cov, [M], lambda x: x.cov()),
    "cov_weights": (lambda x: tl.cov(x, correction=0, fweights=tl.tensor([1, 2, 1, 3, 1, 1.]),
                                     aweights=tl.tensor([.5, 1, 2, 1, 1, .3])),
                    lambda a: _np_cov(a, 0, np.array([1, 2, 1, 3, 1, 1.]),
                                      np.array([.5, 1, 2, 1, 1, .3])), [M], None),
    "corrcoef": (lambda x: tl.corrcoef(x), np.corrcoef, [M], lambda x: T.corrcoef(x)),
    # einsum
    "einsum_bmm": (lambda x, y: tl.einsum("bij,bjk->bik", x, y),
                   lambda a, b: np.einsum("bij,bjk->bik", a, b), [A, rand(3, 5, 2, seed=5)],
                   lambda x, y: T.einsum("bij,bjk->bik", x, y)),
    "einsum_implicit": (lambda x, y: tl.einsum("ij,jk", x, y),
                        lambda a, b: np.einsum("ij,jk", a, b), [M, rand(6, 3, seed=5)], None),
    "einsum_trace_diag": (lambda x: tl.einsum("ii->i", x), lambda a: np.einsum("ii->i", a), [SQ],
                          None),
    "einsum_trace": (lambda x: tl.einsum("ii", x), lambda a: np.einsum("ii", a), [SQ], None),
    "einsum_sum_out": (lambda x: tl.einsum("bij->j", x), lambda a: np.einsum("bij->j", a), [A],
                       None),
    "einsum_ellipsis": (lambda x, y: tl.einsum("...ij,...jk->...ik", x, y),
                        lambda a, b: np.einsum("...ij,...jk->...ik", a, b),
                        [A, rand(1, 5, 2, seed=6)], None),
    "einsum_three": (lambda x, y, z: tl.einsum("ab,bc,cd->da", x, y, z),
                     lambda a, b, c: np.einsum("ab,bc,cd->da", a, b, c),
                     [M, rand(6, 3, seed=5), rand(3, 2, seed=6)], None),
    "einsum_outer_batch": (lambda x, y: tl.einsum("bi,bj->bij", x, y),
                           lambda a, b: np.einsum("bi,bj->bij", a, b), [M, M[:, :3]], None),
    "einsum_list": (lambda x, y: tl.einsum("i,i->", [x, y]), lambda a, b: np.einsum("i,i->", a, b),
                    [V, V * 2], None),
    # linalg
    "linalg.vector_norm": (lambda x: tl.linalg.vector_norm(x, 2, (0, -1)),
                           lambda a: _np_norm(a, 2, (0, 2)), [A],
                           lambda x: T.linalg.vector_norm(x, 2, (0, -1))),
    "linalg.vector_norm_p0.5": (lambda x: tl.linalg.vector_norm(x, 0.5),
                                lambda a: _np_norm(a, 0.5), [M], None),
    "linalg.matrix_norm_fro": (lambda x: tl.linalg.matrix_norm(x), lambda a: np.linalg.norm(
        a, "fro", axis=(-2, -1)), [A], lambda x: T.linalg.matrix_norm(x)),
    "linalg.matrix_norm_1": (lambda x: tl.linalg.matrix_norm(x, 1, keepdim=True),
                             lambda a: np.linalg.norm(a, 1, axis=(-2, -1), keepdims=True), [A],
                             None),
    "linalg.matrix_norm_inf": (lambda x: tl.linalg.matrix_norm(x, math.inf, (0, 2)),
                               lambda a: np.linalg.norm(a, np.inf, axis=(0, 2)), [A], None),
    "linalg.matrix_norm_m1": (lambda x: tl.linalg.matrix_norm(x, -1),
                              lambda a: np.linalg.norm(a, -1), [M], None),
    "linalg.norm_vec": (lambda x: tl.linalg.norm(x, 3), lambda a: _np_norm(a, 3), [V], None),
    "linalg.norm_default": (lambda x: tl.linalg.norm(x), lambda a: np.sqrt((a * a).sum()), [A],
                            None),
    "linalg.norm_mat": (lambda x: tl.linalg.norm(x, math.inf), lambda a: np.linalg.norm(
        a, np.inf), [M], None),
    "linalg.vecdot": (lambda x, y: tl.linalg.vecdot(x, y, dim=0),
                      lambda a, b: (a * b).sum(0), [M, M[:, :1]], None),
    "linalg.multi_dot": (lambda a, b, c, d: tl.linalg.multi_dot([a, b, c, d]),
                         lambda a, b, c, d: a @ b @ c @ d,
                         [V[:4], M, rand(6, 2, seed=5), rand(2, seed=6)], None),
    "matrix_power": (lambda x: x.matrix_power(5), lambda a: np.linalg.matrix_power(a, 5),
                     [SQ * 0.5], lambda x: x.matrix_power(5)),
    "matrix_power_batched_0": (lambda x: tl.linalg.matrix_power(x, 0),
                               lambda a: np.broadcast_to(np.eye(4), a.shape), [A[:, :4, :4]],
                               None, {"grad": False}),
    "linalg.vander": (lambda x: tl.linalg.vander(x, N=4),
                      lambda a: np.vander(a, 4, increasing=True), [V],
                      lambda x: T.linalg.vander(x, N=4)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient(name):
    tl_fn, np_fn, arrays, torch_fn, *opts = CASES[name]
    check(tl_fn, np_fn, *arrays, torch_fn=torch_fn, **(opts[0] if opts else {}))


def test_norm_gradient_at_zero_is_zero():
    x = tl.tensor(np.zeros((2, 3), np.float32), requires_grad=True)
    x.norm().backward()
    np.testing.assert_array_equal(x.grad, np.zeros((2, 3)))
    y = tl.tensor(np.zeros((3, 2), np.float32), requires_grad=True)
    tl.cdist(y, y).sum().backward()
    assert np.isfinite(y.grad).all()


NAN_INF = np.array([[1.0, np.nan, np.inf], [0.0, -np.inf, -2.5]], np.float32)


def test_predicates():
    x = tl.tensor(NAN_INF)
    for name, ref in (("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite),
                      ("isposinf", np.isposinf), ("isneginf", np.isneginf),
                      ("isreal", np.isreal)):
        np.testing.assert_array_equal(getattr(x, name)().numpy(), ref(NAN_INF), err_msg=name)
        np.testing.assert_array_equal(getattr(tl, name)(x).numpy(), ref(NAN_INF), err_msg=name)
        ints = getattr(tl, name)(tl.tensor([1, 2]).long())
        assert ints.dtype == tl.bool and ints.numpy().tolist() == ref(np.array([1, 2])).tolist()
    np.testing.assert_array_equal(tl.all(x, 1).numpy(), [1.0, 0.0])
    np.testing.assert_array_equal(x.any(0, keepdim=True).numpy(), [[1.0, 1.0, 1.0]])
    assert x.all().item() == 0.0 and x.any().item() == 1.0 and tl.all(tl.zeros(0)).item() == 1.0
    np.testing.assert_array_equal(tl.count_nonzero(x, 0).numpy(), [1, 2, 2])
    assert tl.count_nonzero(x).item() == 5


def test_isclose_allclose_equal():
    a = np.array([1.0, np.nan, np.inf, -np.inf, 1.0, 1e-9], np.float32)
    b = np.array([1.0 + 1e-6, np.nan, np.inf, np.inf, np.inf, 0.0], np.float32)
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.0, "atol": 1e-8}):
        np.testing.assert_array_equal(tl.isclose(tl.tensor(a), tl.tensor(b), **kw).numpy(),
                                      np.isclose(a, b, **kw), err_msg=str(kw))
    assert tl.allclose(tl.tensor(a[:1]), tl.tensor(b[:1]))
    assert not tl.tensor(a).allclose(tl.tensor(b), equal_nan=True)
    assert tl.equal(tl.tensor(a[:1]), tl.tensor(a[:1])) and not tl.equal(tl.tensor(a), tl.tensor(a))
    assert not tl.equal(tl.zeros(2), tl.zeros(3))


def test_logical_and_isin():
    a = np.array([[0.0, 2.0, np.nan], [1.0, 0.0, -1.0]], np.float32)
    b = np.array([1.0, 0.0, 0.0], np.float32)
    x, y = tl.tensor(a), tl.tensor(b)
    np.testing.assert_array_equal(x.logical_and(y).numpy(), np.logical_and(a, b))
    np.testing.assert_array_equal(tl.logical_or(x, y).numpy(), np.logical_or(a, b))
    np.testing.assert_array_equal(tl.logical_xor(x, y).numpy(), np.logical_xor(a, b))
    np.testing.assert_array_equal(x.logical_not().numpy(), np.logical_not(a))
    ints = tl.tensor([0, 3]).long()
    assert tl.logical_not(ints).numpy().tolist() == [True, False]
    assert ints.logical_and(tl.tensor([1, 1]).long()).numpy().tolist() == [False, True]
    np.testing.assert_array_equal(tl.isin(x, [2.0, -1.0]).numpy(), np.isin(a, [2.0, -1.0]))
    np.testing.assert_array_equal(tl.isin(x, y, invert=True).numpy(), np.isin(a, b, invert=True))


def test_masked_fill_blocks_gradient_of_filled_elements():
    x = tl.tensor(np.array([1.0, np.inf, 3.0], np.float32), requires_grad=True)
    y = x.masked_fill(x.isinf(), 0.0)
    np.testing.assert_array_equal(y.numpy(), [1.0, 0.0, 3.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0, 0.0, 1.0])


BAD = [
    (lambda: tl.prod(tl.zeros(2, 3), 2), IndexError, "prod"),
    (lambda: tl.norm(tl.zeros(2), "nuc"), NotImplementedError, "norm"),
    (lambda: tl.norm(tl.zeros(2), "bad"), ValueError, "norm"),
    (lambda: tl.aminmax(tl.zeros(0)), RuntimeError, "aminmax"),
    (lambda: tl.dist(tl.zeros(2), tl.zeros(3)), RuntimeError, "dist"),
    (lambda: tl.renorm(tl.zeros(3), 2, 0, 1.0), ValueError, "renorm"),
    (lambda: tl.isclose(tl.zeros(2), tl.zeros(3)), RuntimeError, "isclose"),
    (lambda: tl.masked_fill(tl.zeros(2, 3), np.ones((3, 3), bool), 1.0), RuntimeError,
     "masked_fill"),
    (lambda: tl.masked_fill(tl.zeros(2), np.ones(2, bool), tl.zeros(2)), RuntimeError,
     "masked_fill"),
    (lambda: tl.masked_fill(tl.zeros(2), np.array(["a", "b"]), 1.0), TypeError, "masked_fill"),
    (lambda: tl.logical_and(tl.zeros(2), tl.zeros(3)), RuntimeError, "logical_and"),
    (lambda: tl.lerp(tl.zeros(2), tl.zeros(3), 0.5), RuntimeError, "lerp"),
    (lambda: tl.addcmul(tl.zeros(2), tl.zeros(3), tl.zeros(2)), RuntimeError, "addcmul"),
    (lambda: tl.fmax(tl.zeros(2), "x"), TypeError, "fmax"),
    (lambda: tl.dot(tl.zeros(2), tl.zeros(3)), RuntimeError, "dot"),
    (lambda: tl.dot(tl.zeros(2, 2), tl.zeros(2)), RuntimeError, "dot"),
    (lambda: tl.outer(tl.zeros(2, 1), tl.zeros(2)), RuntimeError, "outer"),
    (lambda: tl.addmm(tl.zeros(3), tl.zeros(2, 2), tl.zeros(2, 2)), RuntimeError, "addmm"),
    (lambda: tl.tensordot(tl.zeros(2, 3), tl.zeros(2, 3), ([1], [1, 0])), RuntimeError,
     "tensordot"),
    (lambda: tl.cross(tl.zeros(2, 2), tl.zeros(2, 2)), RuntimeError, "cross"),
    (lambda: tl.cross(tl.zeros(3, 2), tl.zeros(3, 2), dim=1), RuntimeError, "cross"),
    (lambda: tl.cdist(tl.zeros(2, 3), tl.zeros(2, 4)), RuntimeError, "cdist"),
    (lambda: tl.diff(tl.zeros(())), RuntimeError, "diff"),
    (lambda: tl.gradient(tl.zeros(1)), RuntimeError, "gradient"),
    (lambda: tl.cov(tl.zeros(2, 2, 2)), RuntimeError, "cov"),
    (lambda: tl.einsum("ij,jk", tl.zeros(2, 3), tl.zeros(4, 2)), RuntimeError, "einsum"),
    (lambda: tl.einsum("ij", tl.zeros(2)), ValueError, "einsum"),
    (lambda: tl.einsum("ij->k", tl.zeros(2, 2)), ValueError, "einsum"),
    (lambda: tl.einsum("i,i", tl.zeros(2)), ValueError, "einsum"),
    (lambda: tl.einsum(3, tl.zeros(2)), TypeError, "einsum"),
    (lambda: tl.linalg.matrix_norm(tl.zeros(3)), RuntimeError, "matrix_norm"),
    (lambda: tl.linalg.matrix_norm(tl.zeros(3, 3), 3), RuntimeError, "matrix_norm"),
    (lambda: tl.linalg.multi_dot([tl.zeros(2, 3), tl.zeros(2, 3)]), RuntimeError, "multi_dot"),
    (lambda: tl.linalg.matrix_power(tl.zeros(2, 3), 2), RuntimeError, "matrix_power"),
    (lambda: tl.linalg.matrix_power(tl.zeros(2, 2), -1), RuntimeError, "singular"),
    (lambda: tl.linalg.vander(tl.zeros(())), RuntimeError, "vander"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind, name = BAD[i]
    with pytest.raises(kind, match=name):
        fn()


def test_einsum_plan_kept_per_equation_and_shapes():
    """einsum decides its plan once per (equation, shapes): calls alternating between shapes,
    broadcast size-1 labels and a repeated bad call each give their own answer or error."""
    a, b = rand(3, 5, 2, seed=11), rand(3, 2, 4, seed=12)
    c, d = rand(1, 2, 5, seed=13), rand(6, 5, 7, seed=14)
    for _ in range(2):
        got = tl.einsum("bij,bjk->bik", tl.tensor(a), tl.tensor(b)).numpy()
        np.testing.assert_allclose(got, np.einsum("bij,bjk->bik", a.astype(np.float64), b),
                                   rtol=1e-5, atol=1e-6)
        got = tl.einsum("bij,bjk->bik", tl.tensor(c), tl.tensor(d)).numpy()   # b: 1 against 6
        np.testing.assert_allclose(got, np.einsum("bij,bjk->bik", c.astype(np.float64), d),
                                   rtol=1e-5, atol=1e-6)
        with pytest.raises(RuntimeError, match="einsum"):
            tl.einsum("bij,bjk->bik", tl.tensor(a), tl.tensor(d))
