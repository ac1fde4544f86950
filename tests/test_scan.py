"""selective_scan: hand-computed values, empty time and state axes, batch forms, gradients of
both coefficient forms by finite differences, argument errors."""
from __future__ import annotations

import numpy as np
import pytest

import reference
import torchlean as tl
from harness import finite_diff_vjp


def _run(a, b, x, h0, seed=None):
    """Forward value and (with a seed) the four gradients, as float64 arrays."""
    t = tl.Tape()
    ids = [t.leaf(np.asarray(v, dtype=np.float64)) for v in (a, b, x, h0)]
    out = t.selective_scan(*ids)
    y = t.value(out).to_numpy(np.float64)
    grads = None
    if seed is not None:
        gs = t.backward(out, seed=np.asarray(seed, dtype=np.float64))
        grads = [gs[i].to_numpy(np.float64) for i in ids]
    t.release()
    return y, grads


def test_hand_computed_fixed_coefficients():
    a, b, h0 = np.array([0.5, -1.0]), np.array([2.0, 1.0]), np.array([1.0, 3.0])
    x = np.array([[1.0, 1.0], [0.0, 2.0], [-1.0, 0.5]])
    # channel 0: 0.5*1 + 2*1 = 2.5; 0.5*2.5 + 0 = 1.25; 0.625 - 2 = -1.375
    # channel 1: -3 + 1 = -2; 2 + 2 = 4; -4 + 0.5 = -3.5
    want = np.array([[2.5, -2.0], [1.25, 4.0], [-1.375, -3.5]])
    y, grads = _run(a, b, x, h0, seed=np.ones((3, 2)))
    np.testing.assert_array_equal(y, want)
    # g_2 = 1, g_1 = 1 + a g_2, g_0 = 1 + a g_1
    g = np.array([[1 + 0.5 * 1.5, 1 - 1 * 0], [1.5, 0.0], [1.0, 1.0]])
    da = (g * np.vstack([h0, want[:-1]])).sum(0)
    db = (g * x).sum(0)
    np.testing.assert_allclose(grads[0], da, rtol=1e-6)
    np.testing.assert_allclose(grads[1], db, rtol=1e-6)
    np.testing.assert_allclose(grads[2], g * b, rtol=1e-6)
    np.testing.assert_allclose(grads[3], a * g[0], rtol=1e-6)


def test_hand_computed_token_dependent():
    a = np.array([[0.5], [2.0], [-1.0]])
    b = np.array([[1.0], [0.5], [3.0]])
    x = np.array([[2.0], [4.0], [1.0]])
    h0 = np.array([4.0])
    # h0' = 0.5*4 + 2 = 4; h1 = 8 + 2 = 10; h2 = -10 + 3 = -7
    y, grads = _run(a, b, x, h0, seed=np.ones((3, 1)))
    np.testing.assert_array_equal(y, [[4.0], [10.0], [-7.0]])
    g = np.array([[1 + 2.0 * 0.0], [0.0], [1.0]])   # g2 = 1, g1 = 1 + a2 g2 = 0, g0 = 1 + a1 g1 = 1
    np.testing.assert_allclose(grads[0], g * np.array([[4.0], [4.0], [10.0]]))
    np.testing.assert_allclose(grads[1], g * x)
    np.testing.assert_allclose(grads[2], g * b)
    np.testing.assert_allclose(grads[3], a[0] * g[0])


@pytest.mark.parametrize("coef", ["fixed", "token"])
def test_zero_steps(coef):
    D = 3
    c = np.full(D, 0.5) if coef == "fixed" else np.zeros((0, D))
    y, grads = _run(c, c, np.zeros((0, D)), np.ones(D), seed=np.zeros((0, D)))
    assert y.shape == (0, D)
    assert [g.shape for g in grads] == [c.shape, c.shape, (0, D), (D,)]
    for g in grads:
        assert np.all(g == 0)


def test_zero_state_width():
    y, grads = _run(np.zeros(0), np.zeros(0), np.zeros((4, 0)), np.zeros(0), seed=np.zeros((4, 0)))
    assert y.shape == (4, 0)
    assert [g.shape for g in grads] == [(0,), (0,), (4, 0), (0,)]
    y, grads = _run(np.zeros((4, 0)), np.zeros(0), np.zeros((2, 4, 0)), np.zeros((2, 0)),
                    seed=np.zeros((2, 4, 0)))
    assert y.shape == (2, 4, 0) and grads[0].shape == (4, 0)


def test_zero_batch():
    y, grads = _run(np.full(3, 0.5), np.ones(3), np.zeros((0, 4, 3)), np.zeros((0, 3)),
                    seed=np.zeros((0, 4, 3)))
    assert y.shape == (0, 4, 3)
    assert np.all(grads[0] == 0) and grads[0].shape == (3,)


def _coefs(rng, form, B, T, D):
    shape = {"fixed": (D,), "token": (T, D), "per_sample": (B, T, D)}[form]
    return rng.uniform(-0.9, 0.9, size=shape)


@pytest.mark.parametrize("form", ["fixed", "token", "per_sample"])
def test_batch_equals_single(form):
    rng = np.random.default_rng(5)
    B, T, D = 3, 6, 4
    a, b = _coefs(rng, form, B, T, D), _coefs(rng, form, B, T, D)
    x = rng.standard_normal((B, T, D))
    h0 = rng.standard_normal((B, D))
    g = rng.standard_normal((B, T, D))
    y, grads = _run(a, b, x, h0, seed=g)
    da_sum, db_sum = 0.0, 0.0
    for i in range(B):
        ai = a[i] if form == "per_sample" else a
        bi = b[i] if form == "per_sample" else b
        yi, gi = _run(ai, bi, x[i], h0[i], seed=g[i])
        np.testing.assert_array_equal(y[i], yi)
        np.testing.assert_allclose(grads[2][i], gi[2], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(grads[3][i], gi[3], rtol=1e-6, atol=1e-7)
        if form == "per_sample":
            np.testing.assert_allclose(grads[0][i], gi[0], rtol=1e-6, atol=1e-7)
        else:
            da_sum, db_sum = da_sum + gi[0], db_sum + gi[1]
    if form != "per_sample":
        np.testing.assert_allclose(grads[0], da_sum, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grads[1], db_sum, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("forms,B", [(("fixed", "fixed"), None), (("token", "token"), None),
                                     (("fixed", "token"), None), (("token", "fixed"), 2),
                                     (("per_sample", "fixed"), 2), (("token", "per_sample"), 3)])
def test_vjp_finite_differences(forms, B):
    rng = np.random.default_rng(len(forms[0]) * 7 + (B or 0))
    T, D = 5, 3
    Bn = B or 1
    a, b = (_coefs(rng, f, Bn, T, D) for f in forms)
    x = rng.standard_normal((Bn, T, D) if B else (T, D))
    h0 = rng.standard_normal((Bn, D) if B else (D,))
    xs = [v.astype(np.float32).astype(np.float64) for v in (a, b, x, h0)]
    g = rng.uniform(-1, 1, size=x.shape).astype(np.float32).astype(np.float64)
    _, grads = _run(*xs, seed=g)
    for k in range(4):
        coords, est = finite_diff_vjp(reference.selective_scan, xs, g, k, max_coords=64, rng=rng)
        np.testing.assert_allclose(grads[k].reshape(-1)[coords], est, rtol=1e-4, atol=1e-5,
                                   err_msg=f"input {k}")


def test_long_sequence_matches_reference():
    rng = np.random.default_rng(11)
    T, D = 257, 70
    a = rng.uniform(-0.99, 0.99, size=(T, D)).astype(np.float32).astype(np.float64)
    b = rng.standard_normal(D).astype(np.float32).astype(np.float64)
    x = rng.standard_normal((T, D)).astype(np.float32).astype(np.float64)
    h0 = rng.standard_normal(D).astype(np.float32).astype(np.float64)
    y, _ = _run(a, b, x, h0)
    np.testing.assert_allclose(y, reference.selective_scan(a, b, x, h0), rtol=1e-4, atol=1e-4)


def test_shape_errors():
    D = 3
    with pytest.raises(ValueError, match=r"selective_scan.*h0.*\(3,\).*\(4,\)"):
        _run(np.ones(D), np.ones(D), np.ones((5, D)), np.ones(4))
    with pytest.raises(ValueError, match=r"selective_scan.*a must have shape"):
        _run(np.ones(4), np.ones(D), np.ones((5, D)), np.ones(D))
    with pytest.raises(ValueError, match=r"selective_scan.*b must have shape"):
        _run(np.ones(D), np.ones((4, D)), np.ones((5, D)), np.ones(D))
    with pytest.raises(ValueError, match=r"selective_scan.*a must have shape"):
        _run(np.ones((2, D)), np.ones(D), np.ones((2, 5, D)), np.ones((2, D)))  # (B, D) is not a form
    with pytest.raises(ValueError, match=r"selective_scan.*x must have rank"):
        _run(np.ones(D), np.ones(D), np.ones(D), np.ones(D))
    with pytest.raises(ValueError, match=r"selective_scan.*h0"):
        _run(np.ones(D), np.ones(D), np.ones((2, 5, D)), np.ones(D))
