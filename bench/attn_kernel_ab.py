"""The stub's default-mode attention kernels (ops.attention, ops.attention_backward) on
(b*h, T, d) inputs, one build against another, alternating child processes (bench/ab_sides.py):

    python bench/attn_kernel_ab.py --before DIR [--threads 1] [--rounds 7] [--reps 5]
                                   [--clock cpu|wall] [--rows 0,1,...]

Rows: b*h, T, d, and causal / plain / masked (a random lower-band boolean mask). Medians of
--rounds blocks of --reps calls, ms per call.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_sides import close, compare, load, serve, spawn_sides  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ROWS = [(256, 128, 32, "causal"), (256, 64, 32, "causal"), (256, 256, 32, "causal"),
        (256, 128, 64, "causal"), (256, 128, 32, "plain"), (256, 128, 32, "masked")]


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", help="the other library's folder")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--clock", choices=("wall", "cpu"), default="cpu")
    p.add_argument("--rows", default="", help="comma-separated row indices")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def runners(row):
    sys.path.insert(0, str(ROOT))
    import torchlean as tl
    from torchlean._generated import ops
    bh, t, d, kind = row
    rng = np.random.default_rng(0)
    q, k, v, g = (tl.AnyBuffer.from_numpy(rng.standard_normal((bh, t, d), dtype=np.float32))
                  for _ in range(4))
    kw = {"causal": kind == "causal"}
    if kind == "masked":
        m = np.tril(np.ones((t, t), bool)) & (rng.random((t, t)) < 0.7)
        np.fill_diagonal(m, True)
        kw["mask"] = m
    o, lse = ops.attention(q, k, v, **kw)

    def fwd():
        a, b = ops.attention(q, k, v, **kw)
        tl.synchronize()
        a.release(), b.release()

    def bwd():
        rs = ops.attention_backward(g, q, k, v, o, lse, **kw)
        tl.synchronize()
        for r in rs:
            r.release()
    return {"fwd": fwd, "bwd": bwd}


def child(a):
    serve(lambda i: runners(ROWS[i]), a.clock, a.reps)


def main():
    a = parse(sys.argv[1:])
    if a.child:
        return child(a)
    sides = spawn_sides(__file__, a.threads, ["--clock", a.clock, "--reps", str(a.reps)],
                        a.before)
    rows = [int(r) for r in a.rows.split(",") if r.strip()] or list(range(len(ROWS)))
    print(f"threads {a.threads}, clock {a.clock}, rounds {a.rounds} x {a.reps} calls, "
          f"load average {load()}")
    for i in rows:
        bh, t, d, kind = ROWS[i]
        print(f"bh{bh} T{t} d{d} {kind}: " + compare(sides, i, a.rounds, ("fwd", "bwd")),
              flush=True)
    print(f"load average at the end {load()}")
    close(sides)


if __name__ == "__main__":
    main()
