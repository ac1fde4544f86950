"""Named shape rules and kernel-argument helpers used by ops.yaml expressions.

Every `outputs:` and `args:` expression in ops.yaml calls only functions from this module, with
input names bound to shape tuples and attr names bound to attr values. VJP expressions may call
them too (there input names are buffers; `shape(x)` reads a buffer's shape). A rule that finds a
problem raises ShapeError with what it expected; the generated op prefixes the op name and the
shapes it was given. This module imports nothing from the native side, so the generator can
load it to validate the registry.
"""
from __future__ import annotations

import math
import operator


class ShapeError(ValueError):
    """A shape rule was violated; the generated op adds its name and the input shapes."""


def _axis(s, axis):
    r = len(s)
    a = operator.index(axis)
    if not -r <= a < r:
        raise ShapeError(f"axis {axis} is out of range for rank {r}")
    return a % r


def _need_rank(s, lo, hi=None, what="input"):
    if len(s) < lo or (hi is not None and len(s) > hi):
        want = f"rank {lo}" if hi == lo else f"rank >= {lo}" if hi is None else f"rank {lo}..{hi}"
        raise ShapeError(f"{what} must have {want}, got rank {len(s)}")


# ---------------------------------------------------------------- generic
def shape(b):
    """The shape of a buffer (for VJP expressions)."""
    return tuple(b.shape)


def same(a, *others):
    """Output shape equals every input's shape."""
    for o in others:
        if tuple(o) != tuple(a):
            raise ShapeError(f"shapes must be equal, got {tuple(a)} and {tuple(o)}")
    return tuple(a)


def scalar(*_):
    """A 0-d output."""
    return ()


def numel(s):
    return math.prod(s)


def rows(s):
    """Leading axes folded into one row count (last axis = columns)."""
    _need_rank(s, 1)
    return math.prod(s[:-1])


def cols(s):
    _need_rank(s, 1)
    return s[-1]


def rank(s):
    return len(s)


def dims(s):
    """A shape as a list of ints (for i64[] kernel args)."""
    return tuple(int(d) for d in s)


def nonempty_last(s):
    """The last axis must not be empty (softmax-like rules)."""
    _need_rank(s, 1)
    if s[-1] == 0:
        raise ShapeError("the last axis must not be empty")
    return tuple(s)


# ---------------------------------------------------------------- broadcasting
def broadcast(*shapes):
    """NumPy broadcasting of any number of shapes."""
    r = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(r):
        d = 1
        for s in shapes:
            k = i - (r - len(s))
            if k < 0:
                continue
            e = s[k]
            if e != 1 and d != 1 and e != d:
                raise ShapeError("shapes " + " and ".join(str(tuple(x)) for x in shapes)
                                 + " cannot be broadcast together")
            if e != 1:
                d = e
        out.append(d)
    return tuple(out)


def broadcast_to(s, target):
    """x broadcast to `target` (NumPy rules, one direction)."""
    target = tuple(int(t) for t in target)
    if len(s) > len(target) or broadcast(s, target) != target:
        raise ShapeError(f"cannot broadcast {tuple(s)} to {target}")
    return target


def sum_to(s, target):
    """The adjoint of broadcast_to: s must be a broadcast of target."""
    target = tuple(int(t) for t in target)
    broadcast_to(target, s)
    return target


# ---------------------------------------------------------------- reductions and views
def reduce(s, axis):
    """Drop `axis`."""
    _need_rank(s, 1)
    a = _axis(s, axis)
    return tuple(s[:a]) + tuple(s[a + 1:])


def keepdim(s, axis):
    """`s` with `axis` kept as size 1."""
    a = _axis(s, axis)
    return tuple(s[:a]) + (1,) + tuple(s[a + 1:])


def outer(s, axis):
    """Elements before `axis` (for axis reductions laid out as outer x len x inner)."""
    return math.prod(s[:_axis(s, axis)])


def axis_len(s, axis):
    return s[_axis(s, axis)]


def inner(s, axis):
    return math.prod(s[_axis(s, axis) + 1:])


def axis_size(s, axis):
    """Size of `axis` as a float scale helper (reduce_mean)."""
    return s[_axis(s, axis)]


def reshape(s, new):
    """Reshape with one optional -1."""
    new = tuple(int(d) for d in new)
    n = math.prod(s)
    if new.count(-1) > 1:
        raise ShapeError(f"only one -1 is allowed in shape {new}")
    if -1 in new:
        known = math.prod(d for d in new if d != -1)
        if known == 0 or n % known:
            raise ShapeError(f"cannot reshape {tuple(s)} ({n} elements) to {new}")
        new = tuple(n // known if d == -1 else d for d in new)
    if any(d < 0 for d in new) or math.prod(new) != n:
        raise ShapeError(f"cannot reshape {tuple(s)} ({n} elements) to {new}")
    return new


def flat(s):
    return (math.prod(s),)


def transpose2d(s):
    _need_rank(s, 2, 2)
    return (s[1], s[0])


def swap_adjacent(s, depth):
    """Swap axes depth and depth+1; identity when depth+1 >= rank (seed convention)."""
    d = operator.index(depth)
    if d < 0:
        raise ShapeError(f"depth must be >= 0, got {d}")
    s = tuple(s)
    if d + 1 >= len(s):
        return s
    return s[:d] + (s[d + 1], s[d]) + s[d + 2:]


def swap_outer(s, depth):
    """Elements before the swapped pair."""
    d = operator.index(depth)
    return math.prod(s[:d]) if d + 1 < len(s) else 1


def swap_a(s, depth):
    d = operator.index(depth)
    return s[d] if d + 1 < len(s) else 1


def swap_b(s, depth):
    d = operator.index(depth)
    return s[d + 1] if d + 1 < len(s) else 1


def swap_inner(s, depth):
    d = operator.index(depth)
    return math.prod(s[d + 2:]) if d + 1 < len(s) else math.prod(s)


def rank3(s):
    _need_rank(s, 3, 3)
    return tuple(s)


def permute_bca(s):
    """(a, b, c) -> (b, c, a)."""
    _need_rank(s, 3, 3)
    return (s[1], s[2], s[0])


def permute_cab(s):
    """(a, b, c) -> (c, a, b)."""
    _need_rank(s, 3, 3)
    return (s[2], s[0], s[1])


def swap_last2(s):
    """(a, b, c) -> (a, c, b)."""
    _need_rank(s, 3, 3)
    return (s[0], s[2], s[1])


# ---------------------------------------------------------------- linear algebra
def matmul(a, b):
    _need_rank(a, 2, 2, "a")
    _need_rank(b, 2, 2, "b")
    if a[1] != b[0]:
        raise ShapeError(f"inner dimensions differ: a {tuple(a)} @ b {tuple(b)}; "
                         "expected a.shape[1] == b.shape[0]")
    return (a[0], b[1])


def bmm(a, b):
    _need_rank(a, 3, 3, "a")
    _need_rank(b, 3, 3, "b")
    if a[0] != b[0] or a[2] != b[1]:
        raise ShapeError(f"expected a (B, m, n) and b (B, n, p), got a {tuple(a)} and b {tuple(b)}")
    return (a[0], a[1], b[2])


def linear(w, b, x):
    """y = W x + b; x is (in,) or (N, in) with a batch axis."""
    _need_rank(w, 2, 2, "W")
    _need_rank(b, 1, 1, "b")
    _need_rank(x, 1, 2, "x")
    if b[0] != w[0] or x[-1] != w[1]:
        raise ShapeError(f"expected W (out, in), b (out,), x (..., in); got W {tuple(w)}, "
                         f"b {tuple(b)}, x {tuple(x)}")
    return tuple(x[:-1]) + (w[0],)


def batch_rows(x):
    """Rows of a (in,) or (N, in) input: 1 or N."""
    return 1 if len(x) == 1 else x[0]


# ---------------------------------------------------------------- concat / slice / gather
def concat1d(a, b):
    _need_rank(a, 1, 1, "a")
    _need_rank(b, 1, 1, "b")
    return (a[0] + b[0],)


def slice1d(s, start, length):
    _need_rank(s, 1, 1)
    if start < 0 or length < 0 or start + length > s[0]:
        raise ShapeError(f"slice [{start}:{start + length}] is out of range for length {s[0]}")
    return (length,)


def concat0(a, b):
    _need_rank(a, 1, None, "a")
    if tuple(a[1:]) != tuple(b[1:]) or len(b) != len(a):
        raise ShapeError(f"trailing shapes must match, got {tuple(a)} and {tuple(b)}")
    return (a[0] + b[0],) + tuple(a[1:])


def slice_range0(s, start, length):
    _need_rank(s, 1)
    if start < 0 or length < 0 or start + length > s[0]:
        raise ShapeError(f"range [{start}:{start + length}] is out of range for leading axis {s[0]}")
    return (length,) + tuple(s[1:])


def row_len(s):
    """Elements per leading-axis row."""
    return math.prod(s[1:])


def index_count(indices):
    return int(len(indices))


def index_shape(indices):
    """Output shape of gather_vec: the shape of the index array."""
    return tuple(indices.shape)


def gather_rows(s, indices):
    _need_rank(s, 2, 2)
    return tuple(indices.shape) + (s[1],)


def need_rank(s, r):
    """s must have exactly rank r; returns s."""
    _need_rank(s, r, r)
    return tuple(s)


def check_scalar_like(v, n):
    """A value of n elements (scatter_add_vec)."""
    if math.prod(v) != n:
        raise ShapeError(f"values must hold {n} element(s), got shape {tuple(v)}")
    return tuple(v)


# ==================================================================== section: linalg_index

# -------------------------------------------------------------------- end of section: linalg_index


# ==================================================================== section: conv_pool

# -------------------------------------------------------------------- end of section: conv_pool


# ==================================================================== section: norm_attention

def ln_out(x, gamma, beta):
    """layer_norm: gamma and beta are (cols,) matching x's last axis."""
    _need_rank(x, 1, None, "x")
    _need_rank(gamma, 1, 1, "gamma")
    _need_rank(beta, 1, 1, "beta")
    if gamma[0] != x[-1] or beta[0] != x[-1]:
        raise ShapeError(f"expected gamma and beta of shape ({x[-1]},) matching the last axis of x "
                         f"{tuple(x)}; got gamma {tuple(gamma)}, beta {tuple(beta)}")
    if x[-1] == 0:
        raise ShapeError("the last axis of x must not be empty")
    return tuple(x)


def ln_stats(x):
    """One statistic per row (leading axes folded)."""
    return (math.prod(x[:-1]),)


def ln_param(g, gamma):
    if tuple(gamma) != (g[-1],):
        raise ShapeError(f"expected gamma ({g[-1]},), got {tuple(gamma)}")
    return tuple(gamma)


def _bn_split(x):
    _need_rank(x, 2, 4, "x")
    if len(x) == 4:
        return x[0], x[1], x[2] * x[3]
    return 1, x[0], math.prod(x[1:])


def bn_out(x, gamma, beta):
    """batchnorm_channel_first: x (C, L), (C, H, W) or (N, C, H, W); gamma, beta (C,)."""
    n, c, s = _bn_split(x)
    if tuple(gamma) != (c,) or tuple(beta) != (c,):
        raise ShapeError(f"expected gamma and beta of shape ({c},) (channels of x {tuple(x)}); "
                         f"got gamma {tuple(gamma)}, beta {tuple(beta)}")
    if n * s == 0:
        raise ShapeError("each channel needs at least one element")
    return tuple(x)


def bn_stats(x):
    return (_bn_split(x)[1],)


def bn_n(x):
    return _bn_split(x)[0]


def bn_c(x):
    return _bn_split(x)[1]


def bn_s(x):
    return _bn_split(x)[2]


def mha_out(wq, wk, wv, wo, x, num_heads, mask):
    """multi_head_attention: x (n, d) or (B, n, d); Wq/Wk/Wv (d, H*hd); Wo (H*hd, d)."""
    _need_rank(x, 2, 3, "x")
    for nm, w in (("Wq", wq), ("Wk", wk), ("Wv", wv), ("Wo", wo)):
        _need_rank(w, 2, 2, nm)
    d = x[-1]
    hh = wq[1]
    if tuple(wk) != tuple(wq) or tuple(wv) != tuple(wq) or wq[0] != d or tuple(wo) != (hh, d):
        raise ShapeError(f"expected Wq, Wk, Wv of shape (d_model, H*hd) = ({d}, k) and Wo (k, {d}); "
                         f"got Wq {tuple(wq)}, Wk {tuple(wk)}, Wv {tuple(wv)}, Wo {tuple(wo)}")
    if num_heads <= 0 or hh % num_heads:
        raise ShapeError(f"num_heads={num_heads} must be positive and divide the projection width "
                         f"{hh} (Wq {tuple(wq)})")
    if mask is not None:
        n = x[-2]
        if tuple(mask.shape) != (n, n):
            raise ShapeError(f"mask must have shape ({n}, {n}) for x {tuple(x)}, got "
                             f"{tuple(mask.shape)}")
    return tuple(x)


def mha_proj(x, wq):
    return tuple(x[:-1]) + (wq[1],)


def mha_lse(x, num_heads):
    return tuple(x[:-2]) + (num_heads, x[-2])


def mha_b(x):
    return 1 if len(x) == 2 else x[0]


def mha_n(x):
    return x[-2]


def mha_dm(x):
    return x[-1]


def mha_hd(wq, num_heads):
    return wq[1] // num_heads if num_heads > 0 else 0


def mha_flag(v):
    """1 for a present mask / a true flag, else 0 (an i64 kernel arg)."""
    if v is None or v is False:
        return 0
    return 1

# -------------------------------------------------------------------- end of section: norm_attention


# ==================================================================== section: spectral_scan

# -------------------------------------------------------------------- end of section: spectral_scan


# ==================================================================== section: elementwise

# -------------------------------------------------------------------- end of section: elementwise


# ==================================================================== section: reduce_views

# -------------------------------------------------------------------- end of section: reduce_views
