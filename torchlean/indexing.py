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



def split_sizes(split_size_or_sections, shape: tuple, d: int) -> list:
    """The lengths torch.split cuts axis d of `shape` into: pieces of one size (the last one
    shorter), or the given sections, which must cover the axis exactly."""
    n = shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size <= 0:
            raise ValueError(f"split: split_size must be a positive int, got {size}")
        return [min(size, n - a) for a in range(0, n, size)] or [0]
    sizes = [int(v) for v in split_size_or_sections]
    if any(v < 0 for v in sizes) or sum(sizes) != n:
        raise ValueError(f"split: sections {sizes} must be >= 0 and sum to the size {n} of "
                         f"dim {d} (shape {tuple(shape)})")
    return sizes



def chunk_split(chunks, shape: tuple, dim) -> tuple:
    """(split size, axis) torch.chunk cuts with: ceil(size / chunks) elements a piece, at least 1."""
    if int(chunks) <= 0:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks}")
    d = normalize_dim(dim, len(shape), "chunk")
    return max(1, -(-shape[d] // int(chunks))), d


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
        idx = _basic_positions(shape, tkey)
        if idx is not None:
            return IndexPlan("gather", idx.shape, indices=idx)
    pos = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    try:
        idx = pos[tkey]
    except IndexError as e:
        raise IndexError(f"__getitem__: index {key!r} is invalid for a tensor of shape "
                         f"{shape}: {e}") from None
    return IndexPlan("gather", idx.shape, indices=np.ascontiguousarray(idx, dtype=np.int64))


def _basic_positions(shape: tuple, key: tuple):
    """The flat positions x[key] reads, for a key of ints, slices, None and one Ellipsis, built
    from one range per axis: work the size of the result, where indexing a whole arange of x
    cost the size of x (topk's x[..., :k] of a 512 x 32000 argsort: 20 ms). None when the key
    is not valid here (the general path then raises NumPy's error)."""
    if sum(1 for k in key if k is Ellipsis) > 1:
        return None
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > len(shape):
        return None
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - used) + key[i + 1:]
    else:
        key = key + (slice(None),) * (len(shape) - used)
    stride, strides = 1, [0] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        strides[d], stride = stride, stride * shape[d]
    offset, ranges, axis = 0, [], 0
    for k in key:
        if k is None:
            ranges.append(np.zeros(1, np.int64))
            continue
        n = shape[axis]
        if isinstance(k, slice):
            ranges.append(np.arange(n, dtype=np.int64)[k] * strides[axis])
        else:
            i = operator.index(k)
            if not -n <= i < n:
                return None
            offset += (i % n) * strides[axis]
        axis += 1
    out = np.full(tuple(len(r) for r in ranges), offset, np.int64)
    for j, r in enumerate(ranges):
        out += r.reshape((-1,) + (1,) * (len(ranges) - 1 - j))
    return out


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


# ---------------------------------------------------------------------------- strided views
# A view's layout, as PyTorch's: (shape, strides, offset) in elements of its base's row-major
# storage. Element i of the view is base_flat[offset + sum_k i_k * strides[k]]. Pure planning:
# torchlean.views keeps one per view and derives positions from it for writes.

def contiguous_strides(shape: tuple) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def contiguous_layout(shape: tuple) -> tuple:
    shape = tuple(shape)
    return shape, contiguous_strides(shape), 0


def is_contiguous(layout) -> bool:
    """PyTorch's rule: size-1 axes' strides do not matter, an empty tensor is contiguous."""
    shape, strides, _ = layout
    if math.prod(shape) == 0:
        return True
    expected = 1
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1:
            if st != expected:
                return False
            expected *= n
    return True


def layout_positions(layout) -> np.ndarray:
    """Flat base positions of each element of the view, shaped like it (int64)."""
    shape, strides, offset = layout
    pos = np.full(shape, offset, dtype=np.int64)
    for k, (n, st) in enumerate(zip(shape, strides)):
        ax = [1] * len(shape)
        ax[k] = n
        pos += (np.arange(n, dtype=np.int64) * st).reshape(ax)
    return pos


def permute_layout(layout, perm: tuple):
    shape, strides, offset = layout
    return tuple(shape[p] for p in perm), tuple(strides[p] for p in perm), offset


def expand_layout(layout, target: tuple):
    """A new leading axis or an expanded size-1 axis reads one element: stride 0."""
    shape, strides, offset = layout
    lead = len(target) - len(shape)
    out = []
    for i, n in enumerate(target):
        if i < lead:
            out.append(0)
        else:
            old = shape[i - lead]
            out.append(strides[i - lead] if old == n else 0)
    return tuple(target), tuple(out), offset


def unsqueeze_layout(layout, d: int):
    shape, strides, offset = layout
    st = shape[d] * strides[d] if d < len(shape) else 1
    return shape[:d] + (1,) + shape[d:], strides[:d] + (st,) + strides[d:], offset


def view_layout(layout, new_shape: tuple):
    """The layout of x.view(new_shape), or None when x's strides cannot give it without a copy
    (ATen's computeStride: each run of axes that is contiguous within itself may be split or
    merged, never two runs together)."""
    shape, strides, offset = layout
    new_shape = tuple(new_shape)
    if math.prod(shape) == 0 or not shape:
        return new_shape, contiguous_strides(new_shape), offset
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base = strides[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[tensor_d]
        if tensor_d == 0 or (shape[tensor_d - 1] != 1
                             and strides[tensor_d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base = strides[tensor_d - 1]
                tensor_numel = view_numel = 1
    if view_d != -1:
        return None
    return new_shape, tuple(new_strides), offset


def basic_key(key):
    """key as a tuple when every part is basic (int, slice, None, ...), else None (an advanced
    index: torch copies). A slice step must be positive, as torch requires."""
    parts = key if isinstance(key, tuple) else (key,)
    for k in parts:
        if isinstance(k, slice) and k.step is not None and operator.index(k.step) == 0:
            raise ValueError(f"__getitem__: slice step cannot be zero (index {key!r})")
        if isinstance(k, slice) and k.step is not None and operator.index(k.step) < 0:
            raise ValueError(f"__getitem__: step must be greater than zero (index {key!r}); "
                             "torch has no negative steps: use torch.flip")
    return parts if all(_is_basic(k) for k in parts) else None


def getitem_layout(layout, parts: tuple, key):
    """The layout of x[key] for a basic key (ints, positive-step slices, None, one ...)."""
    shape, strides, offset = layout
    n_ell = sum(1 for k in parts if k is Ellipsis)
    used = sum(1 for k in parts if k is not None and k is not Ellipsis)
    if n_ell > 1:
        raise IndexError(f"__getitem__: an index can only have a single ellipsis ({key!r})")
    if used > len(shape):
        raise IndexError(f"__getitem__: too many indices for a tensor of shape {shape}: "
                         f"{used} were indexed ({key!r})")
    if n_ell:
        i = parts.index(Ellipsis)
        parts = parts[:i] + (slice(None),) * (len(shape) - used) + parts[i + 1:]
    else:
        parts = parts + (slice(None),) * (len(shape) - used)
    out_shape, out_strides, axis = [], [], 0
    for k in parts:
        if k is None:
            out_shape.append(1)
            out_strides.append(shape[axis] * strides[axis] if axis < len(shape) else 1)
            continue
        n, st = shape[axis], strides[axis]
        if isinstance(k, slice):
            a, b, step = k.indices(n)
            ln = max(0, -(-(b - a) // step))
            offset += a * st
            out_shape.append(ln)
            out_strides.append(st * step)
        else:
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"__getitem__: index {i} is out of bounds for dimension {axis} "
                                 f"with size {n} (shape {shape})")
            offset += (i % n) * st
        axis += 1
    return tuple(out_shape), tuple(out_strides), offset


def diagonal_layout(layout, off: int, a: int, b: int):
    """torch.diagonal's view: axes a and b dropped, the diagonal appended as the last axis."""
    shape, strides, offset = layout
    if off >= 0:
        n = max(min(shape[a], shape[b] - off), 0)
        offset += off * strides[b] if n else 0
    else:
        n = max(min(shape[a] + off, shape[b]), 0)
        offset += -off * strides[a] if n else 0
    keep = [i for i in range(len(shape)) if i not in (a, b)]
    return (tuple(shape[i] for i in keep) + (n,), tuple(strides[i] for i in keep)
            + (strides[a] + strides[b],), offset)
