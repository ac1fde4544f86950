"""Products with a transposed operand on the stub, one build against another (no PyTorch needed):
`x @ w.T` (the view is copied by transpose2d, then a plain GEMM), `x @ wt` (wt a contiguous
copy of w.T: the target), F.linear(x, w) (the GEMM reads W transposed in place), forward and
forward+backward through the tape; and the registry's matmul_t with A, B or both stored
transposed against the plain matmul (ops level, no tape), and transpose2d alone.

    python bench/bench_transposed_ab.py --before DIR [--threads 2] [--rounds 11] [--reps 5]
        [--clock wall|cpu] [--shapes 128x512x512,64x784x512,1024x1024x1024,127x513x255]
        [--out FILE.md]

A shape MxKxN is x (M, K) @ w.T with w (N, K) (ops rows: op(A) (M, K) @ op(B) (K, N)). Each side
is a child process (bench/ab_sides.py) answering one row at a time in alternating rounds;
medians of --rounds blocks of --reps calls, ms per call.
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
from sidebyside import append_table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KINDS = ["x @ w.T", "x @ wt", "F.linear(x, w)", "x @ w.T fwd+bwd", "x @ wt fwd+bwd",
         "matmul NN", "matmul_t TN", "matmul_t NT", "matmul_t TT", "transpose2d (N, K)"]


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default=None, help="the other library's folder")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    p.add_argument("--shapes", default="128x512x512,64x784x512,1024x1024x1024,127x513x255")
    p.add_argument("--out", default=None)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def calls(m, k, n):
    sys.path.insert(0, str(ROOT))
    import torchlean as tl
    from torchlean import AnyBuffer
    from torchlean._generated import ops
    from torchlean.nn import functional as F
    rng = np.random.default_rng(0)
    X = rng.standard_normal((m, k), dtype=np.float32)
    W = rng.standard_normal((n, k), dtype=np.float32)
    G = rng.standard_normal((m, n), dtype=np.float32)
    x, w, wt = tl.tensor(X), tl.tensor(W), tl.tensor(np.ascontiguousarray(W.T))
    a, at = AnyBuffer.from_numpy(X), AnyBuffer.from_numpy(np.ascontiguousarray(X.T))
    b, bt = AnyBuffer.from_numpy(np.ascontiguousarray(W.T)), AnyBuffer.from_numpy(W)

    def bwd(use_view):
        xr = tl.tensor(X, requires_grad=True)
        wr = tl.tensor(W if use_view else np.ascontiguousarray(W.T), requires_grad=True)
        y = xr @ (wr.T if use_view else wr)
        y.backward(tl.tensor(G))

    return [lambda: x @ w.T, lambda: x @ wt, lambda: F.linear(x, w),
            lambda: bwd(True), lambda: bwd(False),
            lambda: ops.matmul(a, b).release(),
            lambda: ops.matmul_t(at, b, trans_a=True).release(),
            lambda: ops.matmul_t(a, bt, trans_b=True).release(),
            lambda: ops.matmul_t(at, bt, trans_a=True, trans_b=True).release(),
            lambda: ops.transpose2d(bt).release()]


def child(a, shapes):
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    made = {}
    for line in sys.stdin:
        i = int(line)
        if i not in made:
            made[i] = calls(*shapes[i])
            for f in made[i]:
                f()
        out = []
        for f in made[i]:
            t0 = clock()
            for _ in range(a.reps):
                f()
            out.append((clock() - t0) / a.reps * 1e3)
        print(json.dumps(out), flush=True)


def main():
    a = parse(sys.argv[1:])
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    if a.child:
        return child(a, shapes)
    sides = spawn_sides(__file__, a.threads, ["--clock", a.clock, "--reps", str(a.reps),
                                              "--shapes", a.shapes], a.before)
    load0 = " ".join(f"{v:.2f}" for v in os.getloadavg())
    cols = [s for s in ("before", "after") if s in sides]
    lines = [f"`python bench/bench_transposed_ab.py{' --before DIR' if a.before else ''} --threads "
             f"{a.threads} --rounds {a.rounds} --reps {a.reps} --clock {a.clock}` (load average "
             f"{load0} at the start; medians, ms per call, sides alternating)", "",
             "| M x K x N | call | " + " | ".join(cols) + (" | after / before |" if a.before else " |"),
             "|---|---|" + "---:|" * (len(cols) + (1 if a.before else 0))]
    for i, (m, k, n) in enumerate(shapes):
        times = alternate(sides, i, a.rounds)
        for j, kind in enumerate(KINDS):
            med = {s: statistics.median(r[j] for r in v) for s, v in times.items()}
            row = f"| {m} x {k} x {n} | {kind} | " + " | ".join(f"{med[c]:.3f}" for c in cols)
            if a.before:
                row += f" | {med['after'] / med['before']:.2f}"
            lines.append(row + " |")
            print(lines[-1], flush=True)
    for p in sides.values():
        p.stdin.close()
        p.wait()
    lines.append("")
    lines.append(f"load average at the end {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    append_table("\n".join(lines) + "\n", a.out)


if __name__ == "__main__":
    main()
