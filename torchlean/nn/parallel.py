"""DistributedDataParallel: the same model on every rank, gradients averaged across ranks.

At wrap time rank 0's parameters and buffers are broadcast, so every rank starts equal (and the
ranks check they hold the same parameter shapes). Parameters are grouped in buckets of about
`bucket_cap_mb` megabytes, in reverse registration order (the order backward finishes them).
When a backward pass has accumulated the last gradient of a bucket (a post-accumulate-grad hook,
see Parameter.register_post_accumulate_grad_hook), the bucket's reduction starts at once, in
bucket order on every rank, so communication overlaps the rest of the backward pass (on CUDA on
a separate NCCL stream). When the backward pass ends, every reduction is waited for and each
gradient becomes its average over the ranks. Only gradients are touched: any optimizer works.

Two reductions:
  default: NCCL's (or MPI's) all-reduce sum, then the scale op with c = 1/W. Its summation order
      is the library's choice, so results agree with one process to rounding (allclose).
  exact (torchlean.is_deterministic(), or torchlean.is_exact() where it exists): each bucket is
      all-gathered and summed in rank order, g = g_0; g = g + g_1; ...; g = g + g_{W-1}, with
      the add kernel, then scaled by the scale op with c = 1/W. That is bit for bit what one
      process gets by accumulating the W ranks' micro-batches in rank order with backward()
      (which adds each new gradient to .grad with the same add kernel) and then applying
      torchlean.ops.scale(grad, c=1/W): the single-process reference of a W-rank step.
      Stub and CUDA run the same add and scale kernels on the same float32 inputs.

no_sync(): backward passes inside it only accumulate locally (gradient accumulation); the first
backward outside it reduces the accumulated sums.
"""
from __future__ import annotations

import contextlib
import weakref
import zlib

import numpy as np

from torchlean import distributed as dist
from torchlean import runtime
from torchlean._loader import ffi, lib
from torchlean.buffer import AnyBuffer, Buffer, raise_status
from torchlean._generated import ops as _ops
from torchlean.nn.modules import Module
from torchlean.session import register_backward_end_hook
from torchlean.tape import is_grad_enabled


def exact_reduction() -> bool:
    """True when gradients must be reduced in rank order (deterministic or exact mode)."""
    return runtime.is_deterministic() or runtime.is_exact()


def _view(buf: Buffer, start: int, n: int, shape) -> AnyBuffer:
    """Floats [start, start + n) of buf as an AnyBuffer sharing its memory (no copy)."""
    out = ffi.new("tl_buf *")
    st = lib.tl_buf_wrap(buf.data_ptr() + 4 * start, n, out)
    if st:
        raise_status("DistributedDataParallel", st)
    return AnyBuffer(shape, Buffer(out[0], n))


class _Bucket:
    __slots__ = ("index", "params", "nbytes", "ready", "pending")

    def __init__(self, index: int):
        self.index, self.params, self.nbytes = index, [], 0
        self.ready: set[int] = set()
        self.pending = None           # (work, gathered buffers or None) once launched


class DistributedDataParallel(Module):
    """Wraps `module` (reached as .module); forward calls it. torchlean.distributed.init() must
    have run. bucket_cap_mb: bucket size in megabytes (about 25 MB as in PyTorch; the first
    bucket, holding the last layers, is capped at 1 MB so communication starts early).
    broadcast_buffers: also broadcast rank 0's buffers (BatchNorm statistics) at every forward
    in training mode."""

    def __init__(self, module: Module, bucket_cap_mb: float = 25.0,
                 broadcast_buffers: bool = True):
        super().__init__()
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got "
                             f"{bucket_cap_mb}")
        self.module = module
        comm = dist.communicator()
        object.__setattr__(self, "_comm", comm)
        object.__setattr__(self, "_broadcast_buffers", broadcast_buffers)
        object.__setattr__(self, "_sync", True)
        object.__setattr__(self, "_active", False)
        seen, params = set(), []
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                params.append(p)
        self._check_same_model(params)
        self._broadcast([p for p in params] + module.buffers(), "parameter broadcast")
        trainable = [p for p in params if p.requires_grad]
        # the first bucket (the last layers) is small, as in PyTorch, so communication starts
        # early in the backward pass
        buckets = []
        for p in reversed(trainable):
            cap = min(bucket_cap_mb, 1.0) * 1e6 if len(buckets) <= 1 else bucket_cap_mb * 1e6
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
        object.__setattr__(self, "_hooks", hooks)
        weakref.finalize(self, _remove_all, hooks)   # a dropped wrapper leaves no hooks behind

    # ---------------------------------------------------------------- wrap time
    def _check_same_model(self, params) -> None:
        shapes = ";".join(",".join(map(str, p.shape)) for p in params)
        sig = np.array([len(params), sum(int(np.prod(p.shape)) for p in params),
                        zlib.crc32(shapes.encode())], np.int64)
        got = self._comm.allgather_array(sig, "DistributedDataParallel parameter check")
        if (got != sig).any():
            rows = ", ".join(f"rank {r}: {int(g[0])} parameters, {int(g[1])} elements"
                             for r, g in enumerate(got))
            raise dist.DistributedError(
                f"rank {self._comm.rank}: DistributedDataParallel: the ranks wrap different "
                f"models (parameter shapes differ): {rows}")

    def _broadcast(self, states, what: str) -> None:
        mirrors = [s.mirror() for s in states]
        if mirrors and self._comm.world > 1:
            self._comm.broadcast(mirrors, 0, f"DistributedDataParallel {what}").wait()
            for s in states:
                s.mark_device_updated()

    # ---------------------------------------------------------------- forward
    def forward(self, *args, **kwargs):
        if self._active:
            # a backward pass that raised part-way left reductions in flight: complete them
            # so this rank's collectives stay in step with the others'
            self._on_backward_end()
        if self._broadcast_buffers and self.training and is_grad_enabled():
            bufs = self.module.buffers()
            if bufs:
                self._broadcast(bufs, "buffer broadcast")
        return self.module(*args, **kwargs)

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
        if not self._sync:
            return
        b = self._bucket_of.get(id(p))
        if b is None or b.pending is not None:
            return
        b.ready.add(id(p))
        object.__setattr__(self, "_active", True)
        self._launch_ready()

    def _launch_ready(self) -> None:
        # buckets start in index order on every rank, so the collectives match
        bs = self._buckets
        while self._next < len(bs) and len(bs[self._next].ready) == len(bs[self._next].params):
            self._launch(bs[self._next])
            object.__setattr__(self, "_next", self._next + 1)

    def _launch(self, b: _Bucket) -> None:
        grads = [p.grad_buf for p in b.params]
        what = (f"DistributedDataParallel bucket {b.index} ({len(grads)} gradients, "
                f"{b.nbytes} bytes)")
        if exact_reduction():
            work, gathered = self._comm.all_gather(grads, what + " all_gather")
            b.pending = (work, gathered)
        else:
            b.pending = (self._comm.all_reduce(grads, what + " all_reduce"), None)

    def _on_backward_end(self) -> None:
        if not self._active:
            return
        try:
            for b in self._buckets:   # parameters no gradient reached: zeros on this rank
                for p in b.params:
                    if id(p) not in b.ready:
                        if p.grad_buf is None:
                            p.grad_buf = AnyBuffer.zeros(p.shape)
                        b.ready.add(id(p))
            self._launch_ready()
            for b in self._buckets:
                self._finish(b)
        finally:
            for b in self._buckets:
                b.ready.clear()
                b.pending = None
            object.__setattr__(self, "_next", 0)
            object.__setattr__(self, "_active", False)

    def _finish(self, b: _Bucket) -> None:
        work, gathered = b.pending
        work.wait()
        W = self._comm.world
        for i, p in enumerate(b.params):
            g = p.grad_buf
            if gathered is None:
                avg = _ops.scale(g, c=1.0 / W)
            else:
                n = g.numel
                parts = [_view(gathered[i], r * n, n, g.shape) for r in range(W)]
                acc = parts[0]
                for part in parts[1:]:
                    s = _ops.add(acc, part)
                    if acc is not parts[0]:
                        acc.release()
                    acc = s
                avg = _ops.scale(acc, c=1.0 / W)
                if acc is not parts[0]:
                    acc.release()
                gathered[i].release()
            g.release()
            p.grad_buf = avg

    def remove_hooks(self) -> None:
        """Detach from the parameters (the wrapper stops reducing)."""
        _remove_all(self._hooks)


def _remove_all(hooks: list) -> None:
    for h in hooks:
        h.remove()
    hooks.clear()


__all__ = ["DistributedDataParallel", "exact_reduction"]
