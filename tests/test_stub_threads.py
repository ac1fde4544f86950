"""The stub's own thread pool (native/stub/threads.c): the same bits for any thread count,
regions started by two application threads at once, and a pool in a forked child.

Kernels exercised: convolutions (a region over samples with a dynamic loop), pooling (dynamic
loop over planes), the blocked matmul (a region with barriers), the default mode's blocked
attention (a loop over heads and query blocks, GEMMs inside), layer norm (groups of rows) and
elementwise loops."""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import torchlean as tl

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(tl.backend() != "stub", reason="the stub's pool")
A = tl.AnyBuffer.from_numpy

_CASE = """
import hashlib, numpy as np, torchlean as tl
A = tl.AnyBuffer.from_numpy
r = np.random.default_rng(11)
f = lambda *s: r.uniform(-1, 1, s).astype(np.float32)
x, w, b = f(37, 5, 9, 11), f(7, 5, 3, 3), f(7)
y = tl.ops.conv(A(w), A(b), A(x), stride=1, padding=1)
outs = [y, *tl.ops.conv_backward(A(w), A(x), A(f(37, 7, 9, 11)), stride=1, padding=1)]
outs.append(tl.ops.max_pool(A(x), kernel_size=(3, 3), stride=2, padding=1))
outs.append(tl.ops.smooth_max_pool(A(x), kernel_size=(2, 2), beta=2.0, stride=1))
outs.append(tl.ops.matmul(A(f(301, 269)), A(f(269, 311))))
ws, xa, mask = [A(f(12, 12)) for _ in range(4)], A(f(3, 130, 12)), r.uniform(size=(130, 130)) < 0.6
for kw in (dict(causal=True), dict(mask=mask), dict(mask=np.tri(130, dtype=bool))):
    fwd = tl.ops.multi_head_attention(*ws, xa, num_heads=3, **kw)
    outs += [*fwd, *tl.ops.multi_head_attention_backward(A(f(3, 130, 12)), *ws, xa, *fwd[1:], num_heads=3, **kw)]
for rows, cols in ((1029, 64), (37, 300)):   # row groups of 8 with a partial last; wide rows
    ln = tl.ops.layer_norm(A(f(rows, cols)), A(f(cols)), A(f(cols)), eps=1e-5)
    outs += [*ln, *tl.ops.layer_norm_backward(A(f(rows, cols)), ln[1], ln[2], A(f(cols)))]
h = hashlib.sha256()
for o in outs:
    h.update(o.to_numpy().tobytes())
print(h.hexdigest())
"""


def test_results_do_not_depend_on_the_thread_count():
    digests = set()
    for n in ("1", "3"):   # 3: a team larger than the machine, slots left to steal
        env = dict(os.environ, OMP_NUM_THREADS=n, TORCHLEAN_BACKEND="stub",
                   PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
        r = subprocess.run([sys.executable, "-c", _CASE], env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        digests.add(r.stdout.strip())
    assert len(digests) == 1, digests


def _conv_ref(w, b, x):
    """float64 3x3 cross-correlation, padding 1, stride 1"""
    n, ci, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, w.shape[0], h, wd)) + b[None, :, None, None]
    for i in range(3):
        for j in range(3):
            y += np.einsum("oc,nchw->nohw", w[:, :, i, j], xp[:, :, i:i + h, j:j + wd])
    return y


def _work(seed):
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, (24, 6, 10, 10)).astype(np.float32)
    w = r.uniform(-1, 1, (8, 6, 3, 3)).astype(np.float32)
    b = r.uniform(-1, 1, 8).astype(np.float32)
    m1 = r.uniform(-1, 1, (200, 150)).astype(np.float32)
    m2 = r.uniform(-1, 1, (150, 190)).astype(np.float32)
    return x, w, b, m1, m2


def _run(x, w, b, m1, m2):
    y = tl.ops.conv(A(w), A(b), A(x), stride=1, padding=1).to_numpy()
    z = tl.ops.matmul(A(m1), A(m2)).to_numpy()
    return y, z


def test_two_application_threads_run_regions_at_once():
    """One thread holds the pool; the other's regions run on itself. Both must be right."""
    cases = [_work(s) for s in range(4)]
    want = [_run(*c) for c in cases]
    for c, (y, z) in zip(cases, want):
        x, w, b, m1, m2 = c
        np.testing.assert_allclose(y, _conv_ref(w, b, x), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(z, m1.astype(np.float64) @ m2, rtol=1e-5, atol=1e-4)
    errors = []
    barrier = threading.Barrier(2)

    def body(k):
        try:
            barrier.wait()
            for it in range(12):
                i = (k + it) % len(cases)
                y, z = _run(*cases[i])
                assert np.array_equal(y, want[i][0]) and np.array_equal(z, want[i][1])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=body, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "a region never finished"
    assert not errors, errors


def _child(q):
    x, w, b, m1, m2 = _work(1)
    y, z = _run(x, w, b, m1, m2)
    q.put(hashlib.sha256(y.tobytes() + z.tobytes()).hexdigest())


def test_a_forked_child_starts_its_own_pool():
    x, w, b, m1, m2 = _work(1)
    y, z = _run(x, w, b, m1, m2)          # the parent's pool is up
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(timeout=120)
    if p.is_alive():
        p.kill()
        pytest.fail("the forked child hung in a parallel region")
    assert p.exitcode == 0
    assert q.get(timeout=5) == hashlib.sha256(y.tobytes() + z.tobytes()).hexdigest()
