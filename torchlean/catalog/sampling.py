"""Random sampling with tensor parameters: bernoulli (a 0/1 draw per probability), normal
(mean + std * a standard normal draw) and multinomial (category indices), from torchlean's one
key stream."""
from __future__ import annotations

import numpy as np

from torchlean import factories
from torchlean.catalog import _common as c
from torchlean.int_tensor import IntTensor
from torchlean.session import default_session

METHODS = ("bernoulli", "multinomial")
EXPORTS = {"torch": ("bernoulli", "normal", "multinomial")}


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


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """int64 category indices drawn with probabilities proportional to each row of input:
    with replacement by the inverse CDF of uniform draws; without, as the num_samples largest
    keys u^(1 / w) (Efraimidis-Spirakis: the same law as drawing one at a time)."""
    op = "multinomial"
    x = c.tensor(op, input)
    if generator is not None:
        raise TypeError(f"{op}: generator= is not supported (torchlean.manual_seed)")
    if x.ndim not in (1, 2):
        raise RuntimeError(f"{op}: prob_dist must be 1 or 2 dim, got shape {tuple(x.shape)}")
    w = x.numpy().astype(np.float64).reshape(-1, x.shape[-1])
    k = int(num_samples)
    if not np.isfinite(w).all() or (w < 0).any() or (w.sum(1) <= 0).any():
        raise RuntimeError(f"{op}: probability tensor contains either inf, nan or element < 0, "
                           "or a row sums to 0")
    if k <= 0 or (not replacement and k > (w > 0).sum(1).min()):
        raise RuntimeError(f"{op}: cannot draw {k} samples from {int((w > 0).sum(1).min())} "
                           f"nonzero categories {'with' if replacement else 'without'} "
                           "replacement")
    u = x.session.rand_uniform((w.shape[0], k if replacement else w.shape[1])).numpy()
    u = u.astype(np.float64)
    if replacement:
        cdf = np.cumsum(w, 1) / w.sum(1, keepdims=True)
        out = np.stack([np.searchsorted(cdf[i], u[i], side="right") for i in range(len(w))])
        out = np.minimum(out, w.shape[1] - 1)
    else:
        with np.errstate(divide="ignore"):
            keys = np.where(w > 0, np.log(np.maximum(u, 1e-300)) / w, -np.inf)
        out = np.argsort(-keys, axis=1, kind="stable")[:, :k]
    return IntTensor(out.reshape(tuple(x.shape[:-1]) + (k,)).astype(np.int64))
