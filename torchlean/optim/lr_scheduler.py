"""Learning-rate schedulers with torch.optim.lr_scheduler's names, arguments and formulas.

Each scheduler computes the learning rate of epoch (step count) e in closed form from the
groups' initial_lr, so the value never drifts with the number of calls. Like torch, building a
scheduler already applies epoch 0 and step() advances one epoch.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from torchlean.optim.optimizer import Optimizer


class LRScheduler:
    def __init__(self, optimizer, last_epoch: int = -1):
        name = type(self).__name__
        self.optimizer = _check_optimizer(name, optimizer)
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
        elif any("initial_lr" not in g for g in optimizer.param_groups):
            raise KeyError(f"{name}: resuming with last_epoch={last_epoch} needs 'initial_lr' "
                           "in every parameter group (load the optimizer's state_dict first)")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, epoch: int) -> list:
        """The learning rate of every group at `epoch` (the closed form)."""
        raise NotImplementedError

    def step(self) -> None:
        self.last_epoch += 1
        self._apply(self.lr_at(self.last_epoch))

    def _apply(self, lrs):
        for g, lr in zip(self.optimizer.param_groups, lrs):
            g["lr"] = lr
        self._last_lr = list(lrs)

    def get_last_lr(self) -> list:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        """Everything but the optimizer (and lambdas, which cannot be saved), as torch."""
        return {k: v for k, v in self.__dict__.items()
                if k != "optimizer" and not callable(v) and k != "lr_lambdas"}

    def load_state_dict(self, sd: dict) -> None:
        self.__dict__.update(sd)


class StepLR(LRScheduler):
    """lr = base * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = _positive_int("StepLR", "step_size", step_size), gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return [b * self.gamma ** (epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = base * gamma ** (number of milestones <= epoch)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = sorted(_milestones("MultiStepLR", milestones))
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        k = bisect.bisect_right(self.milestones, epoch)
        return [b * self.gamma ** k for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if int(T_max) < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be >= 1, got {T_max}")
        self.T_max, self.eta_min = int(T_max), eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        c = (1 + math.cos(math.pi * epoch / self.T_max)) / 2
        return [self.eta_min + (b - self.eta_min) * c for b in self.base_lrs]


class LambdaLR(LRScheduler):
    """lr = base * lr_lambda(epoch); one function, or one per parameter group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(_check_optimizer("LambdaLR", optimizer).param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"LambdaLR: expected {n} lr_lambdas (one per group), got "
                                 f"{len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for i, f in enumerate(self.lr_lambdas):
            if not callable(f):
                what = f"lr_lambda[{i}]" if isinstance(lr_lambda, (list, tuple)) else "lr_lambda"
                raise TypeError(f"LambdaLR: {what} must be a function of the epoch, got {f!r} "
                                f"({type(f).__name__})")
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return [b * f(epoch) for b, f in zip(self.base_lrs, self.lr_lambdas)]


class LinearLR(LRScheduler):
    """Linear warm-up (or decay) of the factor from start_factor to end_factor over
    total_iters epochs, then constant: lr = base * factor."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if not (0 < start_factor <= 1 and 0 <= end_factor <= 1):
            raise ValueError(f"LinearLR: need 0 < start_factor <= 1 and 0 <= end_factor <= 1, "
                             f"got {start_factor}, {end_factor}")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = int(total_iters)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        t = min(epoch, self.total_iters) / self.total_iters if self.total_iters else 1.0
        f = self.start_factor + (self.end_factor - self.start_factor) * t
        return [b * f for b in self.base_lrs]


class SequentialLR(LRScheduler):
    """schedulers[i] from milestones[i-1] on, each counting its own epochs from 0 (the usual
    warm-up then cosine chain)."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expected {len(schedulers) - 1} milestones for "
                             f"{len(schedulers)} schedulers, got {len(milestones)}")
        self.schedulers = list(schedulers)
        self.milestones = _milestones("SequentialLR", milestones)
        for g, b in zip(_check_optimizer("SequentialLR", optimizer).param_groups, self.schedulers[0].base_lrs):
            g["lr"] = b
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        i = bisect.bisect_right(self.milestones, epoch)
        start = self.milestones[i - 1] if i else 0
        return self.schedulers[i].lr_at(epoch - start)

    def state_dict(self):
        sd = super().state_dict()
        sd["schedulers"] = [s.state_dict() for s in self.schedulers]
        return sd

    def load_state_dict(self, sd):
        sd = dict(sd)
        for s, ssd in zip(self.schedulers, sd.pop("schedulers")):
            s.load_state_dict(ssd)
        self.__dict__.update({k: v for k, v in sd.items() if k != "schedulers"})


class OneCycleLR(LRScheduler):
    """The 1cycle policy as torch: lr rises from max_lr / div_factor to max_lr over the first
    pct_start of total_steps, then anneals to initial_lr / final_div_factor (cosine or linear);
    momentum (SGD's momentum or Adam's beta1) cycles the opposite way when cycle_momentum."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        groups = _check_optimizer("OneCycleLR", optimizer).param_groups
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: pass total_steps, or epochs and steps_per_epoch")
            total_steps = int(epochs) * int(steps_per_epoch)
        if int(total_steps) < 1:
            raise ValueError(f"OneCycleLR: total_steps must be >= 1, got {total_steps}")
        if not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self.total_steps, self.anneal_strategy = int(total_steps), anneal_strategy
        t = float(self.total_steps)
        if three_phase:
            ends = [pct_start * t - 1, 2 * pct_start * t - 2, t - 1]
            keys = [("initial_lr", "max_lr"), ("max_lr", "initial_lr"), ("initial_lr", "min_lr")]
            moms = [("max_momentum", "base_momentum"), ("base_momentum", "max_momentum"),
                    ("max_momentum", "max_momentum")]
        else:
            ends = [pct_start * t - 1, t - 1]
            keys = [("initial_lr", "max_lr"), ("max_lr", "min_lr")]
            moms = [("max_momentum", "base_momentum"), ("base_momentum", "max_momentum")]
        self.phases = [dict(end_step=e, lr=k, momentum=m) for e, k, m in zip(ends, keys, moms)]
        max_lrs = _per_group(max_lr, len(groups), "max_lr")
        if last_epoch == -1:
            for g, m in zip(groups, max_lrs):
                g["initial_lr"] = m / div_factor
                g["max_lr"], g["min_lr"] = m, g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = "betas" in optimizer.defaults
            if not self.use_beta1 and "momentum" not in optimizer.defaults:
                raise ValueError("OneCycleLR: cycle_momentum needs an optimizer with momentum "
                                 "or betas")
            for g, bm, mm in zip(groups, _per_group(base_momentum, len(groups), "base_momentum"),
                                 _per_group(max_momentum, len(groups), "max_momentum")):
                if last_epoch == -1:
                    self._set_momentum(g, mm)
                g["base_momentum"], g["max_momentum"] = bm, mm
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, g, m):
        if self.use_beta1:
            g["betas"] = (m,) + tuple(g["betas"][1:])
        else:
            g["momentum"] = m

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _at(self, g, epoch, what):
        start_step = 0.0
        for i, ph in enumerate(self.phases):
            end_step = ph["end_step"]
            if epoch <= end_step or i == len(self.phases) - 1:
                pct = (epoch - start_step) / (end_step - start_step)
                a, b = ph[what]
                return self._anneal(g[a], g[b], pct)
            start_step = end_step
        raise AssertionError("unreachable")

    def lr_at(self, epoch):
        if epoch > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {epoch} times, total_steps is "
                             f"{self.total_steps}")
        return [self._at(g, epoch, "lr") for g in self.optimizer.param_groups]

    def step(self):
        super().step()
        if self.cycle_momentum:
            for g in self.optimizer.param_groups:
                self._set_momentum(g, self._at(g, self.last_epoch, "momentum"))


def _check_optimizer(name, optimizer):
    """The optimizer itself; anything else raises TypeError here rather than an AttributeError
    about param_groups deep inside the scheduler."""
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{name}: optimizer must be a torchlean.optim.Optimizer (SGD, Adam, ...), "
                        f"got {type(optimizer).__name__}")
    return optimizer


def _milestones(name, milestones):
    """The epochs as ints >= 0; a float, string or bool raises instead of going through int()."""
    if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
        raise TypeError(f"{name}: milestones must be a list of epochs (ints), got {milestones!r}")
    return [_positive_int(name, f"milestones[{i}]", m, least=0)
            for i, m in enumerate(milestones)]


def _positive_int(name, what, v, least=1):
    """An int >= least; a float (2.5) or bool raises TypeError instead of being truncated."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name}: {what} must be an integer, got {v!r} ({type(v).__name__})")
    if v < least:
        raise ValueError(f"{name}: {what} must be >= {least}, got {v}")
    return int(v)


class ExponentialLR(LRScheduler):
    """lr = base * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return [b * self.gamma ** epoch for b in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: lr = eta_min + (base - eta_min) (1 + cos(pi T_cur / T_i)) / 2, where the i-th
    period lasts T_i = T_0 T_mult^i epochs and T_cur counts epochs since the last restart.
    step(epoch) also takes a fractional epoch (e.g. epoch + batch / batches), as torch."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        name = "CosineAnnealingWarmRestarts"
        self.T_0 = _positive_int(name, "T_0", T_0)
        self.T_mult = _positive_int(name, "T_mult", T_mult)
        if not isinstance(eta_min, (int, float)) or isinstance(eta_min, bool):
            raise TypeError(f"{name}: eta_min must be a number, got {eta_min!r}")
        self.eta_min = float(eta_min)
        super().__init__(optimizer, last_epoch)

    def _period(self, epoch):
        """(T_cur, T_i) at `epoch`."""
        if self.T_mult == 1:
            return epoch % self.T_0, self.T_0
        n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
        start = self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
        if epoch < start:                         # log rounding at a period boundary
            n -= 1
        elif epoch >= start + self.T_0 * self.T_mult ** n:
            n += 1
        start = self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
        return epoch - start, self.T_0 * self.T_mult ** n

    def lr_at(self, epoch):
        if epoch < 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: epoch must be >= 0, got {epoch}")
        t_cur, t_i = self._period(epoch)
        c = (1 + math.cos(math.pi * t_cur / t_i)) / 2
        return [self.eta_min + (b - self.eta_min) * c for b in self.base_lrs]

    def step(self, epoch=None):
        if epoch is None:
            super().step()
            return
        self.last_epoch = math.floor(epoch)
        self._apply(self.lr_at(epoch))


class ReduceLROnPlateau:
    """Multiply every group's lr by factor (not below min_lr) once the metric passed to
    step(metrics) has not improved for more than `patience` epochs; improvement is relative or
    absolute (threshold_mode) in `mode` ('min' or 'max'); cooldown epochs follow each cut."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        name = "ReduceLROnPlateau"
        _check_optimizer(name, optimizer)
        if not factor < 1.0:
            raise ValueError(f"{name}: factor should be < 1.0, got {factor}")
        if mode not in ("min", "max"):
            raise ValueError(f"{name}: mode {mode!r} is unknown; expected 'min' or 'max'")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"{name}: threshold mode {threshold_mode!r} is unknown; expected "
                             "'rel' or 'abs'")
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"{name}: expected {n} min_lrs (one per group), got "
                                 f"{len(min_lr)}")
            self.min_lrs = [float(v) for v in min_lr]
        else:
            self.min_lrs = [float(min_lr)] * n
        self.optimizer, self.mode, self.factor = optimizer, mode, float(factor)
        self.patience = _positive_int(name, "patience", patience, least=0)
        self.cooldown = _positive_int(name, "cooldown", cooldown, least=0)
        self.threshold, self.threshold_mode, self.eps = float(threshold), threshold_mode, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def is_better(self, a, best):
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel"
                        else best - self.threshold)
        return a > (best * (1.0 + self.threshold) if self.threshold_mode == "rel"
                    else best + self.threshold)

    def step(self, metrics):
        current = float(metrics)
        self.last_epoch += 1
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for g, low in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(g["lr"] * self.factor, low)
                if g["lr"] - new > self.eps:
                    g["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, sd: dict) -> None:
        self.__dict__.update(sd)


def _per_group(v, n, what):
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(f"OneCycleLR: expected {n} values of {what} (one per group), got "
                             f"{len(v)}")
        return list(v)
    return [v] * n


__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "CosineAnnealingLR", "LambdaLR", "LinearLR",
           "SequentialLR", "OneCycleLR", "ExponentialLR", "CosineAnnealingWarmRestarts",
           "ReduceLROnPlateau"]
