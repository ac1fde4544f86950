"""torch.cuda: the device queries (torchlean.cuda_device) and graph_step, a whole training step
captured once and replayed as one CUDA graph (torchlean.cuda_graph)."""
from __future__ import annotations

from torchlean.cuda_device import (current_device, device_count, empty_cache, is_available,
                                   manual_seed, manual_seed_all, synchronize)
from torchlean.cuda_graph import graph_step

__all__ = ["is_available", "device_count", "current_device", "manual_seed", "manual_seed_all",
           "synchronize", "empty_cache", "graph_step"]
