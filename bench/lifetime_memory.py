"""Memory of PyTorch-shaped loops with no Session and no step(): every batch is
`torchlean.tensor(x)` on the default session, as a torch program writes it. Three loops on the
digits CNN (examples/digits_cnn.py): training (Adam), inference under no_grad, and a forward
pass whose graph is dropped without backward. Live buffers, live bytes, the tape's real node
records and the process's resident size are read every --every steps; all must stay flat.

    python bench/lifetime_memory.py --steps 3000 --out bench/results/lifetime-memory.md
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import torchlean as tl  # noqa: E402
from digits_cnn import build_model, load_data  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(kind, steps, every, batch):
    tl.manual_seed(0)
    Xtr, ytr, _, _ = load_data(0)
    model = build_model()
    opt = tl.optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    rows, t0 = [], time.perf_counter()
    for step in range(1, steps + 1):
        idx = rng.integers(0, len(Xtr), size=batch)
        if kind == "train":
            out = model(tl.tensor(Xtr[idx]))
            loss = tl.nn.functional.cross_entropy(out, ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        elif kind == "no_grad":
            with tl.no_grad():
                loss = model(tl.tensor(Xtr[idx])).sum()
        else:   # forward with gradients on, graph dropped without backward
            loss = model(tl.tensor(Xtr[idx])).sum()
        if step == 1 or step % every == 0:
            gc.collect()
            m = tl.memory_stats()
            s = tl.session.default_session()
            rows.append((step, m["live_bytes"], m["live_buffers"],
                         len(dict.keys(s.tape.nodes)), rss_mib(), time.perf_counter() - t0,
                         loss.item()))
            print(kind, *rows[-1], flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--every", type=int, default=500)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    lines = ["# Loops with no Session and no step() (stub backend)", "",
             f"`python bench/lifetime_memory.py --steps {a.steps}`: the digits CNN, batch "
             f"{a.batch}, each batch uploaded with `torchlean.tensor(x)` on the default session; "
             "`step()` is never called. Flat means the same value at every row after the first "
             "(RSS: within 1 MiB).", ""]
    for kind, what in (("train", "training (Adam, cross-entropy, backward)"),
                       ("no_grad", "inference under `no_grad()`"),
                       ("forward", "forward with gradients on, graph dropped unused")):
        rows = run(kind, a.steps, a.every, a.batch)
        later = rows[1:] or rows
        flat = (len({r[1] for r in later}) == 1 and len({r[2] for r in later}) == 1
                and len({r[3] for r in later}) == 1
                and max(r[4] for r in later) - min(r[4] for r in later) <= 1.0)
        lines += [f"## {what}: {'flat' if flat else 'NOT flat'}", "",
                  "| step | live bytes | live buffers | node records | RSS (MiB) | seconds | loss |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.4f} |"
                  for r in rows]
        lines.append("")
    text = "\n".join(lines)
    if a.out:
        a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
