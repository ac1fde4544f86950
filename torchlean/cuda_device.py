"""torch.cuda's queries for the device idiom (`"cuda" if torch.cuda.is_available() else "cpu"`):
answered by the backend chosen at import, never by probing a driver again."""
from __future__ import annotations

from torchlean import runtime
from torchlean.random import manual_seed


def is_available() -> bool:
    """True when torchlean runs on the CUDA backend (float Tensors live on the GPU)."""
    return runtime.backend() == "cuda"


def device_count() -> int:
    return 1 if is_available() else 0


def current_device() -> int:
    return 0


def manual_seed_all(seed: int) -> None:
    """One key stream serves every device: the same as torchlean.manual_seed."""
    manual_seed(seed)


def synchronize(device=None) -> None:
    runtime.synchronize()


def empty_cache() -> None:
    runtime.empty_cache()
