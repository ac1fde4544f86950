"""PyTorch's mutation model: in-place ops write the tensor's storage (no allocation, the bits of
the out-of-place op), item assignment, version counters, and nn.Parameter as a leaf Tensor.
References: float64 NumPy and closed forms; torch only as an extra check where installed."""
import copy
import os

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn, optim
from torchlean.session import Session


def _data(*shape, seed=0, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape).astype(np.float32)


# ----------------------------------------------------------------------- Parameter is a Tensor
def test_parameter_is_a_leaf_tensor_with_views_and_arithmetic():
    w = _data(2, 3, seed=1)
    p = nn.Parameter(w)
    assert isinstance(p, tl.Tensor) and p.is_leaf and p.requires_grad and p.grad is None
    np.testing.assert_array_equal((0.5 * p).numpy(), 0.5 * w)
    np.testing.assert_array_equal(p.T.numpy(), w.T)
    np.testing.assert_array_equal(p.unsqueeze(0).numpy(), w[None])
    np.testing.assert_array_equal(p.expand(4, 2, 3).numpy(), np.broadcast_to(w, (4, 2, 3)))
    assert p.requires_grad_(False) is p and not p.requires_grad
    p.requires_grad_()
    y = (p * p).sum()
    y.backward()
    assert isinstance(p.grad, tl.Tensor)
    np.testing.assert_allclose(p.grad.numpy(), 2 * w.astype(np.float64), rtol=1e-6)
    with pytest.raises(TypeError, match="requires_grad must be a bool"):
        p.requires_grad_("no")


def test_parameter_joins_the_session_of_the_other_operand():
    s = Session()   # not the current Session: the Parameter's ops record on s
    w = _data(2, 2, seed=23)
    p = nn.Parameter(w)
    x = s.tensor(np.eye(2, dtype=np.float32))
    e = np.eye(2, dtype=np.float32)
    np.testing.assert_array_equal((p * x).numpy(), w * e)
    np.testing.assert_array_equal((p @ x).numpy(), w)
    np.testing.assert_array_equal((p - x).numpy(), w - e)
    np.testing.assert_array_equal(tl.where(x > 0, p, x).numpy(), np.where(np.eye(2) > 0, w, 0))
    (p * x).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), np.eye(2))


def test_data_and_detach_share_storage_outside_autograd():
    m = nn.Linear(3, 2)
    x = tl.tensor(_data(4, 3, seed=2))
    m.weight.data[:] = 0
    np.testing.assert_array_equal(m(x).numpy(), np.broadcast_to(m.bias.numpy(), (4, 2)))
    np.testing.assert_array_equal(m.state_dict()["weight"], np.zeros((2, 3)))
    w = _data(2, 3, seed=3)
    m.weight.data.copy_(w)
    ref = x.numpy().astype(np.float64) @ w.T.astype(np.float64) + m.bias.numpy()
    np.testing.assert_allclose(m(x).numpy(), ref, rtol=1e-5, atol=1e-6)
    d = m.bias.detach()
    assert not d.requires_grad
    with tl.no_grad():
        d.add_(1.0)   # a scalar add: through the detached Tensor into the bias
    np.testing.assert_allclose(m.state_dict()["bias"], d.numpy())


def test_grad_assignment_and_zero_grad():
    m = nn.Linear(3, 2)
    m(tl.tensor(np.ones((1, 3)))).sum().backward()
    np.testing.assert_array_equal(m.weight.grad.numpy(), np.ones((2, 3)))
    m.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(m.weight.grad.numpy(), np.zeros((2, 3)))
    m.zero_grad()                      # torch's default: None
    assert m.weight.grad is None and m.bias.grad is None
    m.weight.grad = tl.tensor(np.full((2, 3), 3.0))
    np.testing.assert_array_equal(m.weight.grad.numpy(), np.full((2, 3), 3.0))
    with pytest.raises(RuntimeError, match="different size"):
        m.weight.grad = tl.tensor(np.ones(3))
    m.weight.grad = None
    assert m.weight.grad is None


@pytest.mark.parametrize("opt_cls", [optim.SGD, optim.Adam, optim.RMSprop, optim.Adagrad])
def test_optimizers_and_reload_write_the_same_storage(opt_cls):
    m = nn.Linear(4, 3)
    stores = [p.mirror() for p in m.parameters()]
    opt = opt_cls(m.parameters(), lr=0.1)
    x = tl.tensor(_data(5, 4, seed=4))
    before = m.state_dict()
    for _ in range(2):
        opt.zero_grad()
        (m(x) ** 2).sum().backward()
        opt.step()
    assert all(p.mirror() is s and s.live for p, s in zip(m.parameters(), stores))
    assert not np.array_equal(m.state_dict()["weight"], before["weight"])
    m.load_state_dict(before)
    assert all(p.mirror() is s and s.live for p, s in zip(m.parameters(), stores))
    np.testing.assert_array_equal(m.state_dict()["weight"], before["weight"])


def test_tutorial_update_trains_bit_for_bit_as_sgd():
    """PyTorch's tutorial `with no_grad(): p -= lr * p.grad` equals optim.SGD(lr) exactly."""
    was = tl.is_exact()
    tl.set_exact(True)
    try:
        x, y = tl.tensor(_data(16, 5, seed=5)), tl.tensor(_data(16, 2, seed=6))
        runs = []
        for manual in (True, False):
            tl.manual_seed(0)
            m = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2))
            opt = optim.SGD(m.parameters(), lr=0.05)
            losses = []
            for _ in range(6):
                loss = ((m(x) - y) ** 2).mean()
                losses.append(loss.item())
                m.zero_grad()
                loss.backward()
                if manual:
                    with tl.no_grad():
                        for p in m.parameters():
                            p -= 0.05 * p.grad
                else:
                    opt.step()
            runs.append((losses, [p.numpy() for p in m.parameters()]))
        assert runs[0][0] == runs[1][0] and runs[0][0][-1] < runs[0][0][0]
        for a, b in zip(runs[0][1], runs[1][1]):
            assert a.tobytes() == b.tobytes()
    finally:
        tl.set_exact(was)


# ----------------------------------------------------------------------- in-place ops
_F64 = np.float64
_CASES = [
    ("add_", lambda t, o: t.add_(o), lambda a, b: a + b),
    ("add_alpha", lambda t, o: t.add_(o, alpha=0.25), lambda a, b: a + 0.25 * b),
    ("sub_", lambda t, o: t.sub_(o), lambda a, b: a - b),
    ("sub_alpha", lambda t, o: t.sub_(o, alpha=3.0), lambda a, b: a - 3.0 * b),
    ("mul_", lambda t, o: t.mul_(o), lambda a, b: a * b),
    ("mul_scalar", lambda t, o: t.mul_(0.75), lambda a, b: a * 0.75),
    ("div_", lambda t, o: t.div_(o), lambda a, b: a / b),
    ("div_scalar", lambda t, o: t.div_(4.0), lambda a, b: a / 4.0),
    ("iadd", lambda t, o: t.__iadd__(o), lambda a, b: a + b),
    ("isub", lambda t, o: t.__isub__(o), lambda a, b: a - b),
    ("imul", lambda t, o: t.__imul__(o), lambda a, b: a * b),
    ("itruediv", lambda t, o: t.__itruediv__(o), lambda a, b: a / b),
    ("neg_", lambda t, o: t.neg_(), lambda a, b: -a),
    ("abs_", lambda t, o: t.abs_(), lambda a, b: np.abs(a)),
    ("sqrt_", lambda t, o: t.abs_().sqrt_(), lambda a, b: np.sqrt(np.abs(a))),
    ("exp_", lambda t, o: t.exp_(), lambda a, b: np.exp(a)),
    ("pow_", lambda t, o: t.pow_(2), lambda a, b: a * a),
    ("clamp_", lambda t, o: t.clamp_(-0.5, 0.7), lambda a, b: np.clip(a, -0.5, 0.7)),
    ("clamp_min", lambda t, o: t.clamp_(min=0.1), lambda a, b: np.maximum(a, 0.1)),
    ("lerp_", lambda t, o: t.lerp_(o, 0.3), lambda a, b: a + 0.3 * (b - a)),
    ("addcmul_", lambda t, o: t.addcmul_(o, o, value=0.5), lambda a, b: a + 0.5 * b * b),
    ("addcdiv_", lambda t, o: t.addcdiv_(o, o + 3.0, value=2.0), lambda a, b: a + 2 * b / (b + 3)),
    ("fill_", lambda t, o: t.fill_(1.5), lambda a, b: np.full_like(a, 1.5)),
    ("zero_", lambda t, o: t.zero_(), lambda a, b: np.zeros_like(a)),
    ("copy_", lambda t, o: t.copy_(o), lambda a, b: b),
    ("copy_broadcast", lambda t, o: t.copy_(o[0]), lambda a, b: np.broadcast_to(b[0], a.shape)),
    ("masked_fill_", lambda t, o: t.masked_fill_(o > 0, -1.0), lambda a, b: np.where(b > 0, -1, a)),
    ("index_fill_", lambda t, o: t.index_fill_(1, np.array([0, 3]), 9.0),
     lambda a, b: np.where(np.isin(np.arange(a.shape[1]), [0, 3])[None], 9.0, a)),
]


@pytest.mark.parametrize("name,op,ref", _CASES, ids=[c[0] for c in _CASES])
def test_inplace_ops_write_the_storage_and_match_float64(name, op, ref):
    a, b = _data(3, 5, seed=7), _data(3, 5, seed=8, lo=0.5, hi=2.0)
    s = Session()
    t, o = s.tensor(a), s.tensor(b)
    alias = t.reshape(15)          # a view: shares the storage
    out = op(t, o)
    assert out is t
    want = ref(a.astype(_F64), b.astype(_F64))
    np.testing.assert_allclose(t.numpy(), want, rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(alias.numpy(), t.numpy().reshape(15))


_BIT_CASES = [("add_", "__add__"), ("sub_", "__sub__"), ("mul_", "__mul__"), ("div_", "__truediv__")]


@pytest.mark.parametrize("exact", [False, True])
def test_inplace_gives_the_bits_of_its_out_of_place_twin(exact):
    was = tl.is_exact()
    tl.set_exact(exact)
    try:
        a, b = _data(7, 9, seed=9), _data(7, 9, seed=10, lo=0.3)
        for ip, oop in _BIT_CASES:
            for other in (b, 0.37):
                s = Session()
                t = s.tensor(a)
                o = s.tensor(other) if isinstance(other, np.ndarray) else other
                want = getattr(s.tensor(a), oop)(o).numpy()
                getattr(t, ip)(o)
                assert t.numpy().tobytes() == want.tobytes(), (ip, other)
        for name in ("exp", "sqrt", "abs", "neg"):
            s = Session()
            t = s.tensor(np.abs(a))
            want = getattr(s.tensor(np.abs(a)), name)().numpy()
            getattr(t, name + "_")()
            assert t.numpy().tobytes() == want.tobytes(), name
    finally:
        tl.set_exact(was)


def test_core_inplace_arithmetic_allocates_nothing():
    s = Session()
    t, o = s.tensor(_data(64, 33, seed=11)), s.tensor(_data(64, 33, seed=12, lo=0.5))
    p = nn.Parameter(_data(64, 33, seed=13))
    t.add_(o)   # warm up anything lazily made
    before = tl.memory_stats()
    for _ in range(3):
        t.add_(o); t.sub_(o, alpha=0.5); t.mul_(o); t.div_(o); t.mul_(0.5)
        t += o; t -= o; t *= o; t /= o
        with tl.no_grad():
            p.add_(o, alpha=0.1); p.mul_(0.99); p -= o
    after = tl.memory_stats()
    assert after["allocations"] == before["allocations"]
    assert after["live_bytes"] == before["live_bytes"]


def test_inplace_shape_and_leaf_errors():
    s = Session()
    t = s.tensor(np.zeros((2, 3)))
    with pytest.raises(RuntimeError, match=r"doesn't match the broadcast shape \[4, 2, 3\]"):
        t.add_(s.tensor(np.zeros((4, 2, 3))))
    leaf = s.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation"):
        leaf.mul_(2.0)
    p = nn.Parameter(np.ones(3))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        p += 1.0
    with tl.no_grad():
        leaf.mul_(2.0)
        p += 1.0
    np.testing.assert_array_equal(leaf.numpy(), [2, 2, 2])
    np.testing.assert_array_equal(p.numpy(), [2, 2, 2])


# ----------------------------------------------------------------------- version counters
def test_backward_through_a_value_changed_in_place_raises():
    s = Session()
    x = s.tensor(_data(4, seed=14), requires_grad=True)
    y = x.exp()
    y.add_(1.0)                     # exp saved its output y for its VJP
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*exp.*version 1; "
                                           r"expected version 0.*add_"):
        y.sum().backward()
    s2 = Session()
    w = s2.tensor(_data(4, seed=15), requires_grad=True)
    m = s2.tensor(_data(4, seed=16))
    z = w * m                       # mul saved m
    m.mul_(0.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_inplace_on_a_non_leaf_is_differentiated_as_the_op():
    """a = x * 1; a.mul_(w); a.add_(x): d/dx = w + 1, d/dw = x (torch gives the same)."""
    xv, wv = _data(5, seed=17), _data(5, seed=18)
    s = Session()
    x, w = s.tensor(xv, requires_grad=True), s.tensor(wv, requires_grad=True)
    a = x * 1.0
    a.mul_(w).add_(x)
    a.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), wv.astype(_F64) + 1, rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), xv, rtol=1e-6)


def test_version_errors_as_torch():
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("torch does not load beside the ASan runtime (make sanitize)")
    torch = pytest.importorskip("torch")
    x = torch.tensor([0.5, 1.0], requires_grad=True)
    y = x.exp()
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x.mul_(2)


# ----------------------------------------------------------------------- item assignment
_KEYS = [1, -1, (0, slice(0, 2)), (slice(None), 2), (Ellipsis, 1), (None, 1, slice(1, 3)),
         slice(None, None, -1), ([1, 0, 1], [2, 0, 3]), np.array([[0], [2]]),
         (0, slice(None), [3, 1]), (slice(None), [True, False, True, True]),
         (1, slice(0, 0)), ()]


@pytest.mark.parametrize("key", _KEYS, ids=[repr(k)[:30] for k in _KEYS])
def test_setitem_matches_numpy_and_its_gradient(key):
    a = _data(3, 4, 5, seed=19)
    sel_shape = a[key].shape
    vals = _data(*sel_shape, seed=20) if sel_shape else np.float32(1.25)
    want = a.copy()
    want[key] = vals
    s = Session()
    x0 = s.tensor(a, requires_grad=True)
    x = x0 * 1.0
    v = s.tensor(vals, requires_grad=True)
    x[key] = v
    np.testing.assert_array_equal(x.numpy(), want)
    wts = _data(3, 4, 5, seed=21)
    (x * s.tensor(wts)).sum().backward()
    mask = np.zeros(a.shape, bool)
    mask[key] = True
    np.testing.assert_allclose(x0.grad.numpy(), np.where(mask, 0, wts))
    gv = np.broadcast_to(wts[key], sel_shape)   # each written position sends its weight
    np.testing.assert_allclose(v.grad.numpy(), gv)


def test_setitem_scalars_broadcast_masks_and_parameters():
    s = Session()
    x = s.tensor(np.zeros((2, 3)))
    x[0, :2] = 1
    x[:, 2] = s.tensor(np.array([5.0, 6.0]))
    x[x > 5] = -1.0                      # a float 0/1 mask Tensor, as torchlean's comparisons give
    np.testing.assert_array_equal(x.numpy(), [[1, 1, 5], [0, 0, -1]])
    x[tl.tensor(np.array([0, 1])).long()] = s.tensor(np.array([7.0, 8.0, 9.0]))
    np.testing.assert_array_equal(x.numpy(), [[7, 8, 9], [7, 8, 9]])
    with pytest.raises(RuntimeError, match=r"shape mismatch.*\[4\].*\[3\]"):
        x[0] = np.ones(4)
    with pytest.raises(IndexError):
        x[5] = 1.0
    dup = s.tensor(np.zeros(3))
    dup[[0, 0, 2]] = s.tensor(np.array([1.0, 2.0, 3.0]))   # the last write wins, as NumPy
    np.testing.assert_array_equal(dup.numpy(), [2, 0, 3])
    p = nn.Parameter(np.zeros(4))
    with tl.no_grad():
        p[1:3] = 2.0
    np.testing.assert_array_equal(p.numpy(), [0, 2, 2, 0])


def test_random_fills_in_place():
    tl.manual_seed(3)
    s = Session()
    t = s.tensor(np.zeros((200, 50)))
    keep = t.mirror() if t._is_parameter else t._node().value
    t.uniform_(-2.0, 3.0)
    u = t.numpy().astype(_F64)
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.05
    t.normal_(1.0, 2.0)
    n = t.numpy().astype(_F64)
    assert abs(n.mean() - 1.0) < 0.05 and abs(n.std() - 2.0) < 0.05
    t.bernoulli_(0.3)
    b = t.numpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.02
    assert (t._node().value.buf is keep.buf)


# ----------------------------------------------------------------------- Module pieces
def test_module_deepcopy_apply_and_buffers():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = tl.tensor(_data(2, 3, seed=22))
    m(x).sum().backward()
    c = copy.deepcopy(m)
    np.testing.assert_array_equal(c(x).numpy(), m(x).numpy())
    with tl.no_grad():
        c[0].weight.mul_(0.0)
    assert not np.array_equal(c(x).numpy(), m(x).numpy())   # separate storage
    np.testing.assert_array_equal(c[0].weight.grad.numpy(), m[0].weight.grad.numpy())
    t = tl.tensor(np.ones(2), requires_grad=True)
    t2 = copy.deepcopy(t)
    assert t2.requires_grad and t2 is not t
    np.testing.assert_array_equal(t2.numpy(), [1, 1])
    with pytest.raises(RuntimeError, match="deepcopy"):
        copy.deepcopy(t * 2)

    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "ReLU", "Linear", "Sequential"]

    mod = nn.Module()
    mod.register_buffer("steps", tl.tensor(np.zeros(1)))
    mod.register_buffer("cache", tl.tensor(np.ones(2)), persistent=False)
    mod.register_buffer("empty", None)
    assert [k for k, _ in mod.named_buffers()] == ["steps", "cache"]
    assert list(mod.state_dict()) == ["steps"]
    mod.steps = tl.tensor(np.array([4.0]))
    np.testing.assert_array_equal(mod.state_dict()["steps"], [4.0])


def test_scatter_clamp_variants_and_data_assignment():
    s = Session()
    x = s.tensor(np.zeros((2, 4)))
    idx = np.array([[3, 0], [1, 1]])
    src = s.tensor(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    y = x * 1.0
    y.scatter_(1, idx, src)
    want = np.zeros((2, 4))
    for i in range(2):
        for j in range(2):
            want[i, idx[i, j]] = np.arange(1.0, 7.0).reshape(2, 3)[i, j]
    np.testing.assert_array_equal(y.numpy(), want)
    y.sum().backward()   # (1, 1) is written twice: the last write's source gets the gradient
    np.testing.assert_array_equal(src.grad.numpy(), [[1, 1, 0], [0, 1, 0]])
    with pytest.raises(IndexError, match="out of bounds"):
        x.scatter_(1, np.array([[4, 0], [0, 0]]), 1.0)
    z = s.tensor(np.array([-2.0, 0.5, 3.0]))
    np.testing.assert_array_equal(z.clamp_min_(0.0).numpy(), [0, 0.5, 3])
    np.testing.assert_array_equal(z.clamp_max_(1.0).square_().numpy(), [0, 0.25, 1])
    m = nn.Linear(2, 2)
    m.weight.data = tl.tensor(np.full((2, 2), 0.5))          # init code's idiom
    np.testing.assert_array_equal(m.state_dict()["weight"], np.full((2, 2), 0.5))


def test_random_fills_take_a_generator_with_next_key():
    class Keys:   # the interface of torchlean.Generator: one device key per draw
        def __init__(self):
            self.k = 100

        def next_key(self):
            self.k += 1
            return self.k

    s = Session()
    a, b = s.tensor(np.zeros(64)), s.tensor(np.zeros(64))
    a.normal_(generator=Keys())
    b.normal_(generator=Keys())
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert np.std(a.numpy()) > 0.5


def test_fill_and_copy_of_constants_keep_a_non_leaf_differentiable():
    """torch: h = x * 1; h.zero_() (or h.copy_(c)) still requires grad; x gets zeros there."""
    s = Session()
    x = s.tensor(_data(3, seed=24), requires_grad=True)
    h = x * 2.0
    h.copy_(np.array([1.0, 2.0, 3.0]))
    k = x * 1.0
    k.zero_()
    assert h.requires_grad and k.requires_grad
    (h.sum() + k.sum() + x.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 1, 1])
    np.testing.assert_array_equal(h.numpy(), [1, 2, 3])


# torch refuses negative steps, and puts an int index beside an index array separated by a
# slice in another axis order than NumPy (torchlean reads and writes NumPy's order)
_TORCH_KEYS = [k for k in _KEYS if not (isinstance(k, slice) and k.step == -1)
               and not (isinstance(k, tuple) and k[:2] == (0, slice(None)))]


@pytest.mark.parametrize("key", _TORCH_KEYS, ids=[repr(k)[:30] for k in _TORCH_KEYS])
def test_setitem_and_inplace_gradients_as_torch(key):
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("torch does not load beside the ASan runtime (make sanitize)")
    torch = pytest.importorskip("torch")
    a, wts = _data(3, 4, 5, seed=25), _data(3, 4, 5, seed=26)
    sel = a[key].shape
    vals = _data(*sel, seed=27) if sel else np.float32(0.5)
    got = []
    for lib in ("torchlean", "torch"):
        if lib == "torch":
            x0 = torch.tensor(a, requires_grad=True)
            v = torch.tensor(vals, requires_grad=True)
            k = tuple(torch.tensor(q) if isinstance(q, (list, np.ndarray)) else q
                      for q in (key if isinstance(key, tuple) else (key,)))
            w = torch.tensor(wts)
        else:
            s = Session()
            x0, v = s.tensor(a, requires_grad=True), s.tensor(vals, requires_grad=True)
            k, w = key, s.tensor(wts)
        x = x0 * 1.0
        x[k] = v
        x.mul_(w).add_(x0)
        x.sum().backward()
        got.append([np.asarray(t.detach().numpy() if lib == "torch" else t.numpy())
                    for t in (x, x0.grad, v.grad)])
    for mine, ref in zip(*got):
        np.testing.assert_allclose(mine, ref, rtol=1e-6, atol=1e-6)
