"""torch.nn.functional's core forms (linear, convolutions, activations, dropout, layer norm,
adaptive average pooling); each dispatches to the session of its Tensor arguments. Attention
and 2-D max/average pooling have modules of their own, whose names this one hands on;
torchlean.nn.functional gathers these with the losses, padding and resampling."""
from __future__ import annotations

import math
import threading

import numpy as np

from torchlean.nn.functional_attention import (
    attention_core, causal_mask, fused_attention_fits, scaled_dot_product_attention,
    split_attention_mask)
from torchlean.nn.functional_base import pad_after, per_axis, session_of
from torchlean.nn.functional_pool2d import adaptive_max_pool2d, avg_pool2d, max_pool2d
from torchlean.parameter import Parameter
from torchlean.tape import is_grad_enabled
from torchlean.tensor import Tensor

_get_ident = threading.get_ident

# the names the rest of nn imports from here
__all__ = ["linear", "dropout", "dropout2d", "relu", "gelu", "softplus", "tanh", "sigmoid",
           "silu", "softmax", "log_softmax", "leaky_relu", "elu", "layer_norm", "conv_nd",
           "conv1d", "conv2d", "conv3d", "conv_transpose2d", "adaptive_avg_pool2d",
           "split_attention_mask", "causal_mask", "fused_attention_fits", "attention_core",
           "scaled_dot_product_attention", "max_pool2d", "avg_pool2d", "adaptive_max_pool2d"]


def linear(input, weight, bias=None):
    """y = input @ weight^T + bias (torch.nn.functional.linear) for input (..., in), weight
    (out, in), bias (out,) or None; returns (..., out).

    One fused registry `linear` op: leading axes are folded into rows by a reshape view (the op
    takes (in,) or (N, in)) and unfolded after; a missing bias is a zero (out,) constant."""
    if (input.__class__ is Tensor and weight.__class__ is Parameter
            and bias.__class__ is Parameter):
        # an nn.Linear's call: a Tensor input, the layer's parameters recorded as their leaves
        # (Session.leaf_of, what as_tensor would wrap), shapes read once; the same checks in
        # the same order, the same op
        s = input.session
        if input.gen != s.gen or _get_ident() != s.owner:
            input._check()   # raises
        xs = s.tape.nodes[input.id].value.shape
        wid, bid = s.leaf_of(weight), s.leaf_of(bias)
        ws, bs = weight._buf.shape, bias._buf.shape
        if len(xs) <= 2:
            if len(xs) < 1 or len(ws) != 2 or xs[-1] != ws[1] or bs != (ws[0],):
                raise ValueError(f"linear: expected input (..., in), weight (out, in) and bias "
                                 f"(out,) or None, got input {xs}, weight {ws}, bias {bs}")
            return s._op_ids("linear", (wid, bid, input.id))
    s = session_of(input, weight, bias)
    x, w = s.as_tensor(input), s.as_tensor(weight)
    b = None if bias is None else s.as_tensor(bias)
    if (x.ndim < 1 or w.ndim != 2 or x.shape[-1] != w.shape[1]
            or (b is not None and b.shape != (w.shape[0],))):
        raise ValueError(f"linear: expected input (..., in), weight (out, in) and bias (out,) or "
                         f"None, got input {x.shape}, weight {w.shape}, "
                         f"bias {None if b is None else b.shape}")
    if b is None:
        b = s.tensor(np.zeros(w.shape[0], np.float32))
    if x.ndim <= 2:
        return s.op("linear", w, b, x)
    lead = x.shape[:-1]
    y = s.op("linear", w, b, s.op("reshape", x, shape=(math.prod(lead), x.shape[-1])))
    return s.op("reshape", y, shape=lead + (w.shape[0],))


def dropout(x, p=0.5, training=True, inplace=False):
    return session_of(x).dropout(x, p, training)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """torch's dropout2d: each (sample, channel) plane of (N, C, H, W) input is zeroed with
    probability p and the rest scaled by 1 / (1 - p); one Bernoulli draw per plane, broadcast
    over it. A 3-D input is read as (N, C, L), as torch 2 does (channel-wise 1-D dropout)."""
    s = session_of(input)
    x = s.as_tensor(input)
    if x.ndim not in (3, 4):
        raise ValueError(f"dropout2d: expected input (N, C, H, W) or (N, C, L), got {x.shape}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout2d: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = 1.0 - p
    mask = s.bernoulli_mask(tuple(x.shape[:2]) + (1,) * (x.ndim - 2), keep)
    return x * mask * (1.0 / keep)


def relu(x, inplace=False):
    return session_of(x).op("relu", x)


_GELU_OPS = {"none": "gelu_erf", "tanh": "gelu"}


def gelu(x, approximate="none"):
    """torch's GELU: approximate="none" (the default) is the exact erf form, "tanh" the tanh
    approximation (the registry's gelu op)."""
    op = _GELU_OPS.get(approximate)
    if op is None:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return session_of(x).op(op, x)


def softplus(x, beta=1.0, threshold=20.0):
    """torch's softplus: log(1 + exp(beta x)) / beta, and x where beta x > threshold."""
    return session_of(x).op("softplus_beta", x, beta=float(beta), threshold=float(threshold))


def tanh(x):
    return session_of(x).op("tanh", x)


def sigmoid(x):
    return session_of(x).op("sigmoid", x)


def silu(input, inplace=False):
    """torch's SiLU (swish), x * sigmoid(x): the registry's silu op (`inplace` is accepted for
    torch's signature; torchlean has no in-place ops)."""
    return session_of(input).op("silu", input)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """softmax over `dim`; dim=None is the last axis here (torch's legacy rule for a missing
    dim picks axis 0 of a 1-D or 3-D input and axis 1 otherwise, with a warning)."""
    return session_of(input).as_tensor(input).softmax(-1 if dim is None else dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log_softmax over `dim` (dim=None: the last axis, see softmax)."""
    return session_of(input).as_tensor(input).log_softmax(-1 if dim is None else dim)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, negative_slope * x elsewhere: relu(x) - slope relu(-x)."""
    s = session_of(input)
    x = s.as_tensor(input)
    return s.op("relu", x) - s.op("relu", -x) * float(negative_slope)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, alpha (exp(x) - 1) elsewhere: relu(x) + alpha (exp(-relu(-x)) - 1)."""
    s = session_of(input)
    x = s.as_tensor(input)
    neg = -s.op("relu", -x)
    return s.op("relu", x) + (s.op("exp", neg) - 1.0) * float(alpha)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch's layer_norm over the trailing `normalized_shape` axes: one registry layer_norm
    over the folded trailing axes; weight / bias None are ones / zeros."""
    s = session_of(input, weight, bias)
    x = s.as_tensor(input)
    ns = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else \
        tuple(int(n) for n in normalized_shape)
    shp = tuple(x.shape)
    if not ns or len(shp) < len(ns) or shp[len(shp) - len(ns):] != ns:
        raise ValueError(f"layer_norm: expected input with trailing shape {ns}, got {shp}")
    d = math.prod(ns)
    for name, v in (("weight", weight), ("bias", bias)):
        if v is not None and tuple(np.shape(v)) != ns:
            raise ValueError(f"layer_norm: {name} must have shape {ns}, got {tuple(np.shape(v))}")
    w = s.tensor(np.ones(d, np.float32)) if weight is None else s.as_tensor(weight).reshape(d)
    b = s.tensor(np.zeros(d, np.float32)) if bias is None else s.as_tensor(bias).reshape(d)
    y = s.op("layer_norm", x.reshape(shp[:len(shp) - len(ns)] + (d,)), w, b, eps=float(eps))
    return y.reshape(shp)


# ---------------------------------------------------------------------------- convolution

_EXPAND_CACHE: dict = {}


def _expansion_indices(wshape, cin, groups, dilation):
    """Indices into the flat grouped kernel w (C_out, C_in / groups, k...) that build the dense
    kernel (C_out, C_in, d (k - 1) + 1, ...): entry (o, c, p) reads w[o, c - g(o) C_in/groups,
    p / d] when c is in o's group and every p_i is a multiple of d_i, else an out-of-range index,
    which gather_vec reads as 0 (and its VJP, a scatter-add, ignores)."""
    key = (tuple(wshape), cin, groups, dilation)
    idx = _EXPAND_CACHE.get(key)
    if idx is not None:
        return idx
    cout, cin_g, ks = wshape[0], wshape[1], tuple(wshape[2:])
    ke = tuple(d * (k - 1) + 1 for k, d in zip(ks, dilation))
    src = np.arange(math.prod(wshape), dtype=np.int64).reshape(wshape)
    o = np.arange(cout)[:, None]
    local = np.arange(cin)[None, :] - (o // (cout // groups)) * cin_g      # (C_out, C_in)
    inside = ((local >= 0) & (local < cin_g)).reshape((cout, cin) + (1,) * len(ks))
    picked = src[o, np.clip(local, 0, cin_g - 1)]                         # (C_out, C_in, k...)
    idx = np.full((cout, cin) + ke, src.size, dtype=np.int64)             # out of range: reads 0
    taps = tuple(slice(None, None, d) for d in dilation)
    idx[(slice(None), slice(None)) + taps] = np.where(inside, picked, src.size)
    if len(_EXPAND_CACHE) > 64:
        _EXPAND_CACHE.clear()
    _EXPAND_CACHE[key] = idx
    return idx


def conv_nd(rank, input, weight, bias, stride, padding, dilation, groups):
    op = f"conv{rank}d"
    s = session_of(input, weight, bias)
    x, w = s.as_tensor(input), s.as_tensor(weight)
    groups = int(groups)
    dil = per_axis(dilation, rank, "dilation", op)
    st = per_axis(stride, rank, "stride", op)
    if w.ndim != rank + 2 or x.ndim not in (rank + 1, rank + 2):
        raise ValueError(f"{op}: expected weight (C_out, C_in / groups, {rank} kernel sizes) and "
                         f"input (N, C_in, {rank} spatial) or (C_in, {rank} spatial), got weight "
                         f"{w.shape}, input {x.shape}")
    cin, cout = x.shape[-rank - 1], w.shape[0]
    if groups < 1 or cin % groups or cout % groups or w.shape[1] * groups != cin:
        raise ValueError(f"{op}: groups={groups} needs C_in ({cin}) and C_out ({cout}) divisible "
                         f"by it and weight.shape[1] == C_in / groups, got weight {w.shape}, "
                         f"input {x.shape}")
    if any(d < 1 for d in dil):
        raise ValueError(f"{op}: dilation must be >= 1, got {dilation!r}")
    ke = tuple(d * (k - 1) + 1 for k, d in zip(w.shape[2:], dil))
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if any(v != 1 for v in st) or any(k % 2 == 0 for k in ke):
                raise NotImplementedError(f"{op}: padding='same' needs stride 1 and odd dilated "
                                          f"kernel sizes here, got {ke}, stride {st}")
            padding = tuple(k // 2 for k in ke)
        else:
            raise ValueError(f"{op}: padding must be an int, a tuple, 'valid' or 'same', got "
                             f"{padding!r}")
    b = s.tensor(np.zeros(cout, np.float32)) if bias is None else s.as_tensor(bias)
    pad = per_axis(padding, rank, "padding", op)
    if groups != 1 or any(d != 1 for d in dil):
        if rank <= 3:   # direct grouped kernels: no dense, groups-fold wider kernel
            return s.op("conv_grouped", w, b, x, stride=st, padding=pad, dilation=dil,
                        groups=groups)
        w = s.op("gather_vec", s.op("reshape", w, shape=(-1,)),
                 indices=_expansion_indices(tuple(w.shape), cin, groups, dil))
    return s.op("conv", w, b, x, stride=st, padding=pad)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch's conv1d. groups and dilation run the registry's conv_grouped (direct kernels over
    each group's channels, depthwise included); with groups = 1 and dilation 1 its bits are the
    dense conv's."""
    return conv_nd(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch's conv2d (see conv1d for how groups and dilation are computed)."""
    return conv_nd(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch's conv3d (see conv1d for how groups and dilation are computed)."""
    return conv_nd(3, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch's conv_transpose2d (groups=1, dilation=1) for weight (C_in, C_out, kh, kw):
    out = (in - 1) stride - 2 padding + k + output_padding. output_padding runs the registry
    conv_transpose2d unpadded and without bias, keeps rows/cols [padding, padding + out) (cells
    past the full result are zero), then adds the bias."""
    op = "conv_transpose2d"
    s = session_of(input, weight, bias)
    x, w = s.as_tensor(input), s.as_tensor(weight)
    if int(groups) != 1 or per_axis(dilation, 2, "dilation", op) != (1, 1):
        raise NotImplementedError(f"{op}: groups and dilation other than 1 are not supported")
    st, p = per_axis(stride, 2, "stride", op), per_axis(padding, 2, "padding", op)
    op_pad = per_axis(output_padding, 2, "output_padding", op)
    if w.ndim != 4 or x.ndim not in (3, 4) or x.shape[-3] != w.shape[0]:
        raise ValueError(f"{op}: expected weight (C_in, C_out, kh, kw) and input (N, C_in, H, W) "
                         f"or (C_in, H, W), got weight {w.shape}, input {x.shape}")
    if any(o < 0 or o >= a for o, a in zip(op_pad, st)):
        raise ValueError(f"{op}: output_padding {op_pad} must be >= 0 and smaller than the "
                         f"stride {st}")
    b = s.tensor(np.zeros(w.shape[1], np.float32)) if bias is None else s.as_tensor(bias)
    if op_pad == (0, 0):
        return s.op("conv_transpose2d", w, b, x, stride=st, padding=p)
    full = s.op("conv_transpose2d", w, s.tensor(np.zeros(w.shape[1], np.float32)), x,
                stride=st, padding=(0, 0))
    fh, fw = full.shape[-2:]
    out = tuple(f - 2 * a + o for f, a, o in zip((fh, fw), p, op_pad))
    if any(n < 1 for n in out):
        raise ValueError(f"{op}: output size {out} for input {x.shape}, weight {w.shape}, "
                         f"stride {st}, padding {p}, output_padding {op_pad} is not positive")
    y = full[..., p[0]:p[0] + out[0], p[1]:p[1] + out[1]]
    y = pad_after(y, tuple(n - m for n, m in zip(out, y.shape[-2:])), 0.0)
    return y + b.reshape(-1, 1, 1)


# ---------------------------------------------------------------------------- adaptive pooling

def _adaptive_weights(n_in, n_out):
    """(n_out, n_in) averaging matrix of torch's adaptive windows [floor(i n_in / n_out),
    ceil((i + 1) n_in / n_out))."""
    a = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        lo, hi = (i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)
        a[i, lo:hi] = 1.0 / (hi - lo)
    return a.astype(np.float32)


def adaptive_avg_pool2d(input, output_size):
    """torch's adaptive_avg_pool2d for (N, C, H, W) or (C, H, W). Sizes that divide the input
    are avg_pool2d with kernel = stride = input / output and (1, 1) is a mean; other sizes have
    uneven, overlapping windows, computed as two averaging matrices, one per spatial axis
    (linear over W, then over H): each output is the window mean."""
    s = session_of(input)
    x = s.as_tensor(input)
    shp = tuple(x.shape)
    if len(shp) not in (3, 4):
        raise ValueError(f"adaptive_avg_pool2d: expected input (N, C, H, W) or (C, H, W), "
                         f"got {shp}")
    sizes = (output_size, output_size) if isinstance(output_size, (int, np.integer)) or \
        output_size is None else tuple(output_size)
    if len(sizes) != 2:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be an int or 2 sizes, got "
                         f"{output_size!r}")
    h, w = shp[-2:]
    oh, ow = (n if o is None else int(o) for o, n in zip(sizes, (h, w)))
    if oh < 1 or ow < 1 or h < 1 or w < 1:
        raise ValueError(f"adaptive_avg_pool2d: output size {(oh, ow)} and input size {(h, w)} "
                         "must be positive")
    if (oh, ow) == (h, w):   # torch's result is a new tensor: under no_grad it needs no grad
        return x if is_grad_enabled() else x.detach()
    if (oh, ow) == (1, 1):
        return x.mean(dim=(-2, -1), keepdim=True)
    if h % oh == 0 and w % ow == 0:
        k = (h // oh, w // ow)
        return s.op("avg_pool2d", x, kernel_size=k, stride=k, padding=0)
    y = linear(x, s.tensor(_adaptive_weights(w, ow)))                 # (..., H, ow)
    y = linear(y.transpose(-2, -1), s.tensor(_adaptive_weights(h, oh)))  # (..., ow, oh)
    return y.transpose(-2, -1)
