"""torch.masked's reductions and normalizations: elements where `mask` is false take no part
(each op first replaces them by its identity, with a where, so a NaN or inf there reaches
neither the result nor the gradient). mask=None is the plain op; a mask broadcasts to input."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c
from torchlean.catalog.reduce import pnorm, prod as _prod
from torchlean.catalog.sorting import nanmedian as _nanmedian

EXPORTS = {"masked": ("sum", "mean", "amax", "amin", "argmax", "argmin", "prod", "std", "var",
                      "norm", "normalize", "median", "softmax", "log_softmax", "softmin",
                      "logsumexp", "logaddexp")}


def _prepare(op, input, mask, fill):
    """(input with masked-out elements = fill, 0/1 float mask of input's shape or None)."""
    x = c.tensor(f"masked.{op}", input)
    if mask is None:
        return x, None
    m = c.mask(x.session, f"masked.{op}", mask)
    if c.broadcast_shapes(f"masked.{op}", m.shape, x.shape) != tuple(x.shape):
        raise RuntimeError(f"masked.{op}: mask of shape {tuple(m.shape)} does not broadcast to "
                           f"input shape {tuple(x.shape)}")
    m = c.expand(m, tuple(x.shape))
    return x.session.op("where", m, x, float(fill)), m


def _dims(op, x, dim):
    return c.dims(f"masked.{op}", dim, x.ndim)


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A001
    x, _ = _prepare("sum", input, mask, 0.0)
    return x.sum(_dims("sum", x, dim), keepdim)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x, _ = _prepare("prod", input, mask, 1.0)
    return _prod(x, dim, keepdim) if dim is not None else _prod(x)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x, _ = _prepare("amax", input, mask, -math.inf)
    return x.amax(_dims("amax", x, dim), keepdim)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x, _ = _prepare("amin", input, mask, math.inf)
    return x.amin(_dims("amin", x, dim), keepdim)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x, _ = _prepare("argmax", input, mask, -math.inf)
    return x.argmax(dim, keepdim)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x, _ = _prepare("argmin", input, mask, math.inf)
    return x.argmin(dim, keepdim)


def _count(x, m, ds, keepdim):
    if m is None:
        n = math.prod(x.shape[d] for d in ds)
        shape = composite.reduce(x, "sum", ds, keepdim).shape
        return x.session.tensor(np.full(shape, n, np.float32))
    return m.sum(ds, keepdim)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Sum of the kept elements over their count (NaN where none is kept)."""
    x, m = _prepare("mean", input, mask, 0.0)
    ds = _dims("mean", x, dim)
    return x.sum(ds, keepdim) / _count(x, m, ds, keepdim)


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Sum of squared deviations from the kept mean over (count - correction); correction 1
    by default (unbiased=False: 0)."""
    if unbiased is not None and correction is not None:
        raise ValueError("masked.var: pass either unbiased or correction, not both")
    corr = 1 if correction is None and unbiased is None else (
        correction if correction is not None else int(bool(unbiased)))
    x, m = _prepare("var", input, mask, 0.0)
    ds = _dims("var", x, dim)
    n = _count(x, m, ds, True)
    mu = x.sum(ds, keepdim=True) / n
    dev = x - mu
    if m is not None:
        dev = dev * m
    ss = (dev * dev).sum(ds, keepdim)
    denom = n if keepdim else composite.reshape(n, ss.shape)
    return ss / composite.clamp(denom - float(corr), min=0.0)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    return var(input, dim, unbiased, correction=correction, keepdim=keepdim, mask=mask).sqrt()


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A002
    fill = math.inf if ord == -math.inf else 0.0
    x, _ = _prepare("norm", input, mask, fill)
    return pnorm("masked.norm", x, ord, _dims("norm", x, dim), keepdim)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):  # noqa: A002
    """input / max(norm of the kept elements, eps) (masked-out positions give 0)."""
    x, _ = _prepare("normalize", input, mask, 0.0)
    n = pnorm("masked.normalize", x, ord, _dims("normalize", x, dim), True)
    return x / composite.clamp(n, min=float(eps))


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """torch.masked.median: the lower median along one dim of the kept elements (values only),
    as torch's nanmedian of input with the masked-out elements NaN: so a NaN in input is
    skipped too, and a slice with nothing kept gives NaN."""
    if isinstance(dim, (tuple, list)):
        if len(dim) != 1:
            raise RuntimeError(f"masked.median: dim must be one int, got {dim}")
        dim = dim[0]
    x, _ = _prepare("median", input, mask, math.nan)
    return _nanmedian(x, dim, keepdim).values


def softmax(input, dim, *, dtype=None, mask=None):
    x, _ = _prepare("softmax", input, mask, -math.inf)
    return composite.softmax(x, dim)


def log_softmax(input, dim, *, dtype=None, mask=None):
    x, _ = _prepare("log_softmax", input, mask, -math.inf)
    return composite.softmax(x, dim, "log_softmax")


def softmin(input, dim, *, dtype=None, mask=None):
    x, _ = _prepare("softmin", input, mask, math.inf)
    return composite.softmax(-x, dim)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    x, _ = _prepare("logsumexp", input, mask, -math.inf)
    return composite.logsumexp(x, _dims("logsumexp", x, dim), keepdim)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """log(exp(input) + exp(other)) with masked-out elements of either left out (-inf)."""
    a, _ = _prepare("logaddexp", input, input_mask, -math.inf)
    b, _ = _prepare("logaddexp", other, other_mask, -math.inf)
    shape = c.broadcast_shapes("masked.logaddexp", a.shape, b.shape)
    both = composite.stack([c.expand(a, shape), c.expand(b, shape)], 0)
    return composite.logsumexp(both, 0)
