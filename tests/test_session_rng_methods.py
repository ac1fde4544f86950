"""Tensor method forwarding and the session's RNG: one host reference, bit-exact with kernels."""
import numpy as np
import pytest

from torchlean import nn, random
from torchlean._generated import ops
from torchlean.session import Session, manual_seed


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("name", ["leaf", "drop_value", "release", "nodes", "_input",
                                  "no_such_op", "_record"])
def test_getattr_forwards_registry_tape_ops_only(name):
    s = Session()
    x = np.array([-1.5, 2.0, 0.25], np.float32)
    y = s.tensor(x) * 2.0
    before = len(s.tape)
    with pytest.raises(AttributeError, match=f"'Tensor' object has no attribute '{name}'"):
        getattr(y, name)
    assert len(s.tape) == before                       # nothing recorded
    np.testing.assert_array_equal(y.numpy(), 2.0 * x)  # y's buffer survives
    np.testing.assert_array_equal(y.relu().numpy(), np.maximum(2.0 * x, 0))
    np.testing.assert_array_equal(y.scale(c=0.5).numpy(), x)


@pytest.mark.parametrize("n", [1, 7, 1001])
def test_host_normal_and_uniform_equal_the_kernels_bit_for_bit(n):
    for key in (0, 3, random.key_of(9, 2), (1 << 64) - 1):
        np.testing.assert_array_equal(_bits(random.normal(n, key, -0.25, 3.0)),
                                      _bits(ops.rand_normal(n=n, key=key, mean=-0.25,
                                                            std=3.0).to_numpy()))
        np.testing.assert_array_equal(_bits(random.uniform(n, key)),
                                      _bits(ops.rand_uniform(n=n, key=key).to_numpy()))


def test_init_draws_the_kernels_numbers():
    manual_seed(11)
    w = nn.init.normal((5, 3), 0.5, 2.0)
    u = nn.init.uniform((4,), -2.0, 1.0)
    ref_n = ops.rand_normal(n=15, key=random.key_of(11, 0), mean=0.5, std=2.0).to_numpy()
    ref_u = ops.rand_uniform(n=4, key=random.key_of(11, 1)).to_numpy()
    assert w.shape == (5, 3) and w.dtype == np.float32
    np.testing.assert_array_equal(_bits(w.reshape(-1)), _bits(ref_n))
    np.testing.assert_array_equal(u, np.float32(-2.0) + ref_u * np.float32(3.0))


def test_session_draws_follow_the_seeded_stream():
    manual_seed(21)
    s = Session()
    u = s.rand_uniform((3, 5)).numpy()
    m = s.bernoulli_mask((2, 7), 0.3).numpy()
    assert u.shape == (3, 5) and m.shape == (2, 7)
    np.testing.assert_array_equal(_bits(u.reshape(-1)), _bits(random.uniform(15, random.key_of(21, 0))))
    np.testing.assert_array_equal(m.reshape(-1), random.bernoulli(14, random.key_of(21, 1), 0.3))
    assert random.next_key() == random.key_of(21, 2)


@pytest.mark.parametrize("mean,std", [(1.0 + 2.0 ** -24, 1e-12), (0.0, 0.0), (-3.0, 1e-30)])
def test_host_normal_rounds_mean_and_std_to_float32_first(mean, std):
    """As the kernel: mean + std z in float32 after rounding mean and std (1 + 2^-24 is 1)."""
    host = random.normal(999, 17, mean, std)
    kern = ops.rand_normal(n=999, key=17, mean=mean, std=std).to_numpy()
    np.testing.assert_array_equal(_bits(host), _bits(kern))
    np.testing.assert_array_equal(host, np.full(999, np.float32(mean)))
