"""The op catalog of the random-graph checker (tests/random_graphs.py).

Each entry draws one public torchlean call at random (gen), makes it (tl) and evaluates it in
float64 NumPy (ref) on arrays that carry a leading axis of finite-difference perturbations.
gen sees the float64 forward of its inputs and raises Reject when the call would sit within
DELTA of a kink or tie (relu and abs near 0, maximum/minimum/where operands close, the top two
of an amax slice or max-pool window close) or be ill-conditioned (log, sqrt or pow near 0,
division by small numbers, layer_norm of nearly constant rows).
"""
from __future__ import annotations

import math

import numpy as np

import torchlean as tl
import torchlean.nn.functional as F

DELTA = 0.02      # distance of every kink/tie input from its kink (float64 forward)
MAX_NUMEL = 48    # every value stays small: the finite differences batch all perturbations
_erf = np.vectorize(math.erf, otypes=[np.float64])


class Reject(Exception):
    """A candidate op does not fit here (shapes, kink distance, conditioning)."""


class Step:
    """One recorded call: op name, input value ids, its drawn arguments, output ids, and
    whether it runs under no_grad."""
    __slots__ = ("op", "ins", "p", "outs", "nograd")

    def __init__(self, op, ins, p, outs, nograd=False):
        self.op, self.ins, self.p, self.outs, self.nograd = op, tuple(ins), p, tuple(outs), nograd

    def __repr__(self):
        p = {k: (v.shape if isinstance(v, np.ndarray) and v.size > 4 else v)
             for k, v in self.p.items()}
        ng = " no_grad" if self.nograd else ""
        return f"{list(self.outs)} = {self.op}{ng}{list(self.ins)} {p}"


# ---------------------------------------------------------------------------- helpers

def _bc(*arrays):
    """Broadcast the leading (perturbation) axis of every array to the largest."""
    b = max(a.shape[0] for a in arrays)
    return [a if a.shape[0] == b else np.broadcast_to(a, (b,) + a.shape[1:]) for a in arrays]


def _bce(*arrays):
    """Broadcast for elementwise ops: align the ranks after the leading axis, then _bc."""
    nd = max(a.ndim for a in arrays)
    return _bc(*[a.reshape(a.shape[:1] + (1,) * (nd - a.ndim) + a.shape[1:]) for a in arrays])


def _ax(d, ndim):
    return (d % ndim) + 1 if ndim else 1


def _axes(dim, ndim):
    if dim is None:
        return tuple(range(1, ndim + 1))
    if isinstance(dim, tuple):
        return tuple(_ax(d, ndim) for d in dim)
    return (_ax(dim, ndim),)


def _min_gap_top2(x, axes):
    """Smallest gap between the largest and second largest entry over `axes` (inf if one)."""
    moved = np.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
    flat = moved.reshape(moved.shape[:x.ndim - len(axes)] + (-1,))
    if flat.shape[-1] < 2:
        return np.inf
    s = np.sort(flat, axis=-1)
    return float(np.min(s[..., -1] - s[..., -2]))


def _np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def _pad_spatial(x, pads, value):
    """Pad the trailing len(pads) axes of x by pads[i] on both sides."""
    width = [(0, 0)] * (x.ndim - len(pads)) + [(p, p) for p in pads]
    return np.pad(x, width, constant_values=value)


def _windows(x, k, st, nd):
    """x (..., *spatial) -> (..., *out, *k): every pooling/conv window of the last nd axes."""
    sp = x.shape[-nd:]
    out = tuple((n - kk) // s + 1 for n, kk, s in zip(sp, k, st))
    idx = [np.arange(o)[:, None] * s + np.arange(kk)[None, :] for o, kk, s in zip(out, k, st)]
    y = x
    for a in range(nd):   # spatial axis a becomes (out_a, k_a); earlier ones added one axis each
        y = np.take(y, idx[a], axis=x.ndim - nd + 2 * a)
    # y: (..., o0, k0, o1, k1, ...) -> (..., o0, o1, ..., k0, k1, ...)
    lead = x.ndim - nd
    order = list(range(lead)) + [lead + 2 * a for a in range(nd)] + [lead + 2 * a + 1
                                                                     for a in range(nd)]
    return y.transpose(order)


# ---------------------------------------------------------------------------- op catalog
# Each op: gen(G, rng, x) -> Step or raises Reject (it may add leaves first), tl(s, args, p)
# -> Tensor or tuple, ref(args, p) -> array or tuple (arrays carry the leading batch axis).

UNARY = {
    # name: (torchlean, float64 reference, guard on the float64 input)
    "neg": (lambda x: -x, lambda x: -x, None),
    "relu": (lambda x: F.relu(x), lambda x: np.maximum(x, 0.0),
             lambda x: np.min(np.abs(x)) >= DELTA),
    "relu_m": (lambda x: x.relu(), lambda x: np.maximum(x, 0.0),
               lambda x: np.min(np.abs(x)) >= DELTA),
    "tanh": (lambda x: x.tanh(), np.tanh, None),
    "sigmoid": (lambda x: F.sigmoid(x), lambda x: 1.0 / (1.0 + np.exp(-x)), None),
    "silu": (lambda x: F.silu(x), lambda x: x / (1.0 + np.exp(-x)), None),
    "exp": (lambda x: x.exp(), np.exp, lambda x: np.max(x) <= 3.0),
    "log": (lambda x: x.log(), np.log, lambda x: np.min(x) >= 0.2),
    "sqrt": (lambda x: x.sqrt(), np.sqrt, lambda x: np.min(x) >= 0.2),
    "rsqrt": (lambda x: x.rsqrt(), lambda x: 1.0 / np.sqrt(x), lambda x: np.min(x) >= 0.2),
    "abs": (lambda x: x.abs(), np.abs, lambda x: np.min(np.abs(x)) >= DELTA),
    "square": (lambda x: x.square(), np.square, None),
    "gelu": (lambda x: F.gelu(x), lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))), None),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                                     * (x + 0.044715 * x ** 3))), None),
    "softplus": (lambda x: F.softplus(x, beta=1.5), lambda x: np.log1p(np.exp(1.5 * x)) / 1.5,
                 lambda x: np.max(np.abs(x)) <= 8.0),
    "erf": (lambda x: x.erf(), _erf, None),
    "add_c": (lambda x: x + 0.75, lambda x: x + 0.75, None),
    "rsub_c": (lambda x: 1.25 - x, lambda x: 1.25 - x, None),
    "mul_c": (lambda x: x * -1.5, lambda x: x * -1.5, None),
    "rmul_c": (lambda x: 0.5 * x, lambda x: 0.5 * x, None),
    "div_c": (lambda x: x / 3.0, lambda x: x / 3.0, None),
    "rdiv_c": (lambda x: 2.0 / x, lambda x: 2.0 / x, lambda x: np.min(np.abs(x)) >= 0.3),
    "pow2": (lambda x: x ** 2, lambda x: x ** 2, None),
    "pow3": (lambda x: x.pow(3), lambda x: x ** 3, lambda x: np.max(np.abs(x)) <= 2.5),
    "pow_half": (lambda x: tl.pow(x, 0.5), np.sqrt, lambda x: np.min(x) >= 0.2),
    "pow_1_5": (lambda x: x ** 1.5, lambda x: x ** 1.5, lambda x: np.min(x) >= 0.2),
    "pow_m1": (lambda x: x ** -1, lambda x: 1.0 / x, lambda x: np.min(np.abs(x)) >= 0.3),
    "softmax": (lambda x: x.softmax(), _np_softmax, None),
    "softmax_f": (lambda x: F.softmax(x), _np_softmax, None),
    "log_softmax": (lambda x: tl.log_softmax(x), _np_log_softmax, None),
}

BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b, None),
    "sub": (lambda a, b: a - b, lambda a, b: a - b, None),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, None),
    "div": (lambda a, b: a / b, lambda a, b: a / b, lambda a, b: np.min(np.abs(b)) >= 0.3),
    "maximum": (lambda a, b: a.max(b), np.maximum,
                lambda a, b: np.min(np.abs(a - b)) >= DELTA),
    "minimum": (lambda a, b: a.min(b), np.minimum,
                lambda a, b: np.min(np.abs(a - b)) >= DELTA),
    "pow": (lambda a, b: a ** b, lambda a, b: a ** b,
            lambda a, b: np.min(a) >= 0.3 and np.max(np.abs(b)) <= 2.0),
}


def shape_ok(shape):
    """Small enough for the batched finite differences."""
    return math.prod(shape) <= MAX_NUMEL and len(shape) <= 4


def _partner_shape(rng, shape):
    """A shape that broadcasts against `shape` (same, fewer leading axes, size-1 axes, or one
    new leading axis)."""
    r = rng.random()
    s = list(shape)
    if r < 0.35 or not s:
        out = s
    elif r < 0.55:
        out = s[rng.integers(1, len(s) + 1):]
    elif r < 0.85:
        out = [1 if rng.random() < 0.5 else n for n in s]
    else:
        out = [int(rng.integers(1, 3))] + s
    return tuple(out)


def _partner(G, rng, shape, want_broadcast=True):
    """An existing value whose shape broadcasts against `shape` (x itself included), or a new
    leaf of such a shape."""
    if rng.random() < 0.5:
        cands = [v for v in range(len(G.shapes)) if G.budget[v] > 0 or rng.random() < 0.1]
        rng.shuffle(cands)
        for v in cands:
            try:
                out = np.broadcast_shapes(G.shapes[v], shape)
            except ValueError:
                continue
            if shape_ok(out) and (want_broadcast or G.shapes[v] == tuple(shape)):
                return v
    return G.new_leaf(rng, _partner_shape(rng, shape) if want_broadcast else tuple(shape))


def gen_unary(G, rng, x):
    """One of the unary ops whose guard the input passes (log, sqrt, ... when it is positive)."""
    v = G.vals[x]
    names = [n for n, (_, _, guard) in UNARY.items() if guard is None or guard(v)]
    if not G.shapes[x]:
        names = [n for n in names if "softmax" not in n]
    return Step("unary", [x], {"f": str(rng.choice(names))}, [G.fresh()])


def tl_unary(s, args, p):
    return UNARY[p["f"]][0](args[0])


def ref_unary(args, p):
    return UNARY[p["f"]][1](args[0])


def gen_binary(G, rng, x):
    name = rng.choice(list(BINARY))
    y = _partner(G, rng, G.shapes[x])
    a, b = (x, y) if rng.random() < 0.6 else (y, x)
    guard = BINARY[name][2]
    va, vb = G.vals[a], G.vals[b]
    if guard is not None and not guard(va, vb):
        raise Reject
    return Step("binary", [a, b], {"f": name}, [G.fresh()])


def tl_binary(s, args, p):
    return BINARY[p["f"]][0](*args)


def ref_binary(args, p):
    return BINARY[p["f"]][1](*_bce(*args))


def gen_where(G, rng, x):
    """where(cond, a, b) with cond a comparison of x with a threshold or with another value,
    as a mask Tensor or a boolean NumPy array."""
    y = _partner(G, rng, G.shapes[x])
    vx = G.vals[x][0]
    kind = rng.choice(["gt_c", "lt_c", "gt_v", "le_v"])
    if kind.endswith("_c"):
        flat = np.unique(vx.reshape(-1))
        gaps = [(flat[i] + flat[i + 1]) / 2 for i in range(len(flat) - 1)
                if flat[i + 1] - flat[i] >= 2 * DELTA]
        c = float(rng.choice(gaps)) if gaps and rng.random() < 0.8 else float(
            flat[0] - 1.0 if rng.random() < 0.5 else flat[-1] + 1.0)
        c = float(np.float32(c))
        if np.min(np.abs(vx - c)) < DELTA:
            raise Reject
        p = {"cmp": kind, "c": c}
        ins = [x, y]
    else:
        if np.min(np.abs(G.vals[x] - G.vals[y])) < DELTA:
            raise Reject
        p = {"cmp": kind}
        ins = [x, y]
    p["form"] = rng.choice(["tl.where", "method", "array"])
    p["swap"] = bool(rng.random() < 0.5)
    return Step("where", ins, p, [G.fresh()])


def _mask(args, p, tl_side):
    x, y = args
    k = p["cmp"]
    if k == "gt_c":
        return x > p["c"]
    if k == "lt_c":
        return x < p["c"]
    if k == "gt_v":
        return x > y
    return x.le(y) if tl_side else x <= y


def tl_where(s, args, p):
    x, y = args
    cond = _mask(args, p, True)
    a, b = (y, x) if p["swap"] else (x, y)
    if p["form"] == "array":
        return tl.where(cond.numpy() != 0, a, b)
    if p["form"] == "method":
        return a.where(cond, b)
    return tl.where(cond, a, b)


def ref_where(args, p):
    x, y = _bce(*args)
    cond = _mask((x, y), p, False)
    a, b = (y, x) if p["swap"] else (x, y)
    return np.where(cond, a, b)


def gen_matmul(G, rng, x):
    """x @ y with torch's rules: 1-D operands, 2-D, and batched operands whose leading axes
    broadcast (the partner: a new leaf or an existing value of a fitting shape)."""
    sh = G.shapes[x]
    if not sh:
        raise Reject
    k = sh[-1]
    m = int(rng.integers(1, 5))
    kind = rng.random()
    if len(sh) == 1:
        other = (k,) if kind < 0.3 else (k, m) if kind < 0.7 else (2, k, m)
    elif kind < 0.25:
        other = (k,)
    elif kind < 0.7 or len(sh) == 2:
        other = (k, m) if kind < 0.85 else (int(rng.integers(1, 3)), k, m)
    else:
        lead = tuple(1 if rng.random() < 0.3 else n for n in sh[:-2])
        other = lead + (k, m)
    y = _partner(G, rng, other, want_broadcast=False) if rng.random() < 0.5 else \
        G.new_leaf(rng, other, scale=1.0 / math.sqrt(k))
    if G.shapes[y] != other:
        raise Reject
    out = np.matmul(np.empty(sh), np.empty(other)).shape
    if not shape_ok(out):
        raise Reject
    return Step("matmul", [x, y], {"form": str(rng.choice(["@", "method"]))}, [G.fresh()])


def tl_matmul(s, args, p):
    a, b = args
    return a @ b if p["form"] == "@" else a.matmul(b)


def ref_matmul(args, p):
    a, b = _bc(*args)
    if a.ndim == 2 and b.ndim == 2:               # (z, k) @ (z, k): a 0-d dot per z
        return np.einsum("zk,zk->z", a, b)
    if a.ndim == 2:
        return np.einsum("zk,z...km->z...m", a, b)
    if b.ndim == 2:
        return np.einsum("z...nk,zk->z...n", a, b)
    nd = max(a.ndim, b.ndim)                     # align the batch ranks after the z axis
    a = a.reshape(a.shape[:1] + (1,) * (nd - a.ndim) + a.shape[1:])
    b = b.reshape(b.shape[:1] + (1,) * (nd - b.ndim) + b.shape[1:])
    return np.matmul(a, b)


def gen_softmax_dim(G, rng, x):
    """softmax / log_softmax over any dim (0-d included), as Tensor methods or functions."""
    nd = len(G.shapes[x])
    d = int(rng.integers(-max(nd, 1), max(nd, 1)))
    kind = str(rng.choice(["softmax", "log_softmax"]))
    return Step("softmax_dim", [x], {"kind": kind, "dim": d,
                                     "form": str(rng.choice(["method", "tl", "F"]))}, [G.fresh()])


def tl_softmax_dim(s, args, p):
    x, k, d = args[0], p["kind"], p["dim"]
    if p["form"] == "method":
        return getattr(x, k)(d)
    return getattr(tl if p["form"] == "tl" else F, k)(x, d)


def ref_softmax_dim(args, p):
    x = args[0]
    if x.ndim == 1:                               # a 0-d tensor: softmax 1, log_softmax 0
        return np.ones_like(x) if p["kind"] == "softmax" else np.zeros_like(x)
    y = np.moveaxis(x, _ax(p["dim"], x.ndim - 1), -1)
    y = _np_softmax(y) if p["kind"] == "softmax" else _np_log_softmax(y)
    return np.moveaxis(y, -1, _ax(p["dim"], x.ndim - 1))


def gen_clamp(G, rng, x):
    """clamp(min, max) with number bounds kept DELTA away from every input (torch's clamp)."""
    v = np.unique(G.vals[x].reshape(-1))
    gaps = [(v[i] + v[i + 1]) / 2 for i in range(len(v) - 1) if v[i + 1] - v[i] >= 2 * DELTA]
    gaps += [float(v[0] - 0.5), float(v[-1] + 0.5)]
    lo, hi = sorted(float(np.float32(c)) for c in rng.choice(gaps, size=2))
    which = str(rng.choice(["both", "min", "max"]))
    if np.min(np.abs(v - lo)) < DELTA or np.min(np.abs(v - hi)) < DELTA:
        raise Reject
    return Step("clamp", [x], {"lo": lo if which != "max" else None,
                               "hi": hi if which != "min" else None}, [G.fresh()])


def tl_clamp(s, args, p):
    if p["lo"] is not None and p["hi"] is not None:
        return args[0].clamp(p["lo"], p["hi"])
    return args[0].clamp(min=p["lo"]) if p["hi"] is None else args[0].clamp(max=p["hi"])


def ref_clamp(args, p):
    return np.clip(args[0], p["lo"], p["hi"])


def gen_linear(G, rng, x):
    sh = G.shapes[x]
    if not sh:
        raise Reject
    k = sh[-1]
    m = int(rng.integers(1, 5))
    if math.prod(sh[:-1]) * m > MAX_NUMEL:
        raise Reject
    w = G.new_leaf(rng, (m, k), scale=1.0 / math.sqrt(max(k, 1)))
    ins = [x, w]
    if rng.random() < 0.7:
        ins.append(G.new_leaf(rng, (m,)))
    return Step("linear", ins, {}, [G.fresh()])


def tl_linear(s, args, p):
    return F.linear(*args)


def ref_linear(args, p):
    args = _bc(*args)
    y = np.einsum("b...k,bmk->b...m", args[0], args[1])
    if len(args) == 3:
        b = args[2]
        y = y + b.reshape((b.shape[0],) + (1,) * (y.ndim - 2) + (b.shape[1],))
    return y


def gen_linear_residual(G, rng, x):
    """nn.fused.linear_residual(linear, x, r) = linear(x) + r (one cuBLASLt GEMM with the bias
    and the residual in its epilogue on CUDA in default mode)."""
    sh = G.shapes[x]
    if not sh or len(sh) > 3:
        raise Reject
    k = sh[-1]
    m = int(rng.integers(1, 5))
    if math.prod(sh[:-1]) * m > MAX_NUMEL:
        raise Reject
    w = G.new_leaf(rng, (m, k), kind="param", scale=1.0 / math.sqrt(max(k, 1)))
    b = G.new_leaf(rng, (m,), kind="param")
    r = G.new_leaf(rng, tuple(sh[:-1]) + (m,))
    return Step("linear_residual", [x, w, b, r], {}, [G.fresh()])


def tl_linear_residual(s, args, p):
    from torchlean.nn import fused
    x, w, b, r = args
    lin = tl.nn.Linear(w.shape[1], w.shape[0])
    lin.weight, lin.bias = w, b              # Parameters (the executor passes them through)
    return fused.linear_residual(lin, x, r)


def ref_linear_residual(args, p):
    y = ref_linear(list(args[:3]), p)
    return y + _bc(y, args[3])[1]


REDUCTIONS = ("sum", "mean", "amax", "amin", "var", "std", "logsumexp", "max_dim", "min_dim",
              "sum_all", "max_all", "min_all")
_FULL = {"sum_all": "sum", "max_all": "amax", "min_all": "amin"}


def gen_reduce(G, rng, x):
    sh = G.shapes[x]
    nd = len(sh)
    kind = str(rng.choice(REDUCTIONS))
    keepdim = bool(rng.random() < 0.4)
    if kind in _FULL or (kind in ("sum", "mean", "amax", "amin", "var", "std")
                         and rng.random() < 0.15):
        dim = None
    elif nd == 0 or (kind in ("logsumexp", "max_dim", "min_dim") or rng.random() < 0.7):
        dim = int(rng.integers(-max(nd, 1), max(nd, 1)))
    else:
        k = int(rng.integers(1, nd + 1))
        dim = tuple(int(d) - (nd if rng.random() < 0.3 else 0)
                    for d in sorted(rng.choice(nd, size=k, replace=False)))
    v = G.vals[x]
    axes = _axes(dim, nd)
    if nd == 0:
        axes = ()
    count = math.prod(v.shape[a] for a in axes)
    if count == 0:
        raise Reject
    if kind in ("amax", "amin", "max_dim", "min_dim", "max_all", "min_all"):
        if axes and _min_gap_top2(v if "max" in kind else -v, axes) < DELTA:
            raise Reject
    if kind in ("var", "std"):
        unbiased = bool(rng.random() < 0.6)
        if count - (1 if unbiased else 0) <= 0:
            raise Reject
        var = v.var(axis=axes, ddof=1 if unbiased else 0) if axes else np.zeros(1)
        if kind == "std" and np.min(var) < 0.05:
            raise Reject
        return Step("reduce", [x], {"kind": kind, "dim": dim, "keepdim": keepdim,
                                    "unbiased": unbiased}, [G.fresh()])
    return Step("reduce", [x], {"kind": kind, "dim": dim, "keepdim": keepdim}, [G.fresh()])


def tl_reduce(s, args, p):
    x, kind, dim, keepdim = args[0], p["kind"], p["dim"], p["keepdim"]
    if kind == "sum_all":
        return x.sum()
    if kind in ("max_all", "min_all"):
        return x.max() if kind == "max_all" else x.min()
    if kind in ("var", "std"):
        return getattr(x, kind)(dim, unbiased=p["unbiased"], keepdim=keepdim)
    if kind in ("max_dim", "min_dim"):
        r = x.max(dim, keepdim=keepdim) if kind == "max_dim" else x.min(dim=dim, keepdim=keepdim)
        return r.values
    return getattr(x, kind)(dim, keepdim=keepdim)


def ref_reduce(args, p):
    x, kind, dim, keepdim = args[0], p["kind"], p["dim"], p["keepdim"]
    nd = x.ndim - 1
    axes = _axes(dim, nd) if nd else ()
    if kind in _FULL:
        kind, axes, keepdim = _FULL[kind], tuple(range(1, nd + 1)), False
    if not axes:                       # a 0-d tensor: torch returns the value (var: nan/0)
        if kind == "var":
            return np.zeros_like(x) * (np.nan if p["unbiased"] else 1.0)
        if kind == "std":
            return np.zeros_like(x)
        return x
    if kind == "sum":
        return x.sum(axis=axes, keepdims=keepdim)
    if kind == "mean":
        return x.mean(axis=axes, keepdims=keepdim)
    if kind in ("amax", "max_dim"):
        return x.max(axis=axes, keepdims=keepdim)
    if kind in ("amin", "min_dim"):
        return x.min(axis=axes, keepdims=keepdim)
    if kind == "var":
        return x.var(axis=axes, ddof=1 if p["unbiased"] else 0, keepdims=keepdim)
    if kind == "std":
        return x.std(axis=axes, ddof=1 if p["unbiased"] else 0, keepdims=keepdim)
    m = x.max(axis=axes, keepdims=True)
    y = np.log(np.exp(x - m).sum(axis=axes, keepdims=True)) + m
    return y if keepdim else np.squeeze(y, axis=axes)


def _factor(rng, n, parts):
    """A random shape of `parts` axes whose product is n."""
    out = []
    for _ in range(parts - 1):
        divs = [d for d in range(1, n + 1) if n % d == 0]
        d = int(rng.choice(divs))
        out.append(d)
        n //= d
    out.append(n)
    rng.shuffle(out)
    return tuple(out)


VIEWS = ("reshape", "view", "flatten", "unsqueeze", "squeeze", "permute", "transpose", "T",
         "mT", "expand")


def gen_view(G, rng, x):
    sh = G.shapes[x]
    nd = len(sh)
    kind = str(rng.choice(VIEWS))
    n = math.prod(sh)
    p = {"kind": kind}
    if kind in ("reshape", "view"):
        shape = _factor(rng, n, int(rng.integers(1, 5)))
        if rng.random() < 0.3:
            i = int(rng.integers(0, len(shape)))
            shape = shape[:i] + (-1,) + shape[i + 1:]
        p["shape"] = shape
    elif kind == "flatten":
        if nd == 0:
            p["args"] = ()
        else:
            a = int(rng.integers(0, nd))
            p["args"] = (a, int(rng.integers(a, nd)) - (nd if rng.random() < 0.3 else 0))
    elif kind == "unsqueeze":
        if nd >= 4:
            raise Reject
        p["dim"] = int(rng.integers(-nd - 1, nd + 1))
    elif kind == "squeeze":
        ones = [i for i, s in enumerate(sh) if s == 1]
        p["dim"] = int(rng.choice(ones)) if ones and rng.random() < 0.6 else None
    elif kind == "permute":
        if nd < 2:
            raise Reject
        p["dims"] = tuple(int(d) for d in rng.permutation(nd))
    elif kind == "transpose":
        if nd < 1:
            raise Reject
        p["dims"] = (int(rng.integers(-nd, nd)), int(rng.integers(-nd, nd)))
    elif kind == "mT":
        if nd < 2:
            raise Reject
    elif kind == "expand":
        ones = [i for i, s in enumerate(sh) if s == 1]
        lead = (int(rng.integers(1, 3)),) if rng.random() < 0.4 else ()
        sizes = list(sh)
        for i in ones:
            if rng.random() < 0.7:
                sizes[i] = int(rng.integers(2, 4))
        sizes = [-1 if (s == sh[i] and rng.random() < 0.3) else s for i, s in enumerate(sizes)]
        sizes = list(lead) + sizes
        if not shape_ok(np.broadcast_shapes(sh, tuple(abs(s) for s in sizes))) or not sizes:
            raise Reject
        p["sizes"] = tuple(sizes)
    return Step("view", [x], p, [G.fresh()])


def tl_view(s, args, p):
    x, k = args[0], p["kind"]
    if k == "reshape":
        return x.reshape(*p["shape"]) if len(p["shape"]) != 1 else x.reshape(p["shape"])
    if k == "view":   # torch's idiom: view() of a non-contiguous tensor raises, so copy first
        return (x if x.is_contiguous() else x.contiguous()).view(*p["shape"])
    if k == "flatten":
        return x.flatten(*p["args"])
    if k == "unsqueeze":
        return x.unsqueeze(p["dim"])
    if k == "squeeze":
        return x.squeeze() if p["dim"] is None else x.squeeze(p["dim"])
    if k == "permute":
        return x.permute(*p["dims"])
    if k == "transpose":
        return x.transpose(*p["dims"])
    if k == "T":
        return x.T
    if k == "mT":
        return x.mT
    return x.expand(*p["sizes"])


def ref_view(args, p):
    x, k = args[0], p["kind"]
    b, sh = x.shape[0], x.shape[1:]
    nd = len(sh)
    if k in ("reshape", "view"):
        return x.reshape((b,) + p["shape"])
    if k == "flatten":
        if nd == 0:
            return x.reshape(b, 1)
        a, e = p["args"]
        e %= nd
        return x.reshape((b,) + sh[:a] + (math.prod(sh[a:e + 1]),) + sh[e + 1:])
    if k == "unsqueeze":
        return np.expand_dims(x, p["dim"] % (nd + 1) + 1)
    if k == "squeeze":
        if p["dim"] is None:
            return x.reshape((b,) + tuple(s for s in sh if s != 1))
        return np.squeeze(x, axis=_ax(p["dim"], nd))
    if k == "permute":
        return x.transpose((0,) + tuple(d + 1 for d in p["dims"]))
    if k == "transpose":
        return np.swapaxes(x, _ax(p["dims"][0], nd), _ax(p["dims"][1], nd))
    if k == "T":
        return x.transpose((0,) + tuple(range(nd, 0, -1)))
    if k == "mT":
        return np.swapaxes(x, -1, -2)
    sizes = p["sizes"]
    lead = len(sizes) - nd
    full = tuple(sh[i - lead] if (s == -1) else s for i, s in enumerate(sizes))
    return np.broadcast_to(x.reshape((b,) + (1,) * lead + sh), (b,) + full)


def gen_index(G, rng, x):
    sh = G.shapes[x]
    nd = len(sh)
    if nd == 0:
        raise Reject
    n0 = sh[0]
    r = rng.random()
    if r < 0.15:
        key = int(rng.integers(-n0, n0))
    elif r < 0.35:
        a = int(rng.integers(0, n0))
        b = int(rng.integers(a + 1, n0 + 1))
        key = slice(a, b, None if rng.random() < 0.6 else int(rng.choice([1, 2])))
    elif r < 0.45:
        key = slice(None, None, 2)   # torch has no negative steps
    elif r < 0.55:
        key = (Ellipsis, int(rng.integers(0, sh[-1])))
    elif r < 0.62:
        key = (None, slice(None))
    elif r < 0.72 and nd >= 2:
        a = int(rng.integers(0, sh[1]))
        key = (slice(None), slice(a, sh[1]))
    elif r < 0.82:
        idx = rng.integers(-n0, n0, size=int(rng.integers(1, 5)))   # repeats: scatter-add
        if nd >= 2 and rng.random() < 0.5:
            idx = rng.integers(0, sh[1], size=int(rng.integers(1, 4)))
            key = (slice(None), idx)
        else:
            key = idx
    elif r < 0.9:
        mask = rng.random(sh) < 0.6
        if not mask.any():
            mask.reshape(-1)[0] = True
        key = mask
    else:
        key = np.array(int(rng.integers(0, n0)))    # a 0-d index array: shape sh[1:]
    out = np.empty(sh)[key].shape
    if math.prod(out) == 0 or not shape_ok(out):
        raise Reject
    return Step("index", [x], {"key": key}, [G.fresh()])


def tl_index(s, args, p):
    return args[0][p["key"]]


def ref_index(args, p):
    key = p["key"] if isinstance(p["key"], tuple) else (p["key"],)
    return args[0][(slice(None),) + key]


def gen_join(G, rng, x):
    sh = G.shapes[x]
    nd = len(sh)
    kind = str(rng.choice(["cat", "stack", "split", "chunk"]))
    if kind == "stack":
        d = int(rng.integers(-nd - 1, nd + 1))
        others = [x if rng.random() < 0.3 else _partner(G, rng, sh, want_broadcast=False)
                  for _ in range(int(rng.integers(1, 3)))]
        if any(G.shapes[o] != sh for o in others) or not shape_ok((len(others) + 1,) + sh):
            raise Reject
        return Step("join", [x] + others, {"kind": kind, "dim": d}, [G.fresh()])
    if nd == 0:
        raise Reject
    d = int(rng.integers(-nd, nd))
    if kind == "cat":
        others = []
        for _ in range(int(rng.integers(1, 3))):
            if rng.random() < 0.3:
                others.append(x)
            else:
                s2 = list(sh)
                s2[d] = int(rng.integers(1, 4))
                others.append(G.new_leaf(rng, tuple(s2)))
        total = sum(G.shapes[o][d] for o in others) + sh[d]
        out = list(sh)
        out[d] = total
        if not shape_ok(tuple(out)):
            raise Reject
        return Step("join", [x] + others, {"kind": kind, "dim": d}, [G.fresh()])
    n = sh[d]
    if n < 2:
        raise Reject
    if kind == "split":
        if rng.random() < 0.5:
            arg = int(rng.integers(1, n))
            pieces = -(-n // arg)
        else:
            cut = sorted(rng.choice(np.arange(1, n), size=int(rng.integers(1, min(3, n - 1) + 1)),
                                    replace=False))
            bounds = [0] + [int(c) for c in cut] + [n]
            arg = [bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1)]
            pieces = len(arg)
    else:
        arg = int(rng.integers(2, n + 1))
        pieces = len(range(0, n, -(-n // arg)))
    p = {"kind": kind, "dim": d, "arg": arg, "form": str(rng.choice(["tl", "method"]))}
    return Step("join", [x], p, [G.fresh() for _ in range(pieces)])


def tl_join(s, args, p):
    k = p["kind"]
    if k == "cat":
        return tl.cat(list(args), dim=p["dim"])
    if k == "stack":
        return tl.stack(list(args), dim=p["dim"])
    fn = getattr(tl, k) if p["form"] == "tl" else getattr(args[0], k)
    out = fn(args[0], p["arg"], p["dim"]) if p["form"] == "tl" else fn(p["arg"], p["dim"])
    return tuple(out)


def ref_join(args, p):
    k = p["kind"]
    if k in ("cat", "stack"):
        args = _bc(*args)
        nd = args[0].ndim - 1
        if k == "cat":
            return np.concatenate(args, axis=_ax(p["dim"], nd))
        return np.stack(args, axis=p["dim"] % (nd + 1) + 1)
    x = args[0]
    nd = x.ndim - 1
    ax = _ax(p["dim"], nd)
    n = x.shape[ax]
    if k == "split" and isinstance(p["arg"], list):
        sizes = p["arg"]
    else:
        size = p["arg"] if k == "split" else -(-n // p["arg"])
        sizes = [min(size, n - a) for a in range(0, n, size)]
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=ax))


def gen_layer_norm(G, rng, x):
    sh = G.shapes[x]
    if not sh or sh[-1] < 2:
        raise Reject
    v = G.vals[x]
    if np.min(v.var(axis=-1)) < 0.05:
        raise Reject
    affine = bool(rng.random() < 0.75)
    ins = [x]
    if affine:
        ins += [G.new_leaf(rng, (sh[-1],), kind="param"), G.new_leaf(rng, (sh[-1],), kind="param")]
    return Step("layer_norm", ins, {}, [G.fresh()])


def tl_layer_norm(s, args, p):
    x = args[0]
    ln = tl.nn.LayerNorm(x.shape[-1], elementwise_affine=len(args) == 3)
    if len(args) == 3:
        ln.weight, ln.bias = args[1], args[2]    # Parameters (the executor passes them through)
    return ln(x)


def ref_layer_norm(args, p):
    args = _bc(*args)
    x = args[0]
    m = x.mean(axis=-1, keepdims=True)
    y = (x - m) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
    if len(args) == 3:
        b = x.shape[0]
        w, bb = args[1], args[2]
        shape = (b,) + (1,) * (x.ndim - 2) + (x.shape[-1],)
        y = y * w.reshape(shape) + bb.reshape(shape)
    return y


def gen_rms_norm(G, rng, x):
    """nn.RMSNorm over the last axis (the generated normalize op), with or without a weight."""
    sh = G.shapes[x]
    if not sh or sh[-1] < 2:
        raise Reject
    if np.min((G.vals[x] ** 2).mean(axis=-1)) < 0.05:
        raise Reject
    ins = [x]
    if rng.random() < 0.75:
        ins.append(G.new_leaf(rng, (sh[-1],), kind="param"))
    return Step("rms_norm", ins, {}, [G.fresh()])


def tl_rms_norm(s, args, p):
    x = args[0]
    rn = tl.nn.RMSNorm(x.shape[-1], elementwise_affine=len(args) == 2)
    if len(args) == 2:
        rn.weight = args[1]                  # a Parameter (the executor passes it through)
    return rn(x)


def ref_rms_norm(args, p):
    args = _bc(*args)
    x = args[0]
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + float(np.finfo(np.float32).eps))
    if len(args) == 2:
        y = y * args[1].reshape((x.shape[0],) + (1,) * (x.ndim - 2) + (x.shape[-1],))
    return y


def gen_conv(G, rng, x):
    sh = G.shapes[x]
    if len(sh) not in (3, 4):
        raise Reject
    nd = len(sh) - 2                 # (N, C, L) -> conv1d, (N, C, H, W) -> conv2d
    c = sh[1]
    groups = int(rng.choice(sorted({g for g in (1, 2, c) if c % g == 0})))   # c: depthwise
    cout = groups * int(rng.integers(1, 3))
    k = tuple(int(rng.integers(1, min(3, n + 1) + 1)) for n in sh[2:])
    pad = int(rng.integers(0, 2))
    stride = int(rng.integers(1, 3))
    dil = 2 if rng.random() < 0.15 else 1
    out_sp = tuple((n + 2 * pad - dil * (kk - 1) - 1) // stride + 1 for n, kk in zip(sh[2:], k))
    if min(out_sp) < 1 or not shape_ok((sh[0], cout) + out_sp):
        raise Reject
    w = G.new_leaf(rng, (cout, c // groups) + k, scale=0.6)
    ins = [x, w] + ([G.new_leaf(rng, (cout,))] if rng.random() < 0.6 else [])
    return Step("conv", ins, {"stride": stride, "padding": pad, "dilation": dil,
                              "groups": groups}, [G.fresh()])


def tl_conv(s, args, p):
    fn = F.conv1d if args[0].ndim == 3 else F.conv2d
    return fn(args[0], args[1], args[2] if len(args) == 3 else None, stride=p["stride"],
              padding=p["padding"], dilation=p["dilation"], groups=p["groups"])


def ref_conv(args, p):
    args = _bc(*args)
    x, w = args[0], args[1]                  # x (B, N, C, *sp), w (B, C_out, C / g, *k)
    nd = x.ndim - 3
    g, st, pad, dil = p["groups"], p["stride"], p["padding"], p["dilation"]
    ke = tuple(dil * (kk - 1) + 1 for kk in w.shape[3:])
    win = _windows(_pad_spatial(x, (pad,) * nd, 0.0), ke, (st,) * nd, nd)
    win = win[(Ellipsis,) + (slice(None, None, dil),) * nd]      # (B, N, C, *out, *k)
    cg, og = x.shape[2] // g, w.shape[1] // g
    sp, kl = "xyz"[:nd], "pqr"[:nd]
    y = np.concatenate([np.einsum(f"bnc{sp}{kl},boc{kl}->bno{sp}",
                                  win[:, :, i * cg:(i + 1) * cg], w[:, i * og:(i + 1) * og])
                        for i in range(g)], axis=2)
    if len(args) == 3:
        y = y + args[2].reshape(args[2].shape[:2] + (1,) * nd)[:, None]
    return y


def gen_pool(G, rng, x):
    sh = G.shapes[x]
    if len(sh) not in (3, 4) or min(sh[-2:]) < 2:
        raise Reject
    kind = str(rng.choice(["max", "avg"]))
    k = int(rng.integers(2, min(sh[-2:]) + 1))
    st = int(rng.integers(1, k + 1))
    pad = int(rng.integers(0, k // 2 + 1))
    p = {"kind": kind, "k": k, "stride": st, "padding": pad}
    if kind == "avg":
        p["count_include_pad"] = bool(rng.random() < 0.5)
    else:
        win = _windows(_pad_spatial(G.vals[x], (pad, pad), -np.inf), (k, k), (st, st), 2)
        if _min_gap_top2(win, (win.ndim - 2, win.ndim - 1)) < DELTA:
            raise Reject
    return Step("pool", [x], p, [G.fresh()])


def tl_pool(s, args, p):
    if p["kind"] == "max":
        return F.max_pool2d(args[0], p["k"], p["stride"], p["padding"])
    return F.avg_pool2d(args[0], p["k"], p["stride"], p["padding"],
                        count_include_pad=p["count_include_pad"])


def ref_pool(args, p):
    k, st, pad = p["k"], p["stride"], p["padding"]
    x = args[0]
    if p["kind"] == "max":
        win = _windows(_pad_spatial(x, (pad, pad), -np.inf), (k, k), (st, st), 2)
        return win.max(axis=(-2, -1))
    win = _windows(_pad_spatial(x, (pad, pad), 0.0), (k, k), (st, st), 2)
    total = win.sum(axis=(-2, -1))
    if p["count_include_pad"]:
        return total / (k * k)
    ones = _windows(_pad_spatial(np.ones((1,) + x.shape[-2:]), (pad, pad), 0.0), (k, k),
                    (st, st), 2).sum(axis=(-2, -1))
    return total / ones


def gen_attention(G, rng, x):
    sh = G.shapes[x]
    if len(sh) not in (2, 3):
        raise Reject
    lead, (l, e) = sh[:-2], sh[-2:]
    if rng.random() < 0.5:
        k = v = x                                       # self-attention: x read three times
        causal = bool(rng.random() < 0.5)
    else:
        s_len = int(rng.integers(1, 4))
        ev = int(rng.integers(1, 4))
        k = _partner(G, rng, lead + (s_len, e), want_broadcast=False)
        v = _partner(G, rng, lead + (s_len, ev), want_broadcast=False)
        if G.shapes[k] != lead + (s_len, e) or G.shapes[v] != lead + (s_len, ev):
            raise Reject
        causal = bool(s_len == l and rng.random() < 0.3)
    if not shape_ok(lead + (l, G.shapes[v][-1])):
        raise Reject
    mask = None
    if not causal and rng.random() < 0.3:      # a boolean mask, True = may attend
        mask = rng.random((l, G.shapes[k][-2])) < 0.7
        mask[np.arange(l), rng.integers(0, mask.shape[1], size=l)] = True   # no empty row
    return Step("attention", [x, k, v], {"causal": causal, "mask": mask}, [G.fresh()])


def tl_attention(s, args, p):
    return F.scaled_dot_product_attention(*args, attn_mask=p["mask"], is_causal=p["causal"])


def ref_attention(args, p):
    q, k, v = _bc(*args)
    sc = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    allowed = np.tri(sc.shape[-2], sc.shape[-1], dtype=bool) if p["causal"] else p["mask"]
    if allowed is not None:
        sc = np.where(allowed, sc, -np.inf)
    return _np_softmax(sc) @ v


def gen_loss_fn(G, rng, x):
    """F.cross_entropy of (rows, classes) logits, or F.mse_loss against another value."""
    sh = G.shapes[x]
    if len(sh) == 2 and sh[1] >= 2 and rng.random() < 0.5:
        labels = rng.integers(0, sh[1], size=sh[0])
        return Step("loss_fn", [x], {"kind": "cross_entropy", "labels": labels}, [G.fresh()])
    if not sh or math.prod(sh) == 0:
        raise Reject
    y = _partner(G, rng, sh, want_broadcast=False)
    if G.shapes[y] != sh:
        raise Reject
    return Step("loss_fn", [x, y], {"kind": "mse_loss"}, [G.fresh()])


def tl_loss_fn(s, args, p):
    if p["kind"] == "cross_entropy":
        return F.cross_entropy(args[0], p["labels"])
    return F.mse_loss(*args)


def ref_loss_fn(args, p):
    if p["kind"] == "cross_entropy":
        lp = _np_log_softmax(args[0])
        return -lp[:, np.arange(lp.shape[1]), p["labels"]].mean(axis=1)
    a, b = _bc(*args)
    return ((a - b) ** 2).reshape(a.shape[0], -1).mean(axis=1)


def gen_conv_transpose(G, rng, x):
    sh = G.shapes[x]
    if len(sh) not in (3, 4):
        raise Reject
    cin, (h, w) = sh[-3], sh[-2:]
    cout = int(rng.integers(1, 3))
    k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    st = int(rng.integers(1, 3))
    pad = int(rng.integers(0, min(k) // 2 + 1))
    opad = int(rng.integers(0, st)) if rng.random() < 0.4 else 0
    out = tuple((n - 1) * st - 2 * pad + kk + opad for n, kk in zip((h, w), k))
    if min(out) < 1 or not shape_ok(sh[:-3] + (cout,) + out):
        raise Reject
    wt = G.new_leaf(rng, (cin, cout) + k, scale=0.6)
    ins = [x, wt] + ([G.new_leaf(rng, (cout,))] if rng.random() < 0.5 else [])
    return Step("conv_transpose", ins, {"stride": st, "padding": pad, "output_padding": opad},
                [G.fresh()])


def tl_conv_transpose(s, args, p):
    return F.conv_transpose2d(args[0], args[1], args[2] if len(args) == 3 else None,
                              stride=p["stride"], padding=p["padding"],
                              output_padding=p["output_padding"])


def ref_conv_transpose(args, p):
    args = _bc(*args)
    x, w = args[0], args[1]                 # x (B, [N,] Cin, H, W), w (B, Cin, Cout, kh, kw)
    st, pad, opad = p["stride"], p["padding"], p["output_padding"]
    (h, wd), (kh, kw) = x.shape[-2:], w.shape[-2:]
    full = np.zeros(x.shape[:-3] + (w.shape[2], (h - 1) * st + kh + opad, (wd - 1) * st + kw + opad))
    contrib = np.einsum("z...cij,zcopq->z...oijpq", x, w)
    for a in range(kh):
        for b in range(kw):
            full[..., a:a + (h - 1) * st + 1:st, b:b + (wd - 1) * st + 1:st] += contrib[..., a, b]
    y = full[..., pad:full.shape[-2] - pad, pad:full.shape[-1] - pad]
    if len(args) == 3:
        y = y + args[2].reshape((args[2].shape[0],) + (1,) * (y.ndim - 4) + (-1, 1, 1))
    return y


def gen_adaptive_pool(G, rng, x):
    sh = G.shapes[x]
    if len(sh) not in (3, 4):
        raise Reject
    size = tuple(int(rng.integers(1, n + 1)) for n in sh[-2:])
    return Step("adaptive_pool", [x], {"size": size}, [G.fresh()])


def tl_adaptive_pool(s, args, p):
    return F.adaptive_avg_pool2d(args[0], p["size"])


def _adaptive_matrix(n, out):
    m = np.zeros((out, n))
    for i in range(out):
        a, b = (i * n) // out, -(-((i + 1) * n) // out)
        m[i, a:b] = 1.0 / (b - a)
    return m


def ref_adaptive_pool(args, p):
    x = args[0]
    mh, mw = (_adaptive_matrix(n, o) for n, o in zip(x.shape[-2:], p["size"]))
    return np.einsum("...hw,ih,jw->...ij", x, mh, mw)


def gen_rows(G, rng, x):
    """cumsum and cumprod along a dim, topk's values (entries DELTA apart along it, so the
    selection and its order hold under the perturbations), and scatter_add of x into zeros along
    a dim with repeated targets."""
    sh = G.shapes[x]
    nd = len(sh)
    if nd == 0:
        raise Reject
    d = int(rng.integers(-nd, nd))
    n, v = sh[d], G.vals[x]
    kind = str(rng.choice(["cumsum", "cumprod", "topk", "scatter_add"]))
    if n == 0 or (kind == "cumprod" and (n > 8 or np.max(np.abs(v)) > 1.5)):
        raise Reject
    if kind == "topk":
        s = np.sort(np.moveaxis(v, _ax(d, nd), -1), axis=-1)
        if n > 1 and np.min(np.diff(s, axis=-1)) < DELTA:
            raise Reject
        return Step("rows", [x], {"kind": kind, "dim": d, "k": int(rng.integers(1, n + 1)),
                                  "largest": bool(rng.random() < 0.5)}, [G.fresh()])
    if kind == "scatter_add":
        size = int(rng.integers(1, n + 2))
        out = list(sh)
        out[d] = size
        if not shape_ok(out):
            raise Reject
        return Step("rows", [x], {"kind": kind, "dim": d, "size": size,
                                  "index": rng.integers(0, size, size=sh)}, [G.fresh()])
    return Step("rows", [x], {"kind": kind, "dim": d}, [G.fresh()])


def tl_rows(s, args, p):
    x, d = args[0], p["dim"]
    if p["kind"] == "cumsum":
        return x.cumsum(d)
    if p["kind"] == "cumprod":
        return tl.cumprod(x, d)
    if p["kind"] == "topk":
        return x.topk(p["k"], dim=d, largest=p["largest"]).values
    shape = list(x.shape)
    shape[d] = p["size"]
    return s.tensor(np.zeros(shape, np.float32)).scatter_add(d, tl.tensor(p["index"]), x)


def ref_rows(args, p):
    x = args[0]
    a = _ax(p["dim"], x.ndim - 1)
    if p["kind"] == "cumsum":
        return np.cumsum(x, axis=a)
    if p["kind"] == "cumprod":
        return np.cumprod(x, axis=a)
    if p["kind"] == "topk":
        s = np.sort(x, axis=a)
        s = np.flip(s, axis=a) if p["largest"] else s
        return np.take(s, np.arange(p["k"]), axis=a)
    out_shape = list(x.shape)
    out_shape[a] = p["size"]
    out = np.zeros(out_shape)
    at = list(np.indices(x.shape))
    at[a] = np.broadcast_to(p["index"], x.shape)
    np.add.at(out, tuple(at), x)
    return out


def gen_detach(G, rng, x):
    return Step("detach", [x], {}, [G.fresh()])


def tl_detach(s, args, p):
    return args[0].detach()


def ref_detach(args, p):
    return args[0]          # the cut itself is the executor's (no perturbation flows)


OPS = {
    # name: (generator, torchlean, reference, weight)
    "unary": (gen_unary, tl_unary, ref_unary, 6),
    "binary": (gen_binary, tl_binary, ref_binary, 6),
    "where": (gen_where, tl_where, ref_where, 1.5),
    "matmul": (gen_matmul, tl_matmul, ref_matmul, 1.5),
    "linear": (gen_linear, tl_linear, ref_linear, 1.5),
    "linear_residual": (gen_linear_residual, tl_linear_residual, ref_linear_residual, 0.6),
    "reduce": (gen_reduce, tl_reduce, ref_reduce, 3),
    "view": (gen_view, tl_view, ref_view, 3),
    "index": (gen_index, tl_index, ref_index, 2),
    "join": (gen_join, tl_join, ref_join, 2),
    "layer_norm": (gen_layer_norm, tl_layer_norm, ref_layer_norm, 1),
    "rms_norm": (gen_rms_norm, tl_rms_norm, ref_rms_norm, 0.6),
    "conv": (gen_conv, tl_conv, ref_conv, 1.5),
    "pool": (gen_pool, tl_pool, ref_pool, 1.5),
    "attention": (gen_attention, tl_attention, ref_attention, 1),
    "detach": (gen_detach, tl_detach, ref_detach, 0.4),
    "softmax_dim": (gen_softmax_dim, tl_softmax_dim, ref_softmax_dim, 1),
    "clamp": (gen_clamp, tl_clamp, ref_clamp, 0.8),
    "loss_fn": (gen_loss_fn, tl_loss_fn, ref_loss_fn, 0.7),
    "conv_transpose": (gen_conv_transpose, tl_conv_transpose, ref_conv_transpose, 0.8),
    "adaptive_pool": (gen_adaptive_pool, tl_adaptive_pool, ref_adaptive_pool, 0.6),
    "rows": (gen_rows, tl_rows, ref_rows, 0.8),
}
