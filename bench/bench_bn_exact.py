"""Exact-mode batchnorm on CUDA against the default kernels and torch/cuDNN, kernel time only.

Run on a GPU machine after `make cuda`:
    TORCHLEAN_BACKEND=cuda python3 bench/bench_bn_exact.py [--reps 20] [--out FILE]
batchnorm_channel_first forward and its backward on random float32 (N, C, H, W) at the ResNet
CIFAR shapes of issue 21 (N128 with C32 at 32x32, C64 at 16x16, C128 at 8x8), in exact mode
(bn_exact.cuh: chunk sums side by side, then each channel's tree) and default mode, and torch's
batch_norm (cuDNN) when torch imports. CUDA events around each call, medians of --reps calls
after warm-up. Before timing, exact CUDA's eight outputs are compared bit for bit with the stub's
(a subprocess on the same inputs); --no-parity skips that. Exits 1 when they differ.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torchlean as tl  # noqa: E402
from torchlean._generated import ops  # noqa: E402
from cuda_timing import gpu_name, torch_median_ms  # noqa: E402

SHAPES = [(128, 32, 32), (128, 64, 16), (128, 128, 8), (128, 16, 64)]  # N, C, H (= W)
PARITY = [(3, 5, 7, 41), (128, 32, 32, 32), (300, 3, 5, 5)]
NAMES = ("y", "xhat", "mean", "var", "inv_std", "dx", "dgamma", "dbeta")


def arrays(seed, shape):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    return (x, rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32),
            rng.standard_normal(shape).astype(np.float32))


def exact_outputs(shape, seed):
    tl.set_exact(True)
    bufs = [tl.AnyBuffer.from_numpy(a) for a in arrays(seed, shape)]
    fwd = ops.batchnorm_channel_first(bufs[0], bufs[1], bufs[2], eps=1e-5)
    bwd = ops.batchnorm_channel_first_backward(bufs[3], fwd[1], fwd[4], bufs[1])
    out = [a.to_numpy() for a in list(fwd) + list(bwd)]
    for a in bufs + list(fwd) + list(bwd):
        a.release()
    tl.set_exact(False)
    return out


def parity(lines):
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCHLEAN_BACKEND="stub")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--stub-dump", tmp], env=env,
                       check=True)
        ok = True
        lines += ["| parity shape | " + " | ".join(NAMES) + " |", "|---" * 9 + "|"]
        for i, shape in enumerate(PARITY):
            want = np.load(os.path.join(tmp, f"{i}.npz"))
            cells = []
            for name, a in zip(NAMES, exact_outputs(shape, i)):
                b = want[name]
                same = (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
                ok &= bool(same.all())
                cells.append(f"{int(same.sum())}/{a.size}")
            lines.append(f"| {shape} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    lines.append("")
    return ok


def stub_dump(folder):
    assert tl.backend() == "stub"
    for i, shape in enumerate(PARITY):
        np.savez(os.path.join(folder, f"{i}.npz"), **dict(zip(NAMES, exact_outputs(shape, i))))


def release(bufs):
    for b in bufs:
        b.release()


def time_torchlean(ev, bufs, exact, reps):
    x, ga, be, g = bufs
    tl.set_exact(exact)
    try:
        fwd = ops.batchnorm_channel_first(x, ga, be, eps=1e-5)
        f_ms = ev.time_ms(lambda: release(ops.batchnorm_channel_first(x, ga, be, eps=1e-5)), reps)
        b_ms = ev.time_ms(lambda: release(ops.batchnorm_channel_first_backward(g, fwd[1], fwd[4],
                                                                               ga)), reps)
        release(fwd)
    finally:
        tl.set_exact(False)
    return f_ms, b_ms


def time_torch(arrs, reps):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    x, ga, be, g = (torch.tensor(a, device="cuda", requires_grad=True) for a in arrs)
    def med(fn):
        return torch_median_ms(torch, fn, reps, warmup=5)

    fwd = med(lambda: F.batch_norm(x, None, None, ga, be, training=True, eps=1e-5))

    def step():
        F.batch_norm(x, None, None, ga, be, training=True, eps=1e-5).backward(g.detach())
    return fwd, med(step)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", default=None)
    p.add_argument("--no-parity", action="store_true")
    p.add_argument("--stub-dump", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.stub_dump:
        stub_dump(args.stub_dump)
        return 0
    assert tl.backend() == "cuda", "run with TORCHLEAN_BACKEND=cuda on a GPU machine"
    from bench_attention_exact import Events
    ev = Events()
    lines = [f"batchnorm_channel_first, float32, {gpu_name()}; CUDA events, "
             f"median of {args.reps} after warm-up; ms.", ""]
    same = True if args.no_parity else parity(lines)
    tl.set_exact(False)
    tl.set_deterministic(False)
    lines += ["| N, C, HxW | exact fwd | default fwd | torch fwd | exact bwd | default bwd | "
              "exact/default fwd+bwd | default fwd+bwd / torch | torch fwd+bwd |",
              "|---|---|---|---|---|---|---|---|---|"]
    for n, c, h in SHAPES:
        arrs = arrays(0, (n, c, h, h))
        bufs = [tl.AnyBuffer.from_numpy(a) for a in arrs]
        ef, eb = time_torchlean(ev, bufs, True, args.reps)
        df, db = time_torchlean(ev, bufs, False, args.reps)
        release(bufs)
        t = time_torch(arrs, args.reps)
        tf, tfb = ("n/a", "n/a") if t is None else (f"{t[0]:.3f}", f"{t[1]:.3f}")
        vs = "n/a" if t is None else f"{(df + db) / t[1]:.2f}"
        lines.append(f"| {n}, {c}, {h}x{h} | {ef:.3f} | {df:.3f} | {tf} | {eb:.3f} | {db:.3f} | "
                     f"{(ef + eb) / (df + db):.2f} | {vs} | {tfb} |")
        print(lines[-1], flush=True)
    if not same:
        lines += ["", "**exact CUDA differs from the stub** (see the parity table)"]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
