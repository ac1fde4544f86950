"""layer_norm and batchnorm_channel_first beyond the registry cases: bad inputs, residual
outputs, batch-vs-single equality and determinism of the fused backward."""
import numpy as np
import pytest

import reference
import torchlean as tl
from torchlean._generated import ops


def _ab(a):
    return tl.AnyBuffer.from_numpy(np.asarray(a, dtype=np.float32))


def test_layer_norm_gamma_mismatch_names_op_and_shapes():
    t = tl.Tape()
    x, g, b = t.leaf(np.ones((2, 4))), t.leaf(np.ones(3)), t.leaf(np.ones(4))
    with pytest.raises(ValueError, match=r"layer_norm.*\(3,\)"):
        t.layer_norm(x, g, b)


def test_layer_norm_rank_error():
    with pytest.raises(ValueError, match="layer_norm"):
        ops.layer_norm(_ab(np.ones((2, 4))), _ab(np.ones((1, 4))), _ab(np.ones(4)))


def test_layer_norm_eps_type_error():
    with pytest.raises(TypeError, match="layer_norm"):
        ops.layer_norm(_ab(np.ones((2, 4))), _ab(np.ones(4)), _ab(np.ones(4)), eps="x")


def test_layer_norm_residuals():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 6)).astype(np.float32)
    y, xhat, inv_std = ops.layer_norm(_ab(x), _ab(np.ones(6)), _ab(np.zeros(6)))
    x64 = x.astype(np.float64)
    sd = np.sqrt(x64.var(axis=1) + 1e-6)
    np.testing.assert_allclose(inv_std.to_numpy(), 1 / sd, rtol=1e-5)
    np.testing.assert_allclose(xhat.to_numpy(), (x64 - x64.mean(1, keepdims=True)) / sd[:, None],
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y.to_numpy(), xhat.to_numpy(), rtol=1e-6, atol=1e-6)


def test_layer_norm_backward_is_deterministic():
    rng = np.random.default_rng(1)
    x, g = rng.normal(size=(37, 11)), rng.normal(size=(37, 11))
    outs = []
    for _ in range(2):
        t = tl.Tape()
        ids = [t.leaf(x), t.leaf(rng.normal(size=11) * 0 + 1.5), t.leaf(np.zeros(11))]
        y = t.layer_norm(*ids)
        gr = t.backward(y, seed=g)
        outs.append([gr[i].to_numpy() for i in ids])
        t.release()
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


def test_batchnorm_gamma_mismatch_and_rank():
    with pytest.raises(ValueError, match=r"batchnorm_channel_first.*\(3,\)"):
        ops.batchnorm_channel_first(_ab(np.ones((3, 2, 2))), _ab(np.ones(2)), _ab(np.ones(3)))
    with pytest.raises(ValueError, match="batchnorm_channel_first.*rank"):
        ops.batchnorm_channel_first(_ab(np.ones(3)), _ab(np.ones(3)), _ab(np.ones(3)))
    with pytest.raises(ValueError, match="batchnorm_channel_first.*rank"):
        ops.batchnorm_channel_first(_ab(np.ones((1, 2, 3, 4, 5))), _ab(np.ones(2)), _ab(np.ones(2)))


def test_batchnorm_mean_var_residuals():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    y, xhat, mean, var, inv_std = ops.batchnorm_channel_first(
        _ab(x), _ab(np.ones(3)), _ab(np.zeros(3)))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(mean.to_numpy(), x64.mean(axis=(0, 2, 3)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var.to_numpy(), x64.var(axis=(0, 2, 3)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(inv_std.to_numpy(), 1 / np.sqrt(x64.var(axis=(0, 2, 3)) + 1e-6),
                               rtol=1e-5)
    want = reference.batchnorm_channel_first(x64, np.ones(3), np.zeros(3))
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-4, atol=1e-5)


def test_batchnorm_batch_of_one_equals_single():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 4, 5))
    gm, bt = rng.normal(size=3), rng.normal(size=3)
    y1 = ops.batchnorm_channel_first(_ab(x), _ab(gm), _ab(bt))[0].to_numpy()
    yb = ops.batchnorm_channel_first(_ab(x[None]), _ab(gm), _ab(bt))[0].to_numpy()
    np.testing.assert_array_equal(yb[0], y1)


def test_batchnorm_larger_against_reference_and_grad_sums():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(4, 5, 6, 7))
    gm, bt = rng.normal(size=5), rng.normal(size=5)
    g = rng.normal(size=x.shape)
    t = tl.Tape()
    ids = [t.leaf(a) for a in (x, gm, bt)]
    y = t.batchnorm_channel_first(*ids)
    np.testing.assert_allclose(t.value(y).to_numpy(),
                               reference.batchnorm_channel_first(x, gm, bt), rtol=1e-4, atol=1e-4)
    gr = t.backward(y, seed=g)
    xh = (x - x.mean(axis=(0, 2, 3), keepdims=True)) / np.sqrt(x.var(axis=(0, 2, 3), keepdims=True) + 1e-6)
    np.testing.assert_allclose(gr[ids[2]].to_numpy(), g.sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gr[ids[1]].to_numpy(), (g * xh).sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-3)
    # dx sums to zero per channel (the mean is subtracted)
    np.testing.assert_allclose(gr[ids[0]].to_numpy().sum(axis=(0, 2, 3)), 0, atol=1e-3)
    t.release()


@pytest.mark.parametrize("cols", [4, 12, 1024, 4100, 8192, 8196, 6])
def test_layer_norm_widths_forward_and_backward(cols):
    """Widths with cols % 4 == 0 up to 8192 take the CUDA register-resident kernels; 8196 and 6
    take the general ones. Forward and the analytic VJP against float64."""
    rng = np.random.default_rng(cols)
    x = rng.normal(1.5, 2.0, size=(3, cols)).astype(np.float32)
    gm = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    bt = rng.uniform(-1, 1, cols).astype(np.float32)
    g = rng.uniform(-1, 1, size=(3, cols)).astype(np.float32)
    t = tl.Tape()
    ix, ig, ib = t.leaf(x), t.leaf(gm), t.leaf(bt)
    y = t.layer_norm(ix, ig, ib)
    X, G, Gm = x.astype(np.float64), g.astype(np.float64), gm.astype(np.float64)
    np.testing.assert_allclose(t.value(y).to_numpy(), reference.layer_norm(X, Gm, bt), rtol=1e-4,
                               atol=1e-4)
    grads = t.backward(y, seed=g, wrt=[ix, ig, ib])
    mean = X.mean(1, keepdims=True)
    sd = np.sqrt(((X - mean) ** 2).mean(1, keepdims=True) + 1e-6)
    xh = (X - mean) / sd
    d = G * Gm
    dx = (d - d.mean(1, keepdims=True) - xh * (d * xh).mean(1, keepdims=True)) / sd
    np.testing.assert_allclose(grads[ix].to_numpy(), dx, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(grads[ig].to_numpy(), (G * xh).sum(0), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(grads[ib].to_numpy(), G.sum(0), rtol=1e-4, atol=1e-4)
    t.release()
