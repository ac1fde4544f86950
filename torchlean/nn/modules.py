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


class Sequential(Module):
    def __init__(self, *mods):
        super().__init__()
        for i, m in enumerate(mods):
            setattr(self, str(i), m)

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

    def forward(self, x):
        return x.session.op(self.op, x)


class ReLU(_Act):
    op = "relu"


class GELU(_Act):
    op = "gelu"


class Tanh(_Act):
    op = "tanh"


class Sigmoid(_Act):
    op = "sigmoid"


class Flatten(Module):
    """(N, ...) -> (N, prod(...))."""

    def forward(self, x):
        return x.reshape(x.shape[0], -1)


class Dropout(Module):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) in training;
    the identity in eval()."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


class Conv2d(Module):
    def __init__(self, cin, cout, kernel_size, stride=1, padding=0):
        super().__init__()
        k = kernel_size
        a = 1.0 / math.sqrt(cin * k * k)
        self.weight = Parameter(init.uniform((cout, cin, k, k), -a, a))
        self.bias = Parameter(init.uniform((cout,), -a, a))
        self.stride, self.padding = stride, padding

    def forward(self, x):
        return x.session.op("conv2d", self.weight, self.bias, x, stride=self.stride,
                            padding=self.padding)


class ConvTranspose2d(Conv2d):
    """weight (cin, cout, k, k) as in PyTorch, whose default init takes the fan-in from
    weight.shape[1] * k * k (= cout * k * k)."""

    def __init__(self, cin, cout, kernel_size, stride=1, padding=0):
        Module.__init__(self)
        k = kernel_size
        a = 1.0 / math.sqrt(cout * k * k)
        self.weight = Parameter(init.uniform((cin, cout, k, k), -a, a))
        self.bias = Parameter(init.uniform((cout,), -a, a))
        self.stride, self.padding = stride, padding

    def forward(self, x):
        return x.session.op("conv_transpose2d", self.weight, self.bias, x, stride=self.stride,
                            padding=self.padding)


class _Pool(Module):
    op = ""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.k, self.s, self.p = kernel_size, stride or kernel_size, padding

    def forward(self, x):
        return x.session.op(self.op, x, kernel_size=self.k, stride=self.s, padding=self.p)


class MaxPool2d(_Pool):
    op = "max_pool2d"


class AvgPool2d(_Pool):
    op = "avg_pool2d"


class LayerNorm(Module):
    """Normalises the last axis (size d); eps defaults to PyTorch's 1e-5."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = Parameter(np.ones(d))
        self.bias = Parameter(np.zeros(d))
        self.eps = eps

    def forward(self, x):
        return x.session.op("layer_norm", x, self.weight, self.bias, eps=self.eps)


class BatchNorm2d(Module):
    """Per-channel batch normalisation with PyTorch's semantics.

    x is (N, C, H, W) or (C, H, W) (the N = 1 case). Training normalises with the batch
    statistics over N x H x W (biased variance, eps inside the sqrt) and, when
    track_running_stats, updates running_mean / running_var on device:
    r = (1 - momentum) * r + momentum * batch_stat, with the *unbiased* batch variance for
    running_var (momentum=None: cumulative average over num_batches_tracked). eval() normalises
    with the running statistics. Running stats and num_batches_tracked are buffers: saved by
    state_dict(), never handed to an optimizer. eps defaults to PyTorch's 1e-5.
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
                raise ValueError(f"BatchNorm2d: expected more than 1 value per channel when "
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
        tape), folded into the running buffers with device ops; no host round trip."""
        object.__setattr__(self, "_nbt", self._nbt + 1)
        self.num_batches_tracked.set(np.float32(self._nbt))
        m = 1.0 / self._nbt if self.momentum is None else float(self.momentum)
        y, xhat, mean, var, inv_std = _ops.batchnorm_channel_first(
            xbuf, self.weight.mirror(), self.bias.mirror(), eps=self.eps)
        for b in (y, xhat, inv_std):
            b.release()
        for buf, stat, c in ((self.running_mean, mean, m),
                             (self.running_var, var, m * count / (count - 1))):
            kept = _ops.scale(buf.mirror(), c=1.0 - m)
            buf.set_mirror(_ops.axpy(kept, stat, c=c))
            kept.release()
            stat.release()


class Embedding(Module):
    def __init__(self, n, d):
        super().__init__()
        self.weight = Parameter(init.normal((n, d)))

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
        return s.op("gather_rows", self.weight, indices=a.astype(np.int64))


class MultiHeadAttention(Module):
    """Self-attention over d_model with num_heads heads (Q/K/V/O weights, no biases). The fused
    kernel (use_flash=True, the default) never stores the n x n scores on CUDA; the composed
    path is the plain reference."""

    def __init__(self, d_model, num_heads, use_flash=True):
        super().__init__()
        sh = (d_model, d_model)
        self.Wq, self.Wk = Parameter(init.xavier_uniform(sh)), Parameter(init.xavier_uniform(sh))
        self.Wv, self.Wo = Parameter(init.xavier_uniform(sh)), Parameter(init.xavier_uniform(sh))
        self.num_heads, self.use_flash = num_heads, use_flash
        self._mask = None  # the last boolean mask, uploaded once (a DeviceMask)

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

    def forward(self, x, mask=None):
        return x.session.op("multi_head_attention", self.Wq, self.Wk, self.Wv, self.Wo, x,
                            num_heads=self.num_heads, mask=self._device_mask(mask),
                            use_flash=self.use_flash)


class SpectralConv1d(Module):
    def __init__(self, width, modes):
        super().__init__()
        a = 1.0 / (width * width)
        self.w_re = Parameter(init.uniform((modes, width, width), -a, a))
        self.w_im = Parameter(init.uniform((modes, width, width), -a, a))

    def forward(self, x):
        return x.session.op("spectral_conv1d_rfft", x, self.w_re, self.w_im)
