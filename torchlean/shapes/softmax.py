"""Softmax rows (leading axes folded) and the optional boolean mask of masked_softmax."""
from __future__ import annotations

import math

from .core import ShapeError
from .generic import nonempty_last


def softmax_rows(s):
    """Rows of a softmax input (leading axes folded); the last axis must be non-empty."""
    nonempty_last(s)
    return math.prod(s[:-1])


def masked_softmax(s, mask):
    """x's shape; mask (boolean, or None for no mask) must have x's shape or x's last-2 shape."""
    nonempty_last(s)
    if mask is None:
        return tuple(s)
    m = tuple(mask.shape)
    if m == tuple(s):
        return tuple(s)
    if len(s) >= 2 and m == tuple(s[-2:]):
        return tuple(s)
    want = f"{tuple(s)}" + (f" or {tuple(s[-2:])}" if len(s) >= 2 else "")
    raise ShapeError(f"mask shape {m} must be {want}")


def mask_rows(s, mask):
    """Rows the mask holds (the kernel reads mask row r % mask_rows); 0 when there is no mask."""
    if mask is None:
        return 0
    return math.prod(mask.shape[:-1]) if len(mask.shape) else 1
