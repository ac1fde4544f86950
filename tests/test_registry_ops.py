"""Every tape op in ops.yaml, every test case: forward vs the float64 reference, VJP vs central
finite differences of that reference. Adding a registry entry with test cases adds its tests."""
from __future__ import annotations

import numpy as np
import pytest

import reference
import torchlean as tl
from harness import (attrs_of, case_id, finite_diff_vjp, make_inputs, rng_for, tape_cases, tol)

CASES = tape_cases()


def _ref(op):
    return getattr(reference, op.test.get("ref", op.name))


def _run(op, xs, attrs, requires_grad=True):
    t = tl.Tape()
    ids = [t.leaf(x, requires_grad=requires_grad) for x in xs]
    out = getattr(t, op.name)(*ids, **attrs)
    return t, ids, out


@pytest.mark.parametrize("op,idx,case", CASES, ids=[f"{o.name}-{i}-{case_id(c)}" for o, i, c in CASES])
def test_forward_matches_float64_reference(op, idx, case):
    xs = make_inputs(op, idx, case)
    attrs = attrs_of(case)
    want = np.asarray(_ref(op)(*xs, **attrs), dtype=np.float64)
    t, _, out = _run(op, xs, attrs)
    got = t.value(out).to_numpy(np.float64)
    rtol, atol = tol(op, "fwd", (1e-5, 1e-6))
    assert got.shape == want.shape, f"{op.name}: shape {got.shape} != reference {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{op.name} forward")
    t.release()


VJP_CASES = [(o, i, c) for o, i, c in CASES if o.vjps and not o.test.get("skip_vjp")]


@pytest.mark.parametrize("op,idx,case", VJP_CASES,
                         ids=[f"{o.name}-{i}-{case_id(c)}" for o, i, c in VJP_CASES])
def test_vjp_matches_finite_differences(op, idx, case):
    xs = make_inputs(op, idx, case)
    attrs = attrs_of(case)
    f = lambda *a: np.asarray(_ref(op)(*a, **attrs), dtype=np.float64)  # noqa: E731
    y = f(*xs)
    rng = rng_for(op.name, 1000 + idx)
    g = rng.uniform(-1.0, 1.0, size=y.shape).astype(np.float32).astype(np.float64)
    t, ids, out = _run(op, xs, attrs)
    grads = t.backward(out, seed=g)
    rtol, atol = tol(op, "vjp", (1e-4, 1e-5))
    differentiable = {tgt for v in op.vjps for tgt in v.targets}
    for k, name in enumerate(op.inputs):
        if name not in differentiable:
            continue
        got = grads[ids[k]].to_numpy(np.float64)
        assert got.shape == xs[k].shape
        coords, est = finite_diff_vjp(f, xs, g, k, rng=rng)
        np.testing.assert_allclose(got.reshape(-1)[coords], est, rtol=rtol, atol=atol,
                                   err_msg=f"{op.name}: d/d{name}")
    for gr in grads:
        gr.release()
    t.release()
