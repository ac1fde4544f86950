"""Exact mode: every registry test case gives the same float32 bits on CUDA as on the stub.

The stub side runs once per session in a subprocess with TORCHLEAN_EXACT=1 (test_parity.dump_all
over the same cases, inputs and cotangents); the CUDA side runs here with exact mode on. Zero
tolerance: the float32 bit patterns of every forward value and every input gradient must match
(NaN payloads aside: a NaN must meet a NaN).
"""
from __future__ import annotations

import numpy as np
import pytest

from harness import case_id, tape_cases
from test_parity import compute_case, stub_dump

CASES = tape_cases()


def bits(a: np.ndarray) -> np.ndarray:
    """float32 bit patterns, every NaN mapped to one pattern."""
    f = np.asarray(a, dtype=np.float32)
    b = f.view(np.uint32).copy()
    b[np.isnan(f)] = 0x7FC00000
    return b


@pytest.fixture(scope="module")
def stub_exact_results(tmp_path_factory):
    return stub_dump(tmp_path_factory, TORCHLEAN_EXACT="1")


@pytest.mark.cuda
@pytest.mark.parametrize("op,idx,case", CASES,
                         ids=[f"{o.name}-{i}-{case_id(c)}" for o, i, c in CASES])
def test_exact_cuda_equals_stub_bitwise(stub_exact_results, op, idx, case):
    import torchlean as tl
    assert tl.backend() == "cuda"
    errs = [e for e in stub_exact_results["__errors__"] if e.startswith(f"{op.name}/{idx}:")]
    assert not errs, f"stub side failed: {errs}"
    tl.set_exact(True)
    try:
        got = compute_case(op, idx, case)
    finally:
        tl.set_exact(False)
    for k, v in got.items():
        want = stub_exact_results[k]
        assert v.shape == want.shape, f"{k}: CUDA shape {v.shape} != stub shape {want.shape}"
        bv, bw = bits(v), bits(want)
        bad = np.flatnonzero(bv.ravel() != bw.ravel())
        assert bad.size == 0, (f"{k}: {bad.size} of {bv.size} values differ in exact mode; first "
                               f"at flat index {bad[0]}: CUDA {v.ravel()[bad[0]]!r} "
                               f"vs stub {want.ravel()[bad[0]]!r}")
