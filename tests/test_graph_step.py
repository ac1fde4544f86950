"""torchlean.cuda.graph_step: a captured and replayed training step equals the eager step bit
for bit (deterministic and exact modes, dropout, Adam and SGD, BatchNorm, integer inputs), and
what a replay cannot honour (a host read, a host draw, a replaced parameter, a new shape, a
changed param group, labels outside the captured range) raises or captures again. On the stub
graph_step runs the step eagerly: the same numbers as the plain loop."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn, optim
from torchlean.cuda import graph_step
from torchlean.session import Session

cuda = pytest.mark.cuda


@pytest.fixture
def mode(request):
    """Run under deterministic or exact mode, restoring the flags afterwards."""
    det, ex = tl.is_deterministic(), tl.is_exact()
    name = getattr(request, "param", "deterministic")
    if name == "exact":
        tl.set_exact(True)
    else:
        tl.set_deterministic(True)
    yield name
    tl.set_exact(ex)
    tl.set_deterministic(det)


def _mlp(seed, dropout=0.25, bn=False):
    tl.manual_seed(seed)
    layers = [nn.Linear(13, 31)]
    if bn:
        layers.append(nn.BatchNorm1d(31))
    layers += [nn.ReLU(), nn.Dropout(dropout), nn.Linear(31, 5)]
    return nn.Sequential(*layers)


def _lm(seed, vocab=37, d=16, t=7):
    tl.manual_seed(seed)
    return nn.Sequential(nn.Embedding(vocab, d), nn.LayerNorm(d), nn.Dropout(0.1),
                         nn.Linear(d, vocab))


def _make_step(model, opt, lm=False):
    def step(x, y):
        opt.zero_grad()
        out = model(x)
        if lm:
            out = out.reshape(-1, out.shape[-1])
            y = y.reshape(-1)
        loss = nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss
    return step


def _batches(n, rows=9, lm=False, vocab=37, t=7, seed=3):
    rng = np.random.default_rng(seed)
    if lm:
        return [(rng.integers(0, vocab, (rows, t)), rng.integers(0, vocab, (rows, t)))
                for _ in range(n)]
    return [(rng.standard_normal((rows, 13)).astype(np.float32), rng.integers(0, 5, rows))
            for _ in range(n)]


def _eager_run(build, make_opt, batches, lm=False, seed=0):
    """The plain eager loop: losses (float32 bits), parameters and the RNG state after it."""
    model = build(seed)
    opt = make_opt(model)
    step = _make_step(model, opt, lm)
    s = Session()
    losses = []
    for x, y in batches:
        with s:
            xin = x if lm else s.tensor(x)
            losses.append(np.float32(step(xin, y).item()))
    return np.array(losses), [p.numpy().copy() for p in model.parameters()], \
        tl.random.get_rng_state()


def _graph_run(build, make_opt, batches, lm=False, seed=0):
    model = build(seed)
    opt = make_opt(model)
    step = graph_step(_make_step(model, opt, lm))
    losses = [np.float32(step(x, y).item()) for x, y in batches]
    return np.array(losses), [p.numpy().copy() for p in model.parameters()], \
        tl.random.get_rng_state(), step


def _same_bits(a, b):
    return np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


def _assert_runs_equal(ref, got):
    assert _same_bits(ref[0], got[0]), (ref[0], got[0])
    assert len(ref[1]) == len(got[1])
    for a, b in zip(ref[1], got[1]):
        assert _same_bits(a, b), np.max(np.abs(a - b))
    assert np.array_equal(ref[2], got[2])   # the host RNG stream advanced as eagerly


ADAM = (lambda m: optim.Adam(m.parameters(), lr=3e-3))
SGDM = (lambda m: optim.SGD(m.parameters(), lr=0.05, momentum=0.9))


# ------------------------------------------------------------------------- CUDA: replay = eager
@cuda
@pytest.mark.parametrize("mode", ["deterministic", "exact"], indirect=True)
@pytest.mark.parametrize("make_opt", [ADAM, SGDM], ids=["adam", "sgd_momentum"])
def test_replay_equals_eager_mlp_dropout(mode, make_opt):
    batches = _batches(7)
    ref = _eager_run(_mlp, make_opt, batches)
    got = _graph_run(_mlp, make_opt, batches)
    assert got[3].captures == 1, got[3].recapture_reason   # warm-up, one capture, replays
    _assert_runs_equal(ref, got[:3])
    assert len(set(got[0].tolist())) == len(got[0])   # the steps really differ


@cuda
@pytest.mark.parametrize("mode", ["deterministic", "exact"], indirect=True)
def test_replay_equals_eager_batchnorm_running_stats(mode):
    build = lambda seed: _mlp(seed, bn=True)   # noqa: E731
    batches = _batches(6)
    ref_model = build(0)
    opt = SGDM(ref_model)
    step = _make_step(ref_model, opt)
    s = Session()
    for x, y in batches:
        with s:
            step(s.tensor(x), y).item()
    model = build(0)
    gstep = graph_step(_make_step(model, SGDM(model)))
    for x, y in batches:
        gstep(x, y)
    tl.synchronize()
    bn_ref, bn = ref_model[1], model[1]
    assert _same_bits(bn_ref.running_mean.numpy(), bn.running_mean.numpy())
    assert _same_bits(bn_ref.running_var.numpy(), bn.running_var.numpy())


@cuda
@pytest.mark.parametrize("mode", ["deterministic", "exact"], indirect=True)
def test_replay_equals_eager_embedding_lm(mode):
    batches = _batches(6, rows=5, lm=True)
    ref = _eager_run(_lm, ADAM, batches, lm=True)
    got = _graph_run(_lm, ADAM, batches, lm=True)
    # the embedding's deterministic backward plans its scatter on the host from the token
    # values, so new tokens mean a new capture here (default mode replays: the test below)
    assert got[3].captures >= 1
    _assert_runs_equal(ref, got[:3])


@cuda
def test_lm_replays_new_tokens_without_capturing_again():
    batches = _batches(6, rows=5, lm=True)
    ref = _eager_run(_lm, ADAM, batches, lm=True)
    got = _graph_run(_lm, ADAM, batches, lm=True)
    assert got[3].captures == 1, got[3].recapture_reason   # new tokens: the same graph
    np.testing.assert_allclose(ref[0], got[0], rtol=1e-4, atol=1e-5)


@cuda
def test_dropout_masks_differ_per_replay_and_follow_the_stream(mode):
    tl.manual_seed(5)

    @graph_step
    def masks(x):
        return nn.functional.dropout(x, 0.5, True) * 1.0

    x = np.ones((3, 41), np.float32)
    outs = [masks(x).numpy().copy() for _ in range(4)]
    tl.manual_seed(5)
    s = Session()
    want = []
    for _ in range(4):
        with s:
            want.append(nn.functional.dropout(s.tensor(x), 0.5, True).numpy())
    for a, b in zip(outs, want):
        assert _same_bits(a, b)
    assert not np.array_equal(outs[2], outs[3])
    # an eager draw between replays moves the stream; the next replay follows it
    tl.rand(3)
    got = masks(x).numpy()
    tl.manual_seed(5)
    with s:
        for _ in range(4):
            nn.functional.dropout(s.tensor(x), 0.5, True)
        tl.rand(3)
        ref = nn.functional.dropout(s.tensor(x), 0.5, True).numpy()
    assert _same_bits(got, ref)


# ------------------------------------------------------------------------- CUDA: error cases
@cuda
@pytest.mark.parametrize("read, name", [
    (lambda loss: loss.item(), "Tensor.item"),
    (lambda loss: loss.numpy(), "Tensor.numpy"),
    (lambda loss: float(loss), "Tensor.__float__"),
    (lambda loss: tl.synchronize(), "synchronize"),
])
def test_host_read_inside_the_step_raises_naming_the_op(read, name):
    model = _mlp(0)
    opt = ADAM(model)
    inner = _make_step(model, opt)

    @graph_step
    def step(x, y):
        loss = inner(x, y)
        read(loss)
        return loss

    x, y = _batches(1)[0]
    with pytest.raises(RuntimeError, match=name):
        step(x, y)


@cuda
def test_host_random_draw_inside_the_step_raises():
    @graph_step
    def step(x):
        return x * float(tl.randperm(4)[0])

    with pytest.raises(RuntimeError, match="host-side random draw"):
        step(np.ones(3, np.float32))


@cuda
def test_new_shape_captures_again_and_stays_exact(mode):
    sizes = [9, 9, 9, 4, 4, 9]
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((n, 13)).astype(np.float32), rng.integers(0, 5, n))
               for n in sizes]
    ref = _eager_run(_mlp, ADAM, batches)
    got = _graph_run(_mlp, ADAM, batches)
    assert got[3].captures == 3, got[3].recapture_reason
    _assert_runs_equal(ref, got[:3])


@cuda
def test_parameter_written_outside_the_step_replays_without_capturing_again(mode):
    batches = _batches(6)
    new_w = np.full((31, 13), 0.01, np.float32)

    def run(graph):
        model = _mlp(0)
        opt = ADAM(model)
        step = _make_step(model, opt)
        g = graph_step(step) if graph else None
        s = Session()
        losses = []
        for i, (x, y) in enumerate(batches):
            if i == 4:
                model[0].weight.set(new_w)
            if graph:
                losses.append(np.float32(g(x, y).item()))
            else:
                with s:
                    losses.append(np.float32(step(s.tensor(x), y).item()))
        return np.array(losses), g

    ref, _ = run(False)
    got, g = run(True)
    assert _same_bits(ref, got)
    # set() writes into the parameter's one storage, which the captured step reads: no recapture
    assert g.captures == 1


@cuda
def test_param_group_change_captures_again(mode):
    batches = _batches(6)

    def run(graph):
        model = _mlp(0)
        opt = ADAM(model)
        step = _make_step(model, opt)
        g = graph_step(step) if graph else None
        s = Session()
        losses = []
        for i, (x, y) in enumerate(batches):
            if i == 3:
                opt.param_groups[0]["lr"] = 1e-4
            if graph:
                losses.append(np.float32(g(x, y).item()))
            else:
                with s:
                    losses.append(np.float32(step(s.tensor(x), y).item()))
        return np.array(losses), g

    ref, _ = run(False)
    got, g = run(True)
    assert _same_bits(ref, got)
    assert g.captures == 2 and "groups" in g.recapture_reason


@cuda
def test_labels_outside_the_captured_range_are_never_replayed(mode):
    batches = _batches(5)
    model = _mlp(0)
    step = graph_step(_make_step(model, ADAM(model)))
    for x, y in batches[:3]:
        step(x, y)
    x, y = batches[3]
    y = y.copy()
    y[2] = 5                      # out of range for 5 classes
    with pytest.raises(RuntimeError, match="out of range"):
        step(x, y)


@cuda
def test_ignore_index_after_capture_captures_again(mode):
    batches = _batches(6)
    batches[4] = (batches[4][0], batches[4][1].copy())
    batches[4][1][1] = -100       # ignored row: the mean's denominator changes

    ref = _eager_run(_mlp, ADAM, batches)
    got = _graph_run(_mlp, ADAM, batches)
    _assert_runs_equal(ref, got[:3])
    assert got[3].captures >= 2


@cuda
def test_outputs_are_static_buffers_rewritten_by_each_replay():
    model = _mlp(0)
    step = graph_step(_make_step(model, ADAM(model)))
    batches = _batches(4)
    outs = [step(x, y) for x, y in batches]
    assert outs[1] is outs[2] is outs[3]   # one Tensor on the graph's static buffer


# ------------------------------------------------------------------------- every backend
def test_graph_step_matches_the_plain_loop():
    """On the stub the step runs eagerly; on CUDA it is replayed: the same numbers (default
    mode on CUDA may reorder reductions, so compare with a float tolerance there)."""
    batches = _batches(5)
    ref = _eager_run(_mlp, ADAM, batches)
    got = _graph_run(_mlp, ADAM, batches)
    if tl.cuda.is_available():
        np.testing.assert_allclose(ref[0], got[0], rtol=1e-4, atol=1e-5)
    else:
        _assert_runs_equal(ref, got[:3])
        assert got[3].captures == 0


def test_graph_step_as_decorator_keeps_name_and_passes_constants():
    seen = []

    @graph_step
    def my_step(x, scale):
        seen.append(scale)
        return x * scale

    out = my_step(np.arange(3, dtype=np.float32), 2.0)
    np.testing.assert_array_equal(out.numpy(), [0.0, 2.0, 4.0])
    assert my_step.__name__ == "my_step" and seen == [2.0]


def test_stub_runs_host_reads_eagerly():
    """Without CUDA the step is plain eager: a host read inside it is allowed."""
    if tl.cuda.is_available():
        pytest.skip("CUDA refuses host reads inside a step (test_host_read_inside_...)")

    @graph_step
    def step(x):
        y = (x * 2.0).sum()
        return y.item()

    assert step(np.ones(4, np.float32)) == 8.0


@pytest.mark.parametrize("read, name", [
    (lambda t: t.sum().item(), "Tensor.item"),
    (lambda t: t.numpy(), "Tensor.numpy"),
    (lambda t: t.tolist(), "Tensor.tolist"),
    (lambda t: tl.synchronize(), "synchronize"),
])
def test_strict_mode_names_the_host_read(read, name):
    """What graph_step's warm-up and capture run under (every backend): a host read raises
    RuntimeError naming the torchlean function the step called."""
    from torchlean import _capture
    t = Session().tensor([1.5, 2.5])
    _capture.STATE.strict = True
    try:
        with pytest.raises(RuntimeError, match=name):
            read(t)
        with pytest.raises(RuntimeError, match="host-side random draw"):
            tl.randint(0, 5, (3,))
    finally:
        _capture.STATE.strict = False
    assert t.numpy().tolist() == [1.5, 2.5]      # outside it, reads work again


# ------------------------------------------- back-to-back replays: staged inputs, no sync
def _softmax_ce_sgd_f64(emb, w, b, batches, lr):
    """NumPy float64 reference of SGD on logits = (emb[tok] + x) w^T + b, mean cross entropy
    against y: the parameters after every batch, and the last batch's loss."""
    emb, w, b = emb.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    loss = None
    for x, tok, y in batches:
        h = emb[tok] + x
        z = h @ w.T + b
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        loss = -np.mean(np.log(p[np.arange(len(y)), y]))
        gz = p
        gz[np.arange(len(y)), y] -= 1.0
        gz /= len(y)
        gh = gz @ w
        gemb = np.zeros_like(emb)
        np.add.at(gemb, tok, gh)
        w, b, emb = w - lr * (gz.T @ h), b - lr * gz.sum(axis=0), emb - lr * gemb
    return emb, w, b, loss


@pytest.mark.parametrize("x_kind", ["array", "tensor"])
def test_back_to_back_replays_read_each_calls_inputs(x_kind):
    """30 calls queued without a sync, each with new float features (NumPy array or device
    Tensor), tokens and labels, more calls than an input ring holds: each launch reads its own
    call's ring entries before a later call rewrites them, so the parameters equal float64 SGD
    over the 30 batches in order."""
    vocab, d, rows, steps, lr = 96, 64, 1024, 30, 0.5
    tl.manual_seed(11)
    emb, lin = nn.Embedding(vocab, d), nn.Linear(d, vocab)
    start = [emb.weight.numpy().copy(), lin.weight.numpy().copy(), lin.bias.numpy().copy()]
    opt = optim.SGD(list(emb.parameters()) + list(lin.parameters()), lr=lr)

    @graph_step
    def step(x, tok, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(lin(emb(tok) + x), y)
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(7)
    batches = [(rng.standard_normal((rows, d)).astype(np.float32),
                rng.integers(0, vocab, rows), rng.integers(0, vocab, rows))
               for _ in range(steps)]
    feeds = [(tl.tensor(x) if x_kind == "tensor" else x, tok, y) for x, tok, y in batches]
    for f in feeds:
        loss = step(*f)
    got = [emb.weight.numpy(), lin.weight.numpy(), lin.bias.numpy()]
    want_emb, want_w, want_b, want_loss = _softmax_ce_sgd_f64(*start, batches, lr)
    if tl.backend() == "cuda":
        assert step.captures == 1 and step.graph.replays == steps - 2, step.recapture_reason
    for name, g, w, s in zip(("embedding", "weight", "bias"), got, (want_emb, want_w, want_b),
                             start):
        moved = np.abs(w - s).max()
        assert moved > 1e-3, name      # the batches move every parameter measurably
        np.testing.assert_allclose(g - s, w - s, rtol=0, atol=2e-3 * moved, err_msg=name)
    np.testing.assert_allclose(loss.item(), want_loss, rtol=1e-4)
