"""Softmax family beyond the registry cases: bad inputs, masks, stability, batch folding."""
from __future__ import annotations

import numpy as np
import pytest

import reference
import torchlean as tl
from torchlean._generated import ops
from torchlean.buffer import AnyBuffer


def _buf(a):
    return AnyBuffer.from_numpy(np.asarray(a, np.float32))


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "masked_softmax"])
@pytest.mark.parametrize("shape", [(3, 0), (0, 4), (2, 0, 5, 0)])
def test_empty_axis_gives_an_empty_result_and_gradient(op, shape):
    """As torch: softmax over an empty axis (or of no rows) is an empty tensor, not an error."""
    t = tl.Tape()
    x = t.leaf(np.zeros(shape))
    kw = {"mask": np.ones(shape, bool)} if op == "masked_softmax" else {}
    y = getattr(t, op)(x, **kw)
    assert t.value(y).shape == shape
    g = t.backward(y, seed=np.zeros(shape))[x]
    assert g.to_numpy().shape == shape
    t.release()


def test_softmax_over_an_empty_axis_through_the_tensor_api():
    s = tl.Session()
    x = s.tensor(np.zeros((3, 0)), requires_grad=True)
    y = x.softmax()
    z = tl.log_softmax(x)
    assert y.shape == z.shape == (3, 0)
    (y.sum() + z.sum()).backward()
    assert x.grad.shape == (3, 0)


def test_softmax_of_scalar_is_an_error():
    t = tl.Tape()
    x = t.leaf(np.float64(1.0))
    with pytest.raises(ValueError, match="softmax"):
        t.softmax(x)
    t.release()


def test_mask_shape_and_dtype_errors():
    t = tl.Tape()
    x = t.leaf(np.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match=r"masked_softmax.*mask shape \(3, 2\).*\(2, 3, 3\)"):
        t.masked_softmax(x, mask=np.ones((3, 2), bool))
    with pytest.raises(TypeError, match="masked_softmax.*mask"):
        t.masked_softmax(x, mask=np.ones((3, 3), np.float32))
    with pytest.raises(TypeError, match="masked_softmax.*mask"):
        t.masked_softmax(x, mask=[[1, 0, 1]] * 3)
    t.release()


def test_fully_blocked_rows_are_zero_and_blocked_entries_exact_zero():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5))
    mask = rng.uniform(size=(4, 5)) < 0.5
    mask[2] = False
    mask[0] = True
    t = tl.Tape()
    i = t.leaf(x)
    y = t.masked_softmax(i, mask=mask)
    got = t.value(y).to_numpy(np.float64)
    assert np.all(got[~mask] == 0.0)
    assert np.all(got[2] == 0.0)
    np.testing.assert_allclose(got, reference.masked_softmax(x.astype(np.float32).astype(np.float64), mask),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[0], reference.softmax(x.astype(np.float32)[0].astype(np.float64)),
                               rtol=1e-5)
    g = t.backward(y, seed=rng.standard_normal((4, 5)))[i].to_numpy()
    assert np.all(g[~mask] == 0.0) and np.all(g[2] == 0.0)
    t.release()


def test_attention_shaped_mask_broadcasts_over_batch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 4)).astype(np.float32)
    causal = np.tril(np.ones((4, 4), bool))
    got = ops.masked_softmax(_buf(x), mask=causal).to_numpy()
    for b in range(3):
        np.testing.assert_allclose(got[b], reference.masked_softmax(x[b].astype(np.float64), causal),
                                   rtol=1e-5, atol=1e-6)
    full = ops.masked_softmax(_buf(x), mask=np.broadcast_to(causal, (3, 4, 4)).copy()).to_numpy()
    np.testing.assert_array_equal(got, full)
    none = ops.masked_softmax(_buf(x), mask=None).to_numpy()
    np.testing.assert_array_equal(none, ops.softmax(_buf(x)).to_numpy())


def test_stable_for_large_logits():
    x = np.array([[1000.0, 999.0, -1000.0], [-1e30, 0.0, 1e30]], np.float32)
    s = ops.softmax(_buf(x)).to_numpy()
    ls = ops.log_softmax(_buf(x)).to_numpy()
    assert np.all(np.isfinite(s)) and np.all(np.isfinite(ls))
    np.testing.assert_allclose(s[0], reference.softmax(x[0].astype(np.float64)), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ls[0], reference.log_softmax(x[0].astype(np.float64)), rtol=1e-5)
    # log_softmax is computed directly: no log(0) = -inf for a tiny probability
    assert ls[0, 2] < -1999


def test_batch_rows_equal_single_rows():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3, 130)).astype(np.float32)
    for op in (ops.softmax, ops.log_softmax):
        whole = op(_buf(x)).to_numpy()
        for b in range(5):
            np.testing.assert_array_equal(whole[b], op(_buf(x[b])).to_numpy())


@pytest.mark.parametrize("cols", [1, 7, 1000, 3000])
def test_backward_kernels_match_reference_vjp(cols):
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((6, cols))
    g = rng.standard_normal((6, cols))
    xf = x.astype(np.float32).astype(np.float64)
    gf = g.astype(np.float32).astype(np.float64)
    t = tl.Tape()
    i = t.leaf(x)
    y = t.softmax(i)
    ly = t.log_softmax(i)
    d1 = t.backward(y, seed=g, wrt=[i])[i].to_numpy(np.float64)
    d2 = t.backward(ly, seed=g, wrt=[i])[i].to_numpy(np.float64)
    p = reference.softmax(xf)
    np.testing.assert_allclose(d1, p * (gf - (gf * p).sum(-1, keepdims=True)), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(d2, gf - p * gf.sum(-1, keepdims=True), rtol=1e-4, atol=1e-5)
    t.release()


@pytest.mark.parametrize("cols", [1028, 2052, 4096, 6000, 8192, 8196])
def test_wide_rows_match_float64(cols):
    """Rows wider than 1024 take the CUDA register-resident kernel when cols % 4 == 0 and
    cols <= 8192 (8196 checks the fallback); the stub runs one code path for all widths."""
    rng = np.random.default_rng(cols)
    x = rng.uniform(-20, 20, size=(3, cols)).astype(np.float32)
    x[1, 7] = 80.0  # one dominant entry: the row max must be found across threads
    X = x.astype(np.float64)
    e = np.exp(X - X.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ops.softmax(_buf(x)).to_numpy(), want, rtol=2e-5, atol=1e-30)
    lwant = (X - X.max(axis=1, keepdims=True)) - np.log(e.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(ops.log_softmax(_buf(x)).to_numpy(), lwant, rtol=1e-5, atol=2e-5)


# every register-row schedule of the CUDA kernels (float4 units when cols % 4 == 0, else single
# floats; a warp, 64 threads or a block per row, up to 8192 columns) and its edges, the
# shared-memory rows past 8192 (forward), the strided schedule past those (60001 columns: 240 KB)
# and for the backward past 8192; 13 rows leave a part-filled last block of 8 warps
@pytest.mark.parametrize("cols", [1, 3, 4, 8, 33, 65, 124, 128, 129, 132, 252, 256, 257, 260,
                                  512, 1001, 1020, 1024, 1028, 2049, 4096, 4097, 4100, 8191,
                                  8192, 8193, 50257, 60001])
def test_register_rows_forward_backward_nan_inf_match_float64(cols):
    rng = np.random.default_rng(100 + cols)
    x = rng.uniform(-30, 30, size=(13, cols)).astype(np.float32)
    g = rng.standard_normal((13, cols)).astype(np.float32)
    x[1, cols - 1] = 90.0          # the max in the last float4 of the row
    x[2, cols // 2] = np.nan       # a NaN row stays NaN
    x[3, 0] = np.inf               # inf - inf: NaN, as the stub
    x[4, :] = -np.inf              # nothing finite: NaN
    x[5, : cols - 1] = -np.inf     # one finite entry: probability 1
    X, G = x.astype(np.float64), g.astype(np.float64)
    with np.errstate(invalid="ignore"):
        m = X.max(axis=1, keepdims=True)
        m = np.where(np.isnan(X).any(axis=1, keepdims=True), np.nan, m)
        e = np.exp(X - m)
        s = e.sum(axis=1, keepdims=True)
        want, lwant = e / s, (X - m) - np.log(s)
    y = ops.softmax(_buf(x)).to_numpy()
    ly = ops.log_softmax(_buf(x)).to_numpy()
    np.testing.assert_allclose(y, want, rtol=2e-5, atol=1e-30)
    np.testing.assert_allclose(ly, lwant, rtol=1e-5, atol=2e-5)
    assert np.isnan(y[2:5]).all() and np.isnan(ly[2:5]).all()
    assert y[5, -1] == 1.0 and (y[5, :-1] == 0).all()
    # the backward kernels from the float32 outputs, finite rows only
    ok = [0, 1, 5] + list(range(6, 13))
    yf, lyf = y[ok].astype(np.float64), ly[ok].astype(np.float64)
    dx = ops.softmax_backward(_buf(y[ok]), _buf(g[ok])).to_numpy()
    ldx = ops.log_softmax_backward(_buf(ly[ok]), _buf(g[ok])).to_numpy()
    Gk = G[ok]
    np.testing.assert_allclose(dx, yf * (Gk - (Gk * yf).sum(axis=1, keepdims=True)), rtol=1e-4, atol=1e-6)
    # g - p S: where p = 1, the float32 row sum S's own rounding (~1e-7 of sum |g|) shows
    lwant = Gk - np.exp(lyf) * Gk.sum(axis=1, keepdims=True)
    bound = 1e-5 + 1e-4 * np.abs(lwant) + 1e-7 * np.abs(Gk).sum(axis=1, keepdims=True)
    assert (np.abs(ldx - lwant) <= bound).all(), np.abs(ldx - lwant).max()
    # a NaN gradient entry makes its row's gradient NaN, others untouched
    g2 = g[ok].copy()
    g2[0, cols // 3] = np.nan
    d2 = ops.softmax_backward(_buf(y[ok]), _buf(g2)).to_numpy()
    assert np.isnan(d2[0]).all() and np.isfinite(d2[1:]).all()


# masked softmax over the same register-row schedules: the mask row broadcasts over a batch
# (mask_rows 3 of 21 rows), a fully blocked mask row, blocked and allowed NaN, an all -inf row
@pytest.mark.parametrize("cols", [1, 3, 4, 33, 128, 129, 256, 1001, 1024, 4100, 8192, 8193])
def test_masked_register_rows_match_float64(cols):
    rng = np.random.default_rng(200 + cols)
    x = rng.uniform(-30, 30, size=(7, 3, cols)).astype(np.float32)
    mask = np.ones((3, cols), bool)
    mask[0] = rng.uniform(size=cols) < 0.5
    mask[0, 0] = True                      # row kind 0 keeps one allowed entry at 0 ...
    if cols > 1:
        mask[0, cols - 1] = False          # ... and one blocked at the end
    mask[1] = False                        # fully blocked
    x[1, 0, cols - 1] = np.nan if cols > 1 else x[1, 0, 0]   # blocked NaN: ignored
    x[2, 0, 0] = np.nan                    # allowed NaN: the allowed entries are NaN
    x[3, 2, :] = -np.inf                   # every allowed entry -inf: 0
    got = ops.masked_softmax(_buf(x), mask=mask).to_numpy()
    X = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = reference.masked_softmax(X, np.broadcast_to(mask, x.shape))
    want[3, 2] = 0.0
    full = np.broadcast_to(mask, x.shape)
    assert (got[~full] == 0.0).all()       # blocked entries exactly 0, NaN rows included
    assert np.isnan(got[2, 0][mask[0]]).all()
    assert (got[3, 2] == 0).all() and (got[:, 1] == 0).all()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-30)
