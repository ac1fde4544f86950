"""Shared machinery of the side-by-side benches (torchlean vs PyTorch eager, one process).

bench_examples.py and bench_models.py both: find torch and a device it can share with
torchlean, switch TF32 off, copy torchlean's initial weights into the torch twin by state_dict
name, time training steps the same way on both sides and format the numbers. Keeping that here
means the two tables are measured identically.
"""
from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np


class TorchSide:
    """torch and the device it runs on next to torchlean's backend, or the reason it cannot
    (`dev` is None): the torch columns then read n/a."""

    def __init__(self, backend: str, no_torch: bool = False):
        self.torch, self.dev, self.note = None, None, "torch not installed"
        if no_torch:
            self.note = "torch not used (--no-torch)"
        else:
            try:
                import torch
                self.torch = torch
            except ImportError:
                pass
        torch = self.torch
        if torch is not None:
            if backend == "cuda":
                if torch.cuda.is_available():
                    self.dev, self.note = torch.device("cuda"), f"torch {torch.__version__} CUDA"
                else:
                    self.note = "torch has no CUDA device"
            else:
                self.dev, self.note = torch.device("cpu"), f"torch {torch.__version__} CPU"
        self.cuda = self.dev is not None and self.dev.type == "cuda"
        if self.dev is not None:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.manual_seed(0)
        if self.cuda:
            self.device_name = torch.cuda.get_device_name(self.dev)
            self._warm_workspaces()
        else:
            self.device_name = (f"CPU ({platform.processor() or platform.machine()}, "
                                f"{os.cpu_count()} cores)")

    def _warm_workspaces(self):
        """Create cuBLAS, cuDNN and cuFFT workspaces before any baseline is read, so they are
        not counted as a model's memory."""
        torch = self.torch
        z = torch.randn(64, 64, device=self.dev, requires_grad=True)
        (z @ z).sum().backward()
        torch.nn.functional.conv2d(z.view(1, 1, 64, 64), z[:3, :3].reshape(1, 1, 3, 3))
        torch.fft.irfft(torch.fft.rfft(z, dim=0), n=64, dim=0)
        del z
        torch.cuda.synchronize()

    # allocator hooks (no-ops off CUDA: torch's CPU allocator has no peak counter)
    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def reset_peak(self):
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats()

    def peak(self):
        return self.torch.cuda.max_memory_allocated() if self.cuda else None

    def live(self):
        return self.torch.cuda.memory_allocated() if self.cuda else None

    def empty_cache(self):
        if self.cuda:
            self.torch.cuda.empty_cache()

    def load_state(self, model, state: dict, what: str):
        """Copy torchlean's state_dict (host arrays) into the torch twin by name; every torch
        parameter must have a torchlean counterpart."""
        torch = self.torch
        own = model.state_dict()
        params = {k for k, _ in model.named_parameters()}
        missing = sorted(k for k in params if k not in state)
        unknown = sorted(k for k in state if k not in own)
        if missing or unknown:
            raise KeyError(f"{what}: torch parameters without a torchlean twin {missing}, "
                           f"torchlean state the twin lacks {unknown}")
        with torch.no_grad():
            for k, v in state.items():
                own[k].copy_(torch.from_numpy(np.asarray(v)).reshape(own[k].shape))


def torchlean_hooks(tl):
    """(sync, reset_peak, peak) for torchlean's allocator."""
    return (tl.synchronize, tl.reset_peak_memory_stats,
            lambda: tl.memory_stats()["peak_bytes"])


def measure(step, sync, reset_peak, peak, warmup=5, repeats=5, steps=20, target_s=None,
            budget_s=None):
    """Time training steps: step(i, want_loss) runs optimizer step i.

    The first step (its loss is returned) and up to warmup - 1 more are warm-up; then the peak
    counter is reset and `repeats` runs of `steps` steps are timed, each closed by sync().
    steps <= 0 picks the count from the last warm-up step so a run lasts about target_s; with
    budget_s, warm-up stops early and repeats shrink so a slow model stays near that budget.
    Returns dict(first_loss, step_s = median run time / steps, peak, steps, repeats)."""
    t0 = time.perf_counter()
    first = step(0, want_loss=True)
    sync()
    last, i = time.perf_counter() - t0, 1
    while i < warmup and (budget_s is None or time.perf_counter() - t0 <= budget_s / 3):
        ts = time.perf_counter()
        step(i)
        sync()
        last, i = time.perf_counter() - ts, i + 1
    if steps <= 0:
        steps = int(max(1, min(200, round((target_s or 0.2) / max(last, 1e-6)))))
    if budget_s is not None:
        repeats = max(1, min(repeats, int(budget_s / max(steps * last, 1e-6))))
    reset_peak()
    times = []
    for _ in range(repeats):
        ts = time.perf_counter()
        for _ in range(steps):
            step(i)
            i += 1
        sync()
        times.append(time.perf_counter() - ts)
    return dict(first_loss=first, step_s=statistics.median(times) / steps, peak=peak(),
                steps=steps, repeats=repeats)


def emit(text: str, out: str | None) -> None:
    """Print a results table, and write it to `out` only when one was asked for (--out)."""
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text)
        print(f"\nwrote {out}")


def append_table(text: str, out: str | None) -> None:
    """Print a results table and, when --out names a file, append it there (one file collects
    several runs' tables)."""
    print(text)
    if out:
        with open(out, "a") as f:
            f.write("\n" + text)


def ratio(a, b) -> str:
    """a / b as '0.75x', or n/a when either side is missing."""
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def mib(b) -> str:
    return "n/a" if b is None else f"{b / 2 ** 20:.2f} MiB"
