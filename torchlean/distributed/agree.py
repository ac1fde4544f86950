"""Small tagged exchanges of integers between ranks (step checks, batch sizes).

Each exchange sends the same fixed-size record, [kind, n, values..., padding], so ranks that
reached different points of the program (one skipped a backward() and is already in the next
forward) still exchange records of one size, see that the kinds differ and raise a clear
DistributedError on every rank, instead of reading each other's numbers as their own. Every
rank completed the exchange, so none is left waiting and the job ends normally.
"""
from __future__ import annotations

import numpy as np

from torchlean.distributed.errors import DistributedError

KINDS = ("DistributedDataParallel step check", "BatchNorm running statistics",
         "SyncBatchNorm batch size")
WIDTH = 8


def exchange(comm, kind: str, values) -> np.ndarray:
    """(world, len(values)) int64: every rank's values, in rank order, after checking that
    every rank made the same kind of exchange."""
    return start(comm, kind, values)()


def start(comm, kind: str, values):
    """Post this rank's record now and return the function that waits for the others' and
    checks them (exchange() in two halves: DistributedDataParallel's step check runs during the
    backward pass and is read at its end)."""
    vals = [int(v) for v in values]
    if kind not in KINDS or len(vals) > WIDTH - 2:
        raise ValueError(f"agree.exchange: unknown kind {kind!r} or more than {WIDTH - 2} values")
    rec = np.zeros(WIDTH, np.int64)
    rec[0], rec[1] = KINDS.index(kind), len(vals)
    rec[2:2 + len(vals)] = vals
    gathered = comm.allgather_array_start(rec, kind)

    def finish() -> np.ndarray:
        got = gathered()
        if (got[:, :2] != rec[:2]).any():
            at = ", ".join(f"rank {r} at {_name(int(g[0]))!r}" for r, g in enumerate(got))
            raise DistributedError(
                f"rank {comm.rank}: {kind}: the ranks are at different points of the program "
                f"({at}): a rank skipped a backward() or ran an extra forward; every rank must "
                "run the same forward and backward passes")
        return got[:, 2:2 + len(vals)]
    ready = getattr(gathered, "ready", None)
    if ready is not None:
        finish.ready = ready      # whether finish() would return at once (MPI can tell)
    return finish


def _name(k: int) -> str:
    return KINDS[k] if 0 <= k < len(KINDS) else f"unknown exchange {k}"

