"""Reductions and views beyond the registry cases: bad inputs, empty axes, ties, aliasing,
sum_to over every broadcasting pattern, determinism."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean._generated import ops
from torchlean.buffer import AnyBuffer


def _val(t, i):
    return t.value(i).to_numpy(np.float64)


# ---------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max"])
def test_axis_out_of_range_names_op_and_shape(op):
    t = tl.Tape()
    x = t.leaf(np.ones((2, 3)))
    with pytest.raises(ValueError, match=rf"{op}.*axis 2.*\(2, 3\)"):
        getattr(t, op)(x, axis=2)
    with pytest.raises(ValueError, match=op):
        getattr(t, op)(x, axis=-3)
    with pytest.raises(TypeError, match=op):
        getattr(t, op)(x, axis=1.5)
    t.release()


def test_reshape_wrong_count():
    t = tl.Tape()
    x = t.leaf(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"reshape.*\(2, 3\)"):
        t.reshape(x, shape=(4, 2))
    with pytest.raises(ValueError, match="reshape"):
        t.reshape(x, shape=(-1, -1))
    t.release()


def test_transpose2d_rejects_rank3():
    t = tl.Tape()
    x = t.leaf(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match=r"transpose2d.*rank 2.*\(2, 3, 4\)"):
        t.transpose2d(x)
    for op in ("permute3d_bca", "permute3d_cab", "swap_last2"):
        y = t.leaf(np.ones((2, 3)))
        with pytest.raises(ValueError, match=op):
            getattr(t, op)(y)
    with pytest.raises(ValueError, match="swap_adjacent"):
        t.swap_adjacent(x, depth=-1)
    t.release()


def test_broadcast_and_sum_to_bad_shapes():
    x = AnyBuffer.from_numpy(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"broadcast_to.*\(2, 3\)"):
        ops.broadcast_to(x, shape=(3, 3))
    with pytest.raises(ValueError, match=r"sum_to.*\(2, 3\)"):
        ops.sum_to(x, shape=(4,))
    x.release()


# ---------------------------------------------------------------- empty axes
def test_empty_axis_conventions():
    x = AnyBuffer.from_numpy(np.zeros((3, 0, 2), np.float32))
    s = ops.reduce_sum(x, axis=1).to_numpy()
    m = ops.reduce_mean(x, axis=1).to_numpy()
    mx = ops.reduce_max(x, axis=1).to_numpy()
    assert s.shape == m.shape == mx.shape == (3, 2)
    assert np.all(s == 0) and np.all(np.isnan(m)) and np.all(mx == 0)
    assert ops.sum(x).to_numpy() == 0
    y = AnyBuffer.from_numpy(np.zeros((0, 4), np.float32))
    assert ops.reduce_sum(y, axis=1).shape == (0,)
    assert ops.sum_to(y, shape=(4,)).to_numpy().tolist() == [0, 0, 0, 0]


def test_reduce_mean_uses_float_reciprocal():
    x = np.arange(21, dtype=np.float32).reshape(3, 7)
    got = ops.reduce_mean(AnyBuffer.from_numpy(x), axis=1).to_numpy()
    s = x.sum(axis=1, dtype=np.float32)
    np.testing.assert_allclose(got, s * np.float32(1.0 / np.float32(7)), rtol=1e-6)


# ---------------------------------------------------------------- reduce_max ties and NaN
def test_reduce_max_ties_share_equally():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [5.0, 1.0, 0.0, -1.0]])
    t = tl.Tape()
    i = t.leaf(x)
    y = t.reduce_max(i, axis=1)
    np.testing.assert_array_equal(_val(t, y), [3.0, 2.0, 5.0])
    g = t.backward(y, seed=np.array([1.0, 2.0, 3.0]))[i].to_numpy()
    np.testing.assert_allclose(g, [[0, 0.5, 0.5, 0], [0.5, 0.5, 0.5, 0.5], [3, 0, 0, 0]])
    t.release()


def test_reduce_max_axis0_and_nan():
    x = np.array([[1.0, np.nan], [4.0, 2.0], [4.0, 9.0]], np.float32)
    y = ops.reduce_max(AnyBuffer.from_numpy(x), axis=0).to_numpy()
    assert y[0] == 4.0 and np.isnan(y[1])


# ---------------------------------------------------------------- views alias their parent
@pytest.mark.parametrize("view", ["reshape", "flatten"])
def test_views_alias_and_survive_release(view):
    t = tl.Tape()
    x = t.leaf(np.arange(6.0).reshape(2, 3))
    v = t.reshape(x, shape=(3, 2)) if view == "reshape" else t.flatten(x)
    assert t.value(v).buf is t.value(x).buf  # the same payload, no copy
    assert not t.nodes[v].owns_value
    freed = t.release()
    assert freed == 1  # only the leaf's payload: the view never frees its parent's buffer


def test_view_release_does_not_free_parent():
    x = AnyBuffer.from_numpy(np.arange(6.0))
    v = ops.reshape(x, shape=(2, 3))
    assert v.release() == 0
    assert x.live
    np.testing.assert_array_equal(x.to_numpy(), np.arange(6.0))
    x.release()


# ---------------------------------------------------------------- permutations
def test_permutations_match_numpy_on_larger_shapes():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 65, 3)).astype(np.float32)
    b = AnyBuffer.from_numpy(x)
    np.testing.assert_array_equal(ops.permute3d_bca(b).to_numpy(), x.transpose(1, 2, 0))
    np.testing.assert_array_equal(ops.permute3d_cab(b).to_numpy(), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(ops.swap_last2(b).to_numpy(), x.transpose(0, 2, 1))
    np.testing.assert_array_equal(ops.swap_adjacent(b, depth=0).to_numpy(), x.transpose(1, 0, 2))
    np.testing.assert_array_equal(ops.swap_adjacent(b, depth=5).to_numpy(), x)
    m = rng.standard_normal((130, 67)).astype(np.float32)
    np.testing.assert_array_equal(ops.transpose2d(AnyBuffer.from_numpy(m)).to_numpy(), m.T)


# ---------------------------------------------------------------- sum_to patterns
SUM_TO = [((4, 3), (3,)), ((4, 3), (4, 1)), ((4, 3), (1, 1)), ((4, 3), ()), ((5,), ()),
          ((2, 3, 4), (3, 1)), ((2, 3, 4), (2, 1, 4)), ((2, 3, 4), (1, 3, 1)),
          ((2, 1, 4), (1, 4)), ((3, 2, 5, 7), (2, 1, 7)), ((3, 2, 5, 7), (3, 1, 5, 1)),
          ((6, 7), (6, 7)), ((1, 1), ()), ((300, 257), (257,)), ((257, 300), (257, 1)),
          ((9, 40, 33), (40, 1)), ((2, 0, 3), (3,)), ((2, 0, 3), (2, 1, 1))]


@pytest.mark.parametrize("big,small", SUM_TO, ids=[f"{b}->{s}" for b, s in SUM_TO])
def test_sum_to_all_broadcast_patterns(big, small):
    import reference
    rng = np.random.default_rng(len(big) * 7 + sum(big))
    x = rng.uniform(-1, 1, big).astype(np.float32)
    got = ops.sum_to(AnyBuffer.from_numpy(x), shape=small).to_numpy(np.float64)
    want = reference.sum_to(x.astype(np.float64), small)
    assert got.shape == tuple(small)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_broadcast_binary_gradient_goes_through_sum_to():
    t = tl.Tape()
    a = t.leaf(np.ones((4, 3)))
    b = t.leaf(np.array([1.0, 2.0, 3.0]))
    y = t.mul(a, b)
    s = t.sum(y)
    g = t.backward(s)
    np.testing.assert_allclose(g[b].to_numpy(), [4, 4, 4])
    np.testing.assert_allclose(g[a].to_numpy(), np.tile([1.0, 2.0, 3.0], (4, 1)))
    t.release()


# ---------------------------------------------------------------- determinism
@pytest.mark.parametrize("det", [False, True])
def test_reductions_are_repeatable(det):
    tl.set_deterministic(det)
    rng = np.random.default_rng(3)
    x = AnyBuffer.from_numpy(rng.standard_normal((257, 1031)).astype(np.float32) * 1e3)
    for f in (lambda: ops.sum(x), lambda: ops.reduce_sum(x, axis=0),
              lambda: ops.reduce_mean(x, axis=1), lambda: ops.sum_to(x, shape=(1031,)),
              lambda: ops.sum_to(x, shape=(257, 1))):
        first = f().to_numpy()
        for _ in range(3):
            if det or tl.backend() == "stub":
                np.testing.assert_array_equal(f().to_numpy(), first)
            else:
                np.testing.assert_allclose(f().to_numpy(), first, rtol=1e-4, atol=1e-2)


def test_large_sum_accuracy():
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, 200003).astype(np.float32)
    got = float(ops.sum(AnyBuffer.from_numpy(x)).to_numpy())
    assert abs(got - x.astype(np.float64).sum()) < 1e-5 * x.size


def test_reduce_max_ties_along_leading_axis():
    x = np.array([[[1.0, 7.0], [2.0, 0.0]], [[1.0, 3.0], [2.0, 0.0]], [[0.5, 7.0], [2.0, -1.0]]])
    t = tl.Tape()
    i = t.leaf(x)
    y = t.reduce_max(i, axis=0)
    np.testing.assert_array_equal(_val(t, y), [[1.0, 7.0], [2.0, 0.0]])
    g = t.backward(y, seed=np.array([[2.0, 4.0], [3.0, 1.0]]))[i].to_numpy()
    want = np.array([[[1.0, 2.0], [1.0, 0.5]], [[1.0, 0.0], [1.0, 0.5]], [[0.0, 2.0], [1.0, 0.0]]])
    np.testing.assert_allclose(g, want)
    t.release()
