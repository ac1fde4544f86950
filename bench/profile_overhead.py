"""Where the host time of one recorded tape op goes (cProfile of 1-element adds).

    TORCHLEAN_BACKEND=cuda python bench/profile_overhead.py [--n 4000]

Prints the per-op wall time and the Python functions with the most own time per op, so a
change in the call path (Tape -> generated op -> cffi -> entry layer) shows where it costs.
"""
import argparse
import cProfile
import pstats
import time

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torchlean as tl


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=4000)
    n = p.parse_args().n
    x = np.ones(1, np.float32)
    t = tl.Tape()
    a, b = t.leaf(x), t.leaf(x)

    def loop():
        for _ in range(n):
            t.add(a, b)
        tl.synchronize()

    loop()
    t0 = time.perf_counter()
    loop()
    print(f"backend {tl.backend()}: {(time.perf_counter() - t0) / n * 1e6:.2f} us per tape add")
    pr = cProfile.Profile()
    pr.runcall(loop)
    st = pstats.Stats(pr)
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:15]
    for (fn, line, name), (cc, nc, tt, ct, _) in rows:
        print(f"  own {tt / n * 1e6:6.2f} us  cum {ct / n * 1e6:6.2f} us  calls/op {nc / n:5.2f}  "
              f"{fn.split('/')[-1]}:{line} {name}")
    t.release()


if __name__ == "__main__":
    main()
