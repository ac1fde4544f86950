"""Training utilities: parameter groups, bit-exact optimizer resume, learning-rate schedulers
(closed forms), clip_grad_norm_ on device, the RNG state and the NumPy DataLoader."""
import math

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn, optim
from torchlean.data import DataLoader, TensorDataset
from torchlean.nn import init
from torchlean.optim import lr_scheduler as sched
from torchlean.session import Parameter, Session, manual_seed


def _set_grads(params, grads):
    """Give each parameter exactly the gradient g (backward of sum(g * p))."""
    s = Session()
    loss = None
    for p, g in zip(params, grads):
        t = (s.use(p) * s.tensor(g)).sum()
        loss = t if loss is None else loss + t
    loss.backward()
    s.step()


# ------------------------------------------------------------------ parameter groups

def test_sgd_param_groups_per_group_lr_and_weight_decay():
    a, b = Parameter(np.full(3, 1.0)), Parameter(np.full(2, 2.0))
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "weight_decay": 0.1}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[0]["weight_decay"] == 0.0 and opt.param_groups[1]["momentum"] == 0.0
    ga, gb = np.array([1.0, -2.0, 0.5], np.float32), np.array([3.0, 0.25], np.float32)
    _set_grads([a, b], [ga, gb])
    opt.step()
    np.testing.assert_allclose(a.data, 1.0 - 0.1 * ga, rtol=1e-6)
    np.testing.assert_allclose(b.data, 2.0 - 0.5 * (gb + 0.1 * 2.0), rtol=1e-6)
    opt.param_groups[1]["lr"] = 0.0          # as a scheduler would: read at every step
    before = b.numpy()
    opt.step()
    np.testing.assert_array_equal(b.data, before)


def test_adam_param_groups_per_group_betas():
    p, q = Parameter(np.array([0.5, -1.0])), Parameter(np.array([2.0]))
    opt = optim.Adam([{"params": [p], "betas": (0.5, 0.9)}, {"params": [q]}], lr=0.01)
    g1, g2 = np.array([0.3, -0.7]), np.array([1.5])
    _set_grads([p, q], [g1.astype(np.float32), g2.astype(np.float32)])
    opt.step()
    for w0, g, (b1, b2), got in ((np.array([0.5, -1.0]), g1, (0.5, 0.9), p.data),
                                 (np.array([2.0]), g2, (0.9, 0.999), q.data)):
        m, v = (1 - b1) * g, (1 - b2) * g * g
        ref = w0 - 0.01 * (m / (1 - b1)) / (np.sqrt(v / (1 - b2)) + 1e-8)
        np.testing.assert_allclose(got, ref, rtol=1e-5)


def test_param_group_errors():
    p = Parameter(np.zeros(2))
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="SGD: lr must be finite and >= 0, got -1"):
        optim.SGD([{"params": [p], "lr": -1}], lr=0.1)
    with pytest.raises(ValueError, match=r"AdamW: need .*betas=\(1.0, 0.9\)"):
        optim.AdamW([p], betas=(1.0, 0.9))
    with pytest.raises(TypeError, match="must be torchlean Parameters"):
        optim.SGD([np.zeros(2)], lr=0.1)


# ------------------------------------------------------------------ bit-exact resume

def _model(seed):
    manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))


def _train(model, opt, scheduler, batches):
    for x, y in batches:
        s = Session()
        loss = nn.functional.mse_loss(model(s.tensor(x)), s.tensor(y))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        scheduler.step()
        s.step()


def _make_opt(model, kind):
    first, rest = model[0].parameters(), model[2].parameters()
    if kind == "sgd":
        opt = optim.SGD([{"params": first}, {"params": rest, "lr": 0.05}], lr=0.1, momentum=0.9,
                        nesterov=True, weight_decay=1e-3)
    else:
        opt = getattr(optim, kind)([{"params": first, "weight_decay": 0.1},
                                    {"params": rest, "betas": (0.8, 0.99)}], lr=0.01)
    return opt, sched.StepLR(opt, step_size=2, gamma=0.5)


@pytest.mark.parametrize("kind", ["sgd", "Adam", "AdamW"])
def test_optimizer_resume_is_bit_exact(kind, tmp_path):
    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(6, 5)).astype(np.float32),
                rng.normal(size=(6, 3)).astype(np.float32)) for _ in range(7)]
    model = _model(1)
    opt, sc = _make_opt(model, kind)
    _train(model, opt, sc, batches[:4])
    model.save(str(tmp_path / "m.safetensors"))
    opt_sd, sc_sd = opt.state_dict(), sc.state_dict()
    _train(model, opt, sc, batches[4:])
    model2 = _model(2)                  # different initial weights, overwritten by the load
    model2.load_state_dict(str(tmp_path / "m.safetensors"))
    opt2, sc2 = _make_opt(model2, kind)
    opt2.load_state_dict(opt_sd)
    sc2.load_state_dict(sc_sd)
    assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt_sd["param_groups"]]
    _train(model2, opt2, sc2, batches[4:])
    for (k, v), (k2, v2) in zip(model.state_dict().items(), model2.state_dict().items()):
        assert k == k2
        np.testing.assert_array_equal(v, v2)
    assert opt.state_dict()["param_groups"] == opt2.state_dict()["param_groups"]


def test_load_state_dict_mismatch():
    a, b = Parameter(np.zeros(2)), Parameter(np.zeros(3))
    opt = optim.Adam([a, b])
    with pytest.raises(ValueError, match=r"saved groups hold \[1\] parameters"):
        opt.load_state_dict(optim.Adam([a]).state_dict())


# ------------------------------------------------------------------ schedulers

def _lrs(make, n, lr=0.1, groups=1):
    ps = [Parameter(np.zeros(1)) for _ in range(groups)]
    opt = optim.SGD([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(ps)], lr=lr,
                    momentum=0.9)
    s = make(opt)
    out = []
    for _ in range(n):
        out.append([g["lr"] for g in opt.param_groups])
        assert s.get_last_lr() == out[-1]
        opt.step()
        s.step()
    return np.array(out), opt


def test_step_and_multistep_lr():
    got, _ = _lrs(lambda o: sched.StepLR(o, step_size=3, gamma=0.5), 8)
    np.testing.assert_allclose(got[:, 0], [0.1] * 3 + [0.05] * 3 + [0.025] * 2, rtol=1e-15)
    got, _ = _lrs(lambda o: sched.MultiStepLR(o, milestones=[5, 2], gamma=0.1), 7, groups=2)
    np.testing.assert_allclose(got[:, 1], [0.2, 0.2, 0.02, 0.02, 0.02, 0.002, 0.002], rtol=1e-12)


def test_cosine_annealing_lr():
    got, _ = _lrs(lambda o: sched.CosineAnnealingLR(o, T_max=6, eta_min=0.01), 7)
    e = np.arange(7)
    np.testing.assert_allclose(got[:, 0], 0.01 + 0.09 * (1 + np.cos(np.pi * e / 6)) / 2, rtol=1e-12)
    assert got[6, 0] == pytest.approx(0.01)


def test_lambda_and_linear_warmup_and_sequential():
    got, _ = _lrs(lambda o: sched.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1.0 / (e + 1)]), 5,
                  groups=2)
    np.testing.assert_allclose(got[:, 0], 0.1 * 0.9 ** np.arange(5), rtol=1e-12)
    np.testing.assert_allclose(got[:, 1], 0.2 / (np.arange(5) + 1), rtol=1e-12)
    got, _ = _lrs(lambda o: sched.LinearLR(o, start_factor=0.25, total_iters=4), 6)
    np.testing.assert_allclose(got[:, 0], 0.1 * np.array([0.25, 0.4375, 0.625, 0.8125, 1, 1]),
                               rtol=1e-12)

    def warm_then_cos(o):
        return sched.SequentialLR(o, [sched.LinearLR(o, start_factor=0.5, total_iters=2),
                                      sched.CosineAnnealingLR(o, T_max=4)], milestones=[2])
    got, _ = _lrs(warm_then_cos, 7)
    cos = 0.1 * (1 + np.cos(np.pi * np.arange(5) / 4)) / 2
    np.testing.assert_allclose(got[:, 0], np.concatenate([[0.05, 0.075], cos]), rtol=1e-12,
                               atol=1e-15)


@pytest.mark.parametrize("three_phase", [False, True])
@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_one_cycle_lr(three_phase, strategy):
    T, max_lr = 10, 1.0
    got, opt = _lrs(lambda o: sched.OneCycleLR(o, max_lr=max_lr, total_steps=T,
                                               anneal_strategy=strategy, three_phase=three_phase),
                    T)
    init_lr, min_lr = max_lr / 25, max_lr / 25 / 1e4

    def ann(a, b, pct):
        return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1) if strategy == "cos" else a + (b - a) * pct
    ref = []
    for e in range(T):
        if three_phase:         # phase ends 2, 4, 9
            ref.append(ann(init_lr, max_lr, e / 2) if e <= 2 else
                       ann(max_lr, init_lr, (e - 2) / 2) if e <= 4 else
                       ann(init_lr, min_lr, (e - 4) / 5))
        else:                   # phase ends 2, 9
            ref.append(ann(init_lr, max_lr, e / 2) if e <= 2 else ann(max_lr, min_lr, (e - 2) / 7))
    np.testing.assert_allclose(got[:, 0], ref, rtol=1e-12)
    assert got[T - 1, 0] == pytest.approx(min_lr)
    # momentum cycles opposite to lr; _lrs left the scheduler at epoch T (allowed, as torch)
    mom = 0.95 if three_phase else ann(0.85, 0.95, (T - 2) / 7)
    assert opt.param_groups[0]["momentum"] == pytest.approx(mom, rel=1e-12)
    with pytest.raises(ValueError, match="tried to step 11 times, total_steps is 10"):
        s = sched.OneCycleLR(optim.SGD([Parameter(np.zeros(1))], lr=0.1), max_lr=1.0, total_steps=10)
        for _ in range(11):
            s.step()


def test_one_cycle_cycles_adam_beta1():
    opt = optim.Adam([Parameter(np.zeros(1))], lr=0.1)
    s = sched.OneCycleLR(opt, max_lr=0.5, total_steps=4, pct_start=0.5)
    assert opt.param_groups[0]["betas"] == (0.95, 0.999)
    s.step()
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.85)   # phase 1 ends at step 1
    assert opt.param_groups[0]["lr"] == pytest.approx(0.5)


def test_scheduler_state_dict_roundtrip():
    _, opt = _lrs(lambda o: sched.StepLR(o, step_size=2), 1)
    s = sched.CosineAnnealingLR(opt, T_max=10)
    for _ in range(3):
        s.step()
    sd = s.state_dict()
    assert sd["last_epoch"] == 3 and "optimizer" not in sd
    s2 = sched.CosineAnnealingLR(opt, T_max=10)
    s2.load_state_dict(sd)
    s.step()
    s2.step()
    assert s.get_last_lr() == s2.get_last_lr()


# ------------------------------------------------------------------ clip_grad_norm_

@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0])
def test_clip_grad_norm_matches_numpy(norm_type):
    rng = np.random.default_rng(4)
    ps = [Parameter(np.zeros(s)) for s in [(3, 4), (5,), (1,)]]
    gs = [rng.normal(size=p.shape).astype(np.float32) for p in ps]
    _set_grads(ps, gs)
    flat = np.concatenate([g.reshape(-1) for g in gs]).astype(np.float64)
    ref = np.max(np.abs(flat)) if math.isinf(norm_type) else np.sum(np.abs(flat) ** norm_type) ** (1 / norm_type)
    total = nn.utils.clip_grad_norm_(ps, max_norm=0.5, norm_type=norm_type)
    assert isinstance(total, float)
    assert total == pytest.approx(ref, rel=2e-5)
    coef = 0.5 / (ref + 1e-6)
    for p, g in zip(ps, gs):
        np.testing.assert_allclose(p.grad, g * coef, rtol=2e-5, atol=1e-7)
    clipped = [p.grad.numpy().astype(np.float64).reshape(-1) for p in ps]
    new = np.concatenate(clipped)
    new_norm = np.max(np.abs(new)) if math.isinf(norm_type) else np.sum(np.abs(new) ** norm_type) ** (1 / norm_type)
    assert new_norm == pytest.approx(0.5, rel=1e-4)


def test_clip_grad_norm_below_max_leaves_grads_untouched_and_errors():
    p = Parameter(np.zeros(3))
    g = np.array([0.1, -0.2, 0.05], np.float32)
    _set_grads([p], [g])
    before = p.grad
    total = nn.utils.clip_grad_norm_(p, max_norm=10.0)
    assert total == pytest.approx(np.linalg.norm(g.astype(np.float64)), rel=1e-6)
    np.testing.assert_array_equal(p.grad, before)
    assert nn.utils.clip_grad_norm_([Parameter(np.zeros(2))], 1.0) == 0.0   # no gradients
    with pytest.raises(ValueError, match="max_norm must be finite"):
        nn.utils.clip_grad_norm_(p, float("nan"))
    q = Parameter(np.zeros(2))
    _set_grads([q], [np.array([np.inf, 1.0], np.float32)])
    with pytest.raises(RuntimeError, match="total norm of order 2.0 of the gradients is inf"):
        nn.utils.clip_grad_norm_(q, 1.0, error_if_nonfinite=True)
    nn.utils.clip_grad_value_([p], 0.15)
    np.testing.assert_allclose(p.grad, [0.1, -0.15, 0.05], rtol=1e-6)


# ------------------------------------------------------------------ RNG state

def test_rng_state_replays_draws_and_initialisers():
    manual_seed(11)
    init.normal((3,))
    st = tl.get_rng_state()
    assert st.dtype == np.uint64 and st.tolist() == [11, 1]
    a = init.normal((4, 2))
    s = Session()
    u = s.rand_uniform((5,)).numpy()
    tl.set_rng_state(st)
    np.testing.assert_array_equal(init.normal((4, 2)), a)
    np.testing.assert_array_equal(s.rand_uniform((5,)).numpy(), u)
    with pytest.raises(ValueError, match=r"set_rng_state: expected the integer array of shape \(2,\)"):
        tl.set_rng_state(np.zeros(3, np.uint64))
    with pytest.raises(ValueError, match="must be >= 0"):
        tl.set_rng_state(np.array([-1, 0]))


# ------------------------------------------------------------------ DataLoader

def test_dataloader_batches_shuffle_drop_last():
    x = np.arange(23 * 2, dtype=np.float32).reshape(23, 2)
    y = np.arange(23)
    dl = DataLoader((x, y), batch_size=5)
    batches = list(dl)
    assert len(dl) == 5 and [len(b[1]) for b in batches] == [5, 5, 5, 5, 3]
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), x)
    dl = DataLoader(TensorDataset(x, y), batch_size=5, shuffle=True, drop_last=True, seed=3)
    e1, e2 = list(dl), list(dl)
    assert len(dl) == 4 and len(e1) == 4 and all(len(b[1]) == 5 for b in e1)
    ids = np.concatenate([b[1] for b in e1])
    assert len(set(ids.tolist())) == 20 and not np.array_equal(ids, np.arange(20))
    for xb, yb in e1:
        np.testing.assert_array_equal(xb, x[yb])        # rows stay paired
    assert not np.array_equal(ids, np.concatenate([b[1] for b in e2]))   # new epoch, new order
    again = list(DataLoader(TensorDataset(x, y), batch_size=5, shuffle=True, drop_last=True, seed=3))
    for a, b in zip(e1, again):
        np.testing.assert_array_equal(a[1], b[1])
    perm = np.random.default_rng(3).permutation(23)[:5]
    np.testing.assert_array_equal(e1[0][1], perm)


def test_dataloader_single_array_tensors_and_custom_dataset():
    x = np.linspace(0, 1, 7).astype(np.float32)
    s = Session()
    out = list(DataLoader(x, batch_size=4, as_tensor=True, session=s))
    assert isinstance(out[0], tl.Tensor) and out[0].shape == (4,) and out[1].shape == (3,)
    np.testing.assert_array_equal(out[1].numpy(), x[4:])

    class Squares:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return np.array([i, i * i], np.float32), i
    (a, b), = list(DataLoader(Squares(), batch_size=8))
    np.testing.assert_array_equal(a[:, 1], np.arange(5) ** 2)
    np.testing.assert_array_equal(b, np.arange(5))
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        DataLoader(x, batch_size=0)
    with pytest.raises(ValueError, match=r"share their first axis, got shapes \[\(7,\), \(3,\)\]"):
        TensorDataset(x, np.zeros(3))
