"""Threads: buffer release races, Session ownership, thread-local no_grad, the RNG key counter.

cffi drops the GIL around every native call, so these tests use real threads started together
behind a barrier; before the fixes the release race was a double free (abort) and a shared
Session freed buffers under another thread's kernel.
"""
import gc
import threading

import numpy as np
import pytest

import torchlean as tl
from torchlean.session import Session, Parameter, manual_seed, next_key
from torchlean.random import splitmix64


def _run_threads(n, target):
    """Start n threads on target(k) behind a barrier; re-raise the first failure."""
    barrier = threading.Barrier(n)
    errors = []

    def body(k):
        try:
            barrier.wait()
            target(k)
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            errors.append(e)

    ts = [threading.Thread(target=body, args=(k,), name=f"worker-{k}") for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def test_concurrent_release_frees_each_buffer_once():
    gc.collect()   # earlier tests' garbage (storages in reference cycles) goes now, not below
    gc.disable()
    try:
        _release_race()
    finally:
        gc.enable()


def _release_race():
    before = tl.memory_stats()
    bufs = [tl.Buffer.from_numpy(np.full(257, float(i))) for i in range(3000)]
    results = [[0] * len(bufs) for _ in range(4)]

    def release_all(k):
        order = bufs if k % 2 == 0 else bufs[::-1]
        idx = range(len(bufs)) if k % 2 == 0 else range(len(bufs) - 1, -1, -1)
        for i, b in zip(idx, order):
            results[k][i] = tl._lib.tl_buf_release(b.handle)

    _run_threads(4, release_all)
    # exactly one thread freed each payload
    assert [sum(r[i] for r in results) for i in range(len(bufs))] == [1] * len(bufs)
    after = tl.memory_stats()
    assert after["frees"] - before["frees"] == len(bufs)
    assert after["live_bytes"] == before["live_bytes"]


def test_session_used_from_a_second_thread_raises_naming_both_threads():
    s = Session()
    x = s.tensor(np.arange(3.0))
    seen = []

    def use(_):
        for f in (lambda: s.tensor(np.ones(2)), lambda: x + x, lambda: x.numpy(),
                  lambda: s.step(), lambda: s.op("relu", x)):
            with pytest.raises(RuntimeError) as e:
                f()
            seen.append(str(e.value))

    _run_threads(1, use)
    assert len(seen) == 5
    me = threading.current_thread().name
    for msg in seen:
        assert "Session" in msg and repr(me) in msg and "'worker-0'" in msg
    np.testing.assert_array_equal((x + x).numpy(), [0.0, 2.0, 4.0])  # owner still works


def test_threads_with_their_own_sessions_train_independently():
    rng = np.random.default_rng(3)
    W0 = rng.normal(size=(5, 7))
    X = [rng.normal(size=(9, 7)) for _ in range(4)]
    out = [None] * 4

    def train(k):
        s = Session()
        p = Parameter(W0)
        for _ in range(20):
            y = s.tensor(X[k]) @ s.op("transpose2d", s.use(p))
            loss = (y * y).sum()
            loss.backward()
            p.set(p.data - 0.001 * p.grad)
            p.zero_grad()
            s.step()
        out[k] = p.numpy().astype(np.float64)

    _run_threads(4, train)
    for k in range(4):   # float64 reference of the same 20 gradient steps
        W = W0.copy()
        for _ in range(20):
            W = W - 0.001 * 2.0 * (X[k] @ W.T).T @ X[k]
        np.testing.assert_allclose(out[k], W, rtol=2e-4, atol=2e-5)


def test_default_session_is_per_thread():
    got = []
    _run_threads(3, lambda k: got.append(tl.session.default_session()))
    assert len({id(s) for s in got}) == 3
    assert tl.session.default_session() not in got


def test_no_grad_is_thread_local():
    inside, release, results = threading.Event(), threading.Event(), {}

    def evaluator():
        with tl.no_grad():
            inside.set()
            release.wait(10)
            results["eval"] = tl.is_grad_enabled()

    t = threading.Thread(target=evaluator)
    t.start()
    inside.wait(10)
    # the other thread sits in no_grad: this one still records gradients
    s = Session()
    p = Parameter(np.array([1.0, -2.0, 3.0]))
    loss = (s.use(p) * s.use(p)).sum()
    results["train"] = tl.is_grad_enabled()
    loss.backward()
    release.set()
    t.join()
    assert results == {"eval": False, "train": True}
    np.testing.assert_allclose(p.grad, [2.0, -4.0, 6.0])
    assert tl.is_grad_enabled()


def test_overlapping_no_grad_blocks_in_threads_restore_grad_mode():
    def body(k):
        for _ in range(200):
            with tl.no_grad():
                assert not tl.is_grad_enabled()
                with tl.no_grad():
                    assert not tl.is_grad_enabled()
            assert tl.is_grad_enabled()

    _run_threads(4, body)
    assert tl.is_grad_enabled()


def test_no_grad_nests_with_one_instance_and_works_as_decorator():
    ng = tl.no_grad()
    with ng:
        with ng:
            assert not tl.is_grad_enabled()
        assert not tl.is_grad_enabled()
    assert tl.is_grad_enabled()

    @tl.no_grad()
    def evaluate(s, p):
        """docstring kept"""
        return (s.use(p) * 2.0).sum(), tl.is_grad_enabled()

    s = Session()
    p = Parameter(np.ones(3))
    y, mode = evaluate(s, p)
    assert mode is False and tl.is_grad_enabled()
    assert evaluate.__doc__ == "docstring kept"
    assert not y.requires_grad
    with pytest.raises(RuntimeError, match="no leaf requires a gradient"):
        y.backward()


def test_rng_key_counter_is_thread_safe():
    manual_seed(1234)
    keys = [[] for _ in range(4)]

    def draw(k):
        for _ in range(2000):
            keys[k].append(next_key())

    _run_threads(4, draw)
    got = sorted(k for ks in keys for k in ks)
    expect = sorted(splitmix64(1234 + c) for c in range(8000))
    assert got == expect


def _shared_model_step(s, model, opt, x, y):
    opt.zero_grad()
    loss = ((model(s.tensor(x)) - s.tensor(y)) ** 2).sum()
    loss.backward()
    opt.step()
    s.step()


def test_two_threads_training_one_model_raise_instead_of_freeing_each_others_buffers():
    """Each thread has its own Session and optimizer, the model is shared: backward and the
    optimizer replace and free the parameters' gradient buffers, so the second thread to train
    it while the first one's Session holds it raises (ASan saw a use-after-free in adam_step)."""
    rng = np.random.default_rng(11)
    model = tl.nn.Linear(6, 3)
    w0, b0 = model.weight.numpy(), model.bias.numpy()
    x, y = rng.normal(size=(5, 6)), rng.normal(size=(5, 3))
    started, done = threading.Event(), threading.Event()
    outcome = {}

    def trainer(k):
        s = Session()
        opt = tl.optim.SGD(model.parameters(), lr=0.01)
        try:
            if k == 1:
                started.wait(10)          # the other thread trains (and holds) the model
            loss = ((model(s.tensor(x)) - s.tensor(y)) ** 2).sum()
            if k == 0:
                started.set()
                done.wait(10)             # keep this Session's graph alive meanwhile
            opt.zero_grad()
            loss.backward()
            opt.step()
            outcome[k] = "trained"
        except RuntimeError as e:
            outcome[k] = str(e)
        finally:
            if k == 1:
                done.set()

    _run_threads(2, trainer)
    assert outcome[0] == "trained"
    msg = outcome[1]
    for part in ("Parameter", "of shape (3, 6)", "'worker-0'", "'worker-1'", "one thread at a time"):
        assert part in msg
    # the model took exactly one SGD step of the first thread: d/dW sum (xW^T + b - y)^2
    r = x @ w0.T.astype(np.float64) + b0 - y
    np.testing.assert_allclose(model.weight.numpy(), w0 - 0.01 * 2 * r.T @ x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.bias.numpy(), b0 - 0.01 * 2 * r.sum(0), rtol=1e-5, atol=1e-6)


def test_a_model_passes_to_another_thread_after_step_or_with_its_session():
    rng = np.random.default_rng(12)
    model = tl.nn.Linear(4, 2)
    x, y = rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    s = Session()
    opt = tl.optim.SGD(model.parameters(), lr=0.01)
    loss = ((model(s.tensor(x)) - s.tensor(y)) ** 2).sum()
    loss.backward()
    opt.step()

    def other_thread_evaluates_then_trains(k):
        t = Session()
        with tl.no_grad():           # reading the model under no_grad never conflicts
            t.use(model.weight)
        _shared_model_step(t, model, tl.optim.SGD(model.parameters(), lr=0.01), x, y)

    with pytest.raises(RuntimeError, match="one thread at a time"):
        _run_threads(1, other_thread_evaluates_then_trains)
    s.step()                         # this thread's Session lets go of the model
    _run_threads(1, other_thread_evaluates_then_trains)
    # this thread trains again (the worker's Session and thread are gone), in a Session that
    # is dropped without step(): a Session that is gone holds nothing either
    def train_without_step():
        t = Session()
        ((model(t.tensor(x)) - t.tensor(y)) ** 2).sum().backward()
        opt.step()

    train_without_step()
    _run_threads(1, other_thread_evaluates_then_trains)


def test_zero_grad_and_step_from_another_thread_raise_while_the_model_is_trained():
    rng = np.random.default_rng(13)
    model = tl.nn.Linear(3, 2)
    x, y = rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    _shared_model_step(Session(), model, tl.optim.SGD(model.parameters(), lr=0.01), x, y)
    holding, done = threading.Event(), threading.Event()
    seen = []

    def body(k):
        if k == 0:        # trains and keeps its Session's graph (and claim) alive
            s = Session()
            ((model(s.tensor(x)) - s.tensor(y)) ** 2).sum().backward()
            holding.set()
            done.wait(10)
            s.step()
            return
        holding.wait(10)
        opt = tl.optim.SGD(model.parameters(), lr=0.01)
        for f in (opt.zero_grad, opt.step):
            with pytest.raises(RuntimeError) as e:
                f()
            seen.append(str(e.value))
        done.set()

    _run_threads(2, body)
    assert seen[0].startswith("zero_grad: Parameter") and seen[1].startswith("SGD.step: Parameter")
    assert all("'worker-0'" in m and "'worker-1'" in m for m in seen)


def test_two_threads_racing_on_one_model_never_crash():
    """Both threads run full training loops on one model: every conflict is the RuntimeError,
    never a freed buffer read (run under `make sanitize`, ASan checks the native side)."""
    rng = np.random.default_rng(14)
    model = tl.nn.Linear(8, 4)
    x, y = rng.normal(size=(6, 8)), rng.normal(size=(6, 4))
    stopped = []

    def train(k):
        opt = tl.optim.Adam(model.parameters(), lr=0.01)
        s = Session()
        for _ in range(30):
            try:
                _shared_model_step(s, model, opt, x, y)
            except RuntimeError as e:
                assert "one thread at a time" in str(e)
                stopped.append(k)
                s.step()
                return

    _run_threads(2, train)
    assert np.all(np.isfinite(model.weight.numpy())) and np.all(np.isfinite(model.bias.numpy()))
