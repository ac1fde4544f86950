"""Mini-batches over NumPy arrays, shaped as torch.utils.data (TensorDataset, DataLoader).

Shuffling draws one permutation per epoch from a NumPy Generator (seeded once), so a run with
the same seed sees the same batches in the same order."""
from __future__ import annotations

import numpy as np

from torchlean.int_tensor import IntTensor
from torchlean.session import default_session


class TensorDataset:
    """Row i of every array, as a tuple; the arrays must agree on their first axis."""

    def __init__(self, *arrays):
        if not arrays:
            raise ValueError("TensorDataset: expected at least one array")
        self.arrays = tuple(np.asarray(a) for a in arrays)
        lens = [len(a) if a.ndim else None for a in self.arrays]
        if None in lens or len(set(lens)) != 1:
            raise ValueError(f"TensorDataset: arrays must share their first axis, got shapes "
                             f"{[a.shape for a in self.arrays]}")

    def __len__(self):
        return len(self.arrays[0])

    def __getitem__(self, i):
        return tuple(a[i] for a in self.arrays)


class DataLoader:
    """Batches of `dataset` (a TensorDataset, a tuple of arrays, one array, or any object with
    __len__ and __getitem__ returning a tuple of arrays).

    shuffle draws a new permutation every epoch from `generator` (a numpy Generator) or from
    np.random.default_rng(seed); drop_last drops a short final batch. Batches are NumPy arrays,
    or, with as_tensor=True, tensors as torch's DataLoader gives them: float columns as float32
    Tensors of `session` (the default session when None), integer and bool columns (labels)
    as int64/bool IntTensors."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None,
                 generator=None, as_tensor=False, session=None):
        if isinstance(dataset, np.ndarray):
            dataset, self._single = TensorDataset(dataset), True
        elif isinstance(dataset, tuple):
            dataset, self._single = TensorDataset(*dataset), False
        else:
            self._single = False
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
            raise TypeError(f"DataLoader: batch_size must be an int, got "
                            f"{type(batch_size).__name__} {batch_size!r}")
        if batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be >= 1, got {batch_size}")
        if generator is not None and seed is not None:
            raise ValueError("DataLoader: pass seed or generator, not both")
        self.dataset, self.batch_size = dataset, int(batch_size)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.generator = generator if generator is not None else np.random.default_rng(seed)
        self.as_tensor, self.session = as_tensor, session

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _take(self, idx):
        ds = self.dataset
        if isinstance(ds, TensorDataset):
            cols = [a[idx] for a in ds.arrays]
        else:
            rows = [ds[int(i)] for i in idx]
            if rows and not isinstance(rows[0], (tuple, list)):   # one item per sample
                return self._convert([np.stack([np.asarray(r) for r in rows])])[0]
            cols = [np.stack([np.asarray(r[j]) for r in rows]) for j in range(len(rows[0]))]
        cols = self._convert(cols)
        return cols[0] if self._single else tuple(cols)

    def _convert(self, cols: list) -> list:
        if not self.as_tensor:
            return cols
        s = self.session or default_session()
        return [IntTensor(c) if c.dtype.kind in "biu" else s.tensor(c) for c in cols]

    def _order(self, n: int) -> np.ndarray:
        """This epoch's order of the n samples."""
        return self.generator.permutation(n) if self.shuffle else np.arange(n)

    def __iter__(self):
        n = len(self.dataset)
        order = self._order(n)
        stop = n - n % self.batch_size if self.drop_last else n
        for a in range(0, stop, self.batch_size):
            yield self._take(order[a:a + self.batch_size])
