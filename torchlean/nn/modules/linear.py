"""Linear and the reshaping layers around it: Flatten, Unflatten."""
from __future__ import annotations

import math

from torchlean.session import Parameter
from torchlean.nn import functional as F, init
from torchlean.nn.modules.base import Module
from torchlean.nn.arg_checks import check_numel, size_arg


class Linear(Module):
    """torch.nn.Linear: y = x W^T + b, W of shape (out_features, in_features)."""

    def __init__(self, fan_in, fan_out, bias=True):
        super().__init__()
        fan_in, fan_out = size_arg("Linear", "in_features", fan_in), \
            size_arg("Linear", "out_features", fan_out)
        self.in_features, self.out_features = fan_in, fan_out
        check_numel("Linear", "weight", (fan_out, fan_in))
        a = 1.0 / math.sqrt(fan_in) if fan_in else 0.0   # torch: no inputs, bound 0
        self.weight = Parameter(init.uniform((fan_out, fan_in), -a, a), name="weight")
        self.bias = Parameter(init.uniform((fan_out,), -a, a), name="bias") if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class Flatten(Module):
    """torch.nn.Flatten: axes start_dim..end_dim merged into one (default: all but the
    first)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)


class Unflatten(Module):
    """torch.nn.Unflatten: axis `dim` split into `unflattened_size`."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = int(dim), tuple(int(n) for n in unflattened_size)

    def forward(self, x):
        shp = tuple(x.shape)
        d = self.dim % len(shp) if shp else 0
        if not shp or math.prod(self.unflattened_size) != shp[d] and -1 not in self.unflattened_size:
            raise ValueError(f"Unflatten: unflattened_size {self.unflattened_size} must multiply "
                             f"to the size {shp[d] if shp else None} of dim {self.dim} of input "
                             f"{shp}")
        return x.reshape(shp[:d] + self.unflattened_size + shp[d + 1:])
