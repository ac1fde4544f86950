"""Tensor's torch methods whose work is composed from registry ops in torchlean.composite:
reductions over any dims, softmax over any dim, clamp's min/max, rounded division, where,
arg/max/min over a dim, pow. A mixin of torchlean.tensor.Tensor: each method is torch's
signature forwarded to its composite, so Tensor itself reads as the handle and its operators.
"""
from __future__ import annotations

from torchlean import composite as _composite


class ComposedMethods:
    """torch's signatures over torchlean.composite (self is a Tensor)."""

    __slots__ = ()

    def gather(self, dim, index):
        """torch's x.gather(dim, index) (torchlean.composite.gather)."""
        return _composite.gather(self, dim, index)

    def sum(self, dim=None, keepdim=False, *, axis=None):
        return _composite.reduce(self, "sum", axis if dim is None else dim, keepdim)

    def mean(self, dim=None, keepdim=False, *, axis=None):
        return _composite.reduce(self, "mean", axis if dim is None else dim, keepdim)

    def amax(self, dim=None, keepdim=False):
        return _composite.reduce(self, "amax", dim, keepdim)

    def amin(self, dim=None, keepdim=False):
        return _composite.reduce(self, "amin", dim, keepdim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return _composite.var(self, dim, unbiased, keepdim, correction)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return _composite.std(self, dim, unbiased, keepdim, correction)

    def logsumexp(self, dim, keepdim=False):
        return _composite.logsumexp(self, dim, keepdim)

    def square(self):
        return self * self

    def rsqrt(self):
        return self.session.op("reciprocal", self.session.op("sqrt", self))

    # torch's signatures over registry ops (softmax over any dim, clamp's min/max, matmul's
    # 1-D and batched operands, rounded division); composed in torchlean.composite
    def softmax(self, dim=-1):
        return _composite.softmax(self, dim, "softmax")

    def log_softmax(self, dim=-1):
        return _composite.softmax(self, dim, "log_softmax")

    def clamp(self, min=None, max=None, *, lo=None, hi=None):  # noqa: A002 - torch's names
        """torch's clamp(min, max); the registry's lo=/hi= keywords are accepted too."""
        return _composite.clamp(self, lo if min is None else min, hi if max is None else max)

    clip = clamp

    def matmul(self, other):
        return self @ other

    def div(self, other, *, rounding_mode=None):
        return _composite.div(self, other, rounding_mode)

    def __floordiv__(self, o):
        return _composite.div(self, o, "floor")

    def __rfloordiv__(self, o):
        return _composite.rdiv(self, o, "floor")

    def floor(self):
        return _composite.floor(self)

    def trunc(self):
        return _composite.trunc(self)

    # where, arg/max/min over a dim, pow, erf
    def where(self, condition, other):
        """torch's x.where(cond, y): torchlean.where(cond, x, y)."""
        return _composite.where(self.session, condition, self, other)

    def argmax(self, dim=None, keepdim=False):
        """Indices of the maxima as an int64 NumPy array (first on ties; a NaN wins)."""
        return _composite.argreduce(self, "argmax", dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return _composite.argreduce(self, "argmin", dim, keepdim)

    def max(self, dim=None, keepdim=False):
        """No dim: the 0-d maximum. dim: (values, indices) with int64 NumPy indices; the
        gradient of values goes to the chosen index only. A Tensor: elementwise maximum."""
        return _composite.max_min(self, "max", dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return _composite.max_min(self, "min", dim, keepdim)

    def pow(self, exponent):
        return _composite.power(self, exponent)

    def __pow__(self, exponent):
        return _composite.power(self, exponent)

    def __rpow__(self, base):
        return self.session.op("pow", self._other(base), self)

    def erf(self):
        return self.session.op("erf", self)
