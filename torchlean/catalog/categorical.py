"""Sampling from categorical weights: torch.multinomial (and Tensor.multinomial).

The draws come from torchlean's seeded SplitMix64 stream (or a torchlean.Generator), one key per
call, on the host: sample j of row r uses the 53-bit uniform built from draws 2k and 2k+1 of
that key (k = r * width + j), so the result depends on (seed, counter) only, on every backend.

With replacement each sample is the inverse CDF of the row at its uniform (float64 cumulative
sums). Without replacement the rows run an exponential race: category i gets the key
E_i = -log(u_i) / w_i and the num_samples smallest keys win in order, which is exactly
sequential sampling without replacement (categories of weight 0 come last, in index order,
as torch's do once the positive ones are used up).
"""
from __future__ import annotations

import numpy as np

from torchlean import random as _random
from torchlean.int_tensor import IntTensor


def _uniform53(key: int, count: int) -> np.ndarray:
    """count float64 uniforms in [0, 1), 53 bits each, from draws 2k and 2k+1 of key."""
    hi = _random._draws(key, 0, count, 2).astype(np.uint64) >> np.uint64(11)
    lo = _random._draws(key, 1, count, 2).astype(np.uint64)
    return ((hi << np.uint64(32)) | lo).astype(np.float64) * 2.0 ** -53


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """torch.multinomial: num_samples category indices per row of `input` (1-D or 2-D
    non-negative weights, not necessarily normalised), as an int64 IntTensor of shape
    (num_samples,) or (rows, num_samples)."""
    op = "multinomial"
    if isinstance(input, IntTensor) or not hasattr(input, "numpy"):
        raise RuntimeError(f"{op}: only supports floating-point dtypes for input, got "
                           f"{type(input).__name__}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
        raise TypeError(f"{op}(): argument 'num_samples' must be int, not "
                        f"{type(num_samples).__name__}")
    w = np.asarray(input.numpy(), dtype=np.float64)
    if w.ndim not in (1, 2):
        raise RuntimeError(f"{op}: prob_dist must be 1 or 2 dim, got shape {w.shape}")
    n = int(num_samples)
    if n <= 0:
        raise RuntimeError(f"{op}: cannot sample n_sample <= 0 samples (got {n})")
    rows = w.reshape(-1, w.shape[-1])
    width = rows.shape[1]
    if not replacement and n > width:
        raise RuntimeError(f"{op}: cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement (n_sample={n}, prob_dist of shape {w.shape})")
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise RuntimeError(f"{op}: probability tensor contains either `inf`, `nan` or "
                           f"element < 0")
    if rows.shape[0] and (rows.sum(axis=1) <= 0).any():
        raise RuntimeError(f"{op}: invalid multinomial distribution (sum of probabilities "
                           f"<= 0) in input of shape {w.shape}")
    key = _random.key_for(op, generator)
    if replacement:
        u = _uniform53(key, rows.shape[0] * n).reshape(rows.shape[0], n)
        cdf = np.cumsum(rows, axis=1)
        out = np.empty((rows.shape[0], n), dtype=np.int64)
        for r in range(rows.shape[0]):
            # the first category whose cumulative weight exceeds u * total (never one of weight
            # 0; u * total rounding up to total takes the last positive category)
            idx = np.searchsorted(cdf[r], u[r] * cdf[r, -1], side="right")
            out[r] = np.minimum(idx, np.flatnonzero(rows[r] > 0)[-1])
    else:
        u = _uniform53(key, rows.shape[0] * width).reshape(rows.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            race = np.where(rows > 0, -np.log1p(-u) / rows, np.inf)   # Exp(1) / w; 0 -> last
        out = np.argsort(race, axis=1, kind="stable")[:, :n].astype(np.int64)
    return IntTensor(out.reshape(w.shape[:-1] + (n,)))


METHODS = ["multinomial"]
EXPORTS = {"torch": ["multinomial"]}
