"""Random-graph gradient checker: seeded random DAGs of public ops, checked against float64.

Why: single-op VJP tests cannot see bugs that live between ops (who owns a gradient buffer when
a value is read by several consumers, detach/no_grad cuts, retained graphs, tied parameters,
gradients accumulated over several backward calls). This module draws a random DAG of 3-15
PyTorch-style ops (torchlean.Session, Tensor methods, torchlean.nn.functional), runs it on the
loaded backend, and checks the forward values and every leaf gradient against an independent
float64 NumPy evaluation of the same graph: the gradients are central finite differences, all
perturbations evaluated at once as a leading batch axis. The ops live in tests/graph_ops.py,
PyTorch's in-place idioms (in-place ops on non-leaves, item assignment, and a write into a value
a VJP saved, where the checker expects PyTorch's "modified by an inplace operation" error) in
tests/graph_inplace_ops.py.

Kinks and ties are kept away by construction: the generator evaluates every candidate op in
float64 as it builds and rejects one whose input lies within DELTA of a kink or tie (relu and
abs near 0, maximum/minimum/where operands close, the top two of an amax slice or pooling
window close), and ops whose inputs are ill-conditioned (log, sqrt or pow near 0, division by
small numbers, layer_norm of nearly constant rows). Finite differences use a step far below
DELTA, so no perturbation crosses a kink.

Long campaigns: `python -m tests.random_graphs --graphs 10000 --modes default,deterministic,exact`
(or TORCHLEAN_GRAPHS=N for the pytest module); TORCHLEAN_BACKEND picks the backend as usual.
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

import torchlean as tl
from tests import graph_inplace_ops
from tests.graph_ops import OPS as _OPS, Reject, Step, shape_ok

OPS = dict(_OPS, **graph_inplace_ops.OPS)

H = 1e-5          # central-difference step
MAX_ABS = 25.0    # values stay moderate so float32 rounding stays far below the tolerance
RTOL, ATOL = 2e-3, 2e-3   # gradient check: |g - ref| <= RTOL |ref| + ATOL max|ref of the leaf|
FWD_RTOL = 1e-3
MODES = ("default", "deterministic", "exact")


def f32(a):
    """float64 values that are exactly float32, so both sides start from the same inputs."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


# ---------------------------------------------------------------------------- graph records

class Graph:
    """Steps over numbered values; leaves are steps too (op 'leaf'). `params` are the initial
    values of the Parameters (tied uses point at one index)."""

    def __init__(self, seed):
        self.seed = seed
        self.steps: list[Step] = []
        self.params: list[tuple[np.ndarray, bool]] = []   # (value, requires_grad)
        self.shapes: list[tuple] = []
        self.vals: list[np.ndarray] = []     # float64 forward, shape (1,) + shape
        self.grad: list[bool] = []           # does a gradient flow into the value?
        self.uses: list[int] = []
        self.budget: list[int] = []          # how many more times it may be reused
        self.losses: list[list[tuple[int, np.ndarray]]] = []
        self.scenario = "one"
        self.keep: set[int] = set()          # values whose Tensor lives to the end
        self.n_ops = 0

    def op_of(self, v) -> str:
        """The op of the step that made value v."""
        return next(st.op for st in self.steps if v in st.outs)

    def param_of(self, v) -> int:
        """The Parameter index of the leaf value v."""
        return next(st.p["param"] for st in self.steps if st.op == "leaf" and st.outs[0] == v)

    def describe(self) -> str:
        lines = [f"graph seed {self.seed}, scenario {self.scenario}"]
        lines += [f"  {s!r}" for s in self.steps]
        lines += [f"  loss{k + 1} = sum of {[v for v, _ in terms]} * R"
                  for k, terms in enumerate(self.losses)]
        return "\n".join(lines)


_OP_NAMES = list(OPS)
_OP_P = np.array([OPS[n][3] for n in _OP_NAMES], dtype=np.float64)
_OP_P /= _OP_P.sum()
_LEAF_SHAPES = [(), (1,), (3,), (5,), (2, 3), (4, 1), (3, 4), (1, 5), (2, 2, 3), (2, 3, 4),
                (1, 2, 5), (2, 1, 3), (1, 2, 4, 4), (2, 2, 3, 3), (1, 1, 5, 4), (2, 1, 3, 5)]


# ---------------------------------------------------------------------------- generation

def _leaf_value(rng, shape, scale=1.0):
    """Entries in +-[0.1, 2] * scale (never exactly 0), float32-exact."""
    mag = rng.uniform(0.1, 2.0, size=shape) * scale
    return f32(np.where(rng.random(shape) < 0.5, -mag, mag))


def _new_leaf(G, rng, shape, kind=None, scale=1.0):
    shape = tuple(int(n) for n in shape)
    tied = [i for i, (v, _) in enumerate(G.params) if v.shape == shape]
    nograd = kind is None and rng.random() < 0.08    # s.use(p) inside no_grad: a constant
    if nograd:
        kind = "tied" if tied and rng.random() < 0.7 else "param"
    elif kind is None:
        r = rng.random()
        kind = ("tensor" if r < 0.4 else "const" if r < 0.55 else
                "tied" if r < 0.7 and tied else "param")
    if kind == "tied" or (kind == "param" and tied and rng.random() < 0.2):
        k = int(rng.choice(tied))
        p = {"kind": "param", "param": k}
        val, rg = G.params[k]
    elif kind == "param":
        val, rg = _leaf_value(rng, shape, scale), bool(rng.random() < 0.9)
        G.params.append((val, rg))
        p = {"kind": "param", "param": len(G.params) - 1}
    else:
        val = _leaf_value(rng, shape, scale)
        rg = kind == "tensor" and bool(rng.random() < 0.85)
        p = {"kind": "tensor", "value": val, "requires_grad": rg}
    vid = len(G.shapes)
    G.steps.append(Step("leaf", [], p, [vid], nograd=nograd and p["kind"] == "param"))
    G.add_value(vid, val[None], rg and not G.steps[-1].nograd)
    return vid


class Builder(Graph):
    """A Graph under construction: values are appended with their float64 forward."""

    def fresh(self) -> int:
        """A placeholder output id (_apply numbers a step's outputs when it is accepted)."""
        return -1

    def new_leaf(self, rng, shape, kind=None, scale=1.0):
        return _new_leaf(self, rng, shape, kind, scale)

    def add_value(self, vid, val, grad):
        assert vid == len(self.shapes)
        self.shapes.append(tuple(val.shape[1:]))
        self.vals.append(val)
        self.grad.append(grad)
        self.uses.append(0)
        self.budget.append(int(self._rng.integers(0, 4)))

    def snapshot(self):
        return (len(self.steps), len(self.params), len(self.shapes))

    def rollback(self, snap):
        ns, np_, nv = snap
        del self.steps[ns:], self.params[np_:]
        for lst in (self.shapes, self.vals, self.grad, self.uses, self.budget):
            del lst[nv:]


def _apply(G, step):
    """Evaluate a new op step in float64 and record its outputs (or Reject)."""
    out = OPS[step.op][2]([G.vals[i] for i in step.ins], step.p)
    outs = out if isinstance(out, tuple) else (out,)
    assert len(outs) == len(step.outs), (step, len(outs))
    step.outs = tuple(range(len(G.shapes), len(G.shapes) + len(outs)))   # ids in order
    for o in outs:
        if (not np.all(np.isfinite(o)) or np.max(np.abs(o), initial=0.0) > MAX_ABS
                or not shape_ok(o.shape[1:]) or o.size == 0):
            raise Reject
    grad = (not step.nograd and step.op != "detach"
            and any(G.grad[i] for i in step.ins))
    for vid, o in zip(step.outs, outs):
        G.add_value(vid, np.ascontiguousarray(o), grad)
    for i in step.ins:
        G.uses[i] += 1
        G.budget[i] -= 1
    G.steps.append(step)


def _pick_input(G, rng):
    n = len(G.shapes)
    if rng.random() < 0.3:
        return n - 1                       # extend the newest value
    live = [v for v in range(n) if G.budget[v] > 0]
    if not live:
        return int(rng.integers(0, n))
    w = np.array([G.budget[v] for v in live], dtype=np.float64)
    return int(rng.choice(live, p=w / w.sum()))   # values with more reuses left go first


def generate(seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    G = Builder(seed)
    G._rng = rng
    n_ops = int(rng.integers(3, 16))
    G.new_leaf(rng, _LEAF_SHAPES[rng.integers(len(_LEAF_SHAPES))], kind="tensor")
    G.grad[0] = True
    G.steps[0].p["requires_grad"] = True
    for _ in range(int(rng.integers(0, 3))):
        G.new_leaf(rng, _LEAF_SHAPES[rng.integers(len(_LEAF_SHAPES))])
    tries = 0
    while G.n_ops < n_ops and tries < 40 * n_ops:
        tries += 1
        x = _pick_input(G, rng)
        name = _OP_NAMES[rng.choice(len(_OP_NAMES), p=_OP_P)]
        snap = G.snapshot()
        try:
            step = OPS[name][0](G, rng, x)
            step.nograd = name != "detach" and rng.random() < 0.05
            _apply(G, step)
        except Reject:
            G.rollback(snap)
            continue
        G.n_ops += 1
    _finish(G, rng)
    return G


def _finish(G, rng):
    """Pick the losses (every unused value feeds one, plus a few reused ones), the scenario
    and which Tensors the test keeps alive."""
    n = len(G.shapes)
    sinks = [v for v in range(n) if G.uses[v] == 0 and G.op_of(v) != "leaf"]
    extra = [v for v in range(n) if v not in sinks and rng.random() < 0.15]
    terms = sinks + extra
    if not any(G.grad[v] for v in terms):
        terms.append(max(v for v in range(n) if G.grad[v]))
    terms = sorted(set(terms))
    loss1 = [(v, _leaf_value(rng, G.shapes[v])) for v in terms]
    G.losses = [loss1]
    G.scenario = str(rng.choice(["one", "two", "twice", "steps"], p=[0.4, 0.25, 0.15, 0.2]))
    if G.scenario == "two":
        grad_vals = [v for v in range(n) if G.grad[v]]
        sub = [v for v in grad_vals if rng.random() < 0.5] or [grad_vals[-1]]
        G.losses.append([(v, _leaf_value(rng, G.shapes[v])) for v in sub])
    G.keep = {v for v in range(n) if rng.random() < 0.4}




# ---------------------------------------------------------------------------- float64 reference

def _sources(G):
    """What the finite differences perturb: each grad tensor leaf, and each grad Parameter."""
    src = []
    for st in G.steps:
        if st.op != "leaf":
            continue
        if st.p["kind"] == "tensor" and st.p["requires_grad"]:
            src.append(("leaf", st.outs[0], st.p["value"]))
    for k, (v, rg) in enumerate(G.params):
        if rg:
            src.append(("param", k, v))
    return src


def reference(G):
    """float64 forward values (batch entry 0) and, per source, d loss_k / d source by central
    differences: all 2P perturbed inputs run at once as a leading batch axis."""
    src = _sources(G)
    sizes = [v.size for _, _, v in src]
    P = sum(sizes)
    B = 1 + 2 * P
    pert = {}
    off = 0
    for (kind, key, v), n in zip(src, sizes):
        d = np.zeros((B, n))
        d[1 + 2 * (off + np.arange(n)), np.arange(n)] = H
        d[2 + 2 * (off + np.arange(n)), np.arange(n)] = -H
        pert[(kind, key)] = v[None] + d.reshape((B,) + v.shape)
        off += n
    vals = {}
    for st in G.steps:
        if st.op == "leaf":
            p = st.p
            if p["kind"] == "tensor":
                a = pert.get(("leaf", st.outs[0]), p["value"][None])
            elif st.nograd:
                a = G.params[p["param"]][0][None]
            else:
                a = pert.get(("param", p["param"]), G.params[p["param"]][0][None])
            vals[st.outs[0]] = a
            continue
        out = OPS[st.op][2]([vals[i] for i in st.ins], st.p)
        outs = out if isinstance(out, tuple) else (out,)
        for vid, o in zip(st.outs, outs):
            if st.nograd or st.op == "detach":
                o = o[:1]                     # no gradient flows: the unperturbed value
            vals[vid] = o
    losses = []
    for terms in G.losses:
        L = 0.0
        for v, R in terms:
            L = L + (vals[v] * R[None]).reshape(vals[v].shape[0], -1).sum(axis=1)
        losses.append(np.broadcast_to(L, (B,)))
    grads = []
    for L in losses:
        g = (L[1::2] - L[2::2]) / (2 * H)
        per, off = {}, 0
        for (kind, key, v), n in zip(src, sizes):
            per[(kind, key)] = g[off:off + n].reshape(v.shape)
            off += n
        grads.append(per)
    forward = {v: a[0] for v, a in vals.items()}
    return forward, [float(L[0]) for L in losses], grads


# ---------------------------------------------------------------------------- torchlean run

def _build(G, s, params):
    """Record the graph on session s; returns (losses, kept Tensors, grad leaf Tensors)."""
    env, leaves = {}, {}
    last_use = {}
    for k, st in enumerate(G.steps):
        for i in st.ins:
            last_use[i] = k
    for k, st in enumerate(G.steps):
        if st.op == "leaf":
            p = st.p
            if p["kind"] == "tensor":
                t = s.tensor(p["value"], requires_grad=p["requires_grad"])
                if p["requires_grad"]:
                    leaves[st.outs[0]] = t
            elif st.nograd:
                with tl.no_grad():
                    t = s.use(params[p["param"]])
            else:
                t = s.use(params[p["param"]])
            env[st.outs[0]] = t
            continue
        args = [env[i] if not (st.op == "layer_norm" and j > 0)
                else params[G.param_of(i)] for j, i in enumerate(st.ins)]
        fn = OPS[st.op][1]
        if st.nograd:
            with tl.no_grad():
                out = fn(s, args, st.p)
        else:
            out = fn(s, args, st.p)
        outs = out if isinstance(out, tuple) else (out,)
        for vid, t in zip(st.outs, outs):
            env[vid] = t
        for i in st.ins:   # the last Python reference of a value goes after its last use
            if last_use[i] == k and i not in G.keep and not _in_loss(G, i):
                env.pop(i, None)
    losses = []
    for terms in G.losses:
        L = None
        for v, R in terms:
            term = (env[v] * s.tensor(R)).sum()
            L = term if L is None else L + term
        losses.append(L)
    kept = {v: env[v] for v in G.keep if v in env}
    return losses, kept, leaves


def _in_loss(G, v):
    return any(v == t for terms in G.losses for t, _ in terms)




def _host(g):
    return None if g is None else g.numpy()


MODIFIED = "modified by an inplace operation"


def expects_raise(G) -> bool:
    """Whether a loss's backward runs the VJP of an inplace_saved step (exp's, whose saved
    output the step then wrote in place): PyTorch raises there, so must torchlean."""
    marked = set()
    for st in G.steps:
        if st.op == "inplace_saved" and not st.nograd and G.grad[st.outs[0]]:
            marked.update(st.outs)
        elif st.op not in ("leaf", "detach") and not st.nograd and marked.intersection(st.ins):
            marked.update(v for v in st.outs if G.grad[v])
    return any(v in marked for loss in G.losses for v, _ in loss)


def run_raising(G) -> list[str]:
    """The graph of a raising case: the backward of the first loss that reaches the written
    value (losses in order) must raise PyTorch's error."""
    params = [tl.Parameter(v, requires_grad=rg) for v, rg in G.params]
    s = tl.Session()
    losses, kept, leaves = _build(G, s, params)
    try:
        for loss in losses:
            loss.backward(retain_graph=True)
    except RuntimeError as e:
        return [] if MODIFIED in str(e) else [f"raised another RuntimeError: {e}"]
    finally:
        del losses, kept, leaves
        s.step()
    return [f"backward did not raise '{MODIFIED}' (a saved value was written in place)"]


def run_torchlean(G):
    """Run the graph's scenario; returns (forward {vid: array}, loss values, leaf grads
    {('leaf', vid) or ('param', k): array or None})."""
    params = [tl.Parameter(v, requires_grad=rg) for v, rg in G.params]
    s = tl.Session()
    losses, kept, leaves = _build(G, s, params)
    loss_vals = [float(L.numpy()) for L in losses]
    sc = G.scenario
    if sc == "one":
        losses[0].backward()
    elif sc == "two":
        losses[0].backward(retain_graph=True)
        losses[1].backward()
    elif sc == "twice":
        losses[0].backward(retain_graph=True)
        losses[0].backward()
    else:   # "steps": backward, Session.step(), the same graph again: parameters accumulate
        losses[0].backward()
        del losses, kept, leaves
        s.step()
        losses, kept, leaves = _build(G, s, params)
        losses[0].backward()
    forward = {v: t.numpy().astype(np.float64) for v, t in kept.items()}
    grads = {("leaf", v): _host(t.grad) for v, t in leaves.items()}
    grads.update({("param", k): _host(p.grad) for k, p in enumerate(params)})
    del losses, kept, leaves
    s.step()
    for p in params:
        p.zero_grad()
    return forward, loss_vals, grads


# ---------------------------------------------------------------------------- checking

def expected_grads(G, ref_grads):
    """What the scenario accumulates into each source."""
    g1 = ref_grads[0]
    sc = G.scenario
    out = {}
    for key, g in g1.items():
        if sc == "one":
            out[key] = g
        elif sc == "two":
            out[key] = g + ref_grads[1][key]
        elif sc == "twice":
            out[key] = 2 * g
        else:
            out[key] = 2 * g if key[0] == "param" else g
    return out


def check(G) -> list[str]:
    """Run G on torchlean and against the float64 reference; returns the mismatches (a buffer
    the run leaves live is one too: every gradient buffer must have been freed or kept)."""
    if expects_raise(G):
        return run_raising(G)
    fwd_ref, loss_ref, ref_grads = reference(G)
    live = tl.memory_stats()["live_bytes"]
    fwd, loss_vals, grads = run_torchlean(G)
    errors = []
    leaked = tl.memory_stats()["live_bytes"] - live   # < 0: an earlier test's garbage went
    if leaked > 0:
        errors.append(f"{leaked} bytes still live after the run")
    for v, a in fwd.items():
        r = fwd_ref[v]
        if a.shape != r.shape:
            errors.append(f"value {v}: shape {a.shape}, expected {r.shape}")
        elif not np.allclose(a, r, rtol=FWD_RTOL, atol=FWD_RTOL * (1 + np.max(np.abs(r),
                                                                                 initial=0))):
            errors.append(f"value {v}: max error {np.max(np.abs(a - r)):.3g}")
    for k, (a, r) in enumerate(zip(loss_vals, loss_ref)):
        if not abs(a - r) <= FWD_RTOL * (1 + abs(r)) * 4:
            errors.append(f"loss{k + 1}: {a!r}, expected {r!r}")
    want = expected_grads(G, ref_grads)
    # a gradient that is 0 in exact arithmetic (a softmax's sum, a cancelled path) is float32
    # rounding noise on torchlean's side: measured against the largest gradient of the graph
    floor = 1e-5 * max([1.0] + [np.max(np.abs(r), initial=0.0) for r in want.values()])
    for key, r in want.items():
        g = grads.get(key)
        scale = np.max(np.abs(r), initial=0.0)
        if g is None:
            if scale > 1e-6:
                errors.append(f"{key}: no gradient, expected max |g| {scale:.3g}")
            continue
        if g.shape != r.shape:
            errors.append(f"{key}: gradient shape {g.shape}, expected {r.shape}")
            continue
        err = np.abs(g - r) - RTOL * np.abs(r) - ATOL * scale - floor
        if not np.all(err <= 0):
            i = np.unravel_index(np.argmax(err), err.shape)
            errors.append(f"{key}: gradient {g[i]:.6g} at {i}, expected {r[i]:.6g} "
                          f"(max |ref| {scale:.3g})")
    return errors


def set_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    tl.set_exact(mode == "exact")
    tl.set_deterministic(mode in ("deterministic", "exact"))


def run_campaign(n: int, modes=MODES, seed: int = 0, verbose=False, out=sys.stdout):
    """Check n graphs (seeds seed .. seed + n - 1) in each mode; returns {mode: failures}."""
    failures = {}
    for mode in modes:
        set_mode(mode)
        t0, fails = time.time(), []
        for i in range(n):
            G = generate(seed + i)
            try:
                errs = check(G)
            except Exception as e:          # noqa: BLE001 - a crash is a failure to report
                errs = [f"raised {type(e).__name__}: {e}"]
            if errs:
                fails.append((G, errs))
                print(f"FAIL mode={mode} seed={G.seed}: {errs[:3]}\n{G.describe()}", file=out,
                      flush=True)
            elif verbose:
                print(f"ok seed={G.seed} ops={G.n_ops}", file=out)
            if (i + 1) % 1000 == 0:
                print(f"  {mode}: {i + 1}/{n} graphs, {len(fails)} failed, "
                      f"{time.time() - t0:.0f} s", file=out, flush=True)
        print(f"random graphs: mode={mode} backend={tl.backend()} graphs={n} seeds={seed}.."
              f"{seed + n - 1} passed={n - len(fails)} failed={len(fails)} "
              f"({time.time() - t0:.1f} s)", file=out, flush=True)
        failures[mode] = fails
    set_mode("default")
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=300, help="graphs per mode")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--seed", type=int, default=0, help="first graph seed")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--show", type=int, default=None, help="print the graph of one seed")
    args = ap.parse_args(argv)
    if args.show is not None:
        print(generate(args.show).describe())
        return 0
    fails = run_campaign(args.graphs, [m for m in args.modes.split(",") if m], args.seed,
                         args.verbose)
    return 1 if any(fails.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
