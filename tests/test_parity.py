"""Stub vs CUDA parity: every tape op and registry test case, forward and VJP.

The CUDA side runs in this process; the stub side runs once per session in a subprocess
(TORCHLEAN_BACKEND=stub, a library cannot be swapped inside one process) that computes every
case with the same inputs and cotangents and passes the arrays back through an .npz file.
Tolerance: the entry's `test.parity`, else float32-level defaults (summation orders differ).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness import attrs_of, case_id, make_inputs, rng_for, tape_cases, tol

ROOT = Path(__file__).resolve().parent.parent
CASES = tape_cases()
DEFAULT_TOL = (1e-4, 1e-5)


def _key(op, idx, what):
    return f"{op.name}/{idx}/{what}"


def compute_case(op, idx, case) -> dict[str, np.ndarray]:
    """Forward value and input gradients for one case on the loaded backend (float64 arrays)."""
    import torchlean as tl
    xs = make_inputs(op, idx, case)
    attrs = attrs_of(case)
    t = tl.Tape()
    ids = [t.leaf(x) for x in xs]
    out = getattr(t, op.name)(*ids, **attrs)
    y = t.value(out).to_numpy(np.float64)
    res = {_key(op, idx, "fwd"): y}
    if op.vjps and not op.test.get("skip_vjp"):
        g = rng_for(op.name, 2000 + idx).uniform(-1.0, 1.0, size=y.shape)
        g = g.astype(np.float32).astype(np.float64)
        grads = t.backward(out, seed=g, wrt=ids)
        differentiable = {tgt for v in op.vjps for tgt in v.targets}
        for k, name in enumerate(op.inputs):
            if name in differentiable:
                res[_key(op, idx, f"d{name}")] = grads[ids[k]].to_numpy(np.float64)
        for gr in grads.values():
            gr.release()
    t.release()
    return res


def dump_all(path: str) -> None:
    """Subprocess entry: compute every case on this process's backend into one .npz.
    A case that raises is recorded as an error string so the parent can report it."""
    arrays, errors = {}, []
    for op, idx, case in CASES:
        try:
            arrays.update(compute_case(op, idx, case))
        except Exception as e:  # reported per case by the parent
            errors.append(f"{op.name}/{idx}: {type(e).__name__}: {e}")
    arrays["__errors__"] = np.array(errors, dtype=object)
    np.savez(path, **arrays)


def stub_dump(tmp_path_factory, **env_extra) -> dict:
    """Every case computed on the stub in a subprocess (with env_extra set), as arrays by key."""
    path = tmp_path_factory.mktemp("parity") / "stub.npz"
    env = dict(os.environ, TORCHLEAN_BACKEND="stub", **env_extra)
    env.pop("TORCHLEAN_REQUIRE_CUDA", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "tests"), str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    code = f"import test_parity; test_parity.dump_all({str(path)!r})"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"stub subprocess failed:\n{r.stdout}\n{r.stderr}"
    with np.load(path, allow_pickle=True) as z:
        data = {k: z[k] for k in z.files}
    data["__errors__"] = list(data["__errors__"])
    return data


@pytest.fixture(scope="module")
def stub_results(tmp_path_factory):
    return stub_dump(tmp_path_factory)


@pytest.mark.cuda
@pytest.mark.parametrize("op,idx,case", CASES,
                         ids=[f"{o.name}-{i}-{case_id(c)}" for o, i, c in CASES])
def test_cuda_matches_stub(stub_results, op, idx, case):
    import torchlean as tl
    assert tl.backend() == "cuda"
    errs = [e for e in stub_results["__errors__"] if e.startswith(f"{op.name}/{idx}:")]
    assert not errs, f"stub side failed: {errs}"
    got = compute_case(op, idx, case)
    rtol, atol = tol(op, "parity", DEFAULT_TOL)
    for k, v in got.items():
        assert k in stub_results, f"{k}: computed on CUDA but not on the stub"
        want = stub_results[k]
        assert v.shape == want.shape, f"{k}: CUDA shape {v.shape} != stub shape {want.shape}"
        np.testing.assert_allclose(v, want, rtol=rtol, atol=atol, err_msg=f"{k}: CUDA vs stub")


@pytest.mark.cuda
def test_stub_only_modules_pass_on_the_stub():
    """The stub-only modules (conftest.STUB_ONLY_MODULES) are not collected on a CUDA run; run
    them here against the stub library, in a subprocess, and require that all of them pass."""
    from conftest import STUB_ONLY_MODULES
    env = dict(os.environ, TORCHLEAN_BACKEND="stub")
    env.pop("TORCHLEAN_REQUIRE_CUDA", None)
    files = [str(ROOT / "tests" / m) for m in STUB_ONLY_MODULES]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                        *files], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "passed" in r.stdout and "skipped" not in r.stdout, r.stdout
