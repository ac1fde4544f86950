"""PyTorch-named Tensor operations composed from registry ops (no kernels of their own).

Each function takes Tensors of one Session and records ordinary tape ops, so gradients come
from the registry VJPs. Shapes and indexing (composite_shape) and reductions
(composite_reduce) have modules of their own, whose names this one hands on; here are the
joins (cat is a tree of concat0 on axis-0-first layouts), where, pow, softmax, clamp, matmul,
rounding and division.
"""
from __future__ import annotations

import math

import numpy as np

from torchlean import indexing
from torchlean.composite_reduce import (
    argreduce, logsumexp, max_min, reduce, std, var)
from torchlean.composite_shape import (
    expand, flatten, gather, getitem, permute, reshape, session_op, squeeze, transpose,
    unchanged, unsqueeze)
from torchlean.int_tensor import IntTensor
from torchlean.return_types import MinMaxResult
from torchlean.tape import no_grad

# the names the Tensor, the Session and the catalog import from here
__all__ = ["MinMaxResult", "argreduce", "cat", "chunk", "clamp", "div", "expand", "flatten",
           "floor", "gather", "getitem", "logsumexp", "matmul", "max_min", "permute", "power",
           "rdiv", "reduce", "reshape", "softmax", "split", "squeeze", "stack", "std",
           "transpose", "trunc", "unsqueeze", "var", "where"]


# ------------------------------------------------------------------------------ joining

def _joined(tensors, op):
    """The tensors cat and stack join, as Tensors of the first one's session."""
    ts = list(tensors)
    if not ts:
        raise ValueError(f"{op}: expected a non-empty sequence of tensors")
    s = ts[0].session
    return [s.as_tensor(t) for t in ts]


def cat(tensors, dim=0):
    ts = _joined(tensors, "cat")
    ref = tuple(ts[0].shape)
    if not ref:
        raise ValueError("cat: zero-dimensional tensors cannot be concatenated (use stack)")
    d = indexing.normalize_dim(dim, len(ref), "cat")
    for t in ts[1:]:
        sh = tuple(t.shape)
        if len(sh) != len(ref) or sh[:d] != ref[:d] or sh[d + 1:] != ref[d + 1:]:
            raise ValueError(f"cat: shapes {[tuple(t.shape) for t in ts]} differ outside dim {d}")
    if len(ts) == 1:
        return unchanged(ts[0])
    outer, inner = math.prod(ref[:d]), math.prod(ref[d + 1:])
    total = sum(t.shape[d] for t in ts)
    out_shape = ref[:d] + (total,) + ref[d + 1:]
    if outer == 1:
        parts = [reshape(t, (t.shape[d], inner)) for t in ts]
        return reshape(_concat_tree(parts), out_shape)
    # (outer, n_i, inner) -> (n_i, outer, inner), joined on axis 0, swapped back
    parts = [session_op(reshape(t, (outer, t.shape[d], inner)), "swap_adjacent", depth=0) for t in ts]
    joined = session_op(_concat_tree(parts), "swap_adjacent", depth=0)
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
    ts = _joined(tensors, "stack")
    shapes = {tuple(t.shape) for t in ts}
    if len(shapes) != 1:
        raise ValueError(f"stack: expects each tensor to be equal size, got "
                         f"{[tuple(t.shape) for t in ts]}")
    d = indexing.normalize_dim(dim, ts[0].ndim + 1, "stack")
    return cat([unsqueeze(t, d) for t in ts], d)


def split(x, split_size_or_sections, dim=0):
    d = indexing.normalize_dim(dim, x.ndim, "split")
    out, a = [], 0
    for v in indexing.split_sizes(split_size_or_sections, tuple(x.shape), d):
        key = (slice(None),) * d + (slice(a, a + v),)
        out.append(getitem(x, key))
        a += v
    return tuple(out)


def chunk(x, chunks, dim=0):
    return split(x, *indexing.chunk_split(chunks, tuple(x.shape), dim))


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



def power(x, p):
    """x ** p: a Python number p is an attribute (pow_scalar); a Tensor p broadcasts (pow)."""
    if isinstance(p, (bool, np.bool_, str, bytes)):
        raise TypeError(f"pow: exponent must be a number or a Tensor, got {type(p).__name__}")
    if isinstance(p, (int, float, np.integer, np.floating)):
        return session_op(x, "pow_scalar", p=float(p))
    if isinstance(p, IntTensor):    # float32 ** int64 is float32, as torch promotes
        p = p.float(x.session)
    return session_op(x, "pow", p)         # a Tensor, Parameter or array exponent, broadcast


# ------------------------------------------------------------------------------ softmax, clamp

def softmax(x, dim=-1, kind="softmax"):
    """softmax / log_softmax over any dim: the registry op works on the last axis, so another
    dim is swapped last and back (two transposes)."""
    n = x.ndim
    d = indexing.normalize_dim(-1 if dim is None else dim, n, kind)
    if n == 0:
        return session_op(reshape(x, (1,)), kind).reshape(())
    if d == n - 1:
        return session_op(x, kind)
    return transpose(session_op(transpose(x, d, -1), kind), d, -1)


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
        return session_op(x, "clamp", lo=float(min), hi=float(max))
    y = x if min is None else session_op(x, "maximum", min)
    return y if max is None else session_op(y, "minimum", max)


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
        return session_op(a, "matmul", b)
    if len(sa) == 1 and len(sb) == 1:
        return reshape(session_op(reshape(a, (1, sa[0])), "matmul", reshape(b, (sb[0], 1))), ())
    if len(sa) == 1:
        return squeeze(matmul(unsqueeze(a, 0), b), -2)
    if len(sb) == 1:
        return squeeze(matmul(a, unsqueeze(b, -1)), -1)
    if len(sb) == 2:                                      # (..., n, k) @ (k, m): one GEMM
        y = session_op(reshape(a, (-1, sa[-1])), "matmul", b)
        return reshape(y, sa[:-1] + (sb[-1],))
    if len(sa) == 3 and sa[0] == sb[0] and len(sb) == 3:     # already (batch, n, k) @ (batch, k, m)
        return session_op(a, "bmm", b)
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        raise ValueError(f"matmul: batch shapes {sa[:-2]} and {sb[:-2]} of {sa} and {sb} do not "
                         "broadcast") from None
    nb = math.prod(batch)
    ea = reshape(expand(a, batch + sa[-2:]), (nb,) + sa[-2:])
    eb = reshape(expand(b, batch + sb[-2:]), (nb,) + sb[-2:])
    return reshape(session_op(ea, "bmm", eb), batch + (sa[-2], sb[-1]))


# ------------------------------------------------------------------------------ rounding

_TWO_23 = 8388608.0        # 2^23: every float32 at or above it is a whole number


def floor(x):
    """torch.floor (gradient zero, as torch, so it is recorded without one): |x| < 2^23 is
    rounded to the nearest whole number as (|x| + 2^23) - 2^23 (exact in float32), the sign
    restored, and 1 taken off where that rounded up; larger values, inf and NaN pass through."""
    with no_grad():
        s = x.session
        a = session_op(x, "abs")
        r = (a + _TWO_23) - _TWO_23
        r = where(s, x < 0.0, -r, r)
        r = r - (r > x)
        return where(s, a < _TWO_23, r, x)


def trunc(x):
    """torch.trunc: floor of |x| with x's sign (gradient zero)."""
    with no_grad():
        s = x.session
        f = floor(session_op(x, "abs"))
        return where(s, x < 0.0, -f, f)


def div(x, other, rounding_mode=None):
    """torch.div: true division, or rounded toward -inf ('floor', as //) or toward 0 ('trunc')
    of the float32 quotient (gradient zero when rounded, as torch). The quotient is rounded
    once first, so where a / b rounds up to a whole number the floor can exceed torch's
    fmod-based result (1 // 0.1 gives 10 here, 9 in torch)."""
    if rounding_mode not in (None, "floor", "trunc"):
        raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got "
                         f"{rounding_mode!r}")
    q = session_op(x, "div", other)
    if rounding_mode is None:
        return q
    return floor(q) if rounding_mode == "floor" else trunc(q)


def rdiv(x, other, rounding_mode):
    """other / x rounded as div, for a number or array on the left (other // x)."""
    return div(x.session.as_tensor(other), x, rounding_mode)
