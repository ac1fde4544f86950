"""Where host time goes: a cProfile of 1-element tape adds, or of a realistic model's steps.

    TORCHLEAN_BACKEND=cuda python bench/profile_overhead.py [--n 4000] [--model lm --steps 20 --size full]

Prints the wall time per op (or per step) and the Python functions with the most own time, so a
change in the call path (Tape -> generated op -> cffi -> entry layer -> launch) shows where it
costs. With --model, the step is bench_models.py's torchlean trainer at full size (or
--size quick: toy sizes, where the step is nearly all host time, e.g. on the stub).
"""
import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torchlean as tl  # noqa: E402


def tape_add_loop(n):
    x = np.ones(1, np.float32)
    t = tl.Tape()
    a, b = t.leaf(x), t.leaf(x)

    def loop():
        for _ in range(n):
            t.add(a, b)
        tl.synchronize()
    return loop, n, "tape add"


def model_loop(name, steps, size):
    import bench_models as bm
    w = bm.BUILDERS[name](bm.SIZES[name][size], np.random.default_rng(0))
    step, _ = bm.tl_trainer(w)
    for i in range(3):
        step(i)

    def loop():
        for i in range(steps):
            step(i)
        tl.synchronize()
    return loop, steps, f"{name} step"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=4000)
    p.add_argument("--model", default=None)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--size", default="full", choices=["full", "quick"],
                   help="bench_models.py size of --model (quick: toy sizes, all host time)")
    p.add_argument("--top", type=int, default=15)
    a = p.parse_args()
    loop, n, what = model_loop(a.model, a.steps, a.size) if a.model else tape_add_loop(a.n)
    loop()
    t0 = time.perf_counter()
    loop()
    print(f"backend {tl.backend()}: {(time.perf_counter() - t0) / n * 1e6:.2f} us per {what}")
    pr = cProfile.Profile()
    pr.runcall(loop)
    st = pstats.Stats(pr)
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:a.top]
    for (fn, line, name), (cc, nc, tt, ct, _) in rows:
        print(f"  own {tt / n * 1e6:8.2f} us  cum {ct / n * 1e6:8.2f} us  calls {nc / n:7.2f}  "
              f"{fn.split('/')[-1]}:{line} {name}")


if __name__ == "__main__":
    main()
