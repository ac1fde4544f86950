"""Concatenation, slices, gathers and scatters (index attrs are integer NumPy arrays)."""
from __future__ import annotations

import math

from .core import ShapeError, require_rank


def concat1d(a, b):
    require_rank(a, 1, 1, "a")
    require_rank(b, 1, 1, "b")
    return (a[0] + b[0],)


def slice1d(s, start, length):
    require_rank(s, 1, 1)
    if start < 0 or length < 0 or start + length > s[0]:
        raise ShapeError(f"slice [{start}:{start + length}] is out of range for length {s[0]}")
    return (length,)


def concat0(a, b):
    require_rank(a, 1, None, "a")
    if tuple(a[1:]) != tuple(b[1:]) or len(b) != len(a):
        raise ShapeError(f"trailing shapes must match, got {tuple(a)} and {tuple(b)}")
    return (a[0] + b[0],) + tuple(a[1:])


def slice_range0(s, start, length):
    require_rank(s, 1)
    if start < 0 or length < 0 or start + length > s[0]:
        raise ShapeError(f"range [{start}:{start + length}] is out of range for leading axis {s[0]}")
    return (length,) + tuple(s[1:])


def pad_range0(s, start, total):
    """g (len, ...) placed at [start, start+len) of a zero (total, ...) result."""
    require_rank(s, 1)
    if start < 0 or start + s[0] > total:
        raise ShapeError(f"range [{start}:{start + s[0]}] does not fit a leading axis of {total}")
    return (int(total),) + tuple(s[1:])


def as_index(index):
    """A single index attr (0-d integer array) as an int."""
    if getattr(index, "ndim", 0) != 0:
        raise ShapeError(f"index must be a single int, got an array of shape {tuple(index.shape)}")
    return int(index)


def gather_scalar(s, index):
    require_rank(s, 1, 1, "x")
    as_index(index)
    return ()


def gather_row(s, index):
    require_rank(s, 2, 2, "x")
    as_index(index)
    return (s[1],)


def gather_vec(s, indices):
    require_rank(s, 1, 1, "x")
    return tuple(indices.shape)


def gather_rows(s, indices):
    require_rank(s, 2, 2)
    return tuple(indices.shape) + (s[1],)


def scatter_vec(x, v, indices):
    """scatter_add_vec / gather_vec_backward: x a vector, v holds one value per index."""
    require_rank(x, 1, 1, "x")
    _holds(v, int(indices.size))
    return tuple(x)


def scatter_rows(x, v, indices):
    """gather_rows_backward: x (rows, cols), v (k..., cols) with one row per index."""
    require_rank(x, 2, 2, "x")
    if math.prod(v) != int(indices.size) * x[1]:
        raise ShapeError(f"values must hold {int(indices.size)} row(s) of {x[1]}, got shape {tuple(v)}")
    return tuple(x)


def scatter_row(x, v, index):
    require_rank(x, 2, 2, "x")
    require_rank(v, 1, 1, "values")
    i = as_index(index)
    if v[0] != x[1]:
        raise ShapeError(f"values must have shape ({x[1]},), got {tuple(v)}")
    if i >= x[0]:
        raise ShapeError(f"row index {i} is out of range for {x[0]} rows")
    return tuple(x)


def like_gather(g, v, indices):
    """gather_vec_like: gather from vector g, shaped like v (one value per index)."""
    require_rank(g, 1, 1, "g")
    _holds(v, int(indices.size))
    return tuple(v)


def _holds(v, n):
    """v must hold n elements (one value per index)."""
    if math.prod(v) != n:
        raise ShapeError(f"values must hold {n} element(s), got shape {tuple(v)}")
    return tuple(v)
