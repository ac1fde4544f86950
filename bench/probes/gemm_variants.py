"""The stub's default GEMM built several ways (bench/device/gemm_variants.sh: blocking
constants through TL_GEMM_*), timed side by side on this CPU: GFLOP/s per build, shape and
thread count, each build in its own child process (TORCHLEAN_LIB_DIR), builds taking turns
round by round. Prints a Markdown table.

    python bench/probes/gemm_variants.py NAME=LIBDIR [NAME=LIBDIR ...] [--threads 1,2]
        [--shapes matmul:1024x1024x1024,linear:128x784x512] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CHILD = r'''
import json, sys, time
import numpy as np
from torchlean.buffer import AnyBuffer
from torchlean._generated import ops
out = {}
for spec in sys.argv[1].split(","):
    op, dims = spec.split(":")
    m, n, p = map(int, dims.split("x"))
    rng = np.random.default_rng(0)
    a = AnyBuffer.from_numpy(rng.standard_normal((m, n)).astype(np.float32))
    if op == "linear":
        w = AnyBuffer.from_numpy(rng.standard_normal((p, n)).astype(np.float32))
        b = AnyBuffer.from_numpy(rng.standard_normal(p).astype(np.float32))
        call = lambda: ops.linear(w, b, a).release()
    else:
        bm = AnyBuffer.from_numpy(rng.standard_normal((n, p)).astype(np.float32))
        call = lambda: ops.matmul(a, bm).release()
    call()
    t0 = time.perf_counter(); reps = 0
    while time.perf_counter() - t0 < 0.05:
        call(); reps += 1
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps): call()
        times.append((time.perf_counter() - t) / reps)
    out[spec] = 2.0 * m * n * p / min(times) / 1e9
print(json.dumps(out))
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", help="NAME=LIBDIR")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shapes", default="matmul:1024x1024x1024,matmul:2048x2048x2048,"
                    "linear:128x784x512,linear:2048x256x1024,linear:512x256x64")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    builds = [b.split("=", 1) for b in a.builds]
    res = {}   # (build, threads, shape) -> [GFLOP/s per round]
    for _ in range(a.rounds):
        for t in a.threads.split(","):
            for name, lib in builds:
                env = dict(os.environ, TORCHLEAN_LIB_DIR=lib, OMP_NUM_THREADS=t,
                           TORCHLEAN_BACKEND="stub")
                r = subprocess.run([sys.executable, "-c", CHILD, a.shapes], env=env,
                                   capture_output=True, text=True, cwd=str(ROOT))
                if r.returncode:
                    print(r.stderr[-2000:], file=sys.stderr)
                    return 1
                for spec, g in json.loads(r.stdout).items():
                    res.setdefault((name, t, spec), []).append(g)
    shapes = a.shapes.split(",")
    print("| build | threads | " + " | ".join(shapes) + " |")
    print("|---|---:|" + "---:|" * len(shapes))
    for t in a.threads.split(","):
        for name, _ in builds:
            cells = [f"{statistics.median(res[(name, t, s)]):.1f}" for s in shapes]
            print(f"| {name} | {t} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
