"""torchlean dgemm: float64 host GEMM against NumPy, edge sizes and argument errors."""
from __future__ import annotations

import numpy as np
import pytest

from torchlean.dgemm import dgemm


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 7), (17, 1, 9), (33, 130, 257), (64, 64, 64),
                                   (1, 300, 1)])
def test_matches_numpy(m, k, n):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((k, n))
    c = dgemm(a, b)
    assert c.dtype == np.float64 and c.shape == (m, n)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12 * max(1, k))


def test_float64_precision_is_kept():
    """Values float32 cannot hold survive: the product is computed in double."""
    a = np.array([[1.0 + 2.0**-40, 1.0]])
    b = np.array([[1.0], [-1.0]])
    assert dgemm(a, b)[0, 0] == 2.0**-40


def test_empty_inner_dimension_gives_zeros():
    c = dgemm(np.zeros((3, 0)), np.zeros((0, 4)))
    assert c.shape == (3, 4) and c.dtype == np.float64
    assert np.all(c == 0)


@pytest.mark.parametrize("m,n", [(0, 4), (3, 0), (0, 0)])
def test_empty_outputs(m, n):
    c = dgemm(np.ones((m, 2)), np.ones((2, n)))
    assert c.shape == (m, n)


def test_other_real_dtypes_and_layouts_are_converted():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 4)).astype(np.float32)
    b = rng.integers(-3, 4, size=(4, 5))
    np.testing.assert_allclose(dgemm(a, b), a.astype(np.float64) @ b, rtol=1e-12, atol=1e-12)
    big = rng.standard_normal((9, 8))
    at = big.T[:, ::2]                      # a non-contiguous view
    bt = rng.standard_normal((5, 3))
    np.testing.assert_allclose(dgemm(at, bt), at @ bt, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dgemm([[1, 2]], [[3], [4]]), [[11.0]])


def test_inputs_are_not_modified():
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(12.0).reshape(3, 4)
    a0, b0 = a.copy(), b.copy()
    dgemm(a, b)
    assert np.array_equal(a, a0) and np.array_equal(b, b0)


def test_shape_errors_name_op_and_shapes():
    with pytest.raises(ValueError, match=r"dgemm.*\(2, 3\).*\(2, 3\)"):
        dgemm(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"dgemm.*2-D.*\(3,\)"):
        dgemm(np.ones(3), np.ones((3, 1)))
    with pytest.raises(ValueError, match="dgemm"):
        dgemm(np.ones((1, 2, 2)), np.ones((2, 2)))


@pytest.mark.parametrize("bad", [np.ones((2, 2), dtype=complex), np.array([["a", "b"], ["c", "d"]]),
                                 np.array([[None, None], [None, None]])])
def test_dtype_errors(bad):
    with pytest.raises(TypeError, match="dgemm"):
        dgemm(bad, np.ones((2, 2)))
    with pytest.raises(TypeError, match="dgemm"):
        dgemm(np.ones((2, 2)), bad)
