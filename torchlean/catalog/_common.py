"""What the catalog's families share: argument checks that name the public op, host index maps
(one gather_vec moves any fixed arrangement of elements; its VJP is a scatter-add), and masks as
0/1 float32 Tensors (torchlean's comparison results)."""
from __future__ import annotations

import math

import numpy as np

from torchlean import composite, indexing
from torchlean.int_tensor import IntTensor
from torchlean.session import Parameter, Tensor, default_session

NUMBER = (int, float, np.integer, np.floating)


def tensor(op, x, what="input"):
    """x as a float Tensor of its session (a Parameter recorded in the default one); anything
    else raises TypeError naming the op, as torch does for a non-Tensor input."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, Parameter):
        return default_session().use(x)
    raise TypeError(f"{op}(): argument '{what}' must be a float Tensor, not "
                    f"{type(x).__name__}")


def session_of(*xs):
    return next((x.session for x in xs if isinstance(x, Tensor)), None) or default_session()


def operand(s, op, x, what="other"):
    """A second operand: a Tensor, Parameter, number or float array as a Tensor of session s."""
    if isinstance(x, IntTensor):
        return x.float(s)
    if isinstance(x, (Tensor, Parameter)):
        return s.as_tensor(x)
    if isinstance(x, NUMBER) and not isinstance(x, bool) or isinstance(x, np.ndarray):
        return s.tensor(np.asarray(x, np.float32))
    if isinstance(x, bool):
        return s.tensor(np.float32(x))
    raise TypeError(f"{op}(): argument '{what}' must be a Tensor or a number, not "
                    f"{type(x).__name__}")


def dim(op, d, ndim):
    return indexing.normalize_dim(d, ndim, op)


def dims(op, d, ndim):
    return indexing.normalize_dims(d, ndim, op)


def broadcast_shapes(op, *shapes):
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise RuntimeError(f"{op}: shapes {[tuple(s) for s in shapes]} do not broadcast") from None


def expand(x, shape):
    return x if tuple(x.shape) == tuple(shape) else composite.expand(x, tuple(shape))


def rearrange(x, index):
    """x's elements at the flat positions `index` (an int array, any shape): one gather_vec,
    whose VJP scatter-adds back, so repeats and drops differentiate correctly."""
    index = np.asarray(index, np.int64)
    flat = composite.reshape(x, (-1,))
    if index.size == 0:
        return composite.reshape(composite.getitem(flat, slice(0, 0)), index.shape)
    return composite.reshape(composite.getitem(flat, index.reshape(-1)), index.shape)


def positions(shape):
    """Flat positions of a tensor of `shape`, as an int64 array of that shape."""
    return np.arange(math.prod(shape), dtype=np.int64).reshape(shape)


def embed(x, src, at):
    """x with src's elements written at x's flat positions `at` (an int array of src's shape,
    no repeats): a where over a host mask, so gradients reach src there and x elsewhere."""
    at = np.asarray(at, np.int64).reshape(-1)
    source = np.zeros(math.prod(x.shape), np.int64)
    source[at] = np.arange(at.size)
    covered = np.zeros(math.prod(x.shape), np.float32)
    covered[at] = 1.0
    s = x.session
    picked = rearrange(src, source.reshape(x.shape)) if at.size else x
    return s.op("where", s.tensor(covered.reshape(x.shape)), picked, x)


def mask(s, op, m, what="mask"):
    """A mask (bool/int IntTensor or array, or a float 0/1 Tensor) as a 0/1 float32 Tensor."""
    if isinstance(m, (Tensor, Parameter)):
        return s.as_tensor(m)
    if isinstance(m, IntTensor) and m.dtype.name == "bool":
        buf = m.device_values()        # uploaded once per mask, then kept (None: cannot be)
        if buf is not None:
            return s.borrow(buf)
    a = np.asarray(m._a if isinstance(m, IntTensor) else m)
    if a.dtype != np.bool_ and not np.issubdtype(a.dtype, np.number):
        raise TypeError(f"{op}: {what} must be a bool tensor, got dtype {a.dtype}")
    return s.tensor((a != 0).astype(np.float32))


def host_mask(op, m, what="mask"):
    """A mask as a host bool array (reads a float Tensor back)."""
    if isinstance(m, IntTensor):
        return m._a != 0
    if isinstance(m, (Tensor, Parameter)):
        return m.numpy() != 0
    return np.asarray(m) != 0


def sum_to(x, shape):
    """x summed down to `shape` (the broadcasting adjoint): leading axes and size-1 axes."""
    shape = tuple(shape)
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and x.shape[lead + i] != 1)
    y = x.sum(dim=axes, keepdim=True) if axes else x
    return composite.reshape(y, shape)


def reduce_loss(op, loss, reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()
