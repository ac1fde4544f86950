"""Exact mode for the pointwise families (elementwise, optim, rng, index, views), bit for bit.

Each kernel is checked two ways, at sizes past a vector width and a TLM_CHUNK (256) and with
size 1, NaN and inf: against an independent float64 NumPy reference with a tolerance, and
against a NumPy emulation of the canonical operation order (float32 NumPy operations round
like IEEE float32, one operation at a time), compared bit for bit. Transcendental functions
come from the test shim of tl_math.h (tests/test_exact_math.py measures them against libm), so
the emulation checks that a kernel composes them in the stated order and calls nothing else.
On CUDA the same tests run against the GPU kernels: passing on both backends means stub and
CUDA agree bit for bit.
"""
import numpy as np
import pytest

import torchlean as tl
from torchlean import random as tlr
from torchlean._generated import ops
from torchlean.buffer import AnyBuffer

from test_exact_math import _rule4_reference, evaluate, shim  # noqa: F401  (shim: fixture)

F = np.float32


@pytest.fixture(params=[False, True], ids=["default", "exact"])
def mode(request):
    """Run a test in default and in exact mode (exact implies deterministic)."""
    tl.set_exact(request.param)
    yield request.param
    tl.set_exact(False)


@pytest.fixture
def exact():
    tl.set_exact(True)
    yield
    tl.set_exact(False)


def up(a):
    return AnyBuffer.from_numpy(np.asarray(a, F))


def run(fn, *arrays, **attrs):
    bufs = [up(a) for a in arrays]
    out = fn(*bufs, **attrs)
    got = out.to_numpy()
    out.buf.release()
    for b in bufs:
        b.buf.release()
    return got


def same_bits(got, want):
    got, want = np.asarray(got, F), np.asarray(want, F)
    assert got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), "NaN positions differ"
    bad = np.flatnonzero((got.view(np.uint32) != want.view(np.uint32)) & ~nan)
    assert bad.size == 0, f"{bad.size} elements differ, first at {bad[0]}: {got.flat[bad[0]]!r} vs {want.flat[bad[0]]!r}"


def inputs(n, seed, lo=-6.0, hi=6.0):
    """n values in [lo, hi) with NaN, +-inf, +-0 and size-1 edge cases mixed in."""
    x = np.random.default_rng(seed).uniform(lo, hi, n).astype(F)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], F)
    if n >= 16:
        x[3:3 + len(specials)] = specials
    return x


SIZES = [1, 7, 1031]

# ---------------------------------------------------------------- elementwise

UNARY = {
    # name: (canonical function of the shim, float64 reference, domain)
    "exp": ("exp", np.exp, (-80, 80)),
    "log": ("log", np.log, (0.01, 50)),
    "tanh": ("tanh", np.tanh, (-8, 8)),
    "sigmoid": ("sigmoid", lambda x: np.exp(-np.logaddexp(0, -x)), (-30, 30)),
    "softplus": ("softplus", lambda x: np.logaddexp(0, x), (-30, 30)),
    "gelu": ("gelu", None, (-8, 8)),
    "sqrt": ("sqrt", np.sqrt, (0, 100)),
}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_kernels_are_the_canonical_functions(shim, mode, name, n):
    fn, ref, (lo, hi) = UNARY[name]
    x = inputs(n, sum(map(ord, name)), lo, hi)
    with np.errstate(all="ignore"):
        got = run(getattr(ops, name), x)
        same_bits(got, evaluate(shim, fn, x))  # one formula in every mode
        if ref is not None:
            fin = np.isfinite(x)
            want = ref(x[fin].astype(np.float64))
            np.testing.assert_allclose(got[fin], want, rtol=3e-7, atol=1e-37)


def test_sigmoid_and_log_equal_tl_math_on_every_251st_float(shim, mode):
    """The stub restates tlm_sigmoid and tlm_log in vectorisable loops: same bits over the
    float32 range (every 251st bit pattern, NaNs and infinities included)."""
    x = np.arange(0, 2 ** 32, 251, dtype=np.uint64).astype(np.uint32).view(F)
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45], F)])
    want = evaluate(shim, "sigmoid", x)
    same_bits(run(ops.sigmoid, x), want)
    g = np.full(x.shape, 0.75, F)
    same_bits(run(ops.softplus_backward, x, g), g * want)
    same_bits(run(ops.log, x), evaluate(shim, "log", x))


def test_binary_and_linear_kernels_follow_ieee_order(mode):
    rng = np.random.default_rng(1)
    a, b = inputs(1031, 2), inputs(1031, 3)
    b[10] = 0.0
    with np.errstate(all="ignore"):
        same_bits(run(ops.add, a, b), a + b)
        same_bits(run(ops.sub, a, b), a - b)
        same_bits(run(ops.mul, a, b), a * b)
        same_bits(run(ops.div, a, b), a / b)
        same_bits(run(ops.reciprocal, b), F(1) / b)
        c = 0.3
        same_bits(run(ops.scale, a, c=c), F(c) * a)
        ab = [up(a), up(b)]
        y = ops.axpy(*ab, c=c)
        same_bits(y.to_numpy(), a + F(c) * b)        # a + (c b): one product, one sum
        for buf in ab + [y]:
            buf.buf.release()
        x = rng.uniform(0.1, 4, 1031).astype(F)
        g = rng.standard_normal(1031).astype(F)
        same_bits(run(ops.sqrt_backward, x, g), (g * F(0.5)) / np.sqrt(x))
        same_bits(run(ops.sigmoid_backward, x, g), (g * x) * (F(1) - x))
        same_bits(run(ops.tanh_backward, x, g), g * (F(1) - x * x))


def test_backward_kernels_compose_the_canonical_functions(shim, mode):
    rng = np.random.default_rng(4)
    x = inputs(1031, 5, -12, 12)
    x[20] = 90.0
    g = rng.standard_normal(1031).astype(F)
    eps = 1e-6
    with np.errstate(all="ignore"):
        sig, sp = evaluate(shim, "sigmoid", x), evaluate(shim, "softplus", x)
        same_bits(run(ops.gelu_backward, x, g), g * evaluate(shim, "gelu_grad", x))
        same_bits(run(ops.softplus_backward, x, g), g * sig)
        same_bits(run(ops.safe_log, x, eps=eps), evaluate(shim, "log", sp + F(eps)))
        same_bits(run(ops.safe_log_backward, x, g, eps=eps), (g * sig) / (sp + F(eps)))
        fin = np.isfinite(x)
        x64 = x[fin].astype(np.float64)
        sp64 = np.logaddexp(0, x64)
        np.testing.assert_allclose(run(ops.safe_log, x, eps=eps)[fin], np.log(sp64 + eps), rtol=1e-6,
                                   atol=1e-6)


# ---------------------------------------------------------------- optimizer steps

def _powi(b, e):
    """tlm_powi_d: binary powering in double, square and multiply from the low bit."""
    r, x = 1.0, float(b)
    while e > 0:
        if e & 1:
            r = r * x
        x = x * x
        e >>= 1
    return r


@pytest.mark.parametrize("decoupled", [False, True])
@pytest.mark.parametrize("step", [1, 7, 1000])
def test_adam_step_bits(mode, decoupled, step):
    n, rng = 1031, np.random.default_rng(step)
    p, g = rng.standard_normal(n).astype(F), rng.standard_normal(n).astype(F)
    m = (rng.standard_normal(n) * 0.1).astype(F)
    v = (rng.uniform(0, 0.1, n)).astype(F)
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01
    bufs = [up(a) for a in (p, g, m, v)]
    ops.adam_step(*bufs, lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd, decoupled=decoupled,
                  step=step)
    got = [b.to_numpy() for b in bufs]
    for b in bufs:
        b.buf.release()
    c1 = F(1.0 / (1.0 - _powi(b1, step)))
    c2 = F(1.0 / (1.0 - _powi(b2, step)))
    if decoupled:
        pv, gv = p * F(1.0 - lr * wd), g
    else:
        pv, gv = p, g + F(wd) * p
    mv = F(b1) * m + (F(1) - F(b1)) * gv
    vv = F(b2) * v + ((F(1) - F(b2)) * gv) * gv
    pn = pv - (F(lr) * (mv * c1)) / (np.sqrt(vv * c2) + F(eps))
    same_bits(got[2], mv)
    same_bits(got[3], vv)
    same_bits(got[0], pn)
    # float64 Adam with libm's pow
    g64 = g.astype(np.float64) + (0 if decoupled else wd * p.astype(np.float64))
    m64 = b1 * m + (1 - b1) * g64
    v64 = b2 * v + (1 - b2) * g64 * g64
    p64 = p * (1 - lr * wd if decoupled else 1.0)
    p64 = p64 - lr * (m64 / (1 - b1 ** step)) / (np.sqrt(v64 / (1 - b2 ** step)) + eps)
    np.testing.assert_allclose(got[0], p64, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_step_bits(mode, nesterov):
    n, rng = 1031, np.random.default_rng(9)
    p, g, buf = (rng.standard_normal(n).astype(F) for _ in range(3))
    lr, mu, damp, wd = 0.05, 0.9, 0.1, 1e-3
    bufs = [up(a) for a in (p, g, buf)]
    ops.sgd_step(*bufs, lr=lr, momentum=mu, dampening=damp, weight_decay=wd, nesterov=nesterov)
    got = [b.to_numpy() for b in bufs]
    for b in bufs:
        b.buf.release()
    d = g + F(wd) * p
    bn = F(mu) * buf + F(1 - F(damp)) * d
    d = d + F(mu) * bn if nesterov else bn
    same_bits(got[2], bn)
    same_bits(got[0], p - F(lr) * d)


# ---------------------------------------------------------------- rng

def _draws(key, n):
    d1 = tlr._draws(key, 0, n, 2) >> 8
    d2 = tlr._draws(key, 1, n, 2) >> 8
    return (d1 + 1).astype(F) * F(2.0 ** -24), d2.astype(F) * F(2.0 ** -24)


@pytest.mark.parametrize("n", [1, 5, 4099])
def test_rand_normal_is_canonical_box_muller(shim, mode, n):
    key, mean, std = 0x1234_5678_9ABC, 0.5, 2.0
    y = ops.rand_normal(n=n, key=key, mean=mean, std=std)
    got = y.to_numpy()
    y.buf.release()
    u1, u2 = _draws(key, n)
    z = np.sqrt(F(-2) * evaluate(shim, "log", u1)) * evaluate(shim, "cos_2pi", u2)
    same_bits(got, F(mean) + F(std) * z)
    want = mean + std * np.sqrt(-2 * np.log(u1.astype(np.float64))) * np.cos(2 * np.pi * u2.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_uniform_and_bernoulli_are_mode_independent(exact):
    u = ops.rand_uniform(n=1031, key=5)
    same_bits(u.to_numpy(), tlr.uniform(1031, 5))
    u.buf.release()


# ---------------------------------------------------------------- views: sum_to

def _sum_to_reference(x, shape):
    """Rule 4 per output over its sources in increasing x index (x right-aligned with shape)."""
    x = np.asarray(x, F)
    full = (1,) * (x.ndim - len(shape)) + tuple(shape)
    axes = tuple(i for i, (a, b) in enumerate(zip(x.shape, full)) if b == 1 and a != 1)
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, kept + list(axes))       # summed axes last, in order: x index order
    flat = moved.reshape(int(np.prod([x.shape[i] for i in kept], dtype=np.int64)), -1)
    out = np.array([_rule4_reference(row) for row in flat], F)
    return out.reshape(shape)


SUM_TO_CASES = [
    ((600, 7), (7,)),           # column sums over more than two chunks
    ((3, 700), (3, 1)),         # row sums
    ((1000,), (1,)),            # everything into one value
    ((5, 300, 4), (1, 300, 1)),  # outer and inner groups summed around a kept one
    ((2, 3, 130, 2), (3, 1, 1)),  # two summed groups feed one output: 520 sources
    ((257, 1, 3), (1, 3)),
    ((1, 1), (1,)),
]


@pytest.mark.parametrize("xshape, shape", SUM_TO_CASES)
def test_sum_to_exact_is_rule_4_per_output(exact, xshape, shape):
    rng = np.random.default_rng(len(xshape) * 100 + xshape[0])
    x = (rng.standard_normal(xshape) * np.exp(rng.uniform(-6, 6, xshape))).astype(F)
    got = run(ops.sum_to, x, shape=shape)
    same_bits(got, _sum_to_reference(x, shape))
    axes = tuple(i for i, (a, b) in enumerate(zip(x.shape, (1,) * (x.ndim - len(shape)) + shape)) if b == 1)
    want = x.astype(np.float64).sum(axis=axes).reshape(shape)
    scale = np.abs(x.astype(np.float64)).sum(axis=axes).reshape(shape)
    assert np.all(np.abs(got - want) <= 1e-6 * scale + 1e-30)


def test_sum_to_exact_propagates_nan_and_inf(exact):
    x = np.ones((600, 3), F)
    x[10, 0], x[300, 1], x[5, 2], x[599, 2] = np.nan, np.inf, np.inf, -np.inf
    got = run(ops.sum_to, x, shape=(3,))
    assert np.isnan(got[0]) and got[1] == np.inf and np.isnan(got[2])


# ---------------------------------------------------------------- index: scatter-add order

def test_scatter_add_duplicates_accumulate_in_index_order(mode):
    """Exact mode (and the stub always): duplicates add in index order, bit for bit. CUDA's
    default mode adds them with atomics, in no fixed order: there only the float64 sum holds."""
    rng = np.random.default_rng(11)
    rows, cols, k = 5, 300, 900
    x = rng.standard_normal((rows, cols)).astype(F)
    v = (rng.standard_normal((k, cols)) * np.exp(rng.uniform(-8, 8, (k, cols)))).astype(F)
    idx = rng.integers(0, rows, k)
    gb, xb = up(v), up(x)
    y = ops.gather_rows_backward(gb, xb, indices=idx)
    got = y.to_numpy()
    for b in (gb, xb, y):
        b.buf.release()
    want = np.zeros((rows, cols), F)
    for j, i in enumerate(idx):
        if 0 <= i < rows:
            want[i] = want[i] + v[j]
    if mode or tl.backend() == "stub":
        same_bits(got, want)
    else:
        ref = np.zeros((rows, cols))
        np.add.at(ref, idx, v.astype(np.float64))
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(v).max())
