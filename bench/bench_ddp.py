"""Data-parallel weak scaling of torchlean: the step time of one training step on 1 and on W
processes (one GPU each, the same batch per GPU), and the markdown table next to PyTorch DDP.

    mpirun -n W python bench/bench_ddp.py run --model cnn|lm --mode default|exact --out R.jsonl
    torchrun --nproc_per_node W bench/bench_ddp_torch.py --model cnn|lm --out R.jsonl
    python bench/bench_ddp.py table R.jsonl --out bench/results/ddp-h200x2.md

Models: a VGG-style CIFAR CNN (conv 64-64-pool-128-128-pool, linear to 10 classes, batch 128 of
3x32x32 per GPU) and a 4-layer pre-norm transformer LM (d=256, 8 heads, T=128, vocabulary 256,
batch 32 per GPU); SGD with momentum; random data drawn on the host each step. One process
(W=1) trains the bare model; W > 1 wraps it in DistributedDataParallel. A step is timed from
its start to the end of a device synchronisation after the optimizer step; the step time of
a run is the median over the timed steps of the slowest rank's time. exact: torchlean's exact
mode where the build has it, else deterministic mode (both reduce in rank order).
Efficiency = (1-GPU step time) / (W-GPU step time).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODELS = {"cnn": "VGG-style CIFAR CNN, batch 128 per GPU",
          "lm": "transformer LM, 4 layers d=256 8 heads T=128, batch 32 per GPU"}
V, T, D, HEADS, LAYERS = 256, 128, 256, 8, 4


def build_cnn():
    from torchlean import nn
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128 * 8 * 8, 10))


def build_lm():
    from torchlean import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.att = nn.LayerNorm(D), nn.MultiHeadAttention(D, HEADS)
            self.ln2, self.ff1, self.ff2 = nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(self, h, mask):
            h = h + self.att(self.ln1(h), mask=mask)
            return h + self.ff2(self.ff1(self.ln2(h)).gelu())

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = nn.Parameter(nn.init.normal((T, D), 0.0, 0.02), name="pos")
            for i in range(LAYERS):
                setattr(self, f"block{i}", Block())
            self.lnf, self.head = nn.LayerNorm(D), nn.Linear(D, V)
            self.mask = np.tril(np.ones((T, T), dtype=bool))

        def forward(self, idx, session):
            h = self.emb(idx, session=session) + session.use(self.pos)
            for i in range(LAYERS):
                h = getattr(self, f"block{i}")(h, self.mask)
            return self.head(self.lnf(h))

    return LM()


def batch(model_name: str, rng):
    if model_name == "cnn":
        return (rng.standard_normal((128, 3, 32, 32), dtype=np.float32),
                rng.integers(0, 10, 128))
    x = rng.integers(0, V, (32, T))
    return x, np.roll(x, -1, axis=1)


def run(args) -> None:
    import torchlean as tl
    import torchlean.distributed as dist
    from torchlean import nn, optim
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session, manual_seed
    dist.init()
    rank, world = dist.rank(), dist.world_size()
    if args.mode == "exact":
        getattr(tl, "set_exact", tl.set_deterministic)(True)
    manual_seed(0)
    net = build_cnn() if args.model == "cnn" else build_lm()
    model = DistributedDataParallel(net) if world > 1 else net
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    s = Session()
    rng = np.random.default_rng(rank)
    times = []
    for step in range(args.warmup + args.steps):
        x, y = batch(args.model, rng)
        tl.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad()
        if args.model == "cnn":
            loss = nn.functional.cross_entropy(model(s.tensor(x)), y)
        else:
            loss = nn.functional.cross_entropy(model(x, s).reshape(-1, V), y.reshape(-1))
        loss.backward()
        opt.step()
        s.step()
        tl.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    slowest = dist.communicator().allgather_array(np.array(times), "bench times").max(axis=0)
    if rank == 0:
        mode = args.mode
        if mode == "exact" and not hasattr(tl, "set_exact"):
            mode = "exact (deterministic)"
        rec = {"impl": "torchlean", "model": args.model, "mode": mode, "world": world,
               "median_ms": 1e3 * float(np.median(slowest)),
               "p10_ms": 1e3 * float(np.percentile(slowest, 10)),
               "p90_ms": 1e3 * float(np.percentile(slowest, 90)),
               "steps": args.steps, "backend": tl.backend()}
        print(json.dumps(rec), flush=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(rec) + "\n")
    dist.destroy()


def table(args) -> None:
    recs = [json.loads(line) for line in open(args.results) if line.strip()]
    by = {(r["impl"], r["model"], r["mode"].split(" ")[0], r["world"]): r for r in recs}
    worlds = sorted({r["world"] for r in recs if r["world"] > 1}) or [2]
    gpus = " / ".join(str(w) for w in worlds)
    lines = [f"# Data-parallel weak scaling, 1 vs {gpus} GPUs", "",
             "Same model and batch per GPU on each GPU; median step time (slowest rank) after "
             "warm-up, synchronised; efficiency at W GPUs = 1-GPU step / W-GPU step. Produced by "
             "`bench/bench_ddp.py` (torchlean, mpirun) and `bench/bench_ddp_torch.py` (PyTorch "
             "DDP, torchrun) in one `bench/gpu_ddp_run.sh` run.", "",
             "| model | implementation | 1 GPU (ms) | "
             + " | ".join(f"{w} GPUs (ms) | eff. {w}" for w in worlds) + " |",
             "|---|---|---|" + "---|---|" * len(worlds)]
    for m in MODELS:
        for impl, mode in [("torchlean", "default"), ("torchlean", "exact"),
                           ("pytorch", "default")]:
            recs_m = {w: by.get((impl, m, mode, w)) for w in [1] + worlds}
            if not any(recs_m.values()):
                continue
            label = impl if impl == "pytorch" else f"torchlean {mode}"
            rec = next(r for r in recs_m.values() if r)
            if rec["mode"] != mode:   # "exact (deterministic)": a build without exact mode
                label += f" ({rec['mode'].split(' ', 1)[1].strip('()')})"
            one = recs_m[1]
            cells = [f"{one['median_ms']:.2f}" if one else "n/a"]
            for w in worlds:
                many = recs_m[w]
                cells.append(f"{many['median_ms']:.2f}" if many else "n/a")
                cells.append(f"{100 * one['median_ms'] / many['median_ms']:.0f}%"
                             if one and many else "n/a")
            lines.append(f"| {MODELS[m]} | {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for m in MODELS:
        for w in worlds:
            d, e = by.get(("torchlean", m, "default", w)), by.get(("torchlean", m, "exact", w))
            if d and e:
                lines.append(f"- {m}: exact / default step time on {w} GPUs = "
                             f"{e['median_ms'] / d['median_ms']:.2f}x")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="time one configuration (launch under mpirun -n W)")
    r.add_argument("--model", choices=sorted(MODELS), required=True)
    r.add_argument("--mode", choices=["default", "exact"], default="default")
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--steps", type=int, default=30)
    r.add_argument("--out", required=True, help="JSON lines file to append to")
    t = sub.add_parser("table", help="write the markdown table from the JSON lines")
    t.add_argument("results")
    t.add_argument("--out", default=None)
    args = p.parse_args(argv)
    (run if args.cmd == "run" else table)(args)


if __name__ == "__main__":
    main()
