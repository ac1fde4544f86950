"""torch's grid_sample (and the grid_sampler_2d / _3d it calls): input values at normalized
grid positions, bilinear (trilinear) or nearest, with zeros, border or reflection padding.

The corner indices are read from the grid on the host; the interpolation weights are tape
ops of the grid (x - floor(x) and so on), so gradients reach both input (through one gather
per corner) and grid, as torch's."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c

EXPORTS = {"nn.functional": ("grid_sample",),
           "torch": ("grid_sampler_2d", "grid_sampler_3d", "grid_sampler")}

_MODES = ("bilinear", "nearest")
_PADDINGS = ("zeros", "border", "reflection")


def _unnormalize(g, size, align_corners):
    if align_corners:
        return (g + 1.0) * ((size - 1) / 2.0)
    return ((g + 1.0) * size - 1.0) * 0.5


def _reflect(x, twice_low, twice_high):
    """torch's reflect_coordinates: x folded into [low, high] by reflection."""
    if twice_low == twice_high:
        return x * 0.0
    low, span = twice_low / 2.0, (twice_high - twice_low) / 2.0
    s = x.session
    d = (x - low).abs()
    flips = composite.floor(d * (1.0 / span))
    extra = d - flips * span
    even = composite.floor(flips * 0.5) * 2.0
    return s.op("where", flips.eq(even), extra + low, (extra * -1.0) + (span + low))


def _source_coordinate(g, size, padding_mode, align_corners):
    x = _unnormalize(g, size, align_corners)
    if padding_mode == "border":
        return composite.clamp(x, 0.0, float(size - 1))
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return composite.clamp(x, 0.0, float(size - 1))
    return x


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """input (N, C, H, W) sampled at grid (N, Ho, Wo, 2) (x, y in [-1, 1]); 5-D input with a
    (N, Do, Ho, Wo, 3) grid is trilinear."""
    op = "grid_sample"
    x = c.tensor(op, input)
    g = c.operand(x.session, op, grid, "grid")
    if mode not in _MODES:
        raise NotImplementedError(f"{op}: mode must be 'bilinear' or 'nearest' (bicubic is not "
                                  f"supported), got {mode!r}")
    if padding_mode not in _PADDINGS:
        raise ValueError(f"{op}: padding_mode must be 'zeros', 'border' or 'reflection', got "
                         f"{padding_mode!r}")
    r = x.ndim - 2
    if r not in (2, 3) or g.ndim != x.ndim or g.shape[0] != x.shape[0] or g.shape[-1] != r:
        raise RuntimeError(f"{op}: expected input (N, C, H, W) with grid (N, Ho, Wo, 2), or "
                           f"5-D input with grid (N, Do, Ho, Wo, 3); got input "
                           f"{tuple(x.shape)} and grid {tuple(g.shape)}")
    align = bool(align_corners)
    n, ch = x.shape[:2]
    sizes = tuple(x.shape[2:])                       # (H, W) or (D, H, W)
    out = tuple(g.shape[1:-1])
    # coordinate along spatial axis a comes from grid channel r - 1 - a (x is the last axis)
    coords = [_source_coordinate(g[..., r - 1 - a], sizes[a], padding_mode, align)
              for a in range(r)]
    host = [cd.numpy().astype(np.float64) for cd in coords]
    batch = np.arange(n).reshape((n,) + (1,) * r)
    channel_stride = math.prod(sizes)
    result = None
    if mode == "nearest":
        corners = [([np.rint(h).astype(np.int64)], [None]) for h in host]
    else:
        corners = []
        for cd, h in zip(coords, host):
            low = np.floor(h)
            frac = cd - x.session.tensor(low.astype(np.float32))
            corners.append(([low.astype(np.int64), low.astype(np.int64) + 1],
                            [1.0 - frac, frac]))
    for pick in np.ndindex(*[len(idx) for idx, _ in corners]):
        idx = [corners[a][0][k] for a, k in enumerate(pick)]
        valid = np.ones((n,) + out, bool)
        flat = batch * 0
        for a, i in enumerate(idx):
            valid &= (i >= 0) & (i < sizes[a])
            flat = flat * sizes[a] + np.clip(i, 0, sizes[a] - 1)
        flat = flat + batch * ch * channel_stride
        pos = flat[:, None] + (np.arange(ch) * channel_stride).reshape((1, ch) + (1,) * r)
        vals = c.rearrange(x, pos)                                  # (N, C, out...)
        weight = x.session.tensor(valid.astype(np.float32))
        for a, k in enumerate(pick):
            w = corners[a][1][k]
            if w is not None:
                weight = weight * w
        term = vals * weight.unsqueeze(1)
        result = term if result is None else result + term
    return result


def _sampler(op, rank, input, grid, interpolation_mode, padding_mode, align_corners):
    x = c.tensor(op, input)
    if x.ndim != rank + 2:
        raise RuntimeError(f"{op}: expected a {rank + 2}-D input, got shape {tuple(x.shape)}")
    if interpolation_mode not in (0, 1) or padding_mode not in (0, 1, 2):
        raise NotImplementedError(f"{op}: interpolation_mode {interpolation_mode} (0 bilinear, "
                                  f"1 nearest) and padding_mode {padding_mode} (0 zeros, "
                                  f"1 border, 2 reflection) are supported")
    return grid_sample(x, grid, _MODES[interpolation_mode], _PADDINGS[padding_mode],
                       align_corners)


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    return _sampler("grid_sampler_2d", 2, input, grid, interpolation_mode, padding_mode,
                    align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    return _sampler("grid_sampler_3d", 3, input, grid, interpolation_mode, padding_mode,
                    align_corners)


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    x = c.tensor("grid_sampler", input)
    return _sampler("grid_sampler", x.ndim - 2, x, grid, interpolation_mode, padding_mode,
                    align_corners)
