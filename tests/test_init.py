"""nn.init's initialisers: fans and gains by closed forms, distributions by their statistics
(tolerances from the sample size), structure (eye, dirac, orthogonal, sparse) exactly, draws
from the seeded stream (same seed, same values; generator= leaves the global stream alone),
writing into the parameter in place and returning it."""
import math
import warnings

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn
from torchlean.nn import init


def _p(*shape):
    return nn.Parameter(np.full(shape, 7.0, dtype=np.float32))


def _v(p):
    return np.asarray(p.numpy(), dtype=np.float64)


def _check_moments(x, mean, var, what):
    """Sample mean and variance within 6 standard errors (4th moment of the law <= 3 var^2
    for the laws tested: normal, uniform, truncated normal)."""
    n = x.size
    assert abs(x.mean() - mean) <= 6 * math.sqrt(var / n) + 1e-7, (what, x.mean(), mean)
    assert abs(x.var() - var) <= 6 * math.sqrt(2 * var ** 2 / n) + 1e-7, (what, x.var(), var)


# ------------------------------------------------------------------ gains and fans

@pytest.mark.parametrize("name,param,gain", [
    ("linear", None, 1.0), ("conv2d", None, 1.0), ("conv_transpose3d", None, 1.0),
    ("sigmoid", None, 1.0), ("tanh", None, 5 / 3), ("relu", None, math.sqrt(2)),
    ("leaky_relu", None, math.sqrt(2 / (1 + 0.01 ** 2))), ("leaky_relu", 0.2,
                                                           math.sqrt(2 / 1.04)),
    ("leaky_relu", 0, math.sqrt(2)), ("selu", None, 0.75)])
def test_calculate_gain_closed_forms(name, param, gain):
    assert init.calculate_gain(name, param) == pytest.approx(gain, rel=1e-15)


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity softsign"):
        init.calculate_gain("softsign")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", "x")


@pytest.mark.parametrize("shape,fans", [((5, 3), (3, 5)), ((8, 4, 3, 3), (36, 72)),
                                        ((2, 7, 5), (35, 10)), ((1, 1), (1, 1)),
                                        ((6, 2, 1, 3, 2), (12, 36))])
def test_fan_in_and_fan_out(shape, fans):
    assert init._calculate_fan_in_and_fan_out(_p(*shape)) == fans
    assert init._calculate_correct_fan(_p(*shape), "fan_out") == fans[1]
    assert init._calculate_correct_fan(_p(*shape), "FAN_IN") == fans[0]


def test_fans_need_two_dims_and_a_known_mode():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(_p(5))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(_p(3, 3), mode="fan_avg")


# ------------------------------------------------------------------ distributions

def test_uniform_bounds_and_moments_and_in_place():
    p = _p(301, 67)
    out = init.uniform_(p, -0.5, 1.5)
    assert out is p
    x = _v(p)
    assert x.min() >= -0.5 and x.max() < 1.5
    _check_moments(x, 0.5, 4 / 12, "uniform")


def test_normal_moments():
    x = _v(init.normal_(_p(257, 101), mean=0.3, std=2.0))
    _check_moments(x, 0.3, 4.0, "normal")


def test_xavier_and_kaiming_match_their_closed_forms():
    shape = (64, 33, 3, 3)
    fan_in, fan_out = 33 * 9, 64 * 9
    a = 1.7 * math.sqrt(6 / (fan_in + fan_out))
    x = _v(init.xavier_uniform_(_p(*shape), gain=1.7))
    assert np.abs(x).max() <= a and np.abs(x).max() > 0.99 * a
    _check_moments(x, 0.0, a * a / 3, "xavier_uniform")
    x = _v(init.xavier_normal_(_p(*shape)))
    _check_moments(x, 0.0, 2 / (fan_in + fan_out), "xavier_normal")
    bound = math.sqrt(2 / (1 + 0.2 ** 2)) * math.sqrt(3 / fan_out)
    x = _v(init.kaiming_uniform_(_p(*shape), a=0.2, mode="fan_out"))
    assert np.abs(x).max() <= bound
    _check_moments(x, 0.0, bound * bound / 3, "kaiming_uniform")
    x = _v(init.kaiming_normal_(_p(*shape), nonlinearity="relu"))
    _check_moments(x, 0.0, 2 / fan_in, "kaiming_normal")


def test_trunc_normal_bounds_and_truncated_moments():
    mean, std, a, b = 0.5, 1.0, -0.5, 2.5
    x = _v(init.trunc_normal_(_p(400, 301), mean=mean, std=std, a=a, b=b))
    assert x.min() >= a and x.max() <= b
    al, be = (a - mean) / std, (b - mean) / std
    phi = lambda t: math.exp(-t * t / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    Z = 0.5 * (math.erf(be / math.sqrt(2)) - math.erf(al / math.sqrt(2)))
    m = mean + std * (phi(al) - phi(be)) / Z
    v = std ** 2 * (1 + (al * phi(al) - be * phi(be)) / Z - ((phi(al) - phi(be)) / Z) ** 2)
    _check_moments(x, m, v, "trunc_normal")
    y = _v(init.trunc_normal_(_p(100, 100), std=0.02))     # ViT's use: bounds far out
    _check_moments(y, 0.0, 0.02 ** 2, "trunc_normal std=0.02")


def test_trunc_normal_quantiles_against_the_cdf():
    x = np.sort(_v(init.trunc_normal_(_p(20000), a=-1.0, b=0.5)))
    cdf = lambda t: 0.5 * (1 + math.erf(t / math.sqrt(2)))  # noqa: E731
    lo, hi = cdf(-1.0), cdf(0.5)
    for q in (0.1, 0.5, 0.9):
        t = x[int(q * x.size)]
        assert abs((cdf(t) - lo) / (hi - lo) - q) < 0.02


# ------------------------------------------------------------------ structure

def test_constant_ones_zeros_eye():
    np.testing.assert_array_equal(_v(init.constant_(_p(2, 3), 0.25)), np.full((2, 3), 0.25))
    np.testing.assert_array_equal(_v(init.ones_(_p(4))), np.ones(4))
    np.testing.assert_array_equal(_v(init.zeros_(_p(1, 5))), np.zeros((1, 5)))
    np.testing.assert_array_equal(_v(init.eye_(_p(3, 5))), np.eye(3, 5))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.eye_(_p(2, 2, 2))


def test_dirac_is_the_identity_convolution():
    w = _v(init.dirac_(_p(4, 3, 5)))
    for o in range(4):
        for i in range(3):
            for k in range(5):
                assert w[o, i, k] == (1.0 if (o == i and k == 2) else 0.0)
    g = _v(init.dirac_(_p(6, 2, 3, 3), groups=3))
    assert g.sum() == 6 and all(g[2 * grp + d, d, 1, 1] == 1 for grp in range(3)
                                for d in range(2))
    with pytest.raises(ValueError, match="3, 4, or 5 dimensions"):
        init.dirac_(_p(3, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        init.dirac_(_p(5, 2, 3), groups=2)


@pytest.mark.parametrize("shape", [(5, 9), (9, 5), (6, 2, 3), (4, 4)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    w = _v(init.orthogonal_(_p(*shape), gain=2.0)).reshape(shape[0], -1) / 2.0
    r, c = w.shape
    gram = w @ w.T if r <= c else w.T @ w
    np.testing.assert_allclose(gram, np.eye(min(r, c)), atol=2e-6)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(_p(3))


def test_sparse_zeroes_the_right_count_per_column():
    w = _v(init.sparse_(_p(10, 40), sparsity=0.25, std=0.5))
    assert np.all((w == 0).sum(axis=0) >= 3)                # ceil(0.25 * 10) rows each
    nz = w[w != 0]
    assert nz.size >= 40 * 7 - 2
    _check_moments(nz, 0.0, 0.25, "sparse")
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.sparse_(_p(3), 0.5)


# ------------------------------------------------------------------ the stream

def test_same_seed_same_values_and_generator_independence():
    tl.manual_seed(5)
    a = _v(init.kaiming_normal_(_p(7, 3)))
    tl.manual_seed(5)
    b = _v(init.kaiming_normal_(_p(7, 3)))
    np.testing.assert_array_equal(a, b)
    before = tl.get_rng_state().copy()
    g1 = _v(init.uniform_(_p(4, 4), generator=tl.Generator().manual_seed(1)))
    np.testing.assert_array_equal(tl.get_rng_state(), before)
    g2 = _v(init.uniform_(_p(4, 4), generator=tl.Generator().manual_seed(1)))
    np.testing.assert_array_equal(g1, g2)


def test_init_changes_what_the_model_computes():
    lin = nn.Linear(3, 2)
    init.zeros_(lin.weight)
    init.constant_(lin.bias, 1.5)
    y = lin(tl.tensor(np.ones((4, 3), dtype=np.float32))).detach().numpy()
    np.testing.assert_array_equal(y, np.full((4, 2), 1.5))


def test_zero_element_kaiming_is_a_warned_no_op():
    p = nn.Parameter(np.zeros((0, 3), dtype=np.float32))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert init.kaiming_uniform_(p) is p
    assert any("zero-element" in str(x.message) for x in w)


def test_modules_apply_with_custom_init():
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def weights_init(m):
        if isinstance(m, nn.Linear):
            init.xavier_uniform_(m.weight)
            init.zeros_(m.bias)
    net.apply(weights_init)
    for m in (net[0], net[2]):
        assert np.all(_v(m.bias) == 0)
        fi, fo = m.weight.shape[1], m.weight.shape[0]
        assert np.abs(_v(m.weight)).max() <= math.sqrt(6 / (fi + fo))
