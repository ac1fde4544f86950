"""Step post-hooks of optimizers, as torch's: hook(optimizer, args, kwargs) runs after every
step() of any optimizer (register_optimizer_step_post_hook) or of one optimizer
(Optimizer.register_step_post_hook). Each registration returns a handle with remove()."""
from __future__ import annotations

import functools

_global_hooks: list = []


class RemovableHandle:
    def __init__(self, hooks: list, hook):
        self.hooks, self.hook = hooks, hook

    def remove(self) -> None:
        if self.hook in self.hooks:
            self.hooks.remove(self.hook)


def register_optimizer_step_post_hook(hook) -> RemovableHandle:
    """Run hook(optimizer, args, kwargs) after every optimizer's step()."""
    _global_hooks.append(hook)
    return RemovableHandle(_global_hooks, hook)


def register_instance_hook(hooks: list, hook) -> RemovableHandle:
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


def with_post_hooks(step):
    """step() followed by the global hooks then the instance's (its `_step_post_hooks`), once
    per call: a subclass's step() calling super().step() runs them after the outer one only."""
    @functools.wraps(step)
    def stepped(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        if type(self).step is stepped:
            for hook in (*_global_hooks, *self.__dict__.get("_step_post_hooks", ())):
                hook(self, args, kwargs)
        return out
    return stepped
