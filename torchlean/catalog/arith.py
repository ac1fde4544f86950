"""Arithmetic spellings torch keeps beside the operators: rsub, true_divide, floor_divide,
reflected division and modulo, and angle (the argument of a real number: 0 or pi)."""
from __future__ import annotations

import math

from torchlean import composite
from torchlean.catalog import _common as c

METHODS = ("rsub", "true_divide", "floor_divide", "__rdiv__", "__rmod__", "angle")
INPLACE = ("true_divide", "floor_divide")
EXPORTS = {"torch": ("rsub", "true_divide", "floor_divide", "angle")}


def rsub(input, other, *, alpha=1):
    """other - alpha * input."""
    x = c.tensor("rsub", input)
    return c.operand(x.session, "rsub", other) - (x if alpha == 1 else x * alpha)


def true_divide(input, other):
    x = c.tensor("true_divide", input)
    return x.session.op("div", x, c.operand(x.session, "true_divide", other))


def floor_divide(input, other):
    """input / other rounded toward -inf (torch.floor_divide; gradient zero)."""
    x = c.tensor("floor_divide", input)
    o = c.operand(x.session, "floor_divide", other)
    c.broadcast_shapes("floor_divide", x.shape, o.shape)
    return composite.div(x, o, "floor")


def __rdiv__(self, other):
    return self.__rtruediv__(other)


def __rmod__(self, other):
    """other % self: torch's remainder (the sign of the divisor), Tensor.remainder."""
    return c.operand(self.session, "__rmod__", other).remainder(self)


def angle(input):
    """pi for negative x, 0 otherwise (NaN stays NaN); gradient zero, as torch for reals."""
    x = c.tensor("angle", input)
    s = x.session
    with_pi = s.op("where", x.lt(0.0), math.pi, 0.0)
    return s.op("where", x.ne(x), x.detach(), with_pi)
