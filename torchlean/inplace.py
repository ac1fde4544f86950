"""Buffer-level in-place writes: the registry's elementwise kernels called with the destination
as their output, so `x.add_(y)` runs the very kernel of `x + y` (the same bits in every mode)
into x's storage without allocating. Each write bumps the storage's version counter
(torchlean.buffer.bump), which the tape checks before a VJP reads a saved value.

Only same-shape operands take the kernel path here; anything else (a broadcast operand, an op
with no such kernel) is computed out of place by the caller and copied in with copy_into.
"""
from __future__ import annotations

import weakref

from torchlean._loader import ffi, lib
from torchlean.buffer import AnyBuffer, bump, raise_status

_BINARY = {"add": lib.tl_add, "sub": lib.tl_sub, "mul": lib.tl_mul, "div": lib.tl_div,
           "maximum": lib.tl_maximum, "minimum": lib.tl_minimum, "pow": lib.tl_pow}
_UNARY = {"abs": lib.tl_abs, "sqrt": lib.tl_sqrt, "exp": lib.tl_exp, "log": lib.tl_log,
          "reciprocal": lib.tl_reciprocal, "sigmoid": lib.tl_sigmoid, "tanh": lib.tl_tanh,
          "relu": lib.tl_relu}


def _live(op: str, *bufs) -> None:
    for b in bufs:
        if not b.buf.live:
            raise ValueError(f"{op}: buffer of shape {b.shape} was already released")


# Storages that views read (torchlean.views): id(Buffer) -> (weak reference to the Buffer,
# list of weak references to the views whose base or own copy it is). A write into one tells
# each view (`storage_written`), so views see the write and share the base's version counter.
FAMILIES: dict = {}


def bump_storage(buf, op: str) -> None:
    """bump(buf, op), and tell the views that read `buf` (nothing to do while none exist)."""
    bump(buf, op)
    if FAMILIES:
        fam = FAMILIES.get(id(buf))
        if fam is not None and fam[0]() is buf:
            live = []
            for r in fam[1]:
                v = r()
                if v is not None:
                    live.append(r)
                    v.storage_written(buf, op)
            fam[1][:] = live


def has_live_views(buf) -> bool:
    """Whether a live view reads the storage `buf`."""
    fam = FAMILIES.get(id(buf))
    return fam is not None and fam[0]() is buf and any(r() is not None for r in fam[1])


def watch(buf, view) -> None:
    """Tell `view` (a weakly referenced object with storage_written(buf, op)) of every write
    into the storage `buf` from now on."""
    k = id(buf)
    fam = FAMILIES.get(k)
    if fam is None or fam[0]() is not buf:
        fam = FAMILIES[k] = (weakref.ref(buf, lambda _r, k=k: _forget(k, _r)), [])
    refs = fam[1]
    # drop the views already gone: a storage that is never written (an input viewed every
    # step) would otherwise keep every dead reference, and each watch would walk them all
    refs[:] = [r for r in refs if r() is not None]
    if not any(r() is view for r in refs):
        refs.append(weakref.ref(view))


def _forget(k: int, ref) -> None:
    fam = FAMILIES.get(k)
    if fam is not None and fam[0] is ref:
        del FAMILIES[k]


def _done(op: str, st: int, dst: AnyBuffer) -> None:
    if st:
        raise_status(op, st)
    bump_storage(dst.buf, op)


def binary_into(op: str, dst: AnyBuffer, other: AnyBuffer) -> bool:
    """dst := dst <op> other with op's own kernel; False (nothing written) when the kernel
    cannot run in place (shapes differ, or no such kernel)."""
    fn = _BINARY.get(op)
    if fn is None or other.shape != dst.shape:
        return False
    _live(op + "_", dst, other)
    _done(op + "_", fn(dst.handle, other.handle, dst.handle, dst.buf.n), dst)
    return True


def unary_into(op: str, dst: AnyBuffer) -> bool:
    fn = _UNARY.get(op)
    if fn is None:
        return False
    _live(op + "_", dst)
    _done(op + "_", fn(dst.handle, dst.handle, dst.buf.n), dst)
    return True


def scale_into(dst: AnyBuffer, c: float, op: str = "mul_") -> None:
    """dst := c * dst (the scale kernel of `c * x`)."""
    _live(op, dst)
    _done(op, lib.tl_scale(dst.handle, dst.handle, dst.buf.n, float(c)), dst)


def axpy_into(dst: AnyBuffer, other: AnyBuffer, c: float, op: str = "add_") -> None:
    """dst := dst + c * other (the axpy kernel), same shapes."""
    _live(op, dst, other)
    _done(op, lib.tl_axpy(dst.handle, other.handle, dst.handle, dst.buf.n, float(c)), dst)


def clamp_into(dst: AnyBuffer, lo: float, hi: float) -> None:
    _live("clamp_", dst)
    _done("clamp_", lib.tl_clamp(dst.handle, dst.handle, dst.buf.n, float(lo), float(hi)), dst)


def copy_into(dst: AnyBuffer, src: AnyBuffer, op: str = "copy_") -> None:
    """dst := src broadcast to dst's shape (the broadcast_to kernel: a pure copy of the bits)."""
    _live(op, dst, src)
    sd, dd = tuple(src.shape) or (1,), tuple(dst.shape) or (1,)
    if src.buf.n == dst.buf.n:
        sd = dd = (dst.buf.n,)        # same element count: one flat copy
    a, b = ffi.new("int64_t[]", list(sd)), ffi.new("int64_t[]", list(dd))
    _done(op, lib.tl_broadcast_to(src.handle, dst.handle, a, len(sd), b, len(dd)), dst)


def random_into(dst: AnyBuffer, kind: str, key: int, a: float = 0.0, b: float = 1.0) -> None:
    """dst := uniform [0, 1) ('uniform'), normal(a, b) ('normal') or a 0/1 draw with
    P(1) = a ('bernoulli') from the device stream at `key`."""
    _live(kind + "_", dst)
    n = dst.buf.n
    if kind == "uniform":
        st = lib.tl_rand_uniform(dst.handle, n, key)
    elif kind == "normal":
        st = lib.tl_rand_normal(dst.handle, n, key, float(a), float(b))
    else:
        st = lib.tl_bernoulli_mask(dst.handle, n, key, float(a))
    _done(kind + "_", st, dst)
