"""Training throughput and peak memory of the examples' models: torchlean vs PyTorch eager.

    python bench/bench_examples.py --out bench/results/examples.md

For each model (the MLP, CNN, transformer and FNO of examples/, built by the examples' own
builders) both frameworks train the SAME architecture with the same batch size, optimizer and
hyper-parameters, from the SAME initial weights (torchlean's initial parameters are copied into
the torch model by state_dict name) on the same real data batches (scikit-learn digits, the
docstring corpus, the Burgers solver). Both sides upload each batch from host NumPy every step.

Timing: a few warm-up steps, then `--repeats` timed runs of `--steps` optimizer steps each, every
run closed by a device synchronisation (torch.cuda.synchronize / torchlean.synchronize);
steps/s = steps / median run time. Peak memory: the allocator peak over the timed runs
(torch.cuda.max_memory_allocated vs torchlean.memory_stats()["peak_bytes"]), both reset after
warm-up, so both include the live parameters, optimizer state and data. The "above baseline"
columns subtract what each allocator held before the model was built: for torch that is mostly
the cuBLAS/cuFFT workspaces that it allocates through its caching allocator (torchlean's
libraries allocate theirs outside its counters), so the memory ratio uses those columns. TF32 is off on both sides
(strict float32, torchlean's default). The first-step loss of both frameworks is reported as a
check that the models really are the same (|dloss| should be ~1e-6).

Without torch (or without a GPU for torch while torchlean runs on CUDA) the torch columns read
n/a: the script still measures torchlean, e.g. on the stub backend.
"""
from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from sidebyside import TorchSide, emit, measure, torchlean_hooks, ratio, mib  # noqa: E402

N_BATCHES = 8          # distinct batches cycled through (real data, never zeros)


# ------------------------------------------------------------------------------ the workloads
class Workload:
    """A model: torchlean builder, torch twin, optimizer settings, a batch list and the loss."""

    def __init__(self, name, desc, batch):
        self.name, self.desc, self.batch = name, desc, batch


def _digits_batches(flat, batch, rng):
    import mlp_digits
    Xtr, ytr, _, _ = mlp_digits.load_data()
    if not flat:
        Xtr = Xtr.reshape(-1, 1, 8, 8)
    out = []
    for _ in range(N_BATCHES):
        idx = rng.integers(0, len(Xtr), batch)
        out.append((Xtr[idx], ytr[idx]))
    return out


def workloads(args):
    """The four models with their data; each holds what both frameworks need."""
    import mlp_digits, digits_cnn, char_transformer, fno_burgers
    rng = np.random.default_rng(0)
    ws = []

    w = Workload("mlp", "MLP 64-128-10, SGD(momentum 0.9), cross-entropy", args.batch or 64)
    w.build = lambda: mlp_digits.build_model(128)
    w.opt = ("sgd", dict(lr=0.05, momentum=0.9))
    w.batches = _digits_batches(True, w.batch, rng)
    w.loss = "ce"
    ws.append(w)

    w = Workload("cnn", "digits CNN conv16-pool-conv32-pool-fc, Adam, cross-entropy",
                 args.batch or 64)
    w.build = lambda: digits_cnn.build_model(16)
    w.opt = ("adam", dict(lr=3e-3))
    w.batches = _digits_batches(False, w.batch, rng)
    w.loss = "ce"
    ws.append(w)

    data, chars = char_transformer.load_data()
    V, T = len(chars), 32
    w = Workload("transformer", f"char transformer 1 block d=32 heads=2 T={T} V={V}, AdamW",
                 args.batch or 16)
    w.build = lambda: char_transformer.build_model(V, T)
    w.opt = ("adamw", dict(lr=3e-3, weight_decay=0.01))
    w.batches = [char_transformer.batch(data, rng, w.batch, T) for _ in range(N_BATCHES)]
    w.loss = "ce_seq"
    w.vocab, w.T = V, T
    ws.append(w)

    a, u = fno_burgers.burgers(160, 32)
    w = Workload("fno", "FNO1d width 8 modes 8 grid 32 (Burgers), Adam, MSE", args.batch or 32)
    w.build = lambda: fno_burgers.build_model(8, 8)
    w.opt = ("adam", dict(lr=3e-3))
    w.batches = []
    for _ in range(N_BATCHES):
        i = rng.integers(0, 128, w.batch)
        w.batches.append((a[i].reshape(-1, 32, 1), u[i].reshape(-1, 32, 1)))
    w.loss = "mse"
    ws.append(w)
    return [w for w in ws if w.name in args.models]


# ------------------------------------------------------------------------------ torchlean side
def tl_trainer(w, tl):
    """(model, step(i) -> loss Tensor or None, first_loss)."""
    from torchlean import nn, optim
    from torchlean.session import Session, manual_seed
    manual_seed(0)
    model = w.build()
    kind, kw = w.opt
    opt = {"sgd": optim.SGD, "adam": optim.Adam, "adamw": optim.AdamW}[kind](
        model.parameters(), **kw)
    s = Session()

    def step(i, want_loss=False):
        x, y = w.batches[i % len(w.batches)]
        if w.loss == "ce":
            loss = nn.functional.cross_entropy(model(s.tensor(x)), y)
        elif w.loss == "ce_seq":
            loss = nn.functional.cross_entropy(model(x, s).reshape(-1, w.vocab), y.reshape(-1))
        else:
            loss = nn.functional.mse_loss(model(s.tensor(x)), s.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        v = loss.item() if want_loss else None
        s.step()
        return v

    return model, step


# ------------------------------------------------------------------------------ torch side
def torch_model(w, torch):
    """The same architecture in PyTorch, parameter names matching torchlean's state_dict."""
    tnn, F = torch.nn, torch.nn.functional
    if w.name == "mlp":
        return tnn.Sequential(tnn.Linear(64, 128), tnn.ReLU(), tnn.Linear(128, 10))
    if w.name == "cnn":
        return tnn.Sequential(tnn.Conv2d(1, 16, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                              tnn.Conv2d(16, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                              tnn.Flatten(), tnn.Linear(32 * 2 * 2, 10))
    from torch_twins import MultiHeadAttention, SpectralConv1d
    if w.name == "transformer":
        V, T, d, H = w.vocab, w.T, 32, 2

        class CharTransformer(tnn.Module):
            def __init__(self):
                super().__init__()
                self.emb = tnn.Embedding(V, d)
                self.pos = tnn.Parameter(torch.empty(T, d))
                self.ln1, self.att, self.ln2 = tnn.LayerNorm(d), MultiHeadAttention(d, H), \
                    tnn.LayerNorm(d)
                self.ff1, self.ff2, self.head = tnn.Linear(d, 4 * d), tnn.Linear(4 * d, d), \
                    tnn.Linear(d, V)
                self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

            def forward(self, idx):
                h = self.emb(idx) + self.pos
                h = h + self.att(self.ln1(h), mask=self.mask)
                h = h + self.ff2(F.gelu(self.ff1(self.ln2(h)), approximate="tanh"))
                return self.head(h)

        return CharTransformer()
    if w.name == "fno":
        width, modes = 8, 8

        class FNO1d(tnn.Module):
            def __init__(self):
                super().__init__()
                self.lift, self.spec = tnn.Linear(1, width), SpectralConv1d(width, modes)
                self.skip, self.proj = tnn.Linear(width, width), tnn.Linear(width, 1)

            def forward(self, x):
                h = self.lift(x)
                return self.proj(F.relu(self.spec(h) + self.skip(h)))

        return FNO1d()
    raise ValueError(w.name)


def torch_trainer(w, side, state):
    torch, dev = side.torch, side.dev
    F = torch.nn.functional
    model = torch_model(w, torch).to(dev)
    side.load_state(model, state, w.name)
    kind, kw = w.opt
    if kind == "sgd":
        opt = torch.optim.SGD(model.parameters(), **kw)
    elif kind == "adam":
        opt = torch.optim.Adam(model.parameters(), **kw)
    else:
        opt = torch.optim.AdamW(model.parameters(), **kw)

    def step(i, want_loss=False):
        x, y = w.batches[i % len(w.batches)]
        x = torch.from_numpy(x).to(dev)
        y = torch.from_numpy(y).to(dev)
        out = model(x)
        if w.loss == "ce":
            loss = F.cross_entropy(out, y)
        elif w.loss == "ce_seq":
            loss = F.cross_entropy(out.reshape(-1, w.vocab), y.reshape(-1))
        else:
            loss = F.mse_loss(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item() if want_loss else None

    return step


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the table to this file")
    p.add_argument("--models", default="mlp,cnn,transformer,fno",
                   help="comma-separated subset of mlp,cnn,transformer,fno")
    p.add_argument("--batch", type=int, default=0, help="override every model's batch size")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="optimizer steps per timed run")
    p.add_argument("--no-torch", action="store_true", help="measure torchlean only")
    args = p.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.warmup = max(1, args.warmup)

    import torchlean as tl
    backend = tl.backend()
    side = TorchSide(backend, args.no_torch)
    device_name, torch_note = side.device_name, side.note
    timing = dict(warmup=args.warmup, repeats=args.repeats, steps=args.steps)

    rows = []
    for w in workloads(args):
        tl_base = tl.memory_stats()["live_bytes"]
        model, tstep = tl_trainer(w, tl)
        state = model.state_dict()          # the initial weights, before any step
        r = measure(tstep, *torchlean_hooks(tl), **timing)
        tl_first, tl_sps, tl_peak = r["first_loss"], 1.0 / r["step_s"], r["peak"]
        row = dict(name=w.name, desc=w.desc, batch=w.batch, tl_sps=tl_sps, tl_peak=tl_peak,
                   tl_above=tl_peak - tl_base, th_sps=None, th_peak=None, th_above=None,
                   dloss=None, note="")
        del model, tstep
        if side.dev is not None:
            try:
                th_base = side.live()
                th_step = torch_trainer(w, side, state)
                r = measure(th_step, side.sync, side.reset_peak, side.peak, **timing)
                th_peak = r["peak"]
                row.update(th_sps=1.0 / r["step_s"], th_peak=th_peak,
                           dloss=abs(r["first_loss"] - tl_first),
                           th_above=None if th_base is None else th_peak - th_base)
                del th_step
                side.empty_cache()
            except Exception as e:          # keep the other rows; say why this one failed
                row["note"] = f"torch failed: {type(e).__name__}: {e}"[:200]
        rows.append(row)
        print(f"{w.name:12s} torchlean {tl_sps:9.1f} steps/s peak {mib(tl_peak)}"
              f" (+{mib(row['tl_above'])})"
              + (f" | torch {row['th_sps']:9.1f} steps/s peak {mib(row['th_peak'])}"
                 f" (+{mib(row['th_above'])})"
                 f" |dloss| {row['dloss']:.2e}" if row["th_sps"] else f" | {torch_note}")
              + (f" {row['note']}" if row["note"] else ""), flush=True)

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Example models: torchlean vs PyTorch eager (training)",
        "",
        f"- date: {now}",
        f"- device: {device_name}",
        f"- torchlean backend: {backend} (deterministic={int(tl.is_deterministic())}); "
        f"PyTorch: {torch_note}",
        f"- method: same architecture, batch, optimizer and initial weights; real data uploaded "
        f"from host each step; {args.warmup} warm-up steps, then the median of {args.repeats} "
        f"runs of {args.steps} steps, each closed by a device synchronisation; peak = allocator "
        f"peak over the timed runs (reset after warm-up); TF32 off.",
        f"- |dloss|: first-step loss difference (same weights and batch), a check that the two "
        f"models compute the same function.",
        "",
        "| model | batch | torchlean steps/s | torch steps/s | speed (tl/torch) | torchlean peak "
        "| torch peak | torchlean above baseline | torch above baseline | memory (tl/torch) "
        "| \\|dloss\\| |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        th = "n/a" if r["th_sps"] is None else f"{r['th_sps']:.1f}"
        dl = "n/a" if r["dloss"] is None else f"{r['dloss']:.1e}"
        lines.append(f"| {r['name']} | {r['batch']} | {r['tl_sps']:.1f} | {th} | "
                     f"{ratio(r['tl_sps'], r['th_sps'])} | {mib(r['tl_peak'])} | "
                     f"{mib(r['th_peak'])} | {mib(r['tl_above'])} | "
                     f"{mib(r['th_above'])} | {ratio(r['tl_above'], r['th_above'])} | {dl} |")
    lines.append("")
    for r in rows:
        lines.append(f"- {r['name']}: {r['desc']}" + (f" ({r['note']})" if r["note"] else ""))
    lines.append("")
    text = "\n".join(lines)
    emit(text, args.out)
    return rows


if __name__ == "__main__":
    main()
