"""torch.nonzero_static, torch.masked.median and Tensor.resize_ / resize_as_ as torch's.
References: NumPy (argwhere, sorting the kept values of each slice in float64) and the rules
torch documents; torch itself only as an extra check where installed."""
import math

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn
from torchlean.int_tensor import IntTensor


def _data(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)


# ----------------------------------------------------------------------- nonzero_static
def _nonzero_static_ref(a, size, fill):
    rows = np.argwhere(a)[:size]
    out = np.full((size, a.ndim), fill, np.int64)
    out[:len(rows)] = rows
    return out


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 4)])
@pytest.mark.parametrize("size", [0, 1, 3, 40])
@pytest.mark.parametrize("fill", [-1, 7])
def test_nonzero_static_pads_or_truncates_nonzero(shape, size, fill):
    rng = np.random.default_rng(len(shape) * 100 + size)
    a = (rng.uniform(size=shape) < 0.4).astype(np.float32) * rng.uniform(1, 2, size=shape)
    a = np.asarray(a, np.float32)
    got = tl.nonzero_static(tl.tensor(a), size=size, fill_value=fill)
    assert isinstance(got, IntTensor) and got.numpy().dtype == np.int64
    assert tuple(got.shape) == (size, len(shape))
    np.testing.assert_array_equal(got.numpy(), _nonzero_static_ref(a, size, fill))
    np.testing.assert_array_equal(tl.tensor(a).nonzero_static(size=size, fill_value=fill).numpy(),
                                  got.numpy())


def test_nonzero_static_on_int_and_bool_tensors_and_bad_sizes():
    i = IntTensor(np.array([[0, 3], [-1, 0]], np.int64))
    np.testing.assert_array_equal(i.nonzero_static(size=3).numpy(), [[0, 1], [1, 0], [-1, -1]])
    b = tl.tensor(np.array([0.0, 1.0, 2.0])) > 0.5
    np.testing.assert_array_equal(tl.nonzero_static(b, size=1).numpy(), [[1]])
    x = tl.tensor(np.zeros(4, np.float32))
    np.testing.assert_array_equal(tl.nonzero_static(x, size=2, fill_value=0).numpy(), [[0], [0]])
    with pytest.raises(RuntimeError, match="nonzero_static: 'size' must be an non-negative"):
        tl.nonzero_static(x, size=-1)
    with pytest.raises(TypeError):
        tl.nonzero_static(x)                     # size is keyword-only and required
    with pytest.raises(TypeError, match="fill_value must be an int"):
        tl.nonzero_static(x, size=1, fill_value=0.5)


def test_nonzero_static_matches_torch_where_installed():
    torch = pytest.importorskip("torch")
    a = np.array([[0, 1.5, 0], [2, 0, 3]], np.float32)
    for size in (0, 2, 5):
        want = torch.nonzero_static(torch.tensor(a), size=size, fill_value=-4).numpy()
        np.testing.assert_array_equal(tl.nonzero_static(tl.tensor(a), size=size,
                                                        fill_value=-4).numpy(), want)


# ----------------------------------------------------------------------- masked.median
def _masked_median_ref(a, mask, dim, keepdim):
    """The lower median of each slice's kept, non-NaN values (float64); NaN where none."""
    a = np.asarray(a, np.float64)
    m = np.ones(a.shape, bool) if mask is None else np.broadcast_to(mask, a.shape)
    am, mm = np.moveaxis(a, dim, -1), np.moveaxis(m, dim, -1)
    out = np.full(am.shape[:-1], np.nan)
    for idx in np.ndindex(out.shape):
        v = np.sort(am[idx][mm[idx] & ~np.isnan(am[idx])])
        if v.size:
            out[idx] = v[(v.size - 1) // 2]
    return np.expand_dims(out, dim) if keepdim else out


@pytest.mark.parametrize("shape, dim", [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -1),
                                        ((2, 3, 4), 1), ((1, 1), 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_masked_median_is_the_lower_median_of_the_kept_values(shape, dim, keepdim):
    rng = np.random.default_rng(sum(shape) + dim)
    a = _data(*shape, seed=dim + 3)
    a.flat[::5] = np.nan                         # NaN in input is skipped too, as torch's
    mask = rng.uniform(size=shape) < 0.6
    got = tl.masked.median(tl.tensor(a), dim, keepdim=keepdim, mask=tl.tensor(mask) > 0.5)
    np.testing.assert_array_equal(got.numpy(), _masked_median_ref(a, mask, dim, keepdim))
    plain = tl.masked.median(tl.tensor(a), dim, keepdim=keepdim)
    np.testing.assert_array_equal(plain.numpy(), _masked_median_ref(a, None, dim, keepdim))


def test_masked_median_default_dim_broadcast_mask_gradient_and_empty_slices():
    a = np.array([[3.0, 1.0, 2.0, 9.0], [5.0, 4.0, 7.0, 6.0]], np.float32)
    x = tl.tensor(a, requires_grad=True)
    row_mask = np.array([[True, True, False, True]])          # broadcast over the rows
    y = tl.masked.median(x, mask=tl.tensor(row_mask) > 0.5)  # dim=-1 by default
    np.testing.assert_array_equal(y.numpy(), [3.0, 5.0])
    y.sum().backward()                                       # to the chosen element only
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 0, 0, 0], [1, 0, 0, 0]])
    none = tl.masked.median(tl.tensor(a), 1, mask=tl.tensor(np.zeros((2, 4))) > 0.5)
    assert np.all(np.isnan(none.numpy()))
    assert tl.masked.median(tl.tensor(a), (0,)).shape == (4,)
    with pytest.raises(RuntimeError, match="masked.median: dim must be one int"):
        tl.masked.median(tl.tensor(a), (0, 1))
    with pytest.raises(RuntimeError, match="masked.median"):
        tl.masked.median(tl.tensor(a), 1, mask=tl.tensor(np.ones((3, 4))) > 0.5)


def test_masked_median_matches_torch_where_installed():
    torch = pytest.importorskip("torch")
    a = _data(3, 6, seed=9)
    m = np.random.default_rng(2).uniform(size=(3, 6)) < 0.5
    want = torch.masked.median(torch.tensor(a), 1, mask=torch.tensor(m)).numpy()
    np.testing.assert_array_equal(tl.masked.median(tl.tensor(a), 1,
                                                   mask=tl.tensor(m) > 0.5).numpy(), want)


# ----------------------------------------------------------------------- resize_
def test_resize_with_the_same_count_reshapes_in_place_keeping_the_storage():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = tl.tensor(a)
    alias = x.detach()
    buf = x._node().value.buf
    v0 = getattr(buf, "version", 0)
    assert x.resize_(3, 2) is x and tuple(x.shape) == (3, 2)
    np.testing.assert_array_equal(x.numpy(), a.reshape(3, 2))
    assert x._node().value.buf is buf and getattr(buf, "version", 0) == v0   # no bump, as torch
    x.add_(1.0)                                   # the alias still shares the storage
    np.testing.assert_array_equal(alias.numpy(), a + 1)
    x.resize_([6])
    np.testing.assert_array_equal(x.numpy(), a.reshape(-1) + 1)
    x.resize_((1, 6, 1))
    assert tuple(x.shape) == (1, 6, 1)
    assert x.resize_(1, 6, 1) is x


@pytest.mark.parametrize("old, new", [((5,), (2, 4)), ((2, 3), (7,)), ((3, 3), (2, 2)),
                                      ((4,), ()), ((), (3,)), ((3,), (0,)), ((0,), (2, 1))])
def test_resize_to_another_count_keeps_the_leading_values_and_zero_fills(old, new):
    a = (np.arange(math.prod(old), dtype=np.float32) + 1).reshape(old)
    x = tl.tensor(a)
    x.resize_(*new)
    assert tuple(x.shape) == new
    n = min(math.prod(old), math.prod(new))
    want = np.zeros(math.prod(new), np.float32)
    want[:n] = a.reshape(-1)[:n]
    np.testing.assert_array_equal(x.numpy(), want.reshape(new))
    y = x * 2.0                                   # an ordinary tensor afterwards
    np.testing.assert_array_equal(y.numpy(), 2 * want.reshape(new))


def test_resize_as_takes_the_template_shape():
    x = tl.tensor(np.arange(4, dtype=np.float32))
    t = tl.tensor(np.zeros((2, 3), np.float32))
    assert x.resize_as_(t) is x and tuple(x.shape) == (2, 3)
    np.testing.assert_array_equal(x.numpy(), [[0, 1, 2], [3, 0, 0]])
    x.resize_as_(IntTensor(np.zeros((3, 2), np.int64)))
    assert tuple(x.shape) == (3, 2)


def test_resize_refuses_what_torch_or_torchlean_does_not_resize():
    g = tl.tensor(np.ones(3, np.float32), requires_grad=True)
    for t in (g, g * 2.0):
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            t.resize_(2)
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            t.resize_as_(tl.tensor(np.ones(2)))
    with tl.no_grad():
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            g.resize_(4)
    assert tuple(g.shape) == (3,)
    p = nn.Parameter(np.zeros(3, np.float32))
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        p.resize_(2)
    p.requires_grad_(False)
    with pytest.raises(RuntimeError, match="resize_: torchlean does not resize a Parameter"):
        p.resize_(2)
    base = tl.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(RuntimeError, match="resize_: torchlean does not resize a view"):
        base[0].resize_(3)
    v = base[1]
    with pytest.raises(RuntimeError, match="resize_: views of this tensor"):
        base.resize_(6)
    del v
    x = tl.tensor(np.zeros(3, np.float32))
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        x.resize_(2, -1)
    with pytest.raises(TypeError, match="resize_: sizes must be ints"):
        x.resize_(2.0)
    with pytest.raises(RuntimeError, match="memory_format"):
        x.resize_(3, memory_format="channels_last")
    assert tuple(x.shape) == (3,)
