"""Registry-driven test helpers: random inputs per case, forward and finite-difference checks."""
from __future__ import annotations

import zlib

import numpy as np

from codegen.registry import parse_registry

REGISTRY = parse_registry()
BY_NAME = {o.name: o for o in REGISTRY}


def tape_cases():
    """(op, case index, case) for every tape op's test case, with a readable id."""
    out = []
    for op in REGISTRY:
        if not op.tape:
            continue
        for i, case in enumerate(op.test.get("cases", [])):
            out.append((op, i, case))
    return out


def case_id(v):
    if hasattr(v, "name") and hasattr(v, "family"):
        return v.name
    if isinstance(v, dict):
        return "-".join("x".join(map(str, s)) or "scalar" for s in v.get("shapes", []))
    return str(v)


def rng_for(op_name: str, idx: int) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(f"{op_name}/{idx}".encode()))


def domain_of(op, name):
    dom = op.test.get("domain", [-2.0, 2.0])
    if isinstance(dom, dict):
        dom = dom.get(name, [-2.0, 2.0])
    return float(dom[0]), float(dom[1])


def make_inputs(op, idx, case):
    """Random float64 inputs already rounded to float32 (so the reference sees what we see)."""
    rng = rng_for(op.name, idx)
    xs = []
    ints = set(op.test.get("integer_inputs", []) or [])
    for name, shape in zip(op.inputs, case["shapes"]):
        lo, hi = domain_of(op, name)
        if name in ints:
            x = rng.integers(int(lo), int(hi), size=tuple(shape)).astype(np.float64)
        else:
            x = rng.uniform(lo, hi, size=tuple(shape))
            # keep values away from 0 kinks by pushing tiny magnitudes out
            x = np.where(np.abs(x) < 1e-3, 1e-3 + np.abs(x), x) if lo < 0 < hi else x
        xs.append(x.astype(np.float32).astype(np.float64))
    return xs


def attrs_of(case):
    out = {}
    for k, v in (case.get("attrs") or {}).items():
        out[k] = tuple(v) if isinstance(v, list) and all(isinstance(e, int) for e in v) else v
    return out


def tol(op, kind, default):
    t = op.test.get(kind) or {}
    return float(t.get("rtol", default[0])), float(t.get("atol", default[1]))


def finite_diff_vjp(f, xs, g, which, max_coords=48, rng=None, eps=None):
    """Central differences of sum(f(xs) * g) w.r.t. xs[which] at up to max_coords entries.

    Returns (flat coordinate indices, estimated gradient values)."""
    x = xs[which]
    n = x.size
    coords = np.arange(n) if n <= max_coords else np.sort(rng.choice(n, max_coords, replace=False))
    est = np.empty(len(coords))
    for j, c in enumerate(coords):
        h = eps if eps is not None else 1e-6 * max(1.0, abs(x.flat[c]))
        xp = [a.copy() for a in xs]
        xm = [a.copy() for a in xs]
        xp[which].flat[c] += h
        xm[which].flat[c] -= h
        est[j] = (np.sum(f(*xp) * g) - np.sum(f(*xm) * g)) / (2 * h)
    return coords, est


F32_U = 2.0 ** -24  # float32 unit roundoff


def assert_sums_close(name, got, want, sumsq, terms):
    """got within float32 accumulation error of the float64 sums want: 16 u sqrt(terms) times
    the root of the sum of the squared terms (sumsq; the typical error of a chain of `terms`
    float32 adds is u sqrt(terms) ||terms||), plus the rounding of the value itself; NaN exactly
    where want is NaN."""
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{name}: NaN pattern")
    tol = 16 * F32_U * np.sqrt(terms) * np.sqrt(sumsq) + 4 * F32_U * np.abs(want) + 1e-30
    err = np.where(nan, 0.0, np.abs(got - want))
    bad = err > np.where(nan, 0.0, tol)
    assert not bad.any(), (f"{name}: {bad.sum()} of {bad.size} elements off, worst error "
                           f"{err.max():.3g} at {np.unravel_index(np.argmax(err - tol), err.shape)}, "
                           f"tolerance there {tol.flat[np.argmax(err - tol)]:.3g}")
