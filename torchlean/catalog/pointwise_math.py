"""PyTorch's pointwise math: log1p ... atan2, hypot, fmod, remainder, rounding, logit, xlogy,
logaddexp, nan_to_num and their aliases (arcsin, fix, sgn, special.*).

Each name is one registry op (ops.yaml, section pointwise_math: a formula over tl_math's
correctly rounded functions, the same bits on both backends and in every mode) or a short
composite of registry ops where PyTorch composes too (deg2rad is one float32 multiply, ldexp a
product with exp2, heaviside a select). Rounding, sign and signbit have no gradient in torch
(zero); here they are recorded without one, as torchlean's floor is.
"""
from __future__ import annotations

import math

from torchlean.session import default_session
from torchlean.tape import no_grad
from torchlean.tensor import Tensor

_FLT_MAX = 3.4028234663852886e38


def _session(*xs):
    return next((x.session for x in xs if isinstance(x, Tensor)), None) or default_session()


def _unary(name, doc, differentiable=True):
    def f(input):
        s = _session(input)
        if differentiable:
            return s.op(name, input)
        with no_grad():
            return s.op(name, input)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


def _binary(name, doc):
    def f(input, other):
        return _session(input, other).op(name, input, other)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


_CR = "correctly rounded (the float32 nearest the true value, ties to even)"
sin = _unary("sin", f"torch.sin, {_CR} for every float32 (exact argument reduction).")
cos = _unary("cos", f"torch.cos, {_CR} for every float32 (exact argument reduction).")
tan = _unary("tan", f"torch.tan, {_CR} for every float32 (exact argument reduction).")
sinc = _unary("sinc", "torch.sinc: sin(pi x) / (pi x), 1 at 0 (pi x rounded first, as torch).")
log1p = _unary("log1p", f"torch.log1p: log(1 + x), {_CR}; log1p(-1) = -inf, below it NaN.")
expm1 = _unary("expm1", f"torch.expm1: e^x - 1, {_CR}.")
log2 = _unary("log2", f"torch.log2, {_CR}.")
log10 = _unary("log10", f"torch.log10, {_CR}.")
exp2 = _unary("exp2", f"torch.exp2: 2^x, {_CR}.")
sinh = _unary("sinh", f"torch.sinh, {_CR}.")
cosh = _unary("cosh", f"torch.cosh, {_CR}.")
asinh = _unary("asinh", f"torch.asinh, {_CR}.")
acosh = _unary("acosh", f"torch.acosh, {_CR}; NaN below 1.")
atanh = _unary("atanh", f"torch.atanh, {_CR}; +-inf at +-1, NaN beyond.")
atan = _unary("atan", f"torch.atan, {_CR}.")
asin = _unary("asin", f"torch.asin, {_CR}; NaN for |x| > 1.")
acos = _unary("acos", f"torch.acos, {_CR}; NaN for |x| > 1.")
frac = _unary("frac", "torch.frac: x - trunc(x) (exact; NaN at +-inf); gradient 1.")
sign = _unary("sign", "torch.sign: -1, 0 or 1 (0 for +-0 and NaN); no gradient.", False)
signbit = _unary("signbit", "torch.signbit as a 0/1 float mask (1 for -0); no gradient.", False)
ceil = _unary("ceil", "torch.ceil (exact); no gradient.", False)
fix = _unary("trunc", "torch.fix (= trunc): round toward zero (exact); no gradient.", False)
fix.__name__ = fix.__qualname__ = "fix"
atan2 = _binary("atan2", "torch.atan2(input, other): the angle of (other, input), C99's special "
                "values, broadcast; within rounding of the double-double value (tl_math_more.h).")
hypot = _binary("hypot", f"torch.hypot: sqrt(a^2 + b^2), {_CR} for every pair, broadcast.")
fmod = _binary("fmod", "torch.fmod: C fmod, exact, the dividend's sign, broadcast.")
remainder = _binary("remainder", "torch.remainder: fmod plus the divisor where the signs differ "
                    "(Python's %), broadcast.")
copysign = _binary("copysign", "torch.copysign: |input| with other's sign bit, broadcast.")
xlogy = _binary("xlogy", "torch.xlogy: input * log(other), 0 where input == 0 (other not NaN).")
xlog1py = _binary("xlog1py", "torch.special.xlog1py: input * log1p(other), 0 where input == 0.")
logaddexp = _binary("logaddexp", "torch.logaddexp: log(e^a + e^b) without overflow.")
logaddexp2 = _binary("logaddexp2", "torch.logaddexp2: log2(2^a + 2^b) without overflow.")

# torch's aliases
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh
arctan2 = atan2
sgn = sign


def trunc(input):
    """torch.trunc: round toward zero (exact); no gradient."""
    return fix(input)


def round(input, *, decimals=0):  # noqa: A001 - torch's name
    """torch.round: half to even (exact for decimals=0); with decimals, torch's float32 stages
    round(x * 10^d) / 10^d (d > 0) or round(x / 10^-d) * 10^-d (d < 0); no gradient."""
    if not isinstance(decimals, int) or isinstance(decimals, bool):
        raise TypeError(f"round: decimals must be an int, got {type(decimals).__name__}")
    s = _session(input)
    with no_grad():
        if decimals == 0:
            return s.op("round", input)
        p = float(10.0 ** abs(decimals))
        if decimals > 0:
            return s.op("round", s.as_tensor(input) * p) / p
        return s.op("round", s.as_tensor(input) / p) * p


def logit(input, eps=None):
    """torch.logit: log(z / (1 - z)), z = input clamped to [eps, 1 - eps] when eps is given
    (then the gradient is 0 outside that range)."""
    if eps is not None and not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0):
        raise ValueError(f"logit: eps must be None or a finite number >= 0, got {eps!r}")
    return _session(input).op("logit", input, eps=-1.0 if eps is None else float(eps))


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """torch.nan_to_num: NaN -> nan, +inf -> posinf (default float32's max), -inf -> neginf
    (default its lowest); the gradient passes where input is finite."""
    return _session(input).op("nan_to_num", input, nan=float(nan),
                              posinf=_FLT_MAX if posinf is None else float(posinf),
                              neginf=-_FLT_MAX if neginf is None else float(neginf))


def deg2rad(input):
    """torch.deg2rad: input * float32(pi / 180), one rounded multiply."""
    return _session(input).as_tensor(input) * (math.pi / 180.0)


def rad2deg(input):
    """torch.rad2deg: input * float32(180 / pi), one rounded multiply."""
    return _session(input).as_tensor(input) * (180.0 / math.pi)


def ldexp(input, other):
    """torch.ldexp: input * 2^other (2^other correctly rounded, so exact for whole exponents)."""
    s = _session(input, other)
    return s.as_tensor(input) * s.op("exp2", other)


def heaviside(input, values):
    """torch.heaviside: values where input == 0, else 1 for input > 0 and 0 below (NaN: 0);
    no gradient."""
    s = _session(input, values)
    with no_grad():
        x = s.as_tensor(input)
        return s.op("where", s.op("eq", x, 0.0), values, s.op("gt", x, 0.0))


def entr(input):
    """torch.special.entr: -x log x for x > 0, 0 at 0, -inf below 0 (NaN stays NaN)."""
    s = _session(input)
    x = s.as_tensor(input)
    y = s.op("sub", 0.0, s.op("xlogy", x, x))   # 0 - t: entr(0) = +0
    return s.op("where", s.op("lt", x, 0.0), -math.inf, y)


_UNARY = ["sin", "cos", "tan", "sinc", "log1p", "expm1", "log2", "log10", "exp2", "sinh", "cosh", "asinh", "acosh", "atanh",
          "atan", "asin", "acos", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh",
          "frac", "sign", "sgn", "signbit", "ceil", "trunc", "fix", "round", "logit", "nan_to_num",
          "deg2rad", "rad2deg"]
_BINARY = ["atan2", "arctan2", "hypot", "fmod", "remainder", "copysign", "xlogy", "logaddexp",
           "logaddexp2", "ldexp", "heaviside"]

METHODS = _UNARY + _BINARY
INPLACE = [n for n in METHODS if n not in ("signbit", "logaddexp", "logaddexp2")]   # torch's twins
EXPORTS = {
    "torch": METHODS,
    "special": ["log1p", "expm1", "exp2", "logit", "xlogy", "xlog1py", "round", "entr", "sinc"],
}
