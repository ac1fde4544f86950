"""nonzero, masked_select/scatter, bincount, histc/histogram (catalog/counting.py) and
searchsorted, bucketize, unique (catalog/searching.py) against NumPy references."""
import numpy as np
import pytest

import torchlean as tl

rng = np.random.default_rng(99)
NAN = np.float32("nan")


def same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert a.shape == b.shape
    assert np.array_equal(a.view(np.int32), b.view(np.int32)), (a, b)


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 2), (1,), (0, 3), ()])
def test_nonzero_and_argwhere(shape):
    x = rng.integers(-1, 2, size=shape).astype(np.float32)
    got = tl.tensor(x).nonzero()
    assert got.dtype == tl.int64 and np.array_equal(got.numpy(), np.argwhere(x))
    assert np.array_equal(tl.argwhere(tl.tensor(x)).numpy(), np.argwhere(x))
    tup = tl.nonzero(tl.tensor(x), as_tuple=True)
    for a, b in zip(tup, np.nonzero(np.atleast_1d(x))):
        assert np.array_equal(a.numpy(), b)
    a = rng.integers(0, 2, size=shape)
    assert np.array_equal(tl.tensor(a).nonzero().numpy(), np.argwhere(a))


def test_masked_select_broadcasts_and_has_a_gradient():
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = tl.tensor(x, requires_grad=True)
    same_bits(t.masked_select(t > 0.2).numpy(), x[x > 0.2])
    row = np.array([True, False, True, True])
    got = tl.masked_select(t, tl.tensor(row))
    same_bits(got.numpy(), x[:, row].reshape(-1))
    got.sum().backward()
    same_bits(t.grad, np.broadcast_to(row, (3, 4)).astype(np.float32))
    col = tl.tensor(np.array([[1.0], [2.0]], np.float32))
    m = np.array([[True, False, True]])
    wide = np.broadcast_to([[1.0], [2.0]], (2, 3))
    same_bits(tl.masked_select(col, tl.tensor(m)).numpy(), wide[np.broadcast_to(m, (2, 3))])
    assert tl.masked_select(t, t > 100.0).shape == (0,)


def test_masked_scatter():
    x = rng.standard_normal((3, 4)).astype(np.float32)
    src = rng.standard_normal((2, 6)).astype(np.float32)
    m = rng.random((3, 4)) > 0.5
    want = x.copy()
    want[m] = src.reshape(-1)[:m.sum()]
    same_bits(tl.tensor(x).masked_scatter(tl.tensor(m), tl.tensor(src)).numpy(), want)
    with pytest.raises(ValueError, match="masked_scatter"):
        tl.tensor(x).masked_scatter(tl.tensor(np.ones((3, 4), bool)), tl.tensor(src[:1]))
    with pytest.raises(IndexError):
        tl.masked_select(tl.tensor(x), tl.tensor(x))          # a float tensor is not a mask


def test_bincount_counts_and_weights():
    a = rng.integers(0, 9, size=50)
    assert np.array_equal(tl.bincount(tl.tensor(a)).numpy(), np.bincount(a))
    assert np.array_equal(tl.tensor(a).bincount(minlength=20).numpy(), np.bincount(a, minlength=20))
    w = rng.standard_normal(50).astype(np.float32)
    want = np.zeros(12, np.float32)
    for j, i in enumerate(a):                        # float32 sums in index order
        want[i] = np.float32(want[i] + w[j])
    got = tl.bincount(tl.tensor(a), tl.tensor(w), minlength=12)
    np.testing.assert_allclose(got.numpy(), np.bincount(a, w.astype(np.float64), 12), rtol=1e-5,
                               atol=1e-6)
    was = tl.is_deterministic()
    tl.set_deterministic(True)   # index order: always on the stub; CUDA's default mode adds with atomics
    try:
        same_bits(tl.bincount(tl.tensor(a), tl.tensor(w), minlength=12).numpy(), want)
    finally:
        tl.set_deterministic(was)
    assert tl.bincount(tl.tensor(np.zeros(0, np.int64))).shape == (0,)
    with pytest.raises(RuntimeError, match="bincount"):
        tl.bincount(tl.tensor([1, -1]))
    with pytest.raises(RuntimeError, match="bincount"):
        tl.bincount(tl.tensor([[1]]))
    with pytest.raises(TypeError, match="bincount"):
        tl.bincount(tl.tensor(np.ones(2, np.float32)))
    with pytest.raises(ValueError, match="bincount"):
        tl.bincount(tl.tensor([1, 2]), tl.tensor(np.ones(3, np.float32)))


def test_histc_and_histogram():
    x = (rng.integers(0, 1000, size=400) / 100.0 + 0.005).astype(np.float32)   # off bin edges
    got = tl.histc(tl.tensor(x), bins=7, min=1, max=8).numpy()
    np.testing.assert_array_equal(got, np.histogram(x, bins=7, range=(1, 8))[0])
    got = tl.tensor(x).histc(bins=10).numpy()                   # min = max = 0: data range
    np.testing.assert_array_equal(got, np.histogram(x, bins=10, range=(x.min(), x.max()))[0])
    x2 = np.array([0.0, 1.0, 2.0, 3.0, NAN, 9.0], np.float32)
    np.testing.assert_array_equal(tl.histc(tl.tensor(x2), bins=3, min=0, max=3).numpy(), [1, 1, 2])
    h, e = tl.histogram(tl.tensor(x), bins=5)
    wh, we = np.histogram(x, bins=5)
    np.testing.assert_array_equal(h.numpy(), wh)
    np.testing.assert_allclose(e.numpy(), we, rtol=1e-6)
    w = rng.random(400).astype(np.float32)
    h, _ = tl.histogram(tl.tensor(x), bins=4, range=(0.0, 10.0), weight=tl.tensor(w), density=True)
    np.testing.assert_allclose(h.numpy(), np.histogram(x, 4, (0, 10), weights=w, density=True)[0],
                               rtol=1e-5)
    with pytest.raises(ValueError, match="histc"):
        tl.histc(tl.tensor(x), bins=0)
    with pytest.raises(ValueError, match="histc"):
        tl.histc(tl.tensor(x), bins=3, min=2, max=1)


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_and_bucketize(side):
    seq = np.sort(rng.integers(0, 6, size=9)).astype(np.float32)
    seq = np.append(seq, NAN)
    v = np.array([[-1, 0, 2.5, 3], [5, 6, NAN, 2]], np.float32)
    got = tl.searchsorted(tl.tensor(seq), tl.tensor(v), side=side)
    assert got.dtype == tl.int64 and np.array_equal(got.numpy(), np.searchsorted(seq, v, side=side))
    got = tl.searchsorted(tl.tensor(seq), tl.tensor(v), right=side == "right")
    assert np.array_equal(got.numpy(), np.searchsorted(seq, v, side=side))
    b = np.array([1.0, 2.0, 4.0], np.float32)
    want = np.searchsorted(b, v, side="right" if side == "right" else "left")
    got = tl.bucketize(tl.tensor(v), tl.tensor(b), right=side == "right")
    assert np.array_equal(got.numpy(), want)
    rows = np.sort(rng.standard_normal((3, 6)).astype(np.float32), axis=1)
    q = rng.standard_normal((3, 4)).astype(np.float32)
    got = tl.searchsorted(tl.tensor(rows), tl.tensor(q), side=side).numpy()
    want = np.stack([np.searchsorted(r, a, side=side) for r, a in zip(rows, q)])
    assert np.array_equal(got, want)
    perm = rng.permutation(6)
    unsorted = rows[0][perm]
    sorter = np.argsort(unsorted, kind="stable")
    got = tl.searchsorted(tl.tensor(unsorted), tl.tensor(q[0]), side=side, sorter=tl.tensor(sorter))
    assert np.array_equal(got.numpy(), np.searchsorted(unsorted, q[0], side=side, sorter=sorter))
    ints = tl.searchsorted(tl.tensor([1, 3, 5]), tl.tensor([3, 4]), side=side)
    assert np.array_equal(ints.numpy(), np.searchsorted([1, 3, 5], [3, 4], side=side))


def test_searchsorted_bad_input():
    with pytest.raises(ValueError, match="searchsorted"):
        tl.searchsorted(tl.tensor(np.ones((2, 3), np.float32)),
                        tl.tensor(np.ones((3, 3), np.float32)))
    with pytest.raises(ValueError, match="searchsorted"):
        tl.searchsorted(tl.tensor([1, 2]), tl.tensor([1]), side="middle")
    with pytest.raises(ValueError, match="searchsorted"):
        tl.searchsorted(tl.tensor([1, 2]), tl.tensor([1]), side="left", right=True)


def test_unique_and_unique_consecutive():
    x = np.array([[3, 1, NAN, 1], [0, 2, NAN, 3]], np.float32)
    v, inv, cnt = tl.unique(tl.tensor(x), return_inverse=True, return_counts=True)
    same_bits(v.numpy(), [0, 1, 2, 3, NAN, NAN])              # each NaN its own value, last
    assert np.array_equal(inv.numpy(), [[3, 1, 4, 1], [0, 2, 5, 3]])
    assert np.array_equal(cnt.numpy(), [1, 2, 1, 2, 1, 1])
    a = rng.integers(0, 4, size=(5, 3))
    got = tl.tensor(a).unique()
    assert isinstance(got, type(tl.tensor([1]))) and np.array_equal(got.numpy(), np.unique(a))
    vals, inv = tl.unique(tl.tensor(a), dim=0, return_inverse=True)
    wv, wi = np.unique(a, axis=0, return_inverse=True)
    assert np.array_equal(vals.numpy(), wv) and np.array_equal(inv.numpy(), wi.reshape(-1))
    r = np.array([1, 1, 2, 2, 3, 1, 1], np.float32)
    v, inv, cnt = tl.unique_consecutive(tl.tensor(r), return_inverse=True, return_counts=True)
    same_bits(v.numpy(), [1, 2, 3, 1])
    assert np.array_equal(inv.numpy(), [0, 0, 1, 1, 2, 3, 3])
    assert np.array_equal(cnt.numpy(), [2, 2, 1, 2])
    m = np.array([[1, 2], [1, 2], [3, 4]])
    v, cnt = tl.tensor(m).unique_consecutive(dim=0, return_counts=True)
    assert np.array_equal(v.numpy(), [[1, 2], [3, 4]]) and np.array_equal(cnt.numpy(), [2, 1])
    with pytest.raises(IndexError, match="unique"):
        tl.unique(tl.tensor(a), dim=2)


def test_against_torch_when_present():
    torch = pytest.importorskip("torch")
    a = rng.integers(0, 7, size=30)
    w = rng.standard_normal(30).astype(np.float32)
    np.testing.assert_allclose(tl.bincount(tl.tensor(a), tl.tensor(w)).numpy(),
                               torch.bincount(torch.from_numpy(a), torch.from_numpy(w)).numpy(),
                               rtol=1e-5, atol=1e-6)
    x = (rng.integers(0, 1000, size=100) / 100.0 + 0.005).astype(np.float32)
    np.testing.assert_array_equal(tl.histc(tl.tensor(x), bins=6, min=0, max=10).numpy(),
                                  torch.histc(torch.from_numpy(x), bins=6, min=0, max=10).numpy())


@pytest.mark.parametrize("family", ["counting", "index_ops", "masked_scan", "scatter", "searching",
                                    "sorting"])
def test_family_names_are_bound_to_this_family(family):
    """Every name these families list reaches the public surface as this family's function
    (a same-named definition elsewhere would shadow it silently)."""
    import importlib
    mod = importlib.import_module(f"torchlean.catalog.{family}")
    t = tl.tensor(np.zeros(2, np.float32))
    for name in getattr(mod, "METHODS", ()):
        assert getattr(type(t), name) is getattr(mod, name), name
    for name in getattr(mod, "INT_METHODS", ()):
        assert getattr(type(tl.tensor([1])), name) is getattr(mod, name), name
    for name in getattr(mod, "INPLACE", ()):
        assert hasattr(type(t), name + "_"), name
    spaces = {"torch": tl, "masked": tl.masked}
    for ns, names in getattr(mod, "EXPORTS", {}).items():
        for name in names:
            assert getattr(spaces[ns], name) is getattr(mod, name), f"{ns}.{name}"
