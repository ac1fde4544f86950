"""Exact-mode convolution on CUDA against the default kernels and torch/cuDNN, kernel time only.

Run on a GPU machine after `make cuda`:
    TORCHLEAN_BACKEND=cuda python3 bench/bench_conv_exact.py [--reps 20] [--out FILE]
conv2d forward (ops.conv2d) and backward (ops.conv_backward: dW, db, dX) on random float32 at
VGG-style and ResNet-style CIFAR shapes (batch 128), in exact mode (conv_exact.cuh's implicit
GEMMs, the stub's bits) and default mode (conv_igemm.cu), and torch's conv2d (cuDNN, TF32 off)
when torch imports. Times are CUDA events around each call on the library's stream (torch's on
torch's stream), medians of --reps calls after warm-up. Before timing, exact CUDA's y, dW, db
and dX are compared bit for bit with the stub's (run in a subprocess on the same inputs) at a
few small odd shapes and one CIFAR shape; --no-parity skips that. Prints a markdown table (and
writes it to --out); exits 1 when exact CUDA differs from the stub.
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

SHAPES = [  # (label, N, C_in, C_out, H (= W), k, stride, padding)
    ("VGG conv1 3->64 32x32", 128, 3, 64, 32, 3, 1, 1),
    ("VGG 64->64 32x32", 128, 64, 64, 32, 3, 1, 1),
    ("VGG 64->128 16x16", 128, 64, 128, 16, 3, 1, 1),
    ("VGG 128->128 16x16", 128, 128, 128, 16, 3, 1, 1),
    ("VGG 128->256 8x8", 128, 128, 256, 8, 3, 1, 1),
    ("ResNet 32->32 32x32", 128, 32, 32, 32, 3, 1, 1),
    ("ResNet 32->64 s2 32x32", 128, 32, 64, 32, 3, 2, 1),
    ("ResNet 64->64 16x16", 128, 64, 64, 16, 3, 1, 1),
    ("ResNet 64->128 s2 16x16", 128, 64, 128, 16, 3, 2, 1),
    ("ResNet 128->128 8x8", 128, 128, 128, 8, 3, 1, 1),
    ("ResNet shortcut 1x1 s2 64->128", 128, 64, 128, 16, 1, 2, 0),
]

PARITY = [  # (N, C_in, C_out, H, W, kh, kw, stride, padding)
    (3, 5, 7, 11, 9, 3, 3, (1, 1), (1, 1)),
    (2, 3, 70, 13, 10, 3, 2, (2, 1), (1, 0)),
    (1, 130, 9, 7, 6, 5, 3, (2, 2), (2, 1)),
    (300, 2, 3, 5, 5, 3, 3, (1, 1), (1, 1)),   # more than 256 samples: rule 4's tree
    (128, 64, 128, 16, 16, 3, 3, (2, 2), (1, 1)),
]


def timer():
    """median CUDA-event time of a callable on the library's stream"""
    from bench_attention_exact import Events
    return Events()


def parity_inputs(seed, N, ci, co, H, W, kh, kw, stride, padding):
    rng = np.random.default_rng(seed)
    oh = (H + 2 * padding[0] - kh) // stride[0] + 1
    ow = (W + 2 * padding[1] - kw) // stride[1] + 1
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    w, b, x, g = f(co, ci, kh, kw), f(co), f(N, ci, H, W), f(N, co, oh, ow)
    x.reshape(-1)[::97] = -0.0
    return w, b, x, g


def exact_outputs(case, seed):
    """y, dW, db, dX of the loaded backend in exact mode"""
    w, b, x, g = parity_inputs(seed, *case)
    stride, padding = case[7], case[8]
    tl.set_exact(True)
    B = tl.AnyBuffer.from_numpy
    bufs = [B(a) for a in (w, b, x, g)]
    y = ops.conv2d(bufs[0], bufs[1], bufs[2], stride=stride, padding=padding)
    grads = ops.conv_backward(bufs[0], bufs[2], bufs[3], stride=stride, padding=padding)
    out = [a.to_numpy() for a in (y, *grads)]
    for a in bufs + [y, *grads]:
        a.release()
    tl.set_exact(False)
    return out


def parity(lines):
    """exact CUDA against the stub (a subprocess), bit for bit; returns whether all agree"""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCHLEAN_BACKEND="stub")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--stub-dump", tmp], env=env,
                       check=True)
        ok = True
        lines += ["| parity shape | y | dW | db | dX |", "|---|---|---|---|---|"]
        for i, case in enumerate(PARITY):
            got = exact_outputs(case, i)
            want = np.load(os.path.join(tmp, f"{i}.npz"))
            cells = []
            for name, a in zip(("y", "dw", "db", "dx"), got):
                b = want[name]
                same = (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
                ok &= bool(same.all())
                cells.append(f"{int(same.sum())}/{a.size}")
            lines.append(f"| {case[:7]} s{case[7]} p{case[8]} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    lines.append("")
    return ok


def stub_dump(folder):
    assert tl.backend() == "stub"
    for i, case in enumerate(PARITY):
        y, dw, db, dx = exact_outputs(case, i)
        np.savez(os.path.join(folder, f"{i}.npz"), y=y, dw=dw, db=db, dx=dx)


def release(bufs):
    for b in bufs if isinstance(bufs, (list, tuple)) else [bufs]:
        b.release()


def time_torchlean(ev, bufs, stride, padding, exact, reps):
    """(forward ms, backward ms) in one mode"""
    w, b, x, g = bufs
    tl.set_exact(exact)
    try:
        f_ms = ev.time_ms(lambda: release(ops.conv2d(w, b, x, stride=stride, padding=padding)), reps)
        b_ms = ev.time_ms(lambda: release(ops.conv_backward(w, x, g, stride=stride,
                                                            padding=padding)), reps)
    finally:
        tl.set_exact(False)
    return f_ms, b_ms


def time_torch(arrays, stride, padding, reps):
    """(forward ms, forward + backward ms) of torch conv2d (cuDNN, TF32 off), or None"""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    w, b, x, g = (torch.tensor(a, device="cuda", requires_grad=True) for a in arrays)
    def med(fn):
        return torch_median_ms(torch, fn, reps, warmup=5)

    fwd = med(lambda: F.conv2d(x, w, b, stride=stride, padding=padding))

    def step():
        F.conv2d(x, w, b, stride=stride, padding=padding).backward(g.detach())
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
    ev = timer()
    lines = [f"conv2d, float32, {gpu_name()}; CUDA events, median of "
             f"{args.reps} after warm-up; ms.", ""]
    same = True if args.no_parity else parity(lines)
    tl.set_exact(False)
    tl.set_deterministic(False)  # the default columns: default mode's kernels as they ship
    lines += ["| shape | exact fwd | default fwd | torch fwd | exact bwd | default bwd | "
              "exact/default fwd+bwd | torch fwd+bwd |",
              "|---|---|---|---|---|---|---|---|"]
    rng = np.random.default_rng(0)
    for label, N, ci, co, H, k, s, pd in SHAPES:
        oh = (H + 2 * pd - k) // s + 1
        arrays = [rng.standard_normal(shape).astype(np.float32)
                  for shape in ((co, ci, k, k), (co,), (N, ci, H, H), (N, co, oh, oh))]
        bufs = [tl.AnyBuffer.from_numpy(a) for a in arrays]
        ef, eb = time_torchlean(ev, bufs, s, pd, True, args.reps)
        df, db = time_torchlean(ev, bufs, s, pd, False, args.reps)
        release(bufs)
        t = time_torch(arrays, s, pd, args.reps)
        tf, tfb = ("n/a", "n/a") if t is None else (f"{t[0]:.3f}", f"{t[1]:.3f}")
        lines.append(f"| {label} | {ef:.3f} | {df:.3f} | {tf} | {eb:.3f} | {db:.3f} | "
                     f"{(ef + eb) / (df + db):.2f} | {tfb} |")
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
