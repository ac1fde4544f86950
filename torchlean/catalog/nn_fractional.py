"""torch's fractional max pooling (Graham, 2014): each plane's pooling windows start at
pseudo-random, increasing offsets drawn from one uniform sample per plane and axis, by torch's
own interval rule computed in float32. The window maxima are picked on the host (first
maximum in row-major order, NaN wins, as torch) and gathered, so the gradient reaches exactly
the chosen element."""
from __future__ import annotations

import math

import numpy as np

from torchlean.catalog import _common as c
from torchlean.int_tensor import IntTensor

EXPORTS = {"nn.functional": ("fractional_max_pool2d", "fractional_max_pool3d")}


def _intervals(sample, n_in, n_out, pool):
    """torch's generate_intervals, in float32 as its kernel: (planes, n_out) window starts."""
    seq = np.zeros(sample.shape + (n_out,), np.int64)
    if n_out > 1:
        alpha = np.float32(n_in - pool) / np.float32(n_out - 1)
        i = np.arange(n_out - 1, dtype=np.float32)
        seq[..., :-1] = (np.trunc((i + sample[..., None]) * alpha).astype(np.int64)
                         - np.trunc(sample[..., None] * alpha).astype(np.int64))
    if n_out > 0:
        seq[..., -1] = n_in - pool
    return seq


def _fractional(op, rank, input, kernel_size, output_size, output_ratio, return_indices,
                samples):
    x = c.tensor(op, input)
    if x.ndim not in (rank + 1, rank + 2):
        raise ValueError(f"{op}: expected input (N, C, ...) or (C, ...) with {rank} spatial "
                         f"dims, got {tuple(x.shape)}")
    batched = x if x.ndim == rank + 2 else x.unsqueeze(0)
    spatial = tuple(batched.shape[2:])

    def per_axis(v, what):
        t = (v,) * rank if isinstance(v, (int, float, np.integer, np.floating)) else tuple(v)
        if len(t) != rank:
            raise ValueError(f"{op}: {what} must be a number or {rank} numbers, got {v!r}")
        return t
    pool = tuple(int(k) for k in per_axis(kernel_size, "kernel_size"))
    if (output_size is None) == (output_ratio is None):
        raise ValueError(f"{op}: give exactly one of output_size and output_ratio")
    out = tuple(int(o) for o in per_axis(output_size, "output_size")) if output_size is not None \
        else tuple(int(n * float(r)) for n, r in zip(spatial, per_axis(output_ratio,
                                                                          "output_ratio")))
    strict = rank == 3            # torch's 3-D check is strict, its 2-D one is not
    if any(o + k - 1 > n - strict or o < 1 or k < 1 for o, k, n in zip(out, pool, spatial)):
        raise RuntimeError(f"{op}: output size {out} with kernel {pool} does not fit the input "
                           f"size {spatial} (need output + kernel - 1 {'<' if strict else '<='} "
                           "input)")
    n, ch = batched.shape[:2]
    if samples is None:
        u = x.session.rand_uniform((n, ch, rank)).numpy()
    else:
        u = np.asarray(samples.numpy() if hasattr(samples, "numpy") else samples, np.float32)
        if u.shape != (n, ch, rank):
            raise RuntimeError(f"{op}: _random_samples must have shape {(n, ch, rank)}, got "
                               f"{u.shape}")
    u = u.astype(np.float32)
    # torch's sample order: (W, H) for 2-D planes, (T, H, W) for 3-D volumes
    sample_of_axis = [1, 0] if rank == 2 else [0, 1, 2]
    starts = [_intervals(u[..., sample_of_axis[a]], spatial[a], out[a], pool[a])
              for a in range(rank)]
    # offsets[a]: (N, C, out..., k...) coordinate along axis a of every window tap
    offsets = []
    for a in range(rank):
        shape = [n, ch] + [1] * (2 * rank)
        shape[2 + a] = out[a]
        tap = [1] * (2 + 2 * rank)
        tap[2 + rank + a] = pool[a]
        offsets.append(starts[a].reshape(shape) + np.arange(pool[a]).reshape(tap))
    flat_in_plane = np.zeros((), np.int64)
    for a in range(rank):
        flat_in_plane = flat_in_plane * spatial[a] + offsets[a]
    plane = math.prod(spatial)
    base = (np.arange(n * ch).reshape(n, ch) * plane).reshape((n, ch) + (1,) * (2 * rank))
    taps = (flat_in_plane + base).reshape((n, ch) + out + (-1,))
    values = batched.numpy().reshape(-1)[taps]
    score = np.where(np.isnan(values), np.inf, values)
    pick = score.argmax(-1)
    chosen = np.take_along_axis(taps, pick[..., None], -1)[..., 0]
    y = c.rearrange(batched, chosen)
    y = y if x.ndim == rank + 2 else y.squeeze(0)
    if not return_indices:
        return y
    idx = np.take_along_axis(flat_in_plane.reshape((n, ch) + out + (-1,)), pick[..., None],
                             -1)[..., 0]
    return y, IntTensor(idx if x.ndim == rank + 2 else idx[0])


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    return _fractional("fractional_max_pool2d", 2, input, kernel_size, output_size,
                       output_ratio, return_indices, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    return _fractional("fractional_max_pool3d", 3, input, kernel_size, output_size,
                       output_ratio, return_indices, _random_samples)
