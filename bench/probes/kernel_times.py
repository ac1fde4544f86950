"""GPU time per kernel of chosen catalog calls, torchlean and PyTorch in one process: PyTorch's
profiler (CUPTI) records every kernel the process launches, torchlean's included, so a call's
wall time splits into kernels and the host time between them.

  TORCHLEAN_BACKEND=cuda python3 bench/probes/kernel_times.py [--only NAME]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict

import numpy as np

os.environ.setdefault("TORCHLEAN_BACKEND", "cuda")
import torch  # noqa: E402
import torchlean as tl  # noqa: E402


def cases():
    rng = np.random.default_rng(0)
    f = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)  # noqa: E731
    x = tl.tensor(f(4096, 4096))
    yield "cumsum 4096x4096 dim -1", lambda: x.cumsum(-1)
    x2 = tl.tensor(f(65536, 128))
    yield "cumsum 65536x128 dim -1", lambda: x2.cumsum(-1)
    x3 = tl.tensor(f(1, 1 << 24))
    yield "cumsum 1x16777216", lambda: x3.cumsum(-1)
    i2 = tl.tensor(rng.integers(0, 4096, (4096, 4096)))
    s2 = tl.tensor(f(4096, 4096))
    yield "scatter_add 4096x4096 dim 1 (deterministic)", lambda: x.scatter_add(1, i2, s2)
    big = tl.tensor(f(32768, 1024))
    idx = tl.tensor(rng.integers(0, 32768, 65536))
    src = tl.tensor(f(65536, 1024))
    yield "index_add 32768x1024 += 65536 (deterministic)", lambda: big.index_add(0, idx, src)
    m = tl.tensor(rng.random((4096, 4096)) < 0.5)
    yield "masked_fill 4096x4096", lambda: x.masked_fill(m, 0.5)
    yield "tril 4096x4096", lambda: tl.tril(x)
    g = tl.tensor(rng.integers(0, 4096, (4096, 4096)))
    yield "gather 4096x4096 dim 1", lambda: x.gather(1, g)
    x4 = tl.tensor(f(64, 65536))
    yield "sort 64x65536", lambda: x4.sort(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    for name, fn in cases():
        if args.only and args.only not in name:
            continue
        det = "deterministic" in name
        tl.set_deterministic(det)
        with tl.no_grad():
            for _ in range(3):
                fn()
            tl.synchronize()
            t0 = time.perf_counter()
            for _ in range(10):
                fn()
            tl.synchronize()
            wall = (time.perf_counter() - t0) / 10 * 1e3
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    fn()
                tl.synchronize()
        per = defaultdict(float)
        for e in prof.key_averages():
            us = getattr(e, "device_time_total", None)
            us = e.cuda_time_total if us is None else us
            if us:
                per[e.key[:70]] += us / 5 / 1e3
        print(f"{name}: wall {wall:.3f} ms per call, kernels {sum(per.values()):.3f} ms")
        for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:6]:
            print(f"    {v:8.4f} ms  {k}")
        tl.set_deterministic(False)


if __name__ == "__main__":
    main()
