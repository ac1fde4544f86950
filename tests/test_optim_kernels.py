"""Fused optimizer kernels vs float64 NumPy versions of the torch.optim formulas."""
import numpy as np
import pytest

from torchlean.buffer import AnyBuffer
from torchlean._generated import ops


def _b(a):
    return AnyBuffer.from_numpy(np.asarray(a, dtype=np.float32))


def sgd_ref(p, g, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, first=False):
    d = g + weight_decay * p
    if momentum != 0.0:
        buf = d.copy() if first else momentum * buf + (1 - dampening) * d
        d = d + momentum * buf if nesterov else buf
    return p - lr * d, buf


def adam_ref(p, g, m, v, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False, step=1):
    if decoupled:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    mhat = m / (1 - beta1 ** step)
    vhat = v / (1 - beta2 ** step)
    return p - lr * mhat / (np.sqrt(vhat) + eps), m, v


SGD_CASES = [dict(lr=0.1), dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.9, nesterov=True),
             dict(lr=0.01, momentum=0.8, dampening=0.3, weight_decay=0.01)]


@pytest.mark.parametrize("kw", SGD_CASES)
@pytest.mark.parametrize("n", [1, 37, 1000])
def test_sgd_steps(kw, n):
    rng = np.random.default_rng(n)
    p = rng.standard_normal(n)
    buf = np.zeros(n)
    P, B = _b(p), _b(buf)
    for t in range(4):
        g = rng.standard_normal(n)
        out = ops.sgd_step(P, _b(g), B, first=(t == 0), **kw)
        assert out[0] is P and out[1] is B
        p, buf = sgd_ref(p, g, buf, first=(t == 0), **kw)
    np.testing.assert_allclose(P.to_numpy(), p, rtol=1e-5, atol=1e-5)
    if kw.get("momentum"):
        np.testing.assert_allclose(B.to_numpy(), buf, rtol=1e-5, atol=1e-5)


ADAM_CASES = [dict(lr=1e-2), dict(lr=1e-2, weight_decay=0.1), dict(lr=1e-2, weight_decay=0.1, decoupled=True),
              dict(lr=3e-3, beta1=0.8, beta2=0.99, eps=1e-6)]


@pytest.mark.parametrize("kw", ADAM_CASES)
@pytest.mark.parametrize("n", [1, 37, 1000])
def test_adam_steps(kw, n):
    rng = np.random.default_rng(n + 1)
    p = rng.standard_normal(n)
    m = np.zeros(n)
    v = np.zeros(n)
    P, M, V = _b(p), _b(m), _b(v)
    for step in range(1, 6):
        g = rng.standard_normal(n)
        out = ops.adam_step(P, _b(g), M, V, step=step, **kw)
        assert out[0] is P and out[1] is M and out[2] is V
        p, m, v = adam_ref(p, g, m, v, step=step, **kw)
    np.testing.assert_allclose(P.to_numpy(), p, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(M.to_numpy(), m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(V.to_numpy(), v, rtol=1e-5, atol=1e-7)


def test_shape_mismatch():
    with pytest.raises(ValueError, match="sgd_step"):
        ops.sgd_step(_b(np.zeros(3)), _b(np.zeros(4)), _b(np.zeros(3)), lr=0.1)
    with pytest.raises(ValueError, match="adam_step"):
        ops.adam_step(_b(np.zeros(3)), _b(np.zeros(3)), _b(np.zeros(3)), _b(np.zeros(2)), lr=0.1, step=1)


def test_bad_step_and_lr():
    z = [_b(np.zeros(3)) for _ in range(4)]
    with pytest.raises((ValueError, TypeError), match="adam_step"):
        ops.adam_step(*z, lr=0.1, step=0)
    with pytest.raises((ValueError, TypeError), match="sgd_step"):
        ops.sgd_step(*z[:3], lr=float("nan"))
