"""torch.masked.cumsum and torch.masked.cumprod: masked-out entries count as the identity (0 for
a sum, 1 for a product) and every output is kept, as torch.masked does for a plain tensor."""
from __future__ import annotations

import numpy as np

from torchlean import composite
from torchlean.catalog import sorting
from torchlean.int_tensor import IntTensor

EXPORTS = {"masked": ["cumsum", "cumprod"]}


def _fill_masked_out(input, mask, fill, op):
    if mask is None:
        return input
    m = mask.numpy() if isinstance(mask, IntTensor) else np.asarray(
        mask.numpy() if hasattr(mask, "numpy") else mask)
    try:
        m = np.broadcast_to(m != 0, tuple(input.shape))
    except ValueError:
        raise ValueError(f"{op}: mask of shape {m.shape} does not broadcast to the input's shape "
                         f"{tuple(input.shape)}") from None
    return composite.where(input.session, m, input, fill)


def cumsum(input, dim, *, dtype=None, mask=None):  # noqa: A002 - torch's names
    """torch.masked.cumsum: running sums with masked-out entries as 0."""
    return sorting.cumsum(_fill_masked_out(input, mask, 0.0, "masked.cumsum"), dim, dtype=dtype)


def cumprod(input, dim, *, dtype=None, mask=None):  # noqa: A002
    """torch.masked.cumprod: running products with masked-out entries as 1."""
    return sorting.cumprod(_fill_masked_out(input, mask, 1.0, "masked.cumprod"), dim,
                           dtype=dtype)
