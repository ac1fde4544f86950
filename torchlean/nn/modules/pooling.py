"""Pooling modules (1-D, 2-D, 3-D, adaptive) and Upsample: each keeps its options and runs the
registry op or its functional form (nn.functional for 2-D, torchlean.nn.resample otherwise)."""
from __future__ import annotations

from torchlean.nn import functional as F
from torchlean.nn.modules.base import Module
from torchlean.nn.resample import (adaptive_avg_pool1d, adaptive_max_pool1d, avg_pool1d,
                                   avg_pool3d, interpolate, max_pool1d, max_pool3d)


class Upsample(Module):
    """torch.nn.Upsample: F.interpolate with the stored size / scale_factor / mode."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)


class _PoolModule(Module):
    fn = None

    def __init__(self, kernel_size, stride=None, padding=0, **options):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.options = options

    def forward(self, input):
        return type(self).fn(input, self.kernel_size, self.stride, self.padding, **self.options)


class MaxPool1d(_PoolModule):
    fn = max_pool1d

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__(kernel_size, stride, padding, dilation=dilation,
                         return_indices=return_indices, ceil_mode=ceil_mode)


class AvgPool1d(_PoolModule):
    fn = avg_pool1d

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode=ceil_mode,
                         count_include_pad=count_include_pad)


class MaxPool3d(_PoolModule):
    fn = max_pool3d

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__(kernel_size, stride, padding, dilation=dilation,
                         return_indices=return_indices, ceil_mode=ceil_mode)


class AvgPool3d(_PoolModule):
    fn = avg_pool3d

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__(kernel_size, stride, padding, ceil_mode=ceil_mode,
                         count_include_pad=count_include_pad, divisor_override=divisor_override)


class AdaptiveAvgPool1d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return adaptive_avg_pool1d(input, self.output_size)


class AdaptiveMaxPool1d(Module):
    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):
        return adaptive_max_pool1d(input, self.output_size, self.return_indices)


class _Pool(Module):
    op = ""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.k, self.s, self.p = kernel_size, stride or kernel_size, padding

    def _plain(self):
        return True

    def forward(self, x):
        if self._plain():   # the registry op directly
            return x.session.op(self.op, x, kernel_size=self.k, stride=self.s, padding=self.p)
        return self._options(x)


class MaxPool2d(_Pool):
    """torch.nn.MaxPool2d; dilation, ceil_mode and return_indices (then forward returns
    (output, int64 indices)) go through F.max_pool2d."""

    op = "max_pool2d"

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__(kernel_size, stride, padding)
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def _plain(self):
        return self.dilation in (1, (1, 1)) and not self.return_indices and not self.ceil_mode

    def _options(self, x):
        return F.max_pool2d(x, self.k, self.s, self.p, self.dilation, self.ceil_mode,
                            self.return_indices)


class AvgPool2d(_Pool):
    """torch.nn.AvgPool2d; ceil_mode, count_include_pad=False and divisor_override go through
    F.avg_pool2d."""

    op = "avg_pool2d"

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__(kernel_size, stride, padding)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def _plain(self):
        return not self.ceil_mode and self.divisor_override is None and \
            (self.count_include_pad or self.p in (0, (0, 0)))

    def _options(self, x):
        return F.avg_pool2d(x, self.k, self.s, self.p, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed (oh, ow) output for (N, C, H, W) or (C, H, W) input, with
    torch's windows (F.adaptive_avg_pool2d); None keeps that input size."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = (output_size, output_size) if isinstance(output_size, int) or \
            output_size is None else tuple(output_size)

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)


class AdaptiveMaxPool2d(Module):
    """Max pooling to a fixed (oh, ow) output (F.adaptive_max_pool2d); return_indices makes
    forward return (output, int64 indices)."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = (output_size, output_size) if isinstance(output_size, int) or \
            output_size is None else tuple(output_size)
        self.return_indices = return_indices

    def forward(self, x):
        return F.adaptive_max_pool2d(x, self.output_size, self.return_indices)
