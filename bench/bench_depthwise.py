"""Grouped and depthwise convolution, forward + backward, torchlean against PyTorch (cuDNN on
the GPU, its CPU kernels on the stub) in one process: median milliseconds after warm-up, random
data, ratios. `python bench/bench_depthwise.py [--out bench/results/depthwise.md]`.
The CUDA side synchronises before reading the clock (torchlean.synchronize, torch.cuda)."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import torchlean as tl
from torchlean.buffer import AnyBuffer
from torchlean.nn import functional as F

CASES = [  # name, N, C, H=W, kernel, groups (0: depthwise)
    ("depthwise 3x3, MobileNet stage", 64, 128, 56, 3, 0),
    ("depthwise 7x7, ConvNeXt stage", 64, 96, 56, 7, 0),
    ("depthwise 3x3, small", 8, 32, 28, 3, 0),
    ("grouped 3x3, 8 groups of 16", 32, 128, 28, 3, 8),
]


def _time(fn, sync, reps):
    for _ in range(3):
        fn()
    sync()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        out.append((time.perf_counter() - t) * 1e3)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--small", action="store_true", help="the last two cases only (CPU)")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    dev = "cuda" if tl.backend() == "cuda" else "cpu"
    if torch is not None:
        torch.backends.cudnn.allow_tf32 = False
        torch.set_num_threads(max(1, torch.get_num_threads()))
    rows = []
    for name, n, c, hw, k, groups in CASES[2:] if a.small else CASES:
        g = c if groups == 0 else groups
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
        w = (rng.standard_normal((c, c // g, k, k)) * 0.1).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        gy = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
        # inputs live on the device before timing, on both sides: the step is the kernels only
        X, W, B = tl.nn.Parameter(x), tl.nn.Parameter(w), tl.nn.Parameter(b)
        seed = AnyBuffer.from_numpy(gy)

        def step_tl():
            with tl.Session() as s:
                y = F.conv2d(s.use(X), s.use(W), s.use(B), padding=k // 2, groups=g)
                y.backward(seed)
        ms_tl = _time(step_tl, tl.synchronize, a.reps)
        ms_t = float("nan")
        if torch is not None:
            tx = torch.tensor(x, device=dev, requires_grad=True)
            tw = torch.tensor(w, device=dev, requires_grad=True)
            tb = torch.tensor(b, device=dev, requires_grad=True)
            tg = torch.tensor(gy, device=dev)

            def step_t():
                y = torch.nn.functional.conv2d(tx, tw, tb, padding=k // 2, groups=g)
                y.backward(tg)
            sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
            ms_t = _time(step_t, sync, a.reps)
        rows.append((name, f"N{n} C{c} {hw}x{hw} k{k} g{g}", ms_tl, ms_t))
    head = (f"Grouped/depthwise conv forward+backward, backend {tl.backend()}"
            f"{', exact' if tl.is_exact() else ''}; torch {getattr(torch, '__version__', 'absent')}\n\n"
            "| case | shape | torchlean ms | torch ms | torchlean / torch |\n|---|---|---:|---:|---:|\n")
    text = head + "".join(f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:.3f} | {r[2] / r[3]:.2f} |\n"
                          for r in rows)
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
