"""PyTorch-style lifetimes without Session.step(): a Tensor lives while Python references it,
and loops that never scope anything keep a fixed number of buffers and tape records."""
import gc

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn, optim


def _records(s):
    return len(dict.keys(s.tape.nodes))   # real node records, not ids handed out


def _model():
    tl.manual_seed(3)
    return nn.Sequential(nn.Linear(7, 9), nn.ReLU(), nn.Linear(9, 3))


def _flat(loop, n=40):
    """live buffers and records after n//2 and after n iterations of loop(i)"""
    out = []
    for i in range(n):
        loop(i)
        if i + 1 in (n // 2, n):
            gc.collect()
            out.append((tl.memory_stats()["live_buffers"],
                        _records(tl.session.default_session())))
    return out


def test_inference_loop_under_no_grad_keeps_no_upload():
    m = _model()
    x = np.random.default_rng(0).normal(size=(5, 7))
    outs = []

    def loop(i):
        with tl.no_grad():
            outs.append(m(tl.tensor(x)).sum().item())
    a, b = _flat(loop)
    assert a == b, (a, b)
    assert len(set(outs)) == 1


def test_forward_without_backward_frees_its_graph():
    """A graph no Tensor can reach any more is freed whole, saved values included."""
    m = _model()
    x = np.random.default_rng(1).normal(size=(5, 7))
    a, b = _flat(lambda i: m(tl.tensor(x)))
    assert a == b, (a, b)


def test_training_loop_needs_no_session_and_stays_flat():
    m = _model()
    opt = optim.SGD(m.parameters(), lr=0.1)
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(6, 7)), rng.integers(0, 3, 6)
    first = []

    def loop(i):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(tl.tensor(x)), y)
        loss.backward()
        opt.step()
        if i == 0:
            first.append(loss)        # a Tensor kept from step 0 (logging) stays readable
    a, b = _flat(loop)
    assert a == b, (a, b)
    later = nn.functional.cross_entropy(m(tl.tensor(x)), y).item()
    assert later < first[0].item() and np.isfinite(first[0].item())


def test_detach_and_handed_out_values_in_a_loop_stay_flat():
    m = _model()
    x = np.random.default_rng(3).normal(size=(4, 7))
    kept = []

    def loop(i):
        out = m(tl.tensor(x))
        d = out.detach()
        buf = out.value
        del out
        kept[:] = [d, buf]            # only the last iteration's are referenced
    a, b = _flat(loop)
    assert a == b, (a, b)
    d, buf = kept
    np.testing.assert_array_equal(d.numpy(), buf.to_numpy())


def test_value_handed_out_outlives_the_graph_and_dies_with_its_holder():
    w = tl.tensor(np.full((3, 3), 2.0, np.float32), requires_grad=True)
    h = (tl.tensor(np.ones((2, 3), np.float32)) @ w).reshape(3, 2)   # a view of the matmul
    buf = h.value
    del h, w
    gc.collect()
    np.testing.assert_array_equal(buf.to_numpy(), np.full((3, 2), 6.0))
    before = tl.memory_stats()["live_buffers"]
    del buf
    gc.collect()
    assert tl.memory_stats()["live_buffers"] == before - 1


def test_a_graph_still_reachable_keeps_what_its_backward_needs():
    """Dropping intermediate Tensors must not free what a later backward reads."""
    x = tl.tensor(np.array([0.5, -1.5, 2.0], np.float32), requires_grad=True)
    y = (x * x).exp()
    z = y.sum()
    del y
    gc.collect()
    z.backward()
    xv = np.array([0.5, -1.5, 2.0])
    np.testing.assert_allclose(x.grad, 2 * xv * np.exp(xv * xv), rtol=1e-6)


def test_shared_subgraph_survives_one_branch_dying():
    x = tl.tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
    h = x.sigmoid()
    a = (h * 3.0).sum()
    b = (h * h).sum()
    del a, h
    gc.collect()
    b.backward()
    sv = 1 / (1 + np.exp(-np.array([1.0, 2.0, 3.0])))
    np.testing.assert_allclose(x.grad, 2 * sv * sv * (1 - sv), rtol=1e-6)


def test_session_step_still_releases_its_tensors():
    with tl.Session():
        t = tl.tensor(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="released"):
        t.numpy()


@pytest.mark.skipif(tl.backend() != "stub", reason="NumPy producers live in host memory")
def test_dlpack_imports_let_their_producer_go_with_the_tensor():
    import weakref
    freed = []

    class Producer:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    for i in range(3):
        p = Producer(np.arange(4, dtype=np.float32) + i)
        weakref.finalize(p, freed.append, i)
        t = tl.from_dlpack(p)
        del p
        assert (t * 2.0).numpy().tolist() == [2.0 * (k + i) for k in range(4)]
        del t
        gc.collect()
    assert freed == [0, 1, 2]


def test_a_tensor_dying_during_backward_is_let_go_after_it():
    """A hook (or a garbage-collected cycle) may drop the last Tensor on a node whose VJP the
    running backward pass has still to run: the pass must still run it."""
    x = tl.tensor(np.array([0.3, -1.2], np.float32), requires_grad=True)
    p = tl.Parameter(np.array([2.0, 0.5], np.float32))
    held = [x.sigmoid()]                      # recorded before p's leaf: differentiated after it
    z = (held[0] * p).sum()
    p.register_post_accumulate_grad_hook(lambda _: held.clear())
    z.backward()
    sv = 1 / (1 + np.exp(-np.array([0.3, -1.2])))
    np.testing.assert_allclose(x.grad, np.array([2.0, 0.5]) * sv * (1 - sv), rtol=1e-6)
    np.testing.assert_allclose(p.grad, sv, rtol=1e-6)
    assert held == []
