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
            if hasattr(_ops, "sgd_step"):
                _ops.sgd_step(p.mirror(), p.grad_buf, st["buf"], lr=d["lr"],
                              momentum=d["momentum"], dampening=d["dampening"],
                              weight_decay=d["weight_decay"], nesterov=d["nesterov"], first=first)
                p.mark_device_updated()
            else:
                self._fallback(p, st, first)

    def _fallback(self, p, st, first):
        d = self.defaults
        w = p.mirror()
        g = p.grad_buf
        tmp = []
        if d["weight_decay"]:
            g = _ops.add(g, _ops.mul(w, AnyBuffer.full((), d["weight_decay"])))
        if d["momentum"]:
            m = AnyBuffer.full((), d["momentum"])
            if first:
                nb = g.copy()
            else:
                nb = _ops.add(_ops.mul(st["buf"], m), _ops.mul(g, AnyBuffer.full((), 1 - d["dampening"])))
            st["buf"].release()
            st["buf"] = nb
            g = _ops.add(g, _ops.mul(nb, m)) if d["nesterov"] else nb
        p.set_mirror(_ops.add(w, _ops.mul(g, AnyBuffer.full((), -d["lr"]))))


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
            if hasattr(_ops, "adam_step"):
                _ops.adam_step(p.mirror(), p.grad_buf, st["m"], st["v"], lr=d["lr"],
                               beta1=d["beta1"], beta2=d["beta2"], eps=d["eps"],
                               weight_decay=d["weight_decay"], decoupled=self.decoupled,
                               step=st["step"])
                p.mark_device_updated()
            else:  # host fallback with the same math until the fused kernel lands
                w, g = p.data.astype(np.float64), p.grad_buf.to_numpy().astype(np.float64)
                m, v, t = st["m"].to_numpy(), st["v"].to_numpy(), st["step"]
                if d["weight_decay"] and not self.decoupled:
                    g = g + d["weight_decay"] * w
                m = d["beta1"] * m + (1 - d["beta1"]) * g
                v = d["beta2"] * v + (1 - d["beta2"]) * g * g
                mh, vh = m / (1 - d["beta1"] ** t), v / (1 - d["beta2"] ** t)
                if d["weight_decay"] and self.decoupled:
                    w = w - d["lr"] * d["weight_decay"] * w
                w = w - d["lr"] * mh / (np.sqrt(vh) + d["eps"])
                st["m"].release(); st["v"].release()
                st["m"], st["v"] = AnyBuffer.from_numpy(m.astype(np.float32)), AnyBuffer.from_numpy(v.astype(np.float32))
                p.set_mirror(AnyBuffer.from_numpy(w.astype(np.float32)))


class AdamW(Adam):
    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
