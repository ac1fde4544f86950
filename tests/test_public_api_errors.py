"""Silent wrong answers of the public API that are now errors or right answers: labels,
embedding indices, saved index arrays, released tapes, node ids, item/bool/==, tied weights,
and memory of a loop that never calls Session.step()."""
import numpy as np
import pytest

import torchlean as tl
from torchlean import nn, optim
from torchlean.nn import functional as F
from torchlean.session import Session, Parameter


def _logits(s, n=5, c=4, seed=0):
    return s.tensor(np.random.default_rng(seed).normal(size=(n, c)), requires_grad=True)


# ---------------------------------------------------------------- cross_entropy labels
def test_cross_entropy_matches_float64_reference():
    s = Session()
    z = np.random.default_rng(1).normal(size=(5, 4))
    y = np.array([3, 0, 2, 2, 1], dtype=np.int32)
    x = s.tensor(z, requires_grad=True)
    loss = F.cross_entropy(x, y)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    ref = np.mean(lse - z[np.arange(5), y])
    assert loss.item() == pytest.approx(ref, rel=1e-5)
    loss.backward()
    p = np.exp(z - lse[:, None])
    p[np.arange(5), y] -= 1.0
    np.testing.assert_allclose(x.grad, p / 5, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("labels, exc, msg", [
    (np.array([0, 1, 4, 0, 0]), ValueError, r"label 4 at row 2 is out of range for 4 classes"),
    (np.array([0, -1, 0, 0, 0]), ValueError, r"label -1 at row 1 is out of range"),
    (np.array([0.0, 1.0, 2.0, 0.0, 0.0]), TypeError, r"integer array, got dtype float64"),
    (np.array([True, False, True, True, False]), TypeError, r"dtype bool"),
    (np.array([0, 1, 2]), ValueError, r"one label per row, shape \(5,\) for logits \(5, 4\)"),
    (np.zeros((5, 1), np.int64), ValueError, r"got shape \(5, 1\)"),
])
def test_cross_entropy_rejects_bad_labels(labels, exc, msg):
    s = Session()
    with pytest.raises(exc, match="cross_entropy: .*" + msg):
        F.cross_entropy(_logits(s), labels)


def test_cross_entropy_rejects_non_matrix_logits():
    s = Session()
    with pytest.raises(ValueError, match=r"cross_entropy: logits must be \(rows, classes\)"):
        F.cross_entropy(s.tensor(np.ones(4)), np.array([0]))


# ---------------------------------------------------------------- embedding indices
def test_embedding_checks_indices_and_looks_up_rows():
    tl.manual_seed(0)
    emb = nn.Embedding(6, 3)
    s = Session()
    idx = np.array([[5, 0], [2, 2]])
    np.testing.assert_array_equal(emb(idx, session=s).numpy(), emb.weight.numpy()[idx])
    with pytest.raises(IndexError, match=r"Embedding: index 6 is out of range for 6 embeddings"):
        emb(np.array([1, 6]), session=s)
    with pytest.raises(IndexError, match="index -1"):
        emb(np.array([-1]), session=s)
    with pytest.raises(TypeError, match="Embedding: indices must be integers"):
        emb(np.array([0.5]), session=s)


# ---------------------------------------------------------------- recorded arrays are snapshots
def test_mutating_indices_after_forward_keeps_the_gradient():
    t = tl.Tape()
    x = t.leaf(np.arange(5.0))
    idx = np.array([0, 2, 2])
    y = t.sum(t.gather_vec(x, indices=idx))
    idx[:] = 4                       # after the forward: must not move the gradient
    g = t.backward(y)[x].to_numpy()
    np.testing.assert_array_equal(g, [1.0, 0.0, 2.0, 0.0, 0.0])
    t.release()


def test_mutating_a_mask_after_forward_keeps_the_gradient():
    rng = np.random.default_rng(2)
    z = rng.normal(size=(2, 3))
    mask = np.array([[True, True, False], [True, True, True]])
    seed = rng.normal(size=(2, 3))
    t = tl.Tape()
    x = t.leaf(z)
    y = t.masked_softmax(x, mask=mask)
    mask[:] = True
    g = t.backward(y, seed=seed)[x].to_numpy()
    # float64 reference with the mask used in the forward
    m = np.array([[True, True, False], [True, True, True]])
    e = np.where(m, np.exp(z - z.max(1, keepdims=True)), 0.0)
    p = e / e.sum(1, keepdims=True)
    ref = p * (seed - (seed * p).sum(1, keepdims=True))
    np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-6)
    t.release()


# ---------------------------------------------------------------- tapes and node ids
def test_backward_and_recording_after_release_raise():
    t = tl.Tape()
    x = t.leaf(np.ones(3))
    y = t.sum(x)
    t.release()
    with pytest.raises(ValueError, match="backward: this tape was released"):
        t.backward(y)
    with pytest.raises(ValueError, match="leaf: this tape was released"):
        t.leaf(np.ones(2))
    with pytest.raises(ValueError, match="relu: this tape was released"):
        t.relu(x)


@pytest.mark.parametrize("bad", [True, False, np.bool_(True), 1.0, "0", None])
def test_non_int_node_ids_are_type_errors(bad):
    t = tl.Tape()
    t.leaf(np.ones(2))
    t.leaf(np.ones(2))
    with pytest.raises(TypeError, match="node ids are ints"):
        t.relu(bad)
    with pytest.raises(TypeError, match="node ids are ints"):
        t.add(0, bad)
    assert t.relu(np.int64(1)) == 2   # NumPy integers are ids
    t.release()


# ---------------------------------------------------------------- item, bool, ==
def test_item_bool_and_comparisons_follow_pytorch():
    s = Session()
    one = s.tensor(np.array([2.5]))
    many = s.tensor(np.array([1.0, 0.0, 3.0]))
    assert one.item() == 2.5 and bool(one) is True and bool(s.tensor(np.zeros(()))) is False
    with pytest.raises(ValueError, match=r"item: a Tensor with 3 elements \(shape \(3,\)\)"):
        many.item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(many)
    eq = many == s.tensor(np.array([[1.0], [3.0]]))     # broadcasts to (2, 3)
    assert isinstance(eq, tl.Tensor) and not eq.requires_grad
    np.testing.assert_array_equal(eq.numpy(), [[1, 0, 0], [0, 0, 1]])
    assert eq.numpy().dtype == np.float32
    np.testing.assert_array_equal((many != 0.0).numpy(), [1, 0, 1])
    np.testing.assert_array_equal((many == np.array([1.0, 1.0, 3.0])).numpy(), [1, 0, 1])
    nan = s.tensor(np.array([np.nan]))
    assert (nan == nan).numpy().tolist() == [0.0] and (nan != nan).numpy().tolist() == [1.0]
    assert (many == "x") is False and (many != None) is True  # noqa: E711 - identity fallback
    with pytest.raises(ValueError, match=r"eq: shapes \(3,\) and \(2,\)"):
        many == np.ones(2)
    d = {many: "a", one: "b"}                            # identity hash: still dict keys
    assert d[many] == "a" and d[one] == "b"


# ---------------------------------------------------------------- tied weights
def _tied():
    tl.manual_seed(3)
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    b.weight = a.weight
    return nn.Sequential(a, b)


@pytest.mark.parametrize("make_opt", [lambda ps: optim.SGD(ps, lr=0.1),
                                      lambda ps: optim.Adam(ps, lr=0.1)])
def test_tied_weights_are_one_parameter_stepped_once(make_opt):
    m = _tied()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.bias"]
    assert len(m.parameters()) == 3
    W0 = m[0].weight.numpy().astype(np.float64).copy()
    opt = make_opt(m.parameters())
    s = Session()
    x = np.random.default_rng(4).normal(size=(2, 3))
    loss = (m(s.tensor(x)) * 1.0).sum()
    loss.backward()
    g = m[0].weight.grad.numpy().astype(np.float64)
    opt.step()
    step = W0 - m[0].weight.numpy().astype(np.float64)
    if isinstance(opt, optim.SGD):
        np.testing.assert_allclose(step, 0.1 * g, rtol=1e-5, atol=1e-7)
    else:  # Adam's first step moves each weight by lr * sign(g) (|g| >> eps)
        np.testing.assert_allclose(step, 0.1 * np.sign(g), rtol=1e-4, atol=1e-6)
    s.step()


# ---------------------------------------------------------------- memory without step()
@pytest.mark.parametrize("hold", [False, True])
def test_training_loop_without_step_keeps_live_bytes_flat(hold):
    """hold: the PyTorch-shaped loop keeps xb/out/loss bound across backward() and rebinds them
    next step; otherwise the input and logits are temporaries."""
    tl.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(4 * 4 * 4, 10))
    opt = optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(16, 1, 8, 8))
    y = rng.integers(0, 10, size=16)
    s = Session()
    live = []
    for step in range(300):
        if hold:
            xb = s.tensor(X, requires_grad=True)
            out = model(xb)
            loss = F.cross_entropy(out, y)
        else:
            loss = F.cross_entropy(model(s.tensor(X)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        live.append(tl.memory_stats()["live_bytes"])
    assert loss.item() < 1.0                        # it trained
    assert max(live[50:]) == min(live[50:]), (live[50], live[-1])
    n_nodes = len(s.tape)
    s.step()
    assert n_nodes > 300


def test_second_backward_through_a_freed_graph_raises_and_retain_graph_keeps_it():
    s = Session()
    p = Parameter(np.array([1.0, 2.0]))
    h = (s.use(p) * s.use(p)).sum()
    h.backward(retain_graph=True)
    h.backward()
    np.testing.assert_allclose(p.grad, [4.0, 8.0])   # two accumulated gradients of 2p
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        h.backward()
