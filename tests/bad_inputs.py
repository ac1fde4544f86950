"""The bad-input table, generated from the registry (ops.yaml), and the worker that runs it.

Every op gets the same families of bad calls, derived from its inputs and attr types: wrong
rank, mismatched and zero-size shapes, NaN/inf values, released inputs, bad node ids, huge and
non-finite attrs, wrong attr types, unknown and missing keywords. Tape ops are called through
Tape methods from a valid registry test case; kernel-only ops through torchlean.ops with guessed
shapes. The acceptable outcomes are a result or a Python exception of an allowed type naming the
op; a crash (the process dies) or a hang is never acceptable.

Run as a script, this module is the worker: it reads "<op> <case index>" lines on stdin (or
"@surface <index>" for a case of bad_surface_inputs.py, the PyTorch-style surfaces), runs
each case and writes one JSON line per case, so the parent (tests/test_bad_inputs.py) can
isolate a crash to its case and start a fresh worker for the rest.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import REGISTRY, attrs_of  # noqa: E402
from torchlean.buffer import AnyBuffer  # noqa: E402
from bad_surface_inputs import run_surface_case  # noqa: E402

HUGE = 2 ** 40
BAD_IDS = [("str id", "0"), ("None id", None), ("float id", 1.5), ("bool id", True),
           ("negative id", -1), ("id off the tape", 10 ** 6), ("array id", [0])]
# attr type -> [(label, bad value)] beyond the wrong-type values every attr gets
BAD_ATTRS = {
    "float": [("nan", float("nan")), ("inf", float("inf")), ("-inf", float("-inf")),
              ("1e308", 1e308), ("-1e308", -1e308), ("array", [1.0, 2.0])],
    "int": [("huge", HUGE), ("-huge", -HUGE), ("2^63", 2 ** 63), ("float", 1.5), ("bool", True),
            ("nan", float("nan")), ("-1", -1)],
    "ints": [("huge", HUGE), ("-huge", -HUGE), ("zero", 0), ("-1", -1), ("tuple of 9", (1,) * 9),
             ("float", 1.5), ("empty tuple", ())],
    "shape": [("huge", (HUGE, HUGE)), ("negative", (-1, -1)), ("float dims", (1.5, 2.0)),
              ("int", 7), ("over uint32", (2 ** 31, 4))],
    "key": [("negative", -1), ("2^64", 2 ** 64), ("float", 0.5)],
    "index": [("huge", np.array([HUGE])), ("-huge", np.array([-HUGE])), ("float array",
              np.array([0.5])), ("2-d", np.zeros((2, 2), np.int64)), ("empty", np.array([], int)),
              ("list", [0, 1])],
    "mask": [("float mask", np.ones((2, 2))), ("wrong shape", np.ones((7, 1), bool)),
             ("0-d", np.array(True))],
    "bool": [("str", "yes"), ("nan", float("nan"))],
    "array": [("nan", np.array([[np.nan]])), ("3-d", np.ones((2, 2, 2))), ("str", "x")],
    "buffers": [("raw handle", [12345]), ("int", 7), ("float list", [0.5])],
}
WRONG_TYPE = [("str", "x"), ("None", None), ("object", object())]
GUESS = {"float": 0.5, "int": 1, "ints": 1, "shape": (3, 4), "key": 1,
         "index": np.array([0, 1]), "mask": None, "bool": False, "array": np.ones((2, 2))}


def _base(op):
    """(input shapes, attrs) of a call expected to be valid: the op's first registry case, or
    guessed shapes and attrs for kernel-only ops that have none."""
    cases = op.test.get("cases") or []
    if cases:
        shapes = [tuple(s) for s in cases[0]["shapes"]]
        attrs = attrs_of(cases[0])
    else:
        shapes = [(3, 4)] * len(op.inputs)
        attrs = {}
    for a in op.attrs:
        if a.name not in attrs and not a.has_default:
            # a list of live AnyBuffers is made per call: one buffer (count guesses 1)
            attrs[a.name] = [AnyBuffer.zeros((3,))] if a.type == "buffers" else GUESS[a.type]
        if a.type == "mask" and attrs.get(a.name) is not None:
            attrs[a.name] = np.asarray(attrs[a.name], dtype=bool)
    return shapes, attrs


FINITE_CHECKS = ("finite", "positive", "finite_nonzero", "finite_nonneg", "prob")


def _must_raise(a, label, bad):
    """Whether the bad attr value can only be an error (others may be legal: a huge stride)."""
    if label in ("str", "object"):
        return True
    if label == "None":
        return a.default is not None
    if a.type == "float" and a.check in FINITE_CHECKS and label in ("nan", "inf", "-inf"):
        return True
    return a.type in ("bool", "buffers") or (a.type == "int" and label in ("float", "nan"))


def cases_for(op):
    """[(label, shapes, input kinds, id overrides, attrs, must_raise)] for one op, in a fixed
    order; must_raise marks calls that can only be errors (a result there is a silently
    accepted bad input)."""
    shapes, attrs = _base(op)
    n = len(shapes)
    out = [("valid", shapes, ["rand"] * n, {}, attrs, False)]
    for k, s in enumerate(shapes):
        name = op.inputs[k]

        def with_shape(new, kinds=None):
            sh = list(shapes)
            sh[k] = tuple(new)
            return sh, kinds or ["rand"] * n

        variants = [(f"{name}: rank + 1", with_shape((2,) + s)),
                    (f"{name}: zero-size", with_shape((0,) + s[1:] if s else (0,)))]
        if s:
            variants += [(f"{name}: rank - 1", with_shape(s[:-1])),
                         (f"{name}: first dim + 1", with_shape((s[0] + 1,) + s[1:])),
                         (f"{name}: last dim 1", with_shape(s[:-1] + (1,)))]
        for fill in ("nan", "inf", "released"):
            kinds = ["rand"] * n
            kinds[k] = fill
            variants.append((f"{name}: {fill}", (shapes, kinds)))
        for label, (sh, kinds) in variants:
            out.append((label, sh, kinds, {}, attrs, label.endswith("released")))
        if op.tape:
            for label, bad in BAD_IDS:
                out.append((f"{name}: {label}", shapes, ["rand"] * n, {k: bad}, attrs, True))
    for a in op.attrs:
        for label, bad in BAD_ATTRS[a.type] + WRONG_TYPE:
            out.append((f"{a.name}={label}", shapes, ["rand"] * n, {}, {**attrs, a.name: bad},
                        _must_raise(a, label, bad)))
        if not a.has_default:
            out.append((f"{a.name} missing", shapes, ["rand"] * n, {},
                        {k: v for k, v in attrs.items() if k != a.name}, True))
    out.append(("unknown keyword", shapes, ["rand"] * n, {}, {**attrs, "bogus_kw": 1}, True))
    return out


def table():
    """{op name: cases} for every registry op."""
    return {op.name: cases_for(op) for op in REGISTRY}


ALLOWED = ("ValueError", "TypeError", "IndexError", "MemoryError", "OverflowError",
           "BackendError", "ShapeError")


def run_case(tl, op, case):
    """Run one case; ("ok", "") or (exception type name, message)."""
    label, shapes, kinds, ids, attrs, _ = case
    rng = np.random.default_rng(0)
    vals = []
    for s, kind in zip(shapes, kinds):
        v = rng.uniform(0.5, 1.5, size=s)
        if kind == "nan":
            v = np.where(rng.uniform(size=s) < 0.5, np.nan, v)
        elif kind == "inf":
            v = np.where(rng.uniform(size=s) < 0.5, np.inf, -v)
        vals.append(v)
    try:
        if op.tape:
            t = tl.Tape()
            nids = [t.leaf(v) for v in vals]
            for i, kind in enumerate(kinds):
                if kind == "released":
                    t.value(nids[i]).release()
            args = [ids.get(i, nid) for i, nid in enumerate(nids)]
            getattr(t, op.name)(*args, **attrs)
            t.release()
        else:
            bufs = [tl.AnyBuffer.from_numpy(v) for v in vals]
            for b, kind in zip(bufs, kinds):
                if kind == "released":
                    b.release()
            getattr(tl.ops, op.name)(*bufs, **attrs)
        return "ok", ""
    except Exception as e:  # noqa: BLE001 - the outcome is what we report
        return type(e).__name__, str(e)


def worker():
    import resource
    import os
    # bound what a wrongly accepted huge size could allocate; not under ASan or CUDA, which
    # reserve far more address space than they use
    if (os.environ.get("TORCHLEAN_BACKEND") == "stub"
            and "asan" not in os.environ.get("LD_PRELOAD", "")):
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    import torchlean as tl
    ops = {op.name: op for op in REGISTRY}
    tables = {}
    print("ready", flush=True)
    for line in sys.stdin:
        name, idx = line.split()
        if name == "@surface":         # a case of bad_surface_inputs.CASES
            kind, msg = run_surface_case(tl, int(idx))
            print(json.dumps({"kind": kind, "msg": msg[:500]}), flush=True)
            continue
        op = ops[name]
        cases = tables.setdefault(name, cases_for(op))
        kind, msg = run_case(tl, op, cases[int(idx)])
        print(json.dumps({"kind": kind, "msg": msg[:500]}), flush=True)


if __name__ == "__main__":
    worker()
