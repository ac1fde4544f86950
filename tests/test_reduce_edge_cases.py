"""Reductions, softmax, GroupNorm and indexing at their edges, as torch and NumPy (float64).

PyTorch's OpInfo samples found these: reductions over dim 0/-1 of a 0-d tensor return the value
(var of one element: nan with a warning when unbiased), logsumexp over an empty dim is -inf,
GroupNorm takes an empty batch, x[np.array(i)] drops the axis as NumPy does; and an error names
the public op the user called, never an internal one.
"""
import warnings

import numpy as np
import pytest

import torchlean as tl


@pytest.fixture
def s():
    sess = tl.Session()
    yield sess
    sess.step()


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "logsumexp"])
@pytest.mark.parametrize("dim", [0, -1, (0,), (-1,)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_of_a_0d_tensor_return_its_value_and_gradient_one(s, name, dim, keepdim):
    x = s.tensor(np.float32(-1.75), requires_grad=True)
    y = getattr(x, name)(dim, keepdim=keepdim)
    assert y.shape == ()
    assert y.item() == -1.75
    (y * 3.0).backward()
    assert x.grad.shape == () and float(x.grad) == pytest.approx(3.0, rel=1e-6)


@pytest.mark.parametrize("name", ["var", "std"])
def test_variance_of_one_element(s, name):
    """torch: unbiased (the default) divides by N - 1 = 0: nan, with a warning naming the op;
    the biased variance of one element is 0."""
    x = s.tensor(np.float32(2.5), requires_grad=True)
    with pytest.warns(RuntimeWarning, match=rf"{name}: degrees of freedom <= 0"):
        y = getattr(x, name)(0)
    assert y.shape == () and np.isnan(y.item())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(x, name)(-1, unbiased=False).item() == 0.0
        z = s.tensor(np.array([[1.0, 4.0, 6.0]]))
        np.testing.assert_allclose(getattr(z, name)(1, correction=0).numpy(),
                                   getattr(np, name)(np.array([[1.0, 4.0, 6.0]]), axis=1),
                                   rtol=1e-6)
    # more correction than elements: ss / 0 is inf (nan only when ss = 0), as torch
    with pytest.warns(RuntimeWarning):
        v = s.tensor(np.array([1.0, 3.0])).var(correction=3)
    assert v.item() == np.inf


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "logsumexp", "var", "std"])
def test_a_bad_dim_names_the_public_op(s, name):
    x = s.tensor(np.float32(1.0))
    with pytest.raises(IndexError, match=rf"^{name}: dim 1 is out of range for a tensor of rank 0"):
        getattr(x, name)(1)
    m = s.tensor(np.ones((2, 3)))
    with pytest.raises(IndexError, match=rf"^{name}: dim -3 is out of range .* rank 2"):
        getattr(m, name)(-3)
    with pytest.raises(ValueError, match=rf"^{name}: dim \(0, -2\) names an axis twice"):
        getattr(m, name)((0, -2))


def test_logsumexp_over_an_empty_dim_is_minus_inf(s):
    a = np.zeros((3, 0, 2))
    x = s.tensor(a, requires_grad=True)
    with np.errstate(divide="ignore"):
        ref = np.log(np.exp(a).sum(axis=1))          # float64 NumPy: -inf
    y = x.logsumexp(1)
    np.testing.assert_array_equal(y.numpy(), ref)
    assert x.logsumexp(1, keepdim=True).shape == (3, 1, 2)
    assert x.logsumexp((0, 1)).shape == (2,)
    assert s.tensor(np.zeros(0)).logsumexp(0).item() == -np.inf
    y.sum().backward()                               # nothing flows, nothing breaks
    assert x.grad.shape == (3, 0, 2)


def test_logsumexp_still_matches_float64_off_the_edges(s):
    a = np.random.default_rng(1).normal(size=(4, 5)) * 3
    x = s.tensor(a, requires_grad=True)
    a = a.astype(np.float32).astype(np.float64)
    ref = np.log(np.exp(a).sum(axis=-1))
    np.testing.assert_allclose(x.logsumexp(-1).numpy(), ref, rtol=1e-6)
    x.logsumexp(-1).sum().backward()
    np.testing.assert_allclose(x.grad, np.exp(a - ref[:, None]), rtol=1e-5, atol=1e-7)


def test_groupnorm_on_an_empty_batch(s):
    gn = tl.nn.GroupNorm(2, 4)
    x = s.tensor(np.zeros((0, 4, 3)), requires_grad=True)
    y = gn(x)
    assert y.shape == (0, 4, 3)
    y.sum().backward()
    assert x.grad.shape == (0, 4, 3)
    np.testing.assert_array_equal(gn.weight.grad, np.zeros(4))
    np.testing.assert_array_equal(gn.bias.grad, np.zeros(4))


def test_groupnorm_matches_float64(s):
    rng = np.random.default_rng(2)
    a = rng.normal(size=(3, 6, 5))
    gn = tl.nn.GroupNorm(3, 6)
    w, b = rng.normal(size=6), rng.normal(size=6)
    gn.weight.set(w)
    gn.bias.set(b)
    a32 = a.astype(np.float32).astype(np.float64)
    g = a32.reshape(3, 3, 10)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(3, 6, 5)
    ref = ref * w.astype(np.float32)[:, None] + b.astype(np.float32)[:, None]
    np.testing.assert_allclose(gn(s.tensor(a)).numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(4,), (3, 2), (2, 3, 2)])
@pytest.mark.parametrize("i", [0, 1, -1])
def test_a_0d_index_array_drops_the_axis_as_numpy(s, shape, i):
    a = np.arange(float(np.prod(shape))).reshape(shape) + 0.5
    x = s.tensor(a, requires_grad=True)
    y = x[np.array(i)]
    assert y.shape == a[np.array(i)].shape
    np.testing.assert_array_equal(y.numpy(), a[np.array(i)])
    (y * 2.0).sum().backward()
    want = np.zeros(shape)
    want[i] = 2.0
    np.testing.assert_array_equal(x.grad, want)


@pytest.mark.parametrize("view", [
    lambda x: x.reshape(2, 3), lambda x: x.flatten(1), lambda x: x.permute(0, 1),
    lambda x: x.transpose(1, 1), lambda x: x.expand(2, 3), lambda x: x[0:2], lambda x: x.sum(()),
    lambda x: tl.cat([x]), lambda x: x.squeeze()])
def test_an_identity_view_under_no_grad_carries_no_gradient(s, view):
    """torch returns a new view that needs no gradient, so a loss built from it reaches x only
    through the other term."""
    x = s.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    with tl.no_grad():
        v = view(x)
    assert not v.requires_grad
    np.testing.assert_array_equal(v.numpy(), np.arange(6.0).reshape(2, 3))
    ((v * x).sum() + x.sum()).backward()
    np.testing.assert_array_equal(x.grad, np.arange(6.0).reshape(2, 3) + 1.0)
