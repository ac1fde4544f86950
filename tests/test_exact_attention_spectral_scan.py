"""Exact mode for attention, spectral and scan: the stub's kernels follow their stated canonical
order (native/stub/attention.c, spectral.c, scan.c file comments) bit for bit, at sizes above one
attention tile (64 keys), and agree with float64 references within the registry's tolerances.

The bit-level references are independent NumPy emulations of the stated order: float32 fma from
tests/exact_fma.py, exp and log from the separately compiled tl_math.h shim of
test_exact_math.py (the canonical functions themselves, whose accuracy that file measures), the
DFT twiddles re-derived here in Python doubles. CUDA's exact path is compared with the stub by
tests/test_exact_parity.py over the registry cases; passing here on the stub and there on CUDA
means both follow the order written in these tests.
"""
import math

import numpy as np
import pytest

import torchlean as tl
from torchlean._generated import ops as O

import reference as R
from exact_fma import fma32, gemm_exact_reference
from test_exact_math import evaluate, shim  # noqa: F401  (shim is a fixture)

F32 = np.float32
NEG_INF = F32(-np.inf)


@pytest.fixture
def exact():
    was = tl.is_exact()
    assert tl.set_exact(True)
    yield
    tl.set_exact(was)


def run(op, *arrays, **attrs):
    bufs = [tl.AnyBuffer.from_numpy(np.ascontiguousarray(a, F32)) for a in arrays]
    out = op(*bufs, **attrs)
    out = out if isinstance(out, tuple) else (out,)
    res = tuple(o.to_numpy() for o in out)
    for b in list(bufs) + list(out):
        b.release()
    return res


def assert_bits(got, want, what):
    got, want = np.asarray(got, F32).ravel(), np.asarray(want, F32).ravel()
    assert got.size == want.size, f"{what}: {got.size} values, expected {want.size}"
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, (f"{what}: {bad.size} of {got.size} differ; first at {bad[0]}: "
                           f"{got[bad[0]]!r} vs {want[bad[0]]!r}")


# ---------------------------------------------------------------- attention

def _heads(a, B, n, H, hd):
    return np.ascontiguousarray(a.reshape(B, n, H, hd).transpose(0, 2, 1, 3))


def _rows(a, B, n, H, hd):
    return np.ascontiguousarray(a.transpose(0, 2, 1, 3).reshape(B * n, H * hd))


def attention_emulation(shim, wq, wk, wv, wo, x, g, H, mask):
    """The stated order in NumPy: exact-GEMM projections, rule 5 per row (64-key tiles),
    the backward from recomputed probabilities with one fma chain per gradient row."""
    exp = lambda v: evaluate(shim, "exp", v)
    log = lambda v: evaluate(shim, "log", v)
    B, n, dm = x.shape
    HD = wq.shape[1]
    hd = HD // H
    X = x.reshape(B * n, dm)
    q, k, v = (gemm_exact_reference(X, w) for w in (wq, wk, wv))
    Qh, Kh, Vh = (_heads(a, B, n, H, hd) for a in (q, k, v))
    scale = F32(1.0 / math.sqrt(hd))
    dots = np.zeros((B, H, n, n), F32)
    for p in range(hd):
        dots = fma32(Qh[..., :, None, p], Kh[..., None, :, p], dots)
    ok = np.ones((n, n), bool) if mask is None else np.asarray(mask, bool)
    S = np.where(ok, dots * scale, NEG_INF).astype(F32)
    nan_row = np.isnan(S).any(-1)
    m = np.full((B, H, n), NEG_INF, F32)
    l = np.zeros((B, H, n), F32)
    acc = np.zeros((B, H, n, hd), F32)
    with np.errstate(invalid="ignore", over="ignore"):
        for j0 in range(0, n, 64):
            s = S[..., j0:j0 + 64]
            m_new = m.copy()
            for jj in range(s.shape[-1]):
                m_new = np.where(s[..., jj] > m_new, s[..., jj], m_new)
            alpha = np.where(m == m_new, F32(1), exp(m - m_new)).astype(F32)
            p = np.where((m_new == NEG_INF)[..., None], F32(0), exp(s - m_new[..., None])).astype(F32)
            t = p[..., 0]
            for jj in range(1, p.shape[-1]):
                t = t + p[..., jj]
            l = l * alpha + t
            m = m_new
            acc = acc * alpha[..., None]
            for jj in range(p.shape[-1]):
                acc = fma32(p[..., jj, None], Vh[..., j0 + jj, None, :], acc)
        out = np.where((l == 0)[..., None], F32(0), acc / np.where(l == 0, F32(1), l)[..., None])
        lse = np.where(l == 0, F32(0), m + log(np.where(l == 0, F32(1), l))).astype(F32)
    out = np.where(nan_row[..., None], F32(np.nan), out).astype(F32)
    lse = np.where(nan_row, F32(np.nan), lse)
    attn = _rows(out, B, n, H, hd)
    y = gemm_exact_reference(attn, wo)
    fwd = dict(y=y.reshape(B, n, dm), q=q, k=k, v=v, lse=lse.reshape(-1), attn=attn)

    G = g.reshape(B * n, dm)
    dwo = gemm_exact_reference(attn.T, G)
    dO = gemm_exact_reference(G, wo.T)
    dOh, Oh = _heads(dO, B, n, H, hd), out
    D = np.zeros((B, H, n), F32)
    dP = np.zeros((B, H, n, n), F32)
    for p_ in range(hd):
        D = fma32(dOh[..., p_], Oh[..., p_], D)
        dP = fma32(dOh[..., :, None, p_], Vh[..., None, :, p_], dP)
    with np.errstate(invalid="ignore", over="ignore"):
        P = exp((dots * scale).astype(F32) - lse[..., None])
        dS = ((P * (dP - D[..., None])) * scale).astype(F32)
    dQ = np.zeros_like(Qh)
    dK = np.zeros_like(Kh)
    dV = np.zeros_like(Vh)
    for j in range(n):
        dQ = np.where(ok[:, j, None], fma32(dS[..., :, j, None], Kh[..., j, None, :], dQ), dQ)
    for i in range(n):
        dK = np.where(ok[i, :, None], fma32(dS[..., i, :, None], Qh[..., i, None, :], dK), dK)
        dV = np.where(ok[i, :, None], fma32(P[..., i, :, None], dOh[..., i, None, :], dV), dV)
    dQ, dK, dV = (_rows(a, B, n, H, hd) for a in (dQ, dK, dV))
    dx = gemm_exact_reference(dQ, wq.T)
    dx = gemm_exact_reference(dK, wk.T, init=dx)
    dx = gemm_exact_reference(dV, wv.T, init=dx)
    bwd = dict(dwq=gemm_exact_reference(X.T, dQ), dwk=gemm_exact_reference(X.T, dK),
               dwv=gemm_exact_reference(X.T, dV), dwo=dwo, dx=dx.reshape(B, n, dm))
    return fwd, bwd


def _attention_inputs(seed, B, n, dm, H, hd):
    rng = np.random.default_rng(seed)
    ws = [rng.uniform(-1, 1, (dm, H * hd)).astype(F32) for _ in range(3)]
    wo = rng.uniform(-1, 1, (H * hd, dm)).astype(F32)
    x = rng.uniform(-1, 1, (B, n, dm)).astype(F32)
    g = rng.uniform(-1, 1, (B, n, dm)).astype(F32)
    return ws + [wo, x, g]


def _mask(seed, n):
    rng = np.random.default_rng(seed)
    mask = rng.uniform(size=(n, n)) < 0.7
    mask[1] = False            # a fully blocked row
    mask[2] = False
    mask[2, n - 1] = True      # one allowed key, in the last tile
    return mask


ATTENTION_SHAPES = [  # (B, n, dm, H, hd, masked)
    (2, 130, 6, 3, 5, False),
    (1, 129, 4, 2, 3, True),
    (1, 64, 3, 1, 7, True),
    (2, 1, 5, 2, 2, False),
]


@pytest.mark.parametrize("B,n,dm,H,hd,masked", ATTENTION_SHAPES)
def test_attention_follows_the_stated_order_bit_for_bit(exact, shim, B, n, dm, H, hd, masked):
    wq, wk, wv, wo, x, g = _attention_inputs(n * 7 + hd, B, n, dm, H, hd)
    mask = _mask(n, n) if masked and n > 2 else None
    got = run(O.multi_head_attention, wq, wk, wv, wo, x, num_heads=H, mask=mask)
    fwd, bwd = attention_emulation(shim, wq, wk, wv, wo, x, g, H, mask)
    for name, val in zip(["y", "q", "k", "v", "lse", "attn"], got):
        assert_bits(val, fwd[name], name)
    _, q, k, v, lse, attn = got
    grads = run(O.multi_head_attention_backward, g, wq, wk, wv, wo, x, q, k, v, lse, attn,
                num_heads=H, mask=mask)
    for name, val in zip(["dwq", "dwk", "dwv", "dwo", "dx"], grads):
        assert_bits(val, bwd[name], name)
    # and the float64 reference, registry tolerances
    want = R.multi_head_attention(*(a.astype(np.float64) for a in (wq, wk, wv, wo, x)), H, mask)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)


def test_attention_nan_in_a_weight_reaches_the_output(exact, shim):
    wq, wk, wv, wo, x, g = _attention_inputs(3, 1, 70, 4, 2, 2)
    wq[0, 0] = np.nan   # head 0's scores are all NaN
    got = run(O.multi_head_attention, wq, wk, wv, wo, x, num_heads=2)
    lse = got[4].ravel()
    assert np.isnan(got[0]).all() and np.isnan(lse[:70]).all()
    assert not np.isnan(lse[70:]).any()   # head 1's log-sum-exp is untouched
    fwd, _ = attention_emulation(shim, wq, wk, wv, wo, x, g, 2, None)
    assert_bits(got[5], fwd["attn"], "attn")


def test_attention_wide_head_matches_float64(exact):
    """hd = 260: wider than CUDA's 256-dim pass, so its exact kernel takes two passes."""
    wq, wk, wv, wo, x, _ = _attention_inputs(11, 1, 3, 2, 1, 260)
    got = run(O.multi_head_attention, wq, wk, wv, wo, x, num_heads=1)
    want = R.multi_head_attention(*(a.astype(np.float64) for a in (wq, wk, wv, wo, x)), 1)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- spectral

def twiddle(r, n):
    """tlm_twiddle re-derived in Python doubles (IEEE, no FMA): cos, sin of 2 pi r / n."""
    if (4 * r) % n == 0:
        qq = 4 * r // n
        return (1.0, 0.0, -1.0, 0.0)[qq], (0.0, 1.0, 0.0, -1.0)[qq]
    o = 8 * r // n
    u = 8 * r - o * n
    if o & 1:
        u = n - u
    x = 0.7853981633974483 * (u / n)
    z = x * x
    sp = 1 / math.factorial(21)
    for kk in range(19, 1, -2):
        sp = sp * z + (-1) ** ((kk - 1) // 2) / math.factorial(kk)
    cp = -1 / math.factorial(22)
    for kk in range(20, 0, -2):
        cp = cp * z + (-1) ** (kk // 2) / math.factorial(kk)
    sn, cs = x + (x * z) * sp, 1.0 + z * cp
    return {0: (cs, sn), 1: (sn, cs), 2: (-sn, cs), 3: (-cs, sn), 4: (-cs, -sn), 5: (-sn, -cs),
            6: (sn, -cs), 7: (cs, -sn)}[o]


def twiddle_table(n):
    t = np.array([twiddle(r, n) for r in range(n)], np.float64)
    return t[:, 0], t[:, 1]


@pytest.mark.parametrize("n", [1, 2, 3, 8, 12, 257, 300, 1000])
def test_twiddles_are_accurate(n):
    c, s = twiddle_table(n)
    ld = np.longdouble   # the reference angle in extended precision where the platform has it
    ang = 2 * ld("3.14159265358979323846264338327950288") * np.arange(n, dtype=ld) / ld(n)
    tol = 4e-16 if np.finfo(ld).eps < 1e-18 else 2e-15
    assert np.abs(c - np.cos(ang)).max() < tol and np.abs(s - np.sin(ang)).max() < tol
    quarter = (4 * np.arange(n)) % n == 0
    assert set(np.round(c[quarter] * 2 + s[quarter])) <= {2.0, 1.0, -2.0, -1.0}


def rfft_emulation(x, n):
    """Y_k = sum_t x_t (cos - i sin)(2 pi k t / n) in double, t in order, rounded once."""
    c, s = twiddle_table(n)
    bins = n // 2 + 1
    k = np.arange(bins)
    re = np.zeros(x.shape[:-1] + (bins,))
    im = np.zeros_like(re)
    for t in range(n):
        r = (k * t) % n
        xt = x[..., t:t + 1].astype(np.float64)
        re = re + xt * c[r]
        im = im - xt * s[r]
    return np.stack([re, im], -1).astype(F32)


def irfft_emulation(spec, n):
    """y_t = (sum_k w_k (re_k cos - im_k sin)) * (1/n), k in order, edge imaginary parts 0."""
    c, s = twiddle_table(n)
    bins = n // 2 + 1
    t = np.arange(n)
    acc = np.zeros(spec.shape[:-2] + (n,))
    for k in range(bins):
        edge = k == 0 or (n % 2 == 0 and k == n // 2)
        w = 1.0 if edge else 2.0
        re = spec[..., k, 0:1].astype(np.float64)
        im = 0.0 if edge else spec[..., k, 1:2].astype(np.float64)
        r = (k * t) % n
        acc = acc + w * (re * c[r] - im * s[r])
    return (acc * (1.0 / n)).astype(F32)


@pytest.mark.parametrize("batch,n", [(3, 300), (2, 257), (1, 1), (2, 130)])
def test_rfft_and_irfft_follow_the_stated_order(exact, batch, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((batch, n)).astype(F32)
    (y,) = run(O.rfft, x)
    assert_bits(y, rfft_emulation(x, n), "rfft")
    np.testing.assert_allclose(y, R.rfft(x.astype(np.float64)), rtol=1e-5, atol=1e-4)
    spec = rng.standard_normal((batch, n // 2 + 1, 2)).astype(F32)
    (z,) = run(O.irfft, spec, n=n)
    assert_bits(z, irfft_emulation(spec, n), "irfft")
    np.testing.assert_allclose(z, R.irfft(spec.astype(np.float64), n), rtol=1e-5, atol=1e-5)


def spectral_conv_emulation(x, w_re, w_im):
    """Truncated DFT per channel, mix over input channels in order, weighted truncated inverse;
    double throughout, each sum in index order, rounded to float32 once."""
    grid, modes = x.shape[-2], w_re.shape[0]
    c, s = twiddle_table(grid)
    xd = x.astype(np.float64)
    k = np.arange(modes)
    Xr = np.zeros(x.shape[:-2] + (modes, x.shape[-1]))
    Xi = np.zeros_like(Xr)
    for t in range(grid):
        r = (k * t) % grid
        xt = xd[..., t:t + 1, :]
        Xr = Xr + xt * c[r][:, None]
        Xi = Xi - xt * s[r][:, None]
    wr, wi = w_re.astype(np.float64), w_im.astype(np.float64)
    Zr = np.zeros_like(Xr)
    Zi = np.zeros_like(Xi)
    for ch in range(x.shape[-1]):
        xr, xi = Xr[..., ch:ch + 1], Xi[..., ch:ch + 1]
        Zr = Zr + (xr * wr[:, ch, :] - xi * wi[:, ch, :])
        Zi = Zi + (xr * wi[:, ch, :] + xi * wr[:, ch, :])
    t = np.arange(grid)
    acc = np.zeros(x.shape)
    for kk in range(modes):
        edge = kk == 0 or (grid % 2 == 0 and kk == grid // 2)
        r = (kk * t) % grid
        sk = np.where(edge, 0.0, s[r])[:, None]
        acc = acc + (1.0 if edge else 2.0) * (Zr[..., kk:kk + 1, :] * c[r][:, None]
                                              - Zi[..., kk:kk + 1, :] * sk)
    return (acc * (1.0 / grid)).astype(F32)


@pytest.mark.parametrize("shape,modes", [((2, 70, 3), 20), ((130, 2), 66), ((5, 1), 3)])
def test_spectral_conv_follows_the_stated_order(exact, shape, modes):
    rng = np.random.default_rng(modes)
    width = shape[-1]
    x = rng.standard_normal(shape).astype(F32)
    w_re, w_im = (rng.standard_normal((modes, width, width)).astype(F32) for _ in range(2))
    (y,) = run(O.spectral_conv1d_rfft, x, w_re, w_im)
    assert_bits(y, spectral_conv_emulation(x, w_re, w_im), "spectral_conv1d_rfft")
    want = R.spectral_conv1d_rfft(*(a.astype(np.float64) for a in (x, w_re, w_im)))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- scan

def scan_emulation(a, b, x, h0, g):
    """Forward h_t = a_t h_{t-1} + b_t x_t and backward carry g_t = dY_t + a_{t+1} g_{t+1} in
    float32 (rounded products, no FMA); coefficient gradients as exact double products summed per
    sample over time (decreasing) for (D,) forms, then over samples in increasing order."""
    B, T, D = x.shape

    def coef(c, i, t):
        return c if c.ndim == 1 else c[t] if c.ndim == 2 else c[i, t]

    h = np.zeros_like(x)
    for i in range(B):
        hp = h0[i]
        for t in range(T):
            hp = (coef(a, i, t) * hp) + (coef(b, i, t) * x[i, t])
            h[i, t] = hp
    da, db = np.zeros(a.shape), np.zeros(b.shape)
    dx, dh0 = np.zeros_like(x), np.zeros_like(h0)
    for i in range(B):
        sa, sb = np.zeros(D), np.zeros(D)
        gn = None
        for t in range(T - 1, -1, -1):
            gt = g[i, t] if gn is None else g[i, t] + coef(a, i, t + 1) * gn
            gn = gt
            hp = h[i, t - 1] if t else h0[i]
            pa, pb = gt.astype(np.float64) * hp, gt.astype(np.float64) * x[i, t]
            for c, dc, s_, pr in ((a, da, sa, pa), (b, db, sb, pb)):
                if c.ndim == 1:
                    s_ += pr
                elif c.ndim == 2:
                    dc[t] += pr
                else:
                    dc[i, t] += pr
            dx[i, t] = gt * coef(b, i, t)
        if a.ndim == 1:
            da += sa
        if b.ndim == 1:
            db += sb
        dh0[i] = coef(a, i, 0) * gn
    return h, (da.astype(F32), db.astype(F32), dx, dh0)


@pytest.mark.parametrize("a_shape,b_shape", [("D", "D"), ("TD", "D"), ("D", "BTD"), ("BTD", "TD")])
def test_selective_scan_follows_the_stated_order(exact, a_shape, b_shape):
    B, T, D = 3, 300, 5
    rng = np.random.default_rng(len(a_shape) * 10 + len(b_shape))
    shapes = {"D": (D,), "TD": (T, D), "BTD": (B, T, D)}
    a = rng.uniform(-0.95, 0.95, shapes[a_shape]).astype(F32)
    b = rng.uniform(-1, 1, shapes[b_shape]).astype(F32)
    x, g = (rng.uniform(-1, 1, (B, T, D)).astype(F32) for _ in range(2))
    h0 = rng.uniform(-1, 1, (B, D)).astype(F32)
    y, hc = run(O.selective_scan, a, b, x, h0)
    h_want, grads_want = scan_emulation(a, b, x, h0, g)
    assert_bits(y, h_want, "selective_scan")
    np.testing.assert_allclose(y, R.selective_scan(*(v.astype(np.float64) for v in (a, b, x, h0))),
                               rtol=1e-5, atol=1e-5)
    # the residual: the state entering each chunk of 16 steps (h0, h_15, h_31, ...)
    entering = np.concatenate([h0[:, None], h_want[:, 15:-1:16]], axis=1)
    assert_bits(hc, entering, "selective_scan checkpoints")
    # the backward recomputes the states from hc and writes dx over g
    grads = run(O.selective_scan_backward, a, b, x, h0, hc, g)
    for name, got, want in zip(["da", "db", "dx", "dh0"], grads, grads_want):
        assert_bits(got, want, name)
