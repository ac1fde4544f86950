"""Audit: a record of a run's values, and where two runs part (README "Checking a run").

`record(path)` (a context manager) or TORCHLEAN_AUDIT=path (read at import) writes, for every op
the tape runs (forward, and each VJP of a backward pass) and every optimizer step, the op's
name, shapes and a 64-bit digest of each value's float32 bits, computed on the device the same
way on every backend (digests.py). `python -m torchlean.audit` runs a script under recording,
compares two records (`diff`) and prints a run's certificate.
"""
from __future__ import annotations

import atexit
import contextlib
import os

from torchlean import tape as _tape
from torchlean.audit.digests import digest, digest_many
from torchlean.audit.recorder import Recorder
from torchlean.optim.hooks import register_optimizer_step_post_hook

__all__ = ["record", "digest", "digest_many", "start", "stop"]

_active: list = []   # the recorder running now (one at a time), and its step hook's handle


def start(path: str, label: str | None = None, batched: bool = True) -> None:
    """Start recording into `path` (a new .tlaudit file); stop() finishes it. `batched`
    (default): values are digested together, one native call per backward pass and optimizer
    step; False: each record's values are digested when it is made (the same digests, more
    calls; for a program writing recorded values in place outside autograd)."""
    if _active:
        raise RuntimeError(f"torchlean.audit: already recording into {_active[0].writer.path}; "
                           "one record at a time")
    rec = Recorder(path, label, batched)
    handle = register_optimizer_step_post_hook(rec.optimizer_step)
    _active.extend((rec, handle))
    _tape.AUDIT = rec


def stop() -> None:
    """Finish the running record: read back the last digests and write the trailer."""
    if not _active:
        return
    rec, handle = _active
    _tape.AUDIT = None
    handle.remove()
    _active.clear()
    rec.close()


@contextlib.contextmanager
def record(path: str, label: str | None = None, batched: bool = True):
    """Record every op and optimizer step inside the block into `path`. `label` names the run
    (default: the script's file name); diff refuses records of differently named runs.
    `batched`: see start()."""
    start(path, label, batched)
    try:
        yield
    finally:
        stop()


def start_from_environment() -> None:
    """TORCHLEAN_AUDIT=path: record from import to the process's exit."""
    path = os.environ.get("TORCHLEAN_AUDIT")
    if path and not _active:
        start(path)
        atexit.register(stop)
