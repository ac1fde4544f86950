"""torch.nn.functional's losses, composed from registry ops, with torch's arguments, defaults
and reductions.

Class labels, class weights and ignore masks are host values (never differentiated), so the
picks are one gather_vec over the log-probabilities and every 'mean' denominator is a host
constant; the rest (log_softmax, softplus, abs, clamp, ...) are ordinary tape ops, so gradients
come from the registry VJPs."""
from __future__ import annotations

import math

import numpy as np

from torchlean import _capture
from torchlean.nn import fused
from torchlean.nn.arg_checks import check_unit_interval, int_arg
from torchlean.int_tensor import IntTensor
from torchlean.session import Parameter, Tensor, default_session

REDUCTIONS = ("mean", "sum", "none")
_I64, _U64 = np.dtype(np.int64), np.dtype(np.uint64)
_umax = np.maximum.reduce


class TargetOutOfRange(ValueError, IndexError):
    """A class label outside [0, classes): torch raises IndexError; earlier torchlean raised
    ValueError, so this is both."""


def _sess(*xs):
    if xs and xs[0].__class__ is Tensor:
        return xs[0].session
    return next((x.session for x in xs if isinstance(x, Tensor)), None) or default_session()


def check_reduction(op: str, reduction: str, allowed=REDUCTIONS) -> str:
    if reduction not in allowed:
        raise ValueError(f"{op}: reduction must be one of {', '.join(repr(r) for r in allowed)}, "
                         f"got {reduction!r} (not a valid value for reduction)")
    return reduction


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def integer_labels(op: str, labels, what: str = "label") -> np.ndarray:
    """Host int64 labels from an integer NumPy array, list, or anything with `.numpy()` or
    `__array__` giving integers (an int64 Tensor); a float Tensor or array raises TypeError."""
    if isinstance(labels, Parameter):
        raise TypeError(f"{op}: {what}s must be integers, got a float32 Parameter")
    a = labels._a if isinstance(labels, IntTensor) and _capture.STATE.active else \
        np.asarray(labels.numpy() if hasattr(labels, "numpy") else labels)
    if a.dtype.kind not in "iu":
        kind = "float32 Tensor" if isinstance(labels, Tensor) else f"dtype {a.dtype}"
        raise TypeError(f"{op}: {what}s must be an integer array, got {kind} (class indices "
                        "are torch's Long targets)")
    return a.astype(np.int64, copy=not _capture.STATE.active)   # captured: read in place


def _class_last(x, cdim):
    """(M, C) rows of x with its class axis `cdim` moved last (M = the other axes' product)."""
    if cdim != x.ndim - 1:
        x = x.permute(*[d for d in range(x.ndim) if d != cdim], cdim)
    return x.reshape(-1, x.shape[-1])


def _class_weight(op, weight, c):
    if weight is None:
        return None
    w = np.asarray(weight.numpy() if hasattr(weight, "numpy") else weight, np.float64)
    if w.shape != (c,):
        raise ValueError(f"{op}: weight must hold one value per class, shape ({c},), got shape "
                         f"{w.shape}")
    return w


def _split_input(op, x, target_shape, what="input"):
    """(class axis, label shape) of a (C,), (N, C) or (N, C, d1, ...) input; raises naming the
    shapes when the target does not fit."""
    shp = tuple(x.shape)
    if len(shp) == 0:
        raise ValueError(f"{op}: {what} must be (rows, classes), (classes,) or (rows, classes, "
                         f"d1, ...), got shape {shp}")
    cdim, want = (0, ()) if len(shp) == 1 else (1, (shp[0],) + shp[2:])
    if tuple(target_shape) != want:
        raise ValueError(f"{op}: {what} must be (rows, classes), (classes,) or (rows, classes, "
                         f"d1, ...) and the target hold one label per row, shape {want} for "
                         f"{what} {shp}, got shape {tuple(target_shape)}")
    return cdim, want


def _kept_labels(op, flat_y, c, ignore_index):
    """The mask of rows whose label is not ignore_index; raises on any other label outside
    [0, c)."""
    keep = flat_y != ignore_index
    if flat_y.dtype is _I64 and flat_y.size and _umax(flat_y.view(_U64), axis=None) < c:
        return keep   # every label in [0, c) (a negative one is >= 2**63 in the unsigned view)
    bad = np.flatnonzero(keep & ((flat_y < 0) | (flat_y >= c)))
    if bad.size:
        i = int(bad[0])
        raise TargetOutOfRange(f"{op}: label {flat_y[i]} at row {i} is out of range for {c} "
                               f"classes; expected 0 <= label < {c} or label == ignore_index "
                               f"({ignore_index})")
    return keep


def _nll_rows(op, rows, y, lshape, weight, ignore_index, reduction, label_smoothing=0.0):
    """torch's nll_loss over (M, C) log-probability rows and M integer labels (result shape
    lshape for 'none'), plus the label-smoothed cross-entropy term when label_smoothing > 0."""
    s = rows.session
    m, c = rows.shape
    w = _class_weight(op, weight, c)
    flat_y = y.reshape(-1)
    keep = _kept_labels(op, flat_y, c, ignore_index)
    safe_y = np.where(keep, flat_y, 0)
    wy = np.where(keep, 1.0 if w is None else w[safe_y], 0.0)  # per-row weight, 0 if ignored
    # out-of-range indices read 0 (and get no gradient): ignored rows pick nothing
    idx = np.where(keep, np.arange(m, dtype=np.int64) * c + safe_y, m * c)
    picked = s.op("gather_vec", rows.reshape(-1), indices=idx)
    plain = w is None and keep.all()
    loss = -picked if plain else picked * s.tensor(-wy.astype(np.float32))
    if label_smoothing > 0.0:
        wrow = rows if w is None else rows * s.tensor(w.astype(np.float32))
        smooth = wrow.sum(dim=1)
        if not keep.all():
            smooth = smooth * s.tensor(keep.astype(np.float32))
        loss = loss * (1.0 - label_smoothing) - smooth * (label_smoothing / c)
    if reduction == "none":
        return loss.reshape(lshape)
    total = loss.sum()
    if reduction == "sum":
        return total
    denom = float(wy.sum())       # torch: 0 / 0 = NaN when every row is ignored
    return total * (1.0 / denom) if denom != 0 else total * float("nan")


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """torch's nll_loss: -weight[y] * input[n, y] per row over log-probabilities (N, C),
    (C,) or (N, C, d1, ...); 'mean' divides by the summed weights of the kept rows."""
    op = "nll_loss"
    check_reduction(op, reduction)
    x = _sess(input).as_tensor(input)
    y = integer_labels(op, target)
    cdim, lshape = _split_input(op, x, y.shape)
    return _nll_rows(op, _class_last(x, cdim), y, lshape, weight,
                     int_arg(op, "ignore_index", ignore_index), reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """torch's cross_entropy on logits (N, C), (C,) or (N, C, d1, ...): class-index targets
    (with weight, ignore_index, label_smoothing as torch) or class-probability targets of the
    input's shape (a float array or Tensor)."""
    op = "cross_entropy"
    check_reduction(op, reduction)
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    s = _sess(input)
    x = s.as_tensor(input)
    cdim = 0 if x.ndim == 1 else 1
    if x.ndim >= 1 and _is_probabilities(target, x.shape):
        return _soft_cross_entropy(s, x, cdim, target, weight, reduction, float(label_smoothing))
    y = integer_labels(op, target)
    cdim, lshape = _split_input(op, x, y.shape, "logits")
    if fused.applies_to_cross_entropy(x, weight, label_smoothing):
        keep = _kept_labels(op, y, x.shape[1], int_arg(op, "ignore_index", ignore_index))
        return fused.cross_entropy_rows(x, y, keep, reduction)
    rows = s.op("log_softmax", _class_last(x, cdim))
    return _nll_rows(op, rows, y, lshape, weight, int_arg(op, "ignore_index", ignore_index),
                     reduction, float(label_smoothing))


def _is_probabilities(target, shape):
    if isinstance(target, (Tensor, Parameter)):      # a float Tensor of the input's shape
        return tuple(target.shape) == tuple(shape) and \
            np.dtype(getattr(target, "dtype", np.float32)).kind == "f"
    a = np.asarray(target)
    return a.dtype.kind == "f" and a.shape == tuple(shape)


def _soft_cross_entropy(s, x, cdim, target, weight, reduction, eps):
    """-sum_c weight_c target_c log_softmax(x)_c per row (target smoothed to
    (1 - eps) target + eps / C); 'mean' divides by the number of rows."""
    rows = _class_last(x, cdim)
    m, c = rows.shape
    t = _class_last(s.as_tensor(target), cdim)
    if eps > 0.0:
        t = t * (1.0 - eps) + eps / c
    w = _class_weight("cross_entropy", weight, c)
    lp = s.op("log_softmax", rows) * t
    if w is not None:
        lp = lp * s.tensor(w.astype(np.float32))
    loss = -lp.sum(dim=1)
    if reduction == "none":
        return loss.reshape(tuple(x.shape[:cdim]) + tuple(x.shape[cdim + 1:]))
    return loss.sum() * (1.0 if reduction == "sum" else 1.0 / m)


def check_same_shape(op, x, t):
    if tuple(x.shape) != tuple(np.shape(t)):
        raise ValueError(f"{op}: input {tuple(x.shape)} and target {tuple(np.shape(t))} must "
                         "have the same shape (torch: the target size must be the same as the "
                         "input size)")


def _pair(op, input, target):
    s = _sess(input, target)
    x, t = s.as_tensor(input), s.as_tensor(target)
    check_same_shape(op, x, t)
    return s, x, t


def _weighted(s, loss, weight):
    return loss if weight is None else loss * s.as_tensor(weight)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-weight (y log x + (1 - y) log(1 - x)) with each log clamped to >= -100, as torch;
    input holds probabilities in [0, 1] (outside it the logs give NaN)."""
    op = "binary_cross_entropy"
    check_reduction(op, reduction)
    s, x, y = _pair(op, input, target)
    check_unit_interval(op, "input", x)
    check_unit_interval(op, "target", y)
    big = float(np.finfo(np.float32).max)
    lx = s.op("clamp", s.op("log", x), lo=-100.0, hi=big)
    l1x = s.op("clamp", s.op("log", 1.0 - x), lo=-100.0, hi=big)
    return _reduce(_weighted(s, -(y * lx + (1.0 - y) * l1x), weight), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """-weight (pos_weight y log sigmoid(x) + (1 - y) log sigmoid(-x)), computed as
    (1 - y) x + (1 + (pos_weight - 1) y) softplus(-x), stable for any x."""
    op = "binary_cross_entropy_with_logits"
    check_reduction(op, reduction)
    s, x, y = _pair(op, input, target)
    sp = s.op("softplus", -x)
    if pos_weight is None:
        loss = (1.0 - y) * x + sp
    else:
        pw = s.as_tensor(pos_weight)
        try:
            np.broadcast_shapes(tuple(pw.shape), tuple(y.shape))
        except ValueError:
            raise ValueError(f"{op}: pos_weight of shape {tuple(pw.shape)} does not broadcast "
                             f"to the target {tuple(y.shape)}") from None
        loss = (1.0 - y) * x + (1.0 + (pw - 1.0) * y) * sp
    return _reduce(_weighted(s, loss, weight), reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """|input - target| (torch's l1_loss; the derivative at 0 is 0)."""
    check_reduction("l1_loss", reduction)
    s, x, t = _pair("l1_loss", input, target)
    return _reduce(s.op("abs", x - t), reduction)


def _smooth(s, a, beta):
    """0.5 a^2 / beta below beta and a - 0.5 beta above, as m^2 / (2 beta) + (a - m) with
    m = min(a, beta): one clamp, smooth at the joint."""
    m = s.op("clamp", a, lo=-1.0, hi=float(beta))
    return m * m * (0.5 / beta) + (a - m)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """torch's smooth_l1_loss: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere;
    beta = 0 is l1_loss."""
    op = "smooth_l1_loss"
    check_reduction(op, reduction)
    if not float(beta) >= 0.0:
        raise ValueError(f"{op}: beta must be >= 0, got {beta}")
    s, x, t = _pair(op, input, target)
    a = s.op("abs", x - t)
    return _reduce(a if beta == 0 else _smooth(s, a, float(beta)), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """torch's huber_loss: 0.5 d^2 where |d| <= delta, delta (|d| - 0.5 delta) elsewhere
    (= delta * smooth_l1 with beta = delta)."""
    op = "huber_loss"
    check_reduction(op, reduction)
    if not float(delta) > 0.0:
        raise ValueError(f"{op}: delta must be > 0, got {delta}")
    s, x, t = _pair(op, input, target)
    return _reduce(_smooth(s, s.op("abs", x - t), float(delta)) * float(delta), reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """torch's kl_div with log-probabilities `input`: target (log target - input) pointwise
    (0 where target == 0), or exp(target) (target - input) with log_target. 'batchmean' divides
    the sum by input.size(0) (the true KL divergence); 'mean' by the element count."""
    op = "kl_div"
    check_reduction(op, reduction, REDUCTIONS + ("batchmean",))
    s, x, t = _pair(op, input, target)
    if log_target:
        loss = s.op("exp", t) * (t - x)
    elif isinstance(target, (Tensor, Parameter)):   # xlogy: 0 at t = 0, NaN for t < 0
        loss = t * s.op("log", s.op("where", s.op("eq", t, 0.0), 1.0, t)) - t * x
    else:                        # a host target: xlogy in float64
        a = np.asarray(target, np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            xlogy = np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), np.where(a == 0, 0.0, np.nan))
        loss = s.tensor(xlogy.astype(np.float32)) - t * x
    if reduction == "batchmean":
        n = x.shape[0] if x.ndim else 1
        return loss.sum() * (1.0 / n)
    return _reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """(input - target)^2: 'mean' is the registry's fused mse_loss op."""
    op = "mse_loss"
    check_reduction(op, reduction)
    s, x, t = _pair(op, input, target)
    if reduction == "none":
        d = x - t
        return d * d
    loss = s.op("mse_loss", x, t)
    return loss * float(math.prod(x.shape)) if reduction == "sum" else loss
