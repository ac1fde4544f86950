"""PyTorch's shape and indexing operations composed from registry ops: reshape, getitem,
permute, transpose, (un)squeeze, flatten, gather and expand. Indexing and general permutations
are gather_vec (VJP: scatter-add), leading-axis blocks slice_range0 (VJP: pad); a shape that
changes nothing gives back the same Tensor, as torch does (a new one under no_grad).

The ground floor of torchlean.composite: its reductions, joins and arithmetic are built on
these.
"""
from __future__ import annotations

import math

import numpy as np

from torchlean import indexing
from torchlean.int_tensor import IntTensor, host_key
from torchlean.tape import is_grad_enabled, no_grad


def session_op(x, name, *others, **attrs):
    """Record registry op `name` on x (and others) in x's session."""
    return x.session.op(name, x, *others, **attrs)


def unchanged(x):
    """x for an op that changes nothing (a reshape to its own shape, an identity permutation):
    the same Tensor, except under no_grad, where torch's result is a new view that needs no
    gradient, so a loss built from it must not reach x's graph."""
    if is_grad_enabled() or not x.requires_grad:
        return x
    return x.detach()


# ------------------------------------------------------------------------------ shapes

def reshape(x, shape, op="reshape"):
    shape = indexing.reshape_target(x.shape, shape, op)
    if shape == tuple(x.shape):
        return unchanged(x)
    return session_op(x, "reshape", shape=shape)


def getitem(x, key):
    plan = indexing.plan_getitem(x.shape, host_key(key), lambda t: t.numpy())
    if plan.kind == "block":
        rows = math.prod(x.shape) // plan.row
        flat = reshape(x, (rows, plan.row))
        if (plan.start, plan.length) != (0, rows):
            flat = session_op(flat, "slice_range0", start=plan.start, length=plan.length)
        return reshape(flat, plan.shape)
    if plan.indices.size == 0:
        # nothing to read: a zero-size result that still belongs to x's graph
        return reshape(session_op(reshape(x, (-1,)), "slice_range0", start=0, length=0), plan.shape)
    y = session_op(reshape(x, (-1,)), "gather_vec", indices=plan.indices)
    return reshape(y, plan.shape)     # a 0-d index array gives a 0-d result, as NumPy


def permute(x, dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    perm = indexing.normalize_permutation(dims, x.ndim)
    if perm == tuple(range(x.ndim)):
        return unchanged(x)
    if x.ndim == 2:
        return session_op(x, "transpose2d")
    if perm == (1, 2, 0):
        return session_op(x, "permute3d_bca")
    if perm == (2, 0, 1):
        return session_op(x, "permute3d_cab")
    depth = indexing.adjacent_swap_depth(perm)
    if depth is not None:
        return session_op(x, "swap_adjacent", depth=depth)
    if math.prod(x.shape) == 0:
        return reshape(x, tuple(x.shape[p] for p in perm))
    return session_op(reshape(x, (-1,)), "gather_vec",
               indices=indexing.permutation_indices(tuple(x.shape), perm))


def transpose(x, dim0, dim1):
    n = x.ndim
    a, b = (indexing.normalize_dim(d, n, "transpose") for d in (dim0, dim1))
    if n < 2 or a == b:
        return unchanged(x)
    perm = list(range(n))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(x, perm)


def unsqueeze(x, dim):
    n = x.ndim + 1
    d = indexing.normalize_dim(dim, n, "unsqueeze")
    s = tuple(x.shape)
    return reshape(x, s[:d] + (1,) + s[d:], "unsqueeze")


def squeeze(x, dim=None):
    s = tuple(x.shape)
    if dim is None:
        dims = {i for i, n in enumerate(s) if n == 1}
    else:
        dims = {d for d in indexing.normalize_dims(dim, len(s), "squeeze") if s and s[d] == 1}
    return reshape(x, tuple(n for i, n in enumerate(s) if i not in dims), "squeeze")


def flatten(x, start_dim=0, end_dim=-1):
    s = tuple(x.shape)
    if not s:
        return reshape(x, (1,), "flatten")
    a = indexing.normalize_dim(start_dim, len(s), "flatten")
    b = indexing.normalize_dim(end_dim, len(s), "flatten")
    if a > b:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
                         f"for shape {s}")
    return reshape(x, s[:a] + (math.prod(s[a:b + 1]),) + s[b + 1:], "flatten")


def gather(x, dim, index):
    """torch.gather(x, dim, index): out[p] = x[p with axis dim replaced by index[p]], for index
    an int64 tensor (or integer array) of x's rank no larger than x off axis dim. An IntTensor
    index goes to the device once (or is there already) and take_rows reads along dim; other
    indices: one gather of the flattened x (VJP: scatter-add), flat positions from the host."""
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"gather: dim must be an int, got {type(dim).__name__} {dim!r}")
    if isinstance(index, IntTensor) and index.dtype.name != "bool" and index.ndim == x.ndim:
        shape = tuple(x.shape)
        d = indexing.normalize_dim(dim, max(len(shape), 1), "gather")
        if any(i > n for a, (i, n) in enumerate(zip(index.shape, shape)) if a != d):
            raise ValueError(f"gather: index shape {tuple(index.shape)} exceeds input shape "
                             f"{shape} off dim {d}")
        y = _gather_checked(x, d, index, shape)
        if y is not None:
            return y
    if isinstance(index, IntTensor):
        idx = index.numpy()
    elif isinstance(index, np.ndarray) and np.issubdtype(index.dtype, np.integer):
        idx = index
    else:
        raise TypeError(f"gather: index must be an int64 tensor, got "
                        f"{getattr(index, 'dtype', type(index).__name__)}")
    shape = tuple(x.shape)
    if idx.ndim != len(shape):
        raise ValueError(f"gather: index of shape {idx.shape} must have the input's rank "
                         f"{len(shape)} (input shape {shape})")
    d = dim + len(shape) if dim < 0 else dim
    if not 0 <= d < max(len(shape), 1):
        raise IndexError(f"gather: dim {dim} out of range for shape {shape}")
    if any(i > n for a, (i, n) in enumerate(zip(idx.shape, shape)) if a != d):
        raise ValueError(f"gather: index shape {idx.shape} exceeds input shape {shape} off dim {d}")
    if idx.size and (idx.min() < 0 or idx.max() >= shape[d]):
        raise IndexError(f"gather: index out of range [0, {shape[d]}) for dim {d} of shape {shape}")
    return _gather_host(x, d, idx, shape)


def _gather_checked(x, d, index, shape):
    """gather of an IntTensor index on the device when its values can be a device buffer
    (None otherwise): dim d moved last, x cut to the index's extent off d, take_rows (VJP: the
    taken positions' gradients added back in index order per row)."""
    if not index.ndim or not index.numel():
        return None
    lo, hi = index.within()
    if lo < 0 or hi >= shape[d]:
        lo, hi = index.bounds()
        if lo < 0 or hi >= shape[d]:
            raise IndexError(f"gather: index out of range [0, {shape[d]}) for dim {d} of shape "
                             f"{shape}")
    buf = index.device_values()
    if buf is None:
        return None
    s = x.session
    with no_grad():
        it = s.borrow(buf)
    ishape = tuple(index.shape)
    if any(i != n for a, (i, n) in enumerate(zip(ishape, shape)) if a != d):
        x = getitem(x, tuple(slice(None) if a == d else slice(0, i)
                             for a, i in enumerate(ishape)))
    last = len(shape) - 1
    if d != last:
        x = transpose(x, d, last)
        with no_grad():
            it = transpose(it, d, last)
    y = s.op("take_rows", x, it)
    return y if d == last else transpose(y, d, last)


def _gather_host(x, d, idx, shape):
    grid = list(np.indices(idx.shape, sparse=True)) if idx.ndim else []
    if grid:
        grid[d] = idx
    flat = np.ravel_multi_index(tuple(np.broadcast_arrays(*grid)), shape) if grid else np.zeros((), np.int64)
    return reshape(reshape(x, (-1,))[flat.reshape(-1)], idx.shape)


def expand(x, sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
        sizes = tuple(sizes[0])
    s = tuple(x.shape)
    if len(sizes) < len(s):
        raise ValueError(f"expand: {len(sizes)} sizes {tuple(sizes)} for a tensor of shape {s} "
                         f"(need at least {len(s)})")
    lead = len(sizes) - len(s)
    target = []
    for i, n in enumerate(sizes):
        old = s[i - lead] if i >= lead else None
        if n == -1:
            if old is None:
                raise ValueError(f"expand: -1 is not allowed for the new leading axis {i} "
                                 f"(sizes {tuple(sizes)}, shape {s})")
            n = old
        if old is not None and old != 1 and old != n:
            raise ValueError(f"expand: size {n} does not match the existing size {old} at "
                             f"axis {i} (sizes {tuple(sizes)}, shape {s}); only size-1 axes expand")
        target.append(int(n))
    target = tuple(target)
    if target == s:
        return unchanged(x)
    return session_op(x, "broadcast_to", shape=target)
