"""New tensors shaped like others (new_zeros, logspace, ...), the *_copy forms of views, and the
complex-number identities of a real dtype (conj, real, resolve_neg, positive): torchlean is
float32 only, so those return their input's values."""
from __future__ import annotations

import numpy as np

from torchlean import factories
from torchlean.catalog import _common as c
from torchlean.nn import functional as F
from torchlean.session import default_session

_VIEWS = ("alias", "diagonal", "expand", "permute", "squeeze", "t", "transpose", "unbind",
          "unfold", "unsqueeze", "view", "split_with_sizes")

METHODS = ("new_zeros", "new_ones", "new_full", "new_empty", "new_empty_strided", "fill",
           "positive", "resolve_conj", "resolve_neg", "conj", "conj_physical",
           "is_floating_point", "is_complex", "zero_")
INPLACE = ("fill",)
EXPORTS = {"torch": ("scalar_tensor", "logspace", "empty_strided", "empty_permuted", "fill",
                     "positive", "resolve_conj", "resolve_neg", "conj", "conj_physical", "real",
                     "is_floating_point", "is_complex", "constant_pad_nd")
           + tuple(v + "_copy" for v in _VIEWS)}


def _shape(op, size):
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    if any(int(v) < 0 for v in size):
        raise ValueError(f"{op}: sizes must be non-negative, got {tuple(size)}")
    return tuple(int(v) for v in size)


def _new(x, op, size, value, requires_grad):
    x = c.tensor(op, x, "self")
    shape = _shape(op, size)
    return x.session.tensor(np.full(shape, value, np.float32), requires_grad=requires_grad)


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    return _new(self, "new_zeros", size, 0.0, requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    return _new(self, "new_ones", size, 1.0, requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    return _new(self, "new_empty", size, 0.0, requires_grad)


def new_empty_strided(self, size, stride, dtype=None, device=None, requires_grad=False):
    return _new(self, "new_empty_strided", (size,), 0.0, requires_grad)


def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    return _new(self, "new_full", (size,), float(fill_value), requires_grad)


def empty_strided(size, stride, dtype=None, device=None, requires_grad=False):
    """Strides do not exist in torchlean (every tensor is dense): an empty tensor of `size`."""
    return factories.empty(_shape("empty_strided", (size,)), requires_grad=requires_grad)


def empty_permuted(size, physical_layout, dtype=None, device=None, requires_grad=False):
    return factories.empty(_shape("empty_permuted", (size,)), requires_grad=requires_grad)


def scalar_tensor(s, dtype=None, device=None, requires_grad=False):
    return default_session().tensor(np.float32(s), requires_grad=requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    if int(steps) < 0:
        raise ValueError(f"logspace: steps must be non-negative, got {steps}")
    v = np.power(float(base), np.linspace(float(start), float(end), int(steps)))
    return default_session().tensor(v.astype(np.float32), requires_grad=requires_grad)


def fill(input, value):
    """A tensor of input's shape filled with value (a number or a 0-d Tensor, whose gradient
    is the sum of the result's)."""
    x = c.tensor("fill", input)
    if hasattr(value, "shape") and len(value.shape) != 0:
        raise RuntimeError(f"fill: value must be a number or a 0-d tensor, got shape "
                           f"{tuple(value.shape)}")
    v = c.operand(x.session, "fill", value, "value")
    y = c.expand(v, tuple(x.shape))
    return y.clone() if y is v else y


def zero_(self):
    """In place: self.copy_(zeros), returning self (the mutation model's copy_)."""
    return self.copy_(self.session.tensor(np.zeros(self.shape, np.float32)))


def constant_pad_nd(input, pad, value=0):
    """torch.constant_pad_nd: F.pad in constant mode (pairs from the last axis backward;
    negative amounts crop)."""
    return F.pad(c.tensor("constant_pad_nd", input), tuple(pad), "constant", float(value))


def positive(input):
    return c.tensor("positive", input)


def resolve_conj(input):
    return c.tensor("resolve_conj", input)


resolve_neg = conj = positive


def conj_physical(input):
    return c.tensor("conj_physical", input).clone()


def real(input):
    return c.tensor("real", input)


def is_floating_point(input):
    c.tensor("is_floating_point", input)
    return True


def is_complex(input):
    c.tensor("is_complex", input)
    return False


def _copy_of(view):
    def copy(input, *args, **kwargs):
        y = getattr(c.tensor(view + "_copy", input), "clone" if view == "alias" else view)(
            *args, **kwargs)
        return tuple(t.clone() for t in y) if isinstance(y, tuple) else y.clone()
    copy.__name__ = copy.__qualname__ = view + "_copy"
    copy.__doc__ = f"torch.{view}_copy: {view}(...) in new memory (never a view of its input)."
    return copy


for _v in _VIEWS:
    globals()[_v + "_copy"] = _copy_of(_v)
del _v
