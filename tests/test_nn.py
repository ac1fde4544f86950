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
