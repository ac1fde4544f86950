"""ms per call of the stub's spectral_conv1d_rfft and its backward, two library builds side by
side: rounds alternate between the builds (each round one fresh process per build), and the
table gives each build's median over rounds of its per-round median (process CPU time at 1
thread, wall time at 2 threads by default).

  python bench/bench_spectral.py --base /tmp/spectral-base [--rounds 5] [--threads 1,2]

--base names the folder of the other libtorchlean_stub.so; the build under test is the one the
loader finds without TORCHLEAN_LIB_DIR (torchlean/lib).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHAPES = [(20, 1024, 64, 16), (1, 1024, 64, 16), (4, 32, 8, 8), (1, 32, 8, 8), (7, 101, 13, 9),
          (3, 255, 33, 50)]


def child(shapes, reps, clock):
    sys.path[:0] = [str(ROOT)]
    from torchlean import AnyBuffer, ops
    up = AnyBuffer.from_numpy
    tick = time.process_time if clock == "cpu" else time.perf_counter
    res = {}
    for (b, g, w, m) in shapes:
        rng = np.random.default_rng(0)
        x, gr = (up(rng.standard_normal((b, g, w)).astype(np.float32)) for _ in range(2))
        wr, wi = (up(rng.standard_normal((m, w, w)).astype(np.float32)) for _ in range(2))
        n = reps if b * g * w * m > 1e5 else reps * 20
        row = []
        for fn in (lambda: ops.spectral_conv1d_rfft(x, wr, wi),
                   lambda: ops.spectral_conv1d_rfft_backward(x, wr, wi, gr)):
            fn()
            ts = []
            for _ in range(n):
                t0 = tick()
                fn()
                ts.append(tick() - t0)
            row.append(float(np.median(ts)) * 1e3)
        res[f"{b},{g},{w},{m}"] = row
    print(json.dumps(res))


def run(libdir, threads, clock, reps):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TORCHLEAN_BACKEND="stub")
    env.pop("TORCHLEAN_LIB_DIR", None)
    if libdir:
        env["TORCHLEAN_LIB_DIR"] = libdir
    out = subprocess.run([sys.executable, __file__, "--child", clock, "--reps", str(reps)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=False)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--child")
    a = p.parse_args()
    if a.child:
        child(SHAPES, a.reps, a.child)
        return
    for th in [int(t) for t in a.threads.split(",")]:
        clock = "cpu" if th == 1 else "wall"
        got = {"base": [], "new": []}
        for _ in range(a.rounds):
            got["base"].append(run(a.base, th, clock, a.reps))
            got["new"].append(run(None, th, clock, a.reps))
        print(f"\n{th} thread(s), {clock} ms per call, median of {a.rounds} alternating rounds")
        print("| batch, grid, width, modes | fwd base | fwd new | x | bwd base | bwd new | x |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for key in got["base"][0]:
            med = {s: [float(np.median([r[key][i] for r in got[s]])) for i in (0, 1)] for s in got}
            fb, fn_ = med["base"][0], med["new"][0]
            bb, bn = med["base"][1], med["new"][1]
            print(f"| {key} | {fb:.3f} | {fn_:.3f} | {fb / fn_:.2f} | {bb:.3f} | {bn:.3f} | {bb / bn:.2f} |")


if __name__ == "__main__":
    main()
