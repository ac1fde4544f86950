"""One training step of the examples' models on the CPU: torchlean's stub beside PyTorch CPU.

    TORCHLEAN_BACKEND=stub python bench/bench_stub_torch.py [--threads 2] [--rounds 5] \
        [--models digits_cnn,cnn_classifier,gpt_char,mlp,transformer,fno,vgg_cifar,resnet_cifar]
        [--out bench/results/stub.md]

Both frameworks train the same architecture with the same batch, optimizer and initial weights
(torchlean's state_dict copied into the torch twin) on the same data, with the same thread count
(torch.set_num_threads; the stub's pool reads OMP_NUM_THREADS, which this script sets before
torchlean loads). The machine may be shared, so the two sides run in alternating blocks of
--steps steps, --rounds times, and each side's time is the median of its blocks: load that comes
and goes hits both sides alike. The table goes into --out under its own heading (the rest of the
file, e.g. bench_stub.py's op table, is kept). torch is a benchmark-only dependency.
vgg_cifar and resnet_cifar are bench_models.py's VGG-style and ResNet-style (BatchNorm) CIFAR
models at their full sizes (batch 128, random 3x32x32 batches); --cifar-steps sets their block
length (a step takes about a second). mlp_784, cnn_28, lm_d256 and fno_w64 are bench_models.py's
MLP, CNN, LM and FNO at their full sizes (issue 35's table), trained by its trainers. bench/bench_stub_layers.py times their layers one by one.
bench/stub_ab.sh runs this script alternately against another build of the stub (before/after).
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Training steps against PyTorch CPU"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5, help="alternating blocks per side")
    p.add_argument("--steps", type=int, default=10, help="training steps per block")
    p.add_argument("--models", default="digits_cnn,cnn_classifier,gpt_char,mlp,transformer,fno,"
                   "vgg_cifar,resnet_cifar,mlp_784,cnn_28,lm_d256,fno_w64")
    p.add_argument("--cifar-steps", type=int, default=3, help="steps per block of the CIFAR rows "
                   "and the issue's full-size rows")
    p.add_argument("--out", default=None, help="also put the table into this file as its "
                   "section (the rest of the file, e.g. bench_stub.py's op table, is kept)")
    p.add_argument("--note", default="", help="a line about the machine's load, put under the table")
    return p.parse_args(argv)


ARGS = parse(sys.argv[1:]) if __name__ == "__main__" else None
if ARGS is not None:
    os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
    os.environ.setdefault("TORCHLEAN_BACKEND", "stub")
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import bench_examples as be  # noqa: E402
from sidebyside import TorchSide  # noqa: E402


# ------------------------------------------------------------------------------ extra workloads
def example_workloads(names):
    """digits_cnn, cnn_classifier and gpt_char as their examples train them (schedulers left
    out: a learning-rate update per step costs nothing next to the step)."""
    import char_transformer
    import cnn_classifier
    import digits_cnn
    import gpt_char
    rng = np.random.default_rng(0)
    ws = {}
    w = be.Workload("digits_cnn", "examples/digits_cnn.py: conv16-pool-conv32-pool-fc, Adam", 64)
    w.build = lambda: digits_cnn.build_model(16)
    w.opt, w.loss, w.clip = ("adam", dict(lr=3e-3)), "ce", None
    w.batches = be._digits_batches(False, 64, rng)
    ws[w.name] = w
    w = be.Workload("cnn_classifier", "examples/cnn_classifier.py: conv-BN-ReLU x2, dropout, "
                    "SGD Nesterov + weight decay, clip 2.0", 64)
    w.build = lambda: cnn_classifier.build_model(16)
    w.opt = ("sgd", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4))
    w.loss, w.clip = "ce", 2.0
    w.batches = be._digits_batches(False, 64, rng)
    ws[w.name] = w
    data, chars = char_transformer.load_data()
    w = be.Workload("gpt_char", "examples/gpt_char.py: 2 pre-norm blocks d=64 heads=4 T=64, "
                    "AdamW (2 groups), clip 1.0", 16)
    w.vocab, w.T = len(chars), 64
    w.build = lambda: gpt_char.build_model(len(chars), 64)
    w.opt, w.loss, w.clip = ("adamw_groups", dict(lr=3e-3, betas=(0.9, 0.95))), "gpt", 1.0
    w.batches = [char_transformer.batch(data, rng, 16, 64) for _ in range(be.N_BATCHES)]
    ws[w.name] = w
    import bench_models as bm
    for name, builder in (("vgg_cifar", bm.vgg), ("resnet_cifar", bm.resnet)):
        if name not in names:
            continue
        m = builder(bm.SIZES[builder.__name__]["full"], rng)
        w = be.Workload(name, "bench_models.py " + m.desc, m.batch)
        w.build, w.twin, w.opt, w.loss, w.clip = m.build_tl, m.build_torch, m.opt, "ce", None
        w.batches = m.batches
        ws[name] = w
    for name, builder in ISSUE_MODELS.items():
        if name in names:
            w = getattr(bm, builder)(bm.SIZES[builder]["full"], rng)
            w.name, w.from_bench_models = name, True
            ws[name] = w
    return [ws[n] for n in names if n in ws]


# the issue's rows not among the examples: bench_models.py's models at their full sizes, trained
# by its own torchlean and torch trainers (the same ones its GPU table uses)
ISSUE_MODELS = {"mlp_784": "mlp", "cnn_28": "cnn", "lm_d256": "lm", "fno_w64": "fno"}


def bench_models_steps(w, side):
    """(torchlean step, torch step) of a bench_models.py workload; each step(i) returns the
    loss at i == 0."""
    import bench_models as bm
    tl_inner, state = bm.tl_trainer(w)
    th_inner = bm.torch_trainer(w, side, state)
    return (lambda i: tl_inner(i, want_loss=(i == 0)),
            lambda i: th_inner(i, want_loss=(i == 0)))


def make_opt(optim, w, params_named):
    kind, kw = w.opt
    params = [p for _, p in params_named]
    if kind == "sgd":
        return optim.SGD(params, **kw)
    if kind == "adam":
        return optim.Adam(params, **kw)
    if kind == "adamw":
        return optim.AdamW(params, **kw)
    decay = [p for _, p in params_named if len(p.shape) >= 2]
    no_decay = [p for _, p in params_named if len(p.shape) < 2]
    return optim.AdamW([{"params": decay, "weight_decay": 0.1},
                        {"params": no_decay, "weight_decay": 0.0}], **kw)


def tl_step(w, tl):
    from torchlean import nn, optim
    from torchlean.session import Session, manual_seed
    if w.loss not in ("ce", "gpt"):
        return be.tl_trainer(w, tl)
    manual_seed(0)
    model = w.build()
    opt = make_opt(optim, w, list(model.named_parameters()))

    def step(i):
        x, y = w.batches[i % len(w.batches)]
        with Session() as s:
            opt.zero_grad()
            if w.loss == "gpt":
                loss = nn.functional.cross_entropy(model(x).view(-1, w.vocab), y.reshape(-1))
            else:
                loss = nn.functional.cross_entropy(model(s.tensor(x)), y)
            loss.backward()
            if getattr(w, "clip", None):
                nn.utils.clip_grad_norm_(model.parameters(), w.clip)
            opt.step()
            return loss.item() if i == 0 else None
    return model, step


def torch_twin(w, torch):
    tnn, F = torch.nn, torch.nn.functional
    if getattr(w, "twin", None) is not None:
        return w.twin(torch)
    if w.name == "digits_cnn":
        w2 = be.Workload("cnn", "", w.batch)
        return be.torch_model(w2, torch)
    if w.name == "cnn_classifier":
        class DigitsCNN(tnn.Module):
            def __init__(self):
                super().__init__()
                self.features = tnn.Sequential(
                    tnn.Conv2d(1, 16, 3, padding=1), tnn.BatchNorm2d(16), tnn.ReLU(), tnn.MaxPool2d(2),
                    tnn.Conv2d(16, 32, 3, padding=1), tnn.BatchNorm2d(32), tnn.ReLU(), tnn.MaxPool2d(2))
                self.classifier = tnn.Sequential(tnn.Flatten(), tnn.Dropout(0.1), tnn.Linear(128, 10))

            def forward(self, x):
                return self.classifier(self.features(x))
        return DigitsCNN()
    if w.name == "gpt_char":
        from torch_twins import MultiHeadAttention
        V, T, d, H = w.vocab, w.T, 64, 4

        class Block(tnn.Module):
            def __init__(self):
                super().__init__()
                self.ln_1, self.attn, self.ln_2 = tnn.LayerNorm(d), MultiHeadAttention(d, H), tnn.LayerNorm(d)
                self.mlp = tnn.Sequential(tnn.Linear(d, 4 * d), tnn.GELU(), tnn.Linear(4 * d, d))
                self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)),
                                     persistent=False)

            def forward(self, x):
                x = x + self.attn(self.ln_1(x), mask=self.mask)
                return x + self.mlp(self.ln_2(x))

        class GPT(tnn.Module):
            def __init__(self):
                super().__init__()
                self.tok_emb, self.pos_emb = tnn.Embedding(V, d), tnn.Embedding(T, d)
                self.blocks = tnn.ModuleList([Block() for _ in range(2)])
                self.ln_f, self.head = tnn.LayerNorm(d), tnn.Linear(d, V, bias=False)

            def forward(self, idx):
                x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1]))
                for b in self.blocks:
                    x = b(x)
                return self.head(self.ln_f(x))
        return GPT()
    return be.torch_model(w, torch)


def torch_step(w, side, state):
    torch = side.torch
    F = torch.nn.functional
    if w.name in ("mlp", "transformer", "fno"):
        inner = be.torch_trainer(w, side, state)
        return lambda i: inner(i, want_loss=(i == 0))
    model = torch_twin(w, torch)
    side.load_state(model, state, w.name)
    opt = make_opt(torch.optim, w, list(model.named_parameters()))

    def step(i):
        x, y = w.batches[i % len(w.batches)]
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        if getattr(w, "clip", None):
            torch.nn.utils.clip_grad_norm_(model.parameters(), w.clip)
        opt.step()
        return loss.item() if i == 0 else None
    return step


# ------------------------------------------------------------------------------ timing
def alternate(steps_by_side, rounds, steps, warmup=3):
    """{side: median seconds per step} over `rounds` alternating blocks of `steps` steps."""
    firsts, nxt = {}, {}
    for name, step in steps_by_side.items():
        firsts[name] = step(0)
        for i in range(1, warmup):
            step(i)
        nxt[name] = warmup
    times = {name: [] for name in steps_by_side}
    for _ in range(rounds):
        for name, step in steps_by_side.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                step(nxt[name])
                nxt[name] += 1
            times[name].append((time.perf_counter() - t0) / steps)
    return {n: statistics.median(t) for n, t in times.items()}, firsts


def main():
    a = ARGS
    import torchlean as tl
    side = TorchSide(tl.backend())
    if side.dev is None:
        raise SystemExit(f"PyTorch is needed for this bench ({side.note}): pip install torch")
    torch = side.torch
    torch.set_num_threads(a.threads)
    names = [m.strip() for m in a.models.split(",") if m.strip()]

    class Opts:
        batch = 0
        models = names
    ws = example_workloads(names) + be.workloads(Opts)
    ws.sort(key=lambda w: names.index(w.name))
    rows = []
    for w in ws:
        model = None
        if getattr(w, "from_bench_models", False):
            tstep, thstep = bench_models_steps(w, side)
        else:
            model, tstep = tl_step(w, tl)
            if w.loss not in ("ce", "gpt"):
                inner = tstep
                tstep = lambda i, inner=inner: inner(i, want_loss=(i == 0))  # noqa: E731
            thstep = torch_step(w, side, model.state_dict())
        heavy = w.name.endswith("_cifar") or w.name in ISSUE_MODELS   # a step of ~0.1-3 s
        steps = a.cifar_steps if heavy else a.steps
        t, first = alternate({"torchlean": tstep, "torch": thstep}, a.rounds, steps,
                             warmup=2 if heavy else 3)
        r = t["torchlean"] / t["torch"]
        rows.append((w, t["torchlean"] * 1e3, t["torch"] * 1e3, r,
                     abs(first["torchlean"] - first["torch"])))
        print(f"{w.name}: torchlean {t['torchlean'] * 1e3:.2f} ms, torch {t['torch'] * 1e3:.2f} ms, "
              f"{r:.2f}x", flush=True)
        del model, tstep, thstep
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [HEADING, "",
             f"`python bench/bench_stub_torch.py --threads {a.threads} --rounds {a.rounds} "
             f"--steps {a.steps} --cifar-steps {a.cifar_steps}` ({when}, load average "
             f"{os.getloadavg()[0]:.2f} at the end): {side.device_name}, {side.note}, "
             f"{a.threads} threads on each side; one training step (forward, backward, "
             f"optimizer), median of {a.rounds} alternating blocks of {a.steps} steps per side "
             f"({a.cifar_steps} for the CIFAR and full-size rows). "
             "|dloss|: first-step loss difference (same weights and batch; dropout draws "
             "differ in cnn_classifier).", "",
             "| model | batch | torchlean stub ms/step | torch CPU ms/step | stub / torch | \\|dloss\\| |",
             "|---|---:|---:|---:|---:|---:|"]
    for w, tl_ms, th_ms, r, dl in rows:
        lines.append(f"| {w.name} | {w.batch} | {tl_ms:.2f} | {th_ms:.2f} | {r:.2f}x | {dl:.1e} |")
    lines += [""] + [f"- {w.name}: {w.desc}" for w, *_ in rows]
    if a.note:
        lines += ["", a.note]
    section = "\n".join(lines) + "\n"
    print(section)
    if not a.out:
        return
    out = Path(a.out)
    old = out.read_text() if out.exists() else ""
    if HEADING in old:
        head, _, rest = old.partition(HEADING)
        nxt = rest.find("\n## ")
        old = head + (rest[nxt + 1:] if nxt >= 0 else "")
    out.write_text(old.rstrip("\n") + "\n\n" + section if old.strip() else section)


if __name__ == "__main__":
    main()
