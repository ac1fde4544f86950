"""PyTorch-style eager layer: Session (one Tape, parameters, integer env), the per-thread default
session and the torch-style free functions (tensor, cat, stack, where, ...). Tensor lives in
torchlean.tensor and Parameter in torchlean.parameter; both stay importable from here.
"""
from __future__ import annotations

import atexit
import sys
import threading

import numpy as np

from torchlean._loader import lib
from torchlean.buffer import AnyBuffer, raise_status
from torchlean import tape as _tape
from torchlean.grad_mode import GRAD_MODE
from torchlean.tape import Tape, freed_vjp, no_grad
from torchlean._generated import ops as _ops
from torchlean.random import get_rng_state, manual_seed, next_device_key, next_key, set_rng_state  # noqa: F401
from torchlean import _capture
from torchlean import composite as _composite
from torchlean import current as _current
from torchlean import inplace as _inplace
from torchlean.int_tensor import IntTensor
from torchlean import int_join as _int_join
from torchlean.parameter import Parameter, _backward_end_hooks, _claim_for_training, _release_claims
from torchlean.tensor import Tensor
# re-exported: scripts and tests import these from torchlean.session
from torchlean.parameter import (check_training_thread, register_backward_end_hook,  # noqa: F401
                                 training_lock)

_get_ident = threading.get_ident
_new_tensor = Tensor.__new__
_getrefcount = sys.getrefcount
_tl_add = lib.tl_add
# Whether sys.getrefcount counts every reference the gradient sums below compare against. From
# CPython 3.14 the interpreter may borrow references on its stack instead of counting them, so a
# count could read one lower and let a held gradient through: there every sum is a new buffer.
_COUNTS_EXACT = sys.version_info < (3, 14)


def _sum_into(prev: AnyBuffer, g: AnyBuffer) -> bool:
    """prev := prev + g with the kernel of `_ops.add(prev, g)` (the same bits, same operand
    order), for a leaf's gradient that nothing but its one holder can see (the caller checked
    the reference counts): the sum a new buffer would hold, without allocating one. False
    (nothing written) where a new sum is needed: shapes that differ, a payload not its own,
    an audit recording (it digests payloads by identity) or a capture (replays)."""
    if (prev.shape != g.shape or not prev.owns or not prev.buf.live or not g.buf.live
            or _tape.AUDIT is not None or _capture.STATE.active):
        return False
    st = _tl_add(prev.handle, g.handle, prev.handle, prev.buf.n)
    if st:
        raise_status("add", st)
    return True


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
        self.claim_epoch = 0   # of its parameter claims (torchlean.parameter): step() ends them

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

    def borrow(self, buf: AnyBuffer, requires_grad: bool = False) -> "Tensor":
        """A leaf Tensor sharing `buf` (a Parameter's storage, a gradient, another Tensor's
        value): writes through either are seen by both; it is forgotten with its last Tensor."""
        self.check_thread()
        nid = self.tape.leaf(buf, requires_grad=requires_grad)
        self.tape.nodes[nid].pinned = False
        return self._wrap(nid)

    def release_ref(self, nid: int) -> None:
        """One Tensor wrapper of node nid is gone (or was rebased): when it was the last, the
        node's memory can go too, unless a VJP or a view still needs it (Tape.let_go)."""
        refs = self.refs
        c = refs.get(nid, 0) - 1
        if c > 0:
            refs[nid] = c
        else:
            refs.pop(nid, None)
            self.tape.let_go(nid)
            if self.grads:
                self.grads.pop(nid, None)   # nobody can ask for this gradient any more

    def use(self, p: Parameter) -> "Tensor":
        """Record a parameter's storage as a borrowed leaf (once per step)."""
        return self._wrap(self.leaf_of(p))

    def leaf_of(self, p: Parameter) -> int:
        """The id of p's leaf in this step (recorded on first use)."""
        if _get_ident() != self.owner:
            self.check_thread()   # raises
        nid = self.param_leaf.get(id(p))
        if p.__class__ is Parameter and not _capture.STATE.active:
            # p.requires_grad and p.mirror() read directly (a subclass may override them; a
            # capture notes the parameter in mirror())
            req = p._requires_grad and GRAD_MODE.enabled
            if req:
                _claim_for_training(p, self)
            mirror = p._buf
        else:
            req = p.requires_grad and GRAD_MODE.enabled
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
        return nid

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
        if isinstance(x, Parameter):
            return self.use(x)
        if isinstance(x, Tensor):
            if x.session is not self:
                raise ValueError("tensors from different sessions cannot be mixed")
            x._check()
            return x
        if isinstance(x, IntTensor):
            raise TypeError(f"expected a float32 Tensor, got an {x.dtype.name} tensor of shape "
                            f"{tuple(x.shape)}: torch does not mix dtypes here either; convert "
                            "it with .float()")
        return self.tensor(x)

    def op(self, name: str, *xs, **attrs) -> "Tensor":
        if _get_ident() != self.owner:
            self.check_thread()   # raises
        fn = getattr(self.tape, name, None)
        if fn is None:
            raise AttributeError(f"{name}: no such tape op in this build's registry (ops.yaml)")
        # a Tensor of this session's current step (the common case) is used as it is; anything
        # else goes through as_tensor (conversion, or the error naming what is wrong)
        # (converted operands are kept until the op is recorded: their leaves live as long)
        gen = self.gen
        # a Parameter is its leaf of this step (leaf_of, as use() would wrap it: the leaf is
        # pinned, so it needs no Tensor to live through the op)
        ids = []
        ts = None
        for x in xs:
            if x.__class__ is Tensor and x.session is self and x.gen == gen:
                ids.append(x.id)
            elif x.__class__ is Parameter:
                ids.append(self.leaf_of(x))
            else:
                t = self.as_tensor(x)
                if ts is None:
                    ts = [t]
                else:
                    ts.append(t)
                ids.append(t.id)
        nid = fn(*ids, **attrs)
        t = _new_tensor(Tensor)   # Tensor(self, nid, gen) without the __init__ frame
        t.session, t.id, t.gen = self, nid, gen
        refs = self.refs
        refs[nid] = refs.get(nid, 0) + 1
        return t

    def _op_ids(self, name: str, ids, **attrs) -> "Tensor":
        """Session.op on node ids this step already holds (each checked by its caller: a live
        Tensor of this step kept alive by the caller, or a parameter's leaf from leaf_of)."""
        nid = getattr(self.tape, name)(*ids, **attrs)
        t = _new_tensor(Tensor)
        t.session, t.id, t.gen = self, nid, self.gen
        refs = self.refs
        refs[nid] = refs.get(nid, 0) + 1
        return t

    def input_nat(self, n: int) -> int:
        self.nats.append(int(n))
        return len(self.nats) - 1

    def get_nat(self, i: int) -> int:
        return self.nats[i]

    # ---------------------------------------------------------------- randomness
    def rand_uniform(self, shape) -> "Tensor":
        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        b = _ops.rand_uniform(n=int(np.prod(shape)), key=next_device_key())
        return self._wrap(self._own_leaf(AnyBuffer(shape, b.buf)))

    def bernoulli_mask(self, shape, p: float) -> "Tensor":
        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        b = _ops.bernoulli_mask(n=int(np.prod(shape)), key=next_device_key(), p=p)
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
        if _get_ident() != self.owner:
            self.check_thread()   # raises
        if t.gen != self.gen or t.session is not self:
            t._check()   # raises for a Tensor of a released step
        graph, wrt = self._graph(t.id)
        if not wrt:
            raise RuntimeError("backward: no leaf requires a gradient")
        if seed.__class__ is Tensor:
            # its payload (Tape._seed copies it on the device), not its values through NumPy:
            # y.backward(g) with an 8 MiB g spent 2.5 ms downloading and uploading it
            seed = seed.value

        def param_grad_final(i, g) -> bool:
            p = self.params_by_leaf.get(i)
            if p is None:
                return False
            if p.grad_buf is None:
                p.grad_buf = g
            elif _capture.STATE.active:   # replays accumulate into the same buffer
                _inplace.binary_into("add", p.grad_buf, g)
                g.release()
            elif (_COUNTS_EXACT and _getrefcount(p.grad_buf) == 2
                    and _getrefcount(p.grad_buf.buf) == 2 and _sum_into(p.grad_buf, g)):
                g.release()   # summed in place: nothing but p holds its gradient (below)
            else:   # a new sum: a Tensor taken from p.grad keeps the gradient it showed
                p.grad_buf = _ops.add(p.grad_buf, g)
                g.release()
            if p.post_grad_hooks and _tape.AUDIT is not None:
                _tape.AUDIT.handoff()   # a hook may write the gradient in place: digest first
            for h in p.post_grad_hooks:
                h(p)
            return True

        # parameter gradients are accumulated as soon as they are final (hooks may start work);
        # Tensors dying meanwhile (a garbage-collected cycle, a hook) are let go afterwards, so
        # no VJP the pass is about to run loses what it reads
        # (no parameter among the leaves: no call per leaf to find none)
        tape, params = self.tape, self.params_by_leaf
        tape.deferred = []
        try:
            # (Tape.backward without its argument checks: t is a live Tensor of this step and
            # the wrt ids, sorted, come from the graph walk)
            grads = tape._backward(t.id, tape._seed(tape.nodes[t.id], seed), set(wrt), wrt,
                                   param_grad_final if params else None, not retain_graph)
        finally:
            deferred, tape.deferred = tape.deferred, None
        sgrads = self.grads
        in_place = _COUNTS_EXACT and _tape.AUDIT is None and not _capture.STATE.active
        for i, g in grads.items():
            if params and param_grad_final(i, g):   # a parameter no gradient reached: zeros
                continue
            prev = sgrads.get(i)
            if prev is not None:
                # the sum in place (_sum_into, inline) when nothing but this table holds the old
                # gradient (its AnyBuffer referenced by the table and `prev` alone, its payload
                # by it alone: no Tensor from x.grad, no view, no export reads it), else a new
                # sum: a Tensor from x.grad keeps what it showed
                if (in_place and _getrefcount(prev) == 3 and _getrefcount(prev.buf) == 2
                        and prev.shape == g.shape and prev.owns and prev.buf.live
                        and g.buf.live):
                    st = _tl_add(prev.handle, g.handle, prev.handle, prev.buf.n)
                    if st:
                        raise_status("add", st)
                    continue
                g = _ops.add(prev, g)
            sgrads[i] = g
        if _backward_end_hooks:
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
            node = nodes[i]
            # free_saved's own test of "nothing kept", without its frame: the backward pass
            # freed most nodes already, and leaves keep nothing
            if node.vjp is not freed_vjp and (node.vjp is not None or node.cleanup or node.reads):
                tape.free_saved(i)
        for i in order:
            node = nodes[i]
            if not node.owns_value and not node.parents:
                continue                 # a parameter mirror or borrowed leaf: it stays
            node.pinned = False          # an uploaded leaf too dies with its last Tensor now
            if i in self.refs or node.users or node.consumers:
                continue                 # wrapped, or read or differentiated by a VJP outside
            tape.drop_value(i)
            self.grads.pop(i, None)   # a Tensor from x.grad may still read it
            nodes.pop(i, None)   # tape.forget(i), inline

    def step(self) -> None:
        """Release every tape value and scratch buffer that is not a parameter mirror."""
        if _get_ident() != self.owner:
            self.check_thread()   # raises
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


MinMaxResult = _composite.MinMaxResult

_default = threading.local()      # this thread's default session and its `with` stack


@atexit.register
def _drop_default_session_at_exit() -> None:
    """At interpreter exit the exiting thread's default Session and `with` stack go, and with
    them (by reference counting, while the interpreter still runs finalizers) the Buffers of
    their tapes and parameters. The interpreter's teardown frees a thread's locals too late for
    that: the native handles would outlive it, reported as leaks by LeakSanitizer."""
    _default.__dict__.clear()


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


def session_of(*xs) -> Session:
    """The Session of the first Tensor among xs that belongs to one (a Parameter belongs to
    none: it joins whichever Session uses it), else the current one."""
    for x in xs:
        if isinstance(x, Tensor) and not x._is_parameter:
            return x.session
    return default_session()


def tensor(value, requires_grad: bool = False, session: Session | None = None) -> Tensor:
    return (session or default_session()).tensor(value, requires_grad)


def functional(name: str):
    """torchlean.<op>(x, ...) forms: dispatch on the session of the first Tensor argument."""
    def f(*xs, **attrs):
        return session_of(*xs).op(name, *xs, **attrs)
    f.__name__ = name
    return f


def _floats(values) -> list:
    """IntTensors among float tensors as float32 Tensors (torch promotes int64 with float32)."""
    s = session_of(*values)
    return [v.float(s) if isinstance(v, IntTensor) else v for v in values]


def cat(tensors, dim=0) -> Tensor:
    """torch.cat: join any number of tensors along any existing axis."""
    ts = list(tensors)
    if ts and all(isinstance(t, IntTensor) for t in ts):
        return _int_join.cat(ts, dim)
    return _composite.cat(_floats(ts), dim)


def stack(tensors, dim=0) -> Tensor:
    """torch.stack: join equal-shaped tensors along a new axis."""
    ts = list(tensors)
    if ts and all(isinstance(t, IntTensor) for t in ts):
        return _int_join.stack(ts, dim)
    return _composite.stack(_floats(ts), dim)


def split(x, split_size_or_sections, dim=0):
    """torch.split: views of x (a write into a piece reaches x), as Tensor.split."""
    if isinstance(x, Tensor):
        return x.split(split_size_or_sections, dim)
    return _composite.split(x, split_size_or_sections, dim)


def chunk(x, chunks, dim=0):
    """torch.chunk: views of x, as Tensor.chunk."""
    if isinstance(x, Tensor):
        return x.chunk(chunks, dim)
    return _composite.chunk(x, chunks, dim)


def where(condition, input, other) -> Tensor:
    """torch.where(condition, input, other); condition a 0/1 Tensor or a boolean array."""
    if isinstance(input, IntTensor) or isinstance(other, IntTensor):
        if _int_join.is_int_operand(input) and _int_join.is_int_operand(other):
            return _int_join.where(condition, input, other)
        input, other = _floats([input, other])
    if isinstance(condition, IntTensor):
        condition = condition.numpy()
    return _composite.where(session_of(condition, input, other), condition, input, other)


def argmax(input, dim=None, keepdim=False):
    return _composite.argreduce(input, "argmax", dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    return _composite.argreduce(input, "argmin", dim, keepdim)


def pow(input, exponent):  # noqa: A001 - torch's name
    """torch.pow: a Tensor base with a number or Tensor exponent, or a number base."""
    s = session_of(input, exponent)
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


_current.register(default_session)   # the lower layers' way to this thread's session
