"""Rows taken by index (sorting, top-k, running extremes), the adjoint of taking them, adding
by index along rows, and the matrix axes of a triangle."""
from __future__ import annotations

from .core import ShapeError, shape


def take_rows(x, idx):
    """Output of take_rows: idx's shape; x and idx agree on every axis but the last."""
    x, idx = shape(x), shape(idx)
    if len(x) < 1 or len(idx) != len(x) or tuple(x[:-1]) != tuple(idx[:-1]):
        raise ShapeError(f"indices of shape {tuple(idx)} must match {tuple(x)} on every axis "
                         f"but the last")
    return tuple(idx)


def first_cols(x, k):
    """Output of topk_rows: x's leading axes and k columns, k at most x's last axis."""
    x = shape(x)
    if len(x) < 1 or not 0 <= int(k) <= x[-1]:
        raise ShapeError(f"k ({int(k)}) must be in [0, {x[-1] if x else 0}] for rows of shape {tuple(x)}")
    return tuple(x[:-1]) + (int(k),)


def take_rows_back(idx, g, cols):
    """dx of take_rows: idx's leading axes and `cols` columns; g must have idx's shape."""
    idx, g = shape(idx), shape(g)
    if tuple(idx) != tuple(g) or len(idx) < 1:
        raise ShapeError(f"indices {tuple(idx)} and grad {tuple(g)} must have one shape "
                         f"(at least one axis)")
    return tuple(idx[:-1]) + (int(cols),)


def put_rows(x, idx, values):
    """Output of put_add_rows: x's shape; idx and values share one shape that agrees with x on
    every axis but the last."""
    x, idx, values = shape(x), shape(idx), shape(values)
    if (len(x) < 1 or len(idx) != len(x) or tuple(x[:-1]) != tuple(idx[:-1])
            or tuple(values) != tuple(idx)):
        raise ShapeError(f"indices {tuple(idx)} and values {tuple(values)} must have one shape "
                         f"that matches {tuple(x)} on every axis but the last")
    return tuple(x)


def mat_rows(x):
    """Rows of the matrices in the last two axes (the second-last axis; rank >= 2)."""
    x = shape(x)
    if len(x) < 2:
        raise ShapeError(f"expected at least 2 dimensions (a matrix), got shape {tuple(x)}")
    return x[-2]
