"""Exact mode's CUDA batchnorm kernels with parallel chunk sums (native/cuda/bn_exact.cuh: the
rule-4 chunks of every channel side by side, then the fixed tree) run on the CPU through the small
CUDA emulation (tests/native/cuda_emu), against the loaded backend's batchnorm_channel_first and
its backward in exact mode (the stub in CI: the reference order), bit for bit: chunks that span
samples, more chunks than one block of the chunk grid, an odd number of chunks (the tree's
carry), one element per channel, tree blocks of 32 and 256 threads, inf and NaN; then close to
float64.
"""

import numpy as np
import pytest

import torchlean as tl
from torchlean._generated import ops
from cuda_emu import build_emu


@pytest.fixture(scope="module")
def emu():
    return build_emu("bn_exact_emu.so", "the exact CUDA batchnorm kernels", """
        int emu_bn_forward(const float *x, const float *gamma, const float *beta, float *y,
                           float *xhat, float *mean, float *var, float *inv_std, int64_t n,
                           int64_t c, int64_t s, float eps, int threads, int reverse);
        int emu_bn_backward(const float *g, const float *xhat, const float *inv_std,
                            const float *gamma, float *dx, float *dgamma, float *dbeta, int64_t n,
                            int64_t c, int64_t s, int threads, int reverse);
    """)


def ncs(shape):
    if len(shape) == 2:
        return 1, shape[0], shape[1]
    if len(shape) == 3:
        return 1, shape[0], shape[1] * shape[2]
    return shape[0], shape[1], int(np.prod(shape[2:]))


def emulate(emu, x, gamma, beta, g, eps, threads, reverse=False):
    """y, xhat, mean, var, inv_std, dx, dgamma, dbeta (outputs start as NaN)"""
    ffi, lib = emu
    n, c, s = ncs(x.shape)
    p = lambda a: ffi.cast("float *", ffi.from_buffer(a))  # noqa: E731
    y, xhat, dx = (np.full(x.shape, np.nan, np.float32) for _ in range(3))
    mean, var, inv_std, dgamma, dbeta = (np.full(c, np.nan, np.float32) for _ in range(5))
    assert lib.emu_bn_forward(p(x), p(gamma), p(beta), p(y), p(xhat), p(mean), p(var), p(inv_std),
                              n, c, s, eps, threads, reverse) == 0
    assert lib.emu_bn_backward(p(g), p(xhat), p(inv_std), p(gamma), p(dx), p(dgamma), p(dbeta),
                               n, c, s, threads, reverse) == 0
    return y, xhat, mean, var, inv_std, dx, dgamma, dbeta


def backend_exact(x, gamma, beta, g, eps):
    was = tl.is_exact()
    tl.set_exact(True)
    try:
        B = tl.AnyBuffer.from_numpy
        bx, bga, bbe, bg = B(x), B(gamma), B(beta), B(g)
        fwd = ops.batchnorm_channel_first(bx, bga, bbe, eps=eps)
        bwd = ops.batchnorm_channel_first_backward(bg, fwd[1], fwd[4], bga)
        out = [a.to_numpy() for a in list(fwd) + list(bwd)]
        for a in [bx, bga, bbe, bg] + list(fwd) + list(bwd):
            a.release()
    finally:
        tl.set_exact(was)
    return out


NAMES = ("y", "xhat", "mean", "var", "inv_std", "dx", "dgamma", "dbeta")


def assert_same_bits(got, want):
    for name, a, b in zip(NAMES, got, want):
        a, b = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
        assert a.shape == b.shape, (name, a.shape, b.shape)
        same = (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
        bad = np.flatnonzero(~same)
        assert bad.size == 0, (f"{name}: {bad.size} of {a.size} differ; first at {bad[0]}: "
                               f"{a[bad[0]]!r} vs {b[bad[0]]!r}")


def inputs(seed, shape):
    rng = np.random.default_rng(seed)
    c = ncs(shape)[1]
    x = (rng.normal(size=shape) * 3 + 1).astype(np.float32)
    return (x, rng.normal(size=c).astype(np.float32), rng.normal(size=c).astype(np.float32),
            rng.normal(size=shape).astype(np.float32))


SHAPES = [
    (3, 2, 7, 41),    # 287 per sample: chunks span samples, 4 chunks per channel
    (20, 2, 30, 30),  # 71 chunks: two blocks of the chunk grid, an odd tree
    (2, 5),           # (C, L)
    (4, 3, 1),        # one element per sample
    (1, 1, 1, 1),     # one element
    (2, 3, 16, 16),   # whole chunks, one per sample
    (70, 3, 8, 8),    # 8x8 planes: a whole block of 16 chunks read from the planes, then a partial one
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("threads", [32, 256])
def test_exact_batchnorm_kernels_are_the_stub_bit_for_bit(emu, shape, threads):
    x, gamma, beta, g = inputs(sum(shape), shape)
    want = backend_exact(x, gamma, beta, g, 1e-5)
    assert_same_bits(emulate(emu, x, gamma, beta, g, 1e-5, threads), want)


def test_exact_batchnorm_kernels_inf_nan_and_reverse_order(emu):
    shape = (5, 3, 9, 13)
    x, gamma, beta, g = inputs(1, shape)
    x[2, 0, 3, 4] = np.nan
    x[1, 1, 0, 0] = np.inf
    g[3, 2, 1, 1] = -np.inf
    want = backend_exact(x, gamma, beta, g, 1e-3)
    assert np.isnan(want[0][:, 0]).all() and np.isinf(want[7][2])
    assert_same_bits(emulate(emu, x, gamma, beta, g, 1e-3, 64), want)
    assert_same_bits(emulate(emu, x, gamma, beta, g, 1e-3, 64, reverse=True), want)


def test_exact_batchnorm_kernels_against_float64(emu):
    shape = (20, 2, 30, 30)
    x, gamma, beta, g = inputs(3, shape)
    y, xhat, mean, var, inv_std, dx, dgamma, dbeta = emulate(emu, x, gamma, beta, g, 1e-5, 128)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    m = x64.mean(axis=(0, 2, 3))
    v = x64.var(axis=(0, 2, 3))
    xh = (x64 - m[None, :, None, None]) / np.sqrt(v + 1e-5)[None, :, None, None]
    np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, v, rtol=1e-5)
    np.testing.assert_allclose(y, xh * gamma[None, :, None, None] + beta[None, :, None, None],
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dbeta, g64.sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dgamma, (g64 * xh).sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-3)
    cnt = x.size // 2
    dxh = g64 * gamma[None, :, None, None]
    ref = (cnt * dxh - dxh.sum(axis=(0, 2, 3), keepdims=True)
           - xh * (dxh * xh).sum(axis=(0, 2, 3), keepdims=True)) / (cnt * np.sqrt(v + 1e-5)[None, :, None, None])
    np.testing.assert_allclose(dx, ref, rtol=1e-3, atol=1e-5)


def test_exact_batchnorm_kernels_keep_negative_zero_sums(emu):
    """A channel of -0 sums to -0 (each chunk from its first value, not from +0): mean -0, and
    dbeta -0 for a gradient of -0."""
    shape = (3, 2, 7, 41)
    x, gamma, beta, g = inputs(4, shape)
    x[:, 0] = -0.0
    g[:, 1] = -0.0
    want = backend_exact(x, gamma, beta, g, 1e-5)
    assert np.signbit(want[2][0]) and want[2][0] == 0 and np.signbit(want[7][1])
    assert_same_bits(emulate(emu, x, gamma, beta, g, 1e-5, 32), want)
