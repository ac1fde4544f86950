"""Timing helpers the GPU benches share: the device's name, and torch's side timed with CUDA
events (median after warm-up), so every table measures torch the same way."""
from __future__ import annotations

import statistics
import subprocess


def gpu_name() -> str:
    """The first GPU's name as nvidia-smi reports it ('unknown GPU' without one)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip().splitlines()
    except OSError:
        out = []
    return out[0] if out else "unknown GPU"


def torch_median_ms(torch, fn, reps: int, warmup: int = 3) -> float:
    """Median milliseconds of fn() on torch's current stream, CUDA events around each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e))
    return statistics.median(out)
