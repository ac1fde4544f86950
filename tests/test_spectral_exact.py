"""spectral_conv1d_rfft and its backward, the stub's blocked kernels against two NumPy versions:

* bit for bit against a sequential re-implementation of native/stub/spectral.c's contract: the
  float64 twiddle table of tlm_twiddle (IEEE operations only, ported below), every sum in float64
  in index order (t for the DFT, c or o for the mixing, k for the inverse, the sample for dW),
  one np.add per summed index, vectorised over the other indices, so each output sees the same
  additions in the same order as the one-output-at-a-time loops (and CUDA);
* within a stated tolerance against a float64 np.fft reference written from ops.yaml's
  definition (rfft, truncate to `modes`, complex mixing, irfft; and its adjoint).

Shapes are odd, size 1, with and without the Nyquist bin, wider than a vector and not a
multiple of 8, and large enough for the threaded paths.
"""
from __future__ import annotations

import numpy as np
import pytest

from torchlean import AnyBuffer, ops

SHAPES = [  # batch, grid, width, modes
    (1, 1, 1, 1), (1, 2, 1, 2), (2, 3, 1, 2), (5, 1, 3, 1), (2, 7, 3, 4), (3, 8, 5, 5),
    (2, 33, 9, 17), (1, 32, 8, 8), (3, 64, 17, 8), (4, 256, 16, 9), (3, 61, 23, 13),
    (7, 16, 11, 9), (2, 127, 70, 20),
]


def twiddles(n):
    """tlm_twiddle (native/common/tl_math.h) for r = 0..n-1: the same IEEE double operations"""
    r = np.arange(n, dtype=np.int64)
    c, s = np.empty(n), np.empty(n)
    quarter = (4 * r) % n == 0
    q = (4 * r) // n
    c[quarter] = np.where(q == 0, 1.0, np.where(q == 2, -1.0, 0.0))[quarter]
    s[quarter] = np.where(q == 1, 1.0, np.where(q == 3, -1.0, 0.0))[quarter]
    o = (8 * r) // n
    u = 8 * r - o * n
    u = np.where(o & 1, n - u, u)
    x = 0.7853981633974483 * (u.astype(np.float64) / float(n))
    z = x * x
    sp = np.full(n, 1.9572941063391263e-20)
    for a in (-8.22063524662433e-18, 2.8114572543455206e-15, -7.647163731819816e-13,
              1.6059043836821613e-10, -2.505210838544172e-08, 2.7557319223985893e-06,
              -0.0001984126984126984, 0.008333333333333333, -0.16666666666666666):
        sp = sp * z + a
    sn = x + (x * z) * sp
    cp = np.full(n, -8.896791392450574e-22)
    for a in (4.110317623312165e-19, -1.5619206968586225e-16, 4.779477332387385e-14,
              -1.1470745597729725e-11, 2.08767569878681e-09, -2.755731922398589e-07,
              2.48015873015873e-05, -0.001388888888888889, 0.041666666666666664, -0.5):
        cp = cp * z + a
    cs = 1.0 + z * cp
    table = {0: (cs, sn), 1: (sn, cs), 2: (-sn, cs), 3: (-cs, sn), 4: (-cs, -sn), 5: (-sn, -cs),
             6: (sn, -cs), 7: (cs, -sn)}
    for k, (cv, sv) in table.items():
        m = ~quarter & (o == k)
        c[m], s[m] = cv[m], sv[m]
    return c, s


def _edge(k, n):
    return k == 0 or (n % 2 == 0 and k == n // 2)


def seq_dft(x, modes, c, s):
    """X[b, k, ch] = sum_t x[b, t, ch] (cos - i sin), t in order: re += x c, im -= x s"""
    B, n, W = x.shape
    k = np.arange(modes)
    re, im = np.zeros((B, modes, W)), np.zeros((B, modes, W))
    for t in range(n):
        r = (k * t) % n
        xt = x[:, t, None, :].astype(np.float64)
        re = re + xt * c[r][None, :, None]
        im = im - xt * s[r][None, :, None]
    return re, im


def seq_idft(zr, zi, n, c, s, weighted, scale):
    """y[b, t, ch] = scale * sum_k w_k (zr cos - zi sin), k in order, edge sin taken as 0"""
    B, modes, W = zr.shape
    t = np.arange(n)
    acc = np.zeros((B, n, W))
    for k in range(modes):
        r = (k * t) % n
        sk = np.zeros(n) if _edge(k, n) else s[r]
        w = 2.0 if weighted and not _edge(k, n) else 1.0
        d = zr[:, None, k, :] * c[r][None, :, None] - zi[:, None, k, :] * sk[None, :, None]
        acc = acc + (w * d if w != 1.0 else d)
    return (acc * scale).astype(np.float32)


def seq_forward(x, wr, wi):
    B, n, W = x.shape
    modes = wr.shape[0]
    c, s = twiddles(n)
    xr, xi = seq_dft(x, modes, c, s)
    wr, wi = wr.astype(np.float64), wi.astype(np.float64)
    zr, zi = np.zeros((B, modes, W)), np.zeros((B, modes, W))
    for ch in range(W):  # Z[b, k, o] += X[b, k, ch] W[k, ch, o]
        a, b = wr[None, :, ch, :], wi[None, :, ch, :]
        pr, pi = xr[:, :, ch, None], xi[:, :, ch, None]
        zr = zr + (pr * a - pi * b)
        zi = zi + (pr * b + pi * a)
    return seq_idft(zr, zi, n, c, s, True, 1.0 / n)


def seq_backward(x, wr, wi, g):
    B, n, W = x.shape
    modes = wr.shape[0]
    c, s = twiddles(n)
    xr, xi = seq_dft(x, modes, c, s)
    zr, zi = seq_dft(g, modes, c, s)
    for k in range(modes):
        sc = (1.0 if _edge(k, n) else 2.0) / n
        zr[:, k] = zr[:, k] * sc
        zi[:, k] = 0.0 if _edge(k, n) else zi[:, k] * sc
    wr, wi = wr.astype(np.float64), wi.astype(np.float64)
    dr, di = np.zeros((B, modes, W)), np.zeros((B, modes, W))
    for o in range(W):  # dX[b, k, ch] += dZ[b, k, o] conj(W[k, ch, o])
        a, b = wr[None, :, :, o], wi[None, :, :, o]
        pr, pi = zr[:, :, o, None], zi[:, :, o, None]
        dr = dr + (pr * a + pi * b)
        di = di + (pi * a - pr * b)
    dx = seq_idft(dr, di, n, c, s, False, 1.0)
    gr, gi = np.zeros((modes, W, W)), np.zeros((modes, W, W))
    for b in range(B):  # samples in increasing order
        pr, pi = xr[b, :, :, None], xi[b, :, :, None]
        qr, qi = zr[b, :, None, :], zi[b, :, None, :]
        gr = gr + (pr * qr + pi * qi)
        gi = gi + (pr * qi - pi * qr)
    return dx, gr.astype(np.float32), gi.astype(np.float32)


def fft_forward(x, wr, wi):
    """ops.yaml: X = rfft(x), Z[k, o] = sum_c X[k, c] W[k, c, o] for k < modes, y = irfft(Z)"""
    n, modes = x.shape[1], wr.shape[0]
    X = np.fft.rfft(x.astype(np.float64), axis=1)[:, :modes]
    Z = np.einsum("bkc,kco->bko", X, wr.astype(np.float64) + 1j * wi.astype(np.float64))
    full = np.zeros((x.shape[0], n // 2 + 1, x.shape[2]), complex)
    full[:, :modes] = Z
    return np.fft.irfft(full, n=n, axis=1)


def fft_backward(x, wr, wi, g):
    n, modes = x.shape[1], wr.shape[0]
    W = wr.astype(np.float64) + 1j * wi.astype(np.float64)
    X = np.fft.rfft(x.astype(np.float64), axis=1)[:, :modes]
    wk = np.array([1.0 if _edge(k, n) else 2.0 for k in range(modes)])
    dZ = np.fft.rfft(g.astype(np.float64), axis=1)[:, :modes] * (wk / n)[None, :, None]
    for k in range(modes):
        if _edge(k, n):
            dZ[:, k] = dZ[:, k].real
    dW = np.einsum("bkc,bko->kco", np.conj(X), dZ)
    dX = np.einsum("bko,kco->bkc", dZ, np.conj(W))
    t = np.arange(n)
    dx = np.zeros(x.shape)
    for k in range(modes):  # the rfft adjoint: sum_k (re cos - im sin), edge imaginary parts 0
        im = 0.0 if _edge(k, n) else dX[:, k].imag
        ang = 2 * np.pi * k * t / n
        dx += dX[:, k].real[:, None, :] * np.cos(ang)[None, :, None] - (im * np.ones_like(dX[:, k].imag))[:, None, :] * np.sin(ang)[None, :, None]
    return dx, dW.real, dW.imag


def _data(shape, seed, special=False, shape_modes=(0,)):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(np.float32)
    if special == "cancel":
        # plus a 2^30-high wave on a bin above `modes`: the float64 DFT sums cancel it to a residue
        # of their rounding errors that reaches the float32 bits, so their order shows
        B, n, W = shape
        m = shape_modes[0]
        if m <= n // 2:
            t = np.arange(n)[:, None]
            f = m + (np.arange(W)[None, :] % (n // 2 - m + 1))
            a = a + (2.0 ** 30 * np.cos(2 * np.pi * f * t / n))[None].astype(np.float32)
        return a.astype(np.float32)
    if special:
        f = a.reshape(-1)
        f[rng.choice(f.size, max(1, f.size // 10), replace=False)] = rng.choice(
            np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32), max(1, f.size // 10))
    return a


def cancelling_terms(x, g, wr, wi, H=np.float32(2.0 ** 30)):
    """Terms that cancel inside the other sums, so their order reaches the float32 bits too:
    samples 0 and 1 carry +-H times one pattern (dW's sum over samples); channels 0 and 1 of x
    and g are equal and the weights carry H q_c q_o with q = (1, -1, 0, ...) (the mixing's sums
    over c and over o)."""
    B, n, W = x.shape
    rng = np.random.default_rng(9)
    if B >= 2:
        pat = rng.standard_normal((n, W)).astype(np.float32) * H
        x[0] += pat
        x[1] -= pat
    if W >= 2:
        x[:, :, 1] = x[:, :, 0]
        g[:, :, 1] = g[:, :, 0]
        q = np.zeros(W, np.float32)
        q[:2] = (1, -1)
        wr += H * q[None, :, None] * q[None, None, :]
        wi -= H * q[None, :, None] * q[None, None, :]


def _bits(a):
    f = np.asarray(a, np.float32)
    u = f.view(np.uint32).copy()
    u[np.isnan(f)] = 0x7FC00000
    return u


def _run(x, wr, wi, g):
    up = AnyBuffer.from_numpy
    y = ops.spectral_conv1d_rfft(up(x), up(wr), up(wi)).to_numpy()
    dx, dwr, dwi = (v.to_numpy() for v in ops.spectral_conv1d_rfft_backward(up(x), up(wr), up(wi), up(g)))
    return y, dx, dwr, dwi


def test_twiddle_port_matches_library():
    """the NumPy table reproduces rfft of an impulse at t = 1 (cos, -sin rounded to float32)"""
    for n in (1, 2, 5, 8, 12, 97, 1024):
        x = np.zeros(n, np.float32)
        x[min(1, n - 1)] = 1.0
        got = ops.rfft(AnyBuffer.from_numpy(x)).to_numpy()
        c, s = twiddles(n)
        k = np.arange(n // 2 + 1) * min(1, n - 1) % n
        np.testing.assert_array_equal(got[:, 0], c[k].astype(np.float32))
        np.testing.assert_array_equal(got[:, 1], (0.0 - s[k]).astype(np.float32))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("special", [False, "cancel", True], ids=["finite", "cancel", "nan_inf_zero"])
def test_bits_match_sequential_loops(shape, special):
    B, n, W, M = shape
    x, g = _data((B, n, W), 1, special, (M,)), _data((B, n, W), 2, special, (M,))
    wr, wi = _data((M, W, W), 3, special and special != "cancel"), _data((M, W, W), 4, special and special != "cancel")
    if special == "cancel":
        cancelling_terms(x, g, wr, wi)
    y, dx, dwr, dwi = _run(x, wr, wi, g)
    with np.errstate(all="ignore"):
        ry = seq_forward(x, wr, wi)
        rdx, rdwr, rdwi = seq_backward(x, wr, wi, g)
    for name, got, want in (("y", y, ry), ("dx", dx, rdx), ("dw_re", dwr, rdwr), ("dw_im", dwi, rdwi)):
        diff = np.count_nonzero(_bits(got) != _bits(want))
        assert diff == 0, f"{name}: {diff} of {got.size} words differ from the sequential loops"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_close_to_float64_fft(shape):
    """float64 reference; the stub sums in float64 and rounds once to float32, so the error is
    float32 rounding of the result plus float64 error: rtol 1e-5 of the largest magnitude"""
    B, n, W, M = shape
    x, g = _data((B, n, W), 5), _data((B, n, W), 6)
    wr, wi = _data((M, W, W), 7), _data((M, W, W), 8)
    y, dx, dwr, dwi = _run(x, wr, wi, g)
    ry = fft_forward(x, wr, wi)
    rdx, rdwr, rdwi = fft_backward(x, wr, wi, g)
    for name, got, want in (("y", y, ry), ("dx", dx, rdx), ("dw_re", dwr, rdwr), ("dw_im", dwi, rdwi)):
        tol = 1e-5 * max(1.0, float(np.max(np.abs(want))))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=tol, err_msg=name)
