"""The fast paths of op recording keep every check: inline input tests fall back to messages
naming the op, input and shape; equal-shape shortcuts still broadcast or refuse; the cached
element counts still refuse bad shapes; Buffer.__del__ frees each handle exactly once."""
from __future__ import annotations

import copy
import gc
import sys

import numpy as np
import pytest

import torchlean as tl
from torchlean import _opsupport
from torchlean._generated import ops
from torchlean.buffer import AnyBuffer


def buf(*shape, value=1.0):
    return AnyBuffer.from_numpy(np.full(shape, value, np.float32))


def live_buffers() -> int:
    gc.collect()
    return tl.memory_stats()["live_buffers"]


# ------------------------------------------------------------------ buffer-level ops
def test_ops_refuse_a_released_input_naming_op_index_and_shape():
    a, b = buf(3), buf(3)
    b.release()
    with pytest.raises(ValueError, match=r"add: input 1 \(shape \(3,\)\) was already released"):
        ops.add(a, b)
    with pytest.raises(ValueError, match=r"relu: input 0 \(shape \(3,\)\) was already released"):
        ops.relu(b)


def test_a_view_of_a_released_buffer_is_refused():
    a = buf(2, 3)
    v = ops.reshape(a, shape=(6,))
    a.release()
    with pytest.raises(ValueError, match="exp: input 0 .* was already released"):
        ops.exp(v)


@pytest.mark.parametrize("bad", [np.ones(3, np.float32), 1.0, None, "x"])
def test_ops_refuse_non_buffers_naming_the_type(bad):
    with pytest.raises(TypeError, match=f"mul: input 1 must be an AnyBuffer, got {type(bad).__name__}"):
        ops.mul(buf(3), bad)
    with pytest.raises(TypeError, match=f"mul: input 0 must be an AnyBuffer, got {type(bad).__name__}"):
        ops.mul(bad, buf(3))


def test_ops_accept_an_anybuffer_subclass():
    class Mine(AnyBuffer):
        __slots__ = ()

    a = buf(2)
    m = Mine(a.shape, a.buf, owns=False)
    np.testing.assert_array_equal(ops.add(m, a).to_numpy(), [2, 2])


def test_broadcast_shortcut_still_broadcasts_and_refuses():
    y = ops.add(buf(2, 3, value=1.0), buf(3, value=2.0))
    assert y.shape == (2, 3)
    np.testing.assert_array_equal(y.to_numpy(), np.full((2, 3), 3.0))
    y = ops.mul(buf(1, 4, value=2.0), buf(3, 1, value=3.0))
    assert y.shape == (3, 4)
    with pytest.raises(ValueError, match=r"add: shapes \(2, 3\) and \(4,\) cannot be broadcast "
                                         r"together \(got a \(2, 3\), b \(4,\)\)"):
        ops.add(buf(2, 3), buf(4))


def test_same_shape_shortcut_still_refuses_mismatches():
    with pytest.raises(ValueError, match=r"relu_backward: shapes must be equal, got \(3,\) and "
                                         r"\(4,\) \(got x \(3,\), g \(4,\)\)"):
        ops.relu_backward(buf(3), buf(4))


def test_broadcast_temporaries_are_released():
    a, b = buf(64, 32), buf(32)
    before = live_buffers()
    y = ops.add(a, b)
    assert live_buffers() == before + 1  # only the output survives
    y.release()


def test_alloc_refuses_bad_shapes_even_after_caching_good_ones():
    _opsupport.alloc("t", (2, 3)).release()
    _opsupport.alloc("t", (2, 3)).release()  # served from the count cache
    with pytest.raises(ValueError, match=r"t: shape \(-1, -2\) must hold non-negative ints"):
        _opsupport.alloc("t", (-1, -2))
    with pytest.raises(ValueError, match="exceeds the uint32 element limit"):
        _opsupport.alloc("t", (0, 2**33))
    with pytest.raises(ValueError, match="over the uint32 element limit"):
        _opsupport.alloc("t", (2**16, 2**16 + 1))
    y = _opsupport.alloc("t", [4, 2])  # a list is normalised to a tuple
    assert y.shape == (4, 2) and y.numel == 8


def test_count_cache_is_bounded():
    for k in range(_opsupport._COUNTS_MAX + 10):
        _opsupport.alloc("t", (k % 7, k)).release()
    assert len(_opsupport._counts) <= _opsupport._COUNTS_MAX


# ------------------------------------------------------------------ attrs
def test_float_attr_fast_path_keeps_its_checks():
    x = buf(3)
    np.testing.assert_allclose(ops.scale(x, c=2.5).to_numpy(), 2.5)
    np.testing.assert_allclose(ops.scale(x, c=2).to_numpy(), 2.0)            # an int is a real
    np.testing.assert_allclose(ops.scale(x, c=np.float32(0.5)).to_numpy(), 0.5)
    with pytest.raises(TypeError, match="scale: c must be a real number, got bool"):
        ops.scale(x, c=True)
    with pytest.raises(TypeError, match="scale: c must be a real number, got str"):
        ops.scale(x, c="2")
    with pytest.raises(ValueError, match="scale: c must be a finite number, got nan"):
        ops.scale(x, c=float("nan"))


def test_int_and_shape_attrs_keep_their_checks():
    x = buf(2, 3)
    assert ops.reshape(x, shape=(3, 2)).shape == (3, 2)
    assert ops.reshape(x, shape=[np.int64(6)]).shape == (6,)
    with pytest.raises(TypeError, match="reshape: shape must be a tuple of ints, got str"):
        ops.reshape(x, shape="ab")
    assert ops.reduce_sum(x, axis=np.int64(1)).shape == (2,)
    with pytest.raises(TypeError, match="reduce_sum: axis must be an int, got bool"):
        ops.reduce_sum(x, axis=True)
    with pytest.raises(TypeError, match="reduce_sum: axis must be an int, got float"):
        ops.reduce_sum(x, axis=1.0)


# ------------------------------------------------------------------ tape
@pytest.fixture
def tape():
    t = tl.Tape()
    yield t
    t.release()


def test_tape_refuses_bad_node_ids(tape):
    a = tape.leaf(np.ones(2, np.float32))
    with pytest.raises(ValueError, match=r"add: node id 5 is not on this tape \(it has 1 nodes\)"):
        tape.add(a, 5)
    with pytest.raises(ValueError, match="add: node id -1 is not on this tape"):
        tape.add(-1, a)
    with pytest.raises(TypeError, match="relu: node ids are ints, got float"):
        tape.relu(0.0)
    with pytest.raises(TypeError, match="relu: node ids are ints, got str"):
        tape.relu("0")
    with pytest.raises(TypeError, match="relu: node ids are ints, got NoneType"):
        tape.relu(None)
    assert len(tape) == 1  # nothing was recorded


def test_tape_accepts_numpy_integer_ids(tape):
    a = tape.leaf(np.ones(2, np.float32))
    y = tape.add(np.int64(a), np.int32(a))
    np.testing.assert_array_equal(tape.value(y).to_numpy(), [2, 2])


def test_tape_refuses_a_released_node(tape):
    a = tape.leaf(np.ones(2, np.float32))
    b = tape.leaf(np.ones(2, np.float32))
    tape.value(b).release()
    with pytest.raises(ValueError, match=r"mul: node 1 \(shape \(2,\)\) was released"):
        tape.mul(a, b)


def test_tape_broadcast_mismatch_names_op_and_shapes(tape):
    a = tape.leaf(np.ones((2, 3), np.float32))
    b = tape.leaf(np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"sub: shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        tape.sub(a, b)


def test_no_grad_nodes_keep_nothing(tape):
    x = tape.leaf(np.ones((2, 4), np.float32))
    g = tape.leaf(np.ones(4, np.float32))
    b = tape.leaf(np.zeros(4, np.float32))
    before = live_buffers()
    with tl.no_grad():
        y = tape.layer_norm(x, g, b)
        z = tape.mul(x, x)
    for i in (y, z):
        node = tape.nodes[i]
        assert not node.requires_grad and node.vjp is None
        assert node.saved == {} and node.cleanup == ()
    assert live_buffers() == before + 2  # the residuals xhat and inv_std were released


def test_residuals_are_owned_by_nodes_that_need_them(tape):
    x = tape.leaf(np.arange(8, dtype=np.float32).reshape(2, 4))
    g = tape.leaf(np.ones(4, np.float32))
    b = tape.leaf(np.zeros(4, np.float32))
    y = tape.layer_norm(x, g, b)
    node = tape.nodes[y]
    assert node.requires_grad and len(node.cleanup) == 2
    assert set(node.saved) == {"gamma", "beta", "xhat", "inv_std"}   # beta: to recompute y
    s = tape.sum(y)
    grads = tape.backward(s, wrt=[x, g, b])
    np.testing.assert_allclose(grads[b].to_numpy(), 2.0)
    for v in grads.values():
        v.release()


def test_parents_without_grad_record_no_vjp(tape):
    a = tape.leaf(np.ones(2, np.float32), requires_grad=False)
    b = tape.leaf(np.ones(2, np.float32), requires_grad=False)
    node = tape.nodes[tape.mul(a, b)]
    assert not node.requires_grad and node.vjp is None and node.saved == {}
    c = tape.leaf(np.ones(2, np.float32))
    node = tape.nodes[tape.mul(a, c)]
    assert node.requires_grad and node.vjp is not None
    assert set(node.saved) == {"a", "b", "input_shapes"}   # broadcast: inputs' shapes too


# ------------------------------------------------------------------ Buffer lifetime
def test_dropping_buffers_frees_their_handles():
    before = live_buffers()
    t = tl.Tape()
    a = t.leaf(np.ones(3, np.float32))
    for _ in range(10):
        t.add(a, a)
    assert live_buffers() == before + 11
    del t
    assert live_buffers() == before


def test_a_view_keeps_the_payload_alive():
    before = live_buffers()
    a = buf(2, 3, value=4.0)
    v = ops.reshape(a, shape=(6,))
    del a
    assert live_buffers() == before + 1
    np.testing.assert_array_equal(v.to_numpy(), np.full(6, 4.0))
    del v
    assert live_buffers() == before


def test_release_then_drop_frees_once():
    before = live_buffers()
    a = buf(5)
    assert a.release() == 1 and a.release() == 0
    del a
    assert live_buffers() == before


def test_buffer_copy_semantics_never_double_free():
    unraisable = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        before = live_buffers()
        a = buf(3)
        assert copy.copy(a.buf) is a.buf
        c = copy.copy(a)  # a shallow AnyBuffer copy shares the Buffer
        assert c.buf is a.buf
        with pytest.raises(TypeError, match="cannot be deep-copied"):
            copy.deepcopy(a)
        del a, c
        assert live_buffers() == before
    finally:
        sys.unraisablehook = old_hook
    assert unraisable == []
