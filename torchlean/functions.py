"""torch.X forms of Tensor methods: torchlean.exp(x) is x.exp(), torchlean.sum(x, dim=1) is
x.sum(dim=1), and so on for every method torch also offers at top level. Each forwards to the
method, so the two never disagree; the input must be a Tensor (a Parameter, an IntTensor), as
torch requires, and anything else raises TypeError naming the function."""
from __future__ import annotations

import math

from torchlean.int_tensor import IntTensor
from torchlean.session import Parameter, Tensor, default_session

# torch.X(input, ...) == input.X(...) for each of these
METHODS = ("abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "relu", "reciprocal",
           "neg", "square", "sum", "mean", "amax", "amin", "max", "min", "var", "std",
           "logsumexp", "flatten", "reshape", "transpose", "permute", "squeeze", "unsqueeze",
           "t", "detach", "clone", "numel", "floor", "trunc", "gather", "broadcast_to")


def _as_input(name, x):
    if isinstance(x, (Tensor, IntTensor)):
        return x
    if isinstance(x, Parameter):
        return default_session().use(x)
    raise TypeError(f"torchlean.{name}(): argument 'input' must be a Tensor, not "
                    f"{type(x).__name__} (wrap data with torchlean.tensor first)")


def _forward(name):
    def f(input, *args, **kwargs):
        return getattr(_as_input(name, input), name)(*args, **kwargs)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"torch.{name}(input, ...): the same as input.{name}(...)."
    return f


for _n in METHODS:
    globals()[_n] = _forward(_n)
del _n


def add(input, other, *, alpha=1):
    x = _as_input("add", input)
    return x + (other if alpha == 1 else other * alpha)


def sub(input, other, *, alpha=1):
    x = _as_input("sub", input)
    return x - (other if alpha == 1 else other * alpha)


def mul(input, other):
    return _as_input("mul", input) * other


def div(input, other, *, rounding_mode=None):
    return _as_input("div", input).div(other, rounding_mode=rounding_mode)


def matmul(input, other):
    return _as_input("matmul", input) @ other


def mm(input, mat2):
    x = _as_input("mm", input)
    if x.ndim != 2 or len(mat2.shape) != 2:
        raise ValueError(f"mm: expected two matrices, got shapes {tuple(x.shape)} and "
                         f"{tuple(mat2.shape)} (torchlean.matmul broadcasts)")
    return x @ mat2


def bmm(input, mat2):
    x = _as_input("bmm", input)
    m = _as_input("bmm", mat2)
    if x.ndim != 3 or m.ndim != 3 or x.shape[0] != m.shape[0] or x.shape[2] != m.shape[1]:
        raise ValueError(f"bmm: expected (B, n, m) and (B, m, p), got shapes "
                         f"{tuple(x.shape)} and {tuple(m.shape)}")
    return x.session.op("bmm", x, m)


def maximum(input, other):
    return _as_input("maximum", input).session.op("maximum", input, other)


def minimum(input, other):
    return _as_input("minimum", input).session.op("minimum", input, other)


def clamp(input, min=None, max=None):  # noqa: A002 - torch's names
    """torch.clamp(input, min, max): two finite numbers are the registry clamp (derivative 1
    strictly inside); one bound, or an infinite or Tensor bound, is maximum / minimum (which
    keeps infinities)."""
    x = _as_input("clamp", input)
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if isinstance(x, IntTensor):
        return x.clamp(min, max)
    finite = all(isinstance(v, (int, float)) and math.isfinite(v) for v in (min, max))
    if finite and min <= max:
        return x.clamp(lo=float(min), hi=float(max))
    y = x if min is None else x.session.op("maximum", x, min)
    return y if max is None else y.session.op("minimum", y, max)


clip = clamp


__all__ = list(METHODS) + ["add", "sub", "mul", "div", "matmul", "mm", "bmm", "maximum",
                           "minimum", "clamp", "clip"]
