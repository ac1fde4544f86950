"""RMSprop, Adagrad and the added schedulers against float64 references of torch's documented
update rules and recursions; bad options raise the way torch's do."""
import math

import numpy as np
import pytest

from torchlean import optim
from torchlean.data import DataLoader
from torchlean.optim import lr_scheduler as sched
from torchlean.session import Parameter, Session

W0 = np.array([0.5, -1.25, 2.0, 0.0, -0.3], np.float32).astype(np.float64)  # -0.3: zero gradient
T = np.array([1.0, 0.5, -1.0, 0.25, -0.3], np.float32)


def _train(opt, w, steps):
    """Gradients of sum((w - T)^2 * [1..5]) (distinct per coordinate), one step each."""
    scale = np.arange(1, 6, dtype=np.float32)
    for _ in range(steps):
        s = Session()
        d = s.use(w) - s.tensor(T)
        (d * d * s.tensor(scale)).sum().backward()
        opt.step()
        opt.zero_grad()
        s.step()


def _grad(w):
    return 2 * (w - T) * np.arange(1, 6)


@pytest.mark.parametrize("momentum, centered, wd, maximize", [
    (0.0, False, 0.0, False), (0.9, False, 0.0, False), (0.0, True, 0.1, False),
    (0.5, True, 0.05, False), (0.0, False, 0.0, True)])
def test_rmsprop_matches_torch_rule(momentum, centered, wd, maximize):
    lr, alpha, eps = 0.01, 0.9, 1e-6
    w = Parameter(W0)
    opt = optim.RMSprop([w], lr=lr, alpha=alpha, eps=eps, weight_decay=wd, momentum=momentum,
                        centered=centered, maximize=maximize)
    _train(opt, w, 4)
    p, v, gavg, buf = W0.copy(), np.zeros(5), np.zeros(5), np.zeros(5)
    for _ in range(4):
        g = _grad(p) * (-1 if maximize else 1) + wd * p
        v = alpha * v + (1 - alpha) * g * g
        if centered:
            gavg = alpha * gavg + (1 - alpha) * g
            avg = np.sqrt(v - gavg * gavg) + eps
        else:
            avg = np.sqrt(v) + eps
        if momentum > 0:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    np.testing.assert_allclose(w.data, p, rtol=2e-5, atol=2e-6)
    assert opt.state_dict()["state"][0]["step"] == 4


@pytest.mark.parametrize("lr_decay, wd, init_acc", [(0.0, 0.0, 0.0), (0.1, 0.05, 0.5)])
def test_adagrad_matches_torch_rule(lr_decay, wd, init_acc):
    lr, eps = 0.1, 1e-10
    w = Parameter(W0)
    opt = optim.Adagrad([w], lr=lr, lr_decay=lr_decay, weight_decay=wd,
                        initial_accumulator_value=init_acc, eps=eps)
    _train(opt, w, 4)
    p, acc = W0.copy(), np.full(5, init_acc)
    for step in range(1, 5):
        g = _grad(p) + wd * p
        clr = lr / (1 + (step - 1) * lr_decay)
        acc = acc + g * g
        p = p - clr * g / (np.sqrt(acc) + eps)
    np.testing.assert_allclose(w.data, p, rtol=2e-5, atol=2e-6)


def test_optimizer_state_dict_round_trip_resumes_identically():
    runs = []
    for resume in (False, True):
        w = Parameter(W0)
        opt = optim.RMSprop([w], lr=0.02, momentum=0.8, centered=True)
        _train(opt, w, 2)
        if resume:
            sd = opt.state_dict()
            opt = optim.RMSprop([w], lr=0.02, momentum=0.8, centered=True)
            opt.load_state_dict(sd)
        _train(opt, w, 2)
        runs.append(w.numpy())
    np.testing.assert_array_equal(runs[0], runs[1])


def test_bad_optimizer_arguments():
    p = Parameter(W0)
    with pytest.raises(ValueError, match="RMSprop: invalid learning rate value: -1"):
        optim.RMSprop([p], lr=-1)
    with pytest.raises(ValueError, match="Adagrad: invalid lr_decay"):
        optim.Adagrad([p], lr_decay=-0.1)
    with pytest.raises(ValueError, match="the same parameter more than once"):
        optim.SGD([p, p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="iterable of Parameters"):
        optim.SGD(p, lr=0.1)


# ------------------------------------------------------------------- schedulers

def _opt(lr=0.1, groups=1):
    return optim.SGD([{"params": [Parameter(np.zeros(2))], "lr": lr * (i + 1)}
                      for i in range(groups)], lr=lr)


def test_exponential_lr():
    opt = _opt(0.5, groups=2)
    s = sched.ExponentialLR(opt, gamma=0.8)
    for e in range(1, 6):
        s.step()
        np.testing.assert_allclose(s.get_last_lr(), [0.5 * 0.8 ** e, 1.0 * 0.8 ** e], rtol=1e-12)


@pytest.mark.parametrize("t0, tmult", [(3, 1), (2, 2), (1, 3)])
def test_cosine_annealing_warm_restarts_matches_torch_recursion(t0, tmult):
    base, eta_min = 0.3, 0.01
    opt = _opt(base)
    s = sched.CosineAnnealingWarmRestarts(opt, T_0=t0, T_mult=tmult, eta_min=eta_min)
    t_cur, t_i = 0, t0
    for _ in range(30):
        want = eta_min + (base - eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2
        assert opt.param_groups[0]["lr"] == pytest.approx(want, rel=1e-12)
        s.step()
        t_cur += 1                          # torch's step(): advance, restart at T_i
        if t_cur >= t_i:
            t_cur -= t_i
            t_i *= tmult
    s.step(2.5)                             # fractional epochs, as torch
    t_cur, t_i = (2.5 % t0, t0) if tmult == 1 else (None, None)
    if tmult == 1:
        want = eta_min + (base - eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2
        assert opt.param_groups[0]["lr"] == pytest.approx(want, rel=1e-12)


def test_reduce_lr_on_plateau_schedule():
    opt = _opt(1.0, groups=2)
    s = sched.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2, cooldown=1,
                                min_lr=[0.3, 0.0])
    metrics = [5, 4, 4, 4, 4, 4, 4, 3.9999, 4, 4, 4, 4]
    lrs = []
    for m in metrics:
        s.step(m)
        lrs.append(s.get_last_lr())
    # bad epochs after the 4: 1, 2, 3 (> patience: cut), a cooldown epoch (reset), 1, 2
    # (3.9999 is no relative improvement of 1e-4), 3: cut, floored at group 0's min_lr
    want0 = [1, 1, 1, 1, .5, .5, .5, .5, .3, .3, .3, .3]
    want1 = [2, 2, 2, 2, 1, 1, 1, 1, .5, .5, .5, .5]
    np.testing.assert_allclose([l[0] for l in lrs], want0)
    np.testing.assert_allclose([l[1] for l in lrs], want1)
    m = sched.ReduceLROnPlateau(_opt(1.0), mode="max", threshold=0.1, threshold_mode="abs",
                                patience=0)
    m.step(1.0)
    m.step(1.05)                            # not better by 0.1: cut at once (patience 0)
    assert m.get_last_lr() == pytest.approx([0.1])
    with pytest.raises(ValueError, match="factor should be < 1.0"):
        sched.ReduceLROnPlateau(_opt(), factor=1.0)
    with pytest.raises(ValueError, match="mode 'avg' is unknown"):
        sched.ReduceLROnPlateau(_opt(), mode="avg")


def test_non_integer_counts_raise():
    with pytest.raises(TypeError, match=r"StepLR: step_size must be an integer, got 2.5"):
        sched.StepLR(_opt(), step_size=2.5)
    with pytest.raises(ValueError, match="StepLR: step_size must be >= 1"):
        sched.StepLR(_opt(), step_size=0)
    with pytest.raises(TypeError, match="T_0 must be an integer"):
        sched.CosineAnnealingWarmRestarts(_opt(), T_0=2.0)
    with pytest.raises(ValueError, match="T_mult must be >= 1"):
        sched.CosineAnnealingWarmRestarts(_opt(), T_0=2, T_mult=0)
    with pytest.raises(TypeError, match=r"DataLoader: batch_size must be an int, got float 2.7"):
        DataLoader(np.zeros((5, 2)), batch_size=2.7)
    with pytest.raises(TypeError, match="batch_size"):
        DataLoader(np.zeros((5, 2)), batch_size=True)
    assert len(DataLoader(np.zeros((5, 2)), batch_size=np.int64(2))) == 3
