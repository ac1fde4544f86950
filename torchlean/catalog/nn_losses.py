"""torch.nn.functional's margin, embedding, Poisson and Gaussian losses and the distances they
use (cosine_similarity, pairwise_distance, pdist), with torch's formulas, defaults and
reductions. Integer targets are host arrays; everything else is tape ops."""
from __future__ import annotations

import math

import numpy as np

from torchlean.catalog import _common as c
from torchlean.catalog.reduce import pnorm
from torchlean.nn import functional as F
from torchlean.nn.loss_functions import integer_labels

EXPORTS = {"nn.functional": ("cosine_similarity", "pairwise_distance", "pdist",
                             "cosine_embedding_loss", "gaussian_nll_loss",
                             "hinge_embedding_loss", "margin_ranking_loss", "multi_margin_loss",
                             "multilabel_margin_loss", "multilabel_soft_margin_loss",
                             "poisson_nll_loss", "soft_margin_loss", "triplet_margin_loss",
                             "triplet_margin_with_distance_loss", "linear_cross_entropy"),
           "torch": ("cosine_similarity", "pairwise_distance", "pdist", "cosine_embedding_loss",
                     "hinge_embedding_loss", "margin_ranking_loss", "poisson_nll_loss",
                     "triplet_margin_loss")}


def _clamped_below(t, eps):
    """max(t, eps) in value with t's gradient (torch clamps in place under no_grad)."""
    return t + (t.session.op("maximum", t, float(eps)) - t).detach()


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum((x1 / max(|x1|, eps)) (x2 / max(|x2|, eps))) over dim, broadcasting x1 and x2."""
    a = c.tensor("cosine_similarity", x1, "x1")
    b = c.operand(a.session, "cosine_similarity", x2, "x2")
    shape = c.broadcast_shapes("cosine_similarity", a.shape, b.shape)
    d = c.dim("cosine_similarity", dim, len(shape))
    a, b = c.expand(a, shape), c.expand(b, shape)
    na = _clamped_below(pnorm("cosine_similarity", a, 2, (d,), True), eps)
    nb = _clamped_below(pnorm("cosine_similarity", b, 2, (d,), True), eps)
    return ((a / na) * (b / nb)).sum(d)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps over the last axis."""
    a = c.tensor("pairwise_distance", x1, "x1")
    b = c.operand(a.session, "pairwise_distance", x2, "x2")
    shape = c.broadcast_shapes("pairwise_distance", a.shape, b.shape)
    d = a - b + float(eps)
    if not shape:
        return pnorm("pairwise_distance", d.reshape(1), p, (0,), keepdim)
    return pnorm("pairwise_distance", d, p, (len(shape) - 1,), keepdim)


def pdist(input, p=2):
    """Distances between every pair of rows i < j of an (N, M) input, in row-major order."""
    x = c.tensor("pdist", input)
    if x.ndim != 2:
        raise RuntimeError(f"pdist: only supports 2-D tensors, got shape {tuple(x.shape)}")
    if p < 0:
        raise RuntimeError(f"pdist: p must be non-negative, got {p}")
    i, j = np.triu_indices(x.shape[0], 1)
    if i.size == 0:
        return x.session.tensor(np.zeros(0, np.float32))
    d = x[i] - x[j]
    return pnorm("pdist", d, p, (1,), False)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos where target is 1, max(0, cos - margin) where it is -1 (cos over the last axis,
    each squared norm plus 1e-12)."""
    op = "cosine_embedding_loss"
    a = c.tensor(op, input1, "input1")
    s = a.session
    b = c.operand(s, op, input2, "input2")
    y = c.operand(s, op, target, "target")
    if tuple(a.shape) != tuple(b.shape) or a.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected inputs of one shape (N, D) or (D,), got "
                           f"{tuple(a.shape)} and {tuple(b.shape)}")
    d = a.ndim - 1
    cos = (a * b).sum(d) / (((a * a).sum(d) + 1e-12) * ((b * b).sum(d) + 1e-12)).sqrt()
    pos = s.op("where", y.eq(1.0), 1.0 - cos, 0.0)
    neg = s.op("where", y.eq(-1.0), (cos - float(margin)).relu(), 0.0)
    return c.reduce_loss(op, pos + neg, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) when
    full); var has input's shape, or one fewer trailing axis, or a last axis of 1."""
    op = "gaussian_nll_loss"
    x = c.tensor(op, input)
    s = x.session
    t = c.operand(s, op, target, "target")
    v = c.operand(s, op, var, "var")
    if tuple(v.shape) == tuple(x.shape[:-1]) and x.ndim:
        v = v.unsqueeze(-1)
    if tuple(v.shape) != tuple(x.shape) and not (v.shape[-1:] == (1,)
                                                  and tuple(v.shape[:-1]) == tuple(x.shape[:-1])):
        raise ValueError(f"{op}: var of shape {tuple(v.shape)} does not match input of shape "
                         f"{tuple(x.shape)}")
    if (v.numpy() < 0).any():
        raise ValueError(f"{op}: var has negative entry/entries")
    v = _clamped_below(v, eps)
    loss = (v.log() + (x - t) ** 2 / v) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return c.reduce_loss(op, loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    op = "hinge_embedding_loss"
    x = c.tensor(op, input)
    s = x.session
    y = c.operand(s, op, target, "target")
    c.broadcast_shapes(op, x.shape, y.shape)
    loss = s.op("where", y.ne(1.0), (float(margin) - x).relu(), 0.0) + \
        s.op("where", y.ne(-1.0), x, 0.0)
    return c.reduce_loss(op, loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target (input1 - input2) + margin)."""
    op = "margin_ranking_loss"
    a = c.tensor(op, input1, "input1")
    s = a.session
    b, y = c.operand(s, op, input2, "input2"), c.operand(s, op, target, "target")
    if not (tuple(a.shape) == tuple(b.shape) == tuple(y.shape)):
        raise RuntimeError(f"{op}: input1 {tuple(a.shape)}, input2 {tuple(b.shape)} and target "
                           f"{tuple(y.shape)} must have one shape")
    return c.reduce_loss(op, (-y * (a - b) + float(margin)).relu(), reduction)


def _rows_and_labels(op, input, target):
    x = c.tensor(op, input)
    if x.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected input (N, C) or (C,), got {tuple(x.shape)}")
    return x.reshape(1, -1) if x.ndim == 1 else x, integer_labels(op, target, "target")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """sum over j != y of max(0, margin - x[y] + x[j])^p (times weight[y]) / C per sample."""
    op = "multi_margin_loss"
    x, y = _rows_and_labels(op, input, target)
    n, k = x.shape
    y = y.reshape(-1)
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 are supported, got {p}")
    if y.shape != (n,) or (y.size and (y.min() < 0 or y.max() >= k)):
        raise IndexError(f"{op}: target {y.tolist()} must hold {n} class indices in [0, {k})")
    s = x.session
    xy = x[np.arange(n), y].reshape(n, 1)
    h = (x - xy + float(margin)).relu()
    h = h * h if p == 2 else h
    others = np.ones((n, k), np.float32)
    others[np.arange(n), y] = 0.0
    h = h * s.tensor(others)
    if weight is not None:
        h = h * c.operand(s, op, weight, "weight")[y].reshape(n, 1)
    loss = h.sum(1) * (1.0 / k)
    return c.reduce_loss(op, loss if c.tensor(op, input).ndim == 2 else loss.reshape(()),
                         reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over labels j and non-labels k of max(0, 1 - (x[j] - x[k])) / C per sample; a
    sample's labels are its target's leading non-negative entries (up to the first -1)."""
    op = "multilabel_margin_loss"
    x, y = _rows_and_labels(op, input, target)
    n, k = x.shape
    y = y.reshape(n, k)
    is_label = np.zeros((n, k), bool)
    for i in range(n):
        for v in y[i]:
            if v < 0:
                break
            if v >= k:
                raise IndexError(f"{op}: target index {v} out of range [0, {k})")
            is_label[i, v] = True
    pairs = (is_label[:, :, None] & ~is_label[:, None, :]).astype(np.float32)
    h = (1.0 - x.unsqueeze(2) + x.unsqueeze(1)).relu() * x.session.tensor(pairs)
    loss = h.sum((1, 2)) * (1.0 / k)
    return c.reduce_loss(op, loss if c.tensor(op, input).ndim == 2 else loss.reshape(()),
                         reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """-(y log sigmoid(x) + (1 - y) log sigmoid(-x)), averaged over the classes."""
    op = "multilabel_soft_margin_loss"
    x = c.tensor(op, input)
    s = x.session
    y = c.operand(s, op, target, "target")
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"{op}: input {tuple(x.shape)} and target {tuple(y.shape)} must have "
                         "one shape")
    loss = -(y * -F.softplus(-x) + (1.0 - y) * -F.softplus(x))
    if weight is not None:
        loss = loss * c.operand(s, op, weight, "weight")
    loss = loss.mean(x.ndim - 1) if x.ndim else loss
    return c.reduce_loss(op, loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """exp(x) - y x (log_input) or x - y log(x + eps); full adds Stirling's y log y - y +
    0.5 log(2 pi y) where y > 1."""
    op = "poisson_nll_loss"
    x = c.tensor(op, input)
    s = x.session
    y = c.operand(s, op, target, "target")
    loss = x.exp() - y * x if log_input else x - y * (x + float(eps)).log()
    if full:
        safe = s.op("where", y.gt(1.0), y, 1.0)
        stirling = safe * safe.log() - safe + (safe * (2 * math.pi)).log() * 0.5
        loss = loss + s.op("where", y.gt(1.0), stirling, 0.0)
    return c.reduce_loss(op, loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y x))."""
    op = "soft_margin_loss"
    x = c.tensor(op, input)
    y = c.operand(x.session, op, target, "target")
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"{op}: input {tuple(x.shape)} and target {tuple(y.shape)} must have "
                         "one shape")
    return c.reduce_loss(op, F.softplus(-y * x), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)), d(a, n) replaced by min(d(a, n), d(p, n)) when swap."""
    op = "triplet_margin_with_distance_loss"
    a = c.tensor(op, anchor, "anchor")
    s = a.session
    p, n = c.operand(s, op, positive, "positive"), c.operand(s, op, negative, "negative")
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    dist = distance_function or pairwise_distance
    d_ap, d_an = dist(a, p), dist(a, n)
    if swap:
        d_an = s.op("minimum", d_an, dist(p, n))
    return c.reduce_loss(op, (d_ap - d_an + float(margin)).relu(), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    op = "triplet_margin_loss"
    shapes = [tuple(t.shape) for t in (anchor, positive, negative)]
    if len({len(sh) for sh in shapes}) != 1 or len(shapes[0]) not in (1, 2):
        raise RuntimeError(f"{op}: anchor, positive and negative must all be 1-D or all 2-D, "
                           f"got shapes {shapes}")
    return triplet_margin_with_distance_loss(
        anchor, positive, negative, margin=margin, swap=swap, reduction=reduction,
        distance_function=lambda u, v: pairwise_distance(u, v, p, eps))


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0, options=None):
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...): the logits are
    formed and reduced here as two ops (torch may fuse them in chunks)."""
    x = c.tensor("linear_cross_entropy", input)
    logits = F.linear(x, c.operand(x.session, "linear_cross_entropy", linear_weight,
                                   "linear_weight"),
                      None if linear_bias is None else c.operand(
                          x.session, "linear_cross_entropy", linear_bias, "linear_bias"))
    return F.cross_entropy(logits, target, weight=weight, reduction=reduction,
                           ignore_index=-100 if ignore_index is None else ignore_index,
                           label_smoothing=label_smoothing)
