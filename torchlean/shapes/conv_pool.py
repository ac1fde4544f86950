"""Convolution and pooling geometry.

Inputs are (C, spatial...) or (N, C, spatial...); a missing batch axis is N = 1. Kernels get
one flat i64 "geometry" array:
    [r, N, C_in, C_out, in_1..in_r, k_1..k_r, out_1..out_r, s_1..s_r, p_1..p_r]
(pools use C_in = C_out = C). Output sizes follow the seed (inventory 1.3 / 10.9).
"""
from __future__ import annotations

from .core import ShapeError


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


def _grouped_parts(kernel, bias, x, stride, padding, dilation, groups):
    """Checked pieces of a grouped, dilated convolution (conv_grouped): 1..3 spatial axes."""
    r = len(kernel) - 2
    if not 1 <= r <= 3:
        raise ShapeError(f"kernel must be (C_out, C_in / groups, k...) with 1..3 spatial axes, got "
                         f"shape {tuple(kernel)}")
    n, c, sp = _split_batch(x, r)
    g = int(groups)
    cout, cin_g = kernel[0], kernel[1]
    if g < 1 or cout % g or c % g or cin_g * g != c:
        raise ShapeError(f"groups={groups} needs C_in ({c}) and C_out ({cout}) divisible by it and "
                         f"kernel.shape[1] == C_in / groups, got kernel {tuple(kernel)}")
    if bias is not None and tuple(bias) != (cout,):
        raise ShapeError(f"bias must have shape ({cout},) (C_out), got {tuple(bias)}")
    s, p = _strides_pads(stride, padding, r)
    d = _per_axis(dilation, r, "dilation")
    if any(e < 1 for e in d):
        raise ShapeError(f"dilation must be >= 1 on every axis, got {dilation!r}")
    k = tuple(kernel[2:])
    span = tuple(dd * (kk - 1) + 1 if kk else 0 for dd, kk in zip(d, k))
    _window_fits("dilated kernel", sp, span, p)
    out = tuple(conv_size(i, kk, ss, pp) for i, kk, ss, pp in zip(sp, span, s, p))
    return r, n, c, cout, sp, k, out, s, p, d, g


def conv_grouped_out(kernel, bias, x, stride, padding, dilation, groups):
    """Output shape of conv_grouped: (N, C_out, out...) or (C_out, out...)."""
    r, n, c, cout, sp, k, out, s, p, d, g = _grouped_parts(kernel, bias, x, stride, padding,
                                                          dilation, groups)
    return ((n,) if n is not None else ()) + (cout,) + out


def conv_grouped_geom(kernel, x, stride, padding, dilation, groups):
    """The geometry of one group (C_in / groups inputs, C_out / groups outputs): the kernels
    add the group offsets themselves."""
    r, n, c, cout, sp, k, out, s, p, d, g = _grouped_parts(kernel, None, x, stride, padding,
                                                          dilation, groups)
    return (r, 1 if n is None else n, c // g, cout // g) + sp + k + out + s + p


def conv_dilation3(kernel, dilation):
    """The dilation per spatial axis, padded with 1 to three axes."""
    r = len(kernel) - 2
    return _per_axis(dilation, r, "dilation") + (1,) * (3 - r)


def conv_grouped_grad(kernel, x, g, stride, padding, dilation, groups):
    """Kernel shape for conv_grouped_backward; g must have the output shape."""
    want = conv_grouped_out(kernel, None, x, stride, padding, dilation, groups)
    if tuple(g) != want:
        raise ShapeError(f"grad must have the output shape {want}, got {tuple(g)}")
    return tuple(kernel)
