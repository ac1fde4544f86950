"""Random sampling with tensor parameters: bernoulli (a 0/1 draw per probability) and normal
(mean + std * a standard normal draw), from torchlean's one key stream. (multinomial lives in
catalog/categorical.py.)"""
from __future__ import annotations

import numpy as np

from torchlean import factories
from torchlean.catalog import _common as c
from torchlean.session import default_session

METHODS = ("bernoulli",)
EXPORTS = {"torch": ("bernoulli", "normal")}


def _standard_normal(s, shape):
    z = factories.randn(*shape) if shape else factories.randn(1).reshape(())
    return z if z.session is s else s.tensor(z.numpy())


def bernoulli(input, p=None, *, generator=None):
    """1 with probability input (or the number p, for every element), else 0; no gradient."""
    x = c.tensor("bernoulli", input)
    if generator is not None:
        raise TypeError("bernoulli: generator= is not supported (torchlean.manual_seed)")
    s = x.session
    if p is None:
        probs = x.detach()
        a = probs.numpy()
        if a.size and not ((a >= 0) & (a <= 1)).all():
            raise RuntimeError(f"bernoulli: expected all probabilities in [0, 1] (shape "
                               f"{tuple(x.shape)})")
    else:
        if not 0 <= float(p) <= 1:
            raise RuntimeError(f"bernoulli: expected p in [0, 1], got {p}")
        probs = float(p)
    u = s.rand_uniform(tuple(x.shape))
    return u.lt(probs)


def normal(mean, std=1.0, size=None, *, generator=None):
    """torch.normal(mean, std): either may be a Tensor (shapes broadcast) or a number (then
    size gives the shape). Gradients reach Tensor mean and std (reparameterized)."""
    if generator is not None:
        raise TypeError("normal: generator= is not supported (torchlean.manual_seed)")
    s = c.session_of(mean, std) if hasattr(mean, "session") or hasattr(std, "session") else \
        default_session()
    if not hasattr(mean, "shape") and not hasattr(std, "shape"):
        if size is None:
            raise TypeError("normal: with a number mean and std, size is required")
        shape = tuple(size)
    else:
        if size is not None:
            raise TypeError("normal: size is only for a number mean and std")
        shape = c.broadcast_shapes("normal", np.shape(mean), np.shape(std))
    if not hasattr(std, "shape") and float(std) < 0:
        raise RuntimeError(f"normal: expected std >= 0, got {std}")
    m = c.operand(s, "normal", mean, "mean")
    sd = c.operand(s, "normal", std, "std")
    return m + sd * _standard_normal(s, shape)
