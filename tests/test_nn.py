import numpy as np
import pytest

import torchlean as tl
from torchlean import nn, optim
from torchlean.session import Session, manual_seed


def test_checkpoint_roundtrip_format(tmp_path):
    import json, struct
    d = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(1, np.float32)}
    p = tmp_path / "m.safetensors"
    nn.save_file(d, str(p))
    raw = p.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    assert hdr["a"]["dtype"] == "F32" and hdr["a"]["shape"] == [2, 3]
    out = nn.load_file(str(p))
    for k in d:
        np.testing.assert_array_equal(out[k], d[k])


def test_init_is_seeded_and_bit_identical():
    manual_seed(3)
    a = nn.init.kaiming_uniform((4, 5))
    manual_seed(3)
    b = nn.init.kaiming_uniform((4, 5))
    np.testing.assert_array_equal(a, b)
    assert np.abs(a).max() <= np.sqrt(6 / 5)
    n = nn.init.normal((10000,))
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05


def test_module_tree_and_state_dict(tmp_path):
    manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    names = [k for k, _ in m.named_parameters()]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"]
    m.save(str(tmp_path / "w.safetensors"))
    manual_seed(1)
    m2 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    m2.load_state_dict(str(tmp_path / "w.safetensors"))
    for (k, a), (_, b) in zip(m.state_dict().items(), m2.state_dict().items()):
        np.testing.assert_array_equal(a, b)
    assert m.eval().training is False and m._modules["0"].training is False


def test_mlp_trains():
    """Needs matmul/transpose2d/mse_loss from the merged op sections."""
    manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = optim.Adam(m.parameters(), lr=0.05)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 2)).astype(np.float32)
    Y = (X[:, :1] * X[:, 1:]).astype(np.float32)
    s = Session()
    first = last = None
    for i in range(100):
        loss = nn.functional.mse_loss(m(s.tensor(X)), s.tensor(Y))
        opt.zero_grad(); loss.backward(); opt.step()
        last = loss.item(); first = first if first is not None else last
        s.step()
    assert last < 0.5 * first


def test_cross_entropy_matches_numpy():
    s = Session()
    rng = np.random.default_rng(1)
    z = rng.standard_normal((4, 5)).astype(np.float32)
    y = np.array([0, 4, 2, 2])
    t = s.tensor(z, requires_grad=True)
    loss = nn.functional.cross_entropy(t, y)
    lp = z - np.log(np.exp(z).sum(1, keepdims=True))
    assert loss.item() == pytest.approx(-lp[np.arange(4), y].mean(), rel=1e-5)
    loss.backward()
    g = np.exp(lp); g[np.arange(4), y] -= 1
    np.testing.assert_allclose(t.grad, g / 4, atol=1e-5)


# ----------------------------------------------------------------- BatchNorm2d / Dropout semantics
def _bn_ref(xs, momentum, eps, gamma, beta):
    """float64 PyTorch-semantics reference: train-mode outputs per step and the running stats."""
    c = xs[0].shape[-3]
    rm, rv, outs = np.zeros(c), np.ones(c), []
    for t, x in enumerate(xs, 1):
        x = x.astype(np.float64)
        axes = (0, 2, 3) if x.ndim == 4 else (1, 2)
        shp = (c, 1, 1)
        mu, var = x.mean(axes), x.var(axes)
        n = x.size // c
        outs.append((x - mu.reshape(shp)) / np.sqrt(var.reshape(shp) + eps) * gamma.reshape(shp)
                    + beta.reshape(shp))
        m = 1.0 / t if momentum is None else momentum
        rm = (1 - m) * rm + m * mu
        rv = (1 - m) * rv + m * var * n / (n - 1)
    return outs, rm, rv


@pytest.mark.parametrize("momentum,shape", [(0.1, (4, 3, 5, 6)), (0.3, (3, 2, 3)),
                                            (None, (2, 3, 1, 5))])
def test_batchnorm_running_stats_match_reference(momentum, shape):
    manual_seed(0)
    c = shape[-3]
    bn = nn.BatchNorm2d(c, momentum=momentum)
    rng = np.random.default_rng(1)
    gamma, beta = rng.uniform(0.5, 1.5, c), rng.standard_normal(c)
    bn.weight.set(gamma); bn.bias.set(beta)
    xs = [(rng.standard_normal(shape) * (1 + k) + k).astype(np.float32) for k in range(4)]
    outs, rm, rv = _bn_ref(xs, momentum, bn.eps, gamma, beta)
    s = Session()
    for x, ref in zip(xs, outs):
        np.testing.assert_allclose(bn(s.tensor(x)).numpy(), ref, rtol=1e-4, atol=1e-4)
        s.step()
    np.testing.assert_allclose(np.asarray(bn.running_mean), rm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(bn.running_var), rv, rtol=1e-5, atol=1e-6)
    assert float(np.asarray(bn.num_batches_tracked)) == 4

    # eval: normalise with the running stats; gradients still reach x, gamma and beta
    bn.eval()
    x = xs[0]
    xt = s.tensor(x, requires_grad=True)
    y = bn(xt)
    shp = (c, 1, 1)
    k = gamma / np.sqrt(rv + bn.eps)
    ref = (x - rm.reshape(shp)) * k.reshape(shp) + beta.reshape(shp)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4, atol=1e-4)
    y.sum().backward()
    np.testing.assert_allclose(xt.grad, np.broadcast_to(k.reshape(shp), x.shape), rtol=1e-5)
    axes = (0, 2, 3) if x.ndim == 4 else (1, 2)
    np.testing.assert_allclose(bn.bias.grad, np.full(c, x.size // c), rtol=1e-6)
    np.testing.assert_allclose(bn.weight.grad, ((x - rm.reshape(shp)) / np.sqrt(
        rv.reshape(shp) + bn.eps)).sum(axes), rtol=1e-4, atol=1e-4)
    s.step()
    # eval does not move the running stats
    np.testing.assert_allclose(np.asarray(bn.running_mean), rm, rtol=1e-5, atol=1e-6)


def test_batchnorm_train_vs_eval_and_buffers_not_trained():
    manual_seed(0)
    bn = nn.BatchNorm2d(2)
    assert [k for k, _ in bn.named_parameters()] == ["weight", "bias"]
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"]
    s = Session()
    x = (np.random.default_rng(0).standard_normal((3, 2, 4, 4)) * 3 + 2).astype(np.float32)
    y_train = bn(s.tensor(x)).numpy()
    bn.eval()
    y_eval = bn(s.tensor(x)).numpy()
    s.step()
    assert np.abs(y_train.mean((0, 2, 3))).max() < 1e-5          # batch stats
    assert np.abs(y_eval - y_train).max() > 0.1                  # running stats differ
    # training under no_grad still updates the running stats (PyTorch does too)
    bn.train()
    before = np.asarray(bn.running_mean).copy()
    with tl.no_grad():
        bn(s.tensor(x))
    s.step()
    assert not np.array_equal(before, np.asarray(bn.running_mean))
    # an optimizer over model.parameters() never touches the buffers
    opt = optim.SGD(bn.parameters(), lr=0.1)
    rv = np.asarray(bn.running_var).copy()
    (bn(s.tensor(x)) * s.tensor(x)).sum().backward()
    opt.step(); s.step()
    assert float(np.asarray(bn.num_batches_tracked)) == 3
    assert not np.array_equal(rv, np.asarray(bn.running_var))


def test_batchnorm_checkpoint_roundtrip(tmp_path):
    manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU())
    s = Session()
    rng = np.random.default_rng(2)
    for _ in range(3):
        model(s.tensor(rng.standard_normal((2, 1, 5, 5)).astype(np.float32)))
        s.step()
    path = str(tmp_path / "bn.safetensors")
    model.save(path)
    sd = nn.load_file(path)
    assert {"1.running_mean", "1.running_var", "1.num_batches_tracked"} <= set(sd)
    manual_seed(5)
    other = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU())
    other.load_state_dict(path)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(other.state_dict()[k], v)
    x = rng.standard_normal((2, 1, 5, 5)).astype(np.float32)
    model.eval(); other.eval()
    np.testing.assert_array_equal(model(s.tensor(x)).numpy(), other(s.tensor(x)).numpy())
    # training continues from the loaded counter (momentum=None would depend on it)
    model.train(); other.train()
    model(s.tensor(x)); other(s.tensor(x))
    s.step()
    np.testing.assert_array_equal(np.asarray(model[1].running_var),
                                  np.asarray(other[1].running_var))
    with pytest.raises(KeyError, match="running_var"):
        other.load_state_dict({k: v for k, v in sd.items() if k != "1.running_var"})
    with pytest.raises(KeyError, match="unexpected"):
        other.load_state_dict(dict(sd, extra=np.zeros(1, np.float32)))
    missing, unexpected = other.load_state_dict(dict(sd, extra=np.zeros(1)), strict=False)
    assert missing == [] and unexpected == ["extra"]


def test_batchnorm_bad_inputs():
    bn = nn.BatchNorm2d(3)
    s = Session()
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected input \(N, 3, H, W\)"):
        bn(s.tensor(np.ones((2, 4, 2, 2))))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(s.tensor(np.ones((1, 3, 1, 1))))
    bn.eval()
    assert bn(s.tensor(np.ones((1, 3, 1, 1)))).shape == (1, 3, 1, 1)
    with pytest.raises(ValueError, match="momentum"):
        nn.BatchNorm2d(3, momentum=2.0)


def test_batchnorm_without_running_stats_or_affine():
    bn = nn.BatchNorm2d(2, affine=False, track_running_stats=False)
    assert bn.parameters() == [] and bn.state_dict() == {}
    s = Session()
    x = np.random.default_rng(3).standard_normal((2, 2, 3, 3)).astype(np.float32) + 4
    bn.eval()   # no running stats: batch statistics in eval too (PyTorch)
    y = bn(s.tensor(x)).numpy()
    ref = (x - x.mean((0, 2, 3), keepdims=True)) / np.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_dropout_train_eval_semantics():
    manual_seed(0)
    d = nn.Dropout(0.25)
    s = Session()
    x = np.random.default_rng(0).uniform(1, 2, (64, 64)).astype(np.float32)
    y = d(s.tensor(x)).numpy()
    kept = y != 0
    assert 0.7 < kept.mean() < 0.8
    np.testing.assert_allclose(y[kept], x[kept] / 0.75, rtol=1e-6)
    d.eval()
    np.testing.assert_array_equal(d(s.tensor(x)).numpy(), x)
    d.train()
    assert np.all(nn.Dropout(1.0)(s.tensor(x)).numpy() == 0)
    np.testing.assert_array_equal(nn.Dropout(0.0)(s.tensor(x)).numpy(), x)
    with pytest.raises(ValueError, match="p must be in"):
        nn.Dropout(1.5)
    # model.eval() reaches nested modules
    m = nn.Sequential(nn.Linear(64, 8), nn.Dropout(0.5))
    m.eval()
    assert m[1].training is False
    s.step()


def test_conv_transpose_module_shapes_and_init_bound():
    manual_seed(0)
    m = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    assert m.weight.shape == (2, 3, 3, 3) and m.bias.shape == (3,)
    assert np.abs(m.weight.numpy()).max() <= 1 / np.sqrt(3 * 9)      # PyTorch's fan-in: cout*k*k
    s = Session()
    assert m(s.tensor(np.ones((1, 2, 4, 4)))).shape == (1, 3, 7, 7)
    s.step()
