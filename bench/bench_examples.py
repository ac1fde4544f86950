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
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

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
    if w.name == "transformer":
        V, T, d, H = w.vocab, w.T, 32, 2

        class Attention(tnn.Module):
            """torchlean's multi_head_attention: Q = x Wq (no biases), heads are column
            blocks, causal boolean mask (True = may attend), output attn @ Wo."""

            def __init__(self):
                super().__init__()
                self.Wq, self.Wk, self.Wv, self.Wo = (tnn.Parameter(torch.empty(d, d))
                                                      for _ in range(4))

            def forward(self, x, mask):
                B, n, _ = x.shape
                hd = d // H

                def heads(t):
                    return t.view(B, n, H, hd).transpose(1, 2)
                q, k, v = heads(x @ self.Wq), heads(x @ self.Wk), heads(x @ self.Wv)
                att = (q @ k.transpose(-1, -2)) * (1.0 / hd ** 0.5)
                att = att.masked_fill(~mask, float("-inf")).softmax(-1)
                return (att @ v).transpose(1, 2).reshape(B, n, d) @ self.Wo

        class CharTransformer(tnn.Module):
            def __init__(self):
                super().__init__()
                self.emb = tnn.Embedding(V, d)
                self.pos = tnn.Parameter(torch.empty(T, d))
                self.ln1, self.att, self.ln2 = tnn.LayerNorm(d), Attention(), tnn.LayerNorm(d)
                self.ff1, self.ff2, self.head = tnn.Linear(d, 4 * d), tnn.Linear(4 * d, d), \
                    tnn.Linear(d, V)
                self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

            def forward(self, idx):
                h = self.emb(idx) + self.pos
                h = h + self.att(self.ln1(h), self.mask)
                h = h + self.ff2(F.gelu(self.ff1(self.ln2(h)), approximate="tanh"))
                return self.head(h)

        return CharTransformer()
    if w.name == "fno":
        width, modes = 8, 8

        class SpectralConv1d(tnn.Module):
            """torchlean's spectral_conv1d_rfft: rfft over the grid axis, mix the first `modes`
            bins with W[k, in, out], zero the rest, irfft (DC bin real)."""

            def __init__(self):
                super().__init__()
                self.w_re = tnn.Parameter(torch.empty(modes, width, width))
                self.w_im = tnn.Parameter(torch.empty(modes, width, width))

            def forward(self, x):
                grid = x.shape[-2]
                X = torch.fft.rfft(x, dim=-2)
                W = torch.complex(self.w_re, self.w_im)
                mixed = torch.einsum("bkc,kco->bko", X[:, :modes], W)
                dc = torch.complex(mixed[:, :1].real, torch.zeros_like(mixed[:, :1].real))
                Z = torch.cat([dc, mixed[:, 1:], torch.zeros(
                    x.shape[0], grid // 2 + 1 - modes, width, dtype=X.dtype, device=x.device)], 1)
                return torch.fft.irfft(Z, n=grid, dim=-2)

        class FNO1d(tnn.Module):
            def __init__(self):
                super().__init__()
                self.lift, self.spec = tnn.Linear(1, width), SpectralConv1d()
                self.skip, self.proj = tnn.Linear(width, width), tnn.Linear(width, 1)

            def forward(self, x):
                h = self.lift(x)
                return self.proj(F.relu(self.spec(h) + self.skip(h)))

        return FNO1d()
    raise ValueError(w.name)


def torch_trainer(w, torch, dev, state):
    F = torch.nn.functional
    model = torch_model(w, torch).to(dev)
    own = model.state_dict()
    missing = [k for k in own if k not in state and k != "mask"]
    if missing:
        raise KeyError(f"{w.name}: torch parameters without a torchlean twin: {missing}")
    with torch.no_grad():
        for k, v in state.items():
            own[k].copy_(torch.from_numpy(np.asarray(v)).reshape(own[k].shape))
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


# ------------------------------------------------------------------------------ measurement
def measure(step, sync, reset_peak, peak, args):
    """(first-step loss, steps/s, peak bytes): warm-up, reset the peak, median of timed runs."""
    first = step(0, want_loss=True)
    for i in range(1, args.warmup):
        step(i)
    sync()
    reset_peak()
    times = []
    i = args.warmup
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step(i)
            i += 1
        sync()
        times.append(time.perf_counter() - t0)
    return first, args.steps / statistics.median(times), peak()


def _fmt_bytes(b):
    if b is None:
        return "n/a"
    return f"{b / 2 ** 20:.2f} MiB"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "examples.md"))
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
    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            torch = None
    backend = tl.backend()
    dev, torch_note = None, "torch not installed"
    if torch is not None:
        if backend == "cuda":
            if torch.cuda.is_available():
                dev, torch_note = torch.device("cuda"), f"torch {torch.__version__} CUDA"
            else:
                torch_note = "torch has no CUDA device"
        else:
            dev, torch_note = torch.device("cpu"), f"torch {torch.__version__} CPU"
        if dev is not None:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.manual_seed(0)
    if torch is not None and dev is not None and dev.type == "cuda":
        device_name = torch.cuda.get_device_name(dev)
        t_sync = torch.cuda.synchronize
        t_reset = torch.cuda.reset_peak_memory_stats
        t_peak = torch.cuda.max_memory_allocated
        t_live = torch.cuda.memory_allocated
        # create the library workspaces (cuBLAS, cuBLASLt, cuDNN, cuFFT) before any baseline
        z = torch.randn(64, 64, device=dev, requires_grad=True)
        (z @ z).sum().backward()
        torch.nn.functional.conv2d(z.view(1, 1, 64, 64), z[:3, :3].reshape(1, 1, 3, 3))
        torch.fft.irfft(torch.fft.rfft(z, dim=0), n=64, dim=0)
        del z
        torch.cuda.synchronize()
    else:
        device_name = f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
        t_sync, t_reset, t_peak, t_live = (lambda: None), (lambda: None), (lambda: None), None

    rows = []
    for w in workloads(args):
        tl_base = tl.memory_stats()["live_bytes"]
        model, tstep = tl_trainer(w, tl)
        state = model.state_dict()          # the initial weights, before any step
        tl_first, tl_sps, tl_peak = measure(
            tstep, tl.synchronize, tl.reset_peak_memory_stats,
            lambda: tl.memory_stats()["peak_bytes"], args)
        row = dict(name=w.name, desc=w.desc, batch=w.batch, tl_sps=tl_sps, tl_peak=tl_peak,
                   tl_above=tl_peak - tl_base, th_sps=None, th_peak=None, th_above=None,
                   dloss=None, note="")
        del model, tstep
        if dev is not None:
            try:
                th_base = t_live() if t_live else None
                th_step = torch_trainer(w, torch, dev, state)
                th_first, th_sps, th_peak = measure(th_step, t_sync, t_reset, t_peak, args)
                row.update(th_sps=th_sps, th_peak=th_peak, dloss=abs(th_first - tl_first),
                           th_above=None if th_base is None else th_peak - th_base)
                del th_step
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            except Exception as e:          # keep the other rows; say why this one failed
                row["note"] = f"torch failed: {type(e).__name__}: {e}"[:200]
        rows.append(row)
        print(f"{w.name:12s} torchlean {tl_sps:9.1f} steps/s peak {_fmt_bytes(tl_peak)}"
              f" (+{_fmt_bytes(row['tl_above'])})"
              + (f" | torch {row['th_sps']:9.1f} steps/s peak {_fmt_bytes(row['th_peak'])}"
                 f" (+{_fmt_bytes(row['th_above'])})"
                 f" |dloss| {row['dloss']:.2e}" if row["th_sps"] else f" | {torch_note}")
              + (f" {row['note']}" if row["note"] else ""), flush=True)

    def ratio(a, b):
        return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"

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
                     f"{ratio(r['tl_sps'], r['th_sps'])} | {_fmt_bytes(r['tl_peak'])} | "
                     f"{_fmt_bytes(r['th_peak'])} | {_fmt_bytes(r['tl_above'])} | "
                     f"{_fmt_bytes(r['th_above'])} | {ratio(r['tl_above'], r['th_above'])} | {dl} |")
    lines.append("")
    for r in rows:
        lines.append(f"- {r['name']}: {r['desc']}" + (f" ({r['note']})" if r["note"] else ""))
    lines.append("")
    text = "\n".join(lines)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"\nwrote {out}")
    return rows


if __name__ == "__main__":
    main()
