"""Every registry op against the generated bad-input table (tests/bad_inputs.py), run in a worker
subprocess so a crash or a hang fails only its case: each op's test lists the cases that
crashed, hung, raised an exception of the wrong type, or raised without naming the op."""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bad_inputs as B

HERE = Path(__file__).resolve().parent
CASE_TIMEOUT_S = 30.0
TABLE = B.table()


class Worker:
    """One long-lived worker process; restarted after a crash or a hang."""

    def __init__(self):
        self.proc = None

    def _start(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(HERE.parent)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        self.proc = subprocess.Popen([sys.executable, str(HERE / "bad_inputs.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, bufsize=1)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        line = self._read(120.0)
        if line != "ready":
            err = self._stderr()
            self._stop()
            raise AssertionError(f"worker did not start: {line!r} {err}")

    def _stderr(self):
        try:
            return self.proc.stderr.read()[-2000:] if self.proc.poll() is not None else ""
        except Exception:  # noqa: BLE001
            return ""

    def _read(self, timeout):
        if not self.sel.select(timeout):
            return None
        return self.proc.stdout.readline().strip()

    def _stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                f.close()
            self.sel.close()
        self.proc = None

    def run(self, name, idx):
        """('ok'|exception name|'CRASH'|'HANG', message)."""
        if self.proc is None:
            self._start()
        try:
            self.proc.stdin.write(f"{name} {idx}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        line = self._read(CASE_TIMEOUT_S)
        if line is None:
            self._stop()
            return "HANG", f"no answer in {CASE_TIMEOUT_S} s"
        if not line:
            code = self.proc.wait()
            err = self._stderr()
            self._stop()
            return "CRASH", f"worker died (exit {code}): {err[-600:]}"
        r = json.loads(line)
        return r["kind"], r["msg"]

    def close(self):
        self._stop()


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


def _problem(op_name, label, must_raise, kind, msg):
    if kind == "ok":
        return f"{label}: silently accepted (expected an error)" if must_raise else None
    if kind in ("CRASH", "HANG"):
        return f"{label}: {kind}: {msg}"
    if kind not in B.ALLOWED:
        return f"{label}: raised {kind} (allowed: {', '.join(B.ALLOWED)}): {msg}"
    if kind in ("ValueError", "TypeError", "ShapeError", "IndexError") and op_name not in msg:
        return f"{label}: {kind} message does not name the op: {msg}"
    return None


@pytest.mark.parametrize("op_name", sorted(TABLE))
def test_bad_inputs_raise_clear_errors_never_crash(worker, op_name):
    cases = TABLE[op_name]
    problems, outcomes = [], {}
    for idx, case in enumerate(cases):
        kind, msg = worker.run(op_name, idx)
        outcomes[case[0]] = kind
        p = _problem(op_name, case[0], case[5], kind, msg)
        if p:
            problems.append(p)
    op = next(o for o in B.REGISTRY if o.name == op_name)
    if op.test.get("cases"):           # the baseline is a registry case: it must run
        assert outcomes["valid"] == "ok", f"{op_name}: the valid registry case failed"
    assert outcomes["unknown keyword"] == "TypeError"
    assert not problems, f"{op_name}: {len(problems)} of {len(cases)} cases:\n" + "\n".join(problems)


def test_table_covers_every_registry_op_and_family():
    assert set(TABLE) == {o.name for o in B.REGISTRY}
    labels = [c[0] for cases in TABLE.values() for c in cases]
    assert len(labels) > 2000
    for family in ("rank + 1", "zero-size", "released", "nan", "bool id", "=huge", "=nan",
                   "=str", "missing", "unknown keyword"):
        assert any(family in lab for lab in labels), family


def test_anybuffer_shape_must_match_its_payload():
    import torchlean as tl
    b = tl.Buffer.zeros(6)
    assert tl.AnyBuffer((2, 3), b).shape == (2, 3)
    with pytest.raises(ValueError, match=r"AnyBuffer: shape \(1048576, 1048576\) has 1099511627776 "
                                         r"elements|uint32 element limit"):
        tl.AnyBuffer((1 << 20, 1 << 20), b)
    with pytest.raises(ValueError, match=r"AnyBuffer: shape \(7,\) has 7 elements but the buffer "
                                         r"holds 6"):
        tl.AnyBuffer((7,), b)
    with pytest.raises(ValueError, match="non-negative"):
        tl.AnyBuffer((-2, -3), b)
    with pytest.raises(TypeError, match="must be a Buffer"):
        tl.AnyBuffer((6,), np.zeros(6))
