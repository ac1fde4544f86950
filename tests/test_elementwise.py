"""Elementwise edge cases beyond the registry-driven tests: NaN, kinks, ties, overflow, errors."""
import numpy as np
import pytest

from torchlean.buffer import AnyBuffer
from torchlean._generated import ops


def _b(a):
    return AnyBuffer.from_numpy(np.asarray(a, dtype=np.float32))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum"])
def test_nan_propagates_binary(name):
    a = _b([np.nan, 1.0, 2.0])
    b = _b([1.0, np.nan, 3.0])
    y = getattr(ops, name)(a, b).to_numpy()
    assert np.isnan(y[0]) and np.isnan(y[1]) and np.isfinite(y[2])


@pytest.mark.parametrize("name", ["exp", "abs", "sqrt", "log", "sigmoid", "tanh", "softplus", "gelu",
                                  "relu", "reciprocal"])
def test_nan_propagates_unary(name):
    y = getattr(ops, name)(_b([np.nan, 0.5])).to_numpy()
    assert np.isnan(y[0]) and np.isfinite(y[1])


def test_overflow_safe():
    x = _b([-1000.0, -100.0, 0.0, 100.0, 1000.0])
    s = ops.sigmoid(x).to_numpy()
    np.testing.assert_allclose(s, [0, 0, 0.5, 1, 1], atol=1e-30)
    t = ops.tanh(x).to_numpy()
    np.testing.assert_allclose(t, [-1, -1, 0, 1, 1])
    sp = ops.softplus(x).to_numpy()
    np.testing.assert_allclose(sp, [0, 0, np.log(2), 100, 1000], rtol=1e-6, atol=1e-30)
    assert np.all(np.isfinite(ops.safe_log(x).to_numpy()))


def test_kink_conventions():
    x = _b([-1.0, 0.0, 1.0])
    g = _b([1.0, 1.0, 1.0])
    np.testing.assert_array_equal(ops.abs_backward(x, g).to_numpy(), [-1, 0, 1])
    np.testing.assert_array_equal(ops.relu_backward(x, g).to_numpy(), [0, 0, 1])
    np.testing.assert_array_equal(ops.sqrt_backward(x, g).to_numpy(), [0, 0, 0.5])
    np.testing.assert_array_equal(ops.clamp_backward(x, g, lo=-1.0, hi=1.0).to_numpy(), [0, 1, 0])


def test_max_backward_kernels():
    a, b, g = _b([1.0, 2.0, 3.0]), _b([1.0, 1.0, 4.0]), _b([2.0, 2.0, 2.0])
    np.testing.assert_array_equal(ops.maximum_backward(a, b, g).to_numpy(), [1, 2, 0])
    np.testing.assert_array_equal(ops.minimum_backward(a, b, g).to_numpy(), [1, 0, 2])


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum"])
def test_bad_broadcast(name):
    with pytest.raises(ValueError) as e:
        getattr(ops, name)(_b(np.zeros((2, 3))), _b(np.zeros((4,))))
    msg = str(e.value)
    assert name in msg and "(2, 3)" in msg and "(4,)" in msg


def test_bad_attrs():
    x = _b([1.0])
    for bad in [float("nan"), float("inf"), True, "1"]:
        with pytest.raises((TypeError, ValueError), match="scale"):
            ops.scale(x, c=bad)
    with pytest.raises((TypeError, ValueError), match="clamp"):
        ops.clamp(x, lo=float("nan"), hi=1.0)
    with pytest.raises((TypeError, ValueError), match="axpy"):
        ops.axpy(x, x, c=float("inf"))


def test_broadcast_values():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1.0, 2.0, 4.0], dtype=np.float32)
    np.testing.assert_allclose(ops.axpy(_b(a), _b(b), c=0.5).to_numpy(), a + 0.5 * b)
    np.testing.assert_allclose(ops.div(_b(a), _b(b)).to_numpy(), a / b)
