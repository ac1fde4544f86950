"""The generated C entry layer (native/generated/) as a safety net for raw calls.

Every exported tl_<op> checks handles, overflow-checked sizes, every buffer's length and the
registry's `requires` conditions before the backend's kernel body runs, and returns early when
there is nothing to write. These tests call the C symbols directly through cffi with bad
arguments the Python layer would have refused, and check the status and the message (which
must name the op, the argument and the sizes). The pool/conv overflow cases also go through
the Tape, where they must surface as ValueError."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean import ops
from torchlean._loader import ffi, last_error, lib

BIG = 2**31


def buf(values):
    return tl.Buffer.from_numpy(np.asarray(values, dtype=np.float32))


def garbage(n):
    """A buffer of n elements holding a known non-zero pattern (so 'untouched' is checkable)."""
    return buf(np.full(n, 7.25))


def i64(values):
    a = np.asarray(values, dtype=np.int64)
    return a, ffi.cast("const int64_t *", ffi.from_buffer(a))


def expect(status, code, *fragments):
    msg = last_error()
    assert status == code, (status, msg)
    for f in fragments:
        assert f in msg, (f, msg)


# --------------------------------------------------------------------- the overflow cases
@pytest.mark.parametrize("kernel_size,padding", [(BIG, 2**30), (2**32, 0), (2**32, 2**31)])
@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d", "smooth_max_pool2d"])
def test_huge_pool_window_is_a_value_error_on_the_tape(op, kernel_size, padding):
    t = tl.Tape()
    x = t.leaf(np.ones((1, 1, 1)))
    with pytest.raises(ValueError, match=op):
        extra = {"beta": 2.0} if op.startswith("smooth") else {}
        getattr(t, op)(x, kernel_size=kernel_size, padding=padding, **extra)
    t.release()


def _pool_geom(k, p, n_in=1):
    # [r, N, C_in, C_out, in.., k.., out.., s.., p..] for a 2-D pool of one 1 x 1 plane
    return i64([2, 1, 1, 1, n_in, n_in, k, k, 1, 1, 1, 1, p, p])


@pytest.mark.parametrize("k,p", [(BIG, 2**30), (2**32, 2**31)])
def test_huge_pool_window_at_the_c_level_names_op_and_sizes(k, p):
    x, y = buf([1.0]), garbage(1)
    g, gp = _pool_geom(k, p)
    st = lib.tl_max_pool2d(x.handle, y.handle, gp, len(g))
    expect(st, lib.TL_E_TOO_LARGE, "max_pool2d", "kernel window", str(k), "uint32")
    assert y.to_numpy()[0] == 7.25  # nothing ran
    dx = garbage(1)
    st = lib.tl_avg_pool_backward(x.handle, y.handle, dx.handle, gp, len(g))
    expect(st, lib.TL_E_TOO_LARGE, "avg_pool_backward", "kernel window")
    st = lib.tl_smooth_max_pool(x.handle, y.handle, gp, len(g), 1.0)
    expect(st, lib.TL_E_TOO_LARGE, "smooth_max_pool")


def test_pool_overflow_through_the_ops_function_is_a_value_error():
    x = tl.AnyBuffer.from_numpy(np.ones((1, 1, 1)))
    with pytest.raises(ValueError, match="max_pool2d"):
        ops.max_pool2d(x, kernel_size=BIG, padding=2**30)


def test_huge_conv_geometry_at_the_c_level():
    # a 1x1 kernel buffer, but the geometry claims a 2^31 x 2^31 window
    w, b, x, y = buf([1.0]), buf([0.0]), buf([1.0]), garbage(1)
    g, gp = i64([2, 1, 1, 1, 1, 1, BIG, BIG, 1, 1, 1, 1, 2**30, 2**30])
    st = lib.tl_conv2d(w.handle, b.handle, x.handle, y.handle, gp, len(g))
    expect(st, lib.TL_E_TOO_LARGE, "conv2d", "kernel window", "2147483648")
    dk, db, dx = garbage(1), garbage(1), garbage(1)
    st = lib.tl_conv_transpose_backward(w.handle, x.handle, y.handle, dk.handle, db.handle,
                                        dx.handle, gp, len(g))
    expect(st, lib.TL_E_TOO_LARGE, "conv_transpose_backward")
    assert dk.to_numpy()[0] == 7.25 and db.to_numpy()[0] == 7.25


def test_conv_column_buffer_size_is_checked():
    # 65536 channels x a 1x1 window x 65536 output positions: every buffer fits the uint32 limit
    # except the im2col buffer (2^32 elements), which the kernel would allocate
    g, gp = i64([1, 0, 65536, 1, 65536, 1, 65536, 1, 0])
    w, b, x, y = buf(np.zeros(65536)), buf([0.0]), buf(np.zeros(0)), buf(np.zeros(0))
    st = lib.tl_conv(w.handle, b.handle, x.handle, y.handle, gp, len(g))
    expect(st, lib.TL_E_TOO_LARGE, "conv", "im2col buffer", "65536")


def test_malformed_geometry_names_the_array():
    x, y = buf([1.0]), garbage(1)
    g, gp = i64([2, 1, 1, 1, 1])
    expect(lib.tl_max_pool(x.handle, y.handle, gp, len(g)), lib.TL_E_ARG, "max_pool",
           "malformed geom array")
    g, gp = i64([1, 1, 1, 1, 1, 1, 1, 0, 0])  # stride 0
    expect(lib.tl_max_pool(x.handle, y.handle, gp, len(g)), lib.TL_E_ARG, "stride must be >= 1")


# --------------------------------------------------------------------- lengths, handles, sizes
def test_wrong_length_buffer_names_op_buffer_and_lengths():
    a, b, y = buf([1, 2, 3]), buf([1, 2, 3, 4]), garbage(3)
    expect(lib.tl_add(a.handle, b.handle, y.handle, 3), lib.TL_E_SHAPE,
           "add: b must hold 3 elements, got 4")
    a, b, y = buf(np.ones(6)), buf(np.ones(7)), garbage(6)  # (2, 3) @ (3, 2) needs b of 6
    expect(lib.tl_matmul(a.handle, b.handle, y.handle, 2, 3, 2), lib.TL_E_SHAPE,
           "matmul: b must hold 6 elements, got 7")
    assert np.all(y.to_numpy() == 7.25)


def test_null_and_released_handles():
    x, y = buf([1.0, -1.0]), garbage(2)
    expect(lib.tl_relu(ffi.NULL, y.handle, 2), lib.TL_E_ARG, "relu: x is a null buffer")
    expect(lib.tl_relu(x.handle, ffi.NULL, 2), lib.TL_E_ARG, "relu: y is a null buffer")
    dead = buf([1.0, 2.0])
    dead.release()
    expect(lib.tl_relu(dead.handle, y.handle, 2), lib.TL_E_RELEASED, "relu: x was already released")
    assert np.all(y.to_numpy() == 7.25)


def test_negative_and_overflowing_sizes():
    x, y = buf([1.0]), garbage(1)
    expect(lib.tl_relu(x.handle, y.handle, -1), lib.TL_E_ARG, "relu: n must be >= 0, got -1")
    a = buf([1.0])
    expect(lib.tl_matmul(a.handle, a.handle, y.handle, 2**20, 2**20, 1), lib.TL_E_TOO_LARGE,
           "matmul: length of a: 1048576 x 1048576 exceeds the uint32 element limit")
    expect(lib.tl_concat1d(a.handle, a.handle, y.handle, 2**32 - 1, 1), lib.TL_E_TOO_LARGE,
           "concat1d: length of y: 4294967295 + 1")


def test_null_index_array():
    x, y = buf([1.0, 2.0]), garbage(2)
    expect(lib.tl_gather_vec(x.handle, y.handle, 2, ffi.NULL, 2), lib.TL_E_ARG,
           "gather_vec: idx is a null array of length 2")
    g, gp = i64([0])
    expect(lib.tl_gather(x.handle, y.handle, 2, gp, 1), lib.TL_E_SHAPE,
           "gather: y must hold 1 elements, got 2")


def test_requires_conditions_name_the_values():
    x, y = buf([1.0]), garbage(1)
    expect(lib.tl_clamp(x.handle, y.handle, 1, 2.0, 1.0), lib.TL_E_ARG,
           "clamp: expected lo <= hi, got lo=2, hi=1")
    expect(lib.tl_bernoulli_mask(y.handle, 1, 3, 1.5), lib.TL_E_ARG, "p >= 0 and p <= 1", "p=1.5")
    e = buf(np.zeros(0))
    expect(lib.tl_mse_loss(e.handle, e.handle, y.handle, 0), lib.TL_E_ARG, "mse_loss: expected n >= 1")
    expect(lib.tl_smooth_max_pool(x.handle, y.handle, _pool_geom(1, 0)[1], 14, float("nan")),
           lib.TL_E_ARG, "isfinite(b) and b != 0")
    dims_in, pin = i64([3])
    dims_out, pout = i64([2, 4])
    y8 = garbage(8)
    x3 = buf([1, 2, 3])
    expect(lib.tl_broadcast_to(x3.handle, y8.handle, pin, 1, pout, 2), lib.TL_E_ARG,
           "broadcast_to: expected broadcastable(in_dims, out_dims)")
    g, gp = i64([1, 2, 3])
    expect(lib.tl_transpose2d(x.handle, y.handle, gp, 3), lib.TL_E_SHAPE,
           "transpose2d: geom must hold 4 elements, got 3")


# --------------------------------------------------------------------- empty outputs
def test_empty_output_returns_ok_without_running_the_kernel():
    e, y = buf(np.zeros(0)), buf(np.zeros(0))
    b = buf([1.0, 2.0, 3.0])
    assert lib.tl_matmul(e.handle, b.handle, y.handle, 0, 1, 3) == lib.TL_OK, last_error()
    assert lib.tl_relu(e.handle, y.handle, 0) == lib.TL_OK
    # the early return comes after every check: a bad condition is still an error when empty
    expect(lib.tl_clamp(e.handle, y.handle, 0, 2.0, 1.0), lib.TL_E_ARG, "clamp: expected lo <= hi")
    np.testing.assert_array_equal(b.to_numpy(), [1.0, 2.0, 3.0])


def test_one_empty_output_among_non_empty_ones_still_runs():
    # linear_backward_b over zero rows: g is empty but db (3 elements) must become zeros
    g, db = buf(np.zeros(0)), garbage(3)
    assert lib.tl_linear_backward_b(g.handle, db.handle, 0, 3) == lib.TL_OK, last_error()
    np.testing.assert_array_equal(db.to_numpy(), np.zeros(3, np.float32))


def test_sticky_state_is_checked_first_on_every_kernel():
    # On the stub the backend is always ready; a null handle is then the first error reported.
    # (The CUDA sticky path is exercised by tests/test_cuda_runtime.py.)
    expect(lib.tl_layer_norm(ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, 1, 1, 1e-5),
           lib.TL_E_ARG, "layer_norm: x is a null buffer")
