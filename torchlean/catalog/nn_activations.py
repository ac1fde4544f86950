"""torch.nn.functional's activations and shrinkage functions beyond relu/gelu/silu/elu: relu,
clamp, where, softplus, sigmoid, tanh and exp compositions whose registry VJPs give torch's
derivatives (hardtanh's is 1 strictly inside its bounds, as torch's)."""
from __future__ import annotations

from torchlean import composite
from torchlean.catalog import _common as c
from torchlean.nn import functional as F

_FUNCTIONAL = ("hardswish", "hardsigmoid", "hardtanh", "relu6", "mish", "logsigmoid", "glu",
               "prelu", "selu", "celu", "rrelu", "softsign", "softshrink", "hardshrink",
               "tanhshrink", "threshold", "softmin")
METHODS = ("prelu", "hardshrink", "softmin")
EXPORTS = {"nn.functional": _FUNCTIONAL,
           "torch": ("prelu", "selu", "celu", "rrelu", "hardshrink", "threshold")}

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _x(op, input):
    return c.tensor(op, input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    x = _x("hardtanh", input)
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} cannot be greater than max_val {max_val}")
    return composite.clamp(x, float(min_val), float(max_val), op="hardtanh")


def relu6(input, inplace=False):
    return hardtanh(_x("relu6", input), 0.0, 6.0)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6."""
    return hardtanh(_x("hardsigmoid", input) + 3.0, 0.0, 6.0) * (1.0 / 6.0)


def hardswish(input, inplace=False):
    """x relu6(x + 3) / 6."""
    x = _x("hardswish", input)
    return x * hardtanh(x + 3.0, 0.0, 6.0) * (1.0 / 6.0)


def mish(input, inplace=False):
    x = _x("mish", input)
    return x * F.softplus(x).tanh()


def logsigmoid(input):
    """log(sigmoid(x)) = -softplus(-x): no overflow for large |x|."""
    return -F.softplus(-_x("logsigmoid", input))


def glu(input, dim=-1):
    x = _x("glu", input)
    if x.ndim == 0:
        raise RuntimeError("glu: does not support 0-d tensors")
    d = c.dim("glu", dim, x.ndim)
    if x.shape[d] % 2:
        raise RuntimeError(f"glu: halving dimension must be even, but dim {d} of shape "
                           f"{tuple(x.shape)} has size {x.shape[d]}")
    a, b = composite.split(x, x.shape[d] // 2, d)
    return a * b.sigmoid()


def prelu(input, weight):
    """x where x > 0, weight x elsewhere; weight one value or one per channel (axis 1)."""
    x = _x("prelu", input)
    w = c.operand(x.session, "prelu", weight, "weight")
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.ndim > 1 or (w.ndim == 1 and w.shape[0] not in (1, channels)):
        raise RuntimeError(f"prelu: weight of shape {tuple(w.shape)} must have 1 or "
                           f"{channels} (the input's channels, axis 1) elements; input shape "
                           f"{tuple(x.shape)}")
    if w.ndim == 1 and w.shape[0] > 1:
        w = w.reshape((channels,) + (1,) * (x.ndim - 2))
    elif w.ndim == 1:
        w = w.reshape(())
    return x.relu() - w * (-x).relu()


def selu(input, inplace=False):
    return F.elu(_x("selu", input), SELU_ALPHA) * SELU_SCALE


def celu(input, alpha=1.0, inplace=False):
    """x where x > 0, alpha (exp(x / alpha) - 1) elsewhere."""
    x = _x("celu", input)
    if alpha == 0:
        raise RuntimeError("celu: alpha must not be 0 (it divides x)")
    neg = -(-x).relu()
    return x.relu() + ((neg * (1.0 / float(alpha))).exp() - 1.0) * float(alpha)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky relu with slope (lower + upper) / 2 in eval; in training each negative element's
    slope is drawn uniformly from [lower, upper] (the session's random stream)."""
    x = _x("rrelu", input)
    if not 0 <= lower <= upper:
        raise ValueError(f"rrelu: expected 0 <= lower <= upper, got {lower}, {upper}")
    if not training:
        slope = (float(lower) + float(upper)) / 2
        return x.relu() - (-x).relu() * slope
    u = x.session.rand_uniform(tuple(x.shape))
    slope = u * (float(upper) - float(lower)) + float(lower)
    return x.relu() - (-x).relu() * slope


def softsign(input):
    x = _x("softsign", input)
    return x / (x.abs() + 1.0)


def softshrink(input, lambd=0.5):
    x = _x("softshrink", input)
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambda must be >= 0, got {lambd}")
    return (x - float(lambd)).relu() - (-x - float(lambd)).relu()


def hardshrink(input, lambd=0.5):
    x = _x("hardshrink", input)
    return x.session.op("where", x.abs().gt(float(lambd)), x, 0.0)


def tanhshrink(input):
    x = _x("tanhshrink", input)
    return x - x.tanh()


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, value elsewhere."""
    x = _x("threshold", input)
    return x.session.op("where", x.gt(float(threshold)), x, float(value))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x) over dim (None: torch's implicit choice, 0 for 0-, 1- and 3-D input, else 1)."""
    x = _x("softmin", input)
    d = (0 if x.ndim in (0, 1, 3) else 1) if dim is None else dim
    return composite.softmax(-x, d)

