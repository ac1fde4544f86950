"""Comparisons, where, argmax/argmin, max/min over a dim, pow, erf, exact GELU and softplus
(the compare, argreduce and pointwise_extra families) through the PyTorch-style API, against
float64 NumPy / the standard library: values, NaN and inf rules, gradients, bad input."""
import math

import numpy as np
import pytest

import torchlean as tl
from torchlean.nn import functional as F
from torchlean.session import Session

NAN, INF = float("nan"), float("inf")


def _data(*shape, seed=0, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape).astype(np.float32)


def _ints(*shape, seed=0, lo=-2, hi=3):
    """small whole numbers as float32: plenty of ties"""
    return np.random.default_rng(seed).integers(lo, hi, size=shape).astype(np.float32)


def _ulps(got, want):
    """distance in float32 ulps of `want` (float64) to the float32 `got`"""
    want = np.asarray(want, np.float64)
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(np.asarray(got, np.float64) - want) / spacing


# ---------------------------------------------------------------------------- comparisons

COMPARE = [("lt", np.less, lambda x, y: x < y), ("le", np.less_equal, lambda x, y: x <= y),
           ("gt", np.greater, lambda x, y: x > y), ("ge", np.greater_equal, lambda x, y: x >= y),
           ("eq", np.equal, lambda x, y: x.eq(y)), ("ne", np.not_equal, lambda x, y: x.ne(y))]


@pytest.mark.parametrize("name,ref,call", COMPARE, ids=[c[0] for c in COMPARE])
def test_comparisons_broadcast_nan_inf(name, ref, call):
    a = np.array([[NAN, INF, -INF, 0.0, -0.0, 1.0, 2.0]], np.float32).T    # (7, 1)
    b = np.array([NAN, INF, -INF, 0.0, 1.0, -3.5], np.float32)              # (6,)
    s = Session()
    got = call(s.tensor(a), s.tensor(b))
    assert got.shape == (7, 6)
    np.testing.assert_array_equal(got.numpy(), ref(a, b).astype(np.float32))
    # the module-level forms use the same kernels
    np.testing.assert_array_equal(getattr(tl, name)(s.tensor(a), s.tensor(b)).numpy(),
                                  ref(a, b).astype(np.float32))


def test_comparison_operators_with_numbers_either_side():
    x = _ints(4, 5, seed=1)
    s = Session()
    t = s.tensor(x)
    np.testing.assert_array_equal((t < 1).numpy(), (x < 1).astype(np.float32))
    np.testing.assert_array_equal((1 < t).numpy(), (1 < x).astype(np.float32))
    np.testing.assert_array_equal((t >= -1.0).numpy(), (x >= -1).astype(np.float32))
    np.testing.assert_array_equal((2 >= t).numpy(), (2 >= x).astype(np.float32))
    np.testing.assert_array_equal(t.le(np.zeros(5)).numpy(), (x <= 0).astype(np.float32))


def test_comparison_carries_no_gradient():
    x = _data(6, seed=2)
    s = Session()
    t = s.tensor(x, requires_grad=True)
    m = t > 0
    assert not m.requires_grad
    (m * t).sum().backward()               # the gradient comes from the product only
    np.testing.assert_array_equal(t.grad, (x > 0).astype(np.float32))


def test_comparison_shape_mismatch_names_the_op():
    s = Session()
    with pytest.raises(ValueError, match=r"lt.*\(3,\).*\(4,\)|lt.*\(4,\).*\(3,\)"):
        s.tensor(np.ones(3)) < s.tensor(np.ones(4))


# ---------------------------------------------------------------------------- where

def test_where_forward_and_masked_gradients_broadcast_back():
    c = np.random.default_rng(3).random((3, 4, 5)) < 0.5
    a, b = _data(4, 5, seed=4), _data(3, 1, 5, seed=5)
    w = _data(3, 4, 5, seed=6)
    s = Session()
    ta, tb = s.tensor(a, requires_grad=True), s.tensor(b, requires_grad=True)
    y = tl.where(c, ta, tb)
    np.testing.assert_array_equal(y.numpy(), np.where(c, a, b))
    (y * s.tensor(w)).sum().backward()
    np.testing.assert_allclose(ta.grad, np.where(c, w, 0).sum(axis=0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tb.grad, np.where(c, 0, w).sum(axis=1, keepdims=True),
                               rtol=1e-6, atol=1e-6)


def test_where_tensor_condition_numbers_and_method_form():
    x = np.array([-1.0, 0.0, 2.0, NAN, -INF], np.float32)
    s = Session()
    t = s.tensor(x, requires_grad=True)
    y = tl.where(t > 0, t, 0.0)            # relu written with where
    np.testing.assert_array_equal(y.numpy(), np.array([0, 0, 2, 0, 0], np.float32))
    y.sum().backward()
    np.testing.assert_array_equal(t.grad, np.array([0, 0, 1, 0, 0], np.float32))
    z = t.where(t < 1, s.tensor(5.0))       # x.where(cond, other) = where(cond, x, other)
    np.testing.assert_array_equal(z.numpy(), np.array([-1, 0, 5, 5, -INF], np.float32))


def test_where_nan_condition_selects_a_and_masked_gradient_ignores_nan_grads():
    cond = np.array([NAN, 0.0, 1.0, -2.0], np.float32)     # NaN and -2 count as true (NumPy bool)
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = np.array([10.0, 20.0, 30.0, 40.0], np.float32)
    s = Session()
    ta, tb = s.tensor(a, requires_grad=True), s.tensor(b, requires_grad=True)
    y = tl.where(s.tensor(cond), ta, tb)
    np.testing.assert_array_equal(y.numpy(), np.where(cond.astype(bool), a, b))
    y.backward(np.array([INF, 1.0, NAN, 2.0]))
    # each gradient holds exactly the entries its side supplied; the other side's inf/NaN stays out
    np.testing.assert_array_equal(ta.grad, np.array([INF, 0.0, NAN, 2.0], np.float32))
    np.testing.assert_array_equal(tb.grad, np.array([0.0, 1.0, 0.0, 0.0], np.float32))


def test_where_bad_input():
    s = Session()
    with pytest.raises(ValueError, match=r"where.*\(3,\).*\(4,\)"):
        tl.where(np.ones(3, bool), s.tensor(np.ones(3)), s.tensor(np.ones(4)))
    with pytest.raises(TypeError, match="where: cond"):
        tl.where(np.array(["a", "b"]), s.tensor(np.ones(2)), 0.0)


# ---------------------------------------------------------------------------- argmax / argmin

@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 7, 3), -2),
                                       ((1,), 0), ((4, 1, 3), 1), ((2, 3, 33), -1), ((5, 600), 1)])
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_argmax_argmin_ties_take_the_first_index(kind, shape, dim):
    x = _ints(*shape, seed=7)
    s = Session()
    got = getattr(s.tensor(x), kind)(dim)
    want = getattr(np, kind)(x, axis=dim)
    assert got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    kept = getattr(tl, kind)(s.tensor(x), dim=dim, keepdim=True)
    np.testing.assert_array_equal(kept, np.expand_dims(want, dim))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_argmax_argmin_nan_wins_and_dim_none(kind):
    x = np.array([[1.0, INF, NAN, -INF, NAN], [3.0, -INF, 3.0, 2.0, INF]], np.float32)
    s = Session()
    t = s.tensor(x)
    np.testing.assert_array_equal(getattr(t, kind)(1), [2, 1 if kind == "argmin" else 4])
    np.testing.assert_array_equal(getattr(t, kind)(0), getattr(np, kind)(x, axis=0))
    flat = getattr(t, kind)()
    assert flat.shape == () and int(flat) == 2          # the first NaN of the flattened tensor
    assert getattr(t, kind)(keepdim=True).shape == (1, 1)
    assert int(getattr(s.tensor(3.0), kind)()) == 0     # a 0-d tensor
    assert getattr(s.tensor(3.0), kind)(0).shape == ()


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_argmax_argmin_long_rows_split_into_chunks(kind):
    """rows longer than one CUDA block's chunk: ties and NaN across chunk borders"""
    x = _ints(3, 20001, seed=16, lo=-4, hi=5)
    x[1, 17000] = NAN
    x[1, 19000] = NAN
    x[2, 8191:8193] = 9.0 if kind == "argmax" else -9.0       # a tie across the border
    s = Session()
    t = s.tensor(x)
    want = getattr(np, kind)(x, axis=1)
    assert want[1] == 17000 and want[2] == 8191
    np.testing.assert_array_equal(getattr(t, kind)(1), want)
    np.testing.assert_array_equal(getattr(t, kind)(), getattr(np, kind)(x))
    np.testing.assert_array_equal(getattr(s.tensor(x.T.copy()), kind)(0), want)


def test_argmax_bad_input():
    s = Session()
    with pytest.raises(ValueError, match=r"argmax: cannot reduce over the empty dim 1 of shape \(3, 0\)"):
        s.tensor(np.zeros((3, 0))).argmax(1)
    with pytest.raises(ValueError, match="argmin: expected a non-empty tensor"):
        s.tensor(np.zeros((0,))).argmin()
    with pytest.raises((ValueError, IndexError), match="argmax"):
        s.tensor(np.zeros((3, 2))).argmax(2)


def test_argmax_tape_op_checks_the_axis_length_limit():
    t = tl.Tape()
    x = t.leaf(np.zeros((2, 0, 3)))
    with pytest.raises(ValueError, match="argmax"):
        t.argmax(x, axis=1)             # an empty axis with outputs to fill


# ---------------------------------------------------------------------------- max / min (dim)

@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape,dim", [((3, 5), 1), ((4, 5), 0), ((2, 7, 3), 1), ((1,), 0),
                                       ((2, 3, 1), -1)])
def test_max_min_dim_values_indices_and_gradient_to_the_chosen_index(kind, shape, dim):
    x = _ints(*shape, seed=8)
    s = Session()
    t = s.tensor(x, requires_grad=True)
    values, indices = getattr(t, kind)(dim)
    arg = getattr(np, "arg" + kind)(x, axis=dim)
    np.testing.assert_array_equal(values.numpy(), getattr(np, kind)(x, axis=dim))
    np.testing.assert_array_equal(indices, arg)
    w = _data(*values.shape, seed=9)
    (values * s.tensor(w)).sum().backward()
    want = np.zeros_like(x)
    np.put_along_axis(want, np.expand_dims(arg, dim), np.expand_dims(w, dim), dim)
    np.testing.assert_array_equal(t.grad, want)          # ties: only the first index gets it


def test_max_min_keepdim_named_fields_full_and_elementwise_forms():
    x = np.array([[1.0, 5.0, 5.0], [NAN, 2.0, -1.0]], np.float32)
    s = Session()
    t = s.tensor(x, requires_grad=True)
    r = t.max(dim=1, keepdim=True)
    assert r.values.shape == (2, 1) and r.indices.shape == (2, 1)
    np.testing.assert_array_equal(r.values.numpy(), [[5.0], [NAN]])
    np.testing.assert_array_equal(r.indices, [[1], [0]])
    assert math.isnan(t.max().item()) and t.min().item() != t.min().item()
    y = s.tensor(np.array([[2.0, 2.0, 9.0], [0.0, 0.0, 0.0]], np.float32))
    np.testing.assert_array_equal(t.min(y).numpy(), np.minimum(x, y.numpy()))
    v, i = s.tensor(np.float32(4.0)).max(0)
    assert v.shape == () and i.shape == () and v.item() == 4.0


def test_select_along_axis_checks_index_shape():
    t = tl.Tape()
    x = t.leaf(np.zeros((3, 4)))
    idx = t.leaf(np.zeros(4), requires_grad=False)
    with pytest.raises(ValueError, match=r"select_along_axis.*\(4,\).*\(3,\)"):
        t.select_along_axis(x, idx, axis=1)


# ---------------------------------------------------------------------------- pow

SPECIAL = np.array([NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0,
                    2.5, -2.5, 1e-30, 1e30, 16777216.0, -16777217.0, 7.0, 3e-39], np.float32)


def _np_pow32(a, b):
    """C99 pow in float64 (NumPy's), rounded to float32"""
    with np.errstate(all="ignore"):
        return np.power(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)


def test_pow_special_cases_follow_c99():
    a, b = np.meshgrid(SPECIAL, SPECIAL, indexing="ij")
    s = Session()
    got = (s.tensor(a) ** s.tensor(b)).numpy()
    want = _np_pow32(a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    special = np.isinf(want) | (want == 0)
    np.testing.assert_array_equal(got[special], want[special])
    # zeros and infinities carry C99's sign (odd whole exponents of negative bases)
    np.testing.assert_array_equal(np.signbit(got[special]), np.signbit(want[special]))
    finite = np.isfinite(want) & (want != 0)
    assert _ulps(got[finite], np.power(a[finite].astype(np.float64),
                                       b[finite].astype(np.float64))).max() <= 0.5001


def test_pow_random_sweep_is_correctly_rounded_and_exact_powers_are_exact():
    rng = np.random.default_rng(10)
    a = np.exp(rng.uniform(-20, 20, 20000)).astype(np.float32) * rng.choice([-1, 1], 20000)
    b = np.where(rng.random(20000) < 0.5, rng.integers(-9, 10, 20000),
                 rng.uniform(-4, 4, 20000)).astype(np.float32)
    s = Session()
    got = (s.tensor(a) ** s.tensor(b)).numpy()
    with np.errstate(all="ignore"):
        want = np.power(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want) & (np.abs(want) > 1.2e-38) & (np.abs(want) < 3.4e38)
    assert ok.sum() > 12000
    assert _ulps(got[ok], want[ok]).max() <= 0.5001
    x = _data(1001, seed=11, lo=-30, hi=30)
    t = s.tensor(x)
    np.testing.assert_array_equal((t ** 2).numpy(), x * x)          # correct rounding of x*x
    np.testing.assert_array_equal((abs(t.numpy()) ** 0.5), np.sqrt(np.abs(x)))
    np.testing.assert_array_equal((s.tensor(np.abs(x)) ** 0.5).numpy(), np.sqrt(np.abs(x)))
    np.testing.assert_array_equal(t.pow(-1.0).numpy(), np.float32(1) / x)


def test_pow_gradients_and_pytorch_masks():
    a = np.array([-2.0, 0.0, 0.0, 3.0, 0.5], np.float32)
    b = np.array([3.0, 0.0, 2.0, -1.5, 0.0], np.float32)
    s = Session()
    ta, tb = s.tensor(a, requires_grad=True), s.tensor(b, requires_grad=True)
    (ta ** tb).sum().backward()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        da = np.where(b64 == 0, 0.0, b64 * np.power(a64, b64 - 1))
        db = np.where((a64 == 0) & (b64 >= 0), 0.0, np.power(a64, b64) * np.log(a64))
    np.testing.assert_allclose(ta.grad, da, rtol=1e-6)
    np.testing.assert_allclose(tb.grad, db, rtol=1e-6)        # NaN at the negative base, as torch
    x = s.tensor(np.array([-2.0, 0.0, 1.5], np.float32), requires_grad=True)
    (x ** 0).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.0, 0.0])


def test_pow_scalar_base_broadcast_exponent_and_bad_exponent():
    e = _data(3, 1, seed=12)
    s = Session()
    te = s.tensor(e, requires_grad=True)
    y = 2.0 ** te
    np.testing.assert_allclose(y.numpy(), 2.0 ** e.astype(np.float64), rtol=1e-7)
    y.sum().backward()
    np.testing.assert_allclose(te.grad, np.log(2.0) * 2.0 ** e.astype(np.float64), rtol=1e-6)
    z = tl.pow(s.tensor(np.ones((2, 3, 4)) * 3), s.tensor(np.arange(4.0)))
    np.testing.assert_array_equal(z.numpy(), np.broadcast_to(3.0 ** np.arange(4.0), (2, 3, 4)))
    with pytest.raises(TypeError, match="pow: exponent"):
        s.tensor(np.ones(2)) ** "2"


# ---------------------------------------------------------------------------- erf, gelu, softplus

def test_erf_within_two_ulp_and_special_values():
    x = np.concatenate([np.linspace(-6, 6, 4001), [NAN, INF, -INF, 0.0, -0.0, 1e-30, -3e-39]])
    x = x.astype(np.float32)
    s = Session()
    got = tl.erf(s.tensor(x)).numpy()
    want = np.array([math.erf(v) if not math.isnan(v) else NAN for v in x.astype(np.float64)])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want) & (want != 0)
    assert _ulps(got[ok], want[ok]).max() <= 2.0
    np.testing.assert_array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))
    assert s.tensor(x).erf().numpy()[-4] == 0.0


def _gelu64(x):
    return 0.5 * x * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in x]))


def _erf_fit_edges():
    """Values at and beside the stub's erf fit bounds (|x| = 1/2, 7/4, 4), specials, and the
    same bounds times sqrt(2) (where GELU's erf argument crosses them)."""
    bounds = np.array([0.5, 1.75, 4.0], np.float32)
    bounds = np.concatenate([bounds, (bounds * np.float32(math.sqrt(2))).astype(np.float32)])
    near = np.concatenate([bounds, np.nextafter(bounds, np.float32(0)),
                           np.nextafter(bounds, np.float32(INF))])
    special = np.array([0.0, -0.0, 1e-30, 3e-39, 1e30, INF, NAN], np.float32)
    return np.concatenate([near, -near, special, -special]).astype(np.float32)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 17, 511, 512, 513, 1500])
def test_erf_and_exact_gelu_by_fit_any_size_and_mix(n):
    """The stub sorts each block of erf's inputs by fit (|x| below 1/2, below 7/4, the rest)
    and evaluates each list in whole vectors: every size and mixture gives erf correctly
    rounded, the exact GELU and its gradient at float64's, and each element's bits whatever its
    neighbours (the same values shuffled give the same bits shuffled)."""
    rng = np.random.default_rng(n)
    pool = np.concatenate([_erf_fit_edges(), rng.normal(0, 1.5, 4 * n).astype(np.float32)])
    x = rng.permutation(np.resize(pool, n) if n < len(pool) else
                        np.concatenate([pool, rng.normal(0, 2, n - len(pool))])[:n]).astype(np.float32)
    g = rng.uniform(-2, 2, n).astype(np.float32)
    s = Session()
    got = tl.erf(s.tensor(x)).numpy()
    x64 = x.astype(np.float64)
    fin = np.isfinite(x64)
    want = np.where(fin, [math.erf(v) if math.isfinite(v) else 0.0 for v in x64], np.sign(x64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
    ok = ~np.isnan(x) & (want != 0)
    assert _ulps(got[ok], want[ok]).max() <= 0.5001          # correctly rounded
    np.testing.assert_array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))
    t = s.tensor(x, requires_grad=True)
    y = F.gelu(t)
    (y * s.tensor(g)).sum().backward()
    yv, gv = y.numpy(), np.asarray(t.grad)
    m = fin & (np.abs(x64) < 1e4)
    np.testing.assert_allclose(yv[m], _gelu64(x64[m]), rtol=2e-6, atol=1e-7)
    cdf = 0.5 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x64[m]]))
    dgelu = cdf + x64[m] * np.exp(-x64[m] ** 2 / 2) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(gv[m], g[m] * dgelu, rtol=4e-6, atol=1e-7)
    perm = rng.permutation(n)
    t2 = s.tensor(x[perm], requires_grad=True)
    y2 = F.gelu(t2)
    (y2 * s.tensor(g[perm])).sum().backward()
    np.testing.assert_array_equal(tl.erf(s.tensor(x[perm])).numpy().view(np.uint32),
                                  got[perm].view(np.uint32))
    np.testing.assert_array_equal(y2.numpy().view(np.uint32), yv[perm].view(np.uint32))
    np.testing.assert_array_equal(np.asarray(t2.grad).view(np.uint32), gv[perm].view(np.uint32))


def test_gelu_exact_form_is_the_default_and_tanh_is_the_registry_op():
    x = np.concatenate([_data(999, seed=13, lo=-6, hi=6), [0.0, -0.0, 12.0, -12.0]]).astype(np.float32)
    s = Session()
    t = s.tensor(x, requires_grad=True)
    y = F.gelu(t)
    np.testing.assert_allclose(y.numpy(), _gelu64(x.astype(np.float64)), rtol=2e-6, atol=1e-7)
    y.sum().backward()
    x64 = x.astype(np.float64)
    cdf = 0.5 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x64]))
    np.testing.assert_allclose(t.grad, cdf + x64 * np.exp(-x64 ** 2 / 2) / math.sqrt(2 * math.pi),
                               rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(tl.nn.GELU()(s.tensor(x)).numpy(), y.numpy())
    tanh_form = F.gelu(s.tensor(x), approximate="tanh").numpy()
    np.testing.assert_array_equal(tanh_form, s.tensor(x).gelu().numpy())
    np.testing.assert_array_equal(tl.nn.GELU(approximate="tanh")(s.tensor(x)).numpy(), tanh_form)
    assert np.abs(tanh_form - y.numpy()).max() > 1e-5        # the two forms really differ
    g = F.gelu(s.tensor(np.array([NAN, INF, -INF], np.float32))).numpy()
    assert math.isnan(g[0]) and g[1] == INF and math.isnan(g[2])   # -inf * 0, as the formula
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(s.tensor(x), approximate="erf")
    with pytest.raises(ValueError, match="approximate"):
        tl.nn.GELU(approximate=True)


@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 3.0), (0.5, 20.0), (-1.5, 1.0)])
def test_softplus_beta_threshold(beta, threshold):
    x = np.concatenate([_data(301, seed=14, lo=-30, hi=30), [25.0, -100.0, 0.0]]).astype(np.float32)
    s = Session()
    t = s.tensor(x, requires_grad=True)
    y = F.softplus(t, beta=beta, threshold=threshold)
    x64 = x.astype(np.float64)
    bx = beta * x64
    np.testing.assert_allclose(y.numpy(), np.where(bx > threshold, x64, np.logaddexp(0, bx) / beta),
                               rtol=2e-6, atol=1e-30)
    above = np.float32(beta) * x > np.float32(threshold)
    np.testing.assert_array_equal(y.numpy()[above], x[above])     # x itself past the threshold
    y.sum().backward()
    np.testing.assert_allclose(t.grad, np.where(bx > threshold, 1.0, 1 / (1 + np.exp(-bx))),
                               rtol=2e-6, atol=1e-30)
    np.testing.assert_array_equal(tl.nn.Softplus(beta, threshold)(s.tensor(x)).numpy(), y.numpy())


def test_softplus_nan_inf_and_bad_attrs():
    s = Session()
    y = F.softplus(s.tensor(np.array([NAN, INF, -INF], np.float32))).numpy()
    assert math.isnan(y[0]) and y[1] == INF and y[2] == 0.0
    with pytest.raises(ValueError, match="softplus_beta.*beta"):
        F.softplus(s.tensor(np.ones(2)), beta=0.0)
    with pytest.raises(ValueError, match="softplus_beta.*threshold"):
        F.softplus(s.tensor(np.ones(2)), threshold=NAN)


def test_new_kernels_give_the_same_bits_in_exact_mode():
    """one code path: exact mode changes nothing in these families"""
    x = np.concatenate([_data(257, seed=15, lo=-5, hi=5), [NAN, INF, -INF, 0.0]]).astype(np.float32)
    def run():
        s = Session()
        t = s.tensor(x)
        outs = [F.gelu(t), t.erf(), F.softplus(t, beta=2.0), abs(t.numpy()) ** 1.5,
                s.tensor(np.abs(x)) ** 1.5, (t > 0.5), tl.where(t > 0, t, 1.0)]
        return [o if isinstance(o, np.ndarray) else o.numpy() for o in outs] + [t.argmax()]
    before = tl.is_exact()
    try:
        tl.set_exact(False)
        plain = run()
        tl.set_exact(True)
        exact = run()
    finally:
        tl.set_exact(before)
    for p, e in zip(plain, exact):
        np.testing.assert_array_equal(np.asarray(p).view(np.uint32) if np.asarray(p).dtype == np.float32
                                      else p, np.asarray(e).view(np.uint32)
                                      if np.asarray(e).dtype == np.float32 else e)
