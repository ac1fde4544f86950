"""In-place updates and torchlean.cuda.graph_step: a step that updates its parameters by hand
(`p -= lr * p.grad`, an EMA copy with mul_/add_) replays as the eager loop does, bit for bit,
and a write into a parameter between replays (outside the step) is read by the next replay,
since a Parameter keeps one storage. On the stub graph_step runs eagerly: the same check."""
from __future__ import annotations

import numpy as np

import torchlean as tl
from torchlean import nn
from torchlean.cuda import graph_step
from torchlean.session import Session


def _model(seed):
    tl.manual_seed(seed)
    return nn.Sequential(nn.Linear(7, 11), nn.Tanh(), nn.Linear(11, 3))


def _batches(n):
    """One batch n times, so the loss falls step after step."""
    rng = np.random.default_rng(5)
    xy = (rng.standard_normal((6, 7)).astype(np.float32),
          rng.standard_normal((6, 3)).astype(np.float32))
    return [xy] * n


def _make_step(model, ema):
    def step(x, y):
        model.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        with tl.no_grad():
            for p, e in zip(model.parameters(), ema.parameters()):
                p -= 0.1 * p.grad
                e.mul_(0.9).add_(p, alpha=0.1)
        return loss
    return step


def _run(graph: bool):
    model, ema = _model(1), _model(1)
    step = _make_step(model, ema)
    if graph:
        step = graph_step(step)
    s = Session()
    losses = []
    for k, (x, y) in enumerate(_batches(5)):
        if k == 3:   # written from outside the step: the next (replayed) step reads it
            with tl.no_grad():
                model[0].weight.mul_(0.5)
        with s:
            losses.append(np.float32(step(s.tensor(x), s.tensor(y)).item()))
    return (np.array(losses), [p.numpy() for p in model.parameters()],
            [e.numpy() for e in ema.parameters()])


def test_inplace_updates_in_a_captured_step_equal_the_eager_loop():
    det = tl.is_deterministic()
    tl.set_deterministic(True)
    try:
        eager, graph = _run(False), _run(True)
    finally:
        tl.set_deterministic(det)
    assert eager[0].tobytes() == graph[0].tobytes(), (eager[0], graph[0])
    assert eager[0][2] < eager[0][0]   # it learned
    for a, b in zip(eager[1] + eager[2], graph[1] + graph[2]):
        assert a.tobytes() == b.tobytes()
