"""Rules any family uses: equal shapes, element and row counts, axis lengths, flags."""
from __future__ import annotations

import math

from .core import ShapeError, require_rank, shape


def same(a, *others):
    """Output shape equals every input's shape."""
    for o in others:
        if tuple(o) != tuple(a):
            raise ShapeError(f"shapes must be equal, got {tuple(a)} and {tuple(o)}")
    return tuple(a)


def scalar(*_):
    """A 0-d output."""
    return ()


def vec(n):
    """A 1-d output of n elements (RNG kernels)."""
    if isinstance(n, bool) or int(n) != n or n < 0:
        raise ShapeError(f"expected a non-negative int length, got {n!r}")
    return (int(n),)


def numel(s):
    return math.prod(s)


def flat(s):
    return (math.prod(s),)


def dims(s):
    """A shape as a tuple of ints (for i64[] kernel args)."""
    return tuple(int(d) for d in s)


def _length(v, i):
    """Length of axis i (negative counts from the end) of a shape or buffer that has it."""
    s = shape(v)
    require_rank(s, -i if i < 0 else i + 1)
    return s[i]


def rows(v):
    """Leading axes folded into one row count (last axis = columns)."""
    s = shape(v)
    require_rank(s, 1)
    return math.prod(s[:-1])


def cols(v):
    """Length of the last axis (columns, features, channels of a (..., d) layout)."""
    return _length(v, -1)


def lead_len(v):
    """Length of the leading axis."""
    return _length(v, 0)


def row_len(s):
    """Elements per leading-axis row."""
    return math.prod(s[1:])


def seq_len(v):
    """Length of the second-to-last axis: the positions of a (..., n, d) sequence or grid."""
    return _length(v, -2)


def batch_of(v):
    """B of a batched (B, n, d) input, 1 for an unbatched (n, d) one."""
    s = shape(v)
    return s[0] if len(s) == 3 else 1


def flag(v):
    """An i64 kernel flag: a bool as 0/1; an optional value (a mask) as 1 when present."""
    if v is None:
        return 0
    if isinstance(v, int):
        return 1 if v else 0
    return 1
