"""Reading and writing a tensor at flat positions worked out on the host: the ground the
scatter, index_* and take/put families (and counting's and searching's writes) stand on.

Reads are gather_vec (VJP: an ordered scatter-add), accumulation is scatter_add_vec (duplicates
added in index order on both libraries in deterministic and exact mode), overwrites keep the
last write in index order (torch's CPU order) through `where` over a gathered source, and other
reductions group each target's sources on the host and reduce padded rows with registry
reductions. Out-of-range indices are an IndexError naming the op.
"""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite, indexing
from torchlean.int_tensor import IntTensor


def index_array(index, op, what="index"):
    """An int64 NumPy array from an IntTensor, an integer array or a list of ints."""
    if isinstance(index, IntTensor):
        a = index.numpy()
    elif hasattr(index, "session"):
        raise TypeError(f"{op}: {what} must be an int64 tensor, got a float32 Tensor")
    else:
        a = np.asarray(index)
        if a.size == 0 and a.dtype.kind == "f":
            a = a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{op}: {what} must be an int64 tensor, got dtype {a.dtype}")
    return a.astype(np.int64, copy=False)


def checked_index(idx, n, op, d, shape, wrap=False):
    """idx with negative entries wrapped (when `wrap`), after checking every entry is in range."""
    lo = -n if wrap else 0
    if idx.size and (idx.min() < lo or idx.max() >= n):
        bad = idx[(idx < lo) | (idx >= n)].reshape(-1)[0]
        raise IndexError(f"{op}: index {bad} is out of bounds for dimension {d} with size {n} "
                         f"(shape {tuple(shape)})")
    return np.where(idx < 0, idx + n, idx) if wrap else idx


def grid_positions(idx, d, shape):
    """Flat positions into `shape` of each entry of idx, with axis d replaced by idx's values."""
    if idx.ndim == 0:
        return np.zeros((), np.int64)
    grid = list(np.indices(idx.shape, sparse=True))
    grid[d] = idx
    return np.ravel_multi_index(tuple(np.broadcast_arrays(*grid)), shape)


def flat(x):
    """x as a 1-D tensor (a view)."""
    return composite.reshape(x, (-1,))


def fresh_copy(x):
    """A new result equal to x (nothing written): a copy on the tape, as torch returns one."""
    return x * 1.0


def gather_flat(t, pos):
    """t's flattened entries at the flat positions pos (any shape), shaped like pos."""
    pos = np.asarray(pos, np.int64)
    if pos.size == 0:
        return composite.reshape(composite.getitem(flat(t), slice(0, 0)), pos.shape)
    return composite.reshape(t.session.op("gather_vec", flat(t), indices=pos.reshape(-1)),
                             pos.shape)


def add_at(x, pos, values):
    """x with values (a tensor shaped like pos) added at flat positions pos, in index order."""
    pos = np.asarray(pos, np.int64).reshape(-1)
    if pos.size == 0:
        return fresh_copy(x)
    y = x.session.op("scatter_add_vec", flat(x), flat(values), indices=pos)
    return composite.reshape(y, tuple(x.shape))


def overwrite(x, pos, src=None, src_pos=None, value=None):
    """x with flat positions pos overwritten by src's flat entries src_pos (or by `value`);
    of repeated positions the last write in index order stays."""
    pos = np.asarray(pos, np.int64).reshape(-1)
    if pos.size == 0:
        return fresh_copy(x)
    n = math.prod(x.shape)
    last = pos.size - 1 - np.unique(pos[::-1], return_index=True)[1]   # each position's last write
    mask = np.zeros(n, bool)
    mask[pos[last]] = True
    mask = mask.reshape(tuple(x.shape))
    s = x.session
    if src is None:
        return composite.where(s, mask, value, x)
    reads = np.zeros(n, np.int64)
    reads[pos[last]] = np.asarray(src_pos, np.int64).reshape(-1)[last]
    return composite.where(s, mask, gather_flat(src, reads.reshape(tuple(x.shape))), x)


def dim_arg(dim, ndim, op):
    """dim checked to be an int and made non-negative (a 0-d tensor has dim 0)."""
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__} {dim!r}")
    return indexing.normalize_dim(dim, max(ndim, 1), op)


def as_source(input, src, op):
    """src as a Tensor of input's session; anything but a Tensor is a TypeError."""
    if hasattr(src, "session"):
        return input.session.as_tensor(src)
    raise TypeError(f"{op}: src must be a Tensor, got {type(src).__name__}")


def count_at(pos, n):
    """How many of the flat positions pos land on each of n entries."""
    return np.bincount(np.asarray(pos, np.int64).reshape(-1), minlength=n)


def reduce_at(input, pos, vals, reduce, include_self):
    """input with each flat position in pos replaced by the reduction of the values aimed at
    it (vals shaped like pos), in index order, with its own value first when include_self."""
    pos = np.asarray(pos, np.int64).reshape(-1)
    if pos.size == 0:
        return fresh_copy(input)
    n, shape, s = math.prod(input.shape), tuple(input.shape), input.session
    hit = (count_at(pos, n) > 0).reshape(shape)
    if reduce in ("sum", "mean"):
        base = input if include_self else composite.where(s, hit, 0.0, input)
        total = add_at(base, pos, vals)
        if reduce == "sum":
            return total
        count = count_at(pos, n).reshape(shape) + (1 if include_self else 0)
        denom = s.tensor(np.maximum(count, 1).astype(np.float32))
        return composite.where(s, hit, total / denom, input)
    return reduce_groups(input, pos, flat(vals), reduce, include_self, hit)


def reduce_groups(input, pos, vals, reduce, include_self, hit):
    """prod/amax/amin per target: the targets grouped by source count (powers of two), each
    group's sources (the input's value first when included) in index order as padded rows
    (padding: the reduction's identity), reduced along the rows."""
    s, shape = input.session, tuple(input.shape)
    order = np.argsort(pos, kind="stable")            # sources grouped by target, index order
    targets, starts, counts = np.unique(pos[order], return_index=True, return_counts=True)
    ident = {"prod": 1.0, "amax": -np.inf, "amin": np.inf}[reduce]
    xf = flat(input)
    pieces, placed = [], []
    width_of = 1 << np.ceil(np.log2(counts + (1 if include_self else 0))).astype(np.int64)
    for w in np.unique(width_of):
        sel = np.nonzero(width_of == w)[0]
        cols = np.full((sel.size, int(w)), -1, np.int64)       # -1: padding
        for r, g in enumerate(sel):
            srcs = order[starts[g]:starts[g] + counts[g]]
            cols[r, :counts[g]] = srcs
        rows = gather_flat(vals, np.maximum(cols, 0))
        rows = composite.where(s, cols >= 0, rows, ident)
        if include_self:
            own = composite.reshape(gather_flat(xf, targets[sel]), (sel.size, 1))
            rows = composite.cat([own, rows], 1)
        if reduce == "prod":
            red = composite.getitem(s.op("cumprod_rows", rows), (slice(None), -1))
        else:
            red = composite.reduce(rows, reduce, 1)
        pieces.append(red)
        placed.append(targets[sel])
    result = composite.cat(pieces, 0) if len(pieces) > 1 else pieces[0]
    where_from = np.zeros(math.prod(shape), np.int64)
    where_from[np.concatenate(placed)] = np.arange(sum(p.size for p in placed))
    return composite.where(s, hit, gather_flat(result, where_from.reshape(shape)), input)
