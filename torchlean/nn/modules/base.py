"""Module, the tree of Parameters, buffers and child Modules every layer builds on, and the
containers that hold children: Sequential, ModuleList, ModuleDict."""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from torchlean.session import Parameter
from torchlean.nn.checkpoint import save_file, load_file
from torchlean.nn.arg_checks import check_real_state


# every Module alive, in the order they were made (a weak reference each): a record's first
# optimizer step names its parameters from the modules holding them (torchlean.audit.recorder)
# without scanning every object of the process
_LIVE = weakref.WeakValueDictionary()
_made = itertools.count()


def live_modules() -> list:
    """The Modules alive now, oldest first."""
    return list(_LIVE.values())


class Module:
    """A tree of Parameters (trained), buffers (saved state that is not trained, e.g. BatchNorm's
    running statistics) and child Modules, like torch.nn.Module."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        _LIVE[next(_made)] = self
        return self

    def __init__(self):
        object.__setattr__(self, "_params", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)

    def __setattr__(self, k, v):
        if k in self._buffers:
            b = self._buffers[k]
            if b is None or v is None or tuple(np.shape(v)) != tuple(b.shape):
                # a new buffer (torch rebinds it): registered again under the same name
                self.register_buffer(k, v, persistent=k not in self._non_persistent)
            elif v is not b:
                b.set(v)   # same shape: written in place (its readers see old or new values)
            return
        if isinstance(v, Parameter):
            self._params[k] = v
        elif isinstance(v, Module):
            self._modules[k] = v
        object.__setattr__(self, k, v)

    def register_buffer(self, name: str, tensor, persistent: bool = True):
        """Non-trainable state kept on device (a Tensor that is never trained), saved in
        state_dict() unless persistent=False; None registers an empty slot, as torch."""
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"register_buffer: buffer name must be a non-empty string without "
                           f"'.', got {name!r}")
        if name in self._params or name in self._modules:
            raise KeyError(f"register_buffer: attribute '{name}' already exists")
        b = None if tensor is None else Parameter(tensor, requires_grad=False, name=name)
        self._buffers[name] = b
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        object.__setattr__(self, name, b)
        return b

    def named_parameters(self, prefix="", _seen=None):
        """(dotted name, Parameter), each Parameter once (under its first name) even when
        modules share it (tied weights), as in PyTorch: an optimizer then steps it once."""
        seen = set() if _seen is None else _seen
        for k, p in self._params.items():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                yield prefix + k, p
        for k, m in self._modules.items():
            yield from m.named_parameters(prefix + k + ".", seen)

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def named_buffers(self, prefix=""):
        for k, b in self._buffers.items():
            if b is not None:
                yield prefix + k, b
        for k, m in self._modules.items():
            yield from m.named_buffers(prefix + k + ".")

    def buffers(self):
        return [b for _, b in self.named_buffers()]

    def children(self):
        return list(self._modules.values())

    def modules(self):
        yield self
        for m in self._modules.values():
            yield from m.modules()

    def _named_state(self, prefix=""):
        """PyTorch's state_dict order: each module's parameters, then its buffers, then children."""
        for k, p in self._params.items():
            if p is not None:
                yield prefix + k, p
        for k, b in self._buffers.items():
            if b is not None and k not in self._non_persistent:
                yield prefix + k, b
        for k, m in self._modules.items():
            yield from m._named_state(prefix + k + ".")

    def train(self, mode=True):
        object.__setattr__(self, "training", mode)
        for m in self._modules.values():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True):
        """Gradients become None (torch's default) or, set_to_none=False, zeros in place."""
        for p in self.parameters():
            p.zero_grad(set_to_none)

    def state_dict(self) -> dict:
        """Host copies of every parameter and buffer, keyed by dotted name."""
        return {k: p.numpy() for k, p in self._named_state()}

    def load_state_dict(self, sd, strict: bool = True):
        """Load parameters and buffers from a dict or a safetensors path. strict (default, like
        PyTorch) raises KeyError on missing or unexpected keys; otherwise loads what matches and
        returns (missing, unexpected)."""
        if isinstance(sd, str):
            sd = load_file(sd)
        state = dict(self._named_state())
        missing = sorted(set(state) - set(sd))
        unexpected = sorted(set(sd) - set(state))
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        check_real_state("load_state_dict", sd)
        for k, p in state.items():
            if k in sd:
                p.set(sd[k])
        for m in self.modules():
            m._after_load()
        return missing, unexpected

    def _after_load(self):
        """Hook for modules that mirror buffer values in host attributes."""

    def save(self, path: str) -> None:
        save_file(self.state_dict(), path)

    def __call__(self, *a, **kw):
        return self.forward(*a, **kw)

    # tree walks as torch.nn.Module ---------------------------------------------------------
    def named_modules(self, prefix=""):
        """(dotted name, module) for this module ('' for itself) and every descendant."""
        yield prefix, self
        for k, m in self._modules.items():
            yield from m.named_modules(prefix + ("." if prefix else "") + k)

    def named_children(self):
        yield from self._modules.items()

    def apply(self, fn):
        """fn(module) on every descendant, then on this module (torch's order); returns self."""
        for m in self._modules.values():
            m.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad: bool = True):
        """Freeze (False) or unfreeze every parameter; buffers are never trained."""
        for p in self.parameters():
            p.requires_grad = bool(requires_grad)
        return self

    def to(self, *args, **kwargs):
        """torch's model.to(device) / to(dtype): parameters already live on the backend chosen
        at import, so this checks the target (cuda on the stub raises) and returns self."""
        from torchlean.devices import parse_to
        dt = parse_to("Module.to", args, kwargs)
        if dt is not None and not dt.is_floating_point:
            raise TypeError(f"Module.to: parameters are float32, got dtype {dt}")
        return self

    def cuda(self, device=None):
        from torchlean.devices import check_cuda
        check_cuda("Module.cuda")
        return self

    def cpu(self):
        return self


class Sequential(Module):
    """Modules applied in order; Sequential(OrderedDict(name=module)) names them, as torch."""

    def __init__(self, *mods):
        super().__init__()
        named = mods[0].items() if len(mods) == 1 and isinstance(mods[0], dict) else \
            ((str(i), m) for i, m in enumerate(mods))
        for k, m in named:
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: {k} is not a Module, got {type(m).__name__}")
            setattr(self, k, m)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Sequential(dict(list(self._modules.items())[i]))
        return list(self._modules.values())[i]

    def __setitem__(self, i, module):
        """model[i] = module replaces the i-th child, keeping its name (as torch)."""
        if not isinstance(module, Module):
            raise TypeError(f"Sequential.__setitem__: expected a Module, got "
                            f"{type(module).__name__}")
        names = list(self._modules)
        if isinstance(i, bool) or not isinstance(i, int) or not -len(names) <= i < len(names):
            raise IndexError(f"Sequential.__setitem__: index {i!r} is out of range for "
                             f"{len(names)} modules")
        setattr(self, names[i], module)

    def __len__(self):
        return len(self._modules)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(Module):
    """A list of modules registered as children '0', '1', ... (state_dict keys as torch)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m):
        if not isinstance(m, Module):
            raise TypeError(f"ModuleList.append: expected a Module, got {type(m).__name__}")
        setattr(self, str(len(self._modules)), m)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        items = list(self._modules.values())
        if isinstance(i, slice):
            return ModuleList(items[i])
        return items[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(list(self._modules.values()))


class ModuleDict(Module):
    """A dict of modules registered as children under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        for k, m in (dict(modules) if modules is not None else {}).items():
            self[k] = m

    def __setitem__(self, k, m):
        if not isinstance(m, Module):
            raise TypeError(f"ModuleDict[{k!r}]: expected a Module, got {type(m).__name__}")
        setattr(self, str(k), m)

    def __getitem__(self, k):
        return self._modules[k]

    def __contains__(self, k):
        return k in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(list(self._modules))

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()
