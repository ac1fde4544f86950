"""The runtime's switches: the TORCHLEAN_* environment, the determinism and exact-mode flags,
TF32, waiting for the device and the allocator's counters.

Every variable torchlean reads is named in ENV (and docs/environment.md); the TORCHLEAN_* flags
are parsed by the readers below, so a typo is an error naming the variable instead of a silent
default. The loader reads TORCHLEAN_BACKEND and TORCHLEAN_LIB_DIR itself (it runs before any
library exists); the native libraries read their own (values checked here where they matter). Modules below the package face (tape, nn, distributed) import this module, never
`torchlean` itself, for the flags and synchronize().
"""
from __future__ import annotations

import os

import numpy as np

from torchlean._loader import BACKEND, ffi, lib
from torchlean import _capture
from torchlean.buffer import raise_status

# every variable torchlean reads: name -> (reader, what it sets); docs/environment.md lists the same.
# Readers: "install" (setup.py), "loader", "flag"/"bytes"/"seconds"/"choice"/"path" (parsed
# here), "stub" or "cuda" (read by that native library), "bench" (read only by the benchmark
# build, `make cuda-bench`: native/cuda/bench_switches.h), "tests".
ENV = {
    "TORCHLEAN_BUILD_CUDA": ("install", "pip install: build the CUDA library (1), never (0), or when nvcc and a GPU driver are found (unset)"),
    "TORCHLEAN_BACKEND": ("loader", "which native library: auto, stub or cuda"),
    "TORCHLEAN_LIB_DIR": ("loader", "a folder searched first for the native libraries"),
    "TORCHLEAN_DETERMINISTIC": ("flag", "fixed-order reductions everywhere"),
    "TORCHLEAN_CUDA_DETERMINISTIC_REDUCTIONS": ("flag", "the older name of TORCHLEAN_DETERMINISTIC"),
    "TORCHLEAN_EXACT": ("flag", "exact mode (implies deterministic)"),
    "TORCHLEAN_ALLOW_TF32": ("flag", "CUDA GEMMs may use TF32 tensor cores"),
    "TORCHLEAN_KEEP_ACTIVATIONS": ("flag", "keep GELU, softplus and layer-norm outputs for the backward (unset: the stub keeps, CUDA recomputes)"),
    "OMP_NUM_THREADS": ("stub", "threads of the stub's pool (default: the CPUs this process may use)"),
    "TORCHLEAN_STUB_GEMM_OLDER_PATHS": ("stub", "1: the stub's GEMM takes the paths it took before its narrow-by-rows and short-and-wide ones (same bits; tests compare them)"),
    "TORCHLEAN_AUDIT": ("path", "a file path: record every op and optimizer step of the run into it "
                        "(python -m torchlean.audit; docs/audit.md)"),
    "TORCHLEAN_CUDA_SYNC": ("cuda", "1: synchronise after every CUDA launch, so an error names its kernel (debugging)"),
    "TORCHLEAN_CONV_IGEMM": ("cuda", "0: CUDA convolutions take im2col + cuBLAS instead of the implicit-GEMM kernels (more memory; compare speed on your shapes)"),
    "TORCHLEAN_CUDA_CACHE_CAP_BYTES": ("bytes", "cap on the CUDA pool's cached bytes (0: none)"),
    "TORCHLEAN_DIST_TIMEOUT_S": ("seconds", "deadline of every collective of torchlean.distributed"),
    "TORCHLEAN_DIST_BOOTSTRAP": ("choice", "mpi or tcp: how the ranks meet (default: MPI under mpirun/mpiexec, rank 0's TCP store under torchrun and srun)"),
    "TORCHLEAN_STORE_PORT": ("choice", "the TCP store's port on rank 0 (default MASTER_PORT; MASTER_PORT + 1 under torchrun's agent store)"),
    "TORCHLEAN_DDP_FLAT_BYTES": ("bytes", "NCCL: gradients smaller than this share one flat all-reduce per bucket (default 0: each in place; measured slower on NVLink)"),
    "TORCHLEAN_NCCL_LIB": ("path", "the libnccl to load (CUDA data parallel)"),
    "TORCHLEAN_GEMM_EXACT_TILE": ("bench", "128x128, 96x128, 96x96 or 128x64: one tile for every product of CUDA's exact GEMM"),
    "TORCHLEAN_GEMM_EXACT_CHAIN": ("bench", "0: CUDA's exact GEMM runs no long-K chain kernel"),
    "TORCHLEAN_GEMM_EXACT_SPLIT": ("bench", "0: CUDA's exact GEMM never splits K across blocks"),
    "TORCHLEAN_GEMM_EXACT_STAGE": ("bench", "0: CUDA's exact GEMM copies no operand into padded scratch for its tensor-core tiles"),
    "TORCHLEAN_ATTN_BWD": ("bench", "two (default), onepass or onepass64: CUDA attention's backward kernels"),
    "TORCHLEAN_ATTN_FWD_KEYS": ("bench", "64 (default) or 32: keys per tile of CUDA attention's forward"),
    "TORCHLEAN_CONV_GROUPED_LEGACY": ("bench", "1: CUDA grouped convolutions run the earlier per-value kernels"),
    "TORCHLEAN_DW_ROWS": ("bench", "1, 2 or 4 (default): most rows per thread of a CUDA depthwise tile"),
    "TORCHLEAN_REQUIRE_CUDA": ("tests", "fail instead of skipping when CUDA is not the backend"),
}


def _raw(name: str) -> str | None:
    if name not in ENV:
        raise KeyError(f"{name} is not a torchlean environment variable (runtime.ENV)")
    return os.environ.get(name)


def env_flag(name: str, alt: str | None = None) -> bool | None:
    """unset: None; empty or 0: False; 1: True; anything else is a ValueError. `alt` is an older
    name read when `name` is unset or empty (errors then name `alt`)."""
    v = _raw(name)
    if (v is None or v == "") and alt and _raw(alt) is not None:
        name, v = alt, _raw(alt)
    if v is None or v == "" or v == "0":
        return None if v is None else False
    if v == "1":
        return True
    raise ValueError(f"{name} must be unset, empty, 0 or 1, got {v!r}")


def env_bytes(name: str) -> int | None:
    """A byte count in plain decimal digits (unset or empty: None); junk is a ValueError."""
    v = _raw(name)
    if v is None or v == "":
        return None
    if not (v.isascii() and v.isdigit() and int(v) < 2**63):
        raise ValueError(f"{name} must be a decimal number of bytes (0 = no cap), got {v!r}")
    return int(v)


def env_seconds(name: str, default: float) -> float:
    """A positive finite number of seconds; unset or blank: default."""
    v = _raw(name) or ""
    if v.strip() == "":
        return default
    try:
        t = float(v)
    except ValueError:
        t = float("nan")
    if not t > 0 or t == float("inf"):
        raise ValueError(f"{name} must be a positive number of seconds, got {v!r}")
    return t


def env_choice(name: str, choices: tuple[str, ...]) -> str | None:
    """One of `choices` (unset or empty: None)."""
    v = _raw(name)
    if v is None or v == "":
        return None
    if v not in choices:
        raise ValueError(f"{name} must be unset or one of {', '.join(choices)}, got {v!r}")
    return v


def backend() -> str:
    """The name of the native backend in use: 'stub' or 'cuda'."""
    return BACKEND


def _check_flag(op: str, flag) -> int:
    """A bool or an integer (by its truth); anything else, a string like 'no' included, is an
    error rather than a truthy value."""
    if isinstance(flag, (int, np.integer, np.bool_)):
        return 1 if flag else 0
    raise TypeError(f"{op}: flag must be True or False, got {type(flag).__name__} {flag!r}")


def set_deterministic(flag: bool) -> bool:
    """Turn fixed-order (bit-reproducible) reductions on or off; returns the observed flag.
    Turning it off also turns exact mode off (exact implies deterministic)."""
    return bool(lib.tl_set_deterministic(_check_flag("set_deterministic", flag)))


def is_deterministic() -> bool:
    return bool(lib.tl_is_deterministic())


def set_exact(flag: bool) -> bool:
    """Turn exact mode on or off; returns the observed flag. In exact mode kernels follow the
    canonical arithmetic of native/common/tl_math.h so the stub and CUDA give the same bits
    (README "Reproducibility levels"). It implies deterministic mode: turned on with it, left
    as it was when exact mode goes off."""
    return bool(lib.tl_set_exact(_check_flag("set_exact", flag)))


def is_exact() -> bool:
    return bool(lib.tl_is_exact())


def synchronize() -> None:
    """Wait for queued device work (no-op on the stub)."""
    if _capture.STATE.strict:
        _capture.host_read("a synchronisation")
    st = lib.tl_synchronize()
    if st:
        raise_status("synchronize", st)


def memory_stats() -> dict:
    """Counters of the native allocator: live buffers and bytes, peak, allocations, frees, and
    (CUDA) cached pool bytes, its cap and the device's free/total bytes."""
    s = ffi.new("tl_memory_stats *")
    lib.tl_memory_stats_get(s)
    return {k: int(getattr(s, k)) for k in (
        "live_buffers", "live_bytes", "peak_bytes", "allocations", "frees", "cached_bytes",
        "cache_cap_bytes", "device_free_bytes", "device_total_bytes")}


def reset_peak_memory_stats() -> None:
    lib.tl_memory_reset_peak()


def empty_cache() -> None:
    """Return cached device memory to the driver (no-op on the stub)."""
    lib.tl_empty_cache()


def _apply_environment() -> None:
    """Validate every variable the libraries read and apply the flags, once, at import."""
    det = env_flag("TORCHLEAN_DETERMINISTIC", "TORCHLEAN_CUDA_DETERMINISTIC_REDUCTIONS")
    if det is not None:
        set_deterministic(det)
    exact = env_flag("TORCHLEAN_EXACT")   # after the deterministic flag: exact turns it on
    if exact is not None:
        set_exact(exact)
    env_bytes("TORCHLEAN_CUDA_CACHE_CAP_BYTES")
    env_choice("TORCHLEAN_ATTN_BWD", ("two", "onepass", "onepass64"))
    env_choice("TORCHLEAN_ATTN_FWD_KEYS", ("32", "64"))
    tf32 = env_flag("TORCHLEAN_ALLOW_TF32")
    if tf32 is not None:
        lib.tl_set_allow_tf32(1 if tf32 else 0)


_apply_environment()
