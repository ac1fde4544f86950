"""Waiting for a collective with a deadline, and host views of stub buffers.

Every collective is started non-blocking and then polled: a peer that died or stopped calling
the same collective makes the wait fail after TORCHLEAN_DIST_TIMEOUT_S seconds (default 300)
with a DistributedError naming this rank and the collective, instead of hanging the job.
"""
from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from torchlean.distributed.errors import DistributedError
from torchlean.runtime import env_seconds

DEFAULT_TIMEOUT_S = 300.0


def timeout_from_env() -> float:
    return env_seconds("TORCHLEAN_DIST_TIMEOUT_S", DEFAULT_TIMEOUT_S)


YIELD_S = 5e-3   # how long poll() keeps checking between yields before it sleeps


def poll(done, *, rank: int, what: str, timeout_s: float, on_timeout=None) -> None:
    """Call done() until it returns True; past the deadline call on_timeout() and raise.
    Spins briefly (a collective usually finishes in microseconds), then for YIELD_S checks
    after each sched_yield (a GPU backward pass the host waits for at the end of a step takes
    milliseconds, and a sleep would wake it tens of microseconds late; yielding still lets
    other processes of an oversubscribed host run), then sleeps a little between checks."""
    start = time.monotonic()
    deadline = start + timeout_s
    spins = naps = 0
    while not done():
        spins += 1
        if spins > 200:
            now = time.monotonic()
            if now > deadline:
                if on_timeout is not None:
                    on_timeout()
                raise DistributedError(
                    f"rank {rank}: {what} did not complete within {timeout_s:g} s: a peer "
                    "process died, raised or stopped calling the same collective (timeout set by "
                    "TORCHLEAN_DIST_TIMEOUT_S)")
            if now - start < YIELD_S:
                os.sched_yield()
            else:
                naps += 1
                time.sleep(min(1e-3, 1e-5 * naps ** 0.5 + 1e-6))


class Work:
    """A started collective: wait() blocks until it is done (or raises), then runs `finish`.
    order() makes later device work wait for it instead, without blocking the host, where the
    communicator can (NCCL: `order`); elsewhere it is wait()."""

    __slots__ = ("_wait", "_finish", "_order", "done")

    def __init__(self, wait, finish=None, order=None):
        self._wait, self._finish, self._order, self.done = wait, finish, order, False

    def order(self) -> None:
        if self._order is None or self.done:
            self.wait()
            return
        self.done = True
        self._order()

    def wait(self) -> None:
        if self.done:
            return
        self._wait()
        self.done = True
        if self._finish is not None:
            self._finish()


def host_view(buf) -> np.ndarray:
    """A float32 NumPy view of a stub Buffer's payload (host memory): MPI works on it in place."""
    if buf.n == 0:
        return np.empty(0, np.float32)
    arr = (ctypes.c_float * buf.n).from_address(buf.data_ptr())
    return np.ctypeslib.as_array(arr)


def copy_pieces(base: np.ndarray, pieces, into: bool) -> None:
    """Each piece (stub Buffer, its offset, base's offset, n floats) copied into the host array
    base (into) or out of it."""
    for buf, off, at, n in pieces:
        v = host_view(buf)
        if into:
            base[at:at + n] = v[off:off + n]
        else:
            v[off:off + n] = base[at:at + n]


def host_copy(src, dst) -> None:
    """dst[:] = src for stub AnyBuffers of equal size (dst keeps its memory)."""
    host_view(dst.buf)[...] = host_view(src.buf)
