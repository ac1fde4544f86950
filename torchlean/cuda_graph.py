"""graph_step: a whole training step captured once and replayed as one CUDA graph (off the
CUDA backend it runs the step as it is)."""
from __future__ import annotations

import functools
from operator import attrgetter, is_ as _is

import numpy as np

from torchlean import _capture, _loader, cuda_device
from torchlean import random as _random
from torchlean.buffer import AnyBuffer, Buffer, raise_status
from torchlean.int_tensor import IntTensor
from torchlean.tensor import Tensor

_M64 = (1 << 64) - 1
_MIRROR, _GRAD, _LIVE = attrgetter("_buf"), attrgetter("grad_buf"), attrgetter("live")
_MAX, _MIN = np.maximum.reduce, np.minimum.reduce
_MISS = object()   # replay_fast: this call needs the slow path's checks
# input rings: entries per input (launches the host may run ahead), and the pinned bytes an
# input may take before its ring shrinks to two entries
_RING, _RING_BYTES = 16, 64 << 20


def _session():
    from torchlean.session import Session
    return Session()


def _signature(args, kwargs) -> tuple:
    """What a captured graph is specialised on: each argument's kind, shape and dtype (arrays,
    Tensors) or its value (anything else, a constant of the graph)."""
    def one(a):
        if isinstance(a, Tensor):
            return ("T", tuple(a.shape))
        if isinstance(a, IntTensor):
            return ("I", a.shape, a._a.dtype.str)
        if isinstance(a, np.ndarray):
            return ("A", a.shape, a.dtype.str)
        return ("C", type(a), a)
    return tuple(one(a) for a in args) + tuple((k, one(v)) for k, v in sorted(kwargs.items()))


def _is_float_array(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _is_int_array(a) -> bool:
    return isinstance(a, IntTensor) or (isinstance(a, np.ndarray) and a.dtype.kind in "iub")


def _check(op: str, st: int) -> None:
    if st:
        raise_status(op, st)


class _Inputs:
    """The step's arguments as fn sees them. Eagerly: float arrays as Tensors of the step's
    session (Tensors borrowed as they are), the rest as given. For a graph: float arrays and
    Tensors as Tensors over static device buffers, integer arrays as static host arrays bound
    to device twins (what an op uploads from them inside the capture, a replay reads from the
    twin), anything else as given (a constant of the graph). The graph's first node fills the
    static buffers and twins: from pinned staging a call writes (arrays), or from the device
    address a call writes into a pinned slot (Tensors), so a replay makes no copy call. Each
    input has a ring of them (launch k uses entry k % depth), so the host may run up to depth
    launches ahead of the device before it waits."""

    def __init__(self, sess, args, kwargs, graph=None):
        self.graph = graph
        self.items = []      # per argument: (kind, its ring of pinned views or None, static)
        self.int_inputs = []  # (argument index, static host array)
        flat = list(args) + [v for _, v in sorted(kwargs.items())]
        conv = []
        for i, a in enumerate(flat):
            if isinstance(a, Tensor) or _is_float_array(a):
                if graph is None:
                    conv.append(sess._wrap(sess.tape.leaf(a.value)) if isinstance(a, Tensor)
                                else sess.tensor(a))
                    continue
                shape = tuple(a.shape)
                n = int(np.prod(shape))
                buf = AnyBuffer(shape, Buffer.alloc(n)) if n else AnyBuffer.zeros(shape)
                kind = "T" if isinstance(a, Tensor) else "f"
                views = self._bind(buf.buf.data_ptr(), 4 * n, kind, np.float32, shape) \
                    if n else None
                self.items.append((kind, views, buf))
                conv.append(sess._wrap(sess.tape.leaf(buf)))
            elif _is_int_array(a) and graph is not None:
                src = a._a if isinstance(a, IntTensor) else a
                host = np.array(src, dtype=np.bool_ if src.dtype == np.bool_ else np.int64,
                                order="C", copy=True)
                views = None
                if host.nbytes:
                    out = _loader.ffi.new("uint64_t *")
                    _check("graph_step", _loader.lib.tl_graph_bind_host(
                        graph, _loader.ffi.from_buffer(host), host.nbytes, out))
                    views = self._bind(int(out[0]), host.nbytes, "i", host.dtype, host.shape)
                self.items.append(("i", views, host))
                self.int_inputs.append((i, host))
                conv.append(IntTensor(host) if isinstance(a, IntTensor) else host)
            else:
                self.items.append(("c", None, None))
                conv.append(a)
        self.args = tuple(conv[:len(args)])
        self.kwargs = dict(zip([k for k, _ in sorted(kwargs.items())], conv[len(args):]))

    def _bind(self, dst: int, nbytes: int, kind: str, dtype, shape) -> tuple:
        """The ring of pinned views a call writes this input through: stagings of an array's
        values (dtype, shape), or one-element uint64 slots of a Tensor's device address. Deep
        rings for small inputs, two entries for large ones (pinned memory is depth x bytes)."""
        lib, ffi = _loader.lib, _loader.ffi
        out = ffi.new("void **")
        staged = kind != "T"
        depth = _RING if not staged or nbytes * _RING <= _RING_BYTES else 2
        _check("graph_step", lib.tl_graph_bind_input(self.graph, dst, nbytes, int(staged),
                                                     depth, out))
        if not staged:
            slots = np.frombuffer(ffi.buffer(out[0], 8 * depth), dtype=np.uint64)
            return tuple(slots[e:e + 1] for e in range(depth))
        stride = (nbytes + 255) // 256 * 256
        ring = np.frombuffer(ffi.buffer(out[0], stride * depth), dtype=np.uint8)
        return tuple(ring[e * stride:e * stride + nbytes].view(dtype).reshape(shape)
                     for e in range(depth))

    def load(self, args, kwargs, launched: int) -> None:
        """Write this call's values where the next launch's first node reads them (the ring
        entries of launch number `launched`), once the replay that used them has read them."""
        _check("graph_step", _loader.lib.tl_graph_wait_inputs(self.graph))
        flat = list(args) + [v for _, v in sorted(kwargs.items())]
        for (kind, views, _), a in zip(self.items, flat):
            if views is None:
                continue
            view = views[launched % len(views)]
            if kind == "T":
                view[0] = a.value.buf.data_ptr()
            else:
                np.copyto(view, a._a if isinstance(a, IntTensor) else a, casting="unsafe")


def _in_range(a, guards) -> bool:
    """Whether int array a meets every (lo, hi, excluded) guard the capture relied on."""
    for lo, hi, exclude in guards:
        if lo == 0 and a.dtype == np.int64:   # one pass: a negative index wraps above hi
            if int(_MAX(a.view(np.uint64), axis=None)) >= hi:
                return False
        elif _MIN(a, axis=None) < lo or _MAX(a, axis=None) >= hi:
            return False
        if exclude is not None and (a == exclude).any():
            return False
    return True


class _GroupCheck:
    """Whether an optimizer's parameter groups are still those of the capture, without
    rebuilding them: each group dict compares equal to its snapshot (the same params list
    object, equal options) and its params list holds the same Parameters, by identity."""

    __slots__ = ("groups", "opt", "snaps", "params")

    def __init__(self, opt):
        self.opt, self.groups = opt, opt.param_groups
        self.snaps = [dict(g) for g in self.groups]
        self.params = [tuple(g["params"]) for g in self.groups]

    def same(self) -> bool:
        groups = self.opt.param_groups
        if groups is not self.groups or len(groups) != len(self.snaps):
            return False
        for g, snap, ps in zip(groups, self.snaps, self.params):
            try:
                if g != snap:
                    return False
            except Exception:   # an option whose == is not a bool (an array): the slow path
                return False
            now = g["params"]
            if len(now) != len(ps) or not all(map(_is, now, ps)):
                return False
        return True


class _Graph:
    """One captured step: its CUDA graph, static inputs and outputs, and what each replay
    checks before it launches (see graph_step)."""

    def __init__(self, fn, args, kwargs, sig):
        lib, ffi = _loader.lib, _loader.ffi
        self.sig = sig
        self.handle = None
        h = ffi.new("void **")
        _check("graph_step", lib.tl_graph_new(h))
        self.handle = h[0]
        self.sess = _session()
        self.inputs = _Inputs(self.sess, args, kwargs, graph=self.handle)
        self.launched = 0   # launches so far: the next one reads entry launched % depth
        self.inputs.load(args, kwargs, 0)
        stream = _random._stream
        seed, c0 = stream["seed"], stream["counter"]
        st = _capture.STATE
        st.reset()
        st.int_inputs = list(self.inputs.int_inputs)
        from torchlean.session import _entered_stack
        stack = _entered_stack()
        _check("graph_step", lib.tl_graph_begin(self.handle, (seed + c0) & _M64))
        stream["graph"] = c0
        st.strict = st.active = True
        stack.append(self.sess)
        try:
            out = fn(*self.inputs.args, **self.inputs.kwargs)
        except BaseException as e:
            lib.tl_graph_abort(self.handle)
            self.destroy()
            raise RuntimeError(
                f"graph_step: the step failed while it was being captured ({type(e).__name__}: "
                f"{e}); it did not run, but the parameters' gradients and the optimizers' step "
                "counts may be those of a step that never ran") from e
        finally:
            if stack and stack[-1] is self.sess:
                stack.pop()
            stream["graph"] = None
            st.strict = st.active = False
        self.draws = stream["counter"] - c0
        stt = lib.tl_graph_end(self.handle, self.draws)
        if stt:
            self.destroy()
            raise_status("graph_step", stt)
        self.out = out
        n = ffi.new("char[]", 96)
        self.constants = lib.tl_graph_constants(self.handle, n, 96)
        self.constant_op = ffi.string(n).decode()
        self.guards = list(st.guards)
        # an integer input replays with new values only when an op checked its range (a guard),
        # uploaded it as it is (the native side saw the upload read its bound range) and
        # nothing else used it on the host (a plan from its values, a constant like it)
        guarded = {g[0] for g in self.guards}
        bound = [i for i, host in self.inputs.int_inputs if host.nbytes]
        guarded &= {i for j, i in enumerate(bound)
                    if lib.tl_graph_bound_read(self.handle, j) == 2}
        # integer inputs no op read as they are: their values may have shaped host constants,
        # so a replay runs only on the same values (else the step is captured again)
        self.pinned_ints = [(i, host.copy()) for i, host in self.inputs.int_inputs
                            if i not in guarded]
        self.params = tuple(st.params.values())
        self.mirrors = tuple(map(_MIRROR, self.params))
        self.grads = tuple(map(_GRAD, self.params))
        self.bufs = tuple(m.buf for m in self.mirrors)
        self.optims = [(o, self._groups(o)) for o in st.optimizers.values()]
        self.group_checks = [_GroupCheck(o) for o in st.optimizers.values()]
        # Adam's step counts advance on the device (optim.cu: step0 + replay index); the host
        # copies in opt.state catch up when the optimizer's state is next read (sync_steps)
        self.adam_states = [o.state[id(p)] for o in st.optimizers.values()
                            if type(o).__name__ in ("Adam", "AdamW")
                            for g in o.param_groups for p in g["params"]
                            if id(p) in o.state and "step" in o.state[id(p)]]
        self.pending = 0
        self.stepped = tuple(st.optimizers.values())
        for o in self.stepped:
            o._step_syncs.append(self.sync_steps)
        self.slots = self._slots(args, kwargs)
        st.reset()
        self.epoch = st.epoch   # the parameters as captured (replay_fast)
        self.seed, self.counter = seed, stream["counter"]
        self.replays = 0
        _check("graph_step", lib.tl_graph_launch(self.handle))
        self.launched = 1

    @staticmethod
    def _groups(opt) -> list:
        return [(tuple(map(id, g["params"])), {k: v for k, v in g.items() if k != "params"})
                for g in opt.param_groups] + [len(opt.param_groups)]

    def _slots(self, args, kwargs) -> tuple:
        """What a replay checks and loads per argument, worked out once: (index, check kind,
        expected type, shape, dtype or constant, ring of pinned views, guards, one-pass
        staging); () when an input is pinned to its values (only the slow path checks).
        One-pass staging (an int64 input with one guard): (the ring's staging pointers, count,
        lo, hi, excluded) for tl_graph_stage_int64, which copies and range-checks in one pass."""
        guards = {}
        for i, lo, hi, exclude in self.guards:
            # an excluded value outside [lo, hi) is ruled out by the range check already
            guards.setdefault(i, []).append(
                (lo, hi, exclude if exclude is not None and lo <= exclude < hi else None))
        pinned = {i for i, _ in self.pinned_ints}
        flat = list(args) + [v for _, v in sorted(kwargs.items())]
        ffi = _loader.ffi
        out = []
        for i, ((kind, views, _), a) in enumerate(zip(self.inputs.items, flat)):
            if isinstance(a, Tensor):
                out.append((i, "T", Tensor, tuple(a.shape), None, views, (), None))
            elif kind == "c":
                out.append((i, "C", type(a), None, a, None, (), None))
            elif i in pinned:     # rare: the slow path (stale) compares the values
                return ()
            else:
                src = a._a if isinstance(a, IntTensor) else a
                g = tuple(guards.get(i, ()))
                stage = None
                if views is not None and len(g) == 1 and src.dtype == np.int64 and \
                        views[0].dtype == np.int64:
                    lo, hi, exclude = g[0]
                    stage = (tuple(ffi.cast("int64_t *", v.ctypes.data) for v in views),
                             views[0].size, lo, hi, lo - 1 if exclude is None else exclude)
                out.append((i, kind, type(a), src.shape, src.dtype, views, g, stage))
        self.kw_names = tuple(sorted(kwargs))
        return tuple(out)

    def replay_fast(self, args, kwargs):
        """Check, load and launch in one pass when this call matches the capture exactly and
        nothing it relied on changed (the common case); _MISS: take the slow path (stale).
        Inputs are written as they are checked (after the wait: no launched replay reads these
        ring entries any more); a miss leaves them for the slow path to write again."""
        slots = self.slots
        if not slots and self.inputs.items:
            return _MISS
        if kwargs:
            if tuple(sorted(kwargs)) != self.kw_names:
                return _MISS
            flat = args + tuple(v for _, v in sorted(kwargs.items()))
        else:
            if self.kw_names:
                return _MISS
            flat = args
        if len(flat) != len(slots):
            return _MISS
        # the storages' liveness each call (one C-level pass); the identities only after a
        # Parameter's buffer or gradient was rebound (the setters count rebindings in epoch)
        if not all(map(_LIVE, self.bufs)):
            return _MISS
        epoch = _capture.STATE.epoch
        if epoch != self.epoch:
            ps = self.params
            if tuple(map(_MIRROR, ps)) != self.mirrors or tuple(map(_GRAD, ps)) != self.grads:
                return _MISS
            self.epoch = epoch
        for gc in self.group_checks:
            if not gc.same():
                return _MISS
        lib = _loader.lib
        st = lib.tl_graph_wait_inputs(self.handle)
        if st:
            raise_status("graph_step", st)
        launched = self.launched
        for i, kind, typ, shape, spec, views, guards, stage in slots:
            a = flat[i]
            if kind == "C":   # a constant: the same type (True is not 1) and an equal value
                if type(a) is not typ or not (a is spec or a == spec):
                    return _MISS
                continue
            if type(a) is not typ and not isinstance(a, typ):
                return _MISS
            if kind == "T":
                v = a.value
                if v.shape != shape:
                    return _MISS
                if views is not None:
                    views[launched % len(views)][0] = v.buf.data_ptr()
                continue
            src = a._a if typ is IntTensor else a
            if src.shape != shape or src.dtype != spec:
                return _MISS
            if stage is not None and src.flags.c_contiguous:
                ptrs, n, lo, hi, exclude = stage
                if lib.tl_graph_stage_int64(ptrs[launched % len(ptrs)],
                                            _loader.ffi.from_buffer("int64_t[]", src), n, lo,
                                            hi, exclude) >= 0:
                    return _MISS
                continue
            if guards and src.size and not _in_range(src, guards):
                return _MISS
            if views is not None:
                np.copyto(views[launched % len(views)], src, casting="unsafe")
        return self._launch()

    def stale(self, args, kwargs) -> str | None:
        """Why this graph cannot replay this call (None: it can)."""
        ps = self.params   # identity compares of the tuples: no Python loop per parameter
        if tuple(map(_MIRROR, ps)) != self.mirrors or tuple(map(_GRAD, ps)) != self.grads or \
                not all(map(_LIVE, self.bufs)):
            p = next(p for p, m, g, b in zip(ps, self.mirrors, self.grads, self.bufs)
                     if p._buf is not m or p.grad_buf is not g or not b.live)
            return f"parameter of shape {tuple(p.shape)} was replaced"
        for o, groups in self.optims:
            if self._groups(o) != groups:
                return f"{type(o).__name__}'s parameter groups changed"
        flat = list(args) + [v for _, v in sorted(kwargs.items())]
        for i, lo, hi, exclude in self.guards:
            a = flat[i]
            a = a._a if isinstance(a, IntTensor) else a
            if a.size and not _in_range(a, ((lo, hi, exclude),)):
                return "an integer input left the range the capture relied on"
        for i, old in self.pinned_ints:
            a = flat[i]
            a = a._a if isinstance(a, IntTensor) else a
            if not np.array_equal(a, old):
                return "an integer input the step transformed on the host changed"
        return None

    def replay(self, args, kwargs):
        self.inputs.load(args, kwargs, self.launched)
        return self._launch()

    def _launch(self):
        lib = _loader.lib
        stream = _random._stream
        if stream["seed"] != self.seed or stream["counter"] != self.counter:
            _check("graph_step", lib.tl_graph_set_rng(
                self.handle, (stream["seed"] + stream["counter"]) & _M64))
        _check("graph_step", lib.tl_graph_launch(self.handle))
        self.launched += 1
        if self.draws:
            with _random._stream_lock:
                stream["counter"] += self.draws
        self.seed, self.counter = stream["seed"], stream["counter"]
        self.pending += 1
        self.replays += 1
        return self.out

    def sync_steps(self) -> None:
        """Bring the host's Adam step counts up to the replays launched so far."""
        n, self.pending = self.pending, 0
        if n:
            for s in self.adam_states:
                s["step"] += n

    def destroy(self):
        if getattr(self, "stepped", None):
            self.sync_steps()
            for o in self.stepped:
                o._step_syncs.remove(self.sync_steps)
            self.stepped = ()
        h, self.handle = self.handle, None
        if h is not None:
            _loader.lib.tl_graph_destroy(h)


class graph_step:
    """Capture a training step (forward, backward, optimizer step) once and replay it as one
    CUDA graph; use as `step = graph_step(fn)` or as the decorator `@graph_step`.

    Call 1 runs fn eagerly (warm-up: gradients and optimizer state come to exist); call 2
    captures fn and runs the graph; later calls only replay it: one launch, no Python op, no
    tape. A replay equals the eager step bit for bit in deterministic and exact modes, dropout
    included: the RNG key and counter live in device memory, so each replay draws the next
    step's masks (and the host stream advances as if the step ran eagerly).

    Arguments: float NumPy arrays and Tensors are copied into static device buffers and reach
    fn as Tensors; integer arrays (and IntTensors) reach fn as static host arrays whose values
    each replay sends to the device (cross_entropy labels and Embedding indices read them as they are; an
    integer input transformed on the host pins the graph to its values); anything else is a
    constant of the graph. Inside fn, default_session() is the graph's own session. fn returns
    Tensors (or tuples, lists, dicts of them): a replay returns the same Tensors, rewritten in
    place: valid until the next call, as torch's CUDA graphs' outputs are.

    A replay's host work is one pass over the arguments (what to check and copy is worked out
    at capture) and one launch: arrays are written into pinned staging and a Tensor's address
    into a pinned slot, which the graph's first node reads (rings of 16 entries, two for an
    input over 4 MiB: a call waits only when that many launches are still queued). Adam's
    step counts advance on the device, and the host's in opt.state catch up when the
    optimizer's state is next read.

    Never a silently wrong answer: another shape, dtype or constant argument captures again;
    so does a parameter replaced outside the step (set(), a new mirror or gradient buffer), a
    changed optimizer param group (lr schedulers included), or an integer input outside the
    range the capture relied on. A host read inside fn (loss.item(), .numpy(), synchronize) or
    a host-side random draw raises RuntimeError naming the op, at the warm-up already.

    The stub (and any non-CUDA backend) runs fn eagerly on every call, with the same argument
    conversion: the same results as the eager step."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.graph: _Graph | None = None
        self.warm = False
        self.captures = 0          # how many times the step was captured
        self.recapture_reason = None

    def _eager(self, args, kwargs, strict: bool):
        sess = _session()
        inputs = _Inputs(sess, args, kwargs)
        from torchlean.session import _entered_stack
        stack = _entered_stack()
        st = _capture.STATE
        st.strict = strict
        stack.append(sess)
        try:
            return self.fn(*inputs.args, **inputs.kwargs)
        finally:
            if stack and stack[-1] is sess:
                stack.pop()
            st.strict = False

    def __call__(self, *args, **kwargs):
        if not cuda_device.is_available():
            return self._eager(args, kwargs, strict=False)
        g = self.graph
        if g is not None:
            out = g.replay_fast(args, kwargs)
            if out is not _MISS:
                return out
        sig = _signature(args, kwargs)
        if g is not None:
            why = "new argument shapes, dtypes or constants" if g.sig != sig else \
                g.stale(args, kwargs)
            if why is None:
                return g.replay(args, kwargs)
            self.recapture_reason = why
            g.destroy()
            self.graph = None
        if not self.warm:
            self.warm = True
            return self._eager(args, kwargs, strict=True)
        self.graph = _Graph(self.fn, args, kwargs, sig)
        self.captures += 1
        return self.graph.out

    def reset(self) -> None:
        """Drop the captured graph (its memory returns once its outputs are gone)."""
        if self.graph is not None:
            self.graph.destroy()
            self.graph = None

    def __del__(self):
        try:
            self.reset()
        except Exception:   # interpreter shutdown
            pass
