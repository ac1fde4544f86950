"""RMSprop and Adagrad as torch.optim documents them, composed from the registry's elementwise
kernels on device buffers (no fused kernel of their own): state lives on device, the
update is copied into the parameter's storage in place, temporaries are released at once."""
from __future__ import annotations

import math

import numpy as np

from torchlean import inplace as _inplace
from torchlean.buffer import AnyBuffer
from torchlean.optim.optimizer import Optimizer
from torchlean._generated import ops as _ops


class _Scratch:
    """Buffers made during one update, released together."""

    def __init__(self):
        self.bufs = []

    def __call__(self, buf):
        self.bufs.append(buf)
        return buf

    def scalar(self, v):
        return self(AnyBuffer.from_numpy(np.array(v, np.float32)))

    def release(self):
        for b in self.bufs:
            b.release()


def _check(name, ok, what, value):
    if not ok:
        raise ValueError(f"{name}: invalid {what} value: {value}")


def _grad(t, g, p):
    """The gradient with maximize and L2 weight decay applied: g (+ wd * p)."""
    grad = p.grad_buf
    if g.get("maximize"):
        grad = t(_ops.scale(grad, c=-1.0))
    if g["weight_decay"]:
        grad = t(_ops.axpy(grad, p.mirror(), c=g["weight_decay"]))
    return grad


def _replace(st, key, buf):
    st[key] = buf   # the old buffer goes with its last reference (a checkpoint may read it)


def _write(p, new):
    """p's storage := new, in place (readers of p see the old or the new values)."""
    _inplace.copy_into(p.mirror(), new, f"{type(p).__name__} update")
    new.release()


class RMSprop(Optimizer):
    """v = alpha v + (1 - alpha) g^2; centered: g_avg = alpha g_avg + (1 - alpha) g and the
    denominator sqrt(v - g_avg^2) + eps (else sqrt(v) + eps); with momentum
    buf = momentum buf + g / denom, p -= lr buf; without, p -= lr g / denom."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def _check_group(self, g):
        _check("RMSprop", math.isfinite(g["lr"]) and g["lr"] >= 0, "learning rate", g["lr"])
        _check("RMSprop", g["eps"] >= 0, "epsilon", g["eps"])
        _check("RMSprop", g["momentum"] >= 0, "momentum", g["momentum"])
        _check("RMSprop", g["weight_decay"] >= 0, "weight_decay", g["weight_decay"])
        _check("RMSprop", g["alpha"] >= 0, "alpha", g["alpha"])

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for g, p in self._with_grads():
            st = self.state.setdefault(id(p), {})
            if "square_avg" not in st:
                st["step"], st["square_avg"] = 0, AnyBuffer.zeros(p.shape)
                if g["momentum"] > 0:
                    st["momentum_buffer"] = AnyBuffer.zeros(p.shape)
                if g["centered"]:
                    st["grad_avg"] = AnyBuffer.zeros(p.shape)
            st["step"] += 1
            t = _Scratch()
            a = g["alpha"]
            grad = _grad(t, g, p)
            sq = t(_ops.mul(grad, grad))
            _replace(st, "square_avg", _ops.axpy(t(_ops.scale(st["square_avg"], c=a)), sq,
                                                 c=1.0 - a))
            v = st["square_avg"]
            if g["centered"]:
                _replace(st, "grad_avg", _ops.axpy(t(_ops.scale(st["grad_avg"], c=a)), grad,
                                                   c=1.0 - a))
                ga = st["grad_avg"]
                v = t(_ops.sub(v, t(_ops.mul(ga, ga))))
            denom = t(_ops.add(t(_ops.sqrt(v)), t.scalar(g["eps"])))
            step = t(_ops.div(grad, denom))
            if g["momentum"] > 0:
                _replace(st, "momentum_buffer",
                         _ops.axpy(step, t(_ops.scale(st["momentum_buffer"], c=g["momentum"])),
                                   c=1.0))
                step = st["momentum_buffer"]
            _write(p, _ops.axpy(p.mirror(), step, c=-g["lr"]))
            t.release()
        return loss


class Adagrad(Optimizer):
    """sum += g^2 (sum starts at initial_accumulator_value); p -= clr g / (sqrt(sum) + eps)
    with clr = lr / (1 + (step - 1) lr_decay)."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize))

    def _check_group(self, g):
        _check("Adagrad", math.isfinite(g["lr"]) and g["lr"] >= 0, "learning rate", g["lr"])
        _check("Adagrad", g["lr_decay"] >= 0, "lr_decay", g["lr_decay"])
        _check("Adagrad", g["weight_decay"] >= 0, "weight_decay", g["weight_decay"])
        _check("Adagrad", g["initial_accumulator_value"] >= 0, "initial_accumulator_value",
               g["initial_accumulator_value"])
        _check("Adagrad", g["eps"] >= 0, "epsilon", g["eps"])

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for g, p in self._with_grads():
            st = self.state.setdefault(id(p), {})
            if "sum" not in st:
                st["step"] = 0
                st["sum"] = AnyBuffer.from_numpy(
                    np.full(p.shape, g["initial_accumulator_value"], np.float32))
            st["step"] += 1
            t = _Scratch()
            grad = _grad(t, g, p)
            _replace(st, "sum", _ops.add(st["sum"], t(_ops.mul(grad, grad))))
            denom = t(_ops.add(t(_ops.sqrt(st["sum"])), t.scalar(g["eps"])))
            clr = g["lr"] / (1.0 + (st["step"] - 1) * g["lr_decay"])
            _write(p, _ops.axpy(p.mirror(), t(_ops.div(grad, denom)), c=-clr))
            t.release()
        return loss
