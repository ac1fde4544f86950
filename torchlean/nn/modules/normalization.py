"""Normalisation layers: LayerNorm, RMSNorm, GroupNorm and the BatchNorm family (BatchNorm1d/2d,
SyncBatchNorm) with running statistics kept on device."""
from __future__ import annotations

import math

import numpy as np

from torchlean import _capture
from torchlean.session import Parameter
from torchlean._generated import ops as _ops
from torchlean.nn.modules.base import Module
from torchlean.nn.arg_checks import check_numel, size_arg


class LayerNorm(Module):
    """Normalises over the trailing `normalized_shape` axes (an int: the last axis); eps
    defaults to PyTorch's 1e-5. Several axes are folded into one for the fused op."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True):
        super().__init__()
        ns = tuple(normalized_shape) if hasattr(normalized_shape, "__iter__") else \
            (normalized_shape,)
        ns = tuple(size_arg("LayerNorm", "normalized_shape", n, minimum=1) for n in ns)
        if not ns:
            raise ValueError(f"LayerNorm: normalized_shape must be positive sizes, got "
                             f"{normalized_shape!r}")
        check_numel("LayerNorm", "weight", ns)
        self.normalized_shape, self.eps = tuple(int(n) for n in ns), eps
        if elementwise_affine:
            self.weight = Parameter(np.ones(ns), name="weight")
        else:
            object.__setattr__(self, "weight", Parameter(np.ones(ns), requires_grad=False))
        if elementwise_affine and bias:
            self.bias = Parameter(np.zeros(ns), name="bias")
        else:
            object.__setattr__(self, "bias", Parameter(np.zeros(ns), requires_grad=False))

    def forward(self, x):
        s = x.session
        ns = self.normalized_shape
        shp = tuple(x.shape)
        if shp[len(shp) - len(ns):] != ns or len(shp) < len(ns):
            raise ValueError(f"LayerNorm: expected input with trailing shape {ns}, got {shp}")
        if len(ns) == 1:
            return s.op("layer_norm", x, self.weight, self.bias, eps=self.eps)
        d = math.prod(ns)
        y = s.op("layer_norm", x.reshape(shp[:len(shp) - len(ns)] + (d,)),
                 s.use(self.weight).reshape(d), s.use(self.bias).reshape(d), eps=self.eps)
        return y.reshape(shp)


class RMSNorm(Module):
    """y = x / sqrt(mean(x^2 over normalized_shape) + eps) * weight; eps=None uses float32's
    machine epsilon, as torch."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__()
        ns = tuple(normalized_shape) if hasattr(normalized_shape, "__iter__") else \
            (normalized_shape,)
        self.normalized_shape = ns = tuple(size_arg("RMSNorm", "normalized_shape", n, minimum=1)
                                           for n in ns)
        check_numel("RMSNorm", "weight", ns)
        self.eps = float(np.finfo(np.float32).eps) if eps is None else float(eps)
        self.weight = Parameter(np.ones(ns), name="weight") if elementwise_affine else None

    def forward(self, x):
        ns, shp = self.normalized_shape, tuple(x.shape)
        if len(shp) < len(ns) or shp[len(shp) - len(ns):] != ns:
            raise ValueError(f"RMSNorm: expected input with trailing shape {ns}, got {shp}")
        cols = math.prod(ns)   # the registry's rms_norm over the normalized axes folded into one
        s = x.session
        w = s.as_tensor(self.weight).reshape(cols) if self.weight is not None else \
            s.tensor(np.ones(cols, np.float32))
        y = s.op("rms_norm", x.reshape(shp[:len(shp) - len(ns)] + (cols,)), w, eps=self.eps)
        return y.reshape(shp)


class GroupNorm(Module):
    """Normalises (N, C, *) over groups of C / num_groups channels and the spatial axes
    (biased variance, eps inside the sqrt), then a per-channel affine map, as torch."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True):
        super().__init__()
        num_groups = size_arg("GroupNorm", "num_groups", num_groups, minimum=1)
        num_channels = size_arg("GroupNorm", "num_channels", num_channels)
        if num_groups < 1 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels {num_channels} must be divisible by "
                             f"num_groups {num_groups}")
        self.num_groups, self.num_channels, self.eps = int(num_groups), int(num_channels), eps
        self.weight = Parameter(np.ones(num_channels), name="weight") if affine else None
        self.bias = Parameter(np.zeros(num_channels), name="bias") if affine else None

    def forward(self, x):
        shp = tuple(x.shape)
        if len(shp) < 2 or shp[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected input (N, {self.num_channels}, *), got {shp}")
        g = x.reshape(shp[0], self.num_groups, math.prod(shp[1:]) // self.num_groups)
        d = g - g.mean(dim=2, keepdim=True)
        y = (d * ((d * d).mean(dim=2, keepdim=True) + self.eps).rsqrt()).reshape(shp)
        if self.weight is None:
            return y
        s, cshape = x.session, (self.num_channels,) + (1,) * (len(shp) - 2)
        return y * s.use(self.weight).reshape(cshape) + s.use(self.bias).reshape(cshape)


class BatchNorm2d(Module):
    """Per-channel batch normalisation with PyTorch's semantics.

    x is (N, C, H, W) or (C, H, W) (the N = 1 case). Training normalises with the batch
    statistics over N x H x W (biased variance, eps inside the sqrt) and, when
    track_running_stats, updates running_mean / running_var on device:
    r = (1 - momentum) * r + momentum * batch_stat, with the *unbiased* batch variance for
    running_var (momentum=None: cumulative average over num_batches_tracked). eval() normalises
    with the running statistics. Running stats and num_batches_tracked are buffers: saved by
    state_dict(), never handed to an optimizer. eps defaults to PyTorch's 1e-5.

    Under DistributedDataParallel each training forward gathers every rank's batch mean and
    variance and applies the W updates in rank order, so the buffers stay equal on every rank
    and equal those of one process running the ranks' micro-batches in rank order.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__()
        c = size_arg(type(self).__name__, "num_features", num_features, minimum=1)
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNorm2d: momentum must be in [0, 1] or None, got {momentum}")
        self.num_features, self.eps, self.momentum = c, float(eps), momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(np.ones(c), name="weight")
            self.bias = Parameter(np.zeros(c), name="bias")
        else:
            # constant gamma/beta for the fused kernel; not parameters, not saved
            object.__setattr__(self, "weight", Parameter(np.ones(c), requires_grad=False))
            object.__setattr__(self, "bias", Parameter(np.zeros(c), requires_grad=False))
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(c, np.float32))
            self.register_buffer("running_var", np.ones(c, np.float32))
            self.register_buffer("num_batches_tracked", np.zeros((), np.float32))
        object.__setattr__(self, "_nbt", 0)
        object.__setattr__(self, "_ranks", None)   # DistributedDataParallel's communicator

    def _after_load(self):
        if self.track_running_stats:
            object.__setattr__(self, "_nbt", int(self.num_batches_tracked.data))

    def _check(self, x):
        shp = x.shape
        if len(shp) not in (3, 4) or shp[-3] != self.num_features:
            raise ValueError(f"BatchNorm2d: expected input (N, {self.num_features}, H, W) or "
                             f"({self.num_features}, H, W), got {tuple(shp)}")
        return int(np.prod(shp)) // self.num_features     # values per channel

    def forward(self, x):
        s = x.session
        x = s.as_tensor(x)
        count = self._check(x)
        if self.training or not self.track_running_stats:
            if self.training and count < 2:
                raise ValueError(f"{type(self).__name__}: expected more than 1 value per channel when "
                                 f"training, got input {tuple(x.shape)}")
            # the kernel's batch mean and variance (the VJP does not read them) come back
            # here for the running statistics: one pass over x, not two
            stats = [] if self.training and self.track_running_stats else None
            y = s.op("batchnorm_channel_first", x, self.weight, self.bias, eps=self.eps,
                     hand_back=stats)
            if stats is not None:
                self._update_running(*stats, count)
            return y
        # eval: y = (x - mean) * gamma / sqrt(var + eps) + beta, recorded on the tape so
        # gradients still reach x, gamma and beta (as in PyTorch)
        c = self.num_features
        with_shape = (c, 1, 1)
        scale = s.use(self.weight) * ((s.use(self.running_var) + self.eps).sqrt().reciprocal())
        shift = s.use(self.bias) - s.use(self.running_mean) * scale
        return x * scale.reshape(with_shape) + shift.reshape(with_shape)

    def _update_running(self, mean, var, count):
        """The fused kernel's batch mean and biased variance (this call releases them), folded
        into the running buffers with device ops; no host round trip. Under
        DistributedDataParallel every rank's statistics are folded in, in rank order."""
        comm = self._ranks
        if comm is None or comm.world == 1:
            self._fold(mean, var, count)
            mean.release()
            var.release()
        else:
            from torchlean.distributed import agree
            from torchlean.distributed.reduce import rank_rows
            what = "BatchNorm running statistics"
            counts = agree.exchange(comm, what, [count])[:, 0]
            work, (means, variances) = comm.all_gather([mean, var], what)
            work.wait()
            for m_r, v_r, n_r in zip(rank_rows(means, comm.world, mean.shape),
                                     rank_rows(variances, comm.world, var.shape), counts):
                self._fold(m_r, v_r, int(n_r))
            for b in (mean, var, means, variances):
                b.release()

    def _fold(self, mean, var, count):
        """One running-statistics update from a batch's mean and biased variance over `count`
        values per channel."""
        if self.momentum is None and _capture.STATE.strict:
            raise RuntimeError("graph_step: BatchNorm with momentum=None averages with 1 / "
                               "num_batches_tracked, a host value a replay would freeze; give "
                               "it a momentum to capture the step")
        object.__setattr__(self, "_nbt", self._nbt + 1)
        self.num_batches_tracked.set(np.float32(self._nbt))
        m = 1.0 / self._nbt if self.momentum is None else float(self.momentum)
        for buf, stat, c in ((self.running_mean, mean, m),
                             (self.running_var, var, m * count / (count - 1))):
            kept = _ops.scale(buf.mirror(), c=1.0 - m)
            buf.set_mirror(_ops.axpy(kept, stat, c=c))
            kept.release()


class BatchNorm1d(BatchNorm2d):
    """BatchNorm over (N, C) or (N, C, L): statistics per channel over N (and L); the input is
    viewed as (N, C, L, 1) for the channel-first kernel, running stats as BatchNorm2d."""

    def forward(self, x):
        shp = tuple(x.shape)
        if len(shp) not in (2, 3) or shp[1] != self.num_features:
            raise ValueError(f"BatchNorm1d: expected input (N, {self.num_features}) or "
                             f"(N, {self.num_features}, L), got {shp}")
        return super().forward(x.reshape(shp + (1,) * (4 - len(shp)))).reshape(shp)


class SyncBatchNorm(BatchNorm2d):
    """BatchNorm over (N, C, *) whose training statistics are those of the global batch: every
    rank's values, as torch.nn.SyncBatchNorm. The per-channel sums behind the mean and the
    variance are summed over the ranks on the tape (torchlean.distributed.reduce.
    all_reduce_tensor), so the gradient is the global batch's too: its backward sums the
    gradients' terms over the ranks. One running-statistics update per forward, with the global
    mean and unbiased variance. Outside a multi-process job it is BatchNorm on the local batch.
    Needs torchlean.distributed.init() in a job of several processes."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None):
        if process_group is not None:
            raise ValueError("SyncBatchNorm: process_group must be None (every rank takes part)")
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def forward(self, x):
        s = x.session
        x = s.as_tensor(x)
        shp = tuple(x.shape)
        c = self.num_features
        if len(shp) < 2 or shp[1] != c:
            raise ValueError(f"SyncBatchNorm: expected input (N, {c}, *), got {shp}")
        along = (1, c) + (1,) * (len(shp) - 2)
        if not self.training and self.track_running_stats:
            scale = s.use(self.weight) * ((s.use(self.running_var) + self.eps).rsqrt())
            shift = s.use(self.bias) - s.use(self.running_mean) * scale
            return x * scale.reshape(along) + shift.reshape(along)
        from torchlean import distributed as dist
        comm = dist.communicator() if dist.is_initialized() else None
        dims = (0,) + tuple(range(2, len(shp)))
        count = int(np.prod(shp)) // c
        total = count
        if comm is not None and comm.world > 1:
            from torchlean.distributed import agree
            total = int(agree.exchange(comm, "SyncBatchNorm batch size", [count]).sum())

            def over_ranks(t, what):
                return dist.all_reduce_tensor(t, f"SyncBatchNorm {what}")
        else:
            def over_ranks(t, what):
                return t
        if self.training and total < 2:
            raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel when "
                             f"training, got {total} over every rank (input {shp})")
        mean = over_ranks(x.sum(dim=dims), "sum") * (1.0 / total)
        d = x - mean.reshape(along)
        var = over_ranks((d * d).sum(dim=dims), "sum of squares") * (1.0 / total)
        y = d * ((var + self.eps).rsqrt() * s.use(self.weight)).reshape(along)
        y = y + s.use(self.bias).reshape(along)
        if self.training and self.track_running_stats:
            self._fold(mean.value, var.value, total)
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm1d/2d replaced by a SyncBatchNorm holding the same
        parameters and buffers (module itself when it is one); as torch's."""
        if isinstance(module, BatchNorm2d) and not isinstance(module, SyncBatchNorm):
            new = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            if module.affine:
                new.weight, new.bias = module.weight, module.bias
            if module.track_running_stats:
                for k in ("running_mean", "running_var", "num_batches_tracked"):
                    getattr(new, k).set(getattr(module, k).numpy())
                object.__setattr__(new, "_nbt", module._nbt)
            new.train(module.training)
            return new
        for k, child in list(module._modules.items()):
            setattr(module, k, cls.convert_sync_batchnorm(child, process_group))
        return module
