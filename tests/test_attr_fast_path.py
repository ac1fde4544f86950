"""Generated ops use a plain attr value that passes its check as it is and send anything else to
_opsupport.attr: both paths must give the same numbers, and every bad value must still raise the
error naming the op and the attr."""
from __future__ import annotations

import math

import numpy as np
import pytest

from codegen.gen import attr_fast_test
from codegen.registry import Attr
from torchlean._generated import ops
from torchlean.buffer import AnyBuffer

X = np.array([1.5, -2.25, 3.0, 0.0, -7.0], np.float32)


def _scale(c):
    x = AnyBuffer.from_numpy(X)
    y = ops.scale(x, c=c)
    try:
        return y.to_numpy()
    finally:
        x.release(), y.release()


@pytest.mark.parametrize("c", [2.5, np.float32(2.5), np.float64(2.5), 5, np.int64(5), -0.0])
def test_float_attr_fast_and_converted_agree(c):
    want = (X.astype(np.float64) * float(c)).astype(np.float32)
    np.testing.assert_array_equal(_scale(c), want)


@pytest.mark.parametrize("c, err, msg", [
    (math.inf, ValueError, "scale: c must be a finite number"),
    (math.nan, ValueError, "scale: c must be a finite number"),
    (np.float64(-math.inf), ValueError, "scale: c must be a finite number"),
    (True, TypeError, "scale: c must be a real number, got bool"),
    ("2", TypeError, "scale: c must be a real number, got str"),
    (None, TypeError, "scale: c must be a real number, got NoneType"),
])
def test_float_attr_bad_values_still_raise(c, err, msg):
    with pytest.raises(err, match=msg):
        _scale(c)


def _adam(step, decoupled=False):
    """One Adam step on a 3-element parameter; returns the new parameter."""
    p = AnyBuffer.from_numpy(np.array([1.0, -2.0, 0.5], np.float32))
    g = AnyBuffer.from_numpy(np.array([0.25, 0.5, -1.0], np.float32))
    m, v = AnyBuffer.zeros((3,)), AnyBuffer.zeros((3,))
    try:
        ops.adam_step(p, g, m, v, lr=0.1, step=step, decoupled=decoupled)
        return p.to_numpy()
    finally:
        for b in (p, g, m, v):
            b.release()


def test_int_and_bool_attrs_fast_and_converted_agree():
    base = _adam(1)
    # the first Adam step moves each weight by lr * sign(g) (bias correction cancels) up to eps
    np.testing.assert_allclose(base, [0.9, -2.1, 0.6], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(_adam(np.int64(1)), base)
    np.testing.assert_array_equal(_adam(1, decoupled=np.bool_(False)), base)
    np.testing.assert_array_equal(_adam(1, decoupled=0), base)


@pytest.mark.parametrize("step, err, msg", [
    (0, ValueError, "adam_step: step must be > 0, got 0"),
    (-3, ValueError, "adam_step: step must be > 0, got -3"),
    (True, TypeError, "adam_step: step must be an int, got bool"),
    (1.0, TypeError, "adam_step: step must be an int, got float"),
])
def test_int_attr_bad_values_still_raise(step, err, msg):
    with pytest.raises(err, match=msg):
        _adam(step)


def test_bool_attr_bad_value_still_raises():
    with pytest.raises(TypeError, match="adam_step: decoupled must be True or False, got str"):
        _adam(1, decoupled="yes")


def test_prob_attr_bounds_both_ways():
    for p in (1.5, -0.25, math.nan):
        with pytest.raises(ValueError, match=r"bernoulli_mask: p must be in \[0, 1\]"):
            ops.bernoulli_mask(n=4, key=1, p=p)
    a = ops.bernoulli_mask(n=4, key=1, p=1.0)
    b = ops.bernoulli_mask(n=4, key=1, p=np.float32(1.0))
    np.testing.assert_array_equal(a.to_numpy(), np.ones(4, np.float32))
    np.testing.assert_array_equal(b.to_numpy(), np.ones(4, np.float32))
    a.release(), b.release()


@pytest.mark.parametrize("kind, check, want", [
    ("float", "finite", "x.__class__ is float and _isfinite(x)"),
    ("float", "prob", "x.__class__ is float and 0.0 <= x <= 1.0"),
    ("int", "positive", "x.__class__ is int and x > 0"),
    ("ints", None, "x.__class__ is int"),
    ("bool", None, "x.__class__ is bool"),
    ("mask", None, "x is None"),
    ("float", "finite_nonzero", None),   # the float32 rounding test stays in attr
    ("int", "finite", None),
    ("shape", None, None),               # numpy ints in a tuple must become ints
    ("index", None, None),
    ("key", None, None),
])
def test_attr_fast_test_forms(kind, check, want):
    assert attr_fast_test(Attr("x", kind, check=check)) == want
