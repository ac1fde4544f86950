"""Rearranging elements without arithmetic: flip, roll, rot90, triangles, diagonals, tiling,
moving and selecting axes. Each works out on the host which input element lands where and
records one gather_vec (VJP: scatter-add) or a where over a fixed mask."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean import views as _views
from torchlean.catalog import _common as c

METHODS = ("flip", "fliplr", "flipud", "roll", "rot90", "tril", "triu", "movedim", "moveaxis",
           "unbind", "narrow", "select", "diag", "diag_embed", "diagflat", "diagonal", "tile",
           "repeat", "repeat_interleave", "unflatten", "ravel", "expand_as", "reshape_as",
           "slice_scatter", "select_scatter", "diagonal_scatter", "unfold", "H", "mH",
           "swapaxes", "swapdims", "narrow_copy", "trace")
INPLACE = ("tril", "triu")
EXPORTS = {"torch": ("flip", "fliplr", "flipud", "roll", "rot90", "tril", "triu", "movedim",
                     "moveaxis", "unbind", "narrow", "select", "diag", "diag_embed", "diagflat",
                     "diagonal", "tile", "repeat_interleave", "unflatten", "ravel",
                     "slice_scatter", "select_scatter", "diagonal_scatter", "swapaxes",
                     "swapdims", "narrow_copy", "trace")}


def _dims_arg(args, dims):
    if dims is not None:
        return tuple(dims) if isinstance(dims, (list, tuple)) else (dims,)
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return tuple(args[0])
    return tuple(args)


def flip(input, *args, dims=None):
    x = c.tensor("flip", input)
    ds = c.dims("flip", _dims_arg(args, dims), x.ndim)
    return c.rearrange(x, np.flip(c.positions(x.shape), ds)) if ds else x.clone()


def fliplr(input):
    x = c.tensor("fliplr", input)
    if x.ndim < 2:
        raise ValueError(f"fliplr: input must be at least 2-D, got shape {tuple(x.shape)}")
    return flip(x, 1)


def flipud(input):
    x = c.tensor("flipud", input)
    if x.ndim < 1:
        raise ValueError("flipud: input must be at least 1-D, got a 0-d tensor")
    return flip(x, 0)


def roll(input, shifts, dims=None):
    x = c.tensor("roll", input)
    shifts = tuple(shifts) if isinstance(shifts, (list, tuple)) else (shifts,)
    pos = c.positions(x.shape)
    if dims is None:
        if len(shifts) != 1:
            raise ValueError(f"roll: without dims, shifts must be one int, got {shifts}")
        return c.rearrange(x, np.roll(pos.reshape(-1), int(shifts[0])).reshape(x.shape))
    dims = tuple(dims) if isinstance(dims, (list, tuple)) else (dims,)
    if len(dims) != len(shifts):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    ds = [c.dim("roll", d, x.ndim) for d in dims]
    return c.rearrange(x, np.roll(pos, [int(v) for v in shifts], ds))


def rot90(input, k=1, dims=(0, 1)):
    x = c.tensor("rot90", input)
    if len(dims) != 2 or x.ndim < 2:
        raise ValueError(f"rot90: expected 2 dims of a tensor of rank >= 2, got dims {dims} "
                         f"and shape {tuple(x.shape)}")
    a, b = (c.dim("rot90", d, x.ndim) for d in dims)
    if a == b:
        raise ValueError(f"rot90: the two dims must differ, got {tuple(dims)}")
    return c.rearrange(x, np.rot90(c.positions(x.shape), int(k), (a, b)))


def _triangle(op, input, diagonal, keep):
    x = c.tensor(op, input)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must have at least 2 dimensions, got shape "
                         f"{tuple(x.shape)}")
    if isinstance(diagonal, (bool, np.bool_)) or not isinstance(diagonal, (int, np.integer)):
        raise TypeError(f"{op}: diagonal must be an int, got {type(diagonal).__name__}")
    # the kernel works out the triangle from each entry's position: no mask array
    return x.session.op("triangle", x, diagonal=int(diagonal), upper=int(keep == "upper"))


def tril(input, diagonal=0):
    """The lower triangle (j - i <= diagonal) of the last two axes; the rest is 0 (also where
    x is inf or NaN: a where, not a product)."""
    return _triangle("tril", input, diagonal, "lower")


def triu(input, diagonal=0):
    return _triangle("triu", input, diagonal, "upper")


def movedim(input, source, destination):
    x = c.tensor("movedim", input)
    src = tuple(source) if isinstance(source, (list, tuple)) else (source,)
    dst = tuple(destination) if isinstance(destination, (list, tuple)) else (destination,)
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {src} and destination {dst} must have the same "
                         "number of dims")
    src = [c.dim("movedim", d, x.ndim) for d in src]
    dst = [c.dim("movedim", d, x.ndim) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dim in source {src} or destination {dst}")
    perm = [None] * x.ndim
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    return x.permute([p if p is not None else next(rest) for p in perm]) if x.ndim else x


moveaxis = movedim


def swapaxes(input, axis0, axis1):
    return c.tensor("swapaxes", input).transpose(axis0, axis1)


swapdims = swapaxes


def select(input, dim, index):
    x = c.tensor("select", input)
    if x.ndim == 0:
        raise IndexError("select: cannot select on a 0-d tensor")
    d = c.dim("select", dim, x.ndim)
    n = x.shape[d]
    i = int(index)
    if not -n <= i < n:
        raise IndexError(f"select: index {i} out of range for dim {d} of size {n} "
                         f"(shape {tuple(x.shape)})")
    return x[(slice(None),) * d + (i % n,)]


def unbind(input, dim=0):
    x = c.tensor("unbind", input)
    d = c.dim("unbind", dim, x.ndim)
    return tuple(select(x, d, i) for i in range(x.shape[d]))


def narrow(input, dim, start, length):
    x = c.tensor("narrow", input)
    d = c.dim("narrow", dim, x.ndim)
    n = x.shape[d]
    st = int(start) + (n if int(start) < 0 else 0)
    if not 0 <= st <= n or length < 0 or st + int(length) > n:
        raise IndexError(f"narrow: start {start} and length {length} out of range for dim {d} "
                         f"of size {n} (shape {tuple(x.shape)})")
    return x[(slice(None),) * d + (slice(st, st + int(length)),)]


narrow_copy = narrow


def _diag_positions(shape, offset, a, b):
    """Flat positions of the diagonal `offset` of axes (a, b), diagonal last, others in order."""
    pos = c.positions(shape)
    if min(shape[a], shape[b]) == 0 or offset >= shape[b] or -offset >= shape[a]:
        rest = [n for i, n in enumerate(shape) if i not in (a, b)]
        return np.zeros(rest + [0], np.int64)
    return np.diagonal(pos, offset, a, b)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """torch.diagonal: a view of x (Tensor.diagonal), so a write into it reaches x."""
    x = c.tensor("diagonal", input)
    a, b = c.dim("diagonal", dim1, x.ndim), c.dim("diagonal", dim2, x.ndim)
    if a == b or x.ndim < 2:
        raise ValueError(f"diagonal: dim1 {dim1} and dim2 {dim2} must be two different axes "
                         f"of shape {tuple(x.shape)}")
    return _views.diagonal(x, int(offset), a, b)


def trace(input):
    x = c.tensor("trace", input)
    if x.ndim != 2:
        raise ValueError(f"trace: expected a matrix, got shape {tuple(x.shape)}")
    return diagonal(x).sum()


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Each last-axis vector of input placed on the diagonal `offset` of a new (dim1, dim2)
    plane (zeros elsewhere)."""
    x = c.tensor("diag_embed", input)
    n = x.ndim + 1
    a, b = c.dim("diag_embed", dim1, n), c.dim("diag_embed", dim2, n)
    if a == b:
        raise ValueError(f"diag_embed: dim1 {dim1} and dim2 {dim2} must differ")
    k = x.shape[-1] if x.ndim else 1
    m = k + abs(int(offset))
    rest = list(x.shape[:-1])
    out_shape = [0] * n
    it = iter(rest)
    for i in range(n):
        out_shape[i] = m if i in (a, b) else next(it)
    zeros = x.session.tensor(np.zeros(out_shape, np.float32))
    at = _diag_positions(tuple(out_shape), int(offset), a, b)
    return c.embed(zeros, x.reshape(at.shape), at)


def diag(input, diagonal=0):
    x = c.tensor("diag", input)
    if x.ndim == 1:
        return diag_embed(x, diagonal, 0, 1)
    if x.ndim == 2:
        return globals()["diagonal"](x, diagonal)
    raise ValueError(f"diag: expected a 1-D or 2-D tensor, got shape {tuple(x.shape)}")


def diagflat(input, offset=0):
    x = c.tensor("diagflat", input)
    return diag_embed(x.reshape(-1), offset, 0, 1)


def repeat(input, *sizes):
    x = c.tensor("repeat", input)
    reps = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) else sizes
    reps = tuple(int(r) for r in reps)
    if len(reps) < x.ndim or any(r < 0 for r in reps):
        raise ValueError(f"repeat: need at least {x.ndim} non-negative repeats for shape "
                         f"{tuple(x.shape)}, got {reps}")
    pos = c.positions((1,) * (len(reps) - x.ndim) + tuple(x.shape))
    return c.rearrange(x, np.tile(pos, reps))


def tile(input, dims):
    x = c.tensor("tile", input)
    reps = tuple(int(r) for r in (dims if isinstance(dims, (list, tuple)) else (dims,)))
    return repeat(x, (1,) * (x.ndim - len(reps)) + reps)


def repeat_interleave(input, repeats, dim=None, *, output_size=None):
    x = c.tensor("repeat_interleave", input)
    r = np.asarray(repeats.numpy() if hasattr(repeats, "numpy") else repeats)
    if r.dtype.kind not in "iu" or r.ndim > 1 or (r < 0).any():
        raise ValueError(f"repeat_interleave: repeats must be a non-negative int or 1-D int "
                         f"tensor, got {r!r}")
    pos = c.positions(x.shape) if dim is not None else c.positions((math.prod(x.shape),))
    d = 0 if dim is None else c.dim("repeat_interleave", dim, x.ndim)
    if x.ndim == 0 and dim is not None:
        pos = pos.reshape(1)
    if r.ndim == 1 and r.size not in (1, pos.shape[d]):
        raise ValueError(f"repeat_interleave: {r.size} repeats for dim {d} of size "
                         f"{pos.shape[d]}")
    out = np.repeat(pos, r.reshape(-1) if r.ndim == 1 and r.size > 1 else int(r.reshape(-1)[0]),
                    axis=d)
    if output_size is not None and out.shape[d] != int(output_size):
        raise ValueError(f"repeat_interleave: output_size {output_size} differs from the "
                         f"{out.shape[d]} repeated elements")
    return c.rearrange(x, out)


def unflatten(input, dim, sizes):
    x = c.tensor("unflatten", input)
    d = c.dim("unflatten", dim, x.ndim)
    shape = tuple(x.shape)
    sizes = tuple(int(v) for v in sizes)
    known = math.prod(v for v in sizes if v != -1)
    if sizes.count(-1) > 1 or (sizes.count(-1) == 0 and known != shape[d]) or \
            (sizes.count(-1) == 1 and (known == 0 or shape[d] % known)):
        raise ValueError(f"unflatten: sizes {sizes} do not multiply to the size {shape[d]} of "
                         f"dim {d} (shape {shape})")
    return x.reshape(shape[:d] + sizes + shape[d + 1:])


def ravel(input):
    return c.tensor("ravel", input).reshape(-1)


def expand_as(input, other):
    return c.tensor("expand_as", input).expand(tuple(other.shape))


def reshape_as(input, other):
    return c.tensor("reshape_as", input).reshape(tuple(other.shape))


def unfold(input, dimension, size, step):
    """Tensor.unfold: every window of `size` along `dimension` (start 0, step, ...) as a new
    last axis."""
    x = c.tensor("unfold", input)
    d = c.dim("unfold", dimension, x.ndim)
    n = x.shape[d] if x.ndim else 1
    if size < 0 or size > n or step <= 0:
        raise ValueError(f"unfold: size {size} must be in [0, {n}] and step {step} positive "
                         f"(dim {d} of shape {tuple(x.shape)})")
    pos = c.positions(x.shape).reshape(x.shape if x.ndim else (1,))
    starts = np.arange(0, n - size + 1, step)
    win = np.take(pos, starts[:, None] + np.arange(size)[None, :], axis=d)   # d -> (k, size)
    return c.rearrange(x, np.moveaxis(win, d + 1, -1) if x.ndim else win.reshape(-1, size)[0])


def _scatter_into(op, input, src, at):
    x, s = c.tensor(op, input), c.tensor(op, src, "src")
    if tuple(s.shape) != at.shape:
        raise RuntimeError(f"{op}: expected src of shape {at.shape}, got {tuple(s.shape)} "
                           f"(input shape {tuple(x.shape)})")
    return c.embed(x, s, at)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    x = c.tensor("slice_scatter", input)
    d = c.dim("slice_scatter", dim, x.ndim)
    at = c.positions(x.shape)[(slice(None),) * d + (slice(start, end, step),)]
    return _scatter_into("slice_scatter", x, src, at)


def select_scatter(input, src, dim, index):
    x = c.tensor("select_scatter", input)
    d = c.dim("select_scatter", dim, x.ndim)
    n = x.shape[d]
    if not -n <= int(index) < n:
        raise IndexError(f"select_scatter: index {index} out of range for dim {d} of size {n}")
    at = np.take(c.positions(x.shape), int(index) % n, axis=d)
    return _scatter_into("select_scatter", x, src, at)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    x = c.tensor("diagonal_scatter", input)
    a, b = c.dim("diagonal_scatter", dim1, x.ndim), c.dim("diagonal_scatter", dim2, x.ndim)
    if a == b:
        raise ValueError(f"diagonal_scatter: dim1 {dim1} and dim2 {dim2} must differ")
    return _scatter_into("diagonal_scatter", x, src,
                         _diag_positions(tuple(x.shape), int(offset), a, b))


def _H(self):
    if self.ndim not in (0, 2):
        raise ValueError(f"H: expected a matrix or a 0-d tensor, got shape {tuple(self.shape)}")
    return self.t() if self.ndim == 2 else self


def _mH(self):
    return composite.transpose(self, -2, -1)


H = property(_H, doc="The conjugate transpose of a matrix (the transpose: torchlean is real).")
mH = property(_mH, doc="The conjugate transpose of the last two axes (real: mT).")
