"""In-place entries of the random-graph checker (tests/random_graphs.py adds them to OPS).

Each runs a PyTorch in-place idiom on a non-leaf copy of its input, as training code does
(`h = x * 1; h.mul_(w).add_(b)`, `out[idx] = v`, `x.clamp_(...)`), so the recorded graph is
rebased onto the op and gradients flow to every operand; the float64 reference is the
out-of-place op. `inplace_saved` writes a value a VJP saved (exp saves its output): PyTorch's
backward raises "modified by an inplace operation" there, and the checker expects that error.
"""
from __future__ import annotations

import numpy as np

from tests.graph_ops import DELTA, Reject, Step, _bce, _partner

INPLACE = {   # name: (torchlean on (dst, other), float64 on (a, b), guard(a, b) or None)
    "add_": (lambda t, o: t.add_(o), lambda a, b: a + b, None),
    "add_alpha": (lambda t, o: t.add_(o, alpha=-0.5), lambda a, b: a - 0.5 * b, None),
    "sub_": (lambda t, o: t.sub_(o), lambda a, b: a - b, None),
    "mul_": (lambda t, o: t.mul_(o), lambda a, b: a * b, None),
    "div_": (lambda t, o: t.div_(o), lambda a, b: a / b, lambda a, b: np.min(np.abs(b)) >= 0.3),
    "iadd": (lambda t, o: t.__iadd__(o), lambda a, b: a + b, None),
    "imul": (lambda t, o: t.__imul__(o), lambda a, b: a * b, None),
    "lerp_": (lambda t, o: t.lerp_(o, 0.25), lambda a, b: a + 0.25 * (b - a), None),
    "addcmul_": (lambda t, o: t.addcmul_(o, o, value=0.5), lambda a, b: a + 0.5 * b * b, None),
    "copy_": (lambda t, o: t.copy_(o), lambda a, b: b + 0 * a, None),
}
UNARY_INPLACE = {
    "mul_c": (lambda t: t.mul_(-1.5), lambda a: -1.5 * a, None),
    "div_c": (lambda t: t.div_(4.0), lambda a: a / 4.0, None),
    "neg_": (lambda t: t.neg_(), lambda a: -a, None),
    "exp_": (lambda t: t.exp_(), np.exp, lambda a: np.max(a) <= 3.0),
    "sqrt_": (lambda t: t.sqrt_(), np.sqrt, lambda a: np.min(a) >= 0.2),
    "abs_": (lambda t: t.abs_(), np.abs, lambda a: np.min(np.abs(a)) >= DELTA),
    "tanh_": (lambda t: t.tanh_(), np.tanh, None),
    "pow_": (lambda t: t.pow_(2), lambda a: a * a, None),
}


def gen_inplace(G, rng, x):
    """h = x * 1; h.<op>_(y) with y broadcasting into h's shape, or a unary h.<op>_()."""
    if rng.random() < 0.45:
        names = [n for n, (_, _, g) in UNARY_INPLACE.items() if g is None or g(G.vals[x])]
        return Step("inplace", [x], {"f": str(rng.choice(names))}, [G.fresh()])
    name = str(rng.choice(list(INPLACE)))
    y = _partner(G, rng, G.shapes[x])
    if not _fits(G.shapes[y], G.shapes[x]):
        raise Reject   # an in-place result keeps the destination's shape
    guard = INPLACE[name][2]
    if guard is not None and not guard(G.vals[x], G.vals[y]):
        raise Reject
    return Step("inplace", [x, y], {"f": name}, [G.fresh()])


def tl_inplace(s, args, p):
    h = args[0] * 1.0
    if len(args) == 1:
        return UNARY_INPLACE[p["f"]][0](h)
    return INPLACE[p["f"]][0](h, args[1])


def ref_inplace(args, p):
    if len(args) == 1:
        return UNARY_INPLACE[p["f"]][1](args[0])
    a, b = _bce(*args)
    return np.broadcast_to(INPLACE[p["f"]][1](a, b), a.shape).copy()


def _random_key(rng, shape):
    """An index x[key] reads: ints, slices (negative steps too), None, Ellipsis, a bool mask,
    an int array, or a tuple of them."""
    if not shape:
        return ()
    parts = []
    for n in shape:
        r = rng.random()
        if r < 0.25:
            parts.append(int(rng.integers(-n, n)))
        elif r < 0.55:
            a, b = sorted(int(v) for v in rng.integers(0, n + 1, size=2))
            parts.append(slice(a, b + 1) if rng.random() < 0.7 else slice(None, None, -1))
        elif r < 0.7 and not any(isinstance(q, np.ndarray) for q in parts):
            parts.append(rng.random(n) < 0.5 if rng.random() < 0.5
                         else rng.integers(-n, n, size=int(rng.integers(1, 3))))
        else:
            parts.append(slice(None))
    if rng.random() < 0.2:
        parts.insert(int(rng.integers(0, len(parts) + 1)), None)
    if rng.random() < 0.2 and len(parts) > 1:
        parts = [Ellipsis] + parts[1:]
    return tuple(parts)


def _fits(shape, into) -> bool:
    """Does `shape` broadcast to exactly `into`?"""
    try:
        return np.broadcast_shapes(shape, into) == tuple(into)
    except ValueError:
        return False


def gen_setitem(G, rng, x):
    """h = x * 1; h[key] = value: a number, or an existing value broadcasting to h[key]."""
    shape = G.shapes[x]
    key = _random_key(rng, shape)
    probe = np.zeros(shape)
    try:
        sel = probe[key].shape
    except IndexError:
        raise Reject from None
    if 0 in sel:
        raise Reject
    cands = [v for v in range(len(G.shapes)) if v != x and G.shapes[v] and
             _fits(G.shapes[v], sel)] if rng.random() < 0.7 else []
    if cands:
        return Step("setitem", [x, int(rng.choice(cands))], {"key": key}, [G.fresh()])
    return Step("setitem", [x], {"key": key, "c": float(np.float32(rng.uniform(-2, 2)))},
                [G.fresh()])


def tl_setitem(s, args, p):
    h = args[0] * 1.0
    h[p["key"]] = args[1] if len(args) > 1 else p["c"]
    return h


def ref_setitem(args, p):
    a = args[0]
    vals = args[1] if len(args) > 1 else np.full(a.shape[:1], p["c"])
    b = max(a.shape[0], vals.shape[0])
    out = np.array(np.broadcast_to(a, (b,) + a.shape[1:]))
    key = p["key"]
    sel = np.zeros(a.shape[1:])[key].shape
    for i in range(b):   # per perturbation: NumPy's assignment (the last write wins)
        v = vals[min(i, vals.shape[0] - 1)]
        v = np.broadcast_to(v.reshape(v.shape if len(args) > 1 else ()), sel)
        if out.ndim == 1:            # a 0-d value: the key is ()
            out[i] = v
        else:
            row = out[i]             # a view of perturbation i
            row[key] = v
    return out


def gen_saved(G, rng, x):
    """y = x.exp(); y.add_(c): exp's VJP saved y, so a backward through it raises."""
    if np.max(G.vals[x]) > 3.0:
        raise Reject
    return Step("inplace_saved", [x], {"c": 0.5}, [G.fresh()])


def tl_saved(s, args, p):
    y = args[0].exp()
    return y.add_(p["c"])


def ref_saved(args, p):
    return np.exp(args[0]) + p["c"]


OPS = {
    "inplace": (gen_inplace, tl_inplace, ref_inplace, 3.0),
    "setitem": (gen_setitem, tl_setitem, ref_setitem, 2.0),
    "inplace_saved": (gen_saved, tl_saved, ref_saved, 0.4),
}
