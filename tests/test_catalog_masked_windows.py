"""torch.masked and torch.signal.windows names of the catalog: masked reductions against float64
NumPy references over the kept elements (forward; gradients by central differences), windows
against NumPy's and closed-form windows, torch as an extra reference, bad input."""
import math

import numpy as np
import pytest

import torchlean as tl
from catalog_check import check, rand, torch

# the NumPy references divide by a fully masked row's zero count on purpose (NaN, as torch)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

A = rand(3, 5)
MASK = np.array([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], bool)
W = np.where(MASK, 1.0, np.nan)          # NaN outside the mask for NumPy's nan-reductions


def _tm(f):
    return (lambda x: f(x, torch.tensor(MASK))) if torch is not None else None


def _kept(a):
    return np.where(MASK, a, np.nan)


def _np_masked_var(a, axis, ddof):
    k = _kept(a)
    n = MASK.sum(axis)
    mu = np.nansum(k, axis) / n
    ss = np.nansum((k - np.expand_dims(mu, axis)) ** 2, axis)
    return ss / np.maximum(n - ddof, 0)


def _np_masked_softmax(a, axis, sign=1.0):
    k = np.where(MASK, sign * a, -np.inf)
    e = np.exp(k - k.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


CASES = {
    "sum": (lambda x: tl.masked.sum(x, 1, mask=MASK), lambda a: np.nansum(_kept(a), 1), [A],
            _tm(lambda x, m: torch.masked.sum(x, 1, mask=m))),
    "sum_all_keepdim": (lambda x: tl.masked.sum(x, (0, 1), keepdim=True, mask=MASK),
                        lambda a: np.nansum(_kept(a), keepdims=True), [A], None),
    "sum_no_mask": (lambda x: tl.masked.sum(x, 0), lambda a: a.sum(0), [A], None),
    "mean": (lambda x: tl.masked.mean(x, 1, mask=MASK), lambda a: np.nansum(_kept(a), 1)
             / MASK.sum(1), [A], _tm(lambda x, m: torch.masked.mean(x, 1, mask=m))),
    "mean_broadcast_mask": (lambda x: tl.masked.mean(x, 0, mask=MASK[2:3] & [1, 0, 1, 0, 1]),
                            lambda a: a.mean(0) * np.array([1, np.nan, 1, np.nan, 1]), [A],
                            None),
    "prod": (lambda x: tl.masked.prod(x, 1, mask=MASK), lambda a: np.nanprod(_kept(a), 1), [A],
             _tm(lambda x, m: torch.masked.prod(x, 1, mask=m))),
    "amax": (lambda x: tl.masked.amax(x, 1, mask=MASK),
             lambda a: np.where(MASK, a, -np.inf).max(1), [A],
             _tm(lambda x, m: torch.masked.amax(x, 1, mask=m))),
    "amin": (lambda x: tl.masked.amin(x, -1, keepdim=True, mask=MASK),
             lambda a: np.where(MASK, a, np.inf).min(-1, keepdims=True), [A], None),
    "var": (lambda x: tl.masked.var(x, 1, mask=MASK), lambda a: _np_masked_var(a, 1, 1), [A],
            _tm(lambda x, m: torch.masked.var(x, 1, mask=m))),
    "std_biased": (lambda x: tl.masked.std(x, 1, unbiased=False, mask=MASK),
                   lambda a: np.sqrt(_np_masked_var(a, 1, 0)), [A], None),
    "norm": (lambda x: tl.masked.norm(x, 3.0, 1, mask=MASK),
             lambda a: (np.abs(np.where(MASK, a, 0)) ** 3).sum(1) ** (1 / 3), [A],
             _tm(lambda x, m: torch.masked.norm(x, 3.0, 1, mask=m))),
    "norm_inf": (lambda x: tl.masked.norm(x, math.inf, 0, mask=MASK),
                 lambda a: np.abs(np.where(MASK, a, 0)).max(0), [A], None),
    "normalize": (lambda x: tl.masked.normalize(x, 2.0, 1, mask=MASK),
                  lambda a: np.where(MASK, a, 0) / np.maximum(np.sqrt(
                      (np.where(MASK, a, 0) ** 2).sum(1, keepdims=True)), 1e-12), [A], None),
    "softmax": (lambda x: tl.masked.softmax(x, 1, mask=MASK),
                lambda a: _np_masked_softmax(a, 1), [A],
                _tm(lambda x, m: torch.masked.softmax(x, 1, mask=m))),
    "log_softmax": (lambda x: tl.masked.log_softmax(x, 0, mask=MASK),
                    lambda a: np.log(_np_masked_softmax(a, 0)), [A], None),
    "softmin": (lambda x: tl.masked.softmin(x, 1, mask=MASK),
                lambda a: _np_masked_softmax(a, 1, -1.0), [A], None),
    "logsumexp": (lambda x: tl.masked.logsumexp(x, 1, mask=MASK),
                  lambda a: np.log(np.where(MASK, np.exp(a), 0).sum(1)), [A],
                  _tm(lambda x, m: torch.masked.logsumexp(x, 1, mask=m))),
    "logaddexp": (lambda x, y: tl.masked.logaddexp(x, y, input_mask=MASK, other_mask=~MASK),
                  lambda a, b: np.log(np.where(MASK, np.exp(a), 0) + np.where(~MASK, np.exp(b), 0)),
                  [A, A[::-1] * 2], None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_masked_forward_and_gradient(name):
    tl_fn, np_fn, arrays, torch_fn = CASES[name]
    # a fully masked row has no gradient path and a NaN / inf value: gradients on the rest
    check(tl_fn, np_fn, *arrays, torch_fn=torch_fn)


def test_masked_out_nan_and_inf_reach_neither_value_nor_gradient():
    a = np.array([[1.0, np.nan, 2.0], [np.inf, 3.0, -1.0]], np.float32)
    m = np.isfinite(a)
    x = tl.tensor(a, requires_grad=True)
    y = tl.masked.var(x, 1, mask=m) + tl.masked.mean(x, 1, mask=m) + tl.masked.sum(x, 1, mask=m)
    np.testing.assert_allclose(y.numpy(), [0.5 + 1.5 + 3, 8 + 1 + 2], rtol=1e-6)
    y.sum().backward()
    assert np.isfinite(x.grad).all() and x.grad[0, 1] == 0 and x.grad[1, 0] == 0


def test_masked_argmax_argmin():
    x = tl.tensor(A)
    np.testing.assert_array_equal(tl.masked.argmax(x, 1, mask=MASK).numpy()[[0, 2]],
                                  np.where(MASK, A, -np.inf).argmax(1)[[0, 2]])
    np.testing.assert_array_equal(tl.masked.argmin(x, 1, mask=MASK).numpy()[[0, 2]],
                                  np.where(MASK, A, np.inf).argmin(1)[[0, 2]])


def _periodic(f, m):
    return f(m + 1)[:m] if m > 1 else np.ones(m)


def _cos_sum(n, coeffs):
    k = np.arange(n)
    return sum((-1) ** j * c * np.cos(2 * np.pi * j * k / (n - 1)) for j, c in enumerate(coeffs))


WINDOWS = {
    "hann": (lambda m: np.hanning(m), {}),
    "hamming": (lambda m: np.hamming(m), {}),
    "blackman": (lambda m: np.blackman(m), {}),
    "bartlett": (lambda m: np.bartlett(m), {}),
    "kaiser": (lambda m: np.kaiser(m, 12.0), {}),
    "kaiser_beta": (lambda m: np.kaiser(m, 3.5), {"beta": 3.5}),
    "nuttall": (lambda m: _cos_sum(m, [0.3635819, 0.4891775, 0.1365995, 0.0106411]), {}),
    "general_cosine": (lambda m: _cos_sum(m, [0.5, 0.3, 0.2]), {"a": [0.5, 0.3, 0.2]}),
    "general_hamming": (lambda m: _cos_sum(m, [0.6, 0.4]), {"alpha": 0.6}),
    "cosine": (lambda m: np.sin(np.pi * (np.arange(m) + 0.5) / m), {}),
    "gaussian": (lambda m: np.exp(-0.5 * ((np.arange(m) - (m - 1) / 2) / 1.7) ** 2), {"std": 1.7}),
    "exponential": (lambda m: np.exp(-np.abs(np.arange(m) - (m - 1) / 2) / 2.5), {"tau": 2.5}),
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
@pytest.mark.parametrize("m", [0, 1, 2, 7, 12])
@pytest.mark.parametrize("sym", [True, False])
def test_windows(name, m, sym):
    ref, kw = WINDOWS[name]
    fn = getattr(tl.signal.windows, name.split("_beta")[0])
    got = fn(m, sym=sym, **kw).numpy()
    want = (ref(m) if m > 1 else np.ones(m)) if sym else _periodic(ref, m)
    if name == "exponential" and not sym and m > 1:       # periodic center M / 2, as torch
        want = np.exp(-np.abs(np.arange(m) - m / 2) / 2.5)
    assert got.dtype == np.float32 and got.shape == (m,)
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-7)
    if torch is not None:
        t = getattr(torch.signal.windows, name.split("_beta")[0])(m, sym=sym, **kw).numpy()
        np.testing.assert_allclose(got, t, rtol=1e-5, atol=1e-6)


BAD = [
    (lambda: tl.masked.sum(tl.zeros(2, 3), 1, mask=np.ones((3, 3), bool)), RuntimeError,
     "masked.sum"),
    (lambda: tl.masked.mean(tl.zeros(2, 3), 2), IndexError, "masked.mean"),
    (lambda: tl.masked.var(tl.zeros(2), unbiased=True, correction=1), ValueError, "masked.var"),
    (lambda: tl.masked.amax([1.0], 0), TypeError, "masked.amax"),
    (lambda: tl.masked.norm(tl.zeros(2), "fro"), ValueError, "masked.norm"),
    (lambda: tl.masked.logaddexp(tl.zeros(2), tl.zeros(3)), RuntimeError, "masked.logaddexp"),
    (lambda: tl.signal.windows.hann(-1), ValueError, "hann"),
    (lambda: tl.signal.windows.hann(2.5), TypeError, "hann"),
    (lambda: tl.signal.windows.gaussian(4, std=0.0), ValueError, "gaussian"),
    (lambda: tl.signal.windows.exponential(4, center=1.0), ValueError, "exponential"),
    (lambda: tl.signal.windows.kaiser(4, beta=-1.0), ValueError, "kaiser"),
    (lambda: tl.signal.windows.general_cosine(4, a=[]), ValueError, "general_cosine"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind, name = BAD[i]
    with pytest.raises(kind, match=name):
        fn()
