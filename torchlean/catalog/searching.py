"""Searching sorted data and collecting distinct values: torch's searchsorted, bucketize, unique
and unique_consecutive.

Their results are int64 indices and counts (host IntTensors) or new values without a gradient
(torch defines none), so they are worked out on the host from the tensor's values (one read,
as torch syncs for the output size), with torch's order: NaN after every number, each NaN
distinct from the others in unique.
"""
from __future__ import annotations

import numpy as np

from torchlean.catalog._flat_positions import index_array
from torchlean.int_tensor import IntTensor

METHODS = ["unique", "unique_consecutive"]
INT_METHODS = ["unique_consecutive"]      # IntTensor.unique is the core's
EXPORTS = {"torch": ["searchsorted", "bucketize", "unique", "unique_consecutive"]}


def _host(x, op, what="input"):
    """(NumPy array, is it an int64 tensor) of a Tensor, IntTensor or number."""
    if isinstance(x, IntTensor):
        return x.numpy(), True
    if hasattr(x, "session"):
        return x.numpy(), False
    a = np.asarray(x)
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{op}: {what} must be a tensor or a number, got dtype {a.dtype}")
    return a, a.dtype.kind in "iu"


def _result(a, like_int, session):
    """Values as an IntTensor (int input) or a new float32 Tensor without a gradient."""
    if like_int:
        return IntTensor(a)
    return session.tensor(np.ascontiguousarray(a, np.float32))


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,  # noqa: A002
                 sorter=None):
    """torch.searchsorted: for each value, the index where it would be inserted to keep the
    innermost rows of sorted_sequence sorted (side 'left': before equal values; 'right' or
    right=True: after them). sorted_sequence is 1-D or has input's leading dims."""
    op = "searchsorted"
    if side not in (None, "left", "right"):
        raise ValueError(f"{op}: side must be 'left' or 'right', got {side!r}")
    if side == "left" and right:
        raise ValueError(f"{op}: side='left' and right=True contradict each other")
    how = "right" if right or side == "right" else "left"
    seq, _ = _host(sorted_sequence, op, "sorted_sequence")
    vals, _ = _host(input, op, "input")
    if seq.ndim == 0:
        raise ValueError(f"{op}: sorted_sequence must have at least one dimension")
    if sorter is not None:
        order = index_array(sorter, op, "sorter")
        if order.shape != seq.shape:
            raise ValueError(f"{op}: sorter of shape {order.shape} must match sorted_sequence's "
                             f"{seq.shape}")
        if order.size and (order.min() < 0 or order.max() >= seq.shape[-1]):
            raise IndexError(f"{op}: sorter index out of range [0, {seq.shape[-1]})")
        seq = np.take_along_axis(seq, order, -1)
    dtype = np.int32 if out_int32 else np.int64
    if seq.ndim == 1:
        return IntTensor(np.searchsorted(seq, vals, side=how).astype(dtype))
    if vals.ndim != seq.ndim or vals.shape[:-1] != seq.shape[:-1]:
        raise ValueError(f"{op}: sorted_sequence of shape {seq.shape} and input of shape "
                         f"{vals.shape} must match on every dimension but the last")
    s2, v2 = seq.reshape(-1, seq.shape[-1]), vals.reshape(-1, vals.shape[-1])
    out = np.stack([np.searchsorted(a, b, side=how) for a, b in zip(s2, v2)]) if len(s2) else \
        np.zeros(v2.shape, np.int64)
    return IntTensor(out.reshape(vals.shape).astype(dtype))


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """torch.bucketize: the bucket of each value among 1-D boundaries (right=False: the first
    boundary >= value, as searchsorted's side 'left')."""
    b, _ = _host(boundaries, "bucketize", "boundaries")
    if b.ndim != 1:
        raise ValueError(f"bucketize: boundaries must be 1-D, got shape {b.shape}")
    return searchsorted(b, input, out_int32=out_int32, side="right" if right else "left")


def _unique_flat(a, return_inverse, return_counts):
    """np.unique of a 1-D array with every NaN its own value (sorted last, as torch)."""
    nan = np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    vals, inv, counts = np.unique(a[~nan], return_inverse=True, return_counts=True)
    k = int(nan.sum())
    values = np.concatenate([vals, a[nan]]) if k else vals
    inverse = np.empty(a.shape, np.int64)
    inverse[~nan] = inv.reshape(-1)
    inverse[nan] = len(vals) + np.arange(k)
    counts = np.concatenate([counts, np.ones(k, np.int64)]) if k else counts
    return values, inverse, counts


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """torch.unique: the distinct values (sorted), with the inverse indices (input's shape) and
    counts when asked; dim: distinct slices along dim."""
    a, is_int = _host(input, "unique")
    session = None if is_int else input.session
    if dim is None:
        values, inverse, counts = _unique_flat(a.reshape(-1), return_inverse, return_counts)
        inverse = inverse.reshape(a.shape)
    else:
        d = dim + a.ndim if dim < 0 else dim
        if not 0 <= d < max(a.ndim, 1):
            raise IndexError(f"unique: dim {dim} out of range for shape {a.shape}")
        values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True, axis=d)
        inverse = inverse.reshape(-1)
    out = [_result(values, is_int, session)]
    if return_inverse:
        out.append(IntTensor(inverse.astype(np.int64)))
    if return_counts:
        out.append(IntTensor(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """torch.unique_consecutive: each run of equal consecutive values (slices along dim) once."""
    a, is_int = _host(input, "unique_consecutive")
    session = None if is_int else input.session
    if dim is None:
        flat = a.reshape(-1)
        starts = np.ones(flat.shape, bool)
        starts[1:] = flat[1:] != flat[:-1]
        values = flat[starts]
        inverse = (np.cumsum(starts) - 1).reshape(a.shape)
    else:
        d = dim + a.ndim if dim < 0 else dim
        if not 0 <= d < max(a.ndim, 1):
            raise IndexError(f"unique_consecutive: dim {dim} out of range for shape {a.shape}")
        m = np.moveaxis(a, d, 0).reshape(a.shape[d], -1)
        starts = np.ones(m.shape[0], bool)
        starts[1:] = np.any(m[1:] != m[:-1], axis=1)
        values = np.take(a, np.nonzero(starts)[0], axis=d)
        inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.nonzero(starts.reshape(-1))[0], starts.size))
    out = [_result(values, is_int, session)]
    if return_inverse:
        out.append(IntTensor(inverse.astype(np.int64)))
    if return_counts:
        out.append(IntTensor(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)
