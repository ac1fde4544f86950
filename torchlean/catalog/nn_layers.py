"""torch.nn.functional's layer functions that compose from registry ops: normalizations over
chosen axes, embeddings as row gathers, pixel/channel shuffles as permutations, im2col
(unfold) as a gather and col2im (fold) as its scatter-add."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean._generated import ops as _ops
from torchlean.buffer import AnyBuffer
from torchlean.catalog import _common as c
from torchlean.catalog._device_index import reshaped
from torchlean.int_tensor import IntTensor
from torchlean.nn import functional as F
from torchlean.nn.loss_functions import integer_labels
from torchlean.tape import no_grad

EXPORTS = {"nn.functional": ("one_hot", "embedding", "embedding_bag", "batch_norm",
                             "instance_norm", "group_norm", "local_response_norm", "rms_norm",
                             "bilinear", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
                             "unfold", "fold"),
           "torch": ("batch_norm", "instance_norm", "group_norm", "rms_norm", "bilinear",
                     "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "embedding")}


def one_hot(tensor, num_classes=-1):
    """int64 (..., num_classes) with a 1 at each label (num_classes -1: max label + 1). An
    IntTensor's labels go to the device once (or are there already) and the result stays there
    (take_rows_backward writes the ones); other labels are done on the host."""
    out = _one_hot_device(tensor, num_classes)
    if out is not None:
        return out
    y = integer_labels("one_hot", tensor, "class value")
    if y.size and y.min() < 0:
        raise RuntimeError("one_hot: class values must be non-negative")
    k = int(num_classes) if num_classes != -1 else (int(y.max()) + 1 if y.size else 0)
    if num_classes == -1 and not y.size:
        raise RuntimeError("one_hot: cannot infer the number of classes of an empty tensor")
    if y.size and y.max() >= k:
        raise RuntimeError(f"one_hot: class values must be smaller than num_classes {k}, got "
                           f"{int(y.max())}")
    return IntTensor((y[..., None] == np.arange(k)).astype(np.int64))


def _one_hot_device(labels, num_classes):
    if not isinstance(labels, IntTensor) or labels.dtype.name == "bool" or not labels.numel():
        return None
    lo, hi = labels.within()
    if lo < 0 or (num_classes == -1 or hi >= int(num_classes)):
        lo, hi = labels.bounds()        # exact values: errors and the inferred class count
    if lo < 0:
        raise RuntimeError("one_hot: class values must be non-negative")
    k = int(num_classes) if num_classes != -1 else hi + 1
    if hi >= k:
        raise RuntimeError(f"one_hot: class values must be smaller than num_classes {k}, got "
                           f"{hi}")
    buf = labels.device_values()
    if buf is None:
        return None
    n = labels.numel()
    idx = reshaped(buf, (n, 1))
    rows = _ops.take_rows_backward(idx, AnyBuffer.full((n, 1), 1.0), cols=k, distinct=1)
    bounds = (1, 1) if k == 1 else (0, 1)
    return IntTensor.on_device(AnyBuffer(tuple(labels.shape) + (k,), rows.buf), bounds)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """weight's rows at the indices; the padding_idx row gets no gradient."""
    w = c.tensor("embedding", weight, "weight")
    if w.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D, got shape {tuple(w.shape)}")
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError("embedding: max_norm and scale_grad_by_freq are not supported")
    idx = integer_labels("embedding", input, "index")
    n = w.shape[0]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(f"embedding: index out of range [0, {n}) of weight {tuple(w.shape)}")
    rows = w[idx.reshape(-1) % max(n, 1)].reshape(idx.shape + (w.shape[1],))
    if padding_idx is None:
        return rows
    pad = (idx % n == int(padding_idx) % n)[..., None].astype(np.float32)
    return w.session.op("where", w.session.tensor(pad), rows.detach(), rows)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums, means or maxima of bags of weight rows: a 2-D input is one bag per row; a 1-D
    input is cut at offsets. Sum and mean are one (bags, indices) matrix times the rows."""
    op = "embedding_bag"
    w = c.tensor(op, weight, "weight")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{op}: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    idx = integer_labels(op, input, "index")
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: offsets must be None for a 2-D input")
        starts = np.arange(0, idx.size, max(idx.shape[1], 1))[:idx.shape[0]]
        idx = idx.reshape(-1)
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError(f"{op}: a 1-D input needs offsets")
        starts = integer_labels(op, offsets, "offset").reshape(-1)
        if include_last_offset:
            starts = starts[:-1]
    else:
        raise ValueError(f"{op}: input must be 1-D or 2-D, got shape {idx.shape}")
    n = w.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"{op}: index out of range [0, {n})")
    ends = np.append(starts[1:], idx.size)
    keep = idx != (padding_idx % n if padding_idx is not None else -1)
    s = w.session
    rows = w[idx] if idx.size else s.tensor(np.zeros((0, w.shape[1]), np.float32))
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"{op}: per_sample_weights only with mode='sum'")
        rows = rows * c.operand(s, op, per_sample_weights).reshape(-1, 1)
    if mode == "max":
        width = int(max((ends - starts).max(initial=0), 1))
        pos = starts[:, None] + np.arange(width)[None, :]
        valid = (pos < ends[:, None]) & keep[np.minimum(pos, max(idx.size - 1, 0))]
        picked = rows[np.where(valid, pos, 0)] if idx.size else rows
        masked = s.op("where", s.tensor(valid[..., None].astype(np.float32)), picked, -np.inf)
        out = masked.amax(1)
        return s.op("where", s.tensor(valid.any(1, keepdims=True).astype(np.float32)), out, 0.0)
    bags = np.zeros((len(starts), idx.size), np.float32)
    for b, (a, e) in enumerate(zip(starts, ends)):
        cols = np.arange(a, e)[keep[a:e]]
        bags[b, cols] = 1.0 / max(len(cols), 1) if mode == "mean" else 1.0
    return composite.matmul(s.tensor(bags), rows)


def _stat_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _update_running(stat, new, momentum, op):
    """torch's running-stat update, in place: a NumPy buffer, or a Tensor with copy_."""
    value = (1 - momentum) * np.asarray(stat.numpy() if hasattr(stat, "numpy") else stat) + \
        momentum * new.numpy().reshape(-1)
    if isinstance(stat, np.ndarray):
        stat[...] = value
    elif hasattr(stat, "copy_"):
        with no_grad():
            stat.copy_(stat.session.tensor(value.astype(np.float32)))
    else:
        raise TypeError(f"{op}: running statistics must be NumPy buffers or tensors with copy_,"
                        f" got {type(stat).__name__}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-05):
    """Normalize each channel (axis 1) by the batch's statistics (training) or the running ones;
    training updates the running ones in place (unbiased variance, as torch)."""
    x = c.tensor("batch_norm", input)
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected input (N, C, ...), got {tuple(x.shape)}")
    s = x.session
    axes = tuple(i for i in range(x.ndim) if i != 1)
    shape = _stat_shape(x)
    if training:
        count = math.prod(x.shape[i] for i in axes)
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input size {tuple(x.shape)}")
        mean = x.mean(axes, keepdim=True)
        var = x.var(axes, keepdim=True, correction=0)
        if running_mean is not None:
            _update_running(running_mean, mean, momentum, "batch_norm")
        if running_var is not None:
            _update_running(running_var, var * (count / (count - 1)), momentum, "batch_norm")
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed in eval")
        mean = c.operand(s, "batch_norm", np.asarray(running_mean, np.float32)
                         if isinstance(running_mean, np.ndarray) else running_mean).reshape(shape)
        var = c.operand(s, "batch_norm", np.asarray(running_var, np.float32)
                        if isinstance(running_var, np.ndarray) else running_var).reshape(shape)
    y = (x - mean) * (var + float(eps)).rsqrt()
    return _affine(s, y, weight, bias, shape)


def _affine(s, y, weight, bias, shape):
    if weight is not None:
        y = y * c.operand(s, "norm", weight).reshape(shape)
    if bias is not None:
        y = y + c.operand(s, "norm", bias).reshape(shape)
    return y


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-05):
    x = c.tensor("instance_norm", input)
    if x.ndim < 3:
        raise ValueError(f"instance_norm: expected input (N, C, ...) with spatial axes, got "
                         f"{tuple(x.shape)}")
    if not use_input_stats:
        return batch_norm(x, running_mean, running_var, weight, bias, False, momentum, eps)
    axes = tuple(range(2, x.ndim))
    mean = x.mean(axes, keepdim=True)
    var = x.var(axes, keepdim=True, correction=0)
    y = (x - mean) * (var + float(eps)).rsqrt()
    return _affine(x.session, y, weight, bias, _stat_shape(x))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    x = c.tensor("group_norm", input)
    if x.ndim < 2 or x.shape[1] % int(num_groups):
        raise RuntimeError(f"group_norm: expected input (N, C, ...) with C divisible by "
                           f"num_groups {num_groups}, got {tuple(x.shape)}")
    n, ch = x.shape[:2]
    g = x.reshape(n, int(num_groups), -1)
    mean = g.mean(2, keepdim=True)
    var = g.var(2, keepdim=True, correction=0)
    y = ((g - mean) * (var + float(eps)).rsqrt()).reshape(tuple(x.shape))
    return _affine(x.session, y, weight, bias, _stat_shape(x))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing normalized_shape axes (eps None:
    float32's machine epsilon, as torch): the registry rms_norm over the folded axes."""
    x = c.tensor("rms_norm", input)
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.ndim - len(ns):]) != ns or len(ns) > x.ndim:
        raise RuntimeError(f"rms_norm: normalized_shape {ns} does not match the trailing axes of "
                           f"input shape {tuple(x.shape)}")
    cols = math.prod(ns)
    s = x.session
    w = s.tensor(np.ones(cols, np.float32)) if weight is None else \
        c.operand(s, "rms_norm", weight).reshape(cols)
    e = float(np.finfo(np.float32).eps) if eps is None else float(eps)
    lead = tuple(x.shape[:x.ndim - len(ns)])
    if cols == 0:
        return x.clone()
    y = s.op("rms_norm", x.reshape(lead + (cols,)), w, eps=e)
    return y.reshape(tuple(x.shape))


def local_response_norm(input, size, alpha=0.0001, beta=0.75, k=1.0):
    """x / (k + alpha / size * sum of x^2 over `size` neighbouring channels)^beta."""
    x = c.tensor("local_response_norm", input)
    if x.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3 or more dims (N, C, ...), got "
                         f"{tuple(x.shape)}")
    ch = x.shape[1]
    sq = (x * x).reshape(x.shape[0], ch, -1)
    lo, hi = size // 2, (size - 1) // 2
    band = np.zeros((ch, ch), np.float32)
    for i in range(ch):
        band[i, max(i - lo, 0):min(i + hi + 1, ch)] = 1.0
    win = composite.matmul(x.session.tensor(band), sq).reshape(tuple(x.shape))
    return x / (win * (float(alpha) / size) + float(k)) ** float(beta)


def bilinear(input1, input2, weight, bias=None):
    """y_k = x1 W_k x2 + b_k over the last axes."""
    a = c.tensor("bilinear", input1, "input1")
    s = a.session
    b, w = c.operand(s, "bilinear", input2, "input2"), c.operand(s, "bilinear", weight, "weight")
    if w.ndim != 3 or a.shape[-1] != w.shape[1] or b.shape[-1] != w.shape[2] or \
            tuple(a.shape[:-1]) != tuple(b.shape[:-1]):
        raise RuntimeError(f"bilinear: input1 {tuple(a.shape)}, input2 {tuple(b.shape)} and "
                           f"weight {tuple(w.shape)} must be (..., I), (..., J) and (K, I, J)")
    t = composite.matmul(a.reshape(-1, w.shape[1]), w.permute(1, 0, 2).reshape(w.shape[1], -1))
    y = (t.reshape(-1, w.shape[0], w.shape[2]) * b.reshape(-1, 1, w.shape[2])).sum(2)
    y = y.reshape(tuple(a.shape[:-1]) + (w.shape[0],))
    return y if bias is None else y + c.operand(s, "bilinear", bias)


def pixel_shuffle(input, upscale_factor):
    x = c.tensor("pixel_shuffle", input)
    r = int(upscale_factor)
    if x.ndim < 3 or x.shape[-3] % (r * r):
        raise RuntimeError(f"pixel_shuffle: expected (..., C * r^2, H, W) for r {r}, got "
                           f"{tuple(x.shape)}")
    *lead, ch, h, w = x.shape
    pos = c.positions(tuple(x.shape)).reshape(*lead, ch // (r * r), r, r, h, w)
    k = len(lead)
    pos = pos.transpose(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return c.rearrange(x, pos.reshape(*lead, ch // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    x = c.tensor("pixel_unshuffle", input)
    r = int(downscale_factor)
    if x.ndim < 3 or x.shape[-1] % r or x.shape[-2] % r:
        raise RuntimeError(f"pixel_unshuffle: expected (..., C, H, W) with H, W divisible by "
                           f"{r}, got {tuple(x.shape)}")
    *lead, ch, h, w = x.shape
    k = len(lead)
    pos = c.positions(tuple(x.shape)).reshape(*lead, ch, h // r, r, w // r, r)
    pos = pos.transpose(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return c.rearrange(x, pos.reshape(*lead, ch * r * r, h // r, w // r))


def channel_shuffle(input, groups):
    x = c.tensor("channel_shuffle", input)
    g = int(groups)
    if x.ndim < 3 or g <= 0 or x.shape[1] % g:
        raise RuntimeError(f"channel_shuffle: expected (N, C, ...) with C divisible by groups "
                           f"{groups}, got {tuple(x.shape)}")
    n, ch = x.shape[:2]
    pos = c.positions(tuple(x.shape)).reshape(n, g, ch // g, -1).transpose(0, 2, 1, 3)
    return c.rearrange(x, pos.reshape(tuple(x.shape)))


def _pair(v, op, what):
    t = (int(v), int(v)) if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)
    if len(t) != 2:
        raise ValueError(f"{op}: {what} must be an int or 2 ints, got {v!r}")
    return t


def _im2col_index(op, size, kernel_size, dilation, padding, stride):
    """(C*kh*kw, L) positions into the zero-padded (H + 2ph, W + 2pw) plane, and that shape."""
    k, d, p, st = (_pair(v, op, w) for v, w in ((kernel_size, "kernel_size"),
                                                 (dilation, "dilation"), (padding, "padding"),
                                                 (stride, "stride")))
    ph, pw = size[0] + 2 * p[0], size[1] + 2 * p[1]
    oh = (ph - d[0] * (k[0] - 1) - 1) // st[0] + 1
    ow = (pw - d[1] * (k[1] - 1) - 1) // st[1] + 1
    if oh < 1 or ow < 1:
        raise RuntimeError(f"{op}: no sliding block fits: size {tuple(size)}, kernel {k}, "
                           f"dilation {d}, padding {p}, stride {st}")
    rows = (np.arange(k[0]) * d[0])[:, None, None, None] + (np.arange(oh) * st[0])[None, None, :, None]
    cols = (np.arange(k[1]) * d[1])[None, :, None, None] + (np.arange(ow) * st[1])[None, None, None, :]
    return (rows * pw + cols).reshape(k[0] * k[1], oh * ow), (ph, pw), p


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C * kh * kw, L), every sliding block a column."""
    x = c.tensor("unfold", input)
    if x.ndim not in (3, 4):
        raise ValueError(f"unfold: expected (N, C, H, W) or (C, H, W), got {tuple(x.shape)}")
    batched = x if x.ndim == 4 else x.unsqueeze(0)
    n, ch, h, w = batched.shape
    idx, (ph, pw), p = _im2col_index("unfold", (h, w), kernel_size, dilation, padding, stride)
    padded = F.pad(batched, (p[1], p[1], p[0], p[0])) if any(p) else batched
    plane = ph * pw
    pos = (np.arange(n * ch) * plane)[:, None, None] + idx[None]
    out = c.rearrange(padded, pos.reshape(n, ch * idx.shape[0], idx.shape[1]))
    return out if x.ndim == 4 else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im: the adjoint of unfold, overlapping blocks summed (one scatter_add_vec)."""
    x = c.tensor("fold", input)
    if x.ndim not in (2, 3):
        raise ValueError(f"fold: expected (N, C * kh * kw, L) or (C * kh * kw, L), got "
                         f"{tuple(x.shape)}")
    batched = x if x.ndim == 3 else x.unsqueeze(0)
    h, w = _pair(output_size, "fold", "output_size")
    idx, (ph, pw), p = _im2col_index("fold", (h, w), kernel_size, dilation, padding, stride)
    n, ck, length = batched.shape
    if ck % idx.shape[0] or length != idx.shape[1]:
        raise RuntimeError(f"fold: input {tuple(x.shape)} does not match {idx.shape[0]} kernel "
                           f"positions and {idx.shape[1]} blocks")
    ch = ck // idx.shape[0]
    pos = (np.arange(n * ch) * ph * pw)[:, None, None] + idx[None]
    s = x.session
    zeros = s.tensor(np.zeros(n * ch * ph * pw, np.float32))
    out = s.op("scatter_add_vec", zeros, batched.reshape(-1), indices=pos.reshape(-1))
    out = out.reshape(n, ch, ph, pw)[:, :, p[0]:p[0] + h, p[1]:p[1] + w]
    return out if x.ndim == 3 else out.squeeze(0)
