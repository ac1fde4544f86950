"""Fused registry ops for transformer training, behind one switch.

- cross_entropy's plain case (2-D logits, class-index labels, no weight, no label smoothing)
  is the op cross_entropy_rows: the tape keeps the logits and two floats per row instead of an
  (N, V) log_softmax, and the backward writes softmax - onehot in one pass.
- linear_gelu(linear, x) is gelu(linear(x)) (tanh form) as the op linear_gelu: on CUDA in
  default mode one cuBLASLt GEMM with the bias epilogue, then gelu's kernel (so the tape may
  free the activation and recompute it as gelu(pre) with the same bits); linear's kernel then
  gelu's in deterministic and exact modes and on the stub.

- linear_residual(linear, x, r) is linear(x) + r, the residual add after a block's last
  linear, as the op linear_residual: on CUDA in default mode one cuBLASLt GEMM with the bias
  epilogue and r as its C operand (no separate add pass, no intermediate linear output);
  linear's kernel then add's in deterministic and exact modes and on the stub.

`enabled = False` makes them take the unfused ops (log_softmax + gather; linear then gelu;
linear then add), for benchmarks and comparisons."""
from __future__ import annotations

import math

import numpy as np

from torchlean import _capture

enabled = True
_I64 = np.dtype(np.int64)


def applies_to_cross_entropy(x, weight, label_smoothing) -> bool:
    """Whether cross_entropy may take the fused path for these arguments."""
    return enabled and x.ndim == 2 and x.shape[1] >= 1 and weight is None and \
        float(label_smoothing) == 0.0


def cross_entropy_rows(x, labels: np.ndarray, keep: np.ndarray, reduction: str):
    """Loss of logits x (N, V) against checked labels; rows where keep is False are ignored
    (loss 0, no gradient, left out of the 'mean' denominator: 0 / 0 = NaN when all are)."""
    s = x.session
    if _capture.STATE.active and keep.all() and \
            _capture.int_guard(labels, 0, x.shape[1]):   # an input of a captured step
        lab = labels.reshape(-1)                           # read as it is by every replay
    elif (not _capture.STATE.active and labels.dtype is _I64 and labels.shape == keep.shape
          and keep.all()):
        lab = labels   # nothing ignored, eagerly: the labels as they are (the op copies them)
    else:
        lab = np.where(keep, labels, x.shape[1]).astype(np.int64)   # V: out of range, so ignored
    loss = s.op("cross_entropy_rows", x, labels=lab)
    if reduction == "none":
        return loss
    total = s.op("sum", loss)   # loss.sum(): the 1-D rows' sum
    if reduction == "sum":
        return total
    kept = int(np.count_nonzero(keep))
    return total * (1.0 / kept) if kept else total * float("nan")


def linear_gelu(linear, x):
    """gelu(linear(x)), the tanh-form GELU (Tensor.gelu, F.gelu(approximate="tanh")), for an
    nn.Linear and x (..., in)."""
    if not enabled or linear.bias is None:
        return linear(x).gelu()
    s = x.session
    w, b = s.as_tensor(linear.weight), s.as_tensor(linear.bias)
    if x.ndim < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"linear_gelu: expected input (..., {w.shape[1]}) for weight "
                         f"{w.shape}, got input {x.shape}")
    if x.ndim <= 2:
        return s.op("linear_gelu", w, b, x)
    lead = x.shape[:-1]
    y = s.op("linear_gelu", w, b, s.op("reshape", x, shape=(math.prod(lead), x.shape[-1])))
    return s.op("reshape", y, shape=lead + (w.shape[0],))


def linear_residual(linear, x, r):
    """linear(x) + r for an nn.Linear, x (..., in) and r (..., out) of the same leading shape."""
    if not enabled or linear.bias is None:
        return linear(x) + r
    s = x.session
    w, b = s.as_tensor(linear.weight), s.as_tensor(linear.bias)
    r = s.as_tensor(r)
    if x.ndim < 1 or x.shape[-1] != w.shape[1] or tuple(r.shape) != tuple(x.shape[:-1]) + (w.shape[0],):
        raise ValueError(f"linear_residual: expected input (..., {w.shape[1]}) and residual "
                         f"(..., {w.shape[0]}) of the same leading shape for weight {w.shape}, "
                         f"got input {x.shape} and residual {r.shape}")
    if x.ndim <= 2:
        return s.op("linear_residual", w, b, x, r)
    lead = x.shape[:-1]
    rows = math.prod(lead)
    y = s.op("linear_residual", w, b, s.op("reshape", x, shape=(rows, x.shape[-1])),
             s.op("reshape", r, shape=(rows, w.shape[0])))
    return s.op("reshape", y, shape=lead + (w.shape[0],))

