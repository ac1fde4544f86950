"""PyTorch-style eager layer: Session (one Tape, parameters, integer env), Tensor, Parameter.

A Tensor is (session, node id, generation); Session.step() releases every tape value and scratch
buffer that is not a parameter mirror and bumps the generation, so a stale Tensor raises instead
of reading freed memory. Parameters keep a host value and a device mirror with an explicit
stale flag: training updates the mirror, reading `.data` synchronises once.
"""
from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from torchlean.buffer import AnyBuffer
from torchlean.tape import Tape, freed_vjp, no_grad, is_grad_enabled
from torchlean._generated import ops as _ops
from torchlean._generated.tape_ops import TapeOps
from torchlean.random import get_rng_state, manual_seed, next_key, set_rng_state
from torchlean import composite as _composite
from torchlean import devices as _devices
from torchlean.dtypes import float32 as _float32
from torchlean.int_tensor import IntTensor

# the registry's tape ops: the only names Tensor.__getattr__ forwards as methods
_TAPE_OPS = frozenset(n for n in vars(TapeOps) if not n.startswith("_"))
_get_ident = threading.get_ident


class Parameter:
    """A trainable value: host copy + device mirror, with an explicit stale flag."""

    def __init__(self, value, requires_grad: bool = True, name: str | None = None):
        self._host = np.array(value, dtype=np.float32)
        self._mirror: AnyBuffer | None = None
        self._host_current = True
        self.requires_grad = requires_grad
        self.name = name
        self.grad_buf: AnyBuffer | None = None
        self.post_grad_hooks: list = []   # fn(param) after each backward adds to grad_buf

    def register_post_accumulate_grad_hook(self, fn):
        """Call fn(param) each time a backward pass has added this parameter's (final) gradient
        to grad_buf, as in PyTorch; DistributedDataParallel starts its reductions from here.
        Returns a handle whose remove() unregisters fn."""
        self.post_grad_hooks.append(fn)
        return _HookHandle(self.post_grad_hooks, fn)

    @property
    def shape(self):
        return self._host.shape

    def mirror(self) -> AnyBuffer:
        """The device mirror, uploaded once from the host value when missing."""
        if self._mirror is None or not self._mirror.live:
            self._mirror = AnyBuffer.from_numpy(self._host)
        return self._mirror

    def set_mirror(self, buf: AnyBuffer) -> None:
        """Replace the mirror (the old one is released); the host copy becomes stale."""
        if self._mirror is not None and self._mirror is not buf:
            self._mirror.release()
        self._mirror = buf
        self._host_current = False

    def mark_device_updated(self) -> None:
        self._host_current = False

    @property
    def data(self) -> np.ndarray:
        """Host value, synchronised from the device once if the mirror is newer."""
        if not self._host_current:
            self._host = self._mirror.to_numpy()
            self._host_current = True
        return self._host

    def numpy(self) -> np.ndarray:
        return self.data.copy()

    # torch's nn.Parameter is a Tensor: the size queries a training script asks of one
    @property
    def ndim(self) -> int:
        return self._host.ndim

    def dim(self) -> int:
        return self._host.ndim

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return int(self._host.size)

    @property
    def dtype(self):
        return _float32

    @property
    def device(self):
        return _devices.current()

    def __array__(self, dtype=None, copy=None):
        a = self.data
        return a.astype(dtype) if dtype is not None else a.copy()

    def set(self, value) -> None:
        """Overwrite from the host and invalidate the device mirror."""
        v = np.array(value, dtype=np.float32)
        if v.shape != self._host.shape:
            raise ValueError(f"Parameter.set: expected shape {self._host.shape}, got {v.shape}")
        if self._mirror is not None:
            self._mirror.release()
            self._mirror = None
        self._host = v
        self._host_current = True

    @property
    def grad(self):
        return None if self.grad_buf is None else self.grad_buf.to_numpy()

    def zero_grad(self):
        if self.grad_buf is not None:
            with training_lock(self):
                check_training_thread(self, "zero_grad")
                if self.grad_buf is not None:
                    self.grad_buf.release()
                    self.grad_buf = None

    def __repr__(self):
        return f"Parameter(shape={self.shape})"


class _HookHandle:
    def __init__(self, hooks: list, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self) -> None:
        if self.fn in self.hooks:
            self.hooks.remove(self.fn)


# fn() after every Session.backward, once each parameter's hooks have run (DistributedDataParallel
# finishes its reductions here); register_backward_end_hook(fn) returns a removable handle
_backward_end_hooks: list = []


def register_backward_end_hook(fn):
    _backward_end_hooks.append(fn)
    return _HookHandle(_backward_end_hooks, fn)


# Who trains each Parameter now: (thread, Session) weak references, and one lock per Parameter
# that orders the claim and every free of its gradient buffer (zero_grad, optimizer steps). Kept
# off the Parameter so copies and pickles of a model carry neither.
_trainers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_locks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_locks_lock = threading.Lock()


def training_lock(p: Parameter) -> threading.RLock:
    """The lock held while p is claimed, while its gradient buffer is freed (zero_grad) and while
    an optimizer step reads it."""
    lock = _locks.get(p)
    if lock is None:
        with _locks_lock:
            lock = _locks.setdefault(p, threading.RLock())
    return lock


def _other_trainer(p: Parameter):
    """(thread, Session) of another live thread whose live Session trains p, else None (call
    with p's training_lock held)."""
    t = _trainers.get(p)
    if t is None:
        return None
    thread, owner = t[0](), t[1]()
    if thread is None or owner is None or thread is threading.current_thread() \
            or not thread.is_alive():
        return None
    return thread, owner


def check_training_thread(p: Parameter, op: str) -> None:
    """Raise when another thread's live Session trains p. Call it with p's training_lock held,
    and keep holding it while freeing or reading p's gradient buffer (zero_grad, optimizer
    steps): the other thread's claim then waits for that to finish."""
    other = _other_trainer(p)
    if other is not None:
        thread, owner = other
        raise RuntimeError(
            f"{op}: Parameter {p.name + ' ' if p.name else ''}of shape {tuple(p.shape)} is being "
            f"trained by Session {id(owner):#x} in thread {thread.name!r} and was used from "
            f"thread {threading.current_thread().name!r}: one thread at a time trains a model "
            "(backward, zero_grad and optimizer steps free and replace its device buffers); "
            "give each thread its own copy of the model, use it under no_grad(), or call step() "
            "on the first thread's Session when it is done")


def _claim_for_training(p: Parameter, s: "Session") -> None:
    """Record that session s (of this thread) trains p, so that another thread's backward,
    zero_grad or optimizer step on p raises instead of freeing buffers this one reads. The
    claim ends with the Session's step(), the Session itself, or its thread."""
    t = _trainers.get(p)
    if t is not None and t[1]() is s:
        return
    with training_lock(p):
        check_training_thread(p, "use")
        _trainers[p] = (weakref.ref(threading.current_thread()), weakref.ref(s))


def _release_claims(s: "Session") -> None:
    for p in s.params_by_leaf.values():
        t = _trainers.get(p)
        if t is not None and t[1]() is s:
            with training_lock(p):
                if _trainers.get(p) is t:
                    del _trainers[p]


class Session:
    """One tape, the parameter table (leaf id -> Parameter) and an integer environment.

    A Session belongs to the thread that created it: using it (or its Tensors) from another
    thread raises RuntimeError, since a tape mutated by two threads at once would free buffers
    under a running kernel. Each thread makes its own Session (default_session() is per thread).
    """

    def __init__(self):
        self.owner = _get_ident()
        self.owner_name = threading.current_thread().name
        self.refs: dict[int, int] = {}           # node id -> live Tensor wrappers (this step)
        self.tape = Tape(referenced=self.refs)   # a wrapped node's value is never freed early
        self.gen = 0
        self.param_leaf: dict[int, int] = {}     # id(Parameter) -> node id in this step
        self.params_by_leaf: dict[int, Parameter] = {}
        self.grads: dict[int, AnyBuffer] = {}    # node id -> gradient (non-parameter leaves)
        self.nats: list[int] = []

    def check_thread(self) -> None:
        if _get_ident() != self.owner:
            raise RuntimeError(
                f"Session {id(self):#x} belongs to thread {self.owner_name!r} (id {self.owner}) "
                f"and was used from thread {threading.current_thread().name!r} (id {_get_ident()}); "
                "a Session and its Tensors are not shared between threads: create one Session "
                "per thread")

    # ---------------------------------------------------------------- recording
    def _wrap(self, nid: int) -> "Tensor":
        return Tensor(self, nid, self.gen)

    def tensor(self, value, requires_grad: bool = False) -> "Tensor":
        self.check_thread()
        return self._wrap(self._own_leaf(np.asarray(value, dtype=np.float32), requires_grad))

    def use(self, p: Parameter) -> "Tensor":
        """Record a parameter's device mirror as a borrowed leaf (once per step)."""
        self.check_thread()
        nid = self.param_leaf.get(id(p))
        req = p.requires_grad and is_grad_enabled()
        if req:
            _claim_for_training(p, self)
        mirror = p.mirror()
        if nid is not None:
            # without step() a leaf is reused; it is stale once the mirror was replaced (an
            # optimizer, set(), load_state_dict) or the grad mode differs from its recording
            node = self.tape.nodes[nid]
            if node.value is not mirror or node.requires_grad != req:
                self._retire_param_leaf(nid)
                nid = None
        if nid is None:
            nid = self.tape.leaf(mirror, name=p.name, requires_grad=req)
            self.param_leaf[id(p)] = nid
            self.params_by_leaf[nid] = p
        return self._wrap(nid)

    def _retire_param_leaf(self, nid: int) -> None:
        """A parameter's leaf of an older mirror or grad mode: forgotten once no graph uses it
        (a graph that still does keeps it, so its gradient still reaches the parameter)."""
        node = self.tape.nodes[nid]
        if node.consumers or nid in self.refs:
            return
        self.params_by_leaf.pop(nid, None)
        node.pinned = False
        self.tape.let_go(nid)

    def as_tensor(self, x) -> "Tensor":
        if isinstance(x, Tensor):
            if x.session is not self:
                raise ValueError("tensors from different sessions cannot be mixed")
            x._check()
            return x
        if isinstance(x, Parameter):
            return self.use(x)
        if isinstance(x, IntTensor):
            raise TypeError(f"expected a float32 Tensor, got an {x.dtype.name} tensor of shape "
                            f"{tuple(x.shape)}: torch does not mix dtypes here either; convert "
                            "it with .float()")
        return self.tensor(x)

    def op(self, name: str, *xs, **attrs) -> "Tensor":
        self.check_thread()
        fn = getattr(self.tape, name, None)
        if fn is None:
            raise AttributeError(f"{name}: no such tape op in this build's registry (ops.yaml)")
        # a Tensor of this session's current step (the common case) is used as it is; anything
        # else goes through as_tensor (conversion, or the error naming what is wrong)
        # (converted operands are kept until the op is recorded: their leaves live as long)
        gen = self.gen
        ts = [x if x.__class__ is Tensor and x.session is self and x.gen == gen
              else self.as_tensor(x) for x in xs]
        return Tensor(self, fn(*[t.id for t in ts], **attrs), gen)

    def input_nat(self, n: int) -> int:
        self.nats.append(int(n))
        return len(self.nats) - 1

    def get_nat(self, i: int) -> int:
        return self.nats[i]

    # ---------------------------------------------------------------- randomness
    def rand_uniform(self, shape) -> "Tensor":
        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        b = _ops.rand_uniform(n=int(np.prod(shape)), key=next_key())
        return self._wrap(self._own_leaf(AnyBuffer(shape, b.buf)))

    def bernoulli_mask(self, shape, p: float) -> "Tensor":
        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        b = _ops.bernoulli_mask(n=int(np.prod(shape)), key=next_key(), p=p)
        return self._wrap(self._own_leaf(AnyBuffer(shape, b.buf)))

    def _own_leaf(self, value, requires_grad: bool = False) -> int:
        """A leaf owning `value` (an array to upload, or a kernel's fresh AnyBuffer): it lives
        while a Tensor or a graph reads it, as PyTorch's tensors do."""
        nid = self.tape.leaf(value, requires_grad=requires_grad)
        node = self.tape.nodes[nid]
        node.owns_value = True
        node.pinned = False
        return nid

    def dropout(self, x, p: float = 0.5, training: bool = True) -> "Tensor":
        x = self.as_tensor(x)
        if not training or p == 0.0:
            return x
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout: p must be in [0, 1], got {p}")
        keep = 1.0 - p
        if keep == 0.0:         # PyTorch: p = 1 zeroes everything (no 1/0 scaling)
            return x * 0.0
        return x * self.bernoulli_mask(x.shape, keep) * (1.0 / keep)

    # ---------------------------------------------------------------- backward / lifetime
    def backward(self, t: "Tensor", seed=None, retain_graph: bool = False) -> None:
        """Accumulate gradients of t into the leaves that require one (parameters: .grad).

        Unless retain_graph, the graph is freed as PyTorch frees it: each node's saved values
        as soon as its VJP ran (so the pass never holds every activation and every gradient at
        once), then whatever of the graph no Tensor refers to, so a loop that never calls
        step() keeps its memory flat; differentiating the freed graph again raises."""
        self.check_thread()
        t._check()
        graph, wrt = self._graph(t.id)
        if not wrt:
            raise RuntimeError("backward: no leaf requires a gradient")

        def param_grad_final(i, g) -> bool:
            p = self.params_by_leaf.get(i)
            if p is None:
                return False
            if p.grad_buf is None:
                p.grad_buf = g
            else:
                s = _ops.add(p.grad_buf, g)
                p.grad_buf.release(); g.release()
                p.grad_buf = s
            for h in p.post_grad_hooks:
                h(p)
            return True

        # parameter gradients are accumulated as soon as they are final (hooks may start work);
        # Tensors dying meanwhile (a garbage-collected cycle, a hook) are let go afterwards, so
        # no VJP the pass is about to run loses what it reads
        tape = self.tape
        tape.deferred = []
        try:
            grads = tape.backward(t.id, seed=seed, wrt=wrt, on_final=param_grad_final,
                                  free_graph=not retain_graph)
        finally:
            deferred, tape.deferred = tape.deferred, None
        for i, g in grads.items():
            if param_grad_final(i, g):   # a parameter no gradient reached: zeros
                continue
            prev = self.grads.get(i)
            if prev is not None:
                s = _ops.add(prev, g)
                prev.release(); g.release()
                g = s
            self.grads[i] = g
        for h in list(_backward_end_hooks):
            h()
        if not retain_graph:
            self._free_graph(graph)
        for i in deferred:
            if i not in self.refs:
                tape.let_go(i)

    def _graph(self, out: int):
        """Nodes a gradient can reach from `out` (through nodes requiring one) and, of them, the
        leaves requiring a gradient; the walk costs the graph's size, not the tape's length."""
        nodes = self.tape.nodes
        seen, stack, leaves = set(), [out], []
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            node = nodes[i]
            if node.vjp is freed_vjp:   # freed by an earlier backward
                freed_vjp(None, None, None)
            if not node.requires_grad:
                continue
            if node.parents:
                stack.extend(node.parents)
            else:
                leaves.append(i)
        return seen, sorted(leaves)

    def _free_graph(self, graph) -> None:
        """Drop the residuals of every node in `graph` (those of the nodes the backward pass
        did not reach), then the values nothing reads any more: no Tensor wraps them, no VJP
        or live view needs them, nobody was handed them (Tensor.value). Those nodes' records
        are forgotten."""
        tape = self.tape
        nodes = tape.nodes
        order = sorted(graph, reverse=True)   # views before the values they alias
        for i in order:
            tape.free_saved(i)
        for i in order:
            node = nodes[i]
            if not node.owns_value and not node.parents:
                continue                 # a parameter mirror or borrowed leaf: it stays
            node.pinned = False          # an uploaded leaf too dies with its last Tensor now
            if i in self.refs or node.users or node.consumers:
                continue                 # wrapped, or read or differentiated by a VJP outside
            tape.drop_value(i)
            g = self.grads.pop(i, None)
            if g is not None:
                g.release()
            tape.forget(i)

    def step(self) -> None:
        """Release every tape value and scratch buffer that is not a parameter mirror."""
        self.check_thread()
        _release_claims(self)   # another thread may train its parameters now
        self.tape.release()
        for g in self.grads.values():
            g.release()
        self.grads.clear()
        self.tape = Tape(referenced=self.refs)
        self.param_leaf.clear()
        self.params_by_leaf.clear()
        self.nats.clear()
        self.refs.clear()
        self.gen += 1

    def __enter__(self):
        """Inside `with Session() as s:` s is the current session: default_session() returns
        it, so torchlean.tensor(), Embedding of integer indices and functions given no Tensor
        record on s (as a PyTorch program's ops land in one graph). Leaving releases the step."""
        _entered_stack().append(self)
        return self

    def __exit__(self, *exc):
        stack = _entered_stack()
        if stack and stack[-1] is self:
            stack.pop()
        self.step()


class Tensor:
    """A handle (session, node id) on the session's tape."""

    __slots__ = ("session", "id", "gen")
    __array_priority__ = 1000

    def __init__(self, session: Session, nid: int, gen: int):
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
            refs, nid = s.refs, self.id
            c = refs.get(nid, 0) - 1
            if c > 0:
                refs[nid] = c
            else:
                refs.pop(nid, None)
                s.tape.let_go(nid)           # and, unless a graph still reads it, its node
                if s.grads:
                    g = s.grads.pop(nid, None)   # nobody can ask for this gradient any more
                    if g is not None:
                        g.release()
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
        return self._node().value.shape

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
        if not isinstance(o, (Tensor, Parameter) + self._COMPARABLE):
            return NotImplemented
        return self._binary("eq", o)

    def __ne__(self, o):
        if not isinstance(o, (Tensor, Parameter) + self._COMPARABLE):
            return NotImplemented
        return self._binary("ne", o)

    __hash__ = object.__hash__   # identity, so Tensors stay usable as dict keys

    def __array__(self, dtype=None, copy=None):
        from torchlean import _loader
        if copy is False and _loader.BACKEND == "cuda":
            raise ValueError("Tensor.__array__: copy=False is impossible for a CUDA tensor")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def backward(self, seed=None, retain_graph: bool = False):
        self.session.backward(self, seed, retain_graph=retain_graph)

    @property
    def grad(self):
        self._check()
        p = self.session.params_by_leaf.get(self.id)
        if p is not None:
            return p.grad
        g = self.session.grads.get(self.id)
        return None if g is None else g.to_numpy()

    def detach(self) -> "Tensor":
        with no_grad():
            s = self.session
            nid = s.tape.leaf(self.value, requires_grad=False)
            s.tape.nodes[nid].pinned = False   # borrowed: forgotten with its last Tensor
            return s._wrap(nid)

    # operators ---------------------------------------------------------------
    def _other(self, o):
        return self.session.as_tensor(o)

    def _binary(self, name, o):
        # fast path: both operands live tensors of this session's current step
        s = self.session
        if (o.__class__ is Tensor and o.session is s and self.gen == s.gen == o.gen
                and _get_ident() == s.owner):
            return Tensor(s, getattr(s.tape, name)(self.id, o.id), s.gen)
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
        if not isinstance(o, (Tensor, Parameter)) and np.ndim(o) == 0:
            return self * (1.0 / float(o))
        return self._binary("div", o)

    def __rtruediv__(self, o):
        if o.__class__ is IntTensor:
            o = o.float(self.session)
        return self.session.op("div", self._other(o), self)

    def __matmul__(self, o):
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
            from torchlean.api_hints import unknown_attribute
            raise AttributeError(unknown_attribute(name, [n for n in dir(Tensor)
                                                          if not n.startswith("_")]))
        return lambda *others, **attrs: self.session.op(name, self, *others, **attrs)

    # PyTorch-style API ------------------------------------------------------------------
    # (shapes, indexing, reductions over dims, joining; composed from registry ops in
    # torchlean.composite, index planning in torchlean.indexing)
    def __getitem__(self, key):
        return _composite.getitem(self, key)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def T(self):
        """All axes reversed (torch's .T; for 2-D the transpose)."""
        return _composite.permute(self, tuple(range(self.ndim))[::-1])

    @property
    def mT(self):
        """The last two axes swapped."""
        if self.ndim < 2:
            raise ValueError(f"mT: expected a tensor of rank >= 2, got shape {self.shape}")
        return _composite.transpose(self, -2, -1)

    def transpose(self, dim0, dim1):
        return _composite.transpose(self, dim0, dim1)

    def permute(self, *dims):
        return _composite.permute(self, dims)

    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return _composite.reshape(self, shape)

    def view(self, *shape):
        """The same as reshape: every torchlean tensor is contiguous."""
        return self.reshape(*shape)

    def unsqueeze(self, dim):
        return _composite.unsqueeze(self, dim)

    def squeeze(self, dim=None):
        return _composite.squeeze(self, dim)

    def expand(self, *sizes):
        return _composite.expand(self, sizes)

    def flatten(self, start_dim=0, end_dim=-1):
        return _composite.flatten(self, start_dim, end_dim)

    def sum(self, dim=None, keepdim=False, *, axis=None):
        return _composite.reduce(self, "sum", axis if dim is None else dim, keepdim)

    def mean(self, dim=None, keepdim=False, *, axis=None):
        return _composite.reduce(self, "mean", axis if dim is None else dim, keepdim)

    def amax(self, dim=None, keepdim=False):
        return _composite.reduce(self, "amax", dim, keepdim)

    def amin(self, dim=None, keepdim=False):
        return _composite.reduce(self, "amin", dim, keepdim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return _composite.var(self, dim, unbiased, keepdim, correction)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return _composite.std(self, dim, unbiased, keepdim, correction)

    def logsumexp(self, dim, keepdim=False):
        return _composite.logsumexp(self, dim, keepdim)

    def square(self):
        return self * self

    def rsqrt(self):
        return self.session.op("reciprocal", self.session.op("sqrt", self))

    def split(self, split_size_or_sections, dim=0):
        return _composite.split(self, split_size_or_sections, dim)

    def chunk(self, chunks, dim=0):
        return _composite.chunk(self, chunks, dim)

    # torch's signatures over registry ops (softmax over any dim, clamp's min/max, matmul's
    # 1-D and batched operands, rounded division); composed in torchlean.composite
    def softmax(self, dim=-1):
        return _composite.softmax(self, dim, "softmax")

    def log_softmax(self, dim=-1):
        return _composite.softmax(self, dim, "log_softmax")

    def clamp(self, min=None, max=None, *, lo=None, hi=None):  # noqa: A002 - torch's names
        """torch's clamp(min, max); the registry's lo=/hi= keywords are accepted too."""
        return _composite.clamp(self, lo if min is None else min, hi if max is None else max)

    clip = clamp

    def matmul(self, other):
        return self @ other

    def div(self, other, *, rounding_mode=None):
        return _composite.div(self, other, rounding_mode)

    def __floordiv__(self, o):
        return _composite.div(self, o, "floor")

    def __rfloordiv__(self, o):
        return _composite.rdiv(self, o, "floor")

    def floor(self):
        return _composite.floor(self)

    def trunc(self):
        return _composite.trunc(self)

    # comparisons (0/1 float32 masks, no gradient), where, arg/max/min over a dim, pow, erf
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

    def where(self, condition, other):
        """torch's x.where(cond, y): torchlean.where(cond, x, y)."""
        return _composite.where(self.session, condition, self, other)

    def argmax(self, dim=None, keepdim=False):
        """Indices of the maxima as an int64 NumPy array (first on ties; a NaN wins)."""
        return _composite.argreduce(self, "argmax", dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return _composite.argreduce(self, "argmin", dim, keepdim)

    def max(self, dim=None, keepdim=False):
        """No dim: the 0-d maximum. dim: (values, indices) with int64 NumPy indices; the
        gradient of values goes to the chosen index only. A Tensor: elementwise maximum."""
        return _composite.max_min(self, "max", dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return _composite.max_min(self, "min", dim, keepdim)

    def pow(self, exponent):
        return _composite.power(self, exponent)

    def __pow__(self, exponent):
        return _composite.power(self, exponent)

    def __rpow__(self, base):
        return self.session.op("pow", self._other(base), self)

    def erf(self):
        return self.session.op("erf", self)

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
        a = self.numpy()
        if not np.all(np.isfinite(a)):
            raise ValueError(f"long: cannot convert NaN or inf to int64 (shape {a.shape})")
        return IntTensor(np.trunc(a).astype(np.int64))

    int = long

    def bool(self):
        return IntTensor(self.numpy() != 0)

    def type(self, dtype=None):
        return "torch.FloatTensor" if dtype is None else self.to(dtype)

    def t(self):
        """torch's x.t(): the transpose of a matrix; 0-d and 1-d tensors as they are."""
        if self.ndim > 2:
            raise ValueError(f"t: expects a tensor with <= 2 dimensions, got shape {self.shape}"
                             "; use x.transpose(d0, d1) or x.mT")
        return self if self.ndim < 2 else _composite.transpose(self, 0, 1)

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
        """torch's x.data: the same values, outside the graph (detach())."""
        return self.detach()

    def neg(self):
        return -self

    def contiguous(self):
        return self

    def view_as(self, other):
        return self.reshape(tuple(other.shape))

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


MinMaxResult = _composite.MinMaxResult


def _float_operand(op: str, o):
    """o for an op torch runs on one dtype only (@): integer or bool data raise TypeError,
    where elementwise ops promote them to float32 as torch promotes int64 tensors."""
    if isinstance(o, IntTensor) or (isinstance(o, np.ndarray) and o.dtype.kind in "biu"):
        raise TypeError(f"{op}: expected float operands, got {o.dtype.name} data of shape "
                        f"{tuple(o.shape)} (torch refuses mixed dtypes here too); convert it "
                        "with .float() or .astype(np.float32)")
    return o

_default = threading.local()      # this thread's default session and its `with` stack


def _entered_stack() -> list:
    st = getattr(_default, "stack", None)
    if st is None:
        st = _default.stack = []
    return st


def default_session() -> Session:
    """The innermost `with Session()` block's session of this thread, else this thread's default
    Session (created on first use; Sessions are per thread)."""
    st = _entered_stack()
    if st:
        return st[-1]
    s = getattr(_default, "session", None)
    if s is None:
        s = _default.session = Session()
    return s


def tensor(value, requires_grad: bool = False, session: Session | None = None) -> Tensor:
    return (session or default_session()).tensor(value, requires_grad)


def functional(name: str):
    """torchlean.<op>(x, ...) forms: dispatch on the session of the first Tensor argument."""
    def f(*xs, **attrs):
        s = next((x.session for x in xs if isinstance(x, Tensor)), None) or default_session()
        return s.op(name, *xs, **attrs)
    f.__name__ = name
    return f


def cat(tensors, dim=0) -> Tensor:
    """torch.cat: join any number of tensors along any existing axis."""
    return _composite.cat(tensors, dim)


def stack(tensors, dim=0) -> Tensor:
    """torch.stack: join equal-shaped tensors along a new axis."""
    return _composite.stack(tensors, dim)


def split(x, split_size_or_sections, dim=0):
    return _composite.split(x, split_size_or_sections, dim)


def chunk(x, chunks, dim=0):
    return _composite.chunk(x, chunks, dim)


def where(condition, input, other) -> Tensor:
    """torch.where(condition, input, other); condition a 0/1 Tensor or a boolean array."""
    s = next((v.session for v in (condition, input, other) if isinstance(v, Tensor)), None)
    return _composite.where(s or default_session(), condition, input, other)


def argmax(input, dim=None, keepdim=False):
    return _composite.argreduce(input, "argmax", dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    return _composite.argreduce(input, "argmin", dim, keepdim)


def pow(input, exponent):  # noqa: A001 - torch's name
    """torch.pow: a Tensor base with a number or Tensor exponent, or a number base."""
    s = next((v.session for v in (input, exponent) if isinstance(v, Tensor)), None) or default_session()
    if isinstance(input, (Tensor, Parameter)):
        return _composite.power(s.as_tensor(input), exponent)
    return s.op("pow", input, exponent)


def softmax(input, dim=-1):
    return Tensor.softmax(default_session().as_tensor(input) if not isinstance(input, Tensor)
                          else input, dim)


def log_softmax(input, dim=-1):
    return Tensor.log_softmax(default_session().as_tensor(input)
                              if not isinstance(input, Tensor) else input, dim)


relu = functional("relu")
erf = functional("erf")
eq = functional("eq")
ne = functional("ne")
lt = functional("lt")
le = functional("le")
gt = functional("gt")
ge = functional("ge")

__all__ = ["Session", "Tensor", "Parameter", "manual_seed", "get_rng_state", "set_rng_state",
           "cat", "stack", "split", "chunk", "no_grad", "where", "argmax", "argmin", "pow", "erf", "eq", "ne", "lt", "le", "gt", "ge", "tensor", "default_session", "functional"]
