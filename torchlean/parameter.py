"""Parameter: torch's nn.Parameter, a leaf Tensor that owns one device storage for its whole
life. Every write (optimizer steps, in-place ops under no_grad, `.data` writes, set(),
load_state_dict) goes into that storage; it is never released explicitly, so a kernel or a tape
of another thread that still reads it keeps it alive through its Python references. Also here:
the hooks that run after each backward, and the per-Parameter training claims that stop two
threads training one model.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from torchlean.buffer import AnyBuffer
from torchlean import _capture
from torchlean import inplace as _inplace
from torchlean.current import session as current_session
from torchlean.tensor import Tensor
from torchlean import views as _views  # noqa: F401 - binds the view methods onto Tensor


class Parameter(Tensor):
    """A trainable leaf Tensor. It belongs to no Session: each Session (of each thread) that
    uses it records a leaf borrowing its storage (`mirror()`), once per step."""

    _is_parameter = True

    def __init__(self, data=None, requires_grad: bool = True, name: str | None = None):
        if data is None:
            data = np.zeros((0,), np.float32)
        if isinstance(data, Tensor):
            data = data.numpy()
        with _capture.persistent():   # inside a capture: state that outlives the step
            self._buf = AnyBuffer.from_numpy(np.asarray(data, dtype=np.float32))
        self._requires_grad = _as_flag(requires_grad)
        self.name = name
        self.grad_buf: AnyBuffer | None = None
        self.post_grad_hooks: list = []   # fn(param) after each backward adds to grad_buf

    def __del__(self):   # no Session count to give back: the storage dies with its references
        pass

    # the storage and the gradient: each rebinding counts in _capture.STATE.epoch, so a
    # replayed step (graph_step) compares its parameters' buffers only after one
    @property
    def _buf(self) -> AnyBuffer:
        return self._storage

    @_buf.setter
    def _buf(self, buf: AnyBuffer) -> None:
        self._storage = buf
        _capture.STATE.epoch += 1

    @property
    def grad_buf(self) -> AnyBuffer | None:
        return self._grad

    @grad_buf.setter
    def grad_buf(self, buf: AnyBuffer | None) -> None:
        self._grad = buf
        _capture.STATE.epoch += 1

    # a handle on the calling thread's current Session (Tensor's methods read these)
    @property
    def session(self):
        return current_session()

    @property
    def id(self) -> int:
        return current_session().leaf_of(self)

    @property
    def gen(self) -> int:
        return current_session().gen

    @property
    def shape(self):
        return self._buf.shape

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag) -> None:
        self._requires_grad = _as_flag(flag)

    def requires_grad_(self, requires_grad: bool = True):
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return True

    def register_post_accumulate_grad_hook(self, fn):
        """Call fn(param) each time a backward pass has added this parameter's (final) gradient
        to grad_buf, as in PyTorch; DistributedDataParallel starts its reductions from here.
        Returns a handle whose remove() unregisters fn."""
        self.post_grad_hooks.append(fn)
        return _HookHandle(self.post_grad_hooks, fn)

    def mirror(self) -> AnyBuffer:
        """The storage (the same AnyBuffer for the Parameter's whole life)."""
        if _capture.STATE.active:
            _capture.note_param(self)
        return self._buf

    def set_mirror(self, buf: AnyBuffer) -> None:
        """Write buf's values into the storage (kept for callers of the former API)."""
        _inplace.copy_into(self._buf, buf, "Parameter.set")

    def mark_device_updated(self) -> None:
        """A kernel wrote the storage in place: a new version."""
        _inplace.bump_storage(self._buf.buf, "optimizer step")

    def numpy(self) -> np.ndarray:
        return self._buf.to_numpy()

    def detach(self) -> Tensor:
        """A Tensor sharing this storage, outside autograd (torch's detach())."""
        return current_session().borrow(self._buf)

    @property
    def data(self) -> Tensor:
        """torch's p.data: a Tensor sharing the storage outside autograd; writes through it are
        seen by the next forward and by state_dict()."""
        return self.detach()

    @data.setter
    def data(self, value) -> None:
        v = np.asarray(value, dtype=np.float32)
        if v.shape != self.shape:   # torch swaps the storage: so do we (never freeing the old)
            with _capture.persistent():
                self._buf = AnyBuffer.from_numpy(v)
            return
        self.set(v)

    def set(self, value) -> None:
        """Overwrite the values in place (the storage stays; readers see old or new values)."""
        if isinstance(value, Tensor):
            value = value.numpy()
        v = np.asarray(value, dtype=np.float32)
        if v.shape != self.shape:
            raise ValueError(f"Parameter.set: expected shape {self.shape}, got {v.shape}")
        _inplace.copy_into(self._buf, AnyBuffer.from_numpy(v), "Parameter.set")

    @property
    def grad(self):
        """The accumulated gradient as a Tensor sharing its buffer (None before backward)."""
        g = self.grad_buf
        return None if g is None else current_session().borrow(g)

    @grad.setter
    def grad(self, value) -> None:
        if value is None:
            self.grad_buf = None
            return
        v = value.value if isinstance(value, Tensor) and not isinstance(value, Parameter) \
            else None
        if v is not None and v.shape == self.shape:
            self.grad_buf = v.copy()
            return
        a = np.asarray(value, dtype=np.float32)
        if a.shape != self.shape:
            raise RuntimeError(f"assigned grad has data of a different size: expected "
                               f"{list(self.shape)}, got {list(a.shape)}")
        self.grad_buf = AnyBuffer.from_numpy(a)

    def zero_grad(self, set_to_none: bool = True):
        if self.grad_buf is not None:
            e = _locks_d.get(id(self))   # training_lock(self), inline: per parameter per step
            with (e[1] if e is not None and e[0]() is self else training_lock(self)):
                check_training_thread(self, "zero_grad")
                g = self.grad_buf
                if g is None:
                    return
                if set_to_none:
                    self.grad_buf = None   # a holder of the old gradient keeps it alive
                else:                      # zeros in place (0 * x would keep NaN and inf)
                    _inplace.copy_into(g, AnyBuffer.zeros(g.shape), "zero_")

    def __deepcopy__(self, memo):
        p = Parameter(self.numpy(), self.requires_grad, self.name)
        if self.grad_buf is not None:
            p.grad_buf = self.grad_buf.copy()
        memo[id(self)] = p
        return p

    def __reduce__(self):
        return (_rebuild, (self.numpy(), self.requires_grad, self.name))

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)


def _rebuild(value, requires_grad, name):
    return Parameter(value, requires_grad, name)


def _as_flag(flag) -> bool:
    if not isinstance(flag, (bool, np.bool_, int)):
        raise TypeError(f"requires_grad must be a bool, got {type(flag).__name__} {flag!r}")
    return bool(flag)


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


class _WeakIdentityMap:
    """A map with weakly held keys compared by identity (a Tensor's == is elementwise, so a
    WeakKeyDictionary cannot hold Parameters)."""

    def __init__(self):
        self._d = {}

    def get(self, key, default=None):
        e = self._d.get(id(key))
        return e[1] if e is not None and e[0]() is key else default

    def __setitem__(self, key, value) -> None:
        k, d = id(key), self._d

        def gone(ref, k=k, d=d):
            e = d.get(k)
            if e is not None and e[0] is ref:
                d.pop(k, None)
        d[k] = (weakref.ref(key, gone), value)

    def __delitem__(self, key) -> None:
        e = self._d.get(id(key))
        if e is not None and e[0]() is key:
            del self._d[id(key)]

    def setdefault(self, key, value):
        got = self.get(key)
        if got is None:
            self[key] = got = value
        return got


# Who trains each Parameter now: (thread, Session) weak references, and one lock per Parameter
# that orders the claim and every free of its gradient buffer (zero_grad, optimizer steps). Kept
# off the Parameter so copies and pickles of a model carry neither.
_trainers = _WeakIdentityMap()
_locks = _WeakIdentityMap()
_locks_lock = threading.Lock()
_trainers_d, _locks_d = _trainers._d, _locks._d   # their dicts, for the inline lookups
_get_ident = threading.get_ident


def training_lock(p: Parameter) -> threading.RLock:
    """The lock held while p is claimed, while its gradient buffer is freed (zero_grad) and while
    an optimizer step reads it."""
    e = _locks_d.get(id(p))   # _locks.get(p), inline: this runs per parameter per step
    if e is not None and e[0]() is p:
        return e[1]
    with _locks_lock:
        return _locks.setdefault(p, threading.RLock())


def _other_trainer(p: Parameter):
    """(thread, Session) of another live thread whose live Session trains p, else None (call
    with p's training_lock held)."""
    e = _trainers_d.get(id(p))   # _trainers.get(p), inline
    if e is None or e[0]() is not p:
        return None
    t = e[1]
    thread, owner = t[0](), t[1]()
    # (live threads have distinct idents: comparing them names the current thread without
    # threading.current_thread's frame, which this check pays per parameter per step)
    if thread is None or owner is None or owner.claim_epoch != t[2] \
            or thread.ident == threading.get_ident() or not thread.is_alive():
        return None   # no claim, or one that ended (its Session stepped or died, its thread ended)
    return thread, owner


def check_training_thread(p: Parameter, op: str) -> None:
    """Raise when another thread's live Session trains p. Call it with p's training_lock held,
    and keep holding it while freeing or reading p's gradient buffer (zero_grad, optimizer
    steps): the other thread's claim then waits for that to finish."""
    # the common cases first, without _other_trainer's frame: no claim, one that ended (its
    # Session stepped or died), or this thread's own (a claim is made from its Session's thread
    # only, so a live Session owned by this thread names this thread)
    e = _trainers_d.get(id(p))
    if e is None or e[0]() is not p:
        return
    t = e[1]
    owner = t[1]()
    if owner is None or owner.claim_epoch != t[2] or owner.owner == _get_ident():
        return
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
    claim ends with the Session's step(), the Session itself, or its thread.

    A claim is [thread, Session] (weak references) and the Session's claim_epoch when it was
    made: step() ends every claim of its Session at once by moving the epoch on
    (_release_claims), and the next step's first use renews this Session's own claim in place
    (under the lock, as any claim), so a training loop makes no weak reference per parameter
    per step."""
    epoch = s.claim_epoch
    e = _trainers_d.get(id(p))   # _trainers.get(p), inline
    if e is not None and e[0]() is p:
        t = e[1]
        if t[2] == epoch and t[1]() is s:
            return
    with training_lock(p):
        t = _trainers.get(p)
        if t is not None and t[1]() is s:
            # s's claim of an earlier step: the entry is this thread's (a Session is used from
            # its own thread only), so no other trainer holds p
            t[2] = epoch
            return
        check_training_thread(p, "use")
        _trainers[p] = [weakref.ref(threading.current_thread()), weakref.ref(s), epoch]


def _release_claims(s: "Session") -> None:
    """End every claim of s (another thread may train its parameters now)."""
    s.claim_epoch += 1
