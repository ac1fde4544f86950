"""torch's sorting and running ops (torchlean/catalog/sorting.py) against float64 / int64 NumPy
references: stable order with ties, NaN and signed zeros, odd sizes, size 1, empty, negative
dims; gradients against closed forms and central differences; bad input."""
import numpy as np
import pytest
from running_order import chunked_running

import torchlean as tl

rng = np.random.default_rng(32)
NAN = np.float32("nan")


def ties(*shape):
    """Whole numbers in [-3, 3]: many ties."""
    return rng.integers(-3, 4, size=shape).astype(np.float32)


def with_specials(*shape):
    x = ties(*shape).reshape(-1)
    if x.size >= 4:
        x[1], x[-2] = NAN, -0.0
        x[x.size // 2] = NAN
    return x.reshape(shape)


def ref_argsort(x, axis, descending):
    """Stable positions along axis: NaN largest, -0 == +0 (NumPy's own comparisons)."""
    def one(row):
        nan = np.isnan(row)
        val = np.where(nan, 0.0, row.astype(np.float64))
        if descending:
            return np.lexsort((-val, ~nan))
        return np.lexsort((val, nan))
    return np.apply_along_axis(one, axis, x)


def same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert a.shape == b.shape
    assert np.array_equal(a.view(np.int32), b.view(np.int32)), (a, b)


SORT_CASES = [((7,), -1), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -2), ((2, 3, 4), 0), ((1,), 0),
              ((4, 1), 1), ((5, 300), -1), ((0,), 0), ((2, 0, 3), 1)]


@pytest.mark.parametrize("shape,dim", SORT_CASES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_with_torch_nan_order(shape, dim, descending):
    x = with_specials(*shape)
    v, i = tl.tensor(x).sort(dim, descending=descending)
    want = ref_argsort(x, dim, descending) if x.size else np.zeros(shape, np.int64)
    assert i.dtype == tl.int64 and np.array_equal(i.numpy(), want)
    same_bits(v.numpy(), np.take_along_axis(x, want, dim))
    assert np.array_equal(tl.argsort(tl.tensor(x), dim, descending).numpy(), want)


def test_sort_0d_msort_and_stable_flag():
    v, i = tl.sort(tl.tensor(np.float32(2.5)))
    assert v.shape == () and float(v.numpy()) == 2.5 and i.numpy() == 0
    x = ties(5, 3)
    same_bits(tl.msort(tl.tensor(x)).numpy(), np.sort(x, axis=0, kind="stable"))
    v, i = tl.sort(tl.tensor(x), stable=True, dim=0)
    assert np.array_equal(i.numpy(), np.argsort(x, axis=0, kind="stable"))


def test_sort_gradient_goes_back_to_the_positions():
    x = rng.standard_normal((3, 6)).astype(np.float32)
    w = rng.standard_normal((3, 6)).astype(np.float32)
    t = tl.tensor(x, requires_grad=True)
    v, i = t.sort(1, descending=True)
    (v * tl.tensor(w)).sum().backward()
    want = np.zeros_like(x)
    np.put_along_axis(want, i.numpy(), w, 1)
    same_bits(t.grad, want)


@pytest.mark.parametrize("shape,dim,k", [((7,), 0, 3), ((3, 5), 1, 5), ((4, 6), 0, 1),
                                         ((2, 3, 4), -2, 2), ((1,), 0, 1), ((3, 4), 1, 0)])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_a_stable_sort(shape, dim, k, largest):
    x = with_specials(*shape)
    v, i = tl.tensor(x).topk(k, dim, largest=largest)
    want = np.take(ref_argsort(x, dim, largest), np.arange(k), axis=dim)
    assert np.array_equal(i.numpy(), want)
    same_bits(v.numpy(), np.take_along_axis(x, want, dim))


def test_topk_gradient_and_kthvalue():
    x = rng.standard_normal((4, 7)).astype(np.float32)
    t = tl.tensor(x, requires_grad=True)
    v, i = t.topk(3)
    v.sum().backward()
    want = np.zeros_like(x)
    np.put_along_axis(want, i.numpy(), 1.0, 1)
    same_bits(t.grad, want)
    xs = ties(5, 9)
    for k in (1, 4, 9):
        v, i = tl.tensor(xs).kthvalue(k, 1)
        order = np.argsort(xs, axis=1, kind="stable")[:, k - 1]
        assert np.array_equal(i.numpy(), order)
        same_bits(v.numpy(), np.sort(xs, axis=1)[:, k - 1])
    v, i = tl.kthvalue(tl.tensor(xs), 2, 0, keepdim=True)
    assert v.shape == (1, 9) and i.shape == (1, 9)
    same_bits(v.numpy(), np.sort(xs, axis=0)[1:2])


@pytest.mark.parametrize("n", [1, 2, 5, 6, 301])
def test_median_is_the_lower_middle(n):
    x = rng.standard_normal((3, n)).astype(np.float32)
    v, i = tl.tensor(x).median(1)
    want = np.sort(x, axis=1)[:, (n - 1) // 2]
    same_bits(v.numpy(), want)
    same_bits(np.take_along_axis(x, i.numpy()[:, None], 1)[:, 0], want)
    same_bits(tl.median(tl.tensor(x)).numpy(), np.sort(x.reshape(-1))[(x.size - 1) // 2])


def test_median_and_nanmedian_with_nan():
    x = np.array([[1, NAN, 3, NAN], [4, 2, 8, 6], [NAN, NAN, NAN, NAN]], np.float32)
    v, i = tl.tensor(x).median(1)
    assert np.isnan(v.numpy()[0]) and i.numpy()[0] == 1 and v.numpy()[1] == 4.0
    assert np.isnan(tl.median(tl.tensor(x)).numpy())
    v, i = tl.tensor(x).nanmedian(1)
    assert v.numpy()[0] == 1.0 and i.numpy()[0] == 0 and v.numpy()[1] == 4.0
    assert np.isnan(v.numpy()[2])
    assert float(tl.nanmedian(tl.tensor(x)).numpy()) == 3.0


def test_median_gradient():
    x = rng.standard_normal((2, 5)).astype(np.float32)
    t = tl.tensor(x, requires_grad=True)
    v, i = t.median(1, keepdim=True)
    assert v.shape == (2, 1)
    v.sum().backward()
    want = np.zeros_like(x)
    np.put_along_axis(want, i.numpy(), 1.0, 1)
    same_bits(t.grad, want)


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("shape,dim", [((11,), None), ((4, 7), 1), ((6, 3), 0), ((2, 3, 5), -1)])
def test_quantile_against_numpy(method, shape, dim):
    x = rng.standard_normal(shape).astype(np.float32)
    q = [0.0, 0.1, 0.5, 0.75, 1.0]
    got = tl.quantile(tl.tensor(x), tl.tensor(np.array(q, np.float32)), dim=dim,
                      interpolation=method).numpy()
    want = np.quantile(x.astype(np.float64), np.array(q, np.float32).astype(np.float64),
                       axis=dim, method=method)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    one = tl.tensor(x).quantile(0.3, dim=dim, keepdim=True, interpolation=method).numpy()
    np.testing.assert_allclose(one, np.quantile(x.astype(np.float64), np.float32(0.3), axis=dim,
                                                method=method, keepdims=True), rtol=1e-6,
                               atol=1e-6)


def test_quantile_nan_rows_and_nanquantile():
    x = rng.standard_normal((3, 8)).astype(np.float32)
    x[0, 2] = NAN
    x[2, :] = NAN
    got = tl.quantile(tl.tensor(x), 0.4, dim=1).numpy()
    assert np.isnan(got[0]) and np.isnan(got[2])
    np.testing.assert_allclose(got[1], np.quantile(x[1].astype(np.float64), np.float32(0.4)),
                               rtol=1e-6)
    got = tl.nanquantile(tl.tensor(x), 0.4, dim=1).numpy()
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanquantile(x.astype(np.float64), np.float32(0.4), axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def central_diff(f, x, eps=1e-3):
    g = np.zeros(x.shape, np.float64)
    for j in range(x.size):
        xp, xm = x.astype(np.float64).copy(), x.astype(np.float64).copy()
        xp.flat[j] += eps
        xm.flat[j] -= eps
        g.flat[j] = (f(xp) - f(xm)) / (2 * eps)
    return g


def test_quantile_gradient_by_central_differences():
    x = rng.standard_normal((3, 6)).astype(np.float32)
    w = rng.standard_normal(3)
    t = tl.tensor(x, requires_grad=True)
    (t.quantile(0.35, dim=1) * tl.tensor(w.astype(np.float32))).sum().backward()
    want = central_diff(lambda a: (np.quantile(a, 0.35, axis=1) * w).sum(), x)
    np.testing.assert_allclose(t.grad, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -2),
                                       ((1,), -1), ((2, 700), 1), ((0, 3), 1), ((4, 0), 1)])
def test_cumsum_and_cumprod_against_numpy(shape, dim):
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    np.testing.assert_allclose(tl.tensor(x).cumsum(dim).numpy(),
                               np.cumsum(x.astype(np.float64), dim), rtol=1e-5, atol=1e-5)
    p = rng.uniform(0.9, 1.1, shape).astype(np.float32)
    np.testing.assert_allclose(tl.cumprod(tl.tensor(p), dim).numpy(),
                               np.cumprod(p.astype(np.float64), dim), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows,cols", [(3, 1000), (70, 100), (33, 256), (2, 257), (1, 140000),
                                       (2, 65537)])
def test_cumsum_follows_the_stated_chunked_order_bit_for_bit(rows, cols):
    """Rows of one chunk (CUDA: 32 rows a warp), of a few, of more chunks than CUDA's carry
    kernel stages at once (512), and of more than 256 chunks (carries one level up), forward
    and through the reversed order of the gradient."""
    x = rng.standard_normal((rows, cols)).astype(np.float32) * np.float32(1e3)
    got = tl.tensor(x).cumsum(1).numpy()
    for r in range(rows):
        same_bits(got[r], chunked_running(x[r], np.add))
    t = tl.tensor(x[:2], requires_grad=True)
    g = rng.standard_normal(t.shape).astype(np.float32)
    (t.cumsum(1) * tl.tensor(g)).sum().backward()
    for r in range(t.shape[0]):
        same_bits(t.grad.numpy()[r], chunked_running(g[r][::-1], np.add)[::-1])
    p = rng.uniform(0.99, 1.01, (2, min(cols, 600))).astype(np.float32)
    got = tl.tensor(p).cumprod(-1).numpy()
    for r in range(2):
        same_bits(got[r], chunked_running(p[r], np.multiply))


def test_cumsum_0d_int_and_nan():
    assert float(tl.tensor(np.float32(3)).cumsum(0).numpy()) == 3.0
    a = np.array([[3, -1, 4], [1, 5, 9]])
    got = tl.tensor(a).cumsum(1)
    assert isinstance(got, tl.IntTensor) if hasattr(tl, "IntTensor") else True
    assert np.array_equal(got.numpy(), np.cumsum(a, 1))
    assert np.array_equal(tl.cumprod(tl.tensor(a), 0).numpy(), np.cumprod(a, 0))
    y = tl.tensor(np.array([1, NAN, 2], np.float32)).cumsum(0).numpy()
    assert y[0] == 1 and np.isnan(y[1:]).all()


def test_cumsum_gradient_is_the_reverse_cumsum():
    x = rng.standard_normal((3, 5)).astype(np.float32)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    t = tl.tensor(x, requires_grad=True)
    (t.cumsum(0) * tl.tensor(w)).sum().backward()
    np.testing.assert_allclose(t.grad, np.flip(np.cumsum(np.flip(w, 0), 0), 0), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("zeros", [[], [2], [1, 4]])
def test_cumprod_gradient_with_zeros(zeros):
    x = rng.uniform(0.5, 1.5, (2, 6)).astype(np.float32)
    x[:, zeros] = 0.0
    w = rng.standard_normal((2, 6))
    t = tl.tensor(x, requires_grad=True)
    (t.cumprod(1) * tl.tensor(w.astype(np.float32))).sum().backward()
    want = central_diff(lambda a: (np.cumprod(a, 1) * w).sum(), x)
    assert np.isfinite(t.grad).all()
    np.testing.assert_allclose(t.grad, want, rtol=1e-4, atol=1e-4)


def ref_cumarg(row, kind):
    out, best, at = [], row[0], 0
    for j, v in enumerate(row):
        if np.isnan(v) or (not np.isnan(best) and (v >= best if kind == 0 else v <= best)):
            best, at = v, j
        out.append(at)
    return np.array(out)


@pytest.mark.parametrize("name,kind", [("cummax", 0), ("cummin", 1)])
@pytest.mark.parametrize("shape,dim", [((9,), 0), ((3, 8), 1), ((8, 3), 0), ((1,), 0)])
def test_cummax_cummin_torch_ties_and_nan(name, kind, shape, dim):
    x = with_specials(*shape)
    v, i = getattr(tl.tensor(x), name)(dim)
    want = np.apply_along_axis(ref_cumarg, dim, x, kind)
    assert np.array_equal(i.numpy(), want)
    same_bits(v.numpy(), np.take_along_axis(x, want, dim))


def test_cummax_gradient_accumulates_repeats():
    x = np.array([1.0, 3.0, 2.0, 0.5, 4.0], np.float32)
    t = tl.tensor(x, requires_grad=True)
    v, _ = t.cummax(0)
    (v * tl.tensor(np.array([1, 2, 4, 8, 16], np.float32))).sum().backward()
    same_bits(t.grad, [1, 14, 0, 0, 16])


def test_masked_cumsum_and_cumprod():
    x = rng.standard_normal((2, 5)).astype(np.float32)
    m = rng.random((2, 5)) > 0.4
    np.testing.assert_allclose(tl.masked.cumsum(tl.tensor(x), 1, mask=m).numpy(),
                               np.cumsum(np.where(m, x, 0.0), 1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tl.masked.cumprod(tl.tensor(x), 0, mask=m).numpy(),
                               np.cumprod(np.where(m, x, 1.0), 0), rtol=1e-6, atol=1e-6)


def test_int_sort_argsort():
    a = rng.integers(-5, 5, size=(4, 9))
    v, i = tl.tensor(a).sort(1, descending=True)
    want = np.argsort(-a, axis=1, kind="stable")
    assert np.array_equal(i.numpy(), want)
    assert np.array_equal(v.numpy(), np.take_along_axis(a, want, 1))
    assert np.array_equal(tl.tensor(a).argsort(0).numpy(), np.argsort(a, 0, kind="stable"))
    v, i = tl.sort(tl.tensor(a), 0)
    assert np.array_equal(v.numpy(), np.sort(a, 0))
    assert np.array_equal(i.numpy(), np.argsort(a, 0, kind="stable"))
    big = np.array([np.iinfo(np.int64).min, 3, np.iinfo(np.int64).max])
    assert np.array_equal(tl.tensor(big).argsort(descending=True).numpy(), [2, 1, 0])


@pytest.mark.parametrize("call,exc,match", [
    (lambda t: t.sort(2), IndexError, "sort"),
    (lambda t: t.topk(6), RuntimeError, "topk"),
    (lambda t: t.topk(-1), RuntimeError, "topk"),
    (lambda t: t.topk(1.5), TypeError, "topk"),
    (lambda t: t.kthvalue(0), RuntimeError, "kthvalue"),
    (lambda t: t.cumsum(), TypeError, "cumsum"),
    (lambda t: t.cumsum(-3), IndexError, "cumsum"),
    (lambda t: t.cummax(5), IndexError, "cummax"),
    (lambda t: t.quantile(1.5), ValueError, "quantile"),
    (lambda t: t.quantile(0.5, interpolation="cubic"), ValueError, "quantile"),
    (lambda t: t.median(1)[0].median(0, keepdim=True)[0].median(keepdim=True), ValueError,
     "median"),
])
def test_bad_inputs_name_the_op(call, exc, match):
    with pytest.raises(exc, match=match):
        call(tl.tensor(ties(3, 5)))


def test_empty_median_and_quantile_raise():
    with pytest.raises(IndexError, match="median"):
        tl.median(tl.tensor(np.zeros((0,), np.float32)))
    with pytest.raises(ValueError, match="quantile"):
        tl.quantile(tl.tensor(np.zeros((0,), np.float32)), 0.5)


def test_against_torch_when_present():
    torch = pytest.importorskip("torch")
    x = with_specials(4, 9)
    v, i = tl.tensor(x).sort(1, stable=True, descending=True)
    tv, ti = torch.from_numpy(x).sort(dim=1, stable=True, descending=True)
    assert np.array_equal(i.numpy(), ti.numpy())
    same_bits(v.numpy(), tv.numpy())
    v, i = tl.tensor(x).cummax(1)
    tv, ti = torch.from_numpy(x).cummax(1)
    assert np.array_equal(i.numpy(), ti.numpy())
    v, i = tl.tensor(x).median(1)
    tv, ti = torch.from_numpy(x).median(1)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())


@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 600), 1), ((4, 3), 0), ((1,), 0)])
def test_logcumsumexp_against_numpy(shape, dim):
    x = (rng.standard_normal(shape) * 30).astype(np.float32)
    want = np.logaddexp.accumulate(x.astype(np.float64), axis=dim)
    np.testing.assert_allclose(tl.tensor(x).logcumsumexp(dim).numpy(), want, rtol=1e-5, atol=1e-4)


def test_logcumsumexp_extremes_and_gradient():
    x = np.array([-np.inf, -np.inf, 1000.0, -1000.0, np.inf, 0.0], np.float32)
    got = tl.logcumsumexp(tl.tensor(x), 0).numpy()
    assert np.array_equal(got, [-np.inf, -np.inf, 1000.0, 1000.0, np.inf, np.inf])
    x = rng.standard_normal((2, 6)).astype(np.float32)
    w = rng.standard_normal((2, 6))
    t = tl.tensor(x, requires_grad=True)
    (t.logcumsumexp(1) * tl.tensor(w.astype(np.float32))).sum().backward()
    want = central_diff(lambda a: (np.logaddexp.accumulate(a, 1) * w).sum(), x)
    np.testing.assert_allclose(t.grad, want, rtol=1e-3, atol=1e-3)


def ref_trapezoid(y, x, axis):
    y = np.moveaxis(y.astype(np.float64), axis, -1)
    gaps = np.diff(np.moveaxis(np.broadcast_to(x, np.moveaxis(y, -1, axis).shape), axis, -1))
    return np.moveaxis(np.cumsum((y[..., 1:] + y[..., :-1]) / 2 * gaps, -1), -1, axis)


def test_cumulative_trapezoid():
    y = rng.standard_normal((3, 5)).astype(np.float32)
    got = tl.cumulative_trapezoid(tl.tensor(y), dx=0.5).numpy()
    np.testing.assert_allclose(got, ref_trapezoid(y, np.arange(5) * 0.5, 1), rtol=1e-6, atol=1e-6)
    xs = np.sort(rng.random(3)).astype(np.float32)
    got = tl.cumulative_trapezoid(tl.tensor(y), tl.tensor(xs), dim=0).numpy()
    np.testing.assert_allclose(got, ref_trapezoid(y, xs[:, None], 0), rtol=1e-5, atol=1e-6)
    assert tl.cumulative_trapezoid(tl.tensor(y[:, :1])).shape == (3, 0)
    with pytest.raises(ValueError, match="cumulative_trapezoid"):
        tl.cumulative_trapezoid(tl.tensor(y), tl.tensor(xs))


def test_mode_smallest_of_most_frequent_at_its_last_position():
    x = np.array([[2, 2, 1, 1], [5, 5, 5, 0], [3, 1, 3, 1]], np.float32)
    v, i = tl.tensor(x).mode(1)
    same_bits(v.numpy(), [1, 5, 1])
    assert np.array_equal(i.numpy(), [3, 2, 3])
    v, i = tl.mode(tl.tensor(x), 0, keepdim=True)
    assert v.shape == (1, 4) and np.array_equal(i.numpy(), [[0, 2, 0, 2]])
    same_bits(v.numpy(), [[2, 1, 1, 1]])
    t = tl.tensor(x, requires_grad=True)
    t.mode(1)[0].sum().backward()
    want = np.zeros_like(x)
    want[[0, 1, 2], [3, 2, 3]] = 1
    same_bits(t.grad, want)


@pytest.mark.parametrize("rows,cols", [(3, 511), (2, 1024), (2, 1500), (2, 4096), (2, 4097),
                                       (1, 3000), (1, 9000)])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_topk_at_every_row_length_schedule(rows, cols, descending):
    """Row lengths on each side of CUDA's schedules (a block per row up to 512, 1024, 2048 and
    4096 entries; the device sorts beyond; one row): sort, argsort and topk (k below, at and
    above the selection's 1024) give NumPy's stable order with ties, NaN and -0."""
    x = with_specials(rows, cols)
    x[:, ::7] = rng.standard_normal((rows, len(range(0, cols, 7)))).astype(np.float32)
    want = ref_argsort(x, 1, descending)
    got = tl.sort(tl.tensor(x), dim=1, descending=descending, stable=True)
    assert np.array_equal(got.indices.numpy(), want)
    same_bits(got.values.numpy(), np.take_along_axis(x, want, 1))
    for k in sorted({1, 37, min(cols, 1024), min(cols, 1500)}):
        top = tl.topk(tl.tensor(x), k, dim=1, largest=descending)
        assert np.array_equal(top.indices.numpy(), want[:, :k]), k
        same_bits(top.values.numpy(), np.take_along_axis(x, want[:, :k], 1))


def test_topk_rows_op_refuses_bad_k_and_descending_naming_the_op():
    """The registry op itself (not only torch.topk's checks): k past the row, negative, huge,
    and a descending flag other than 0/1 raise ValueError naming topk_rows and the shape."""
    from torchlean import ops
    from torchlean.buffer import AnyBuffer
    x = AnyBuffer.from_numpy(np.zeros((2, 5), np.float32))
    for kw, text in [(dict(k=6), r"topk_rows: k \(6\) must be in \[0, 5\].*\(2, 5\)"),
                     (dict(k=-1), "topk_rows: k must be >= 0"),
                     (dict(k=2 ** 40), r"topk_rows: k \(1099511627776\) must be in \[0, 5\]"),
                     (dict(k=2, descending=2), "topk_rows: expected descending >= 0")]:
        with pytest.raises(ValueError, match=text):
            ops.topk_rows(x, **kw)


def test_topk_rows_op_with_nan_inf_and_k_zero():
    """NaN is the largest key (first when descending, last ascending), -inf/inf in order, -0
    equal to +0 keeping position order; k = 0 gives an empty (rows, 0) result."""
    from torchlean import ops
    from torchlean.buffer import AnyBuffer
    x = np.array([[1.0, NAN, -np.inf, -0.0, 0.0, np.inf, NAN]], np.float32)
    b = AnyBuffer.from_numpy(x)
    same_bits(ops.topk_rows(b, k=4, descending=1).to_numpy(), np.float32([[1, 6, 5, 0]]))
    same_bits(ops.topk_rows(b, k=4, descending=0).to_numpy(), np.float32([[2, 3, 4, 0]]))
    assert ops.topk_rows(b, k=0).to_numpy().shape == (1, 0)
