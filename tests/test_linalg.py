"""Linear algebra: bad inputs name the op, batched linear equals single samples, GEMM VJP flags."""
import numpy as np
import pytest

import torchlean as tl
from torchlean import ops

rng = np.random.default_rng(7)


def buf(*shape):
    return tl.AnyBuffer.from_numpy(rng.uniform(-1, 1, size=shape).astype(np.float32))


@pytest.mark.parametrize("name,shapes", [
    ("matmul", [(3, 4), (5, 2)]),          # inner-dim mismatch
    ("matmul", [(3, 4, 1), (4, 2)]),       # wrong rank
    ("bmm", [(2, 3, 4), (3, 4, 5)]),       # batch mismatch
    ("bmm", [(3, 4), (4, 5)]),             # wrong rank
    ("linear", [(4, 3), (5,), (3,)]),      # bias length mismatch
    ("linear", [(4, 3), (4,), (2,)]),      # input length mismatch
    ("mse_loss", [(3,), (4,)]),
])
def test_bad_shapes_raise_value_error_naming_op(name, shapes):
    with pytest.raises(ValueError, match=name):
        getattr(ops, name)(*[buf(*s) for s in shapes])


def test_batched_linear_equals_single_samples():
    """Rows of a batched linear equal single-row calls: bit for bit on the stub (fixed k order
    for every shape); to rounding on CUDA, where cuBLAS picks its kernel by the GEMM shape."""
    w, b, x = buf(6, 5), buf(6), buf(4, 5)
    yb = ops.linear(w, b, x).to_numpy()
    xs = x.to_numpy()
    for r in range(4):
        y1 = ops.linear(w, b, tl.AnyBuffer.from_numpy(xs[r])).to_numpy()
        if tl.backend() == "stub":
            np.testing.assert_array_equal(yb[r], y1)
        else:
            np.testing.assert_allclose(yb[r], y1, rtol=2e-6, atol=2e-6)


def test_matmul_t_flags_match_numpy():
    a, b = buf(2, 5, 3), buf(2, 4, 5)
    A, B = a.to_numpy().astype(np.float64), b.to_numpy().astype(np.float64)
    y = ops.matmul_t(a, b, trans_a=True, trans_b=True).to_numpy()
    np.testing.assert_allclose(y, np.swapaxes(A, 1, 2) @ np.swapaxes(B, 1, 2), rtol=1e-5, atol=1e-5)


def test_large_matmul_matches_numpy_and_is_deterministic():
    a, b = buf(300, 270), buf(270, 310)
    y1, y2 = ops.matmul(a, b).to_numpy(), ops.matmul(a, b).to_numpy()
    np.testing.assert_array_equal(y1, y2)
    want = a.to_numpy().astype(np.float64) @ b.to_numpy().astype(np.float64)
    np.testing.assert_allclose(y1, want, rtol=1e-4, atol=1e-4)


def test_linear_gradients_on_tape():
    t = tl.Tape()
    W = rng.uniform(-1, 1, (3, 2)); bb = rng.uniform(-1, 1, 3); X = rng.uniform(-1, 1, (4, 2))
    iw, ib, ix = t.leaf(W), t.leaf(bb), t.leaf(X)
    y = t.linear(iw, ib, ix)
    g = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
    grads = t.backward(y, seed=g)
    W32, X32, g = W.astype(np.float32), X.astype(np.float32), g.astype(np.float64)
    np.testing.assert_allclose(grads[iw].to_numpy(), g.T @ X32, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads[ib].to_numpy(), g.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads[ix].to_numpy(), g @ W32, rtol=1e-5, atol=1e-5)
    t.release()
