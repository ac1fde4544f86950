"""Joining and splitting tensors (stacks, splits by sections or indices, grids, products of
index sets, block diagonals, Kronecker products, broadcasting several tensors): cat, stack,
reshape, expand and getitem underneath, so gradients flow to every piece."""
from __future__ import annotations

import itertools

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c

METHODS = ("hsplit", "vsplit", "dsplit", "tensor_split", "split_with_sizes", "unsafe_chunk",
           "unsafe_split", "kron", "sum_to_size")
EXPORTS = {"torch": ("atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack",
                     "dstack", "column_stack", "hsplit", "vsplit", "dsplit", "tensor_split",
                     "split_with_sizes", "unsafe_chunk", "unsafe_split", "meshgrid",
                     "cartesian_prod", "combinations", "block_diag", "kron",
                     "broadcast_tensors", "broadcast_shapes")}


def _seq(op, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    return [c.tensor(op, t, "tensors") for t in tensors]


def _atleast(op, rank, tensors):
    single = len(tensors) == 1 and not isinstance(tensors[0], (list, tuple))
    out = []
    for x in _seq(op, tensors):
        s = tuple(x.shape)
        if len(s) < rank:
            s = {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[len(s)] if rank == 3 else \
                ((1,) * (rank - len(s)) + s)
            x = x.reshape(s)
        out.append(x)
    return out[0] if single else tuple(out)


def atleast_1d(*tensors):
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors):
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors):
    return _atleast("atleast_3d", 3, tensors)


def hstack(tensors):
    ts = _atleast("hstack", 1, (list(tensors),))
    return composite.cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    return composite.cat(_atleast("vstack", 2, (list(tensors),)), 0)


row_stack = vstack


def dstack(tensors):
    return composite.cat(_atleast("dstack", 3, (list(tensors),)), 2)


def column_stack(tensors):
    ts = [t.reshape(-1, 1) if t.ndim <= 1 else t for t in _seq("column_stack", (list(tensors),))]
    return composite.cat(ts, 1)


def tensor_split(input, indices_or_sections, dim=0):
    """Sections: the first n % k pieces one longer; indices: cut before each index (clipped)."""
    x = c.tensor("tensor_split", input)
    d = c.dim("tensor_split", dim, x.ndim)
    n = x.shape[d]
    ios = indices_or_sections
    if hasattr(ios, "numpy"):
        ios = ios.numpy()
        ios = int(ios) if np.ndim(ios) == 0 else [int(v) for v in ios]
    if isinstance(ios, (int, np.integer)):
        k = int(ios)
        if k <= 0:
            raise ValueError(f"tensor_split: number of sections must be positive, got {k}")
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        cuts = list(itertools.accumulate(sizes))[:-1]
    else:
        cuts = [int(v) for v in ios]
    bounds = [0] + [min(max(v + n if v < 0 else v, 0), n) for v in cuts] + [n]
    pre = (slice(None),) * d
    return tuple(x[pre + (slice(a, max(a, b)),)] for a, b in zip(bounds, bounds[1:]))


def _directional_split(op, input, ios, d, min_rank):
    x = c.tensor(op, input)
    if x.ndim < min_rank:
        raise ValueError(f"{op}: needs a tensor of at least {min_rank} dims, got shape "
                         f"{tuple(x.shape)}")
    if isinstance(ios, (int, np.integer)) and x.shape[d] % int(ios):
        raise ValueError(f"{op}: dim {d} of size {x.shape[d]} does not divide into {ios} "
                         "equal sections")
    return tensor_split(x, ios, d)


def hsplit(input, indices_or_sections):
    x = c.tensor("hsplit", input)
    return _directional_split("hsplit", x, indices_or_sections, 0 if x.ndim == 1 else 1, 1)


def vsplit(input, indices_or_sections):
    return _directional_split("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    return _directional_split("dsplit", input, indices_or_sections, 2, 3)


def split_with_sizes(input, split_sizes, dim=0):
    x = c.tensor("split_with_sizes", input)
    return x.split([int(v) for v in split_sizes], dim)


def unsafe_split(input, split_size, dim=0):
    """Views of input, as torch.split (torch's unsafe_ forms differ only in autograd checks)."""
    return c.tensor("unsafe_split", input).split(split_size, dim)


def unsafe_chunk(input, chunks, dim=0):
    return c.tensor("unsafe_chunk", input).chunk(chunks, dim)


def meshgrid(*tensors, indexing="ij"):
    ts = _seq("meshgrid", tensors)
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if any(t.ndim > 1 for t in ts):
        raise ValueError(f"meshgrid: expects 0-d or 1-d tensors, got shapes "
                         f"{[tuple(t.shape) for t in ts]}")
    ts = [t.reshape(-1) for t in ts]
    swap = indexing == "xy" and len(ts) >= 2
    order = [1, 0] + list(range(2, len(ts))) if swap else list(range(len(ts)))
    shape = tuple(ts[i].shape[0] for i in order)
    out = []
    for t in ts:
        axis = order.index(len(out))
        view = [1] * len(ts)
        view[axis] = t.shape[0]
        out.append(c.expand(t.reshape(view), shape))
    return tuple(out)


def cartesian_prod(*tensors):
    ts = _seq("cartesian_prod", tensors)
    if len(ts) == 1:
        return ts[0]
    return composite.stack([g.reshape(-1) for g in meshgrid(*ts, indexing="ij")], 1)


def combinations(input, r=2, with_replacement=False):
    x = c.tensor("combinations", input)
    if x.ndim != 1 or r < 0:
        raise ValueError(f"combinations: expects a 1-D tensor and r >= 0, got shape "
                         f"{tuple(x.shape)} and r {r}")
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    idx = np.array(list(pick(range(x.shape[0]), r)), np.int64).reshape(-1, r)
    if r == 0:
        return x[0:0]
    return c.rearrange(x, idx)


def block_diag(*tensors):
    ts = [t.reshape(1, -1) if t.ndim < 2 else t for t in _seq("block_diag", tensors)]
    if any(t.ndim != 2 for t in ts):
        raise ValueError(f"block_diag: expects tensors of at most 2 dims, got shapes "
                         f"{[tuple(t.shape) for t in ts]}")
    if not ts:
        return c.session_of().tensor(np.zeros((1, 0), np.float32))
    cols = sum(t.shape[1] for t in ts)
    rows, left = [], 0
    for t in ts:
        rows.append(_pad_cols(t, left, cols - left - t.shape[1]))
        left += t.shape[1]
    return composite.cat(rows, 0)


def _pad_cols(t, left, right):
    s = t.session
    parts = ([s.tensor(np.zeros((t.shape[0], left), np.float32))] if left else []) + [t] + \
            ([s.tensor(np.zeros((t.shape[0], right), np.float32))] if right else [])
    return composite.cat(parts, 1)


def kron(input, other):
    """out[i*B + j] = a[i] b[j] per axis: the outer product with the axes interleaved."""
    a = c.tensor("kron", input)
    b = c.operand(a.session, "kron", other)
    n = max(a.ndim, b.ndim)
    sa = (1,) * (n - a.ndim) + tuple(a.shape)
    sb = (1,) * (n - b.ndim) + tuple(b.shape)
    av = a.reshape([v for k in sa for v in (k, 1)])
    bv = b.reshape([v for k in sb for v in (1, k)])
    return (av * bv).reshape(tuple(p * q for p, q in zip(sa, sb)))


def broadcast_shapes(*shapes):
    shapes = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    return c.broadcast_shapes("broadcast_shapes", *shapes)


def broadcast_tensors(*tensors):
    ts = _seq("broadcast_tensors", tensors)
    shape = c.broadcast_shapes("broadcast_tensors", *[t.shape for t in ts])
    return tuple(c.expand(t, shape) for t in ts)


def sum_to_size(input, *size):
    x = c.tensor("sum_to_size", input)
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else size
    try:
        if np.broadcast_shapes(size, tuple(x.shape)) != tuple(x.shape):
            raise ValueError
    except ValueError:
        raise RuntimeError(f"sum_to_size: size {tuple(size)} is not expandable to the "
                           f"tensor's shape {tuple(x.shape)}") from None
    return c.sum_to(x, size)
