"""torch.nn's Upsample and the 1-D, 3-D and adaptive 1-D pooling modules: each keeps its
options and calls its functional form in torchlean.nn.resample."""
from __future__ import annotations

from torchlean.nn.modules import Module
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
