"""The MPI communicator: collectives on stub buffers in place, and the bootstrap for NCCL.

Stub buffers live in host memory, so MPI reduces them through NumPy views of their payloads
(no copy for a single buffer; several are packed into one message and unpacked after).
mpi4py is imported here only, when a multi-process job starts.
"""
from __future__ import annotations

import atexit
import sys
import time

import numpy as np

from torchlean.buffer import Buffer
from torchlean.distributed.errors import DistributedError
from torchlean.distributed.work import Work, copy_pieces, host_copy, host_view, poll


ABORT_GRACE_S = 1.0   # how long a failed rank waits at exit before it ends the MPI job


def import_mpi():
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise DistributedError(
            f"torchlean.distributed: a multi-process job needs mpi4py and an MPI library "
            f"(pip install 'torchlean[distributed]'): {e}") from None
    return MPI


class MPIComm:
    """COMM_WORLD with deadlines on every collective."""

    name = "mpi"
    averages = False     # all_reduce sums only (the caller scales)

    def __init__(self, timeout_s: float):
        self.MPI = import_mpi()
        self.comm = self.MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.world = self.comm.Get_size()
        self.timeout_s = timeout_s
        self.failed = False
        self._count = 0
        atexit.register(self._abort_if_failed)

    # ---------------------------------------------------------------- plumbing
    def _abort_if_failed(self):
        # a timed-out request can never complete, and MPI_Finalize could wait for it forever:
        # end the whole job instead (the DistributedError has been printed by now). The other
        # ranks usually fail at the same exchange a moment later: a short grace lets their own
        # errors reach their users first (a rank blocked for good is ended all the same).
        if self.failed:
            sys.stdout.flush()
            sys.stderr.flush()
            time.sleep(ABORT_GRACE_S)
            self.comm.Abort(1)

    def _what(self, what: str) -> str:
        self._count += 1
        return f"{what} (collective #{self._count} of this process, MPI)"

    def _work(self, req, what: str, finish=None) -> Work:
        def on_timeout():
            self.failed = True
        return Work(lambda: poll(req.Test, rank=self.rank, what=what, timeout_s=self.timeout_s,
                                 on_timeout=on_timeout), finish)

    def wait_request(self, req, what: str) -> None:
        self._work(req, self._what(what)).wait()

    # ---------------------------------------------------------------- host arrays
    def allgather_array(self, a: np.ndarray, what: str) -> np.ndarray:
        """(world, *a.shape): every rank's array, in rank order."""
        a = np.ascontiguousarray(a)
        out = np.empty((self.world,) + a.shape, a.dtype)
        self.wait_request(self.comm.Iallgather(a, out), what)
        return out

    def allgather_array_start(self, a: np.ndarray, what: str):
        """Start the gather now; the returned function waits for it (and returns the array)."""
        a = np.ascontiguousarray(a)
        out = np.empty((self.world,) + a.shape, a.dtype)
        req = self.comm.Iallgather(a, out)
        work = self._work(req, self._what(what))

        def finish() -> np.ndarray:
            work.wait()
            return out
        # whether finish() would return at once (it completes the request when it has)
        finish.ready = lambda: work.done or bool(req.Test())
        return finish

    def fail(self) -> None:
        """A collective of this process is left unmatched: end the MPI job at exit."""
        self.failed = True

    def bcast_bytes(self, data: bytes | None, n: int, src: int, what: str) -> bytes:
        buf = bytearray(n) if data is None else bytearray(data)
        self.wait_request(self.comm.Ibcast(buf, root=src), what)
        return bytes(buf)

    def barrier(self, what: str = "barrier") -> None:
        self.wait_request(self.comm.Ibarrier(), what)

    # ---------------------------------------------------------------- buffers (stub)
    def _pack(self, bufs):
        views = [host_view(b.buf) for b in bufs]
        if len(views) == 1:
            return views[0], views, False
        return (np.concatenate(views) if views else np.empty(0, np.float32)), views, True

    @staticmethod
    def _unpack(flat, views):
        off = 0
        for v in views:
            v[...] = flat[off:off + v.size]
            off += v.size

    def all_reduce(self, bufs, what: str) -> Work:
        """Sum every buffer over the ranks, in place."""
        what = self._what(what)
        flat, views, packed = self._pack(bufs)
        req = self.comm.Iallreduce(self.MPI.IN_PLACE, flat, op=self.MPI.SUM)
        return self._work(req, what, (lambda: self._unpack(flat, views)) if packed else None)

    def broadcast(self, bufs, src: int, what: str) -> Work:
        what = self._what(what)
        flat, views, packed = self._pack(bufs)
        req = self.comm.Ibcast(flat, root=src)
        return self._work(req, what, (lambda: self._unpack(flat, views)) if packed else None)

    def all_gather(self, bufs, what: str):
        """(work, outs): outs[i] holds world * numel(bufs[i]) floats, rank r's copy at r * n."""
        what = self._what(what)
        flat, views, _ = self._pack(bufs)
        recv = np.empty((self.world, flat.size), np.float32)
        outs = [Buffer.alloc(self.world * v.size, "all_gather") for v in views]
        req = self.comm.Iallgather(flat, recv)

        def unpack():
            off = 0
            for v, o in zip(views, outs):
                host_view(o).reshape(self.world, v.size)[...] = recv[:, off:off + v.size]
                off += v.size
        return self._work(req, what, unpack), outs

    def all_to_all(self, send: Buffer, recv: Buffer, block: int, what: str, pack=()) -> Work:
        """Block q of send (`block` floats at q * block) goes to rank q; block r of recv comes
        from rank r. The pieces of `pack` (buf, offset, send's offset, n) are first copied into
        send."""
        what = self._what(what)
        s = host_view(send)
        copy_pieces(s, pack, True)
        n = self.world * block
        return self._work(self.comm.Ialltoall(s[:n], host_view(recv)[:n]), what)

    def all_gather_into(self, src: Buffer, dst: Buffer, what: str, unpack=()) -> Work:
        """dst (world * n floats) := every rank's src (n floats) in rank order; then each
        piece of `unpack` (buf, offset, dst's offset, n) is copied out of dst."""
        what = self._what(what)
        d = host_view(dst)
        req = self.comm.Iallgather(host_view(src), d)
        return self._work(req, what, (lambda: copy_pieces(d, unpack, False)) if unpack else None)

    def copy_into(self, src, dst) -> None:
        host_copy(src, dst)

    def close(self) -> None:
        pass
