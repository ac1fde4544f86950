"""torch's ops on host int64/bool arrays (an IntTensor's storage): gather, repeat, tile, flip,
roll, cat, stack, where, matmul, max/min along a dim, integer pow. Each validates as torch does and names the op in its
error; IntTensor wraps the arrays these return. int64 arithmetic wraps on overflow, as torch's."""
from __future__ import annotations

import operator

import numpy as np

from torchlean import indexing


def _ints(op: str, what: str, values) -> tuple:
    """A tuple of Python ints (sizes, dims, shifts), refusing floats and bools as torch does."""
    if len(values) == 1 and isinstance(values[0], (list, tuple)):
        values = tuple(values[0])
    out = []
    for v in values:
        if isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{op}: {what} must be ints, got bool {v!r}")
        try:
            out.append(operator.index(v))
        except TypeError:
            raise TypeError(f"{op}: {what} must be ints, got {type(v).__name__} {v!r}") from None
    return tuple(out)


def gather(a: np.ndarray, dim, idx: np.ndarray) -> np.ndarray:
    """out[p] = a[p with axis dim replaced by idx[p]] (torch.gather)."""
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"gather: dim must be an int, got {type(dim).__name__} {dim!r}")
    if idx.dtype.kind not in "iu":
        raise TypeError(f"gather: index must be an int64 tensor, got dtype {idx.dtype}")
    if idx.ndim != a.ndim:
        raise ValueError(f"gather: index of shape {idx.shape} must have the input's rank "
                         f"{a.ndim} (input shape {a.shape})")
    d = indexing.normalize_dim(dim, a.ndim, "gather")
    if not a.ndim:
        if idx.size and idx.reshape(()) != 0:
            raise IndexError(f"gather: index {int(idx)} out of range for a 0-d tensor")
        return a.copy()
    if any(i > n for k, (i, n) in enumerate(zip(idx.shape, a.shape)) if k != d):
        raise ValueError(f"gather: index shape {idx.shape} exceeds input shape {a.shape} off "
                         f"dim {d}")
    if idx.size and (idx.min() < 0 or idx.max() >= a.shape[d]):
        raise IndexError(f"gather: index out of range [0, {a.shape[d]}) for dim {d} of shape "
                         f"{a.shape}")
    sub = a[tuple(slice(0, n) if k != d else slice(None) for k, n in enumerate(idx.shape))]
    return np.take_along_axis(sub, idx.astype(np.int64), d)


def repeat(a: np.ndarray, sizes) -> np.ndarray:
    """torch's Tensor.repeat: at least a.ndim counts, leading extra counts add axes."""
    reps = _ints("repeat", "repeat counts", sizes)
    if len(reps) < a.ndim:
        raise ValueError(f"repeat: {len(reps)} repeat counts {reps} for a tensor of shape "
                         f"{a.shape}: the number of counts cannot be smaller than its rank")
    if any(r < 0 for r in reps):
        raise ValueError(f"repeat: repeat counts must be non-negative, got {reps}")
    return np.tile(a.reshape((1,) * (len(reps) - a.ndim) + a.shape), reps)


def tile(a: np.ndarray, dims) -> np.ndarray:
    """torch.tile: like repeat, but fewer counts than axes repeat the trailing axes."""
    reps = _ints("tile", "dims", (dims,) if not isinstance(dims, (list, tuple)) else dims)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repeat counts must be non-negative, got {reps}")
    reps = (1,) * (a.ndim - len(reps)) + reps
    return repeat(a, reps)


def flip(a: np.ndarray, dims) -> np.ndarray:
    ds = _ints("flip", "dims", dims if isinstance(dims, (list, tuple)) else (dims,))
    axes = [indexing.normalize_dim(d, a.ndim, "flip") for d in ds]
    if len(set(axes)) != len(axes):
        raise ValueError(f"flip: dims {ds} name an axis twice (shape {a.shape})")
    return np.flip(a, axis=tuple(axes)).copy() if a.ndim else a.copy()


def roll(a: np.ndarray, shifts, dims=None) -> np.ndarray:
    sh = _ints("roll", "shifts", shifts if isinstance(shifts, (list, tuple)) else (shifts,))
    if dims is None:
        if len(sh) != 1:
            raise ValueError(f"roll: {len(sh)} shifts {sh} without dims (expected one shift, "
                             "for the flattened tensor)")
        return np.roll(a.reshape(-1), sh[0]).reshape(a.shape)
    ds = _ints("roll", "dims", dims if isinstance(dims, (list, tuple)) else (dims,))
    if len(ds) != len(sh):
        raise ValueError(f"roll: shifts {sh} and dims {ds} must align (one shift per dim)")
    axes = tuple(indexing.normalize_dim(d, a.ndim, "roll") for d in ds)
    return np.roll(a, sh, axis=axes) if a.ndim else a.copy()


def joined_dtype(arrays) -> np.dtype:
    """int64 unless every operand is bool (torch: bool with int64 promotes to int64)."""
    return np.dtype(np.bool_) if all(x.dtype == np.bool_ for x in arrays) else np.dtype(np.int64)


def cat(arrays: list, dim) -> np.ndarray:
    if not arrays:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    # torch skips 1-d empty tensors (legacy) when joining
    kept = [x for x in arrays if not (x.ndim == 1 and x.size == 0)] or arrays[:1]
    ref = kept[0].shape
    if not ref:
        raise ValueError("cat: zero-dimensional tensors cannot be concatenated (use stack)")
    d = indexing.normalize_dim(dim, len(ref), "cat")
    for x in kept[1:]:
        if x.ndim != len(ref) or x.shape[:d] != ref[:d] or x.shape[d + 1:] != ref[d + 1:]:
            raise ValueError(f"cat: shapes {[x.shape for x in arrays]} differ outside dim {d}")
    return np.concatenate(kept, axis=d).astype(joined_dtype(arrays), copy=False)


def stack(arrays: list, dim) -> np.ndarray:
    if not arrays:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    if len({x.shape for x in arrays}) != 1:
        raise ValueError(f"stack: expects each tensor to be equal size, got "
                         f"{[x.shape for x in arrays]}")
    d = indexing.normalize_dim(dim, arrays[0].ndim + 1, "stack")
    return np.stack(arrays, axis=d).astype(joined_dtype(arrays), copy=False)


def where(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    try:
        shape = np.broadcast_shapes(cond.shape, a.shape, b.shape)
    except ValueError:
        raise ValueError(f"where: condition {cond.shape}, input {a.shape} and other {b.shape} "
                         "do not broadcast") from None
    out = np.where(cond, a, b).reshape(shape)
    return out.astype(joined_dtype([a, b]), copy=False)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int64 matmul (torch.matmul's shapes: 1-d operands, batch broadcasting); wraps on
    overflow as torch's integer matmul does."""
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both arguments need at least 1 dimension, got shapes "
                         f"{a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[0 if b.ndim == 1 else -2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} cannot be multiplied")
    try:
        return np.matmul(a.astype(np.int64), b.astype(np.int64))
    except ValueError:
        raise ValueError(f"matmul: batch shapes of {a.shape} and {b.shape} do not "
                         "broadcast") from None


def extreme(a: np.ndarray, kind: str, dim, keepdim: bool):
    """(values, indices) of max or min along dim (a 0-d tensor acts as shape (1,))."""
    d = indexing.normalize_dim(dim, a.ndim, kind)
    b = a if a.ndim else a.reshape(1)
    idx = b.argmax(axis=d) if kind == "max" else b.argmin(axis=d)
    vals = np.take_along_axis(b, np.expand_dims(idx, d), d)
    if not keepdim:
        vals = vals.squeeze(d)
    else:
        idx = np.expand_dims(idx, d)
    if not a.ndim:
        vals, idx = vals.reshape(()), idx.reshape(())
    return vals, idx


def power(a, e) -> np.ndarray:
    """a ** e in int64 as torch's integer pow: negative exponents give 0, except for bases 1
    (1) and -1 (+-1 by parity)."""
    a, e = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(e, np.int64))
    neg = e < 0
    out = np.power(a, np.where(neg, 0, e))
    if neg.any():
        small = np.where(a == 1, 1, np.where(a == -1, np.where(e % 2 == 0, 1, -1), 0))
        out = np.where(neg, small, out)
    return out
