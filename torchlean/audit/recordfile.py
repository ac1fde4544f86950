"""The .tlaudit file: one header line, one JSON line per record, one trailer line.

    tlaudit 1 {"torchlean": ..., "exact_version": ..., "registry": ..., "mode": ..., ...}
    ["F", step, op, [input shapes], output shape, output digest, [[source, digest], ...]]
    ["B", step, op, forward record, cotangent shape, cotangent digest, [[shape, digest] | null]]
    ["S", step, optimizer, hyperparameters, mode, [[name, shape, grad, value, {state: digest}]]]
    end {"records": R, "ops": F, "vjps": B, "steps": S, "modes": [...], "sha256": ...}

An input's source is the index of the record that produced it, or a label (a leaf: a
parameter, a batch, a value made outside the tape). Digests are 16 hex digits (torchlean.audit
.digest). The trailer's sha256 covers every byte before it, so a cut or edited file is refused.
"""
from __future__ import annotations

import hashlib
import json

MAGIC = "tlaudit"
VERSION = 1


class RecordFileError(ValueError):
    """A file that is not a complete, intact record (the message names the file)."""


def json_line(obj) -> str:
    """One JSON line as a record file holds it (no spaces)."""
    return json.dumps(obj, separators=(",", ":")) + "\n"


class Lines:
    """Record lines written as json_line writes them (the same bytes), but faster for the
    records made once per op: the JSON of an op's name and shapes is made once per distinct op
    and reused, and digests come as JSON strings already (Batch.texts: digest k is texts[k -
    first]), so a line costs a few string joins instead of a json.dumps of nested lists."""

    # (name, input shapes, output shape), (name, shape) or a shape -> its JSON without the
    # brackets; a source label -> its JSON string. Shared by every record of the process (a
    # program runs the same ops step after step), emptied when they grow past CACHED entries.
    fixed: dict = {}
    labels: dict = {}
    CACHED = 1 << 14

    def _fixed(self, key) -> str:
        if len(self.fixed) > self.CACHED:
            self.fixed.clear()
        j = self.fixed[key] = json.dumps(key, separators=(",", ":"))[1:-1]
        return j

    def _label(self, s) -> str:
        if len(self.labels) > self.CACHED:
            self.labels.clear()
        j = self.labels[s] = json.dumps(s)
        return j

    # Each method makes the line of the record starting at log[j] (Recorder.log says how its
    # fields follow one another) and returns it with the index of the next record.

    def forward(self, log, j, texts, first):
        """["F", step, op, [input shapes], output shape, digest, [[source, digest], ...]];
        the inputs come last, as (source, digest, shape) each; texts[k - first]: digest k as
        JSON (a None digest is null). One pass over the inputs gives both the shapes (the cache
        key) and the pairs."""
        labels = self.labels
        step, name, n, out_shape, d = log[j + 2:j + 7]
        k = j + 7 + 3 * n
        shapes, pairs = [], []
        ins = iter(log[j + 7:k])
        for s, dk, shape in zip(ins, ins, ins):
            shapes.append(shape)
            pairs.append(f'[{s if s.__class__ is int else labels.get(s) or self._label(s)},'
                         f'{"null" if dk is None else texts[dk - first]}]')
        key = (name, tuple(shapes), out_shape)
        fixed = self.fixed.get(key)
        if fixed is None:
            fixed = self._fixed(key)
        return (f'["F",{step},{fixed},{"null" if d is None else texts[d - first]},'
                f'[{",".join(pairs)}]]\n'), k

    def backward(self, log, j, texts, first):
        """["B", step, op, forward record, cotangent shape, cotangent digest,
        [[shape, digest] | null]]"""
        fixed = self.fixed
        step, name, source, cot_shape, d, n = log[j + 2:j + 8]
        if source.__class__ is not int:
            source = self.labels.get(source) or self._label(source)
        cs = fixed.get(cot_shape)
        if cs is None:
            cs = self._fixed(cot_shape)
        k = j + 8 + 2 * n
        parts = []
        outs = iter(log[j + 8:k])
        for shape, dk in zip(outs, outs):
            if shape is None:
                parts.append("null")
                continue
            os = fixed.get(shape)
            if os is None:
                os = self._fixed(shape)
            parts.append(f'[[{os}],{"null" if dk is None else texts[dk - first]}]')
        return (f'["B",{step},{self.labels.get(name) or self._label(name)},{source},'
                f'[{cs}],{"null" if d is None else texts[d - first]},[{",".join(parts)}]]\n'), k

    def step(self, log, j, texts, first):
        """["S", step, optimizer, hyperparameters (JSON text), mode, [[name, shape, grad, value,
        {state: digest}]]]; an entry comes as name, shape, grad, value, m, (state, digest) * m."""
        labels, fixed = self.labels, self.fixed
        step, opt, hyper, mode, n = log[j + 2:j + 7]
        k = j + 7
        parts = []
        for _ in range(n):
            name, shape, g, v, m = log[k:k + 5]
            key = (name, shape)
            js = fixed.get(key)
            if js is None:
                js = self._fixed(key)
            state = iter(log[k + 5:k + 5 + 2 * m])
            st = ",".join([f"{labels.get(s) or self._label(s)}:{texts[d - first]}"
                           for s, d in zip(state, state)])
            parts.append(f'[{js},{"null" if g is None else texts[g - first]},'
                         f'{texts[v - first]},{{{st}}}]')
            k += 5 + 2 * m
        return (f'["S",{step},{labels.get(opt) or self._label(opt)},{hyper},'
                f'{labels.get(mode) or self._label(mode)},[{",".join(parts)}]]\n'), k


def hyper_json(groups) -> str:
    """The JSON of an optimizer's hyperparameters as a step record holds them: [{name: value}
    per group, every item but its params, tuples as lists]."""
    return json.dumps([{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()
                        if k != "params"} for g in groups], separators=(",", ":"))


class Writer:
    """Appends lines and keeps the running checksum; close() writes the trailer."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.f = open(path, "wb", buffering=1 << 20)
        except OSError as e:
            raise OSError(e.errno, f"torchlean.audit: cannot write the record {path!r}: "
                                   f"{e.strerror}") from None
        self.sha = hashlib.sha256()
        self.counts = {"records": 0, "ops": 0, "vjps": 0, "steps": 0}
        self.header_written = False

    def _put(self, text: str) -> None:
        data = text.encode()
        self.sha.update(data)
        self.f.write(data)

    def header(self, fields: dict) -> None:
        self._put(f"{MAGIC} {VERSION} " + json_line(fields))
        self.header_written = True

    def lines(self, text: str, ops: int, vjps: int, steps: int) -> None:
        """Append record lines made by Lines: ops + vjps + steps of them."""
        self._put(text)
        c = self.counts
        c["records"] += ops + vjps + steps
        c["ops"] += ops
        c["vjps"] += vjps
        c["steps"] += steps

    def close(self, modes) -> None:
        trailer = dict(self.counts, modes=sorted(modes), sha256=self.sha.hexdigest())
        self.f.write(("end " + json_line(trailer)).encode())
        self.f.close()


class Record:
    """A read and checked record file: header (dict), records (lists), trailer (dict) and the
    record lines as written (what the certificate digests)."""

    def __init__(self, path: str):
        self.path = path
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise RecordFileError(f"{path}: cannot read: {e.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise RecordFileError(f"{path}: not a torchlean audit record (not UTF-8 text)") from None
        lines = text.split("\n")
        parts = lines[0].split(" ", 2)
        if parts[0] != MAGIC or len(parts) < 3:
            raise RecordFileError(f"{path}: not a torchlean audit record (the first line is not "
                                  f"'{MAGIC} <version> <header>')")
        version, fields = parts[1], parts[2]
        if version != str(VERSION):
            raise RecordFileError(f"{path}: record format version {version}; this torchlean "
                                  f"reads version {VERSION}")
        if lines[-1] != "" or len(lines) < 3 or not lines[-2].startswith("end "):
            raise RecordFileError(f"{path}: truncated: no trailer line (the recording process "
                                  "did not finish, or the file was cut)")
        self.trailer = self._json(lines[-2][4:], "trailer")
        body = text[:len(text) - len(lines[-2]) - 1]
        if hashlib.sha256(body.encode()).hexdigest() != self.trailer.get("sha256"):
            raise RecordFileError(f"{path}: corrupted: the checksum of its contents does not "
                                  "match its trailer (the file was edited or damaged)")
        self.header = self._json(fields, "header")
        self.lines = lines[1:-2]
        self.records = [self._json(s, f"record {k}") for k, s in enumerate(self.lines)]
        if len(self.records) != self.trailer.get("records"):
            raise RecordFileError(f"{path}: corrupted: {len(self.records)} records, the trailer "
                                  f"counts {self.trailer.get('records')}")

    def _json(self, s: str, what: str):
        try:
            return json.loads(s)
        except ValueError:
            raise RecordFileError(f"{self.path}: corrupted: its {what} is not valid") from None

    @property
    def steps(self) -> int:
        return self.trailer["steps"]

    @property
    def ops(self) -> int:
        return self.trailer["ops"] + self.trailer["vjps"]
