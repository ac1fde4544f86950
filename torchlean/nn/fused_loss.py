"""cross_entropy's plain case (2-D logits, class-index labels, no weight, no label smoothing)
as the one fused registry op cross_entropy_rows: the tape keeps the logits and two floats per
row instead of an (N, V) log_softmax, and the backward writes softmax - onehot in one pass.

`enabled` switches the fused path off (the composite log_softmax + gather is used instead),
for benchmarks and comparisons."""
from __future__ import annotations

import numpy as np

enabled = True


def applies(x, weight, label_smoothing) -> bool:
    """Whether cross_entropy may take the fused path for these arguments."""
    return enabled and x.ndim == 2 and x.shape[1] >= 1 and weight is None and \
        float(label_smoothing) == 0.0


def cross_entropy_rows(x, labels: np.ndarray, keep: np.ndarray, reduction: str):
    """Loss of logits x (N, V) against checked labels; rows where keep is False are ignored
    (loss 0, no gradient, left out of the 'mean' denominator: 0 / 0 = NaN when all are)."""
    s = x.session
    lab = np.where(keep, labels, x.shape[1]).astype(np.int64)   # V: out of range, so ignored
    loss = s.op("cross_entropy_rows", x, labels=lab)
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    kept = int(np.count_nonzero(keep))
    return total * (1.0 / kept) if kept else total * float("nan")
