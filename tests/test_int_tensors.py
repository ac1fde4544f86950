"""int64 tensors as PyTorch's: values int64 cannot hold raise instead of wrapping, integer
division by zero raises, int64 matmul and clamp promote as torch, and cat / stack / where /
gather / repeat / tile / flip / roll / item assignment keep int64 (mixed with float32: float32).
References: NumPy int64 arithmetic and closed forms; torch as an extra check where installed."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean import IntTensor
from torchlean.errors import Int64OverflowError, IntegerDivisionByZero

RNG = np.random.default_rng(33)


def I(a):
    return IntTensor(np.asarray(a, dtype=np.int64))


def _a(t):
    return np.asarray(t.numpy())


# ------------------------------------------------------------------ values int64 cannot hold
def test_uint64_past_int64_raises_and_below_converts():
    with pytest.raises(RuntimeError, match=r"IntTensor: value 9223372036854775808 cannot be "
                                           r"converted to type int64_t without overflow"):
        IntTensor(np.array([1, 2 ** 63], np.uint64))
    assert _a(IntTensor(np.array([0, 2 ** 63 - 1], np.uint64))).tolist() == [0, 2 ** 63 - 1]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e20, -1e19,
                                 2.0 ** 63])
def test_float_that_int64_cannot_hold_raises_on_item_assignment(bad):
    x = I([5, 6, 7])
    with pytest.raises(RuntimeError, match=r"__setitem__: value .* cannot be converted to type "
                                           r"int64_t without overflow"):
        x[1] = bad
    assert _a(x).tolist() == [5, 6, 7]          # nothing written


def test_float_item_assignment_truncates_toward_zero_as_torch():
    x = I([5, 6, 7, 8])
    x[0] = 1.7
    x[1] = -1.7
    x[2:] = np.array([2.9, -0.5])
    assert _a(x).tolist() == [1, -1, 2, 0]
    x[:] = tl.tensor([3.5, -3.5, 0.25, 9.0])     # a float Tensor's values, truncated
    assert _a(x).tolist() == [3, -3, 0, 9]
    assert x.dtype == tl.int64


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e20, -1e20])
def test_float_tensor_long_raises_for_values_int64_cannot_hold(bad):
    with pytest.raises(RuntimeError, match="long: value .* cannot be converted to type int64_t"):
        tl.tensor([1.0, bad]).long()
    assert _a(tl.tensor([2.5, -2.5, 1e18]).long()).tolist() == [2, -2, int(np.float32(1e18))]


def test_int64_overflow_error_is_runtime_and_overflow_error():
    x = I([5])
    for big in (2 ** 63, -(2 ** 63) - 1, 2 ** 70):
        with pytest.raises(RuntimeError, match="__add__: value .* cannot be converted"):
            x + big
        with pytest.raises(OverflowError):
            big * x
    assert issubclass(Int64OverflowError, RuntimeError)
    # in range: int64 arithmetic, wrapping as torch's (and NumPy's) int64
    assert _a(x + (2 ** 63 - 6)).tolist() == [2 ** 63 - 1]
    assert _a(I([2 ** 62]) + 2 ** 62).tolist() == [-(2 ** 63)]


# ------------------------------------------------------------------ integer division by zero
@pytest.mark.parametrize("op", ["//", "%"])
def test_integer_division_by_zero_raises_zero_division_error(op):
    x = I([7, -7, 0])
    f = (lambda a, b: a // b) if op == "//" else (lambda a, b: a % b)
    for den in (0, I([1, 0, 2]), np.array([0, 1, 1])):
        with pytest.raises(ZeroDivisionError, match="ZeroDivisionError"):
            f(x, den)
        with pytest.raises(RuntimeError):        # torch's kind as well
            f(x, den)
    with pytest.raises(IntegerDivisionByZero):
        f(7, I([0]))
    # no zero: floor semantics of Python (and torch): -7 // 2 == -4, -7 % 3 == 2
    assert _a(f(I([-7, 7]), I([2, -3]))).tolist() == [f(-7, 2), f(7, -3)]


def test_integer_by_float_zero_is_float_division():
    y = I([5, -5, 0]) // 0.0
    assert y.dtype == tl.float32
    got = _a(y)
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])


# ------------------------------------------------------------------ matmul and clamp
def test_int64_matmul_matches_numpy_int64():
    a = RNG.integers(-50, 50, size=(3, 5))
    b = RNG.integers(-50, 50, size=(5, 2))
    got = I(a) @ I(b)
    assert got.dtype == tl.int64
    assert _a(got).tolist() == (a @ b).tolist()
    v = RNG.integers(-9, 9, size=5)
    assert _a(I(a) @ I(v)).tolist() == (a @ v).tolist()
    bat = RNG.integers(-9, 9, size=(4, 5, 3))
    assert _a(I(a) @ I(bat)).tolist() == (a @ bat).tolist()
    with pytest.raises(ValueError, match=r"matmul: shapes \(3, 5\) and \(2, 5\)"):
        I(a) @ I(b.T)
    with pytest.raises(RuntimeError, match="matmul: expected both operands to have the same "
                                           "dtype"):
        I(a) @ tl.tensor(np.ones((5, 2)))


def test_clamp_integer_bounds_keep_int64_float_bounds_promote():
    x = I([0, 1, 3, -4])
    y = x.clamp(min=1)
    assert y.dtype == tl.int64 and _a(y).tolist() == [1, 1, 3, 1]
    assert _a(x.clamp(max=0)).tolist() == [0, 0, 0, -4]
    f = x.clamp(min=1.5)
    assert f.dtype == tl.float32
    np.testing.assert_array_equal(_a(f), np.array([1.5, 1.5, 3.0, 1.5], np.float32))
    f2 = tl.clamp(x, -0.5, 2.5)
    np.testing.assert_array_equal(_a(f2), np.array([0.0, 1.0, 2.5, -0.5], np.float32))
    with pytest.raises(ValueError, match="clamp: at least one"):
        x.clamp()


# ------------------------------------------------------------------ joins and shape ops
def test_cat_and_stack_of_int64_stay_int64():
    a = RNG.integers(-9, 9, size=(2, 3))
    b = RNG.integers(-9, 9, size=(1, 3))
    got = tl.cat([I(a), I(b)])
    assert got.dtype == tl.int64 and _a(got).tolist() == np.concatenate([a, b]).tolist()
    got = tl.cat([I(a), I(a)], dim=-1)
    assert _a(got).tolist() == np.concatenate([a, a], axis=1).tolist()
    got = tl.stack([I(a), I(a)], dim=1)
    assert got.dtype == tl.int64 and _a(got).tolist() == np.stack([a, a], axis=1).tolist()
    # bool with int64: int64; bool with bool: bool (torch's promotion)
    m = I(a) > 0
    assert tl.cat([m, I(a)]).dtype == tl.int64
    assert tl.cat([m, m]).dtype == tl.bool
    assert _a(tl.cat([m, I(a)])).tolist() == np.concatenate([a > 0, a]).astype(int).tolist()
    with pytest.raises(ValueError, match="cat: shapes"):
        tl.cat([I(a), I(a.T)])
    with pytest.raises(ValueError, match="stack: expects each tensor to be equal size"):
        tl.stack([I(a), I(b)])


def test_cat_and_stack_of_int_with_float_promote_to_float32():
    a = RNG.integers(-9, 9, size=(2, 3))
    f = RNG.standard_normal((2, 3)).astype(np.float32)
    got = tl.cat([I(a), tl.tensor(f)])
    assert got.dtype == tl.float32
    np.testing.assert_array_equal(_a(got), np.concatenate([a.astype(np.float32), f]))
    got = tl.stack([tl.tensor(f), I(a)])
    np.testing.assert_array_equal(_a(got), np.stack([f, a.astype(np.float32)]))


def test_where_with_int64_values():
    a = RNG.integers(-9, 9, size=(3, 4))
    b = RNG.integers(-9, 9, size=(4,))
    cond = a > 0
    got = tl.where(I(a) > 0, I(a), I(b))
    assert got.dtype == tl.int64 and _a(got).tolist() == np.where(cond, a, b).tolist()
    got = tl.where(I(a) > 0, I(a), 0)             # a Python int keeps int64
    assert got.dtype == tl.int64 and _a(got).tolist() == np.where(cond, a, 0).tolist()
    got = tl.where(tl.tensor(a.astype(np.float32)) > 0, I(a), -1)   # torchlean's 0/1 mask
    assert _a(got).tolist() == np.where(cond, a, -1).tolist()
    got = tl.where(I(a) > 0, I(a), 0.5)           # a float promotes to float32
    assert got.dtype == tl.float32
    np.testing.assert_array_equal(_a(got), np.where(cond, a, 0.5).astype(np.float32))
    f = RNG.standard_normal((3, 4)).astype(np.float32)
    got = tl.where(I(a) > 0, tl.tensor(f), I(a))
    np.testing.assert_array_equal(_a(got), np.where(cond, f, a.astype(np.float32)))


def test_gather_of_int64():
    a = RNG.integers(-99, 99, size=(3, 5))
    idx = RNG.integers(0, 5, size=(3, 2))
    got = I(a).gather(1, I(idx))
    assert got.dtype == tl.int64
    assert _a(got).tolist() == np.take_along_axis(a, idx, 1).tolist()
    idx0 = RNG.integers(0, 3, size=(2, 4))     # smaller than the input off dim: allowed
    assert _a(tl.gather(I(a), 0, I(idx0))).tolist() == \
        np.take_along_axis(a[:, :4], idx0, 0).tolist()
    with pytest.raises(IndexError, match="gather: index out of range"):
        I(a).gather(1, I([[5], [0], [0]]))
    with pytest.raises(IndexError, match="gather: index out of range"):
        I(a).gather(1, I([[-1], [0], [0]]))
    with pytest.raises(TypeError, match="gather: index must be an int64 tensor"):
        I(a).gather(1, tl.tensor([[0.0]]))
    with pytest.raises(ValueError, match="gather: index of shape"):
        I(a).gather(1, I([0, 1]))


def test_repeat_tile_flip_roll_of_int64():
    a = RNG.integers(-9, 9, size=(2, 3))
    x = I(a)
    assert _a(x.repeat(2, 1)).tolist() == np.tile(a, (2, 1)).tolist()
    assert _a(x.repeat(2, 1, 3)).tolist() == np.tile(a, (2, 1, 3)).tolist()
    assert x.repeat((1, 2)).shape == (2, 6)
    assert _a(x.tile((2,))).tolist() == np.tile(a, (1, 2)).tolist()
    assert _a(x.flip(0)).tolist() == a[::-1].tolist()
    assert _a(x.flip((0, 1))).tolist() == a[::-1, ::-1].tolist()
    assert _a(x.roll(1)).tolist() == np.roll(a.reshape(-1), 1).reshape(2, 3).tolist()
    assert _a(x.roll((1, -1), (0, 1))).tolist() == np.roll(a, (1, -1), (0, 1)).tolist()
    for r in (x.repeat(2, 1), x.tile((2,)), x.flip(0), x.roll(1, 0)):
        assert r.dtype == tl.int64
    with pytest.raises(ValueError, match="repeat: 1 repeat counts"):
        x.repeat(2)
    with pytest.raises(TypeError, match="repeat: repeat counts must be ints"):
        x.repeat(2.0, 1)
    with pytest.raises(ValueError, match="flip: dims .* name an axis twice"):
        x.flip((0, 0))
    with pytest.raises(IndexError, match="flip: dim 2 is out of range"):
        x.flip(2)
    with pytest.raises(ValueError, match="roll: shifts .* and dims .* must align"):
        x.roll((1, 1), (0,))


def test_item_assignment_forms_on_int64():
    a = np.arange(12).reshape(3, 4)
    x = I(a.copy())
    x[0, :2] = 100
    a[0, :2] = 100
    x[I([1, 2]), 3] = I([-1, -2])
    a[[1, 2], 3] = [-1, -2]
    x[x > 8] = 0
    a[a > 8] = 0
    x[..., 1] = np.array([7, 8, 9])
    a[..., 1] = [7, 8, 9]
    assert _a(x).tolist() == a.tolist()
    with pytest.raises(IndexError, match="__setitem__"):
        x[5] = 1
    with pytest.raises(RuntimeError, match=r"__setitem__: shape mismatch: a value of shape "
                                           r"\(3,\)"):
        x[0] = I([1, 2, 3])
    m = x > 0                                     # a bool tensor: nonzero writes True
    m[0] = 0
    assert m.dtype == tl.bool and not _a(m)[0].any()


def test_against_torch_where_installed():
    torch = pytest.importorskip("torch")
    a = RNG.integers(-9, 9, size=(3, 4))
    ta = torch.tensor(a)
    assert _a(tl.cat([I(a), I(a)], 1)).tolist() == torch.cat([ta, ta], 1).tolist()
    assert _a(I(a).roll((1, 2), (0, 1))).tolist() == ta.roll((1, 2), (0, 1)).tolist()
    assert _a(I(a).repeat(1, 2, 2)).tolist() == ta.repeat(1, 2, 2).tolist()
    assert _a(I(a).clamp(min=1.5)).tolist() == ta.clamp(min=1.5).tolist()
    assert _a(I(a) // I(np.where(a == 0, 3, a))).tolist() == \
        (ta // torch.tensor(np.where(a == 0, 3, a))).tolist()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ta // 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        I(a) // 0


def test_integer_pow_and_expand_as_torch():
    a = np.array([2, 3, -2, 1, -1, 0])
    x = I(a)
    assert (x ** 2).dtype == tl.int64 and _a(x ** 2).tolist() == (a ** 2).tolist()
    assert _a(2 ** I([0, 1, 10])).tolist() == [1, 2, 1024]
    # a negative exponent inside a tensor: 0, except bases 1 and -1 (torch's integer pow)
    e = np.array([1, 2, -1, -3, -3, 2])
    assert _a(x ** I(e)).tolist() == [2, 9, 0, 1, -1, 0]
    assert _a(I([2]) ** 63).tolist() == [-(2 ** 63)]            # wraps as int64
    with pytest.raises(RuntimeError, match="__pow__: Integers to negative integer powers"):
        x ** -1
    f = x ** 0.5
    assert f.dtype == tl.float32
    np.testing.assert_allclose(_a(f)[:2], np.sqrt([2.0, 3.0]), rtol=1e-6)
    assert np.isnan(_a(f)[2])
    assert _a(I([1, 2]).expand(3, -1)).tolist() == [[1, 2]] * 3
    with pytest.raises(ValueError, match="expand: shape"):
        I([1, 2]).expand(3, 3)
