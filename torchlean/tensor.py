"""Tensor: a handle (session, node id, generation) on a Session's tape. Session.step() bumps the
generation, so a stale Tensor raises instead of reading freed memory. Its methods forward to the
registry's tape ops and the composites of torchlean.composite; its in-place ops come from
torchlean.mutation, its views (transpose, indexing, reshape, ...) from torchlean.views.
nn.Parameter (torchlean.parameter) is a Tensor too."""
from __future__ import annotations

import math
import threading

import numpy as np

from torchlean.api_hints import UnknownAttributeError
from torchlean.buffer import AnyBuffer
from torchlean.tape import no_grad
from torchlean._generated.tape_ops import TapeOps
from torchlean import composite as _composite, runtime
from torchlean import devices as _devices
from torchlean.dtypes import float32 as _float32
from torchlean.int_tensor import IntTensor
from torchlean.int_values import to_int64
from torchlean.mutation import InPlaceOps
from torchlean.tensor_composed import ComposedMethods


# the registry's tape ops: the only names Tensor.__getattr__ forwards as methods
_TAPE_OPS = frozenset(n for n in vars(TapeOps) if not n.startswith("_"))
_get_ident = threading.get_ident
class Tensor(ComposedMethods, InPlaceOps):
    """A handle (session, node id) on the session's tape."""

    __slots__ = ("session", "id", "gen")
    __array_priority__ = 1000
    _is_parameter = False

    def __init__(self, session: Session, nid: int, gen: int):
        # (_binary and Session.op build their Tensor without this frame: keep them alike)
        self.session, self.id, self.gen = session, nid, gen
        refs = session.refs
        refs[nid] = refs.get(nid, 0) + 1

    def __del__(self):
        # the last wrapper of an intermediate result is gone: its memory can go too, unless a
        # VJP or a view still needs it (Tape.drop_value decides)
        try:
            s = self.session
            if self.gen != s.gen or _get_ident() != s.owner:
                return
            # Session.release_ref, inlined: this runs once per Tensor
            refs, nid = s.refs, self.id
            c = refs.get(nid, 0) - 1
            if c > 0:
                refs[nid] = c
            else:
                refs.pop(nid, None)
                s.tape.let_go(nid)           # and, unless a graph still reads it, its node
                if s.grads:
                    s.grads.pop(nid, None)   # nobody can ask for this gradient any more
        except Exception:  # interpreter shutdown: nothing left to free
            pass

    def _check(self):
        s = self.session
        if _get_ident() != s.owner:
            s.check_thread()
        if self.gen != s.gen:
            raise ValueError(f"tensor (node {self.id}) belongs to a step that was released by "
                             "Session.step()")

    def _node(self):
        self._check()
        return self.session.tape.nodes[self.id]

    @property
    def value(self) -> AnyBuffer:
        # whoever holds the buffer may outlive this Tensor (detach, DLPack, user code): the
        # tape then never releases it early; it lives while the holder references it (or
        # until Session.step())
        self._check()
        return self.session.tape.hand_out(self.id)

    @property
    def shape(self):
        s = self.session   # _node(), inlined: shapes are read on every composite op
        if self.gen != s.gen or _get_ident() != s.owner:
            self._check()   # raises
        return s.tape.nodes[self.id].value.shape

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def requires_grad(self) -> bool:
        return self._node().requires_grad

    def numpy(self) -> np.ndarray:
        return self._node().value.to_numpy()   # a host copy: the node need not stay alive

    def item(self) -> float:
        v = self._node().value
        if v.numel != 1:
            raise ValueError(f"item: a Tensor with {v.numel} elements (shape {v.shape}) cannot "
                             "be converted to a Python scalar; item() needs exactly one element")
        return float(v.to_numpy().reshape(-1)[0])

    def __bool__(self) -> bool:
        v = self._node().value
        if v.numel != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous "
                               f"(shape {v.shape})")
        return bool(v.to_numpy().reshape(-1)[0])

    _COMPARABLE = (int, float, bool, np.ndarray, np.number, list, tuple)

    def __eq__(self, o):
        """Elementwise == as in PyTorch: a 0/1 float32 Tensor (the eq kernel), no gradient."""
        if not isinstance(o, (Tensor,) + self._COMPARABLE):
            return NotImplemented
        return self._binary("eq", o)

    def __ne__(self, o):
        if not isinstance(o, (Tensor,) + self._COMPARABLE):
            return NotImplemented
        return self._binary("ne", o)

    __hash__ = object.__hash__   # identity, so Tensors stay usable as dict keys

    def __array__(self, dtype=None, copy=None):
        if copy is False and runtime.backend() == "cuda":
            raise ValueError("Tensor.__array__: copy=False is impossible for a CUDA tensor")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def backward(self, seed=None, retain_graph: bool = False):
        self.session.backward(self, seed, retain_graph=retain_graph)

    @property
    def grad(self):
        """The gradient a backward() accumulated into this leaf, as a Tensor (None before)."""
        self._check()
        p = self.session.params_by_leaf.get(self.id)
        if p is not None:
            return p.grad
        g = self.session.grads.get(self.id)
        return None if g is None else self.session.borrow(g)

    @grad.setter
    def grad(self, value):
        self._check()
        s = self.session
        if value is None:
            s.grads.pop(self.id, None)
            return
        a = np.asarray(value, dtype=np.float32)
        if a.shape != tuple(self.shape):
            raise RuntimeError(f"assigned grad has data of a different size: expected "
                               f"{list(self.shape)}, got {list(a.shape)}")
        s.grads[self.id] = AnyBuffer.from_numpy(a)

    @property
    def is_leaf(self) -> bool:
        return not self._node().parents

    def detach(self) -> "Tensor":
        """A Tensor sharing this one's storage, outside autograd (as torch's detach())."""
        self._check()
        return self.session.borrow(self.session.tape.hand_out(self.id))

    def __deepcopy__(self, memo):
        """A leaf's copy in new memory (torch deep-copies leaves only)."""
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment; detach() first")
        t = self.session.tensor(self.numpy(), requires_grad=self.requires_grad)
        memo[id(self)] = t
        return t

    # operators ---------------------------------------------------------------
    def _other(self, o):
        return self.session.as_tensor(o)

    def _binary(self, name, o):
        if self._is_parameter and isinstance(o, Tensor) and not o._is_parameter:
            self = o.session.use(self)   # a Parameter joins the other operand's Session
        # fast path: both operands live tensors of this session's current step
        s = self.session
        if (o.__class__ is Tensor and o.session is s and self.gen == s.gen == o.gen
                and _get_ident() == s.owner):
            nid = getattr(s.tape, name)(self.id, o.id)
            t = _new_tensor(Tensor)   # Tensor(s, nid, gen) without the __init__ frame
            t.session, t.id, t.gen = s, nid, o.gen
            refs = s.refs
            refs[nid] = refs.get(nid, 0) + 1
            return t
        if (name == "mul" and isinstance(o, (int, float, np.integer, np.floating))
                and not isinstance(o, bool) and math.isfinite(o)):
            # a scalar factor is an attribute of the scale op, not an uploaded leaf
            self._check()
            return Tensor(s, s.tape.scale(self.id, c=float(o)), s.gen)
        if name == "matmul":
            _float_operand(name, o)
        elif o.__class__ is IntTensor:
            o = o.float(s)      # elementwise: int64 promotes to float32, as in torch
        return s.op(name, self, o)

    def __add__(self, o):
        return self._binary("add", o)

    __radd__ = __add__

    def __mul__(self, o):
        return self._binary("mul", o)

    __rmul__ = __mul__

    def __neg__(self):
        return self._binary("mul", -1.0)

    def __sub__(self, o):
        return self._binary("sub", o)

    def __rsub__(self, o):
        if o.__class__ is IntTensor:
            o = o.float(self.session)
        return self._other(o) - self

    def __truediv__(self, o):
        if not isinstance(o, Tensor) and np.ndim(o) == 0 and float(o) != 0:
            return self * (1.0 / float(o))     # x / 0 divides: inf and nan, as torch
        return self._binary("div", o)

    def __rtruediv__(self, o):
        if o.__class__ is IntTensor:
            o = o.float(self.session)
        return self.session.op("div", self._other(o), self)

    def __matmul__(self, o):
        if self._is_parameter and isinstance(o, Tensor) and not o._is_parameter:
            self = o.session.use(self)
        if self.ndim == 2 and getattr(o, "ndim", None) == 2:
            return self._binary("matmul", o)
        return _composite.matmul(self, o)

    def __rmatmul__(self, o):
        return _composite.matmul(self._other(o), self)

    def __getattr__(self, name):
        # registry tape ops as methods: x.relu(), x.softmax(), x.transpose2d() ... but never
        # Tape's own methods (leaf, drop_value, release, ...), which take node ids, not tensors
        if name not in _TAPE_OPS:
            if name.startswith("_"):
                raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
            raise UnknownAttributeError(name, lambda: [n for n in dir(Tensor)
                                                       if not n.startswith("_")])
        return lambda *others, **attrs: self.session.op(name, self, *others, **attrs)

    # PyTorch-style API ------------------------------------------------------------------
    # (reductions over dims, softmax, clamp, div, where, max/min, pow: ComposedMethods of
    # torchlean.tensor_composed; the views, indexing included, are torchlean.views's and bound
    # onto Tensor there)
    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self.shape)

    # comparisons (0/1 float32 masks, no gradient); where, arg/max/min, pow: ComposedMethods
    def __lt__(self, o):
        return self._binary("lt", o)

    def __le__(self, o):
        return self._binary("le", o)

    def __gt__(self, o):
        return self._binary("gt", o)

    def __ge__(self, o):
        return self._binary("ge", o)

    def lt(self, other):
        return self._binary("lt", other)

    def le(self, other):
        return self._binary("le", other)

    def gt(self, other):
        return self._binary("gt", other)

    def ge(self, other):
        return self._binary("ge", other)

    def eq(self, other):
        """Elementwise == as a 0/1 float32 mask (on the registry's eq kernel)."""
        return self._binary("eq", other)

    def ne(self, other):
        """Elementwise != as a 0/1 float32 mask (on the registry's ne kernel)."""
        return self._binary("ne", other)

    # torch's dtype and device idiom, and small conveniences --------------------------------
    @property
    def dtype(self):
        return _float32

    @property
    def device(self):
        return _devices.current()

    @property
    def is_cuda(self) -> bool:
        return _devices.current().type == "cuda"

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype), to(other): the same Tensor on this
        backend's device (see torchlean.devices), an IntTensor for int64/bool."""
        dt = _devices.parse_to("to", args, kwargs)
        if dt is None or dt is _float32:
            return self
        return self.bool() if dt == np.bool_ else self.long()

    def cpu(self):
        """Itself: .numpy() and .item() copy to the host from either backend."""
        self._check()
        return self

    def cuda(self, device=None, non_blocking=False):
        _devices.check_cuda("cuda")
        return self

    def float(self):
        return self

    def long(self):
        """An int64 IntTensor, truncating toward zero as torch does."""
        return IntTensor(to_int64("long", self.numpy()))   # NaN, inf, 1e20 raise

    int = long

    def bool(self):
        return IntTensor(self.numpy() != 0)

    def type(self, dtype=None):
        return "torch.FloatTensor" if dtype is None else self.to(dtype)

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    def clone(self):
        """A copy in new memory; gradients flow through it, as torch's clone."""
        s = self.session
        self._check()
        return Tensor(s, s.tape.scale(self.id, c=1.0), s.gen)

    def tolist(self):
        return self.numpy().tolist()

    def requires_grad_(self, requires_grad: bool = True):
        """torch's in-place flag change, for leaves (a tensor made by torchlean.tensor or a
        factory); an op's result raises, as in torch."""
        node = self._node()
        if node.parents:
            raise RuntimeError("requires_grad_: only leaf tensors can change requires_grad; "
                               "use detach() for a result of ops")
        node.requires_grad = bool(requires_grad)
        return self

    @property
    def data(self):
        """torch's x.data: the same storage, outside the graph (detach())."""
        return self.detach()

    @data.setter
    def data(self, value):
        with no_grad():
            if tuple(np.shape(value)) == tuple(self.shape):
                self.copy_(value)
            else:   # torch swaps in the new data, whatever its shape
                self._rebase(self.session.tensor(np.asarray(value, np.float32)))

    def neg(self):
        return -self

    def element_size(self) -> int:
        return 4

    nelement = numel

    def __float__(self):
        return self.item()

    def __int__(self):
        return int(self.item())

    # logical operators on masks (torch's bool tensors): a bool IntTensor on the host
    def __and__(self, o):
        return self.bool() & o

    __rand__ = __and__

    def __or__(self, o):
        return self.bool() | o

    __ror__ = __or__

    def __xor__(self, o):
        return self.bool() ^ o

    def __invert__(self):
        return ~self.bool()

    def __repr__(self):
        try:
            values = self.numpy()
            req = self.requires_grad
        except ValueError:
            return f"tensor(<released by Session.step()>, node={self.id})"
        body = np.array2string(values, separator=", ", prefix="tensor(", precision=4,
                               floatmode="maxprec_equal")
        grad = ", requires_grad=True" if req else ""
        return f"tensor({body}, shape={tuple(values.shape)}{grad})"


_new_tensor = Tensor.__new__


def _float_operand(op: str, o):
    """o for an op torch runs on one dtype only (@): integer or bool data raise TypeError,
    where elementwise ops promote them to float32 as torch promotes int64 tensors."""
    if isinstance(o, IntTensor) or (isinstance(o, np.ndarray) and o.dtype.kind in "biu"):
        raise TypeError(f"{op}: expected float operands, got {o.dtype.name} data of shape "
                        f"{tuple(o.shape)} (torch refuses mixed dtypes here too); convert it "
                        "with .float() or .astype(np.float32)")
    return o
