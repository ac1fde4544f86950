"""DistributedDataParallel: the same model on every rank, gradients averaged (or summed) across
ranks.

At wrap time the ranks check that they wrap the same model: the same parameter and buffer names,
shapes and requires_grad flags (a difference is a DistributedError on every rank naming the first
one); then rank 0's parameters and buffers are broadcast (init_sync=True, as PyTorch), or, with
init_sync=False, the values must already agree. Parameters are grouped in buckets of about
`bucket_cap_mb` megabytes, in reverse registration order (the order backward finishes them).
When a backward pass has accumulated the last gradient of a bucket (a post-accumulate-grad hook,
see Parameter.register_post_accumulate_grad_hook), the bucket's reduction starts at once, in
bucket order on every rank, so communication overlaps the rest of the backward pass (on CUDA on
a separate NCCL stream). When the backward pass ends, every reduction is waited for (on CUDA
by torchlean's stream, not the host, which goes on to queue the optimizer step; NCCL's watchdog
keeps the deadline) and each gradient becomes its average over the ranks (its sum with
reduce_op="sum"). Only gradients are touched: any optimizer works.
With its first bucket, each reducing backward posts this rank's step (the number of forward
passes since the last reduction, the micro-batch step) on the host channel, and reads every
rank's at the end of the backward pass, so the check waits for nothing mid-step (exact mode's
messages have sizes that depend on it: its buckets start once the check has arrived, which each
gradient asks without waiting): a rank that skipped a backward() fails that step on every rank
instead of drifting.

Two reductions:
  default: NCCL's (or MPI's) all-reduce sum; reduce_op="avg" divides by W inside NCCL's
      kernel (ncclAvg: no kernel per parameter) or, on MPI, with the scale op (c = 1/W).
      Its summation order is the library's choice, so results agree with one process to
      rounding (allclose).
  exact (torchlean.is_deterministic() or torchlean.is_exact()): every micro-batch's gradient is
      summed in global micro-batch order m = 0, 1, ..., W*K - 1 (g = g_0; g = g + g_1; ...
      with the add kernel), then (reduce_op="avg") scaled with c = 1/W. That is bit for bit
      what one process accumulating the W*K micro-batches in that order with backward()
      computes (backward adds each new gradient to .grad with the same add kernel). A bucket
      is cut into W chunks (reduce.exchange_plan): an all-to-all sends chunk q of every
      micro-batch gradient to rank q, which adds the W*K pieces of its chunk in that order,
      and an all-gather brings the sums back (each rank sends and receives about what a ring
      all-reduce does; the sum is elementwise, so where it runs does not change a bit). To
      keep the micro-batches apart, a backward under no_sync() moves each parameter's
      gradient aside (its .grad is None until the reducing backward); this costs K gradient
      copies per rank, and the exchange 2K more of the bucket in flight.

Matching one process exactly: with reduce_op="sum" and each micro-batch loss scaled by
1/(W*K), W processes of K micro-batches equal one process accumulating W*K micro-batches each
scaled by 1/(W*K), for every W and K. With reduce_op="avg" (PyTorch's mean) and losses scaled
by 1/K they do when W is a power of two; otherwise the mean's 1/W, applied after the sum,
rounds differently from a 1/(W*K) folded into the loss.

Micro-batches: the j-th training forward since the last reduction on rank r is global
micro-batch j * W + r of the step. Its random draws (dropout) are keyed by (seed, step, that
index) through torchlean.random.micro_batch, step being the wrapper's `steps` (reductions
completed; restore it when resuming), unless the caller opened such a scope itself (the
examples do, with their own step count, so a resumed run draws the same), and BatchNorm folds
every rank's batch statistics into its running buffers in rank order (broadcast_buffers=True), so
W processes equal one process accumulating the W micro-batches of each forward in rank order.

no_sync(): backward passes inside it only accumulate locally (gradient accumulation); the first
backward outside it reduces the accumulated sums.
"""
from __future__ import annotations

import contextlib
import weakref
import zlib

import numpy as np

from torchlean import _capture
from torchlean import distributed as dist
from torchlean import inplace as _inplace
from torchlean import random as _random
from torchlean.buffer import AnyBuffer, Buffer
from torchlean._generated import ops as _ops
from torchlean.distributed import agree
from torchlean.distributed.reduce import buffer_view, exact_reduction, exchange_plan, sum_rows
from torchlean.nn.modules import BatchNorm2d, Module, SyncBatchNorm
from torchlean.parameter import register_backward_end_hook


# the first bucket's cap in MB where the job's traffic crosses a network (PyTorch's, always);
# within one host every bucket is up to bucket_cap_mb (see DistributedDataParallel.__init__)
NETWORK_FIRST_BUCKET_MB = 1.0


class _Bucket:
    __slots__ = ("index", "params", "nbytes", "ready", "pending", "plans")

    def __init__(self, index: int):
        self.index, self.params, self.nbytes = index, [], 0
        self.ready: set[int] = set()
        # once launched: (work, None) for an all-reduce; in exact mode ("chunks", work, recv,
        # K, c, micro, send) for the all-to-all of K micro-batch gradients per parameter
        # (micro[i * K + j], .grad last), then ("gather", work, grads, held) for the all-gather
        # of the summed chunks (grads: the parameters' new gradients)
        self.pending = None
        self.plans: dict = {}     # K -> reduce.exchange_plan of this bucket for K micro-batches

    def plan(self, k: int, world: int):
        got = self.plans.get(k)
        if got is None:
            got = self.plans[k] = exchange_plan(
                [int(np.prod(p.shape, dtype=np.int64)) for p in self.params], k, world)
        return got


class DistributedDataParallel(Module):
    """Wraps `module` (reached as .module); forward calls it. torchlean.distributed.init() must
    have run. bucket_cap_mb: bucket size in megabytes (25 MB as in PyTorch; the first bucket,
    holding the last layers, is capped at 1 MB where the traffic crosses a network, as
    PyTorch's always is, and is as large as the others within one host).
    broadcast_buffers: rank 0's buffers are broadcast at wrap time; then BatchNorm's running
    statistics fold every rank's batch in rank order and any other buffer is broadcast from
    rank 0 at each training forward (False: each rank keeps its own buffers).
    init_sync: broadcast rank 0's parameters (and buffers) at wrap time; False requires every
    rank to hold the same values already (checked).
    reduce_op: "avg" (PyTorch's) makes each gradient the mean over the ranks, "sum" their sum
    (scale the loss by 1 / (W * K) to match one process of W * K micro-batches in every bit)."""

    def __init__(self, module: Module, bucket_cap_mb: float = 25.0,
                 broadcast_buffers: bool = True, init_sync: bool = True,
                 reduce_op: str = "avg"):
        super().__init__()
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got "
                             f"{bucket_cap_mb}")
        if reduce_op not in ("avg", "sum"):
            raise ValueError(f"DistributedDataParallel: reduce_op must be 'avg' or 'sum', got "
                             f"{reduce_op!r}")
        object.__setattr__(self, "_average", reduce_op == "avg")
        # exact mode, under no_sync: id(param) -> {micro-batch j: its gradient}
        object.__setattr__(self, "_aside", {})
        self.module = module
        comm = dist.communicator()
        object.__setattr__(self, "_comm", comm)
        object.__setattr__(self, "_sync", True)
        object.__setattr__(self, "_active", False)
        # this step's agreement check: False (not started), (finish, mine) in flight, True done
        object.__setattr__(self, "_checked", False)
        object.__setattr__(self, "_forwards", 0)      # training forwards since the last reduction
        object.__setattr__(self, "_step", 0)          # reductions completed
        params = module.parameters()     # each once, tied weights included
        check_same_model(comm, module, values=not init_sync)
        states = (params if init_sync else []) + (
            module.buffers() if init_sync and broadcast_buffers else [])
        self._broadcast(states, "parameter and buffer broadcast")
        norms = [m for m in module.modules()
                 if isinstance(m, BatchNorm2d) and not isinstance(m, SyncBatchNorm)]
        synced = set()      # buffers every rank updates alike: BatchNorm's, SyncBatchNorm's
        if broadcast_buffers:
            for m in norms:
                object.__setattr__(m, "_ranks", comm)
            synced = {id(b) for m in module.modules() if isinstance(m, BatchNorm2d)
                      for b in m.buffers()}
        # any other buffer follows rank 0's at every training forward, as in PyTorch
        object.__setattr__(self, "_rank0_buffers", [
            b for b in module.buffers() if broadcast_buffers and id(b) not in synced])
        trainable = [p for p in params if p.requires_grad]
        # Buckets of up to bucket_cap_mb. PyTorch caps the first (the last layers) at 1 MB so
        # communication starts early in the backward pass: that pays where the traffic crosses
        # a network (the emulated network, 2 H200s: VGG-style 5.33 vs 5.64 ms, LM 18.74 vs
        # 19.12 ms), but within one host over NVLink the small model's early reduction only
        # waits on the SMs for the other ranks (VGG-style 4.17 vs 4.83 ms at 2 GPUs, 4.90 vs
        # 5.17 at 4; LM 7.56 vs 8.94 at 4: bench/results/ddp-h200x4.md), so there the first
        # bucket is as large as the others (a model under the cap is one bucket)
        first = min(bucket_cap_mb, NETWORK_FIRST_BUCKET_MB) if dist.crosses_network() else None
        buckets = []
        for p in reversed(trainable):
            cap = 1e6 * (first if first is not None and len(buckets) <= 1 else bucket_cap_mb)
            nb = 4 * int(np.prod(p.shape))
            if not buckets or (buckets[-1].nbytes and buckets[-1].nbytes + nb > cap):
                buckets.append(_Bucket(len(buckets)))
            buckets[-1].params.append(p)
            buckets[-1].nbytes += nb
        object.__setattr__(self, "_buckets", buckets)
        object.__setattr__(self, "_bucket_of", {id(p): b for b in buckets for p in b.params})
        object.__setattr__(self, "_next", 0)
        me = weakref.ref(self)
        hooks = [p.register_post_accumulate_grad_hook(lambda p, me=me: me() and me()._on_grad(p))
                 for p in trainable]
        hooks.append(register_backward_end_hook(lambda: me() and me()._on_backward_end()))
        hooks.append(_Detach(norms))
        object.__setattr__(self, "_hooks", hooks)
        weakref.finalize(self, _remove_all, hooks)   # a dropped wrapper leaves no hooks behind

    # ---------------------------------------------------------------- wrap time
    def _broadcast(self, states, what: str) -> None:
        mirrors = [s.mirror() for s in states]
        if mirrors and self._comm.world > 1:
            self._comm.broadcast(mirrors, 0, f"DistributedDataParallel {what}").wait()
            for s in states:
                s.mark_device_updated()

    # ---------------------------------------------------------------- forward
    def forward(self, *args, **kwargs):
        if _capture.STATE.strict and self.training:
            # the host starts every reduction (the step check, the collectives' launches) at
            # each step: a replay of a captured step would skip them and train unsynchronised
            raise RuntimeError(
                "graph_step: DistributedDataParallel's training step cannot be captured (the "
                "host starts its gradient reductions and the ranks' step check at every step, "
                "which a replay would skip); run data-parallel steps without graph_step")
        if self._active:
            # a backward pass that raised part-way left reductions in flight: complete them
            # so this rank's collectives stay in step with the others'
            self._on_backward_end()
        if not self.training:
            return self.module(*args, **kwargs)
        j = self._forwards
        object.__setattr__(self, "_forwards", j + 1)
        if self._rank0_buffers:
            self._broadcast(self._rank0_buffers, "buffer broadcast")
        if _random.current_micro_batch() is not None:
            return self.module(*args, **kwargs)
        comm = self._comm
        with _random.micro_batch(self._step, j * comm.world + comm.rank):
            return self.module(*args, **kwargs)

    @property
    def steps(self) -> int:
        """Reductions completed: the step of the micro-batch keys this wrapper opens
        (random.micro_batch(steps, j * W + r)). Set it when resuming from a checkpoint taken
        after n optimizer steps, so the dropout draws go on as in the uninterrupted run."""
        return self._step

    @steps.setter
    def steps(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"DistributedDataParallel.steps must be an integer >= 0, got {n!r}")
        object.__setattr__(self, "_step", int(n))

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients locally, without communication."""
        prev = self._sync
        object.__setattr__(self, "_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_sync", prev)

    # ---------------------------------------------------------------- backward
    def _on_grad(self, p) -> None:
        b = self._bucket_of.get(id(p))
        if not self._sync:
            if b is not None and exact_reduction():
                self._set_aside(p)
            return
        if b is None or b.pending is not None:
            return
        b.ready.add(id(p))
        object.__setattr__(self, "_active", True)
        self._start_check()
        self._launch_ready()

    def _start_check(self) -> None:
        """At this step's first gradient: post this rank's step record (the reductions so far,
        the forward passes since the last one, the micro-batch step, the buckets). It travels
        while the backward pass goes on and is read at its end (_check_same_step), so the
        check costs no wait in the middle of the step. Exact mode reads it at once: the
        gathers' sizes depend on the forward count, so they must agree first."""
        if self._checked is not False:
            return
        comm = self._comm
        if comm.world == 1:
            object.__setattr__(self, "_checked", True)
            return
        micro = _random.current_micro_batch()
        mine = [self._step, self._forwards, -1 if micro is None else micro[0],
                len(self._buckets)]
        finish = agree.start(comm, "DistributedDataParallel step check", mine)
        object.__setattr__(self, "_checked", (finish, mine))

    def _check_same_step(self) -> None:
        """Every rank ran as many forward passes since the last reduction, in the same
        micro-batch step, with as many buckets; else a DistributedError on every rank."""
        self._start_check()
        if self._checked is True:
            return
        finish, mine = self._checked
        object.__setattr__(self, "_checked", True)
        comm = self._comm
        try:
            got = finish()
        except dist.DistributedError:
            comm.fail()
            self._reset(ok=False)
            raise
        if (got == mine).all():
            return
        names = ("reductions so far", "forward passes since the last reduction",
                 "micro-batch step", "buckets")
        k = int(np.flatnonzero((got != got[0]).any(axis=0))[0])
        self._reset(ok=False)
        raise dist.DistributedError(
            f"rank {comm.rank}: DistributedDataParallel: the ranks are not at the same step "
            f"(reduction #{self._step + 1} of this rank): {names[k]} by rank: "
            f"{got[:, k].tolist()}. A rank skipped a backward() (or ran an extra forward); "
            "every rank must run the same forward and backward passes")

    def _set_aside(self, p) -> None:
        """Exact mode, under no_sync: keep this micro-batch's gradient apart, so the reduction
        can add every rank's micro-batches in global order (the next backward starts .grad
        afresh). A second backward after the same forward adds into its slot."""
        j = max(self._forwards - 1, 0)
        slots = self._aside.setdefault(id(p), {})
        g = p.grad_buf
        p.grad_buf = None
        if j in slots:
            s = _ops.add(slots[j], g)
            slots[j].release()
            g.release()
            g = s
        slots[j] = g

    def _micro_grads(self, p, k: int) -> list[AnyBuffer]:
        """Parameter p's k micro-batch gradients of this step, in order: those set aside, then
        .grad (the last micro-batch's); zeros where a micro-batch gave none."""
        slots = self._aside.pop(id(p), {})
        last = p.grad_buf
        if k - 1 in slots:
            s = _ops.add(slots.pop(k - 1), last)
            last.release()
            last = p.grad_buf = s
        out = [slots.pop(j) if j in slots else AnyBuffer.zeros(p.shape) for j in range(k - 1)]
        for g in slots.values():   # later slots than forwards: impossible after the step check
            g.release()
        return out + [last]

    def _launch_ready(self) -> None:
        # buckets start in index order on every rank, so the collectives match. Exact mode's
        # messages have sizes that depend on the forward count, so its buckets start once the
        # step check has arrived (asked without waiting here; the end of backward waits)
        if self._checked is not True and exact_reduction():
            ready = getattr(self._checked[0], "ready", None) if self._checked else None
            if ready is None or not ready():
                return
            self._check_same_step()
        bs = self._buckets
        while self._next < len(bs) and len(bs[self._next].ready) == len(bs[self._next].params):
            self._launch(bs[self._next])
            object.__setattr__(self, "_next", self._next + 1)

    def _launch(self, b: _Bucket) -> None:
        grads = [p.grad_buf for p in b.params]
        what = (f"DistributedDataParallel bucket {b.index} ({len(grads)} gradients, "
                f"{b.nbytes} bytes)")
        if exact_reduction():
            k = max(self._forwards, 1)
            micro = [g for p in b.params for g in self._micro_grads(p, k)]
            W = self._comm.world
            if self._comm.name == "solo":      # a job of one process: nothing to exchange
                b.pending = ("chunks", None, None, k, 0, micro, None)
                return
            # rank q sums chunk q of every micro-batch gradient of every rank (all-to-all),
            # then the sums travel back (all-gather in _sum_chunks): each rank sends and
            # receives as much as in a ring all-reduce
            c, pieces = b.plan(k, W)
            send, recv = Buffer.zeros(W * k * c), Buffer.alloc(W * k * c)
            pack = [(micro[m].buf, src, dst, n) for m, src, dst, n in pieces]
            work = self._comm.all_to_all(send, recv, k * c, what + f" all_to_all of {k} "
                                         "micro-batches", pack)
            # the exchange reads micro and send until it is done
            b.pending = ("chunks", work, recv, k, c, micro, send)
        else:
            if self._average and self._comm.averages:
                b.pending = (self._comm.all_reduce(grads, what + " all_reduce (mean)",
                                                   average=True), None)
            else:
                b.pending = (self._comm.all_reduce(grads, what + " all_reduce"), None)

    def _on_backward_end(self) -> None:
        if not self._active:
            return
        ok = False
        try:
            self._check_same_step()
            for b in self._buckets:   # parameters no gradient reached: zeros on this rank
                for p in b.params:
                    if id(p) not in b.ready:
                        if p.grad_buf is None:
                            p.grad_buf = AnyBuffer.zeros(p.shape)
                        b.ready.add(id(p))
            self._launch_ready()
            if exact_reduction():
                for b in self._buckets:
                    self._sum_chunks(b)
            for b in self._buckets:
                self._finish(b)
            ok = True
        finally:
            self._reset(ok)

    def _reset(self, ok: bool) -> None:
        """Ready for the next step (counted when this one's reduction completed)."""
        for b in self._buckets:
            b.ready.clear()
            b.pending = None
        for slots in self._aside.values():
            for g in slots.values():
                g.release()
        self._aside.clear()
        object.__setattr__(self, "_next", 0)
        object.__setattr__(self, "_active", False)
        object.__setattr__(self, "_checked", False)
        object.__setattr__(self, "_forwards", 0)
        if ok:
            object.__setattr__(self, "_step", self._step + 1)

    def _sum_chunks(self, b: _Bucket) -> None:
        """Exact mode: this rank's chunk of the bucket summed in global micro-batch order
        m = j * W + r (rank r's j-th: g = x_0; g = g + x_1; ... with the add kernel), scaled
        by 1 / W for the mean, and all-gathered back into each parameter's new gradient."""
        _, work, recv, K, c, micro, send = b.pending
        if work is None:            # one rank: its micro-batches in order
            if K == 1:
                b.pending = ("gather", None, micro, [])
                return
            sums = [sum_rows(micro[i * K:(i + 1) * K]) for i in range(len(b.params))]
            b.pending = ("gather", None, sums, [g for m, g in enumerate(micro) if m % K != K - 1])
            return
        work.order()   # NCCL: torchlean's stream waits for the exchange
        W = self._comm.world
        rows = [buffer_view(recv, (r * K + j) * c, c, (c,)) for j in range(K) for r in range(W)]
        acc = sum_rows(rows)
        if self._average:
            _inplace.scale_into(acc, 1.0 / W, "DistributedDataParallel mean")
        gathered = Buffer.alloc(W * c, "DistributedDataParallel all_gather")
        grads, unpack, off = [], [], 0
        for p in b.params:
            n = int(np.prod(p.shape, dtype=np.int64))
            g = AnyBuffer(tuple(p.shape), Buffer.alloc(n, "DistributedDataParallel gradient"))
            grads.append(g)
            unpack.append((g.buf, 0, off, n))
            off += n
        work = self._comm.all_gather_into(
            acc.buf, gathered, f"DistributedDataParallel bucket {b.index} all_gather of the "
            f"summed chunks ({c} floats a rank)", unpack)
        for m, g in enumerate(micro):   # the last of each parameter is .grad: dropped below
            if m % K != K - 1:
                g.release()
        send.release()
        b.pending = ("gather", work, grads, [acc, gathered, recv])

    def _finish(self, b: _Bucket) -> None:
        if b.pending[0] == "gather":
            _, work, grads, held = b.pending
            if work is not None:
                work.order()   # NCCL: the stream waits, the host goes on to the optimizer step
            for p, g in zip(b.params, grads):
                p.grad_buf = g     # the local gradient goes with its last reference
            for h in held:
                h.release()
            return
        work, _ = b.pending
        work.order()   # NCCL: the stream waits, the host goes on to the optimizer step
        if not self._average or self._comm.averages:
            return
        W = self._comm.world
        for p in b.params:
            # in place (the scale kernel's bits): a Tensor taken from p.grad sees the mean
            _inplace.scale_into(p.grad_buf, 1.0 / W, "DistributedDataParallel mean")

    def remove_hooks(self) -> None:
        """Detach from the parameters and BatchNorm layers (the wrapper stops reducing)."""
        _remove_all(self._hooks)


class _Detach:
    """A hook handle that unhooks BatchNorm layers from the communicator."""

    def __init__(self, norms):
        self.norms = norms

    def remove(self) -> None:
        for m in self.norms:
            object.__setattr__(m, "_ranks", None)
        self.norms = []


def _describe(module: Module) -> list[tuple[str, str, tuple, bool]]:
    return ([("parameter", n, tuple(p.shape), bool(p.requires_grad))
             for n, p in module.named_parameters()]
            + [("buffer", n, tuple(b.shape), False) for n, b in module.named_buffers()])


def check_same_model(comm, module: Module, values: bool) -> None:
    """Every rank wraps a model with the same parameter and buffer names, shapes and
    requires_grad flags (and, with values, the same values, bit for bit); otherwise a
    DistributedError on every rank naming the first difference."""
    if comm.world == 1:
        return
    what = "DistributedDataParallel model check"
    entries = _describe(module)
    text = "\n".join(f"{k} {n} {s} {g}" for k, n, s, g in entries).encode()
    crcs = np.zeros(0, np.int64)
    if values:
        crcs = np.array([zlib.crc32(np.ascontiguousarray(t.numpy(), np.float32).tobytes())
                         for t in module.parameters() + module.buffers()], np.int64)
    sig = np.array([len(entries), zlib.crc32(text), zlib.crc32(crcs.tobytes())], np.int64)
    got = comm.allgather_array(sig, what)
    if (got == sig).all():
        return
    me = f"rank {comm.rank}: DistributedDataParallel: the ranks wrap different models: "
    if (got[:, :2] != sig[:2]).any():
        texts = allgather_bytes(comm, text, what)
        tables = [[line.split(" ", 2) for line in t.decode().split("\n") if line]
                  for t in texts]
        raise dist.DistributedError(me + first_difference(tables))
    every = comm.allgather_array(crcs, what + " values")
    i = int(np.flatnonzero((every != every[0]).any(axis=0))[0])
    kind, name = entries[i][0], entries[i][1]
    differ = [r for r in range(comm.world) if every[r, i] != every[0, i]]
    raise dist.DistributedError(
        me + f"{kind} {name!r} holds other values on rank(s) {differ} than on rank 0 "
        "(init_sync=False requires equal values; init_sync=True copies rank 0's)")


def first_difference(tables: list[list[list[str]]]) -> str:
    """The first entry where some rank's (kind, name, shape and flag) differ from rank 0's."""
    for i in range(max(len(t) for t in tables)):
        rows = [t[i] if i < len(t) else None for t in tables]
        for r, row in enumerate(rows):
            if row != rows[0]:
                return f"entry {i}: rank 0 has {_entry(rows[0])}, rank {r} has {_entry(row)}"
    return "the descriptions differ"


def _entry(row) -> str:
    if row is None:
        return "nothing (fewer parameters and buffers)"
    kind, name, rest = row
    shape, flag = rest.rsplit(" ", 1)
    extra = f", requires_grad={flag}" if kind == "parameter" else ""
    return f"{kind} {name!r} of shape {shape}{extra}"


def allgather_bytes(comm, data: bytes, what: str) -> list[bytes]:
    """Every rank's bytes, in rank order (two fixed-size gathers, each with the deadline)."""
    sizes = comm.allgather_array(np.array([len(data)], np.int64), what + " sizes")[:, 0]
    buf = np.zeros(int(sizes.max()), np.uint8)
    buf[:len(data)] = np.frombuffer(data, np.uint8)
    rows = comm.allgather_array(buf, what + " text")
    return [rows[r, :int(n)].tobytes() for r, n in enumerate(sizes)]


def _remove_all(hooks: list) -> None:
    for h in hooks:
        h.remove()
    hooks.clear()


__all__ = ["DistributedDataParallel", "exact_reduction"]
