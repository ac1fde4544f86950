"""Exact-mode cost of the kernels built on tl_math.h's transcendental functions, two builds side by side.

    TORCHLEAN_BACKEND=stub python bench/bench_exact_math.py [--n 1048576] [--reps 31] [--rounds 3] \
        [--other /path/to/another/checkout] [--threads 1] [--default-mode]

Times each kernel in exact mode (or default mode; median per call into preallocated outputs) for this checkout
and, with --other, for another checkout's stub library (e.g. the commit before a change), in
alternating rounds; reports the best median of the rounds and the ratio this/other. Each library
runs in its own subprocess. With one thread (the default) the time is the process's CPU time,
which a machine shared with other jobs does not inflate; with more, wall time.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
import numpy as np
import torchlean as tl
from torchlean._loader import ffi, lib
from torchlean.buffer import AnyBuffer
n, reps, threads, exact = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
clock = time.process_time if threads == 1 else time.perf_counter
rng = np.random.default_rng(0)
up = lambda a: AnyBuffer.from_numpy(np.asarray(a, np.float32))
X, P, G, U = up(rng.uniform(-6, 6, n)), up(rng.uniform(0.01, 30, n)), up(rng.normal(size=n)), \
    up(rng.uniform(-4, 4, n))
Y = up(np.zeros(n))
h = {"X": X.handle, "P": P.handle, "G": G.handle, "U": U.handle, "Y": Y.handle}
rows = 1024
cases = {
    "exp": lambda: lib.tl_exp(h["X"], h["Y"], n),
    "log": lambda: lib.tl_log(h["P"], h["Y"], n),
    "tanh": lambda: lib.tl_tanh(h["X"], h["Y"], n),
    "sigmoid": lambda: lib.tl_sigmoid(h["X"], h["Y"], n),
    "softplus": lambda: lib.tl_softplus(h["X"], h["Y"], n),
    "erf": lambda: lib.tl_erf(h["U"], h["Y"], n),
    "gelu": lambda: lib.tl_gelu(h["X"], h["Y"], n),
    "gelu_backward": lambda: lib.tl_gelu_backward(h["X"], h["G"], h["Y"], n),
    "gelu_erf": lambda: lib.tl_gelu_erf(h["U"], h["Y"], n),
    "softmax": lambda: lib.tl_softmax(h["X"], h["Y"], rows, n // rows),
    "rand_normal": lambda: lib.tl_rand_normal(h["Y"], n, 7, 0.0, 1.0),
}
tl.set_exact(exact)
out = {}
for name, f in cases.items():
    assert f() == 0, name
    ts = []
    for _ in range(reps):
        t = clock()
        f()
        ts.append(clock() - t)
    out[name] = float(np.median(ts) * 1e3)
print(json.dumps(out))
"""


def run(tree, n, reps, threads, exact):
    # the tree first, the caller's PYTHONPATH kept (cffi or numpy may live there)
    path = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, TORCHLEAN_BACKEND="stub", OMP_NUM_THREADS=str(threads))
    r = subprocess.run([sys.executable, "-c", CHILD, str(n), str(reps), str(threads),
                        "1" if exact else "0"], cwd=tree,
                       env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"bench_exact_math: the child for {tree} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--other", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--default-mode", action="store_true", help="time default mode instead")
    args = ap.parse_args()
    trees = [("this", ROOT)] + ([("other", args.other.resolve())] if args.other else [])
    best = {label: {} for label, _ in trees}
    for _ in range(args.rounds):
        for label, tree in trees:
            for k, v in run(tree, args.n, args.reps, args.threads, not args.default_mode).items():
                best[label][k] = min(v, best[label].get(k, float("inf")))
    what = "CPU ms, 1 thread" if args.threads == 1 else f"wall ms, {args.threads} threads"
    mode = "default" if args.default_mode else "exact"
    print(f"stub, {mode} mode, n = {args.n}, best of {args.rounds} medians of {args.reps} ({what})")
    head = f"{'kernel':16s} {'this':>9s}"
    if args.other:
        head += f" {'other':>9s} {'this/other':>11s}"
    print(head)
    for k, v in best["this"].items():
        line = f"{k:16s} {v:9.3f}"
        if args.other:
            o = best["other"][k]
            line += f" {o:9.3f} {v / o:11.2f}"
        print(line)


if __name__ == "__main__":
    main()
