"""What every shape rule builds on: the error type, the shape of a value, rank and axis checks.

Rules receive shape tuples when the generated code computes outputs and kernel arguments, and
buffers (anything with a `.shape`) inside VJP expressions; `shape` accepts both.
"""
from __future__ import annotations

import operator


class ShapeError(ValueError):
    """A shape rule was violated; the generated op adds its name and the input shapes."""


def shape(v):
    """The shape tuple of a buffer or array, or of a shape itself."""
    return tuple(getattr(v, "shape", v))


def require_rank(s, lo, hi=None, what="input"):
    """Raise unless lo <= len(s) (<= hi when given)."""
    if len(s) < lo or (hi is not None and len(s) > hi):
        want = f"rank {lo}" if hi == lo else f"rank >= {lo}" if hi is None else f"rank {lo}..{hi}"
        raise ShapeError(f"{what} must have {want}, got rank {len(s)}")


def axis_index(s, axis):
    """`axis` of a shape of rank len(s) as a non-negative index (negative counts from the end)."""
    r = len(s)
    a = operator.index(axis)
    if not -r <= a < r:
        raise ShapeError(f"axis {axis} is out of range for rank {r}")
    return a % r
