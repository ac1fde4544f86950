"""Where a realistic model's training step spends its GPU time: kernels by total time.

    python bench/profile_models.py [--models vgg,lm,fno,mamba] [--modes default,det] [--steps 5]

Models: bench_models.py's, and gpt (bench_gpt_step.py's GPT-2 width LM); modes: default, det,
exact.

Builds bench_models.py's torchlean workloads and traces a few steps after warm-up with
torch.profiler: CUPTI records every kernel launched in the process, torchlean's included.
Per model and mode it prints the step's wall time, the summed kernel time (their gap is host
overhead and idle GPU), and the kernels that take the most time per step. Needs torch with CUDA.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_models as bm  # noqa: E402


def profile(name, mode, steps, top):
    import torch
    import torchlean as tl
    from torch.profiler import ProfilerActivity, profile as tprofile
    if name == "gpt":   # bench_gpt_step.py's GPT-2 width LM
        w = bm.lm(dict(vocab=8192, d=768, heads=12, layers=6, T=512, batch=8),
                  np.random.default_rng(0))
    else:
        w = bm.BUILDERS[name](bm.SIZES[name]["full"], np.random.default_rng(0))
    tl.set_deterministic(mode == "det")
    tl.set_exact(mode == "exact")
    try:
        step, _ = bm.tl_trainer(w)
        for i in range(3):
            step(i)
        tl.synchronize()
        t0 = time.perf_counter()
        for i in range(steps):
            step(i)
        tl.synchronize()
        wall = (time.perf_counter() - t0) / steps
        with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(steps):
                step(i)
            tl.synchronize()
            torch.cuda.synchronize()
    finally:
        tl.set_exact(False)
        tl.set_deterministic(False)
    per = defaultdict(lambda: [0.0, 0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            d = per[ev.name[:90]]
            d[0] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
            d[1] += 1
    total = sum(v[0] for v in per.values()) / steps / 1e3
    print(f"\n## {name} [{mode}]: wall {wall * 1e3:.3f} ms/step, kernels {total:.3f} ms/step")
    for k, (us, n) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {us / steps / 1e3:8.3f} ms  {n // steps:4d}x  {k}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="vgg,lm,fno,mamba")
    p.add_argument("--modes", default="default,det")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--top", type=int, default=14)
    a = p.parse_args()
    for name in a.models.split(","):
        for mode in a.modes.split(","):
            try:
                profile(name, mode, a.steps, a.top)
            except Exception as e:  # one failing model does not stop the others
                print(f"\n## {name} [{mode}]: failed: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
