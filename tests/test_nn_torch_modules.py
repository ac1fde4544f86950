"""Containers, tree walks and the PyTorch layers composed from existing ops (Conv1d/Conv3d,
BatchNorm1d, LayerNorm over a tuple, RMSNorm, GroupNorm, AdaptiveAvgPool2d) against float64
NumPy references and central finite differences of those references."""
import numpy as np
import pytest

from torchlean import nn
from torchlean.session import Session, manual_seed


def _data(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)


def _run(module, a, seed=5):
    """Output, input gradient and the weights w of loss = sum(w * module(x))."""
    s = Session()
    x = s.tensor(a, requires_grad=True)
    y = module(x)
    out = y.numpy().astype(np.float64)
    w = np.random.default_rng(seed).uniform(-1, 1, size=out.shape)
    (y * s.tensor(w)).sum().backward()
    g = x.grad.numpy()
    s.step()
    return out, g, w


def _fd(fref, a, w, eps=1e-3, coords=40):
    """Central differences of sum(w * fref(x)) at up to `coords` random coordinates."""
    a = a.astype(np.float64)
    flat = np.random.default_rng(1).permutation(a.size)[:coords]
    got = {}
    for i in flat:
        p, m = a.copy().reshape(-1), a.copy().reshape(-1)
        p[i] += eps
        m[i] -= eps
        got[i] = (np.sum(w * fref(p.reshape(a.shape))) - np.sum(w * fref(m.reshape(a.shape)))) / (2 * eps)
    return got


def _check_grad(g, fd, rtol=2e-3, atol=2e-3):
    for i, v in fd.items():
        assert g.reshape(-1)[i] == pytest.approx(v, rel=rtol, abs=atol), i


def _conv_ref(x, w, b, stride, padding):
    """Direct N-D cross-correlation in float64 over (N, C, spatial...) input."""
    n = w.ndim - 2
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in padding])
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=tuple(range(2, 2 + n)))
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)]
    sub = "pqrstuvw"[:n]      # window offsets; upper case: output positions
    y = np.einsum(f"nc{sub.upper()}{sub},oc{sub}->no{sub.upper()}", win, w.astype(np.float64))
    return y + b.reshape((1, -1) + (1,) * n)


@pytest.mark.parametrize("cls,shape,kw", [
    (nn.Conv1d, (2, 3, 9), dict(kernel_size=3, stride=2, padding=1)),
    (nn.Conv1d, (1, 1, 1), dict(kernel_size=1)),
    (nn.Conv1d, (2, 3, 7), dict(kernel_size=3, padding="same")),
    (nn.Conv3d, (2, 2, 4, 3, 5), dict(kernel_size=(2, 2, 3), stride=(1, 2, 1), padding=(1, 0, 1))),
    (nn.Conv3d, (1, 1, 3, 3, 3), dict(kernel_size=3, bias=False)),
])
def test_conv_nd_modules(cls, shape, kw):
    manual_seed(3)
    m = cls(shape[1], 4, **kw)
    a = _data(*shape, seed=2)
    wt, b = m.weight.numpy(), (m.bias.numpy() if "bias" in dict(m.named_parameters()) else np.zeros(4))
    ref = lambda v: _conv_ref(v, wt, b, m.stride, m.padding)
    out, g, w = _run(m, a)
    np.testing.assert_allclose(out, ref(a), rtol=1e-4, atol=1e-5)
    _check_grad(g, _fd(ref, a, w))
    fd_w = _fd(lambda v: _conv_ref(a, v, b, m.stride, m.padding), wt, w, coords=10)
    _check_grad(m.weight.grad, fd_w)
    assert ("bias" in dict(m.named_parameters())) == kw.get("bias", True)


def test_conv1d_unbatched_and_bad_input():
    manual_seed(0)
    m = nn.Conv1d(2, 3, 3)
    a = _data(2, 6)
    s = Session()
    y = m(s.tensor(a))
    np.testing.assert_allclose(y.numpy(), _conv_ref(a[None], m.weight.numpy(), m.bias.numpy(), (1,), (0,))[0],
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"Conv1d: expected input \(N, 2, 1 spatial axes\).*\(2, 5, 6\)"):
        m(s.tensor(_data(2, 5, 6)))
    with pytest.raises(ValueError, match=r"Conv1d: in_channels \(3\).*divisible by groups \(2\)"):
        nn.Conv1d(3, 2, 3, groups=2)
    with pytest.raises(ValueError, match="kernel_size must be an int or 3 ints"):
        nn.Conv3d(2, 2, (3, 3))


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6)])
def test_batchnorm1d_train_eval(shape):
    bn = nn.BatchNorm1d(3, momentum=0.25)
    a = _data(*shape, seed=4)
    axes = (0,) if len(shape) == 2 else (0, 2)
    cs = (1, 3) if len(shape) == 2 else (1, 3, 1)

    def ref(v):
        mu, var = v.mean(axis=axes, keepdims=True), v.var(axis=axes, keepdims=True)
        return (v - mu) / np.sqrt(var + 1e-5)
    out, g, w = _run(bn, a)
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=1e-4, atol=1e-4)
    _check_grad(g, _fd(ref, a, w))
    a64 = a.astype(np.float64)
    n = a.size // 3
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.25 * a64.mean(axis=axes), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.75 + 0.25 * a64.var(axis=axes) * n / (n - 1),
                               rtol=1e-5, atol=1e-6)
    bn.eval()
    s = Session()
    y = bn(s.tensor(a)).numpy()
    rm, rv = bn.running_mean.numpy().reshape(cs), bn.running_var.numpy().reshape(cs)
    np.testing.assert_allclose(y, (a64 - rm) / np.sqrt(rv + 1e-5), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"BatchNorm1d: expected input \(N, 3\) or \(N, 3, L\), got \(5, 4\)"):
        bn(s.tensor(_data(5, 4)))


@pytest.mark.parametrize("ns", [4, (4,), (3, 4), (2, 3, 4)])
def test_layernorm_normalized_shape(ns):
    ln = nn.LayerNorm(ns)
    t = (ns,) if isinstance(ns, int) else ns
    ln.weight.set(np.random.default_rng(1).uniform(0.5, 1.5, t))
    ln.bias.set(np.random.default_rng(2).uniform(-1, 1, t))
    a = _data(2, 2, 3, 4, seed=6)
    axes = tuple(range(4 - len(t), 4))
    gam, bet = ln.weight.numpy().astype(np.float64), ln.bias.numpy().astype(np.float64)

    def ref(v):
        mu, var = v.mean(axis=axes, keepdims=True), v.var(axis=axes, keepdims=True)
        return (v - mu) / np.sqrt(var + 1e-5) * gam + bet
    out, g, w = _run(ln, a)
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=1e-4, atol=1e-4)
    _check_grad(g, _fd(ref, a, w))
    assert ln.weight.grad.shape == t
    s = Session()
    with pytest.raises(ValueError, match="LayerNorm: expected input with trailing shape"):
        ln(s.tensor(_data(2, 5)))


@pytest.mark.parametrize("ns,eps", [(5, None), ((3, 5), 1e-3)])
def test_rmsnorm(ns, eps):
    m = nn.RMSNorm(ns, eps=eps)
    t = (ns,) if isinstance(ns, int) else ns
    m.weight.set(np.random.default_rng(3).uniform(0.5, 1.5, t))
    a = _data(2, 3, 5, seed=7)
    e = float(np.finfo(np.float32).eps) if eps is None else eps
    axes = tuple(range(3 - len(t), 3))
    gam = m.weight.numpy().astype(np.float64)
    ref = lambda v: v / np.sqrt((v * v).mean(axis=axes, keepdims=True) + e) * gam
    out, g, w = _run(m, a)
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=1e-4, atol=1e-5)
    _check_grad(g, _fd(ref, a, w))


@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 4, 3, 3), 2), ((1, 3, 1), 1),
                                          ((3, 4), 4)])
def test_groupnorm(shape, groups):
    c = shape[1]
    m = nn.GroupNorm(groups, c)
    m.weight.set(np.linspace(0.5, 1.5, c))
    m.bias.set(np.linspace(-1, 1, c))
    a = _data(*shape, seed=8)
    cs = (1, c) + (1,) * (len(shape) - 2)

    def ref(v):
        g = v.reshape(shape[0], groups, -1)
        y = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(shape)
        return y * np.linspace(0.5, 1.5, c).reshape(cs) + np.linspace(-1, 1, c).reshape(cs)
    out, g, w = _run(m, a)
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=1e-4, atol=1e-4)
    if shape != (3, 4):     # one channel per group of one element: the variance is 0
        _check_grad(g, _fd(ref, a, w))
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(4, 6)


@pytest.mark.parametrize("shape,out_size", [((2, 3, 6, 4), (3, 2)), ((2, 3, 5, 7), 1),
                                            ((3, 4, 4), (2, None)), ((1, 1, 3, 3), (3, 3))])
def test_adaptive_avg_pool2d(shape, out_size):
    m = nn.AdaptiveAvgPool2d(out_size)
    a = _data(*shape, seed=9)
    h, w_ = shape[-2:]
    o = (out_size, out_size) if isinstance(out_size, int) else out_size
    oh, ow = (h if o[0] is None else o[0]), (w_ if o[1] is None else o[1])
    ref = lambda v: v.reshape(shape[:-2] + (oh, h // oh, ow, w_ // ow)).mean(axis=(-3, -1))
    out, g, w = _run(m, a)
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=1e-5, atol=1e-6)
    _check_grad(g, _fd(ref, a, w))


def test_module_list_dict_named_modules_apply_requires_grad():
    manual_seed(0)
    blocks = nn.ModuleList([nn.Linear(3, 4), nn.ReLU()])
    blocks.append(nn.Linear(4, 2))
    heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 3)})

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks, self.heads = blocks, heads

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.heads["b"](x)
    net = Net()
    assert len(blocks) == 3 and isinstance(blocks[-1], nn.Linear) and len(blocks[:2]) == 2
    assert list(heads) == ["a", "b"] and "a" in heads and len(heads) == 2
    assert [k for k in net.state_dict()] == [
        "blocks.0.weight", "blocks.0.bias", "blocks.2.weight", "blocks.2.bias",
        "heads.a.weight", "heads.a.bias", "heads.b.weight", "heads.b.bias"]
    assert [n for n, _ in net.named_modules()] == ["", "blocks", "blocks.0", "blocks.1",
                                                   "blocks.2", "heads", "heads.a", "heads.b"]
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "ReLU", "Linear", "ModuleList", "Linear", "Linear", "ModuleDict", "Net"]
    x = _data(5, 3)
    s = Session()
    y = net(s.tensor(x))
    h = np.maximum(x @ blocks[0].weight.numpy().T + blocks[0].bias.numpy(), 0)
    h = h @ blocks[2].weight.numpy().T + blocks[2].bias.numpy()
    np.testing.assert_allclose(y.numpy(), h @ heads["b"].weight.numpy().T + heads["b"].bias.numpy(),
                               rtol=1e-5, atol=1e-5)
    net.blocks.requires_grad_(False)
    y.sum().backward()      # recorded before freezing: gradients reach every parameter
    s.step()
    net.zero_grad()
    net(s.tensor(x)).sum().backward()
    assert blocks[0].weight.grad is None and heads["b"].weight.grad is not None
    with pytest.raises(TypeError, match="expected a Module"):
        blocks.append(3)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_module(reduction):
    a, t = _data(3, 4, seed=12), _data(3, 4, seed=13)
    d = a.astype(np.float64) - t
    ref = {"mean": np.mean(d * d), "sum": np.sum(d * d), "none": d * d}[reduction]
    s = Session()
    x = s.tensor(a, requires_grad=True)
    loss = nn.MSELoss(reduction=reduction)(x, t)
    np.testing.assert_allclose(loss.numpy(), ref, rtol=1e-5)
    loss.sum().backward()
    scale = {"mean": 2.0 / a.size, "sum": 2.0, "none": 2.0}[reduction]
    np.testing.assert_allclose(x.grad, scale * d, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"MSELoss: input \(3, 4\) and target \(4, 3\)"):
        nn.MSELoss()(x, _data(4, 3))
    with pytest.raises(ValueError, match="reduction must be"):
        nn.MSELoss(reduction="avg")


def test_cross_entropy_loss_module():
    logits, labels = _data(5, 4, seed=14), np.array([0, 3, 1, 1, 2])
    s = Session()
    got = nn.CrossEntropyLoss()(s.tensor(logits), labels).item()
    z = logits.astype(np.float64)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    assert got == pytest.approx(np.mean(lse - z[np.arange(5), labels]), rel=1e-5)
