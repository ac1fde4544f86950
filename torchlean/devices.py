"""torch.device and the .to()/.cpu()/.cuda() idiom. A torchlean Tensor lives on the backend
chosen at import (TORCHLEAN_BACKEND): moving it is a no-op where the backend already is the
target, "cpu" is always accepted (.numpy() copies to the host), and "cuda" on the stub raises
BackendError, as torch raises without CUDA. IntTensors always live on the host."""
from __future__ import annotations

from torchlean import runtime
from torchlean.dtypes import dtype, dtype_of
from torchlean.errors import BackendError


class device:
    """torch.device('cpu'), device('cuda'), device('cuda:0'), device('cuda', 1)."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):  # noqa: A002 - torch's name
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type
        if not isinstance(type, str):
            raise TypeError(f"device: expected a string like 'cpu' or 'cuda:0', got "
                            f"{type.__class__.__name__}")
        name, sep, idx = type.partition(":")
        if name not in ("cpu", "cuda"):
            raise ValueError(f"device: expected 'cpu' or 'cuda' (optionally ':index'), got "
                             f"{type!r}")
        if sep:
            if not idx.isdigit() or index is not None:
                raise ValueError(f"device: invalid device string {type!r}")
            index = int(idx)
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)
                                  or index < 0):
            raise ValueError(f"device: index must be a non-negative int, got {index!r}")
        self.type, self.index = name, index

    def __eq__(self, o):
        if isinstance(o, str):
            o = device(o)
        return isinstance(o, device) and (self.type, self.index) == (o.type, o.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        idx = "" if self.index is None else f", index={self.index}"
        return f"device(type={self.type!r}{idx})"


def current() -> device:
    """Where this process's float Tensors live."""
    return device("cuda", 0) if runtime.backend() == "cuda" else device("cpu")


def check_cuda(op: str) -> None:
    if runtime.backend() != "cuda":
        raise BackendError(f"{op}: torchlean runs on the {runtime.backend()} backend, so there is "
                           "no CUDA device to move to (set TORCHLEAN_BACKEND=cuda on a GPU "
                           "machine; torchlean.cuda.is_available() says which)")


def parse_to(op: str, args, kwargs):
    """The dtype that x.to(*args, **kwargs) asks for (None: keep), after checking the device.
    torch's forms: to(device), to(dtype), to(device, dtype), to(other_tensor), and the keywords
    device=, dtype=, non_blocking=, copy=, memory_format=."""
    unknown = set(kwargs) - {"device", "dtype", "non_blocking", "copy", "memory_format"}
    if unknown:
        raise TypeError(f"{op}: unexpected keyword argument(s) {sorted(unknown)}")
    dev, dt = kwargs.get("device"), kwargs.get("dtype")
    for a in args:
        if isinstance(a, (str, device)) or (isinstance(a, int) and not isinstance(a, bool)):
            if dev is not None:
                raise TypeError(f"{op}: device given twice")
            dev = a
        elif hasattr(a, "dtype") and hasattr(a, "shape"):    # to(other): its dtype
            dt = a.dtype
        elif a is None:
            continue
        else:
            if dt is not None:
                raise TypeError(f"{op}: dtype given twice")
            dt = a
    if dev is not None:
        d = device(dev)
        if d.type == "cuda":
            check_cuda(op)
    return None if dt is None else dtype_of(dt, op)


__all__ = ["device", "dtype", "current", "check_cuda", "parse_to"]
