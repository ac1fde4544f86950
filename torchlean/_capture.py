"""The state of a whole-step capture in progress (torchlean.cuda.graph_step), kept in a module
the low layers (buffer, random, parameter, session, nn, optim) may import.

While `STATE.strict` is set (graph_step's eager warm-up and its capture) a host read (a
download, a synchronisation) or a host-side random draw raises RuntimeError naming the op: a
replay never runs Python, so such a value would be frozen in the graph. While `STATE.active`
is set (the capture itself) the parameters and optimizers the step touches are noted, so each
replay can check they were not replaced, and integer inputs read by an op are guarded by the
value range the op checked at capture.
"""
from __future__ import annotations

import os
import sys


class _State:
    __slots__ = ("strict", "active", "params", "optimizers", "guards", "int_inputs", "epoch")

    def __init__(self):
        self.strict = False       # warm-up or capture: host reads and host draws raise
        self.active = False       # capture: the step is being recorded
        self.params = {}          # id(Parameter) -> Parameter touched by the captured step
        self.optimizers = {}      # id(Optimizer) -> Optimizer stepped by the captured step
        self.guards = []          # (input index, lo, hi, excluded or None)
        self.int_inputs = []      # (input index, host array) of the step's integer inputs
        self.epoch = 0            # bumped when a Parameter's buffer or gradient is rebound
                                  # (a replay then compares its parameters' identities)

    def reset(self):
        self.params, self.optimizers, self.guards, self.int_inputs = {}, {}, [], []


STATE = _State()
_PKG = os.path.dirname(os.path.abspath(__file__))


def _entry_op() -> str:
    """The torchlean function the user's code called (the outermost torchlean frame of the
    innermost run of them), e.g. 'Tensor.item'."""
    f = sys._getframe(1)
    name = None
    while f is not None:
        if not f.f_code.co_filename.startswith(_PKG):
            if name is not None:
                break
        else:
            slf = f.f_locals.get("self")
            fn = f.f_code.co_name
            name = f"{type(slf).__name__}.{fn}" if slf is not None else fn
        f = f.f_back
    return name or "?"


def host_read(what: str = "a host read") -> None:
    """Raise the error of a host read inside graph_step (call only while STATE.strict)."""
    raise RuntimeError(
        f"graph_step: {_entry_op()} is {what} inside a captured step; a replay never returns to "
        "Python, so the value would be frozen in the graph. Return the Tensor from the step and "
        "read it after the call (loss.item() on the result), or run this step without graph_step")


def copy_into(dst, src) -> None:
    """dst's payload := src's (device copy in stream order, recorded in the capture): a state
    rebound during a capture keeps its buffer, so every replay advances the same memory."""
    from torchlean._loader import lib
    from torchlean._loader import raise_status
    st = lib.tl_graph_copy(dst.buf.data_ptr(), src.buf.data_ptr(), 4 * dst.buf.n)
    if st:
        raise_status("graph_step", st)


class persistent:
    """Inside a capture: what the block allocates, uploads or fills is state that outlives the
    step (a parameter's first mirror, optimizer moments), written once now and never by a
    replay. A no-op outside a capture."""

    def __enter__(self):
        self.on = STATE.active
        if self.on:
            from torchlean._loader import lib
            lib.tl_graph_persistent(1)

    def __exit__(self, *exc):
        if self.on:
            from torchlean._loader import lib
            lib.tl_graph_persistent(0)


def note_param(p) -> None:
    STATE.params[id(p)] = p


def note_optimizer(opt) -> None:
    if type(opt).__name__ not in ("SGD", "Adam", "AdamW"):
        raise RuntimeError(
            f"graph_step: {type(opt).__name__}.step cannot be captured (it replaces its state "
            "buffers or computes per-step values on the host); SGD, Adam and AdamW can")
    STATE.optimizers[id(opt)] = opt


def is_int_input(a) -> bool:
    """Whether array a lies in one of the captured step's integer inputs (no copy of it)."""
    ptr = a.__array_interface__["data"][0]
    for _, host in STATE.int_inputs:
        base = host.__array_interface__["data"][0]
        if base <= ptr < base + max(host.nbytes, 1):
            return True
    return False


def int_guard(a, lo: int, hi: int, exclude=None) -> bool:
    """While capturing: whether `a` (an int64 array an op uploads as it is) is one of the step's
    integer inputs; if so each replay checks lo <= a < hi (and no element == exclude) on the
    new values, the facts the op relied on at capture, and captures again when they fail."""
    if not STATE.active:
        return False
    ptr = a.__array_interface__["data"][0]
    for i, host in STATE.int_inputs:
        base = host.__array_interface__["data"][0]
        if base <= ptr and ptr + a.nbytes <= base + host.nbytes and a.nbytes == host.nbytes:
            STATE.guards.append((i, int(lo), int(hi), exclude))
            return True
    return False
