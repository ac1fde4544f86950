"""torch.nn.functional's interpolate and the 1-D / 3-D pooling forms, composed from registry
ops: nearest sampling is one gather_vec (VJP: scatter-add), (bi/tri)linear sampling is one
interpolation matrix per axis applied with linear (GEMMs), 1-D pooling is 2-D pooling over a
height-1 plane, 3-D pooling the registry's N-D pool ops with torch's ceil_mode and divisor
rules."""
from __future__ import annotations

import math

import numpy as np

from torchlean.nn import functional_core as F
from torchlean.nn.functional_base import pad_after, per_axis, session_of
from torchlean.nn.functional_pool2d import avg_divisors, pool_out_size
from torchlean.nn.arg_checks import check_numel, int_arg, int_tuple

_LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3}


# ---------------------------------------------------------------------------- pooling

def _as_plane(op, x):
    if x.ndim not in (2, 3):
        raise ValueError(f"{op}: expected input (N, C, L) or (C, L), got {tuple(x.shape)}")
    return x.unsqueeze(-2)


def _one(v, op, what):
    t = (int(v),) if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)
    if len(t) != 1:
        raise ValueError(f"{op}: {what} must be an int or 1 int, got {v!r}")
    return t[0]


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """torch's max_pool1d on (N, C, L) or (C, L): max_pool2d over a (1, L) plane."""
    op = "max_pool1d"
    x = _as_plane(op, session_of(input).as_tensor(input))
    k = _one(kernel_size, op, "kernel_size")
    st = k if stride is None or stride == () else _one(stride, op, "stride")
    r = F.max_pool2d(x, (1, k), (1, st), (0, _one(padding, op, "padding")),
                     (1, _one(dilation, op, "dilation")), ceil_mode, return_indices)
    if return_indices:
        return r[0].squeeze(-2), r[1][..., 0, :]
    return r.squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """torch's avg_pool1d on (N, C, L) or (C, L): avg_pool2d over a (1, L) plane."""
    op = "avg_pool1d"
    x = _as_plane(op, session_of(input).as_tensor(input))
    k = _one(kernel_size, op, "kernel_size")
    st = k if stride is None or stride == () else _one(stride, op, "stride")
    return F.avg_pool2d(x, (1, k), (1, st), (0, _one(padding, op, "padding")), ceil_mode,
                        count_include_pad).squeeze(-2)


def adaptive_avg_pool1d(input, output_size):
    """torch's adaptive_avg_pool1d on (N, C, L) or (C, L): the 2-D form over a (1, L) plane."""
    op = "adaptive_avg_pool1d"
    x = _as_plane(op, session_of(input).as_tensor(input))
    return F.adaptive_avg_pool2d(x, (1, _one(output_size, op, "output_size"))).squeeze(-2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """torch's adaptive_max_pool1d on (N, C, L) or (C, L): the 2-D form over a (1, L) plane;
    return_indices also gives int64 positions along L."""
    op = "adaptive_max_pool1d"
    x = _as_plane(op, session_of(input).as_tensor(input))
    r = F.adaptive_max_pool2d(x, (1, _one(output_size, op, "output_size")), return_indices)
    if return_indices:
        return r[0].squeeze(-2), r[1][..., 0, :]
    return r.squeeze(-2)


def _pool3d_args(op, input, kernel_size, stride, padding, ceil_mode):
    s = session_of(input)
    x = s.as_tensor(input)
    if x.ndim not in (4, 5):
        raise ValueError(f"{op}: expected input (N, C, D, H, W) or (C, D, H, W), got "
                         f"{tuple(x.shape)}")
    k = per_axis(kernel_size, 3, "kernel_size", op)
    st = k if stride is None or stride == () else per_axis(stride, 3, "stride", op)
    p = per_axis(padding, 3, "padding", op)
    sizes = [pool_out_size(op, n, a, b, c, 1, ceil_mode)
             for n, a, b, c in zip(x.shape[-3:], k, st, p)]
    return s, x, k, st, p, tuple(o for o, _ in sizes), tuple(e for _, e in sizes)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """torch's max_pool3d: the registry N-D max_pool (padding reads -inf); ceil_mode appends
    -inf cells at the end of each axis. dilation and return_indices are not supported."""
    op = "max_pool3d"
    if per_axis(dilation, 3, "dilation", op) != (1, 1, 1) or return_indices:
        raise NotImplementedError(f"{op}: dilation other than 1 and return_indices are not "
                                  "supported")
    s, x, k, st, p, _, extra = _pool3d_args(op, input, kernel_size, stride, padding, ceil_mode)
    return s.op("max_pool", pad_after(x, extra, -np.inf), kernel_size=k, stride=st, padding=p)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """torch's avg_pool3d: the registry N-D avg_pool (window sum / kernel volume), rescaled on
    the host where torch's divisor differs (ceil_mode windows, count_include_pad=False,
    divisor_override)."""
    op = "avg_pool3d"
    s, x, k, st, p, out, extra = _pool3d_args(op, input, kernel_size, stride, padding, ceil_mode)
    y = s.op("avg_pool", pad_after(x, extra, 0.0), kernel_size=k, stride=st, padding=p)
    vol = math.prod(k)
    if divisor_override is not None:
        if int(divisor_override) < 1:
            raise ValueError(f"{op}: divisor_override must be >= 1, got {divisor_override}")
        return y * (vol / float(divisor_override))
    divs = [avg_divisors(n, a, b, c, o, count_include_pad)
            for n, a, b, c, o in zip(x.shape[-3:], k, st, p, out)]
    factor = vol / np.einsum("i,j,k->ijk", *divs)
    if np.all(factor == 1.0):
        return y
    return y * s.tensor(factor.astype(np.float32))


# ---------------------------------------------------------------------------- interpolate

def _output_sizes(op, shp, rank, size, scale_factor):
    """torch's output sizes and the per-axis source scales as torch computes them in float32:
    in / out, or 1 / scale_factor when a scale factor is given."""
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: give exactly one of size and scale_factor")
    ins = shp[-rank:]
    if size is not None:
        outs = (int_arg(op, "size", size),) * rank if not hasattr(size, "__iter__") else \
            int_tuple(op, "size", size)
        if len(outs) != rank:
            raise ValueError(f"{op}: size must be an int or {rank} ints for input {shp}, got "
                             f"{size!r}")
        scales = tuple(np.float32(i) / np.float32(o) for i, o in zip(ins, outs))
    else:
        sf = (float(scale_factor),) * rank if np.ndim(scale_factor) == 0 else \
            tuple(float(v) for v in scale_factor)
        if len(sf) != rank or any(not (v > 0 and math.isfinite(v)) for v in sf):
            raise ValueError(f"{op}: scale_factor must be a positive finite number or {rank} of "
                             f"them, got {scale_factor!r}")
        outs = tuple(int(math.floor(i * f)) for i, f in zip(ins, sf))
        scales = tuple(np.float32(1.0 / f) for f in sf)
    if any(o < 1 for o in outs):
        raise ValueError(f"{op}: output size {outs} for input {shp} must be positive")
    check_numel(op, "output", tuple(shp[:-rank]) + outs)
    return outs, scales


def _nearest_index(n_in, n_out, scale, exact):
    """torch's source index, in float32 as torch computes it: floor(dst * scale), or
    floor((dst + 0.5) * scale) for nearest-exact, clipped to the input."""
    dst = np.arange(n_out, dtype=np.float32)
    if exact:
        dst = dst + np.float32(0.5)
    src = np.floor(dst * np.float32(scale))
    return np.minimum(src.astype(np.int64), n_in - 1)


def _linear_matrix(n_in, n_out, scale, align_corners):
    """(n_out, n_in) interpolation matrix: row j holds the two weights of output j."""
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    else:
        src = np.maximum((dst + 0.5) * scale - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    l1 = src - i0
    a = np.zeros((n_out, n_in))
    np.add.at(a, (np.arange(n_out), i0), 1.0 - l1)
    np.add.at(a, (np.arange(n_out), i1), l1)
    return a.astype(np.float32)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """torch's interpolate for (N, C, spatial...) input with 1 to 3 spatial axes: 'nearest'
    and 'nearest-exact' (a gather), 'linear' / 'bilinear' / 'trilinear' with align_corners
    (one interpolation matrix per axis, applied last axis first)."""
    op = "interpolate"
    s = session_of(input)
    x = s.as_tensor(input)
    shp = tuple(x.shape)
    rank = x.ndim - 2
    if not 1 <= rank <= 3:
        raise ValueError(f"{op}: expected input (N, C, L), (N, C, H, W) or (N, C, D, H, W), "
                         f"got {shp}")
    if antialias:
        raise NotImplementedError(f"{op}: antialias=True is not supported")
    linear = mode in _LINEAR_MODES
    if linear and _LINEAR_MODES[mode] != rank:
        raise ValueError(f"{op}: mode {mode!r} needs {_LINEAR_MODES[mode] + 2}-D input, got "
                         f"{shp}")
    if not linear and mode not in ("nearest", "nearest-exact"):
        raise NotImplementedError(f"{op}: mode {mode!r} is not supported (nearest, "
                                  "nearest-exact, linear, bilinear, trilinear)")
    if align_corners is not None and not linear:
        raise ValueError(f"{op}: align_corners may only be set with the linear modes, got "
                         f"mode {mode!r}")
    if recompute_scale_factor and scale_factor is not None:
        size, scale_factor = _output_sizes(op, shp, rank, None, scale_factor)[0], None
    outs, scales = _output_sizes(op, shp, rank, size, scale_factor)
    ins = shp[-rank:]
    if not linear:
        idx = [_nearest_index(i, o, sc, mode == "nearest-exact")
               for i, o, sc in zip(ins, outs, scales)]
        if all(o % i == 0 and np.array_equal(ix, np.arange(o) // (o // i))
               for i, o, ix in zip(ins, outs, idx)):
            return _repeat(x, ins, outs)
        plane = np.zeros((1,) * rank, np.int64)
        for a, (ix, n) in enumerate(zip(idx, ins)):
            plane = plane * n + ix.reshape((1,) * a + (-1,) + (1,) * (rank - a - 1))
        planes = math.prod(shp[:2])
        flat = np.arange(planes, dtype=np.int64).reshape(-1, *(1,) * rank) * math.prod(ins) + plane
        y = s.op("gather_vec", x.reshape(-1), indices=flat.reshape(-1))
        return y.reshape(shp[:2] + outs)
    y = x
    for a in range(rank - 1, -1, -1):           # last axis first; each axis moved last
        axis = 2 + a
        m = s.tensor(_linear_matrix(ins[a], outs[a], scales[a], bool(align_corners)))
        if axis == x.ndim - 1:
            y = F.linear(y, m)
        else:
            y = F.linear(y.transpose(axis, -1), m).transpose(axis, -1)
    return y


def _repeat(x, ins, outs):
    """Whole-number nearest upsampling: each input cell repeated out / in times per axis, as a
    broadcast (VJP: a sum) between two reshapes, no index array."""
    lead = tuple(x.shape[:2])
    split = lead + tuple(v for n in ins for v in (n, 1))
    rep = lead + tuple(v for n, o in zip(ins, outs) for v in (n, o // n))
    return x.reshape(split).expand(*rep).reshape(lead + tuple(outs))


upsample = interpolate
