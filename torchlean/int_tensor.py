"""IntTensor: torch's int64 and bool tensors, held on the host as a NumPy array, or on the
device as float32 whole numbers until the host asks.

Why mostly on the host: what a training loop does with integer tensors (labels, accuracy
counts) is bookkeeping that ends in a host number. Indices made and used on the device (sort's,
topk's, one_hot's) stay there: `on_device` wraps such a buffer, and the NumPy array is read back
only when a host method needs it. A host IntTensor that feeds a device kernel (gather's index)
keeps its uploaded copy (`device_values`), so a second use uploads nothing. The methods follow
torch's names and results; arithmetic with a float Tensor or a Python float promotes to a
float32 Tensor of the default session, as torch promotes int64 to float32.
"""
from __future__ import annotations

import math

import numpy as np

from torchlean.dtypes import bool_ as _bool, int64 as _int64
from torchlean import _capture, current, indexing, int_shape_ops as _ops
from torchlean.buffer import AnyBuffer
from torchlean.return_types import MinMaxResult
from torchlean.int_operators import IntOperators, host_array
from torchlean.int_values import to_bool, to_int64




class IntTensor(IntOperators):
    """An int64 or bool tensor on the host (NumPy); see the module docstring."""

    # _host: the NumPy array (None until a device result is read back); _dev: an AnyBuffer of
    # float32 whole numbers with the same values, or None; _bounds: (min, max) once known;
    # _shares: the array is the caller's memory (from_numpy), so no device copy is kept
    __slots__ = ("_host", "_dev", "_bounds", "_shares", "_within")
    __array_priority__ = 1001          # NumPy defers to our operators
    requires_grad = False
    grad = None
    is_cuda = False

    def __init__(self, a, shares: bool = False):
        a = np.asarray(a)
        if a.dtype == np.bool_:
            self._host = a
        elif a.dtype.kind in "iuO":     # uint64 >= 2**63, big Python ints: refused, not wrapped
            self._host = to_int64("IntTensor", a)
        else:
            raise TypeError(f"IntTensor: expected integer or boolean data, got dtype {a.dtype}")
        self._dev, self._bounds, self._shares, self._within = None, None, shares, None

    @classmethod
    def on_device(cls, buf: AnyBuffer, bounds=None, within=None) -> "IntTensor":
        """An int64 tensor whose values are `buf`'s float32 whole numbers (a buffer no tape
        owns, |value| <= 2^24). What the producer knows spares a read-back: `bounds` the exact
        (min, max), `within` a range (lo, hi) holding every value (range checks)."""
        t = cls.__new__(cls)
        t._host, t._dev, t._bounds, t._shares = None, buf, bounds, False
        t._within = within or bounds
        return t

    def within(self):
        """A (lo, hi) range holding every value, from the producer when it knows one."""
        return self._within or self.bounds()

    @property
    def _a(self) -> np.ndarray:
        """The values as a NumPy array (read back from the device on first use)."""
        a = self._host
        if a is None:
            a = self._host = self._dev.to_numpy().astype(np.int64)
        return a

    def device_values(self):
        """The values as a device AnyBuffer of float32 whole numbers (uploaded once, then kept),
        or None where float32 cannot hold every value exactly (|value| > 2^24) or during a
        graph capture (whose integer inputs are host memory)."""
        if self._dev is not None:
            return self._dev
        if self._shares or _capture.STATE.active:
            return None
        lo, hi = self.bounds()
        if lo < -(1 << 24) or hi > (1 << 24):
            return None
        self._dev = AnyBuffer.from_numpy(self._host.astype(np.float32))
        return self._dev

    def bounds(self):
        """(min, max) of the values ((0, -1) when empty), computed once."""
        if self._bounds is None:
            a = self._a
            self._bounds = (int(a.min()), int(a.max())) if a.size else (0, -1)
        return self._bounds

    # ------------------------------------------------------------------ what it is
    @property
    def dtype(self):
        if self._host is None:
            return _int64
        return _bool if self._host.dtype == np.bool_ else _int64

    @property
    def device(self):
        from torchlean.devices import device
        return device("cpu")

    @property
    def shape(self):
        return self._dev.shape if self._host is None else self._host.shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[indexing.normalize_dim(dim, self.ndim, "size")]

    def numel(self) -> int:
        return math.prod(self.shape)

    nelement = numel

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ------------------------------------------------------------------ conversions
    def numpy(self) -> np.ndarray:
        return self._a.copy()

    def __array__(self, dtype=None, copy=None):
        return self._a.copy() if dtype is None else self._a.astype(dtype)

    def tolist(self):
        return self._a.tolist()

    def item(self):
        if self._a.size != 1:
            raise ValueError(f"item: a Tensor with {self._a.size} elements (shape "
                             f"{self._a.shape}) cannot be converted to a Python scalar")
        return self._a.reshape(-1)[0].item()

    def __int__(self):
        return int(self.item())

    def __float__(self):
        return float(self.item())

    def __index__(self):
        if self._a.dtype == np.bool_ or self._a.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self._a.reshape(-1)[0])

    def __bool__(self):
        if self._a.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous "
                               f"(shape {self._a.shape})")
        return bool(self._a.reshape(-1)[0])

    def float(self, session=None):
        """A float32 Tensor (of `session`, default the default session) with these values."""
        return (session or current.session()).tensor(self._a.astype(np.float32))

    def long(self) -> "IntTensor":
        return IntTensor(self._a.astype(np.int64))

    int = long

    def bool(self) -> "IntTensor":
        return IntTensor(self._a != 0)

    def to(self, *args, **kwargs) -> "IntTensor":
        from torchlean.devices import parse_to
        dt = parse_to("to", args, kwargs)
        if dt is None or dt in (_int64, _bool):
            return self if dt is None or dt == self.dtype else IntTensor(self._a.astype(dt.numpy))
        return self.float()

    def type(self, dtype=None):
        if dtype is None:
            return "torch.LongTensor" if self.dtype == _int64 else "torch.BoolTensor"
        return self.to(dtype)

    def cpu(self) -> "IntTensor":
        return self

    def cuda(self, device=None, non_blocking=False) -> "IntTensor":
        from torchlean.devices import check_cuda
        check_cuda("cuda")
        return self

    def clone(self) -> "IntTensor":
        return IntTensor(self._a.copy())

    def detach(self) -> "IntTensor":
        return self

    def contiguous(self) -> "IntTensor":
        return self

    # ------------------------------------------------------------------ shapes
    def __getitem__(self, key):
        try:
            return IntTensor(self._a[host_key(key)])
        except IndexError as e:
            raise IndexError(f"__getitem__: {e} (shape {self._a.shape})") from None

    def __setitem__(self, key, value):
        """x[key] = value: floats truncate toward zero and values int64 cannot hold raise, as
        torch; the value broadcasts to the indexed shape."""
        if hasattr(value, "session") or type(value).__name__ == "Parameter":
            value = value.numpy()                          # a float Tensor's values
        v = (to_bool if self._a.dtype == np.bool_ else to_int64)("__setitem__", host_array(value))
        a = self._a
        self._dev = self._bounds = self._within = None   # the host array changes
        try:
            a[host_key(key)] = v
        except IndexError as e:
            raise IndexError(f"__setitem__: {e} (shape {self._a.shape})") from None
        except ValueError:
            raise RuntimeError(f"__setitem__: shape mismatch: a value of shape {v.shape} cannot "
                               f"be broadcast to the indexed part of shape "
                               f"{self._a[host_key(key)].shape}") from None

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (IntTensor(r) for r in self._a)

    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return IntTensor(self._a.reshape(indexing.reshape_target(self._a.shape, shape,
                                                                 "reshape")))

    view = reshape

    def view_as(self, other):
        return self.reshape(tuple(other.shape))

    def flatten(self, start_dim=0, end_dim=-1):
        s = self._a.shape
        if not s:
            return IntTensor(self._a.reshape(1))
        a = indexing.normalize_dim(start_dim, len(s), "flatten")
        b = indexing.normalize_dim(end_dim, len(s), "flatten")
        return IntTensor(self._a.reshape(s[:a] + (math.prod(s[a:b + 1]),) + s[b + 1:]))

    def unsqueeze(self, dim):
        return IntTensor(np.expand_dims(self._a, indexing.normalize_dim(dim, self._a.ndim + 1,
                                                                        "unsqueeze")))

    def squeeze(self, dim=None):
        if dim is None:
            return IntTensor(self._a.squeeze())
        d = indexing.normalize_dim(dim, self._a.ndim, "squeeze")
        return IntTensor(self._a.squeeze(d) if self._a.shape[d] == 1 else self._a)

    def permute(self, *dims):
        if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
            dims = tuple(dims[0])
        return IntTensor(self._a.transpose(indexing.normalize_permutation(dims, self._a.ndim)))

    def transpose(self, dim0, dim1):
        return IntTensor(np.swapaxes(self._a, indexing.normalize_dim(dim0, self._a.ndim, "transpose"),
                                     indexing.normalize_dim(dim1, self._a.ndim, "transpose")))

    def t(self):
        if self._a.ndim > 2:
            raise ValueError(f"t: expects a tensor with <= 2 dimensions, got shape {self._a.shape}")
        return IntTensor(self._a.T)

    @property
    def T(self):
        return IntTensor(self._a.T)

    def gather(self, dim, index):
        return IntTensor(_ops.gather(self._a, dim, _index_array("gather", index)))

    def repeat(self, *sizes):
        return IntTensor(_ops.repeat(self._a, sizes))

    def tile(self, *dims):
        return IntTensor(_ops.tile(self._a, dims[0] if len(dims) == 1 else dims))

    def flip(self, *dims):
        return IntTensor(_ops.flip(self._a, dims[0] if len(dims) == 1 else dims))

    def roll(self, shifts, dims=None):
        return IntTensor(_ops.roll(self._a, shifts, dims))

    # ------------------------------------------------------------------ reductions
    def _dims(self, dim, op):
        return None if dim is None else indexing.normalize_dims(dim, self._a.ndim, op)

    def sum(self, dim=None, keepdim=False):
        return IntTensor(np.sum(self._a, axis=self._dims(dim, "sum"), keepdims=keepdim,
                                dtype=np.int64))

    def prod(self, dim=None, keepdim=False):
        return IntTensor(np.prod(self._a, axis=self._dims(dim, "prod"), keepdims=keepdim,
                                 dtype=np.int64))

    def mean(self, dim=None, keepdim=False):
        raise TypeError(f"mean: an {self.dtype} tensor has no mean (torch raises too); use "
                        ".float().mean()")

    def _extreme(self, kind, dim, keepdim):
        if self._a.size == 0:
            raise ValueError(f"{kind}: expected a non-empty tensor, got shape {self._a.shape}")
        if dim is None:
            return IntTensor(self._a.max() if kind == "max" else self._a.min())
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            if isinstance(dim, (IntTensor, np.ndarray)):    # max(other): elementwise
                f = np.maximum if kind == "max" else np.minimum
                return IntTensor(f(self._a, host_array(dim)))
            raise TypeError(f"{kind}: dim must be an int, got {type(dim).__name__}")
        vals, idx = _ops.extreme(self._a, kind, dim, keepdim)
        return MinMaxResult(IntTensor(vals), IntTensor(idx))

    def max(self, dim=None, keepdim=False):
        return self._extreme("max", dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return self._extreme("min", dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        return self._arg("argmax", dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return self._arg("argmin", dim, keepdim)

    def _arg(self, kind, dim, keepdim):
        f = np.argmax if kind == "argmax" else np.argmin
        if dim is None:
            out = np.asarray(f(self._a))
            return IntTensor(out.reshape((1,) * self._a.ndim) if keepdim else out)
        d = indexing.normalize_dim(dim, self._a.ndim, kind)
        return IntTensor(f(self._a, axis=d, keepdims=keepdim) if self._a.ndim else f(self._a))

    def any(self, dim=None, keepdim=False):
        return IntTensor(np.any(self._a, axis=self._dims(dim, "any"), keepdims=keepdim))

    def all(self, dim=None, keepdim=False):
        return IntTensor(np.all(self._a, axis=self._dims(dim, "all"), keepdims=keepdim))

    def unique(self):
        return IntTensor(np.unique(self._a))

    def bincount(self, minlength=0):
        if self._a.ndim != 1 or self._a.dtype == np.bool_ or (self._a.size and self._a.min() < 0):
            raise ValueError(f"bincount: only supports 1-d non-negative integral inputs, got "
                             f"shape {self._a.shape}" + (f" with minimum {self._a.min()}"
                                                         if self._a.size else ""))
        return IntTensor(np.bincount(self._a, minlength=int(minlength)))

    # ------------------------------------------------------------------ operators

    def expand(self, *sizes):
        if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
            sizes = tuple(sizes[0])
        lead = len(sizes) - self._a.ndim
        if lead < 0:
            raise ValueError(f"expand: {len(sizes)} sizes {tuple(sizes)} for a tensor of shape "
                             f"{self._a.shape} (need at least {self._a.ndim})")
        target = tuple(self._a.shape[i - lead] if n == -1 and i >= lead else n
                       for i, n in enumerate(sizes))
        try:
            return IntTensor(np.broadcast_to(self._a, target).copy())
        except ValueError:
            raise ValueError(f"expand: shape {self._a.shape} cannot be expanded to "
                             f"{tuple(sizes)}") from None


    def __repr__(self):
        body = np.array2string(self._a, separator=", ", prefix="tensor(")
        dt = "" if self._a.dtype == np.bool_ else ", dtype=torchlean.int64"
        if self._a.dtype == np.bool_:
            dt = ", dtype=torchlean.bool"
        return f"tensor({body}{dt})"


def _index_array(op, index) -> np.ndarray:
    if isinstance(index, IntTensor):
        return index._a
    if isinstance(index, np.ndarray) and index.dtype.kind in "iu":
        return index
    raise TypeError(f"{op}: index must be an int64 tensor, got "
                    f"{getattr(index, 'dtype', type(index).__name__)}")


_MASK_OPS = frozenset(("lt", "le", "gt", "ge", "eq", "ne"))


def _mask_array(t) -> np.ndarray:
    """A float Tensor used as an index: torch's comparisons return bool tensors, torchlean's
    return 0/1 float32 ones, so a comparison's result (or a view of one) is a boolean mask;
    any other float Tensor raises IndexError, as in torch."""
    nodes = t.session.tape.nodes
    node = t._node()
    while not node.owns_value and node.parents:     # a view: look at what it aliases
        node = nodes[node.parents[0]]
    if node.name not in _MASK_OPS:
        raise IndexError(f"__getitem__: tensors used as indices must be long, int or bool "
                         f"tensors; got a float32 Tensor of shape {tuple(t.shape)} (use "
                         f".long() for indices, or a comparison such as x > 0 for a mask)")
    return t.numpy() != 0


def host_key(key):
    """An index expression with IntTensors as their arrays and comparison Tensors as boolean
    masks (other float Tensors raise IndexError); anything else as it is."""
    if isinstance(key, tuple):
        return tuple(host_key(k) for k in key)
    if isinstance(key, IntTensor):
        return key._a
    if hasattr(key, "session") and hasattr(key, "_node"):
        return _mask_array(key)
    return key
