"""torch's scatter / index / take ops (torchlean/catalog/scatter.py) against float64 NumPy loop
references (np.add.at, last write wins), accumulation order bit for bit, gradients, bad input."""
import numpy as np
import pytest

import torchlean as tl

rng = np.random.default_rng(321)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert a.shape == b.shape
    assert np.array_equal(a.view(np.int32), b.view(np.int32)), (a, b)


def targets(x_shape, dim, index):
    """Each index entry's target position tuple (torch.scatter's rule)."""
    for p in np.ndindex(*index.shape):
        t = list(p)
        t[dim] = index[p]
        yield p, tuple(t)


SCATTER_CASES = [((5,), 0, (7,)), ((3, 4), 0, (5, 4)), ((3, 4), 1, (2, 6)), ((3, 4), -1, (3, 2)),
                 ((2, 3, 4), 1, (2, 5, 3)), ((1,), 0, (1,)), ((3, 4), 0, (0, 4))]


def make_index(x_shape, dim, idx_shape):
    return rng.integers(0, x_shape[dim], size=idx_shape)


@pytest.mark.parametrize("x_shape,dim,idx_shape", SCATTER_CASES)
def test_scatter_add_and_scatter(x_shape, dim, idx_shape):
    x, d = f32(*x_shape), dim % len(x_shape)
    idx = make_index(x_shape, d, idx_shape)
    src = f32(*[n + 1 for n in idx_shape])           # larger than index: only its corner is read
    add = x.astype(np.float64).copy()
    put = x.copy()
    for p, t in targets(x_shape, d, idx):
        add[t] += src[p]
        put[t] = src[p]                                # the last write in index order stays
    got = tl.tensor(x).scatter_add(dim, tl.tensor(idx), tl.tensor(src)).numpy()
    np.testing.assert_allclose(got, add, rtol=1e-6, atol=1e-6)
    same_bits(tl.scatter(tl.tensor(x), dim, tl.tensor(idx), tl.tensor(src)).numpy(), put)
    val = x.copy()
    for _, t in targets(x_shape, d, idx):
        val[t] = -2.5
    same_bits(tl.tensor(x).scatter(dim, tl.tensor(idx), -2.5).numpy(), val)
    same_bits(tl.tensor(x).scatter(dim, tl.tensor(idx), value=-2.5).numpy(), val)


def test_scatter_add_duplicates_sum_in_index_order_bit_for_bit():
    x = np.zeros(3, np.float32)
    idx = rng.integers(0, 3, size=4000)
    src = (f32(4000) * np.float32(1e4)).astype(np.float32)
    want = x.copy()
    for j, i in enumerate(idx):
        want[i] = np.float32(want[i] + src[j])
    was = tl.is_deterministic()
    tl.set_deterministic(True)       # the stub always adds in index order; CUDA does here
    try:
        same_bits(tl.tensor(x).scatter_add(0, tl.tensor(idx), tl.tensor(src)).numpy(), want)
        same_bits(tl.bincount(tl.tensor(idx), weights=tl.tensor(src)).numpy(), want)
    finally:
        tl.set_deterministic(was)


@pytest.mark.parametrize("rows,cols,k", [(37, 50, 1000), (3, 2, 97), (300, 5, 33), (1, 7, 31),
                                         (2, 50, 1500), (2, 300, 4096), (2, 40, 5000)])
def test_scatter_add_rows_add_in_index_order_bit_for_bit(rows, cols, k):
    """Each row's updates, many to one column within 32 consecutive ones and across them, land
    in index order (float32 adds one after another, magnitudes so varied that another order
    rounds differently), in deterministic mode on every backend."""
    r = np.random.default_rng(rows * k)
    x = r.standard_normal((rows, cols)).astype(np.float32)
    src = (r.uniform(-1, 1, (rows, k)) * 10.0 ** r.integers(-4, 5, (rows, k))).astype(np.float32)
    idx = r.integers(0, cols, (rows, k))
    want = x.copy()
    for i in range(rows):
        for j in range(k):
            want[i, idx[i, j]] = np.float32(want[i, idx[i, j]] + src[i, j])
    was = tl.is_deterministic()
    tl.set_deterministic(True)
    try:
        same_bits(tl.tensor(x).scatter_add(1, tl.tensor(idx), tl.tensor(src)).numpy(), want)
    finally:
        tl.set_deterministic(was)


def test_scatter_gradients():
    x, src = f32(3, 4), f32(2, 4)
    idx = np.array([[0, 1, 0, 2], [0, 1, 1, 2]])
    tx, ts = tl.tensor(x, requires_grad=True), tl.tensor(src, requires_grad=True)
    w = f32(3, 4)
    (tx.scatter(0, tl.tensor(idx), ts) * tl.tensor(w)).sum().backward()
    written = np.zeros((3, 4), bool)
    gsrc = np.zeros_like(src)
    last = {}
    for p, t in targets((3, 4), 0, idx):
        written[t] = True
        last[t] = p
    for t, p in last.items():
        gsrc[p] = w[t]
    same_bits(tx.grad, np.where(written, 0, w))
    same_bits(ts.grad, gsrc)
    tx, ts = tl.tensor(x, requires_grad=True), tl.tensor(src, requires_grad=True)
    (tx.scatter_add(0, tl.tensor(idx), ts) * tl.tensor(w)).sum().backward()
    same_bits(tx.grad, w)
    same_bits(ts.grad, np.take_along_axis(w, idx, 0))


def ref_scatter_reduce(x, dim, idx, src, reduce, include_self):
    groups = {}
    for p, t in targets(x.shape, dim, idx):
        groups.setdefault(t, []).append(float(src[p]))
    out = x.astype(np.float64).copy()
    for t, vals in groups.items():
        vals = ([float(x[t])] if include_self else []) + vals
        out[t] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max,
                  "amin": np.min}[reduce](vals)
    return out


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("x_shape,dim,idx_shape", [((4, 3), 0, (9, 3)), ((5,), 0, (40,)),
                                                  ((2, 6), 1, (2, 3))])
def test_scatter_reduce_against_loops(reduce, include_self, x_shape, dim, idx_shape):
    x = f32(*x_shape)
    idx = make_index(x_shape, dim, idx_shape)
    src = rng.uniform(0.5, 1.5, idx_shape).astype(np.float32)
    got = tl.tensor(x).scatter_reduce(dim, tl.tensor(idx), tl.tensor(src), reduce,
                                      include_self=include_self).numpy()
    np.testing.assert_allclose(got, ref_scatter_reduce(x, dim, idx, src, reduce, include_self),
                               rtol=1e-5, atol=1e-6)


def central_diff(f, x, eps=1e-3):
    g = np.zeros(x.shape)
    for j in range(x.size):
        xp, xm = x.astype(np.float64).copy(), x.astype(np.float64).copy()
        xp.flat[j] += eps
        xm.flat[j] -= eps
        g.flat[j] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_scatter_reduce_gradient_by_central_differences(reduce):
    x = rng.uniform(0.5, 1.5, (4,)).astype(np.float32)
    idx = np.array([0, 2, 0, 2, 3, 0])
    src = rng.uniform(0.5, 1.5, (6,)).astype(np.float32)
    w = rng.standard_normal(4)
    ts = tl.tensor(src, requires_grad=True)
    tx = tl.tensor(x, requires_grad=True)
    out = tx.scatter_reduce(0, tl.tensor(idx), ts, reduce)
    (out * tl.tensor(w.astype(np.float32))).sum().backward()
    f_src = lambda s: (ref_scatter_reduce(x, 0, idx, s, reduce, True) * w).sum()   # noqa: E731
    f_x = lambda a: (ref_scatter_reduce(a, 0, idx, src, reduce, True) * w).sum()   # noqa: E731
    np.testing.assert_allclose(ts.grad, central_diff(f_src, src), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(tx.grad, central_diff(f_x, x), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("x_shape,dim,k", [((5, 3), 0, 7), ((4, 6), 1, 4), ((2, 3, 4), -1, 5),
                                           ((6,), 0, 6), ((1,), 0, 3)])
def test_index_ops_against_numpy(x_shape, dim, k):
    x = f32(*x_shape)
    d = dim % len(x_shape)
    idx = rng.integers(0, x_shape[d], size=k)
    src_shape = list(x_shape)
    src_shape[d] = k
    src = f32(*src_shape)
    same_bits(tl.tensor(x).index_select(dim, tl.tensor(idx)).numpy(), np.take(x, idx, axis=d))
    want = x.astype(np.float64).copy()
    moved = np.moveaxis(want, d, 0)
    np.add.at(moved, idx, 2.0 * np.moveaxis(src, d, 0))
    got = tl.tensor(x).index_add(dim, tl.tensor(idx), tl.tensor(src), alpha=2).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    want = x.copy()
    for j, i in enumerate(idx):       # the last copy of a repeated index stays
        np.moveaxis(want, d, 0)[i] = np.moveaxis(src, d, 0)[j]
    same_bits(tl.index_copy(tl.tensor(x), dim, tl.tensor(idx), tl.tensor(src)).numpy(), want)
    want = x.copy()
    np.moveaxis(want, d, 0)[idx - x_shape[d]] = 4.0           # negative indices count from the end
    same_bits(tl.tensor(x).index_fill(dim, tl.tensor(idx - x_shape[d]), 4.0).numpy(), want)


def test_index_add_gradient_and_fill_value_tensor():
    x, src = f32(4, 3), f32(5, 3)
    idx = np.array([1, 3, 1, 0, 1])
    tx, ts = tl.tensor(x, requires_grad=True), tl.tensor(src, requires_grad=True)
    w = f32(4, 3)
    (tx.index_add(0, tl.tensor(idx), ts) * tl.tensor(w)).sum().backward()
    same_bits(tx.grad, w)
    same_bits(ts.grad, w[idx])
    v = tl.tensor(np.float32(2.0), requires_grad=True)
    (tl.tensor(x).index_fill(1, tl.tensor([0, 2]), v) * tl.tensor(w)).sum().backward()
    np.testing.assert_allclose(v.grad, w[:, [0, 2]].sum(), rtol=1e-6)


def test_index_put_take_put_take_along_dim():
    x = f32(4, 5)
    rows, cols = np.array([0, 3, 0]), np.array([1, 4, 1])
    vals = f32(3)
    want = x.astype(np.float64).copy()
    np.add.at(want, (rows, cols), vals)
    got = tl.tensor(x).index_put((tl.tensor(rows), tl.tensor(cols)), tl.tensor(vals),
                                 accumulate=True).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    want = x.copy()
    want[rows, cols] = vals                      # NumPy: the last of repeated positions
    same_bits(tl.index_put(tl.tensor(x), (tl.tensor(rows), tl.tensor(cols)),
                           tl.tensor(vals)).numpy(), want)
    want = x.copy()
    want[np.array([1, 2])] = 7.0
    same_bits(tl.tensor(x).index_put((tl.tensor([1, 2]),), tl.tensor(np.float32(7.0))).numpy(),
              want)
    flat = np.array([[0, -1], [7, 19]])
    same_bits(tl.take(tl.tensor(x), tl.tensor(flat)).numpy(), x.reshape(-1)[flat])
    want = x.reshape(-1).copy()
    want[[3, 19]] = [1.5, 2.5]
    got = tl.tensor(x).put(tl.tensor([3, -1]), tl.tensor(np.array([1.5, 2.5], np.float32)))
    same_bits(got.numpy(), want.reshape(4, 5))
    want = x.astype(np.float64).reshape(-1).copy()
    np.add.at(want, [3, 3], [1.5, 2.5])
    np.testing.assert_allclose(tl.tensor(x).put(tl.tensor([3, 3]), tl.tensor(np.array(
        [1.5, 2.5], np.float32)), accumulate=True).numpy().reshape(-1), want, rtol=1e-6)
    idx = rng.integers(0, 5, size=(1, 3))
    same_bits(tl.take_along_dim(tl.tensor(x), tl.tensor(idx), 1).numpy(),
              np.take_along_axis(x, np.broadcast_to(idx, (4, 3)), 1))
    same_bits(tl.take_along_dim(tl.tensor(x), tl.tensor(np.array([2, 19]))).numpy(),
              x.reshape(-1)[[2, 19]])


@pytest.mark.parametrize("call,exc", [
    (lambda x: x.scatter_add(0, tl.tensor([[4, 0, 0]]), x), IndexError),
    (lambda x: x.scatter_add(0, tl.tensor([[-1, 0, 0]]), x), IndexError),
    (lambda x: x.scatter_add(0, x, x), TypeError),
    (lambda x: x.scatter_add(2, tl.tensor([[0, 0, 0]]), x), IndexError),
    (lambda x: x.scatter_add(0, tl.tensor([0, 0, 0]), x), ValueError),
    (lambda x: x.scatter(0, tl.tensor([[0, 0, 0]]), x, reduce="max"), ValueError),
    (lambda x: x.scatter_reduce(0, tl.tensor([[0, 0, 0]]), x, "median"), ValueError),
    (lambda x: x.index_select(0, tl.tensor([4])), IndexError),
    (lambda x: x.index_select(0, tl.tensor([[0]])), IndexError),
    (lambda x: x.index_add(1, tl.tensor([0]), x), ValueError),
    (lambda x: x.index_copy(0, tl.tensor([9, 0, 0, 0]), x), IndexError),
    (lambda x: x.index_put((tl.tensor([5]),), tl.tensor(np.float32(1))), IndexError),
    (lambda x: x.take(tl.tensor([12])), IndexError),
    (lambda x: x.put(tl.tensor([0, 1]), tl.tensor(np.ones(3, np.float32))), ValueError),
    (lambda x: tl.take_along_dim(x, tl.tensor([[5]]), 1), IndexError),
])
def test_bad_input_errors_name_the_op(call, exc):
    x = tl.tensor(f32(4, 3))
    with pytest.raises(exc):
        call(x)
    try:
        call(x)
    except exc as e:
        assert any(n in str(e) for n in ("scatter", "index_", "take", "put", "gather")), str(e)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_against_loops(reduce, include_self):
    x = f32(5, 3)
    idx = np.array([4, 0, 4, 2, 4])
    src = rng.uniform(0.5, 1.5, (5, 3)).astype(np.float32)
    want = x.astype(np.float64).copy()
    fn = {"prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce]
    for t in set(idx.tolist()):
        vals = src[idx == t].astype(np.float64)
        if include_self:
            vals = np.concatenate([x[t:t + 1], vals])
        want[t] = fn(vals, axis=0)
    got = tl.tensor(x).index_reduce(0, tl.tensor(idx), tl.tensor(src), reduce,
                                    include_self=include_self).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add_adds_onto_the_input_in_index_order_bit_for_bit(dim):
    x = (f32(4, 5, 3) * np.float32(1e4)).astype(np.float32)
    d = dim % 3
    k = 300
    idx = rng.integers(0, x.shape[d], size=k)
    src_shape = list(x.shape)
    src_shape[d] = k
    src = f32(*src_shape)
    want = np.moveaxis(x.copy(), d, 0)
    s = np.moveaxis(src, d, 0)
    for j, i in enumerate(idx):
        want[i] = (want[i] + s[j]).astype(np.float32)
    was = tl.is_deterministic()
    tl.set_deterministic(True)
    try:
        got = tl.tensor(x).index_add(dim, tl.tensor(idx), tl.tensor(src)).numpy()
    finally:
        tl.set_deterministic(was)
    same_bits(got, np.moveaxis(want, 0, d))
