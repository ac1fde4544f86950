"""Optimizers over Parameters: state stays on device; fused sgd_step/adam_step kernels when the
registry has them, a same-math fallback from registry ops (or host NumPy for Adam) otherwise."""
from __future__ import annotations

import math

import numpy as np

from torchlean.buffer import AnyBuffer
from torchlean._generated import ops as _ops


class Optimizer:
    def __init__(self, params, defaults):
        self.params = list(params)
        self.defaults = dict(defaults)
        self.state: dict[int, dict] = {}

    def zero_grad(self):
        for p in self.params:
            p.zero_grad()

    def state_dict(self) -> dict:
        out = {"defaults": dict(self.defaults), "state": {}}
        for i, p in enumerate(self.params):
            st = self.state.get(id(p))
            if st:
                out["state"][i] = {k: (v.to_numpy() if isinstance(v, AnyBuffer) else v)
                                   for k, v in st.items()}
        return out

    def load_state_dict(self, sd: dict) -> None:
        self.defaults.update(sd["defaults"])
        for i, st in sd["state"].items():
            p = self.params[int(i)]
            self.state[id(p)] = {k: (AnyBuffer.from_numpy(np.asarray(v, np.float32))
                                     if isinstance(v, np.ndarray) else v) for k, v in st.items()}


class SGD(Optimizer):
    def __init__(self, params, lr=0.01, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        if not (math.isfinite(lr) and lr >= 0):
            raise ValueError(f"SGD: lr must be finite and >= 0, got {lr}")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def step(self):
        d = self.defaults
        for p in self.params:
            if p.grad_buf is None:
                continue
            st = self.state.setdefault(id(p), {})
            first = "buf" not in st
            if first:
                st["buf"] = AnyBuffer.zeros(p.shape)
            _ops.sgd_step(p.mirror(), p.grad_buf, st["buf"], lr=d["lr"], momentum=d["momentum"],
                          dampening=d["dampening"], weight_decay=d["weight_decay"],
                          nesterov=d["nesterov"], first=first)
            p.mark_device_updated()


class Adam(Optimizer):
    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1 and eps > 0 and weight_decay >= 0):
            raise ValueError(f"{type(self).__name__}: need betas in [0,1), eps > 0, wd >= 0")
        super().__init__(params, dict(lr=lr, beta1=betas[0], beta2=betas[1], eps=eps,
                                      weight_decay=weight_decay))

    def step(self):
        d = self.defaults
        for p in self.params:
            if p.grad_buf is None:
                continue
            st = self.state.setdefault(id(p), {})
            if "m" not in st:
                st["m"], st["v"], st["step"] = AnyBuffer.zeros(p.shape), AnyBuffer.zeros(p.shape), 0
            st["step"] += 1
            _ops.adam_step(p.mirror(), p.grad_buf, st["m"], st["v"], lr=d["lr"], beta1=d["beta1"],
                           beta2=d["beta2"], eps=d["eps"], weight_decay=d["weight_decay"],
                           decoupled=self.decoupled, step=st["step"])
            p.mark_device_updated()


class AdamW(Adam):
    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
