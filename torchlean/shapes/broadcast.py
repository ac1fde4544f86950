"""NumPy broadcasting and its adjoint."""
from __future__ import annotations

from .core import ShapeError


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
