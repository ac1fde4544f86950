"""Buffer (a flat float32 payload owned by the native library) and AnyBuffer (a shape with one).

Native payloads are freed either explicitly with release() (idempotent: 1 the first time, 0
after) or by the finalizer when the Python object dies. A released buffer raises ValueError on
use. An AnyBuffer may borrow its Buffer (a reshape view, a parameter mirror on a tape): then its
release() leaves the payload alone, so a view never frees memory it does not own.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from torchlean._loader import ffi, lib, last_error
from torchlean import _capture
from torchlean._loader import raise_status  # noqa: F401 - status codes, re-exported here

MAX_ELEMENTS = 2**32 - 1
# Buffer -> number of DLPack consumers still reading its payload (kept by torchlean.interop)
EXPORTS: dict = {}
_STATUS_ERRORS = {}
# Version counters, as PyTorch's: each storage (Buffer) counts its in-place writes in its
# `version` slot, 0 from construction, and names the last writer in `writer`. (An unset slot
# would read as 0 through getattr's default too, but only by raising and catching an
# AttributeError: a microsecond per saved value on every recorded op and every VJP.)
# EVER_BUMPED: whether any write happened in this process (until then the tape records no
# versions at all).
EVER_BUMPED = [False]
# the out-parameter type of the allocating calls, parsed once (ffi.new of a string parses or
# looks it up on every call)
_BUF_OUT = ffi.typeof("tl_buf *")
# cffi's constructors for parsed types, called without FFI.new/FFI.from_buffer's Python frames
# (which only look a string type up first)
_FLOAT_ARRAY, _DOUBLE_ARRAY = ffi.typeof("float[]"), ffi.typeof("double[]")
_newp = getattr(getattr(ffi, "_backend", None), "newp", None) or ffi.new
_from_buffer = getattr(getattr(ffi, "_backend", None), "from_buffer", None)
if _from_buffer is None:  # pragma: no cover - every cffi has it
    def _from_buffer(ctype, a, require_writable=False):
        return ffi.from_buffer(ctype, a, require_writable)


def version(buf) -> int:
    """The version of a storage (a Buffer): how many in-place writes it has seen."""
    return getattr(buf, "version", 0)


def last_writer(buf) -> str:
    """Which in-place op last wrote the storage, and from which thread."""
    w = getattr(buf, "writer", None)
    if not w:
        return "nothing"
    names = {t.ident: t.name for t in threading.enumerate()}
    return f"{w[0]} in thread {names.get(w[1], w[1])!r}"


_BUMP_LOCK = threading.Lock()


def bump(buf, op: str, _ident=threading.get_ident) -> None:
    """Record one in-place write of `op` into the storage `buf` (views share it). Locked: two
    threads writing one storage never lose a count (a lost one could hide a write)."""
    with _BUMP_LOCK:
        buf.version = getattr(buf, "version", 0) + 1
        buf.writer = (op, _ident())
    EVER_BUMPED[0] = True


def check_count(op: str, shape) -> int:
    """Element count of `shape`, refusing negative dims and anything over the uint32 limit."""
    for d in shape:
        if not isinstance(d, (int, np.integer)) or d < 0:
            raise ValueError(f"{op}: shape {tuple(shape)} must hold non-negative ints")
        if d > MAX_ELEMENTS:
            raise ValueError(f"{op}: dimension {d} of shape {tuple(shape)} exceeds the uint32 "
                             f"element limit {MAX_ELEMENTS}")
    n = math.prod(shape)
    if n > MAX_ELEMENTS:
        raise ValueError(f"{op}: shape {tuple(shape)} has {n} elements, over the uint32 element "
                         f"limit {MAX_ELEMENTS}")
    return n


def _as_float_array(op: str, a) -> np.ndarray:
    a = np.asarray(a)
    # np.asarray(order="C") keeps 0-d arrays 0-d (ascontiguousarray would make them 1-d)
    if a.dtype == np.float32 or a.dtype == np.float64:
        return np.asarray(a, order="C")
    if a.dtype.kind in "biuf":
        return np.asarray(a, dtype=np.float64, order="C")
    raise TypeError(f"{op}: expected a real numeric array (float64/float32/int/bool), "
                    f"got dtype {a.dtype}")


class Buffer:
    """A flat float32 buffer held by the native backend.

    `handle` is the raw tl_buf pointer, owned by this object: __del__ destroys it when the
    Buffer dies (no per-buffer ffi.gc wrapper, which costs an extra call and an extra
    garbage-collected object on every op). So a handle is valid only while its Buffer (or an
    AnyBuffer holding it) is referenced: pass `x.handle` to a kernel while `x` is alive, never
    keep the handle alone."""

    __slots__ = ("handle", "n", "live", "version", "writer", "__weakref__")

    def __init__(self, handle, n: int):
        self.handle = handle
        self.n = n
        self.live = True
        self.version = 0

    def __del__(self, _destroy=lib.tl_buf_destroy):
        # tolerate a Buffer that never got a handle (e.g. a failed copy.deepcopy)
        h = getattr(self, "handle", None)
        if h is not None:
            # a garbage-collected cycle may run another finalizer (a Tensor letting go of its
            # value) after this one on the same object: it must find a dead Buffer, never
            # the destroyed handle
            self.handle, self.live = None, False
            _destroy(h)

    def __copy__(self):
        return self  # a shallow copy would own the same handle twice

    def __deepcopy__(self, memo):
        raise TypeError("a Buffer cannot be deep-copied; use .copy() for a new payload")

    @classmethod
    def alloc(cls, n: int, op: str = "alloc") -> "Buffer":
        check_count(op, (n,))
        out = ffi.new(_BUF_OUT)
        st = lib.tl_buf_alloc(n, out)
        if st:
            raise_status(op, st)
        return cls(out[0], n)

    @classmethod
    def from_numpy(cls, a) -> "Buffer":
        """Upload float64/float32 (or int/bool) data; float64 rounds to nearest float32."""
        a = _as_float_array("Buffer.from_numpy", a).reshape(-1)
        n = check_count("Buffer.from_numpy", (a.size,))
        return cls(_upload(a, n), n)

    @classmethod
    def zeros(cls, n: int) -> "Buffer":
        return cls.full(n, 0.0)

    @classmethod
    def full(cls, n: int, value: float) -> "Buffer":
        check_count("Buffer.full", (n,))
        out = ffi.new(_BUF_OUT)
        st = lib.tl_buf_full(n, float(value), out)
        if st:
            raise_status("Buffer.full", st)
        return cls(out[0], n)

    def _check(self, op):
        if not self.live:
            raise ValueError(f"{op}: buffer of {self.n} elements was already released")

    def to_numpy(self, dtype=np.float32) -> np.ndarray:
        """Download as float32 (default) or float64 (exact widening)."""
        self._check("Buffer.to_numpy")
        if _capture.STATE.strict:
            _capture.host_read("a host read (a download)")
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"Buffer.to_numpy: dtype must be float32 or float64, got {dtype}")
        out = np.empty(self.n, dtype=dtype)
        if dtype == np.float32:
            st = lib.tl_buf_download_f32(self.handle, ffi.from_buffer("float[]", out), self.n)
        else:
            st = lib.tl_buf_download_f64(self.handle, ffi.from_buffer("double[]", out), self.n)
        if st:
            raise_status("Buffer.to_numpy", st)
        return out

    def copy(self) -> "Buffer":
        self._check("Buffer.copy")
        out = ffi.new(_BUF_OUT)
        st = lib.tl_buf_copy(self.handle, out)
        if st:
            raise_status("Buffer.copy", st)
        return Buffer(out[0], self.n)

    def release(self) -> int:
        """Free the payload now; 1 the first time, 0 on any later call. While a DLPack
        consumer holds the payload (EXPORTS), only mark it released: the last consumer's
        deleter frees it."""
        if EXPORTS and self in EXPORTS:
            was, self.live = self.live, False
            return int(was)
        self.live = False
        if self.handle is None:   # destroyed by its finalizer already (see __del__)
            return 0
        return lib.tl_buf_release(self.handle)

    def data_ptr(self) -> int:
        self._check("Buffer.data_ptr")
        out = ffi.new("uint64_t *")
        st = lib.tl_buf_data_ptr(self.handle, out)
        if st:
            raise_status("Buffer.data_ptr", st)
        return int(out[0])

    def __len__(self) -> int:
        return self.n

    def __repr__(self):
        return f"Buffer(n={self.n}{'' if self.live else ', released'})"


_new_buffer = Buffer.__new__


def _upload(a, n: int):
    """A new native buffer holding the n values of flat float32 or float64 array a (float64
    rounds to nearest float32): its handle."""
    out = _newp(_BUF_OUT, None)
    if a.dtype == np.float32:
        st = lib.tl_buf_upload_f32(_from_buffer(_FLOAT_ARRAY, a, False), n, out)
    else:
        st = lib.tl_buf_upload_f64(_from_buffer(_DOUBLE_ARRAY, a, False), n, out)
    if st:
        raise_status("Buffer.from_numpy", st)
    return out[0]


class AnyBuffer:
    """A row-major shape paired with a Buffer of matching length."""

    __slots__ = ("shape", "buf", "owns", "handle", "__weakref__")

    def __init__(self, shape, buf: Buffer, owns: bool = True):
        shape = tuple(int(d) for d in shape)
        if not isinstance(buf, Buffer):
            raise TypeError(f"AnyBuffer: buf must be a Buffer, got {type(buf).__name__}")
        if check_count("AnyBuffer", shape) != buf.n:
            # a shape larger than the payload would let kernels read past its end
            raise ValueError(f"AnyBuffer: shape {shape} has {math.prod(shape)} elements but the "
                             f"buffer holds {buf.n}")
        self.shape = shape
        self.buf = buf
        self.owns = owns
        self.handle = buf.handle

    @classmethod
    def _wrap(cls, shape: tuple, buf: Buffer, owns: bool = True) -> "AnyBuffer":
        """Internal constructor for shapes already normalised to tuples of ints."""
        self = cls.__new__(cls)
        self.shape = shape
        self.buf = buf
        self.owns = owns
        self.handle = buf.handle
        return self

    @classmethod
    def from_numpy(cls, a) -> "AnyBuffer":
        a = _as_float_array("AnyBuffer.from_numpy", a)
        n = check_count("AnyBuffer.from_numpy", a.shape)
        if cls is not AnyBuffer:
            return cls(a.shape, Buffer.from_numpy(a))
        # Buffer.from_numpy and the constructor's checks, which the count above already
        # passed (an array's shape is a tuple of ints): one upload, the objects built directly
        return AnyBuffer.adopt(a.shape, _upload(a.reshape(-1), n), n)

    @staticmethod
    def adopt(shape: tuple, handle, n: int) -> "AnyBuffer":
        """An AnyBuffer owning `handle`, a fresh native buffer of n floats, built without the
        constructor's frames and checks: for hot paths whose caller already checked that
        shape (a tuple of ints) holds n elements. Buffer.__del__ destroys the handle."""
        b = _new_buffer(Buffer)
        b.handle = handle
        b.n = n
        b.live = True
        b.version = 0   # as Buffer.__init__ (see the version counters above)
        y = _new_any(AnyBuffer)
        y.shape = shape
        y.buf = b
        y.owns = True
        y.handle = handle
        return y

    @classmethod
    def zeros(cls, shape) -> "AnyBuffer":
        shape = tuple(shape)
        return cls(shape, Buffer.zeros(check_count("AnyBuffer.zeros", shape)))

    @classmethod
    def full(cls, shape, value: float) -> "AnyBuffer":
        """A fresh payload of `shape` holding `value` (a backward pass's seed: one count check,
        no constructor frames)."""
        shape = tuple(shape)
        n = check_count("AnyBuffer.full", shape)
        out = ffi.new(_BUF_OUT)
        st = lib.tl_buf_full(n, float(value), out)
        if st:
            raise_status("AnyBuffer.full", st)
        return cls._wrap(tuple(map(int, shape)), Buffer(out[0], n))

    @property
    def live(self) -> bool:
        return self.buf.live

    @property
    def numel(self) -> int:
        return self.buf.n

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def to_numpy(self, dtype=np.float32) -> np.ndarray:
        return self.buf.to_numpy(dtype).reshape(self.shape)

    def copy(self) -> "AnyBuffer":
        return AnyBuffer(self.shape, self.buf.copy())

    def release(self) -> int:
        """Release the payload if this AnyBuffer owns it; a borrowed view returns 0."""
        if not self.owns:
            return 0
        return self.buf.release()

    def __repr__(self):
        state = "" if self.buf.live else ", released"
        return f"AnyBuffer(shape={self.shape}{state})"


_new_any = AnyBuffer.__new__
