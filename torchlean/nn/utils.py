"""torch.nn.utils equivalents over Parameters' device gradients."""
from __future__ import annotations

import math

from torchlean.buffer import AnyBuffer
from torchlean.session import Parameter, Tensor
from torchlean._generated import ops as _ops


def _grads(op: str, parameters) -> list:
    """The Parameters among `parameters` (one Parameter or Tensor, or any iterable of them, as
    torch takes) that hold a gradient."""
    if isinstance(parameters, (Parameter, Tensor)):
        parameters = [parameters]
    out = []
    for p in parameters:
        if not hasattr(p, "grad_buf"):
            if getattr(p, "grad", None) is None:
                continue
            raise TypeError(f"{op}: expects nn.Parameters (whose gradients the optimizer "
                            f"reads), got a {type(p).__name__} with a gradient")
        if p.grad_buf is not None:
            out.append(p)
    return out


def _norm_on_device(bufs, norm_type):
    """One 0-d device buffer holding the norm_type-norm of all gradients taken together."""
    total = None
    for g in bufs:
        if math.isinf(norm_type):
            flat = _ops.reshape(_ops.abs(g), shape=(-1,))
            part = _ops.reduce_max(flat, axis=0)
            flat.release()
            combine = _ops.maximum
        elif norm_type == 2.0:
            powed = _ops.mul(g, g)   # |g|^2: g g is |g| |g| exactly, with one op fewer
            part = _ops.sum(powed)
            powed.release()
            combine = _ops.add
        else:
            a = _ops.abs(g)
            if norm_type == 1.0:
                powed = a
            else:   # |g|^p as exp(p log|g|): zeros give exp(-inf) = 0
                lg = _ops.log(a)
                a.release()
                powed = _ops.exp(_ops.scale(lg, c=norm_type))
                lg.release()
            part = _ops.sum(powed)
            powed.release()
            combine = _ops.add
        if total is None:
            total = part
        else:
            nxt = combine(total, part)
            total.release(); part.release()
            total = nxt
    return total


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> float:
    """Scale every gradient in place by min(1, max_norm / (total_norm + 1e-6)), where
    total_norm is the norm_type-norm of all gradients viewed as one vector (torch's rule).
    Computed on device from the gradients already there (no second backward); returns the
    total norm as a float (the one host read)."""
    norm_type = float(norm_type)
    if not (norm_type > 0):
        raise ValueError(f"clip_grad_norm_: norm_type must be > 0 or inf, got {norm_type}")
    if not math.isfinite(max_norm) or max_norm < 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be finite and >= 0, got {max_norm}")
    params = _grads("clip_grad_norm_", parameters)
    if not params:
        return 0.0
    total = _norm_on_device([p.grad_buf for p in params], norm_type)
    if math.isinf(norm_type) or norm_type == 1.0:
        norm = float(total.to_numpy())
    else:
        norm = float(total.to_numpy()) ** (1.0 / norm_type)
    total.release()
    if error_if_nonfinite and not math.isfinite(norm):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                           f"gradients is {norm}; set error_if_nonfinite=False to clip anyway")
    coef = max_norm / (norm + 1e-6)
    if coef < 1.0 or math.isnan(coef):
        # a NaN norm makes every gradient NaN, as torch (scale's factor must be finite)
        factor = None if math.isfinite(coef) else AnyBuffer.full((), coef)
        for p in params:
            g = p.grad_buf   # replaced, not released: a Tensor from p.grad may still read it
            p.grad_buf = _ops.scale(g, c=coef) if factor is None else _ops.mul(g, factor)
        if factor is not None:
            factor.release()
    return norm


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element to [-clip_value, clip_value] on device."""
    c = float(clip_value)
    if not math.isfinite(c) or c < 0:
        raise ValueError(f"clip_grad_value_: clip_value must be finite and >= 0, got {clip_value}")
    for p in _grads("clip_grad_value_", parameters):
        # replaced, not released: a Tensor from p.grad may still read the old buffer
        p.grad_buf = _ops.clamp(p.grad_buf, lo=-c, hi=c)
