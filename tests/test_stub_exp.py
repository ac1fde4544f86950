"""The stub's vectorised float32 exp and tanh (tl_expf, tl_tanhf in native/stub/stub.h) are
correctly rounded: within half an ulp of the true value.

The stub replaces the scalar libm expf with tl_math.h's branch-free, correctly rounded code so
loops vectorise (tests/test_exact_math.py checks correct rounding bit for bit against an
oracle). Here errors are measured in float64 against numpy, in units of the float32 ulp at the
exact result: at most 0.5, plus a hair for float64's own error.
"""
import numpy as np
import pytest

import torchlean as tl
from torchlean import ops

pytestmark = pytest.mark.skipif(tl.backend() != "stub", reason="checks the stub's own exp")

MAX_ULP = 0.5 + 2.0 ** -20   # correctly rounded; the slack covers numpy's float64 error
F32_MAX_EXP_ARG = np.float32(88.72283935546875)  # the first float whose exp overflows float32


def stub_exp(x):
    return ops.exp(tl.AnyBuffer.from_numpy(np.ascontiguousarray(x, dtype=np.float32))).to_numpy()


def ulp_errors(x, got):
    """|got - exp(x)| in float32 ulps of exp(x), computed in float64; overflow must give +inf."""
    ref = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):
        overflow = ref.astype(np.float32) == np.inf
    assert np.all(got[overflow] == np.inf), x[overflow][got[overflow] != np.inf][:5]
    ok = ~overflow
    _, e = np.frexp(ref[ok])
    ulp = np.maximum(np.ldexp(1.0, e - 24), 2.0 ** -149)  # subnormal spacing at the bottom
    return np.abs(got[ok].astype(np.float64) - ref[ok]) / ulp


def float_sweep(lo, hi, stride):
    """Every stride-th float32 between lo and hi (by bit pattern, so all binades are covered)."""
    def bits(v):
        return int(np.float32(v).view(np.uint32))
    pos = np.arange(0, bits(hi) + 1, stride, dtype=np.uint32).view(np.float32)
    neg = np.arange(0, bits(-lo) + 1, stride, dtype=np.uint32).view(np.float32)
    return np.concatenate([pos, -neg, np.linspace(lo, hi, 1 << 20, dtype=np.float32)])


def test_dense_sweep_within_half_an_ulp():
    x = float_sweep(-104.0, 89.0, 509)  # ~4.3 million points, every binade, odd stride
    err = ulp_errors(x, stub_exp(x))
    assert err.max() <= MAX_ULP, (err.max(), x[np.argmax(err)])


def test_subnormal_and_overflow_edges():
    lo = np.float32(-103.972084045410)  # exp rounds to the smallest subnormal around here
    edges = [np.float32(-87.33654), np.float32(-87.3365478515625), lo,
             F32_MAX_EXP_ARG, np.nextafter(F32_MAX_EXP_ARG, np.float32(0))]
    # neighbourhoods of the subnormal range, the underflow point and the overflow point
    x = np.concatenate([np.linspace(-104.0, -87.0, 200001, dtype=np.float32),
                        np.linspace(88.0, 89.0, 100001, dtype=np.float32),
                        np.array(edges, dtype=np.float32)])
    for v in edges:
        b = int(np.float32(v).view(np.uint32))
        x = np.concatenate([x, np.arange(b - 64, b + 64, dtype=np.uint32).view(np.float32)])
    err = ulp_errors(x, stub_exp(x))
    assert err.max() <= MAX_ULP, (err.max(), x[np.argmax(err)])


def test_specials():
    tiny = np.float32(1e-45)  # smallest subnormal
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, np.finfo(np.float32).tiny,
                  200.0, -200.0, 1e30, -1e30, np.finfo(np.float32).max, -np.finfo(np.float32).max],
                 dtype=np.float32)
    y = stub_exp(x)
    assert y[0] == 1.0 and y[1] == 1.0
    assert y[2] == np.inf and y[3] == 0.0 and not np.signbit(y[3])
    assert np.isnan(y[4])
    assert y[5] == 1.0 and y[6] == 1.0 and y[7] == 1.0
    assert y[8] == np.inf and y[9] == 0.0 and y[10] == np.inf and y[11] == 0.0
    assert y[12] == np.inf and y[13] == 0.0
    assert stub_exp(np.array([F32_MAX_EXP_ARG], np.float32))[0] == np.inf
    assert np.isfinite(stub_exp(np.array([np.nextafter(F32_MAX_EXP_ARG, np.float32(0))],
                                         np.float32))[0])


def test_sigmoid_built_on_it_stays_accurate():
    x = np.linspace(-100.0, 100.0, 400001, dtype=np.float32)
    y = ops.sigmoid(tl.AnyBuffer.from_numpy(x)).to_numpy()
    ref = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    assert float_ulps(y, ref).max() <= 4.0  # exp's error plus the add and the divide


def float_ulps(got, ref):
    """|got - ref| in float32 ulps of ref (float64 arithmetic)."""
    _, e = np.frexp(ref)
    ulp = np.maximum(np.ldexp(1.0, e - 24), 2.0 ** -149)
    return np.abs(got.astype(np.float64) - ref) / ulp


def test_tanh_within_half_an_ulp():
    # tanh(a) = -M / (2 + M) with M = e^-2a - 1, in double-double, rounded once
    x = float_sweep(-12.0, 12.0, 509)
    y = ops.tanh(tl.AnyBuffer.from_numpy(x)).to_numpy()
    err = float_ulps(y, np.tanh(x.astype(np.float64)))
    assert err.max() <= MAX_ULP, (err.max(), x[np.argmax(err)])
    s = ops.tanh(tl.AnyBuffer.from_numpy(
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 50.0, -50.0], np.float32))).to_numpy()
    assert s[0] == 0 and not np.signbit(s[0]) and s[1] == 0 and np.signbit(s[1])
    assert s[2] == 1 and s[3] == -1 and np.isnan(s[4]) and s[5] == 1 and s[6] == -1
