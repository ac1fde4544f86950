"""torch.nn's parameter-free elementwise modules beyond ReLU/GELU/Tanh/Sigmoid: each holds its
options and calls the functional form (composites of registry ops in nn.functional)."""
from __future__ import annotations

from torchlean.nn import functional as F
from torchlean.nn.modules import Module


class Identity(Module):
    """Returns its input; any constructor arguments are ignored, as torch."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, input):
        return F.silu(input)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, input):
        return F.elu(input, self.alpha)


class Dropout2d(Module):
    """Zeroes whole channels with probability p in training (F.dropout2d); eval: identity."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout2d: p must be in [0, 1], got {p}")
        self.p = float(p)

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training)


class Softmax(Module):
    """softmax over `dim` (None: the last axis; see F.softmax)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim)
