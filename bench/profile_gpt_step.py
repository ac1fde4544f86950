"""Where the GPT-width step (bench_gpt_step.py's model) spends its GPU time, torchlean against
torch eager: kernels by total time per step, traced with torch.profiler (CUPTI records every
kernel in the process, torchlean's included).

    python bench/profile_gpt_step.py [--steps 3] [--top 25]
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_gpt_step import FULL  # noqa: E402
from bench_models import lm, tl_trainer, torch_trainer  # noqa: E402
from sidebyside import TorchSide  # noqa: E402


def trace(torch, step, sync, steps, top, title):
    from torch.profiler import ProfilerActivity, profile
    for i in range(3):
        step(i)
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(steps):
            step(i)
        sync()
        torch.cuda.synchronize()
    per = defaultdict(lambda: [0.0, 0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            d = per[ev.name[:100]]
            d[0] += getattr(ev, "device_time_total", None) or ev.cuda_time_total
            d[1] += 1
    total = sum(v[0] for v in per.values()) / steps / 1e3
    print(f"\n## {title}: kernels {total:.3f} ms/step")
    for k, (us, n) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {us / steps / 1e3:8.3f} ms  {n // steps:4d}x  {k}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    import torchlean as tl
    w = lm(dict(FULL), np.random.default_rng(0))
    side = TorchSide(tl.backend(), False)
    step, state = tl_trainer(w)
    trace(side.torch, step, tl.synchronize, a.steps, a.top, "torchlean default")
    trace(side.torch, torch_trainer(w, side, state), side.sync, a.steps, a.top, "torch eager")


if __name__ == "__main__":
    main()
