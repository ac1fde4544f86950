"""Median step time of one bench_models.py workload, torchlean only, in the current mode.

    TORCHLEAN_BACKEND=cuda python bench/step_time.py lm [--size full] [--runs 7] [--steps 10]

For quick A/B comparisons of one switch (an environment variable, exact or deterministic
mode) without the whole side-by-side table: run it once per setting.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_models as bm  # noqa: E402
import torchlean as tl  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model", choices=bm.MODELS)
    p.add_argument("--size", default="full", choices=["full", "quick"])
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--exact", action="store_true")
    p.add_argument("--det", action="store_true")
    a = p.parse_args()
    tl.set_deterministic(a.det)
    tl.set_exact(a.exact)
    w = bm.BUILDERS[a.model](bm.SIZES[a.model][a.size], np.random.default_rng(0))
    step, _ = bm.tl_trainer(w)
    for i in range(5):
        step(i)
    times = []
    for _ in range(a.runs):
        tl.synchronize()
        t0 = time.perf_counter()
        for i in range(a.steps):
            step(i)
        tl.synchronize()
        times.append((time.perf_counter() - t0) / a.steps * 1e3)
    times.sort()
    print(f"{a.model} {a.size} {tl.backend()} exact={tl.is_exact()} det={tl.is_deterministic()}: "
          f"median {times[len(times) // 2]:.3f} ms/step (min {times[0]:.3f}, max {times[-1]:.3f})")


if __name__ == "__main__":
    main()
