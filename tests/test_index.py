"""Concat/slice/gather/scatter: bad inputs, out-of-range totalisation, duplicate accumulation."""
import numpy as np
import pytest

import torchlean as tl
from torchlean import ops

rng = np.random.default_rng(11)


def buf(*shape):
    return tl.AnyBuffer.from_numpy(rng.uniform(-1, 1, size=shape).astype(np.float32))


@pytest.mark.parametrize("bad,exc", [(-1, ValueError), (1.5, TypeError), (True, TypeError),
                                     (np.array([0.0, 1.0]), TypeError), (np.array([1, -2]), ValueError),
                                     (np.array([True]), TypeError)])
@pytest.mark.parametrize("name", ["gather_vec", "gather_rows"])
def test_bad_indices_raise(name, bad, exc):
    x = buf(4) if name == "gather_vec" else buf(4, 3)
    with pytest.raises(exc, match=name):
        getattr(ops, name)(x, indices=bad)


@pytest.mark.parametrize("bad,exc", [(-1, ValueError), (2.0, TypeError), (False, TypeError)])
def test_bad_single_index_raises(bad, exc):
    with pytest.raises(exc, match="gather"):
        ops.gather(buf(4), index=bad)
    with pytest.raises(exc, match="scatter_add_row"):
        ops.scatter_add_row(buf(3, 2), buf(2), index=bad)


def test_out_of_range_slices_and_scatter_row_raise():
    with pytest.raises(ValueError, match="slice1d"):
        ops.slice1d(buf(5), start=3, length=3)
    with pytest.raises(ValueError, match="slice_range0"):
        ops.slice_range0(buf(5, 2), start=5, length=1)
    with pytest.raises(ValueError, match="scatter_add_row"):
        ops.scatter_add_row(buf(3, 2), buf(2), index=3)
    with pytest.raises(ValueError, match="concat0"):
        ops.concat0(buf(2, 3), buf(2, 4))
    with pytest.raises(ValueError, match="concat1d"):
        ops.concat1d(buf(2, 3), buf(2))


def test_out_of_range_gathers_read_zero_and_scatters_ignore():
    x = buf(4)
    np.testing.assert_array_equal(ops.gather(x, index=10).to_numpy(), 0.0)
    np.testing.assert_array_equal(ops.gather_vec(x, indices=[1, 99]).to_numpy(), [x.to_numpy()[1], 0.0])
    m = buf(3, 2)
    np.testing.assert_array_equal(ops.gather_rows(m, indices=[5]).to_numpy(), np.zeros((1, 2)))
    np.testing.assert_array_equal(ops.gather_row(m, index=3).to_numpy(), np.zeros(2))
    y = ops.scatter_add_vec(x, buf(2), indices=[7, 100]).to_numpy()
    np.testing.assert_array_equal(y, x.to_numpy())


def test_duplicates_accumulate_and_gather_grads_sum():
    x = tl.AnyBuffer.from_numpy(np.zeros(3, np.float32))
    v = tl.AnyBuffer.from_numpy(np.array([1.0, 2.0, 4.0], np.float32))
    np.testing.assert_array_equal(ops.scatter_add_vec(x, v, indices=[1, 1, 1]).to_numpy(), [0, 7, 0])
    t = tl.Tape()
    i = t.leaf(rng.uniform(-1, 1, (4, 2)))
    y = t.gather_rows(i, indices=[2, 2, 0, 9])
    g = np.arange(8, dtype=np.float32).reshape(4, 2) + 1
    gr = t.backward(y, seed=g)[i].to_numpy()
    np.testing.assert_array_equal(gr, [g[2], [0, 0], g[0] + g[1], [0, 0]])
    t.release()


def test_scatter_add_vec_scalar_values_and_deterministic_flag():
    x = buf(5)
    v = tl.AnyBuffer.from_numpy(np.float32(2.5))
    tl.set_deterministic(True)
    y = ops.scatter_add_vec(x, v, indices=3).to_numpy()
    want = x.to_numpy().copy(); want[3] += np.float32(2.5)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("rows,k", [(7, 300), (5, 1), (300000, 40)])
def test_deterministic_scatter_adds_each_rows_updates_in_index_order(rows, k):
    """Deterministic mode adds a row's updates one after another in index order, from 0 (the
    stub's order on every backend): checked against float32 sums done that way in NumPy, indices
    past the end skipped. (300000, 40) is a tall target with few updates."""
    r = np.random.default_rng(rows + k)
    cols = 3
    x = np.zeros((rows, cols), np.float32)
    g = (r.uniform(-1, 1, (k, cols)) * 10.0 ** r.integers(-3, 4, (k, 1))).astype(np.float32)
    idx = r.integers(0, min(rows, 9) + 2, k)
    want = np.zeros((rows, cols), np.float32)
    for j, i in enumerate(idx):
        if i < rows:
            want[i] = want[i] + g[j]  # float32 adds, index order
    was = tl.is_deterministic()
    tl.set_deterministic(True)
    try:
        y = ops.gather_rows_backward(tl.AnyBuffer.from_numpy(g), tl.AnyBuffer.from_numpy(x),
                                     indices=idx.tolist()).to_numpy()
    finally:
        tl.set_deterministic(was)
    np.testing.assert_array_equal(y, want)
