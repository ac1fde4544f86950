"""rfft / irfft / spectral_conv1d_rfft: closed forms, round trips, a float64 np.fft reference,
finite-difference VJPs (including even-grid Nyquist and batched weights), argument errors."""
from __future__ import annotations

import numpy as np
import pytest

import reference
import torchlean as tl
from harness import finite_diff_vjp


def _fwd(op, *xs, **attrs):
    t = tl.Tape()
    ids = [t.leaf(np.asarray(x, dtype=np.float64)) for x in xs]
    out = getattr(t, op)(*ids, **attrs)
    return t, ids, out


def _value(op, *xs, **attrs):
    t, _, out = _fwd(op, *xs, **attrs)
    v = t.value(out).to_numpy(np.float64)
    t.release()
    return v


def _check_vjp(op, ref, xs, attrs, rtol=1e-4, atol=1e-4, seed=0):
    rng = np.random.default_rng(seed)
    xs = [np.asarray(x, dtype=np.float32).astype(np.float64) for x in xs]
    f = lambda *a: np.asarray(ref(*a, **attrs))  # noqa: E731
    g = rng.uniform(-1, 1, size=f(*xs).shape).astype(np.float32).astype(np.float64)
    t, ids, out = _fwd(op, *xs, **attrs)
    grads = t.backward(out, seed=g)
    for k in range(len(xs)):
        coords, est = finite_diff_vjp(f, xs, g, k, max_coords=64, rng=rng)
        got = grads[ids[k]].to_numpy(np.float64).reshape(-1)[coords]
        np.testing.assert_allclose(got, est, rtol=rtol, atol=atol, err_msg=f"{op} d/d input {k}")
    t.release()


# ------------------------------------------------------------------ rfft / irfft
def test_rfft_of_impulse_is_flat():
    y = _value("rfft", [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(y, [[1, 0], [1, 0], [1, 0]])


def test_rfft_closed_form():
    y = _value("rfft", [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(y, [[10, 0], [-2, 2], [-2, 0]], atol=1e-6)


def test_rfft_shapes_odd_and_batched():
    assert _value("rfft", np.ones(5)).shape == (3, 2)
    assert _value("rfft", np.ones((2, 3, 7))).shape == (2, 3, 4, 2)
    np.testing.assert_allclose(_value("rfft", [3.5]), [[3.5, 0]])


@pytest.mark.parametrize("n", [8, 5, 1, 2, 16, 33])
def test_round_trip(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32).astype(np.float64)
    spec = _value("rfft", x)
    back = _value("irfft", spec, n=n)
    np.testing.assert_allclose(back, x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(spec, reference.rfft(x), rtol=1e-5, atol=1e-5)


def test_irfft_ignores_edge_imaginary_parts():
    rng = np.random.default_rng(1)
    spec = rng.standard_normal((5, 2))
    clean = spec.copy()
    clean[0, 1] = 0.0
    clean[4, 1] = 0.0                      # Nyquist of n = 8
    np.testing.assert_allclose(_value("irfft", spec, n=8), _value("irfft", clean, n=8), atol=0)
    # odd n has no Nyquist bin: the last imaginary part counts
    spec5 = rng.standard_normal((3, 2))
    np.testing.assert_allclose(_value("irfft", spec5, n=5), reference.irfft(spec5, 5),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [8, 5, 1, 2])
def test_rfft_irfft_vjps(n):
    rng = np.random.default_rng(10 + n)
    _check_vjp("rfft", reference.rfft, [rng.standard_normal((2, n))], {})
    _check_vjp("irfft", reference.irfft, [rng.standard_normal((2, n // 2 + 1, 2))], {"n": n})


def test_fft_argument_errors():
    with pytest.raises(ValueError, match=r"irfft.*\(\.\.\., 5, 2\)"):
        _value("irfft", np.ones((4, 2)), n=8)
    with pytest.raises(ValueError, match="irfft"):
        _value("irfft", np.ones((1, 2)), n=0)
    with pytest.raises(TypeError, match="irfft"):
        _value("irfft", np.ones((1, 2)), n=1.5)
    with pytest.raises(ValueError, match="rfft"):
        _value("rfft", np.ones(0))
    with pytest.raises(ValueError, match="rfft"):
        _value("rfft", np.ones(()))


# ------------------------------------------------------------------ spectral convolution
def _conv_inputs(rng, shape_x, modes):
    width = shape_x[-1]
    x = rng.standard_normal(shape_x)
    w_re = rng.standard_normal((modes, width, width)) / width
    w_im = rng.standard_normal((modes, width, width)) / width
    return [a.astype(np.float32).astype(np.float64) for a in (x, w_re, w_im)]


@pytest.mark.parametrize("shape_x,modes", [((16, 4), 5), ((16, 4), 9), ((15, 3), 8), ((4, 5, 6), 3),
                                           ((2, 32, 8), 17), ((1, 1), 1)])
def test_spectral_conv_matches_numpy_fft(shape_x, modes):
    rng = np.random.default_rng(sum(shape_x) + modes)
    xs = _conv_inputs(rng, shape_x, modes)
    got = _value("spectral_conv1d_rfft", *xs)
    want = reference.spectral_conv1d_rfft(*xs)
    assert got.shape == shape_x
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("shape_x,modes", [((8, 2), 5), ((7, 2), 4), ((3, 6, 2), 4), ((2, 5, 3), 1)])
def test_spectral_conv_vjp(shape_x, modes):
    rng = np.random.default_rng(100 + modes)
    _check_vjp("spectral_conv1d_rfft", reference.spectral_conv1d_rfft,
               _conv_inputs(rng, shape_x, modes), {})


def test_spectral_conv_batch_equals_single():
    rng = np.random.default_rng(7)
    xs = _conv_inputs(rng, (3, 12, 4), 5)
    batched = _value("spectral_conv1d_rfft", *xs)
    for i in range(3):
        single = _value("spectral_conv1d_rfft", xs[0][i], xs[1], xs[2])
        np.testing.assert_array_equal(batched[i], single)
    # the weight gradient of the batch is the sum of the per-sample gradients
    g = rng.standard_normal(xs[0].shape)
    t, ids, out = _fwd("spectral_conv1d_rfft", *xs)
    gb = t.backward(out, seed=g)
    total = 0.0
    for i in range(3):
        ts, ids_s, out_s = _fwd("spectral_conv1d_rfft", xs[0][i], xs[1], xs[2])
        gs = ts.backward(out_s, seed=g[i])
        np.testing.assert_allclose(gb[ids[0]].to_numpy()[i], gs[ids_s[0]].to_numpy(), rtol=1e-6, atol=1e-6)
        total = total + gs[ids_s[1]].to_numpy(np.float64)
        ts.release()
    np.testing.assert_allclose(gb[ids[1]].to_numpy(), total, rtol=1e-5, atol=1e-5)
    t.release()


def test_spectral_conv_deterministic():
    rng = np.random.default_rng(8)
    xs = _conv_inputs(rng, (2, 16, 4), 6)
    g = rng.standard_normal(xs[0].shape)
    runs = []
    for _ in range(2):
        t, ids, out = _fwd("spectral_conv1d_rfft", *xs)
        grads = t.backward(out, seed=g)
        runs.append([t.value(out).to_numpy()] + [grads[i].to_numpy() for i in ids])
        t.release()
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_spectral_conv_rejects_too_many_modes():
    x = np.ones((8, 2))
    w = np.ones((6, 2, 2))                 # grid // 2 + 1 = 5
    with pytest.raises(ValueError, match=r"spectral_conv1d_rfft.*modes.*5.*got 6"):
        _value("spectral_conv1d_rfft", x, w, w)
    with pytest.raises(ValueError, match="spectral_conv1d_rfft"):
        _value("spectral_conv1d_rfft", np.ones((7, 2)), np.ones((5, 2, 2)), np.ones((5, 2, 2)))


def test_spectral_conv_shape_errors():
    w = np.ones((2, 3, 3))
    with pytest.raises(ValueError, match=r"spectral_conv1d_rfft.*\(modes, 2, 2\)"):
        _value("spectral_conv1d_rfft", np.ones((8, 2)), w, w)
    with pytest.raises(ValueError, match="spectral_conv1d_rfft.*w_im"):
        _value("spectral_conv1d_rfft", np.ones((8, 3)), w, np.ones((3, 3, 3)))
    with pytest.raises(ValueError, match="spectral_conv1d_rfft"):
        _value("spectral_conv1d_rfft", np.ones(8), w, w)
    with pytest.raises(ValueError, match="spectral_conv1d_rfft"):
        _value("spectral_conv1d_rfft", np.ones((0, 3)), w, w)
    with pytest.raises(ValueError, match="spectral_conv1d_rfft"):
        _value("spectral_conv1d_rfft", np.ones((8, 3)), np.ones((0, 3, 3)), np.ones((0, 3, 3)))
