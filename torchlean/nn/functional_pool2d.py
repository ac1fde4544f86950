"""torch's 2-D max and average pooling (plain, strided, padded, dilated, ceil_mode, with
indices, adaptive max): the registry's pooling kernels where they give torch's answer, and
gathered windows where they do not. adaptive_avg_pool2d lives beside linear in
functional_core: off the kernels' sizes it is two averaging matrices applied by linear."""
from __future__ import annotations

import math

import numpy as np

from torchlean.nn.functional_base import pad_after, per_axis, session_of


def _pool_input(op, input):
    s = session_of(input)
    x = s.as_tensor(input)
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}: expected input (N, C, H, W) or (C, H, W), got {x.shape}")
    return s, x


def pool_out_size(op, n, k, st, p, d, ceil_mode):
    """torch's pooling output length along one axis and the extra cells the registry op needs
    past the right padding so that its floor rule gives that length (ceil_mode)."""
    ke = d * (k - 1) + 1
    if k < 1 or st < 1 or d < 1 or p < 0:
        raise ValueError(f"{op}: kernel_size, stride and dilation must be >= 1 and padding >= 0, "
                         f"got kernel {k}, stride {st}, padding {p}, dilation {d}")
    if p > k // 2:
        raise ValueError(f"{op}: padding {p} must be at most half the kernel size {k}")
    span = n + 2 * p - ke
    if span < 0:
        raise ValueError(f"{op}: the window ({ke}) is larger than the padded input ({n + 2 * p})")
    out = (-(-span // st) if ceil_mode else span // st) + 1
    if ceil_mode and (out - 1) * st >= n + p:
        out -= 1                    # the last window must start inside the input or left pad
    return out, max(0, (out - 1) * st + ke - (n + 2 * p))


def _window_taps(n, k, st, p, d, out):
    """(out, k) input positions of each window's taps along one axis, -1 where a tap lies in
    the padding."""
    pos = np.arange(out)[:, None] * st - p + np.arange(k)[None, :] * d
    return np.where((pos >= 0) & (pos < n), pos, -1)


def _adaptive_taps(n, out):
    """(out, kmax) taps of torch's adaptive windows [floor(i n / out), ceil((i + 1) n / out)),
    -1 past a window's end."""
    lo = (np.arange(out) * n) // out
    hi = -((-(np.arange(out) + 1) * n) // out)
    kmax = int((hi - lo).max())
    pos = lo[:, None] + np.arange(kmax)[None, :]
    return np.where(pos < hi[:, None], pos, -1)


def _plane_windows(th, tw, w):
    """(oh, ow, kh * kw) flat plane indices (h * W + w) of each 2-D window, taps in row-major
    order; taps in the padding repeat the window's first real tap, which changes neither the
    max nor which index is the first maximum."""
    hh, ww = th[:, None, :, None], tw[None, :, None, :]
    idx = np.where((hh >= 0) & (ww >= 0), hh * w + ww, -1)
    idx = idx.reshape(th.shape[0], tw.shape[0], -1)
    first = np.take_along_axis(idx, np.argmax(idx >= 0, axis=-1)[..., None], axis=-1)
    return np.where(idx >= 0, idx, first).astype(np.int64)


def _max_over_windows(s, x, win):
    """max over gathered windows: gather_vec (VJP scatter-add) then amax over the taps."""
    shp = tuple(x.shape)
    planes, hw = math.prod(shp[:-2]), shp[-2] * shp[-1]
    idx = (np.arange(planes, dtype=np.int64)[:, None, None, None] * hw + win[None])
    g = s.op("gather_vec", x.reshape(-1), indices=idx.reshape(-1))
    y = g.reshape(planes, win.shape[0], win.shape[1], win.shape[2]).amax(dim=-1)
    return y.reshape(shp[:-2] + win.shape[:2])


def _first_max_indices(x, y, win):
    """torch's return_indices: per output the flat plane index (h * W + w) of the first window
    entry (row-major) equal to the max (NaN matches NaN), as int64."""
    xs = np.asarray(x.numpy())
    planes = xs.reshape(-1, xs.shape[-2] * xs.shape[-1])
    yv = np.asarray(y.numpy()).reshape(planes.shape[0], win.shape[0], win.shape[1], 1)
    vals = planes[:, win]                                      # (planes, oh, ow, taps)
    hit = (vals == yv) | (np.isnan(vals) & np.isnan(yv))
    first = np.argmax(hit, axis=-1)
    out = np.broadcast_to(win, vals.shape)
    out = np.take_along_axis(out, first[..., None], axis=-1)[..., 0]
    return out.reshape(xs.shape[:-2] + win.shape[:2]).astype(np.int64)


def _pair(v, op, what):
    return per_axis(v, 2, what, op)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """torch's max_pool2d for (N, C, H, W) or (C, H, W). Plain and ceil_mode pooling run the
    registry max_pool2d (ceil_mode appends -inf cells on the right/bottom); dilation gathers the
    windows (taps in the padding repeat a real tap) and takes amax. return_indices also returns
    an int64 NumPy array of flat per-plane indices (h * W + w) of the first (row-major) maximum
    of each window, as torch's indices for distinct values. The gradient goes to the maximum
    (the registry kernel's first one; on the gathered path tied maxima share it, amax's rule)."""
    op = "max_pool2d"
    s, x = _pool_input(op, input)
    k = _pair(kernel_size, op, "kernel_size")
    st = k if stride is None or stride == () else _pair(stride, op, "stride")
    p, d = _pair(padding, op, "padding"), _pair(dilation, op, "dilation")
    h, w = x.shape[-2:]
    (oh, eh), (ow, ew) = (pool_out_size(op, n, *a, ceil_mode)
                          for n, a in zip((h, w), zip(k, st, p, d)))
    win = None
    if d == (1, 1):
        y = s.op("max_pool2d", pad_after(x, (eh, ew), -np.inf), kernel_size=k, stride=st,
                 padding=p)
    else:
        win = _plane_windows(_window_taps(h, k[0], st[0], p[0], d[0], oh),
                             _window_taps(w, k[1], st[1], p[1], d[1], ow), w)
        y = _max_over_windows(s, x, win)
    if not return_indices:
        return y
    if win is None:
        win = _plane_windows(_window_taps(h, k[0], st[0], p[0], 1, oh),
                             _window_taps(w, k[1], st[1], p[1], 1, ow), w)
    return y, _first_max_indices(x, y, win)


def avg_divisors(n, k, st, p, out, count_include_pad):
    """torch's avg-pool divisor along one axis: the window clipped to the padded input
    (count_include_pad) or to the input itself."""
    lo = np.arange(out) * st - p
    hi = np.minimum(lo + k, n + p)
    if count_include_pad:
        return (hi - lo).astype(np.float64)
    return (np.minimum(hi, n) - np.maximum(lo, 0)).astype(np.float64)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """torch's avg_pool2d for (N, C, H, W) or (C, H, W): the registry avg_pool2d (window sum /
    kh kw, zero padding) rescaled by a per-window factor computed on the host where torch's
    divisor differs (ceil_mode windows past the padding, count_include_pad=False,
    divisor_override); ceil_mode appends zero cells on the right/bottom."""
    op = "avg_pool2d"
    s, x = _pool_input(op, input)
    k = _pair(kernel_size, op, "kernel_size")
    st = k if stride is None or stride == () else _pair(stride, op, "stride")
    p = _pair(padding, op, "padding")
    h, w = x.shape[-2:]
    (oh, eh), (ow, ew) = (pool_out_size(op, n, *a, 1, ceil_mode)
                          for n, a in zip((h, w), zip(k, st, p)))
    y = s.op("avg_pool2d", pad_after(x, (eh, ew), 0.0), kernel_size=k, stride=st, padding=p)
    if divisor_override is not None:
        if int(divisor_override) < 1:
            raise ValueError(f"{op}: divisor_override must be >= 1, got {divisor_override}")
        return y * (k[0] * k[1] / float(divisor_override))
    div = np.outer(avg_divisors(h, k[0], st[0], p[0], oh, count_include_pad),
                   avg_divisors(w, k[1], st[1], p[1], ow, count_include_pad))
    factor = k[0] * k[1] / div
    if np.all(factor == 1.0):
        return y
    return y * s.tensor(factor.astype(np.float32))


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """torch's adaptive_max_pool2d for (N, C, H, W) or (C, H, W): sizes that divide the input
    are max_pool2d with kernel = stride = input / output; other sizes gather torch's uneven
    windows and take amax. return_indices as max_pool2d."""
    op = "adaptive_max_pool2d"
    s, x = _pool_input(op, input)
    sizes = (output_size, output_size) if isinstance(output_size, (int, np.integer)) or \
        output_size is None else tuple(output_size)
    if len(sizes) != 2:
        raise ValueError(f"{op}: output_size must be an int or 2 sizes, got {output_size!r}")
    h, w = x.shape[-2:]
    oh, ow = (n if o is None else int(o) for o, n in zip(sizes, (h, w)))
    if oh < 1 or ow < 1 or h < 1 or w < 1:
        raise ValueError(f"{op}: output size {(oh, ow)} and input size {(h, w)} must be positive")
    if h % oh == 0 and w % ow == 0:
        return max_pool2d(x, (h // oh, w // ow), return_indices=return_indices)
    win = _plane_windows(_adaptive_taps(h, oh), _adaptive_taps(w, ow), w)
    y = _max_over_windows(s, x, win)
    return (y, _first_max_indices(x, y, win)) if return_indices else y
