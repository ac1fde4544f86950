"""Per-op host overhead: a 1-element op (no kernel work to speak of), torchlean on the stub beside
PyTorch eager, in one process, alternating blocks, medians of this process's CPU time per op.

    python bench/bench_op_overhead.py [--n 3000] [--rounds 9] [--profile] [--out FILE.md]

Rows: `a * b` with both inputs needing a gradient (the tape records a node), the same under
no_grad, and `(a * b).backward()` (forward, backward, the two leaf gradients accumulated: the
loop keeps adding into .grad, as a training loop without zero_grad does). bwd = fwd+bwd - fwd.
With --profile, a cProfile of the torchlean fwd+bwd loop grouped by module (own time), so the
table says where the time goes.
"""
from __future__ import annotations

import argparse
import cProfile
import collections
import datetime
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

from sidebyside import append_table

ROOT = Path(__file__).resolve().parent.parent


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=3000, help="ops per timed block")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--out", default=None, help="append the tables to this markdown file")
    return p.parse_args(argv)


def loops(n):
    import numpy as np
    import torch
    import torchlean as tl
    from torchlean.session import Session
    s = Session()
    a = s.tensor(np.ones(1, np.float32), requires_grad=True)
    b = s.tensor(np.full(1, 2.0, np.float32), requires_grad=True)
    ta = torch.ones(1, requires_grad=True)
    tb = torch.full((1,), 2.0, requires_grad=True)

    def fwd(x, y):
        def run():
            for _ in range(n):
                x * y
        return run

    def nograd(x, y, ctx):
        def run():
            with ctx():
                for _ in range(n):
                    x * y
        return run

    def fb(x, y):
        def run():
            for _ in range(n):
                (x * y).backward()
        return run

    return {("fwd", "torchlean"): fwd(a, b), ("fwd", "torch"): fwd(ta, tb),
            ("no_grad fwd", "torchlean"): nograd(a, b, tl.no_grad),
            ("no_grad fwd", "torch"): nograd(ta, tb, torch.no_grad),
            ("fwd+bwd", "torchlean"): fb(a, b), ("fwd+bwd", "torch"): fb(ta, tb)}


def time_all(runs, n, rounds):
    for r in runs.values():
        r()
    times = {k: [] for k in runs}
    for _ in range(rounds):
        for k, r in runs.items():
            t0 = time.process_time()
            r()
            times[k].append((time.process_time() - t0) / n * 1e6)
    return {k: statistics.median(v) for k, v in times.items()}


def by_module(run):
    """Own time of run() per torchlean module (others: builtins, cffi, numpy), share of total."""
    prof = cProfile.Profile()
    prof.runcall(run)
    st = pstats.Stats(prof)
    own = collections.defaultdict(float)
    for (path, _line, fn), (_cc, _nc, tt, _ct, _callers) in st.stats.items():
        if "/torchlean/" in path:
            key = "torchlean/" + path.split("/torchlean/", 1)[1]
        elif path == "~":
            key = "builtins: " + ("cffi calls" if "lib" in fn or "tl_" in fn else fn)
        else:
            key = Path(path).name
        own[key] += tt
    total = sum(own.values())
    return sorted(((v / total, k) for k, v in own.items()), reverse=True)


def main():
    a = parse(sys.argv[1:])
    os.environ.setdefault("TORCHLEAN_BACKEND", "stub")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT))
    import torch
    torch.set_num_threads(1)
    runs = loops(a.n)
    med = time_all(runs, a.n, a.rounds)
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"`python bench/bench_op_overhead.py --n {a.n} --rounds {a.rounds}"
             f"{' --profile' if a.profile else ''}` ({when}, load average {load}; 1 thread each, "
             f"CPU time of this process, medians of {a.rounds} alternating blocks of {a.n} ops)",
             "", "| 1-element `a * b` | torchlean stub us/op | torch eager us/op | ratio |",
             "|---|---:|---:|---:|"]
    for row in ("fwd", "no_grad fwd", "fwd+bwd"):
        t, p = med[(row, "torchlean")], med[(row, "torch")]
        lines.append(f"| {row} | {t:.2f} | {p:.2f} | {t / p:.2f}x |")
    t = med[("fwd+bwd", "torchlean")] - med[("fwd", "torchlean")]
    p = med[("fwd+bwd", "torch")] - med[("fwd", "torch")]
    lines.append(f"| bwd (fwd+bwd - fwd) | {t:.2f} | {p:.2f} | {t / p:.2f}x |")
    if a.profile:
        lines += ["", "Own time of the torchlean fwd+bwd loop by module (cProfile, which inflates "
                  "small Python frames; read shares):", "", "| module | share |", "|---|---:|"]
        lines += [f"| {k} | {v:.0%} |" for v, k in by_module(runs[("fwd+bwd", "torchlean")])[:14]]
    append_table("\n".join(lines) + "\n", a.out)


if __name__ == "__main__":
    main()
