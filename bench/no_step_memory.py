"""Memory of a PyTorch-shaped training loop that never calls Session.step(): the digits CNN
(examples/digits_cnn.py's model and data) for --steps Adam steps, reading
torchlean.memory_stats() every --every steps. backward() frees the graph's intermediates, so
live bytes must stay flat after the first step, and so must the process size: the records of
freed nodes are forgotten ("tape nodes" counts the ids handed out; bench/lifetime_memory.py
counts the records kept).

    python bench/no_step_memory.py --steps 10000 --out bench/results/no-step-memory.md
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import torchlean as tl  # noqa: E402
from digits_cnn import build_model, load_data  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    tl.manual_seed(0)
    Xtr, ytr, _, _ = load_data(0)
    model = build_model()
    opt = tl.optim.Adam(model.parameters(), lr=3e-3)
    s = tl.Session()
    rng = np.random.default_rng(0)
    rows, t0 = [], time.perf_counter()
    for step in range(1, a.steps + 1):
        idx = rng.integers(0, len(Xtr), size=a.batch)
        xb = s.tensor(Xtr[idx])
        out = model(xb)
        loss = tl.nn.functional.cross_entropy(out, ytr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 1 or step % a.every == 0:
            m = tl.memory_stats()
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            rows.append((step, m["live_bytes"], m["live_buffers"], len(s.tape), rss,
                         time.perf_counter() - t0, loss.item()))
            print(*rows[-1], flush=True)
    live = [r[1] for r in rows[1:]] or [rows[0][1]]
    lines = ["# Training without Session.step() (stub backend)", "",
             f"`python bench/no_step_memory.py --steps {a.steps}`: the digits CNN, Adam, batch "
             f"{a.batch}, never calling `Session.step()`. Live bytes after step "
             f"{rows[1][0] if len(rows) > 1 else 1}: min {min(live)}, max {max(live)} "
             f"({'flat' if min(live) == max(live) else 'NOT flat'}).", "",
             "| step | live bytes | live buffers | tape nodes | max RSS (MiB) | seconds | loss |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.0f} | {r[5]:.1f} | {r[6]:.4f} |"
              for r in rows]
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
