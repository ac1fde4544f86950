"""PyTorch's special functions: erfc, erfcx, erfinv, the normal distribution (ndtr, ndtri,
log_ndtr), lgamma, digamma, polygamma, mvlgamma, Hurwitz zeta, the modified Bessel functions
and the classical orthogonal polynomials, with torch's names in torch, torch.special and on
Tensor.

Each is one registry op (ops.yaml, section pointwise_math: a formula over
native/common/tl_math_special.h, evaluated in double and rounded once, the same bits on both
backends and in every mode) or a short composite of them where PyTorch composes too (mvlgamma
is a sum of lgammas). Gradients are PyTorch's: the Bessel functions J, Y, K and the polynomials
have none in torch and are recorded without one here.
"""
from __future__ import annotations

import math
import numbers

from torchlean.session import default_session
from torchlean.tape import no_grad
from torchlean.tensor import Tensor


def _session(*xs):
    return next((x.session for x in xs if isinstance(x, Tensor)), None) or default_session()


def _unary(name, doc, op=None, differentiable=True):
    def f(input):
        s = _session(input)
        if differentiable:
            return s.op(op or name, input)
        with no_grad():
            return s.op(op or name, input)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


_D = "evaluated in double and rounded once (within 1 ulp; tests/test_special_functions.py)"
erfc = _unary("erfc", f"torch.erfc: 1 - erf(x) without cancellation, {_D}.")
erfcx = _unary("erfcx", f"torch.special.erfcx: e^(x^2) erfc(x), {_D}; inf below about -9.4.")
erfinv = _unary("erfinv", f"torch.erfinv, {_D}; +-inf at +-1, NaN beyond.")
ndtr = _unary("ndtr", f"torch.special.ndtr: the standard normal distribution function, {_D}.")
ndtri = _unary("ndtri", f"torch.special.ndtri: the standard normal quantile, {_D}; -inf at 0, "
               "inf at 1, NaN outside [0, 1].")
log_ndtr = _unary("log_ndtr", f"torch.special.log_ndtr: log ndtr(x), accurate in both tails, {_D}.")
lgamma = _unary("lgamma", f"torch.lgamma: log |Gamma(x)|, {_D}; +inf at 0, the negative "
                "integers and +-inf.")
digamma = _unary("digamma", f"torch.digamma: d lgamma / dx, {_D}; -inf at +0, +inf at -0, NaN "
                 "at the negative integers.")
gammaln = _unary("gammaln", "torch.special.gammaln (= lgamma).", op="lgamma")
psi = _unary("psi", "torch.special.psi (= digamma).", op="digamma")


def _order(fn, n):
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 0:
        raise ValueError(f"{fn}: n must be a non-negative int, got {n!r}")
    return int(n)


def polygamma(n, input):
    """torch.polygamma(n, input): the n-th derivative of digamma, (-1)^(n+1) n! zeta(n + 1, x)
    for n >= 1 (digamma for n = 0); as a Tensor method, x.polygamma(n)."""
    if isinstance(n, Tensor) and not isinstance(input, Tensor):
        n, input = input, n                     # Tensor.polygamma(self, n)
    return _session(input).op("polygamma", input, order=_order("polygamma", n))


def mvlgamma(input, p):
    """torch.mvlgamma: the multivariate log-gamma of dimension p, sum_j lgamma(x - j/2) +
    p (p - 1) / 4 log(pi); every element must exceed (p - 1) / 2, as torch checks."""
    p = _order("mvlgamma", p)
    if p < 1:
        raise ValueError(f"mvlgamma: p must be >= 1, got {p}")
    s = _session(input)
    x = s.as_tensor(input)
    with no_grad():
        low = s.op("le", x, (p - 1) / 2.0)
        if bool(s.op("sum", low).item()):
            raise ValueError(f"mvlgamma: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    out = None
    for j in range(p):
        term = s.op("lgamma", x if j == 0 else x - j / 2.0)
        out = term if out is None else out + term
    return out + p * (p - 1) / 4.0 * math.log(math.pi)


multigammaln = mvlgamma


def zeta(input, other):
    """torch.special.zeta(x, q): the Hurwitz zeta sum_k (k + q)^-x (Cephes' algorithm, as torch),
    broadcast; inf at x = 1, NaN for x < 1; only q gets a gradient (-x zeta(x + 1, q))."""
    return _session(input, other).op("zeta", input, other)


METHODS = ["erfc", "erfinv", "lgamma", "digamma", "polygamma", "mvlgamma"]
INPLACE = ["erfc", "erfinv", "lgamma", "digamma", "polygamma", "mvlgamma"]
EXPORTS = {
    "torch": ["erfc", "erfinv", "lgamma", "digamma", "polygamma", "mvlgamma"],
    "special": ["erfc", "erfcx", "erfinv", "ndtr", "ndtri", "log_ndtr", "gammaln", "digamma", "psi",
                "polygamma", "multigammaln", "zeta"],
}


i0 = _unary("i0", f"torch.i0: the modified Bessel function I0, {_D}.")
i0e = _unary("i0e", f"torch.special.i0e: e^-|x| I0(x), {_D}.")
i1 = _unary("i1", f"torch.special.i1: the modified Bessel function I1, {_D}.")
i1e = _unary("i1e", f"torch.special.i1e: e^-|x| I1(x), {_D}.")
modified_bessel_i0 = _unary("modified_bessel_i0", "torch.special.modified_bessel_i0 (= i0).", op="i0")
modified_bessel_i1 = _unary("modified_bessel_i1", "torch.special.modified_bessel_i1 (= i1).", op="i1")
_NG = "no gradient (none in torch)"
bessel_j0 = _unary("bessel_j0", f"torch.special.bessel_j0, {_D} of sqrt(2 / (pi x)); {_NG}.", differentiable=False)
bessel_j1 = _unary("bessel_j1", f"torch.special.bessel_j1, {_D} of sqrt(2 / (pi x)); {_NG}.", differentiable=False)
bessel_y0 = _unary("bessel_y0", f"torch.special.bessel_y0 (-inf at 0, NaN below); {_NG}.", differentiable=False)
bessel_y1 = _unary("bessel_y1", f"torch.special.bessel_y1 (-inf at 0, NaN below); {_NG}.", differentiable=False)
modified_bessel_k0 = _unary("modified_bessel_k0", f"torch.special.modified_bessel_k0, {_D}; inf at 0, "
                            f"NaN below; {_NG}.", differentiable=False)
modified_bessel_k1 = _unary("modified_bessel_k1", f"torch.special.modified_bessel_k1, {_D}; inf at 0, "
                            f"NaN below; {_NG}.", differentiable=False)
scaled_modified_bessel_k0 = _unary("scaled_modified_bessel_k0", f"torch.special.scaled_modified_bessel_k0: "
                                   f"e^x K0(x), {_D}; {_NG}.", differentiable=False)
scaled_modified_bessel_k1 = _unary("scaled_modified_bessel_k1", f"torch.special.scaled_modified_bessel_k1: "
                                   f"e^x K1(x), {_D}; {_NG}.", differentiable=False)
airy_ai = _unary("airy_ai", "torch.special.airy_ai: the Airy function Ai, evaluated in double and "
                 "rounded once: within 1 ulp above -8, within 2^-23 of its envelope |x|^-1/4 / sqrt(pi) "
                 "below (not relative near its zeros; below -2^40 the phase is lost, as in torch); 0 at "
                 f"+-inf (torch: NaN); {_NG}.", differentiable=False)
spherical_bessel_j0 = _unary("spherical_bessel_j0", f"torch.special.spherical_bessel_j0: sin(x) / x, 1 at 0; "
                             f"{_NG}.", differentiable=False)

_POLY = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
         "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
         "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
         "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]


def _polynomial(kind, name):
    def f(input, n):
        s = _session(input, n)
        with no_grad():
            return s.op("orthogonal_polynomial", input, n, kind=kind)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"torch.special.{name}(input, n): the polynomial of degree n (truncated toward 0; "
                 "0 for n < 0, NaN above 2^24) at input, broadcast, by its three-term recurrence "
                 f"in double; {_NG}.")
    return f


for _k, _name in enumerate(_POLY):
    globals()[_name] = _polynomial(_k, _name)

METHODS += ["i0"]
INPLACE += ["i0"]
EXPORTS["torch"] += ["i0"]
EXPORTS["special"] += ["i0", "i0e", "i1", "i1e", "modified_bessel_i0", "modified_bessel_i1", "bessel_j0",
                       "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
                       "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
                       "airy_ai"] + _POLY
