"""torch.nn.init: every initialiser torch has, drawn on the host from torchlean.random's seeded
stream (the numbers the RNG kernels give for the same key), so a model initialises
bit-identically on every backend. Each `name_(tensor, ...)` writes its values into the
parameter in place and returns it, as torch's; a generator= (torchlean.Generator) draws from
that stream instead of the process-wide one.

The shape-only helpers at the top (uniform, normal, xavier_uniform, kaiming_uniform) give a
fresh array; the modules use them to build their parameters.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from torchlean import random
from torchlean.factories import tensor as _tensor
from torchlean.parameter import Parameter
from torchlean.tensor import Tensor
from torchlean.tape import no_grad


# ------------------------------------------------------------------ arrays for new parameters

def uniform(shape, lo=0.0, hi=1.0, generator=None) -> np.ndarray:
    """float32 lo + u * (hi - lo), u the stream's uniforms in [0, 1)."""
    u = random.uniform(math.prod(shape), random.key_for("nn.init", generator))
    return (np.float32(lo) + u * np.float32(hi - lo)).reshape(shape)


def normal(shape, mean=0.0, std=1.0, generator=None) -> np.ndarray:
    key = random.key_for("nn.init", generator)
    return random.normal(math.prod(shape), key, mean, std).reshape(shape)


def xavier_uniform(shape) -> np.ndarray:
    """Uniform in +-sqrt(6 / (fan_in + fan_out))."""
    fi, fo = _fans("xavier_uniform", shape)
    a = math.sqrt(6.0 / (fi + fo))
    return uniform(shape, -a, a)


def kaiming_uniform(shape) -> np.ndarray:
    """Uniform in +-sqrt(6 / fan_in): kaiming_uniform_ with nonlinearity='relu'."""
    a = math.sqrt(6.0 / _fans("kaiming_uniform", shape)[0])
    return uniform(shape, -a, a)


# ------------------------------------------------------------------ gains and fans

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity, param=None) -> float:
    """The recommended gain for a nonlinearity (torch's table): 1 for linear, convolutions and
    sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu (slope
    `param`, default 0.01), 3/4 for selu."""
    if nonlinearity in _LINEAR:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fans(op: str, shape) -> tuple[int, int]:
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(f"{op}: Fan in and fan out can not be computed for tensor with fewer "
                         f"than 2 dimensions (got shape {shape})")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _calculate_fan_in_and_fan_out(tensor) -> tuple[int, int]:
    """(size(1) * receptive field, size(0) * receptive field), as torch."""
    return _fans("_calculate_fan_in_and_fan_out", tensor.shape)


def _calculate_correct_fan(tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _xavier_std(fans, gain) -> float:
    return gain * math.sqrt(2.0 / float(fans[0] + fans[1]))


# ------------------------------------------------------------------ writing in place

def _write(tensor, values: np.ndarray):
    """Write values into the tensor in place and return it: the one place init writes
    (Parameter.set for a Parameter, Tensor.copy_ under no_grad for a Tensor that has it, e.g.
    a parameter's .data)."""
    values = np.asarray(values, dtype=np.float32).reshape(tuple(tensor.shape))
    with no_grad():
        if isinstance(tensor, Parameter):
            tensor.set(values)
        elif isinstance(tensor, Tensor) and hasattr(tensor, "copy_"):
            tensor.copy_(_tensor(values))
        else:
            raise TypeError(f"nn.init: expected a Parameter or a Tensor to write into, got "
                            f"{type(tensor).__name__}")
    return tensor


def _shape(tensor) -> tuple:
    return tuple(tensor.shape)


def _no_op_for_empty(op: str, tensor) -> bool:
    if math.prod(_shape(tensor)) == 0:
        warnings.warn(f"{op}: Initializing zero-element tensors is a no-op")
        return True
    return False


# ------------------------------------------------------------------ the initialisers

def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Fill with U(a, b)."""
    return _write(tensor, uniform(_shape(tensor), a, b, generator))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Fill with N(mean, std^2)."""
    return _write(tensor, normal(_shape(tensor), mean, std, generator))


def _norm_ppf(p: np.ndarray) -> np.ndarray:
    """The standard normal quantile (Acklam's rational approximation, relative error below
    1.2e-9, far inside float32's resolution), for p in (0, 1)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
         1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
         6.680131188771972e+01, -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
         -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
         3.754408661907416e+00)
    p = np.asarray(p, dtype=np.float64)
    out = np.empty_like(p)
    lo, hi = p < 0.02425, p > 1 - 0.02425
    mid = ~(lo | hi)
    q = p[mid] - 0.5
    r = q * q
    out[mid] = ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
                (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1))
    for mask, sign, pp in ((lo, 1.0, p[lo]), (hi, -1.0, 1 - p[hi])):
        q = np.sqrt(-2 * np.log(pp))
        out[mask] = sign * ((((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
                            / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1))
    return out


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None):
    """Fill with N(mean, std^2) truncated to [a, b] (a and b are absolute bounds, as torch's),
    by the inverse CDF of a uniform draw between CDF(a) and CDF(b)."""
    if not std > 0 or not a < b:
        raise ValueError(f"trunc_normal_: need std > 0 and a < b, got std={std}, a={a}, b={b}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    cdf = lambda x: 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))  # noqa: E731
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    shape = _shape(tensor)
    u = random.uniform(math.prod(shape), random.key_for("nn.init", generator)).astype(np.float64)
    p = np.clip(lo + (hi - lo) * (u + 2.0 ** -25), 1e-300, 1 - 2.0 ** -53)
    x = mean + std * _norm_ppf(p)
    return _write(tensor, np.clip(x, a, b))


def constant_(tensor, val: float):
    return _write(tensor, np.full(_shape(tensor), val, dtype=np.float32))


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    """The identity in a 2-D tensor (ones on the main diagonal of a rectangle)."""
    shape = _shape(tensor)
    if len(shape) != 2:
        raise ValueError(f"eye_: Only tensors with 2 dimensions are supported, got {shape}")
    return _write(tensor, np.eye(*shape, dtype=np.float32))


def dirac_(tensor, groups: int = 1):
    """The Dirac delta of a 3-, 4- or 5-D convolution weight: each output channel of each
    group copies one input channel at the kernel's centre."""
    shape = _shape(tensor)
    if len(shape) not in (3, 4, 5):
        raise ValueError(f"dirac_: Only tensors with 3, 4, or 5 dimensions are supported, got "
                         f"{shape}")
    if groups < 1 or shape[0] % groups:
        raise ValueError(f"dirac_: dim 0 ({shape[0]}) must be divisible by groups ({groups})")
    out_per_group = shape[0] // groups
    w = np.zeros(shape, dtype=np.float32)
    centre = tuple(k // 2 for k in shape[2:])
    for g in range(groups):
        for d in range(min(out_per_group, shape[1])):
            w[(g * out_per_group + d, d) + centre] = 1.0
    return _write(tensor, w)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    a = math.sqrt(3.0) * _xavier_std(_calculate_fan_in_and_fan_out(tensor), gain)
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    return normal_(tensor, 0.0, _xavier_std(_calculate_fan_in_and_fan_out(tensor), gain),
                   generator)


def _kaiming_std(tensor, a, mode, nonlinearity) -> float:
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None):
    """U(-bound, bound), bound = gain * sqrt(3 / fan) (He et al.)."""
    if _no_op_for_empty("kaiming_uniform_", tensor):
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None):
    """N(0, std^2), std = gain / sqrt(fan)."""
    if _no_op_for_empty("kaiming_normal_", tensor):
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor, gain: float = 1.0, generator=None):
    """A (semi-)orthogonal matrix over the tensor flattened to (size(0), rest): the Q of a QR
    of a normal draw, signs fixed by R's diagonal (Saxe et al.), times gain."""
    shape = _shape(tensor)
    if len(shape) < 2:
        raise ValueError(f"orthogonal_: Only tensors with 2 or more dimensions are supported, "
                         f"got {shape}")
    if math.prod(shape) == 0:
        return tensor
    rows, cols = shape[0], math.prod(shape[1:])
    flat = normal((rows, cols), 0.0, 1.0, generator).astype(np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, gain * q)


def sparse_(tensor, sparsity: float, std: float = 0.01, generator=None):
    """A 2-D tensor with N(0, std^2) entries, ceil(sparsity * rows) of each column zeroed at
    random rows (Martens)."""
    shape = _shape(tensor)
    if len(shape) != 2:
        raise ValueError(f"sparse_: Only tensors with 2 dimensions are supported, got {shape}")
    rows, cols = shape
    zeros_per_col = int(math.ceil(sparsity * rows))
    w = normal(shape, 0.0, std, generator)
    for c in range(cols):
        perm = random.permutation(rows, random.key_for("nn.init.sparse_", generator))
        w[perm[:zeros_per_col], c] = 0.0
    return _write(tensor, w)


__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_"]
