"""Attention at the head dims of the tiled CUDA kernels (33..128, padded to 64, 96 or 128) and
the causal attr, against float64 NumPy.

Two layers:
  * the ops on the loaded backend (the stub in CI, CUDA on the GPU machine): multi_head_attention's
    forward and all five gradients against an analytic float64 backward (itself checked by
    central differences), at head dims 64, 80, 96 and 128, lengths that leave partial 64-row
    tiles, B * H > 1, causal on and off; causal against the explicit lower-triangular mask, bit
    for bit, on every path; NaN propagation; the attention op (the core without projections)
    through F.scaled_dot_product_attention;
  * the CUDA tiled kernels' own source (native/cuda/attention_tiled.cuh) run on the CPU through
    a small CUDA emulation (tests/native/cuda_emu), so CI checks their indexing, their tile
    skipping and their barriers without a GPU: O, lse, dQ, dK and dV against float64, every
    element written, the same bits in either thread order;
  * exact mode's tiled kernels (native/cuda/attention_exact.cuh) through the same emulation
    against the loaded backend's attention op in exact mode (the stub in CI: the reference
    order), bit for bit, at lengths around the 64-key tile, head dims 1 to 128, masks, causal
    tile skipping, NaN and inf.
"""
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

import torchlean as tl
from torchlean._generated import ops
from cuda_emu import build_emu


# ---------------------------------------------------------------- float64 references

def _heads(a, B, n, H):
    return a.reshape(B, n, H, -1).transpose(0, 2, 1, 3)


def _merge(a):
    B, H, n, hd = a.shape
    return a.transpose(0, 2, 1, 3).reshape(B, n, H * hd)


def allowed_pairs(n, mask=None, causal=False):
    ok = np.ones((n, n), bool) if mask is None else np.asarray(mask, bool)
    return ok & np.tri(n, dtype=bool) if causal else ok


def core_forward(q, k, v, ok, scale):
    """softmax over allowed keys (fully blocked rows: 0) of q k^T scale, times v; also the
    log-sum-exp per row (0 for a fully blocked row), as the kernels store it."""
    s = np.where(ok, q @ k.swapaxes(-1, -2) * scale, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(ok, np.exp(s - top), 0.0)
    den = e.sum(axis=-1, keepdims=True)
    p = e / np.where(den > 0, den, 1.0)
    lse = np.where(den > 0, top + np.log(np.where(den > 0, den, 1.0)), 0.0)[..., 0]
    return p, p @ v, lse


def core_backward(q, k, v, p, do, scale):
    """dQ, dK, dV of the core from the probabilities: dS = P (dP - rowsum(dO o O)) scale."""
    dp = do @ v.swapaxes(-1, -2)
    d = (do * (p @ v)).sum(axis=-1, keepdims=True)
    ds = p * (dp - d) * scale
    return ds @ k, ds.swapaxes(-1, -2) @ q, p.swapaxes(-1, -2) @ do


def mha_reference(wq, wk, wv, wo, x, g, H, mask=None, causal=False):
    """y and (dwq, dwk, dwv, dwo, dx) of multi_head_attention in float64, the backward derived
    by hand (test_reference_backward_matches_central_differences checks it)."""
    B, n, dm = x.shape
    hd = wq.shape[1] // H
    scale = 1.0 / math.sqrt(hd)
    q, k, v = (_heads(x @ w, B, n, H) for w in (wq, wk, wv))
    p, o, _ = core_forward(q, k, v, allowed_pairs(n, mask, causal), scale)
    attn = _merge(o)
    y = attn @ wo
    X, G, A = x.reshape(-1, dm), g.reshape(-1, dm), attn.reshape(B * n, -1)
    dq, dk, dv = (_merge(a).reshape(B * n, -1)
                  for a in core_backward(q, k, v, p, _heads(g @ wo.T, B, n, H), scale))
    dx = dq @ wq.T + dk @ wk.T + dv @ wv.T
    return y, (X.T @ dq, X.T @ dk, X.T @ dv, A.T @ G, dx.reshape(B, n, dm))


def _inputs(seed, B, n, dm, H, hd):
    """x uniform in [-1, 1]; weights scaled so scores have a spread of about 1.3 (a softmax far
    from uniform); all values exactly representable in float32."""
    rng = np.random.default_rng(seed)
    f32 = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731
    ws = [f32(rng.normal(size=(dm, H * hd)) * 2 / math.sqrt(dm)) for _ in range(3)]
    wo = f32(rng.normal(size=(H * hd, dm)) / math.sqrt(H * hd))
    x = f32(rng.uniform(-1, 1, (B, n, dm)))
    g = f32(rng.uniform(-1, 1, (B, n, dm)))
    return ws + [wo], x, g


def _run(ws, x, g, H, **attrs):
    t = tl.Tape()
    ids = [t.leaf(a) for a in ws + [x]]
    y = t.multi_head_attention(*ids, num_heads=H, **attrs)
    val = t.value(y).to_numpy()
    gr = t.backward(y, seed=g)
    grads = [gr[i].to_numpy() for i in ids]
    for b in gr:
        b.release()
    t.release()
    return val, grads


def _close(got, want, what, rel):
    """max |got - want| within rel of max(max |want|, 1) (float32 kernels against float64)"""
    err = np.abs(np.asarray(got, np.float64) - want).max()
    top = max(np.abs(want).max(), 1.0)
    assert err <= rel * top, f"{what}: max error {err:.3g}, max |reference| {np.abs(want).max():.3g}"


def test_reference_backward_matches_central_differences():
    ws, x, g = _inputs(0, 2, 5, 4, 2, 3)
    mask = np.ones((5, 5), bool)
    mask[3, :2] = False
    _, grads = mha_reference(*ws, x, g, 2, mask, causal=True)
    args = ws + [x]
    h = 1e-6
    for which, grad in zip(range(5), grads):
        est = np.zeros_like(args[which])
        for idx in np.ndindex(args[which].shape):
            hi, lo = [a.copy() for a in args], [a.copy() for a in args]
            hi[which][idx] += h
            lo[which][idx] -= h
            est[idx] = ((mha_reference(*hi, g, 2, mask, True)[0] * g).sum()
                        - (mha_reference(*lo, g, 2, mask, True)[0] * g).sum()) / (2 * h)
        np.testing.assert_allclose(grad, est, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- the op on the loaded backend

@pytest.mark.parametrize("hd,n", [(64, 67), (80, 130), (96, 67), (128, 130)])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_and_gradients_against_float64(hd, n, causal):
    B, H, dm = 2, 2, 16
    ws, x, g = _inputs(hd + n + causal, B, n, dm, H, hd)
    y, grads = _run(ws, x, g, H, causal=causal)
    want_y, want_g = mha_reference(*ws, x, g, H, causal=causal)
    _close(y, want_y, "y", 2e-5)
    for name, got, want in zip(("dWq", "dWk", "dWv", "dWo", "dx"), grads, want_g):
        _close(got, want, name, 1e-4)


@pytest.mark.parametrize("hd,n,causal", [(64, 300, False), (64, 257, True), (128, 200, False),
                                         (128, 331, True), (33, 130, False)])
def test_backward_against_float64_and_stable(hd, n, causal):
    """The default backward (CUDA: the dQ and dK/dV kernels) at lengths of several key blocks,
    against float64, and bit-identical on a rerun."""
    B, H, dm = 1, 2, 16
    ws, x, g = _inputs(hd + n + causal + 7, B, n, dm, H, hd)
    want_y, want_g = mha_reference(*ws, x, g, H, causal=causal)
    y, grads = _run(ws, x, g, H, causal=causal)
    _close(y, want_y, "y", 2e-5)
    for name, got, want in zip(("dWq", "dWk", "dWv", "dWo", "dx"), grads, want_g):
        _close(got, want, name, 1e-4)
    y2, grads2 = _run(ws, x, g, H, causal=causal)
    for a, b in zip([y] + list(grads), [y2] + list(grads2)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.cuda
def test_onepass_backward_on_the_device_in_a_subprocess():
    """TORCHLEAN_ATTN_BWD=onepass and onepass64 (blocks of one head wait on each other's dQ
    shares) against the two-kernel backward at benchmark sizes, each rerun bit for bit:
    bench/attention_smoke.py in a child process with a deadline, so a wait that never ends
    fails this test instead of hanging the suite. The switch is read only by the benchmark
    build (native/cuda/bench_switches.h), which `make test-cuda` builds first."""
    import os
    import sys
    root = Path(__file__).resolve().parent.parent
    bench_lib = root / "build" / "cuda-bench" / "libtorchlean_cuda.so"
    if not bench_lib.is_file():
        pytest.fail(f"{bench_lib} is missing: `make cuda-bench` builds it (make test-cuda does)")
    env = dict(os.environ, TORCHLEAN_LIB_DIR=str(bench_lib.parent), PYTHONPATH=os.pathsep.join(
        filter(None, (str(root), os.environ.get("PYTHONPATH")))))
    env.pop("TORCHLEAN_ATTN_BWD", None)
    r = subprocess.run([sys.executable, str(root / "bench" / "attention_smoke.py")], cwd=root,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "attention smoke: ok" in r.stdout, r.stdout + r.stderr


def test_ragged_key_ranges_against_float64():
    # each row's last allowed key falls anywhere (not on a 16-key vector or 64-row block edge),
    # some rows see no key, small odd head dims: the stub's blocked default path stops each
    # row's softmax at its last allowed key and each query block's products at the last key
    # any of its rows may attend
    B, H, n, hd, dm = 2, 3, 150, 5, 7
    ws, x, g = _inputs(21, B, n, dm, H, hd)
    rng = np.random.default_rng(22)
    last = rng.integers(-1, n, n)                       # -1: the row sees nothing
    mask = (np.arange(n)[None, :] <= last[:, None]) & (rng.uniform(size=(n, n)) < 0.8)
    for causal in (False, True):
        y, grads = _run(ws, x, g, H, mask=mask, causal=causal)
        want_y, want_g = mha_reference(*ws, x, g, H, mask, causal)
        _close(y, want_y, "y", 2e-5)
        for name, got, want in zip(("dWq", "dWk", "dWv", "dWo", "dx"), grads, want_g):
            _close(got, want, name, 1e-4)


@pytest.mark.parametrize("use_flash", [True, False])
def test_causal_and_mask_both_apply(use_flash):
    B, H, n, hd, dm = 2, 2, 70, 80, 12
    ws, x, g = _inputs(7, B, n, dm, H, hd)
    mask = np.random.default_rng(8).uniform(size=(n, n)) < 0.6
    mask[40] = False          # a fully blocked row
    mask[:, 0] = False        # row 0 then sees nothing under causal
    y, grads = _run(ws, x, g, H, mask=mask, causal=True, use_flash=use_flash)
    want_y, want_g = mha_reference(*ws, x, g, H, mask, causal=True)
    assert np.all(y[:, [0, 40]] == 0.0)
    _close(y, want_y, "y", 2e-5)
    for name, got, want in zip(("dWq", "dWk", "dWv", "dWo", "dx"), grads, want_g):
        _close(got, want, name, 1e-4)


@pytest.fixture(params=[False, True], ids=["default", "exact"])
def mode(request):
    was = tl.is_exact()
    assert tl.set_exact(request.param) == request.param
    yield request.param
    tl.set_exact(was)


# head dims of every CUDA path: tiled padded to 64 (16, 48), 96 (80), 128 (128), composed (136)
@pytest.mark.parametrize("hd", [16, 48, 80, 128, 136])
@pytest.mark.parametrize("use_flash", [True, False])
def test_causal_is_the_tril_mask_bit_for_bit(mode, hd, use_flash):
    """Skipping the tiles past the diagonal changes nothing for finite inputs: the same bits as
    the explicit lower-triangular mask, forward and backward, in exact and default mode."""
    B, H, n, dm = 2, 2, 130 if hd <= 80 else 67, 8
    ws, x, g = _inputs(hd, B, n, dm, H, hd)
    a = _run(ws, x, g, H, causal=True, use_flash=use_flash)
    b = _run(ws, x, g, H, mask=np.tri(n, dtype=bool), use_flash=use_flash)
    for got, want in zip([a[0]] + a[1], [b[0]] + b[1]):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("n", [1, 17, 64, 130])
def test_masks_that_block_what_causal_does_give_its_bits(mode, n):
    """A mask is taken in its simplest form (the stub runs an exactly lower-triangular one as
    causal, and drops one that blocks nothing causal does not): the same bits as causal alone
    for the lower-triangular mask, for causal with a mask allowing every j <= i, and, for an
    all-true mask, as no mask; a lower-triangular mask missing one pair is not causal, and
    gives the float64 reference of its own blocked set."""
    B, H, dm, hd = 2, 4, 12, 16
    ws, x, g = _inputs(n, B, n, dm, H, hd)
    tri = np.tri(n, dtype=bool)
    causal = _run(ws, x, g, H, causal=True)
    plain = _run(ws, x, g, H)
    wide = tri | (np.random.default_rng(n).uniform(size=(n, n)) < 0.5)
    for got, want in ((_run(ws, x, g, H, mask=tri), causal),
                      (_run(ws, x, g, H, mask=wide, causal=True), causal),
                      (_run(ws, x, g, H, mask=np.ones((n, n), bool)), plain)):
        for a, b in zip([got[0]] + got[1], [want[0]] + want[1]):
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    want_y, want_g = mha_reference(*ws, x, g, H, None, causal=True)
    _close(causal[0], want_y, "y", 2e-5)
    for name, got, want in zip(("dWq", "dWk", "dWv", "dWo", "dx"), causal[1], want_g):
        _close(got, want, name, 1e-4)
    if n > 1:
        holed = tri.copy()
        holed[n - 1, n // 2] = False
        y, grads = _run(ws, x, g, H, mask=holed)
        want_y, want_g = mha_reference(*ws, x, g, H, holed)
        assert not np.array_equal(y[:, n - 1], causal[0][:, n - 1])
        _close(y, want_y, "y", 2e-5)
        for name, got, want in zip(("dWq", "dWk", "dWv", "dWo", "dx"), grads, want_g):
            _close(got, want, name, 1e-4)


def test_causal_is_deterministic():
    ws, x, g = _inputs(3, 2, 130, 8, 2, 96)
    a = _run(ws, x, g, 2, causal=True)
    b = _run(ws, x, g, 2, causal=True)
    for got, want in zip([a[0]] + a[1], [b[0]] + b[1]):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("hd", [16, 64, 128])
def test_nan_propagates_under_causal(hd):
    """NaN in Wq makes every output NaN; NaN in one token makes the rows that attend it
    (that token and every later one) NaN."""
    B, H, n, dm = 1, 2, 70, 8
    ws, x, g = _inputs(hd, B, n, dm, H, hd)
    bad = [w.copy() for w in ws]
    bad[0][1, 2] = np.nan
    y = ops.multi_head_attention(*[tl.AnyBuffer.from_numpy(a.astype(np.float32)) for a in bad + [x]],
                                 num_heads=H, causal=True)[0].to_numpy()
    assert np.isnan(y).all()
    x2 = x.copy()
    x2[0, 50, 3] = np.nan
    y = ops.multi_head_attention(*[tl.AnyBuffer.from_numpy(a.astype(np.float32)) for a in ws + [x2]],
                                 num_heads=H, causal=True)[0].to_numpy()
    assert np.isnan(y[0, 50:]).all()


def test_causal_must_be_a_bool():
    ws, x, _ = _inputs(0, 1, 3, 4, 1, 4)
    bufs = [tl.AnyBuffer.from_numpy(a.astype(np.float32)) for a in ws + [x]]
    with pytest.raises(TypeError, match="multi_head_attention: causal must be True or False"):
        ops.multi_head_attention(*bufs, num_heads=1, causal="yes")
    with pytest.raises(TypeError, match="multi_head_attention: causal must be True or False"):
        ops.multi_head_attention(*bufs, num_heads=1, causal=2)


# ---------------------------------------------------------------- attention op and F.sdpa

def _run_sdpa(q, k, v, g, **kw):
    from torchlean.nn import functional as F
    s = tl.Session()
    ts = [s.tensor(a.astype(np.float32), requires_grad=True) for a in (q, k, v)]
    y = F.scaled_dot_product_attention(*ts, **kw)
    (y * s.tensor(g.astype(np.float32))).sum().backward()
    return y.numpy(), [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("e,n", [(64, 67), (80, 130), (128, 67)])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_self_shaped_runs_the_fused_op(e, n, causal):
    """F.scaled_dot_product_attention on (B, H, L, E) with S = L: output and the gradients of
    q, k and v against float64; is_causal gives the bits of the explicit tril mask."""
    rng = np.random.default_rng(e + n)
    q, k, v, g = (rng.normal(size=(2, 3, n, e)).astype(np.float32).astype(np.float64)
                  for _ in range(4))
    y, grads = _run_sdpa(q, k, v, g, is_causal=causal)
    scale = 1.0 / math.sqrt(e)
    p, want, _ = core_forward(q, k, v, allowed_pairs(n, causal=causal), scale)
    _close(y, want, "output", 2e-5)
    for name, got, w in zip("qkv", grads, core_backward(q, k, v, p, g, scale)):
        _close(got, w, f"d{name}", 1e-4)
    if causal:
        y2, grads2 = _run_sdpa(q, k, v, g, attn_mask=np.tri(n, dtype=bool))
        for a, b in zip([y] + grads, [y2] + grads2):
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_sdpa_fused_agrees_with_the_composed_path():
    """An explicit scale (the same value) takes the bmm + masked_softmax path: the two agree."""
    rng = np.random.default_rng(3)
    q, k, v, g = (rng.normal(size=(2, 40, 96)) for _ in range(4))
    mask = rng.uniform(size=(40, 40)) < 0.6
    fused = _run_sdpa(q, k, v, g, attn_mask=mask)
    composed = _run_sdpa(q, k, v, g, attn_mask=mask, scale=1.0 / math.sqrt(96))
    for a, b in zip([fused[0]] + fused[1], [composed[0]] + composed[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * np.abs(b).max())


def test_attention_op_bad_inputs():
    buf = lambda *sh: tl.AnyBuffer.from_numpy(np.ones(sh, np.float32))  # noqa: E731
    with pytest.raises(ValueError, match=r"attention: .*one shape.*k \(2, 4, 3\)"):
        ops.attention(buf(2, 5, 3), buf(2, 4, 3), buf(2, 5, 3))
    with pytest.raises(ValueError, match=r"attention: .*rank"):
        ops.attention(buf(5), buf(5), buf(5))
    with pytest.raises(ValueError, match=r"attention: mask must have shape \(5, 5\)"):
        ops.attention(buf(2, 5, 3), buf(2, 5, 3), buf(2, 5, 3), mask=np.ones((5, 4), bool))
    with pytest.raises(TypeError, match="attention: causal must be True or False"):
        ops.attention(buf(2, 5, 3), buf(2, 5, 3), buf(2, 5, 3), causal=None)


# ---------------------------------------------------------------- the CUDA kernels, emulated

@pytest.fixture(scope="module")
def emu():
    return build_emu("attention_tiled_emu.so", "the tiled CUDA kernels", """
        int emu_tiled_hdp(int hd);
        int emu_attention_fwd(const float *Q, const float *K, const float *V, const float *M,
                              float *O, float *L, int B, int n, int H, int hd, float scale,
                              int causal, int vec, int reverse);
        int emu_attention_bwd(const float *Q, const float *K, const float *V, const float *dO,
                              const float *L, const float *D, const float *M, float *dQ,
                              float *dK, float *dV, int B, int n, int H, int hd, float scale,
                              int causal, int vec, int reverse);
        void emu_set_fwd_keys(int keys);
        void emu_set_onepass_cols(int cols);
        int emu_attention_bwd_onepass(const float *Q, const float *K, const float *V,
                              const float *dO, const float *L, const float *D, const float *M,
                              float *dQ, float *dK, float *dV, int B, int n, int H, int hd,
                              float scale, int causal, int vec, int reverse);
        int emu_exact_fwd(const float *Q, const float *K, const float *V, const float *M,
                          float *O, float *L, int B, int n, int H, int hd, int causal, int vec,
                          int reverse);
        int emu_exact_bwd(const float *Q, const float *K, const float *V, const float *O,
                          const float *dO, const float *L, const float *M, float *D, float *dQ,
                          float *dK, float *dV, int B, int n, int H, int hd, int causal, int vec,
                          int reverse);
    """)


def emulate(emu, q, k, v, do, B, H, mask, causal, vec, reverse, onepass=False):
    """The tiled kernels on (B*n, H*hd) float32 q, k, v, dO as attention.cu launches them:
    returns O, lse, dQ, dK, dV (outputs start as NaN, so an element never written shows).
    onepass: the backward is attn_bwd_onepass (dQ summed in rank order) instead of the dQ and
    dK/dV kernels."""
    ffi, lib = emu
    Bn, HD = q.shape
    hd, n = HD // H, Bn // B
    ptr = lambda a: ffi.NULL if a is None else ffi.cast("float *", ffi.from_buffer(a))  # noqa: E731
    m = None if mask is None else np.ascontiguousarray(mask, np.float32)
    scale = np.float32(1.0 / math.sqrt(hd))
    o = np.full((Bn, HD), np.nan, np.float32)
    lse = np.full(B * H * n, np.nan, np.float32)
    assert lib.emu_attention_fwd(ptr(q), ptr(k), ptr(v), ptr(m), ptr(o), ptr(lse), B, n, H, hd,
                                 scale, causal, vec, reverse) == 0
    # D = rowsum(dO o O) per (b, h, i), as rowdot_kernel computes it before the backward
    d = (_heads(do, B, n, H).astype(np.float64) * _heads(o, B, n, H)).sum(-1)
    d = np.ascontiguousarray(d, np.float32).reshape(-1)
    dq, dk, dv = (np.full((Bn, HD), np.nan, np.float32) for _ in range(3))
    bwd = lib.emu_attention_bwd_onepass if onepass else lib.emu_attention_bwd
    assert bwd(ptr(q), ptr(k), ptr(v), ptr(do), ptr(lse), ptr(d), ptr(m), ptr(dq), ptr(dk),
               ptr(dv), B, n, H, hd, scale, causal, vec, reverse) == 0
    return o, lse, dq, dk, dv


def _core_inputs(seed, B, n, H, hd):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(B * n, H * hd)).astype(np.float32) for _ in range(4)]


def test_emulation_picks_attention_cu_tiles(emu):
    _, lib = emu
    assert [lib.emu_tiled_hdp(h) for h in (32, 33, 64, 65, 80, 96, 97, 128, 129)] == \
        [0, 64, 64, 96, 96, 96, 128, 128, 0]


@pytest.mark.parametrize("B,n,H,hd,causal,masked,vec", [
    (2, 67, 2, 64, False, False, True),
    (1, 130, 2, 64, True, True, True),
    (2, 67, 1, 33, True, False, False),    # hd below a multiple of 4: scalar staging
    (1, 130, 2, 80, True, False, True),
    (1, 67, 2, 80, False, True, False),
    (2, 130, 1, 96, True, True, True),
    (1, 67, 2, 128, True, False, True),
    (1, 200, 1, 128, False, True, True),
    (1, 1, 2, 100, True, False, True),     # one token
])
def test_tiled_kernels_against_float64(emu, B, n, H, hd, causal, masked, vec):
    q, k, v, do = _core_inputs(n + hd, B, n, H, hd)
    mask = None
    if masked:
        mask = np.random.default_rng(n).uniform(size=(n, n)) < 0.7
        mask[n // 2] = False
    got = emulate(emu, q, k, v, do, B, H, mask, causal, vec, reverse=False)
    for a in got:
        assert np.isfinite(a).all(), "an output element was never written"
    ok = allowed_pairs(n, mask, causal)
    h = lambda a: _heads(a.astype(np.float64), B, n, H)  # noqa: E731
    scale = float(np.float32(1.0 / math.sqrt(hd)))
    p, o, lse = core_forward(h(q), h(k), h(v), ok, scale)
    grads = core_backward(h(q), h(k), h(v), p, h(do), scale)
    _close(h(got[0]), o, "O", 5e-6)
    np.testing.assert_allclose(got[1].reshape(B, H, n), lse, rtol=0, atol=5e-6)
    for name, a, want in zip(("dQ", "dK", "dV"), got[2:], grads):
        _close(h(a), want, name, 5e-6)
    # the reverse thread order (one warp far ahead of the others the other way) gives the same bits
    rev = emulate(emu, q, k, v, do, B, H, mask, causal, vec, reverse=True)
    for a, b in zip(got, rev):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("hd", [64, 96, 128])
def test_tiled_causal_skipping_is_the_tril_mask(emu, hd):
    q, k, v, do = _core_inputs(hd, 1, 150, 2, hd)
    a = emulate(emu, q, k, v, do, 1, 2, None, True, True, False)
    b = emulate(emu, q, k, v, do, 1, 2, np.tri(150, dtype=bool), False, True, False)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.view(np.uint32), y.view(np.uint32))


def test_tiled_fully_blocked_rows_and_nan(emu):
    B, n, H, hd = 1, 70, 1, 64
    q, k, v, do = _core_inputs(1, B, n, H, hd)
    mask = np.ones((n, n), bool)
    mask[5] = False
    o, lse, dq, dk, dv = emulate(emu, q, k, v, do, B, H, mask, False, True, False)
    assert np.all(o[5] == 0) and lse[5] == 0 and np.all(dq[5] == 0)
    assert np.isfinite(dk).all() and np.isfinite(dv).all()
    k2 = k.copy()
    k2[30, 7] = np.nan        # key 30 scores NaN for every query that sees it (causal: i >= 30)
    o, lse, dq, dk, dv = emulate(emu, q, k2, v, do, B, H, None, True, True, False)
    assert np.isnan(o[30:]).all() and np.isnan(lse[30:]).all() and np.isnan(dq[30:]).all()
    # the forward multiplies probabilities by V only, so the earlier rows stay finite (dQ's
    # product with K may not: a blocked pair adds 0 * NaN within the diagonal tile)
    assert np.isfinite(o[:30]).all() and np.isfinite(lse[:30]).all()


# ---------------------------------------------------------------- exact mode's kernels, emulated

def emulate_exact(emu, q, k, v, do, B, H, mask, causal, vec, reverse=False):
    """attention_exact.cuh's kernels on (B*n, H*hd) float32 as attention.cu's exact path launches
    them (D from attn_rowdot_exact): O, lse, dQ, dK, dV, each first filled with NaN."""
    ffi, lib = emu
    Bn, HD = q.shape
    hd, n = HD // H, Bn // B
    ptr = lambda a: ffi.NULL if a is None else ffi.cast("float *", ffi.from_buffer(a))  # noqa: E731
    m = None if mask is None else np.ascontiguousarray(mask, np.float32)
    o, dq, dk, dv = (np.full((Bn, HD), np.nan, np.float32) for _ in range(4))
    lse, d = (np.full(B * H * n, np.nan, np.float32) for _ in range(2))
    assert lib.emu_exact_fwd(ptr(q), ptr(k), ptr(v), ptr(m), ptr(o), ptr(lse), B, n, H, hd,
                             causal, vec, reverse) == 0
    assert lib.emu_exact_bwd(ptr(q), ptr(k), ptr(v), ptr(o), ptr(do), ptr(lse), ptr(m), ptr(d),
                             ptr(dq), ptr(dk), ptr(dv), B, n, H, hd, causal, vec, reverse) == 0
    return o, lse, dq, dk, dv


def backend_exact(q, k, v, do, B, H, mask, causal):
    """The loaded backend's attention and attention_backward in exact mode, head by head (the
    op's batch is B*H): O, lse, dQ, dK, dV in the kernels' (B*n, H*hd) layout."""
    Bn, HD = q.shape
    n, hd = Bn // B, HD // H
    split = lambda a: np.ascontiguousarray(  # noqa: E731
        a.reshape(B, n, H, hd).transpose(0, 2, 1, 3).reshape(B * H, n, hd))
    join = lambda a: a.reshape(B, H, n, hd).transpose(0, 2, 1, 3).reshape(Bn, HD)  # noqa: E731
    attrs = {"causal": bool(causal)}
    if mask is not None:
        attrs["mask"] = np.asarray(mask, bool)
    was = tl.is_exact()
    tl.set_exact(True)
    try:
        bufs = [tl.AnyBuffer.from_numpy(split(a)) for a in (do, q, k, v)]
        fwd = ops.attention(*bufs[1:], **attrs)
        bwd = ops.attention_backward(bufs[0], *bufs[1:], *fwd, **attrs)
        o, lse, dq, dk, dv = (b.to_numpy() for b in fwd + bwd)
        for b in bufs + list(fwd) + list(bwd):
            b.release()
    finally:
        tl.set_exact(was)
    return join(o), lse.reshape(-1), join(dq), join(dk), join(dv)


def assert_same_bits(got, want, names=("O", "lse", "dQ", "dK", "dV")):
    """float32 bit patterns equal, NaN meeting NaN (payloads aside, as tests/test_exact_parity)"""
    for name, a, b in zip(names, got, want):
        a, b = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
        same = (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
        bad = np.flatnonzero(~same)
        assert bad.size == 0, (f"{name}: {bad.size} of {a.size} differ; first at {bad[0]}: "
                               f"{a[bad[0]]!r} vs {b[bad[0]]!r}")


@pytest.mark.parametrize("n", [1, 63, 64, 65, 130])
@pytest.mark.parametrize("hd", [1, 7, 64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_exact_kernels_are_the_stub_bit_for_bit(emu, n, hd, causal):
    """Random inputs at lengths around the 64-key tile and head dims 1 to 128 (the padded
    tiles 64 and 128, scalar staging below a multiple of 4): every output the backend's exact
    bits, and close to float64."""
    B, H = (2, 2) if n < 64 else (1, 2) if n < 130 else (1, 1)
    q, k, v, do = _core_inputs(7 * n + hd, B, n, H, hd)
    got = emulate_exact(emu, q, k, v, do, B, H, None, causal, vec=hd % 4 == 0)
    assert_same_bits(got, backend_exact(q, k, v, do, B, H, None, causal))
    h = lambda a: _heads(a.astype(np.float64), B, n, H)  # noqa: E731
    scale = float(np.float32(1.0 / math.sqrt(hd)))
    p, o, lse = core_forward(h(q), h(k), h(v), allowed_pairs(n, None, causal), scale)
    _close(h(got[0]), o, "O", 5e-6)
    for name, a, want in zip(("dQ", "dK", "dV"), got[2:], core_backward(h(q), h(k), h(v), p, h(do), scale)):
        _close(h(a), want, name, 2e-5)


@pytest.mark.parametrize("hd,vec", [(7, False), (64, False), (96, True)])
@pytest.mark.parametrize("causal", [False, True])
def test_exact_kernels_with_a_mask(emu, hd, vec, causal):
    """Blocked pairs inside tiles (their backward fma skipped, not made with 0), a fully
    blocked row (output and lse 0), a key no query sees; the reverse thread order too."""
    n, H = 130, 2 if hd < 64 else 1
    q, k, v, do = _core_inputs(hd, 1, n, H, hd)
    mask = np.random.default_rng(hd).uniform(size=(n, n)) < 0.6
    mask[65] = False
    mask[:, 3] = False
    got = emulate_exact(emu, q, k, v, do, 1, H, mask, causal, vec)
    assert np.all(got[0].reshape(n, H * hd)[65] == 0) and np.all(got[1].reshape(H, n)[:, 65] == 0)
    assert_same_bits(got, backend_exact(q, k, v, do, 1, H, mask, causal))
    if causal:
        assert_same_bits(emulate_exact(emu, q, k, v, do, 1, H, mask, causal, vec, reverse=True), got)


@pytest.mark.parametrize("causal", [False, True])
def test_exact_kernels_with_inf_and_nan(emu, causal):
    """inf and NaN in q, k, v and dO give the stub's bits; a NaN query's row is NaN."""
    n, hd = 130, 7
    q, k, v, do = _core_inputs(11, 1, n, 1, hd)
    k[5, 2], k[70, 0], q[9, 1], v[3, 3], do[11, 2] = np.inf, -np.inf, np.nan, np.inf, np.nan
    got = emulate_exact(emu, q, k, v, do, 1, 1, None, causal, vec=False)
    assert_same_bits(got, backend_exact(q, k, v, do, 1, 1, None, causal))
    assert np.isnan(got[0][9]).all() and np.isnan(got[1][9]) and np.isnan(got[2][9]).all()


@pytest.mark.parametrize("causal", [False, True])
def test_exact_blocked_inf_key_adds_nothing(emu, causal):
    """An inf in a key that the mask blocks for every query: the stub skips its backward fma
    (fma(0, inf, .) would be NaN), so every gradient stays finite and dK, dV of that key are 0."""
    n, hd = 130, 64
    q, k, v, do = _core_inputs(12, 1, n, 1, hd)
    k[5, 2] = np.inf
    mask = np.ones((n, n), bool)
    mask[:, 5] = False
    mask[20:40, 70] = False
    got = emulate_exact(emu, q, k, v, do, 1, 1, mask, causal, vec=True)
    assert_same_bits(got, backend_exact(q, k, v, do, 1, 1, mask, causal))
    assert all(np.isfinite(a).all() for a in got)
    assert np.all(got[3][5] == 0) and np.all(got[4][5] == 0)


def _jump(hd, n=130, tail=(1.0, 1.0)):
    """Every query's score jumps by ~300 at key 64, so alpha underflows to 0 and turns a negative
    accumulator of column 0 into -0; values of column 0 are -0 over keys 64..127 and `tail` at
    keys 128, 129, which causal blocks 0 and 1 skip."""
    q, k, v, do = _core_inputs(hd, 1, n, 1, hd)
    q[:] = 0
    q[:, 0] = 1
    k *= 0.01
    k[64] = 0
    k[64, 0] = 300 * math.sqrt(hd)
    v[:64, 0], v[64:128, 0], v[128:, 0] = -1.0, -0.0, tail
    return q, k, v, do


def test_exact_causal_skipping_keeps_the_skipped_keys_effect(emu):
    """The stub walks the tiles after a causal block's queries with p = 0, and fma(0, v, -0) is
    +0 when v's sign bit is clear; fma(0, inf, .) is NaN. The skipping kernel reproduces both."""
    n, hd = 130, 7
    q, k, v, do = _jump(hd)
    got = emulate_exact(emu, q, k, v, do, 1, 1, None, True, vec=False)
    assert_same_bits(got, backend_exact(q, k, v, do, 1, 1, None, True))
    o = got[0]
    # rows 64..127 end their last tile with acc -0 in column 0: the skipped +1 values make it +0
    assert np.all(o[64:128, 0] == 0) and not np.signbit(o[64:128, 0]).any()
    q, k, v, do = _jump(hd, tail=(-1.0, -1.0))      # sign bits set: -0 stays
    got = emulate_exact(emu, q, k, v, do, 1, 1, None, True, vec=False)
    assert_same_bits(got, backend_exact(q, k, v, do, 1, 1, None, True))
    assert np.signbit(got[0][64:128, 0]).all()
    q, k, v, do = _core_inputs(5, 1, n, 1, 64)
    v[129, 3], v[128, 5] = np.inf, np.nan           # after every query of blocks 0 and 1
    got = emulate_exact(emu, q, k, v, do, 1, 1, None, True, vec=True)
    assert_same_bits(got, backend_exact(q, k, v, do, 1, 1, None, True))
    o = got[0]
    assert np.isnan(o[:129, 3]).all() and o[129, 3] == np.inf and np.isnan(o[:, 5]).all()
    assert np.isfinite(np.delete(o, [3, 5], 1)).all()


@pytest.mark.parametrize("B,n,H,hd,causal,masked,vec", [
    (2, 67, 2, 64, False, False, True),
    (1, 130, 2, 64, True, True, True),
    (1, 300, 1, 64, False, False, True),   # 5 key blocks over 10 query tiles: wrapped walks
    (1, 257, 1, 64, True, False, True),
    (2, 67, 1, 33, True, False, False),
    (1, 130, 2, 80, False, True, False),
    (1, 200, 1, 128, True, True, True),
    (1, 1, 2, 100, False, False, True),
])
@pytest.mark.parametrize("cols", [32, 64])
def test_onepass_backward_against_float64(emu, B, n, H, hd, causal, masked, vec, cols):
    """attn_bwd_onepass with 32- and 64-query tiles (64: head dims up to 64, else 32): dQ from
    per-key-block shares summed in rank order, dK and dV are float64-close; the reverse thread
    order gives the same bits. The emulation also checks each tile's ranks: 0.. without gaps,
    each reached at a later step of its block's walk than the rank before (on the GPU rank r
    waits for rank r - 1, so no wait can close a cycle)."""
    emu[1].emu_set_onepass_cols(cols)
    try:
        _onepass_case(emu, B, n, H, hd, causal, masked, vec)
    finally:
        emu[1].emu_set_onepass_cols(32)


def _onepass_case(emu, B, n, H, hd, causal, masked, vec):
    q, k, v, do = _core_inputs(3 * n + hd, B, n, H, hd)
    mask = None
    if masked:
        mask = np.random.default_rng(n).uniform(size=(n, n)) < 0.7
        mask[n // 2] = False
    got = emulate(emu, q, k, v, do, B, H, mask, causal, vec, reverse=False, onepass=True)
    for a in got:
        assert np.isfinite(a).all(), "an output element was never written"
    ok = allowed_pairs(n, mask, causal)
    h = lambda a: _heads(a.astype(np.float64), B, n, H)  # noqa: E731
    scale = float(np.float32(1.0 / math.sqrt(hd)))
    p, o, lse = core_forward(h(q), h(k), h(v), ok, scale)
    grads = core_backward(h(q), h(k), h(v), p, h(do), scale)
    for name, a, want in zip(("dQ", "dK", "dV"), got[2:], grads):
        _close(h(a), want, name, 5e-6)
    rev = emulate(emu, q, k, v, do, B, H, mask, causal, vec, reverse=True, onepass=True)
    for a, b in zip(got, rev):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_onepass_fully_blocked_rows_and_nan(emu):
    B, n, H, hd = 1, 70, 1, 64
    q, k, v, do = _core_inputs(1, B, n, H, hd)
    mask = np.ones((n, n), bool)
    mask[5] = False
    o, lse, dq, dk, dv = emulate(emu, q, k, v, do, B, H, mask, False, True, False, onepass=True)
    assert np.all(dq[5] == 0) and np.isfinite(dk).all() and np.isfinite(dv).all()
    k2 = k.copy()
    k2[30, 7] = np.nan
    o, lse, dq, dk, dv = emulate(emu, q, k2, v, do, B, H, None, True, True, False, onepass=True)
    assert np.isnan(dq[30:]).all()


@pytest.mark.parametrize("B,n,H,hd,causal,masked,vec", [
    (2, 67, 2, 64, False, False, True),
    (1, 130, 2, 64, True, True, True),
    (2, 67, 1, 33, True, False, False),
    (1, 130, 2, 80, True, False, True),
    (1, 200, 1, 128, False, True, True),
    (1, 67, 2, 128, True, False, True),
])
def test_forward_32_key_tiles_against_float64(emu, B, n, H, hd, causal, masked, vec):
    """The forward with 32-key tiles (TORCHLEAN_ATTN_FWD_KEYS=32) is float64-close, and its
    reverse thread order gives the same bits."""
    _, lib = emu
    q, k, v, do = _core_inputs(5 * n + hd, B, n, H, hd)
    mask = None
    if masked:
        mask = np.random.default_rng(n).uniform(size=(n, n)) < 0.7
        mask[n // 2] = False
    lib.emu_set_fwd_keys(32)
    try:
        got = emulate(emu, q, k, v, do, B, H, mask, causal, vec, reverse=False, onepass=True)
        rev = emulate(emu, q, k, v, do, B, H, mask, causal, vec, reverse=True, onepass=True)
    finally:
        lib.emu_set_fwd_keys(64)
    ok = allowed_pairs(n, mask, causal)
    h = lambda a: _heads(a.astype(np.float64), B, n, H)  # noqa: E731
    scale = float(np.float32(1.0 / math.sqrt(hd)))
    p, o, lse = core_forward(h(q), h(k), h(v), ok, scale)
    _close(h(got[0]), o, "O", 5e-6)
    np.testing.assert_allclose(got[1].reshape(B, H, n), lse, rtol=0, atol=5e-6)
    for a, b in zip(got, rev):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))

