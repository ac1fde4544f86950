"""Digests of float32 buffers, computed on the device by the registry kernels `digest` (one
buffer) and `digest_batch` (many buffers, one call: one launch on CUDA).

Recording queues values in a Batch and digests them all at once where the recorder says (the
end of a backward pass, an optimizer step, before a VJP writes over its cotangent), so it costs
one native call per step instead of one per value (one launch on CUDA). On the stub, where a
native call costs less than queueing and pinning a value, each is digested as it is recorded
(Batch.add_now, Batch.digest_handles) into the same ring and numbered the same way. A digest's
number is its place in the sequence of all digests of the batch; they land in that order in a
ring of device slots, read back in one transfer when it fills or the record closes and handed
to the batch's sink (the record file): nothing waits for the device per op, and nothing of
them stays in memory.
"""
from __future__ import annotations

import numpy as np

from torchlean.buffer import EXPORTS, AnyBuffer, raise_status
from torchlean._generated import ops as _ops
from torchlean._loader import ffi, lib
from torchlean.runtime import backend

RING_SLOTS = 4096
# queued elements after which a batch runs early. On CUDA a bound on memory only: queued buffers
# are pinned (see Batch), so this bounds what recording keeps beyond what the run itself holds
# (256 MiB). On the stub 2 MiB of values, about a core's L2: values are digested while still in
# cache instead of read back from memory at the end of the pass (bench/results/audit-cost.md)
PENDING_ELEMENTS = 1 << 26
PENDING_ELEMENTS_STUB = 1 << 19
# On the stub a value is digested when it is queued (Batch.add_now): one native call, no pin,
# no queue to run later. The digest is the same bits either way (the value is read at the op,
# not later); a native call per value is what a batch saves on CUDA, where each is a launch.
# False: the stub queues and batches as CUDA does (tests run both ways).
STUB_AT_ONCE = True


def from_words(row) -> int:
    """The 64-bit digest held by one ring row (four 16-bit pieces, lowest first)."""
    w = np.asarray(row, dtype=np.float64).astype(np.uint64)
    return int(w[0]) | int(w[1]) << 16 | int(w[2]) << 32 | int(w[3]) << 48


def _rows_to_digests(rows: np.ndarray) -> np.ndarray:
    """The digests (uint64) held by ring rows."""
    w = rows.astype(np.uint64)
    return w[:, 0] | (w[:, 1] << np.uint64(16)) | (w[:, 2] << np.uint64(32)) | (w[:, 3] << np.uint64(48))


def _buffer_of(value, op: str) -> AnyBuffer:
    buf = value if isinstance(value, AnyBuffer) else getattr(value, "value", value)
    if not isinstance(buf, AnyBuffer):
        raise TypeError(f"{op}: expected an AnyBuffer or a Tensor, got {type(value).__name__}")
    return buf


def digest(value) -> int:
    """The 64-bit digest of a buffer's float32 bits (an AnyBuffer, or anything with `.value`
    giving one, such as a Tensor): the same number on every backend and thread count."""
    buf = _buffer_of(value, "digest")
    ring = AnyBuffer.zeros((1, 4))
    try:
        _ops.digest(buf, ring, slot=0)
        return from_words(ring.to_numpy()[0])
    finally:
        ring.release()


def digest_many(values) -> list[int]:
    """The digests of several buffers (or Tensors) in one native call: [digest(v) for v in
    values], computed at once (digest_batch; a released buffer raises, naming its position)."""
    bufs = [_buffer_of(v, "digest_many") for v in values]
    if not bufs:
        return []
    ring = AnyBuffer.zeros((len(bufs), 4))
    try:
        _ops.digest_batch(ring, handles=bufs, count=len(bufs))
        return _rows_to_digests(ring.to_numpy()).tolist()
    finally:
        ring.release()


class Batch:
    """Values queued for digesting, digested together by run().

    A queued value's handle goes straight into a preallocated handle array, the array
    digest_batch reads: a run costs one native call and no per-value Python objects. A queued
    buffer is pinned (buffer.EXPORTS) until its batch ran: a tape freeing it meanwhile only
    marks it released, so the digest reads the bits the value had. What may be written in
    place is never left queued: the recorder runs the batch first (recorder.py says when).
    On the stub (STUB_AT_ONCE) `add` is add_now: digested at once, nothing queued."""

    def __init__(self, sink):
        self.ring = AnyBuffer.zeros((RING_SLOTS, 4))
        self.sink = sink               # takes the digests read back (uint64), in order
        self.used = 0                  # ring rows written and not read back yet
        self.base = 0                  # the sequence number of the first queued value
        self.count = 0                 # values queued
        self.bufs: list = []           # the queued Buffers pinned by add()
        self.handles = ffi.new("tl_buf[]", RING_SLOTS)   # their handles, in sequence order
        self.handle_words = ffi.cast("int64_t *", self.handles)
        self.elements = 0
        stub = backend() == "stub"
        self.pending = PENDING_ELEMENTS_STUB if stub else PENDING_ELEMENTS
        self.ring_handle = self.ring.buf.handle
        if stub and STUB_AT_ONCE:
            self.add = self.add_now     # (an instance attribute: the method looked up once)

    @property
    def next(self) -> int:
        """The sequence number the next queued value gets."""
        return self.base + self.count

    def add(self, value: AnyBuffer) -> int:
        """Queue the digest of `value` (live) and return its sequence number."""
        n = self.count
        if n == RING_SLOTS or self.elements > self.pending:
            self.run()
            n = 0
        buf = value.buf
        self.handles[n] = buf.handle
        self.bufs.append(buf)
        self.elements += buf.n
        EXPORTS[buf] = EXPORTS.get(buf, 0) + 1
        self.count = n + 1
        return self.base + n

    def add_now(self, value: AnyBuffer, _digest=lib.tl_digest) -> int:
        """add() digesting `value` at once into the ring's next row: its sequence number, the
        digest readable as soon as the ring is read back. Nothing is queued (so nothing pinned):
        only while no value is queued (the stub never queues one with add_now in place)."""
        used = self.used
        if used == RING_SLOTS:
            self._read_ring()
            used = 0
        st = _digest(value.handle, self.ring_handle, value.buf.n, RING_SLOTS, used)
        if st:
            raise_status("digest", st)
        self.used = used + 1
        d = self.base
        self.base = d + 1
        return d

    def digest_handles(self, hs: list) -> int:
        """Digest at once the buffers of handles `hs` (their Buffers kept alive by the caller,
        nothing queued): one native call. Returns the sequence number of hs[0]; hs[k] gets that
        plus k, as add_all gives."""
        used = self.used
        m = len(hs)
        if used + m > RING_SLOTS:
            return self._digest_handles_around(hs)
        self.handles[0:m] = hs
        return self._run_batch(m, used)

    def digest_values(self, vs: list) -> int:
        """Digest at once the values `vs` (live AnyBuffers, kept alive by the caller): one
        native call, the one-buffer kernel for one value (cheaper to call than a batch of one).
        Returns the sequence number of vs[0]; vs[k] gets that plus k, as digest_handles gives.
        The handles go into the handle array one by one: for a VJP's few values cheaper than a
        list and a slice assignment."""
        m = len(vs)
        if m == 1:
            return self.add_now(vs[0])
        used = self.used
        if used + m > RING_SLOTS:
            return self._digest_handles_around([v.handle for v in vs])
        handles = self.handles
        k = 0
        for v in vs:
            handles[k] = v.handle
            k += 1
        return self._run_batch(m, used)

    def _run_batch(self, m: int, used: int, _batch=lib.tl_digest_batch) -> int:
        """Digest the m handles set at the front of the handle array into ring rows from
        `used` on; returns the first one's sequence number."""
        st = _batch(self.ring_handle, self.handle_words, m, m, RING_SLOTS, used)
        if st:
            raise_status("digest_batch", st)
        self.used = used + m
        first = self.base
        self.base = first + m
        return first

    def _digest_handles_around(self, hs: list) -> int:
        """digest_handles where the ring fills: its rows read back, then the rest, in pieces
        of at most a ring."""
        first = self.base
        for k in range(0, len(hs), RING_SLOTS):
            piece = hs[k:k + RING_SLOTS]
            if self.used + len(piece) > RING_SLOTS:
                self._read_ring()
            self.digest_handles(piece)
        return first

    def add_all(self, hs: list) -> int:
        """Queue the digests of the buffers of handles `hs`, which nothing can release before
        the caller runs the batch (an optimizer step's parameters and state, digested before the
        step record returns, held meanwhile by the optimizer and the parameters): no pins.
        Returns the sequence number of hs[0]; hs[k] gets that plus k (a run when the ring fills
        keeps them consecutive)."""
        n = self.count
        first = self.base + n
        m = len(hs)
        if n + m <= RING_SLOTS:
            self.handles[n:n + m] = hs
            self.count = n + m
            return first
        handles = self.handles
        for h in hs:
            if n == RING_SLOTS:
                self.count = n
                self.run()
                n = 0
            handles[n] = h
            n += 1
        self.count = n
        return first

    def holds(self, buf) -> bool:
        """Whether buf may have a queued digest (it is pinned: queued here, or exported)."""
        return buf in EXPORTS

    def run(self) -> None:
        """Digest every queued value: one native call, into the ring's next rows."""
        count = self.count
        if not count:
            return
        if self.used + count > RING_SLOTS:
            self._read_ring()
        bufs = self.bufs
        try:
            st = lib.tl_digest_batch(self.ring.handle, self.handle_words, count, count,
                                     RING_SLOTS, self.used)
            if st:
                raise_status("digest_batch", st)
        finally:
            self.bufs, self.elements, self.count = [], 0, 0
            self._unpin(bufs)
        self.used += count
        self.base += count

    @staticmethod
    def _unpin(bufs) -> None:
        """One reader fewer of each payload; the last one frees a payload released meanwhile
        (buffer.EXPORTS: a released pinned buffer is only marked, as for a DLPack export)."""
        for buf in bufs:
            left = EXPORTS[buf] - 1
            if left:
                EXPORTS[buf] = left
                continue
            del EXPORTS[buf]
            if not buf.live and buf.handle is not None:
                lib.tl_buf_release(buf.handle)

    def _read_ring(self) -> None:
        if self.used:
            self.sink(_rows_to_digests(self.ring.to_numpy()[:self.used]))
            self.used = 0

    def read_back(self) -> None:
        """Run the queue, then read every digest in the ring (one device-to-host transfer)."""
        self.run()
        self._read_ring()

    def release(self) -> None:
        bufs, self.bufs, self.count = self.bufs, [], 0
        self._unpin(bufs)
        self.ring.release()
