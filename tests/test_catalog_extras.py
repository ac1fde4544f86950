"""Arithmetic spellings, native norms, fft shifts, as_strided, sampling and max_unpool of the
catalog against float64 NumPy references written here (forward; gradients by central
differences), torch as an extra reference, and bad input naming the op."""
import math

import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.functional as F
from catalog_check import check, rand, torch

A = rand(3, 4, 5)
M = rand(4, 6, seed=1)
X4 = rand(2, 6, 3, 4, seed=2)


def _np_norm(a, axes, eps):
    mu = a.mean(axes, keepdims=True)
    rstd = 1 / np.sqrt(a.var(axes, keepdims=True) + eps)
    return (a - mu) * rstd, mu, rstd


def _np_as_strided(a, size, stride, offset):
    flat = a.reshape(-1)
    idx = np.full(size, offset)
    for k, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = n
        idx = idx + (np.arange(n) * s).reshape(shape)
    return flat[idx]


def _np_unpool2d(y, idx, out_hw):
    n, c = y.shape[:2]
    out = np.zeros((n, c, out_hw[0] * out_hw[1]))
    for a in range(n):
        for b in range(c):
            out[a, b, idx[a, b].reshape(-1)] = y[a, b].reshape(-1)
    return out.reshape(n, c, *out_hw)


UNPOOL_IDX = np.array([[[[0, 3], [9, 6]]]])           # per-plane flat positions in a 4 x 4 plane

CASES = {
    "floor_divide": (lambda x, y: tl.floor_divide(x, y), lambda a, b: np.floor(a / b),
                     [M * 5, np.array([0.7, -1.3, 2.0, 3.1, -0.9, 1.0], np.float32)], None,
                     {"grad": False}),
    "angle": (lambda x: x.angle(), lambda a: np.where(a < 0, np.pi, 0.0), [M], None,
              {"grad": False}),
    "constant_pad_nd": (lambda x: tl.constant_pad_nd(x, (1, 2, -1, 0), 3.5),
                        lambda a: np.pad(a[:, 1:], ((0, 0), (0, 0), (1, 2)),
                                         constant_values=3.5), [A], None),
    "native_layer_norm": (lambda x, w, b: tl.native_layer_norm(x, (4, 5), w, b, 1e-5),
                          lambda a, w, b: (lambda y, m, r: (y * w + b, m, r))(
                              *_np_norm(a, (1, 2), 1e-5)),
                          [A, rand(4, 5, seed=3), rand(4, 5, seed=4)],
                          lambda x, w, b: torch.native_layer_norm(x, (4, 5), w, b, 1e-5)),
    "native_batch_norm": (lambda x: tl.native_batch_norm(x, None, None, None, None, True, 0.1,
                                                         1e-5),
                          lambda a: (lambda y, m, r: (y, m.reshape(-1), r.reshape(-1)))(
                              *_np_norm(a, (0, 2, 3), 1e-5)), [X4], None),
    "native_group_norm": (lambda x, w: tl.native_group_norm(x, w, None, 2, 6, 12, 3, 1e-5),
                          lambda a, w: (lambda y, m, r: (y.reshape(a.shape) * w[:, None, None],
                                                         m.reshape(2, 3), r.reshape(2, 3)))(
                              *_np_norm(a.reshape(2, 3, -1), (2,), 1e-5)),
                          [X4, rand(6, seed=5)], None),
    "fft.fftshift": (lambda x: tl.fft.fftshift(x), np.fft.fftshift, [A],
                     lambda x: torch.fft.fftshift(x)),
    "fft.ifftshift_dim": (lambda x: tl.fft.ifftshift(x, dim=(0, -1)),
                          lambda a: np.fft.ifftshift(a, axes=(0, -1)), [A],
                          lambda x: torch.fft.ifftshift(x, dim=(0, -1))),
    "as_strided": (lambda x: x.as_strided((3, 3), (2, 1), 1),
                   lambda a: _np_as_strided(a, (3, 3), (2, 1), 1), [M],
                   lambda x: x.as_strided((3, 3), (2, 1), 1)),
    "as_strided_copy": (lambda x: tl.as_strided_copy(x, (2, 2, 2), (12, 1, 5)),
                        lambda a: _np_as_strided(a, (2, 2, 2), (12, 1, 5), 0), [A], None),
    "as_strided_scatter": (lambda x, s: tl.as_strided_scatter(x, s, (2, 3), (6, 2), 1),
                           lambda a, s: (lambda o: (o.reshape(-1).__setitem__(
                               _np_as_strided(np.arange(24), (2, 3), (6, 2), 1), s), o)[1])(
                               a.copy()), [M, rand(2, 3, seed=6)], None),
    "max_unpool2d": (lambda y: F.max_unpool2d(y, UNPOOL_IDX, 2),
                     lambda y: _np_unpool2d(y, UNPOOL_IDX, (4, 4)), [rand(1, 1, 2, 2)], None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient(name):
    tl_fn, np_fn, arrays, torch_fn, *opts = CASES[name]
    check(tl_fn, np_fn, *arrays, torch_fn=torch_fn if torch is not None else None,
          **(opts[0] if opts else {}))


def test_max_unpool_inverts_max_pool_indices():
    x = rand(2, 3, 6, 4, seed=7)
    y, idx = F.max_pool2d(tl.tensor(x), 2, return_indices=True)
    up = F.max_unpool2d(y, idx, 2).numpy()
    ref = np.zeros_like(x).reshape(2, 3, -1)
    np.put_along_axis(ref, idx.reshape(2, 3, -1), y.numpy().reshape(2, 3, -1), -1)
    np.testing.assert_array_equal(up, ref.reshape(x.shape))
    one = F.max_unpool1d(tl.tensor([[[5.0, 7.0]]]), np.array([[[1, 4]]]), 3, 2,
                         output_size=(6,)).numpy()
    np.testing.assert_array_equal(one, [[[0, 5, 0, 0, 7, 0]]])
    three = F.max_unpool3d(tl.tensor([[[[[2.0]]]]]), np.array([[[[[7]]]]]), 2).numpy()
    assert three.shape == (1, 1, 2, 2, 2) and three.reshape(-1)[7] == 2 and three.sum() == 2


def test_native_batch_norm_eval_gives_empty_statistics():
    x = tl.tensor(X4)
    out, m, r = tl.native_batch_norm(x, None, None, tl.zeros(6), tl.ones(6), False, 0.1, 0.0)
    np.testing.assert_allclose(out.numpy(), X4, rtol=1e-6)
    assert m.shape == (0,) and r.shape == (0,)


def test_bernoulli_and_normal_statistics():
    tl.manual_seed(3)
    p = np.linspace(0, 1, 11, dtype=np.float32)
    draws = np.stack([tl.bernoulli(tl.tensor(p)).numpy() for _ in range(400)])
    assert set(np.unique(draws)) <= {0.0, 1.0}
    np.testing.assert_allclose(draws.mean(0), p, atol=0.08)
    assert draws[:, 0].max() == 0 and draws[:, -1].min() == 1
    half = tl.tensor(np.zeros(20000, np.float32)).bernoulli(0.25).numpy()
    assert abs(half.mean() - 0.25) < 0.02
    z = tl.normal(tl.full((20000,), 2.0), 3.0).numpy()
    assert abs(z.mean() - 2) < 0.1 and abs(z.std() - 3) < 0.1
    assert tl.normal(0.0, 1.0, (3, 2)).shape == (3, 2)
    mean = tl.tensor(np.zeros(4, np.float32), requires_grad=True)
    std = tl.tensor(np.ones(4, np.float32), requires_grad=True)
    sample = tl.normal(mean, std)
    sample.sum().backward()
    np.testing.assert_array_equal(mean.grad, np.ones(4))
    np.testing.assert_allclose(std.grad, sample.numpy(), rtol=1e-6)   # d(m + s z)/ds = z


def test_reflected_modulo_uses_remainder():
    x = tl.tensor(np.array([3.0, -2.5], np.float32))
    if hasattr(tl.Tensor, "remainder"):
        np.testing.assert_allclose((7.0 % x).numpy(), np.remainder(7.0, [3.0, -2.5]))
    else:                       # the pointwise-math family brings Tensor.remainder
        with pytest.raises(AttributeError, match="remainder"):
            x.__rmod__(7.0)


def test_zero_writes_through_copy():
    if not hasattr(tl.Tensor, "copy_"):
        pytest.skip("zero_ writes through Tensor.copy_ (the mutation model), not in this tree")
    y = tl.tensor(np.ones(3, np.float32))
    assert y.zero_() is y and y.numpy().tolist() == [0.0, 0.0, 0.0]


BAD = [
    (lambda: tl.floor_divide(tl.zeros(2), tl.zeros(3)), RuntimeError, "floor_divide"),
    (lambda: tl.angle([1.0]), TypeError, "angle"),
    (lambda: tl.native_layer_norm(tl.zeros(2, 3), (2,), None, None, 1e-5), RuntimeError,
     "native_layer_norm"),
    (lambda: tl.native_batch_norm(tl.zeros(3), None, None, None, None, True, 0.1, 1e-5),
     RuntimeError, "native_batch_norm"),
    (lambda: tl.native_group_norm(tl.zeros(2, 6), None, None, 2, 6, 1, 4, 1e-5), RuntimeError,
     "native_group_norm"),
    (lambda: tl.fft.fftshift(tl.zeros(2), dim=1), IndexError, "fft.fftshift"),
    (lambda: tl.as_strided(tl.zeros(4), (3,), (2,)), RuntimeError, "as_strided"),
    (lambda: tl.as_strided(tl.zeros(4), (3, 1), (1,)), RuntimeError, "as_strided"),
    (lambda: tl.as_strided_scatter(tl.zeros(4), tl.zeros(3), (2,), (1,)), RuntimeError,
     "as_strided_scatter"),
    (lambda: tl.bernoulli(tl.tensor([1.5])), RuntimeError, "bernoulli"),
    (lambda: tl.zeros(2).bernoulli(2.0), RuntimeError, "bernoulli"),
    (lambda: tl.normal(0.0, 1.0), TypeError, "normal"),
    (lambda: tl.normal(tl.zeros(2), -1.0), RuntimeError, "normal"),
    (lambda: tl.normal(tl.zeros(2), tl.ones(3)), RuntimeError, "normal"),
    (lambda: F.max_unpool2d(tl.zeros(1, 1, 2, 2), np.zeros((1, 1, 2, 2)), 2), TypeError,
     "max_unpool2d"),
    (lambda: F.max_unpool2d(tl.zeros(1, 1, 1, 1), np.array([[[[16]]]]), 2), IndexError,
     "max_unpool2d"),
    (lambda: F.max_unpool1d(tl.zeros(2), np.zeros(2, np.int64), 2), ValueError, "max_unpool1d"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind, name = BAD[i]
    with pytest.raises(kind, match=name):
        fn()


def test_angle_of_infinities():
    np.testing.assert_allclose(tl.angle(tl.tensor([-math.inf, math.inf])).numpy(),
                               [math.pi, 0.0])


def _np_fractional_2d(x, k, out, samples):
    """torch's interval rule (float32) and window maxima, written out per plane."""
    n, ch, h, w = x.shape

    def starts(u, n_in, n_out, pool):
        alpha = np.float32(n_in - pool) / np.float32(n_out - 1)
        seq = [int(np.float32((np.float32(i) + u) * alpha)) - int(np.float32(u * alpha))
               for i in range(n_out - 1)]
        return seq + [n_in - pool]
    y = np.zeros((n, ch) + out)
    for b in range(n):
        for c in range(ch):
            sh = starts(samples[b, c, 1], h, out[0], k[0])
            sw = starts(samples[b, c, 0], w, out[1], k[1])
            for i, a in enumerate(sh):
                for j, bb in enumerate(sw):
                    y[b, c, i, j] = x[b, c, a:a + k[0], bb:bb + k[1]].max()
    return y


SAMPLES = np.random.default_rng(8).random((2, 3, 2)).astype(np.float32)


def test_fractional_max_pool2d():
    x = rand(2, 3, 9, 11, seed=9)
    check(lambda t: F.fractional_max_pool2d(t, (2, 3), output_size=(4, 5),
                                            _random_samples=SAMPLES),
          lambda a: _np_fractional_2d(a, (2, 3), (4, 5), SAMPLES), x,
          torch_fn=(lambda t: torch.nn.functional.fractional_max_pool2d(
              t, (2, 3), output_size=(4, 5), _random_samples=torch.tensor(SAMPLES)))
          if torch is not None else None)
    y, idx = F.fractional_max_pool2d(tl.tensor(x), 2, output_ratio=(0.5, 0.5),
                                     return_indices=True, _random_samples=SAMPLES)
    assert y.shape == (2, 3, 4, 5)
    np.testing.assert_array_equal(y.numpy().reshape(2, 3, -1),
                                  np.take_along_axis(x.reshape(2, 3, -1),
                                                     idx.numpy().reshape(2, 3, -1), -1))
    if torch is not None:
        _, tidx = torch.nn.functional.fractional_max_pool3d(
            torch.tensor(x[:, :, None].repeat(4, 2)), 2, output_size=(2, 4, 5),
            return_indices=True, _random_samples=torch.tensor(np.concatenate(
                [SAMPLES[..., :1], SAMPLES], -1)))
        _, idx3 = F.fractional_max_pool3d(tl.tensor(x[:, :, None].repeat(4, 2)), 2,
                                          output_size=(2, 4, 5), return_indices=True,
                                          _random_samples=np.concatenate(
                                              [SAMPLES[..., :1], SAMPLES], -1))
        np.testing.assert_array_equal(idx3.numpy(), tidx.numpy())
    drawn = F.fractional_max_pool2d(tl.tensor(x[0]), 3, output_size=4)
    assert drawn.shape == (3, 4, 4)
    for bad, kind in ((lambda: F.fractional_max_pool2d(tl.tensor(x), 2), ValueError),
                      (lambda: F.fractional_max_pool2d(tl.tensor(x), 5, output_size=8),
                       RuntimeError),
                      (lambda: F.fractional_max_pool3d(tl.tensor(x), 2, output_size=2),
                       RuntimeError)):
        with pytest.raises(kind, match="fractional_max_pool"):
            bad()


def test_multinomial_frequencies_and_errors():
    tl.manual_seed(1)
    p = np.array([0.1, 0.0, 0.6, 0.3], np.float32)
    s = tl.multinomial(tl.tensor(p), 20000, replacement=True).numpy()
    assert s.dtype == np.int64 and s.shape == (20000,)
    np.testing.assert_allclose(np.bincount(s, minlength=4) / 20000, p, atol=0.015)
    firsts = np.stack([tl.tensor(p).multinomial(3).numpy() for _ in range(2000)])
    assert (np.sort(firsts, 1) == [0, 2, 3]).all()          # no repeats, never category 1
    np.testing.assert_allclose(np.bincount(firsts[:, 0], minlength=4) / 2000, p, atol=0.03)
    rows = tl.multinomial(tl.tensor(np.eye(3, dtype=np.float32)), 1).numpy()
    assert rows.tolist() == [[0], [1], [2]]
    # torch 2.15 draws zero-weight categories last instead of refusing (test_generator_sampling)
    for bad in (lambda: tl.multinomial(tl.tensor(p), 5),
                lambda: tl.multinomial(tl.tensor([-1.0, 2.0]), 1),
                lambda: tl.multinomial(tl.zeros(2, 2, 2), 1)):
        with pytest.raises(RuntimeError, match="multinomial"):
            bad()
