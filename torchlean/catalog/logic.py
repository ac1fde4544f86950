"""Predicates, logical operators and mask-driven elementwise ops. Predicates of float Tensors
are 0/1 float32 Tensors on the device, as torchlean's comparisons (x < y) are; predicates of
int64/bool tensors (IntTensor) are bool IntTensors. Whole-tensor answers (allclose, equal)
are Python bools, as in torch."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c
from torchlean.int_tensor import IntTensor

METHODS = ("isnan", "isinf", "isfinite", "isposinf", "isneginf", "isreal", "isclose",
           "allclose", "equal", "logical_and", "logical_or", "logical_xor", "logical_not",
           "masked_fill", "clamp_min", "clamp_max", "fmax", "fmin", "lerp", "addcmul", "addcdiv",
           "isin")
INT_METHODS = ("logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf",
               "isfinite", "isposinf", "isneginf", "isreal", "isin", "equal")
INPLACE = ("masked_fill", "clamp_min", "clamp_max", "lerp", "addcmul", "addcdiv",
           "logical_and", "logical_or", "logical_xor", "logical_not")
EXPORTS = {"torch": ("isnan", "isinf", "isfinite", "isposinf", "isneginf", "isreal", "isclose",
                     "allclose", "equal", "logical_and", "logical_or", "logical_xor",
                     "logical_not", "masked_fill", "clamp_min", "clamp_max", "fmax", "fmin",
                     "lerp", "addcmul", "addcdiv", "isin")}


def _host_predicate(x, f):
    return IntTensor(f(x._a))


def _float(op, x):
    return c.tensor(op, x)


def isnan(input):
    if isinstance(input, IntTensor):
        return _host_predicate(input, lambda a: np.zeros(a.shape, bool))
    x = _float("isnan", input)
    return x.ne(x)


def isinf(input):
    if isinstance(input, IntTensor):
        return _host_predicate(input, lambda a: np.zeros(a.shape, bool))
    return _float("isinf", input).abs().eq(math.inf)


def isfinite(input):
    """x - x is 0 exactly for finite x and NaN for inf or NaN."""
    if isinstance(input, IntTensor):
        return _host_predicate(input, lambda a: np.ones(a.shape, bool))
    x = _float("isfinite", input)
    return (x - x).eq(0.0)


def isposinf(input):
    if isinstance(input, IntTensor):
        return _host_predicate(input, lambda a: np.zeros(a.shape, bool))
    return _float("isposinf", input).eq(math.inf)


def isneginf(input):
    if isinstance(input, IntTensor):
        return _host_predicate(input, lambda a: np.zeros(a.shape, bool))
    return _float("isneginf", input).eq(-math.inf)


def isreal(input):
    if isinstance(input, IntTensor):
        return _host_predicate(input, lambda a: np.ones(a.shape, bool))
    x = _float("isreal", input)
    return x.session.tensor(np.ones(x.shape, np.float32))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol |b| where both are finite, or a == b (equal infinities), or both
    NaN when equal_nan."""
    a = _float("isclose", input)
    b = c.operand(a.session, "isclose", other)
    c.broadcast_shapes("isclose", a.shape, b.shape)
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol {rtol} and atol {atol} must be non-negative")
    near = (a - b).abs().le(b.abs() * float(rtol) + float(atol))
    near = near * isfinite(a) * isfinite(b)
    out = near.maximum(a.eq(b))
    if equal_nan:
        out = out.maximum(isnan(a) * isnan(b))
    return out


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    close = isclose(input, other, rtol, atol, equal_nan)
    return bool(math.prod(close.shape) == 0 or close.amin().item() == 1.0)


def equal(input, other):
    """True when both have the same shape and equal elements (NaN is never equal)."""
    if isinstance(input, IntTensor) or isinstance(other, IntTensor):
        a, b = np.asarray(input), np.asarray(other)
        return a.shape == b.shape and bool(np.array_equal(a, b))
    a = _float("equal", input)
    b = c.operand(a.session, "equal", other)
    if tuple(a.shape) != tuple(b.shape):
        return False
    return bool(math.prod(a.shape) == 0 or a.eq(b).amin().item() == 1.0)


def _logical(op, input, other, f_host, f_dev):
    if isinstance(input, IntTensor) or (other is not None and isinstance(other, IntTensor)
                                        and not hasattr(input, "session")):
        a = np.asarray(input) != 0
        if other is None:
            return IntTensor(f_host(a, None))
        b = c.host_mask(op, other)
        c.broadcast_shapes(op, a.shape, b.shape)
        return IntTensor(f_host(a, b))
    x = _float(op, input)
    nx = x.ne(0.0)
    if other is None:
        return f_dev(nx, None)
    o = c.mask(x.session, op, other, "other")
    c.broadcast_shapes(op, x.shape, o.shape)
    return f_dev(nx, o.ne(0.0))


def logical_and(input, other):
    return _logical("logical_and", input, other, np.logical_and, lambda a, b: a * b)


def logical_or(input, other):
    return _logical("logical_or", input, other, np.logical_or, lambda a, b: a.maximum(b))


def logical_xor(input, other):
    return _logical("logical_xor", input, other, np.logical_xor, lambda a, b: a.ne(b))


def logical_not(input):
    return _logical("logical_not", input, None, lambda a, b: ~a, lambda a, b: 1.0 - a)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Membership of each element in test_elements (computed on the host)."""
    if isinstance(elements, IntTensor):
        return IntTensor(np.isin(elements._a, np.asarray(test_elements), invert=invert))
    x = _float("isin", elements)
    t = np.asarray(test_elements.numpy() if hasattr(test_elements, "numpy") else test_elements)
    return x.session.tensor(np.isin(x.numpy(), t, invert=invert).astype(np.float32))


def masked_fill(input, mask, value):
    """value where mask is true (mask broadcasts to input's shape), input elsewhere; the
    gradient reaches input where mask is false and a Tensor value where it is true."""
    x = _float("masked_fill", input)
    m = c.mask(x.session, "masked_fill", mask)
    if c.broadcast_shapes("masked_fill", m.shape, x.shape) != tuple(x.shape):
        raise RuntimeError(f"masked_fill: mask of shape {tuple(m.shape)} does not broadcast "
                           f"to the input's shape {tuple(x.shape)}")
    if hasattr(value, "shape") and len(value.shape) != 0:
        raise RuntimeError(f"masked_fill: value must be a number or a 0-d tensor, got shape "
                           f"{tuple(value.shape)}")
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"masked_fill: value must be a number, got {type(value).__name__}")
    if isinstance(value, c.NUMBER) or isinstance(value, bool):
        # a number goes to the kernel as an attribute: no value tensor to upload and broadcast
        return x.session.op("fill_masked", m, x, value=float(value))
    v = c.operand(x.session, "masked_fill", value, "value")
    return x.session.op("where", m, v, x)


def clamp_min(input, min):  # noqa: A002 - torch's name
    return composite.clamp(_float("clamp_min", input), min=min, op="clamp_min")


def clamp_max(input, max):  # noqa: A002 - torch's name
    return composite.clamp(_float("clamp_max", input), max=max, op="clamp_max")


def _nan_ignoring(op, input, other, kind):
    a = _float(op, input)
    b = c.operand(a.session, op, other)
    c.broadcast_shapes(op, a.shape, b.shape)
    s = a.session
    m = s.op(kind, a, b)
    return s.op("where", isnan(b), a, s.op("where", isnan(a), b, m))


def fmax(input, other):
    """Elementwise maximum that ignores a NaN operand (NaN only where both are)."""
    return _nan_ignoring("fmax", input, other, "maximum")


def fmin(input, other):
    return _nan_ignoring("fmin", input, other, "minimum")


def lerp(input, end, weight):
    """start + weight (end - start) for weight < 0.5, end - (end - start)(1 - weight) from 0.5
    (torch's two-sided form: exact at weight 0 and 1)."""
    a = _float("lerp", input)
    s = a.session
    b = c.operand(s, "lerp", end, "end")
    w = c.operand(s, "lerp", weight, "weight")
    c.broadcast_shapes("lerp", a.shape, b.shape, w.shape)
    d = b - a
    return s.op("where", w.lt(0.5), a + w * d, b - d * (1.0 - w))


def addcmul(input, tensor1, tensor2, *, value=1):
    x = _float("addcmul", input)
    s = x.session
    t1, t2 = c.operand(s, "addcmul", tensor1, "tensor1"), c.operand(s, "addcmul", tensor2, "tensor2")
    c.broadcast_shapes("addcmul", x.shape, t1.shape, t2.shape)
    p = t1 * t2
    return x + (p if value == 1 else p * float(value))


def addcdiv(input, tensor1, tensor2, *, value=1):
    x = _float("addcdiv", input)
    s = x.session
    t1, t2 = c.operand(s, "addcdiv", tensor1, "tensor1"), c.operand(s, "addcdiv", tensor2, "tensor2")
    c.broadcast_shapes("addcdiv", x.shape, t1.shape, t2.shape)
    q = s.op("div", t1, t2)
    return x + (q if value == 1 else q * float(value))
