"""multi_head_attention beyond the registry cases: bad inputs, mask semantics, batched vs
repeated single samples, use_flash True vs False, determinism."""
import numpy as np
import pytest

import reference
import torchlean as tl
from torchlean._generated import ops


def _ab(a):
    return tl.AnyBuffer.from_numpy(np.asarray(a, dtype=np.float32))


def _weights(rng, d, hh):
    return [rng.normal(size=(d, hh)) * 0.5 for _ in range(3)] + [rng.normal(size=(hh, d)) * 0.5]


def _run(ws, x, g=None, **attrs):
    t = tl.Tape()
    ids = [t.leaf(a) for a in ws + [x]]
    y = t.multi_head_attention(*ids, **attrs)
    val = t.value(y).to_numpy(np.float64)
    grads = None
    if g is not None:
        gr = t.backward(y, seed=g)
        grads = [gr[i].to_numpy(np.float64) for i in ids]
    t.release()
    return val, grads


def test_heads_must_divide_width():
    rng = np.random.default_rng(0)
    ws = [_ab(w) for w in _weights(rng, 4, 6)]
    with pytest.raises(ValueError, match=r"multi_head_attention.*num_heads=4"):
        ops.multi_head_attention(*ws, _ab(np.ones((3, 4))), num_heads=4)


def test_weight_shape_mismatch():
    rng = np.random.default_rng(0)
    ws = [_ab(w) for w in _weights(rng, 4, 4)]
    ws[3] = _ab(np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"multi_head_attention.*\(4, 5\)"):
        ops.multi_head_attention(*ws, _ab(np.ones((3, 4))), num_heads=2)


def test_rank_errors():
    rng = np.random.default_rng(0)
    ws = [_ab(w) for w in _weights(rng, 4, 4)]
    with pytest.raises(ValueError, match="multi_head_attention.*rank"):
        ops.multi_head_attention(*ws, _ab(np.ones(4)), num_heads=2)
    with pytest.raises(ValueError, match="multi_head_attention.*rank"):
        ops.multi_head_attention(*ws, _ab(np.ones((1, 2, 3, 4))), num_heads=2)


def test_mask_wrong_shape_and_dtype():
    rng = np.random.default_rng(0)
    ws = [_ab(w) for w in _weights(rng, 4, 4)]
    x = _ab(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"multi_head_attention.*mask.*\(3, 3\)"):
        ops.multi_head_attention(*ws, x, num_heads=2, mask=np.ones((3, 2), bool))
    with pytest.raises(TypeError, match="multi_head_attention.*mask"):
        ops.multi_head_attention(*ws, x, num_heads=2, mask=np.ones((3, 3), np.float32))


def test_batched_equals_repeated_single():
    rng = np.random.default_rng(1)
    ws = _weights(rng, 6, 6)
    x = rng.normal(size=(3, 5, 6))
    g = rng.normal(size=(3, 5, 6))
    mask = rng.uniform(size=(5, 5)) < 0.7
    yb, gb = _run(ws, x, g, num_heads=3, mask=mask)
    acc = [np.zeros_like(w) for w in ws]
    for i in range(3):
        ys, gs = _run(ws, x[i], g[i], num_heads=3, mask=mask)
        np.testing.assert_allclose(yb[i], ys, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gb[4][i], gs[4], rtol=1e-4, atol=1e-5)
        for k in range(4):
            acc[k] += gs[k]
    for k in range(4):
        np.testing.assert_allclose(gb[k], acc[k], rtol=1e-4, atol=1e-4)


def test_mask_semantics_blocked_weights_zero_and_blocked_rows_zero():
    rng = np.random.default_rng(2)
    d = 4
    eye = np.eye(d)
    n = 4
    # identity projections: attn (pre-Wo) equals the attention output itself
    x = rng.normal(size=(n, d))
    mask = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 1, 0, 1]], bool)
    y, q, k, v, lse, attn = ops.multi_head_attention(*[_ab(eye)] * 4, _ab(x), num_heads=1, mask=mask)
    a = attn.to_numpy(np.float64)
    # row 0 attends only to key 0: output is exactly v_0 (weight 1, others exactly 0)
    np.testing.assert_allclose(a[0], x[0], rtol=1e-6)
    # fully blocked row gives 0 before and after the output projection
    assert np.all(a[2] == 0.0)
    assert np.all(y.to_numpy()[2] == 0.0)
    # changing a blocked key/value leaves rows that cannot see it unchanged
    x2 = x.copy()
    x2[2] += 10.0
    a2 = ops.multi_head_attention(*[_ab(eye)] * 4, _ab(x2), num_heads=1, mask=mask)[5].to_numpy()
    np.testing.assert_array_equal(a2[[0, 1, 3]], a[[0, 1, 3]].astype(np.float32))


def test_fully_blocked_mask_gives_zero_output_and_finite_grads():
    rng = np.random.default_rng(3)
    ws = _weights(rng, 4, 4)
    x = rng.normal(size=(3, 4))
    y, gr = _run(ws, x, np.ones((3, 4)), num_heads=2, mask=np.zeros((3, 3), bool))
    assert np.all(y == 0)
    for gg in gr:
        assert np.all(np.isfinite(gg))
    assert np.all(gr[4] == 0)


@pytest.mark.parametrize("batched", [False, True])
def test_flash_and_composed_agree(batched):
    rng = np.random.default_rng(4)
    ws = _weights(rng, 8, 8)
    shape = (2, 7, 8) if batched else (7, 8)
    x = rng.normal(size=shape)
    g = rng.normal(size=shape)
    mask = rng.uniform(size=(7, 7)) < 0.6
    mask[3] = False
    for m in (None, mask):
        yf, gf = _run(ws, x, g, num_heads=2, mask=m, use_flash=True)
        yc, gc = _run(ws, x, g, num_heads=2, mask=m, use_flash=False)
        np.testing.assert_allclose(yf, yc, rtol=1e-4, atol=1e-5)
        for a, b in zip(gf, gc):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
        want = reference.multi_head_attention(*ws, x, num_heads=2, mask=m)
        np.testing.assert_allclose(yf, want, rtol=1e-4, atol=1e-4)


def test_larger_against_reference_and_deterministic():
    rng = np.random.default_rng(5)
    ws = _weights(rng, 16, 32)
    x = rng.normal(size=(2, 33, 16)) * 0.5
    g = rng.normal(size=x.shape)
    y1, g1 = _run(ws, x, g, num_heads=4)
    y2, g2 = _run(ws, x, g, num_heads=4)
    np.testing.assert_allclose(y1, reference.multi_head_attention(*ws, x, num_heads=4),
                               rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(y1, y2)
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("hd,n", [(20, 70), (48, 70), (64, 130), (64, 1), (100, 67)])
def test_head_dims_flash_composed_reference(hd, n):
    """Head dims in every CUDA kernel class (tiles padded to 64, 96 and 128), lengths
    that leave partial 64-row tiles, a mask with a fully blocked row: the fused path against the
    composed path (gradients) and against float64 (forward), and bit-identical on a rerun."""
    rng = np.random.default_rng(hd + n)
    heads, d = 2, 24
    ws = [w * 0.6 for w in _weights(rng, d, heads * hd)]
    x = rng.normal(size=(2, n, d)) * 0.7
    g = rng.normal(size=x.shape)
    mask = rng.uniform(size=(n, n)) < 0.7
    mask[n // 2] = False
    yf, gf = _run(ws, x, g, num_heads=heads, mask=mask, use_flash=True)
    yc, gc = _run(ws, x, g, num_heads=heads, mask=mask, use_flash=False)
    want = reference.multi_head_attention(*ws, x, num_heads=heads, mask=mask)
    np.testing.assert_allclose(yf, want, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(yf, yc, rtol=1e-3, atol=1e-4)
    for a, b in zip(gf, gc):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3 * np.abs(b).max())
    yf2, gf2 = _run(ws, x, g, num_heads=heads, mask=mask, use_flash=True)
    np.testing.assert_array_equal(yf, yf2)
    for a, b in zip(gf, gf2):
        np.testing.assert_array_equal(a, b)


def test_device_mask_is_reused_and_matches_a_host_mask():
    """A DeviceMask gives the same results as the boolean array it was made from, is accepted
    by the op and its VJP, and the attention module uploads a repeated mask only once."""
    rng = np.random.default_rng(9)
    ws = _weights(rng, 8, 8)
    x, g = rng.normal(size=(2, 6, 8)), rng.normal(size=(2, 6, 8))
    mask = np.tril(np.ones((6, 6), bool))
    y1, g1 = _run(ws, x, g, num_heads=2, mask=mask)
    y2, g2 = _run(ws, x, g, num_heads=2, mask=tl.DeviceMask(mask))
    np.testing.assert_array_equal(y1, y2)
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="DeviceMask"):
        tl.DeviceMask(mask.astype(np.float32))
    att = tl.nn.MultiHeadAttention(8, 2)
    s = tl.Session()
    xt = s.tensor(x)
    att(xt, mask=mask)
    first = att._mask
    m2 = mask.copy()
    att(xt, mask=m2)
    assert att._mask is first            # same content: no new upload
    m2[0, 1] = True
    out = att(xt, mask=m2)
    assert att._mask is not first        # changed content: uploaded again
    want = reference.multi_head_attention(*[p.numpy() for p in (att.Wq, att.Wk, att.Wv, att.Wo)],
                                          x, num_heads=2, mask=m2)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
