"""Stub vs NumPy on the same machine: medians over many runs after warm-up, random data.

    make bench     (TORCHLEAN_BACKEND=stub python3 bench/bench_stub.py --out bench/results/stub.md)

Prints a Markdown table, and writes it to --out when given. Ops are called through
torchlean.ops.<name> on AnyBuffers; an op missing from this build is skipped with a note.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torchlean as tl  # noqa: E402



def median_ms(fn, warmup=3, runs=21):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def tl_call(name, *bufs, **kw):
    """A closure timing one torchlean op (output released each run, as a caller would)."""
    f = getattr(tl.ops, name)

    def run():
        out = f(*bufs, **kw)
        for o in (out if isinstance(out, tuple) else (out,)):
            o.release()
    return run


def np_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the table to this file")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    n = 1 << 22
    a = rng.uniform(-1, 1, n).astype(np.float32)
    b = rng.uniform(-1, 1, n).astype(np.float32)
    sm = rng.uniform(-3, 3, (4096, 1024)).astype(np.float32)
    ma = rng.uniform(-1, 1, (512, 512)).astype(np.float32)
    mb = rng.uniform(-1, 1, (512, 512)).astype(np.float32)
    A, B, SM = tl.AnyBuffer.from_numpy(a), tl.AnyBuffer.from_numpy(b), tl.AnyBuffer.from_numpy(sm)
    oa = rng.uniform(-1, 1, (300, 270)).astype(np.float32)  # odd sizes: edge tiles everywhere
    ob = rng.uniform(-1, 1, (270, 310)).astype(np.float32)
    MA, MB = tl.AnyBuffer.from_numpy(ma), tl.AnyBuffer.from_numpy(mb)
    OA, OB = tl.AnyBuffer.from_numpy(oa), tl.AnyBuffer.from_numpy(ob)
    rows = [
        ("add", "2^22", ("add", A, B), {}, lambda: np.add(a, b)),
        ("exp", "2^22", ("exp", A), {}, lambda: np.exp(a)),
        ("sigmoid", "2^22", ("sigmoid", A), {}, lambda: 1.0 / (1.0 + np.exp(-a))),
        ("sum", "2^22", ("sum", A), {}, lambda: a.sum()),
        ("softmax", "4096 x 1024", ("softmax", SM), {}, lambda: np_softmax(sm)),
        ("matmul", "512^3", ("matmul", MA, MB), {}, lambda: ma @ mb),
        ("matmul", "300 x 270 x 310", ("matmul", OA, OB), {}, lambda: oa @ ob),
    ]
    lines = ["| op | size | torchlean ms | numpy ms | ratio |", "|---|---|---|---|---|"]
    for op, size, (name, *bufs), kw, npf in rows:
        t_tl = median_ms(tl_call(name, *bufs, **kw))
        t_np = median_ms(npf)
        lines.append(f"| {op} | {size} | {t_tl:.3f} | {t_np:.3f} | {t_tl / t_np:.2f} |")
    env = (f"Backend `{tl.backend()}`, {os.cpu_count()} CPU(s), NumPy {np.__version__}; "
           "median of 21 runs after 3 warm-up runs; ratio = torchlean / numpy (lower is better).")
    text = "# torchlean stub vs NumPy\n\n" + env + "\n\n" + "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
