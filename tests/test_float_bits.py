"""torch.nextafter, torch.frexp and torch.float_power (torchlean/catalog/float_bits.py): exact
bits against NumPy's float32 nextafter / frexp on edge values (zeros, subnormals, FLT_MAX, inf,
NaN), the API forms (function, method, in-place twin, broadcasting), frexp's gradient against
central differences and closed forms, float_power against float64 NumPy, and torch where it is
importable (an extra check only)."""
import numpy as np
import pytest

import torchlean as tl

F32 = np.float32
EDGE = F32([0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 1.1754944e-38, 1e-40, -3e-39, 3.4028235e38,
            -3.4028235e38, np.inf, -np.inf, np.nan, 2.5, -7.75, 0.1, 1e30])


def bits(a):
    a = np.asarray(a, F32)
    return np.where(np.isnan(a), np.int32(0x7fc00000), a.view(np.int32))


def test_nextafter_matches_numpy_bit_for_bit_on_edges():
    a = np.repeat(EDGE, len(EDGE))
    b = np.tile(EDGE, len(EDGE))
    got = tl.nextafter(tl.tensor(a), tl.tensor(b)).numpy()
    with np.errstate(over="ignore"):
        want = np.nextafter(a, b)
    assert got.dtype == F32
    np.testing.assert_array_equal(bits(got), bits(want))


def test_nextafter_forms_broadcast_and_inplace():
    rng = np.random.default_rng(3)
    a = F32(rng.uniform(-3, 3, (3, 5)))
    b = F32(rng.uniform(-3, 3, (1, 5)))
    want = np.nextafter(a, b)
    np.testing.assert_array_equal(tl.tensor(a).nextafter(tl.tensor(b)).numpy(), want)
    np.testing.assert_array_equal(tl.nextafter(tl.tensor(a), 0.0).numpy(), np.nextafter(a, F32(0)))
    t = tl.tensor(a)
    assert t.nextafter_(tl.tensor(b)) is t
    np.testing.assert_array_equal(t.numpy(), want)
    with pytest.raises(Exception, match="nextafter"):
        tl.nextafter(tl.tensor(a), tl.tensor(F32(np.ones((4, 5)))))


def test_nextafter_has_no_gradient():
    x = tl.tensor(F32([1.0, 2.0]), requires_grad=True)
    assert not tl.nextafter(x, 5.0).requires_grad


def test_frexp_matches_numpy_on_edges():
    m, e = tl.frexp(tl.tensor(EDGE))
    wm, we = np.frexp(EDGE)
    np.testing.assert_array_equal(bits(m.numpy()), bits(wm))
    assert isinstance(e, tl.IntTensor)
    np.testing.assert_array_equal(e.numpy(), we.astype(np.int64))
    assert e.numpy().dtype == np.int64
    fin = np.isfinite(EDGE)
    np.testing.assert_array_equal(np.ldexp(m.numpy()[fin].astype(np.float64), e.numpy()[fin]), EDGE[fin])


def test_frexp_forms_and_named_fields():
    x = F32(np.random.default_rng(5).uniform(-100, 100, (2, 3, 4)))
    r = tl.tensor(x).frexp()
    assert r.mantissa.shape == (2, 3, 4) and tuple(r.exponent.shape) == (2, 3, 4)
    m, e = r
    assert np.all((np.abs(m.numpy()) >= 0.5) & (np.abs(m.numpy()) < 1))
    np.testing.assert_array_equal(e.numpy(), np.frexp(x)[1])
    with pytest.raises(TypeError, match="frexp"):
        tl.frexp(tl.tensor(F32([1.5])).long())


def test_frexp_mantissa_gradient_is_two_to_minus_e():
    x = F32([0.3, 5.0, -2e-39, 1e30, -0.75, 0.0])
    t = tl.tensor(x, requires_grad=True)
    m, e = tl.frexp(t)
    assert not getattr(e, "requires_grad", False)
    m.sum().backward()
    with np.errstate(over="ignore"):
        want = np.ldexp(1.0, -np.frexp(x)[1]).astype(F32)     # 2^128 for -2e-39: inf, as torch
    np.testing.assert_array_equal(t.grad.numpy(), want)
    # central differences away from powers of two
    h = 1e-3
    for v in (0.3, 5.0, -0.75):
        fd = (np.frexp(np.float64(v) + h)[0] - np.frexp(np.float64(v) - h)[0]) / (2 * h)
        g = tl.tensor(F32([v]), requires_grad=True)
        tl.frexp(g).mantissa.sum().backward()
        assert abs(g.grad.numpy()[0] - fd) < 1e-6


def test_float_power_is_the_double_power_rounded_once():
    rng = np.random.default_rng(11)
    a = F32(rng.uniform(0.1, 4, 300))
    b = F32(rng.uniform(-6, 6, 300))
    got = tl.float_power(tl.tensor(a), tl.tensor(b)).numpy()
    want = np.power(a.astype(np.float64), b.astype(np.float64))
    assert got.dtype == F32
    np.testing.assert_array_equal(got, want.astype(F32))
    np.testing.assert_array_equal(tl.tensor(a).float_power(2).numpy(), (a.astype(np.float64) ** 2).astype(F32))
    np.testing.assert_array_equal(tl.float_power(2, tl.tensor(b)).numpy(), (2.0 ** b.astype(np.float64)).astype(F32))
    neg = tl.float_power(tl.tensor(F32([-2.0, -8.0, 0.0])), tl.tensor(F32([3.0, 0.5, -1.0]))).numpy()
    assert neg[0] == -8.0 and np.isnan(neg[1]) and neg[2] == np.inf


def test_float_power_gradient_and_errors():
    x = tl.tensor(F32([1.5, 2.0]), requires_grad=True)
    tl.float_power(x, 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * F32([1.5, 2.0]) ** 2, rtol=1e-6)
    with pytest.raises(RuntimeError, match="float_power_.*Double"):
        tl.tensor(F32([1.0])).float_power_(2)
    with pytest.raises(TypeError, match="float_power"):
        tl.float_power(2.0, 3.0)
    with pytest.raises(TypeError, match="float_power"):
        tl.float_power(tl.tensor(F32([1.0])), "2")


def test_against_torch_where_installed():
    torch = pytest.importorskip("torch")
    a = np.repeat(EDGE, len(EDGE))
    b = np.tile(EDGE, len(EDGE))
    t = torch.nextafter(torch.tensor(a), torch.tensor(b)).numpy()
    np.testing.assert_array_equal(bits(tl.nextafter(tl.tensor(a), tl.tensor(b)).numpy()), bits(t))
    tm, te = torch.frexp(torch.tensor(EDGE))
    m, e = tl.frexp(tl.tensor(EDGE))
    np.testing.assert_array_equal(bits(m.numpy()), bits(tm.numpy()))
    np.testing.assert_array_equal(e.numpy(), te.numpy().astype(np.int64))
    x = F32(np.random.default_rng(2).uniform(0.1, 3, 50))
    fp = torch.float_power(torch.tensor(x), 2.5).numpy()
    np.testing.assert_array_equal(tl.float_power(tl.tensor(x), 2.5).numpy(), fp.astype(F32))
