"""as_strided and its copy / scatter forms over torchlean's dense tensors: element i of the
result is element storage_offset + sum_k i_k stride_k of the input's row-major storage
(one gather; the scatter form writes src there with a where)."""
from __future__ import annotations

import math

import numpy as np

from torchlean.catalog import _common as c

METHODS = ("as_strided", "as_strided_scatter")
EXPORTS = {"torch": ("as_strided", "as_strided_copy", "as_strided_scatter")}


def _storage_positions(op, x, size, stride, storage_offset):
    size, stride = tuple(int(v) for v in size), tuple(int(v) for v in stride)
    offset = 0 if storage_offset is None else int(storage_offset)
    if len(size) != len(stride) or any(v < 0 for v in size + stride) or offset < 0:
        raise RuntimeError(f"{op}: size {size} and stride {stride} must have one length and "
                           f"be non-negative (storage_offset {offset})")
    pos = np.full(size, offset, np.int64)
    for k, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = n
        pos = pos + (np.arange(n, dtype=np.int64) * st).reshape(shape)
    numel = math.prod(x.shape)
    if pos.size and pos.max() >= numel:
        raise RuntimeError(f"{op}: size {size}, stride {stride} and offset {offset} reach "
                           f"element {int(pos.max())}, out of bounds for storage of "
                           f"{numel} elements (shape {tuple(x.shape)})")
    return pos


def as_strided(input, size, stride, storage_offset=None):
    x = c.tensor("as_strided", input)
    return c.rearrange(x, _storage_positions("as_strided", x, size, stride, storage_offset))


def as_strided_copy(input, size, stride, storage_offset=None):
    return as_strided(input, size, stride, storage_offset).clone()


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """input with src written at the positions as_strided(size, stride, offset) reads (an
    element reached twice takes src's later value)."""
    x = c.tensor("as_strided_scatter", input)
    s = c.operand(x.session, "as_strided_scatter", src, "src")
    pos = _storage_positions("as_strided_scatter", x, size, stride, storage_offset)
    if tuple(s.shape) != pos.shape:
        raise RuntimeError(f"as_strided_scatter: src of shape {tuple(s.shape)} must have the "
                           f"size {pos.shape}")
    return c.embed(x, s, pos)
