"""Where a mask or a tensor is nonzero, and how often values occur: torch's nonzero,
nonzero_static, argwhere,
masked_select, masked_scatter, bincount, histc and histogram.

Their output sizes depend on the values, so the positions (or bins) are worked out on the host
from one read of the mask or input (torch syncs for these too); values that carry a gradient
are then read or written with the registry's gather_vec and where (masked_select,
masked_scatter) or summed with scatter_add_vec in index order (bincount's weights).
Counts are exact integers.
"""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog._flat_positions import index_array, overwrite
from torchlean.int_tensor import IntTensor, host_key

METHODS = ["nonzero", "nonzero_static", "argwhere", "masked_select", "masked_scatter", "histc"]
INT_METHODS = ["nonzero", "nonzero_static", "argwhere"]      # IntTensor.bincount is the core's
INPLACE = ["masked_scatter"]
EXPORTS = {"torch": ["nonzero", "nonzero_static", "argwhere", "masked_select", "masked_scatter",
                     "bincount", "histc", "histogram"]}


def _values(x):
    """A Tensor's or IntTensor's values as a host array."""
    return x.numpy()


def _mask(mask, shape, op):
    """A boolean mask broadcast to `shape` from a bool IntTensor, comparison Tensor or array."""
    if isinstance(mask, IntTensor):
        if mask.numpy().dtype != np.bool_:
            raise TypeError(f"{op}: mask must be a bool tensor, got int64")
        m = mask.numpy()
    elif hasattr(mask, "session"):
        m = host_key(mask)              # a comparison's 0/1 result; other floats raise
        if not isinstance(m, np.ndarray):
            m = np.asarray(m)
    else:
        m = np.asarray(mask)
        if m.dtype != np.bool_:
            raise TypeError(f"{op}: mask must be a bool tensor, got dtype {m.dtype}")
    try:
        return np.broadcast_to(m, shape)
    except ValueError:
        raise ValueError(f"{op}: mask of shape {m.shape} does not broadcast to {shape}") from None


def nonzero(input, *, as_tuple=False):  # noqa: A002 - torch's names
    """torch.nonzero: the indices of the nonzero entries, one row each (int64, row-major
    order), or a tuple of per-dim index tensors with as_tuple=True."""
    a = _values(input)
    if as_tuple:
        return tuple(IntTensor(i.astype(np.int64)) for i in np.nonzero(np.atleast_1d(a)))
    return IntTensor(np.argwhere(a).astype(np.int64))


def nonzero_static(input, *, size, fill_value=-1):  # noqa: A002
    """torch.nonzero_static: nonzero's rows (int64, row-major order) in a result of the fixed
    shape (size, input.ndim): truncated to the first `size` rows, or padded with rows of
    fill_value."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got {size!r}")
    if isinstance(fill_value, bool) or not isinstance(fill_value, (int, np.integer)):
        raise TypeError(f"nonzero_static: fill_value must be an int, got {fill_value!r}")
    a = _values(input)
    rows = np.argwhere(a).astype(np.int64)[:size]
    out = np.full((int(size), a.ndim), int(fill_value), np.int64)
    out[:rows.shape[0]] = rows
    return IntTensor(out)


def argwhere(input):  # noqa: A002
    """torch.argwhere: nonzero's rows of indices."""
    return nonzero(input)


def masked_select(input, mask):  # noqa: A002
    """torch.masked_select: the entries where mask (broadcast with input) is True, as 1-D."""
    try:
        shape = tuple(np.broadcast_shapes(tuple(input.shape), np.shape(_values(mask))))
    except ValueError:
        raise ValueError(f"masked_select: mask of shape {np.shape(_values(mask))} and input of "
                         f"shape {tuple(input.shape)} do not broadcast") from None
    m = _mask(mask, shape, "masked_select")
    x = composite.expand(input, shape) if tuple(input.shape) != shape else input
    pos = np.flatnonzero(m)
    flat = composite.reshape(x, (-1,))
    if pos.size == 0:
        return composite.getitem(flat, slice(0, 0))
    return x.session.op("gather_vec", flat, indices=pos)


def masked_scatter(input, mask, source):  # noqa: A002
    """torch.masked_scatter: input with the entries where mask is True replaced, in row-major
    order, by source's first entries."""
    m = _mask(mask, tuple(input.shape), "masked_scatter")
    pos = np.flatnonzero(m)
    source = input.session.as_tensor(source)
    if math.prod(source.shape) < pos.size:
        raise ValueError(f"masked_scatter: the mask selects {pos.size} entries but source has "
                         f"only {math.prod(source.shape)} (shape {tuple(source.shape)})")
    return overwrite(input, pos, source, np.arange(pos.size))


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """torch.bincount: occurrences of each value of a 1-D non-negative int64 tensor (int64), or
    the sums of `weights` per value (float32, summed in index order on the stub and in CUDA's
    deterministic and exact modes; CUDA's default mode adds with atomics, as torch's does)."""
    a = index_array(input, "bincount", "input")
    if a.ndim != 1 or (a.size and a.min() < 0):
        raise RuntimeError(f"bincount: only supports 1-d non-negative integral inputs, got shape "
                           f"{a.shape}" + (f" with minimum {a.min()}" if a.size else ""))
    if isinstance(minlength, bool) or not isinstance(minlength, (int, np.integer)) or minlength < 0:
        raise ValueError(f"bincount: minlength must be a non-negative int, got {minlength!r}")
    size = max(int(a.max()) + 1 if a.size else 0, int(minlength))
    if weights is None:
        return IntTensor(np.bincount(a, minlength=size).astype(np.int64))
    if not hasattr(weights, "session"):
        raise TypeError(f"bincount: weights must be a float Tensor, got {type(weights).__name__}")
    if tuple(weights.shape) != a.shape:
        raise ValueError(f"bincount: weights of shape {tuple(weights.shape)} must match the "
                         f"input's shape {a.shape}")
    s = weights.session
    zeros = s.tensor(np.zeros(size, np.float32))
    if a.size == 0 or size == 0:
        return zeros
    return s.op("scatter_add_vec", zeros, weights, indices=a)


def _float_bins(x, bins, lo, hi, op):
    """Counts of x's finite values in `bins` equal bins over [lo, hi] (float32, torch's
    rule: bin = floor((v - lo) / (hi - lo) * bins), the top edge in the last bin)."""
    v = x[(x >= lo) & (x <= hi)].astype(np.float32)
    lo32, hi32 = np.float32(lo), np.float32(hi)
    pos = ((v - lo32) / (hi32 - lo32) * np.float32(bins)).astype(np.int64)
    pos = np.minimum(pos, bins - 1)
    return np.bincount(pos, minlength=bins)[:bins]


def _range(x, lo, hi, op):
    if lo > hi:
        raise ValueError(f"{op}: max must be larger than min, got min {lo} and max {hi}")
    if lo == hi and x.size:
        fin = x[np.isfinite(x)]
        lo, hi = (float(fin.min()), float(fin.max())) if fin.size else (lo, hi)
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{op}: range of [{lo}, {hi}] is not finite")
    return lo, hi


def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """torch.histc: counts in `bins` equal bins over [min, max] (both 0: the data's range);
    values outside are ignored. A float32 Tensor without a gradient."""
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins <= 0:
        raise ValueError(f"histc: bins must be a positive int, got {bins!r}")
    x = input.numpy().reshape(-1).astype(np.float64)
    lo, hi = _range(x, float(min), float(max), "histc")
    return input.session.tensor(_float_bins(x, int(bins), lo, hi, "histc").astype(np.float32))


def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """torch.histogram: (hist, bin_edges) for an int number of equal bins over `range` (default
    the data's) or given increasing edges; weights and density as torch. No gradient."""
    x = input.numpy().reshape(-1).astype(np.float64)
    w = None if weight is None else weight.numpy().reshape(-1).astype(np.float64)
    if w is not None and w.size != x.size:
        raise ValueError(f"histogram: weight of shape {tuple(weight.shape)} must match the "
                         f"input's {tuple(input.shape)}")
    if hasattr(bins, "session"):
        edges = bins.numpy().astype(np.float64)
        if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) < 0):
            raise ValueError("histogram: bins must be a 1-D increasing tensor of >= 2 edges")
    else:
        if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins <= 0:
            raise ValueError(f"histogram: bins must be a positive int or a tensor, got {bins!r}")
        lo, hi = (float(range[0]), float(range[1])) if range is not None else (
            float(x.min()) if x.size else 0.0, float(x.max()) if x.size else 0.0)
        lo, hi = _range(x, lo, hi, "histogram") if lo == hi or lo > hi else (lo, hi)
        edges = np.linspace(np.float32(lo), np.float32(hi), int(bins) + 1, dtype=np.float32)
    hist, _ = np.histogram(x, bins=edges.astype(np.float64), weights=w, density=density)
    s = input.session
    return s.tensor(hist.astype(np.float32)), s.tensor(edges.astype(np.float32))
