"""Collectives over the TCP store: the stub's communicator when the job was launched without MPI
(torchrun's or SLURM's variables), and the host channel NCCL bootstraps through on CUDA.

Each collective is numbered (every rank calls them in the same order); rank r posts its part
under "<n>/<r>" and reads the others' parts once they are there. A sum over ranks adds the
parts in rank order (x_0 + x_1 + ...; float32), so every rank gets the same bits. Starting a
collective only posts this rank's part; waiting for it reads the others', so a reduction started
during the backward pass overlaps the rest of it. A header per part (the collective's kind and
size) makes ranks at different collectives, or with buffers of different sizes, fail with a
DistributedError instead of mixing numbers.
"""
from __future__ import annotations

import struct

import numpy as np

from torchlean.buffer import Buffer
from torchlean.distributed.errors import DistributedError
from torchlean.distributed.store import StoreClient
from torchlean.distributed.work import Work, copy_pieces, host_copy, host_view

_HEAD = struct.Struct("!16sQ")      # collective kind, payload bytes


class TCPComm:
    """The job's collectives through rank 0's store (host memory buffers: the stub's)."""

    name = "tcp"
    averages = False

    def __init__(self, host: str, port: int, rank: int, world: int, timeout_s: float):
        self.rank, self.world, self.timeout_s = rank, world, timeout_s
        self.failed = False
        self._count = 0
        self.store = StoreClient(host, port, rank, world, timeout_s)

    # ---------------------------------------------------------------- plumbing
    def _next(self, what: str) -> tuple[str, str]:
        self._count += 1
        return str(self._count), f"{what} (collective #{self._count} of this process, TCP)"

    def _post(self, seq: str, kind: str, payload: bytes) -> None:
        head = _HEAD.pack(kind.encode()[:16], len(payload))
        self.store.set(f"{seq}/{self.rank}", head + payload, self.world - 1)

    def _gather(self, seq: str, kind: str, mine: bytes, what: str,
                ranks=None) -> list[bytes]:
        """Every rank's payload (in rank order; this rank's own without a round trip)."""
        ranks = range(self.world) if ranks is None else ranks
        others = [r for r in ranks if r != self.rank]
        try:
            got = dict(zip(others, self.store.get([f"{seq}/{r}" for r in others], what)))
        except DistributedError:
            self.failed = True
            raise
        out = []
        for r in ranks:
            if r == self.rank:
                out.append(mine)
                continue
            k, n = _HEAD.unpack_from(got[r])
            if k.rstrip(b"\0").decode() != kind[:16]:
                self.failed = True
                raise DistributedError(
                    f"rank {self.rank}: {what}: rank {r} is at another collective "
                    f"({k.rstrip(bytes(1)).decode()!r}, this rank at {kind!r}): every rank must "
                    "call the same collectives in the same order")
            out.append(got[r][_HEAD.size:])
        return out

    def _sizes_agree(self, parts: list[bytes], what: str) -> None:
        sizes = [len(p) // 4 for p in parts]
        if len(set(sizes)) > 1:
            raise DistributedError(f"rank {self.rank}: {what}: buffer sizes differ across "
                                   f"ranks (floats by rank: {sizes})")

    def fail(self) -> None:
        self.failed = True

    # ---------------------------------------------------------------- host arrays
    def allgather_array(self, a: np.ndarray, what: str) -> np.ndarray:
        """(world, *a.shape): every rank's array, in rank order."""
        return self.allgather_array_start(a, what)()

    def allgather_array_start(self, a: np.ndarray, what: str):
        """Post this rank's array now; the returned function waits for the others'."""
        a = np.ascontiguousarray(a)
        seq, what = self._next(what)
        mine = a.tobytes()
        self._post(seq, "array", mine)

        def finish() -> np.ndarray:
            parts = self._gather(seq, "array", mine, what)
            if len({len(p) for p in parts}) > 1:
                raise DistributedError(f"rank {self.rank}: {what}: array sizes differ across "
                                       f"ranks (bytes by rank: {[len(p) for p in parts]})")
            return np.stack([np.frombuffer(p, a.dtype).reshape(a.shape) for p in parts])
        return finish

    def bcast_bytes(self, data: bytes | None, n: int, src: int, what: str) -> bytes:
        seq, what = self._next(what)
        if self.rank == src:
            self._post(seq, "bytes", bytes(data))
            return bytes(data)
        (got,) = self._gather(seq, "bytes", b"", what, ranks=[src])
        if len(got) != n:
            raise DistributedError(f"rank {self.rank}: {what}: {len(got)} bytes from rank "
                                   f"{src}, {n} expected")
        return got

    def barrier(self, what: str = "barrier") -> None:
        seq, what = self._next(what)
        self._post(seq, "barrier", b"")
        self._gather(seq, "barrier", b"", what)

    # ---------------------------------------------------------------- buffers (stub)
    @staticmethod
    def _flat(bufs) -> tuple[np.ndarray, list[np.ndarray]]:
        views = [host_view(b.buf) for b in bufs]
        flat = views[0] if len(views) == 1 else (np.concatenate(views) if views
                                                 else np.empty(0, np.float32))
        return flat, views

    @staticmethod
    def _unpack(flat: np.ndarray, views) -> None:
        off = 0
        for v in views:
            v[...] = flat[off:off + v.size]
            off += v.size

    def all_reduce(self, bufs, what: str) -> Work:
        """Sum every buffer over the ranks (rank order), in place, when waited for."""
        seq, what = self._next(what)
        flat, views = self._flat(bufs)
        mine = flat.tobytes()
        self._post(seq, "all_reduce", mine)

        def finish():
            parts = self._gather(seq, "all_reduce", mine, what)
            self._sizes_agree(parts, what)
            acc = np.frombuffer(parts[0], np.float32).copy()
            for p in parts[1:]:
                acc += np.frombuffer(p, np.float32)
            self._unpack(acc, views)
        return Work(finish)

    def broadcast(self, bufs, src: int, what: str) -> Work:
        seq, what = self._next(what)
        flat, views = self._flat(bufs)
        if self.rank == src:
            self._post(seq, "broadcast", flat.tobytes())
            return Work(lambda: None)

        def finish():
            (got,) = self._gather(seq, "broadcast", b"", what, ranks=[src])
            self._sizes_agree([got, flat.tobytes()], what)
            self._unpack(np.frombuffer(got, np.float32), views)
        return Work(finish)

    def all_gather(self, bufs, what: str):
        """(work, outs): outs[i] holds world * numel(bufs[i]) floats, rank r's copy at r * n."""
        seq, what = self._next(what)
        flat, views = self._flat(bufs)
        mine = flat.tobytes()
        outs = [Buffer.alloc(self.world * v.size, "all_gather") for v in views]
        self._post(seq, "all_gather", mine)

        def finish():
            parts = self._gather(seq, "all_gather", mine, what)
            self._sizes_agree(parts, what)
            recv = np.stack([np.frombuffer(p, np.float32) for p in parts])
            off = 0
            for v, o in zip(views, outs):
                host_view(o).reshape(self.world, v.size)[...] = recv[:, off:off + v.size]
                off += v.size
        return Work(finish), outs

    def all_to_all(self, send: Buffer, recv: Buffer, block: int, what: str, pack=()) -> Work:
        """Block q of send (`block` floats at q * block) goes to rank q; block r of recv comes
        from rank r (each rank posts its whole send buffer and takes its block of each). The
        pieces of `pack` (buf, offset, send's offset, n) are first copied into send."""
        seq, what = self._next(what)
        s = host_view(send)
        copy_pieces(s, pack, True)
        n = self.world * block
        mine = s[:n].tobytes()
        self._post(seq, "all_to_all", mine)

        def finish():
            parts = self._gather(seq, "all_to_all", mine, what)
            self._sizes_agree(parts, what)
            r, me = host_view(recv), self.rank
            for q, p in enumerate(parts):
                r[q * block:(q + 1) * block] = np.frombuffer(p, np.float32)[
                    me * block:(me + 1) * block]
        return Work(finish)

    def all_gather_into(self, src: Buffer, dst: Buffer, what: str, unpack=()) -> Work:
        """dst (world * n floats) := every rank's src (n floats) in rank order; then each
        piece of `unpack` (buf, offset, dst's offset, n) is copied out of dst."""
        seq, what = self._next(what)
        mine = host_view(src).tobytes()
        self._post(seq, "all_gather", mine)

        def finish():
            parts = self._gather(seq, "all_gather", mine, what)
            self._sizes_agree(parts, what)
            d = host_view(dst)
            d[...] = np.frombuffer(b"".join(parts), np.float32)
            copy_pieces(d, unpack, False)
        return Work(finish)

    def copy_into(self, src, dst) -> None:
        host_copy(src, dst)

    def close(self) -> None:
        self.store.close()
