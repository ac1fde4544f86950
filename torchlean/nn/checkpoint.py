"""Checkpoints in the safetensors format, read and written through the `safetensors` library.

Loading validates the file's frame before anything large is read: the 8-byte header length
must fit the file (and the format's 100 MB header limit), the JSON header must parse, and every
tensor's offsets must lie inside the data section and match its dtype and shape. So a damaged
or hostile file raises ValueError naming the file and the problem, with memory bounded by the
file size. Numeric tensors of any dtype load as float32 (what torchlean holds): a file written
by PyTorch with int64 buffers (BatchNorm's num_batches_tracked) loads.

In a data-parallel job (torchlean.distributed.init() with several ranks) rank 0 alone writes:
every rank holds the same weights, and several writers of one path would race. The other ranks
return at once (no barrier, so a save guarded by `if rank == 0` still works); a rank that reads
the file back must first wait for rank 0, with torchlean.distributed.barrier().
"""
from __future__ import annotations

import contextlib
import json
import os
import struct

import numpy as np
import safetensors.numpy as _st

MAX_HEADER_BYTES = 100_000_000    # the safetensors format's own limit
_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2,
             "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def writes_here() -> bool:
    """False on ranks other than 0 of a multi-process job: they skip checkpoint writes."""
    from torchlean import distributed as dist
    return not dist.is_initialized() or dist.rank() == 0


def save_file(tensors: dict, path) -> None:
    """Write {name: array} as float32 tensors (0-d arrays keep their shape), atomically: a
    reader (or a resumed run) sees the old file or the complete new one, never a torn one.
    Rank 0 alone writes in a data-parallel job."""
    if not writes_here():
        return
    data = _st.save({name: np.asarray(v, dtype=np.float32, order="C")  # 0-d stays 0-d
                     for name, v in tensors.items()})
    write_atomic(path, data)


def write_atomic(path, data: bytes) -> None:
    """Write data to a temporary file next to path, fsync it, then rename it over path (and
    fsync the folder); on any failure the temporary file is removed and path is untouched.
    Rank 0 alone writes in a data-parallel job."""
    if not writes_here():
        return
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
    with contextlib.suppress(OSError):   # make the rename itself durable where folders open
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _bad(path, problem):
    return ValueError(f"load_file: {os.fspath(path)!s} is not a valid safetensors file: {problem}")


def _check_frame(path) -> None:
    """Validate the header length, the header and every tensor's byte range against the file
    size, reading at most the header."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _bad(path, f"truncated: {size} bytes, shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER_BYTES:
            raise _bad(path, f"header length {n} exceeds the format's limit of "
                             f"{MAX_HEADER_BYTES} bytes")
        if n > size - 8:
            raise _bad(path, f"header length {n} runs past the end of the file ({size} bytes)")
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _bad(path, f"the {n}-byte header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise _bad(path, f"the header is a JSON {type(header).__name__}, not an object")
    data_bytes = size - 8 - n
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
            raise _bad(path, f"tensor {name!r} needs dtype, shape and data_offsets, got {info!r}")
        dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in _ITEMSIZE:
            raise _bad(path, f"tensor {name!r} has unknown dtype {dtype!r}")
        if (not isinstance(shape, list)
                or not all(type(d) is int and d >= 0 for d in shape)):
            raise _bad(path, f"tensor {name!r} has shape {shape!r}; expected non-negative ints")
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(type(o) is int for o in offs)):
            raise _bad(path, f"tensor {name!r} has data_offsets {offs!r}; expected [begin, end]")
        b, e = offs
        if not 0 <= b <= e <= data_bytes:
            raise _bad(path, f"tensor {name!r} has data_offsets {offs} outside the "
                             f"{data_bytes}-byte data section (file truncated?)")
        want = int(np.prod(shape, dtype=object)) * _ITEMSIZE[dtype]
        if e - b != want:
            raise _bad(path, f"tensor {name!r} ({dtype}, shape {shape}) needs {want} bytes, "
                             f"its data_offsets {offs} span {e - b}")


def load_file(path) -> dict:
    """{name: float32 array} from a safetensors file; a damaged file raises ValueError."""
    _check_frame(path)
    try:
        raw = _st.load_file(str(path))
    except Exception as e:  # the library's own checks (overlaps, dtypes NumPy lacks)
        raise _bad(path, f"{type(e).__name__}: {e}") from None
    out = {}
    for name, a in raw.items():
        if a.dtype.kind not in "biuf":
            raise _bad(path, f"tensor {name!r} has dtype {a.dtype}, not a number")
        out[name] = np.asarray(a, dtype=np.float32, order="C")
    return out
