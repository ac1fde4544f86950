"""Convolution / pooling edge cases beyond the registry-driven tests: geometry (empty outputs,
stride > kernel), argument errors naming the op and shapes, batch == repeated single samples,
N-D rank 1 and 3, and bit-identical deterministic pooling backward."""
from __future__ import annotations

import numpy as np
import pytest

import reference as R
import torchlean as tl

RNG = np.random.default_rng(7)


def _r(*shape):
    return RNG.uniform(-1, 1, size=shape).astype(np.float32).astype(np.float64)


def _fwd(op, *xs, **attrs):
    t = tl.Tape()
    ids = [t.leaf(x) for x in xs]
    out = getattr(t, op)(*ids, **attrs)
    y = t.value(out).to_numpy(np.float64)
    return t, ids, out, y


def test_pool_padding_over_half_kernel_is_an_error():
    """PyTorch: "pad should be at most half of effective kernel size"."""
    with pytest.raises(ValueError, match=r"max_pool2d: padding \(2, 2\) must be at most half"):
        _fwd("max_pool2d", _r(2, 5, 5), kernel_size=3, padding=2)
    with pytest.raises(ValueError, match="avg_pool: padding"):
        _fwd("avg_pool", _r(1, 2, 6), kernel_size=(2,), padding=(2,))
    with pytest.raises(ValueError, match="kernel_size must be >= 1"):
        _fwd("max_pool2d", _r(2, 5, 5), kernel_size=(0, 2))


def test_window_larger_than_padded_input_is_an_error():
    """A window with no valid position raised in PyTorch but returned an empty tensor here."""
    with pytest.raises(ValueError, match=r"conv2d: kernel size \(3, 3\) is larger than the padded "
                                         r"input: axis 0 has 2 \+ 2\*0 = 2 < 3"):
        _fwd("conv2d", _r(2, 1, 3, 3), _r(2), _r(1, 2, 4))
    with pytest.raises(ValueError, match="conv: kernel size"):
        _fwd("conv", _r(2, 1, 5), _r(2), _r(1, 1, 4))
    for op, kw in (("max_pool2d", {}), ("avg_pool2d", {}), ("smooth_max_pool2d", {"beta": 1.0})):
        with pytest.raises(ValueError, match=op + ": pooling window size"):
            _fwd(op, _r(1, 2, 5), kernel_size=3, **kw)
    # the padded input is exactly the window: one output position
    _, _, _, y = _fwd("conv2d", _r(2, 1, 3, 3), _r(2), _r(1, 1, 1), padding=1)
    assert y.shape == (2, 1, 1)


def test_transpose_conv_saturates_to_empty():
    _, _, _, y = _fwd("conv_transpose2d", _r(1, 2, 2, 2), _r(2), _r(1, 1, 1), padding=3)
    assert y.shape == (2, 0, 0)


def test_stride_larger_than_kernel():
    x, w, b = _r(2, 9, 8), _r(3, 2, 2, 2), _r(3)
    _, _, _, y = _fwd("conv2d", w, b, x, stride=4)
    np.testing.assert_allclose(y, R.conv(w, b, x, stride=4), rtol=1e-5, atol=1e-6)
    _, _, _, y = _fwd("max_pool2d", x, kernel_size=2, stride=3)
    np.testing.assert_array_equal(y, R.max_pool2d(x, 2, 3))


@pytest.mark.parametrize("op,args,attrs", [
    ("conv2d", [(2, 1, 3, 3), (2,), (1, 5, 5)], {"stride": 0}),
    ("conv", [(2, 1, 3), (2,), (1, 5)], {"stride": (0,)}),
    ("conv_transpose2d", [(1, 2, 3, 3), (2,), (1, 5, 5)], {"stride": (1, 0)}),
    ("max_pool2d", [(1, 5, 5)], {"kernel_size": 2, "stride": 0}),
    ("avg_pool", [(1, 5)], {"kernel_size": (2,), "stride": 0}),
    ("smooth_max_pool2d", [(1, 5, 5)], {"kernel_size": 2, "beta": 1.0, "stride": 0}),
])
def test_zero_stride_rejected(op, args, attrs):
    t = tl.Tape()
    ids = [t.leaf(_r(*s)) for s in args]
    with pytest.raises(ValueError, match=rf"{op}.*stride"):
        getattr(t, op)(*ids, **attrs)


@pytest.mark.parametrize("op,shapes,what", [
    ("conv2d", [(2, 1, 3, 3), (2,), (5, 5)], "rank"),
    ("conv2d", [(2, 1, 3, 3), (2,), (3, 5, 5)], "channel"),
    ("conv2d", [(2, 1, 3, 3), (3,), (1, 5, 5)], "bias"),
    ("conv", [(2, 1, 3, 3, 3), (2,), (2, 5, 5, 5)], "channel"),
    ("conv_transpose2d", [(1, 2, 3, 3), (1,), (1, 5, 5)], "bias"),
    ("max_pool2d", [(5,)], "rank"),
])
def test_shape_errors_name_op_and_shapes(op, shapes, what):
    t = tl.Tape()
    ids = [t.leaf(_r(*s)) for s in shapes]
    attrs = {"kernel_size": 2} if "pool" in op else {}
    with pytest.raises(ValueError) as e:
        getattr(t, op)(*ids, **attrs)
    msg = str(e.value)
    assert op in msg and what in msg and str(shapes[-1]) in msg


@pytest.mark.parametrize("beta", [0.0, float("inf"), float("nan"), 1e300, 1e-300])
def test_bad_beta_rejected(beta):
    t = tl.Tape()
    x = t.leaf(_r(1, 4, 4))
    with pytest.raises(ValueError, match="smooth_max_pool2d.*beta"):
        t.smooth_max_pool2d(x, kernel_size=2, beta=beta)


@pytest.mark.parametrize("op,wshape,attrs", [
    ("conv2d", (3, 2, 3, 3), {"stride": 2, "padding": 1}),
    ("conv_transpose2d", (2, 3, 3, 3), {"stride": 2, "padding": 1}),
    ("max_pool2d", None, {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("avg_pool2d", None, {"kernel_size": 2}),
    ("smooth_max_pool2d", None, {"kernel_size": 2, "beta": -1.5, "padding": 1}),
])
def test_batch_equals_repeated_single(op, wshape, attrs):
    xb = _r(3, 2, 6, 5)
    params = [_r(*wshape), _r(wshape[1] if "transpose" in op else wshape[0])] if wshape else []
    gb = None
    t, ids, out, yb = _fwd(op, *params, xb, **attrs)
    gb = RNG.uniform(-1, 1, size=yb.shape)
    grads_b = [g.to_numpy() for g in t.backward(out, seed=gb)]
    t.release()
    dparams = [np.zeros_like(p) for p in params]
    for n in range(3):
        t, ids, out, y1 = _fwd(op, *params, xb[n], **attrs)
        np.testing.assert_allclose(yb[n], y1, rtol=1e-5, atol=1e-6)
        g1 = [g.to_numpy() for g in t.backward(out, seed=gb[n])]
        np.testing.assert_allclose(grads_b[len(params)][n], g1[len(params)], rtol=1e-5, atol=1e-6)
        for i in range(len(params)):
            dparams[i] += g1[i]
        t.release()
    for i in range(len(params)):
        np.testing.assert_allclose(grads_b[i], dparams[i], rtol=1e-4, atol=1e-5)


def test_nd_rank1_and_rank3():
    x1, w1, b1 = _r(2, 3, 11), _r(4, 3, 3), _r(4)
    _, _, _, y = _fwd("conv", w1, b1, x1, stride=2, padding=1)
    np.testing.assert_allclose(y, R.conv(w1, b1, x1, 2, 1), rtol=1e-5, atol=1e-5)
    x3, w3, b3 = _r(2, 5, 4, 6), _r(3, 2, 2, 3, 2), _r(3)
    _, _, _, y = _fwd("conv", w3, b3, x3, padding=(1, 0, 1))
    np.testing.assert_allclose(y, R.conv(w3, b3, x3, 1, (1, 0, 1)), rtol=1e-5, atol=1e-5)
    _, _, _, y = _fwd("conv_transpose", _r(2, 3, 2, 2, 2), _r(3), x3, stride=2)
    assert y.shape == (3, 10, 8, 12)
    _, _, _, y = _fwd("max_pool", x3, kernel_size=(2, 2, 3), stride=(1, 2, 1), padding=(1, 0, 1))
    np.testing.assert_array_equal(y, R.max_pool(x3, (2, 2, 3), (1, 2, 1), (1, 0, 1)))
    _, _, _, y = _fwd("avg_pool", x1, kernel_size=(4,), stride=3, padding=(2,))
    np.testing.assert_allclose(y, R.avg_pool(x1, (4,), 3, (2,)), rtol=1e-6, atol=1e-6)


def test_nd_pool_int_kernel_needs_rank():
    t = tl.Tape()
    x = t.leaf(_r(2, 5, 5))
    with pytest.raises(ValueError, match="max_pool.*tuple"):
        t.max_pool(x, kernel_size=2)


def test_max_pool_padding_never_wins_on_negative_inputs():
    x = -1.0 - np.abs(_r(1, 4, 4))
    _, _, _, y = _fwd("max_pool2d", x, kernel_size=3, padding=1)
    assert np.all(y < -1.0)


@pytest.mark.parametrize("op,attrs", [
    ("max_pool2d", {"kernel_size": 3, "stride": 1, "padding": 1}),
    ("avg_pool2d", {"kernel_size": 3, "stride": 1, "padding": 1}),
    ("smooth_max_pool2d", {"kernel_size": 3, "stride": 1, "padding": 1, "beta": 2.0}),
])
def test_deterministic_pool_backward_is_bit_identical(op, attrs):
    tl.set_deterministic(True)
    x = _r(2, 3, 17, 17)
    runs = []
    for _ in range(3):
        t, ids, out, y = _fwd(op, x, **attrs)
        g = np.random.default_rng(1).uniform(-1, 1, size=y.shape)
        runs.append(t.backward(out, seed=g)[ids[0]].to_numpy())
        t.release()
    for r in runs[1:]:
        assert r.tobytes() == runs[0].tobytes()


@pytest.mark.cuda
@pytest.mark.parametrize("op,wshape", [("conv2d", (8, 64, 3, 3)),
                                       ("conv_transpose2d", (8, 64, 3, 3))])
def test_cuda_huge_batch_chunks_match_single_samples(op, wshape):
    """Big enough that the CUDA column buffer (256 MiB) holds fewer samples than the batch, so
    forward and backward run in chunks and the kernel gradient accumulates across them."""
    rng = np.random.default_rng(3)
    cin = wshape[0] if "transpose" in op else wshape[1]
    x = rng.uniform(-1, 1, (30, cin, 64, 64)).astype(np.float32)
    w = rng.uniform(-0.1, 0.1, wshape).astype(np.float32)
    b = rng.uniform(-1, 1, wshape[1] if "transpose" in op else wshape[0]).astype(np.float32)
    t = tl.Tape()
    iw, ib, ix = t.leaf(w), t.leaf(b), t.leaf(x)
    out = getattr(t, op)(iw, ib, ix, padding=1)
    yb = t.value(out).to_numpy()
    g = rng.uniform(-1, 1, yb.shape).astype(np.float32)
    grads = t.backward(out, seed=g, wrt=[iw, ib, ix])
    gw, gb, gx = grads[iw].to_numpy(), grads[ib].to_numpy(), grads[ix].to_numpy()
    t.release()
    sw = np.zeros_like(w, dtype=np.float64)
    for n in (0, 13, 27, 28, 29):  # both sides of the first chunk boundary
        t = tl.Tape()
        iw, ib, ix = t.leaf(w), t.leaf(b), t.leaf(x[n])
        out = getattr(t, op)(iw, ib, ix, padding=1)
        np.testing.assert_allclose(yb[n], t.value(out).to_numpy(), rtol=1e-4, atol=1e-4)
        gr = t.backward(out, seed=g[n], wrt=[iw, ib, ix])
        np.testing.assert_allclose(gx[n], gr[ix].to_numpy(), rtol=1e-4, atol=1e-4)
        t.release()
    for n in range(30):
        t = tl.Tape()
        iw, ib, ix = t.leaf(w), t.leaf(b), t.leaf(x[n])
        out = getattr(t, op)(iw, ib, ix, padding=1)
        sw += t.backward(out, seed=g[n], wrt=[iw])[iw].to_numpy()
        t.release()
    np.testing.assert_allclose(gw, sw, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(gb, g.astype(np.float64).sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-2)
