"""NumPy and DLPack interop. DLPack capsules are built with ctypes around the native buffer's
data pointer (tl_buf_data_ptr) and imported with tl_buf_wrap, so both directions are zero-copy.

Lifetimes: an export pins its Buffer (buffer.EXPORTS) until the consumer's deleter runs, so a
Session.step() or release() in between only marks the buffer released and the payload is freed
when the last consumer lets go. An import keeps the producer's capsule and object alive and
calls the producer's deleter when the wrapping Buffer dies. Both the legacy "dltensor" capsule
and the versioned one ("dltensor_versioned", DLPack >= 1.0, chosen through `max_version`) work.
"""
from __future__ import annotations

import ctypes
import weakref

import numpy as np

from torchlean import runtime
from torchlean._loader import ffi, lib
from torchlean.buffer import EXPORTS, AnyBuffer, Buffer, raise_status

kDLCPU, kDLCUDA = 1, 2
DLPACK_VERSION = (1, 0)              # what our versioned capsules declare
FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _Deleter)]
_DeleterV = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", _DeleterV), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

_IsValidRaw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_GetPointerRaw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))

_live: dict[int, tuple] = {}   # address of the managed tensor -> (struct, shape, AnyBuffer)


def _unpin(addr: int) -> None:
    """The consumer let go of export `addr`: drop our references and, when this was the last
    export of a buffer already released by its owner, free the payload now."""
    entry = _live.pop(addr, None)
    if entry is None:
        return
    b = entry[2].buf
    left = EXPORTS[b] - 1
    if left:
        EXPORTS[b] = left
        return
    del EXPORTS[b]
    if not b.live:
        lib.tl_buf_release(b.handle)


@_Deleter
def _deleter(mt):
    _unpin(ctypes.addressof(mt.contents))


@_DeleterV
def _deleter_versioned(mt):
    _unpin(ctypes.addressof(mt.contents))


_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_CapsuleDestructor
def _capsule_destructor(cap_ptr):
    # the capsule is being destroyed: touch it only through raw pointers
    for name in (b"dltensor", b"dltensor_versioned"):
        if _IsValidRaw(cap_ptr, name):   # never consumed: we free it
            _unpin(_GetPointerRaw(cap_ptr, name))


def device() -> tuple:
    return (kDLCUDA, 0) if runtime.backend() == "cuda" else (kDLCPU, 0)


def to_dlpack(buf: AnyBuffer, versioned: bool = False, copied: bool = False):
    """A capsule viewing buf's native memory (no copy): 'dltensor', or 'dltensor_versioned'
    (DLPack 1.0) when `versioned`. The buffer stays allocated until the consumer's deleter runs,
    even if its owner releases it first."""
    ptr = buf.buf.data_ptr()
    nd = len(buf.shape)
    shape = (ctypes.c_int64 * max(nd, 1))(*buf.shape)
    mt = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    dt = mt.dl_tensor
    dt.data = ptr
    dt.device = DLDevice(*device())
    dt.ndim = nd
    dt.dtype = DLDataType(2, 32, 1)
    dt.shape = shape
    dt.strides = None
    dt.byte_offset = 0
    if versioned:
        mt.version = DLPackVersion(*DLPACK_VERSION)
        mt.flags = FLAG_IS_COPIED if copied else 0
        mt.deleter = _deleter_versioned
    else:
        mt.deleter = _deleter
    addr = ctypes.addressof(mt)
    _live[addr] = (mt, shape, buf)
    EXPORTS[buf.buf] = EXPORTS.get(buf.buf, 0) + 1
    name = b"dltensor_versioned" if versioned else b"dltensor"
    return _api.PyCapsule_New(addr, name, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


def _producer_capsule(obj):
    """obj's capsule, asking for a versioned one (older producers take no max_version)."""
    if not hasattr(obj, "__dlpack__"):
        return obj
    try:
        return obj.__dlpack__(max_version=DLPACK_VERSION)
    except TypeError:
        return obj.__dlpack__()


def from_dlpack(obj) -> "AnyBuffer":
    """Wrap a float32, C-contiguous DLPack producer's memory (no copy) as an AnyBuffer; a
    read-only versioned export is copied instead (torchlean buffers are writable), and so is a
    float64 (rounded to nearest float32) or non-contiguous one, as torch.tensor would copy."""
    if hasattr(obj, "__dlpack_device__"):
        dev = obj.__dlpack_device__()
        if int(dev[0]) != device()[0]:
            raise ValueError(f"from_dlpack: producer is on device type {dev[0]}, backend "
                             f"{runtime.backend()} needs {device()[0]}")
    cap = _producer_capsule(obj)
    if _api.PyCapsule_IsValid(cap, b"dltensor_versioned"):
        name, used = b"dltensor_versioned", b"used_dltensor_versioned"
        p = _api.PyCapsule_GetPointer(cap, name)
        mt = ctypes.cast(p, ctypes.POINTER(DLManagedTensorVersioned)).contents
        if mt.version.major != DLPACK_VERSION[0]:
            raise BufferError(f"from_dlpack: DLPack version {mt.version.major}."
                              f"{mt.version.minor} is not supported (need {DLPACK_VERSION[0]}.x)")
        read_only = bool(mt.flags & FLAG_READ_ONLY)
    elif _api.PyCapsule_IsValid(cap, b"dltensor"):
        name, used, read_only = b"dltensor", b"used_dltensor", False
        p = _api.PyCapsule_GetPointer(cap, name)
        mt = ctypes.cast(p, ctypes.POINTER(DLManagedTensor)).contents
    else:
        raise TypeError(f"from_dlpack: expected a DLPack producer or an unused 'dltensor' / "
                        f"'dltensor_versioned' capsule, got {type(obj).__name__}")
    dt = mt.dl_tensor
    shape = tuple(dt.shape[i] for i in range(dt.ndim))
    kind = (dt.dtype.code, dt.dtype.bits, dt.dtype.lanes)
    if kind not in ((2, 32, 1), (2, 64, 1)):
        raise TypeError(f"from_dlpack: expected float32 or float64, got dtype code "
                        f"{dt.dtype.code} bits {dt.dtype.bits} lanes {dt.dtype.lanes}")
    strides = None
    if dt.strides:
        expect, acc = [], 1
        for d in reversed(shape):
            expect.append(acc)
            acc *= d
        got = [dt.strides[i] for i in range(dt.ndim)]
        if any(g != e for g, e, d in zip(got, reversed(expect), shape) if d > 1):
            strides = got
    n = int(np.prod(shape)) if shape else 1
    data = int(dt.data or 0) + int(dt.byte_offset)
    deleter = mt.deleter
    mt_ptr = ctypes.pointer(mt)
    _api.PyCapsule_SetName(cap, used)
    if kind == (2, 32, 1) and strides is None:
        out = ffi.new("tl_buf *")
        st = lib.tl_buf_wrap(data, n, out)
        if st:
            raise_status("from_dlpack", st)
        b = Buffer(out[0], n)
        keep = (cap, obj)   # the producer's memory lives while these do
        weakref.finalize(b, lambda: (deleter(mt_ptr) if deleter else None, keep))
        if read_only:
            return AnyBuffer(shape, b.copy())   # the wrapper dies here: the producer is released
        return AnyBuffer(shape, b)
    # float64 or strided: read the producer's bytes and make a contiguous float32 copy
    try:
        return AnyBuffer.from_numpy(_strided_copy(data, shape, strides, dt.dtype.bits // 8))
    finally:
        if deleter:
            deleter(mt_ptr)   # nothing of the producer's is kept


def _strided_copy(data: int, shape: tuple, strides, itemsize: int) -> np.ndarray:
    """A host copy of the DLPack tensor at `data` (either backend's memory: the bytes it spans
    are read through a wrapped native buffer), as float64 or float32 NumPy."""
    if strides is None:
        strides, acc = [], 1
        for d in reversed(shape):
            strides.insert(0, acc)
            acc *= d
    if any(st < 0 for st in strides):
        raise ValueError(f"from_dlpack: negative strides {list(strides)} are not supported")
    np_type = np.float64 if itemsize == 8 else np.float32
    if 0 in shape:
        return np.zeros(shape, np_type)
    extent = 1 + sum((d - 1) * st for d, st in zip(shape, strides))
    nbytes = extent * itemsize
    words = -(-nbytes // 4)
    out = ffi.new("tl_buf *")
    st = lib.tl_buf_wrap(data, words, out)
    if st:
        raise_status("from_dlpack", st)
    raw = Buffer(out[0], words).to_numpy().view(np.uint8)[:nbytes].view(np_type)
    view = np.lib.stride_tricks.as_strided(raw, shape, [st * itemsize for st in strides])
    return np.array(view, copy=True)


def from_numpy(a, session=None, requires_grad=False):
    """A Tensor (in `session`, default session) holding a float32 copy of a."""
    from torchlean.session import default_session
    return (session or default_session()).tensor(a, requires_grad=requires_grad)


def _tensor_dlpack(self, stream=None, max_version=None, dl_device=None, copy=None):
    # CUDA consumers (torch, CuPy) always name their stream; a consumer that names none is a
    # host library such as NumPy, which would fail inside its own import (and a capsule failing
    # there cannot be cleaned up safely): refuse here, before any capsule exists.
    if device()[0] == kDLCUDA and stream is None:
        raise BufferError("__dlpack__: this tensor lives in CUDA memory and the consumer gave no "
                          "CUDA stream (a host library such as NumPy?); use .numpy() for a host "
                          "copy, or torch.from_dlpack / cupy.from_dlpack for zero-copy")
    if dl_device is not None and tuple(int(v) for v in dl_device) != device():
        raise BufferError(f"__dlpack__: the tensor lives on DLPack device {device()}, not "
                          f"{tuple(dl_device)}; use .numpy() for a host copy")
    versioned = max_version is not None and int(max_version[0]) >= DLPACK_VERSION[0]
    if copy:
        return to_dlpack(self._node().value.copy(), versioned=versioned, copied=True)
    return to_dlpack(self.value, versioned=versioned)


def _tensor_dlpack_device(self):
    return device()


def tensor_from_dlpack(obj, session=None):
    from torchlean.session import default_session
    s = session or default_session()
    buf = from_dlpack(obj)
    nid = s.tape.leaf(buf, requires_grad=False)   # borrowed: the producer owns the memory
    s.tape.nodes[nid].pinned = False   # forgotten with its last Tensor: the producer is let go
    return s._wrap(nid)


def _install():
    from torchlean.session import Tensor, Parameter
    Tensor.__dlpack__ = _tensor_dlpack
    Tensor.__dlpack_device__ = _tensor_dlpack_device


_install()
