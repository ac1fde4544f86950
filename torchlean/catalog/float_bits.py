"""PyTorch's ops on a float's representation: nextafter (one float32 step toward another value)
and frexp (mantissa and exponent), and float_power, torch's double-precision power.

nextafter and frexp are registry ops (ops.yaml, section pointwise_math: exact bit formulas in
native/common/formulas/pointwise_math.h), the same bits on both backends and in every mode.
torchlean's tensors are float32 (float64 raises), so two results differ in dtype from torch's:
frexp's exponent is an int64 IntTensor (torch: int32), and float_power returns the float32
value of the power torch returns in float64 (the power evaluated in double and rounded once);
float_power_, whose result torch requires to be float64 in place, raises.
"""
from __future__ import annotations

import collections
import numbers

import numpy as np

from torchlean.catalog._device_index import int_result
from torchlean.int_tensor import IntTensor
from torchlean.session import default_session
from torchlean.tape import no_grad
from torchlean.tensor import Tensor

Frexp = collections.namedtuple("frexp", ["mantissa", "exponent"])


def _session(*xs):
    return next((x.session for x in xs if isinstance(x, Tensor)), None) or default_session()


def nextafter(input, other):
    """torch.nextafter: the float32 next after input toward other, broadcast (other where they
    are equal, NaN where either is); no gradient (none in torch)."""
    s = _session(input, other)
    with no_grad():
        return s.op("nextafter", input, other)


def frexp(input):
    """torch.frexp: (mantissa, exponent) with input = mantissa * 2^exponent and 0.5 <= |mantissa|
    < 1 (input itself and exponent 0 at 0, +-inf and NaN). The mantissa is float32 with torch's
    gradient (grad / 2^exponent); the exponent an int64 IntTensor (torch: int32)."""
    if isinstance(input, IntTensor):
        raise TypeError("frexp: expected a floating-point tensor, got an integer IntTensor "
                        "(torch.frexp() only supports floating-point dtypes)")
    s = _session(input)
    m = s.op("frexp_mantissa", input)
    with no_grad():
        e = s.op("frexp_exponent", input)
    out = int_result(e, within=(-148, 128))
    if out is None:     # a graph capture: host exponents
        out = IntTensor(e.numpy().astype(np.int64))
    return Frexp(m, out)


def float_power(input, exponent):
    """torch.float_power: input ** exponent computed in double precision. torch returns float64;
    torchlean has no float64 tensors and returns that power rounded once to float32 (the double
    evaluation of pow, within 1e-14 relative before the rounding), with pow's gradients. Either
    argument may be a Python number (not both), an IntTensor becomes float32 first."""
    if not isinstance(input, (Tensor, IntTensor)) and not isinstance(exponent, (Tensor, IntTensor)):
        raise TypeError("float_power: expected input or exponent to be a Tensor, got "
                        f"{type(input).__name__} and {type(exponent).__name__}")
    s = _session(input, exponent)
    for v in (input, exponent):
        if isinstance(v, (bool, str, bytes)) or not isinstance(v, (Tensor, IntTensor, numbers.Real)):
            raise TypeError(f"float_power: expected a Tensor or a real number, got {type(v).__name__}")
    base = input.float(s) if isinstance(input, IntTensor) else s.as_tensor(input)
    return base.pow(exponent)


def float_power_(self, exponent):
    """Tensor.float_power_: torch requires a float64 tensor in place; torchlean has none, so it
    raises as torch does for a float32 one (out of place: x.copy_(torch.float_power(x, e)))."""
    raise RuntimeError("float_power_(): the base given to float_power_ has dtype Float but the "
                       "operation's result requires dtype Double (torchlean has no float64 "
                       "tensors; use x.copy_(torch.float_power(x, exponent)) for the float32 value)")


METHODS = ["nextafter", "frexp", "float_power", "float_power_"]
INPLACE = ["nextafter"]
EXPORTS = {"torch": ["nextafter", "frexp", "float_power"]}
