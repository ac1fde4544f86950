"""Convolutions: Conv1d/2d/3d (one N-D base), ConvTranspose2d and the FNO's SpectralConv1d."""
from __future__ import annotations

import math

import numpy as np

from torchlean.session import Parameter
from torchlean.nn import functional as F, init
from torchlean.nn.modules.base import Module
from torchlean.nn.arg_checks import check_numel, size_arg


def _tuple(v, n, what, name):
    t = (size_arg(name, what, v),) * n if not hasattr(v, "__iter__") else \
        tuple(size_arg(name, what, a) for a in v)
    if len(t) != n:
        raise ValueError(f"{name}: {what} must be an int or {n} ints, got {v!r}")
    return t


class _ConvNd(Module):
    """torch.nn.ConvNd: weight (C_out, C_in / groups, k...), bias (C_out,); input (N, C_in,
    spatial...) or (C_in, spatial...). groups (depthwise included) and dilation run through
    F.conv1d/2d/3d, which builds a dense kernel for the registry's N-D conv op."""

    rank = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros"):
        super().__init__()
        name, n = type(self).__name__, self.rank
        if padding_mode != "zeros":
            raise NotImplementedError(f"{name}: padding_mode={padding_mode!r} is not supported "
                                      "(only 'zeros')")
        in_channels = size_arg(name, "in_channels", in_channels)
        out_channels = size_arg(name, "out_channels", out_channels)
        groups = size_arg(name, "groups", groups, minimum=1)
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        k = _tuple(kernel_size, n, "kernel_size", name)
        self.kernel_size, self.stride = k, _tuple(stride, n, "stride", name)
        self.dilation, self.groups = _tuple(dilation, n, "dilation", name), groups
        ke = tuple(d * (a - 1) + 1 for a, d in zip(k, self.dilation))
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if any(s != 1 for s in self.stride) or any(a % 2 == 0 for a in ke):
                raise NotImplementedError(f"{name}: padding='same' needs stride 1 and odd dilated "
                                          f"kernel sizes here, got {ke}, stride {self.stride}")
            padding = tuple(a // 2 for a in ke)
        self.padding = _tuple(padding, n, "padding", name)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        fan_in = in_channels // groups * math.prod(k)
        check_numel(name, "weight", (out_channels, fan_in))
        a = 1.0 / math.sqrt(fan_in) if fan_in else 0.0   # torch: no inputs, bound 0
        self.weight = Parameter(init.uniform((out_channels, in_channels // groups) + k, -a, a),
                                name="weight")
        if bias:
            self.bias = Parameter(init.uniform((out_channels,), -a, a), name="bias")
        else:   # the op takes a bias input: a constant zero one, neither trained nor saved
            object.__setattr__(self, "bias", Parameter(np.zeros(out_channels), requires_grad=False))

    def forward(self, x):
        shp, n = tuple(x.shape), self.rank
        if len(shp) not in (n + 1, n + 2) or shp[-n - 1] != self.in_channels:
            raise ValueError(f"{type(self).__name__}: expected input (N, {self.in_channels}, "
                             f"{n} spatial axes) or ({self.in_channels}, {n} spatial axes), "
                             f"got {shp}")
        if self.groups == 1 and all(d == 1 for d in self.dilation):
            return x.session.op("conv", self.weight, self.bias, x, stride=self.stride,
                                padding=self.padding)
        return F.conv_nd(n, x, self.weight, self.bias, self.stride, self.padding,
                          self.dilation, self.groups)


class Conv1d(_ConvNd):
    rank = 1


class Conv2d(_ConvNd):
    """torch.nn.Conv2d; plain convolutions run the registry conv2d op."""

    rank = 2

    def forward(self, x):
        if self.groups == 1 and self.dilation == (1, 1) and x.ndim in (3, 4) \
                and x.shape[-3] == self.in_channels:
            return x.session.op("conv2d", self.weight, self.bias, x, stride=self.stride,
                                padding=self.padding)
        return super().forward(x)


class Conv3d(_ConvNd):
    rank = 3


class ConvTranspose2d(Module):
    """weight (cin, cout, kh, kw) as in PyTorch (kernel_size an int or a pair), whose default init takes the fan-in from
    weight.shape[1] * k * k (= cout * k * k). output_padding (< stride) adds rows/cols at the
    bottom/right (F.conv_transpose2d)."""

    def __init__(self, cin, cout, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1):
        Module.__init__(self)
        if int(groups) != 1 or dilation not in (1, (1, 1)):
            raise NotImplementedError("ConvTranspose2d: groups and dilation other than 1 are "
                                      f"not supported, got groups={groups}, dilation={dilation}")
        cin = size_arg("ConvTranspose2d", "in_channels", cin)
        cout = size_arg("ConvTranspose2d", "out_channels", cout)
        kh, kw = _tuple(kernel_size, 2, "kernel_size", "ConvTranspose2d")
        check_numel("ConvTranspose2d", "weight", (cin, cout, kh, kw))
        a = 1.0 / math.sqrt(cout * kh * kw) if cout * kh * kw else 0.0
        self.weight = Parameter(init.uniform((cin, cout, kh, kw), -a, a), name="weight")
        if bias:
            self.bias = Parameter(init.uniform((cout,), -a, a), name="bias")
        else:   # the op takes a bias input: a constant zero one, neither trained nor saved
            object.__setattr__(self, "bias", Parameter(np.zeros(cout), requires_grad=False))
        self.stride, self.padding, self.output_padding = stride, padding, output_padding

    def forward(self, x):
        if self.output_padding not in (0, (0, 0)):
            return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                      self.output_padding)
        return x.session.op("conv_transpose2d", self.weight, self.bias, x, stride=self.stride,
                            padding=self.padding)


class SpectralConv1d(Module):
    def __init__(self, width, modes):
        super().__init__()
        a = 1.0 / (width * width)
        self.w_re = Parameter(init.uniform((modes, width, width), -a, a))
        self.w_im = Parameter(init.uniform((modes, width, width), -a, a))

    def forward(self, x):
        return x.session.op("spectral_conv1d_rfft", x, self.w_re, self.w_im)
