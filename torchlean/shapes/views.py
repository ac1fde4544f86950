"""Reductions over one axis and views: reshape, flatten and the axis permutations."""
from __future__ import annotations

import math
import operator

from .core import ShapeError, axis_index, require_rank


def reduce(s, axis):
    """Drop `axis`."""
    require_rank(s, 1)
    a = axis_index(s, axis)
    return tuple(s[:a]) + tuple(s[a + 1:])


def outer(s, axis):
    """Elements before `axis` (for axis reductions laid out as outer x len x inner)."""
    return math.prod(s[:axis_index(s, axis)])


def axis_len(s, axis):
    return s[axis_index(s, axis)]


def inner(s, axis):
    return math.prod(s[axis_index(s, axis) + 1:])


def reduce_axis_back(g, shape, axis):
    """Output shape of reduce_axis_backward: `shape`, whose reduction over `axis` must be g."""
    shape = tuple(int(d) for d in shape)
    want = reduce(shape, axis)
    if tuple(g) != want:
        raise ShapeError(f"gradient shape {tuple(g)} does not match {want}, the reduction of "
                         f"{shape} over axis {axis}")
    return shape


def reduce_max_back(x, y, g, axis):
    """dx of reduce_max: x's shape; y and g must be x reduced over `axis`."""
    want = reduce(x, axis)
    if tuple(y) != want or tuple(g) != want:
        raise ShapeError(f"y {tuple(y)} and grad {tuple(g)} must both be {want}, the reduction "
                         f"of {tuple(x)} over axis {axis}")
    return tuple(x)


def reshape(s, new):
    """Reshape with one optional -1."""
    new = tuple(int(d) for d in new)
    n = math.prod(s)
    if new.count(-1) > 1:
        raise ShapeError(f"only one -1 is allowed in shape {new}")
    if -1 in new:
        known = math.prod(d for d in new if d != -1)
        if known == 0 or n % known:
            raise ShapeError(f"cannot reshape {tuple(s)} ({n} elements) to {new}")
        new = tuple(n // known if d == -1 else d for d in new)
    if any(d < 0 for d in new) or math.prod(new) != n:
        raise ShapeError(f"cannot reshape {tuple(s)} ({n} elements) to {new}")
    return new


def transpose2d(s):
    require_rank(s, 2, 2)
    return (s[1], s[0])


def swap_adjacent(s, depth):
    """Swap axes depth and depth+1; identity when depth+1 >= rank (seed convention)."""
    d = operator.index(depth)
    if d < 0:
        raise ShapeError(f"depth must be >= 0, got {d}")
    s = tuple(s)
    if d + 1 >= len(s):
        return s
    return s[:d] + (s[d + 1], s[d]) + s[d + 2:]


def permute_bca(s):
    """(a, b, c) -> (b, c, a)."""
    require_rank(s, 3, 3)
    return (s[1], s[2], s[0])


def permute_cab(s):
    """(a, b, c) -> (c, a, b)."""
    require_rank(s, 3, 3)
    return (s[2], s[0], s[1])


def swap_last2(s):
    """(a, b, c) -> (a, c, b)."""
    require_rank(s, 3, 3)
    return (s[0], s[2], s[1])


def swap_geom(s, kind, depth=0):
    """(outer, A, B, inner) of the block swap (o, A, B, i) -> (o, B, A, i) that every axis
    permutation of this family is; one kernel serves transpose2d, swap_adjacent and the 3-d
    permutations. kind: "t2d", "swap", "bca", "cab", "last2"."""
    s = tuple(s)
    if kind == "t2d":
        require_rank(s, 2, 2)
        return (1, s[0], s[1], 1)
    if kind == "swap":
        d = operator.index(depth)
        if d < 0:
            raise ShapeError(f"depth must be >= 0, got {d}")
        if d + 1 >= len(s):  # identity copy (seed convention)
            return (1, 1, 1, math.prod(s))
        return (math.prod(s[:d]), s[d], s[d + 1], math.prod(s[d + 2:]))
    require_rank(s, 3, 3)
    if kind == "bca":  # (a, b, c) -> (b, c, a): swap a with the (b, c) block
        return (1, s[0], s[1] * s[2], 1)
    if kind == "cab":  # (a, b, c) -> (c, a, b): swap the (a, b) block with c
        return (1, s[0] * s[1], s[2], 1)
    if kind == "last2":
        return (s[0], s[1], s[2], 1)
    raise ShapeError(f"unknown permutation kind {kind!r}")
