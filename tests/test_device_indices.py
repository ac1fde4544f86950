"""Integer tensors kept on the device (torchlean/catalog/_device_index.py): sort / argsort /
topk / kthvalue / cummax indices and one_hot results stay device buffers until the host asks;
gather, scatter_add and one_hot take an IntTensor index as a device buffer (uploaded once);
tril / triu (triangle) and masked_fill with a number (fill_masked) need no host mask. Each
against float64 NumPy, the host paths bit for bit, gradients, and bad input."""
import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.functional as F
from torchlean.int_tensor import IntTensor

rng = np.random.default_rng(2024)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert a.shape == b.shape
    assert np.array_equal(a.view(np.int32), b.view(np.int32)), (a, b)


def on_device(t):
    """Is the IntTensor's value still only a device buffer (never read back)?"""
    return t._host is None


# ------------------------------------------------------------------ produced on the device

@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5), -1), ((3, 5), 0), ((2, 3, 9), 1),
                                       ((1,), -1), ((4, 1), 1)])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_indices_stay_on_the_device_and_match_numpy(shape, dim, descending):
    a = np.round(rng.standard_normal(shape) * 2).astype(np.float32)   # many ties
    x = tl.tensor(a)
    values, idx = x.sort(dim, descending=descending)
    assert isinstance(idx, IntTensor) and on_device(idx)
    assert idx.shape == shape and idx.dtype == tl.int64
    key = -a.astype(np.float64) if descending else a.astype(np.float64)
    want = np.argsort(key, axis=dim, kind="stable")
    np.testing.assert_array_equal(idx.numpy(), want)
    assert idx.numpy().dtype == np.int64
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, want, dim))
    np.testing.assert_array_equal(x.argsort(dim, descending=descending).numpy(), want)


def test_topk_kthvalue_cummax_indices():
    a = f32(4, 11)
    x = tl.tensor(a)
    v, i = x.topk(3, dim=-1)
    assert on_device(i)
    want = np.argsort(-a.astype(np.float64), axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(i.numpy(), want)
    v, i = x.kthvalue(4, dim=1)
    assert on_device(i) and i.shape == (4,)
    np.testing.assert_array_equal(i.numpy(), np.argsort(a, 1, kind="stable")[:, 3])
    v, i = x.kthvalue(2, dim=0, keepdim=True)
    np.testing.assert_array_equal(i.numpy(), np.argsort(a, 0, kind="stable")[1:2])
    v, i = x.cummax(1)
    assert on_device(i)
    np.testing.assert_array_equal(v.numpy(), np.maximum.accumulate(a, 1))


def test_device_indices_outlive_the_step_and_behave_as_host_ones():
    s = tl.Session()
    x = s.tensor(f32(3, 6))
    _, idx = x.sort(-1)
    want = np.argsort(x.numpy(), -1, kind="stable")
    s.step()                                  # the tape's values are gone, the indices stay
    assert on_device(idx)
    assert idx.size() == (3, 6) and idx.ndim == 2 and len(idx) == 3 and idx.numel() == 18
    np.testing.assert_array_equal((idx + 1).numpy(), want + 1)
    np.testing.assert_array_equal(idx[1].numpy(), want[1])
    idx[0, 0] = 5                              # writing: the device copy is dropped
    want[0, 0] = 5
    np.testing.assert_array_equal(idx.numpy(), want)
    y = s.tensor(f32(3, 6))
    np.testing.assert_array_equal(y.gather(1, idx).numpy(),
                                  np.take_along_axis(y.numpy(), want, 1))


# ------------------------------------------------------------------ gather

@pytest.mark.parametrize("x_shape,dim,idx_shape", [
    ((5, 7), 1, (5, 9)), ((5, 7), 0, (3, 7)), ((5, 7), -1, (2, 4)), ((2, 3, 4), 1, (2, 5, 4)),
    ((2, 3, 4), 0, (1, 2, 3)), ((1,), 0, (3,)), ((4,), 0, (1,))])
def test_gather_on_the_device_matches_numpy_and_its_gradient(x_shape, dim, idx_shape):
    a = f32(*x_shape)
    d = dim % len(x_shape)
    ia = rng.integers(0, x_shape[d], size=idx_shape)
    ref = np.take_along_axis(a[tuple(slice(0, n) if k != d else slice(None)
                                     for k, n in enumerate(idx_shape))], ia, d)
    x = tl.tensor(a, requires_grad=True)
    idx = tl.tensor(ia)
    y = x.gather(dim, idx)
    np.testing.assert_array_equal(y.numpy(), ref)
    same_bits(y.numpy(), x.gather(dim, ia).numpy())        # the host path: same bits
    assert idx._dev is not None                             # kept for the next use
    w = f32(*idx_shape)
    (y * tl.tensor(w)).sum().backward()
    g = np.zeros(x_shape)
    for p in np.ndindex(*idx_shape):
        t = list(p)
        t[d] = ia[p]
        g[tuple(t)] += w[p]
    np.testing.assert_allclose(x.grad.numpy(), g, rtol=1e-6, atol=1e-6)


def test_gather_errors_name_the_op_and_shapes():
    x = tl.tensor(f32(3, 4))
    with pytest.raises(IndexError, match=r"gather: index out of range \[0, 4\).*\(3, 4\)"):
        x.gather(1, tl.tensor(np.array([[0, 4], [1, 1], [0, 0]])))
    with pytest.raises(IndexError, match="gather"):
        x.gather(1, tl.tensor(np.array([[0, -1], [1, 1], [0, 0]])))
    with pytest.raises(ValueError, match=r"gather: index shape \(4, 2\) exceeds"):
        x.gather(1, tl.tensor(np.zeros((4, 2), np.int64)))
    with pytest.raises(IndexError):
        x.gather(2, tl.tensor(np.zeros((3, 2), np.int64)))


def test_gather_with_values_past_float32_takes_the_host_path():
    x = tl.tensor(f32(2, 3))
    big = tl.tensor(np.array([[0, 1], [2, (1 << 25) + 1]]))
    with pytest.raises(IndexError, match="gather"):
        x.gather(1, big)
    assert big._dev is None


# ------------------------------------------------------------------ scatter_add

@pytest.mark.parametrize("x_shape,dim,idx_shape", [
    ((5,), 0, (9,)), ((3, 4), 0, (7, 4)), ((3, 4), 1, (3, 6)), ((3, 4), -1, (3, 1)),
    ((2, 3, 4), 1, (2, 5, 4)), ((1,), 0, (1,)), ((2, 3, 4), 0, (6, 3, 4))])
@pytest.mark.parametrize("deterministic", [False, True])
def test_scatter_add_on_the_device_is_the_host_path_bit_for_bit(x_shape, dim, idx_shape,
                                                                 deterministic):
    d = dim % len(x_shape)
    a, src = f32(*x_shape), f32(*[n + 1 for n in idx_shape])     # src larger than the index
    ia = rng.integers(0, x_shape[d], size=idx_shape)             # many repeats
    before = tl.is_deterministic() if hasattr(tl, "is_deterministic") else False
    tl.set_deterministic(deterministic)
    try:
        x = tl.tensor(a, requires_grad=True)
        s = tl.tensor(src, requires_grad=True)
        y = x.scatter_add(dim, tl.tensor(ia), s)
        host = x.scatter_add(dim, ia, s)                         # positions from the host
    finally:
        tl.set_deterministic(before)
    ref = a.astype(np.float64).copy()
    for p in np.ndindex(*idx_shape):
        t = list(p)
        t[d] = ia[p]
        ref[tuple(t)] += src[p]
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-6, atol=1e-6)
    if tl.backend() == "stub" or deterministic:
        same_bits(y.numpy(), host.numpy())
    w = f32(*x_shape)
    (y * tl.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), w)
    gs = np.zeros(src.shape, np.float32)
    gs[tuple(slice(0, n) for n in idx_shape)] = np.take_along_axis(
        w[tuple(slice(0, n) if k != d else slice(None) for k, n in enumerate(idx_shape))], ia, d)
    np.testing.assert_array_equal(s.grad.numpy(), gs)


def test_scatter_add_errors():
    x = tl.tensor(f32(3, 4))
    with pytest.raises(IndexError, match=r"scatter_add: index 4 is out of bounds for dimension 1 "
                                         r"with size 4 \(shape \(3, 4\)\)"):
        x.scatter_add(1, tl.tensor(np.array([[0, 4]] * 3)), tl.tensor(f32(3, 2)))
    with pytest.raises(IndexError, match="scatter_add: index -1"):
        x.scatter_add(0, tl.tensor(-np.ones((2, 4), np.int64)), tl.tensor(f32(2, 4)))
    with pytest.raises(ValueError, match="scatter_add: index shape"):
        x.scatter_add(0, tl.tensor(np.zeros((2, 4), np.int64)), tl.tensor(f32(1, 4)))


# ------------------------------------------------------------------ one_hot

@pytest.mark.parametrize("shape,k", [((7,), 5), ((2, 3), 4), ((1,), 1), ((5,), -1)])
def test_one_hot_on_the_device(shape, k):
    ia = rng.integers(0, 4 if k == -1 else k, size=shape)
    out = F.one_hot(tl.tensor(ia), k)
    n = ia.max() + 1 if k == -1 else k
    assert on_device(out) and out.shape == shape + (n,) and out.dtype == tl.int64
    np.testing.assert_array_equal(out.numpy(), (ia[..., None] == np.arange(n)).astype(np.int64))
    np.testing.assert_array_equal(out.sum(-1).numpy(), np.ones(shape, np.int64))


def test_one_hot_of_sort_indices_and_errors():
    x = tl.tensor(f32(6))
    _, idx = x.sort()
    out = F.one_hot(idx)                       # num_classes from the known bounds
    np.testing.assert_array_equal(out.numpy(), np.eye(6, dtype=np.int64)[idx.numpy()])
    with pytest.raises(RuntimeError, match="one_hot: class values must be smaller than "
                                           "num_classes 3, got 3"):
        F.one_hot(tl.tensor(np.array([0, 3, 1])), 3)
    with pytest.raises(RuntimeError, match="one_hot: class values must be non-negative"):
        F.one_hot(tl.tensor(np.array([0, -1])), 3)


# ------------------------------------------------------------------ tril / triu, masked_fill

@pytest.mark.parametrize("shape", [(4, 5), (1, 1), (2, 3, 6), (5, 2), (2, 1, 3, 3),
                                   (3, 131, 257), (300, 128), (1, 129)])
@pytest.mark.parametrize("diagonal", [0, 1, -2, 7])
def test_tril_triu_without_a_host_mask(shape, diagonal):
    a = f32(*shape)
    a.reshape(-1)[::5] = np.inf
    a.reshape(-1)[1::7] = np.nan
    x = tl.tensor(a, requires_grad=True)
    lo, up = tl.tril(x, diagonal), tl.triu(x, diagonal)
    same_bits(lo.numpy(), np.where(np.tril(np.ones(shape[-2:]), diagonal) != 0, a, 0))
    same_bits(up.numpy(), np.where(np.triu(np.ones(shape[-2:]), diagonal) != 0, a, 0))
    w = f32(*shape)
    ((lo + up) * tl.tensor(w)).sum().backward()
    keep = np.tril(np.ones(shape[-2:]), diagonal) + np.triu(np.ones(shape[-2:]), diagonal)
    np.testing.assert_allclose(x.grad.numpy(), w * keep, rtol=1e-6)


def test_tril_more_rows_than_one_grid_column():
    """More matrix rows than a launch's 65535 block rows (the kernel walks down the rows)."""
    a = f32(2, 32771, 128)
    same_bits(tl.tril(tl.tensor(a), -3).numpy(), np.where(np.tril(np.ones((32771, 128)), -3) != 0, a, 0))


def test_tril_needs_a_matrix():
    with pytest.raises(ValueError, match="tril: input must have at least 2 dimensions"):
        tl.tril(tl.tensor(f32(3)))


@pytest.mark.parametrize("x_shape,m_shape", [((3, 5), (3, 5)), ((3, 5), (1, 5)),
                                             ((2, 3, 4), (3, 1)), ((1,), (1,))])
@pytest.mark.parametrize("value", [0.0, -2.5, float("inf"), 1e-40])
def test_masked_fill_with_a_number(x_shape, m_shape, value):
    a = f32(*x_shape)
    m = rng.random(m_shape) > 0.5
    x = tl.tensor(a, requires_grad=True)
    y = x.masked_fill(tl.tensor(m), value)
    want = np.where(m, np.float32(value), a)
    same_bits(y.numpy(), want)
    w = f32(*x_shape)
    (y * tl.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(m, 0.0, w).astype(np.float32))
    fm = tl.tensor(f32(*m_shape)) > 0.0               # a float comparison as the mask
    same_bits(x.masked_fill(fm, value).numpy(), np.where(fm.numpy() != 0, np.float32(value), a))


def test_masked_fill_bool_mask_reused_and_rewritten():
    """A bool IntTensor mask goes to the device once and is reused; writing into the mask
    changes what the next masked_fill sees (the kept copy is dropped)."""
    a = f32(4, 7)
    m = rng.random((4, 7)) > 0.5
    x, mt = tl.tensor(a), tl.tensor(m)
    for _ in range(2):
        same_bits(x.masked_fill(mt, 3.0).numpy(), np.where(m, np.float32(3.0), a))
    mt[1] = True
    m[1] = True
    same_bits(x.masked_fill(mt, -1.0).numpy(), np.where(m, np.float32(-1.0), a))
    same_bits(tl.where(mt, x, 0.0).numpy(), np.where(m, a, np.float32(0.0)))


def test_masked_fill_bad_mask_shape():
    with pytest.raises(RuntimeError, match=r"masked_fill: shapes \[\(2, 4\), \(3, 4\)\] do not broadcast"):
        tl.tensor(f32(3, 4)).masked_fill(tl.tensor(np.ones((2, 4), bool)), 1.0)
