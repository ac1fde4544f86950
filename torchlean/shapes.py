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

# -------------------------------------------------------------------- end of section: elementwise


# ==================================================================== section: reduce_views

# -------------------------------------------------------------------- end of section: reduce_views
