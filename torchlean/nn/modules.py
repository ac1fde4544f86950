"""Modules: a tree of Parameters plus forward(x) built from registry ops (DESIGN names/orders)."""
from __future__ import annotations

import math

import numpy as np

from torchlean.session import Parameter, Tensor
from torchlean.nn import functional as F, init
from torchlean.nn.checkpoint import save_file, load_file


class Module:
    def __init__(self):
        object.__setattr__(self, "_params", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, k, v):
        if isinstance(v, Parameter):
            self._params[k] = v
        elif isinstance(v, Module):
            self._modules[k] = v
        object.__setattr__(self, k, v)

    def named_parameters(self, prefix=""):
        for k, p in self._params.items():
            yield prefix + k, p
        for k, m in self._modules.items():
            yield from m.named_parameters(prefix + k + ".")

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def train(self, mode=True):
        object.__setattr__(self, "training", mode)
        for m in self._modules.values():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def state_dict(self) -> dict:
        return {k: p.numpy() for k, p in self.named_parameters()}

    def load_state_dict(self, sd) -> None:
        if isinstance(sd, str):
            sd = load_file(sd)
        params = dict(self.named_parameters())
        missing = set(params) - set(sd)
        if missing:
            raise KeyError(f"load_state_dict: missing {sorted(missing)}")
        for k, p in params.items():
            p.set(sd[k])

    def save(self, path: str) -> None:
        save_file(self.state_dict(), path)

    def __call__(self, *a, **kw):
        return self.forward(*a, **kw)


class Sequential(Module):
    def __init__(self, *mods):
        super().__init__()
        for i, m in enumerate(mods):
            setattr(self, str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class Linear(Module):
    def __init__(self, fan_in, fan_out, bias=True):
        super().__init__()
        a = 1.0 / math.sqrt(fan_in)
        self.weight = Parameter(init.uniform((fan_out, fan_in), -a, a), name="weight")
        self.bias = Parameter(init.uniform((fan_out,), -a, a), name="bias") if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class _Act(Module):
    op = ""

    def forward(self, x):
        return x.session.op(self.op, x)


class ReLU(_Act):
    op = "relu"


class GELU(_Act):
    op = "gelu"


class Tanh(_Act):
    op = "tanh"


class Sigmoid(_Act):
    op = "sigmoid"


class Flatten(Module):
    """(N, ...) -> (N, prod(...))."""

    def forward(self, x):
        return x.reshape(x.shape[0], -1)


class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


class Conv2d(Module):
    def __init__(self, cin, cout, kernel_size, stride=1, padding=0):
        super().__init__()
        k = kernel_size
        a = 1.0 / math.sqrt(cin * k * k)
        self.weight = Parameter(init.uniform((cout, cin, k, k), -a, a))
        self.bias = Parameter(init.uniform((cout,), -a, a))
        self.stride, self.padding = stride, padding

    def forward(self, x):
        return x.session.op("conv2d", self.weight, self.bias, x, stride=self.stride,
                            padding=self.padding)


class ConvTranspose2d(Conv2d):
    def __init__(self, cin, cout, kernel_size, stride=1, padding=0):
        super().__init__(cout, cin, kernel_size, stride, padding)
        k = kernel_size
        a = 1.0 / math.sqrt(cin * k * k)
        self.weight = Parameter(init.uniform((cin, cout, k, k), -a, a))
        self.bias = Parameter(init.uniform((cout,), -a, a))

    def forward(self, x):
        return x.session.op("conv_transpose2d", self.weight, self.bias, x, stride=self.stride,
                            padding=self.padding)


class _Pool(Module):
    op = ""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.k, self.s, self.p = kernel_size, stride or kernel_size, padding

    def forward(self, x):
        return x.session.op(self.op, x, kernel_size=self.k, stride=self.s, padding=self.p)


class MaxPool2d(_Pool):
    op = "max_pool2d"


class AvgPool2d(_Pool):
    op = "avg_pool2d"


class LayerNorm(Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = Parameter(np.ones(d))
        self.bias = Parameter(np.zeros(d))
        self.eps = eps

    def forward(self, x):
        return x.session.op("layer_norm", x, self.weight, self.bias, eps=self.eps)


class BatchNorm2d(Module):
    """Per-channel normalisation; keeps running mean/var (host) for eval()."""

    def __init__(self, c, eps=1e-6, momentum=0.1):
        super().__init__()
        self.weight = Parameter(np.ones(c))
        self.bias = Parameter(np.zeros(c))
        self.eps, self.momentum = eps, momentum
        self.running_mean = np.zeros(c, np.float32)
        self.running_var = np.ones(c, np.float32)

    def forward(self, x):
        s = x.session
        if self.training:
            return s.op("batchnorm_channel_first", x, self.weight, self.bias, eps=self.eps)
        c = self.running_mean.shape[0]
        shp = (c, 1, 1)
        scale = (self.weight.data / np.sqrt(self.running_var + self.eps)).reshape(shp)
        shift = self.bias.data.reshape(shp) - self.running_mean.reshape(shp) * scale
        return x * scale.astype(np.float32) + shift.astype(np.float32)


class Embedding(Module):
    def __init__(self, n, d):
        super().__init__()
        self.weight = Parameter(init.normal((n, d)))

    def forward(self, idx):
        from torchlean.session import default_session
        s = default_session() if not hasattr(idx, "session") else idx.session
        return s.op("gather_rows", self.weight, indices=np.asarray(idx, dtype=np.int64))


class MultiHeadAttention(Module):
    def __init__(self, d_model, num_heads, use_flash=False):
        super().__init__()
        sh = (d_model, d_model)
        self.Wq, self.Wk = Parameter(init.xavier_uniform(sh)), Parameter(init.xavier_uniform(sh))
        self.Wv, self.Wo = Parameter(init.xavier_uniform(sh)), Parameter(init.xavier_uniform(sh))
        self.num_heads, self.use_flash = num_heads, use_flash

    def forward(self, x, mask=None):
        return x.session.op("multi_head_attention", self.Wq, self.Wk, self.Wv, self.Wo, x,
                            num_heads=self.num_heads, mask=mask, use_flash=self.use_flash)


class SpectralConv1d(Module):
    def __init__(self, width, modes):
        super().__init__()
        a = 1.0 / (width * width)
        self.w_re = Parameter(init.uniform((modes, width, width), -a, a))
        self.w_im = Parameter(init.uniform((modes, width, width), -a, a))

    def forward(self, x):
        return x.session.op("spectral_conv1d_rfft", x, self.w_re, self.w_im)
