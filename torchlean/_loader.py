"""Find, open and check the native library chosen by TORCHLEAN_BACKEND.

Both libraries implement the same generated ABI, so one cffi declaration (ABI mode, no compiler
at install) serves both. The loader refuses a library whose ABI version or registry hash differs
from the generated Python side: that is the "edited ops.yaml, forgot to rebuild" mistake, which
ABI-mode cffi would otherwise turn into a crash.
"""
from __future__ import annotations

import ctypes
import os
import warnings
from pathlib import Path

import cffi

from torchlean._abi.cdef import ABI_VERSION, CDEF, REGISTRY_HASH
from torchlean.errors import BackendError

ffi = cffi.FFI()
ffi.cdef(CDEF)

# The stub brings its own thread pool (native/stub/threads.c) instead of libgomp, so loading it
# sets no OpenMP variable: another library's OpenMP in this process keeps its own settings.

_PKG = Path(__file__).resolve().parent
BACKENDS = ("stub", "cuda")


def search_dirs() -> list[Path]:
    """Where libraries are looked for, in order: TORCHLEAN_LIB_DIR, the package, the repo build/."""
    dirs = []
    env = os.environ.get("TORCHLEAN_LIB_DIR")
    if env:
        if not Path(env).is_dir():
            raise BackendError(f"TORCHLEAN_LIB_DIR={env!r} is not a directory (unset it, or "
                               "point it at the folder holding libtorchlean_*.so)")
        dirs.append(Path(env))
    dirs += [_PKG / "lib", _PKG.parent / "build"]
    return dirs


def _find(name: str) -> tuple[Path | None, list[Path]]:
    tried = [d / f"libtorchlean_{name}.so" for d in search_dirs()]
    for p in tried:
        if p.is_file():
            return p, tried
    return None, tried


def _unusable(msg: str) -> BackendError:
    """The library file exists but cannot be used (does not load, is not a torchlean library,
    or was built from another registry): under `auto` this is worth a warning."""
    e = BackendError(msg)
    e.unusable = True
    return e


NO_GPU = ("TORCHLEAN_BACKEND=cuda but no GPU was found ({why}); TORCHLEAN_BACKEND=stub runs "
          "torchlean on the CPU")


def _no_gpu_reason() -> str | None:
    """Why this machine has no usable NVIDIA driver, or None when it has one."""
    if os.path.isdir("/proc/driver/nvidia"):
        return None
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no NVIDIA driver: /proc/driver/nvidia is absent and libcuda.so.1 does not load"
    return None


def open_backend(name: str):
    """Open and check one backend library; raise BackendError saying why it cannot be used."""
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")
    path, tried = _find(name)
    if path is None:
        if name == "cuda" and (why := _no_gpu_reason()):
            raise BackendError(NO_GPU.format(why=why))
        hint = "run `make`" if name == "stub" else "run `make cuda` on a machine with nvcc"
        raise BackendError(f"torchlean {name} library not found ({hint}); tried: "
                           + ", ".join(str(t) for t in tried))
    try:
        lib = ffi.dlopen(str(path))
    except OSError as e:
        raise _unusable(f"cannot load {path}: {e}") from None
    try:
        abi = lib.tl_abi_version()
        got_hash = ffi.string(lib.tl_registry_hash()).decode()
    except AttributeError as e:   # cffi resolves symbols lazily: a foreign library lacks ours
        raise _unusable(f"{path} is not a torchlean library ({e})") from None
    if abi != ABI_VERSION or got_hash != REGISTRY_HASH:
        raise _unusable(
            f"{path} was built from another registry (library ABI {abi}, hash {got_hash}; "
            f"Python side ABI {ABI_VERSION}, hash {REGISTRY_HASH}); rebuild with `make`")
    if name == "cuda":
        n = ffi.new("int64_t *")
        if lib.tl_device_count(n) != 0:
            why = _no_gpu_reason()
            raise BackendError(NO_GPU.format(why=why) if why else
                               f"CUDA driver error: {ffi.string(lib.tl_last_error()).decode()}")
        if n[0] < 1:
            raise BackendError(NO_GPU.format(why="the driver sees 0 devices; check "
                                                 "CUDA_VISIBLE_DEVICES"))
    return lib, path


def _choose():
    want = os.environ.get("TORCHLEAN_BACKEND", "auto").strip().lower() or "auto"
    if want == "auto":
        try:
            return ("cuda",) + open_backend("cuda")
        except BackendError as e:
            # not built, or no device: the stub is the normal choice; a present but broken
            # CUDA build is worth saying
            if getattr(e, "unusable", False):
                warnings.warn(f"torchlean: falling back to the stub backend because the CUDA "
                              f"library is unusable: {e}", RuntimeWarning, stacklevel=2)
        return ("stub",) + open_backend("stub")
    if want not in BACKENDS:
        raise BackendError(f"TORCHLEAN_BACKEND={want!r}; expected stub, cuda or auto")
    return (want,) + open_backend(want)


try:
    BACKEND, lib, LIB_PATH = _choose()
except BackendError as e:   # said in one line: what went wrong and what to do, no inner frames
    raise e.with_traceback(None) from None


def last_error() -> str:
    return ffi.string(lib.tl_last_error()).decode(errors="replace")


def raise_status(op: str, status: int):
    """Turn a non-zero TL_ status into the matching Python exception."""
    from torchlean.errors import BackendError, DeviceError
    msg = last_error() or f"{op}: failed with status {status}"
    if status == lib.TL_E_OOM:
        raise MemoryError(msg)
    if status == lib.TL_E_STICKY:
        raise DeviceError(msg + " (the CUDA context is unusable: restart the process)")
    if status in (lib.TL_E_DEVICE, lib.TL_E_UNSUPPORTED):
        raise BackendError(msg)
    if status == lib.TL_E_INTERNAL:
        raise RuntimeError(msg)
    raise ValueError(msg)
