"""torch.utils.data's names: Dataset, TensorDataset, Subset, random_split and a DataLoader that
yields tensors, as torch's does (float columns as float32 Tensors, integer and bool columns as
IntTensors).

Shuffling and random_split draw from torchlean's seeded stream, as torch's draw from its
generator: with generator=g (a torchlean.Generator) from g, otherwise from the process-wide
stream (torchlean.manual_seed), one permutation per epoch drawn when the epoch starts. So the
same seed gives the same batches, and a loader with its own Generator leaves the global stream
(dropout, init) alone. seed= (torchlean's) or a NumPy Generator still shuffle with NumPy.
num_workers and pin_memory are accepted and do nothing (batches are slices of arrays already in
memory)."""
from __future__ import annotations

import math

import numpy as np

from torchlean import data as _data
from torchlean import random as _random

TensorDataset = _data.TensorDataset


class Dataset:
    """torch.utils.data.Dataset: subclasses define __getitem__ (and __len__ for a DataLoader)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, [int(i) for i in np.asarray(indices).ravel()]

    def __getitem__(self, idx):
        if isinstance(idx, (list, np.ndarray)):
            return [self.dataset[self.indices[int(i)]] for i in idx]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


def _split_lengths(lengths, n: int) -> list[int]:
    """torch's rule: integer lengths summing to n, or fractions summing to 1 (each floored,
    the remainder handed out one by one from the first)."""
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, f in enumerate(lengths):
            if not 0 <= f <= 1:
                raise ValueError(f"random_split: Fraction at index {i} is not between 0 and 1")
        counts = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        return counts
    for v in lengths:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"random_split: lengths must be non-negative ints or fractions "
                             f"summing to 1, got {lengths}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: Sum of input lengths ({sum(lengths)}) does not equal "
                         f"the length of the input dataset ({n})!")
    return [int(v) for v in lengths]


def random_split(dataset, lengths, generator=None) -> list[Subset]:
    """Split dataset into non-overlapping Subsets of the given lengths (or fractions), by one
    permutation drawn from `generator` (default: the process-wide stream)."""
    counts = _split_lengths(lengths, len(dataset))
    perm = _random.permutation(sum(counts), _random.key_for("random_split", generator))
    out, at = [], 0
    for c in counts:
        out.append(Subset(dataset, perm[at:at + c]))
        at += c
    return out


class DataLoader(_data.DataLoader):
    """torchlean.data.DataLoader with torch's arguments and defaults: batches are tensors;
    shuffle draws from a torchlean.Generator or the process-wide stream; collate_fn, when given,
    receives the list of samples of each batch."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 seed=None, session=None):
        if sampler is not None or batch_sampler is not None:
            raise NotImplementedError("DataLoader: sampler and batch_sampler are not supported; "
                                      "use shuffle= and batch_size=")
        if generator is not None and not isinstance(generator, (_random.Generator,
                                                                np.random.Generator)):
            raise TypeError(f"DataLoader: generator must be a torchlean.Generator, got "
                            f"{type(generator).__name__}")
        key_stream = generator if isinstance(generator, _random.Generator) else None
        super().__init__(dataset, batch_size=batch_size, shuffle=bool(shuffle),
                         drop_last=drop_last, seed=seed,
                         generator=None if key_stream is not None else generator,
                         as_tensor=True, session=session)
        self._numpy_rng = seed is not None or isinstance(generator, np.random.Generator)
        if not self._numpy_rng:
            self.generator = key_stream      # None: the process-wide stream, as torch
        self.collate_fn = collate_fn

    def _order(self, n: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(n)
        if self._numpy_rng:
            return self.generator.permutation(n)
        return _random.permutation(n, _random.key_for("DataLoader", self.generator))

    def _take(self, idx):
        if self.collate_fn is None:
            return super()._take(idx)
        return self.collate_fn([self.dataset[int(i)] for i in idx])


__all__ = ["DataLoader", "Dataset", "Subset", "TensorDataset", "random_split"]
