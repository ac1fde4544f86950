"""The .tlaudit file: a header line, blocks of the recorder's log and of digests, a trailer line.

    tlaudit 2 {"torchlean": ..., "exact_version": ..., "registry": ..., "mode": ..., ...}
    t ["linear",[8,16],"input",...]      objects new to the log, in the order they got codes
    l <base64 of int64 codes>            the recorder's log (Recorder.log says its layout)
    d <base64 of uint64 digests>         digests in sequence order (a log's digest k: the k-th)
    ...
    end {"records": R, "ops": F, "vjps": B, "steps": S, "modes": [...], "sha256": ...}

Recording writes its log as it made it, each item an int64 code: an int (steps, counts, record
indices, digest numbers: never negative) as itself, anything else (a name, a shape, a label, None)
as -1 - its index among the objects the `t` lines introduced. So a step's records cost the
writer two C-speed conversions instead of a formatted line each; the reader makes the lines:

    ["F", step, op, [input shapes], output shape, output digest, [[source, digest], ...]]
    ["B", step, op, forward record, cotangent shape, cotangent digest, [[shape, digest] | null]]
    ["S", step, optimizer, hyperparameters, mode, [[name, shape, grad, value, {state: digest}]]]

each the canonical JSON of its record (json_line), which is what the certificate digests and
what version 1 files (those lines themselves between header and trailer) held. An input's
source is the index of the record that produced it, or a label (a leaf: a parameter, a batch, a
value made outside the tape). Digests are 16 hex digits (torchlean.audit.digest). The
trailer's sha256 covers every byte before it, so a cut or edited file is refused.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import struct
from itertools import filterfalse

import numpy as np

MAGIC = "tlaudit"
VERSION = 2
READS = ("1", "2")


class RecordFileError(ValueError):
    """A file that is not a complete, intact record (the message names the file)."""


def json_line(obj) -> str:
    """One JSON line as a record file holds it (no spaces)."""
    return json.dumps(obj, separators=(",", ":")) + "\n"


def hyper_json(groups) -> str:
    """The JSON of an optimizer's hyperparameters as a step record holds them: [{name: value}
    per group, every item but its params, tuples as lists]."""
    return json.dumps([{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()
                        if k != "params"} for g in groups], separators=(",", ":"))


def _int64s(xs: list) -> bytes:
    """xs as little-endian int64s; struct.error if one is not an int. (One struct call packs a
    list about twice as fast as array('q') builds one.)"""
    return struct.pack(f"<{len(xs)}q", *xs)


class Writer:
    """Appends blocks and keeps the running checksum; close() writes the trailer."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.f = open(path, "wb", buffering=1 << 20)
        except OSError as e:
            raise OSError(e.errno, f"torchlean.audit: cannot write the record {path!r}: "
                                   f"{e.strerror}") from None
        self.sha = hashlib.sha256()
        self.codes: dict = {}          # object of the log -> its (negative) code
        self.header_written = False

    def _put(self, data: bytes) -> None:
        self.sha.update(data)
        self.f.write(data)

    def header(self, fields: dict) -> None:
        self._put(f"{MAGIC} {VERSION} {json_line(fields)}".encode())
        self.header_written = True

    def log(self, items: list) -> None:
        """Append the log items (ints >= 0 and hashable JSON values: strings, tuples of ints,
        None), giving each object not seen before its code in a `t` line first."""
        codes = self.codes
        # objects with a code as that code (a record's first block, whose objects are all new,
        # is left as it is: mapped once, below)
        coded = list(map(codes.get, items, items)) if codes else items
        try:
            data = _int64s(coded)
        except struct.error:            # objects without a code yet (left as they are)
            new = list(dict.fromkeys(filterfalse(int.__instancecheck__, coded)))  # first use first
            for x in new:
                codes[x] = -1 - len(codes)
            self._put(b"t " + json_line(new).encode())
            data = _int64s(list(map(codes.get, coded, coded)))
        self._put(b"l " + base64.b64encode(data) + b"\n")

    def digests(self, d: np.ndarray) -> None:
        """Append digests (uint64), the next ones in sequence order."""
        self._put(b"d " + base64.b64encode(np.ascontiguousarray(d, dtype="<u8")) + b"\n")

    def close(self, counts: dict, modes) -> None:
        trailer = dict(counts, modes=sorted(modes), sha256=self.sha.hexdigest())
        self.f.write(("end " + json_line(trailer)).encode())
        self.f.close()


_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_NIBBLES = np.arange(60, -4, -4, dtype=np.uint64)   # each hex digit's shift, highest first


def hex_digests(d: np.ndarray) -> list[str]:
    """Digests (uint64) as a record holds them: strings of 16 hex digits ('%016x' % d)."""
    d = np.asarray(d, dtype=np.uint64)
    text = _HEX[(d[:, None] >> _NIBBLES) & np.uint64(15)]
    return text.view("S16").ravel().astype(str).tolist()


def _tuples(x):
    return tuple(x) if x.__class__ is list else x


class _Decoder:
    """Version 2's blocks back into records (lists, as json.loads of their lines gives them)."""

    def __init__(self, fail):
        self.fail = fail
        self.objects: list = []
        self.items: list = []
        self.digests: list = []

    def block(self, kind: str, payload: str, k: int) -> None:
        if kind == "t":
            try:
                new = json.loads(payload)
            except ValueError:
                new = None
            if not isinstance(new, list):
                self.fail(f"block {k} (objects) is not valid")
            self.objects += map(_tuples, new)
            return
        try:
            raw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raw = b"?"
        if len(raw) % 8:
            self.fail(f"block {k} ({'log' if kind == 'l' else 'digests'}) is not valid")
        if kind == "l":
            codes = np.frombuffer(raw, "<i8").tolist()
            objects = self.objects
            if codes and min(codes) < -len(objects):
                self.fail(f"block {k} (log) names an object the file never introduced")
            self.items += [c if c >= 0 else objects[-1 - c] for c in codes]
        else:
            self.digests.append(np.frombuffer(raw, "<u8"))

    def records(self) -> list:
        texts = hex_digests(np.concatenate(self.digests)) if self.digests else []
        log, out, j = self.items, [], 0

        def dig(k):
            return None if k is None else texts[k]

        def take(n):                    # the next n items, all of them there
            nonlocal j
            if n.__class__ is not int or n < 0 or j + n > len(log):
                raise IndexError
            j += n
            return log[j - n:j]
        try:
            while j < len(log):
                kind, step, name = take(3)
                if kind == "F":
                    n, shape, d = take(3)
                    ins = take(3 * n)
                    out.append(["F", step, name, [list(s) for s in ins[2::3]], list(shape), dig(d),
                                [[s, dig(dk)] for s, dk in zip(ins[0::3], ins[1::3])]])
                elif kind == "B":
                    src, shape, d, n = take(4)
                    outs = take(2 * n)
                    out.append(["B", step, name, src, list(shape), dig(d),
                                [None if s is None else [list(s), dig(dk)]
                                 for s, dk in zip(outs[0::2], outs[1::2])]])
                elif kind == "S":
                    hyper, mode, n = take(3)
                    entries = []
                    for _ in range(n):
                        pname, shape, g, v, m = take(5)
                        state = take(2 * m)
                        entries.append([pname, list(shape), dig(g), dig(v),
                                        {s: dig(d) for s, d in zip(state[0::2], state[1::2])}])
                    out.append(["S", step, name, json.loads(hyper), mode, entries])
                else:
                    self.fail(f"its log has an unknown record kind at item {j - 3}")
        except (ValueError, TypeError, IndexError):
            self.fail(f"its log breaks off or is inconsistent near item {j}")
        return out


class Record:
    """A read and checked record file: header (dict), records (lists), trailer (dict) and the
    record lines (what the certificate digests)."""

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
        if version not in READS:
            raise RecordFileError(f"{path}: record format version {version}; this torchlean "
                                  f"reads versions {', '.join(READS)}")
        if lines[-1] != "" or len(lines) < 3 or not lines[-2].startswith("end "):
            raise RecordFileError(f"{path}: truncated: no trailer line (the recording process "
                                  "did not finish, or the file was cut)")
        self.trailer = self._json(lines[-2][4:], "trailer")
        body = text[:len(text) - len(lines[-2]) - 1]
        if hashlib.sha256(body.encode()).hexdigest() != self.trailer.get("sha256"):
            raise RecordFileError(f"{path}: corrupted: the checksum of its contents does not "
                                  "match its trailer (the file was edited or damaged)")
        self.header = self._json(fields, "header")
        if version == "1":
            self.lines = lines[1:-2]
            self.records = [self._json(s, f"record {k}") for k, s in enumerate(self.lines)]
        else:
            dec = _Decoder(self._fail)
            for k, line in enumerate(lines[1:-2]):
                kind, _, payload = line.partition(" ")
                if kind not in ("t", "l", "d"):
                    self._fail(f"block {k} is of no known kind")
                dec.block(kind, payload, k)
            self.records = dec.records()
            self.lines = [json_line(r)[:-1] for r in self.records]
        if len(self.records) != self.trailer.get("records"):
            raise RecordFileError(f"{path}: corrupted: {len(self.records)} records, the trailer "
                                  f"counts {self.trailer.get('records')}")

    def _fail(self, what: str):
        raise RecordFileError(f"{self.path}: corrupted: {what}")

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
