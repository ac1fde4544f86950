"""Digests of float32 buffers, computed on the device by the registry kernel `digest`.

Digests are written into a ring of slots on the device and read back in one transfer when the
ring fills (or on demand), so recording queues one small kernel per value and never waits for
the device per op. A Pending stands for a digest whose slot was not read back yet.
"""
from __future__ import annotations

import numpy as np

from torchlean.buffer import AnyBuffer, raise_status
from torchlean._generated import ops as _ops
from torchlean._loader import lib

RING_SLOTS = 4096


def from_words(row) -> int:
    """The 64-bit digest held by one ring row (four 16-bit pieces, lowest first)."""
    w = np.asarray(row, dtype=np.float64).astype(np.uint64)
    return int(w[0]) | int(w[1]) << 16 | int(w[2]) << 32 | int(w[3]) << 48


def digest(value) -> int:
    """The 64-bit digest of a buffer's float32 bits (an AnyBuffer, or anything with `.value`
    giving one, such as a Tensor): the same number on every backend and thread count."""
    buf = value if isinstance(value, AnyBuffer) else getattr(value, "value", value)
    if not isinstance(buf, AnyBuffer):
        raise TypeError(f"digest: expected an AnyBuffer or a Tensor, got {type(value).__name__}")
    ring = AnyBuffer.zeros((1, 4))
    try:
        _ops.digest(buf, ring, slot=0)
        return from_words(ring.to_numpy()[0])
    finally:
        ring.release()


class Pending:
    """A digest queued in a Ring: `value` is None until its ring is read back."""
    __slots__ = ("value",)

    def __init__(self, value=None):
        self.value = value


class Ring:
    """Device slots the digest kernel writes into; read back RING_SLOTS at a time."""

    def __init__(self, on_full):
        self.buf = AnyBuffer.zeros((RING_SLOTS, 4))
        self.pending: list[Pending] = []
        self.on_full = on_full       # called once a full ring was read back

    def add(self, value: AnyBuffer) -> Pending:
        """Queue the digest of `value` (a live AnyBuffer, as the tape's values are). This runs
        for every value recorded, so it calls the library's entry directly: the arguments are
        right by construction and the entry still checks them."""
        pending = self.pending
        if len(pending) == RING_SLOTS:
            self.read_back()
            self.on_full()
            pending = self.pending
        st = lib.tl_digest(value.handle, self.buf.handle, value.numel, RING_SLOTS, len(pending))
        if st:
            raise_status("digest", st)
        p = Pending()
        pending.append(p)
        return p

    def read_back(self) -> None:
        """Fill in every pending digest (one device-to-host transfer) and free the slots."""
        if not self.pending:
            return
        w = self.buf.to_numpy()[:len(self.pending)].astype(np.uint64)
        d = w[:, 0] | (w[:, 1] << np.uint64(16)) | (w[:, 2] << np.uint64(32)) | (w[:, 3] << np.uint64(48))
        for p, v in zip(self.pending, d.tolist()):
            p.value = v
        self.pending = []

    def release(self) -> None:
        self.buf.release()
