"""NaN and inf propagate as in PyTorch instead of turning into zeros or finite numbers:
masked_softmax, softmax, attention (NaN in Wq) and max pooling (NaN in a window)."""
import numpy as np
import pytest

import torchlean as tl

nan, inf = np.nan, np.inf


def _fwd(op, *xs, **attrs):
    t = tl.Tape()
    ids = [t.leaf(x) for x in xs]
    out = getattr(t, op)(*ids, **attrs)
    return t, ids, out, t.value(out).to_numpy().astype(np.float64)


def masked_softmax_ref(x, mask):
    """PyTorch's recipe in float64: masked_fill(~mask, -inf) then softmax; a row with nothing
    allowed (or only -inf allowed) is 0 by torchlean's convention."""
    z = np.where(mask, x, -inf)
    out = np.zeros_like(z)
    for r in range(z.shape[0]):
        row = z[r]
        if not np.any(row > -inf) and not np.any(np.isnan(row)):
            continue
        with np.errstate(invalid="ignore"):
            e = np.exp(row - np.max(row))
            out[r] = e / e.sum()
    return out


def test_masked_softmax_propagates_nan_and_inf_rows():
    x = np.array([[1.0, nan, 2.0, 0.5],
                  [inf, 1.0, 0.0, 0.5],
                  [1.0, 2.0, nan, 0.25],    # the NaN is blocked: the row is finite
                  [-inf, -inf, 3.0, 1.0],   # only -inf allowed: 0
                  [1.0, 2.0, 3.0, 4.0],     # nothing allowed: 0
                  [0.3, -1.2, 2.2, 0.1],
                  [inf, inf, 0.0, 1.0]])
    mask = np.array([[1, 1, 1, 0], [1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 0, 0],
                     [1, 0, 1, 1], [1, 1, 1, 1]], bool)
    t, _, _, y = _fwd("masked_softmax", x, mask=mask)
    ref = masked_softmax_ref(x, mask)
    # NaN / +inf in an allowed entry: every allowed entry of the row is NaN (as PyTorch's
    # masked_fill + softmax); blocked entries stay exactly 0 (torchlean's masked_softmax contract)
    for r in (0, 1, 6):
        assert np.isnan(y[r][mask[r]]).all() and np.isnan(ref[r][mask[r]]).all(), r
        assert (y[r][~mask[r]] == 0.0).all(), r
    np.testing.assert_allclose(y[[2, 3, 4, 5]], ref[[2, 3, 4, 5]], rtol=1e-6, atol=1e-7)
    assert (y[[3, 4]] == 0.0).all()
    t.release()


def test_softmax_and_log_softmax_nan_rows():
    x = np.array([[nan, 1.0, 2.0], [inf, 1.0, 0.0], [0.5, -0.5, 1.5]])
    for op in ("softmax", "log_softmax"):
        t, _, _, y = _fwd(op, x)
        assert np.isnan(y[:2]).all(), op
        e = np.exp(x[2] - x[2].max())
        ref = e / e.sum() if op == "softmax" else np.log(e / e.sum())
        np.testing.assert_allclose(y[2], ref, rtol=1e-6, atol=1e-7)
        t.release()


@pytest.mark.parametrize("use_flash", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_attention_with_nan_in_wq_is_nan(use_flash, masked):
    rng = np.random.default_rng(5)
    d, n = 4, 5
    Wq, Wk, Wv, Wo = (rng.normal(size=(d, d)) * 0.5 for _ in range(4))
    x = rng.normal(size=(n, d))
    Wq[1, 2] = nan
    mask = np.tril(np.ones((n, n), bool)) if masked else None
    t, _, _, y = _fwd("multi_head_attention", Wq, Wk, Wv, Wo, x, num_heads=2, mask=mask,
                      use_flash=use_flash)
    assert np.isnan(y).all()
    t.release()


def _windows_max(x, k):
    """float64 2-D max pooling with stride k and no padding; np.max propagates NaN."""
    c, h, w = x.shape
    return x[:, :h // k * k, :w // k * k].reshape(c, h // k, k, w // k, k).max(axis=(2, 4))


def test_max_pool_propagates_nan():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 4, 6))
    x[0, 0, 1] = nan                       # one NaN in window (0, 0, 0)
    x[1, 2:4, 2:4] = nan                   # an all-NaN window (1, 1, 1)
    x[1, 0, 4] = -inf                      # -inf is an ordinary value
    t, ids, out, y = _fwd("max_pool2d", x, kernel_size=2, stride=2)
    ref = _windows_max(x, 2)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    assert np.isnan(y[0, 0, 0]) and np.isnan(y[1, 1, 1]) and np.isnan(y).sum() == 2
    np.testing.assert_allclose(y[~np.isnan(y)], ref[~np.isnan(ref)].astype(np.float32))
    # the gradient goes to the (first) NaN of a window, as PyTorch's argmax does
    g = t.backward(out, seed=np.ones(y.shape))[ids[0]].to_numpy()
    assert g[0, 0, 1] == 1.0 and g[0, 0, 0] == 0.0 and g[1, 2, 2] == 1.0 and g[1, 2, 3] == 0.0
    assert g.sum() == y.size
    t.release()
