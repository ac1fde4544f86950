"""What recording (torchlean.audit) adds to a training step, on the stub or on CUDA: a model
and its optimizer (MODELS: the digits examples, cnn_classifier, gpt_char, bench_models.py's
VGG and ResNet) timed without and with recording, in alternating blocks in one process,
medians and ratios reported.

    python3 bench/bench_audit.py --backend stub --threads 2 --model digits_cnn --out R.md
    python3 bench/bench_audit.py --backend cuda --model mlp_digits --out R.md
    python3 bench/bench_audit.py --backend stub --threads 2 --breakdown \
        --model mlp_digits digits_cnn cnn_classifier gpt_char vgg resnet

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
                   choices=list(MODELS))
    p.add_argument("--backend", choices=["stub", "cuda"], default=None,
                   help="TORCHLEAN_BACKEND for this run (default: the environment's)")
    p.add_argument("--threads", type=int, default=None,
                   help="OMP_NUM_THREADS for the stub (default: the environment's)")
    p.add_argument("--blocks", type=int, default=12, help="blocks of each kind (default 12)")
    p.add_argument("--block", type=int, default=16, help="steps per block (default 16)")
    p.add_argument("--mode", choices=["exact", "default"], default="exact")
    p.add_argument("--out", default=None, help="append the results (Markdown) to this file")
    p.add_argument("--long", type=int, default=0, metavar="N",
                   help="also time N steps plain against N steps in one record (its start and "
                        "stop included), three times each way: what a long run pays per step")
    p.add_argument("--breakdown", action="store_true",
                   help="also run one recorded block timing the digest batches (Batch.run: the "
                        "native digests and the unpinning) and counting what they digest")
    return p.parse_args(argv)


# name -> what it trains: the two digits examples as the bench has always timed them, two
# more examples, and bench_models.py's CIFAR-style models at a batch the stub steps in
# ~0.1 to 1 s (the record's work is per op and per element, so its share falls as steps grow)
MODELS = {
    "mlp_digits": "examples/mlp_digits.py, hidden 128, batch 64, SGD momentum",
    "digits_cnn": "examples/digits_cnn.py, width 16, batch 64, Adam",
    "cnn_classifier": "examples/cnn_classifier.py (conv-BN-ReLU x2, dropout), batch 64, SGD Nesterov",
    "gpt_char": "examples/gpt_char.py (2 layers, 4 heads, 64 wide, T 64), batch 16, AdamW",
    "vgg": "bench_models.py vgg: 3x32x32, conv 32-32-pool-64-64-pool-fc, batch 16, Adam",
    "resnet": "bench_models.py resnet: 3x32x32, widths 16/32/64, 1 block a stage, batch 16, SGD",
    # the models table's sizes (bench_models.py "full", bench/results/models-exact.md): steps a
    # GPU trains in milliseconds, and the stub in about a second
    "vgg_full": "bench_models.py vgg at its full size: conv 64-64-pool-128-128-pool-fc, batch 128, Adam",
    "resnet_full": "bench_models.py resnet at its full size: widths 32/64/128, 2 blocks a stage, "
                   "batch 128, SGD Nesterov",
}


def trainer(name: str):
    """step(i): one optimizer step of the model on batch i (synthetic values of the example's
    shapes: the GPU machine has no scikit-learn; the values do not change the work)."""
    import numpy as np
    from torchlean import nn, optim
    from torchlean.session import Session, manual_seed
    manual_seed(0)
    rng_data = np.random.default_rng(1)
    if name in ("vgg", "resnet", "vgg_full", "resnet_full"):
        import bench_models as bm
        kind = name.split("_")[0]
        cfg = (bm.SIZES[kind]["full"] if name.endswith("_full") else
               dict(side=32, c1=32, c2=64, classes=10, batch=16) if kind == "vgg" else
               dict(side=32, widths=(16, 32, 64), blocks=1, classes=10, batch=16))
        w = bm.BUILDERS[kind](cfg, rng_data)
        model = w.build_tl()
        kind, kw = w.opt
        opt = {"sgd": optim.SGD, "adam": optim.Adam}[kind](model.parameters(), **kw)
        X = np.stack([x for x, _ in w.batches])
        Y = np.stack([y for _, y in w.batches])
        s = Session()

        def step(i):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(s.tensor(X[i % len(X)])), Y[i % len(Y)])
            loss.backward()
            opt.step()
            s.step()
        return step
    if name == "gpt_char":
        import gpt_char as ex
        vocab, T = 65, 64
        model = ex.build_model(vocab, T, 2, 4, 64)
        opt = optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
        data = rng_data.integers(0, vocab, 20000)
        rng = np.random.default_rng(0)

        def step(i):
            starts = rng.integers(0, len(data) - T - 1, 16)
            x = np.stack([data[k:k + T] for k in starts])
            y = np.stack([data[k + 1:k + T + 1] for k in starts])
            with Session():             # as the example: the model reads the current session
                opt.zero_grad()
                logits = model(x)
                loss = nn.functional.cross_entropy(logits.view(-1, vocab), y.reshape(-1))
                loss.backward()
                opt.step()
        return step
    if name == "digits_cnn":
        import digits_cnn as ex
        model, make_opt = ex.build_model(16), lambda ps: optim.Adam(ps, lr=3e-3)
    elif name == "cnn_classifier":
        import cnn_classifier as ex
        model = ex.build_model(16)
        make_opt = lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,  # noqa: E731
                                        weight_decay=5e-4)
    else:
        import mlp_digits as ex
        model, make_opt = ex.build_model(128), lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9)
    X = rng_data.random((1437,) + ((64,) if name == "mlp_digits" else (1, 8, 8)), np.float32)
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


def long_run(name: str, steps: int) -> str:
    """Mean step time over `steps` plain steps against `steps` steps recorded into one file
    (start, every record written, stop), alternating, three times each way; medians."""
    import torchlean as tl
    from torchlean import audit
    step = trainer(name)
    for i in range(5):
        step(i)
    plain, recorded = [], []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(3):
            for times, rec in ((plain, False), (recorded, True)):
                t0, c0 = time.perf_counter(), time.process_time()
                if rec:
                    audit.start(os.path.join(d, "long.tlaudit"))
                for i in range(steps):
                    step(i)
                if rec:
                    audit.stop()
                tl.synchronize()
                times.append(((time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps))
    med = statistics.median
    out = []
    for k, what in enumerate(("wall", "CPU")):
        p, r = med(t[k] for t in plain), med(t[k] for t in recorded)
        out.append(f"{what} {p * 1e3:.3f} -> {r * 1e3:.3f} ms ({(r / p - 1) * 100:+.1f}%)")
    return f"  one record of {steps} steps, start and stop included: " + ", ".join(out)


def breakdown(name: str, block: int) -> str:
    """One more recorded block of `block` steps with the digests timed (Batch.run, and on the
    stub, which digests each value as it is recorded, Batch.add_now, digest_values and
    digest_handles): per
    step, the values digested, the elements of those digested one by one or in batches, and
    the CPU time of the digest calls, against the whole recorded step."""
    import torchlean as tl
    from torchlean import audit
    from torchlean.audit import digests
    step = trainer(name)
    for i in range(3):
        step(i)
    seen = {"values": 0, "elements": 0, "cpu": 0.0}
    run, add_now, digest_handles = (digests.Batch.run, digests.Batch.add_now,
                                    digests.Batch.digest_handles)
    digest_values = digests.Batch.digest_values

    def timed(fn, values, elements):
        def call(self, *a):
            seen["values"] += values(self, *a)
            seen["elements"] += elements(self, *a)
            c0 = time.process_time()
            try:
                return fn(self, *a)
            finally:
                seen["cpu"] += time.process_time() - c0
        return call
    patched = {"run": timed(run, lambda b: b.count, lambda b: b.elements),
               "add_now": timed(add_now, lambda b, v: 1, lambda b, v: v.buf.n),
               # (a handle's length is not readable from Python: counted as values only)
               "digest_handles": timed(digest_handles, lambda b, hs: len(hs), lambda b, hs: 0)}
    several = timed(digest_values, lambda b, vs: len(vs), lambda b, vs: sum(v.buf.n for v in vs))
    # (one value goes through add_now, timed and counted there)
    patched["digest_values"] = (lambda b, vs: digest_values(b, vs) if len(vs) == 1
                                else several(b, vs))
    with tempfile.TemporaryDirectory() as d:
        for k, fn in patched.items():
            setattr(digests.Batch, k, fn)
        try:
            audit.start(os.path.join(d, "b.tlaudit"))
            step(0)
            seen.update(values=0, elements=0, cpu=0.0)
            c0 = time.process_time()
            for i in range(block):
                step(i)
            tl.synchronize()
            total = time.process_time() - c0
        finally:
            digests.Batch.run, digests.Batch.add_now = run, add_now
            digests.Batch.digest_handles = digest_handles
            digests.Batch.digest_values = digest_values
            audit.stop()
    return (f"  breakdown: {seen['values'] / block:.0f} values digested a step "
            f"({seen['elements'] / block / 1e6:.2f} M elements in batches and single values; "
            f"a stub step's values digested together are counted as values only); "
            f"digest calls {seen['cpu'] / block * 1e3:.3f} ms CPU of a "
            f"{total / block * 1e3:.3f} ms recorded step")


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
    sys.path.insert(0, str(ROOT / "bench"))
    import torchlean as tl
    tl.set_exact(a.mode == "exact")
    rows = []
    for name in a.model:
        row, lines = summarize(name, measure(name, a.blocks, a.block), a.block)
        if a.long:
            lines.append(long_run(name, a.long))
        if a.breakdown:
            lines.append(breakdown(name, a.block))
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
