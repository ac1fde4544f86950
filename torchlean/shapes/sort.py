"""Rows taken by index (sorting, top-k, running extremes) and the adjoint of taking them."""
from __future__ import annotations

from .core import ShapeError, shape


def take_rows(x, idx):
    """Output of take_rows: idx's shape; x and idx agree on every axis but the last."""
    x, idx = shape(x), shape(idx)
    if len(x) < 1 or len(idx) != len(x) or tuple(x[:-1]) != tuple(idx[:-1]):
        raise ShapeError(f"indices of shape {tuple(idx)} must match {tuple(x)} on every axis "
                         f"but the last")
    return tuple(idx)


def take_rows_back(idx, g, cols):
    """dx of take_rows: idx's leading axes and `cols` columns; g must have idx's shape."""
    idx, g = shape(idx), shape(g)
    if tuple(idx) != tuple(g) or len(idx) < 1:
        raise ShapeError(f"indices {tuple(idx)} and grad {tuple(g)} must have one shape "
                         f"(at least one axis)")
    return tuple(idx[:-1]) + (int(cols),)
