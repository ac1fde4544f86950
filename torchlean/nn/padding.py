"""torch.nn.functional's pad and normalize, composed from registry ops: constant padding joins
constant blocks with cat, the other modes gather each output cell's source cell (gather_vec,
VJP: scatter-add)."""
from __future__ import annotations

import math

import numpy as np

from torchlean.nn.functional_base import session_of
from torchlean.nn.arg_checks import check_numel, int_tuple
from torchlean.session import cat

_MODES = ("constant", "reflect", "replicate", "circular")


def _source(n, lo, hi, mode, op):
    """Source index along one axis for each of lo + n + hi output cells."""
    i = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if mode == "circular":
        if lo > n or hi > n:
            raise ValueError(f"{op}: circular padding ({lo}, {hi}) may not exceed the size {n}")
        return i % n
    if lo >= n or hi >= n:           # reflect
        raise ValueError(f"{op}: reflect padding ({lo}, {hi}) must be smaller than the size {n}")
    period = 2 * (n - 1) if n > 1 else 1
    j = np.abs(i) % period
    return np.where(j < n, j, period - j)


def pad(input, pad, mode="constant", value=None):  # noqa: A002 - torch's names
    """torch's F.pad: `pad` holds (before, after) pairs from the last axis backwards; negative
    amounts crop (constant mode). Modes 'reflect', 'replicate' and 'circular' pad the trailing
    len(pad) / 2 axes by gathering source cells."""
    op = "pad"
    s = session_of(input)
    x = s.as_tensor(input)
    p = list(int_tuple(op, "pad", pad))
    if len(p) % 2 or len(p) // 2 > x.ndim:
        raise ValueError(f"{op}: pad must hold (before, after) pairs for at most {x.ndim} axes of "
                         f"input {tuple(x.shape)}, got {tuple(pad)}")
    if mode not in _MODES:
        raise NotImplementedError(f"{op}: mode {mode!r} is not supported; expected one of "
                                  f"{', '.join(_MODES)}")
    if mode != "constant" and value not in (None, 0, 0.0):
        raise ValueError(f"{op}: value is only used by mode 'constant', got value={value}")
    axes = [(x.ndim - 1 - k, p[2 * k], p[2 * k + 1]) for k in range(len(p) // 2)]
    grown = list(x.shape)
    for axis, lo, hi in axes:
        grown[axis] = max(grown[axis] + lo + hi, 0)
    check_numel(op, "output", grown)
    if mode == "constant":
        fill = 0.0 if value is None else float(value)
        for axis, lo, hi in axes:
            if lo < 0 or hi < 0:                       # negative pads crop
                n = x.shape[axis]
                if n + min(lo, 0) + min(hi, 0) < 0:
                    raise ValueError(f"{op}: pads ({lo}, {hi}) crop more than the {n} cells of "
                                     f"axis {axis} of input {tuple(input.shape)}")
                idx = [slice(None)] * x.ndim
                idx[axis] = slice(max(-lo, 0), n - max(-hi, 0))
                x = x[tuple(idx)]
            parts = []
            for amount in (max(lo, 0), max(hi, 0)):
                shp = list(x.shape)
                shp[axis] = amount
                parts.append(s.tensor(np.full(shp, fill, np.float32)) if amount else None)
            pieces = [t for t in (parts[0], x, parts[1]) if t is not None]
            x = cat(pieces, dim=axis) if len(pieces) > 1 else x
        return x
    if any(lo < 0 or hi < 0 for _, lo, hi in axes):
        raise ValueError(f"{op}: mode {mode!r} takes non-negative pads, got {tuple(pad)}")
    shp = tuple(x.shape)
    index = np.arange(math.prod(shp), dtype=np.int64).reshape(shp)
    for axis, lo, hi in axes:
        index = np.take(index, _source(shp[axis], lo, hi, mode, op), axis=axis)
    y = s.op("gather_vec", x.reshape(-1), indices=index.reshape(-1))
    return y.reshape(index.shape)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """torch's F.normalize: input / max(||input||_p over dim, eps)."""
    x = session_of(input).as_tensor(input)
    if float(p) == 2.0:
        norm = (x * x).sum(dim=dim, keepdim=True).sqrt()
    elif float(p) == 1.0:
        norm = x.session.op("abs", x).sum(dim=dim, keepdim=True)
    else:
        norm = (x.session.op("abs", x) ** float(p)).sum(dim=dim, keepdim=True) ** (1.0 / float(p))
    return x / norm.clamp(min=float(eps))
