"""PyTorch-named Tensor operations composed from registry ops (no kernels of their own).

Each function takes Tensors of one Session and records ordinary tape ops, so gradients come
from the registry VJPs: indexing and general permutations are gather_vec (VJP: scatter-add),
leading-axis blocks are slice_range0 (VJP: pad), reductions over several dims are chains of
single-axis reductions, cat is a tree of concat0 on axis-0-first layouts.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from torchlean import indexing
from torchlean.int_tensor import IntTensor, host_key
from torchlean.return_types import MinMaxResult
from torchlean.tape import is_grad_enabled, no_grad

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _op(x, name, *others, **attrs):
    return x.session.op(name, x, *others, **attrs)


def _unchanged(x):
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
        return _unchanged(x)
    return _op(x, "reshape", shape=shape)


def getitem(x, key):
    plan = indexing.plan_getitem(x.shape, host_key(key), lambda t: t.numpy())
    if plan.kind == "block":
        rows = math.prod(x.shape) // plan.row
        flat = reshape(x, (rows, plan.row))
        if (plan.start, plan.length) != (0, rows):
            flat = _op(flat, "slice_range0", start=plan.start, length=plan.length)
        return reshape(flat, plan.shape)
    if plan.indices.size == 0:
        # nothing to read: a zero-size result that still belongs to x's graph
        return reshape(_op(reshape(x, (-1,)), "slice_range0", start=0, length=0), plan.shape)
    y = _op(reshape(x, (-1,)), "gather_vec", indices=plan.indices)
    return reshape(y, plan.shape)     # a 0-d index array gives a 0-d result, as NumPy


def permute(x, dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    perm = indexing.normalize_permutation(dims, x.ndim)
    if perm == tuple(range(x.ndim)):
        return _unchanged(x)
    if x.ndim == 2:
        return _op(x, "transpose2d")
    if perm == (1, 2, 0):
        return _op(x, "permute3d_bca")
    if perm == (2, 0, 1):
        return _op(x, "permute3d_cab")
    depth = indexing.adjacent_swap_depth(perm)
    if depth is not None:
        return _op(x, "swap_adjacent", depth=depth)
    if math.prod(x.shape) == 0:
        return reshape(x, tuple(x.shape[p] for p in perm))
    return _op(reshape(x, (-1,)), "gather_vec",
               indices=indexing.permutation_indices(tuple(x.shape), perm))


def transpose(x, dim0, dim1):
    n = x.ndim
    a, b = (indexing.normalize_dim(d, n, "transpose") for d in (dim0, dim1))
    if n < 2 or a == b:
        return _unchanged(x)
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
        return _unchanged(x)
    return _op(x, "broadcast_to", shape=target)


# ------------------------------------------------------------------------------ reductions

def _keep(x, y, dims, keepdim):
    if not keepdim:
        return y
    return reshape(y, tuple(1 if i in dims else n for i, n in enumerate(x.shape)))


def reduce(x, kind, dim=None, keepdim=False):
    """kind in sum, mean, amax, amin over `dim` (None: every axis) with torch's keepdim."""
    dims = indexing.normalize_dims(dim, x.ndim, kind)
    if kind in ("amax", "amin"):
        for d in dims:
            if x.shape[d] == 0:
                raise ValueError(f"{kind}: cannot reduce over the empty axis {d} of shape "
                                 f"{tuple(x.shape)} (no identity)")
    if not dims:        # a 0-d tensor, or dim=() as NumPy: nothing to reduce
        return _unchanged(x)
    if kind in ("sum", "mean") and len(dims) == x.ndim:
        total = _op(x, "sum")
        if kind == "mean":
            n = math.prod(x.shape)
            total = total * (1.0 / n) if n else total * float("nan")
        return _keep(x, total, dims, keepdim)
    if kind == "amin":
        return -reduce(-x, "amax", dims, keepdim)
    name = {"sum": "reduce_sum", "mean": "reduce_mean", "amax": "reduce_max"}[kind]
    y = x
    for d in reversed(dims):        # highest axis first so the lower ones keep their numbers
        y = _op(y, name, axis=d)
    return _keep(x, y, dims, keepdim)


def _count(x, dims):
    return math.prod(x.shape[d] for d in dims)


def var(x, dim=None, unbiased=None, keepdim=False, correction=None, op="var"):
    """Variance with torch's correction (default 1, Bessel); unbiased=False is correction=0."""
    if unbiased is not None and correction is not None:
        raise ValueError(f"{op}: pass either unbiased or correction, not both")
    c = 1 if correction is None and unbiased is None else (
        correction if correction is not None else (1 if unbiased else 0))
    dims = indexing.normalize_dims(dim, x.ndim, op)
    m = reduce(x, "mean", dims, keepdim=True)
    d = x - m
    ss = reduce(d * d, "sum", dims, keepdim)
    denom = _count(x, dims) - c
    if denom > 0:
        return ss * (1.0 / denom)
    # torch divides by max(0, N - correction): 0/0 is nan (one element, unbiased), else inf
    warnings.warn(f"{op}: degrees of freedom <= 0 for correction {c} over {_count(x, dims)} "
                  f"element(s) of shape {tuple(x.shape)}", RuntimeWarning, stacklevel=4)
    return _op(ss, "div", x.session.tensor(np.float32(0.0)))


def std(x, dim=None, unbiased=None, keepdim=False, correction=None):
    return _op(var(x, dim, unbiased, keepdim, correction, "std"), "sqrt")


def logsumexp(x, dim, keepdim=False):
    """log(sum(exp(x))) shifted by the (detached, clamped finite) max for stability: an all
    -inf slice gives -inf and a +inf entry gives +inf, as torch."""
    dims = indexing.normalize_dims(dim, x.ndim, "logsumexp")
    if _count(x, dims) == 0:       # an empty sum: log(0) = -inf, as torch
        return _op(reduce(x, "sum", dims, keepdim), "log")
    with no_grad():
        m = _op(reduce(x, "amax", dims, keepdim=True), "clamp",
                lo=-_FLOAT32_MAX, hi=_FLOAT32_MAX)
    s = reduce(_op(x - m, "exp"), "sum", dims, keepdim=True)
    return reshape(_op(s, "log") + m, _keep_shape(x, dims, keepdim))


def _keep_shape(x, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(x.shape))
    return tuple(n for i, n in enumerate(x.shape) if i not in dims)


# ------------------------------------------------------------------------------ joining

def cat(tensors, dim=0):
    ts = list(tensors)
    if not ts:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    s = ts[0].session
    ts = [s.as_tensor(t) for t in ts]
    ref = tuple(ts[0].shape)
    if not ref:
        raise ValueError("cat: zero-dimensional tensors cannot be concatenated (use stack)")
    d = indexing.normalize_dim(dim, len(ref), "cat")
    for t in ts[1:]:
        sh = tuple(t.shape)
        if len(sh) != len(ref) or sh[:d] != ref[:d] or sh[d + 1:] != ref[d + 1:]:
            raise ValueError(f"cat: shapes {[tuple(t.shape) for t in ts]} differ outside dim {d}")
    if len(ts) == 1:
        return _unchanged(ts[0])
    outer, inner = math.prod(ref[:d]), math.prod(ref[d + 1:])
    total = sum(t.shape[d] for t in ts)
    out_shape = ref[:d] + (total,) + ref[d + 1:]
    if outer == 1:
        parts = [reshape(t, (t.shape[d], inner)) for t in ts]
        return reshape(_concat_tree(parts), out_shape)
    # (outer, n_i, inner) -> (n_i, outer, inner), joined on axis 0, swapped back
    parts = [_op(reshape(t, (outer, t.shape[d], inner)), "swap_adjacent", depth=0) for t in ts]
    joined = _op(_concat_tree(parts), "swap_adjacent", depth=0)
    return reshape(joined, out_shape)


def _concat_tree(parts):
    """concat0 in a balanced tree: each element is copied log2(k) times, not k times."""
    while len(parts) > 1:
        nxt = [parts[i].session.op("concat0", parts[i], parts[i + 1])
               for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


def stack(tensors, dim=0):
    ts = list(tensors)
    if not ts:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    s = ts[0].session
    ts = [s.as_tensor(t) for t in ts]
    shapes = {tuple(t.shape) for t in ts}
    if len(shapes) != 1:
        raise ValueError(f"stack: expects each tensor to be equal size, got "
                         f"{[tuple(t.shape) for t in ts]}")
    d = indexing.normalize_dim(dim, ts[0].ndim + 1, "stack")
    return cat([unsqueeze(t, d) for t in ts], d)


def split(x, split_size_or_sections, dim=0):
    d = indexing.normalize_dim(dim, x.ndim, "split")
    n = x.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size <= 0:
            raise ValueError(f"split: split_size must be a positive int, got {size}")
        sizes = [min(size, n - a) for a in range(0, n, size)] or [0]
    else:
        sizes = [int(v) for v in split_size_or_sections]
        if any(v < 0 for v in sizes) or sum(sizes) != n:
            raise ValueError(f"split: sections {sizes} must be >= 0 and sum to the size {n} of "
                             f"dim {d} (shape {tuple(x.shape)})")
    out, a = [], 0
    for v in sizes:
        key = (slice(None),) * d + (slice(a, a + v),)
        out.append(getitem(x, key))
        a += v
    return tuple(out)


def chunk(x, chunks, dim=0):
    if int(chunks) <= 0:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks}")
    d = indexing.normalize_dim(dim, x.ndim, "chunk")
    n = x.shape[d]
    return split(x, max(1, -(-n // int(chunks))), d)


# ------------------------------------------------------------------------------ comparisons,
# where, argmax/argmin, max/min over a dim, pow (the compare, argreduce and pointwise_extra
# registry families)

def where(s, cond, a, b):
    """torch.where(cond, a, b) in session s: cond a 0/1 float Tensor or a boolean (or numeric)
    array; a and b Tensors or numbers, all broadcast. Gradients reach a and b, never cond."""
    if not hasattr(cond, "session"):
        c = np.asarray(cond)
        if c.dtype != np.bool_ and not np.issubdtype(c.dtype, np.number):
            raise TypeError(f"where: cond must be a Tensor or a boolean/numeric array, got "
                            f"dtype {c.dtype}")
        cond = s.tensor((c != 0).astype(np.float32))
    return s.op("where", cond, a, b)


def _index_result(x, y, d, keepdim):
    """An argmax-style float Tensor of whole numbers as the int64 tensor torch would return."""
    out = y.numpy().astype(np.int64)
    if keepdim:
        out = out.reshape(tuple(1 if i == d else n for i, n in enumerate(x.shape)))
    return IntTensor(out)


def _arg_prepare(x, kind, dim):
    """(tensor to reduce, axis) for argmax/argmin/max/min; a 0-d tensor acts as shape (1,)."""
    if dim is None or x.ndim == 0:
        if dim is not None:
            indexing.normalize_dim(dim, 1, kind)   # a 0-d tensor accepts dim 0 and -1, as torch
        flat = reshape(x, (-1,))
        if flat.shape[0] == 0:
            raise ValueError(f"{kind}: expected a non-empty tensor, got shape {tuple(x.shape)}")
        return flat, 0
    d = indexing.normalize_dim(dim, x.ndim, kind)
    if x.shape[d] == 0:
        raise ValueError(f"{kind}: cannot reduce over the empty dim {d} of shape "
                         f"{tuple(x.shape)} (no identity)")
    return x, d


def argreduce(x, kind, dim=None, keepdim=False):
    """torch.argmax/argmin: an int64 IntTensor of indices (first one on ties; a NaN wins)."""
    y, d = _arg_prepare(x, kind, dim)
    idx = _op(y, kind, axis=d)
    if dim is None:
        out = idx.numpy().astype(np.int64)
        return IntTensor(out.reshape((1,) * x.ndim) if keepdim else out.reshape(()))
    if x.ndim == 0:
        return IntTensor(idx.numpy().astype(np.int64).reshape(()))
    return _index_result(x, idx, d, keepdim)


def max_min(x, kind, dim=None, keepdim=False):
    """torch.max/min: no dim -> the 0-d extreme (ties share the gradient, as amax); with dim ->
    (values, indices) where values' gradient goes to the chosen index only."""
    if isinstance(dim, (str, bytes, float, bool, np.floating, np.bool_)):
        raise TypeError(f"{kind}: dim must be an int (or a Tensor for the elementwise "
                        f"{kind}imum), got {type(dim).__name__} {dim!r}")
    if dim is not None and not isinstance(dim, (int, np.integer)):    # max(other): elementwise
        return _op(x, "maximum" if kind == "max" else "minimum", dim)
    if dim is None:
        if keepdim:
            raise ValueError(f"{kind}: keepdim needs a dim")
        y, _ = _arg_prepare(x, kind, None)
        return reduce(x, "amax" if kind == "max" else "amin")
    y, d = _arg_prepare(x, kind, dim)
    idx = _op(y, "argmax" if kind == "max" else "argmin", axis=d)
    values = _op(y, "select_along_axis", idx, axis=d)
    if x.ndim == 0:
        return MinMaxResult(reshape(values, ()),
                            IntTensor(idx.numpy().astype(np.int64).reshape(())))
    indices = _index_result(x, idx, d, keepdim)
    return MinMaxResult(_keep(x, values, (d,), keepdim), indices)


def power(x, p):
    """x ** p: a Python number p is an attribute (pow_scalar); a Tensor p broadcasts (pow)."""
    if isinstance(p, (bool, np.bool_, str, bytes)):
        raise TypeError(f"pow: exponent must be a number or a Tensor, got {type(p).__name__}")
    if isinstance(p, (int, float, np.integer, np.floating)):
        return _op(x, "pow_scalar", p=float(p))
    if isinstance(p, IntTensor):    # float32 ** int64 is float32, as torch promotes
        p = p.float(x.session)
    return _op(x, "pow", p)         # a Tensor, Parameter or array exponent, broadcast


# ------------------------------------------------------------------------------ softmax, clamp

def softmax(x, dim=-1, kind="softmax"):
    """softmax / log_softmax over any dim: the registry op works on the last axis, so another
    dim is swapped last and back (two transposes)."""
    n = x.ndim
    d = indexing.normalize_dim(-1 if dim is None else dim, n, kind)
    if n == 0:
        return _op(reshape(x, (1,)), kind).reshape(())
    if d == n - 1:
        return _op(x, kind)
    return transpose(_op(transpose(x, d, -1), kind), d, -1)


def clamp(x, min=None, max=None, op="clamp"):  # noqa: A002 - torch's argument names
    """torch.clamp: numbers or Tensors as bounds, either may be None (not both). Two number
    bounds are the registry clamp (derivative 1 strictly inside); one bound or a Tensor bound
    is maximum / minimum, which keeps infinities."""
    if min is None and max is None:
        raise ValueError(f"{op}: at least one of 'min' or 'max' must not be None")
    for name, v in (("min", min), ("max", max)):
        if v is not None and not hasattr(v, "shape") and not isinstance(
                v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{op}: {name} must be a number or a Tensor, got {type(v).__name__}")
    numbers = all(v is None or isinstance(v, (int, float, np.integer, np.floating))
                  for v in (min, max))
    if numbers and min is not None and max is not None and math.isfinite(min) \
            and math.isfinite(max) and min <= max:
        return _op(x, "clamp", lo=float(min), hi=float(max))
    y = x if min is None else _op(x, "maximum", min)
    return y if max is None else _op(y, "minimum", max)


# ------------------------------------------------------------------------------ matmul

def matmul(a, b):
    """torch.matmul: 1-D operands are promoted (a row on the left, a column on the right) and
    the added axis removed; rank > 2 operands broadcast their batch axes (bmm over the folded
    batch; a 2-D right operand folds the left's batch into rows: one GEMM)."""
    s = a.session
    b = s.as_tensor(b)
    sa, sb = tuple(a.shape), tuple(b.shape)
    if not sa or not sb:
        raise ValueError(f"matmul: both operands need at least one dimension, got shapes {sa} "
                         f"and {sb}")
    if sa[-1] != (sb[0] if len(sb) == 1 else sb[-2]):
        raise ValueError(f"matmul: shapes {sa} and {sb} cannot be multiplied (inner sizes "
                         f"{sa[-1]} and {sb[0] if len(sb) == 1 else sb[-2]} differ)")
    if len(sa) == 2 and len(sb) == 2:
        return _op(a, "matmul", b)
    if len(sa) == 1 and len(sb) == 1:
        return reshape(_op(reshape(a, (1, sa[0])), "matmul", reshape(b, (sb[0], 1))), ())
    if len(sa) == 1:
        return squeeze(matmul(unsqueeze(a, 0), b), -2)
    if len(sb) == 1:
        return squeeze(matmul(a, unsqueeze(b, -1)), -1)
    if len(sb) == 2:                                      # (..., n, k) @ (k, m): one GEMM
        y = _op(reshape(a, (-1, sa[-1])), "matmul", b)
        return reshape(y, sa[:-1] + (sb[-1],))
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        raise ValueError(f"matmul: batch shapes {sa[:-2]} and {sb[:-2]} of {sa} and {sb} do not "
                         "broadcast") from None
    nb = math.prod(batch)
    ea = reshape(expand(a, batch + sa[-2:]), (nb,) + sa[-2:])
    eb = reshape(expand(b, batch + sb[-2:]), (nb,) + sb[-2:])
    return reshape(_op(ea, "bmm", eb), batch + (sa[-2], sb[-1]))


# ------------------------------------------------------------------------------ rounding

_TWO_23 = 8388608.0        # 2^23: every float32 at or above it is a whole number


def floor(x):
    """torch.floor (gradient zero, as torch, so it is recorded without one): |x| < 2^23 is
    rounded to the nearest whole number as (|x| + 2^23) - 2^23 (exact in float32), the sign
    restored, and 1 taken off where that rounded up; larger values, inf and NaN pass through."""
    with no_grad():
        s = x.session
        a = _op(x, "abs")
        r = (a + _TWO_23) - _TWO_23
        r = where(s, x < 0.0, -r, r)
        r = r - (r > x)
        return where(s, a < _TWO_23, r, x)


def trunc(x):
    """torch.trunc: floor of |x| with x's sign (gradient zero)."""
    with no_grad():
        s = x.session
        f = floor(_op(x, "abs"))
        return where(s, x < 0.0, -f, f)


def div(x, other, rounding_mode=None):
    """torch.div: true division, or rounded toward -inf ('floor', as //) or toward 0 ('trunc')
    of the float32 quotient (gradient zero when rounded, as torch). The quotient is rounded
    once first, so where a / b rounds up to a whole number the floor can exceed torch's
    fmod-based result (1 // 0.1 gives 10 here, 9 in torch)."""
    if rounding_mode not in (None, "floor", "trunc"):
        raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got "
                         f"{rounding_mode!r}")
    q = _op(x, "div", other)
    if rounding_mode is None:
        return q
    return floor(q) if rounding_mode == "floor" else trunc(q)


def rdiv(x, other, rounding_mode):
    """other / x rounded as div, for a number or array on the left (other // x)."""
    return div(x.session.as_tensor(other), x, rounding_mode)
