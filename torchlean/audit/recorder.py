"""The recorder: told of every op the tape records, runs every VJP of a backward pass, and
notes every optimizer step, queueing a device digest of each value (digests.Batch) and writing
the log of records and the digests read back into the record file (recordfile.Writer).

Batched digests read a value later than the op that made it, so a queued value must not change
meanwhile. Values needing a gradient never do in a training step: an in-place op on one is
recorded out of place, parameters change only in the optimizer step (after the backward pass),
and the tape's gradients are its own. So the batch runs where that stops holding: at the end of
a backward pass (before parameter updates), before a VJP that writes over its cotangent, before
a parameter's post-gradient hooks (a data-parallel reduction writes gradients in place), at
each optimizer step, and after any op whose output (or a data leaf it read) needs no gradient,
which an in-place op may overwrite at once. A training step thus costs a few native calls.

On the stub (digests.STUB_AT_ONCE) nothing is queued: each hook digests what it records when it
records it (an op's output, a VJP's new payloads together, an optimizer step's values together:
one native call each), so there is nothing to pin, unpin or run later, and a value written in
place after its op was digested before the write. CUDA queues, since a call there is a launch.

It never changes a value: a digest only reads its buffer, and the VJP it runs is the tape's.
"""
from __future__ import annotations

import os
import sys
import warnings
from operator import is_

from torchlean._capture import STATE
from torchlean._abi.cdef import REGISTRY_HASH
from torchlean._loader import lib
from torchlean.buffer import EXPORTS, AnyBuffer
from torchlean.audit.digests import Batch
from torchlean.audit.recordfile import Writer, hyper_json
from torchlean.exact_arith import exact_version
from torchlean.nn.modules.base import live_modules
from torchlean.runtime import backend, is_deterministic


def mode(_exact=lib.tl_is_exact) -> str:
    """The reproducibility mode now (read at every step: a run may change it); exact mode's
    flag read from the library directly, one native call and no wrapper frames."""
    return "exact" if _exact() else "deterministic" if is_deterministic() else "default"


# log items after which an optimizer step writes the log out (about 256 KiB of codes)
FLUSH_ITEMS = 1 << 15

_GROUP = object()   # where a parameter group starts among the hyperparameter values


def _immutable(v) -> bool:
    """Whether v's JSON cannot change while v is the same object."""
    c = v.__class__
    if c is tuple:
        return all(map(_immutable, v))
    return c in (float, int, bool, str, type(None)) or v is _GROUP


def _module_names(params):
    """{id(param): dotted name} and the root modules' buffers [(name, Parameter)] for the
    Modules alive now that hold these parameters (the longest name is the outermost module's;
    of two as long, the older module's). The Modules alive are the ones nn.Module keeps track
    of (live_modules): no scan of every object in the process."""
    ids = {id(p) for p in params}
    names, buffers = {}, {}
    for m in live_modules():
        found = False
        for k, p in m.named_parameters():
            if id(p) in ids:
                found = True
                if len(k) > len(names.get(id(p), "")):
                    names[id(p)] = k
        if found:
            for k, b in m.named_buffers():
                if len(k) > len(buffers.get(id(b), ("",))[0]):
                    buffers[id(b)] = (k, b)
    return names, sorted(buffers.values(), key=lambda kb: kb[0])


class Recorder:
    def __init__(self, path: str, label: str | None = None, batched: bool = True):
        self.writer = Writer(path)
        self.label = label if label is not None else os.path.basename(sys.argv[0] or "-")
        self.batch = Batch(self._digests)
        self.add = self.batch.add     # queue a value's digest: its sequence number
        self.batched = batched        # False: every hook digests what it queued at once
        # when a hook runs the batch: 0 never (the stub digests each value as it is queued,
        # digests.STUB_AT_ONCE), 1 where a queued value may change (see the module docstring),
        # 2 after every record (batched=False)
        self.runs = 0 if self.batch.add == self.batch.add_now else 1 if batched else 2
        # the records not written yet, their fields one after another in one list (no object
        # per record that the garbage collector would count and scan until the flush), written
        # to the file as they are (recordfile.Writer.log); a digest is its sequence number:
        #   "F", step, op, n, shape, digest, (source, digest, shape) * n
        #   "B", step, op, source, cotangent shape, its digest, n, (shape, digest) * n
        #       (a missing contribution: None, None)
        #   "S", step, optimizer, hyperparameter JSON, mode, n,
        #       (name, shape, grad digest, value digest, m, (state key, digest) * m) * n
        self.log: list = []
        self.index = 0                # the index of the next record
        self.ops = 0                  # the forward records among them
        self.step = 0                 # optimizer steps so far
        self.tape = None              # the tape `known` describes
        self.known: dict = {}         # node id -> (source, digest, shape) on that tape
        # payload (Buffer) -> digest of the VJP contributions of the running backward pass
        # (kept until the next op or step: a contribution handed on is a later VJP's cotangent,
        # one handed to a parameter its gradient at the optimizer step). Keyed by the Buffer
        # itself (identity), which the dict keeps alive: no other payload can take its place.
        self.grads: dict = {}
        # storage (Buffer) -> (version, digest) of the parameter values digested after the last
        # optimizer step: the next forward's leaves reuse them while their version stays
        self.after_step: dict = {}
        # id(optimizer) -> (optimizer, param names, module buffers, the step record's rows)
        self.names: dict = {}
        self.hypers: dict = {}        # id(optimizer) -> (optimizer, values, their JSON)
        self.modes = set()
        self.warned = False           # a capture was seen (and said)
        self.now = False              # the op being recorded read a leaf needing no gradient

    # ------------------------------------------------------------------ hooks
    def _source(self, tape, p):
        """(source, digest, shape) of node p, which `known` (of this tape: the caller checked)
        does not hold: the record that produced it, or a leaf digested now."""
        node = tape.nodes[p]
        label = (f"earlier {node.name}" if node.parents else node.name or "input")
        value = node.value
        buf = value.buf
        # a value already freed (read before an optimizer step, say) has no digest to take
        if not buf.live:
            d = None
        else:
            if not node.requires_grad:
                self.now = True     # a data leaf: its owner may write it in place
            seen = self.after_step.get(buf)
            if seen is not None and seen[0] == buf.version:
                d = seen[1]
            else:
                d = self.add(value)
        k = self.known[p] = (label, d, value.shape)
        return k

    def _captured(self) -> bool:
        """Inside a CUDA graph capture: its replays run no Python, so nothing of it is
        recorded (said once)."""
        if STATE.active:
            if not self.warned:
                self.warned = True
                warnings.warn("torchlean.audit: a captured step (torchlean.cuda.graph_step) is "
                              "not recorded, since its replays run no Python; record it "
                              "uncaptured", RuntimeWarning, stacklevel=4)
            return True
        return False

    def op(self, tape, i, node):
        """Node i was just recorded: queue its value's digest and keep its record as the
        objects at hand (its inputs' `known` entries, its shape); flush() makes the line.
        This runs once per op, so it does only that: the fields go straight into the log (no
        list or tuple per record)."""
        if STATE.active and self._captured():
            return
        if self.grads:
            self.grads = {}
        known = self.known
        if tape is not self.tape:
            self.tape = tape
            self.known = known = {}
        parents = node.parents
        out = node.value
        shape = out.shape
        # the inputs' entries and the output's digest first, the record written after them
        # (a refused digest leaves no half-made record); one or two inputs without a loop
        n = len(parents)
        if n == 1:
            a = known.get(parents[0]) or self._source(tape, parents[0])   # (never empty)
        elif n == 2:
            p, q = parents
            a = known.get(p) or self._source(tape, p)
            b = known.get(q) or self._source(tape, q)
        elif n:
            a = []
            for p in parents:
                a += known.get(p) or self._source(tape, p)
        if out.owns or not n or out.buf is not tape.nodes[parents[0]].value.buf:
            d = self.add(out)
        else:
            d = a[1]                # a view: the same bits as its base (its first input)
        log = self.log
        log += ("F", self.step, node.name, n, shape, d)
        if n:
            log += a
            if n == 2:
                log += b
        index = self.index
        known[i] = (index, d, shape)
        self.index = index + 1
        self.ops += 1
        runs = self.runs
        if runs and (self.now or not node.requires_grad or runs == 2):
            # a value needing no gradient may be written in place (an in-place op under
            # no_grad, or on data) before the batch would run: digest it now
            self.now = False
            self.batch.run()

    def vjp(self, tape, i, node, cot, needs):
        if STATE.active and self._captured():
            return node.vjp(cot, needs, node.saved)
        if tape is not self.tape:
            self.tape, self.known = tape, {}
        src = (self.known.get(i) or self._source(tape, i))[0]
        # a cotangent that is one VJP's contribution as it was handed on (no sum) has that
        # contribution's digest
        grads = self.grads
        batch = self.batch
        runs = self.runs
        cbuf = cot.buf
        dc = grads.get(cbuf)
        vjp = node.vjp
        vs = []                     # (digested at once: this record's new values)
        if getattr(vjp, "overwrites_grad", False):
            if dc is None:
                dc = self.add(cot)
            batch.run()             # the VJP writes over its cotangent: digest it first
            grads.pop(cbuf, None)
        elif dc is None:
            if runs:
                dc = self.add(cot)
            else:                   # with the contributions below (the VJP only reads it)
                dc = batch.base
                vs.append(cot)
        contribs = vjp(cot, needs, node.saved)
        log = self.log
        at = len(log)
        log += ("B", self.step, node.name, src, cot.shape, dc, len(contribs))
        try:
            if runs:
                add = self.add
                for c in contribs:
                    if c is None:
                        log += (None, None)
                        continue
                    b = c.buf
                    d = dc if b is cbuf else add(c)
                    grads[b] = d
                    log += (c.shape, d)
            else:
                # digested at once, together: one native call for the VJP's new payloads
                # (`contribs` holds them meanwhile) and a new cotangent, numbered in order from
                # batch.base
                d = batch.base + len(vs)
                for c in contribs:
                    if c is None:
                        log += (None, None)
                        continue
                    b = c.buf
                    if b is cbuf:
                        grads[b] = dc
                        log += (c.shape, dc)
                    else:
                        grads[b] = d
                        log += (c.shape, d)
                        vs.append(c)
                        d += 1
                if vs:
                    batch.digest_values(vs)
        except BaseException:
            del log[at:]
            self.grads = {}         # (entries numbered for digests that may not have been made)
            raise
        self.index += 1
        if runs == 2:
            batch.run()
        return contribs

    def handoff(self, grad=None) -> None:
        """A backward pass ended, or hands the final gradient `grad` to its owner, who may write
        it in place (a data-parallel reduction): digest everything queued (for `grad`, when a
        digest of its payload is queued)."""
        if grad is None or self.batch.holds(grad.buf):
            self.batch.run()

    def _hyper(self, opt) -> str:
        """The JSON of opt's hyperparameters, made again only when a value changed: kept with
        the values it was made from while each is an immutable scalar (or a tuple of them), so
        the same objects give the same text."""
        flat = []
        groups = opt.param_groups
        for g in groups:
            flat += g               # its keys, then its values (the params list among them,
            flat += g.values()      # by identity: what it holds is not in the JSON)
            flat.append(_GROUP)
        seen = self.hypers.get(id(opt))
        if (seen is not None and seen[0] is opt and len(seen[1]) == len(flat)
                and all(map(is_, flat, seen[1]))):
            return seen[2]
        text = hyper_json(groups)
        if all(_immutable(v) for g in groups for k, v in g.items() if k != "params"):
            self.hypers[id(opt)] = (opt, flat, text)
        return text

    def _row(self, opt, p) -> tuple:
        """What the step record reads of parameter p that stays while p keeps its storage:
        (p, id(p), its name in the record or None for p.name, storage, its Buffer, handle
        and shape)."""
        m = p._buf
        return (p, id(p), self.names[id(opt)][1].get(id(p)), m, m.buf, m.handle, m.shape)

    def optimizer_step(self, opt, args, kwargs):
        if STATE.active and self._captured():
            return
        batch = self.batch
        first = batch.base + batch.count    # this step's first digest
        named = self.names.get(id(opt))
        if named is None or named[0] is not opt:
            named = self.names[id(opt)] = (opt, *_module_names(opt.params), [])
        buffers, rows = named[2], named[3]
        # everything queued here is digested before this returns (at once on the stub, else by
        # batch.run below): the handles `hs` go in unpinned (Batch.add_all), hs[j] getting digest
        # first + j, their buffers held meanwhile by the optimizer's state, the parameters and
        # their gradients (nothing runs between here and the digests that could let them go)
        hs, grads, after, entries = [], self.grads, {}, []
        put = hs.append
        states = opt.state
        k = 0
        for group in opt.param_groups:
            for p in group["params"]:
                # the parameter's row, made again where the parameter or its storage changed
                if k < len(rows):
                    row = rows[k]
                    if row[0] is not p or p._buf is not row[3]:
                        row = rows[k] = self._row(opt, p)
                else:
                    row = self._row(opt, p)
                    rows.append(row)
                _, pid, name, m, b, h, shape = row
                st = states.get(pid)
                state = []
                if st:
                    for key in sorted(st):
                        v = st[key]
                        if v.__class__ is AnyBuffer or isinstance(v, AnyBuffer):
                            state += (key, first + len(hs))
                            put(v.handle)
                g = p.grad_buf
                grad = None
                if g is not None:
                    # the digest its VJP's record holds while `g` is that contribution's
                    # payload, never written (same storage, no in-place write since its
                    # allocation, no gradient hook that may write it, not exported to another
                    # library), else queued: a payload written before its VJP handed it on is
                    # digested again, which gives the same digest while its bits are unchanged
                    gb = g.buf
                    grad = grads.get(gb)
                    if grad is None or p.post_grad_hooks or gb.version or gb in EXPORTS:
                        grad = first + len(hs)
                        put(g.handle)
                d = first + len(hs)
                put(h)
                after[b] = (b.version, d)
                entries += (name or p.name or f"param{k}", shape, grad, d, len(state) // 2)
                entries += state
                k += 1
        del rows[k:]
        for key, b in buffers:
            m = b._buf                  # b.mirror() outside a capture
            entries += (key, m.shape, None, first + len(hs), 0)
            put(m.handle)
        if self.runs:
            batch.add_all(hs)
        else:
            batch.digest_handles(hs)
        m = mode()
        self.modes.add(m)
        log = self.log
        log += ("S", self.step, type(opt).__name__, self._hyper(opt), m, k + len(buffers))
        log += entries
        self.index += 1
        batch.run()                 # the step's last values: one call for what is queued
        self.after_step = after
        self.step += 1
        self.grads = {}
        self.tape = None            # parameters changed in place: digest their leaves again
        if len(log) > FLUSH_ITEMS:
            self.flush()

    # ------------------------------------------------------------------ output
    def header(self) -> dict:
        self.modes.add(mode())
        version = sys.modules["torchlean"].__version__   # the parent package, imported first
        return {"torchlean": version, "exact_version": exact_version(),
                "registry": REGISTRY_HASH, "mode": mode(), "backend": backend(),
                "threads": os.environ.get("OMP_NUM_THREADS", ""), "script": self.label,
                "argv": sys.argv[1:]}

    def _header(self) -> None:
        if not self.writer.header_written:
            self.writer.header(self.header())

    def _digests(self, d) -> None:
        """The batch's sink: digests read back, in sequence order, into the file."""
        self._header()
        self.writer.digests(d)

    def flush(self) -> None:
        """Write the log so far (its digests may come later: a reader has the whole file)."""
        self._header()
        if self.log:
            self.writer.log(self.log)
            self.log.clear()

    def close(self) -> None:
        self.batch.read_back()
        self.flush()
        self.batch.release()
        steps = self.step
        self.writer.close({"records": self.index, "ops": self.ops,
                           "vjps": self.index - self.ops - steps, "steps": steps}, self.modes)
