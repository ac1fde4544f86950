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
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return tuple(shapes[0])
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

def gemm_t(a, b, trans_a, trans_b):
    """Shape of op(a) @ op(b) for rank-2 or rank-3 (batched) operands; op = transpose if flagged."""
    _need_rank(a, 2, 3, "a")
    if len(b) != len(a):
        raise ShapeError(f"a and b must have the same rank, got {tuple(a)} and {tuple(b)}")
    ta = tuple(a[:-2]) + ((a[-1], a[-2]) if trans_a else (a[-2], a[-1]))
    tb = tuple(b[:-2]) + ((b[-1], b[-2]) if trans_b else (b[-2], b[-1]))
    if ta[:-2] != tb[:-2] or ta[-1] != tb[-2]:
        raise ShapeError(f"op(a) {ta} and op(b) {tb} do not multiply")
    return ta[:-1] + (tb[-1],)


def flag(v):
    """A bool attr as 0/1 for an i64 kernel arg."""
    return 1 if v else 0


def gemm_batch(a):
    return a[0] if len(a) == 3 else 1


def gemm_m(a, trans_a):
    return a[-1] if trans_a else a[-2]


def gemm_n(a, trans_a):
    return a[-2] if trans_a else a[-1]


def gemm_p(b, trans_b):
    return b[-2] if trans_b else b[-1]


def linear_dw(g, x):
    """Shape of dW = g^T x for linear: (out, in)."""
    _need_rank(g, 1, 2, "g")
    if len(g) != len(x) or tuple(g[:-1]) != tuple(x[:-1]):
        raise ShapeError(f"g {tuple(g)} and x {tuple(x)} must share the batch axis")
    return (g[-1], x[-1])


def linear_db(g):
    _need_rank(g, 1, 2, "g")
    return (g[-1],)


def lead_len(b):
    """Leading-axis length of a buffer (VJP expressions) or a shape."""
    s = tuple(getattr(b, "shape", b))
    _need_rank(s, 1)
    return s[0]


def pad_range0(s, start, total):
    """g (len, ...) placed at [start, start+len) of a zero (total, ...) result."""
    _need_rank(s, 1)
    if start < 0 or start + s[0] > total:
        raise ShapeError(f"range [{start}:{start + s[0]}] does not fit a leading axis of {total}")
    return (int(total),) + tuple(s[1:])


def as_index(index):
    """A single index attr (0-d integer array) as an int."""
    if getattr(index, "ndim", 0) != 0:
        raise ShapeError(f"index must be a single int, got an array of shape {tuple(index.shape)}")
    return int(index)


def gather_scalar(s, index):
    _need_rank(s, 1, 1, "x")
    as_index(index)
    return ()


def gather_row(s, index):
    _need_rank(s, 2, 2, "x")
    as_index(index)
    return (s[1],)


def gather_vec(s, indices):
    _need_rank(s, 1, 1, "x")
    return tuple(indices.shape)


def scatter_vec(x, v, indices):
    """scatter_add_vec / gather_vec_backward: x a vector, v holds one value per index."""
    _need_rank(x, 1, 1, "x")
    check_scalar_like(v, int(indices.size))
    return tuple(x)


def scatter_rows(x, v, indices):
    """gather_rows_backward: x (rows, cols), v (k..., cols) with one row per index."""
    _need_rank(x, 2, 2, "x")
    if math.prod(v) != int(indices.size) * x[1]:
        raise ShapeError(f"values must hold {int(indices.size)} row(s) of {x[1]}, got shape {tuple(v)}")
    return tuple(x)


def scatter_row(x, v, index):
    _need_rank(x, 2, 2, "x")
    _need_rank(v, 1, 1, "values")
    i = as_index(index)
    if v[0] != x[1]:
        raise ShapeError(f"values must have shape ({x[1]},), got {tuple(v)}")
    if i >= x[0]:
        raise ShapeError(f"row index {i} is out of range for {x[0]} rows")
    return tuple(x)


def like_gather(g, v, indices):
    """gather_vec_like: gather from vector g, shaped like v (one value per index)."""
    _need_rank(g, 1, 1, "g")
    check_scalar_like(v, int(indices.size))
    return tuple(v)


# -------------------------------------------------------------------- end of section: linalg_index


# ==================================================================== section: conv_pool

# Geometry for convolution and pooling. Inputs are (C, spatial...) or (N, C, spatial...); a
# missing batch axis is N = 1. Kernels get one flat i64 "geometry" array:
#   [r, N, C_in, C_out, in_1..in_r, k_1..k_r, out_1..out_r, s_1..s_r, p_1..p_r]
# (pools use C_in = C_out = C). Output sizes follow the seed (inventory 1.3 / 10.9).
def _per_axis(v, r, what):
    t = (int(v),) * r if isinstance(v, int) else tuple(int(e) for e in v)
    if len(t) != r:
        raise ShapeError(f"{what} must be an int or a tuple of {r} ints, got {v!r}")
    return t


def _strides_pads(stride, padding, r):
    s = _per_axis(stride, r, "stride")
    p = _per_axis(padding, r, "padding")
    if any(e <= 0 for e in s):
        raise ShapeError(f"stride must be >= 1 on every axis, got {stride!r} (stride 0 is rejected)")
    if any(e < 0 for e in p):
        raise ShapeError(f"padding must be >= 0 on every axis, got {padding!r}")
    return s, p


def _window_fits(what, sp, k, p):
    """A window larger than its padded input has no valid position: an error, as in PyTorch
    (an empty input, size 0, still gives an empty output)."""
    for a, (i, kk, pp) in enumerate(zip(sp, k, p)):
        if i > 0 and kk > i + 2 * pp:
            raise ShapeError(f"{what} size {tuple(k)} is larger than the padded input: axis {a} "
                             f"has {i} + 2*{pp} = {i + 2 * pp} < {kk}")


def conv_size(i, k, s, p):
    """Seed rule: 0 when k = 0 or in + 2p < k, else (in + 2p - k) / s + 1."""
    return 0 if k == 0 or i + 2 * p < k else (i + 2 * p - k) // s + 1


def pool_size(i, k, s, p):
    """Seed rule: 0 when in = 0, k = 0 or p > floor(k/2) (an empty result), else conv_size."""
    return 0 if i == 0 or k == 0 or p > k // 2 else conv_size(i, k, s, p)


def conv_transpose_size(i, k, s, p):
    """Seed rule: 0 when in = 0 or k = 0, else max(0, (in - 1) s + k - 2p)."""
    return 0 if i == 0 or k == 0 else max(0, (i - 1) * s + k - 2 * p)


def _split_batch(x, r, what="input"):
    """(N, C, spatial) of an input of rank r+1 (no batch) or r+2."""
    if len(x) == r + 1:
        return None, x[0], tuple(x[1:])
    if len(x) == r + 2:
        return x[0], x[1], tuple(x[2:])
    raise ShapeError(f"{what} must be (C, {r} spatial) or (N, C, {r} spatial), got rank {len(x)}")


def _conv_parts(kernel, bias, x, stride, padding, rank, transpose):
    r = len(kernel) - 2
    if rank and len(kernel) != rank + 2:
        raise ShapeError(f"kernel must have rank {rank + 2}, got rank {len(kernel)}")
    if not 1 <= r <= 8:
        raise ShapeError(f"kernel must have rank 3..10 (1..8 spatial axes), got rank {len(kernel)}")
    n, c, sp = _split_batch(x, r)
    lay = "(C_in, C_out, k...)" if transpose else "(C_out, C_in, k...)"
    cin, cout = (kernel[0], kernel[1]) if transpose else (kernel[1], kernel[0])
    if c != cin:
        raise ShapeError(f"input has {c} channel(s) but the kernel {lay} expects {cin}")
    if bias is not None and tuple(bias) != (cout,):
        raise ShapeError(f"bias must have shape ({cout},) (C_out), got {tuple(bias)}")
    s, p = _strides_pads(stride, padding, r)
    k = tuple(kernel[2:])
    if not transpose:
        _window_fits("kernel", sp, k, p)
    size = conv_transpose_size if transpose else conv_size
    out = tuple(size(i, kk, ss, pp) for i, kk, ss, pp in zip(sp, k, s, p))
    return r, n, cin, cout, sp, k, out, s, p


def conv_out(kernel, bias, x, stride, padding, rank=0):
    """Output shape of conv (rank = required spatial rank, 0 = any 1..8)."""
    r, n, cin, cout, sp, k, out, s, p = _conv_parts(kernel, bias, x, stride, padding, rank, False)
    return ((n,) if n is not None else ()) + (cout,) + out


def conv_transpose_out(kernel, bias, x, stride, padding, rank=0):
    r, n, cin, cout, sp, k, out, s, p = _conv_parts(kernel, bias, x, stride, padding, rank, True)
    return ((n,) if n is not None else ()) + (cout,) + out


def conv_geom(kernel, x, stride, padding, transpose=0):
    """The flat i64 geometry array for conv kernels (see the section comment)."""
    r, n, cin, cout, sp, k, out, s, p = _conv_parts(kernel, None, x, stride, padding, 0,
                                                    bool(transpose))
    return (r, 1 if n is None else n, cin, cout) + sp + k + out + s + p


def conv_bias_shape(kernel, transpose=0):
    """(C_out,) of a conv or transposed-conv kernel."""
    return (kernel[1] if transpose else kernel[0],)


def conv_grad(kernel, x, g, stride, padding, transpose=0):
    """Kernel shape for a conv backward; g must have the conv output shape."""
    f = conv_transpose_out if transpose else conv_out
    want = f(kernel, None, x, stride, padding)
    if tuple(g) != want:
        raise ShapeError(f"grad must have the output shape {want}, got {tuple(g)}")
    return tuple(kernel)


def _pool_parts(x, kernel_size, stride, padding, rank):
    r = rank
    if not r:
        for v in (kernel_size, stride, padding):
            if not isinstance(v, int):
                r = len(v)
                break
        else:
            raise ShapeError("give kernel_size (or stride/padding) as a per-axis tuple so the "
                             "number of spatial axes is known")
    if not 1 <= r <= 8:
        raise ShapeError(f"pooling needs 1..8 spatial axes, got {r}")
    n, c, sp = _split_batch(x, r)
    k = _per_axis(kernel_size, r, "kernel_size")
    if any(e < 0 for e in k):
        raise ShapeError(f"kernel_size must be >= 0, got {kernel_size!r}")
    s, p = _strides_pads(stride, padding, r)
    if any(e == 0 for e in k):
        raise ShapeError(f"kernel_size must be >= 1 on every axis, got {kernel_size!r}")
    if any(pp > kk // 2 for kk, pp in zip(k, p)):
        raise ShapeError(f"padding {tuple(p)} must be at most half the kernel size {tuple(k)}")
    _window_fits("pooling window", sp, k, p)
    out = tuple(pool_size(i, kk, ss, pp) for i, kk, ss, pp in zip(sp, k, s, p))
    return r, n, c, sp, k, out, s, p


def pool_out(x, kernel_size, stride, padding, rank=0):
    """Output shape of a pooling op: (N?, C, out...)."""
    r, n, c, sp, k, out, s, p = _pool_parts(x, kernel_size, stride, padding, rank)
    return ((n,) if n is not None else ()) + (c,) + out


def pool_geom(x, kernel_size, stride, padding, rank=0):
    r, n, c, sp, k, out, s, p = _pool_parts(x, kernel_size, stride, padding, rank)
    return (r, 1 if n is None else n, c, c) + sp + k + out + s + p


def pool_grad(x, g, kernel_size, stride, padding, rank=0):
    """Shape of a pooling input gradient; g must have the pooled shape."""
    want = pool_out(x, kernel_size, stride, padding, rank)
    if tuple(g) != want:
        raise ShapeError(f"grad must have the pooled shape {want}, got {tuple(g)}")
    return tuple(x)


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
    _need_rank(wq, 2, 2, "Wq")
    return wq[1] // num_heads if num_heads > 0 else 0


def mha_flag(v):
    """1 for a present mask / a true flag, else 0 (an i64 kernel arg)."""
    if v is None or v is False:
        return 0
    return 1

# -------------------------------------------------------------------- end of section: norm_attention


# ==================================================================== section: spectral_scan
def _shape_of(v):
    """Shape tuple of a shape (shape rules) or of a buffer/array (VJP expressions)."""
    return tuple(getattr(v, "shape", v))


def rfft(s):
    """(..., n) -> (..., n//2 + 1, 2): packed [re, im] per bin k = 0..n/2."""
    s = _shape_of(s)
    _need_rank(s, 1, what="x")
    if s[-1] < 1:
        raise ShapeError("the transformed (last) axis must have length >= 1")
    return s[:-1] + (s[-1] // 2 + 1, 2)


def fft_len(x):
    """Signal length n of an rfft input (its last axis), for the rfft VJP."""
    return _shape_of(x)[-1]


def irfft(s, n):
    """(..., n//2 + 1, 2) -> (..., n)."""
    s = _shape_of(s)
    n = operator.index(n)
    if n < 1:
        raise ShapeError(f"n must be >= 1, got {n}")
    _need_rank(s, 2, what="x")
    if s[-2:] != (n // 2 + 1, 2):
        raise ShapeError(f"expected x of shape (..., {n // 2 + 1}, 2) for n={n}, got {s}")
    return s[:-2] + (n,)


def spectrum_rows(s):
    """Independent transforms of a packed spectrum (..., bins, 2)."""
    return math.prod(_shape_of(s)[:-2])


def spectral_conv1d(x, w_re, w_im):
    """x (grid, width) or (B, grid, width); w_re, w_im (modes, width, width), modes <= grid//2+1."""
    x, w_re, w_im = _shape_of(x), _shape_of(w_re), _shape_of(w_im)
    _need_rank(x, 2, 3, "x")
    _need_rank(w_re, 3, 3, "w_re")
    grid, width = x[-2], x[-1]
    if grid < 1 or width < 1:
        raise ShapeError(f"grid and width must be >= 1, got x {x}")
    modes = w_re[0]
    if w_re[1:] != (width, width) or w_im != w_re:
        raise ShapeError(f"expected w_re and w_im of shape (modes, {width}, {width}) (mode, in, out), "
                         f"got w_re {w_re} and w_im {w_im}")
    if not 1 <= modes <= grid // 2 + 1:
        raise ShapeError(f"modes must be in 1..grid//2+1 = {grid // 2 + 1} for grid {grid}, got {modes}")
    return x


def spectral_batch(x):
    """B of a (B, grid, width) input, 1 without the batch axis."""
    x = _shape_of(x)
    return x[0] if len(x) == 3 else 1


def spectral_grid(x):
    return _shape_of(x)[-2]


def spectral_width(x):
    return _shape_of(x)[-1]


def spectral_modes(w):
    return _shape_of(w)[0]


def selective_scan(a, b, x, h0):
    """Diagonal SSM shapes. x (T, D) with h0 (D,), or batched x (B, T, D) with h0 (B, D).
    Each of a, b is (D,) (fixed), (T, D) (token-dependent, shared by the batch) or, batched
    only, (B, T, D) (token-dependent per sample). Returns the output shape (= x)."""
    x, h0 = _shape_of(x), _shape_of(h0)
    _need_rank(x, 2, 3, "x")
    lead, (T, D) = x[:-2], x[-2:]
    if h0 != lead + (D,):
        raise ShapeError(f"expected h0 of shape {lead + (D,)} for x {x}, got {h0}")
    for name, c in (("a", a), ("b", b)):
        scan_mode(c, x, name)
    return x


def scan_mode(c, x, name="coefficient"):
    """How a coefficient is laid out: 0 = (D,), 1 = (T, D), 2 = (B, T, D)."""
    c, x = _shape_of(c), _shape_of(x)
    T, D = x[-2], x[-1]
    forms = {(D,): 0, (T, D): 1}
    if len(x) == 3:
        forms.setdefault(x, 2)
    if c not in forms:
        allowed = " or ".join(str(f) for f in forms)
        raise ShapeError(f"{name} must have shape {allowed} for x {x}, got {c}")
    return forms[c]


def scan_batch(x):
    x = _shape_of(x)
    return x[0] if len(x) == 3 else 1


def scan_steps(x):
    return _shape_of(x)[-2]


def scan_width(x):
    return _shape_of(x)[-1]


def dgemm(a, b):
    """(m, k) @ (k, n) -> (m, n) for host float64 arrays."""
    a, b = _shape_of(a), _shape_of(b)
    if len(a) != 2 or len(b) != 2:
        raise ShapeError(f"expected 2-D arrays a (m, k) and b (k, n), got a {a} and b {b}")
    if a[1] != b[0]:
        raise ShapeError(f"inner dimensions differ: a {a} @ b {b}; expected a.shape[1] == b.shape[0]")
    return (a[0], b[1])


# -------------------------------------------------------------------- end of section: spectral_scan


# ==================================================================== section: elementwise

def vec(n):
    """A 1-d output of n elements (RNG kernels)."""
    if isinstance(n, bool) or int(n) != n or n < 0:
        raise ShapeError(f"expected a non-negative int length, got {n!r}")
    return (int(n),)

# -------------------------------------------------------------------- end of section: elementwise


# ==================================================================== section: reduce_views

def swap_geom(s, kind, depth=0):
    """(outer, A, B, inner) of the block swap (o, A, B, i) -> (o, B, A, i) that every axis
    permutation of this family is; one kernel serves transpose2d, swap_adjacent and the 3-d
    permutations. kind: "t2d", "swap", "bca", "cab", "last2"."""
    s = tuple(s)
    if kind == "t2d":
        _need_rank(s, 2, 2)
        return (1, s[0], s[1], 1)
    if kind == "swap":
        d = operator.index(depth)
        if d < 0:
            raise ShapeError(f"depth must be >= 0, got {d}")
        if d + 1 >= len(s):  # identity copy (seed convention)
            return (1, 1, 1, math.prod(s))
        return (math.prod(s[:d]), s[d], s[d + 1], math.prod(s[d + 2:]))
    _need_rank(s, 3, 3)
    if kind == "bca":  # (a, b, c) -> (b, c, a): swap a with the (b, c) block
        return (1, s[0], s[1] * s[2], 1)
    if kind == "cab":  # (a, b, c) -> (c, a, b): swap the (a, b) block with c
        return (1, s[0] * s[1], s[2], 1)
    if kind == "last2":
        return (s[0], s[1], s[2], 1)
    raise ShapeError(f"unknown permutation kind {kind!r}")


def reduce_axis_back(g, shape, axis):
    """Output shape of reduce_axis_backward: `shape`, whose reduction over `axis` must be g."""
    shape = tuple(int(d) for d in shape)
    want = reduce(shape, axis)
    if tuple(g) != want:
        raise ShapeError(f"gradient shape {tuple(g)} does not match {want}, the reduction of "
                         f"{shape} over axis {axis}")
    return shape


def reduce_max_back(x, y, g, axis):
    """dx of reduce_max: x's shape; y and g must be x reduced over `axis`."""
    want = reduce(x, axis)
    if tuple(y) != want or tuple(g) != want:
        raise ShapeError(f"y {tuple(y)} and grad {tuple(g)} must both be {want}, the reduction "
                         f"of {tuple(x)} over axis {axis}")
    return tuple(x)


def softmax_rows(s):
    """Rows of a softmax input (leading axes folded); the last axis must be non-empty."""
    nonempty_last(s)
    return math.prod(s[:-1])


def masked_softmax(s, mask):
    """x's shape; mask (boolean, or None for no mask) must have x's shape or x's last-2 shape."""
    nonempty_last(s)
    if mask is None:
        return tuple(s)
    m = tuple(mask.shape)
    if m == tuple(s):
        return tuple(s)
    if len(s) >= 2 and m == tuple(s[-2:]):
        return tuple(s)
    want = f"{tuple(s)}" + (f" or {tuple(s[-2:])}" if len(s) >= 2 else "")
    raise ShapeError(f"mask shape {m} must be {want}")


def mask_rows(s, mask):
    """Rows the mask holds (the kernel reads mask row r % mask_rows); 0 when there is no mask."""
    if mask is None:
        return 0
    return math.prod(mask.shape[:-1]) if len(mask.shape) else 1


# -------------------------------------------------------------------- end of section: reduce_views
