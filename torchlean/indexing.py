"""Host-side planning for Tensor indexing and axis arguments (no device work here).

Why on the host: torchlean has no strided views, so every index expression becomes either a
contiguous block of the flat buffer (one slice_range0 copy) or a list of flat int64 positions
read by gather_vec (whose VJP is a scatter-add). NumPy computes those positions on an arange of
the tensor's shape, so the semantics (negative steps, None, Ellipsis, integer arrays, boolean
masks, broadcasting of advanced indices) are exactly NumPy's.
"""
from __future__ import annotations

import math
import operator

import numpy as np


def normalize_dim(dim, ndim: int, op: str) -> int:
    """A dim in [-ndim, ndim) as a non-negative int (0-d tensors accept -1 and 0, as torch)."""
    try:
        d = operator.index(dim)
    except TypeError:
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}") from None
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"{op}: dim {d} is out of range for a tensor of rank {ndim} "
                         f"(expected a dim in [{-n}, {n - 1}])")
    return d % n


def normalize_dims(dim, ndim: int, op: str) -> tuple:
    """dim=None -> every axis; an int or a tuple/list of ints -> sorted unique axes. A 0-d
    tensor accepts dim 0 and -1 (as torch) and has no axis to reduce: ()."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = [normalize_dim(d, ndim, op) for d in dim]
        if len(set(dims)) != len(dims):
            raise ValueError(f"{op}: dim {tuple(dim)} names an axis twice (rank {ndim})")
        return tuple(sorted(dims)) if ndim else ()
    d = normalize_dim(dim, ndim, op)
    return (d,) if ndim else ()


def normalize_permutation(dims, ndim: int, op: str = "permute") -> tuple:
    """dims must name every axis of a rank-ndim tensor exactly once."""
    if len(dims) != ndim:
        raise ValueError(f"{op}: expected {ndim} dims for a tensor of rank {ndim}, got {tuple(dims)}")
    perm = tuple(normalize_dim(d, ndim, op) for d in dims)
    if sorted(perm) != list(range(ndim)):
        raise ValueError(f"{op}: {tuple(dims)} is not a permutation of the {ndim} axes")
    return perm


def adjacent_swap_depth(perm: tuple):
    """The depth d when perm only swaps axes d and d+1 (one swap_adjacent op), else None."""
    moved = [i for i, p in enumerate(perm) if p != i]
    if len(moved) == 2 and moved[1] == moved[0] + 1:
        return moved[0]
    return None


def permutation_indices(shape: tuple, perm: tuple) -> np.ndarray:
    """Flat source positions of x.permute(perm), shaped like the result."""
    return np.arange(math.prod(shape), dtype=np.int64).reshape(shape).transpose(perm)


def reshape_target(shape: tuple, new_shape: tuple, op: str) -> tuple:
    """new_shape with its one -1 resolved; the element count must be unchanged."""
    new_shape = tuple(operator.index(s) for s in new_shape)
    n = math.prod(shape)
    if new_shape.count(-1) > 1 or any(s < -1 for s in new_shape):
        raise ValueError(f"{op}: invalid shape {new_shape} (at most one -1, other sizes >= 0)")
    if -1 in new_shape:
        known = math.prod(s for s in new_shape if s != -1)
        if known == 0 or n % known:
            raise ValueError(f"{op}: shape {new_shape} is invalid for input of shape "
                             f"{tuple(shape)} ({n} elements)")
        new_shape = tuple(n // known if s == -1 else s for s in new_shape)
    if math.prod(new_shape) != n:
        raise ValueError(f"{op}: shape {new_shape} is invalid for input of shape {tuple(shape)} "
                         f"({n} elements)")
    return new_shape


# ---------------------------------------------------------------------------- __getitem__

class IndexPlan:
    """How to compute x[key]: kind 'block' (rows start..start+length of x viewed as
    (-1, row), then reshape) or 'gather' (flat positions `indices`, shaped like the result)."""

    __slots__ = ("kind", "shape", "row", "start", "length", "indices")

    def __init__(self, kind, shape, row=0, start=0, length=0, indices=None):
        self.kind, self.shape = kind, tuple(shape)
        self.row, self.start, self.length, self.indices = row, start, length, indices


def _is_basic(k) -> bool:
    return k is None or k is Ellipsis or isinstance(k, slice) or (
        not isinstance(k, bool) and isinstance(k, (int, np.integer)))


def _as_key_tuple(key, to_numpy) -> tuple:
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, (list, np.ndarray)) or hasattr(k, "session"):
            a = to_numpy(k) if hasattr(k, "session") else np.asarray(k)
            if a.size == 0 and isinstance(k, list):
                a = a.astype(np.int64)      # x[[]] as NumPy: an empty integer index
            if a.dtype.kind not in "biu":
                raise IndexError(f"__getitem__: index arrays must hold integers or booleans, got "
                                 f"dtype {a.dtype}")
            out.append(a)
        elif isinstance(k, slice) and k.step is not None and operator.index(k.step) == 0:
            raise ValueError(f"__getitem__: slice step cannot be zero (index {key!r})")
        elif isinstance(k, bool) or isinstance(k, np.bool_):
            out.append(np.asarray(k))
        elif _is_basic(k):
            out.append(k)
        else:
            raise IndexError(f"__getitem__: unsupported index {k!r} of type {type(k).__name__} "
                             "(use ints, slices, None, ..., integer arrays or boolean masks)")
    return tuple(out)


def plan_getitem(shape: tuple, key, to_numpy) -> IndexPlan:
    """Plan x[key] for a tensor of `shape` with NumPy semantics; raises IndexError naming the
    shape and the index when NumPy would."""
    shape = tuple(shape)
    tkey = _as_key_tuple(key, to_numpy)
    if math.prod(shape) > 0 and all(_is_basic(k) for k in tkey):
        plan = _contiguous_plan(shape, tkey)
        if plan is not None:
            return plan
    pos = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    try:
        idx = pos[tkey]
    except IndexError as e:
        raise IndexError(f"__getitem__: index {key!r} is invalid for a tensor of shape "
                         f"{shape}: {e}") from None
    return IndexPlan("gather", idx.shape, indices=np.ascontiguousarray(idx, dtype=np.int64))


def _contiguous_plan(shape: tuple, key: tuple):
    """A 'block' plan when x[key] is one contiguous run of the flat buffer: leading ints, then
    at most one step-1 slice, then full axes (None anywhere); None when it is not."""
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        return None
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > len(shape):
        return None
    if n_ell:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - used) + key[i + 1:]
    else:
        key = key + (slice(None),) * (len(shape) - used)
    out_shape, axis, offset, sliced_axis = [], 0, 0, None
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        n = shape[axis]
        if isinstance(k, slice):
            a, b, step = k.indices(n)
            ln = max(0, b - a) if step == 1 else -1
            if sliced_axis is None:
                if step != 1:
                    return None
                sliced_axis, start, length = axis, a, ln
            elif (a, ln) != (0, n):
                return None
            out_shape.append(n if sliced_axis != axis else ln)
        else:
            if sliced_axis is not None:
                return None
            i = operator.index(k)
            if not -n <= i < n:
                return None          # the gather path raises NumPy's IndexError
            offset = offset * n + (i % n)
        axis += 1
    if sliced_axis is None:          # ints only: a block of the trailing axes
        row = math.prod(shape[axis:])
        return IndexPlan("block", out_shape, row=row, start=offset, length=1)
    row = math.prod(shape[sliced_axis + 1:])
    return IndexPlan("block", out_shape, row=row, start=offset * shape[sliced_axis] + start,
                     length=length)
