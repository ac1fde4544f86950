"""torch's operators on int64 and bool tensors: arithmetic that wraps as int64 does, integer
division that raises on zero, comparisons giving bool tensors, the logical operators, and the
promotion to float32 whenever a float takes part (torch's type promotion).

A mixin of torchlean.int_tensor.IntTensor, kept apart so that the class reads as what the
tensor holds and how it is shaped, and the promotion rules read on one page.
"""
from __future__ import annotations

import operator

import numpy as np

from torchlean import int_shape_ops as _ops
from torchlean.errors import IntegerDivisionByZero
from torchlean.int_values import check_int, to_int64


def host_array(x):
    """x as a NumPy array (an IntTensor's array, no copy)."""
    return x._a if isinstance(x, IntOperators) else np.asarray(x)


def as_mask(x):
    """x for a logical operator: a float Tensor (torchlean's comparisons) as a boolean mask."""
    a = host_array(x)
    return a != 0 if a.dtype.kind == "f" else a


def promotes_to_float(o) -> bool:
    """Would torch promote an int64 tensor combined with o to float?"""
    if isinstance(o, IntOperators) or isinstance(o, (bool, int, np.integer, np.bool_)):
        return False
    if isinstance(o, (float, np.floating)):
        return True
    if isinstance(o, np.ndarray):
        return o.dtype.kind == "f"
    return hasattr(o, "session") or type(o).__name__ == "Parameter"   # a float Tensor


class IntOperators:
    """IntTensor's operators (self._a is the tensor's NumPy array; results are new tensors of
    the same class)."""

    __slots__ = ()

    def _binary(self, o, f, name, reflected=False):
        if promotes_to_float(o):
            x = self.float()
            return getattr(x, name)(o)
        if not isinstance(o, (IntOperators, bool, int, np.integer, np.bool_, np.ndarray, list,
                              tuple)):
            return NotImplemented
        if isinstance(o, (int, np.integer)) and not isinstance(o, (bool, np.bool_)):
            o = np.int64(check_int(name, o))      # 2**63 raises, never an object array
        elif not isinstance(o, (IntOperators, bool, np.bool_)):
            o = to_int64(name, o)
        a, b = self._a, host_array(o)
        den = a if reflected else b
        if f in (np.floor_divide, np.remainder) and np.any(den == 0):
            raise IntegerDivisionByZero(f"{name}: integer division by zero (ZeroDivisionError), "
                                        "as torch's integer // and %")
        with np.errstate(over="ignore"):              # int64 wraps, as torch's
            r = f(b, a) if reflected else f(a, b)
        return type(self)(np.asarray(r))

    def __eq__(self, o):
        return self._compare(o, operator.eq, "__eq__")

    def __ne__(self, o):
        return self._compare(o, operator.ne, "__ne__")

    def __lt__(self, o):
        return self._compare(o, operator.lt, "__lt__")

    def __le__(self, o):
        return self._compare(o, operator.le, "__le__")

    def __gt__(self, o):
        return self._compare(o, operator.gt, "__gt__")

    def __ge__(self, o):
        return self._compare(o, operator.ge, "__ge__")

    def _compare(self, o, f, name):
        if promotes_to_float(o):       # against floats: a bool IntTensor, compared on the host
            o = np.asarray(o, dtype=np.float64) if not hasattr(o, "numpy") else o.numpy()
        elif not isinstance(o, (IntOperators, bool, int, np.integer, np.bool_, np.ndarray, list,
                                tuple)):
            return NotImplemented
        return type(self)(f(self._a, host_array(o)))

    eq = __eq__
    ne = __ne__
    lt = __lt__
    le = __le__
    gt = __gt__
    ge = __ge__
    __hash__ = object.__hash__

    def __add__(self, o):
        return self._binary(o, np.add, "__add__")

    def __radd__(self, o):
        return self._binary(o, np.add, "__radd__", reflected=True)

    def __sub__(self, o):
        return self._binary(o, np.subtract, "__sub__")

    def __rsub__(self, o):
        return self._binary(o, np.subtract, "__rsub__", reflected=True)

    def __mul__(self, o):
        return self._binary(o, np.multiply, "__mul__")

    def __rmul__(self, o):
        return self._binary(o, np.multiply, "__rmul__", reflected=True)

    def __floordiv__(self, o):
        return self._binary(o, np.floor_divide, "__floordiv__")

    def __rfloordiv__(self, o):
        return self._binary(o, np.floor_divide, "__rfloordiv__", reflected=True)

    def __mod__(self, o):
        return self._binary(o, np.remainder, "__mod__")

    def __rmod__(self, o):
        return self._binary(o, np.remainder, "__rmod__", reflected=True)

    def __matmul__(self, o):
        """int64 @ int64 is int64 (torch); with a float tensor torch refuses the mixed dtypes."""
        if not isinstance(o, IntOperators):
            if promotes_to_float(o):
                raise RuntimeError(f"matmul: expected both operands to have the same dtype, got "
                                   f"{self.dtype} and a float32 tensor (use .float())")
            return NotImplemented
        return type(self)(_ops.matmul(self._a, o._a))

    matmul = __matmul__

    def __pow__(self, o):
        """int64 ** int: int64 (wrapping as torch); a negative Python int exponent raises as
        torch; negative exponents inside a tensor give torch's integer results (0 unless the
        base is 1 or -1); a float exponent promotes to float32."""
        if promotes_to_float(o):
            return self.float() ** o
        if isinstance(o, (int, np.integer)) and not isinstance(o, (bool, np.bool_)) and o < 0:
            raise RuntimeError("__pow__: Integers to negative integer powers are not allowed "
                               "(use a float exponent or .float())")
        return self._binary(o, _ops.power, "__pow__")

    def __rpow__(self, o):
        return self._binary(o, _ops.power, "__rpow__", reflected=True)

    pow = __pow__
    def __truediv__(self, o):      # int / int is float in torch
        return self.float() / (o.float() if isinstance(o, IntOperators) else o)

    def __rtruediv__(self, o):
        return o / self.float()

    def __neg__(self):
        if self._a.dtype == np.bool_:
            raise TypeError("negation of a bool tensor: use ~ (logical not)")
        return type(self)(-self._a)

    def __and__(self, o):
        return type(self)(self._a & as_mask(o))

    __rand__ = __and__

    def __or__(self, o):
        return type(self)(self._a | as_mask(o))

    __ror__ = __or__

    def __xor__(self, o):
        return type(self)(self._a ^ as_mask(o))

    def __invert__(self):
        return type(self)(~self._a)

    def abs(self):
        return type(self)(np.abs(self._a))

    def clamp(self, min=None, max=None):  # noqa: A002 - torch's names
        """Integer bounds keep int64; a float bound (or float Tensor) promotes to float32, as
        torch's type promotion does."""
        if min is None and max is None:
            raise ValueError("clamp: at least one of min and max must be given")
        if promotes_to_float(min) or promotes_to_float(max):
            return self.float().clamp(min, max)
        lo, hi = (None if v is None else host_array(to_int64("clamp", host_array(v))) for v in (min, max))
        a = self._a if lo is None else np.maximum(self._a, lo)
        return type(self)(a if hi is None else np.minimum(a, hi))

    clip = clamp
