"""Two stub libraries timed side by side (bench/profile_stub_kernels.py, bench/stub_layers_ab.py):
each side is a child process of the calling script, this checkout's library or the one in a
`--before` folder (TORCHLEAN_LIB_DIR), asked for one row at a time in alternating rounds so
both see the same machine load. A child reads a row index per line and answers one JSON line."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time


def spawn_sides(script: str, threads: int, child_args: list[str], before: str | None) -> dict:
    """{"after": this library's child, "before": the --before library's (when given)}"""
    def one(lib):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), TORCHLEAN_BACKEND="stub")
        env.pop("TORCHLEAN_LIB_DIR", None)
        if lib:
            env["TORCHLEAN_LIB_DIR"] = lib
        return subprocess.Popen([sys.executable, script, "--child", *child_args],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    sides = {"after": one(None)}
    if before:
        sides["before"] = one(before)
    return sides


def alternate(sides: dict, row: int, rounds: int) -> dict:
    """{side: [each round's answer for `row`]}, the sides taking turns within every round"""
    times = {s: [] for s in sides}
    for _ in range(rounds):
        for s, p in sides.items():
            p.stdin.write(f"{row}\n")
            p.stdin.flush()
            times[s].append(json.loads(p.stdout.readline()))
    return times


def compare(sides: dict, row: int, rounds: int, keys, derive=None) -> str:
    """One row's line: each key's median ms per call over `rounds`, before -> after with the
    ratio when both sides run. derive(med) may add keys computed from the answered ones."""
    times = alternate(sides, row, rounds)
    med = {s: {k: statistics.median(r[k] for r in v) for k in v[0]} for s, v in times.items()}
    for m in med.values():
        if derive:
            derive(m)
    parts = []
    for k in keys:
        if "before" in med:
            parts.append(f"{k} {med['before'][k]:.2f} -> {med['after'][k]:.2f} ms "
                         f"({med['after'][k] / med['before'][k]:.2f}x)")
        else:
            parts.append(f"{k} {med['after'][k]:.2f} ms")
    return ", ".join(parts)


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def close(sides: dict) -> None:
    for p in sides.values():
        p.stdin.close()
        p.wait()


def serve(make, clock: str, reps: int) -> None:
    """A child's loop: for each row index read from stdin, the ms per call of each of make(row)'s
    {label: fn} (made and warmed once per row), `reps` calls timed together, as one JSON line."""
    timer = time.process_time if clock == "cpu" else time.perf_counter
    made = {}
    for line in sys.stdin:
        i = int(line)
        if i not in made:
            made[i] = make(i)
            for fn in made[i].values():
                fn()
        out = {}
        for label, fn in made[i].items():
            t0 = timer()
            for _ in range(reps):
                fn()
            out[label] = (timer() - t0) / reps * 1e3
        print(json.dumps(out), flush=True)
