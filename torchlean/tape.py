"""The autograd tape: an append-only list of nodes and reverse-mode accumulation over it.

A node holds its value, its parents, whether it requires a gradient, what its VJP needs
(inputs by reference, residual outputs it owns) and the VJP itself. Op methods are generated
from ops.yaml (torchlean._generated.tape_ops.TapeOps); this module holds what is common to all
of them: recording, gradient accumulation (generated VJPs sum broadcast gradients back to their
input's shape; _add_grad does it for any other VJP), dense and sparse backward, and release.

Lifetimes follow PyTorch's. Each node counts its `users`: the unrun VJPs that read its value and
the live views that alias it. A value with no user and no Tensor on it (`referenced`, the
Session's count of live Tensor wrappers) is freed at once, during the forward pass when its last
Tensor goes and during a graph-freeing backward as soon as the last VJP reading it ran; a value
handed out (`held`) is let go instead, and lives while its holder references it. Each node also
counts its `consumers`, the unrun VJPs that will send it a gradient: a node with neither a
Tensor nor a consumer can never be differentiated again, so when its last Tensor goes
(`let_go`) its saved values are freed and its parents lose a consumer in turn, which frees a
graph whose output was dropped without backward(), as PyTorch's reference counts do. Records
of nodes nothing can read are forgotten (NodeTable), so a loop without Session.step() keeps a
fixed number of them.
One step further than PyTorch: the value of an op that can give it again from what its node
keeps for its own VJP (ops.yaml `recompute`: GELU from its input, layer_norm from xhat, gamma
and beta) is freed too while only VJPs need it (`stale`), and recomputed, with the forward's
kernels and so the same bits, just before the first of those VJPs runs.
TORCHLEAN_KEEP_ACTIVATIONS=1 (read once, at import) keeps such values instead: the same
gradients, more memory, no recomputation (to compare the two).

Who owns a gradient buffer during backward (one rule, one path in Tape._give/_add_grad):
- `grads[p]`, a node's gradient so far, owns its payload alone; no other entry aliases it.
- A VJP's contribution is either fresh (an owning buffer the VJP made) or borrowed: the cotangent
  itself, a view of it, or any non-owning view. A fresh payload is ours; the cotangent's payload
  is ours only when it is disposable: nothing reads the node's gradient after its VJP (the node
  was not asked for) or it is a private copy.
- Of all contributions sharing one payload, only the last may consume it (keep it as the
  parent's first gradient, or free it after adding it into one); every earlier one, and every
  borrowed one, is only read: copied into a fresh gradient or added into a fresh sum. Readers
  run before consumers, so a payload is never freed while a contribution still reads it.
- Accumulation always writes `prev + c` into a fresh buffer and then frees `prev`.
- A disposable cotangent no parent consumed is freed when its node is done.
"""
from __future__ import annotations

import functools
import threading
from heapq import heappop, heappush

import numpy as np

from torchlean import _capture
from torchlean._generated import ops as _ops
from torchlean._generated.tape_ops import TapeOps
from torchlean import buffer as _buffer
from torchlean.buffer import AnyBuffer
from torchlean.runtime import env_flag


class Node:
    """One recorded step: its value, parents, and what its VJP needs."""

    __slots__ = ("name", "value", "requires_grad", "parents", "vjp", "saved", "cleanup",
                 "owns_value", "broadcast", "pinned", "held", "users", "reads", "dropped",
                 "views", "recompute", "stale", "consumers", "versions")

    def __init__(self, name, value, requires_grad, parents=(), vjp=None, saved=None,
                 cleanup=(), owns_value=True, broadcast=False):
        self.name = name
        self.value = value                  # AnyBuffer
        self.requires_grad = requires_grad
        self.parents = parents              # node ids
        self.vjp = vjp                      # (grad, needs, saved) -> [grad or None per parent]
        self.saved = saved if saved is not None else {}
        self.cleanup = cleanup              # residuals this node owns (a tuple)
        self.owns_value = owns_value        # False for borrowed leaves and views
        self.broadcast = broadcast          # parents may need sum_to on their gradients
        self.pinned = True                  # a leaf: never dropped early (see Tape.drop_value)
        self.held = False                   # value handed out (Tensor.value): never dropped early
        self.users = 0                      # unrun VJPs reading the value + live views of it
        self.reads = ()                     # node ids whose values this node's VJP reads
        self.dropped = False                # value released (a view: its base let go)
        self.views = ()                     # ids of the views made of the value (live or not)
        self.recompute = None               # saved -> the value again (ops.yaml recompute)
        self.stale = False                  # value freed until a VJP reading it runs
        self.consumers = 0                  # unrun VJPs that will send this node a gradient
        self.versions = None                # versions of the saved storages at recording


_new_node = Node.__new__
_forgotten: list = []   # the shared placeholder of forgotten nodes, made on first use


def _forgotten_node() -> Node:
    """A node with a released value, no parents and no gradient: what Tape.forget leaves."""
    if not _forgotten:
        value = AnyBuffer.from_numpy(np.zeros(0, np.float32))
        value.release()
        node = Node("forgotten", value, False, owns_value=False)
        node.pinned, node.dropped = False, True
        _forgotten.append(node)
    return _forgotten[0]


class NodeTable(dict):
    """The tape's nodes by id: a list's interface (ids 0, 1, ... in recording order; len is the
    next id; iteration yields every node in order) over a dict, so a forgotten node's slot goes
    away (memory stays flat in a loop that never calls Session.step()) and reads back as the
    shared released placeholder."""

    __slots__ = ("next_id",)

    def __init__(self):
        super().__init__()
        self.next_id = 0

    def append(self, node) -> None:
        self[self.next_id] = node
        self.next_id += 1

    def __missing__(self, i):
        if i.__class__ is int and 0 <= i < self.next_id:
            return _forgotten_node()
        if i.__class__ is int and -self.next_id <= i < 0:
            return self[self.next_id + i]
        raise IndexError(f"node id {i!r} is not on this tape (it has {self.next_id} nodes)")

    def __len__(self) -> int:
        return self.next_id

    def __iter__(self):
        return (self[i] for i in range(self.next_id))

    def __bool__(self) -> bool:
        return self.next_id > 0


KEEP_ACTIVATIONS = bool(env_flag("TORCHLEAN_KEEP_ACTIVATIONS"))   # no recomputation when set

# The recorder of torchlean.audit while one records (None otherwise): told of every recorded op
# (AUDIT.op) and runs every VJP of a backward pass (AUDIT.vjp), digesting what they produce.
AUDIT = None


def _holds_memory(node) -> bool:
    """Is the node's value its own memory or a borrowed leaf's (not a view of another node)?"""
    return node.owns_value or not node.parents


def freed_vjp(grad, needs, saved):
    """The VJP of a node whose saved values a graph-freeing backward already released."""
    raise RuntimeError("backward: this part of the graph was already differentiated and its "
                       "saved values freed by an earlier backward(); pass retain_graph=True to "
                       "the first backward() to differentiate it again")


_EVER_BUMPED = _buffer.EVER_BUMPED


def _snapshot_versions(saved: dict):
    return {k: getattr(v.buf, "version", 0) for k, v in saved.items()
            if v.__class__ is AnyBuffer}


# saved inputs whose VJP reads only their shape (the gathers' scatter-add backward): writing
# them in place changes no gradient, so it raises nothing (PyTorch's index backward keeps sizes)
_SHAPE_ONLY = {"gather_vec": "x", "gather_row": "x", "gather_rows": "x"}


def _check_versions(node) -> None:
    """Raise PyTorch's error when a storage this node's VJP reads was written in place since
    the op was recorded (its version moved on)."""
    recorded = node.versions or {}
    shape_only = _SHAPE_ONLY.get(node.name)
    for k, v in node.saved.items():
        if v.__class__ is not AnyBuffer or k == shape_only:
            continue
        now, then = getattr(v.buf, "version", 0), recorded.get(k, 0)
        if now != then:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [torchlean.FloatTensor {list(v.shape)}], which {node.name} "
                f"saved for its backward ('{k}'), is at version {now}; expected version {then} "
                f"instead (last written by {_buffer.last_writer(v.buf)}; this backward runs in "
                f"thread {threading.current_thread().name!r})")


class _GradMode(threading.local):
    """Per-thread grad mode, as in PyTorch: one thread's no_grad() never strips another's graph.
    `stack` holds the modes saved by the open no_grad blocks of this thread."""
    enabled = True

    def __init__(self):
        self.stack = []


_grad_mode = _GradMode()


class no_grad:
    """Ops record no gradient information inside it (values only), in this thread only.

    A context manager (blocks nest, and one instance may be entered again or from several
    threads: the saved modes live on a per-thread stack) and a decorator:
    `@torchlean.no_grad()` runs the function with gradients off."""

    def __enter__(self):
        _grad_mode.stack.append(_grad_mode.enabled)
        _grad_mode.enabled = False
        return self

    def __exit__(self, *exc):
        _grad_mode.enabled = _grad_mode.stack.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def without_grad(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)
        return without_grad


def is_grad_enabled() -> bool:
    """Whether ops record gradients in the calling thread."""
    return _grad_mode.enabled


class set_grad_enabled:
    """torch's set_grad_enabled(mode) as a context manager: ops record gradients inside it when
    mode is True (a view re-derives its values under the grad mode it was made in)."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)

    def __enter__(self):
        _grad_mode.stack.append(_grad_mode.enabled)
        _grad_mode.enabled = self.mode
        return self

    def __exit__(self, *exc):
        _grad_mode.enabled = _grad_mode.stack.pop()
        return False


class Tape(TapeOps):
    """Records ops on AnyBuffers and runs reverse-mode differentiation over them."""

    def __init__(self, referenced=()):
        self.nodes = NodeTable()
        self.deferred = None   # while a Session's backward runs: ids whose last Tensor went
        self.released = False
        # node ids something outside the tape still reads (a Session passes its live Tensor
        # counts): their values are never freed early
        self.referenced = referenced

    def __len__(self) -> int:
        return len(self.nodes)

    # ------------------------------------------------------------------ building
    def leaf(self, value, name: str | None = None, requires_grad: bool = True) -> int:
        """Add an input. A NumPy array is uploaded and owned by the tape; an AnyBuffer is
        borrowed (never released by the tape), so parameter mirrors survive release()."""
        if isinstance(value, AnyBuffer):
            if not value.live:
                raise ValueError(f"leaf: value of shape {value.shape} was already released")
            val, owns = value, False
        elif isinstance(value, np.ndarray) or np.isscalar(value) or isinstance(value, (list, tuple)):
            val, owns = AnyBuffer.from_numpy(value), True
        else:
            raise TypeError(f"leaf: value must be a NumPy array or AnyBuffer, got {type(value).__name__}")
        self._check_open("leaf")
        self.nodes.append(Node(name, val, bool(requires_grad), owns_value=owns))
        return len(self.nodes) - 1

    def value(self, i: int) -> AnyBuffer:
        """The value of node i (owned by the tape: copy it to keep it past release())."""
        return self._node("value", i).value

    def _check_open(self, op: str) -> None:
        if self.released:
            raise ValueError(f"{op}: this tape was released (Tape.release()); record on a new Tape")

    def _node(self, op: str, i) -> Node:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"{op}: node ids are ints, got {type(i).__name__} {i!r}")
        if not 0 <= i < len(self.nodes):
            raise ValueError(f"{op}: node id {i} is not on this tape (it has {len(self.nodes)} nodes)")
        return self.nodes[i]

    def _input(self, op: str, i) -> AnyBuffer:
        """The live value of node i; anything else (not an int, off the tape, negative,
        released) goes to _input_error for the message."""
        try:
            if i.__class__ is int and i >= 0:   # not a bool: True is no node id
                v = self.nodes[i].value
                if v.buf.live:
                    return v
        except (IndexError, TypeError, ValueError):  # ValueError: an array's truth value
            pass
        return self._input_error(op, i)

    def _input_error(self, op: str, i) -> AnyBuffer:
        self._check_open(op)
        v = self._node(op, i).value  # raises for a bad id
        if not v.buf.live:
            raise ValueError(f"{op}: node {i} (shape {v.shape}) was released")
        return v

    def _record(self, name, out, parents, vjp, saved, broadcast, recompute=None) -> int:
        """Append the node of a single-output op and return its id.

        `saved` maps the names the VJP reads to their values; it is kept only when the node
        needs a gradient (grad mode on, a VJP, and some parent requiring a gradient). This runs
        once per recorded op, so it fills the Node's slots directly (no __init__ frame)."""
        nodes = self.nodes
        req = False
        if vjp is not None and _grad_mode.enabled:
            for p in parents:
                if nodes[p].requires_grad:
                    req = True
                    break
        node = _new_node(Node)
        node.name = name
        node.value = out
        node.requires_grad = req
        node.parents = parents
        node.vjp = vjp if req else None
        if req:
            # index and mask arrays are snapshots: mutating the caller's array after the
            # forward must not change the gradient
            for k, v in saved.items():
                if v.__class__ is np.ndarray or v.__class__ is list:
                    if not (_capture.STATE.active and _capture.is_int_input(v)):
                        saved[k] = np.array(v, copy=True)   # (a captured step's integer
                                                            # input is read in place)
            node.saved = saved
            # the versions of the storages the VJP reads (None: all at 0, before any
            # in-place op of the process); Tape.backward checks them before the VJP runs
            node.versions = _snapshot_versions(saved) if _EVER_BUMPED[0] else None
        else:
            node.saved = {}  # keep nothing alive for a node that never runs its VJP
        node.cleanup = ()
        node.owns_value = out.owns
        node.broadcast = broadcast
        node.pinned = False
        node.held = False
        node.dropped = False
        node.views = ()
        node.recompute = recompute if req else None
        node.stale = False
        node.consumers = 0
        if not req:
            node.versions = None
        # Count the users of what a VJP will read (saved inputs, a saved output: `reads` names
        # their nodes) and of the parents of a view (it aliases their memory); a value with no
        # user may be freed early (drop_value, a graph-freeing backward). A parent that needs a
        # gradient counts this VJP among its consumers: while one is unrun, its graph stays.
        i = nodes.next_id
        node.users = 0
        node.reads = ()
        if req:
            for p in parents:
                if nodes[p].requires_grad:
                    nodes[p].consumers += 1
            reads = []
            for v in saved.values():
                if v is out:
                    reads.append(i)
                    continue
                for p in parents:
                    if nodes[p].value is v:
                        reads.append(p)
                        nodes[p].users += 1
                        break
            if reads:
                node.reads = tuple(reads)
                node.users = reads.count(i)
        if not out.owns:
            for p in parents:
                nodes[p].users += 1
                nodes[p].views += (i,)
        nodes[i] = node
        nodes.next_id = i + 1
        if AUDIT is not None:
            AUDIT.op(self, i, name, out, parents)
        return i

    def drop_value(self, i: int) -> bool:
        """Release node i's value now if nothing needs it: no unrun VJP reads it, no live view
        aliases it, no Tensor wraps it (`referenced`) and it is not pinned (a borrowed leaf).
        The Session calls this when the last Tensor on the node goes away, so intermediates die
        as early as in PyTorch. A view that goes lets its base go in turn. A value handed out
        (`held`: Tensor.value) is let go, not released: its payload lives while its holders
        reference it. A value only VJPs still read goes too when its op can recompute it (it
        turns `stale`). True if released for good."""
        node = self.nodes[i]
        if node.pinned or node.dropped or node.stale:
            return False
        if node.users:
            base = i
            while not _holds_memory(self.nodes[base]):
                base = self.nodes[base].parents[0]
            if self._recomputable(base):
                self._make_stale(base)   # only VJPs read it: they get it recomputed
            return False
        self._drop(i)
        return True

    def _recomputable(self, i: int) -> bool:
        """May node i's value be freed and recomputed for the VJPs that read it? Its op can give
        it again (from what the node keeps until its own VJP ran), and no Tensor wraps it or any
        live view of it, nor was it handed out."""
        node = self.nodes[i]
        if (node.recompute is None or KEEP_ACTIVATIONS or node.vjp is freed_vjp or node.stale
                or node.dropped or node.held or node.pinned or i in self.referenced):
            return False
        return self._views_free(i)

    def _views_free(self, i: int) -> bool:
        """No Tensor wraps a live view made of view i, recursively, and none was handed out."""
        for v in self.nodes[i].views:
            view = self.nodes[v]
            if not view.dropped and (view.held or v in self.referenced
                                     or not self._views_free(v)):
                return False
        return True

    def _make_stale(self, i: int) -> None:
        """Free node i's value; it and its live views are recomputed before a VJP reads them."""
        self.nodes[i].value.release()
        stack = [i]
        while stack:
            node = self.nodes[stack.pop()]
            node.stale = True
            stack.extend(v for v in node.views if not self.nodes[v].dropped)

    def _recompute(self, i: int) -> None:
        """Give stale node i (or the view i of one) its value back, computed again from what the
        op's node keeps, and point its live views at the new memory."""
        nodes = self.nodes
        while not _holds_memory(nodes[i]):
            i = nodes[i].parents[0]
        for j in nodes[i].reads:   # what it is computed from may be recomputed itself
            if nodes[j].stale:
                self._recompute(j)
        fresh = nodes[i].recompute(nodes[i].saved)
        stack = [i]
        while stack:   # readers hold the nodes' AnyBuffers: give those the new payload
            node = nodes[stack.pop()]
            node.value.buf, node.value.handle = fresh.buf, fresh.handle
            node.stale = False
            stack.extend(v for v in node.views if not nodes[v].dropped)

    def _drop(self, i: int) -> None:
        """Release node i's value (a view: give up its base, which may then go too)."""
        nodes, referenced = self.nodes, self.referenced
        stack = [i]
        while stack:
            node = nodes[stack.pop()]
            node.dropped = True
            node.stale = False
            if node.owns_value:
                if not node.held:      # a holder's references keep a handed-out payload
                    node.value.release()
                continue
            for p in node.parents:     # a view (a borrowed leaf has no parents)
                base = nodes[p]
                base.users -= 1
                if (not base.users and not base.pinned and not base.dropped
                        and p not in referenced):
                    stack.append(p)

    def _let_go(self, j: int) -> None:
        """One user of node j is done with its value: free it if that was the last."""
        node = self.nodes[j]
        node.users -= 1
        if (not node.users and not node.pinned and not node.dropped
                and j not in self.referenced):
            self._drop(j)

    def free_saved(self, i: int) -> None:
        """Node i's VJP will not run again: release its residuals, let go of the values it read
        (each freed once its last user is done) and make a later differentiation raise."""
        node = self.nodes[i]
        if node.vjp is freed_vjp or node.vjp is None and not node.cleanup and not node.reads:
            return                   # freed already, or nothing kept
        if node.stale and node.users and _holds_memory(node):
            self._recompute(i)   # what it is recomputed from is about to go
        if node.vjp is not None:
            if node.vjp is not freed_vjp:   # its parents lose a consumer
                nodes = self.nodes
                for p in node.parents:
                    if nodes[p].requires_grad:
                        nodes[p].consumers -= 1
            node.vjp = freed_vjp
        node.saved = {}
        for r in node.cleanup:
            r.release()
        node.cleanup = ()
        reads, node.reads = node.reads, ()
        for j in reads:
            self._let_go(j)

    def forget(self, i: int) -> None:
        """Drop node i's record once nothing can read it (its value released, its graph freed,
        no Tensor on it, no unrun VJP sending it a gradient). Its id reads back as a shared
        released placeholder, so a loop that never calls Session.step() keeps no record of the
        ops it ran."""
        self.nodes.pop(i, None)

    def hand_out(self, i: int) -> AnyBuffer:
        """Node i's value for a holder outside the tape (Tensor.value): it, and the base a view
        aliases, are never released early or recomputed; when nothing on the tape needs them
        any more the tape lets go and the payload dies with the holder's last reference."""
        nodes = self.nodes
        j = i
        while True:
            nodes[j].held = True
            if _holds_memory(nodes[j]):
                break
            j = nodes[j].parents[0]
        return nodes[i].value

    def let_go(self, i: int) -> None:
        """The last Tensor on node i is gone: free what nothing can read any more, as PyTorch's
        reference counts do. An unrun VJP that no Tensor and no consumer can reach will never
        run, so its saved values go, and so, in turn, do its parents' (graph included); values
        and records nothing reads are released and forgotten."""
        if self.deferred is not None:    # a backward pass is running: after it
            self.deferred.append(i)
            return
        nodes = self.nodes
        node = nodes.get(i)
        if (node is not None and node.vjp is None and node.owns_value and not node.consumers
                and not node.users and not node.pinned and not node.dropped and not node.stale
                and i not in self.referenced):
            # the common case, a value no graph reads (no_grad, or a result nobody differentiates)
            if not node.held:
                node.value.release()
            del nodes[i]
            return
        referenced, forgotten = self.referenced, _forgotten_node()
        stack = [i]
        while stack:
            j = stack.pop()
            node = nodes[j]
            if node is forgotten or j in referenced:
                continue
            if not node.consumers and node.vjp is not None and node.vjp is not freed_vjp:
                parents = node.parents
                self.free_saved(j)          # parents lose this consumer, reads a user
                stack.extend(parents)
            if not node.dropped:
                self.drop_value(j)
            if node.dropped and not node.consumers and (node.vjp is None
                                                        or node.vjp is freed_vjp):
                if not node.owns_value:
                    stack.extend(node.parents)   # a view's base may have gone with it
                self.forget(j)

    def is_forgotten(self, i: int) -> bool:
        return 0 <= i < self.nodes.next_id and i not in self.nodes

    def _record_residuals(self, name, out, parents, vjp, saved, broadcast, keep, drop,
                          recompute=None) -> int:
        """_record for an op with extra outputs: `keep` are residuals the VJP reads (owned by the
        node while it needs them), `drop` the ones nothing reads (released at once)."""
        for r in drop:
            r.release()
        i = self._record(name, out, parents, vjp, saved, broadcast, recompute)
        if self.nodes[i].requires_grad:
            self.nodes[i].cleanup = keep
        else:
            for r in keep:
                r.release()
        return i

    # ------------------------------------------------------------------ backward
    def backward(self, out_id: int, seed=None, wrt=None, on_final=None, free_graph=False):
        """Reverse-mode gradients of node `out_id`.

        seed: the cotangent (NumPy array or AnyBuffer shaped like the output); defaults to 1 for a
        one-element output and is required otherwise. Without `wrt`, returns a list with one
        gradient AnyBuffer per node (zeros where nothing flowed). With `wrt` (node ids), returns
        {id: gradient} for those ids only, releasing every other gradient as soon as it is used.
        on_final (with `wrt`): called as on_final(id, gradient) the moment a wrt node's gradient
        is final (every consumer has a larger id, so all have run); when it returns True it has
        taken the gradient and the id is left out of the result. Data-parallel training starts
        communicating a gradient here, while the rest of the backward pass still runs.
        free_graph: free each node's saved values right after its VJP ran (PyTorch's backward
        without retain_graph), so the pass never holds every activation and every gradient at
        once; differentiating those nodes again raises.
        """
        self._check_open("backward")
        out = self._node("backward", out_id)
        g0 = self._seed(out, seed)
        keep = None
        if wrt is not None:
            keep = {int(i) for i in ([wrt] if isinstance(wrt, (int, np.integer)) else wrt)}
            for i in keep:
                self._node("backward", i)
        grads: dict[int, AnyBuffer] = {out_id: g0}
        taken: set[int] = set()   # ids whose gradient on_final took
        nodes = self.nodes
        # pending: the nodes holding a gradient not yet pushed to their parents, as a max-heap
        # of ids (parents have lower ids, so the largest is always ready); the walk costs the
        # graph's size, not the tape's length
        pending = [-out_id]
        try:
            while pending:
                i = -heappop(pending)
                g = grads[i]
                node = nodes[i]
                # g is disposable when nothing reads it after this node (i was not asked for)
                disposable = keep is not None and i not in keep
                if node.vjp is not None and node.requires_grad:
                    for j in node.reads:
                        if nodes[j].stale:
                            self._recompute(j)
                    if _EVER_BUMPED[0]:
                        _check_versions(node)
                    needs = [nodes[p].requires_grad for p in node.parents]
                    cot = g
                    if not disposable and getattr(node.vjp, "overwrites_grad", False):
                        cot = g.copy()   # the VJP writes over its cotangent: give it a copy
                    contribs = (node.vjp(cot, needs, node.saved) if AUDIT is None
                                else AUDIT.vjp(self, i, node, cot, needs))
                    self._give(grads, pending, node, cot, contribs,
                               cot_disposable=disposable or cot is not g)
                    if free_graph:
                        self.free_saved(i)
                elif disposable:
                    g.release()   # nothing flows on from here
                if disposable:
                    del grads[i]
                elif on_final is not None and keep is not None and on_final(i, g):
                    del grads[i]
                    taken.add(i)
            if AUDIT is not None:
                AUDIT.handoff()
        except BaseException:
            for g in grads.values():
                g.release()
            raise
        if keep is not None:
            return {i: grads[i] if i in grads else AnyBuffer.zeros(nodes[i].value.shape)
                    for i in sorted(keep) if i not in taken}
        return [grads[i] if i in grads else AnyBuffer.zeros(nodes[i].value.shape)
                for i, n in enumerate(nodes)]

    def _give(self, grads, pending, node, cot, contribs, cot_disposable) -> None:
        """Hand a VJP's contributions to the parents' gradients under the ownership rule (module
        docstring): readers go first and consumers last, so nothing is freed while a later
        contribution still reads it; a disposable cotangent nobody consumed is freed here."""
        nodes = self.nodes
        routed = [(p, c) for p, c in zip(node.parents, contribs)
                  if c is not None and nodes[p].requires_grad]
        last = {c.buf: k for k, (p, c) in enumerate(routed)}   # its last reader may consume it
        consumers = []
        for k, (p, c) in enumerate(routed):
            ours = cot_disposable if c.buf is cot.buf else c.owns
            if ours and last[c.buf] == k:
                consumers.append((p, c))
            else:
                self._add_grad(grads, pending, p, c, False, node)
        kept = False   # the cotangent's payload became a parent's gradient
        for p, c in consumers:
            kept |= self._add_grad(grads, pending, p, c, True, node) and c.buf is cot.buf
        for p, c in zip(node.parents, contribs):   # fresh gradients for parents needing none
            if c is not None and c.owns and c.buf not in last and c.buf is not cot.buf:
                c.release()
        if cot_disposable and not kept:
            cot.release()

    def _add_grad(self, grads, pending, p: int, c: AnyBuffer, consume: bool, node: Node) -> bool:
        """Add contribution c to parent p's gradient. `consume`: c's payload is ours to keep or
        free; otherwise c is only read. Returns True when c's payload became p's gradient."""
        pshape = self.nodes[p].value.shape
        if c.shape != pshape:
            if not node.broadcast:
                if consume:
                    c.release()
                raise RuntimeError(f"{node.name}: VJP produced shape {c.shape} for a parent of "
                                   f"shape {pshape}")
            s = _ops.sum_to(c, shape=pshape)  # the one place broadcasting is undone
            if consume:
                c.release()
            c, consume = s, True
        prev = grads.get(p)
        if prev is None:
            heappush(pending, -p)
            if not consume:
                grads[p] = c.copy()
                return False
            grads[p] = c if c.owns else AnyBuffer._wrap(c.shape, c.buf)   # a view takes its payload
            return True
        grads[p] = _ops.add(prev, c)
        prev.release()
        if consume:
            c.release()
        return False

    def _seed(self, out: Node, seed) -> AnyBuffer:
        shape = out.value.shape
        if seed is None:
            if out.value.numel != 1:
                raise ValueError(f"backward: output '{out.name}' has shape {shape}; a seed "
                                 "(cotangent of that shape) is required for non-scalar outputs")
            return AnyBuffer.full(shape, 1.0)
        if isinstance(seed, AnyBuffer):
            if seed.shape != shape:
                raise ValueError(f"backward: seed shape {seed.shape} does not match output "
                                 f"shape {shape} of '{out.name}'")
            return seed.copy()
        a = np.asarray(seed)
        if a.shape != shape and not (a.size == 1 and out.value.numel == 1):
            raise ValueError(f"backward: seed shape {a.shape} does not match output shape "
                             f"{shape} of '{out.name}'")
        return AnyBuffer.from_numpy(a.reshape(shape))

    # ------------------------------------------------------------------ lifetime
    def release(self) -> int:
        """Free every value and residual the tape owns; returns how many payloads were freed."""
        n = 0
        for node in self.nodes:
            if node.owns_value:
                n += node.value.release()
            for r in node.cleanup:
                n += r.release()
            node.saved = {}
            node.cleanup = ()
            node.vjp = None
        self.released = True
        return n
