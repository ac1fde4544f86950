"""PyTorch's in-place ops on Tensor (`add_`, ..., `copy_`, `x[idx] = v`, `+=`): one rule.

- No gradient to record (no_grad, or neither the tensor nor an operand requires one): the new
  values are written into the tensor's storage, so views sharing it (reshape, detach(), `.data`,
  a Parameter's leaf) see them. The core arithmetic runs the out-of-place op's own kernel with
  the storage as its output (torchlean.inplace): no allocation, the same bits.
- A gradient to record: the op is recorded out of place and the tensor is rebased onto its
  result (as PyTorch rebases a tensor's grad_fn), after bumping the old storage's version, so a
  backward that needs the old values raises instead of using changed ones.
- A leaf that requires grad raises outside no_grad, as PyTorch does.
Every write bumps the storage's version counter (torchlean.buffer.bump).
"""
from __future__ import annotations

import math
import numbers
import threading

import numpy as np

from torchlean import composite as _composite
from torchlean import inplace as _k
from torchlean.buffer import AnyBuffer
from torchlean.random import next_device_key
from torchlean.tape import is_grad_enabled, no_grad

_get_ident = threading.get_ident
# the float32 just below pi/2 (float32(pi/2) is above it, where tan changes sign)
_HALF_PI_BELOW = float(np.nextafter(np.float32(math.pi / 2), np.float32(0)))
_LEAF_MSG = ("a leaf Variable that requires grad is being used in an in-place operation. "
             "({op}: wrap the update in torchlean.no_grad(), or write through .data)")


def _names_op(op: str):
    """Errors raised inside an in-place method name it: a message that does not already start
    with the op's name gets `op: ` in front (same exception type)."""
    def wrap(method):
        def named(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except (ValueError, TypeError, IndexError, RuntimeError) as e:
                msg = str(e)
                if msg.startswith(op):
                    raise
                try:
                    renamed = type(e)(f"{op}: {msg}")
                except Exception:   # an exception type with its own constructor: keep it
                    raise e from None
                raise renamed from None
        named.__name__ = named.__qualname__ = method.__name__
        named.__doc__ = method.__doc__
        return named
    return wrap


def _is_number(o) -> bool:
    return isinstance(o, numbers.Real) and not isinstance(o, bool) or isinstance(o, np.floating)


class InPlaceOps:
    """The `_`-suffixed methods and augmented assignment of Tensor (and so of Parameter)."""

    __slots__ = ()

    # ------------------------------------------------------------------ the one rule
    def _inplace(self, op: str, compute, operands=(), kernel=None):
        """Write compute() (the out-of-place value, a Tensor) into self. `kernel(dst)`, when
        given, writes it straight into the storage and returns False when it cannot."""
        needs_grad = is_grad_enabled() and (
            self.requires_grad or any(getattr(o, "requires_grad", False) for o in operands))
        if self._is_parameter:
            if needs_grad:
                if self.requires_grad:
                    raise RuntimeError(_LEAF_MSG.format(op=op))
                raise RuntimeError(f"{op}: an operand requires grad but the Parameter does not; "
                                   "torchlean writes Parameters only outside autograd (no_grad)")
            dst = self.mirror()
        else:
            node = self._node()
            if needs_grad and node.requires_grad and not node.parents:
                raise RuntimeError(_LEAF_MSG.format(op=op))
            dst = node.value
        if needs_grad:
            _k.bump_storage(dst.buf, op)   # a VJP that saved the old values now raises
            out = compute()
            _check_shape(op, out.shape, self.shape)
            self._rebase(self._still_differentiable(out))
            return self
        if kernel is not None and kernel(dst):
            return self
        with no_grad():
            out = compute()
        _check_shape(op, out.shape, self.shape)
        _k.copy_into(dst, out._node().value, op)
        return self

    def _still_differentiable(self, out):
        """`out` as the node self is rebased onto: its own node (never another Tensor's) and,
        when self required grad, still requiring it (a fill or a copy of a constant sends self
        a zero gradient, as torch's): where(everywhere, out, self) keeps out's bits."""
        if self.requires_grad and not out.requires_grad:
            out = _composite.where(self.session, np.ones(tuple(self.shape), bool), out, self)
        elif out.id == self.id or out.session.refs.get(out.id, 0) > 1:
            out = out.clone()
        return out

    def _operand(self, o):
        """o as a buffer of self's shape for a kernel, or None (the caller falls back)."""
        if isinstance(o, InPlaceOps) and tuple(o.shape) == tuple(self.shape):
            return o.mirror() if o._is_parameter else o._node().value
        return None

    def _fast(self, name: str, other) -> bool:
        """The common case without closures: two plain Tensors of one shape on their Session's
        current step in its thread, neither recording a gradient: the kernel into self."""
        s = self.session
        if self._is_parameter or self.gen != s.gen or _get_ident() != s.owner:
            return False
        a = s.tape.nodes[self.id]
        if other.__class__ is float or other.__class__ is int:   # x * c, x / c: the scale op
            if name not in ("mul", "div") or (is_grad_enabled() and a.requires_grad) or \
                    not (other != 0 if name == "div" else math.isfinite(other)):
                return False
            c = float(other) if name == "mul" else 1.0 / float(other)
            if not math.isfinite(c):
                return False
            _k.scale_into(a.value, c, name + "_")
            return True
        if other.__class__ is not self.__class__ or other.session is not s or other.gen != s.gen:
            return False
        b = s.tape.nodes[other.id]
        if is_grad_enabled() and (a.requires_grad or b.requires_grad):
            return False
        return _k.binary_into(name, a.value, b.value)

    # ------------------------------------------------------------------ arithmetic
    @_names_op('add_')
    def add_(self, other, *, alpha=1):
        if alpha == 1 and self._fast("add", other):
            return self

        def kernel(dst):
            b = self._operand(other)
            if b is None:
                return False
            if alpha == 1:
                return _k.binary_into("add", dst, b)
            _k.axpy_into(dst, b, float(alpha), "add_")
            return True
        return self._inplace("add_", lambda: self + (other if alpha == 1 else other * alpha),
                             (other,), kernel)

    @_names_op('sub_')
    def sub_(self, other, *, alpha=1):
        if alpha == 1 and self._fast("sub", other):
            return self

        def kernel(dst):
            b = self._operand(other)
            if b is None:
                return False
            if alpha == 1:
                return _k.binary_into("sub", dst, b)
            _k.axpy_into(dst, b, -float(alpha), "sub_")
            return True
        return self._inplace("sub_", lambda: self - (other if alpha == 1 else other * alpha),
                             (other,), kernel)

    @_names_op('mul_')
    def mul_(self, other):
        if self._fast("mul", other):
            return self

        def kernel(dst):
            if _is_number(other) and np.isfinite(other):
                _k.scale_into(dst, float(other), "mul_")
                return True
            b = self._operand(other)
            return b is not None and _k.binary_into("mul", dst, b)
        return self._inplace("mul_", lambda: self * other, (other,), kernel)

    @_names_op('div_')
    def div_(self, other, *, rounding_mode=None):
        if rounding_mode is not None:
            return self._inplace("div_", lambda: self.div(other, rounding_mode=rounding_mode),
                                 (other,))
        if self._fast("div", other):
            return self

        def kernel(dst):
            if _is_number(other) and other != 0 and np.isfinite(1.0 / float(other)):
                _k.scale_into(dst, 1.0 / float(other), "div_")   # x / c is x * (1 / c)
                return True
            b = self._operand(other)
            return b is not None and _k.binary_into("div", dst, b)
        return self._inplace("div_", lambda: self / other, (other,), kernel)

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    def neg_(self):
        return self._inplace("neg_", lambda: -self, (),
                             lambda dst: _k.scale_into(dst, -1.0, "neg_") or True)

    def _unary_(self, name):
        return self._inplace(name + "_", lambda: self.session.op(name, self), (),
                             lambda dst: _k.unary_into(name, dst))

    def abs_(self):
        return self._unary_("abs")

    def sqrt_(self):
        return self._unary_("sqrt")

    def exp_(self):
        return self._unary_("exp")

    def log_(self):
        return self._unary_("log")

    def reciprocal_(self):
        return self._unary_("reciprocal")

    def sigmoid_(self):
        return self._unary_("sigmoid")

    def tanh_(self):
        return self._unary_("tanh")

    def relu_(self):
        return self._unary_("relu")

    @_names_op('pow_')
    def pow_(self, exponent):
        return self._inplace("pow_", lambda: self.pow(exponent), (exponent,))

    @_names_op('clamp_')
    def clamp_(self, min=None, max=None):  # noqa: A002 - torch's names
        return self._inplace("clamp_", lambda: self.clamp(min, max), (min, max))

    clip_ = clamp_

    def clamp_min_(self, min):  # noqa: A002 - torch's name
        return self.clamp_(min=min)

    def clamp_max_(self, max):  # noqa: A002 - torch's name
        return self.clamp_(max=max)

    def square_(self):
        return self._inplace("square_", lambda: self * self, ())

    @_names_op('lerp_')
    def lerp_(self, end, weight):
        return self._inplace("lerp_", lambda: self + weight * (end - self), (end, weight))

    @_names_op('addcmul_')
    def addcmul_(self, tensor1, tensor2, *, value=1):
        return self._inplace("addcmul_", lambda: self + value * (tensor1 * tensor2),
                             (tensor1, tensor2))

    @_names_op('addcdiv_')
    def addcdiv_(self, tensor1, tensor2, *, value=1):
        return self._inplace("addcdiv_", lambda: self + value * (tensor1 / tensor2),
                             (tensor1, tensor2))

    # ------------------------------------------------------------------ writes of values
    @_names_op('copy_')
    def copy_(self, src, non_blocking=False):
        """self's values := src broadcast to self's shape (autograd-correct: gradient flows to
        src; a non-leaf is rebased onto the copy)."""
        def kernel(dst):
            if isinstance(src, InPlaceOps):
                b = src.mirror() if src._is_parameter else src._node().value
                if b is dst:
                    return True
                wide = src if b.shape == dst.shape else src.expand(tuple(self.shape))
                _k.copy_into(dst, wide.mirror() if wide._is_parameter else wide._node().value,
                             "copy_")
                return True
            a = np.asarray(src, dtype=np.float32)
            _k.copy_into(dst, AnyBuffer.from_numpy(np.broadcast_to(a, self.shape)), "copy_")
            return True
        return self._inplace("copy_", lambda: self.session.as_tensor(src).expand(
            tuple(self.shape)).clone(), (src,), kernel)

    @_names_op('fill_')
    def fill_(self, value):
        v = float(value.item() if isinstance(value, InPlaceOps) else value)
        return self._inplace(
            "fill_", lambda: self.session.tensor(np.full(self.shape, v, np.float32)), (),
            lambda dst: _k.copy_into(dst, AnyBuffer.full(dst.shape, v), "fill_") or True)

    def zero_(self):
        return self.fill_(0.0)

    @_names_op('masked_fill_')
    def masked_fill_(self, mask, value):
        return self._inplace("masked_fill_",
                             lambda: _composite.where(self.session, mask, value, self),
                             (value,))

    @_names_op('index_fill_')
    def index_fill_(self, dim, index, value):
        d = dim + self.ndim if dim < 0 else dim
        key = (slice(None),) * d + (np.asarray(index, dtype=np.int64).reshape(-1),)
        self[key] = value
        return self

    def scatter_(self, dim, index, src):
        """self[i][index[i][j][k]][k] = src[i][j][k] (dim 1; likewise for any dim), src a
        Tensor (its leading index-shaped block is read) or a number."""
        idx = np.asarray(index.numpy() if hasattr(index, "numpy") else index)
        if idx.dtype.kind not in "iu" or idx.ndim != self.ndim:
            raise RuntimeError(f"scatter_: index must be an int64 tensor with as many dims as "
                               f"self ({self.ndim}), got dtype {idx.dtype} and shape "
                               f"{list(idx.shape)}")
        d = dim + self.ndim if dim < 0 else dim
        n = self.shape[d]
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"scatter_: index {int(idx.max())} is out of bounds for dimension "
                             f"{dim} with size {n}")
        coords = list(np.indices(idx.shape))
        coords[d] = idx % n if n else idx
        key = tuple(coords)
        if isinstance(src, InPlaceOps):
            src = src[tuple(slice(0, m) for m in idx.shape)]
        self[key] = src
        return self

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        def kernel(dst):
            _k.random_into(dst, "uniform", _key(generator))
            if (a, b) != (0.0, 1.0):
                with no_grad():
                    scaled = self.session.borrow(dst) * (float(b) - float(a)) + float(a)
                    _k.copy_into(dst, scaled._node().value, "uniform_")
            return True
        return self._random("uniform_", kernel)

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        return self._random("normal_", lambda dst: _k.random_into(
            dst, "normal", _key(generator), mean, std) or True)

    def bernoulli_(self, p=0.5, *, generator=None):
        return self._random("bernoulli_", lambda dst: _k.random_into(
            dst, "bernoulli", _key(generator), float(p)) or True)

    # torch's other in-place samplers: a registry uniform or normal draw of the session's
    # stream (or generator's), then float32 registry pointwise ops on it, so exact mode gives
    # the same bits on every backend (no host math on the values).
    def _transformed(self, op, kind, generator, transform, a=0.0, b=1.0):
        def kernel(dst):
            _k.random_into(dst, kind, _key(generator), a, b)
            with no_grad():
                y = transform(self.session.borrow(dst))
                _k.copy_into(dst, y._node().value, op)
            return True
        return self._random(op, kernel)

    def exponential_(self, lambd=1.0, *, generator=None):
        """Fills self with Exponential(lambd) draws, density lambd exp(-lambd x) for x > 0:
        -log1p(-u) * (1 / lambd) for u uniform in [0, 1) (torch's CPU form, the factor a
        float32 number); u = 0 gives 2^-24 / lambd instead of 0 (as torch's CUDA sampler keeps
        every draw above 0)."""
        lam = float(lambd)
        if not (lam > 0.0 and math.isfinite(lam)):
            raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
        return self._transformed(
            "exponential_", "uniform", generator,
            lambda u: _composite.clamp((-u).log1p().neg(), min=2.0 ** -24) * (1.0 / lam))

    def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
        """Fills self with Cauchy(median, sigma) draws, density 1 / (pi sigma (1 + ((x -
        median) / sigma)^2)): median + sigma tan(pi (u - 0.5)) for u uniform in [0, 1) (the
        angle kept above -pi/2 at u = 0, so that draw is a large negative number)."""
        sg = float(sigma)
        if not sg > 0.0:
            raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
        med = float(median)
        return self._transformed(
            "cauchy_", "uniform", generator,
            lambda u: _composite.clamp((u - 0.5) * math.pi, min=-_HALF_PI_BELOW).tan() * sg
            + med)

    def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
        """Fills self with exp(N(mean, std^2)) draws (mean and std are the underlying normal's,
        as torch's): exp of normal_'s draw."""
        sd = float(std)
        if not sd > 0.0:
            raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
        return self._transformed("log_normal_", "normal", generator, lambda z: z.exp(),
                                 float(mean), sd)

    def geometric_(self, p, *, generator=None):
        """Fills self with Geometric(p) draws, the number of Bernoulli(p) trials up to the first
        success (whole numbers >= 1 held as float32, P(k) = (1 - p)^(k-1) p):
        ceil(log1p(-u) * (1 / log1p(-p))) for u uniform in [0, 1), the factor a float32
        number, at least 1 (u = 0 gives 1)."""
        pf = float(p)
        if not 0.0 < pf < 1.0:
            raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
        inv = 1.0 / math.log1p(-pf)       # < 0; a scale factor rounded to float32 once
        return self._transformed(
            "geometric_", "uniform", generator,
            lambda u: _composite.clamp(((-u).log1p() * inv).ceil(), min=1.0))

    def _random(self, op, kernel):
        if is_grad_enabled() and self.requires_grad and (
                self._is_parameter or not self._node().parents):
            raise RuntimeError(_LEAF_MSG.format(op=op))
        if is_grad_enabled() and self.requires_grad:   # a non-leaf: a fresh leaf of draws
            fresh = self.session.tensor(np.zeros(self.shape, np.float32))
            kernel(fresh._node().value)
            _k.bump_storage(self._node().value.buf, op)
            self._rebase(self._still_differentiable(fresh))
            return self
        kernel(self.mirror() if self._is_parameter else self._node().value)
        return self

    # ------------------------------------------------------------------ resizing
    def resize_(self, *sizes, memory_format=None):
        """torch's resize_: self takes the row-major shape `sizes` (ints or one sequence).
        The same element count: the values keep their row-major order in the same storage (a
        reshape in place; detach() and .data aliases still share it). Another count: new
        storage holding the first min(old, new) values in row-major order; the elements that
        growing adds are 0 (torch leaves them uninitialized; torchlean fills them
        deterministically), and aliases made before keep the old storage. torchlean's storage
        is always the tensor's size, so shrinking drops the tail: growing again gives zeros
        where torch's larger storage may still show the old values. As torch, a tensor
        that requires grad cannot be resized (in no_grad too), and the version counter is not
        bumped. torchlean does not resize a view, a tensor that live views read, or a
        Parameter (assign p.data instead): those raise."""
        shape = _sizes("resize_", sizes)
        if memory_format is not None and str(memory_format) not in (
                "torch.contiguous_format", "contiguous_format"):
            raise RuntimeError(f"resize_: torchlean resizes to the row-major (contiguous) "
                               f"layout only, got memory_format={memory_format}")
        if self.requires_grad:
            raise RuntimeError("cannot resize variables that require grad")
        if self._is_parameter:
            raise RuntimeError("resize_: torchlean does not resize a Parameter; assign p.data "
                               "a tensor of the new shape instead")
        if hasattr(self, "_vbase"):
            raise RuntimeError(f"resize_: torchlean does not resize a view (shape "
                               f"{list(self.shape)} of a base of shape "
                               f"{list(self._vbase.shape)}); clone() it first")
        s = self.session
        old = self._node().value
        if _k.has_live_views(old.buf):
            raise RuntimeError(f"resize_: views of this tensor (shape {list(self.shape)}) are "
                               "alive; torchlean does not resize a tensor that views read")
        n, m = old.buf.n, math.prod(shape)
        if n == m:
            if shape == tuple(self.shape):
                return self
            kept = s.tape.hand_out(self.id)     # the payload lives on with its new holder
            new = s.borrow(AnyBuffer(shape, kept.buf, owns=False))
        else:
            flat = old.to_numpy().reshape(-1)
            vals = np.zeros(m, np.float32)
            vals[:min(n, m)] = flat[:min(n, m)]
            new = s.tensor(vals.reshape(shape))
        self._rebase(new)
        return self

    def resize_as_(self, the_template, *, memory_format=None):
        """torch's resize_as_: resize_(the_template.shape) (see resize_)."""
        return self.resize_(tuple(the_template.shape), memory_format=memory_format)

    # ------------------------------------------------------------------ item assignment
    @_names_op('__setitem__')
    def __setitem__(self, key, value):
        """x[key] = value for every index form x[key] reads; value broadcast to the selection;
        differentiable: gradient to value through the written positions, zero to the old x
        there."""
        shape = tuple(self.shape)
        pos = _positions(shape, key)
        vals = value
        if isinstance(value, InPlaceOps) and tuple(value.shape) != pos.shape:
            try:
                np.broadcast_shapes(tuple(value.shape), pos.shape)
            except ValueError:
                raise RuntimeError(f"shape mismatch: value tensor of shape {list(value.shape)} "
                                   f"cannot be broadcast to indexing result of shape "
                                   f"{list(pos.shape)}") from None
        elif not isinstance(value, InPlaceOps):
            a = np.asarray(value, dtype=np.float32)
            try:
                vals = np.broadcast_to(a, pos.shape)
            except ValueError:
                raise RuntimeError(f"shape mismatch: value of shape {list(a.shape)} cannot be "
                                   f"broadcast to indexing result of shape {list(pos.shape)}") \
                    from None

        def compute():
            return _assign(self, shape, pos, vals)
        return self._inplace("__setitem__", compute, (value,))

    def _rebase(self, out) -> None:
        """Point this handle at `out`'s node (its autograd history and storage)."""
        s, old, new = self.session, self.id, out.id
        refs = s.refs
        refs[new] = refs.get(new, 0) + 1
        self.id = new
        s.release_ref(old)


def _key(generator) -> int:
    """The device key of the next draw: of `generator` (torch's generator=) or the global
    seeded stream."""
    return next_device_key() if generator is None else generator.next_key()


def _sizes(op: str, sizes) -> tuple:
    """torch's *sizes: ints, or one list / tuple / Size of them, each >= 0."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    out = []
    for d in sizes:
        if isinstance(d, bool) or not isinstance(d, (numbers.Integral, np.integer)):
            raise TypeError(f"{op}: sizes must be ints, got {sizes!r}")
        if d < 0:
            raise RuntimeError(f"{op}: Trying to create tensor with negative dimension {int(d)}: "
                               f"{[int(x) for x in sizes]}")
        out.append(int(d))
    return tuple(out)


def _check_shape(op: str, got, want) -> None:
    if tuple(got) != tuple(want):
        raise RuntimeError(f"{op}: output with shape {list(want)} doesn't match the broadcast "
                           f"shape {list(got)}")


def _positions(shape: tuple, key) -> np.ndarray:
    """The flat positions x[key] selects, as an int64 array of x[key]'s shape (NumPy's indexing
    of an index grid: the forms torch reads, tensors converted to arrays)."""
    grid = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    parts = key if isinstance(key, tuple) else (key,)
    conv = []
    for k in parts:
        if isinstance(k, InPlaceOps):        # a float tensor: a 0/1 mask
            conv.append(k.numpy() != 0)
        elif hasattr(k, "dtype") and hasattr(k, "numpy") and not isinstance(k, np.ndarray):
            conv.append(np.asarray(k.numpy()))   # an IntTensor (int64 or bool)
        elif isinstance(k, list):
            conv.append(np.asarray(k))
        else:
            conv.append(k)
    try:
        return np.asarray(grid[tuple(conv)])
    except IndexError as e:
        raise IndexError(f"__setitem__: index {key!r} is out of range for a tensor of shape "
                         f"{list(shape)} ({e})") from None


def _assign(x, shape, pos: np.ndarray, vals):
    """where(written, value scattered to its positions, x): differentiable in x and value."""
    s = x.session
    n = int(np.prod(shape))
    flat = pos.reshape(-1)
    src = np.full(n, flat.size, dtype=np.int64)
    src[flat] = np.arange(flat.size)           # a repeated position: the last write wins
    written = np.zeros(n, dtype=bool)
    written[flat] = True
    if isinstance(vals, InPlaceOps):
        v = s.as_tensor(vals)
        v = v.expand(pos.shape) if tuple(v.shape) != pos.shape else v
        ext = _composite.cat([v.reshape(-1), s.tensor(np.zeros(1, np.float32))], 0)
        scattered = _composite.getitem(ext, src).reshape(shape)
    else:
        ext = np.append(np.asarray(vals, np.float32).reshape(-1), np.float32(0))
        scattered = s.tensor(ext[src].reshape(shape))
    return _composite.where(s, written.reshape(shape), scattered, x)
