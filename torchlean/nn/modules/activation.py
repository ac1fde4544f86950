"""torch.nn's parameter-free elementwise modules (activations, dropout, softmax): each holds its
options and calls a registry op or its functional form in nn.functional."""
from __future__ import annotations

from torchlean.nn import functional as F
from torchlean.nn.modules.base import Module


class _Act(Module):
    op = ""

    def __init__(self, inplace=False):
        super().__init__()   # inplace is accepted (torch's ReLU(inplace=True)); no effect

    def forward(self, x):
        return x.session.op(self.op, x)


class ReLU(_Act):
    op = "relu"


class GELU(Module):
    """torch.nn.GELU: approximate="none" (the default, exact erf form) or "tanh"."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)


class Softplus(Module):
    """torch.nn.Softplus(beta=1, threshold=20)."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = float(beta), float(threshold)

    def forward(self, x):
        return F.softplus(x, beta=self.beta, threshold=self.threshold)


class Tanh(_Act):
    op = "tanh"


class Sigmoid(_Act):
    op = "sigmoid"


class Dropout(Module):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) in training;
    the identity in eval()."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


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
