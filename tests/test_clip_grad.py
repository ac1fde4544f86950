"""nn.utils.clip_grad_value_ and clip_grad_norm_ on gradients from a real backward: values by
NumPy's clip and the norm rule in closed form; torch's argument forms (one Parameter, a
generator, foreach=); Parameters without gradients skipped."""
import numpy as np
import pytest

import torchlean as tl
from torchlean import nn


def _model_with_grads(seed=0):
    tl.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
    x = tl.tensor(np.random.default_rng(seed).standard_normal((7, 3)).astype(np.float32) * 4)
    (model(x) ** 2).sum().backward()
    return model


def _grads(model):
    return [np.asarray(p.grad, dtype=np.float64) for p in model.parameters()]


def test_clip_grad_value_clamps_every_element():
    model = _model_with_grads()
    before = _grads(model)
    c = 0.3
    assert max(np.abs(g).max() for g in before) > c          # something to clip
    out = nn.utils.clip_grad_value_((p for p in model.parameters()), c, foreach=None)
    assert out is None
    for g0, g1 in zip(before, _grads(model)):
        np.testing.assert_array_equal(g1, np.clip(g0, -c, c).astype(np.float32))


def test_clip_grad_value_single_parameter_and_skips_missing_grads():
    model = _model_with_grads(1)
    w = model[0].weight
    g0 = np.asarray(w.grad, dtype=np.float64)
    nn.utils.clip_grad_value_(w, 0.05)
    np.testing.assert_array_equal(np.asarray(w.grad), np.clip(g0, -0.05, 0.05).astype(np.float32))
    fresh = nn.Parameter(np.zeros(3, dtype=np.float32))
    nn.utils.clip_grad_value_([fresh], 1.0)                  # no gradient: nothing to do
    assert fresh.grad is None


def test_clip_grad_value_bad_value():
    with pytest.raises(ValueError, match="clip_value must be finite and >= 0"):
        nn.utils.clip_grad_value_([], float("inf"))
    with pytest.raises(ValueError, match="clip_value"):
        nn.utils.clip_grad_value_([], -1.0)


def test_clip_grad_norm_scales_to_max_norm_and_keeps_earlier_reads():
    model = _model_with_grads(2)
    before = _grads(model)
    held = model[0].weight.grad                              # read before clipping
    held_np = np.asarray(held, dtype=np.float64)
    total = np.sqrt(sum((g ** 2).sum() for g in before))
    got = nn.utils.clip_grad_norm_(iter(model.parameters()), 0.5, foreach=None)
    assert got == pytest.approx(total, rel=1e-5)
    coef = 0.5 / (total + 1e-6)
    for g0, g1 in zip(before, _grads(model)):
        np.testing.assert_allclose(g1, g0 * coef, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(held, dtype=np.float64), held_np)
