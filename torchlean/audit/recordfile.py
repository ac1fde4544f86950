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


def _digest(values, k) -> str:
    return "null" if k is None else '"%016x"' % values[k]


class Lines:
    """Record lines written as json_line writes them (the same bytes), but faster for the records
    made once per op: the JSON of an op's name and shapes is made once per distinct op and
    reused, so a line costs a few string joins instead of a json.dumps of nested lists."""

    def __init__(self):
        self.fixed: dict = {}    # (name, input shapes, output shape) or a shape -> its JSON
        self.labels: dict = {}   # a source label -> its JSON string

    def _fixed(self, key) -> str:
        j = self.fixed.get(key)
        if j is None:
            j = self.fixed[key] = json.dumps(key, separators=(",", ":"))[1:-1]
        return j

    def _source(self, s) -> str:
        if s.__class__ is int:
            return str(s)
        j = self.labels.get(s)
        if j is None:
            j = self.labels[s] = json.dumps(s)
        return j

    def forward(self, step, name, in_shapes, out_shape, d, ins, values) -> str:
        """["F", step, op, [input shapes], output shape, digest, [[source, digest], ...]]"""
        src = self._source
        return (f'["F",{step},{self._fixed((name, in_shapes, out_shape))},'
                f'{_digest(values, d)},['
                + ",".join(f"[{src(s)},{_digest(values, k)}]" for s, k in ins) + "]]\n")

    def backward(self, step, name, source, cot_shape, d, outs, values) -> str:
        """["B", step, op, forward record, cotangent shape, cotangent digest,
        [[shape, digest] | null]]"""
        fixed = self._fixed
        return (f'["B",{step},{fixed((name,))},{self._source(source)},[{fixed(cot_shape)}],'
                f'{_digest(values, d)},['
                + ",".join("null" if o is None else f"[[{fixed(o[0])}],{_digest(values, o[1])}]"
                           for o in outs) + "]]\n")


class Writer:
    """Appends lines and keeps the running checksum; close() writes the trailer."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.f = open(path, "w", encoding="utf-8")
        except OSError as e:
            raise OSError(e.errno, f"torchlean.audit: cannot write the record {path!r}: "
                                   f"{e.strerror}") from None
        self.sha = hashlib.sha256()
        self.counts = {"records": 0, "ops": 0, "vjps": 0, "steps": 0}
        self.header_written = False

    def _put(self, text: str) -> None:
        self.sha.update(text.encode())
        self.f.write(text)

    def header(self, fields: dict) -> None:
        self._put(f"{MAGIC} {VERSION} " + json_line(fields))
        self.header_written = True

    def record(self, rec: list) -> None:
        self._put(json_line(rec))
        self.counts["records"] += 1
        self.counts[{"F": "ops", "B": "vjps", "S": "steps"}[rec[0]]] += 1

    def lines(self, text: str, ops: int, vjps: int, steps: int) -> None:
        """Append record lines made elsewhere (Lines, json_line): ops + vjps + steps of them."""
        self._put(text)
        c = self.counts
        c["records"] += ops + vjps + steps
        c["ops"] += ops
        c["vjps"] += vjps
        c["steps"] += steps

    def close(self, modes) -> None:
        trailer = dict(self.counts, modes=sorted(modes), sha256=self.sha.hexdigest())
        self.f.write("end " + json_line(trailer))
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
