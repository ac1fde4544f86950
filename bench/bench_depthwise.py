"""Grouped and depthwise convolution, forward + backward, torchlean against PyTorch (cuDNN on
the GPU, its CPU kernels on the stub) in one process: median milliseconds after warm-up, random
data, ratios, for the training step (autograd, both sides) and for the forward and the backward
alone (torchlean's registry ops on device buffers; torch's F.conv2d and autograd.grad over a
kept graph). The err column is the largest difference from torch over y, dx, dw and db, relative
to each one's largest magnitude; `same` says whether two backward runs gave the same bits.
`python bench/bench_depthwise.py [--out bench/results/depthwise.md]`. Both sides synchronise
before reading the clock (torchlean.synchronize, torch.cuda.synchronize). The header names the
kernel knobs in effect (native/cuda/conv_grouped.cu)."""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import torchlean as tl
from torchlean._generated import ops as O
from torchlean.buffer import AnyBuffer
from torchlean.nn import functional as F

CASES = [  # name, N, C, H=W, kernel, groups (0: depthwise), stride
    ("depthwise 3x3, MobileNet stage", 64, 128, 56, 3, 0, 1),
    ("depthwise 7x7, ConvNeXt stage", 64, 96, 56, 7, 0, 1),
    ("depthwise 3x3, small", 8, 32, 28, 3, 0, 1),
    ("grouped 3x3, 8 groups of 16", 32, 128, 28, 3, 8, 1),
    ("depthwise 3x3 stride 2, MobileNet", 64, 144, 56, 3, 0, 2),
]
KNOBS = ("TORCHLEAN_CONV_GROUPED_LEGACY", "TORCHLEAN_DW_ROWS")


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


def _rel(a, b):
    b = np.asarray(b, np.float64)
    return float(np.max(np.abs(np.asarray(a, np.float64) - b)) / max(np.max(np.abs(b)), 1e-30))


def measure(torch, dev, n, c, hw, k, g, st, reps):
    """(step, fwd, bwd) ms for torchlean and torch, the error against torch, same bits twice"""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((c, c // g, k, k)) * 0.1).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    ohw = (hw + 2 * (k // 2) - k) // st + 1
    gy = rng.standard_normal((n, c, ohw, ohw)).astype(np.float32)
    # inputs live on the device before timing, on both sides: the step is the kernels only
    X, W, B = tl.nn.Parameter(x), tl.nn.Parameter(w), tl.nn.Parameter(b)
    seed = AnyBuffer.from_numpy(gy)

    def step_tl():
        with tl.Session() as s:
            y = F.conv2d(s.use(X), s.use(W), s.use(B), padding=k // 2, groups=g, stride=st)
            y.backward(seed)
    r = {"tl_step": _time(step_tl, tl.synchronize, reps)}
    Wb, Bb, Xb = (AnyBuffer.from_numpy(v) for v in (w, b, x))

    def fwd_only():
        O.conv_grouped(Wb, Bb, Xb, padding=k // 2, groups=g, stride=st).release()

    def bwd_only():
        for o in O.conv_grouped_backward(Wb, Xb, seed, padding=k // 2, groups=g, stride=st):
            o.release()
    r["tl_fwd"] = _time(fwd_only, tl.synchronize, reps)
    r["tl_bwd"] = _time(bwd_only, tl.synchronize, reps)
    yb = O.conv_grouped(Wb, Bb, Xb, padding=k // 2, groups=g, stride=st)
    mine = [yb.to_numpy()]
    yb.release()
    attrs = dict(padding=k // 2, groups=g, stride=st)
    outs = [o.to_numpy() for o in O.conv_grouped_backward(Wb, Xb, seed, **attrs)]
    again = [o.to_numpy() for o in O.conv_grouped_backward(Wb, Xb, seed, **attrs)]
    r["same"] = all(np.array_equal(p.view(np.uint32), q.view(np.uint32)) for p, q in zip(outs, again))
    mine += [outs[2], outs[0], outs[1]]   # y, dx, dw, db
    for key in ("t_step", "t_fwd", "t_bwd", "err"):
        r[key] = float("nan")
    if torch is None:
        return r
    tx = torch.tensor(x, device=dev, requires_grad=True)
    tw = torch.tensor(w, device=dev, requires_grad=True)
    tb = torch.tensor(b, device=dev, requires_grad=True)
    tg = torch.tensor(gy, device=dev)
    conv = torch.nn.functional.conv2d
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    def step_t():
        conv(tx, tw, tb, padding=k // 2, groups=g, stride=st).backward(tg)
    r["t_step"] = _time(step_t, sync, reps)

    def fwd_t():
        with torch.no_grad():
            conv(tx, tw, tb, padding=k // 2, groups=g, stride=st)
    r["t_fwd"] = _time(fwd_t, sync, reps)
    ty = conv(tx, tw, tb, padding=k // 2, groups=g, stride=st)

    def bwd_t():
        torch.autograd.grad(ty, (tx, tw, tb), tg, retain_graph=True)
    r["t_bwd"] = _time(bwd_t, sync, reps)
    ref = [ty.detach()] + list(torch.autograd.grad(ty, (tx, tw, tb), tg))
    r["err"] = max(_rel(m, t.cpu().numpy()) for m, t in zip(mine, ref))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--small", action="store_true", help="the last two cases only (CPU)")
    ap.add_argument("--cases", help="comma-separated case numbers (0-based) to run")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    dev = "cuda" if tl.backend() == "cuda" else "cpu"
    if torch is not None:
        torch.backends.cudnn.allow_tf32 = False
        torch.set_num_threads(max(1, torch.get_num_threads()))
    cases = CASES[2:4] if a.small else CASES
    if a.cases:
        cases = [CASES[int(i)] for i in a.cases.split(",")]
    rows = []
    for name, n, c, hw, k, groups, st in cases:
        r = measure(torch, dev, n, c, hw, k, c if groups == 0 else groups, st, a.reps)
        rows.append((name, f"N{n} C{c} {hw}x{hw} k{k} g{c if groups == 0 else groups} s{st}", r))
    gpu = ""
    if dev == "cuda":
        from bench.cuda_timing import gpu_name
        gpu = f", {gpu_name()}"
    mode = "exact" if tl.is_exact() else "deterministic" if tl.is_deterministic() else "default"
    knobs = " ".join(f"{kn}={os.environ[kn]}" for kn in KNOBS if os.environ.get(kn)) or "none"
    head = (f"Grouped/depthwise conv forward+backward, backend {tl.backend()}{gpu}, {mode} mode; "
            f"knobs: {knobs}; torch {getattr(torch, '__version__', 'absent')}\n\n"
            "| case | shape | step ms | torch step | step ratio | fwd ms | torch fwd | fwd ratio "
            "| bwd ms | torch bwd | bwd ratio | err | same |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
    text = head + "".join(
        f"| {nm} | {sh} | {r['tl_step']:.3f} | {r['t_step']:.3f} | {r['tl_step'] / r['t_step']:.2f} | "
        f"{r['tl_fwd']:.3f} | {r['t_fwd']:.3f} | {r['tl_fwd'] / r['t_fwd']:.2f} | "
        f"{r['tl_bwd']:.3f} | {r['t_bwd']:.3f} | {r['tl_bwd'] / r['t_bwd']:.2f} | "
        f"{r['err']:.1e} | {'yes' if r['same'] else 'NO'} |\n" for nm, sh, r in rows)
    print(text, flush=True)
    if a.out:
        with open(a.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
