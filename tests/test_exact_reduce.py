"""Exact mode on the stub for reductions, softmax and norms: the canonical order, bit for bit.

Each kernel is compared, at sizes above one TLM_CHUNK (256) and with odd sizes and size 1,
with an independent NumPy emulation of the rule it claims (native/common/tl_math.h rule 4: a
sum of n values is sequential within chunks of 256, then a fixed binary tree over the chunk
partials, an odd last partial carried up), and with a float64 reference within the registry's
tolerances. Exp and log come from the tl_math shim (tests/test_exact_math.py checks those
functions against libm); every other step is float32 NumPy arithmetic, one rounding each.
"""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean._generated import ops
from torchlean.buffer import AnyBuffer

from test_exact_math import evaluate, shim  # noqa: F401  (shim is a fixture)

CHUNK = 256
F32 = np.float32


@pytest.fixture(autouse=True)
def exact_mode():
    """any backend: CUDA's exact paths must give these bits too (the GPU run takes this file)"""
    assert tl.set_exact(True)
    yield
    tl.set_exact(False)


def _buf(a):
    return AnyBuffer.from_numpy(np.ascontiguousarray(a, np.float32))


def _np(b):
    return b.to_numpy().astype(np.float32)


def rule4(a, axis=0):
    """Rule 4 along `axis` of a float32 array, vectorised across chunks and the other axes."""
    a = np.moveaxis(np.asarray(a, F32), axis, 0)
    n, rest = a.shape[0], a.shape[1:]
    if n == 0:
        return np.zeros(rest, F32)
    nc = -(-n // CHUNK)
    pad = np.zeros((nc * CHUNK,) + rest, F32)
    pad[:n] = a
    c = pad.reshape((nc, CHUNK) + rest)
    s = c[:, 0].copy()                       # each chunk from its first value, in index order
    for j in range(1, CHUNK):
        live = (np.arange(nc) * CHUNK + j < n).reshape((nc,) + (1,) * len(rest))
        s = np.where(live, (s + c[:, j]).astype(F32), s)
    while s.shape[0] > 1:                    # level by level; an odd last partial carried up
        half = s.shape[0] // 2
        nxt = (s[0:2 * half:2] + s[1:2 * half:2]).astype(F32)
        s = np.concatenate([nxt, s[2 * half:]]) if s.shape[0] % 2 else nxt
    return s[0]


def assert_bits(got, want):
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    assert got.shape == want.shape
    gb, wb = got.view(np.uint32).copy(), want.view(np.uint32).copy()
    gb[np.isnan(got)] = wb[np.isnan(want)] = 0x7FC00000
    bad = np.flatnonzero(gb.ravel() != wb.ravel())
    assert bad.size == 0, (f"{bad.size} of {got.size} differ; first at {bad[0]}: "
                           f"{got.ravel()[bad[0]]!r} vs {want.ravel()[bad[0]]!r}")


def _data(rng, shape):
    """normal values spread over several binades, so the summation order shows in the bits"""
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))).astype(F32)


# --------------------------------------------------------------------------- sums

@pytest.mark.parametrize("n", [1, 7, 256, 257, 513, 3001, 70001])
def test_sum_is_rule4_bit_for_bit(n):
    x = _data(np.random.default_rng(n), n)
    got = _np(ops.sum(_buf(x)))
    assert_bits(got, rule4(x))
    np.testing.assert_allclose(got, x.astype(np.float64).sum(), rtol=1e-5,
                               atol=1e-5 * np.abs(x).sum())


def test_rule4_emulation_is_not_a_plain_running_sum():
    """the bit tests above can fail: the tree gives other bits than one sequential chain"""
    x = _data(np.random.default_rng(0), 70001)
    seq = F32(0)
    for v in x:
        seq = F32(seq + v)
    assert rule4(x) != seq


@pytest.mark.parametrize("shape,axis", [((3, 700, 5), 1), ((4, 600), -1), ((600, 3), 0),
                                        ((2, 257, 1), 1), ((1, 5000), 1), ((5000,), 0),
                                        ((3, 1, 4), 1), ((2, 3, 33), 2)])
@pytest.mark.parametrize("mean", [False, True])
def test_axis_sum_and_mean_are_rule4_bit_for_bit(shape, axis, mean):
    x = _data(np.random.default_rng(sum(shape)), shape)
    op = ops.reduce_mean if mean else ops.reduce_sum
    got = _np(op(_buf(x), axis=axis))
    want = rule4(x, axis)
    if mean:
        want = (want * (F32(1) / F32(x.shape[axis]))).astype(F32)
    assert_bits(got, want)
    ref = x.astype(np.float64).mean(axis) if mean else x.astype(np.float64).sum(axis)
    scale = np.abs(x).astype(np.float64).sum(axis) / (x.shape[axis] if mean else 1)
    assert np.all(np.abs(got - ref) <= 1e-5 * scale + 1e-6)


def test_empty_axes_and_empty_outputs():
    z = np.zeros((3, 0, 4), F32)
    np.testing.assert_array_equal(_np(ops.reduce_sum(_buf(z), axis=1)), np.zeros((3, 4)))
    assert np.isnan(_np(ops.reduce_mean(_buf(z), axis=1))).all()
    assert _np(ops.reduce_sum(_buf(np.zeros((0, 600, 3), F32)), axis=1)).shape == (0, 3)
    assert _np(ops.reduce_mean(_buf(np.zeros((2, 600, 0), F32)), axis=1)).shape == (2, 0)
    assert _np(ops.sum(_buf(np.zeros(0, F32)))) == 0.0


def test_sum_to_is_rule4_over_each_outputs_sources_in_x_order():
    """(300, 4, 70) -> (4, 1): output j is rule 4 over x[:, j, :] in increasing x index"""
    x = _data(np.random.default_rng(5), (300, 4, 70))
    got = _np(ops.sum_to(_buf(x), shape=(4, 1)))
    assert_bits(got, rule4(x.transpose(1, 0, 2).reshape(4, -1), 1).reshape(4, 1))
    np.testing.assert_allclose(got, x.astype(np.float64).sum((0, 2)).reshape(4, 1), rtol=1e-4,
                               atol=1e-4)
    assert_bits(_np(ops.sum_to(_buf(x), shape=())), rule4(x.ravel()))


def test_reduce_max_keeps_the_first_zero_and_propagates_nan():
    x = np.full((3, 600), -1.0, F32)
    x[0, 10], x[0, 400] = -0.0, 0.0
    x[1, 5], x[1, 300] = 0.0, -0.0
    x[2, 7] = np.nan
    got = _np(ops.reduce_max(_buf(x), axis=1))
    assert got[0].view(np.uint32) == F32(-0.0).view(np.uint32)
    assert got[1].view(np.uint32) == F32(0.0).view(np.uint32)
    assert np.isnan(got[2])
    got_t = _np(ops.reduce_max(_buf(x.T.copy()), axis=0))
    assert_bits(got_t, got)


def test_long_sums_split_into_subtrees_give_the_same_bits():
    """sizes where CUDA splits a row over several blocks and the stub over threads"""
    rng = np.random.default_rng(3)
    x = _data(rng, 3_000_001)
    assert_bits(_np(ops.sum(_buf(x))), rule4(x))
    c = _data(rng, (70_001, 2))
    assert_bits(_np(ops.reduce_sum(_buf(c), axis=0)), rule4(c, 0))


# --------------------------------------------------------------------------- softmax

def _exp(shim, x):  # noqa: F811
    return evaluate(shim, "exp", np.asarray(x, F32))


@pytest.mark.parametrize("shape", [(3, 700), (5, 257), (2, 1), (1, 256), (4, 3, 300)])
def test_softmax_and_log_softmax_bit_for_bit(shim, shape):  # noqa: F811
    rng = np.random.default_rng(len(shape) * 1000 + shape[-1])
    x = (rng.standard_normal(shape) * 3).astype(F32)
    m = x.max(-1, keepdims=True)
    d = (x - m).astype(F32)
    e = _exp(shim, d)
    s = rule4(e, -1)[..., None]
    assert_bits(_np(ops.softmax(_buf(x))), (e / s).astype(F32))
    ls = evaluate(shim, "log", s)
    assert_bits(_np(ops.log_softmax(_buf(x))), (d - ls).astype(F32))
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - x64.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    np.testing.assert_allclose(_np(ops.softmax(_buf(x))), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(ops.log_softmax(_buf(x))), np.log(ref), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(3, 700), (2, 1), (6, 513)])
def test_softmax_backwards_bit_for_bit(shim, shape):  # noqa: F811
    rng = np.random.default_rng(shape[-1])
    y = rng.random(shape).astype(F32)
    g = rng.standard_normal(shape).astype(F32)
    s = rule4((g * y).astype(F32), -1)[..., None]
    assert_bits(_np(ops.softmax_backward(_buf(y), _buf(g))), (y * (g - s).astype(F32)).astype(F32))
    ly = np.log(y).astype(F32)
    sg = rule4(g, -1)[..., None]
    want = (g - (_exp(shim, ly) * sg).astype(F32)).astype(F32)
    assert_bits(_np(ops.log_softmax_backward(_buf(ly), _buf(g))), want)
    ref = y.astype(np.float64) * (g - (g.astype(np.float64) * y).sum(-1, keepdims=True))
    np.testing.assert_allclose(_np(ops.softmax_backward(_buf(y), _buf(g))), ref, rtol=1e-4,
                               atol=1e-5)


def test_rows_longer_than_the_shared_memory_partials(shim):  # noqa: F811
    """2.1M columns: more chunk partials than CUDA keeps in shared memory (8192 chunks)"""
    x = _data(np.random.default_rng(8), (1, 2_100_001))
    m = x.max(-1, keepdims=True)
    e = _exp(shim, (x - m).astype(F32))
    assert_bits(_np(ops.softmax(_buf(x))), (e / rule4(e, -1)[..., None]).astype(F32))
    assert_bits(_np(ops.reduce_max(_buf(x), axis=1)), x.max(-1))
    y = _np(ops.softmax(_buf(x)))
    g = _data(np.random.default_rng(9), x.shape)
    s = rule4((g * y).astype(F32), -1)[..., None]
    assert_bits(_np(ops.softmax_backward(_buf(y), _buf(g))), (y * (g - s).astype(F32)).astype(F32))


def test_masked_softmax_bit_for_bit(shim):  # noqa: F811
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((4, 600)) * 2).astype(F32)
    mask = rng.random((4, 600)) < 0.7
    mask[3] = False
    xm = np.where(mask, x, -np.inf).astype(F32)
    m = xm.max(-1, keepdims=True)
    e = np.where(mask, _exp(shim, (x - m).astype(F32)), F32(0)).astype(F32)
    s = rule4(e, -1)[..., None]
    with np.errstate(invalid="ignore"):  # the fully blocked row: 0 / 0
        want = np.where(mask, (e / s).astype(F32), F32(0)).astype(F32)
    want[3] = 0.0  # fully blocked row
    assert_bits(_np(ops.masked_softmax(_buf(x), mask=mask)), want)


def test_nan_propagates_and_fully_blocked_rows_are_zero():
    x = np.zeros((4, 300), F32)
    x[0, 299] = np.nan
    x[1, 0] = np.nan
    mask = np.ones((4, 300), bool)
    mask[2, 5] = False
    x[2, 5] = np.nan        # NaN under the mask does not matter
    x[3, :] = -np.inf       # every allowed entry -inf: the row is 0 ...
    x[3, 9] = np.nan        # ... unless a NaN hides there
    mask[3, 10:] = False
    for op in (ops.softmax, ops.log_softmax):
        y = _np(op(_buf(x[:2])))
        assert np.isnan(y).all()
    y = _np(ops.masked_softmax(_buf(x), mask=mask))
    assert np.isnan(y[:2]).all()
    assert not np.isnan(y[2]).any() and y[2, 5] == 0.0
    assert np.isnan(y[3, :10]).all() and (y[3, 10:] == 0).all()
    x[3, 9] = -np.inf
    assert (_np(ops.masked_softmax(_buf(x), mask=mask))[3] == 0).all()


# --------------------------------------------------------------------------- norms

def _inv(n):
    return F32(1.0 / n)


def ln_emulation(x, ga, be, eps):
    cols = x.shape[-1]
    mean = (rule4(x, -1) * _inv(cols)).astype(F32)[..., None]
    d = (x - mean).astype(F32)
    var = (rule4((d * d).astype(F32), -1) * _inv(cols)).astype(F32)[..., None]
    sd = np.sqrt((var + F32(eps)).astype(F32)).astype(F32)
    xh = (d / sd).astype(F32)
    y = ((xh * ga).astype(F32) + be).astype(F32)
    return y, xh, (F32(1) / sd).astype(F32)[..., 0]


@pytest.mark.parametrize("shape", [(3, 700), (600, 7), (5, 1), (1, 257), (1, 2_100_001), (1029, 64),
                                   (13, 256), (9, 255)])
def test_layer_norm_forward_and_backward_bit_for_bit(shape):
    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(F32)
    ga, be = rng.standard_normal(shape[-1:]).astype(F32), rng.standard_normal(shape[-1:]).astype(F32)
    y, xh, inv_std = (_np(b) for b in ops.layer_norm(_buf(x), _buf(ga), _buf(be), eps=1e-5))
    wy, wxh, wis = ln_emulation(x, ga, be, 1e-5)
    assert_bits(y, wy)
    assert_bits(xh, wxh)
    assert_bits(inv_std, wis)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, ref * ga + be, rtol=1e-4, atol=1e-4)

    g = rng.standard_normal(shape).astype(F32)
    dx, dg, db = (_np(b) for b in ops.layer_norm_backward(_buf(g), _buf(xh), _buf(inv_std),
                                                            _buf(ga)))
    cols = shape[-1]
    dxh = (g * ga).astype(F32)
    s1 = rule4(dxh, -1)[..., None]
    s2 = rule4((dxh * xh).astype(F32), -1)[..., None]
    t = (((dxh * F32(cols)).astype(F32) - s1).astype(F32) - (xh * s2).astype(F32)).astype(F32)
    want = ((t * inv_std[..., None]).astype(F32) * _inv(cols)).astype(F32)
    assert_bits(dx, want)
    assert_bits(dg, rule4((g * xh).astype(F32), 0))
    assert_bits(db, rule4(g, 0))
    dx_ref = (dxh - dxh.mean(-1, keepdims=True) - xh * (dxh * xh).mean(-1, keepdims=True)) \
        * inv_std[..., None]
    np.testing.assert_allclose(dx, dx_ref, rtol=2e-3, atol=2e-4 * np.abs(dx_ref).max())


@pytest.mark.parametrize("shape", [(4, 3, 100), (3, 2, 1), (2, 700), (3, 2, 9, 31), (1, 1, 1),
                                   (1, 1, 1500, 1401)])
def test_batchnorm_forward_and_backward_bit_for_bit(shape):
    """x is (C, L), (C, H, W) or (N, C, H, W); a channel's elements sample by sample"""
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 3 - 1).astype(F32)
    n, c = (shape[0], shape[1]) if len(shape) == 4 else (1, shape[0])
    ga, be = rng.standard_normal(c).astype(F32), rng.standard_normal(c).astype(F32)
    y, xh, mean, var, inv_std = (_np(b) for b in ops.batchnorm_channel_first(
        _buf(x), _buf(ga), _buf(be), eps=1e-5))
    # channel sequences in the kernel's order: samples outer, positions inner
    xs = x.reshape(n, c, -1)
    seq = np.moveaxis(xs, 1, 0).reshape(c, -1)           # (c, n*s), sample-major
    cnt = seq.shape[1]
    wm = (rule4(seq, 1) * _inv(cnt)).astype(F32)
    d = (seq - wm[:, None]).astype(F32)
    wv = (rule4((d * d).astype(F32), 1) * _inv(cnt)).astype(F32)
    sd = np.sqrt((wv + F32(1e-5)).astype(F32)).astype(F32)
    assert_bits(mean, wm)
    assert_bits(var, wv)
    assert_bits(inv_std, (F32(1) / sd).astype(F32))
    wxh = (d / sd[:, None]).astype(F32)
    wy = ((wxh * ga[:, None]).astype(F32) + be[:, None]).astype(F32)
    to_x = lambda a: np.moveaxis(a.reshape(c, n, -1), 0, 1).reshape(shape)  # noqa: E731
    assert_bits(xh, to_x(wxh))
    assert_bits(y, to_x(wy))
    np.testing.assert_allclose(var, seq.astype(np.float64).var(1), rtol=1e-4)

    g = rng.standard_normal(shape).astype(F32)
    dx, dg, db = (_np(b) for b in ops.batchnorm_channel_first_backward(
        _buf(g), _buf(xh), _buf(inv_std), _buf(ga)))
    gs = np.moveaxis(g.reshape(n, c, -1), 1, 0).reshape(c, -1)
    sb, sg = rule4(gs, 1), rule4((gs * wxh).astype(F32), 1)
    assert_bits(db, sb)
    assert_bits(dg, sg)
    s1, s2 = (sb * ga).astype(F32)[:, None], (sg * ga).astype(F32)[:, None]
    dxh = (gs * ga[:, None]).astype(F32)
    t = (((dxh * F32(cnt)).astype(F32) - s1).astype(F32) - (wxh * s2).astype(F32)).astype(F32)
    want = ((t * inv_std[:, None]).astype(F32) * _inv(cnt)).astype(F32)
    assert_bits(dx, to_x(want))
