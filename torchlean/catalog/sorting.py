"""Sorting, selection by rank and running sums/products/extremes: torch's sort, argsort, msort,
topk, kthvalue, median, nanmedian, mode, quantile, nanquantile, cumsum, cumprod, cummax, cummin,
logcumsumexp and cumulative_trapezoid.

Every op moves `dim` last and runs the sort family's row kernels (ops.yaml section sort_scan):
argsort_rows (a stable sort: equal values keep their input order, NaN largest), cumarg_rows
(running-extreme positions), cumsum_rows / cumprod_rows / logcumsumexp_rows. Values are
taken with take_rows, whose VJP adds the gradient back at the taken positions, so every value
result is differentiable. Indices come back as int64 IntTensors that stay on the device (read
back only when the host asks; a gather or scatter takes them as they are); IntTensor inputs are
sorted and summed on the host with NumPy (int64 arithmetic, as torch).
"""
from __future__ import annotations

import numpy as np

from torchlean import composite, indexing
from torchlean.catalog._device_index import int_result
from torchlean.composite import MinMaxResult as ValuesIndices
from torchlean.dtypes import float32
from torchlean.int_tensor import IntTensor
from torchlean.tape import no_grad

METHODS = ["sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "quantile",
           "nanquantile", "mode", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]
INT_METHODS = ["sort", "argsort", "msort", "cumsum", "cumprod"]
INPLACE = ["cumsum", "cumprod"]
EXPORTS = {"torch": METHODS + ["cumulative_trapezoid"]}


# ------------------------------------------------------------------------------ layout

def _last(x, dim, op):
    """(x with `dim` last (a 0-d x as shape (1,)), the normalized dim)."""
    if x.ndim == 0:
        indexing.normalize_dim(dim, 1, op)
        return composite.reshape(x, (1,)), 0
    d = indexing.normalize_dim(dim, x.ndim, op)
    return (x if d == x.ndim - 1 else composite.transpose(x, d, -1)), d


def _back(y, x, d):
    """A result laid out by _last back in x's layout (y may have another last length)."""
    if x.ndim == 0:
        return composite.reshape(y, ())
    return y if d == x.ndim - 1 else composite.transpose(y, d, -1)


def _host_back(a, x, d):
    """A host array laid out by _last back in x's layout."""
    if x.ndim == 0:
        return a.reshape(())
    return a if d == x.ndim - 1 else np.swapaxes(a, d, -1)


def _positions(p, x, d, bounds=None, squeeze=False):
    """Float32 positions (a no-grad tape tensor laid out by _last) as torch's int64 indices, on
    the device (dim d dropped with `squeeze`); every one lies in [0, n) of the sorted dim.
    `bounds`: their exact (min, max)."""
    with no_grad():
        q = _back(p, x, d)
        if squeeze:
            q = composite.squeeze(q, d)
    n = x.shape[d] if x.ndim else 1
    out = int_result(q, bounds, (0, n - 1) if q.numel() else None)
    if out is None:     # a graph capture: host indices
        a = _host_back(p.numpy().astype(np.int64), x, d)
        out = IntTensor(np.squeeze(a, d) if squeeze else a)
    return out


def _all_positions(x, d):
    """The exact (min, max) of a full sort's positions along dim d."""
    n = x.shape[d] if x.ndim else 1
    return (0, n - 1) if x.numel() else (0, -1)


def _op(x, name, *others, **attrs):
    return x.session.op(name, x, *others, **attrs)


def _argsort_rows(xt, descending):
    with no_grad():
        return _op(xt, "argsort_rows", descending=int(bool(descending)))


# ------------------------------------------------------------------------------ sorting

def sort(input, dim=-1, descending=False, stable=False):  # noqa: A002 - torch's names
    """torch.sort: (values, indices), a stable sort (torch's stable=True; its stable=False may
    order equal values either way, so the stable order is one of its answers). NaN sorts as
    larger than every number; -0 and +0 are equal."""
    if isinstance(input, IntTensor):
        a = input.numpy()
        idx = _host_argsort(a, dim, descending, "sort")
        values = np.take_along_axis(a, idx, dim % a.ndim) if a.ndim else a
        return ValuesIndices(IntTensor(values), IntTensor(idx))
    xt, d = _last(input, dim, "sort")
    p = _argsort_rows(xt, descending)
    values = _op(xt, "take_rows", p, distinct=1)
    return ValuesIndices(_back(values, input, d), _positions(p, input, d, _all_positions(input, d)))


def _host_argsort(a, dim, descending, op):
    if a.ndim == 0:
        indexing.normalize_dim(dim, 1, op)
        return np.zeros((), np.int64)
    d = indexing.normalize_dim(dim, a.ndim, op)
    key = ~a if descending else a          # ~a: -a - 1 (no overflow), or not for bools
    return np.argsort(key, axis=d, kind="stable").astype(np.int64)


def argsort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    """torch.argsort: sort's indices."""
    if isinstance(input, IntTensor):
        return IntTensor(_host_argsort(input.numpy(), dim, descending, "argsort"))
    xt, d = _last(input, dim, "argsort")
    return _positions(_argsort_rows(xt, descending), input, d, _all_positions(input, d))


def msort(input):  # noqa: A002
    """torch.msort: values sorted along dim 0."""
    return sort(input, 0)[0]


def _check_k(k, op):
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"{op}: k must be an int, got {type(k).__name__}")


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """torch.topk: the k largest (smallest) values along dim and their indices, in sorted order
    (also for sorted=False); of equal values the earlier positions come first."""
    _check_k(k, "topk")
    xt, d = _last(input, dim, "topk")
    n = xt.shape[-1]
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: k ({k}) out of range for dimension {d} of size {n} "
                           f"(shape {tuple(input.shape)})")
    with no_grad():
        pk = _op(xt, "topk_rows", k=k, descending=int(bool(largest)))
    values = _op(xt, "take_rows", pk, distinct=1)
    return ValuesIndices(_back(values, input, d), _positions(pk, input, d))


def _select(input, xt, d, pos, keepdim):
    """(values, indices) at sorted position pos[r] of each row (a host int array, rows of xt)."""
    s = xt.session
    with no_grad():
        p = _argsort_rows(xt, False)
        at = s.tensor(pos.astype(np.float32).reshape(xt.shape[:-1] + (1,)))
        pk = _op(p, "take_rows", at)
    values = _op(xt, "take_rows", pk, distinct=1)
    squeeze = bool(not keepdim and input.ndim)
    values, idx = _back(values, input, d), _positions(pk, input, d, squeeze=squeeze)
    if squeeze:
        values = composite.squeeze(values, d)
    return ValuesIndices(values, idx)


def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    """torch.kthvalue: the k-th smallest value (k from 1) along dim and its index."""
    _check_k(k, "kthvalue")
    xt, d = _last(input, dim, "kthvalue")
    n = xt.shape[-1]
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue: k ({k}) out of range for dimension {d} of size {n} "
                           f"(shape {tuple(input.shape)}); expected 1 <= k <= {n}")
    return _select(input, xt, d, np.full(xt.shape[:-1], k - 1, np.int64), keepdim)


def _nan_counts(xt):
    """NaNs per row, counted on the device (x != x, summed): one number per row read back."""
    with no_grad():
        counts = composite.reduce(_op(xt, "ne", xt), "sum", -1)
        return counts.numpy().astype(np.int64)


def _median(input, dim, keepdim, op, skip_nan):
    if dim is None:
        if keepdim:
            raise ValueError(f"{op}: keepdim needs a dim")
        flat = composite.reshape(input, (-1,))
        if flat.shape[0] == 0:
            raise IndexError(f"{op}: cannot take the median of an empty tensor (shape "
                             f"{tuple(input.shape)})")
        return composite.reshape(_median(flat, 0, False, op, skip_nan)[0], ())
    xt, d = _last(input, dim, op)
    n = xt.shape[-1]
    if n == 0:
        raise IndexError(f"{op}: dimension {d} of shape {tuple(input.shape)} is empty")
    nans = _nan_counts(xt)
    if skip_nan:      # the lower median of the numbers; all NaN: position 0 (a NaN)
        pos = np.maximum((n - nans - 1) // 2, 0)
    else:             # a NaN anywhere: the first NaN (NaN sorts last, stably)
        pos = np.where(nans > 0, n - nans, (n - 1) // 2)
    return _select(input, xt, d, pos, keepdim)


def median(input, dim=None, keepdim=False):  # noqa: A002
    """torch.median: the lower of the two middle values (NaN if the slice holds one); with dim,
    (values, indices)."""
    return _median(input, dim, keepdim, "median", False)


def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    """torch.nanmedian: median ignoring NaN (NaN only where a slice is all NaN)."""
    return _median(input, dim, keepdim, "nanmedian", True)


def _row_mode(row):
    """Position of torch's mode of one row: the smallest of the most frequent numbers, its last
    occurrence (each NaN counts once; an all-NaN row gives its last entry)."""
    ok = ~np.isnan(row)
    if not ok.any():
        return row.size - 1
    vals, counts = np.unique(row[ok], return_counts=True)
    best = vals[np.argmax(counts)]              # argmax: the first, so the smallest value
    return int(np.nonzero(row == best)[0][-1])


def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """torch.mode: (values, indices) of the most frequent value along dim (the smallest of
    equally frequent ones, at its last position); the value's gradient goes to that entry."""
    xt, d = _last(input, dim, "mode")
    if xt.shape[-1] == 0:
        raise IndexError(f"mode: dimension {d} of shape {tuple(input.shape)} is empty")
    with no_grad():
        rows = xt.numpy().reshape(-1, xt.shape[-1])
    pos = np.array([_row_mode(r) for r in rows], np.int64).reshape(xt.shape[:-1])
    s = xt.session
    at = s.tensor(pos.astype(np.float32).reshape(xt.shape[:-1] + (1,)))
    values = _op(xt, "take_rows", at, distinct=1)
    values, idx = _back(values, input, d), IntTensor(_host_back(pos[..., None], input, d))
    if not keepdim and input.ndim:
        values = composite.squeeze(values, d)
        idx = IntTensor(np.squeeze(idx.numpy(), d))
    return ValuesIndices(values, idx)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, op, skip_nan):
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{op}: interpolation must be one of {_INTERPOLATIONS}, got "
                         f"{interpolation!r}")
    scalar_q = isinstance(q, (int, float, np.integer, np.floating))
    qs = np.asarray(q.numpy() if hasattr(q, "numpy") else q, dtype=np.float64)
    if qs.ndim > 1:
        raise ValueError(f"{op}: q must be a scalar or a 1-D tensor, got shape {qs.shape}")
    if np.any(~((qs >= 0) & (qs <= 1))):
        raise ValueError(f"{op}: q values must be in the range [0, 1], got {qs.tolist()}")
    if input.numel() == 0:
        raise ValueError(f"{op}: input tensor must be non-empty (shape {tuple(input.shape)})")
    x = composite.reshape(input, (-1,)) if dim is None else input
    xt, d = _last(x, -1 if dim is None else dim, op)
    n = xt.shape[-1]
    s = xt.session
    with no_grad():
        p = _argsort_rows(xt, False)
    ranked = _op(xt, "take_rows", p, distinct=1)
    nans = _nan_counts(xt)
    valid = n - nans if skip_nan else np.where(nans > 0, 0, n)   # rows with NaN: all NaN out
    outs = []
    for qv in qs.reshape(-1):
        pos = qv * np.maximum(valid - 1, 0)
        lo, hi = np.floor(pos), np.ceil(pos)
        w = pos - lo
        if interpolation == "lower":
            hi, w = lo, np.zeros_like(w)
        elif interpolation == "higher":
            lo, w = hi, np.zeros_like(w)
        elif interpolation == "nearest":
            lo = hi = np.round(pos)        # ties to even, as torch
            w = np.zeros_like(w)
        elif interpolation == "midpoint":
            w = np.where(hi > lo, 0.5, 0.0)
        nan_row = valid == 0                 # a NaN in the row (quantile) or all NaN
        lo = np.where(nan_row, n - 1, lo)
        hi = np.where(nan_row, n - 1, hi)
        take = lambda at: _op(ranked, "take_rows",                       # noqa: E731
                              s.tensor(at.astype(np.float32).reshape(xt.shape[:-1] + (1,))))
        a, b = take(lo), take(hi)
        wt = s.tensor(w.astype(np.float32).reshape(xt.shape[:-1] + (1,)))
        # torch's lerp: a + w (b - a) below w = 0.5, else b - (b - a)(1 - w)
        diff = b - a
        low = composite.where(s, wt < 0.5, a + wt * diff, b - diff * (1.0 - wt))
        outs.append(_quantile_shape(low, x, d, dim, keepdim, input))
    if scalar_q or qs.ndim == 0:
        return outs[0]
    return composite.stack(outs, 0)


def _quantile_shape(v, x, d, dim, keepdim, input):
    v = _back(v, x, d)                        # the reduced dim has length 1
    if dim is None:
        return composite.reshape(v, (1,) * input.ndim if keepdim else ())
    return v if keepdim else composite.squeeze(v, d)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """torch.quantile: q-th quantiles along dim (None: of every element), linear interpolation
    between the ranked values by default; NaN where a slice holds a NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, "quantile", False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """torch.nanquantile: quantile ignoring NaN (NaN only where a slice is all NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, "nanquantile", True)


# ------------------------------------------------------------------------------ running ops

def _int_cumulative(x, dim, op, fn):
    a = x.numpy().astype(np.int64)           # a bool tensor sums as int64, as torch
    if a.ndim == 0:
        indexing.normalize_dim(dim, 1, op)
        return IntTensor(a.copy())
    return IntTensor(fn(a, axis=indexing.normalize_dim(dim, a.ndim, op)))


def _dim_required(dim, op):
    if dim is None:
        raise TypeError(f"{op}: missing the required argument 'dim'")


def _dtype_ok(dtype, op):
    if dtype is not None and dtype != float32:
        raise TypeError(f"{op}: only dtype=None or float32 is supported for a float tensor, "
                        f"got {dtype}")


def cumsum(input, dim=None, *, dtype=None):  # noqa: A002
    """torch.cumsum: running sums along dim (the sort family's chunked order, README)."""
    _dim_required(dim, "cumsum")
    if isinstance(input, IntTensor):
        return _int_cumulative(input, dim, "cumsum", np.cumsum)
    _dtype_ok(dtype, "cumsum")
    xt, d = _last(input, dim, "cumsum")
    return _back(_op(xt, "cumsum_rows"), input, d)


def cumprod(input, dim=None, *, dtype=None):  # noqa: A002
    """torch.cumprod: running products along dim; the gradient is exact with zeros in x."""
    _dim_required(dim, "cumprod")
    if isinstance(input, IntTensor):
        return _int_cumulative(input, dim, "cumprod", np.cumprod)
    _dtype_ok(dtype, "cumprod")
    xt, d = _last(input, dim, "cumprod")
    return _back(_op(xt, "cumprod_rows"), input, d)


def _cum_extreme(input, dim, kind, op):
    _dim_required(dim, op)
    xt, d = _last(input, dim, op)
    with no_grad():
        p = _op(xt, "cumarg_rows", kind=kind)
    values = _op(xt, "take_rows", p)
    return ValuesIndices(_back(values, input, d), _positions(p, input, d))


def cummax(input, dim=None):  # noqa: A002
    """torch.cummax: (running maxima, their indices): the last of equal values, NaN sticks."""
    return _cum_extreme(input, dim, 0, "cummax")


def cummin(input, dim=None):  # noqa: A002
    """torch.cummin: (running minima, their indices): the last of equal values, NaN sticks."""
    return _cum_extreme(input, dim, 1, "cummin")


def logcumsumexp(input, dim=None):  # noqa: A002
    """torch.logcumsumexp: running log(sum(exp)) along dim, each step log(e^a + e^b) computed
    without overflow (an all -inf prefix gives -inf)."""
    _dim_required(dim, "logcumsumexp")
    xt, d = _last(input, dim, "logcumsumexp")
    return _back(_op(xt, "logcumsumexp_rows"), input, d)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """torch.cumulative_trapezoid: running trapezoid-rule integrals of y along dim (spacing dx,
    default 1, or the sample points x); one entry fewer than y along dim."""
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid: give x or dx, not both")
    if y.ndim == 0:
        raise IndexError("cumulative_trapezoid: y must have at least one dimension")
    d = indexing.normalize_dim(dim, y.ndim, "cumulative_trapezoid")
    if y.shape[d] == 0:
        return composite.getitem(y, (slice(None),) * d + (slice(0, 0),))
    upper = composite.getitem(y, (slice(None),) * d + (slice(1, None),))
    lower = composite.getitem(y, (slice(None),) * d + (slice(0, -1),))
    mid = (upper + lower) * 0.5
    if x is None:
        step = 1.0 if dx is None else float(dx)
        area = mid if step == 1.0 else mid * step
    else:
        x = y.session.as_tensor(x)
        if x.ndim == 1:
            if x.shape[0] != y.shape[d]:
                raise ValueError(f"cumulative_trapezoid: x has {x.shape[0]} points, y has "
                                 f"{y.shape[d]} along dim {d}")
            x = composite.reshape(x, (-1,) + (1,) * (y.ndim - 1 - d))
        dd = indexing.normalize_dim(dim, x.ndim, "cumulative_trapezoid")
        gaps = (composite.getitem(x, (slice(None),) * dd + (slice(1, None),))
                - composite.getitem(x, (slice(None),) * dd + (slice(0, -1),)))
        area = mid * gaps
    return cumsum(area, d)
