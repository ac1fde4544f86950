"""Softmax rows (leading axes folded) and the optional boolean mask of masked_softmax."""
from __future__ import annotations

import math

from .core import ShapeError, require_rank


def softmax_shape(s):
    """A softmax input's shape is its output's: rank >= 1 (an empty last axis gives an empty
    result, as torch)."""
    require_rank(s, 1)
    return tuple(s)


def softmax_rows(s):
    """Rows of a softmax input (leading axes folded)."""
    softmax_shape(s)
    return math.prod(s[:-1])


def masked_softmax(s, mask):
    """x's shape; mask (boolean, or None for no mask) must have x's shape or x's last-2 shape."""
    softmax_shape(s)
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
