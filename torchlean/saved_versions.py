"""Version checks of what a VJP saved: PyTorch's error when a saved storage was written in place
between the forward and the backward.

The tape snapshots the versions of the saved storages when it records an op (only once some
in-place op of the process bumped a version) and checks them before the op's VJP runs.
"""
from __future__ import annotations

import threading

from torchlean import buffer as _buffer
from torchlean.buffer import AnyBuffer


def snapshot_versions(saved: dict):
    """The version of every saved storage, by its name in `saved`."""
    versions = {}
    for k, v in saved.items():   # a loop, not a comprehension: one frame less per recorded op
        if v.__class__ is AnyBuffer:
            versions[k] = getattr(v.buf, "version", 0)
    return versions


# saved inputs whose VJP reads only their shape (the gathers' scatter-add backward): writing
# them in place changes no gradient, so it raises nothing (PyTorch's index backward keeps sizes)
SHAPE_ONLY = {"gather_vec": "x", "gather_row": "x", "gather_rows": "x"}


def check_versions(node) -> None:
    """Raise PyTorch's error when a storage this node's VJP reads was written in place since
    the op was recorded (its version moved on)."""
    recorded = node.versions or {}
    shape_only = SHAPE_ONLY.get(node.name)
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
