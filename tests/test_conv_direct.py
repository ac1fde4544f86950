"""The stub's 2-D convolution reads im2col's columns straight from a zero-padded copy of each
sample's image (native/stub/conv_direct.c: the forward with output positions as the lanes at
stride 1 on output rows a multiple of 16 wide, else when a chain has 64 or more k steps; the
kernel gradient always) and adds the input gradient's chains onto its cells without columns
(16 or more input channels, and on average two or more kernel offsets reaching a cell). Its bits must be those of im2col + the packed GEMM, which the N-D
convolution still runs: a 2-D case computed as a 3-D one with a trailing axis of 1 has the same
chains in the same order, so forward, kernel, bias and input gradients must agree bit for bit, in
default and exact mode, with inf, NaN and signed zeros, for every thread count; and they must be
close to a float64 convolution.
"""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torchlean as tl
from torchlean._generated import ops

ROOT = Path(__file__).resolve().parent.parent

# N, Cin, Cout, (H, W), (KH, KW), (SH, SW), (PH, PW)
SHAPES = [
    (3, 8, 17, (13, 11), (3, 3), (1, 1), (1, 1)),   # forward direct (72 k steps), 17 lanes
    (1, 9, 40, (9, 10), (3, 3), (1, 1), (1, 1)),    # one image: its tiles split over threads
    (2, 16, 33, (12, 12), (3, 3), (2, 2), (1, 1)),  # stride 2, a 1-lane second panel
    (2, 3, 64, (8, 8), (3, 3), (1, 1), (1, 1)),     # 27 k steps: forward on im2col; CK % 8 = 3
    (2, 70, 5, (5, 7), (1, 1), (2, 2), (0, 0)),     # the 1x1 shortcut, odd size, 70 channels
    (2, 20, 5, (5, 7), (1, 3), (1, 1), (0, 1)),     # 1x3 kernel at stride 1: direct input gradient
    (2, 5, 3, (7, 6), (5, 3), (1, 2), (2, 1)),      # padding 2 on a 5-tap axis
    (1, 1, 1, (1, 1), (1, 1), (1, 1), (0, 0)),      # size 1
    (2, 4, 6, (6, 9), (2, 4), (3, 2), (0, 1)),      # stride past the kernel: cells no tap reads
    # the input gradient direct too (stride 1, 16 or more input channels)
    (3, 20, 17, (7, 9), (3, 3), (1, 1), (1, 1)),    # one panel of 20 input-channel lanes
    (1, 40, 6, (5, 6), (3, 3), (1, 1), (1, 1)),     # two panels (32 + 8); one image
    (2, 17, 3, (6, 5), (5, 3), (1, 1), (2, 1)),     # padding 2 on a 5-tap axis
    (2, 16, 4, (6, 7), (3, 3), (1, 1), (0, 0)),     # no padding: border cells get fewer taps
    (1, 16, 5, (4, 4), (3, 3), (1, 1), (2, 2)),     # padding past the kernel: a larger output
    (2, 16, 9, (1, 1), (3, 3), (1, 1), (1, 1)),     # 1x1 image, 3x3 kernel: only padding around
    (2, 33, 1, (3, 1), (1, 1), (1, 1), (0, 0)),     # 1x1 kernel, one output channel
    (2, 18, 4, (8, 9), (3, 2), (3, 2), (1, 0)),     # strides 3 and 2: tiles by column phase
    (1, 16, 6, (6, 9), (2, 4), (3, 2), (0, 1)),     # stride past the kernel, input gradient too
    (2, 16, 4, (6, 9), (3, 1), (1, 2), (1, 0)),     # a 3x1 kernel at stride (1, 2)
    (3, 32, 8, (7, 7), (3, 3), (2, 2), (1, 1)),     # odd size at stride 2: phases of 4 and 3
    # the forward with positions as the lanes (stride 1, output rows 16k wide, 32k positions)
    (2, 3, 20, (32, 16), (3, 3), (1, 1), (1, 1)),   # 27 k steps, 20 channels: a 4-row tile
    (3, 5, 9, (4, 32), (3, 3), (1, 1), (1, 1)),     # 45 k steps, 32-wide rows
    (2, 16, 37, (4, 16), (3, 3), (1, 1), (1, 1)),   # 144 k steps, a 5-row tile
    (1, 9, 12, (6, 32), (3, 3), (1, 1), (1, 1)),    # one image: its blocks split over threads
    (2, 7, 13, (2, 16), (1, 1), (1, 1), (0, 0)),    # 1x1 at stride 1
    (2, 6, 8, (8, 16), (1, 1), (2, 1), (0, 0)),     # 1x1 at stride (2, 1): not this path
    (2, 24, 11, (8, 32), (1, 1), (2, 2), (0, 0)),   # the 1x1 shortcut at stride 2: not this path
]


def make(seed, N, cin, cout, size, kernel, special):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    w, b, x = f(cout, cin, *kernel), f(cout), f(N, cin, *size)
    if special:
        w.reshape(-1)[-1] = np.inf
        x.reshape(-1)[::7] = -0.0
        x.reshape(-1)[0] = np.nan   # read by every case's first position
        b[::2] = -0.0
    return w, b, x


def run(w, b, x, stride, padding, gseed, special, exact):
    """y, dW, db, dX of the conv op at x's rank (2-D or the 3-D twin)"""
    was = tl.is_exact()
    tl.set_exact(exact)
    try:
        B = tl.AnyBuffer.from_numpy
        fwd = ops.conv2d if x.ndim == 4 else ops.conv
        y = fwd(B(w), B(b), B(x), stride=list(stride), padding=list(padding)).to_numpy()
        g = np.random.default_rng(gseed).standard_normal(y.shape).astype(np.float32)
        if special:
            g.reshape(-1)[-1] = -np.inf
            g.reshape(-1)[5::11] = -0.0
        dw, db, dx = ops.conv_backward(B(w), B(x), B(g), stride=list(stride), padding=list(padding))
        return y, dw.to_numpy(), db.to_numpy(), dx.to_numpy()
    finally:
        tl.set_exact(was)


def same_bits(a, b):
    a, b = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
    return a.shape == b.shape and bool(np.all((a.view(np.uint32) == b.view(np.uint32))
                                              | (np.isnan(a) & np.isnan(b))))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[1]}-{s[2]}-{s[3][0]}x{s[3][1]}-k{s[4][0]}{s[4][1]}-s{s[5][0]}")
@pytest.mark.parametrize("special", [False, True], ids=["normal", "inf-nan-zeros"])
@pytest.mark.parametrize("exact", [False, True], ids=["default", "exact"])
def test_direct_conv2d_has_the_im2col_bits(shape, special, exact):
    if not exact and tl.backend() != "stub":
        pytest.skip("CUDA's default-mode convolutions choose their own order; exact mode is the stub's")
    N, cin, cout, size, kernel, stride, padding = shape
    w, b, x = make(sum(size) + cin, N, cin, cout, size, kernel, special)
    got = run(w, b, x, stride, padding, 5, special, exact)
    want = run(w[..., None], b, x[..., None], (*stride, 1), (*padding, 0), 5, special, exact)
    for name, a, c in zip(("y", "dW", "db", "dX"), got, want):
        assert same_bits(a, c.reshape(a.shape)), name
    if special:  # the specials reach the outputs (else the case would test nothing of them)
        assert all(not np.isfinite(a).all() for a in (got[0], got[1], got[3]))


def conv2d_f64(w, b, x, s, p):
    N, C, H, W = x.shape
    O, _, KH, KW = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    OH, OW = (H + 2 * p[0] - KH) // s[0] + 1, (W + 2 * p[1] - KW) // s[1] + 1
    y = np.zeros((N, O, OH, OW)) + b[None, :, None, None]
    for kh in range(KH):
        for kw in range(KW):
            patch = xp[:, :, kh:kh + s[0] * OH:s[0], kw:kw + s[1] * OW:s[1]]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, kh, kw].astype(np.float64))
    return y


@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
def test_direct_conv2d_against_float64(stride):
    """y against a float64 convolution; dW and dX against its derivatives: <g, y> is linear in
    w and x, so dW[o, c, i, j] and dX are float64 convolutions of g with x and w"""
    N, cin, cout, H, W = 3, 20, 12, 11, 10
    w, b, x = make(1, N, cin, cout, (H, W), (3, 3), False)
    y, dw, db, dx = run(w, b, x, stride, (1, 1), 9, False, False)
    ref = conv2d_f64(w, b, x, stride, (1, 1))
    g = np.random.default_rng(9).standard_normal(ref.shape).astype(np.float32).astype(np.float64)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    OH, OW = ref.shape[2:]
    dw_ref = np.zeros(w.shape)
    dxp = np.zeros(xp.shape)
    for i in range(3):
        for j in range(3):
            sl = (slice(None), slice(None), slice(i, i + stride[0] * OH, stride[0]),
                  slice(j, j + stride[1] * OW, stride[1]))
            dw_ref[:, :, i, j] = np.einsum("nohw,nchw->oc", g, xp[sl])
            dxp[sl] += np.einsum("nohw,oc->nchw", g, w[:, :, i, j].astype(np.float64))
    tol = lambda r: 2e-5 * (1 + np.abs(r).max())  # noqa: E731
    assert np.abs(y - ref).max() <= tol(ref)
    assert np.abs(dw - dw_ref).max() <= tol(dw_ref)
    assert np.abs(db - g.sum(axis=(0, 2, 3))).max() <= tol(db)
    assert np.abs(dx - dxp[:, :, 1:1 + H, 1:1 + W]).max() <= tol(dxp)


def digests_over_thread_counts(outputs):
    """sha256 of the arrays that the Python expression `outputs` (over make and run) gives in
    stub processes of 1, 2 and 3 threads: one digest when the bits do not depend on them"""
    code = ("import sys, hashlib, numpy as np; sys.path.insert(0, %r); sys.path.insert(0, %r); "
            "from test_conv_direct import make, run; out = %s; "
            "print(hashlib.sha256(b''.join(np.ascontiguousarray(a).tobytes() for a in out)).hexdigest())"
            ) % (str(ROOT), str(ROOT / "tests"), outputs)
    digests = set()
    for threads in ("1", "2", "3"):
        env = dict(os.environ, OMP_NUM_THREADS=threads, TORCHLEAN_BACKEND="stub")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True)
        digests.add(out.stdout.strip())
    return digests


def test_direct_conv2d_bits_do_not_depend_on_the_thread_count():
    assert len(digests_over_thread_counts(
        "(lambda w, b, x: run(w, b, x, (1, 1), (1, 1), 3, True, False) + "
        "run(w[:1], b[:1], x[:1], (2, 2), (1, 1), 3, True, False))"
        "(*make(4, 5, 40, 20, (10, 9), (3, 3), True))")) == 1


def test_direct_conv2d_forward_by_positions_does_not_depend_on_the_thread_count():
    assert len(digests_over_thread_counts(
        "(lambda w, b, x: run(w, b, x, (1, 1), (1, 1), 3, True, False) + "
        "run(w, b, x[:1], (1, 1), (1, 1), 3, True, False))"
        "(*make(4, 5, 12, 20, (6, 32), (3, 3), True))")) == 1


def rule4_f32(v):
    """tl_math.h rule 4 in float32: sequential sums of 256-value chunks (each from its first
    value), then the pairwise tree over the partials, an odd last one carried up"""
    v = np.asarray(v, np.float32)
    part = [v[i] for i in range(0, len(v), 256)]
    for c in range(len(part)):
        for x in v[c * 256 + 1:(c + 1) * 256]:
            part[c] = np.float32(part[c] + x)
    while len(part) > 1:
        part = [np.float32(part[i] + part[i + 1]) for i in range(0, len(part) - 1, 2)] + \
               ([part[-1]] if len(part) % 2 else [])
    return part[0] if part else np.float32(0)


@pytest.mark.parametrize("N, size, cout", [(7, (20, 20), 3), (7, (16, 16), 40), (3, (16, 32), 33)],
                         ids=["P400", "P256-direct-chunks", "P512-direct-chunks"])
def test_bias_gradient_is_rule_4_over_samples_and_positions(N, size, cout):
    """db[c]: rule 4 over g[b, c, :, :] in (sample, position) order (5 to 11 chunks: odd trees,
    a short last chunk when 256 does not divide the positions, else the direct path's chunk
    sums per sample); a channel of -0 keeps its sign"""
    w, b, x = make(2, N, 16, cout, size, (3, 3), False)
    B = tl.AnyBuffer.from_numpy
    g = np.random.default_rng(4).standard_normal((N, cout) + size).astype(np.float32) * 100
    g[:, 2] = -0.0
    was = tl.is_exact()
    tl.set_exact(was or tl.backend() != "stub")   # CUDA's default mode sums in its own order
    try:
        _, db, _ = ops.conv_backward(B(w), B(x), B(g), stride=[1, 1], padding=[1, 1])
    finally:
        tl.set_exact(was)
    want = np.array([rule4_f32(g[:, c].reshape(-1)) for c in range(cout)], np.float32)
    assert np.array_equal(db.to_numpy().view(np.uint32), want.view(np.uint32))


# 600 samples: three rule-4 chunks over samples (256, 256, 88; a tree of three partials)
MANY = [(4, 5, 6),     # 5 weight tiles: a sample per thread, its gradient stored, summed after
        (16, 33, 16)]  # 36 tiles, 16x16: summed in the tiles, chunks filled by several groups


@pytest.mark.parametrize("cin, cout, side", MANY, ids=["per-sample", "in-tiles"])
@pytest.mark.parametrize("special", [False, True], ids=["normal", "inf-nan-zeros"])
@pytest.mark.parametrize("exact", [False, True], ids=["default", "exact"])
def test_kernel_gradient_over_many_samples_is_rule_4(cin, cout, side, special, exact):
    """dW bit for bit the 3-D twin's (each sample's dW_b stored, then rule 4 over the samples),
    and near float64"""
    if not exact and tl.backend() != "stub":
        pytest.skip("CUDA's default-mode convolutions choose their own order; exact mode is the stub's")
    w, b, x = make(6, 600, cin, cout, (side, side), (3, 3), special)
    got = run(w, b, x, (1, 1), (1, 1), 8, special, exact)
    want = run(w[..., None], b, x[..., None], (1, 1, 1), (1, 1, 0), 8, special, exact)
    for name, a, c in zip(("y", "dW", "db", "dX"), got, want):
        assert same_bits(a, c.reshape(a.shape)), name
    if not special:
        g = np.random.default_rng(8).standard_normal(got[0].shape).astype(np.float64)
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        ref = np.stack([np.einsum("nohw,nchw->oc", g, xp[:, :, i:i + side, j:j + side])
                        for i in range(3) for j in range(3)], -1).reshape(w.shape)
        assert np.abs(got[1] - ref).max() <= 2e-5 * (1 + np.abs(ref).max())


def test_kernel_gradient_summed_in_tiles_does_not_depend_on_the_thread_count():
    """the groups of samples are a multiple of the thread count: 1, 2 and 3 threads split the
    600 samples differently, with the same bits"""
    assert len(digests_over_thread_counts(
        "(lambda w, b, x: run(w, b, x, (1, 1), (1, 1), 8, True, False))"
        "(*make(6, 600, 16, 33, (16, 16), (3, 3), True))")) == 1
