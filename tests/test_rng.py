"""Native RNG kernels are bit-exact with the pure-Python reference in torchlean.random."""
import numpy as np
import pytest

import torchlean
from torchlean import random as R
from torchlean._generated import ops

SIZES = [1, 1000, 100003]
KEYS = [0, 1, 0xDEADBEEF, R.key_of(1234, 7), (1 << 64) - 1]


def _np(b):
    return b.to_numpy()


@pytest.mark.parametrize("x", [0, 1, 42, 0x9E3779B97F4A7C15, (1 << 64) - 1])
def test_splitmix64_matches_native(x):
    assert int(torchlean._lib.tl_splitmix64(x)) == R.splitmix64(x)


def test_key_of():
    assert R.key_of(3, 4) == R.splitmix64(7)
    assert R.key_of((1 << 64) - 1, 1) == R.splitmix64(0)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("key", KEYS)
def test_uniform_bits(n, key):
    y = _np(ops.rand_uniform(n=n, key=key))
    ref = R.uniform(n, key)
    assert y.shape == (n,)
    np.testing.assert_array_equal(y.view(np.uint32), ref.view(np.uint32))
    assert y.min() >= 0.0 and y.max() < 1.0


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("key", KEYS[:3])
@pytest.mark.parametrize("p", [0.0, 0.3, 0.9, 1.0])
def test_bernoulli_bits(n, key, p):
    y = _np(ops.bernoulli_mask(n=n, key=key, p=p))
    np.testing.assert_array_equal(y, R.bernoulli(n, key, p))
    if n >= 100000:
        assert abs(y.mean() - p) < 0.01


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("key", KEYS[:3])
def test_normal_bits(n, key):
    y = _np(ops.rand_normal(n=n, key=key, mean=0.5, std=2.0))
    ref = R.normal(n, key, 0.5, 2.0)
    np.testing.assert_array_equal(y.view(np.uint32), ref.view(np.uint32))
    assert np.all(np.isfinite(y))


def test_normal_near_the_double_box_muller():
    """The float32 steps stay within a few roundings of Box-Muller in double."""
    n, key = 100003, 17
    d1 = R._draws(key, 0, n, 2) >> 8
    d2 = R._draws(key, 1, n, 2) >> 8
    u1, u2 = (d1.astype(np.float64) + 1) * 2.0 ** -24, d2.astype(np.float64) * 2.0 ** -24
    want = 0.5 + 2.0 * np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)
    np.testing.assert_allclose(_np(ops.rand_normal(n=n, key=key, mean=0.5, std=2.0)), want,
                               rtol=4e-6, atol=4e-6)


def test_normal_is_mode_independent():
    a = _np(ops.rand_normal(n=4099, key=5, mean=-1.0, std=3.0))
    torchlean.set_exact(True)
    try:
        b = _np(ops.rand_normal(n=4099, key=5, mean=-1.0, std=3.0))
    finally:
        torchlean.set_exact(False)
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_normal_moments():
    z = _np(ops.rand_normal(n=200003, key=99)).astype(np.float64)
    assert abs(z.mean()) < 0.01
    assert abs(z.std() - 1.0) < 0.01


def test_uniform_moments():
    u = _np(ops.rand_uniform(n=200003, key=5)).astype(np.float64)
    assert abs(u.mean() - 0.5) < 0.005
    assert abs(u.var() - 1.0 / 12.0) < 0.002


def test_prefix_independent_of_n():
    """Element i depends only on (key, i): a shorter draw is a prefix of a longer one."""
    a = _np(ops.rand_uniform(n=1000, key=11))
    b = _np(ops.rand_uniform(n=100003, key=11))
    np.testing.assert_array_equal(a, b[:1000])
    a = _np(ops.rand_normal(n=17, key=11))
    b = _np(ops.rand_normal(n=40000, key=11))
    np.testing.assert_array_equal(a, b[:17])


def test_zero_length():
    assert _np(ops.rand_uniform(n=0, key=1)).shape == (0,)


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_bad_prob(p):
    with pytest.raises((ValueError, TypeError), match="bernoulli_mask"):
        ops.bernoulli_mask(n=4, key=1, p=p)


def test_bad_key_and_n():
    with pytest.raises((ValueError, TypeError), match="rand_uniform"):
        ops.rand_uniform(n=4, key=-1)
    with pytest.raises((ValueError, TypeError), match="rand_uniform"):
        ops.rand_uniform(n=-3, key=1)


def test_host_normal_rounds_correctly_for_every_draw():
    """random.normal rounds double log and cos to float32: that is correct rounding only if no
    u1 = k 2^-24 (k = 1..2^24) or u2 = k 2^-24 (k < 2^24) has its true value near a float32
    midpoint. Every one is at least 2^-47.6 (relative) away, far beyond the double error."""
    def margin(v):
        f = v.astype(np.float32)
        halves = [(f.astype(np.float64) + np.nextafter(f, s).astype(np.float64)) / 2
                  for s in (np.float32(np.inf), np.float32(-np.inf))]
        d = np.minimum(np.abs(v - halves[0]), np.abs(v - halves[1]))
        return np.min(d[v != 0] / np.abs(v[v != 0]))
    worst = np.inf
    for lo in range(0, 1 << 24, 1 << 22):
        k = np.arange(lo, lo + (1 << 22), dtype=np.float64)
        worst = min(worst, margin(np.log((k + 1) * 2.0 ** -24)), margin(R._cos_2pi(k * 2.0 ** -24)))
    assert worst > 2.0 ** -47.7
