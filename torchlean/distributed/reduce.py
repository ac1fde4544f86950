"""Sums over the ranks whose order is fixed where it must be, on buffers and on the tape.

In deterministic (or exact) mode a sum over ranks is an all-gather followed by the rank-order
chain s = x_0; s = s + x_1; ...; with the add kernel, so it is bit for bit what one process
gets by adding the ranks' values in rank order (MPI's and NCCL's all-reduce orders are theirs).
Default mode takes the library's all-reduce.

all_reduce_tensor() is the differentiable form (SyncBatchNorm's global statistics): the forward
is the sum over ranks, and so is the backward, because every rank's loss reads the same sum.
"""
from __future__ import annotations

import numpy as np

from torchlean._loader import ffi, lib
from torchlean.buffer import AnyBuffer, Buffer, raise_status
from torchlean import runtime
from torchlean.distributed.group import communicator


def exact_reduction() -> bool:
    """True when sums over ranks must run in rank order (deterministic or exact mode)."""
    return runtime.is_deterministic() or runtime.is_exact()


def buffer_view(buf: Buffer, start: int, n: int, shape) -> AnyBuffer:
    """Floats [start, start + n) of buf as an AnyBuffer sharing its memory (no copy)."""
    out = ffi.new("tl_buf *")
    st = lib.tl_buf_wrap(buf.data_ptr() + 4 * start, n, out)
    if st:
        raise_status("torchlean.distributed", st)
    return AnyBuffer(tuple(shape), Buffer(out[0], n))


def rank_rows(gathered: Buffer, world: int, shape) -> list[AnyBuffer]:
    """The world per-rank copies an all_gather packed into `gathered`, as views."""
    n = int(np.prod(shape, dtype=np.int64))
    return [buffer_view(gathered, r * n, n, shape) for r in range(world)]


def sum_rows(rows: list[AnyBuffer]) -> AnyBuffer:
    """rows[0] + rows[1] + ... in that order (a new buffer)."""
    from torchlean._generated import ops as _ops
    acc = rows[0].copy() if len(rows) == 1 else _ops.add(rows[0], rows[1])
    for row in rows[2:]:
        nxt = _ops.add(acc, row)
        acc.release()
        acc = nxt
    return acc


def exchange_plan(sizes, k: int, world: int):
    """The layout of the exact reduction of one bucket: `sizes` are its parameters' element
    counts (laid end to end: N elements), k the micro-batch gradients of each on this rank.
    The N elements fall in `world` chunks of c = ceil(N / world) and rank q sums chunk q, so
    the send buffer holds world blocks of k * c floats: block q is chunk q of micro-batch
    0, 1, ..., k - 1 (at j * c), sent to rank q by one all-to-all. Returns (c, pieces): each
    piece (micro, src, dst, n) copies n floats of micro-batch gradient `micro` (index
    i * k + j) from its element src to the send buffer's element dst."""
    total = sum(sizes)
    c = max(-(-total // world), 1)
    pieces, off = [], 0
    for i, n in enumerate(sizes):
        if k == 1:                  # block q is chunk q itself: the bucket as laid out
            pieces.append((i, 0, off, n))
        else:
            for j in range(k):
                e = off
                while e < off + n:
                    q, pos = divmod(e, c)
                    m = min(off + n - e, c - pos)
                    pieces.append((i * k + j, e - off, q * k * c + j * c + pos, m))
                    e += m
        off += n
    return c, pieces


def sum_over_ranks(comm, bufs: list[AnyBuffer], what: str) -> list[AnyBuffer]:
    """New buffers holding each of bufs summed over the ranks (rank order in exact mode)."""
    if comm.world == 1:
        return [b.copy() for b in bufs]
    if exact_reduction():
        work, gathered = comm.all_gather(bufs, what + " all_gather")
        work.wait()
        out = []
        for b, g in zip(bufs, gathered):
            out.append(sum_rows(rank_rows(g, comm.world, b.shape)))
            g.release()
        return out
    out = [b.copy() for b in bufs]
    comm.all_reduce(out, what + " all_reduce").wait()
    return out


def all_reduce_tensor(t, what: str = "all_reduce_tensor"):
    """A Tensor equal to t summed over the ranks, recorded on t's tape: its gradient is the
    incoming gradient summed over the ranks (each rank's loss depends on the common sum)."""
    comm = communicator()
    s = t.session
    (out,) = sum_over_ranks(comm, [t.value], what)

    def vjp(grad, needs, saved):
        (g,) = sum_over_ranks(comm, [grad], what + " backward")
        return [g]

    nid = s.tape._record("all_reduce_sum", out, (t.id,), vjp, {}, False)
    return s._wrap(nid)


__all__ = ["exact_reduction", "buffer_view", "rank_rows", "sum_rows", "exchange_plan",
           "sum_over_ranks", "all_reduce_tensor"]
