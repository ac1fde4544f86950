"""Selecting one entry along an axis (max/min with indices) and its adjoint."""
from __future__ import annotations

from .core import ShapeError
from .views import reduce


def select_axis(x, idx, axis):
    """Output of select_along_axis: x without `axis`; idx must have exactly that shape."""
    want = reduce(x, axis)
    if tuple(idx) != want:
        raise ShapeError(f"indices of shape {tuple(idx)} must be {want}, the shape of "
                         f"{tuple(x)} without axis {axis}")
    return want


def select_axis_back(idx, g, shape, axis):
    """dx of select_along_axis: `shape`; idx and g must both be `shape` without `axis`."""
    shape = tuple(int(d) for d in shape)
    want = reduce(shape, axis)
    if tuple(idx) != want or tuple(g) != want:
        raise ShapeError(f"indices {tuple(idx)} and grad {tuple(g)} must both be {want}, the "
                         f"shape of {shape} without axis {axis}")
    return shape
