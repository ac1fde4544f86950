"""Writing and reading by index: torch's scatter, scatter_add, scatter_reduce, index_add,
index_copy, index_fill, index_put, index_reduce, index_select, take, take_along_dim and put.

scatter_add with an IntTensor index as large as the input off dim keeps the index on the device
(put_add_rows along dim, the same order). Otherwise indices are host data (int64 IntTensors or
NumPy arrays): the op works out the flat positions it reads or writes on the host and records
registry ops over the flattened tensor:
reads are gather_vec (VJP: an ordered scatter-add), accumulation is scatter_add_vec (duplicates
added in index order on both libraries in deterministic and exact mode), and overwrites keep the
last write in index order (torch's CPU order) through `where` over a gathered source, so the
written values and the kept ones both get their gradients. Reductions other than a sum
(scatter_reduce and index_reduce prod/amax/amin) group each target's sources on the host and
reduce padded rows with registry reductions. Out-of-range indices are an IndexError naming the
op.
"""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite, indexing
from torchlean.catalog._device_index import check_range, index_tensor
from torchlean.int_tensor import IntTensor
from torchlean.tape import no_grad

METHODS = ["scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill",
           "index_put", "index_reduce", "index_select", "take", "take_along_dim", "put"]
INPLACE = ["scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill",
           "index_put", "index_reduce", "put"]
EXPORTS = {"torch": ["scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy",
                     "index_fill", "index_put", "index_reduce", "index_select", "take",
                     "take_along_dim"]}


# ------------------------------------------------------------------------------ host helpers

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


def _check_range(idx, n, op, d, shape, wrap=False):
    """idx with negative entries wrapped (when `wrap`), after checking every entry is in range."""
    lo = -n if wrap else 0
    if idx.size and (idx.min() < lo or idx.max() >= n):
        bad = idx[(idx < lo) | (idx >= n)].reshape(-1)[0]
        raise IndexError(f"{op}: index {bad} is out of bounds for dimension {d} with size {n} "
                         f"(shape {tuple(shape)})")
    return np.where(idx < 0, idx + n, idx) if wrap else idx


def _grid_positions(idx, d, shape):
    """Flat positions into `shape` of each entry of idx, with axis d replaced by idx's values."""
    if idx.ndim == 0:
        return np.zeros((), np.int64)
    grid = list(np.indices(idx.shape, sparse=True))
    grid[d] = idx
    return np.ravel_multi_index(tuple(np.broadcast_arrays(*grid)), shape)


def _flat(x):
    return composite.reshape(x, (-1,))


def _same(x):
    """A new result equal to x (nothing written): a copy on the tape, as torch returns one."""
    return x * 1.0


def _gather_flat(t, pos):
    """t's flattened entries at the flat positions pos (any shape), shaped like pos."""
    pos = np.asarray(pos, np.int64)
    if pos.size == 0:
        return composite.reshape(composite.getitem(_flat(t), slice(0, 0)), pos.shape)
    return composite.reshape(t.session.op("gather_vec", _flat(t), indices=pos.reshape(-1)),
                             pos.shape)


def add_at(x, pos, values):
    """x with values (a tensor shaped like pos) added at flat positions pos, in index order."""
    pos = np.asarray(pos, np.int64).reshape(-1)
    if pos.size == 0:
        return _same(x)
    y = x.session.op("scatter_add_vec", _flat(x), _flat(values), indices=pos)
    return composite.reshape(y, tuple(x.shape))


def overwrite(x, pos, src=None, src_pos=None, value=None):
    """x with flat positions pos overwritten by src's flat entries src_pos (or by `value`);
    of repeated positions the last write in index order stays."""
    pos = np.asarray(pos, np.int64).reshape(-1)
    if pos.size == 0:
        return _same(x)
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
    return composite.where(s, mask, _gather_flat(src, reads.reshape(tuple(x.shape))), x)


def _dim(dim, ndim, op):
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__} {dim!r}")
    return indexing.normalize_dim(dim, max(ndim, 1), op)


# ------------------------------------------------------------------------------ scatter

def _scatter_positions(input, dim, index, src, op):
    """(target flat positions, source flat positions or None) of torch.scatter's rule."""
    shape = tuple(input.shape)
    idx = index_array(index, op)
    d = _dim(dim, len(shape), op)
    if idx.ndim != len(shape) and not (idx.ndim <= 1 and len(shape) <= 1):
        raise ValueError(f"{op}: index of shape {idx.shape} must have the input's rank "
                         f"{len(shape)} (input shape {shape})")
    if not shape:                      # a 0-d input acts as shape (1,)
        shape, idx = (1,), idx.reshape(-1)
    for a, (i, n) in enumerate(zip(idx.shape, shape)):
        if a != d and i > n:
            raise ValueError(f"{op}: index shape {idx.shape} exceeds the input shape "
                             f"{tuple(input.shape)} off dim {d}")
    src_pos = None
    if src is not None:
        ss = tuple(src.shape) or (1,)
        if len(ss) != idx.ndim or any(i > n for i, n in zip(idx.shape, ss)):
            raise ValueError(f"{op}: index shape {idx.shape} exceeds the source shape "
                             f"{tuple(src.shape)}")
        src_pos = (np.ravel_multi_index(tuple(np.broadcast_arrays(*np.indices(idx.shape,
                   sparse=True))), ss) if idx.ndim else np.zeros((), np.int64))
    idx = _check_range(idx, shape[d], op, d, input.shape)
    return _grid_positions(idx, d, shape), src_pos


def _as_source(input, src, op):
    if hasattr(src, "session"):
        return input.session.as_tensor(src)
    raise TypeError(f"{op}: src must be a Tensor, got {type(src).__name__}")


def scatter(input, dim, index, src=None, *, value=None, reduce=None):  # noqa: A002 - torch names
    """torch.scatter: input with input[... index[p] ...] = src[p] (or `value`) along dim; of
    repeated targets the last in index order stays. reduce='add'/'multiply': scatter_reduce's
    sum/prod with the input included."""
    if src is not None and not hasattr(src, "session"):
        src, value = None, src          # scatter(input, dim, index, value)
    if (src is None) == (value is None):
        raise TypeError("scatter: give exactly one of src (a Tensor) and value (a number)")
    if reduce is not None:
        kinds = {"add": "sum", "multiply": "prod"}
        if reduce not in kinds:
            raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
        if src is None:
            src = input.session.tensor(np.full(index_array(index, "scatter").shape, value,
                                               np.float32))
        return scatter_reduce(input, dim, index, src, kinds[reduce])
    src = None if src is None else _as_source(input, src, "scatter")
    pos, src_pos = _scatter_positions(input, dim, index, src, "scatter")
    if src is None:
        return overwrite(input, pos, value=float(value))
    return overwrite(input, pos, src, src_pos)


def scatter_add(input, dim, index, src):  # noqa: A002
    """torch.scatter_add: input with src[p] added at input[... index[p] ...] along dim; repeated
    targets add in index order (every mode on the stub, deterministic and exact mode on CUDA).
    An IntTensor index as large as input off dim runs on the device (put_add_rows along dim)."""
    src = _as_source(input, src, "scatter_add")
    y = _scatter_add_device(input, dim, index, src)
    if y is not None:
        return y
    pos, src_pos = _scatter_positions(input, dim, index, src, "scatter_add")
    return add_at(input, pos, _source_values(src, src_pos, pos))


def _scatter_add_device(input, dim, index, src):
    """scatter_add with the index as a device buffer (no host positions), or None where the
    host path applies (0-d or empty tensors, an index smaller than input off dim, values past
    2^24)."""
    shape = tuple(input.shape)
    if not isinstance(index, IntTensor) or index.dtype.name == "bool" or not shape:
        return None
    ishape, d = tuple(index.shape), _dim(dim, len(shape), "scatter_add")
    if (len(ishape) != len(shape) or not index.numel()
            or any(i != n for a, (i, n) in enumerate(zip(ishape, shape)) if a != d)):
        return None
    ss = tuple(src.shape)
    if len(ss) != len(ishape) or any(i > n for i, n in zip(ishape, ss)):
        raise ValueError(f"scatter_add: index shape {ishape} exceeds the source shape {ss}")
    check_range(index, shape[d], "scatter_add", d, shape)
    s = input.session
    it = index_tensor(s, index)
    if it is None:
        return None
    if ss != ishape:
        src = composite.getitem(src, tuple(slice(0, i) for i in ishape))
    last = len(shape) - 1
    x = input
    if d != last:
        x, src = composite.transpose(x, d, last), composite.transpose(src, d, last)
        with no_grad():
            it = composite.transpose(it, d, last)
    y = s.op("put_add_rows", x, it, src)
    return y if d == last else composite.transpose(y, d, last)


def _source_values(src, src_pos, pos):
    """src's entries read by scatter (the index's corner of src): src itself when it has the
    index's shape, else a gather."""
    if tuple(src.shape) == np.shape(pos) or (src.ndim == 0 and np.size(pos) == 1):
        return composite.reshape(src, np.shape(pos))
    return _gather_flat(src, src_pos)


def _count_at(pos, n):
    return np.bincount(np.asarray(pos, np.int64).reshape(-1), minlength=n)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """torch.scatter_reduce: each target's sources reduced by 'sum', 'prod', 'mean', 'amax' or
    'amin' (with the input's own value unless include_self=False); untouched entries keep the
    input. Sums run in index order; prod/amax/amin reduce each target's sources in index order."""
    op = "scatter_reduce"
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise ValueError(f"{op}: reduce must be one of 'sum', 'prod', 'mean', 'amax', 'amin', "
                         f"got {reduce!r}")
    src = _as_source(input, src, op)
    pos, src_pos = _scatter_positions(input, dim, index, src, op)
    return reduce_at(input, pos, _source_values(src, src_pos, pos), reduce, include_self)


def reduce_at(input, pos, vals, reduce, include_self):
    """input with each flat position in pos replaced by the reduction of the values aimed at
    it (vals shaped like pos), in index order, with its own value first when include_self."""
    pos = np.asarray(pos, np.int64).reshape(-1)
    if pos.size == 0:
        return _same(input)
    n, shape, s = math.prod(input.shape), tuple(input.shape), input.session
    hit = (_count_at(pos, n) > 0).reshape(shape)
    if reduce in ("sum", "mean"):
        base = input if include_self else composite.where(s, hit, 0.0, input)
        total = add_at(base, pos, vals)
        if reduce == "sum":
            return total
        count = _count_at(pos, n).reshape(shape) + (1 if include_self else 0)
        denom = s.tensor(np.maximum(count, 1).astype(np.float32))
        return composite.where(s, hit, total / denom, input)
    return _reduce_groups(input, pos, _flat(vals), reduce, include_self, hit)


def _reduce_groups(input, pos, vals, reduce, include_self, hit):
    """prod/amax/amin per target: the targets grouped by source count (powers of two), each
    group's sources (the input's value first when included) in index order as padded rows
    (padding: the reduction's identity), reduced along the rows."""
    s, shape = input.session, tuple(input.shape)
    order = np.argsort(pos, kind="stable")            # sources grouped by target, index order
    targets, starts, counts = np.unique(pos[order], return_index=True, return_counts=True)
    ident = {"prod": 1.0, "amax": -np.inf, "amin": np.inf}[reduce]
    xf = _flat(input)
    pieces, placed = [], []
    width_of = 1 << np.ceil(np.log2(counts + (1 if include_self else 0))).astype(np.int64)
    for w in np.unique(width_of):
        sel = np.nonzero(width_of == w)[0]
        cols = np.full((sel.size, int(w)), -1, np.int64)       # -1: padding
        for r, g in enumerate(sel):
            srcs = order[starts[g]:starts[g] + counts[g]]
            cols[r, :counts[g]] = srcs
        rows = _gather_flat(vals, np.maximum(cols, 0))
        rows = composite.where(s, cols >= 0, rows, ident)
        if include_self:
            own = composite.reshape(_gather_flat(xf, targets[sel]), (sel.size, 1))
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
    return composite.where(s, hit, _gather_flat(result, where_from.reshape(shape)), input)


# ------------------------------------------------------------------------------ index_*

def _index_positions(input, dim, index, op, wrap=False):
    """Flat positions of input's slices input.select(dim, i) for each i in index (1-D or 0-d),
    laid out as (..., len(index), ...) along dim; and the normalized dim."""
    shape = tuple(input.shape) or (1,)
    idx = index_array(index, op)
    if idx.ndim > 1:
        raise IndexError(f"{op}: index must be 0-d or 1-d, got shape {idx.shape}")
    d = _dim(dim, input.ndim, op)
    idx = _check_range(idx.reshape(-1), shape[d], op, d, input.shape, wrap)
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
    d = _dim(dim, input.ndim, op)
    return _check_range(idx.reshape(-1), shape[d], op, d, input.shape, wrap), d


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
    source = _as_source(input, source, "index_add")
    idx, d = _slice_index(input, dim, index, "index_add")
    _check_source(input, source, d, idx.size, "index_add")
    if idx.size == 0:
        return _same(input)
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
    source = _as_source(input, source, "index_copy")
    idx, d = _slice_index(input, dim, index, "index_copy")
    _check_source(input, source, d, idx.size, "index_copy")
    if idx.size == 0:
        return _same(input)
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
    source = _as_source(input, source, "index_reduce")
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


def take(input, index):  # noqa: A002
    """torch.take: input's flattened entries at index (negative counts from the end), shaped
    like index."""
    idx = index_array(index, "take")
    n = math.prod(input.shape)
    return _gather_flat(input, _check_range(idx, n, "take", 0, input.shape, wrap=True))


def put(input, index, source, accumulate=False):  # noqa: A002
    """torch.Tensor.put: input's flattened entries at index set to source's (or added, in
    index order, with accumulate=True); negative indices count from the end."""
    idx = index_array(index, "put")
    source = _as_source(input, source, "put")
    if math.prod(source.shape) != idx.size:
        raise ValueError(f"put: source has {math.prod(source.shape)} elements, index "
                         f"{idx.size}")
    pos = _check_range(idx.reshape(-1), math.prod(input.shape), "put", 0, input.shape, wrap=True)
    if accumulate:
        return add_at(input, pos, _flat(source))
    return overwrite(input, pos, source, np.arange(pos.size))


def take_along_dim(input, indices, dim=None):  # noqa: A002
    """torch.take_along_dim: gather along dim after broadcasting input and indices on every
    other dim (dim=None: of the flattened input)."""
    idx = index_array(indices, "take_along_dim", "indices")
    if dim is None:
        return take(composite.reshape(input, (-1,)), IntTensor(idx.reshape(-1)))
    shape = tuple(input.shape)
    d = _dim(dim, len(shape), "take_along_dim")
    if idx.ndim != len(shape):
        raise ValueError(f"take_along_dim: indices of shape {idx.shape} must have the input's "
                         f"rank {len(shape)}")
    try:
        common = [1 if a == d else int(np.broadcast_shapes((shape[a],), (idx.shape[a],))[0])
                  for a in range(len(shape))]
    except ValueError:
        raise ValueError(f"take_along_dim: input {shape} and indices {idx.shape} do not "
                         f"broadcast off dim {d}") from None
    xs = tuple(shape[a] if a == d else common[a] for a in range(len(shape)))
    ist = tuple(idx.shape[a] if a == d else common[a] for a in range(len(shape)))
    _check_range(idx, shape[d], "take_along_dim", d, shape)
    x = composite.expand(input, xs) if xs != shape else input
    return composite.gather(x, d, np.broadcast_to(idx, ist))
