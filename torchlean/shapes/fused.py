"""Fused kernels: cross-entropy over rows of logits (labels an integer index attr)."""
from __future__ import annotations

from .core import ShapeError, require_rank


def ce_rows(x, labels):
    """Logits (N, V) with N labels -> one value per row (loss, row max, log of the row sum)."""
    require_rank(x, 2, 2, "logits")
    if x[1] < 1:
        raise ShapeError(f"logits {tuple(x)} need at least one class")
    if int(labels.size) != x[0]:
        raise ShapeError(f"expected {x[0]} labels for logits {tuple(x)}, got {int(labels.size)}")
    return (x[0],)
