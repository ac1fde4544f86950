"""What the functional forms of torchlean.nn share: the session their Tensor arguments live in,
per-axis integer arguments (an int or one per axis) and constant cells appended after the
trailing axes (ceil-mode pooling and transposed convolution pad their input so).
"""
from __future__ import annotations

import numpy as np

from torchlean.session import Tensor, cat, default_session


def session_of(*xs):
    """The session of the first Tensor among xs, else the thread's default session."""
    if xs and xs[0].__class__ is Tensor:
        return xs[0].session
    return next((x.session for x in xs if isinstance(x, Tensor)), None) or default_session()


def per_axis(v, n, what, op):
    """v as n ints: an int is repeated, a sequence must have n entries."""
    t = (int(v),) * n if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)
    if len(t) != n:
        raise ValueError(f"{op}: {what} must be an int or {n} ints, got {v!r}")
    return t


def pad_after(x, extra, value):
    """x with `extra` (one count per trailing axis, e.g. H then W) constant cells appended at
    the end of each of those axes."""
    s = x.session
    for axis, e in zip(range(-len(extra), 0), extra):
        if e:
            shape = list(x.shape)
            shape[axis] = e
            x = cat([x, s.tensor(np.full(shape, value, np.float32))], dim=axis)
    return x
