"""NumPy broadcasting and its adjoint."""
from __future__ import annotations

import functools

from .core import ShapeError

STRIDED_MAX_RANK = 8   # axes a strided broadcast kernel takes (after coalescing)


def broadcast(*shapes):
    """NumPy broadcasting of any number of shapes."""
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return tuple(shapes[0])
    r = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(r):
        d = 1
        for s in shapes:
            k = i - (r - len(s))
            if k < 0:
                continue
            e = s[k]
            if e != 1 and d != 1 and e != d:
                raise ShapeError("shapes " + " and ".join(str(tuple(x)) for x in shapes)
                                 + " cannot be broadcast together")
            if e != 1:
                d = e
        out.append(d)
    return tuple(out)


def broadcast_to(s, target):
    """x broadcast to `target` (NumPy rules, one direction)."""
    target = tuple(int(t) for t in target)
    if len(s) > len(target) or broadcast(s, target) != target:
        raise ShapeError(f"cannot broadcast {tuple(s)} to {target}")
    return target


def sum_to(s, target):
    """The adjoint of broadcast_to: s must be a broadcast of target."""
    target = tuple(int(t) for t in target)
    broadcast_to(target, s)
    return target


@functools.lru_cache(maxsize=512)
def _plan(a, b):
    """Coalesced (y_dims, a_dims, b_dims) of a two-input broadcast, or None past the kernel's
    rank: size-1 output axes are dropped, and neighbouring axes merge where each input is
    either whole on both or broadcast along both, so a (B, L, E, 1) * (B, L, 1, N) product
    runs as (B*L, E, N)."""
    y = broadcast(a, b)
    r = len(y)
    a = (1,) * (r - len(a)) + tuple(a)
    b = (1,) * (r - len(b)) + tuple(b)
    yd, ad, bd = [], [], []
    for k in range(r):
        if y[k] == 1:
            continue
        if yd and (ad[-1] == 1) == (a[k] == 1) and (bd[-1] == 1) == (b[k] == 1):
            yd[-1] *= y[k]
            ad[-1] *= a[k]
            bd[-1] *= b[k]
        else:
            yd.append(y[k])
            ad.append(a[k])
            bd.append(b[k])
    if not yd:
        yd, ad, bd = [1], [1], [1]
    if len(yd) > STRIDED_MAX_RANK:
        return None
    return tuple(yd), tuple(ad), tuple(bd)


def strided_broadcast(a, b):
    """Can a strided kernel broadcast shapes a and b (they broadcast, and few enough axes
    remain once coalesced)?"""
    try:
        return _plan(tuple(a), tuple(b)) is not None
    except ShapeError:
        return False


def broadcast_dims(a, b, which):
    """One row of the coalesced plan of a op b: which = 0 (a's dims), 1 (b's) or 2 (the
    output's); broadcast axes have size 1 in an input's row."""
    plan = _plan(tuple(a), tuple(b))
    if plan is None:
        raise ShapeError(f"shapes {tuple(a)} and {tuple(b)} keep more than {STRIDED_MAX_RANK} "
                         "axes once coalesced; the strided broadcast kernel takes at most that")
    return plan[(1, 2, 0)[which]]
