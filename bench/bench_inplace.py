"""In-place arithmetic against its out-of-place twin, with PyTorch's in-place ops side by side
where torch imports: microseconds per call (median of rounds, synchronised), small and large
sizes, and the native allocations each in-place call makes (it must be 0).

    TORCHLEAN_BACKEND=stub python3 bench/bench_inplace.py [--rounds 5] [--out FILE]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _per_call(fn, sync, reps: int, rounds: int) -> float:
    """Median over rounds of (seconds per call), synchronised before and after each round."""
    fn()
    sync()
    times = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", help="write the table (markdown) to this file")
    args = ap.parse_args()

    import torchlean as tl
    try:
        import torch
        dev = "cuda" if tl.backend() == "cuda" and torch.cuda.is_available() else "cpu"
        tsync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    rows = ["| n | op | torchlean out-of-place us | torchlean in-place us | in-place allocations "
            "| torch in-place us |", "|---:|---|---:|---:|---:|---:|"]
    for n in (1000, 1_000_003, 16_777_216):
        a = rng.random(n, dtype=np.float32)
        b = rng.random(n, dtype=np.float32) + 0.5
        x, y = tl.tensor(a), tl.tensor(b)
        reps = 2000 if n < 10_000 else (100 if n < 4_000_000 else 20)
        pairs = {"add": (lambda: x + y, lambda: x.add_(y)),
                 "mul scalar": (lambda: x * 1.0, lambda: x.mul_(1.0)),
                 "div": (lambda: x / y, lambda: x.div_(y)),
                 "exp": (lambda: x.exp(), lambda: x.mul_(0.0).exp_())}
        for name, (oop, ip) in pairs.items():
            t_oop = _per_call(oop, tl.synchronize, reps, args.rounds)
            t_ip = _per_call(ip, tl.synchronize, reps, args.rounds)
            before = tl.memory_stats()["allocations"]
            ip()
            tl.synchronize()
            allocs = tl.memory_stats()["allocations"] - before
            t_torch = float("nan")
            if torch is not None:
                tx = torch.tensor(a, device=dev)
                ty = torch.tensor(b, device=dev)
                tops = {"add": lambda: tx.add_(ty), "mul scalar": lambda: tx.mul_(1.0),
                        "div": lambda: tx.div_(ty), "exp": lambda: tx.mul_(0.0).exp_()}
                t_torch = _per_call(tops[name], tsync, reps, args.rounds)
            rows.append(f"| {n} | {name} | {t_oop * 1e6:.1f} | {t_ip * 1e6:.1f} | {allocs} | "
                        f"{t_torch * 1e6:.1f} |")
    head = (f"backend {tl.backend()}; torch {'absent' if torch is None else torch.__version__}; "
            f"median of {args.rounds} rounds")
    text = head + "\n\n" + "\n".join(rows) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
