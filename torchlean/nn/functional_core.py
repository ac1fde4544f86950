"""torch.nn.functional's core forms (linear, convolutions, 2-D pooling, activations, dropout,
attention); each dispatches to the session of its Tensor arguments. torchlean.nn.functional
gathers these with the losses, padding and resampling of their own modules."""
from __future__ import annotations

import math

import numpy as np

from torchlean.session import Tensor, Parameter, default_session
from torchlean.tape import is_grad_enabled


def _sess(*xs):
    return next((x.session for x in xs if isinstance(x, Tensor)), None) or default_session()


def linear(input, weight, bias=None):
    """y = input @ weight^T + bias (torch.nn.functional.linear) for input (..., in), weight
    (out, in), bias (out,) or None; returns (..., out).

    One fused registry `linear` op: leading axes are folded into rows by a reshape view (the op
    takes (in,) or (N, in)) and unfolded after; a missing bias is a zero (out,) constant."""
    s = _sess(input, weight, bias)
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
    return _sess(x).dropout(x, p, training)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """torch's dropout2d: each (sample, channel) plane of (N, C, H, W) input is zeroed with
    probability p and the rest scaled by 1 / (1 - p); one Bernoulli draw per plane, broadcast
    over it. A 3-D input is read as (N, C, L), as torch 2 does (channel-wise 1-D dropout)."""
    s = _sess(input)
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
    return _sess(x).op("relu", x)


_GELU_OPS = {"none": "gelu_erf", "tanh": "gelu"}


def gelu(x, approximate="none"):
    """torch's GELU: approximate="none" (the default) is the exact erf form, "tanh" the tanh
    approximation (the registry's gelu op)."""
    op = _GELU_OPS.get(approximate)
    if op is None:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _sess(x).op(op, x)


def softplus(x, beta=1.0, threshold=20.0):
    """torch's softplus: log(1 + exp(beta x)) / beta, and x where beta x > threshold."""
    return _sess(x).op("softplus_beta", x, beta=float(beta), threshold=float(threshold))


def tanh(x):
    return _sess(x).op("tanh", x)


def sigmoid(x):
    return _sess(x).op("sigmoid", x)


def silu(input, inplace=False):
    """torch's SiLU (swish), x * sigmoid(x): the registry's silu op (`inplace` is accepted for
    torch's signature; torchlean has no in-place ops)."""
    return _sess(input).op("silu", input)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """softmax over `dim`; dim=None is the last axis here (torch's legacy rule for a missing
    dim picks axis 0 of a 1-D or 3-D input and axis 1 otherwise, with a warning)."""
    return _sess(input).as_tensor(input).softmax(-1 if dim is None else dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log_softmax over `dim` (dim=None: the last axis, see softmax)."""
    return _sess(input).as_tensor(input).log_softmax(-1 if dim is None else dim)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, negative_slope * x elsewhere: relu(x) - slope relu(-x)."""
    s = _sess(input)
    x = s.as_tensor(input)
    return s.op("relu", x) - s.op("relu", -x) * float(negative_slope)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, alpha (exp(x) - 1) elsewhere: relu(x) + alpha (exp(-relu(-x)) - 1)."""
    s = _sess(input)
    x = s.as_tensor(input)
    neg = -s.op("relu", -x)
    return s.op("relu", x) + (s.op("exp", neg) - 1.0) * float(alpha)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch's layer_norm over the trailing `normalized_shape` axes: one registry layer_norm
    over the folded trailing axes; weight / bias None are ones / zeros."""
    s = _sess(input, weight, bias)
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

def _per_axis(v, n, what, op):
    t = (int(v),) * n if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)
    if len(t) != n:
        raise ValueError(f"{op}: {what} must be an int or {n} ints, got {v!r}")
    return t


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
    s = _sess(input, weight, bias)
    x, w = s.as_tensor(input), s.as_tensor(weight)
    groups = int(groups)
    dil = _per_axis(dilation, rank, "dilation", op)
    st = _per_axis(stride, rank, "stride", op)
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
    pad = _per_axis(padding, rank, "padding", op)
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
    s = _sess(input, weight, bias)
    x, w = s.as_tensor(input), s.as_tensor(weight)
    if int(groups) != 1 or _per_axis(dilation, 2, "dilation", op) != (1, 1):
        raise NotImplementedError(f"{op}: groups and dilation other than 1 are not supported")
    st, p = _per_axis(stride, 2, "stride", op), _per_axis(padding, 2, "padding", op)
    op_pad = _per_axis(output_padding, 2, "output_padding", op)
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
    y = _pad_after(y, tuple(n - m for n, m in zip(out, y.shape[-2:])), 0.0)
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
    s = _sess(input)
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


# ---------------------------------------------------------------------------- attention

def split_attention_mask(op, mask, shape, blocked_when=False):
    """A PyTorch attention mask as (allowed, additive) for scores of `shape` (..., L, S).

    Boolean masks give `allowed` (True = may attend; blocked_when=True reads True as blocked,
    nn.MultiheadAttention's convention); float masks are added to the scores, their -inf entries
    becoming blocked entries of `allowed` (masked_softmax gives them exactly 0 and never
    computes inf - inf) and the rest an additive constant. A Tensor float mask is added as is
    (differentiable). Returns host arrays broadcast to `shape` when not (L, S)."""
    if mask is None:
        return None, None
    if isinstance(mask, (Tensor, Parameter)):
        return None, mask
    a = np.asarray(mask)
    target = tuple(shape[-2:]) if a.ndim <= 2 else tuple(shape)
    try:
        fits = np.broadcast_shapes(a.shape, target) == target
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{op}: attention mask of shape {a.shape} does not broadcast to the "
                         f"scores (..., L, S) = {tuple(shape)}")
    a = np.broadcast_to(a, target)
    if a.dtype == np.bool_:
        return (~a if blocked_when else a), None
    if a.dtype.kind != "f":
        # torch raises too: an integer 0/1 mask added as a float would block nothing
        raise TypeError(f"{op}: attention mask must be boolean (or float, added to the scores), "
                        f"got dtype {a.dtype}; an integer mask such as np.tril(np.ones((T, T), "
                        "int)) must be converted with .astype(bool)")
    a = a.astype(np.float64)
    if np.isnan(a).any() or (a == np.inf).any():
        raise ValueError(f"{op}: a float attention mask may hold finite values and -inf, got "
                         "NaN or +inf")
    blocked = a == -np.inf
    allowed = ~blocked if blocked.any() else None
    additive = np.where(blocked, 0.0, a).astype(np.float32) if (a[~blocked] != 0).any() else None
    return allowed, additive


def causal_mask(l, s):
    """torch's is_causal mask for L queries and S keys: query i may attend keys j <= i (the
    lower triangle of an L x S matrix, aligned top left)."""
    return np.tri(l, s, dtype=bool)


def fused_attention_fits(l, s, allowed, additive) -> bool:
    """Whether the fused attention kernels can run this attention: self-shaped (as many keys as
    queries), no additive mask, and a boolean mask, if any, of shape (L, L). The one test
    F.scaled_dot_product_attention and nn.MultiheadAttention share (each adds its own limits)."""
    return l == s and additive is None and (allowed is None or np.shape(allowed) == (l, l))


def attention_core(q, k, v, allowed=None, additive=None, scale=None, dropout_p=0.0,
                   training=True):
    """softmax(q @ k^T * scale + additive, over keys where `allowed`) @ v for q (N, L, E),
    k (N, S, E), v (N, S, Ev), all registry ops (bmm, masked_softmax/softmax), so it is
    differentiable and exact-mode safe. allowed: None, a boolean (L, S) or (N, L, S) array or a
    DeviceMask; additive: None, a float array or a Tensor broadcasting to (N, L, S)."""
    s = _sess(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = s.op("bmm", q, k.transpose(-2, -1)) * scale
    if additive is not None:
        scores = scores + additive
    if allowed is None:
        p = s.op("softmax", scores)
    else:
        p = s.op("masked_softmax", scores, mask=allowed)
    if dropout_p > 0.0:
        p = dropout(p, dropout_p, training)
    return s.op("bmm", p, v)


# the fused attention op runs (batch x heads) on one CUDA grid axis
_FUSED_MAX_BATCH = 65535


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """torch's F.scaled_dot_product_attention for query (..., L, E), key (..., S, E), value
    (..., S, Ev) with the same leading axes: softmax(q k^T * scale + mask) v, scale defaulting
    to 1/sqrt(E). A boolean attn_mask means True = may attend; a float one is added to the
    scores (-inf blocks). is_causal applies the lower-triangular (L, S) mask (not together with
    attn_mask, as torch). Rows with every key blocked give 0 (torch gives NaN).

    Self-shaped calls (S = L, Ev = E, the default scale, no dropout, no float mask, a boolean
    mask of shape (L, L) if any) run the fused `attention` op, which never stores the L x L
    scores and takes is_causal as its attr; the others compose bmm and masked_softmax."""
    op = "scaled_dot_product_attention"
    s = _sess(query, key, value)
    q, k, v = s.as_tensor(query), s.as_tensor(key), s.as_tensor(value)
    if (q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim or q.shape[:-2] != k.shape[:-2]
            or k.shape[:-2] != v.shape[:-2] or q.shape[-1] != k.shape[-1]
            or k.shape[-2] != v.shape[-2]):
        raise ValueError(f"{op}: expected query (..., L, E), key (..., S, E) and value "
                         f"(..., S, Ev) with the same leading axes, got query {q.shape}, key "
                         f"{k.shape}, value {v.shape}")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{op}: give either attn_mask or is_causal=True, not both (as torch)")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1), got {dropout_p}")
    lead, (l, e), (sk, ev) = tuple(q.shape[:-2]), q.shape[-2:], v.shape[-2:]
    n = math.prod(lead)
    scores = lead + (l, sk)
    allowed, additive = (None, None) if is_causal else split_attention_mask(op, attn_mask, scores)
    if (e == ev and scale is None and dropout_p == 0.0 and 0 < n <= _FUSED_MAX_BATCH
            and fused_attention_fits(l, sk, allowed, additive)):
        # self-shaped: the fused attention op (causal as its attr, no mask buffer)
        y = s.op("attention", q.reshape(n, l, e), k.reshape(n, l, e), v.reshape(n, l, e),
                 mask=allowed, causal=bool(is_causal))
        return y.reshape(lead + (l, ev))
    if is_causal:
        allowed = causal_mask(l, sk)
    if allowed is not None and allowed.ndim > 2:
        allowed = allowed.reshape(n, l, sk)
    if additive is not None:
        if isinstance(additive, np.ndarray):
            additive = s.tensor(additive.reshape((n, l, sk) if additive.ndim > 2 else (l, sk)))
        else:
            additive = s.as_tensor(additive)
            if len(additive.shape) > 2:
                additive = additive.expand(*scores).reshape(n, l, sk)
    y = attention_core(q.reshape(n, l, e), k.reshape(n, sk, e), v.reshape(n, sk, ev), allowed,
                       additive, scale, dropout_p)
    return y.reshape(lead + (l, ev))


# ---------------------------------------------------------------------------- pooling options

def _pool_input(op, input):
    s = _sess(input)
    x = s.as_tensor(input)
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}: expected input (N, C, H, W) or (C, H, W), got {x.shape}")
    return s, x


def _pool_out_size(op, n, k, st, p, d, ceil_mode):
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


def _pad_after(x, extra, value):
    """x with `extra` (one count per trailing axis, e.g. H then W) constant cells appended at
    the end of each of those axes."""
    from torchlean.session import cat
    s = x.session
    for axis, e in zip(range(-len(extra), 0), extra):
        if e:
            shape = list(x.shape)
            shape[axis] = e
            x = cat([x, s.tensor(np.full(shape, value, np.float32))], dim=axis)
    return x


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
    return _per_axis(v, 2, what, op)


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
    (oh, eh), (ow, ew) = (_pool_out_size(op, n, *a, ceil_mode)
                          for n, a in zip((h, w), zip(k, st, p, d)))
    win = None
    if d == (1, 1):
        y = s.op("max_pool2d", _pad_after(x, (eh, ew), -np.inf), kernel_size=k, stride=st,
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


def _avg_divisors(n, k, st, p, out, count_include_pad):
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
    (oh, eh), (ow, ew) = (_pool_out_size(op, n, *a, 1, ceil_mode)
                          for n, a in zip((h, w), zip(k, st, p)))
    y = s.op("avg_pool2d", _pad_after(x, (eh, ew), 0.0), kernel_size=k, stride=st, padding=p)
    if divisor_override is not None:
        if int(divisor_override) < 1:
            raise ValueError(f"{op}: divisor_override must be >= 1, got {divisor_override}")
        return y * (k[0] * k[1] / float(divisor_override))
    div = np.outer(_avg_divisors(h, k[0], st[0], p[0], oh, count_include_pad),
                   _avg_divisors(w, k[1], st[1], p[1], ow, count_include_pad))
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
