"""Writing and reading by index along a dim or at flat positions: torch's scatter, scatter_add,
scatter_reduce, take, take_along_dim and put (the index_* ops are torchlean.catalog.index_ops).

scatter_add with an IntTensor index as large as the input off dim keeps the index on the device
(put_add_rows along dim, the same order). Otherwise indices are host data (int64 IntTensors or
NumPy arrays): the op works out the flat positions it reads or writes on the host and records
registry ops over the flattened tensor (torchlean.catalog._flat_positions says how).
Out-of-range indices are an IndexError naming the op.
"""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog._device_index import check_range, index_tensor
from torchlean.catalog._flat_positions import (
    index_array, checked_index, grid_positions, flat, gather_flat, add_at, overwrite, dim_arg,
    as_source, reduce_at)
from torchlean.int_tensor import IntTensor
from torchlean.tape import no_grad

METHODS = ["scatter", "scatter_add", "scatter_reduce", "take", "take_along_dim", "put"]
INPLACE = ["scatter", "scatter_add", "scatter_reduce", "put"]
EXPORTS = {"torch": ["scatter", "scatter_add", "scatter_reduce", "take", "take_along_dim"]}


def _scatter_positions(input, dim, index, src, op):
    """(target flat positions, source flat positions or None) of torch.scatter's rule."""
    shape = tuple(input.shape)
    idx = index_array(index, op)
    d = dim_arg(dim, len(shape), op)
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
    idx = checked_index(idx, shape[d], op, d, input.shape)
    return grid_positions(idx, d, shape), src_pos


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
    src = None if src is None else as_source(input, src, "scatter")
    pos, src_pos = _scatter_positions(input, dim, index, src, "scatter")
    if src is None:
        return overwrite(input, pos, value=float(value))
    return overwrite(input, pos, src, src_pos)


def scatter_add(input, dim, index, src):  # noqa: A002
    """torch.scatter_add: input with src[p] added at input[... index[p] ...] along dim; repeated
    targets add in index order (every mode on the stub, deterministic and exact mode on CUDA).
    An IntTensor index as large as input off dim runs on the device (put_add_rows along dim)."""
    src = as_source(input, src, "scatter_add")
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
    ishape, d = tuple(index.shape), dim_arg(dim, len(shape), "scatter_add")
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
    return gather_flat(src, src_pos)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """torch.scatter_reduce: each target's sources reduced by 'sum', 'prod', 'mean', 'amax' or
    'amin' (with the input's own value unless include_self=False); untouched entries keep the
    input. Sums run in index order; prod/amax/amin reduce each target's sources in index order."""
    op = "scatter_reduce"
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise ValueError(f"{op}: reduce must be one of 'sum', 'prod', 'mean', 'amax', 'amin', "
                         f"got {reduce!r}")
    src = as_source(input, src, op)
    pos, src_pos = _scatter_positions(input, dim, index, src, op)
    return reduce_at(input, pos, _source_values(src, src_pos, pos), reduce, include_self)


def take(input, index):  # noqa: A002
    """torch.take: input's flattened entries at index (negative counts from the end), shaped
    like index."""
    idx = index_array(index, "take")
    n = math.prod(input.shape)
    return gather_flat(input, checked_index(idx, n, "take", 0, input.shape, wrap=True))


def put(input, index, source, accumulate=False):  # noqa: A002
    """torch.Tensor.put: input's flattened entries at index set to source's (or added, in
    index order, with accumulate=True); negative indices count from the end."""
    idx = index_array(index, "put")
    source = as_source(input, source, "put")
    if math.prod(source.shape) != idx.size:
        raise ValueError(f"put: source has {math.prod(source.shape)} elements, index "
                         f"{idx.size}")
    pos = checked_index(idx.reshape(-1), math.prod(input.shape), "put", 0, input.shape, wrap=True)
    if accumulate:
        return add_at(input, pos, flat(source))
    return overwrite(input, pos, source, np.arange(pos.size))


def take_along_dim(input, indices, dim=None):  # noqa: A002
    """torch.take_along_dim: gather along dim after broadcasting input and indices on every
    other dim (dim=None: of the flattened input)."""
    idx = index_array(indices, "take_along_dim", "indices")
    if dim is None:
        return take(composite.reshape(input, (-1,)), IntTensor(idx.reshape(-1)))
    shape = tuple(input.shape)
    d = dim_arg(dim, len(shape), "take_along_dim")
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
    checked_index(idx, shape[d], "take_along_dim", d, shape)
    x = composite.expand(input, xs) if xs != shape else input
    return composite.gather(x, d, np.broadcast_to(idx, ist))
