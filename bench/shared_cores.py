"""Digits-demo epoch time on the stub, idle and next to one busy process (`yes > /dev/null`),
with the stub's own thread pool (native/stub/threads.c) and, given --gomp-lib, with a stub
library built before it (libgomp) under OMP_WAIT_POLICY=PASSIVE and ACTIVE.

    python bench/shared_cores.py [--gomp-lib DIR] --out bench/results/shared-cores.md

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


def configs(gomp_lib):
    """name -> extra environment"""
    out = {"torchlean pool (spin 20 us unless preempted, then sleep; slots claimed)": {}}
    if gomp_lib:
        for pol in ("PASSIVE", "ACTIVE"):
            out[f"libgomp {pol} (the --gomp-lib build)"] = {"OMP_WAIT_POLICY": pol,
                                                            "TORCHLEAN_LIB_DIR": gomp_lib}
    return out


def epoch_time(extra, steps: int, timeout: float) -> float:
    env = dict(os.environ, TORCHLEAN_BACKEND="stub", PYTHONPATH=str(ROOT))
    env.pop("OMP_WAIT_POLICY", None)
    env.pop("TORCHLEAN_LIB_DIR", None)
    env.update(extra)
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "digits_cnn.py"), "--steps",
                        str(steps), "--no-progress", "--backend", "stub"], env=env, cwd=str(ROOT),
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return float(re.search(r"time per epoch: ([0-9.]+) s", r.stdout).group(1))


def measure(cfgs, busy: bool, steps: int, repeats: int, timeout: float) -> dict:
    """{name: median s/epoch}, the configurations run in alternating order"""
    hog = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) if busy else None
    try:
        if hog:
            time.sleep(0.5)
        got = {n: [] for n in cfgs}
        for _ in range(repeats):
            for n, extra in cfgs.items():
                got[n].append(epoch_time(extra, steps, timeout))
        return {n: statistics.median(v) for n, v in got.items()}
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
    ap.add_argument("--gomp-lib", default=None,
                    help="folder of a libtorchlean_stub.so built with libgomp (before the pool)")
    a = ap.parse_args(argv)
    cfgs = configs(a.gomp_lib)
    load0 = os.getloadavg()[0]
    idle = measure(cfgs, False, a.steps, a.repeats, a.timeout)
    busy = measure(cfgs, True, a.steps, a.repeats, a.timeout)
    rows = [(n, idle[n], busy[n]) for n in cfgs]
    for name, i, b in rows:
        print(f"{name}: idle {i:.3f} s/epoch, one core busy {b:.3f} s/epoch ({b / i:.2f}x)",
              flush=True)
    lines = ["# Digits demo on a shared machine (stub backend)", "",
             f"`python bench/shared_cores.py` on {os.cpu_count()} cores: examples/digits_cnn.py, "
             f"{a.steps} Adam steps of batch 64, median of {a.repeats} runs per cell; \"busy\" "
             "runs one `yes > /dev/null` process beside it; configurations alternate. Other "
             "tenants of the machine were not stopped, so \"idle\" means no extra load from this "
             f"script (1-minute load average {load0:.1f} at the start).", "",
             "| threads | idle (s/epoch) | one core busy (s/epoch) | busy / idle |",
             "|---|---|---|---|"]
    lines += [f"| {n} | {i:.3f} | {b:.3f} | {b / i:.2f}x |" for n, i, b in rows]
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
