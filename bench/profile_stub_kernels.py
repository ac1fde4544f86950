"""Native calls of the CIFAR models' layers timed one by one on the stub (no tape, no Python
layer above the generated op wrappers), optionally against a second build of the library.

    python bench/profile_stub_kernels.py [--threads 1] [--rounds 5] [--clock cpu]
                                         [--before DIR] [--rows conv,bn]

Each row is one registry call at a bench_stub_layers.py shape: conv / conv_backward (one call:
kernel, bias and input gradients), batchnorm_channel_first and its backward, max_pool2d and its
backward, linear and its three backward ops. With --before DIR the same calls run in a child process on DIR's library
(TORCHLEAN_LIB_DIR), the two processes taking turns round by round, so load that comes and goes
hits both; the table then gives both medians and after/before. --clock cpu times this process's
CPU time (all threads), which other processes' load barely moves (use it at --threads 1).
The sum of a model's rows against its step time says where the step goes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_sides import alternate, spawn_sides  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
B = 128
# name, kind, (cin, cout, side, stride, k) for conv; (c, side) for bn and pool; (in, out) for
# linear
ROWS = [
    ("conv 3-64 s32", "conv", (3, 64, 32, 1, 3)),
    ("conv 3-32 s32", "conv", (3, 32, 32, 1, 3)),
    ("conv 64-64 s32", "conv", (64, 64, 32, 1, 3)),
    ("conv 32-32 s32", "conv", (32, 32, 32, 1, 3)),
    ("conv 32-64 s32/2", "conv", (32, 64, 32, 2, 3)),
    ("conv 64-64 s16", "conv", (64, 64, 16, 1, 3)),
    ("conv 128-128 s16", "conv", (128, 128, 16, 1, 3)),
    ("conv 64-128 s16/2", "conv", (64, 128, 16, 2, 3)),
    ("conv 128-128 s8", "conv", (128, 128, 8, 1, 3)),
    ("conv 1x1 32-64 s32/2", "conv", (32, 64, 32, 2, 1)),
    ("bn 32 s32", "bn", (32, 32)),
    ("bn 64 s16", "bn", (64, 16)),
    ("bn 128 s8", "bn", (128, 8)),
    ("maxpool 64 s32", "pool", (64, 32)),
    ("linear 8192-10", "linear", (8192, 10)),
    ("linear 512-512", "linear", (512, 512)),
]


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--clock", choices=("wall", "cpu"), default="cpu")
    p.add_argument("--rows", default="", help="comma-separated row-name prefixes")
    p.add_argument("--before", default=None, help="a library folder to compare against")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def calls(ops, up, kind, a, rng):
    """[(label, fn)] for one row: its forward and backward registry calls."""
    if kind == "conv":
        cin, cout, side, stride, k = a
        x = up(rng.standard_normal((B, cin, side, side), dtype=np.float32))
        w = up(rng.standard_normal((cout, cin, k, k), dtype=np.float32) * 0.1)
        b = up(np.zeros(cout, np.float32))
        y = ops.conv(w, b, x, stride=stride, padding=k // 2)
        g = up(rng.standard_normal(tuple(y.shape), dtype=np.float32))
        return [("fwd", lambda: ops.conv(w, b, x, stride=stride, padding=k // 2)),
                ("bwd", lambda: ops.conv_backward(w, x, g, stride=stride, padding=k // 2))]
    if kind == "linear":
        fin, fout = a
        x = up(rng.standard_normal((B, fin), dtype=np.float32))
        w = up(rng.standard_normal((fout, fin), dtype=np.float32) * 0.01)
        b = up(rng.standard_normal(fout, dtype=np.float32))
        g = up(rng.standard_normal((B, fout), dtype=np.float32))
        return [("fwd", lambda: ops.linear(w, b, x)),
                ("dw", lambda: ops.linear_backward_w(g, x)),
                ("dx", lambda: ops.linear_backward_x(g, w, x)),
                ("db", lambda: ops.linear_backward_b(g))]
    c, side = a
    x = up(rng.standard_normal((B, c, side, side), dtype=np.float32))
    g = up(rng.standard_normal((B, c, side, side), dtype=np.float32))
    if kind == "bn":
        gam, bet = up(np.ones(c, np.float32)), up(np.zeros(c, np.float32))
        r = ops.batchnorm_channel_first(x, gam, bet, eps=1e-5)
        return [("fwd", lambda: ops.batchnorm_channel_first(x, gam, bet, eps=1e-5)),
                ("bwd", lambda: ops.batchnorm_channel_first_backward(g, r[1], r[4], gam))]
    gp = up(rng.standard_normal((B, c, side // 2, side // 2), dtype=np.float32))
    return [("fwd", lambda: ops.max_pool(x, kernel_size=(2, 2), stride=(2, 2))),
            ("bwd", lambda: ops.max_pool_backward(x, gp, kernel_size=(2, 2), stride=(2, 2)))]


def child(a):
    """Run rounds on request: read a row index per line on stdin, answer its times in JSON."""
    from torchlean import AnyBuffer, ops
    rng = np.random.default_rng(0)
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    made = {}
    for line in sys.stdin:
        i = int(line)
        if i not in made:
            made[i] = calls(ops, AnyBuffer.from_numpy, ROWS[i][1], ROWS[i][2], rng)
            for _, fn in made[i]:
                fn()
        out = {}
        for label, fn in made[i]:
            t0 = clock()
            fn()
            out[label] = (clock() - t0) * 1e3
        print(json.dumps(out), flush=True)


def main():
    a = parse(sys.argv[1:])
    if a.child:
        return child(a)
    want = [w.strip() for w in a.rows.split(",") if w.strip()]
    sides = spawn_sides(__file__, a.threads, ["--clock", a.clock], a.before)
    print(f"threads {a.threads}, clock {a.clock}, load average {os.getloadavg()[0]:.2f}")
    total = {}
    for i, (name, _, _) in enumerate(ROWS):
        if want and not any(name.startswith(w) for w in want):
            continue
        times = alternate(sides, i, a.rounds)
        parts = []
        for label in times["after"][0]:
            med = {s: statistics.median(r[label] for r in v) for s, v in times.items()}
            for s, m in med.items():
                total[s] = total.get(s, 0.0) + m
            if a.before:
                parts.append(f"{label} {med['before']:.1f} -> {med['after']:.1f} ms "
                             f"({med['after'] / med['before']:.2f}x)")
            else:
                parts.append(f"{label} {med['after']:.1f} ms")
        print(f"{name}: " + ", ".join(parts), flush=True)
    for p in sides.values():
        p.stdin.close()
        p.wait()
    print("sum: " + ", ".join(f"{s} {v:.1f} ms" for s, v in total.items())
          + f"; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
