"""torch's ctc_loss: the forward (alpha) recursion of connectionist temporal classification in
log space over the blank-extended targets, one step per time frame for the whole batch.

Unreachable states hold -1e30 rather than -inf, so logsumexp's gradient stays finite (0) on
them; a loss at or past 1e29 means no alignment exists and is reported as inf (0 with
zero_infinity), as torch."""
from __future__ import annotations

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c
from torchlean.nn.loss_functions import integer_labels

EXPORTS = {"nn.functional": ("ctc_loss",), "torch": ("ctc_loss",)}

_UNREACHABLE = -1e30


def _lengths(op, v, n, what):
    a = np.asarray(v.numpy() if hasattr(v, "numpy") else v).reshape(-1)
    if a.dtype.kind not in "iu" or a.shape != (n,) or (a < 0).any():
        raise RuntimeError(f"{op}: {what} must be {n} non-negative integers, got {a!r}")
    return a.astype(np.int64)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """log_probs (T, N, C) (or (T, C)), targets (N, S) padded or 1-D concatenated."""
    op = "ctc_loss"
    lp = c.tensor(op, log_probs, "log_probs")
    unbatched = lp.ndim == 2
    if unbatched:
        lp = lp.unsqueeze(1)
    if lp.ndim != 3:
        raise RuntimeError(f"{op}: log_probs must be (T, N, C) or (T, C), got "
                           f"{tuple(lp.shape)}")
    t_max, n, classes = lp.shape
    if not 0 <= blank < classes:
        raise RuntimeError(f"{op}: blank {blank} must be in [0, {classes})")
    in_len = _lengths(op, input_lengths, n, "input_lengths")
    tgt_len = _lengths(op, target_lengths, n, "target_lengths")
    if (in_len > t_max).any():
        raise RuntimeError(f"{op}: input_lengths {in_len.tolist()} exceed T = {t_max}")
    tg = integer_labels(op, targets, "target")
    if tg.ndim == 1:                     # concatenated targets (or one unbatched sequence)
        starts = np.concatenate([[0], np.cumsum(tgt_len)[:-1]])
        rows = [tg[s:s + k] for s, k in zip(starts, tgt_len)]
    else:
        tg = tg.reshape(n, -1)
        rows = [tg[i, :k] for i, k in enumerate(tgt_len)]
    if any(len(r) != k for r, k in zip(rows, tgt_len)):
        raise RuntimeError(f"{op}: targets do not hold target_lengths {tgt_len.tolist()}")
    if any(((r < 0) | (r >= classes) | (r == blank)).any() for r in rows):
        raise RuntimeError(f"{op}: target labels must be in [0, {classes}) and not the blank "
                           f"{blank}")
    width = 2 * int(tgt_len.max(initial=0)) + 1
    ext = np.full((n, width), blank, np.int64)
    for i, r in enumerate(rows):
        ext[i, 1:2 * len(r):2] = r
    skip = np.zeros((n, width), bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    s = lp.session
    # emissions[t, i, k] = log_probs[t, i, ext[i, k]]: one gather for every frame
    pos = (np.arange(t_max)[:, None, None] * n + np.arange(n)[None, :, None]) * classes + ext[None]
    emit = c.rearrange(lp, pos)
    start = np.full((n, width), _UNREACHABLE, np.float32)
    start[:, :2] = 0.0
    start[:, 1] = np.where(tgt_len > 0, 0.0, _UNREACHABLE)
    alpha = s.tensor(start) + emit[0]
    neg1 = s.tensor(np.full((n, 1), _UNREACHABLE, np.float32))
    neg2 = s.tensor(np.full((n, 2), _UNREACHABLE, np.float32))
    skip_t = s.tensor(skip.astype(np.float32))
    for t in range(1, t_max):
        one = composite.cat([neg1, alpha[:, :-1]], 1) if width > 1 else neg1
        two = composite.cat([neg2, alpha[:, :-2]], 1) if width > 2 else \
            s.tensor(np.full((n, width), _UNREACHABLE, np.float32))
        two = s.op("where", skip_t, two, _UNREACHABLE)
        step = composite.logsumexp(composite.stack([alpha, one, two], 0), 0) + emit[t]
        active = s.tensor((t < in_len).astype(np.float32).reshape(n, 1))
        alpha = s.op("where", active, step, alpha)
    last = 2 * tgt_len
    final = c.rearrange(alpha, np.stack([np.arange(n) * width + last,
                                         np.arange(n) * width + np.maximum(last - 1, 0)], 1))
    both = s.op("where", s.tensor(np.stack([np.ones(n), tgt_len > 0], 1).astype(np.float32)),
                final, _UNREACHABLE)
    loss = -composite.logsumexp(both, 1)
    impossible = loss.ge(1e29)
    loss = s.op("where", impossible, 0.0 if zero_infinity else np.inf, loss)
    if reduction == "none" and unbatched:
        return loss.reshape(())
    if reduction == "mean":
        return (loss / s.tensor(np.maximum(tgt_len, 1).astype(np.float32))).mean()
    return c.reduce_loss(op, loss, reduction)
