"""PyTorch-style Tensor methods (indexing, shapes, reductions over dims, joining) against float64
NumPy: forward values, gradients (exact adjoints for linear maps, central finite differences of
the float64 reference for the rest) and bad-input errors."""
import numpy as np
import pytest

import torchlean as tl
from torchlean.session import Session

RNG = np.random.default_rng(13)


def _data(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)


def _grad(f, a, w=None):
    """Gradient of sum(w * f(x)) at a, through torchlean."""
    s = Session()
    x = s.tensor(a, requires_grad=True)
    y = f(x)
    out = y.numpy().astype(np.float64)
    w = np.random.default_rng(7).uniform(-1, 1, size=out.shape) if w is None else w
    (y * s.tensor(w)).sum().backward()
    g = x.grad.numpy()
    s.step()
    return out, g, w


def _fd(fref, a, w, eps=1e-3):
    """Central differences of sum(w * fref(x)) in float64."""
    a = a.astype(np.float64)
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        p, m = a.copy(), a.copy()
        p[i] += eps
        m[i] -= eps
        g[i] = (np.sum(w * fref(p)) - np.sum(w * fref(m))) / (2 * eps)
    return g


def _adjoint(a_shape, key, w):
    """The VJP of x -> x[key] in float64: scatter-add of w into zeros."""
    g = np.zeros(a_shape)
    pos = np.arange(int(np.prod(a_shape))).reshape(a_shape)[key]
    np.add.at(g.reshape(-1), pos.reshape(-1), np.asarray(w).reshape(-1))
    return g


INDEX_KEYS = [
    1, -1, (1, 2), (slice(None), 1), (Ellipsis, 1), (None, 1, slice(1, 3)), slice(1, None),
    slice(None, None, 2), (slice(None), slice(None, None, 2), slice(3, 0, 1)),
    (slice(0, 2), Ellipsis, None), ([1, 0, 1], [2, 0, 2]), np.array([[0], [1]]),
    (0, slice(None), [3, 1]), (slice(None), [True, False, True]), (1, slice(0, 0)),
    (Ellipsis, [0, -1]), (1, 2, 3), (slice(None), None, 2, slice(1, 4, 2)), (),
]


@pytest.mark.parametrize("key", INDEX_KEYS, ids=lambda k: repr(k)[:40])
def test_getitem_matches_numpy_and_adjoint(key):
    a = _data(2, 3, 5)
    out, g, w = _grad(lambda x: x[key], a)
    ref = a.astype(np.float64)[key]
    assert out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_allclose(g, _adjoint(a.shape, key, w), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("key", [slice(None, None, -1), (slice(None), slice(3, 0, -1)),
                                 (slice(None, None, -2), [0, 1])], ids=repr)
def test_getitem_negative_step_raises_as_torch(key):
    x = Session().tensor(_data(2, 3, 5))
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[key]


def test_getitem_boolean_mask_and_mask_tensor():
    a = _data(3, 4, seed=1)
    m = a > 0.3
    out, g, w = _grad(lambda x: x[m], a)
    np.testing.assert_array_equal(out, a[m])
    np.testing.assert_allclose(g, _adjoint(a.shape, m, w), atol=1e-6)
    s = Session()
    x = s.tensor(a)
    np.testing.assert_array_equal(x[x > 0.3].numpy(), a[m])    # a comparison is a mask
    np.testing.assert_array_equal(x[(x > 0.3).reshape(12).reshape(3, 4)].numpy(), a[m])
    mask = s.tensor(m.astype(np.float32))        # any other float Tensor: torch's IndexError
    with pytest.raises(IndexError, match=r"float32 Tensor of shape \(3, 4\)"):
        x[mask]


def test_getitem_duplicate_indices_accumulate():
    a = _data(5, seed=2)
    key = np.array([4, 4, 0, 4])
    out, g, w = _grad(lambda x: x[key], a)
    np.testing.assert_array_equal(out, a[key])
    expect = np.zeros(5)
    expect[4] = w[0] + w[1] + w[3]
    expect[0] = w[2]
    np.testing.assert_allclose(g, expect, atol=1e-6)


def test_getitem_size_one_and_zero_d():
    s = Session()
    x = s.tensor(np.float32(2.5))
    assert x[None].shape == (1,) and x[None].numpy()[0] == np.float32(2.5)
    assert x[...].shape == ()
    y = s.tensor(np.array([[7.0]], np.float32))
    assert y[0, 0].shape == () and y[0, 0].numpy() == np.float32(7.0)
    assert y[:, 0].shape == (1,)


def test_getitem_empty_results():
    a = _data(3, 4, seed=3)
    s = Session()
    x = s.tensor(a, requires_grad=True)
    y = x[np.array([], dtype=np.int64)]
    assert y.shape == (0, 4)
    z = s.tensor(np.zeros((0, 3), np.float32))[:, 1]
    assert z.shape == (0,)
    (x[1:3, 1:2].sum() + y.sum()).backward()
    expect = np.zeros((3, 4))
    expect[1:3, 1] = 1
    np.testing.assert_array_equal(x.grad, expect)


def test_getitem_bad_input():
    s = Session()
    x = s.tensor(_data(2, 3))
    with pytest.raises(IndexError, match=r"shape \(2, 3\)"):
        x[2]
    with pytest.raises(IndexError, match=r"shape \(2, 3\)"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="integers or booleans"):
        x[np.array([0.5])]
    with pytest.raises(IndexError, match="unsupported index"):
        x["a"]
    with pytest.raises(IndexError, match=r"shape \(2, 3\)"):
        x[np.array([True, False, True])]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x[::0]
    assert x[[]].shape == (0, 3)


@pytest.mark.parametrize("shape,dims", [((2, 3), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (1, 2, 0)),
                                        ((2, 3, 4), (0, 2, 1)), ((2, 3, 4, 5), (3, 1, 0, 2)),
                                        ((1, 3, 1), (2, 1, 0)), ((3, 4), (0, 1)),
                                        ((2, 3, 4, 5), (0, 2, 1, 3))])
def test_permute(shape, dims):
    a = _data(*shape, seed=3)
    out, g, w = _grad(lambda x: x.permute(*dims), a)
    np.testing.assert_array_equal(out, a.transpose(dims))
    np.testing.assert_allclose(g, w.transpose(np.argsort(dims)), atol=1e-6)


def test_transpose_T_mT():
    a = _data(2, 3, 4, seed=4)
    s = Session()
    x = s.tensor(a)
    np.testing.assert_array_equal(x.transpose(0, -1).numpy(), np.swapaxes(a, 0, -1))
    np.testing.assert_array_equal(x.transpose(1, 1).numpy(), a)
    np.testing.assert_array_equal(x.T.numpy(), a.T)
    np.testing.assert_array_equal(x.mT.numpy(), np.swapaxes(a, -1, -2))
    v = s.tensor(_data(5))
    np.testing.assert_array_equal(v.T.numpy(), v.numpy())
    with pytest.raises(ValueError, match="mT"):
        v.mT
    with pytest.raises(ValueError, match="permutation"):
        x.permute(0, 0, 1)
    with pytest.raises(ValueError, match="expected 3 dims"):
        x.permute(0, 1)
    with pytest.raises(IndexError, match="dim 3 is out of range"):
        x.transpose(0, 3)


def test_view_reshape_unsqueeze_squeeze_flatten_expand():
    a = _data(2, 1, 3, seed=5)
    s = Session()
    x = s.tensor(a, requires_grad=True)
    assert x.view(3, 2).shape == (3, 2) and x.view(-1).shape == (6,)
    assert x.reshape((1, -1)).shape == (1, 6)
    assert x.unsqueeze(0).shape == (1, 2, 1, 3) and x.unsqueeze(-1).shape == (2, 1, 3, 1)
    assert x.squeeze().shape == (2, 3) and x.squeeze(0).shape == (2, 1, 3)
    assert x.squeeze(1).shape == (2, 3) and x.squeeze((0, 1)).shape == (2, 3)
    assert x.flatten().shape == (6,) and x.flatten(1).shape == (2, 3)
    assert x.flatten(0, 1).shape == (2, 3)
    e = x.expand(4, 2, 5, 3)
    np.testing.assert_array_equal(e.numpy(), np.broadcast_to(a, (4, 2, 5, 3)))
    assert x.expand(-1, 4, -1).shape == (2, 4, 3)
    e.sum().backward()
    np.testing.assert_allclose(x.grad, np.full(a.shape, 20.0))
    with pytest.raises(ValueError, match=r"invalid for input of shape \(2, 1, 3\)"):
        x.view(4, 2)
    with pytest.raises(ValueError, match="expand"):
        x.expand(3, 1, 3)
    with pytest.raises(ValueError, match="flatten"):
        x.flatten(2, 0)


REDUCE_CASES = [(None, False), (0, False), (-1, True), ((0, 2), False), ((2, 0), True),
                (1, False), ((0, 1, 2), True)]


@pytest.mark.parametrize("dim,keepdim", REDUCE_CASES)
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin"])
def test_reductions_over_dims(name, dim, keepdim):
    a = _data(3, 4, 5, seed=6)
    npf = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min}[name]
    ax = tuple(dim) if isinstance(dim, tuple) else dim
    ref = lambda v: npf(v, axis=ax, keepdims=keepdim)
    out, g, w = _grad(lambda x: getattr(x, name)(dim=dim, keepdim=keepdim), a)
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=1e-5, atol=1e-5)
    assert out.shape == np.shape(ref(a))
    np.testing.assert_allclose(g, _fd(ref, a, w), rtol=1e-4, atol=1e-4)


def test_sum_mean_axis_keyword_still_works():
    a = _data(3, 4, seed=8)
    s = Session()
    x = s.tensor(a)
    np.testing.assert_allclose(x.sum(axis=1).numpy(), a.sum(1), rtol=1e-6)
    np.testing.assert_allclose(x.mean(axis=0).numpy(), a.mean(0), rtol=1e-6)


@pytest.mark.parametrize("kw,ddof", [({}, 1), ({"unbiased": False}, 0), ({"correction": 0}, 0),
                                     ({"correction": 2}, 2)])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
def test_var_std(kw, ddof, dim):
    a = _data(3, 5, 4, seed=9)
    ax = tuple(dim) if isinstance(dim, tuple) else dim
    for name, npf in (("var", np.var), ("std", np.std)):
        ref = lambda v: npf(v, axis=ax, ddof=ddof)
        out, g, w = _grad(lambda x: getattr(x, name)(dim=dim, **kw), a)
        np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g, _fd(ref, a, w), rtol=1e-3, atol=1e-4)
    s = Session()
    assert s.tensor(a).var(dim=1, keepdim=True, **kw).shape == (3, 1, 4)
    with pytest.raises(ValueError, match="either unbiased or correction"):
        s.tensor(a).var(unbiased=True, correction=1)


def test_var_of_one_element_is_nan_as_torch():
    s = Session()
    assert np.isnan(s.tensor(np.ones((1, 3), np.float32)).var(dim=0).numpy()).all()


@pytest.mark.parametrize("dim,keepdim", [(-1, False), (0, True), ((0, 1), False)])
def test_logsumexp(dim, keepdim):
    a = _data(4, 3, seed=10) * 20       # large values: the max shift matters
    ax = tuple(dim) if isinstance(dim, tuple) else dim

    def ref(v):
        m = np.max(v, axis=ax, keepdims=True)
        r = np.log(np.sum(np.exp(v - m), axis=ax, keepdims=True)) + m
        return r if keepdim else np.squeeze(r, axis=ax)
    out, g, w = _grad(lambda x: x.logsumexp(dim, keepdim=keepdim), a)
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(g, _fd(ref, a, w), rtol=1e-3, atol=1e-3)


def test_logsumexp_infinities():
    s = Session()
    x = s.tensor(np.array([[-np.inf, -np.inf], [1.0, np.inf], [0.0, -np.inf]], np.float32))
    out = x.logsumexp(1).numpy()
    assert out[0] == -np.inf and out[1] == np.inf and out[2] == pytest.approx(0.0)


def test_reduction_bad_dims():
    s = Session()
    x = s.tensor(_data(2, 3))
    with pytest.raises(IndexError, match=r"sum: dim 2 is out of range .* rank 2"):
        x.sum(dim=2)
    with pytest.raises(ValueError, match="names an axis twice"):
        x.mean(dim=(1, -1))
    with pytest.raises(TypeError, match="amax: dim must be an int"):
        x.amax(dim=1.5)
    with pytest.raises(ValueError, match="empty axis"):
        s.tensor(np.zeros((2, 0), np.float32)).amax(dim=1)


def test_square_rsqrt():
    a = np.abs(_data(3, 4, seed=11)) + 0.5
    out, g, w = _grad(lambda x: x.square(), a)
    np.testing.assert_allclose(out, a.astype(np.float64) ** 2, rtol=1e-6)
    np.testing.assert_allclose(g, 2 * a * w, rtol=1e-5)
    out, g, w = _grad(lambda x: x.rsqrt(), a)
    np.testing.assert_allclose(out, a.astype(np.float64) ** -0.5, rtol=1e-6)
    np.testing.assert_allclose(g, -0.5 * a.astype(np.float64) ** -1.5 * w, rtol=1e-5)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_cat_any_number_any_axis(dim, count):
    shapes = []
    for i in range(count):
        sh = [2, 3, 4]
        sh[dim] = i + 1
        shapes.append(tuple(sh))
    arrays = [_data(*sh, seed=20 + i) for i, sh in enumerate(shapes)]
    s = Session()
    xs = [s.tensor(a, requires_grad=True) for a in arrays]
    y = tl.cat(xs, dim=dim)
    ref = np.concatenate(arrays, axis=dim)
    np.testing.assert_array_equal(y.numpy(), ref)
    w = RNG.uniform(-1, 1, size=ref.shape)
    (y * s.tensor(w)).sum().backward()
    parts = np.split(w, np.cumsum([a.shape[dim] for a in arrays])[:-1], axis=dim)
    for x, p in zip(xs, parts):
        np.testing.assert_allclose(x.grad, p, atol=1e-6)


@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_stack(dim):
    arrays = [_data(3, 2, seed=30 + i) for i in range(3)]
    s = Session()
    xs = [s.tensor(a, requires_grad=True) for a in arrays]
    y = tl.stack(xs, dim=dim)
    ref = np.stack(arrays, axis=dim)
    np.testing.assert_array_equal(y.numpy(), ref)
    w = RNG.uniform(-1, 1, size=ref.shape)
    (y * s.tensor(w)).sum().backward()
    for i, x in enumerate(xs):
        np.testing.assert_allclose(x.grad, np.take(w, i, axis=dim), atol=1e-6)


def test_split_chunk():
    a = _data(7, 4, seed=40)
    s = Session()
    x = s.tensor(a, requires_grad=True)
    for got, ref in zip(x.split(3), np.split(a, [3, 6])):
        np.testing.assert_array_equal(got.numpy(), ref)
    for got, ref in zip(tl.split(x, [1, 4, 2]), np.split(a, [1, 5])):
        np.testing.assert_array_equal(got.numpy(), ref)
    parts = x.chunk(2, dim=1)
    assert [p.shape for p in parts] == [(7, 2), (7, 2)]
    parts = tl.chunk(x, 3)      # torch: chunks of ceil(7 / 3) = 3
    assert [p.shape for p in parts] == [(3, 4), (3, 4), (1, 4)]
    (parts[0].sum() + parts[2].sum() * 2.0).backward()
    np.testing.assert_array_equal(x.grad, np.repeat([1, 1, 1, 0, 0, 0, 2], 4).reshape(7, 4))
    with pytest.raises(ValueError, match="sum to the size 7"):
        x.split([3, 3])
    with pytest.raises(ValueError, match="chunks must be a positive"):
        x.chunk(0)


def test_cat_stack_bad_input():
    s = Session()
    a, b = s.tensor(_data(2, 3)), s.tensor(_data(2, 4))
    with pytest.raises(ValueError, match=r"cat: shapes \[\(2, 3\), \(2, 4\)\] differ outside dim 0"):
        tl.cat([a, b], dim=0)
    with pytest.raises(ValueError, match="non-empty"):
        tl.cat([])
    with pytest.raises(ValueError, match="stack: expects each tensor to be equal size"):
        tl.stack([a, b])
    with pytest.raises(IndexError, match="cat: dim 2"):
        tl.cat([a, a], dim=2)


def test_repr_shows_values_shape_and_grad():
    s = Session()
    x = s.tensor(np.array([[1.0, 2.5, -3.0], [0.0, 4.0, 5.0]], np.float32), requires_grad=True)
    assert repr(x) == ("tensor([[ 1.0,  2.5, -3.0],\n        [ 0.0,  4.0,  5.0]], "
                       "shape=(2, 3), requires_grad=True)")
    assert repr(s.tensor(np.float32(1.5))) == "tensor(1.5, shape=())"
    s.step()
    assert "released" in repr(x)


def test_unknown_attribute_suggests_torch_name():
    s = Session()
    x = s.tensor(_data(2, 3))
    with pytest.raises(AttributeError, match=r"'amx'; did you mean x\.amax"):
        x.amx
    with pytest.raises(AttributeError, match=r"use torchlean\.cat\(tensors, dim\)"):
        x.concatenate
    with pytest.raises(AttributeError, match=r"x\.amax\(dim=\.\.\.\)"):
        x.reduce_maxx
    with pytest.raises(AttributeError, match="no attribute 'qwertyuiop'$"):
        x.qwertyuiop
    from torchlean.api_hints import unknown_attribute
    assert "use x.mT / x.transpose(-2, -1)" in unknown_attribute("swap_last2", [])
    assert "use x.amax(dim=...)" in unknown_attribute("reduce_max", [])


def test_probing_a_missing_attribute_does_not_build_the_hint(monkeypatch):
    """hasattr / getattr with a default catch the AttributeError unread: the difflib hint is
    worked out only when the message is read (it cost 1.4 ms per probe)."""
    import torchlean.api_hints as hints
    calls = []
    real = hints.unknown_attribute
    monkeypatch.setattr(hints, "unknown_attribute", lambda *a: calls.append(a) or real(*a))
    x = Session().tensor(_data(2, 3))
    assert not hasattr(x, "release")
    assert getattr(x, "amx", 7) == 7
    assert calls == []
    with pytest.raises(AttributeError) as e:
        x.amx
    assert e.value.name == "amx" and calls == []
    assert "did you mean x.amax" in str(e.value) and len(calls) == 1
    import copy
    import pickle
    for back in (pickle.loads(pickle.dumps(e.value)), copy.copy(e.value)):
        assert isinstance(back, AttributeError) and "did you mean x.amax" in str(back)
