"""The NCCL communicator for the CUDA backend, with libnccl loaded at run time through ctypes.

libnccl is looked for in TORCHLEAN_NCCL_LIB (a file), $CUDA_HOME/lib64, the NVIDIA NCCL pip
package (nvidia/nccl/lib), then the system. Rank 0's unique id travels over the host channel
(MPI under mpirun, the TCP store under torchrun and srun). Collectives run
on a communication stream of normal priority: each first waits (cudaStreamWaitEvent) for the work
already queued on torchlean's stream, so gradients computed there are final, and signals an
event when done. Waiting polls that event and ncclCommGetAsyncError; past the deadline the
communicator is aborted (ncclCommAbort) and a DistributedError names the rank and collective.

Work.order() (DistributedDataParallel's end of backward) instead makes torchlean's stream wait
for that event and returns at once, so the host queues the optimizer step while the reduction
runs; a watchdog thread then polls the event: past the deadline (or on an asynchronous NCCL
error) it aborts the communicator, which ends NCCL's kernels, so no stream waits for ever, and
the next collective of this process raises the DistributedError.
"""
from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import threading
import time

from torchlean._loader import lib as _tl
from torchlean.buffer import Buffer
from torchlean.distributed.cuda_runtime import CudaRuntime
from torchlean.distributed.errors import DistributedError
from torchlean.distributed.work import Work, poll

NCCL_FLOAT32, NCCL_SUM, NCCL_AVG = 7, 0, 4
NCCL_IN_PROGRESS = 7
WATCH_S = 5e-3      # the watchdog's polling period (rarely: each wake-up takes the GIL)


FLAT_BYTES = 0   # opt-in: measured slower than reducing in place on 2 H200s (bench/results/ddp-h200x2.md)


def flat_bytes_from_env() -> int:
    """TORCHLEAN_DDP_FLAT_BYTES (default 0: every buffer reduced in place)."""
    v = os.environ.get("TORCHLEAN_DDP_FLAT_BYTES", "")
    try:
        n = int(v) if v.strip() else FLAT_BYTES
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"TORCHLEAN_DDP_FLAT_BYTES={v!r}: expected a byte count >= 0")
    return n


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def nccl_candidates() -> list[str]:
    out = []
    env = os.environ.get("TORCHLEAN_NCCL_LIB")
    if env:
        out.append(env)
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    out += [os.path.join(home, "lib64", "libnccl.so.2"), os.path.join(home, "lib64", "libnccl.so")]
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        out += sorted(glob.glob(os.path.join(root, "nccl", "lib", "libnccl.so*")))
    out.append("libnccl.so.2")
    return out


def load_nccl():
    tried = []
    for c in nccl_candidates():
        if os.sep in c and not os.path.exists(c):
            tried.append(f"{c} (missing)")
            continue
        try:
            return ctypes.CDLL(c), c
        except OSError as e:
            tried.append(f"{c} ({e})")
    raise DistributedError("torchlean.distributed: NCCL not found (set TORCHLEAN_NCCL_LIB or "
                           "pip install nvidia-nccl-cu12/cu13); tried: " + "; ".join(tried))


def _declare(L):
    vp, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    sig = {"ncclGetUniqueId": [ctypes.POINTER(UniqueId)],
           "ncclCommInitRank": [ctypes.POINTER(vp), i, UniqueId, i],
           "ncclAllReduce": [vp, vp, sz, i, i, vp, vp],
           "ncclAllGather": [vp, vp, sz, i, vp, vp],
           "ncclBroadcast": [vp, vp, sz, i, i, vp, vp],
           "ncclSend": [vp, sz, i, i, vp, vp], "ncclRecv": [vp, sz, i, i, vp, vp],
           "ncclGroupStart": [], "ncclGroupEnd": [],
           "ncclCommGetAsyncError": [vp, ctypes.POINTER(i)],
           "ncclCommAbort": [vp], "ncclCommDestroy": [vp]}
    for name, args in sig.items():
        f = getattr(L, name)
        f.argtypes, f.restype = args, i
    L.ncclGetErrorString.argtypes, L.ncclGetErrorString.restype = [i], ctypes.c_char_p
    if hasattr(L, "ncclGetLastError"):
        L.ncclGetLastError.argtypes, L.ncclGetLastError.restype = [vp], ctypes.c_char_p


class NCCLComm:
    name = "nccl"
    averages = True      # all_reduce(average=True): NCCL's ncclAvg (NCCL >= 2.10)

    def __init__(self, host, device: int):
        self.host = host     # the host channel: MPI, or the TCP store (torchrun, srun)
        self.rank, self.world, self.timeout_s = host.rank, host.world, host.timeout_s
        self.nccl, self.nccl_path = load_nccl()
        _declare(self.nccl)
        self.rt = CudaRuntime()
        self.device = device
        self.rt.set_device(device)
        self.compute = self._library_stream()
        self.stream = self.rt.stream()
        self._events: list[int] = []
        self._count = 0
        self._flats: dict[int, Buffer] = {}
        self.flat_bytes = flat_bytes_from_env()
        # the watchdog's: collectives only the device waits for, as (event, what, deadline)
        self._lock = threading.RLock()     # NCCL calls and the event pool, against the watchdog
        self._wake = threading.Condition(self._lock)
        self._watched: list = []
        self._watchdog = None
        self.error: DistributedError | None = None
        uid = UniqueId()
        if self.rank == 0:
            self._check("ncclGetUniqueId", self.nccl.ncclGetUniqueId(ctypes.byref(uid)))
        # all 128 bytes (uid.internal would stop at the first zero byte)
        mine = ctypes.string_at(ctypes.addressof(uid), 128) if self.rank == 0 else None
        raw = host.bcast_bytes(mine, 128, 0, "NCCL unique id broadcast")
        ctypes.memmove(ctypes.addressof(uid), raw, 128)
        comm = ctypes.c_void_p()
        self._check("ncclCommInitRank",
                    self.nccl.ncclCommInitRank(ctypes.byref(comm), self.world, uid, self.rank))
        self.comm = comm.value

    @staticmethod
    def _library_stream() -> int:
        from torchlean._loader import ffi
        s = _tl.tl_cuda_stream()
        if s == ffi.NULL:
            from torchlean.buffer import raise_status
            raise_status("tl_cuda_stream", _tl.TL_E_DEVICE)
        return int(ffi.cast("uintptr_t", s))

    # ---------------------------------------------------------------- plumbing
    def _check(self, what: str, r: int) -> None:
        if r not in (0, NCCL_IN_PROGRESS):
            msg = self.nccl.ncclGetErrorString(r).decode(errors="replace")
            detail = ""
            if hasattr(self.nccl, "ncclGetLastError"):
                last = self.nccl.ncclGetLastError(None)
                detail = f": {last.decode(errors='replace')}" if last else ""
            raise DistributedError(f"rank {self.rank}: {what}: NCCL error {r} ({msg}){detail}")

    def _event(self) -> int:
        with self._lock:
            return self._events.pop() if self._events else self.rt.event()

    def _launch(self, what: str, enqueue, before=None, after=None) -> Work:
        """Order after torchlean's queued work, enqueue NCCL calls (between before() and
        after(), copies on the communication stream), return their Work."""
        if self.error is not None:
            raise self.error
        self._count += 1
        what = f"{what} (collective #{self._count} of this process, NCCL)"
        with self._lock:
            ready = self._event()
            self.rt.record(ready, self.compute)
            self.rt.wait_event(self.stream, ready)
            self._events.append(ready)   # reusable at once: the wait was captured at enqueue
            if before is not None:
                before()
            self._check(what + ": ncclGroupStart", self.nccl.ncclGroupStart())
            try:
                enqueue(what)
            finally:
                self._check(what + ": ncclGroupEnd", self.nccl.ncclGroupEnd())
            if after is not None:
                after()
            done = self._event()
            self.rt.record(done, self.stream)
        err = ctypes.c_int(0)

        def test() -> bool:
            if self.rt.query(done):
                return True
            self.nccl.ncclCommGetAsyncError(self.comm, ctypes.byref(err))
            if err.value not in (0, NCCL_IN_PROGRESS):
                self.abort()
                self._check(what, err.value)
            return False

        def wait():
            poll(test, rank=self.rank, what=what, timeout_s=self.timeout_s,
                 on_timeout=self.abort)
            with self._lock:
                self._events.append(done)

        def order():
            self.rt.wait_event(self.compute, done)
            with self._lock:
                self._watched.append((done, what, time.monotonic() + self.timeout_s))
                if self._watchdog is None:
                    self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                                      name="torchlean NCCL watchdog")
                    self._watchdog.start()
                self._wake.notify()
        return Work(wait, order=order)

    def _watch(self) -> None:
        """The watchdog: recycle the events of completed collectives that only the device
        waited for; past a deadline, or on an asynchronous NCCL error, abort."""
        err = ctypes.c_int(0)
        try:
            self.rt.set_device(self.device)    # this thread's CUDA calls: the rank's device
        except DistributedError as e:
            self.error = e
        with self._lock:
            while self._watchdog is not None:
                if not self._watched:
                    self._wake.wait()
                    continue
                try:
                    pending = [w for w in self._watched if not self.rt.query(w[0])]
                    self._events += [w[0] for w in self._watched if w not in pending]
                    self._watched = pending
                    problem = None
                    if pending and self.comm:
                        self.nccl.ncclCommGetAsyncError(self.comm, ctypes.byref(err))
                        if err.value not in (0, NCCL_IN_PROGRESS):
                            msg = self.nccl.ncclGetErrorString(err.value).decode(errors="replace")
                            problem = f"NCCL error {err.value} ({msg})"
                    if pending and problem is None and time.monotonic() > pending[0][2]:
                        problem = (f"did not complete within {self.timeout_s:g} s: a peer "
                                   "process died, raised or stopped calling the same collective "
                                   "(timeout set by TORCHLEAN_DIST_TIMEOUT_S)")
                except DistributedError as e:     # the CUDA runtime failed
                    problem, pending = str(e), self._watched
                if problem is not None:
                    self.error = DistributedError(f"rank {self.rank}: {pending[0][1]} {problem}")
                    self._watched = []
                    self.abort()
                    continue
                self._wake.wait(WATCH_S)

    def abort(self) -> None:
        with self._lock:
            if self.comm:
                self.nccl.ncclCommAbort(self.comm)
                self.comm = None
                self.host.fail()

    # ---------------------------------------------------------------- collectives
    def all_reduce(self, bufs, what: str, average: bool = False) -> Work:
        """Sum (average: the mean, divided inside NCCL's kernel) every buffer over the ranks,
        in place. Buffers under flat_bytes are copied into one flat buffer on the
        communication stream, reduced by one NCCL call and copied back (biases and norms
        cost one call between them, not one each); larger ones are reduced where they are."""
        op = NCCL_AVG if average else NCCL_SUM
        small = [b for b in bufs if 0 < 4 * b.numel < self.flat_bytes]
        if len(small) < 2:
            small = []
        ids = {id(b) for b in small}
        large = [b for b in bufs if b.numel and id(b) not in ids]
        n = sum(b.numel for b in small)
        flat = self._flat_buffer(n) if small else None

        def copies(to_flat: bool):
            off = 0
            for b in small:
                p, q = flat.data_ptr() + 4 * off, b.buf.data_ptr()
                self.rt.copy_d2d(p if to_flat else q, q if to_flat else p, 4 * b.numel,
                                 self.stream)
                off += b.numel

        def enqueue(w):
            if flat is not None:
                p = flat.data_ptr()
                self._check(w, self.nccl.ncclAllReduce(p, p, n, NCCL_FLOAT32, op, self.comm,
                                                       self.stream))
            for b in large:
                p = b.buf.data_ptr()
                self._check(w, self.nccl.ncclAllReduce(p, p, b.numel, NCCL_FLOAT32, op,
                                                       self.comm, self.stream))
        return self._launch(what, enqueue, before=(lambda: copies(True)) if small else None,
                            after=(lambda: copies(False)) if small else None)

    def _flat_buffer(self, n: int) -> Buffer:
        """A device buffer of n floats kept for the next step's bucket of that size (every
        use is on the communication stream, in order, so one buffer per size suffices)."""
        buf = self._flats.get(n)
        if buf is None:
            buf = self._flats[n] = Buffer.alloc(n, "DistributedDataParallel flat bucket")
        return buf

    def broadcast(self, bufs, src: int, what: str) -> Work:
        def enqueue(w):
            for b in bufs:
                if b.numel:
                    p = b.buf.data_ptr()
                    self._check(w, self.nccl.ncclBroadcast(p, p, b.numel, NCCL_FLOAT32, src,
                                                           self.comm, self.stream))
        return self._launch(what, enqueue)

    def all_gather(self, bufs, what: str):
        outs = [Buffer.alloc(self.world * b.numel, "all_gather") for b in bufs]

        def enqueue(w):
            for b, o in zip(bufs, outs):
                if b.numel:
                    self._check(w, self.nccl.ncclAllGather(b.buf.data_ptr(), o.data_ptr(),
                                                           b.numel, NCCL_FLOAT32, self.comm,
                                                           self.stream))
        return self._launch(what, enqueue), outs

    def _copies(self, base: Buffer, pieces, into: bool) -> None:
        """On the communication stream: each piece (buf, buf's offset, base's offset, n floats)
        copied into base (into) or out of it."""
        b = base.data_ptr()
        for buf, off, at, n in pieces:
            p, q = buf.data_ptr() + 4 * off, b + 4 * at
            self.rt.copy_d2d(q if into else p, p if into else q, 4 * n, self.stream)

    def all_to_all(self, send: Buffer, recv: Buffer, block: int, what: str, pack=()) -> Work:
        """Block q of send (`block` floats at q * block) goes to rank q; block r of recv comes
        from rank r. The pieces of `pack` (buf, offset, send's offset, n) are first copied into
        send, after torchlean's queued work (the gradients they read are final)."""
        W = self.world

        def enqueue(w):
            s, r = send.data_ptr(), recv.data_ptr()
            for q in range(W):
                self._check(w, self.nccl.ncclSend(s + 4 * q * block, block, NCCL_FLOAT32, q,
                                                  self.comm, self.stream))
                self._check(w, self.nccl.ncclRecv(r + 4 * q * block, block, NCCL_FLOAT32, q,
                                                  self.comm, self.stream))
        return self._launch(what, enqueue,
                            before=(lambda: self._copies(send, pack, True)) if pack else None)

    def all_gather_into(self, src: Buffer, dst: Buffer, what: str, unpack=()) -> Work:
        """dst (world * n floats) := every rank's src (n floats) in rank order; then each
        piece of `unpack` (buf, offset, dst's offset, n) is copied out of dst."""
        def enqueue(w):
            self._check(w, self.nccl.ncclAllGather(src.data_ptr(), dst.data_ptr(), src.n,
                                                   NCCL_FLOAT32, self.comm, self.stream))
        return self._launch(what, enqueue,
                            after=(lambda: self._copies(dst, unpack, False)) if unpack else None)

    def barrier(self, what: str = "barrier") -> None:
        from torchlean.runtime import synchronize
        synchronize()
        if self.error is not None:
            raise self.error
        self.host.barrier(what)

    def copy_into(self, src, dst) -> None:
        """dst[:] = src on torchlean's stream (dst keeps its memory)."""
        if src.numel:
            self.rt.copy_d2d(dst.buf.data_ptr(), src.buf.data_ptr(), 4 * src.numel, self.compute)

    def allgather_array(self, a, what: str):
        return self.host.allgather_array(a, what)

    def allgather_array_start(self, a, what: str):
        return self.host.allgather_array_start(a, what)

    def fail(self) -> None:
        """This rank raised DistributedError: abort NCCL now, so collectives a peer will never
        join end instead of keeping the device (and the process's exit) waiting."""
        self.abort()
        self.host.fail()

    def close(self) -> None:
        with self._lock:
            dog, self._watchdog = self._watchdog, None
            self._wake.notify()
        if dog is not None:
            dog.join()
        for ev, what, deadline in self._watched:   # done before the communicator goes
            poll(lambda: self.rt.query(ev), rank=self.rank, what=what,
                 timeout_s=max(deadline - time.monotonic(), 0.0), on_timeout=self.abort)
            self._events.append(ev)
        self._watched = []
        if self.comm:
            self.nccl.ncclCommDestroy(self.comm)
            self.comm = None
        for e in self._events:
            self.rt.destroy_event(e)
        self._events = []
        for buf in self._flats.values():
            buf.release()
        self._flats = {}
        if self.stream:
            self.rt.destroy_stream(self.stream)
            self.stream = 0
        self.host.close()
