"""Grad mode: whether ops record gradient information, per thread, as in PyTorch.

no_grad and set_grad_enabled switch it; the tape reads it when it records an op.
"""
from __future__ import annotations

import functools
import threading


class _GradMode(threading.local):
    """Per-thread grad mode, as in PyTorch: one thread's no_grad() never strips another's graph.
    `stack` holds the modes saved by the open no_grad blocks of this thread."""
    enabled = True

    def __init__(self):
        self.stack = []


GRAD_MODE = _GradMode()


class no_grad:
    """Ops record no gradient information inside it (values only), in this thread only.

    A context manager (blocks nest, and one instance may be entered again or from several
    threads: the saved modes live on a per-thread stack) and a decorator:
    `@torchlean.no_grad()` runs the function with gradients off."""

    def __enter__(self):
        GRAD_MODE.stack.append(GRAD_MODE.enabled)
        GRAD_MODE.enabled = False
        return self

    def __exit__(self, *exc):
        GRAD_MODE.enabled = GRAD_MODE.stack.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def without_grad(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)
        return without_grad


def is_grad_enabled() -> bool:
    """Whether ops record gradients in the calling thread."""
    return GRAD_MODE.enabled


class set_grad_enabled:
    """torch's set_grad_enabled(mode) as a context manager: ops record gradients inside it when
    mode is True (a view re-derives its values under the grad mode it was made in)."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)

    def __enter__(self):
        GRAD_MODE.stack.append(GRAD_MODE.enabled)
        GRAD_MODE.enabled = self.mode
        return self

    def __exit__(self, *exc):
        GRAD_MODE.enabled = GRAD_MODE.stack.pop()
        return False
