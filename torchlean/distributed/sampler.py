"""DistributedSampler: each rank's share of a dataset's indices, as torch.utils.data's.

The same (seed, epoch) gives every rank the same permutation (a key of torchlean's SplitMix64
stream, independent of the global seed), so the ranks' shares are disjoint and together cover
the dataset; without drop_last the permutation is padded from its start to a multiple of the
world size, with drop_last its tail is cut, exactly as torch does.
"""
from __future__ import annotations

import math

import numpy as np

from torchlean.random import key_of, uniform
import torchlean.distributed.group as dist


def _permutation(n: int, key: int) -> np.ndarray:
    """A permutation of range(n) fixed by key: the stable order of n uniform draws."""
    return np.argsort(uniform(n, key), kind="stable").astype(np.int64)


class DistributedSampler:
    """Indices of rank `rank` of `num_replicas` (default: the running job's rank and world)."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            if not dist.is_initialized():
                raise RuntimeError("DistributedSampler: num_replicas and rank are needed when "
                                   "the process group is not initialized "
                                   "(call init_process_group() first)")
            num_replicas = dist.world_size() if num_replicas is None else num_replicas
            rank = dist.rank() if rank is None else rank
        for name, v in (("num_replicas", num_replicas), ("rank", rank), ("seed", seed)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"DistributedSampler: {name} must be an int, got "
                                f"{type(v).__name__}")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be >= 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last, self.epoch = bool(shuffle), int(seed), \
            bool(drop_last), 0
        n = len(dataset)
        if drop_last and n % self.num_replicas:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """A new permutation per epoch (call before iterating, on every rank)."""
        self.epoch = int(epoch)

    def __iter__(self):
        n = len(self.dataset)
        idx = (_permutation(n, key_of(self.seed, self.epoch)) if self.shuffle
               else np.arange(n, dtype=np.int64))
        if not self.drop_last:
            pad = self.total_size - n
            if pad > 0:
                reps = math.ceil(pad / max(n, 1))
                idx = np.concatenate([idx] + [idx] * reps)[:self.total_size]
        else:
            idx = idx[:self.total_size]
        return iter(idx[self.rank:self.total_size:self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples
