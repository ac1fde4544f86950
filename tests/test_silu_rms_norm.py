"""silu and rms_norm, the registry ops behind F.silu / x.silu() and nn.RMSNorm: float64 NumPy
references, closed-form gradients, special values and bad shapes (the registry suite adds
finite differences for every test case in ops.yaml)."""
import numpy as np
import pytest

import torchlean as tl
from torchlean import nn
from torchlean.nn import functional as F
from torchlean._generated import ops

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -104.0, -90.0, 30.0, 88.0, -3.0, 1e-30],
                   np.float32)


def _sig(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))   # overflow-free float64 sigmoid


def _silu_ref(x):
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore"):
        return x * _sig(x)                  # -inf * 0 = NaN at -inf, as torch


def _silu_grad_ref(x):
    x = np.asarray(x, np.float64)
    s = _sig(x)
    with np.errstate(invalid="ignore"):
        d = s * (1.0 + x * (1.0 - s))
    return np.where(np.isneginf(x), 0.0, np.where(np.isposinf(x), 1.0, d))


def test_silu_forward_and_gradient_match_float64_on_special_and_random_values():
    x = np.concatenate([SPECIAL, np.random.default_rng(3).uniform(-12, 12, 1001).astype(np.float32)])
    g = np.random.default_rng(4).uniform(-1, 1, x.size).astype(np.float32)
    y = ops.silu(tl.AnyBuffer.from_numpy(x)).to_numpy(np.float64)
    dx = ops.silu_backward(tl.AnyBuffer.from_numpy(x), tl.AnyBuffer.from_numpy(g)).to_numpy(np.float64)
    want, dwant = _silu_ref(x), g * _silu_grad_ref(x)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(x) | np.isneginf(x))
    np.testing.assert_array_equal(np.isnan(dx), np.isnan(x))
    ok = ~np.isnan(x) & ~np.isneginf(x)
    np.testing.assert_allclose(y[ok], want[ok], rtol=4e-7, atol=1e-37)
    np.testing.assert_allclose(dx[ok], dwant[ok], rtol=2e-6, atol=1e-6)
    assert np.isnan(y[2])                    # silu(-inf) = -inf * sigmoid(-inf) = NaN, as torch
    assert dx[2] == 0.0                      # the gradient keeps its limit there
    assert y[5] == 0.0 and np.signbit(y[5])  # silu(-104) = -104 * 0 = -0 (sigmoid underflows)
    assert y[1] == np.inf and dx[1] == g[1]  # +inf passes through with slope 1


def test_silu_is_one_formula_in_every_mode():
    """tl.set_exact picks a schedule, never a formula: silu's bits do not depend on the mode."""
    x = tl.AnyBuffer.from_numpy(np.random.default_rng(5).uniform(-9, 9, 70001).astype(np.float32))
    base = ops.silu(x).to_numpy()
    tl.set_exact(True)
    try:
        exact = ops.silu(x).to_numpy()
    finally:
        tl.set_exact(False)
    np.testing.assert_array_equal(base.view(np.uint32), exact.view(np.uint32))


def test_f_silu_and_tensor_method_give_the_op_and_its_gradient():
    xv = np.array([[-3.0, -0.5, 0.0], [0.25, 2.0, 7.0]], np.float32)
    x = tl.tensor(xv, requires_grad=True)
    y = F.silu(x)
    np.testing.assert_allclose(y.numpy(), _silu_ref(xv), rtol=1e-6)
    np.testing.assert_array_equal(x.silu().numpy(), y.numpy())
    y.sum().backward()
    np.testing.assert_allclose(x.grad, _silu_grad_ref(xv), rtol=1e-5)


def _rms_ref(x, w, eps, axes):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps) * w


@pytest.mark.parametrize("shape,ns,affine", [((2, 3, 5), (5,), True), ((4, 3, 2), (3, 2), True),
                                             ((7,), (7,), False), ((1, 1), (1,), True)])
def test_rms_norm_module_matches_float64_and_its_gradients(shape, ns, affine):
    rng = np.random.default_rng(len(shape) * 10 + len(ns))
    xv = rng.standard_normal(shape).astype(np.float32)
    m = nn.RMSNorm(ns, eps=1e-5, elementwise_affine=affine)
    if affine:
        m.weight = tl.Parameter(rng.uniform(0.5, 1.5, ns).astype(np.float32), name="weight")
    w = m.weight.numpy().astype(np.float64) if affine else 1.0
    axes = tuple(range(len(shape) - len(ns), len(shape)))
    x = tl.tensor(xv, requires_grad=True)
    gv = rng.uniform(-1, 1, shape).astype(np.float32)
    y = m(x)
    np.testing.assert_allclose(y.numpy(), _rms_ref(xv, w, 1e-5, axes), rtol=2e-6, atol=1e-6)
    (y * tl.tensor(gv)).sum().backward()
    # closed form: dx = r (g w - xhat mean(g w xhat)), dweight = sum over rows of g xhat
    x64 = xv.astype(np.float64)
    r = 1.0 / np.sqrt((x64 * x64).mean(axis=axes, keepdims=True) + 1e-5)
    xh, dxh = x64 * r, gv * w
    dx = r * (dxh - xh * (dxh * xh).mean(axis=axes, keepdims=True))
    np.testing.assert_allclose(x.grad, dx, rtol=1e-4, atol=1e-5)
    if affine:
        lead = tuple(range(len(shape) - len(ns)))
        np.testing.assert_allclose(m.weight.grad, (gv * xh).sum(axis=lead), rtol=1e-4, atol=1e-5)


def test_rms_norm_default_mode_is_exact_mode_on_the_stub_and_near_it_on_cuda():
    """The stub has one schedule (rule 4); CUDA's default one sums by tl_block_sum instead."""
    x = tl.AnyBuffer.from_numpy(np.random.default_rng(6).standard_normal((37, 300)).astype(np.float32))
    w = tl.AnyBuffer.from_numpy(np.linspace(0.5, 2.0, 300, dtype=np.float32))
    base = [b.to_numpy() for b in ops.rms_norm(x, w)]
    tl.set_exact(True)
    try:
        exact = [b.to_numpy() for b in ops.rms_norm(x, w)]
    finally:
        tl.set_exact(False)
    for a, b in zip(base, exact):
        if tl.backend() == "stub":
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
        else:
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


def test_rms_norm_nan_row_stays_in_its_row_and_zero_row_gives_zero():
    xv = np.ones((3, 4), np.float32)
    xv[0, 2] = np.nan
    xv[2] = 0.0
    y, inv = ops.rms_norm(tl.AnyBuffer.from_numpy(xv), tl.AnyBuffer.from_numpy(np.ones(4, np.float32)))
    y = y.to_numpy()
    assert np.isnan(y[0]).all() and np.isfinite(y[1:]).all()
    np.testing.assert_array_equal(y[2], 0.0)
    np.testing.assert_allclose(y[1], 1.0 / np.sqrt(1.0 + 1.1920928955078125e-07), rtol=1e-7)


def test_rms_norm_bad_weight_names_the_op_and_shapes():
    x = tl.AnyBuffer.from_numpy(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"rms_norm: expected weight of shape \(4,\).*got weight \(3,\)"):
        ops.rms_norm(x, tl.AnyBuffer.from_numpy(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match=r"RMSNorm: expected input with trailing shape \(5,\)"):
        nn.RMSNorm(5)(tl.tensor(np.ones((2, 4), np.float32)))
