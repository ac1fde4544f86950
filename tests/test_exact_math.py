"""The canonical arithmetic of exact mode (native/common/tl_math.h), tested on its own.

The header is compiled with the stub's flags into build/tl_math_test.so (tests/native/
tl_math_shim.c). Rule 2's functions are correctly rounded; CI checks it three ways:
  * every 1021st float32 bit pattern over the whole 2^32 range (4.2 million inputs per
    function, every binade; NaNs and infinities included) against cr_oracle.h's independent
    value (glibc double, libquadmath near rounding midpoints), in C on all cores;
  * every hard case the exhaustive check found (inputs whose true value lies within 2^-48 of a
    float32 rounding midpoint, tests/native/tl_math_hard_cases.txt), against mpmath;
  * random inputs against mpmath directly, so the C oracle is itself checked.
`make check-math` runs the first check on all 2^32 inputs (bench/results/check-math.md).
Specials (NaN, +-inf, -0), the summation tree, the dot rule and the attention tile rule are
checked against independent Python references.
"""
import ctypes
import ctypes.util
import os
import subprocess
import shutil
from pathlib import Path

import cffi
import mpmath
import numpy as np
import pytest

from exact_fma import fma32

ROOT = Path(__file__).resolve().parent.parent
SHIM = ROOT / "build" / "tl_math_test.so"
HARD_CASES = ROOT / "tests" / "native" / "tl_math_hard_cases.txt"
NAMES = ["exp", "log", "log1p", "tanh", "sigmoid", "softplus", "erf", "gelu", "gelu_grad", "sqrt",
         "rsqrt", "sin_2pi", "cos_2pi", "expm1"]
FN = {n: i for i, n in enumerate(NAMES)}
# the correctly rounded functions, numbered as tests/native/cr_oracle.h's TLM_F_*
CR = ["exp", "expm1", "log", "log1p", "tanh", "sigmoid", "softplus", "erf", "sin_2pi", "cos_2pi",
      "log2", "log10", "exp2", "sinh", "cosh", "asinh", "acosh", "atanh", "atan", "asin", "acos", "sin", "cos", "tan"]
STRIDE = 1021


def _bits(v):
    return int(np.float32(v).view(np.uint32))


@pytest.fixture(scope="module")
def shim():
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.fail("no C compiler: the canonical arithmetic cannot be tested")
    r = subprocess.run(["make", "-s", "build/tl_math_test.so"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    ffi = cffi.FFI()
    ffi.cdef("""
        int tlmt_count(void);
        void tlmt_eval(int fn, const float *x, float *y, int64_t n);
        void tlmt_scan(int fn, uint32_t lo, uint32_t hi, uint32_t stride, double *max_err,
                       float *worst, int64_t *checked);
        int tlmt_cr_count(void);
        void tlmt_cr_eval(int fn, const float *x, float *y, int64_t n);
        void tlmt_cr_check(int fn, uint32_t lo, uint32_t hi, uint32_t stride, int64_t *out,
                           uint32_t *first_bad);
        float tlmt_sum(const float *x, int64_t n);
        float tlmt_tree_sum(float *p, int64_t n);
        float tlmt_dot(const float *a, const float *b, int64_t k, float acc);
        void tlmt_attention_row(const float *q, const float *k, const float *v, float *out,
                                int64_t n, int64_t d, float scale);
    """)
    lib = ffi.dlopen(str(SHIM))
    assert lib.tlmt_count() == len(NAMES)
    assert lib.tlmt_cr_count() == len(CR)
    return ffi, lib


def _ptr(ffi, a):
    return ffi.cast("float *", ffi.from_buffer(a))


def evaluate(shim, name, x):
    ffi, lib = shim
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.empty_like(x)
    lib.tlmt_eval(FN[name], _ptr(ffi, x), _ptr(ffi, y), x.size)
    return y


def scan(shim, name, lo, hi, stride):
    ffi, lib = shim
    err, worst, count = ffi.new("double *"), ffi.new("float *"), ffi.new("int64_t *")
    lib.tlmt_scan(FN[name], lo, hi, stride, err, worst, count)
    return err[0], worst[0], count[0]


@pytest.mark.parametrize("name", CR)
def test_correctly_rounded_on_every_1021st_float32(shim, name):
    ffi, lib = shim
    out, bad = ffi.new("int64_t[4]"), ffi.new("uint32_t *")
    lib.tlmt_cr_check(CR.index(name), 0, 0xFFFFFFFF, STRIDE, out, bad)
    checked, mismatches, _, unresolved = list(out)
    assert checked == (2 ** 32 - 1) // STRIDE + 1
    assert unresolved == 0, name
    assert mismatches == 0, f"{name}: {mismatches} inputs not correctly rounded, e.g. {bad[0]:#010x}"


STUB_KERNELS = {"exp": "exp", "log": "log", "tanh": "tanh", "sigmoid": "sigmoid",
                "softplus": "softplus", "erf": "erf"}


@pytest.mark.parametrize("name,exact", [(n, True) for n in sorted(STUB_KERNELS)] +
                         [(n, False) for n in ("exp", "log", "tanh", "sigmoid")])
def test_stub_kernels_give_the_checked_bits(shim, name, exact):
    """The stub's own kernels return the header's (checked) values on the same 4.2 million
    inputs: exp, log, tanh and sigmoid (a block schedule: main formula, then the series on the
    small inputs) in every mode, the others in exact mode."""
    import torchlean as tl
    from torchlean._generated import ops
    if tl.backend() != "stub":
        pytest.skip("compares the stub library with the header compiled for the host")
    x = np.arange(0, 2 ** 32, STRIDE, dtype=np.uint64).astype(np.uint32).view(np.float32)
    was = tl.set_exact(exact)
    try:
        got = getattr(ops, STUB_KERNELS[name])(tl.AnyBuffer.from_numpy(x)).to_numpy()
    finally:
        tl.set_exact(was)
    want = _cr_eval(shim, name, x)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (name, x[~same][:5], got[~same][:5], want[~same][:5])


# ---- mpmath: an oracle independent of the C one ----

_MP_MORE = {"log2": lambda x: mpmath.log(x, 2), "log10": mpmath.log10, "exp2": lambda x: mpmath.mpf(2) ** x,
            "sinh": mpmath.sinh, "cosh": mpmath.cosh, "asinh": mpmath.asinh, "acosh": mpmath.acosh,
            "atanh": mpmath.atanh, "atan": mpmath.atan, "asin": mpmath.asin, "acos": mpmath.acos,
            "sin": mpmath.sin, "cos": mpmath.cos, "tan": mpmath.tan}


def _mp_value(name, x):
    x = mpmath.mpf(float(x))
    if name == "exp":
        return mpmath.exp(x)
    if name == "expm1":
        return mpmath.expm1(x)
    if name == "log":
        return mpmath.log(x)
    if name == "log1p":
        return mpmath.log1p(x)
    if name == "tanh":
        return mpmath.tanh(x)
    if name == "sigmoid":
        return 1 / (1 + mpmath.exp(-x))
    if name == "softplus":
        return mpmath.log1p(mpmath.exp(x))
    if name == "erf":
        return mpmath.erf(x)
    if name in _MP_MORE:
        return _MP_MORE[name](x)
    r = x - mpmath.nint(x)      # exact: sin and cos of 2 pi u depend on u mod 1 only
    return mpmath.sinpi(2 * r) if name == "sin_2pi" else mpmath.cospi(2 * r)


def _round_to_float32(v):
    """the float32 nearest the mpmath value v, ties to even (no double rounding)"""
    if v == 0:
        return np.float32(0)
    with np.errstate(over="ignore"):
        f = np.float32(float(v))
    if np.isinf(f):
        return f if abs(v) >= mpmath.mpf(2) ** 128 - mpmath.mpf(2) ** 103 else \
            np.copysign(np.float32(3.4028235e38), f)
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    dist = [abs(mpmath.mpf(float(c)) - v) for c in cands]
    best = min(dist)
    tied = [c for c, d in zip(cands, dist) if d == best]
    return min(tied, key=lambda c: int(c.view(np.uint32)) & 1)   # the even one on a tie


def _cr_eval(shim, name, x):
    ffi, lib = shim
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.empty_like(x)
    lib.tlmt_cr_eval(CR.index(name), _ptr(ffi, x), _ptr(ffi, y), x.size)
    return y


def _load_hard_cases():
    rows = []
    for line in HARD_CASES.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, xb, yb = line.split()
            rows.append((name, int(xb, 16), int(yb, 16)))
    return rows


def test_hard_cases_match_mpmath(shim):
    """Every input the exhaustive check found within 2^-48 of a rounding midpoint: the stub's
    value is mpmath's value rounded once to float32 (and the file's recorded value)."""
    rows = _load_hard_cases()
    assert len(rows) >= len(CR), "tests/native/tl_math_hard_cases.txt lost its rows"
    with mpmath.workprec(160):
        for name, xb, yb in rows:
            x = np.array([xb], np.uint32).view(np.float32)
            got = _cr_eval(shim, name, x)[0]
            want = _round_to_float32(_mp_value(name, x[0]))
            assert want.view(np.uint32) == np.uint32(yb), (name, hex(xb))
            assert got.view(np.uint32) == want.view(np.uint32), (name, hex(xb), got, want)


RANGES = {"exp": (-104, 89), "expm1": (-20, 89), "log": (1e-30, 1e30), "log1p": (-0.99, 1e6),
          "tanh": (-10, 10), "sigmoid": (-104, 20), "softplus": (-104, 30), "erf": (-4, 4),
          "sin_2pi": (-3, 3), "cos_2pi": (-3, 3), "log2": (1e-30, 1e30), "log10": (1e-30, 1e30),
          "exp2": (-150, 128), "sinh": (-90, 90), "cosh": (-90, 90), "asinh": (-1e6, 1e6),
          "acosh": (1, 1e6), "atanh": (-1, 1), "atan": (-50, 50), "asin": (-1, 1), "acos": (-1, 1),
          "sin": (-1e6, 1e6), "cos": (-1e6, 1e6), "tan": (-1e6, 1e6)}


@pytest.mark.parametrize("name", CR)
def test_random_inputs_match_mpmath(shim, name):
    rng = np.random.default_rng(CR.index(name) + 11)
    lo, hi = RANGES[name]
    if name in ("log", "log2", "log10"):
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), 150))
    elif name == "log1p":
        x = np.concatenate([rng.uniform(lo, 1, 100), np.exp(rng.uniform(-60, 13, 50))])
    else:
        x = rng.uniform(lo, hi, 150)
    x = np.concatenate([x, rng.uniform(-1e-3, 1e-3, 25) * np.exp2(-rng.integers(0, 100, 25))])
    if name in ("log", "log2", "log10", "acosh"):
        x = np.abs(x) + (name == "acosh")
    x = x.astype(np.float32)
    x = x[(x > -1) | (name != "log1p")]
    got = _cr_eval(shim, name, x)
    with mpmath.workprec(160):
        want = np.array([_round_to_float32(_mp_value(name, v)) for v in x], np.float32)
    same = got.view(np.uint32) == want.view(np.uint32)
    same |= (got == 0) & (want == 0) & name.endswith("_2pi")   # zeros' sign is a convention
    assert same.all(), [(float(a), float(b), float(c)) for a, b, c in
                        zip(x[~same][:5], got[~same][:5], want[~same][:5])]


@pytest.mark.parametrize("name,max_ulp", [("sqrt", 0.5), ("rsqrt", 1.5)])
def test_sqrt_and_rsqrt_error_over_the_whole_float32_range(shim, name, max_ulp):
    """sqrt is the IEEE operation (correctly rounded); rsqrt is 1 / sqrt, two roundings (1.5 ulp)."""
    err, worst, count = scan(shim, name, 0, 0xFFFFFFFF, 251)
    assert count == (2 ** 32 - 1) // 251 + 1
    assert err <= max_ulp, f"{name}: {err} ulp at x = {worst!r}"
    lo, hi = _bits(0.0), _bits(1.1754942e-38)   # every subnormal
    err, worst, count = scan(shim, name, lo, hi, 1)
    assert err <= max_ulp, f"{name} on subnormals: {err} ulp at x = {worst!r}"


def _same(got, want):
    got, want = np.float32(got), np.float32(want)
    if np.isnan(want):
        return bool(np.isnan(got))
    return got.view(np.uint32) == want.view(np.uint32)   # -0 and +0 differ


NAN, INF = float("nan"), float("inf")
SPECIALS = {
    "exp": [(NAN, NAN), (INF, INF), (-INF, 0.0), (-0.0, 1.0), (0.0, 1.0), (1e-45, 1.0),
            (100.0, INF), (-200.0, 0.0)],
    "log": [(NAN, NAN), (INF, INF), (0.0, -INF), (-0.0, -INF), (-1.0, NAN), (-INF, NAN),
            (1.0, 0.0)],
    "log1p": [(NAN, NAN), (INF, INF), (-1.0, -INF), (-2.0, NAN), (-INF, NAN), (-0.0, -0.0),
              (0.0, 0.0), (1e-45, 1e-45), (-1e-45, -1e-45), (3.4028235e38, 88.72284)],
    "expm1": [(NAN, NAN), (INF, INF), (-INF, -1.0), (-0.0, -0.0), (0.0, 0.0), (1e-45, 1e-45),
              (-1e-45, -1e-45), (100.0, INF), (-200.0, -1.0)],
    "tanh": [(NAN, NAN), (INF, 1.0), (-INF, -1.0), (-0.0, -0.0), (0.0, 0.0), (1e-45, 1e-45),
             (20.0, 1.0)],
    "sigmoid": [(NAN, NAN), (INF, 1.0), (-INF, 0.0), (-0.0, 0.5), (0.0, 0.5), (200.0, 1.0),
                (-200.0, 0.0)],
    "softplus": [(NAN, NAN), (INF, INF), (-INF, 0.0), (1e30, 1e30), (-200.0, 0.0)],
    "erf": [(NAN, NAN), (INF, 1.0), (-INF, -1.0), (-0.0, -0.0), (0.0, 0.0), (5.0, 1.0),
            (-5.0, -1.0)],
    # the registry's stagewise formula: x (1 + t) is -inf * 0 at -inf
    "gelu": [(NAN, NAN), (INF, INF), (-INF, NAN), (-0.0, -0.0), (0.0, 0.0), (-20.0, -0.0),
             (20.0, 20.0)],
    "gelu_grad": [(NAN, NAN), (0.0, 0.5), (-0.0, 0.5), (20.0, 1.0), (-20.0, 0.0)],
    "sqrt": [(NAN, NAN), (INF, INF), (-0.0, -0.0), (-1.0, NAN), (4.0, 2.0)],
    "rsqrt": [(NAN, NAN), (INF, 0.0), (0.0, INF), (-0.0, -INF), (-1.0, NAN), (4.0, 0.5)],
    # exact at multiples of 1/4 (zeros of cos come out -0); integers beyond 2^23 give 0 / 1
    "sin_2pi": [(NAN, NAN), (INF, NAN), (-INF, NAN), (0.0, 0.0), (-0.0, -0.0), (0.25, 1.0),
                (-0.25, -1.0), (0.75, -1.0), (1.0, 0.0), (1e30, 0.0), (-1e30, -0.0)],
    "cos_2pi": [(NAN, NAN), (INF, NAN), (-INF, NAN), (0.0, 1.0), (-0.0, 1.0), (0.5, -1.0),
                (0.25, -0.0), (1.0, 1.0), (-3.0, 1.0), (1e30, 1.0), (8388607.5, -1.0)],
}


@pytest.mark.parametrize("name", NAMES)
def test_nan_inf_and_signed_zero(shim, name):
    xs = np.array([x for x, _ in SPECIALS[name]], np.float32)
    got = evaluate(shim, name, xs)
    bad = [(x, g, w) for (x, w), g in zip(SPECIALS[name], got) if not _same(g, w)]
    assert not bad, f"{name}: (x, got, want) {bad}"


def _gelu64(x):
    k, c = 0.7978845608, 0.044715
    t = np.tanh(k * (x + c * x ** 3))
    return 0.5 * x * (1 + t), 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x)




def test_gelu_error_bounds(shim):
    """Where 1 + tanh cancels, the stagewise formula loses relative accuracy, so the bound is in
    ulps of max(|x|, |gelu|) for gelu and of max(1, |x|) for its derivative (dense sweep)."""
    pos = np.arange(0, _bits(1e4), 389, dtype=np.uint32).view(np.float32)
    x = np.concatenate([pos, -pos, np.linspace(-12, 12, 1 << 20, dtype=np.float32)])
    y, dy = evaluate(shim, "gelu", x), evaluate(shim, "gelu_grad", x)
    ref, dref = _gelu64(x.astype(np.float64))
    ulp = np.spacing(np.maximum(np.abs(x), np.abs(y)).astype(np.float32)).astype(np.float64)
    err = np.abs(y - ref) / ulp
    assert err.max() <= 2.0, (err.max(), x[np.argmax(err)])
    dulp = np.spacing(np.maximum(np.abs(x), 1).astype(np.float32)).astype(np.float64)
    derr = np.abs(dy - dref) / dulp
    assert derr.max() <= 4.0, (derr.max(), x[np.argmax(derr)])


def _rule4_reference(x, chunk=256):
    """Sequential float32 sums of 256-value chunks, then the level-by-level pairwise tree."""
    x = np.asarray(x, np.float32)
    parts = [np.add.accumulate(x[i:i + chunk], dtype=np.float32)[-1]
             for i in range(0, len(x), chunk)]
    if not parts:
        return np.float32(0)
    while len(parts) > 1:
        nxt = [np.float32(parts[2 * i] + parts[2 * i + 1]) for i in range(len(parts) // 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return np.float32(parts[0])


@pytest.mark.parametrize("n", [0, 1, 2, 255, 256, 257, 511, 3 * 256 + 5, 7 * 256, 12345, 100003])
def test_sum_follows_chunks_then_tree(shim, n):
    ffi, lib = shim
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-8, 8, n))).astype(np.float32)
    want = _rule4_reference(x)
    got = lib.tlmt_sum(_ptr(ffi, x), n) if n else lib.tlmt_sum(ffi.NULL, 0)
    assert _same(got, want), (n, got, want)
    parts = np.array([_rule4_reference(x[i:i + 256]) for i in range(0, n, 256)], np.float32)
    if n:
        assert _same(lib.tlmt_tree_sum(_ptr(ffi, parts), len(parts)), want)
    # and the float64 value is close: the order is fixed, not sloppy
    assert abs(float(got) - x.astype(np.float64).sum()) <= 1e-5 * np.abs(x).sum() + 1e-30


def test_sum_propagates_nan_and_inf(shim):
    ffi, lib = shim
    x = np.ones(1000, np.float32)
    x[700] = np.inf
    assert lib.tlmt_sum(_ptr(ffi, x), 1000) == np.inf
    x[3] = -np.inf
    assert np.isnan(lib.tlmt_sum(_ptr(ffi, x), 1000))


def test_dot_is_a_sequential_fma(shim):
    ffi, lib = shim
    rng = np.random.default_rng(7)
    for k in (0, 1, 17, 333):
        a = rng.standard_normal(k).astype(np.float32)
        b = (rng.standard_normal(k) * 1e3).astype(np.float32)
        acc = np.float32(0.25)
        for i in range(k):
            acc = fma32(a[i], b[i], acc)
        got = lib.tlmt_dot(_ptr(ffi, a), _ptr(ffi, b), k, 0.25)
        assert _same(got, acc), (k, got, acc)


def test_fma_emulation_matches_the_c_library():
    """exact_fma.fma32 against libm fmaf, on random operands of scattered exponents and on a
    constructed double-rounding case (the float64 sum lands on a float32 midpoint)."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.fmaf.restype = ctypes.c_float
    libm.fmaf.argtypes = [ctypes.c_float] * 3
    rng = np.random.default_rng(3)
    n = 20000
    a, b, c = ((rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
               for _ in range(3))
    a[:4] = [1 + 2896 * 2.0 ** -23, 1.0, 0.0, np.inf]
    b[:4] = [2.0 ** -19 * (1 - 2895 * 2.0 ** -23), 2.0 ** -149, -1.0, 0.0]
    c[:4] = [32.0, 1.0, 0.0, 1.0]
    want = np.array([libm.fmaf(float(x), float(y), float(z)) for x, y, z in zip(a, b, c)],
                    np.float32)
    got = fma32(a, b, c)
    assert want[0] == np.float32(32 + 2.0 ** -18)   # the naive float64 route gives 32
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), np.flatnonzero(~same)[:5]


@pytest.mark.parametrize("n,d", [(1, 5), (63, 7), (64, 3), (65, 8), (150, 7)])
def test_online_softmax_tile_rule(shim, n, d):
    ffi, lib = shim
    rng = np.random.default_rng(n * 31 + d)
    q = rng.standard_normal(d).astype(np.float32)
    k = (rng.standard_normal((n, d)) * 2).astype(np.float32)
    v = rng.standard_normal((n, d)).astype(np.float32)
    out = np.empty(d, np.float32)
    scale = np.float32(1 / np.sqrt(d))
    lib.tlmt_attention_row(_ptr(ffi, q), _ptr(ffi, k), _ptr(ffi, v), _ptr(ffi, out), n, d,
                           float(scale))
    s = k.astype(np.float64) @ q.astype(np.float64) * float(scale)
    p = np.exp(s - s.max())
    want = p @ v.astype(np.float64) / p.sum()
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-6)
    if n == 1:   # one key: p = 1, l = 1, acc = fma(1, v, 0) = v exactly
        assert np.array_equal(out.view(np.uint32), v[0].view(np.uint32))


def test_online_softmax_fully_masked_row_is_zero(shim):
    ffi, lib = shim
    q = np.array([np.inf], np.float32)
    k = np.full((3, 1), -1.0, np.float32)   # every score is -inf
    v = np.ones((3, 1), np.float32)
    out = np.full(1, 7.0, np.float32)
    lib.tlmt_attention_row(_ptr(ffi, q), _ptr(ffi, k), _ptr(ffi, v), _ptr(ffi, out), 3, 1, 1.0)
    assert out[0] == 0.0


def test_header_builds_as_cuda_device_code():
    """nvcc compiles tl_math.h into device code (the GPU run also executes the comparison)."""
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                     if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        pytest.skip("nvcc not installed")
    # the compiler runs without the sanitizer `make sanitize` preloads into this process
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    r = subprocess.run(["make", "-s", "build/tl_math_device_check"], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
