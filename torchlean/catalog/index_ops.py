"""torch's index_* ops: index_select, index_add, index_copy, index_fill, index_reduce along a
dim picked by a 1-D index, and index_put at a tuple of indices. Slices are moved as rows of the
tensor with dim first; positions are worked out on the host (torchlean.catalog._flat_positions).
"""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog._flat_positions import (
    index_array, checked_index, fresh_copy, add_at, overwrite, dim_arg, as_source, reduce_at)
from torchlean.int_tensor import IntTensor

METHODS = ["index_add", "index_copy", "index_fill", "index_put", "index_reduce", "index_select"]
INPLACE = ["index_add", "index_copy", "index_fill", "index_put", "index_reduce"]
EXPORTS = {"torch": ["index_add", "index_copy", "index_fill", "index_put", "index_reduce",
                     "index_select"]}


def _index_positions(input, dim, index, op, wrap=False):
    """Flat positions of input's slices input.select(dim, i) for each i in index (1-D or 0-d),
    laid out as (..., len(index), ...) along dim; and the normalized dim."""
    shape = tuple(input.shape) or (1,)
    idx = index_array(index, op)
    if idx.ndim > 1:
        raise IndexError(f"{op}: index must be 0-d or 1-d, got shape {idx.shape}")
    d = dim_arg(dim, input.ndim, op)
    idx = checked_index(idx.reshape(-1), shape[d], op, d, input.shape, wrap)
    return np.take(np.arange(math.prod(shape)).reshape(shape), idx, axis=d), d


def _check_source(input, source, d, k, op):
    want = list(input.shape) or [1]
    want[d] = k
    got = tuple(source.shape) or (1,)
    if got != tuple(want) and not (input.ndim == 0 and math.prod(got) == k):
        raise ValueError(f"{op}: source of shape {tuple(source.shape)} must be {tuple(want)} "
                         f"(the input's shape {tuple(input.shape)} with dim {d} of length "
                         f"{k}, the index's)")


def _slice_index(input, dim, index, op, wrap=False):
    """(index as a checked 1-D int64 array, the normalized dim) for the index_* ops."""
    shape = tuple(input.shape) or (1,)
    idx = index_array(index, op)
    if idx.ndim > 1:
        raise IndexError(f"{op}: index must be 0-d or 1-d, got shape {idx.shape}")
    d = dim_arg(dim, input.ndim, op)
    return checked_index(idx.reshape(-1), shape[d], op, d, input.shape, wrap), d


def _as_rows(t, d):
    """t with dim d first and the other dims folded (a 0-d t as shape (1,)): the (len, rest)
    tensor the row kernels take, and the shape before folding."""
    moved = t if t.ndim else composite.reshape(t, (1,))
    if d:
        moved = composite.transpose(moved, 0, d)
    ms = tuple(moved.shape)
    return composite.reshape(moved, (ms[0], math.prod(ms[1:]))), ms


def _from_rows(y2, ms, d, input):
    """A (len, rest) result of _as_rows's layout back in input's layout."""
    y = composite.reshape(y2, ms)
    if d:
        y = composite.transpose(y, 0, d)
    return composite.reshape(y, ()) if input.ndim == 0 else y


def index_select(input, dim, index):  # noqa: A002
    """torch.index_select: the slices at index along dim (index 0-d or 1-d): gather_rows over
    dim's slices (VJP: their ordered scatter-add)."""
    idx, d = _slice_index(input, dim, index, "index_select")
    x2, ms = _as_rows(input, d)
    if idx.size == 0:
        y2 = composite.getitem(x2, slice(0, 0))
    else:
        y2 = input.session.op("gather_rows", x2, indices=idx)
    return _from_rows(y2, (idx.size,) + ms[1:], d, input)


def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """torch.index_add: input with alpha * source's slices added at index along dim: each
    slice's updates added onto it in index order (scatter_add_rows)."""
    source = as_source(input, source, "index_add")
    idx, d = _slice_index(input, dim, index, "index_add")
    _check_source(input, source, d, idx.size, "index_add")
    if idx.size == 0:
        return fresh_copy(input)
    vals = source if alpha == 1 else source * float(alpha)
    x2, ms = _as_rows(input, d)
    v2, _ = _as_rows(_like_input(vals, input), d)
    return _from_rows(input.session.op("scatter_add_rows", x2, v2, indices=idx), ms, d, input)


def _like_input(source, input):
    """source with input's rank (a 0-d input's source as shape (1,))."""
    return composite.reshape(source, (-1,)) if input.ndim == 0 else source


def index_copy(input, dim, index, source):  # noqa: A002
    """torch.index_copy: input with source's slices written at index along dim (of repeated
    indices the last stays)."""
    source = as_source(input, source, "index_copy")
    idx, d = _slice_index(input, dim, index, "index_copy")
    _check_source(input, source, d, idx.size, "index_copy")
    if idx.size == 0:
        return fresh_copy(input)
    x2, ms = _as_rows(input, d)
    v2, _ = _as_rows(_like_input(source, input), d)
    last = idx.size - 1 - np.unique(idx[::-1], return_index=True)[1]   # each slice's last copy
    reads = np.zeros(ms[0], np.int64)
    reads[idx[last]] = last
    hit = np.zeros((ms[0], 1), bool)
    hit[idx[last]] = True
    s = input.session
    y2 = composite.where(s, hit, s.op("gather_rows", v2, indices=reads), x2)
    return _from_rows(y2, ms, d, input)


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """torch.index_reduce: each slice at index along dim reduced with source's slices by 'prod',
    'mean', 'amax' or 'amin' (with the input's own value unless include_self=False), in index
    order."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ValueError(f"index_reduce: reduce must be one of 'prod', 'mean', 'amax', 'amin', "
                         f"got {reduce!r}")
    source = as_source(input, source, "index_reduce")
    pos, d = _index_positions(input, dim, index, "index_reduce")
    _check_source(input, source, d, pos.shape[d], "index_reduce")
    return reduce_at(input, pos, composite.reshape(source, pos.shape), reduce, include_self)


def index_fill(input, dim, index, value):  # noqa: A002
    """torch.index_fill: input with the slices at index along dim set to value (a number or a
    0-d Tensor, which then gets their gradient); negative indices count from the end."""
    idx, d = _slice_index(input, dim, index, "index_fill", wrap=True)
    if hasattr(value, "session"):
        if value.ndim != 0:
            raise ValueError(f"index_fill: value must be a number or a 0-d tensor, got shape "
                             f"{tuple(value.shape)}")
    else:
        value = float(value)
    shape = tuple(input.shape) or (1,)
    hit = np.zeros(shape[d], bool)
    hit[idx] = True
    hit = hit.reshape(tuple(n if a == d else 1 for a, n in enumerate(shape)))
    return composite.where(input.session, hit.reshape(tuple(input.shape)) if input.ndim == 0
                           else hit, value, input)


def _put_positions(input, indices, op):
    """Flat positions of input[indices] (a tuple of index arrays / IntTensors, NumPy's rules)."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}: indices must be a tuple of tensors, got {type(indices).__name__}")
    keys = []
    for k in indices:
        if isinstance(k, IntTensor) and k.numpy().dtype == np.bool_:
            keys.append(k.numpy())
        elif k is None or isinstance(k, slice):
            keys.append(slice(None) if k is None else k)
        else:
            keys.append(index_array(k, op, "indices"))
    flat = np.arange(math.prod(input.shape)).reshape(tuple(input.shape))
    try:
        return flat[tuple(keys)]
    except IndexError as e:
        raise IndexError(f"{op}: {e} (input shape {tuple(input.shape)})") from None


def index_put(input, indices, values, accumulate=False):  # noqa: A002
    """torch.index_put: input[indices] = values (broadcast), or += with accumulate=True (in
    index order); of repeated positions without accumulate the last stays."""
    pos = _put_positions(input, indices, "index_put")
    values = input.session.as_tensor(values)
    try:
        np.broadcast_shapes(tuple(values.shape), pos.shape)
    except ValueError:
        raise ValueError(f"index_put: values of shape {tuple(values.shape)} do not broadcast to "
                         f"the indexed shape {pos.shape}") from None
    vals = composite.expand(values, pos.shape) if tuple(values.shape) != pos.shape else values
    if accumulate:
        return add_at(input, pos, vals)
    return overwrite(input, pos, vals, np.arange(pos.size))
