"""torch.utils.data's names: TensorDataset and a DataLoader that yields tensors, as torch's does
(float columns as float32 Tensors, integer and bool columns as IntTensors).

Shuffling is reproducible under torchlean.manual_seed: without seed= or generator=, each
DataLoader takes its NumPy seed from the key stream when it is made. num_workers and
pin_memory are accepted and do nothing (batches are slices of arrays already in memory)."""
from __future__ import annotations

from torchlean import data as _data
from torchlean.random import next_key

TensorDataset = _data.TensorDataset


class DataLoader(_data.DataLoader):
    """torchlean.data.DataLoader with torch's defaults: batches are tensors."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None,
                 generator=None, num_workers=0, pin_memory=False, session=None):
        if seed is None and generator is None:
            seed = next_key()
        super().__init__(dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                         seed=seed, generator=generator, as_tensor=True, session=session)


__all__ = ["DataLoader", "TensorDataset"]
