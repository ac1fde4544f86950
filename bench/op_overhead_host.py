"""Per-op host time of torchlean alone (no PyTorch needed): a 1-element op on the stub and a
tiny training step, CPU time of the process, medians of alternating blocks.

    python bench/op_overhead_host.py [--n 3000] [--rounds 9] [--profile]
    python bench/op_overhead_host.py --base /path/to/other/tree [--procs 4]   # A/B

Rows: `a * b` with both inputs needing a gradient (the tape records a node), the same under
no_grad, `(a * b).backward()` (forward, backward, the two leaf gradients accumulated), bwd =
fwd+bwd - fwd, and one step of examples/mlp_digits.py's model (64 -> 128 -> 10, batch 64, SGD
with momentum, as bench_audit.trainer('mlp_digits')). With --base, processes of the other tree
and of this one alternate and the table holds the medians of their medians (a noisy machine
moves both sides alike). With --profile, cProfile's own time of the fwd+bwd loop per function.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS = ("fwd", "no_grad fwd", "fwd+bwd", "bwd (fwd+bwd - fwd)", "mlp step")


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=3000, help="ops per timed block")
    p.add_argument("--steps", type=int, default=40, help="mlp steps per timed block")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--base", default=None, help="another tree to time against this one")
    p.add_argument("--procs", type=int, default=4, help="processes per side with --base")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)   # one side, for --base
    p.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)     # the tree it imports
    return p.parse_args(argv)


def loops(n, steps):
    """The timed loops, each a function of no argument running one block."""
    import numpy as np
    import torchlean as tl
    from torchlean import nn, optim
    from torchlean.session import Session, manual_seed
    s = Session()
    a = s.tensor(np.ones(1, np.float32), requires_grad=True)
    b = s.tensor(np.full(1, 2.0, np.float32), requires_grad=True)

    def fwd():
        for _ in range(n):
            a * b

    def nograd():
        with tl.no_grad():
            for _ in range(n):
                a * b

    def fb():
        for _ in range(n):
            (a * b).backward()

    manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(1)
    X = rng.random((1437, 64), np.float32)
    y = rng.integers(0, 10, 1437)
    ms = Session()

    def mlp():
        for _ in range(steps):
            idx = rng.integers(0, len(X), 64)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(ms.tensor(X[idx])), y[idx])
            loss.backward()
            opt.step()
            ms.step()

    return {"fwd": (fwd, n), "no_grad fwd": (nograd, n), "fwd+bwd": (fb, n), "mlp step": (mlp, steps)}


def time_all(runs, rounds) -> dict:
    """Median us per op (per step) of each loop over `rounds` alternating blocks."""
    for run, _ in runs.values():
        run()
    times = {k: [] for k in runs}
    for _ in range(rounds):
        for k, (run, count) in runs.items():
            t0 = time.process_time()
            run()
            times[k].append((time.process_time() - t0) / count * 1e6)
    med = {k: statistics.median(v) for k, v in times.items()}
    med["bwd (fwd+bwd - fwd)"] = med["fwd+bwd"] - med["fwd"]
    return med


def by_function(run, top=25):
    """cProfile own time of run() per function, share of the total (cProfile inflates small
    frames: read shares, not times)."""
    prof = cProfile.Profile()
    prof.runcall(run)
    st = pstats.Stats(prof)
    rows = [(tt, nc, f"{Path(path).name}:{line}({fn})")
            for (path, line, fn), (_cc, nc, tt, _ct, _callers) in st.stats.items()]
    total = sum(r[0] for r in rows)
    return [(tt / total, nc, name) for tt, nc, name in sorted(rows, reverse=True)[:top]]


def one_side(a) -> dict:
    os.environ.setdefault("TORCHLEAN_BACKEND", "stub")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, a.root)
    runs = loops(a.n, a.steps)
    med = time_all(runs, a.rounds)
    if a.profile:
        print("own time of the fwd+bwd loop (cProfile):")
        for share, calls, name in by_function(runs["fwd+bwd"][0]):
            print(f"  {share:6.1%} {calls:8d}  {name}")
    return med


def ab(a):
    """Alternate processes of the other tree and of this one; medians of their medians."""
    sides = {"base": Path(a.base).resolve(), "this": ROOT}
    got = {k: [] for k in sides}
    args = ["--n", str(a.n), "--steps", str(a.steps), "--rounds", str(a.rounds), "--json"]
    for _ in range(a.procs):
        for k, root in sides.items():
            out = subprocess.run([sys.executable, __file__, *args, "--root", str(root)],
                                 capture_output=True, text=True, check=True).stdout
            got[k].append(json.loads(out.splitlines()[-1]))
    return {k: {r: statistics.median(m[r] for m in v) for r in ROWS} for k, v in got.items()}


def main():
    a = parse(sys.argv[1:])
    if a.json:
        print(json.dumps(one_side(a)))
        return
    cmd = "python bench/op_overhead_host.py " + " ".join(sys.argv[1:])
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    if a.base is None:
        med = one_side(a)
        print(f"`{cmd}` (load {load}; us per op, per step for mlp)\n")
        print("| row | us |\n|---|---:|")
        for r in ROWS:
            print(f"| {r} | {med[r]:.2f} |")
        return
    med = ab(a)
    print(f"`{cmd}` (load {load}; medians of {a.procs} alternating processes per side, each the "
          f"median of {a.rounds} blocks; us per op, per step for mlp)\n")
    print("| row | base us | this us | change |\n|---|---:|---:|---:|")
    for r in ROWS:
        b, t = med["base"][r], med["this"][r]
        print(f"| {r} | {b:.2f} | {t:.2f} | {(t - b) / b:+.0%} |")


if __name__ == "__main__":
    main()
