"""Exact mode's CUDA convolution kernels (native/cuda/conv_exact.cuh: implicit GEMMs, no im2col
or col2im buffer) run on the CPU through the small CUDA emulation (tests/native/cuda_emu), against
the loaded backend's conv ops in exact mode (the stub in CI: the reference orders of
stub/conv_pool.c), bit for bit: forward, input gradient and kernel gradient of the convolution
and the transposed convolution, 1-D, 2-D and 3-D, odd sizes, strides and paddings, size 1, tiles of
4 and 8 outputs per thread, several tiles per axis, chains longer than one 16-deep stage, inf,
NaN and signed zeros; then close to a float64 reference.
"""

import numpy as np
import pytest

import torchlean as tl
from torchlean._generated import ops
from cuda_emu import build_emu


@pytest.fixture(scope="module")
def emu():
    return build_emu("conv_exact_emu.so", "the exact CUDA convolution kernels", """
        int emu_conv_exact_forward(const int *g, int transpose, const float *W, const float *bias,
                                   const float *X, float *Y, int reverse);
        int emu_conv_exact_backward(const int *g, int transpose, const float *W, const float *X,
                                    const float *G, float *dW, float *dX, int chunk, int reverse);
    """)


def out_size(n, k, s, p, transpose):
    return (n - 1) * s + k - 2 * p if transpose else (n + 2 * p - k) // s + 1


def pad3(t, fill):
    return (fill,) * (3 - len(t)) + tuple(t)


def geometry(N, Cin, Cout, size, kernel, stride, padding, transpose):
    """conv_exact.cuh's ConvDims as 18 int32 (axes right-aligned in depth, height, width)"""
    out = [out_size(n, k, s, p, transpose) for n, k, s, p in zip(size, kernel, stride, padding)]
    return np.array([N, Cin, Cout, *pad3(size, 1), *pad3(out, 1), *pad3(kernel, 1),
                     *pad3(stride, 1), *pad3(padding, 0)], np.int32), tuple(out)


def emulate(emu, g, transpose, w, b, x, gy, chunk=2, reverse=False):
    """y, dW, dX from the emulated kernels; outputs start as NaN, so one never written shows"""
    ffi, lib = emu
    ptr = lambda a: ffi.cast("float *", ffi.from_buffer(a))  # noqa: E731
    gp = ffi.cast("int *", ffi.from_buffer(g))
    y = np.full(gy.shape, np.nan, np.float32)
    dw = np.full(w.shape, np.nan, np.float32)
    dx = np.full(x.shape, np.nan, np.float32)
    assert lib.emu_conv_exact_forward(gp, transpose, ptr(w), ptr(b), ptr(x), ptr(y), reverse) == 0
    assert lib.emu_conv_exact_backward(gp, transpose, ptr(w), ptr(x), ptr(gy), ptr(dw), ptr(dx),
                                       chunk, reverse) == 0
    return y, dw, dx


def backend_exact(transpose, w, b, x, gy, stride, padding):
    """the loaded backend's conv ops in exact mode (conv2d / conv_transpose2d for two spatial
    axes, the N-D ops otherwise): y, dW, dX"""
    if x.ndim == 4:
        fwd = ops.conv_transpose2d if transpose else ops.conv2d
    else:
        fwd = ops.conv_transpose if transpose else ops.conv
    bwd = ops.conv_transpose_backward if transpose else ops.conv_backward
    stride, padding = list(stride), list(padding)
    was = tl.is_exact()
    tl.set_exact(True)
    try:
        B = tl.AnyBuffer.from_numpy
        bufs = [B(np.ascontiguousarray(a)) for a in (w, b, x, gy)]
        y = fwd(bufs[0], bufs[1], bufs[2], stride=stride, padding=padding)
        dw, db, dx = bwd(bufs[0], bufs[2], bufs[3], stride=stride, padding=padding)
        out = [a.to_numpy() for a in (y, dw, dx)]
        for a in bufs + [y, dw, db, dx]:
            a.release()
    finally:
        tl.set_exact(was)
    return out


def assert_same_bits(got, want, names=("y", "dW", "dX")):
    for name, a, b in zip(names, got, want):
        a, b = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
        assert a.shape == b.shape, (name, a.shape, b.shape)
        same = (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
        bad = np.flatnonzero(~same)
        assert bad.size == 0, (f"{name}: {bad.size} of {a.size} differ; first at {bad[0]}: "
                               f"{a[bad[0]]!r} vs {b[bad[0]]!r}")


def case(seed, N, Cin, Cout, size, kernel, stride, padding, transpose):
    """geometry and random w, b, x, g of one case"""
    g, out = geometry(N, Cin, Cout, size, kernel, stride, padding, transpose)
    assert all(o > 0 for o in out), "a case without output"
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    w = f(Cin, Cout, *kernel) if transpose else f(Cout, Cin, *kernel)
    return g, w, f(Cout), f(N, Cin, *size), f(N, Cout, *out)


# N, Cin, Cout, H, W, KH, KW, SH, SW, PH, PW
SHAPES = [
    (2, 3, 5, 7, 6, 3, 3, 1, 1, 1, 1),       # one tile, chains of 27 taps (two stages)
    (3, 4, 70, 9, 10, 3, 2, 2, 1, 1, 0),     # 8 rows per thread, two column tiles, stride 2
    (1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0),       # size 1
    (2, 2, 3, 8, 8, 2, 2, 3, 3, 0, 0),       # stride past the kernel: cells no tap reads
    (1, 2, 3, 5, 4, 5, 3, 1, 2, 2, 1),       # padding 2 with a 5-tap axis
    (1, 130, 3, 4, 3, 3, 3, 1, 1, 1, 1),     # 130 image channels: two 128-row tiles
    (2, 6, 17, 6, 7, 3, 3, 1, 1, 1, 1),      # chains over 17 channels and 42 positions
]


def case2d(seed, shape, transpose):
    N, Cin, Cout, H, W, KH, KW, SH, SW, PH, PW = shape
    return case(seed, N, Cin, Cout, (H, W), (KH, KW), (SH, SW), (PH, PW), transpose)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("transpose", [0, 1])
def test_exact_conv_kernels_are_the_stub_bit_for_bit(emu, shape, transpose):
    g, w, b, x, gy = case2d(sum(shape) + transpose, shape, transpose)
    got = emulate(emu, g, transpose, w, b, x, gy)
    assert_same_bits(got, backend_exact(transpose, w, b, x, gy, shape[7:9], shape[9:11]))


@pytest.mark.parametrize("transpose", [0, 1])
def test_exact_conv_kernels_1d(emu, transpose):
    g, w, b, x, gy = case(5 + transpose, 3, 5, 9, (23,), (4,), (2,), (2,), transpose)
    got = emulate(emu, g, transpose, w, b, x, gy, chunk=3)
    assert_same_bits(got, backend_exact(transpose, w, b, x, gy, (2,), (2,)))


@pytest.mark.parametrize("geom", [
    ((5, 4, 6), (3, 2, 3), (1, 1, 2), (1, 0, 1)),
    ((6, 3, 5), (2, 3, 1), (2, 1, 3), (0, 1, 0)),
    ((1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0)),
], ids=["k323", "stride213", "size1"])
@pytest.mark.parametrize("transpose", [0, 1])
def test_exact_conv_kernels_3d(emu, geom, transpose):
    size, kernel, stride, padding = geom
    g, w, b, x, gy = case(sum(size) + transpose, 2, 3, 4, size, kernel, stride, padding, transpose)
    got = emulate(emu, g, transpose, w, b, x, gy)
    assert_same_bits(got, backend_exact(transpose, w, b, x, gy, stride, padding))


@pytest.mark.parametrize("transpose", [0, 1])
def test_exact_conv_kernels_inf_nan_and_signed_zeros(emu, transpose):
    """inf and NaN flow as the stub's (padding taps multiply a 0: an inf weight there gives NaN);
    -0 biases and zero data keep the stub's zero signs; the reverse thread order too."""
    shape = (2, 3, 4, 6, 5, 3, 3, 2, 1, 1, 1)
    g, w, b, x, gy = case2d(3, shape, transpose)
    w.reshape(-1)[5] = np.inf
    x[0, 1, 2, 3] = np.nan
    x[1, 0, 0, 0] = -np.inf
    gy.reshape(-1)[7] = np.inf
    b[:] = -0.0
    x[1, 2] = -0.0
    gy[1, :2] = 0.0
    w[1] = -0.0
    want = backend_exact(transpose, w, b, x, gy, (2, 1), (1, 1))
    assert np.isnan(want[0]).any() and np.isnan(want[1]).any() and np.isinf(want[2]).any()
    assert_same_bits(emulate(emu, g, transpose, w, b, x, gy), want)
    assert_same_bits(emulate(emu, g, transpose, w, b, x, gy, chunk=1, reverse=True), want)


def conv2d_f64(w, b, x, s, p):
    """float64 cross-correlation with zero padding: y[n, o, i, j]"""
    N, C, H, W = x.shape
    O, _, KH, KW = w.shape
    xp = np.zeros((N, C, H + 2 * p[0], W + 2 * p[1]))
    xp[:, :, p[0]:p[0] + H, p[1]:p[1] + W] = x
    OH, OW = (H + 2 * p[0] - KH) // s[0] + 1, (W + 2 * p[1] - KW) // s[1] + 1
    y = np.zeros((N, O, OH, OW)) + b[None, :, None, None]
    for kh in range(KH):
        for kw in range(KW):
            patch = xp[:, :, kh:kh + s[0] * OH:s[0], kw:kw + s[1] * OW:s[1]]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, kh, kw].astype(np.float64))
    return y


def test_exact_conv_kernels_against_float64(emu):
    """forward against float64; dX and dW against the adjoint identity <g, conv(x)> derivatives:
    dW = d<g, y>/dW and dX = d<g, y>/dX computed in float64 from the linearity of the conv"""
    shape = (2, 6, 17, 6, 7, 3, 3, 2, 1, 1, 1)
    N, Cin, Cout, H, W, KH, KW, SH, SW, PH, PW = shape
    g, w, b, x, gy = case2d(11, shape, 0)
    y, dw, dx = emulate(emu, g, 0, w, b, x, gy)
    w64, x64, g64 = (a.astype(np.float64) for a in (w, x, gy))
    ref = conv2d_f64(w64, b.astype(np.float64), x64, (SH, SW), (PH, PW))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    # dW[o, c, kh, kw] = <g[:, o], conv of x[:, c] with a unit tap>: the conv's linearity in W
    zero_b = np.zeros(Cout)
    dw_ref = np.zeros_like(w64)
    for kh in range(KH):
        for kw in range(KW):
            for c in range(Cin):
                unit = np.zeros((1, Cin, KH, KW))
                unit[0, c, kh, kw] = 1.0
                resp = conv2d_f64(unit, zero_b[:1], x64, (SH, SW), (PH, PW))[:, 0]
                dw_ref[:, c, kh, kw] = np.einsum("nhw,nohw->o", resp, g64)
    np.testing.assert_allclose(dw, dw_ref, rtol=1e-4, atol=1e-4)
    # dX: <g, conv(x)> is linear in x; its gradient at one cell is the response to a unit cell
    rng = np.random.default_rng(0)
    for n, c, i, j in zip(rng.integers(0, N, 12), rng.integers(0, Cin, 12),
                          rng.integers(0, H, 12), rng.integers(0, W, 12)):
        unit = np.zeros((1, Cin, H, W))
        unit[0, c, i, j] = 1.0
        resp = conv2d_f64(w64, zero_b, unit, (SH, SW), (PH, PW))[0]
        np.testing.assert_allclose(dx[n, c, i, j], np.sum(resp * g64[n]), rtol=1e-4, atol=1e-4)


def test_exact_conv_forward_keeps_a_negative_zero_chain(emu):
    """A chain from a -0 bias whose products are all -0 stays -0 in the stub; one fma past the
    chain's end (a padded stage) would make it +0. 27 taps: not a whole number of stages."""
    shape = (1, 3, 2, 4, 4, 3, 3, 1, 1, 0, 0)
    g, w, b, x, gy = case2d(2, shape, 0)
    w, b, x = np.abs(w), np.full_like(b, -0.0), np.full_like(x, -0.0)
    want = backend_exact(0, w, b, x, gy, (1, 1), (0, 0))
    assert np.all(want[0] == 0) and np.all(np.signbit(want[0]))
    assert_same_bits(emulate(emu, g, 0, w, b, x, gy), want)
