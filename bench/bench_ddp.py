"""Data-parallel weak scaling of torchlean: the step time of one training step on 1 and on W
processes (one GPU each, the same batch per GPU), and the markdown table next to PyTorch DDP.

    mpirun -n W python bench/bench_ddp.py run --model cnn|lm|gpt --mode default|exact --out R.jsonl
    torchrun --nproc_per_node W bench/bench_ddp_torch.py --model cnn|lm|gpt --out R.jsonl
    python bench/bench_ddp.py table R.jsonl --out bench/results/ddp-h200x2.md

Models: a VGG-style CIFAR CNN (conv 64-64-pool-128-128-pool, linear to 10 classes, batch 128 of
3x32x32 per GPU), a 4-layer pre-norm transformer LM (d=256, 8 heads, T=128, vocabulary 256,
batch 32 per GPU) and one of GPT-2's width (6 layers, d=768, 12 heads, T=512, batch 8 per GPU);
SGD with momentum; random data drawn on the host each step. One process
(W=1) trains the bare model; W > 1 wraps it in DistributedDataParallel. A step is timed from
its start to the end of a device synchronisation after the optimizer step; the step time of
a run is the median over the timed steps of the slowest rank's time. exact: torchlean's exact
mode where the build has it, else deterministic mode (both reduce in rank order).
Efficiency = (1-GPU step time) / (W-GPU step time).

--diag runs one variant that tells where data parallelism's time goes (W > 1):
  solo         every rank trains its bare model, no communication (contention between the
               processes alone: host, PCIe, clocks)
  after        every bucket's reduction starts when the backward pass has ended (no overlap:
               no NCCL kernel shares the SMs with the backward kernels)
  highprio     NCCL on a high-priority stream instead of a normal-priority one (as before:
               its spinning kernels took the SMs ahead of the backward pass)
  nocheck      without the per-step agreement check (one small all-gather on the host channel,
               posted at the first gradient and read at the end of backward)
  hostwait     the host waits for every reduction at the end of backward (as before
               Work.order: the GPU idles while the host then queues the optimizer step)
  first1mb     the first bucket capped at 1 MB, as PyTorch's and as over a network
  firstcap     the first bucket as large as the others, as within one host
--tag names other variants (NCCL variables set by the caller: NCCL_MAX_CTAS,
NCCL_MAX_NCHANNELS, how many SMs NCCL's kernels take); the NCCL variables set are recorded.
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
          "lm": "transformer LM, 4 layers d=256 8 heads T=128, batch 32 per GPU",
          "gpt": "GPT-2 width LM, 6 layers d=768 12 heads T=512, batch 8 per GPU"}
V = 256
# (layers, d, heads, T, batch per GPU)
LM_SHAPES = {"lm": (4, 256, 8, 128, 32), "gpt": (6, 768, 12, 512, 8)}
DIAGS = ("solo", "after", "highprio", "nocheck", "hostwait", "first1mb", "firstcap")


def build_cnn():
    from torchlean import nn
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128 * 8 * 8, 10))


def build_lm(name: str):
    from torchlean import nn
    LAYERS, D, HEADS, T, _ = LM_SHAPES[name]

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
    _, _, _, T, B = LM_SHAPES[model_name]
    x = rng.integers(0, V, (B, T))
    return x, np.roll(x, -1, axis=1)


def apply_diag(diag: str) -> None:
    """Patch DistributedDataParallel (or NCCL's stream) for one --diag variant, before the
    communicator and the wrapper exist. Measurement only: these are no library options."""
    from torchlean.nn.parallel import DistributedDataParallel as DDP
    if diag == "after":
        def on_grad(self, p):   # mark the bucket ready; _on_backward_end launches them all
            b = self._bucket_of.get(id(p))
            if not self._sync or b is None or b.pending is not None:
                return
            b.ready.add(id(p))
            object.__setattr__(self, "_active", True)
            self._start_check()
        DDP._on_grad = on_grad
    elif diag == "nocheck":
        DDP._start_check = DDP._check_same_step = lambda self: None
    elif diag == "highprio":
        from torchlean.distributed import cuda_runtime
        stream = cuda_runtime.CudaRuntime.stream
        cuda_runtime.CudaRuntime.stream = lambda self, high_priority=True: stream(self, True)
    elif diag == "hostwait":
        from torchlean.distributed.work import Work
        Work.order = Work.wait
    elif diag in ("first1mb", "firstcap"):
        from torchlean import distributed
        distributed.crosses_network = lambda: diag == "first1mb"

def run(args) -> None:
    import torchlean as tl
    import torchlean.distributed as dist
    if args.diag:
        apply_diag(args.diag)
    dist.init()
    if args.mode == "exact":
        getattr(tl, "set_exact", tl.set_deterministic)(True)
    for name in args.model.split(","):
        if name not in MODELS:
            raise SystemExit(f"--model: {name!r} is none of {sorted(MODELS)}")
        run_model(args, name)
    dist.destroy()


def run_model(args, name: str) -> None:
    import torchlean as tl
    import torchlean.distributed as dist
    from torchlean import nn, optim
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session, manual_seed
    rank, world = dist.rank(), dist.world_size()
    manual_seed(0)
    net = build_cnn() if name == "cnn" else build_lm(name)
    wrap = world > 1 and args.diag != "solo"
    model = DistributedDataParallel(net, bucket_cap_mb=args.bucket_cap_mb) if wrap else net
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    s = Session()
    rng = np.random.default_rng(rank)

    phases = {k: [] for k in ("forward", "backward", "optimizer", "sync")}

    def step():
        x, y = batch(name, rng)
        tl.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad()
        if name == "cnn":
            loss = nn.functional.cross_entropy(model(s.tensor(x)), y)
        else:
            loss = nn.functional.cross_entropy(model(x, s).reshape(-1, V), y.reshape(-1))
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        s.step()
        t3 = time.perf_counter()
        tl.synchronize()
        t4 = time.perf_counter()
        for k, a, b in (("forward", t0, t1), ("backward", t1, t2), ("optimizer", t2, t3),
                        ("sync", t3, t4)):
            phases[k].append(b - a)
        return t4 - t0

    inside = ddp_phases() if args.timeline and wrap else {}
    times = [step() for _ in range(args.warmup + args.steps)][args.warmup:]
    if args.timeline and rank == 0:
        # host time by phase (median ms over the timed steps); backward includes the DDP
        # step check and the wait for the reductions, listed on their own
        parts = {k: v[args.warmup:] for k, v in {**phases, **inside}.items()}
        print(f"## timeline {name} {args.mode} W={world} {args.diag or ''}{args.tag}: " + ", ".join(
            f"{k} {1e3 * float(np.median(v)) if v else 0.0:.3f}" for k, v in parts.items()),
            flush=True)
    slowest = dist.communicator().allgather_array(np.array(times), "bench times").max(axis=0)
    if args.profile:
        kernels(step, args.profile, rank, f"{name} {args.mode} W={world} {args.diag or ''}"
                f"{args.tag}")
    if hasattr(model, "remove_hooks"):
        model.remove_hooks()
    if rank == 0:
        mode = args.mode
        if mode == "exact" and not hasattr(tl, "set_exact"):
            mode = "exact (deterministic)"
        variant = "+".join(v for v in (args.diag, args.tag) if v)
        nccl = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
        rec = {"impl": "torchlean", "model": name, "mode": mode, "world": world,
               "variant": variant, "nccl_env": nccl,
               "median_ms": 1e3 * float(np.median(slowest)),
               "p10_ms": 1e3 * float(np.percentile(slowest, 10)),
               "p90_ms": 1e3 * float(np.percentile(slowest, 90)),
               "steps": args.steps, "backend": tl.backend()}
        print(json.dumps(rec), flush=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(rec) + "\n")


_PHASES: dict = {}


def ddp_phases() -> dict:
    """Host time per step in DistributedDataParallel's step check, its gradient hooks (the
    buckets they launch included) and its end-of-backward wait (reductions completed, gradients
    finished): patches the class, for --timeline."""
    from torchlean.nn.parallel import DistributedDataParallel as DDP
    if _PHASES:                       # patched by an earlier model of this process
        for v in _PHASES.values():
            v.clear()
        return _PHASES
    out = _PHASES
    out.update({"ddp check": [], "ddp wait": []})

    def timed(fn, key):
        def wrapper(self, *a):
            t0 = time.perf_counter()
            try:
                return fn(self, *a)
            finally:
                out[key].append(time.perf_counter() - t0)
        return wrapper
    # the check is posted once per step inside _on_grad (a no-op on later calls) and read in
    # _on_backward_end, whose time includes that read
    start = DDP._start_check

    def check_once(self):
        if self._checked is not False:
            return None
        return timed(start, "ddp check")(self)
    DDP._start_check = check_once
    # the gradient hooks (buckets launched in them included), summed over a step
    out["ddp hooks"] = []
    hooks = [0.0]
    on_grad, end = DDP._on_grad, timed(DDP._on_backward_end, "ddp wait")

    def on_grad_timed(self, p):
        t0 = time.perf_counter()
        try:
            return on_grad(self, p)
        finally:
            hooks[0] += time.perf_counter() - t0

    def end_timed(self):
        if self._active:
            out["ddp hooks"].append(hooks[0])
        hooks[0] = 0.0
        return end(self)
    DDP._on_grad, DDP._on_backward_end = on_grad_timed, end_timed
    return out


def kernels(step, n: int, rank: int, label: str, top: int = 14) -> None:
    """Rank 0's GPU kernels over n steps (torch.profiler's CUPTI trace records torchlean's
    kernels too): time per step by kernel, the sum, and the wall time. Every rank traces."""
    from collections import defaultdict
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        print("profile: torch is not installed", flush=True)
        return
    import torchlean.distributed as dist
    torch.cuda.set_device(dist.device() or 0)   # torch's device: this rank's
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            step()
        torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / n
    if rank:
        return
    per = defaultdict(lambda: [0.0, 0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            us = getattr(ev, "device_time_total", None)
            d = per[ev.name[:100]]
            d[0] += ev.cuda_time_total if us is None else us
            d[1] += 1
    total = sum(v[0] for v in per.values()) / n / 1e3
    lines = [f"## profile {label}: wall {wall * 1e3:.3f} ms/step, kernels {total:.3f} ms/step"]
    for k, (us, c) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"  {us / n / 1e3:8.3f} ms  {c / n:5.1f}x  {k}")
    print("\n".join(lines), flush=True)


def load_runs(path: str) -> list[dict]:
    """The JSON records of `path`, runs of one configuration (implementation, model, mode, W,
    variant) merged into one record: median_ms the median of their medians, `runs` how many
    (interleaved rounds steady a machine whose host speed drifts between runs)."""
    groups: dict = {}
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            key = (r["impl"], r["model"], r["mode"], r["world"], r.get("variant", ""))
            groups.setdefault(key, []).append(r)
    out = []
    for runs in groups.values():
        r = dict(runs[-1])
        r["median_ms"] = float(np.median([x["median_ms"] for x in runs]))
        r["runs"] = len(runs)
        r["all_ms"] = [round(x["median_ms"], 3) for x in runs]
        out.append(r)
    return out


def runs(args) -> None:
    """Each configuration's runs (a variant's ".round" suffix dropped) and their median: the
    A/B scripts' summary (bench/device/ddp_first_bucket.sh, ddp_w4_bind.sh)."""
    rows: dict = {}
    for line in open(args.results):
        if line.strip():
            r = json.loads(line)
            key = (r["model"], r["world"], r.get("variant", "").split(".")[0])
            rows.setdefault(key, []).append(r["median_ms"])
    for k, v in sorted(rows.items()):
        print(k, [round(x, 2) for x in v], "median", round(float(np.median(v)), 2))


def table(args) -> None:
    recs = load_runs(args.results)
    main = [r for r in recs if not r.get("variant")]
    by = {(r["impl"], r["model"], r["mode"].split(" ")[0], r["world"]): r for r in main}
    worlds = sorted({r["world"] for r in recs if r["world"] > 1}) or [2]
    runs = max((r["runs"] for r in main), default=1)
    gpus = " / ".join(str(w) for w in worlds)
    lines = [f"# Data-parallel weak scaling, 1 vs {gpus} GPUs", "",
             "Same model and batch per GPU on each GPU; median step time (slowest rank) after "
             "warm-up, synchronised; efficiency at W GPUs = 1-GPU step / W-GPU step. Produced by "
             "`bench/bench_ddp.py` (torchlean, mpirun) and `bench/bench_ddp_torch.py` (PyTorch "
             "DDP, torchrun) in one run" + (f"; each cell the median of {runs} interleaved "
                                             "rounds" if runs > 1 else "") + ".", "",
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
    variants = [r for r in recs if r.get("variant")]
    if variants:
        lines += ["", "Diagnostic variants (torchlean; efficiency against the 1-GPU run of the "
                  "same model and mode above):", "",
                  "| model | mode | variant | GPUs | step (ms) | eff. |",
                  "|---|---|---|---|---|---|"]
        for r in variants:
            one = by.get(("torchlean", r["model"], r["mode"].split(" ")[0], 1))
            eff = f"{100 * one['median_ms'] / r['median_ms']:.0f}%" if one else "n/a"
            lines.append(f"| {r['model']} | {r['mode']} | {r['variant']} | {r['world']} | "
                         f"{r['median_ms']:.2f} | {eff} |")
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
    r.add_argument("--model", required=True, help="cnn, lm, gpt, or several: cnn,lm")
    r.add_argument("--mode", choices=["default", "exact"], default="default")
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--steps", type=int, default=30)
    r.add_argument("--bucket-cap-mb", type=float, default=25.0)
    r.add_argument("--diag", choices=DIAGS, default=None, help="a diagnostic variant (W > 1)")
    r.add_argument("--tag", default="", help="names the variant in the table")
    r.add_argument("--timeline", action="store_true",
                   help="print rank 0's host time by phase (forward, backward, DDP check...)")
    r.add_argument("--profile", type=int, default=0, metavar="N",
                   help="then trace N steps' kernels (torch.profiler) and print rank 0's")
    r.add_argument("--out", required=True, help="JSON lines file to append to")
    t = sub.add_parser("table", help="write the markdown table from the JSON lines")
    t.add_argument("results")
    t.add_argument("--out", default=None)
    u = sub.add_parser("runs", help="print each configuration's runs and their median")
    u.add_argument("results")
    args = p.parse_args(argv)
    {"run": run, "table": table, "runs": runs}[args.cmd](args)


if __name__ == "__main__":
    main()
