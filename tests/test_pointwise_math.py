"""PyTorch's pointwise math catalog (torchlean/catalog/pointwise_math.py): special values, correct
rounding on random inputs, the two-argument functions, broadcasting and bad input.

References are independent of torchlean: float64 NumPy (rounded once to float32 only where the
float64 value lies far from a float32 rounding midpoint, so its own error of a few double ulps
cannot decide the rounding), float32 NumPy for the exact functions (fmod, copysign), closed
forms, and torch where importable (an addition only). Forward vs float64 and VJP vs central
differences for every op are in the registry's generated tests (tests/test_registry_ops.py).
"""
import math

import numpy as np
import pytest

import torchlean as tl
import torchlean.special as special

F32 = np.float32
NAN, INF = float("nan"), float("inf")


def t(values):
    return tl.tensor(np.asarray(values, dtype=np.float32))


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def run(name, *xs, **kw):
    args = [t(x) if isinstance(x, (list, np.ndarray)) else x for x in xs]
    return getattr(tl, name)(*args, **kw).numpy()


# ------------------------------------------------------------------ special values
SPECIAL = [  # (function, inputs, expected), PyTorch's values
    ("log1p", [-1.0, -2.0, -0.0, INF, NAN], [-INF, NAN, -0.0, INF, NAN]),
    ("sin", [-0.0, INF, -INF, NAN], [-0.0, NAN, NAN, NAN]),
    ("cos", [-0.0, 0.0, INF], [1.0, 1.0, NAN]),
    ("tan", [-0.0, -INF], [-0.0, NAN]),
    ("sinc", [0.0, -0.0, 1.0, INF], [1.0, 1.0, F32(np.sin(F32(np.pi)) / F32(np.pi)), NAN]),
    ("expm1", [-0.0, -INF, INF, 89.0, -104.0], [-0.0, -1.0, INF, INF, -1.0]),
    ("log2", [0.0, -0.0, -1.0, 1.0, 8.0, 2.0 ** -149, INF], [-INF, -INF, NAN, 0.0, 3.0, -149.0, INF]),
    ("log10", [0.0, -1.0, 1.0, 1e10, 1000.0, INF], [-INF, NAN, 0.0, 10.0, 3.0, INF]),
    ("exp2", [0.0, -0.0, 10.0, -149.0, -151.0, 128.0, -INF, INF], [1.0, 1.0, 1024.0, 2.0 ** -149, 0.0, INF, 0.0, INF]),
    ("sinh", [-0.0, 90.0, -90.0, INF, -INF], [-0.0, INF, -INF, INF, -INF]),
    ("cosh", [-0.0, 0.0, 90.0, -INF], [1.0, 1.0, INF, INF]),
    ("asinh", [-0.0, INF, -INF], [-0.0, INF, -INF]),
    ("acosh", [1.0, 0.5, -1.0, INF], [0.0, NAN, NAN, INF]),
    ("atanh", [-0.0, 1.0, -1.0, 1.5, -INF], [-0.0, INF, -INF, NAN, NAN]),
    ("atan", [-0.0, INF, -INF], [-0.0, F32(math.pi / 2), -F32(math.pi / 2)]),
    ("asin", [-0.0, 1.0, -1.0, 1.0000001], [-0.0, F32(math.pi / 2), -F32(math.pi / 2), NAN]),
    ("acos", [1.0, -1.0, 0.0, -1.0000001], [0.0, F32(math.pi), F32(math.pi / 2), NAN]),
    ("sign", [-0.0, 0.0, NAN, -3.0, INF, 1e-45], [0.0, 0.0, 0.0, -1.0, 1.0, 1.0]),
    ("round", [0.5, 1.5, 2.5, -0.5, -2.5, 8388609.0, 0.49999997], [0.0, 2.0, 2.0, -0.0, -2.0, 8388609.0, 0.0]),
    ("ceil", [-0.5, 0.2, -0.0, 8388609.0, -INF], [-0.0, 1.0, -0.0, 8388609.0, -INF]),
    ("trunc", [-0.7, 2.9, -1e30, NAN], [-0.0, 2.0, -1e30, NAN]),
    ("frac", [-2.5, 3.25, INF, -0.0], [-0.5, 0.25, NAN, 0.0]),   # -0 - -0 = +0, as torch
    ("signbit", [-0.0, 0.0, -1.0, 2.0], [1.0, 0.0, 1.0, 0.0]),
]


@pytest.mark.parametrize("name,xs,want", SPECIAL, ids=[s[0] for s in SPECIAL])
def test_special_values(name, xs, want):
    got = run(name, xs)
    want = np.asarray(want, np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), (name, got, want)
    assert np.array_equal(bits(got[~nan]), bits(want[~nan])), (name, got, want)   # -0 included


BINARY_SPECIAL = [
    ("fmod", [5.0, -5.0, 5.0, -0.0, INF, 3.0, 1e30], [3.0, 3.0, -3.0, 2.0, 2.0, 0.0, 1e-30],
     np.fmod(np.float32([5.0, -5.0, 5.0, -0.0, INF, 3.0, 1e30]), np.float32([3.0, 3.0, -3.0, 2.0, 2.0, 0.0, 1e-30]))),
    ("remainder", [5.0, -5.0, 5.0, -0.0, 5.0, -3.0], [3.0, 3.0, -3.0, 2.0, INF, 1.5],
     [2.0, 1.0, -1.0, -0.0, 5.0, -0.0]),
    ("copysign", [1.0, 2.0, -3.0, INF], [-0.0, NAN, 0.0, -1.0], [-1.0, 2.0, 3.0, -INF]),
    ("atan2", [0.0, -0.0, 0.0, -0.0, 1.0, -1.0, INF, INF, -INF, 1.0, NAN],
     [0.0, 0.0, -0.0, -1.0, 0.0, -0.0, INF, -INF, 3.0, -INF, 1.0],
     [0.0, -0.0, F32(math.pi), -F32(math.pi), F32(math.pi / 2), -F32(math.pi / 2), F32(math.pi / 4),
      F32(3 * math.pi / 4), -F32(math.pi / 2), F32(math.pi), NAN]),
    ("hypot", [3.0, INF, NAN, -0.0, 3e38, 1e-45], [4.0, NAN, INF, 0.0, 3e38, 1e-45],
     [5.0, INF, INF, 0.0, INF, F32(1e-45)]),   # hypot(1e-45, 1e-45) = sqrt(2) 2^-149 rounds to 2^-149
    ("xlogy", [0.0, 0.0, 1.0, 2.0, -3.0], [0.0, NAN, 0.0, 1.0, 4.0], [0.0, NAN, -INF, 0.0, F32(-3 * F32(math.log(4)))]),
    ("logaddexp", [INF, -INF, 1.0, 1e30], [INF, -INF, NAN, 1e30], [INF, -INF, NAN, F32(1e30)]),
]


@pytest.mark.parametrize("name,a,b,want", BINARY_SPECIAL, ids=[s[0] for s in BINARY_SPECIAL])
def test_binary_special_values(name, a, b, want):
    got = run(name, a, b)
    want = np.asarray(want, np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), (name, got, want)
    assert np.array_equal(bits(got[~nan]), bits(want[~nan])), (name, got, want)


# ------------------------------------------------------------------ correct rounding
def cr_reference(v64):
    """float32(v64) and a mask of where that rounding is certain: v64 (a few double ulps off
    the true value) lies more than 2^-40 |v| from every float32 rounding midpoint."""
    f = v64.astype(np.float32)
    up = np.nextafter(f, np.float32(np.inf)).astype(np.float64)
    dn = np.nextafter(f, np.float32(-np.inf)).astype(np.float64)
    fd = f.astype(np.float64)
    with np.errstate(all="ignore"):
        dist = np.minimum(np.abs(v64 - (fd + up) / 2), np.abs(v64 - (fd + dn) / 2))
        sure = (dist > 2.0 ** -40 * np.abs(v64)) & np.isfinite(f) & (f != 0)
    return f, sure


def _trig_sample(r):
    """small, moderate and huge arguments (the reduction's hard part), and x near k pi/2"""
    k = r.integers(-10 ** 6, 10 ** 6, 1000)
    return np.concatenate([r.uniform(-1, 1, 1000), r.uniform(-100, 100, 1000),
                           np.exp(r.uniform(0, 88, 1000)) * r.choice([-1, 1], 1000), k * (np.pi / 2)])


CR_FUNCS = {  # name: (float64 reference, input sampler)
    "sin": (np.sin, _trig_sample),
    "cos": (np.cos, _trig_sample),
    "tan": (np.tan, _trig_sample),
    "log1p": (np.log1p, lambda r: np.concatenate([r.uniform(-1, 1, 2000), np.exp(r.uniform(-60, 80, 2000))])),
    "expm1": (np.expm1, lambda r: r.uniform(-30, 88, 4000) * r.choice([1, 1e-3, 1e-9], 4000)),
    "log2": (np.log2, lambda r: np.exp(r.uniform(-100, 88, 4000))),
    "log10": (np.log10, lambda r: np.exp(r.uniform(-100, 88, 4000))),
    "exp2": (np.exp2, lambda r: r.uniform(-149, 127, 4000) * r.choice([1, 1e-4], 4000)),
    "sinh": (np.sinh, lambda r: r.uniform(-89, 89, 4000) * r.choice([1, 1e-3], 4000)),
    "cosh": (np.cosh, lambda r: r.uniform(-89, 89, 4000) * r.choice([1, 1e-3], 4000)),
    "asinh": (np.arcsinh, lambda r: np.sinh(r.uniform(-80, 80, 4000))),
    "acosh": (np.arccosh, lambda r: 1 + np.exp(r.uniform(-15, 80, 4000))),
    "atanh": (np.arctanh, lambda r: np.tanh(r.uniform(-9, 9, 4000))),
    "atan": (np.arctan, lambda r: np.sinh(r.uniform(-60, 60, 4000))),
    "asin": (np.arcsin, lambda r: r.uniform(-1, 1, 4000) ** 3),
    "acos": (np.arccos, lambda r: r.uniform(-1, 1, 4000) ** 3),
}


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("name", sorted(CR_FUNCS))
def test_correctly_rounded_on_random_inputs(name, exact):
    ref, sample = CR_FUNCS[name]
    rng = np.random.default_rng(sorted(CR_FUNCS).index(name) + 7)
    x = sample(rng).astype(np.float32)
    want, sure = cr_reference(ref(x.astype(np.float64)))
    prev = tl.is_exact()
    tl.set_exact(exact)
    try:
        got = run(name, x)
    finally:
        tl.set_exact(prev)
    assert sure.mean() > 0.99
    bad = sure & (bits(got) != bits(want))
    assert not bad.any(), (name, x[bad][:4], got[bad][:4], want[bad][:4])


def _pairs(rng, n):
    a = np.exp(rng.uniform(-80, 80, n)) * rng.choice([-1, 1], n)
    b = np.exp(rng.uniform(-80, 80, n)) * rng.choice([-1, 1], n)
    near = rng.uniform(-3, 3, n), rng.uniform(-3, 3, n)
    return (np.concatenate([a, near[0]]).astype(np.float32), np.concatenate([b, near[1]]).astype(np.float32))


@pytest.mark.parametrize("name,ref", [("atan2", np.arctan2), ("hypot", np.hypot)])
def test_two_argument_functions_round_correctly(name, ref):
    """hypot is correctly rounded for every pair (tl_math_more.h's argument); atan2 wherever
    float64 decides the rounding (its double-double value is within about 2^-58)."""
    a, b = _pairs(np.random.default_rng(3), 3000)
    want, sure = cr_reference(ref(a.astype(np.float64), b.astype(np.float64)))
    got = run(name, a, b)
    assert sure.mean() > 0.95   # the rest: results that underflow to 0 or round near a midpoint
    bad = sure & (bits(got) != bits(want))
    assert not bad.any(), (name, a[bad][:4], b[bad][:4], got[bad][:4], want[bad][:4])


def test_fmod_is_exact_on_wide_ranges():
    """C's fmodf is exact, so NumPy's float32 fmod is a bit reference, including quotients of
    2^270 (long division) and subnormal operands."""
    rng = np.random.default_rng(5)
    n = 4000
    a = (rng.uniform(0.5, 1, n) * np.exp2(rng.integers(-149, 127, n))).astype(np.float32) * rng.choice([-1, 1], n)
    b = (rng.uniform(0.5, 1, n) * np.exp2(rng.integers(-149, 127, n))).astype(np.float32) * rng.choice([-1, 1], n)
    a, b = a.astype(np.float32), b.astype(np.float32)
    b[:50] = np.float32(1e-45) * np.arange(1, 51, dtype=np.float32)   # subnormal divisors
    with np.errstate(all="ignore"):
        want = np.fmod(a, b)
    got = run("fmod", a, b)
    assert np.array_equal(bits(got), bits(want))
    m = want
    rem_want = np.where((m != 0) & ((b < 0) != (m < 0)), (m + b).astype(np.float32), m)
    assert np.array_equal(bits(run("remainder", a, b)), bits(rem_want))


def test_round_half_to_even_and_decimals():
    x = np.float32([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, 1.25, 12345.678])
    assert np.array_equal(run("round", x), np.round(x))
    got = tl.round(t(x), decimals=1).numpy()
    want = (np.round(x * F32(10.0)) / F32(10.0)).astype(np.float32)
    assert np.array_equal(got, want)
    got = tl.round(t([1234.5, -15.0]), decimals=-1).numpy()
    assert np.array_equal(got, np.float32([1230.0, -20.0]))
    with pytest.raises(TypeError, match="round"):
        tl.round(t([1.0]), decimals=0.5)


# ------------------------------------------------------------------ API: names, broadcasting, errors
def test_names_on_tensor_torch_and_special():
    x = t([0.25, 0.5])
    for name in ("log1p", "expm1", "log2", "exp2", "atanh", "arcsin", "arctanh", "sgn", "fix", "frac",
                 "logit", "nan_to_num", "deg2rad", "rad2deg"):
        assert np.array_equal(bits(getattr(x, name)().numpy()), bits(getattr(tl, name)(x).numpy())), name
    assert np.array_equal(special.expm1(x).numpy(), x.expm1().numpy())
    l1p = np.log1p(x.numpy().astype(np.float64)).astype(np.float32)   # correctly rounded here
    assert np.array_equal(special.xlog1py(x, x).numpy(), x.numpy() * l1p)
    e = special.entr(t([0.0, 0.5, -1.0])).numpy()
    assert bits(e[0]) == 0 and e[2] == -np.inf and abs(e[1] - 0.5 * math.log(2)) < 1e-7


def test_broadcasting_and_python_numbers():
    a = np.random.default_rng(0).uniform(0.5, 2, (3, 1, 4)).astype(np.float32)
    b = np.random.default_rng(1).uniform(0.5, 2, (5, 1)).astype(np.float32)
    got = tl.atan2(t(a), t(b)).numpy()
    assert got.shape == (3, 5, 4)
    np.testing.assert_allclose(got, np.arctan2(a.astype(np.float64), b), rtol=1e-6)
    assert np.array_equal(tl.hypot(t(a), 2.0).numpy().shape, (3, 1, 4))
    np.testing.assert_allclose(tl.remainder(7.0, t(b)).numpy(), np.mod(7.0, b.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(tl.ldexp(t(a), t([3.0])).numpy(), a * 8.0, rtol=0)
    np.testing.assert_allclose(tl.deg2rad(t([180.0])).numpy(), np.float32([np.float32(math.pi / 180) * 180]))


def test_shapes_that_do_not_broadcast_raise():
    with pytest.raises(ValueError, match="atan2"):
        tl.atan2(t(np.ones((2, 3))), t(np.ones((4,))))
    with pytest.raises(ValueError, match="logit"):
        tl.logit(t([0.5]), eps=-0.1)


def test_gradients_of_compositions():
    """xlogy at a = 0 takes g log(b) (torch's); logit with eps has zero gradient outside; the
    rounding functions record no gradient (torch: zero); frac passes g."""
    a = tl.tensor(np.float32([0.0, 2.0]), requires_grad=True)
    tl.xlogy(a, t([3.0, 3.0])).sum().backward()
    np.testing.assert_allclose(a.grad, [math.log(3)] * 2, rtol=1e-6)
    x = tl.tensor(np.float32([0.05, 0.5, 0.95]), requires_grad=True)
    tl.logit(x, eps=0.1).sum().backward()
    np.testing.assert_allclose(x.grad, [0.0, 4.0, 0.0], rtol=1e-6)
    z = tl.tensor(np.float32([1.5, -2.25]), requires_grad=True)
    (z.frac() + z.round()).sum().backward()
    np.testing.assert_array_equal(z.grad, [1.0, 1.0])


def test_agrees_with_torch_where_importable():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    x = rng.uniform(-3, 3, 500).astype(np.float32)
    y = rng.uniform(-3, 3, 500).astype(np.float32)
    for name in ("log1p", "expm1", "sinh", "cosh", "atan", "asinh", "exp2", "sin", "cos", "tan"):
        xx = np.abs(x) if name == "log1p" else x
        np.testing.assert_allclose(run(name, xx), getattr(torch, name)(torch.from_numpy(xx)).numpy(),
                                   rtol=2e-7, atol=1e-30, err_msg=name)
    for name in ("fmod", "remainder", "copysign"):
        assert np.array_equal(bits(run(name, x, y)),
                              bits(getattr(torch, name)(torch.from_numpy(x), torch.from_numpy(y)).numpy())), name
    for name in ("atan2", "hypot", "logaddexp", "xlogy"):
        yy = np.abs(y) if name == "xlogy" else y
        np.testing.assert_allclose(run(name, x, yy), getattr(torch, name)(torch.from_numpy(x), torch.from_numpy(yy)).numpy(),
                                   rtol=1e-6, atol=1e-30, err_msg=name)   # torch's own stages
