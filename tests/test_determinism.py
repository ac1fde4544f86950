"""Deterministic mode: bit-identical outputs and gradients run after run.

Every op whose registry entry says `determinism: atomic` (its CUDA kernel accumulates with
atomicAdd unless deterministic mode is on) is run 10 times on the same random data, on its
registry cases and on an enlarged case where the shapes allow (so many blocks contribute to
one output); a small training step is repeated the same way. These run on both backends: the
stub must be reproducible too (fixed summation order, independent of the thread count).
"""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from harness import BY_NAME, REGISTRY, attrs_of, case_id, make_inputs

RUNS = 10
BIG_ELEMENTS = 1 << 17  # target size of the enlarged case


def _atomic_cases():
    out = []
    for op in REGISTRY:
        if op.determinism != "atomic" or not op.tape:
            continue
        for i, case in enumerate(op.test.get("cases", [])):
            out.append((op, i, case))
    return out


ATOMIC = _atomic_cases()


def _enlarged(case):
    """Every dimension > 1 of every input scaled by one factor (keeps matching dims matching)."""
    shapes = [list(s) for s in case["shapes"]]
    n = sum(int(np.prod(s)) if s else 1 for s in shapes)
    rank = max([len(s) for s in shapes] + [1])
    f = max(2, int(round((BIG_ELEMENTS / max(n, 1)) ** (1.0 / rank))))
    big = dict(case)
    big["shapes"] = [[d * f if d > 1 else d for d in s] for s in shapes]
    return big


def _run_once(op, xs, attrs, g_seed):
    t = tl.Tape()
    ids = [t.leaf(x) for x in xs]
    out = getattr(t, op.name)(*ids, **attrs)
    y = t.value(out).to_numpy()
    res = [y]
    if op.vjps and not op.test.get("skip_vjp"):
        g = np.random.default_rng(g_seed).uniform(-1, 1, size=y.shape)
        grads = t.backward(out, seed=g, wrt=ids)
        for i in ids:
            res.append(grads[i].to_numpy())
            grads[i].release()
    t.release()
    return res


def _assert_bit_identical(runs, what):
    first = runs[0]
    for r, other in enumerate(runs[1:], 1):
        for k, (a, b) in enumerate(zip(first, other)):
            assert a.shape == b.shape
            same = np.array_equal(a.view(np.uint32), b.view(np.uint32))
            assert same, f"{what}: run {r} differs from run 0 in output {k}"


@pytest.mark.parametrize("op,idx,case", ATOMIC,
                         ids=[f"{o.name}-{i}-{case_id(c)}" for o, i, c in ATOMIC])
def test_atomic_ops_are_bit_identical_in_deterministic_mode(op, idx, case):
    assert tl.set_deterministic(True) is True
    variants = [("registry", case), ("enlarged", _enlarged(case))]
    for label, c in variants:
        xs = make_inputs(op, idx, c)
        attrs = attrs_of(c)
        try:
            runs = [_run_once(op, xs, attrs, 7 + idx) for _ in range(RUNS)]
        except ValueError:
            if label == "enlarged":  # the enlarged shapes do not fit this op's attrs
                continue
            raise
        _assert_bit_identical(runs, f"{op.name} case {idx} ({label})")


def test_deterministic_flag_round_trip():
    assert tl.set_deterministic(True) is True
    assert tl.is_deterministic() is True
    assert tl.set_deterministic(False) is False
    assert tl.is_deterministic() is False


def _linear_works() -> bool:
    """linear(W, b, x) with W (out, in), b (out,), x (batch, in), if the registry has it."""
    if "linear" not in BY_NAME:
        return False
    t = tl.Tape()
    try:
        out = t.linear(t.leaf(np.ones((2, 3))), t.leaf(np.ones(2)), t.leaf(np.ones((4, 3))))
        return t.value(out).shape == (4, 2)
    except (ValueError, TypeError):
        return False
    finally:
        t.release()


def _train(use_linear, steps=5, n=64, k=33, lr=0.05):
    """A small model trained with plain SGD on the host: loss = sum(relu(linear(W, b, x)))
    when linear exists, else sum(relu(x * w + b)) with broadcasting (whose VJP sums over the
    batch). Returns every loss and the final parameters."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (n, k))
    w = rng.uniform(-1, 1, (16, k) if use_linear else (k,))
    b = rng.uniform(-1, 1, (16,) if use_linear else (k,))
    losses = []
    xb = tl.AnyBuffer.from_numpy(x)
    for _ in range(steps):
        t = tl.Tape()
        iw, ib, ix = t.leaf(w), t.leaf(b), t.leaf(xb, requires_grad=False)
        h = t.linear(iw, ib, ix) if use_linear else t.add(t.mul(ix, iw), ib)
        loss = t.sum(t.relu(h))
        losses.append(t.value(loss).to_numpy().copy())
        grads = t.backward(loss, wrt=[iw, ib])
        gw, gb = grads[iw].to_numpy(), grads[ib].to_numpy()
        for gr in grads.values():
            gr.release()
        t.release()
        w = (w.astype(np.float32) - np.float32(lr) * gw).astype(np.float64)
        b = (b.astype(np.float32) - np.float32(lr) * gb).astype(np.float64)
    xb.release()
    return [np.array(losses, dtype=np.float32), w.astype(np.float32), b.astype(np.float32)]


def test_training_step_is_bit_identical_in_deterministic_mode():
    tl.set_deterministic(True)
    for use_linear in sorted({False, _linear_works()}):
        runs = [_train(use_linear) for _ in range(RUNS)]
        _assert_bit_identical(runs, f"training loop (linear={use_linear})")


def test_registry_marks_atomic_ops_with_a_deterministic_path():
    for op in REGISTRY:
        if op.determinism == "atomic":
            assert op.deterministic_path.strip(), f"{op.name}: atomic without deterministic_path"


@pytest.mark.cuda
def test_default_mode_sum_is_close_to_deterministic_sum():
    """Atomic (default) and fixed-order (deterministic) sums agree to float32 rounding."""
    rng = np.random.default_rng(5)
    x = tl.AnyBuffer.from_numpy(rng.uniform(-1, 1, 1 << 20))
    tl.set_deterministic(False)
    a = tl.ops.sum(x).to_numpy()
    tl.set_deterministic(True)
    b = tl.ops.sum(x).to_numpy()
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)
    x.release()
