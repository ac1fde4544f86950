"""y.backward(g) with g a Tensor: the gradients are those of the same seed given as an array,
bit for bit; g itself is left as it was (the pass works on a copy of its payload, which a VJP
may write); a seed of another shape or of a released step is refused by name."""
from __future__ import annotations

import numpy as np
import pytest

from torchlean import nn
from torchlean.session import Session, manual_seed


def _grads(seed_as_tensor: bool, seed: np.ndarray, x0: np.ndarray):
    manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 5, 3, padding=1), nn.BatchNorm2d(5), nn.ReLU(),
                          nn.MaxPool2d(2))
    with Session() as s:
        x = s.tensor(x0, requires_grad=True)
        y = model(x)
        g = s.tensor(seed) if seed_as_tensor else seed
        y.backward(g)
        seen = g.numpy() if seed_as_tensor else None
        out = [x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]
    return out, seen


def test_a_tensor_seed_gives_the_array_seeds_gradients_and_stays_unchanged():
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    seed = rng.standard_normal((2, 5, 3, 3)).astype(np.float32)
    seed[0, 0, 0, 0], seed[1, 2, 1, 1] = -0.0, np.inf
    want, _ = _grads(False, seed, x0)
    got, seen = _grads(True, seed, x0)
    for a, b in zip(want, got):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert np.array_equal(seen.view(np.uint32), seed.view(np.uint32))


def test_a_tensor_seed_of_another_shape_or_a_released_step_is_refused():
    with Session() as s:
        x = s.tensor(np.ones((2, 3), np.float32), requires_grad=True)
        y = x * 2.0
        with pytest.raises(ValueError, match=r"seed shape \(3, 2\) does not match"):
            y.backward(s.tensor(np.ones((3, 2), np.float32)))
        old = s.tensor(np.ones((2, 3), np.float32))
        s.step()
        x = s.tensor(np.ones((2, 3), np.float32), requires_grad=True)
        with pytest.raises(ValueError, match="released by Session.step"):
            (x * 2.0).backward(old)
