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
gradients, more memory, no recomputation; 0 recomputes. Unset, CUDA recomputes and the stub
keeps (a CPU has the memory, and recomputing GELU's erf costs it time).

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

from heapq import heappop, heappush
from operator import attrgetter

import numpy as np

from torchlean import _capture
from torchlean._generated import ops as _ops
from torchlean._generated.tape_ops import TapeOps
from torchlean._loader import ffi as _ffi, lib as _lib
from torchlean.buffer import _BUF_OUT, EVER_BUMPED, AnyBuffer, Buffer, raise_status
from torchlean.grad_mode import GRAD_MODE
from torchlean.grad_mode import is_grad_enabled, no_grad, set_grad_enabled
from torchlean.runtime import backend, env_flag
from torchlean.saved_versions import check_versions as _check_versions
from torchlean.saved_versions import snapshot_versions as _snapshot_versions
from torchlean.tape_lifetimes import ValueLifetimes
from torchlean.tape_nodes import Node, NodeTable, freed_vjp

# the names the rest of the package and its users import from here
__all__ = ["AUDIT", "KEEP_ACTIVATIONS", "Node", "NodeTable", "Tape", "freed_vjp",
           "is_grad_enabled", "no_grad", "set_grad_enabled"]

_new_node = Node.__new__
_new_buffer = Buffer.__new__
_new_any = AnyBuffer.__new__
_ffi_new = getattr(getattr(_ffi, "_backend", None), "newp", None) or _ffi.new
_buf_full = _lib.tl_buf_full
_requires_grad = attrgetter("requires_grad")   # of a Node, in C (no comprehension frame)

# No recomputation when set. Unset, it follows the backend: the stub keeps such values, as
# PyTorch does (on a CPU a recompute is compute, and GELU's erf costs more there than the memory
# it saves), CUDA recomputes (GPU memory is the scarce one, and the kernels are memory-bound).
_KEEP = env_flag("TORCHLEAN_KEEP_ACTIVATIONS")
KEEP_ACTIVATIONS = backend() == "stub" if _KEEP is None else _KEEP

# The recorder of torchlean.audit while one records (None otherwise): told of every recorded op
# (AUDIT.op) and runs every VJP of a backward pass (AUDIT.vjp), digesting what they produce.
AUDIT = None


class Tape(ValueLifetimes, TapeOps):
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
        if value.__class__ is AnyBuffer or isinstance(value, AnyBuffer):
            if not value.buf.live:
                raise ValueError(f"leaf: value of shape {value.shape} was already released")
            val, owns = value, False
        elif isinstance(value, np.ndarray) or np.isscalar(value) or isinstance(value, (list, tuple)):
            val, owns = AnyBuffer.from_numpy(value), True
        else:
            raise TypeError(f"leaf: value must be a NumPy array or AnyBuffer, got {type(value).__name__}")
        if self.released:
            self._check_open("leaf")   # raises
        # Node(name, val, requires_grad, owns_value=owns) without the __init__ frame (a
        # parameter's leaf is recorded once per parameter per step)
        node = _new_node(Node)
        node.name = name
        node.value = val
        node.requires_grad = requires_grad if requires_grad.__class__ is bool else bool(requires_grad)
        node.parents = ()
        node.vjp = None
        node.saved = {}
        node.cleanup = ()
        node.owns_value = owns
        node.broadcast = False
        node.pinned = True
        node.held = False
        node.users = 0
        node.reads = ()
        node.dropped = False
        node.views = ()
        node.recompute = None
        node.stale = False
        node.consumers = 0
        node.versions = None
        nodes = self.nodes
        i = nodes.next_id
        nodes[i] = node
        nodes.next_id = i + 1
        return i

    def value(self, i: int) -> AnyBuffer:
        """The value of node i (owned by the tape: copy it to keep it past release())."""
        return self._node("value", i).value

    def _check_open(self, op: str) -> None:
        if self.released:
            raise ValueError(f"{op}: this tape was released (Tape.release()); record on a new Tape")

    def _node(self, op: str, i) -> Node:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"{op}: node ids are ints, got {type(i).__name__} {i!r}")
        if not 0 <= i < self.nodes.next_id:
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
        if vjp is not None and GRAD_MODE.enabled:
            for p in parents:
                if nodes[p].requires_grad:
                    req = True
                    break
        i = nodes.next_id
        node = _new_node(Node)
        node.name = name
        node.value = out
        node.requires_grad = req
        node.parents = parents
        node.cleanup = ()
        node.owns_value = out.owns
        node.broadcast = broadcast
        node.pinned = False
        node.held = False
        node.dropped = False
        node.views = ()
        node.stale = False
        node.consumers = 0
        node.users = 0
        node.reads = ()
        if not req:
            node.vjp = None
            node.saved = {}  # keep nothing alive for a node that never runs its VJP
            node.recompute = None
            node.versions = None
        else:
            node.vjp = vjp
            node.recompute = recompute
            # Count the users of what the VJP will read (saved inputs, a saved output: `reads`
            # names their nodes) and of the parents of a view (below: it aliases their memory);
            # a value with no user may be freed early (drop_value, a graph-freeing backward).
            # Index and mask arrays are snapshots: mutating the caller's array after the
            # forward must not change the gradient.
            reads = []
            for k, v in saved.items():
                if v.__class__ is AnyBuffer:
                    if v is out:
                        reads.append(i)
                        continue
                    for p in parents:
                        parent = nodes[p]
                        if parent.value is v:
                            reads.append(p)
                            parent.users += 1
                            break
                elif v.__class__ is np.ndarray or v.__class__ is list:
                    if not (_capture.STATE.active and _capture.is_int_input(v)):
                        saved[k] = np.array(v, copy=True)   # (a captured step's integer
                                                            # input is read in place)
            if reads:
                node.reads = tuple(reads)
                node.users = reads.count(i)
            node.saved = saved
            # the versions of the storages the VJP reads (None: all at 0, before any
            # in-place op of the process); Tape.backward checks them before the VJP runs
            # (snapshot_versions, inline: a loop over what the loop above just read)
            if EVER_BUMPED[0]:
                versions = {}
                for k, v in saved.items():
                    if v.__class__ is AnyBuffer:
                        versions[k] = v.buf.version
                node.versions = versions
            else:
                node.versions = None
            # a parent that needs a gradient counts this VJP among its consumers: while one is
            # unrun, its graph stays
            for p in parents:
                parent = nodes[p]
                if parent.requires_grad:
                    parent.consumers += 1
        if not out.owns:
            for p in parents:
                nodes[p].users += 1
                nodes[p].views += (i,)
        nodes[i] = node
        nodes.next_id = i + 1
        if AUDIT is not None:
            AUDIT.op(self, i, node)
        return i

    def _recomputable(self, i: int) -> bool:
        """May node i's value be freed and recomputed for the VJPs that read it? Its op can give
        it again (from what the node keeps until its own VJP ran), and no Tensor wraps it or any
        live view of it, nor was it handed out."""
        node = self.nodes[i]
        if (node.recompute is None or KEEP_ACTIVATIONS or node.vjp is freed_vjp or node.stale
                or node.dropped or node.held or node.pinned or i in self.referenced):
            return False
        return self._views_free(i)


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
        if self.released:
            self._check_open("backward")   # raises
        out = self._node("backward", out_id)
        g0 = self._seed(out, seed)
        keep = order = None
        if wrt is not None:
            keep = set(map(int, [wrt] if isinstance(wrt, (int, np.integer)) else wrt))
            for i in keep:
                if not 0 <= i < self.nodes.next_id:
                    self._node("backward", i)   # raises, naming the id
            order = sorted(keep)
        return self._backward(out_id, g0, keep, order, on_final, free_graph)

    def _backward(self, out_id: int, g0: AnyBuffer, keep, order, on_final, free_graph):
        """backward() once its arguments were checked: g0 the seed (the pass's own), keep the
        set of wrt ids (None: every node) and order the same ids sorted (the result's order).
        Session.backward calls it directly (its ids come from the graph walk)."""
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
                    if EVER_BUMPED[0]:
                        # check_versions's passing case inline: every snapshotted storage still
                        # at its version (anything else, or no snapshot, takes the full check)
                        vs = node.versions
                        if vs is None:
                            _check_versions(node)
                        else:
                            saved = node.saved
                            for k, v in vs.items():
                                if saved[k].buf.version != v:
                                    _check_versions(node)   # raises, unless shape-only
                                    break
                    needs = list(map(_requires_grad, map(nodes.__getitem__, node.parents)))
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
            result = {}
            for i in order:
                if i not in taken:
                    result[i] = grads[i] if i in grads else AnyBuffer.zeros(nodes[i].value.shape)
            return result
        return [grads[i] if i in grads else AnyBuffer.zeros(nodes[i].value.shape)
                for i, n in enumerate(nodes)]

    def _give(self, grads, pending, node, cot, contribs, cot_disposable) -> None:
        """Hand a VJP's contributions to the parents' gradients under the ownership rule (module
        docstring): readers go first and consumers last, so nothing is freed while a later
        contribution still reads it; a disposable cotangent nobody consumed is freed here."""
        nodes = self.nodes
        if len(contribs) == 1:
            # one parent (the general rule below, for a single contribution): the contribution
            # is its own last one, so it is consumed when it is ours
            c = contribs[0]
            kept = False
            if c is not None:
                p = node.parents[0]
                if nodes[p].requires_grad:
                    if c.buf is cot.buf:
                        if cot_disposable:
                            kept = self._add_grad(grads, pending, p, c, True, node)
                        else:
                            self._add_grad(grads, pending, p, c, False, node)
                    else:
                        self._add_grad(grads, pending, p, c, c.owns, node)
                elif c.owns and c.buf is not cot.buf:
                    c.release()   # a fresh gradient for a parent needing none
            if cot_disposable and not kept:
                cot.release()
            return
        if len(contribs) == 2:
            # two parents needing a gradient, given two distinct payloads other than the
            # cotangent's (a binary op's VJP): the general rule below with each contribution
            # its own last one, so readers (borrowed) first, then consumers (fresh), in order
            c0, c1 = contribs
            if (c0 is not None and c1 is not None and c0.buf is not c1.buf
                    and c0.buf is not cot.buf and c1.buf is not cot.buf):
                p0, p1 = node.parents[0], node.parents[1]
                if nodes[p0].requires_grad and nodes[p1].requires_grad:
                    o0, o1 = c0.owns, c1.owns
                    if not o0:
                        self._add_grad(grads, pending, p0, c0, False, node)
                    if not o1:
                        self._add_grad(grads, pending, p1, c1, False, node)
                    if o0:
                        self._add_grad(grads, pending, p0, c0, True, node)
                    if o1:
                        self._add_grad(grads, pending, p1, c1, True, node)
                    if cot_disposable:
                        cot.release()
                    return
        routed = []   # (parent, contribution) for the parents needing a gradient
        last = {}     # payload -> index of its last contribution in routed: it may consume it
        unrouted = []   # contributions to parents needing none
        for p, c in zip(node.parents, contribs):
            if c is not None:
                if nodes[p].requires_grad:
                    last[c.buf] = len(routed)
                    routed.append((p, c))
                else:
                    unrouted.append(c)
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
        for c in unrouted:   # fresh gradients for parents needing none
            if c.owns and c.buf not in last and c.buf is not cot.buf:
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
            if out.value.buf.n != 1:
                raise ValueError(f"backward: output '{out.name}' has shape {shape}; a seed "
                                 "(cotangent of that shape) is required for non-scalar outputs")
            # a fresh 1-element payload of 1.0 (one native fill; the shape is the output's,
            # already a tuple of ints): the seed is the pass's own, a VJP may write it or a
            # leaf keep it as its gradient, so it is never shared
            out_h = _ffi_new(_BUF_OUT, None)
            st = _buf_full(1, 1.0, out_h)
            if st:
                raise_status("AnyBuffer.full", st)
            b = _new_buffer(Buffer)   # Buffer.__del__ destroys the handle
            b.handle = h = out_h[0]
            b.n = 1
            b.live = True
            b.version = 0
            y = _new_any(AnyBuffer)
            y.shape = shape if shape.__class__ is tuple else tuple(map(int, shape))
            y.buf = b
            y.owns = True
            y.handle = h
            return y
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
        # the recorded nodes only (dict.values: a forgotten one reads back as the shared
        # released placeholder, which holds nothing)
        for node in dict.values(self.nodes):
            if node.owns_value:
                n += node.value.release()
            for r in node.cleanup:
                n += r.release()
            node.saved = {}
            node.cleanup = ()
            node.vjp = None
        self.released = True
        return n
