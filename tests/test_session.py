import numpy as np
import pytest

import torchlean as tl
from torchlean.session import Session, Parameter, manual_seed
from torchlean.random import splitmix64, next_key, uniform
from torchlean import optim


def test_autograd_through_tensor_ops():
    s = Session()
    p = Parameter(np.ones((2, 3)))
    x = s.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = ((s.use(p) * x).relu() + 1.0 - x).sum()
    y.backward()
    assert y.item() == pytest.approx(6.0)
    np.testing.assert_allclose(p.grad, np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(x.grad, [[-1, 0, 0], [0, 0, 0]])
    s.step()


def test_stale_tensor_and_cross_session_errors():
    s, s2 = Session(), Session()
    a = s.tensor(np.ones(3))
    b = s2.tensor(np.ones(3))
    with pytest.raises(ValueError, match="different sessions"):
        a + b
    s.step()
    with pytest.raises(ValueError, match="released"):
        a.numpy()


def test_parameter_storage_is_written_in_place():
    # one storage for the Parameter's life: set_mirror and set copy into it, never release it
    p = Parameter(np.zeros(4))
    m = p.mirror()
    p.set_mirror(tl.AnyBuffer.from_numpy(np.full(4, 2.0)))
    assert m.live and p.mirror() is m
    np.testing.assert_array_equal(m.to_numpy(), np.full(4, 2.0, np.float32))
    np.testing.assert_array_equal(p.data, np.full(4, 2.0, np.float32))
    p.set(np.ones(4))
    assert p.mirror() is m
    np.testing.assert_array_equal(m.to_numpy(), np.ones(4, np.float32))


def test_rng_matches_design():
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    u = uniform(1000, 123)
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1
    manual_seed(5)
    k1 = next_key()
    manual_seed(5)
    assert next_key() == k1 and next_key() != k1


def _train(opt_cls, steps, **kw):
    """Minimise sum((w - t)^2) (only add/mul/sum needed); converges to w = t."""
    w = Parameter(np.zeros(3))
    t = np.array([1.0, -2.0, 0.5], np.float32)
    opt = opt_cls([w], **kw)
    s = Session()
    losses = []
    for _ in range(steps):
        d = s.use(w) - s.tensor(t)
        loss = (d * d).sum()
        opt.zero_grad()
        loss.backward()
        losses.append(loss.item())
        opt.step()
        s.step()
    return losses, w


@pytest.mark.parametrize("cls,kw", [(optim.SGD, dict(lr=0.05)),
                                    (optim.SGD, dict(lr=0.02, momentum=0.9, nesterov=True)),
                                    (optim.SGD, dict(lr=0.02, momentum=0.9, weight_decay=1e-3)),
                                    (optim.Adam, dict(lr=0.05)),
                                    (optim.AdamW, dict(lr=0.05))])
def test_optimizers_decrease_loss(cls, kw):
    losses, _ = _train(cls, 100, **kw)
    assert losses[-1] < 0.5 * losses[0]


def test_memory_flat_over_10000_steps():
    w = Parameter(np.full((4,), 0.5))
    opt = optim.SGD([w], lr=1e-3, momentum=0.9)
    s = Session()
    x = np.linspace(-1, 1, 4)
    stats = []
    for i in range(10000):
        loss = ((s.tensor(x) * s.use(w)).relu() * 2.0).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        s.step()
        if i in (100, 9999):
            st = tl.memory_stats()
            stats.append((st["live_buffers"], st["live_bytes"]))
    assert stats[0] == stats[1]


def test_sgd_matches_closed_form():
    losses, w = _train(optim.SGD, 1, lr=0.1)
    # one step from 0: w = 0 - 0.1 * 2 * (0 - t) = 0.2 t
    np.testing.assert_allclose(w.data, [0.2, -0.4, 0.1], rtol=1e-6)


def test_optimizer_state_dict_roundtrip():
    w = Parameter(np.zeros(3))
    opt = optim.Adam([w], lr=0.1)
    s = Session()
    (s.use(w) * s.use(w) + s.use(w)).sum().backward()
    opt.step()
    sd = opt.state_dict()
    opt2 = optim.Adam([w], lr=0.1)
    opt2.load_state_dict(sd)
    np.testing.assert_array_equal(opt2.state_dict()["state"][0]["m"], sd["state"][0]["m"])
    assert opt2.state_dict()["state"][0]["step"] == 1


def test_dropped_intermediates_free_their_memory_like_pytorch():
    """When the last Tensor on an op result goes away and no VJP saved it, its buffer is freed
    at once (relu saves its output, so the matmul result before it is not kept); values a VJP
    needs, leaves and views' parents stay until Session.step()."""
    import gc
    s = tl.Session()
    w = s.tensor(np.ones((64, 64)), requires_grad=True)
    x = s.tensor(np.ones((8, 64)))
    gc.collect()                 # earlier tests' garbage must not be freed inside the window
    before = tl.memory_stats()["live_bytes"]
    h = (x @ w).relu()           # x @ w is an intermediate nobody keeps
    gc.collect()
    kept = tl.memory_stats()["live_bytes"] - before
    assert kept == 8 * 64 * 4, kept  # only relu's output
    r = h.reshape(64, 8)          # a view pins h's buffer even after h is dropped
    del h
    gc.collect()
    assert tl.memory_stats()["live_bytes"] - before == 8 * 64 * 4
    loss = r.sum()
    loss.backward()
    np.testing.assert_allclose(w.grad, np.full((64, 64), 8.0))
    s.step()


def test_buffers_handed_out_outlive_their_tensor():
    """detach() and .value hand out the node's buffer: dropping the Tensor afterwards must not
    free memory that the detached tensor or the caller still reads."""
    import gc
    s = tl.Session()
    w = s.tensor(np.full((4, 4), 2.0), requires_grad=True)
    x = s.tensor(np.ones((3, 4)))
    y = x @ w
    d = y.detach()
    buf = (x @ w).value
    del y
    gc.collect()
    np.testing.assert_allclose(d.numpy(), np.full((3, 4), 8.0))
    np.testing.assert_allclose(buf.to_numpy(), np.full((3, 4), 8.0))
    s.step()


def test_a_loop_without_step_keeps_a_bounded_number_of_node_records():
    """After backward() frees the graph, nodes nothing can read are forgotten (one shared
    placeholder per slot), so a PyTorch-shaped loop that never calls step() holds a fixed number
    of real node records, not one per op ever recorded."""
    from torchlean import nn, optim
    m = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = optim.SGD(m.parameters(), lr=0.05)
    s = tl.Session()
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(5, 6)), rng.integers(0, 3, 5)

    def live_records():
        t = s.tape
        return sum(1 for i in range(len(t.nodes)) if not t.is_forgotten(i))

    counts, losses = [], []
    for step in range(60):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(s.tensor(x)), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step in (19, 59):
            counts.append(live_records())
    assert len(s.tape.nodes) > 60 * 5            # every op was recorded...
    assert counts[0] == counts[1] < 40, counts   # ...but the real records stay bounded
    assert losses[-1] < losses[0]                # and training still works
