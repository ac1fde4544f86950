"""The recorder: told of every op the tape records, runs every VJP of a backward pass, and
notes every optimizer step, queueing a device digest of each value (digests.Ring) and writing
the records (recordfile.Writer) once their digests are read back.

It never changes a value: a digest only reads its buffer, and the VJP it runs is the tape's.
"""
from __future__ import annotations

import gc
import os
import sys
import warnings

from torchlean import _capture
from torchlean._generated.cdef import REGISTRY_HASH
from torchlean.buffer import AnyBuffer
from torchlean.audit.digests import Ring
from torchlean.audit.recordfile import Writer
from torchlean.exact_arith import exact_version
from torchlean.nn.modules.base import Module
from torchlean.runtime import backend, is_deterministic, is_exact


def mode() -> str:
    return "exact" if is_exact() else "deterministic" if is_deterministic() else "default"


def _module_names(params):
    """{id(param): dotted name} and the root modules' buffers [(name, Parameter)] for the
    Modules alive now that hold these parameters (the longest name is the outermost module's)."""
    ids = {id(p) for p in params}
    names, buffers = {}, {}
    for m in gc.get_objects():
        if isinstance(m, Module):
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
    def __init__(self, path: str, label: str | None = None):
        self.writer = Writer(path)
        self.label = label if label is not None else os.path.basename(sys.argv[0] or "-")
        self.ring = Ring(self.flush)
        self.records: list = []       # records whose digests may not be read back yet
        self.index = 0                # the index of the next record
        self.step = 0                 # optimizer steps so far
        self.tape = None              # the tape `known` describes
        self.known: dict = {}         # node id -> (source, digest) on that tape
        # id(payload) -> (payload, digest) of the VJP contributions of the running backward pass
        # (kept until the next op or step: a contribution handed on is a later VJP's cotangent)
        self.grads: dict = {}
        self.names: dict = {}         # id(optimizer) -> (param names, module buffers)
        self.modes = set()
        self.warned = False           # a capture was seen (and said)

    # ------------------------------------------------------------------ hooks
    def _source(self, tape, p):
        """(source, digest) of node p: the record that produced it, or a leaf digested now."""
        if tape is not self.tape:
            self.tape, self.known = tape, {}
        k = self.known.get(p)
        if k is None:
            node = tape.nodes[p]
            label = (f"earlier {node.name}" if node.parents else node.name or "input")
            # a value already freed (read before an optimizer step, say) has no digest to take
            d = self.ring.add(node.value) if node.value.buf.live else None
            k = self.known[p] = (label, d)
        return k

    def _captured(self) -> bool:
        """Inside a CUDA graph capture: its replays run no Python, so nothing of it is
        recorded (said once)."""
        if _capture.STATE.active:
            if not self.warned:
                self.warned = True
                warnings.warn("torchlean.audit: a captured step (torchlean.cuda.graph_step) is "
                              "not recorded, since its replays run no Python; record it "
                              "uncaptured", RuntimeWarning, stacklevel=4)
            return True
        return False

    def op(self, tape, i, name, out, parents):
        if self._captured():
            return
        if self.grads:
            self.grads = {}
        ins = [self._source(tape, p) for p in parents]
        nodes = tape.nodes
        if not out.owns and parents and out.buf is nodes[parents[0]].value.buf:
            d = ins[0][1]           # a view: the same bits as its base
        else:
            d = self.ring.add(out)
        self.known[i] = (self.index, d)
        self._add(["F", self.step, name, [nodes[p].value.shape for p in parents], out.shape, d,
                   ins])

    def vjp(self, tape, i, node, cot, needs):
        if self._captured():
            return node.vjp(cot, needs, node.saved)
        src = self._source(tape, i)[0]
        # before the VJP, which may write over its cotangent; a cotangent that is one VJP's
        # contribution as it was handed on (no sum) has that contribution's digest
        seen = self.grads.get(id(cot.buf))
        dc = seen[1] if seen is not None and seen[0] is cot.buf else self.ring.add(cot)
        contribs = node.vjp(cot, needs, node.saved)
        outs = []
        for c in contribs:
            if c is None:
                outs.append(None)
                continue
            d = dc if c.buf is cot.buf else self.ring.add(c)
            self.grads[id(c.buf)] = (c.buf, d)
            outs.append((c.shape, d))
        self._add(["B", self.step, node.name, src, cot.shape, dc, outs])
        return contribs

    def optimizer_step(self, opt, args, kwargs):
        if self._captured():
            return
        if id(opt) not in self.names:
            self.names[id(opt)] = _module_names(opt.params)
        names, buffers = self.names[id(opt)]
        entries = []
        for k, p in enumerate(opt.params):
            st = opt.state.get(id(p)) or {}
            state = {key: self.ring.add(v) for key, v in sorted(st.items())
                     if isinstance(v, AnyBuffer)}
            grad = None if p.grad_buf is None else self.ring.add(p.grad_buf)
            entries.append([names.get(id(p)) or p.name or f"param{k}", list(p.shape), grad,
                            self.ring.add(p.mirror()), state])
        for k, b in buffers:
            entries.append([k, list(b.shape), None, self.ring.add(b.mirror()), {}])
        hyper = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()
                  if k != "params"} for g in opt.param_groups]
        m = mode()
        self.modes.add(m)
        self._add(["S", self.step, type(opt).__name__, hyper, m, entries])
        self.step += 1
        self.grads = {}
        self.tape = None            # parameters changed in place: digest their leaves again

    # ------------------------------------------------------------------ output
    def _add(self, rec) -> None:
        self.records.append(rec)
        self.index += 1

    def header(self) -> dict:
        self.modes.add(mode())
        version = sys.modules["torchlean"].__version__   # the parent package, imported first
        return {"torchlean": version, "exact_version": exact_version(),
                "registry": REGISTRY_HASH, "mode": mode(), "backend": backend(),
                "threads": os.environ.get("OMP_NUM_THREADS", ""), "script": self.label,
                "argv": sys.argv[1:]}

    def flush(self) -> None:
        """Write every record whose digests were read back (all of them after read_back)."""
        w = self.writer
        if not w.header_written:
            w.header(self.header())
        for rec in self.records:
            w.record(rec)
        self.records = []

    def close(self) -> None:
        self.ring.read_back()
        self.flush()
        self.ring.release()
        self.writer.close(self.modes)

