"""Parameter: a trainable value kept as a host copy plus a device mirror with an explicit stale
flag (training updates the mirror, reading `.data` synchronises once), the hooks that run after
each backward, and the per-Parameter training claims that stop two threads training one model.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from torchlean.buffer import AnyBuffer
from torchlean import _capture
from torchlean import devices as _devices
from torchlean.dtypes import float32 as _float32


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
            with _capture.persistent():
                self._mirror = AnyBuffer.from_numpy(self._host)
        if _capture.STATE.active:
            _capture.note_param(self)
        return self._mirror

    def set_mirror(self, buf: AnyBuffer) -> None:
        """Replace the mirror (the old one is released); the host copy becomes stale."""
        if self._mirror is not None and self._mirror is not buf:
            old = self._mirror
            if _capture.STATE.active and old.live and old.shape == buf.shape:
                # a captured step keeps the buffer its replays read: copy into it
                _capture.copy_into(old, buf)
                buf.release()
                self._host_current = False
                return
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
