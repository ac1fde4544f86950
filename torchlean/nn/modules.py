"""Modules: a tree of Parameters plus forward(x) built from registry ops (DESIGN names/orders)."""
from __future__ import annotations

import math

import numpy as np

from torchlean.session import Parameter, Tensor
from torchlean.nn import functional as F, init
from torchlean.nn.checkpoint import save_file, load_file
from torchlean._generated import ops as _ops
from torchlean._opsupport import DeviceMask


class Module:
    """A tree of Parameters (trained), buffers (saved state that is not trained, e.g. BatchNorm's
    running statistics) and child Modules, like torch.nn.Module."""

    def __init__(self):
        object.__setattr__(self, "_params", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, k, v):
        if k in self._buffers:
            # assigning to a registered buffer overwrites its value (shape checked)
            self._buffers[k].set(v)
            return
        if isinstance(v, Parameter):
            self._params[k] = v
        elif isinstance(v, Module):
            self._modules[k] = v
        object.__setattr__(self, k, v)

    def register_buffer(self, name: str, value) -> Parameter:
        """Non-trainable state kept on device like a parameter and saved in state_dict()."""
        b = Parameter(value, requires_grad=False, name=name)
        self._buffers[name] = b
        object.__setattr__(self, name, b)
        return b

    def named_parameters(self, prefix="", _seen=None):
        """(dotted name, Parameter), each Parameter once (under its first name) even when
        modules share it (tied weights), as in PyTorch: an optimizer then steps it once."""
        seen = set() if _seen is None else _seen
        for k, p in self._params.items():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                yield prefix + k, p
        for k, m in self._modules.items():
            yield from m.named_parameters(prefix + k + ".", seen)

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def named_buffers(self, prefix=""):
        for k, b in self._buffers.items():
            yield prefix + k, b
        for k, m in self._modules.items():
            yield from m.named_buffers(prefix + k + ".")

    def buffers(self):
        return [b for _, b in self.named_buffers()]

    def children(self):
        return list(self._modules.values())

    def modules(self):
        yield self
        for m in self._modules.values():
            yield from m.modules()

    def _named_state(self, prefix=""):
        """PyTorch's state_dict order: each module's parameters, then its buffers, then children."""
        for k, p in self._params.items():
            yield prefix + k, p
        for k, b in self._buffers.items():
            yield prefix + k, b
        for k, m in self._modules.items():
            yield from m._named_state(prefix + k + ".")

    def train(self, mode=True):
        object.__setattr__(self, "training", mode)
        for m in self._modules.values():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        for p in self.parameters():
            p.zero_grad()

    def state_dict(self) -> dict:
        """Host copies of every parameter and buffer, keyed by dotted name."""
        return {k: p.numpy() for k, p in self._named_state()}

    def load_state_dict(self, sd, strict: bool = True):
        """Load parameters and buffers from a dict or a safetensors path. strict (default, like
        PyTorch) raises KeyError on missing or unexpected keys; otherwise loads what matches and
        returns (missing, unexpected)."""
        if isinstance(sd, str):
            sd = load_file(sd)
        state = dict(self._named_state())
        missing = sorted(set(state) - set(sd))
        unexpected = sorted(set(sd) - set(state))
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for k, p in state.items():
            if k in sd:
                p.set(sd[k])
        for m in self.modules():
            m._after_load()
        return missing, unexpected

    def _after_load(self):
        """Hook for modules that mirror buffer values in host attributes."""

    def save(self, path: str) -> None:
        save_file(self.state_dict(), path)

    def __call__(self, *a, **kw):
        return self.forward(*a, **kw)

    # tree walks as torch.nn.Module ---------------------------------------------------------
    def named_modules(self, prefix=""):
        """(dotted name, module) for this module ('' for itself) and every descendant."""
        yield prefix, self
        for k, m in self._modules.items():
            yield from m.named_modules(prefix + ("." if prefix else "") + k)

    def named_children(self):
        yield from self._modules.items()

    def apply(self, fn):
        """fn(module) on every descendant, then on this module (torch's order); returns self."""
        for m in self._modules.values():
            m.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad: bool = True):
        """Freeze (False) or unfreeze every parameter; buffers are never trained."""
        for p in self.parameters():
            p.requires_grad = bool(requires_grad)
        return self

    def to(self, *args, **kwargs):
        """torch's model.to(device) / to(dtype): parameters already live on the backend chosen
        at import, so this checks the target (cuda on the stub raises) and returns self."""
        from torchlean.devices import parse_to
        dt = parse_to("Module.to", args, kwargs)
        if dt is not None and not dt.is_floating_point:
            raise TypeError(f"Module.to: parameters are float32, got dtype {dt}")
        return self

    def cuda(self, device=None):
        from torchlean.devices import check_cuda
        check_cuda("Module.cuda")
        return self

    def cpu(self):
        return self


class Sequential(Module):
    """Modules applied in order; Sequential(OrderedDict(name=module)) names them, as torch."""

    def __init__(self, *mods):
        super().__init__()
        named = mods[0].items() if len(mods) == 1 and isinstance(mods[0], dict) else \
            ((str(i), m) for i, m in enumerate(mods))
        for k, m in named:
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: {k} is not a Module, got {type(m).__name__}")
            setattr(self, k, m)

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class Linear(Module):
    def __init__(self, fan_in, fan_out, bias=True):
        super().__init__()
        a = 1.0 / math.sqrt(fan_in)
        self.weight = Parameter(init.uniform((fan_out, fan_in), -a, a), name="weight")
        self.bias = Parameter(init.uniform((fan_out,), -a, a), name="bias") if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class _Act(Module):
    op = ""

    def __init__(self, inplace=False):
        super().__init__()   # inplace is accepted (torch's ReLU(inplace=True)); no effect

    def forward(self, x):
        return x.session.op(self.op, x)


class ReLU(_Act):
    op = "relu"


class GELU(Module):
    """torch.nn.GELU: approximate="none" (the default, exact erf form) or "tanh"."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)


class Softplus(Module):
    """torch.nn.Softplus(beta=1, threshold=20)."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = float(beta), float(threshold)

    def forward(self, x):
        return F.softplus(x, beta=self.beta, threshold=self.threshold)


class Tanh(_Act):
    op = "tanh"


class Sigmoid(_Act):
    op = "sigmoid"


class Flatten(Module):
    """torch.nn.Flatten: axes start_dim..end_dim merged into one (default: all but the
    first)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)


class Unflatten(Module):
    """torch.nn.Unflatten: axis `dim` split into `unflattened_size`."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = int(dim), tuple(int(n) for n in unflattened_size)

    def forward(self, x):
        shp = tuple(x.shape)
        d = self.dim % len(shp) if shp else 0
        if not shp or math.prod(self.unflattened_size) != shp[d] and -1 not in self.unflattened_size:
            raise ValueError(f"Unflatten: unflattened_size {self.unflattened_size} must multiply "
                             f"to the size {shp[d] if shp else None} of dim {self.dim} of input "
                             f"{shp}")
        return x.reshape(shp[:d] + self.unflattened_size + shp[d + 1:])


class Dropout(Module):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) in training;
    the identity in eval()."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


class ConvTranspose2d(Module):
    """weight (cin, cout, kh, kw) as in PyTorch (kernel_size an int or a pair), whose default init takes the fan-in from
    weight.shape[1] * k * k (= cout * k * k). output_padding (< stride) adds rows/cols at the
    bottom/right (F.conv_transpose2d)."""

    def __init__(self, cin, cout, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1):
        Module.__init__(self)
        if int(groups) != 1 or dilation not in (1, (1, 1)):
            raise NotImplementedError("ConvTranspose2d: groups and dilation other than 1 are "
                                      f"not supported, got groups={groups}, dilation={dilation}")
        kh, kw = _tuple(kernel_size, 2, "kernel_size", "ConvTranspose2d")
        a = 1.0 / math.sqrt(cout * kh * kw)
        self.weight = Parameter(init.uniform((cin, cout, kh, kw), -a, a), name="weight")
        if bias:
            self.bias = Parameter(init.uniform((cout,), -a, a), name="bias")
        else:   # the op takes a bias input: a constant zero one, neither trained nor saved
            object.__setattr__(self, "bias", Parameter(np.zeros(cout), requires_grad=False))
        self.stride, self.padding, self.output_padding = stride, padding, output_padding

    def forward(self, x):
        if self.output_padding not in (0, (0, 0)):
            return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                      self.output_padding)
        return x.session.op("conv_transpose2d", self.weight, self.bias, x, stride=self.stride,
                            padding=self.padding)


class _Pool(Module):
    op = ""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.k, self.s, self.p = kernel_size, stride or kernel_size, padding

    def _plain(self):
        return True

    def forward(self, x):
        if self._plain():   # the registry op directly
            return x.session.op(self.op, x, kernel_size=self.k, stride=self.s, padding=self.p)
        return self._options(x)


class MaxPool2d(_Pool):
    """torch.nn.MaxPool2d; dilation, ceil_mode and return_indices (then forward returns
    (output, int64 indices)) go through F.max_pool2d."""

    op = "max_pool2d"

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__(kernel_size, stride, padding)
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def _plain(self):
        return self.dilation in (1, (1, 1)) and not self.return_indices and not self.ceil_mode

    def _options(self, x):
        return F.max_pool2d(x, self.k, self.s, self.p, self.dilation, self.ceil_mode,
                            self.return_indices)


class AvgPool2d(_Pool):
    """torch.nn.AvgPool2d; ceil_mode, count_include_pad=False and divisor_override go through
    F.avg_pool2d."""

    op = "avg_pool2d"

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__(kernel_size, stride, padding)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def _plain(self):
        return not self.ceil_mode and self.divisor_override is None and \
            (self.count_include_pad or self.p in (0, (0, 0)))

    def _options(self, x):
        return F.avg_pool2d(x, self.k, self.s, self.p, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)


class LayerNorm(Module):
    """Normalises over the trailing `normalized_shape` axes (an int: the last axis); eps
    defaults to PyTorch's 1e-5. Several axes are folded into one for the fused op."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True):
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else \
            tuple(normalized_shape)
        if not ns or any(int(n) < 1 for n in ns):
            raise ValueError(f"LayerNorm: normalized_shape must be positive sizes, got "
                             f"{normalized_shape!r}")
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
        c = int(num_features)
        if c < 1:
            raise ValueError(f"BatchNorm2d: num_features must be >= 1, got {num_features}")
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
            y = s.op("batchnorm_channel_first", x, self.weight, self.bias, eps=self.eps)
            if self.training and self.track_running_stats:
                self._update_running(x.value, count)
            return y
        # eval: y = (x - mean) * gamma / sqrt(var + eps) + beta, recorded on the tape so
        # gradients still reach x, gamma and beta (as in PyTorch)
        c = self.num_features
        with_shape = (c, 1, 1)
        scale = s.use(self.weight) * ((s.use(self.running_var) + self.eps).sqrt().reciprocal())
        shift = s.use(self.bias) - s.use(self.running_mean) * scale
        return x * scale.reshape(with_shape) + shift.reshape(with_shape)

    def _update_running(self, xbuf, count):
        """Batch statistics from the fused kernel (its mean/var residuals are not kept on the
        tape), folded into the running buffers with device ops; no host round trip. Under
        DistributedDataParallel every rank's statistics are folded in, in rank order."""
        y, xhat, mean, var, inv_std = _ops.batchnorm_channel_first(
            xbuf, self.weight.mirror(), self.bias.mirror(), eps=self.eps)
        for b in (y, xhat, inv_std):
            b.release()
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
        object.__setattr__(self, "_nbt", self._nbt + 1)
        self.num_batches_tracked.set(np.float32(self._nbt))
        m = 1.0 / self._nbt if self.momentum is None else float(self.momentum)
        for buf, stat, c in ((self.running_mean, mean, m),
                             (self.running_var, var, m * count / (count - 1))):
            kept = _ops.scale(buf.mirror(), c=1.0 - m)
            buf.set_mirror(_ops.axpy(kept, stat, c=c))
            kept.release()


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


class Embedding(Module):
    """torch.nn.Embedding: weight (num_embeddings, embedding_dim) ~ N(0, 1). padding_idx's row
    starts at zero and never receives a gradient (its lookups read a detached weight)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False):
        super().__init__()
        n = int(num_embeddings)
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are "
                                      "not supported")
        if padding_idx is not None:
            if not -n <= int(padding_idx) < n:
                raise AssertionError(f"Embedding: padding_idx {padding_idx} must be within "
                                     f"num_embeddings ({n})")
            padding_idx = int(padding_idx) % n
        self.num_embeddings, self.embedding_dim = n, int(embedding_dim)
        self.padding_idx = padding_idx
        w = init.normal((n, int(embedding_dim))) if _weight is None else np.asarray(_weight)
        if padding_idx is not None and _weight is None:
            w[padding_idx] = 0.0
        self.weight = Parameter(w, requires_grad=not _freeze, name="weight")

    def forward(self, idx, session=None):
        """idx: integer array (any shape) -> idx.shape + (d,); session defaults to the default
        session (integer indices carry none)."""
        from torchlean.session import default_session
        s = session or getattr(idx, "session", None) or default_session()
        a = np.asarray(idx.numpy() if hasattr(idx, "numpy") else idx)
        n = self.weight.shape[0]
        if a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and np.all(a == np.round(a))):
            raise TypeError(f"Embedding: indices must be integers, got dtype {a.dtype}")
        bad = np.flatnonzero((a < 0) | (a >= n))
        if bad.size:
            raise IndexError(f"Embedding: index {a.reshape(-1)[bad[0]]} is out of range for "
                             f"{n} embeddings (indices of shape {a.shape}); expected 0 <= index "
                             f"< {n}")
        a = a.astype(np.int64)
        y = s.op("gather_rows", self.weight, indices=a)
        pad = None if self.padding_idx is None else a == self.padding_idx
        if pad is None or not pad.any():
            return y
        frozen = s.op("gather_rows", s.use(self.weight).detach(), indices=a)
        return s.op("where", s.tensor(pad[..., None].astype(np.float32)), frozen, y)


class MultiHeadAttention(Module):
    """Multi-head attention over d_model with num_heads heads, batch first: query (B, T, D) or
    (T, D); Q = query @ Wq, K = key @ Wk, V = value @ Wv, output @ Wo (weights (in, out)).

    Self-attention with no biases and only boolean (T, T) masks runs the fused kernel
    (use_flash=True, the default, never stores the T x T scores on CUDA). Cross attention
    (key/value of another length S, kdim/vdim), projection biases (bias=True, zero-initialised
    as torch), key_padding_mask and float masks run the composed path: projections, heads,
    F.attention_core (bmm, masked_softmax), merge, output projection: all registry ops.

    Masks: `mask` is torchlean's boolean (T, S) mask, True = may attend (as
    F.scaled_dot_product_attention); `attn_mask` and `key_padding_mask` ((B, S) or (S,)) follow
    nn.MultiheadAttention, True = blocked. Float masks (either keyword) are added to the scores.
    is_causal=True lets query i attend keys j <= i: the fused kernel takes it as its causal attr
    (no mask buffer, and the key tiles past the diagonal are skipped); the composed path uses
    the causal mask, uploaded once per (T, S) and kept on the module.
    Rows with every key blocked give 0. Returns the output only (no attention weights)."""

    def __init__(self, d_model, num_heads, use_flash=True, bias=False, kdim=None, vdim=None):
        super().__init__()
        if num_heads < 1 or d_model % num_heads:
            raise ValueError(f"MultiHeadAttention: d_model ({d_model}) must be divisible by "
                             f"num_heads ({num_heads})")
        sh = (d_model, d_model)
        self.kdim, self.vdim = kdim or d_model, vdim or d_model
        self.Wq = Parameter(init.xavier_uniform(sh))
        self.Wk = Parameter(init.xavier_uniform((self.kdim, d_model)))
        self.Wv = Parameter(init.xavier_uniform((self.vdim, d_model)))
        self.Wo = Parameter(init.xavier_uniform(sh))
        if bias:
            self.bq, self.bk = Parameter(np.zeros(d_model)), Parameter(np.zeros(d_model))
            self.bv, self.bo = Parameter(np.zeros(d_model)), Parameter(np.zeros(d_model))
        self.d_model, self.num_heads = d_model, num_heads
        self.use_flash, self.has_bias = use_flash, bool(bias)
        self._mask = None     # the last boolean mask, uploaded once (a DeviceMask)
        self._causal = {}     # (T, S) -> causal DeviceMask

    def _device_mask(self, mask):
        """The same mask every step (a causal mask) is uploaded once, not twice per step."""
        if mask is None or isinstance(mask, DeviceMask):
            return mask
        if self._mask is not None and self._mask.matches(mask):
            return self._mask
        if np.asarray(mask).dtype != np.bool_:
            return mask  # the op raises its own TypeError
        self._mask = DeviceMask(mask)
        return self._mask

    def _causal_mask(self, t, s):
        m = self._causal.get((t, s))
        if m is None:
            m = self._causal[(t, s)] = DeviceMask(F.causal_mask(t, s))
        return m

    def forward(self, query, key=None, value=None, key_padding_mask=None, *, mask=None,
                attn_mask=None, is_causal=False):
        op = "MultiHeadAttention"
        for name, a in (("key", key), ("value", value)):
            if a is not None and not isinstance(a, (Tensor, Parameter)) and \
                    np.asarray(a).dtype == np.bool_:
                raise TypeError(f"{op}: {name} is a boolean array; pass masks by keyword "
                                "(mask=, attn_mask=, key_padding_mask=)")
        s = query.session
        x = s.as_tensor(query)
        self_attn = (key is None or key is query) and (value is None or value is query)
        kx = x if key is None else s.as_tensor(key)
        vx = kx if value is None else s.as_tensor(value)
        if x.ndim not in (2, 3) or kx.ndim != x.ndim or vx.ndim != x.ndim \
                or x.shape[-1] != self.d_model or kx.shape[-1] != self.kdim \
                or vx.shape[-1] != self.vdim or kx.shape[:-1] != vx.shape[:-1] \
                or kx.shape[:-2] != x.shape[:-2]:
            raise ValueError(f"{op}: expected query (B, T, {self.d_model}) or (T, "
                             f"{self.d_model}), key (.., S, {self.kdim}) and value (.., S, "
                             f"{self.vdim}) with the same batch, got query {x.shape}, key "
                             f"{kx.shape}, value {vx.shape}")
        t, sk = x.shape[-2], kx.shape[-2]
        b = x.shape[0] if x.ndim == 3 else 1
        n = b * self.num_heads
        if is_causal and (mask is not None or attn_mask is not None):
            raise ValueError(f"{op}: is_causal=True builds the causal mask; do not pass mask= "
                             "or attn_mask= with it")
        if mask is not None and attn_mask is not None:
            raise ValueError(f"{op}: give mask= (True = may attend) or attn_mask= (True = "
                             "blocked), not both")
        if mask is not None or attn_mask is not None:
            allowed, additive = F.split_attention_mask(
                op, attn_mask if mask is None else mask, (n, t, sk),
                blocked_when=mask is None)
        else:
            allowed, additive = None, None
        fused = (self_attn and not self.has_bias and key_padding_mask is None
                 and F.fused_attention_fits(t, sk, allowed, additive))
        if fused:
            return s.op("multi_head_attention", self.Wq, self.Wk, self.Wv, self.Wo, x,
                        num_heads=self.num_heads, mask=self._device_mask(allowed),
                        use_flash=self.use_flash, causal=bool(is_causal))
        if is_causal:
            allowed = self._causal_mask(t, sk)
        if key_padding_mask is not None:
            kpm = np.asarray(key_padding_mask)
            want = (b, sk) if x.ndim == 3 else (sk,)
            if kpm.shape != want or kpm.dtype.kind not in "bf":
                raise ValueError(f"{op}: key_padding_mask must be boolean or float of shape "
                                 f"{want} (batch, keys), got {kpm.dtype} {kpm.shape}")
            kpm = kpm.reshape(b, 1, 1, sk)
            if kpm.dtype == np.bool_:
                keep = np.broadcast_to(~kpm, (b, self.num_heads, t, sk)).reshape(n, t, sk)
                allowed = keep if allowed is None else np.asarray(allowed) & keep
            else:
                blocked = kpm == -np.inf
                full = np.broadcast_to(np.where(blocked, 0.0, kpm), (b, self.num_heads, t, sk))
                full = full.reshape(n, t, sk).astype(np.float32)
                additive = full if additive is None else additive + full
                if blocked.any():
                    keep = np.broadcast_to(~blocked, (b, self.num_heads, t, sk)).reshape(n, t, sk)
                    allowed = keep if allowed is None else np.asarray(allowed) & keep
        if allowed is not None and not isinstance(allowed, DeviceMask):
            allowed = self._device_mask(allowed)
        return self._composed(x, kx, vx, allowed, additive)

    def _project(self, x, w, bias):
        """(.., L, in) @ w (+ bias) split into heads: (B * H, L, hd)."""
        s, lead = x.session, x.shape[:-1]
        y = s.op("matmul", x.reshape(-1, x.shape[-1]), w)
        if bias is not None:
            y = y + s.use(bias)
        b = lead[0] if len(lead) == 2 else 1
        h = self.num_heads
        y = y.reshape(b, lead[-1], h, self.d_model // h).permute(0, 2, 1, 3)
        return y.reshape(b * h, lead[-1], self.d_model // h)

    def _composed(self, x, k, v, allowed, additive):
        s, h = x.session, self.num_heads
        bias = (lambda name: getattr(self, name)) if self.has_bias else (lambda name: None)
        q = self._project(x, self.Wq, bias("bq"))
        kh, vh = self._project(k, self.Wk, bias("bk")), self._project(v, self.Wv, bias("bv"))
        if additive is not None and not isinstance(additive, (Tensor, Parameter)):
            additive = s.tensor(additive)
        o = F.attention_core(q, kh, vh, allowed, additive)                 # (B * H, T, hd)
        t = x.shape[-2]
        o = o.reshape(-1, h, t, self.d_model // h).permute(0, 2, 1, 3).reshape(-1, self.d_model)
        y = s.op("matmul", o, self.Wo)
        if self.has_bias:
            y = y + s.use(self.bo)
        return y.reshape(x.shape)


class SpectralConv1d(Module):
    def __init__(self, width, modes):
        super().__init__()
        a = 1.0 / (width * width)
        self.w_re = Parameter(init.uniform((modes, width, width), -a, a))
        self.w_im = Parameter(init.uniform((modes, width, width), -a, a))

    def forward(self, x):
        return x.session.op("spectral_conv1d_rfft", x, self.w_re, self.w_im)


# ---------------------------------------------------------------------------- containers

class ModuleList(Module):
    """A list of modules registered as children '0', '1', ... (state_dict keys as torch)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m):
        if not isinstance(m, Module):
            raise TypeError(f"ModuleList.append: expected a Module, got {type(m).__name__}")
        setattr(self, str(len(self._modules)), m)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        items = list(self._modules.values())
        if isinstance(i, slice):
            return ModuleList(items[i])
        return items[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(list(self._modules.values()))


class ModuleDict(Module):
    """A dict of modules registered as children under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        for k, m in (dict(modules) if modules is not None else {}).items():
            self[k] = m

    def __setitem__(self, k, m):
        if not isinstance(m, Module):
            raise TypeError(f"ModuleDict[{k!r}]: expected a Module, got {type(m).__name__}")
        setattr(self, str(k), m)

    def __getitem__(self, k):
        return self._modules[k]

    def __contains__(self, k):
        return k in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(list(self._modules))

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


# ---------------------------------------------------------------------------- N-D convolution

def _tuple(v, n, what, name):
    t = (int(v),) * n if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)
    if len(t) != n:
        raise ValueError(f"{name}: {what} must be an int or {n} ints, got {v!r}")
    return t


class _ConvNd(Module):
    """torch.nn.ConvNd: weight (C_out, C_in / groups, k...), bias (C_out,); input (N, C_in,
    spatial...) or (C_in, spatial...). groups (depthwise included) and dilation run through
    F.conv1d/2d/3d, which builds a dense kernel for the registry's N-D conv op."""

    rank = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros"):
        super().__init__()
        name, n = type(self).__name__, self.rank
        if padding_mode != "zeros":
            raise NotImplementedError(f"{name}: padding_mode={padding_mode!r} is not supported "
                                      "(only 'zeros')")
        groups = int(groups)
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        k = _tuple(kernel_size, n, "kernel_size", name)
        self.kernel_size, self.stride = k, _tuple(stride, n, "stride", name)
        self.dilation, self.groups = _tuple(dilation, n, "dilation", name), groups
        ke = tuple(d * (a - 1) + 1 for a, d in zip(k, self.dilation))
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if any(s != 1 for s in self.stride) or any(a % 2 == 0 for a in ke):
                raise NotImplementedError(f"{name}: padding='same' needs stride 1 and odd dilated "
                                          f"kernel sizes here, got {ke}, stride {self.stride}")
            padding = tuple(a // 2 for a in ke)
        self.padding = _tuple(padding, n, "padding", name)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        a = 1.0 / math.sqrt(in_channels // groups * math.prod(k))
        self.weight = Parameter(init.uniform((out_channels, in_channels // groups) + k, -a, a),
                                name="weight")
        if bias:
            self.bias = Parameter(init.uniform((out_channels,), -a, a), name="bias")
        else:   # the op takes a bias input: a constant zero one, neither trained nor saved
            object.__setattr__(self, "bias", Parameter(np.zeros(out_channels), requires_grad=False))

    def forward(self, x):
        shp, n = tuple(x.shape), self.rank
        if len(shp) not in (n + 1, n + 2) or shp[-n - 1] != self.in_channels:
            raise ValueError(f"{type(self).__name__}: expected input (N, {self.in_channels}, "
                             f"{n} spatial axes) or ({self.in_channels}, {n} spatial axes), "
                             f"got {shp}")
        if self.groups == 1 and all(d == 1 for d in self.dilation):
            return x.session.op("conv", self.weight, self.bias, x, stride=self.stride,
                                padding=self.padding)
        return F._conv_nd(n, x, self.weight, self.bias, self.stride, self.padding,
                          self.dilation, self.groups)


class Conv1d(_ConvNd):
    rank = 1


class Conv2d(_ConvNd):
    """torch.nn.Conv2d; plain convolutions run the registry conv2d op."""

    rank = 2

    def forward(self, x):
        if self.groups == 1 and self.dilation == (1, 1) and x.ndim in (3, 4) \
                and x.shape[-3] == self.in_channels:
            return x.session.op("conv2d", self.weight, self.bias, x, stride=self.stride,
                                padding=self.padding)
        return super().forward(x)


class Conv3d(_ConvNd):
    rank = 3


# ---------------------------------------------------------------------------- normalisation

class BatchNorm1d(BatchNorm2d):
    """BatchNorm over (N, C) or (N, C, L): statistics per channel over N (and L); the input is
    viewed as (N, C, L, 1) for the channel-first kernel, running stats as BatchNorm2d."""

    def forward(self, x):
        shp = tuple(x.shape)
        if len(shp) not in (2, 3) or shp[1] != self.num_features:
            raise ValueError(f"BatchNorm1d: expected input (N, {self.num_features}) or "
                             f"(N, {self.num_features}, L), got {shp}")
        return super().forward(x.reshape(shp + (1,) * (4 - len(shp)))).reshape(shp)


class RMSNorm(Module):
    """y = x / sqrt(mean(x^2 over normalized_shape) + eps) * weight; eps=None uses float32's
    machine epsilon, as torch."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else \
            tuple(normalized_shape)
        self.normalized_shape = tuple(int(n) for n in ns)
        self.eps = float(np.finfo(np.float32).eps) if eps is None else float(eps)
        self.weight = Parameter(np.ones(ns), name="weight") if elementwise_affine else None

    def forward(self, x):
        ns, shp = self.normalized_shape, tuple(x.shape)
        if len(shp) < len(ns) or shp[len(shp) - len(ns):] != ns:
            raise ValueError(f"RMSNorm: expected input with trailing shape {ns}, got {shp}")
        cols = math.prod(ns)   # the registry's rms_norm over the normalized axes folded into one
        s = x.session
        w = s.use(self.weight).reshape(cols) if self.weight is not None else \
            s.tensor(np.ones(cols, np.float32))
        y = s.op("rms_norm", x.reshape(shp[:len(shp) - len(ns)] + (cols,)), w, eps=self.eps)
        return y.reshape(shp)


class GroupNorm(Module):
    """Normalises (N, C, *) over groups of C / num_groups channels and the spatial axes
    (biased variance, eps inside the sqrt), then a per-channel affine map, as torch."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True):
        super().__init__()
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


# ---------------------------------------------------------------------------- pooling

class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed (oh, ow) output for (N, C, H, W) or (C, H, W) input, with
    torch's windows (F.adaptive_avg_pool2d); None keeps that input size."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = (output_size, output_size) if isinstance(output_size, int) or \
            output_size is None else tuple(output_size)

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)


class AdaptiveMaxPool2d(Module):
    """Max pooling to a fixed (oh, ow) output (F.adaptive_max_pool2d); return_indices makes
    forward return (output, int64 indices)."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = (output_size, output_size) if isinstance(output_size, int) or \
            output_size is None else tuple(output_size)
        self.return_indices = return_indices

    def forward(self, x):
        return F.adaptive_max_pool2d(x, self.output_size, self.return_indices)


# the loss modules live in torchlean.nn.losses (which builds on Module above); the two that
# were defined here stay importable from this module
from torchlean.nn.losses import CrossEntropyLoss, MSELoss  # noqa: E402,F401
