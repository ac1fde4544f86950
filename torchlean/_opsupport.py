"""The few helpers generated op functions call: checks, attr normalisation, allocation, status.

Kept small and generic on purpose: anything op-specific belongs in ops.yaml.
"""
from __future__ import annotations

import math
import numbers
import operator

import numpy as np

from torchlean import _capture
from torchlean._loader import ffi, lib
from torchlean.buffer import AnyBuffer, Buffer, check_count, raise_status
from torchlean.shapes import ShapeError

__all__ = ["AnyBuffer", "ShapeError", "alloc", "attr", "broadcast_inputs", "call", "i64s", "live",
           "mask_buffer", "remember", "shape_error"]

_buf_new = lib.tl_buf_new
_NULL = ffi.NULL
# int64 arrays for i64[] kernel arguments: the parsed type, and cffi's own constructors called
# without FFI.new/FFI.from_buffer's Python frames (which only parse a string type first)
_I64_ARRAY = ffi.typeof("int64_t[]")
_backend = getattr(ffi, "_backend", None)
_newp = getattr(_backend, "newp", None) or ffi.new
_from_buffer = getattr(_backend, "from_buffer", None)
if _from_buffer is None:  # pragma: no cover - every cffi has it
    def _from_buffer(ctype, a, require_writable=False):
        return ffi.from_buffer(ctype, a, require_writable)
_I64 = np.dtype(np.int64)
_U64 = np.dtype(np.uint64)
_umax = np.maximum.reduce
_adopt = AnyBuffer.adopt

# Element counts of output shapes that already passed check_count. A dict lookup costs far
# less than re-checking every dim on each allocation; bounded so odd shapes cannot pile up.
_counts: dict = {}
_COUNTS_MAX = 4096


def live(op: str, *bufs):
    """Every input must be an AnyBuffer whose payload is still live.

    Generated ops first test `b.__class__ is AnyBuffer and b.buf.live` inline and call this only
    when that fails, so the messages are built only on the error path (and subclasses pass)."""
    for i, b in enumerate(bufs):
        if not isinstance(b, AnyBuffer):
            raise TypeError(f"{op}: input {i} must be an AnyBuffer, got {type(b).__name__}")
        if not b.buf.live:
            raise ValueError(f"{op}: input {i} (shape {b.shape}) was already released")


def buffer_handles(op: str, name: str, bufs) -> list:
    """A `buffers` attr: the handles of a sequence of live AnyBuffers, as integers for an i64[]
    kernel argument. Only a buffer's own handle is ever passed, so a kernel never reads a freed
    or made-up pointer; the caller's sequence keeps the buffers alive for the call."""
    if isinstance(bufs, AnyBuffer) or not isinstance(bufs, (list, tuple)):
        raise TypeError(f"{op}: {name} must be a list or tuple of AnyBuffers, got "
                        f"{type(bufs).__name__}")
    out = []
    for k, b in enumerate(bufs):
        if not isinstance(b, AnyBuffer):
            raise TypeError(f"{op}: {name}[{k}] must be an AnyBuffer, got {type(b).__name__} "
                            f"(a raw handle is never accepted: pass the buffer itself)")
        if not b.buf.live or b.buf.handle is None:
            raise ValueError(f"{op}: {name}[{k}] (shape {b.shape}) was already released")
        out.append(int(ffi.cast("intptr_t", b.buf.handle)))
    return out


def shape_error(op: str, err: Exception, **inputs) -> ValueError:
    got = ", ".join(f"{k} {v.shape}" for k, v in inputs.items())
    return ValueError(f"{op}: {err}" + (f" (got {got})" if got else ""))


def _count(op: str, shape) -> tuple:
    """The slow path of alloc: check `shape` fully (raising with op and shape), remember it."""
    shape = tuple(shape)
    n = check_count(op, shape)
    if len(_counts) >= _COUNTS_MAX:
        _counts.clear()
    _counts[shape] = n
    return shape, n


def alloc(op: str, shape: tuple) -> AnyBuffer:
    """A fresh uninitialised output of `shape` (a tuple of ints from a shape rule).

    This runs once per output of every op, so it builds the Buffer and AnyBuffer directly
    (no __init__ frames) and looks the element count up in `_counts`."""
    try:
        n = _counts.get(shape)
    except TypeError:  # unhashable (a list): normalise on the slow path
        n = None
    if n is None:
        shape, n = _count(op, shape)
    h = _buf_new(n)
    if h == _NULL:  # take the checked path for the exact status and message
        return AnyBuffer._wrap(shape, Buffer.alloc(n, op))
    return _adopt(shape, h, n)


_MEMO_MAX = 1024   # input shapes remembered per op (a full table starts again)
_MEMO_TYPES = (int, tuple, float, bool)


def remember(memo: dict, key, values: tuple) -> None:
    """Keep what an op's shape rules gave for these input shapes (pure functions of them: the
    generated op looks them up instead of running the rules again). Only immutable results
    are kept; a table past _MEMO_MAX entries starts again."""
    for v in values:
        if v.__class__ not in _MEMO_TYPES:
            return
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[key] = values


def call(op: str, status: int, outs, tmps):
    """Release temporaries; on failure also release the outputs and raise.

    Generated ops call this only when there is something to do (a non-zero status or
    temporaries), keeping the common path free of the extra call and list."""
    for t in tmps:
        t.release()
    if status:
        for o in outs:
            o.release()
        raise_status(op, status)


def i64s(values):
    """An int64 array argument (kept alive by the returned cdata for the call)."""
    if isinstance(values, np.ndarray):
        a = np.ascontiguousarray(values, dtype=np.int64).reshape(-1)
        if a.size == 0:
            return _newp(_I64_ARRAY, 1)[0:0]
        return _from_buffer(_I64_ARRAY, a, False)
    return _newp(_I64_ARRAY, [int(v) for v in values])


def broadcast_inputs(shape, tmps, expand, *xs):
    """Materialise NumPy broadcasting: inputs of another shape are expanded to `shape` by
    `expand` (the generated broadcast_to op, passed in so this module never imports the
    generated ops above it); the expanded copies are appended to `tmps` for release."""
    out = []
    for x in xs:
        if x.shape != shape:
            x = expand(x, shape=shape)
            tmps.append(x)
        out.append(x)
    return tuple(out)


class DeviceMask:
    """A boolean mask already uploaded as a 0/1 float32 buffer, for masks reused every step (an
    attention module's causal mask): ops accept it wherever a mask attr goes and skip the upload.
    `host` is a private copy, so later changes to the caller's array cannot make it stale."""

    __slots__ = ("host", "buf", "shape", "dtype")

    def __init__(self, mask):
        a = np.array(mask, copy=True)
        if a.dtype != np.bool_:
            raise TypeError(f"DeviceMask: expected a boolean array, got dtype {a.dtype}")
        self.host, self.shape, self.dtype = a, a.shape, a.dtype
        self.buf = AnyBuffer.from_numpy(a.astype(np.float32))

    def matches(self, mask) -> bool:
        a = np.asarray(mask)
        return a.shape == self.shape and a.dtype == self.dtype and np.array_equal(a, self.host)

    def __array__(self, dtype=None, copy=None):
        return self.host if dtype is None else self.host.astype(dtype)


def mask_buffer(op: str, name: str, mask, tmps):
    """A boolean mask (or None) as a 0/1 float32 buffer handle for the kernel."""
    if mask is None:
        return ffi.NULL
    if mask.__class__ is DeviceMask:
        return mask.buf.handle
    b = AnyBuffer.from_numpy(np.asarray(mask, dtype=np.float32))
    tmps.append(b)
    return b.handle


_F32_MAX = float(np.finfo(np.float32).max)


def _f32_finite_nonzero(v: float) -> bool:
    """v stays finite and non-zero once rounded to float32 (no overflow warning on the way)."""
    if abs(v) >= _F32_MAX + 2.0**103:  # half an ulp above the largest float32 rounds to inf
        return False
    return float(np.float32(v)) != 0


_CHECKS = {
    "finite": (math.isfinite, "a finite number"),
    "positive": (lambda v: v > 0, "> 0"),
    "nonneg": (lambda v: v >= 0, ">= 0"),
    "finite_nonzero": (lambda v: math.isfinite(v) and _f32_finite_nonzero(v),
                       "finite and non-zero in float32"),
    "prob": (lambda v: 0.0 <= v <= 1.0, "in [0, 1]"),
    "finite_nonneg": (lambda v: math.isfinite(v) and v >= 0, "finite and >= 0"),
}


def attr(op: str, name: str, value, kind: str, check):
    """Normalise one keyword attr to its Python form, with a clear error naming op and attr.

    Plain float/int values take a short path first (isinstance against numbers.Real is an ABC
    check, slow enough to show in the per-op cost)."""
    try:
        if kind == "float":
            if value.__class__ is float:
                v = value
            elif isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError
            else:
                v = float(value)
        elif kind == "int":
            if value.__class__ is int:
                v = value
            elif isinstance(value, bool):
                raise TypeError
            else:
                v = operator.index(value)
        elif kind == "bool":   # True/False (or 0/1), never the truth of a string or None
            if value.__class__ is bool:
                v = value
            elif isinstance(value, np.bool_) or (isinstance(value, numbers.Integral)
                                                 and value in (0, 1)):
                v = bool(value)
            else:
                raise TypeError
        elif kind == "key":
            v = operator.index(value)
            if not 0 <= v < 2**64:
                raise ValueError(f"{op}: {name} must be in [0, 2**64), got {v}")
        elif kind == "shape":
            if isinstance(value, (int, np.integer)):
                value = (value,)
            v = tuple(map(operator.index, value))
        elif kind == "ints":
            if value.__class__ is int:
                v = value
            elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
                v = operator.index(value)
            else:
                v = tuple(map(operator.index, value))
        elif kind == "index":
            a = np.asarray(value)
            if a.dtype.kind not in "iu":
                if a.dtype.kind == "b" or a.size or a.dtype.kind != "f":
                    raise TypeError
                a = a.astype(np.int64)
            # (int64: one reduction over the unsigned view, where a negative value is >= 2**63)
            if a.size and (_umax(a.view(_U64), axis=None) >= 2**32 if a.dtype is _I64
                           else a.min() < 0 or a.max() >= 2**32):
                raise ValueError(f"{op}: {name} must be in [0, 2**32), got values in "
                                 f"[{a.min()}, {a.max()}]")
            # eagerly a private copy; inside a captured step the array itself (its replays
            # read a bound integer input in place)
            v = a.astype(np.int64, copy=not _capture.STATE.active)
        elif kind == "mask":
            if value is None or value.__class__ is DeviceMask:
                return value
            a = np.asarray(value)
            if a.dtype != np.bool_:
                raise TypeError
            v = a
        else:  # pragma: no cover - the registry validates kinds
            raise TypeError
    except TypeError:
        want = {"bool": "True or False", "float": "a real number", "int": "an int", "index": "an int or integer array",
                "mask": "a boolean NumPy array or None", "shape": "a tuple of ints",
                "ints": "an int or tuple of ints", "key": "a non-negative int"}.get(kind, kind)
        raise TypeError(f"{op}: {name} must be {want}, got {type(value).__name__} "
                        f"{value!r:.60}") from None
    if check:
        ok, what = _CHECKS[check]
        if not (all(map(ok, v)) if v.__class__ is tuple else ok(v)):
            raise ValueError(f"{op}: {name} must be {what}, got {value!r}")
    return v
