"""Digits-demo epoch time on the stub, idle and next to one busy process (`yes > /dev/null`),
under torchlean's default OpenMP wait policy (PASSIVE unless the user sets OMP_WAIT_POLICY) and
under libgomp's own default (spin, then sleep), which torchlean used before.

    python bench/shared_cores.py --out bench/results/shared-cores.md

Each configuration runs examples/digits_cnn.py in a fresh process and reads its
"time per epoch" line; the table gives the median of --repeats runs.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POLICIES = {"torchlean default (PASSIVE)": None, "libgomp default (spin, then sleep)": ""}


def epoch_time(policy, steps: int, timeout: float) -> float:
    env = dict(os.environ, TORCHLEAN_BACKEND="stub", PYTHONPATH=str(ROOT))
    env.pop("OMP_WAIT_POLICY", None)
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy   # "" reaches libgomp as unset: its own default
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "digits_cnn.py"), "--steps",
                        str(steps), "--no-progress", "--backend", "stub"], env=env, cwd=str(ROOT),
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return float(re.search(r"time per epoch: ([0-9.]+) s", r.stdout).group(1))


def measure(policy, busy: bool, steps: int, repeats: int, timeout: float) -> float:
    hog = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) if busy else None
    try:
        if hog:
            time.sleep(0.5)
        return statistics.median(epoch_time(policy, steps, timeout) for _ in range(repeats))
    finally:
        if hog:
            hog.kill()
            hog.wait()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=132, help="Adam steps per run (22 per epoch)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=400.0, help="seconds per run")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    rows = []
    for name, policy in POLICIES.items():
        idle = measure(policy, False, a.steps, a.repeats, a.timeout)
        busy = measure(policy, True, a.steps, a.repeats, a.timeout)
        rows.append((name, idle, busy))
        print(f"{name}: idle {idle:.3f} s/epoch, one core busy {busy:.3f} s/epoch "
              f"({busy / idle:.2f}x)", flush=True)
    lines = ["# Digits demo on a shared machine (stub backend)", "",
             f"`python bench/shared_cores.py` on {os.cpu_count()} cores: examples/digits_cnn.py, "
             f"{a.steps} Adam steps of batch 64, median of {a.repeats} runs per cell; \"busy\" "
             "runs one `yes > /dev/null` process beside it. Other tenants of the machine were "
             "not stopped, so \"idle\" means no extra load from this script.", "",
             "| OpenMP wait policy | idle (s/epoch) | one core busy (s/epoch) | busy / idle |",
             "|---|---|---|---|"]
    lines += [f"| {n} | {i:.3f} | {b:.3f} | {b / i:.2f}x |" for n, i, b in rows]
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
