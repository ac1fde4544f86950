"""What recording (torchlean.audit) adds to a training step, on the stub or on CUDA: an
example's model and optimizer (digits_cnn, mlp_digits) timed without and with recording, in
alternating blocks in one process, medians and ratios reported.

    python3 bench/bench_audit.py --backend stub --threads 2 --model digits_cnn --out R.md
    python3 bench/bench_audit.py --backend cuda --model mlp_digits --out R.md

Blocks of --block steps without and with recording alternate (each recorded block is one
record, written to a temporary directory and deleted), so a shared machine's load changes fall
on both sides. Two overheads are reported:
- step: the median recorded step against the median plain step (the first step of every block
  left out; a record's first one also looks up parameter names once);
- all-in: each recorded block's steps plus its stop() (the last digests read back, every record
  line formatted and written, the file closed) against the plain block's steps, medians over
  blocks: what a run pays including the record file, with a record closed every block (a long
  run closes it once, so this overstates the close).
Process CPU time is printed beside wall time: on a machine shared with other jobs it is the
steadier of the two; on CUDA the wall time is the one that counts (the host waits for the
device). Nothing is written but the --out file (a Markdown table row per model).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--model", nargs="+", default=["digits_cnn", "mlp_digits"],
                   choices=["digits_cnn", "mlp_digits"])
    p.add_argument("--backend", choices=["stub", "cuda"], default=None,
                   help="TORCHLEAN_BACKEND for this run (default: the environment's)")
    p.add_argument("--threads", type=int, default=None,
                   help="OMP_NUM_THREADS for the stub (default: the environment's)")
    p.add_argument("--blocks", type=int, default=12, help="blocks of each kind (default 12)")
    p.add_argument("--block", type=int, default=16, help="steps per block (default 16)")
    p.add_argument("--mode", choices=["exact", "default"], default="exact")
    p.add_argument("--out", default=None, help="append the results (Markdown) to this file")
    return p.parse_args(argv)


def trainer(name: str):
    """step(i): one optimizer step of the example's model on batch i."""
    import numpy as np
    from torchlean import nn, optim
    from torchlean.session import Session, manual_seed
    manual_seed(0)
    rng_data = np.random.default_rng(1)
    if name == "digits_cnn":
        import digits_cnn as ex
        model, make_opt = ex.build_model(16), lambda ps: optim.Adam(ps, lr=3e-3)
    else:
        import mlp_digits as ex
        model, make_opt = ex.build_model(128), lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9)
    # the example's shapes with synthetic values (the GPU machine has no scikit-learn; the
    # values do not change the work)
    X = rng_data.random((1437,) + ((1, 8, 8) if name == "digits_cnn" else (64,)), np.float32)
    y = rng_data.integers(0, 10, 1437)
    opt = make_opt(model.parameters())
    s = Session()
    rng = np.random.default_rng(0)

    def step(i):
        idx = rng.integers(0, len(X), 64)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(s.tensor(X[idx])), y[idx])
        loss.backward()
        opt.step()
        s.step()
    return step


def measure(name: str, blocks: int, block: int) -> dict:
    """Alternating plain and recorded blocks; per-step (wall, CPU) times and per-block totals."""
    import torchlean as tl
    from torchlean import audit
    step = trainer(name)
    plain, recorded, first = [], [], []
    plain_blocks, recorded_blocks = [], []
    clock = lambda: (time.perf_counter(), time.process_time())   # noqa: E731
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.tlaudit")
        for i in range(5):
            step(i)
        tl.synchronize()
        for _ in range(blocks):
            for times, totals, rec in ((plain, plain_blocks, False),
                                       (recorded, recorded_blocks, True)):
                if rec:
                    audit.start(path)
                total = [0.0, 0.0]
                for i in range(block):
                    t0, c0 = clock()
                    step(i)
                    tl.synchronize()
                    t1, c1 = clock()
                    t = (t1 - t0, c1 - c0)
                    if i:
                        times.append(t)
                        total[0] += t[0]
                        total[1] += t[1]
                    elif rec:   # a record's first step also looks up parameter names
                        first.append(t)
                if rec:
                    t0, c0 = clock()
                    audit.stop()   # the last read-back, the record lines and the trailer
                    t1, c1 = clock()
                    total[0] += t1 - t0
                    total[1] += c1 - c0
                totals.append(total)
    return {"plain": plain, "recorded": recorded, "first": first,
            "plain_blocks": plain_blocks, "recorded_blocks": recorded_blocks}


def summarize(name: str, r: dict, block: int) -> tuple[str, list[str]]:
    import torchlean as tl
    med = statistics.median
    head = (f"{name} ({tl.backend()}, {'exact' if tl.is_exact() else 'default'} mode, "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '-')}, "
            f"{len(r['plain_blocks'])} blocks of {block} steps each way)")
    lines, cells = [head], []
    for k, what in enumerate(("wall", "CPU")):
        mp = med(t[k] for t in r["plain"])
        mr = med(t[k] for t in r["recorded"])
        ratios = [rb[k] / pb[k] for pb, rb in zip(r["plain_blocks"], r["recorded_blocks"])]
        allin = med(ratios) - 1
        lines.append(f"  {what:4s} time: step {mp * 1e3:.3f} ms, recorded {mr * 1e3:.3f} ms, "
                     f"step overhead {(mr / mp - 1) * 100:+.1f}%, all-in {allin * 100:+.1f}%")
        cells += [f"{mp * 1e3:.3f} ms", f"{mr * 1e3:.3f} ms", f"{(mr / mp - 1) * 100:+.1f}%",
                  f"{allin * 100:+.1f}%"]
    lines.append(f"  a record's first step (once per run: parameter names): "
                 f"{med(t[1] for t in r['first']) * 1e3:.3f} ms CPU")
    row = (f"| {name} | {tl.backend()} | {os.environ.get('OMP_NUM_THREADS', '-')} | "
           + " | ".join(cells) + " |")
    return row, lines


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.backend:
        os.environ["TORCHLEAN_BACKEND"] = a.backend
    if a.threads:
        os.environ["OMP_NUM_THREADS"] = str(a.threads)
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "examples"))
    import torchlean as tl
    tl.set_exact(a.mode == "exact")
    rows = []
    for name in a.model:
        row, lines = summarize(name, measure(name, a.blocks, a.block), a.block)
        print("\n".join(lines), flush=True)
        rows.append(row)
    if a.out:
        new = not os.path.exists(a.out) or os.path.getsize(a.out) == 0
        with open(a.out, "a", encoding="utf-8") as f:
            if new:
                f.write("| model | backend | threads | plain step (wall) | recorded (wall) | "
                        "step overhead (wall) | all-in (wall) | plain step (CPU) | "
                        "recorded (CPU) | step overhead (CPU) | all-in (CPU) |\n"
                        + "|---" * 11 + "|\n")
            f.write("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
