"""batchnorm_channel_first and its backward against a NumPy float32 emulation of their stated
order, bit for bit, in default and exact mode, then against float64.

The stub sums a channel's values in the (sample, position) walk by rule 4 (chunks of 256 from
their first value, then the pairwise tree); its kernels run blocks of 16 chunks side by side, and
when planes hold a multiple of 16 positions read each lane's runs of 16 straight from the planes
(one channel's chunks as lanes), or, 16 channels at a time, a channel per lane (any plane).
The shapes here take both roads: planes of 8x8 and 4x20 (chunks span and cross samples), 4x4,
16x16, 64x64 with one sample, whole blocks followed by a partial one, fewer chunks than a block,
odd planes, one channel and many, one element, NaN and inf in one channel only.
"""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean import ops

CHUNK = 256
EPS = 1e-5


@pytest.fixture(params=[False, True], ids=["default", "exact"])
def mode(request):
    tl.set_exact(request.param)
    yield request.param
    tl.set_exact(False)


def buf(x):
    return tl.AnyBuffer.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def same_bits(got, want, what):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert got.shape == want.shape, what
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    bad = np.argwhere(~same)
    assert bad.size == 0, f"{what}: {len(bad)} of {got.size} differ; first at {bad[0]}"


def rule4(v):
    """Rule 4 along the last axis of float32 v (every leading index at once)."""
    n = v.shape[-1]
    k = -(-n // CHUNK)
    pad = np.zeros(v.shape[:-1] + (k * CHUNK,), np.float32)
    pad[..., :n] = v
    pad = pad.reshape(v.shape[:-1] + (k, CHUNK))
    part = pad[..., 0].copy()
    for j in range(1, CHUNK):   # positions past n add +0 to the last chunk: no change
        part = np.where(np.arange(k) * CHUNK + j < n, part + pad[..., j], part).astype(np.float32)
    parts = [part[..., i] for i in range(k)]
    while len(parts) > 1:
        nxt = [(parts[2 * i] + parts[2 * i + 1]).astype(np.float32) for i in range(len(parts) // 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


def walk(a):
    """(n, c, s) -> (c, n*s): each channel's values sample by sample"""
    n, c, s = a.shape
    return a.transpose(1, 0, 2).reshape(c, n * s)


def reference(x, gamma, beta, g):
    """the kernels' stated arithmetic in float32 NumPy (formulas/normalize.h)"""
    n, c, s = x.shape
    f = np.float32
    inv_cnt = f(1.0 / (n * s))
    mean = (rule4(walk(x)) * inv_cnt).astype(f)
    d = (x - mean[None, :, None]).astype(f)
    var = (rule4(walk((d * d).astype(f))) * inv_cnt).astype(f)
    sd = np.sqrt((var + f(EPS)).astype(f)).astype(f)
    xhat = (d / sd[None, :, None]).astype(f)
    y = ((xhat * gamma[None, :, None]).astype(f) + beta[None, :, None]).astype(f)
    inv_std = (f(1) / sd).astype(f)
    db = rule4(walk(g))
    dg = rule4(walk((g * xhat).astype(f)))
    S1, S2 = (db * gamma).astype(f), (dg * gamma).astype(f)
    dxh = (g * gamma[None, :, None]).astype(f)
    t = ((dxh * f(n * s)).astype(f) - S1[None, :, None]).astype(f)
    t = (t - (xhat * S2[None, :, None]).astype(f)).astype(f)
    dx = ((t * inv_std[None, :, None]).astype(f) * inv_cnt).astype(f)
    return dict(y=y, xhat=xhat, mean=mean, var=var, inv_std=inv_std, dx=dx, dgamma=dg, dbeta=db)


def run(x4, gamma, beta, g4):
    got = ops.batchnorm_channel_first(buf(x4), buf(gamma), buf(beta), eps=EPS)
    out = dict(zip(["y", "xhat", "mean", "var", "inv_std"], (v.to_numpy() for v in got)))
    back = ops.batchnorm_channel_first_backward(buf(g4), got[1], got[4], buf(gamma))
    out.update(zip(["dx", "dgamma", "dbeta"], (v.to_numpy() for v in back)))
    return out


def inputs(shape, seed):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    gamma = (rng.standard_normal(c) * 0.5 + 1).astype(np.float32)
    beta = rng.standard_normal(c).astype(np.float32)
    return x, gamma, beta, g


SHAPES = [
    (128, 4, 8, 8),    # 8x8 planes: chunks of 4 samples, 2 whole blocks of 16 chunks
    (70, 3, 8, 8),     # one whole block, then a partial one ending mid-chunk
    (60, 2, 4, 20),    # 80 positions: chunks cross samples mid-plane
    (300, 2, 4, 4),    # 16 positions: 16 samples per chunk
    (20, 2, 16, 16),   # a chunk per plane; a block, then 4 chunks
    (1, 2, 64, 64),    # one sample: 16 chunks inside one plane
    (6, 1, 32, 32),    # one channel
    (40, 3, 8, 8),     # 10 chunks: no whole block
    (9, 2, 13, 31),    # odd planes: chunks span samples anywhere
    (1, 1, 1, 1),
    (5, 17, 1, 1),     # one position per sample, odd channel count
    (128, 17, 8, 8),   # many channels (split over threads)
    (45, 32, 4, 20),
    (3, 35, 4, 4),     # 48 values per channel: one partial chunk
    # past 65536 values with planes under 2048 positions the map runs as a second sweep in
    # memory order: 16-channel groups, odd planes and channels, more channels than the stack holds
    (128, 32, 8, 8),
    (64, 20, 7, 7),
    (16, 5, 40, 40),
    (4, 1100, 4, 4),
    (8, 3, 64, 64),    # 4096 positions: the fused map past the threshold
    # planes of a multiple of 16 positions sum 16 channels at a time, a channel per lane
    (3, 16, 4, 4),     # one group, one partial chunk
    (1, 16, 64, 64),   # one sample: 16 chunks inside each plane
    (7, 48, 4, 12),    # 48 positions: chunks close mid-plane, 3 groups, a partial last chunk
    (2, 33, 16, 16),   # 2 groups and a channel left alone
    # ... and planes of other sizes too: runs shorter than 16, chunks closing inside a run
    (6, 16, 1, 1),
    (40, 32, 2, 2),
    (70, 16, 3, 5),
    (2, 16, 17, 17),
    (64, 48, 7, 7),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_batchnorm_is_the_stated_order_bit_for_bit(mode, shape):
    x, gamma, beta, g = inputs(shape, sum(shape))
    n, c = shape[:2]
    want = reference(x.reshape(n, c, -1), gamma, beta, g.reshape(n, c, -1))
    got = run(x, gamma, beta, g)
    for k, v in want.items():
        same_bits(got[k].reshape(v.shape), v, k)


@pytest.mark.parametrize("shape", [(128, 4, 8, 8), (128, 18, 8, 8)], ids=lambda s: "x".join(map(str, s)))
def test_nan_and_inf_stay_in_their_channel(mode, shape):
    x, gamma, beta, g = inputs(shape, 7)
    x[3, 1, 2, 5] = np.nan
    x[100, 2, 7, 7] = np.inf
    g[64, 3, 0, 0] = -np.inf
    n, c = shape[:2]
    want = reference(x.reshape(n, c, -1), gamma, beta, g.reshape(n, c, -1))
    got = run(x, gamma, beta, g)
    for k, v in want.items():
        same_bits(got[k].reshape(v.shape), v, k)
    others = np.delete(np.arange(shape[1]), [1, 2])
    assert np.isnan(got["mean"][1]) and np.isinf(got["mean"][2]) and np.isfinite(got["mean"][others]).all()
    assert np.isinf(got["dbeta"][3]) and np.isfinite(np.delete(got["dbeta"], 3)).all()


@pytest.mark.parametrize("shape", [(128, 4, 8, 8), (60, 2, 4, 20), (2, 3, 32, 32)],
                         ids=lambda s: "x".join(map(str, s)))
def test_batchnorm_is_close_to_float64(shape):
    x, gamma, beta, g = inputs(shape, 11)
    got = run(x, gamma, beta, g)
    xd, gd = x.astype(np.float64), g.astype(np.float64)
    mean = xd.mean(axis=(0, 2, 3))
    var = xd.var(axis=(0, 2, 3))
    xhat = (xd - mean[None, :, None, None]) / np.sqrt(var + EPS)[None, :, None, None]
    np.testing.assert_allclose(got["mean"], mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["var"], var, rtol=1e-5)
    np.testing.assert_allclose(got["xhat"], xhat, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["dbeta"], gd.sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got["dgamma"], (gd * xhat).sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-3)
