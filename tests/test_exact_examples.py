"""Exact mode end to end (GPU machine): every example trained 200 steps with --exact gives the
same final weights and loss on the stub and on CUDA, and two CUDA runs give the same bits.

Each run is a subprocess (`--backend stub|cuda --exact --steps 200 --save FILE`); the saved
safetensors are compared bit for bit, the summary lines' loss fields as strings.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from test_examples import NAMES, _fields, _run

STEPS = 200
# the full model, fewer side computations (sampling and held-out estimates are not compared)
EXTRA = {"gpt_char.py": ("--generate", "8", "--eval-batches", "1")}


def _train(name, backend, path):
    line, _ = _run(name, "--backend", backend, "--exact", "--no-progress", "--save", str(path),
                   *EXTRA.get(name, ()), steps=STEPS)
    return _fields(line)


def _bits(a):
    f = np.asarray(a, dtype=np.float32)
    return f.view(np.uint32)


@pytest.mark.cuda
@pytest.mark.parametrize("name", NAMES)
def test_example_exact_stub_equals_cuda_after_200_steps(name, tmp_path):
    from torchlean.nn import load_file
    stub = _train(name, "stub", tmp_path / "stub.safetensors")
    cuda = _train(name, "cuda", tmp_path / "cuda.safetensors")
    again = _train(name, "cuda", tmp_path / "again.safetensors")
    assert stub.get("exact") == "1" and cuda.get("exact") == "1"
    ws, wc, wa = (load_file(str(tmp_path / f"{k}.safetensors")) for k in ("stub", "cuda", "again"))
    assert ws.keys() == wc.keys() == wa.keys()
    for k in ws:
        assert np.array_equal(_bits(wc[k]), _bits(wa[k])), f"{name} {k}: two CUDA runs differ"
        diff = np.flatnonzero(_bits(ws[k]).ravel() != _bits(wc[k]).ravel())
        assert diff.size == 0, (f"{name} {k}: {diff.size} of {ws[k].size} weights differ between "
                                f"the stub and CUDA after {STEPS} exact steps")
    # every reported number (losses, accuracies, errors) but the timings agree too
    numbers = {k: v for k, v in stub.items() if k not in ("backend", "time_s", "s_per_epoch")}
    for k, v in numbers.items():
        assert cuda.get(k) == v, f"{name} {k}: stub {v} vs CUDA {cuda.get(k)}"
