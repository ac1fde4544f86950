"""Named result tuples, as torch.return_types: (values, indices) of max/min/sort/topk over a dim."""
from __future__ import annotations


class MinMaxResult(tuple):
    """(values, indices) of max/min over a dim, like torch.return_types.max."""

    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]
