"""Optimizers over Parameters with PyTorch's parameter groups: `param_groups` is a list of dicts
(each with its "params" and its own lr, weight_decay, momentum or betas); state (momentum
buffers, Adam moments) stays on device and is updated by the fused sgd_step/adam_step kernels,
in place on each parameter's storage (nothing is released that another thread may read).
state_dict()/load_state_dict() copy every state value exactly, so training resumes
bit-identically."""
from __future__ import annotations

import math

import numpy as np

from torchlean import _capture
from torchlean.buffer import AnyBuffer
from torchlean.optim import hooks as _hooks
from torchlean.parameter import Parameter, _locks_d, check_training_thread, training_lock
from torchlean._generated import ops as _ops


class Optimizer:
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:   # post-step hooks (torch's) after each subclass's step()
            cls.step = _hooks.with_post_hooks(cls.step)

    def register_step_post_hook(self, hook):
        """Run hook(self, args, kwargs) after each step() of this optimizer."""
        return _hooks.register_instance_hook(self.__dict__.setdefault("_step_post_hooks", []), hook)

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = []
        self._state: dict[int, dict] = {}       # id(Parameter) -> its state
        self._step_syncs: list = []   # captured steps (cuda.graph_step) with replays to count
        name = type(self).__name__
        if isinstance(params, (Parameter, dict)) or not hasattr(params, "__iter__"):
            raise TypeError(f"{name}: params must be an iterable of Parameters or of parameter "
                            f"group dicts, got {type(params).__name__}")
        self._check_group(dict(self.defaults))   # bad options raise before anything else
        params = list(params)
        if not params:
            raise ValueError(f"{name}: optimizer got an empty parameter list")
        if params and all(isinstance(g, dict) for g in params):
            for g in params:
                self.add_param_group(g)
        else:
            self.add_param_group({"params": params})

    def add_param_group(self, group: dict) -> None:
        """Add a group; options it leaves out take the optimizer's defaults."""
        name = type(self).__name__
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError(f"{name}: a parameter group is a dict with a 'params' entry, got "
                            f"{type(group).__name__}")
        g = dict(group)
        ps = g["params"]
        g["params"] = [ps] if isinstance(ps, Parameter) else list(ps)
        for p in g["params"]:
            if not isinstance(p, Parameter):
                raise TypeError(f"{name}: params must be torchlean Parameters, got "
                                f"{type(p).__name__}")
        if len({id(p) for p in g["params"]}) != len(g["params"]):
            raise ValueError(f"{name}: a parameter group holds the same parameter more than "
                             "once; it would be stepped twice per step")
        seen = {id(p) for other in self.param_groups for p in other["params"]}
        if any(id(p) in seen for p in g["params"]):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        for k, v in self.defaults.items():
            g.setdefault(k, v)
        self._check_group(g)
        self.param_groups.append(g)

    def _check_group(self, g: dict) -> None:
        """Validate one group's hyperparameters (ValueError naming the optimizer)."""

    @property
    def state(self) -> dict:
        """id(Parameter) -> that parameter's state. A replayed captured step advances Adam's
        step counts on the device; reading the state first brings the host's up to date."""
        for sync in self._step_syncs:
            sync()
        return self._state

    @state.setter
    def state(self, value: dict) -> None:
        self._state = value

    @property
    def params(self) -> list:
        """Every parameter, group after group (the order state_dict() numbers them in)."""
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none: bool = True):
        for g in self.param_groups:   # self.params' order, without building its list
            for p in g["params"]:
                p.zero_grad(set_to_none)

    def state_dict(self) -> dict:
        """{"state": {index: {name: value}}, "param_groups": [options + "params": indices]}
        as torch, with device buffers copied to float32 NumPy arrays."""
        index = {id(p): i for i, p in enumerate(self.params)}
        state = {}
        for p in self.params:
            st = self.state.get(id(p))
            if st:
                state[index[id(p)]] = {k: (v.to_numpy() if isinstance(v, AnyBuffer) else v)
                                       for k, v in st.items()}
        groups = [dict({k: v for k, v in g.items() if k != "params"},
                       params=[index[id(p)] for p in g["params"]]) for g in self.param_groups]
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, sd: dict) -> None:
        """Restore options and state saved by state_dict() from an optimizer over parameters of
        the same shapes in the same group structure."""
        name = type(self).__name__
        groups = sd["param_groups"]
        if [len(g["params"]) for g in groups] != [len(g["params"]) for g in self.param_groups]:
            raise ValueError(f"{name}.load_state_dict: saved groups hold "
                             f"{[len(g['params']) for g in groups]} parameters, this optimizer's "
                             f"{[len(g['params']) for g in self.param_groups]}")
        params = self.params
        for g, saved in zip(self.param_groups, groups):
            g.update({k: (tuple(v) if isinstance(v, list) else v)
                      for k, v in saved.items() if k != "params"})
        # the old state buffers are dropped, not released: a checkpoint being written by
        # another thread may still read them
        self.state = {}
        for i, st in sd["state"].items():
            p = params[int(i)]
            new = {}
            for k, v in st.items():
                if isinstance(v, np.ndarray):
                    if v.shape != p.shape:
                        raise ValueError(f"{name}.load_state_dict: state {k!r} of parameter {i} "
                                         f"has shape {v.shape}, the parameter {p.shape}")
                    v = AnyBuffer.from_numpy(np.asarray(v, np.float32))
                new[k] = v
            self.state[id(p)] = new

    def _with_grads(self):
        """(group, parameter) for every parameter that has a gradient, with the parameter's
        training lock held until the caller asks for the next one."""
        if _capture.STATE.active:
            _capture.note_optimizer(self)
        op = None
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad_buf is not None:
                    with training_lock(p):   # held while the step reads the gradient
                        check_training_thread(p, op or (op := f"{type(self).__name__}.step"))
                        yield g, p


class SGD(Optimizer):
    def __init__(self, params, lr=0.01, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def _check_group(self, g):
        if not (math.isfinite(g["lr"]) and g["lr"] >= 0):
            raise ValueError(f"SGD: lr must be finite and >= 0, got {g['lr']}")
        if not (math.isfinite(g["momentum"]) and g["momentum"] >= 0):
            raise ValueError(f"SGD: momentum must be finite and >= 0, got {g['momentum']}")
        if g["nesterov"] and (g["momentum"] <= 0 or g["dampening"] != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        if not (math.isfinite(g["weight_decay"]) and g["weight_decay"] >= 0):
            raise ValueError(f"SGD: weight_decay must be finite and >= 0, got {g['weight_decay']}")

    def step(self):
        state = self.state
        # _with_grads, inline (this runs per parameter per step): each parameter's training
        # lock held while its step reads the gradient; a group's options read once
        if _capture.STATE.active:
            _capture.note_optimizer(self)
        op = None
        for g in self.param_groups:
            opts = None
            for p in g["params"]:
                if p.grad_buf is None:
                    continue
                e = _locks_d.get(id(p))   # training_lock(p), inline
                with (e[1] if e is not None and e[0]() is p else training_lock(p)):
                    check_training_thread(p, op or (op := f"{type(self).__name__}.step"))
                    if opts is None:
                        opts = (g["lr"], g["momentum"], g["dampening"], g["weight_decay"],
                                g["nesterov"])
                    st = state.setdefault(id(p), {})
                    first = "buf" not in st
                    if first:
                        st["buf"] = AnyBuffer.zeros(p.shape)
                    _ops.sgd_step(p.mirror(), p.grad_buf, st["buf"], lr=opts[0],
                                  momentum=opts[1], dampening=opts[2], weight_decay=opts[3],
                                  nesterov=opts[4], first=first)
                    p.mark_device_updated()


class Adam(Optimizer):
    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    def _check_group(self, g):
        b1, b2 = g["betas"]
        if not (0 <= b1 < 1 and 0 <= b2 < 1 and g["eps"] > 0 and g["weight_decay"] >= 0
                and math.isfinite(g["lr"]) and g["lr"] >= 0):
            raise ValueError(f"{type(self).__name__}: need lr >= 0, betas in [0, 1), eps > 0, "
                             f"weight_decay >= 0; got lr={g['lr']}, betas={g['betas']}, "
                             f"eps={g['eps']}, weight_decay={g['weight_decay']}")

    def step(self):
        state = self.state
        for g, p in self._with_grads():
            st = state.setdefault(id(p), {})
            if "m" not in st:
                with _capture.persistent():   # inside a capture: zeroed once, not per replay
                    st["m"], st["v"], st["step"] = AnyBuffer.zeros(p.shape), \
                        AnyBuffer.zeros(p.shape), 0
            st["step"] += 1
            b1, b2 = g["betas"]
            _ops.adam_step(p.mirror(), p.grad_buf, st["m"], st["v"], lr=g["lr"], beta1=b1,
                           beta2=b2, eps=g["eps"], weight_decay=g["weight_decay"],
                           decoupled=self.decoupled, step=st["step"])
            p.mark_device_updated()


class AdamW(Adam):
    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
