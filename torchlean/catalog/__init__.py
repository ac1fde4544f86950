"""PyTorch's operator catalog beyond the core Tensor class.

One module per family under torchlean/catalog/ (pointwise math, shapes, reductions, sorting and
scans, indexing, nn.functional extras, linalg, special, fft, masked, signal windows). Each is
written against the public Tensor API and the registry's tape ops, and lists what it offers:

    METHODS  names bound as methods of the float Tensor (and Parameter) (the function takes
             the tensor first)
    INT_METHODS  names bound as IntTensor methods too (the function handles int64 input)
    INPLACE  names whose in-place twin `name_` PyTorch has: bound as Tensor.`name_`, which
             writes the out-of-place result into the tensor (Tensor.copy_: same bits, the
             mutation model's version counter and autograd rules)
    EXPORTS  {namespace: names}: "torch" (torchlean.X), "nn.functional", "special", "linalg",
             "fft", "masked", "signal.windows"

install() runs once, at the end of `import torchlean`, and binds every family's names. It never
replaces a name the core already defines (Tensor methods, torchlean.X), so the core's own
definitions win and a family cannot silently shadow one.
"""
from __future__ import annotations

import importlib
import pkgutil


def families() -> list[str]:
    """Module names of the catalog's families, in a fixed (sorted) order."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def _inplace_twin(name: str):
    def twin(self, *args, **kwargs):
        return self.copy_(getattr(self, name)(*args, **kwargs))
    twin.__name__ = twin.__qualname__ = name + "_"
    twin.__doc__ = f"In-place {name}: self.copy_(self.{name}(...)), returning self."
    return twin


def install(float_classes, int_class, namespaces: dict) -> None:
    """Bind every family's METHODS / INPLACE on each class in `float_classes`, its INT_METHODS on
    `int_class`, and its EXPORTS into `namespaces` (namespace name -> module object)."""
    for fam in families():
        mod = importlib.import_module(f"{__name__}.{fam}")
        for name in getattr(mod, "INT_METHODS", ()):
            if not hasattr(int_class, name):
                setattr(int_class, name, getattr(mod, name))
        for cls in float_classes:
            for name in getattr(mod, "METHODS", ()):
                if not hasattr(cls, name):
                    setattr(cls, name, getattr(mod, name))
            for name in getattr(mod, "INPLACE", ()):
                if not hasattr(cls, name + "_"):
                    setattr(cls, name + "_", _inplace_twin(name))
        for ns_name, names in getattr(mod, "EXPORTS", {}).items():
            ns = namespaces[ns_name]
            for name in names:
                if not hasattr(ns, name):
                    setattr(ns, name, getattr(mod, name))
