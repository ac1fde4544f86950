"""The layers of the CIFAR models one by one: torchlean's stub beside PyTorch CPU.

    python bench/bench_stub_layers.py [--threads 2] [--rounds 5] [--reps 3] [--layers conv,bn,...]
                                      [--out bench/results/stub-speed.md]

Each row is one layer at a shape the VGG-style and ResNet-style CIFAR models of
bench_models.py run at batch 128 (and the LM's attention), with the same weights and input on
both sides (torchlean's module state copied into the torch twin). Timed per side, in
alternating blocks of --reps calls, --rounds times, medians:
  fwd      the forward alone (no tape kept on the torch side; torchlean records its tape)
  fwd+bwd  forward and backward with the input needing a gradient (backward seeded with a fixed
           output gradient), so the backward computes the input and the weight gradients
  bwd      fwd+bwd minus fwd
torch's convolution backward is also timed as its two halves (aten.convolution_backward with
one output mask at a time: bwd-data, bwd-weight); torchlean's conv backward is one native call
that computes both. The table goes into --out under its own heading (the rest kept).
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
HEADING = "## CIFAR layers against PyTorch CPU"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=3, help="calls per timed block")
    p.add_argument("--layers", default="", help="comma-separated row-name prefixes (all by default)")
    p.add_argument("--out", default=None)
    p.add_argument("--note", default="")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="cpu: this process's CPU time (all threads), which other processes' load "
                   "barely moves: for comparing kernels at --threads 1 on a busy machine")
    return p.parse_args(argv)


ARGS = parse(sys.argv[1:]) if __name__ == "__main__" else None
if ARGS is not None:
    os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
    os.environ.setdefault("TORCHLEAN_BACKEND", "stub")
sys.path.insert(0, str(ROOT))

B = 128
# (name, kind, args): conv (cin, cout, side, stride, k, bias); bn (c, side); pool (c, side);
# linear (fin, fout); attn (batch, heads, T, head_dim, causal)
ROWS = [
    ("conv vgg 3-64 s32", "conv", (3, 64, 32, 1, 3, True)),
    ("conv vgg 64-64 s32", "conv", (64, 64, 32, 1, 3, True)),
    ("conv vgg 64-128 s16", "conv", (64, 128, 16, 1, 3, True)),
    ("conv vgg 128-128 s16", "conv", (128, 128, 16, 1, 3, True)),
    ("conv res 3-32 s32", "conv", (3, 32, 32, 1, 3, False)),
    ("conv res 32-32 s32", "conv", (32, 32, 32, 1, 3, False)),
    ("conv res 32-64 s32/2", "conv", (32, 64, 32, 2, 3, False)),
    ("conv res 64-64 s16", "conv", (64, 64, 16, 1, 3, False)),
    ("conv res 64-128 s16/2", "conv", (64, 128, 16, 2, 3, False)),
    ("conv res 128-128 s8", "conv", (128, 128, 8, 1, 3, False)),
    ("conv res 1x1 32-64 s32/2", "conv", (32, 64, 32, 2, 1, False)),
    ("bn 32 s32", "bn", (32, 32)),
    ("bn 64 s16", "bn", (64, 16)),
    ("bn 128 s8", "bn", (128, 8)),
    ("maxpool 64 s32", "pool", (64, 32)),
    ("maxpool 128 s16", "pool", (128, 16)),
    ("linear 8192-10", "linear", (8192, 10)),
    ("linear 512-512", "linear", (512, 512)),
    ("attn b32 h8 T128 d32 causal", "attn", (32, 8, 128, 32, True)),
]


def build(kind, a, tl, torch, rng):
    """(tl_fn, torch_fn, x, gout, conv_args): fn(x) -> output, from one module pair."""
    from torchlean import nn
    tnn = torch.nn
    if kind == "conv":
        cin, cout, side, stride, k, bias = a
        m = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=bias)
        t = tnn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=bias)
        shape = (B, cin, side, side)
    elif kind == "bn":
        c, side = a
        m, t, shape = nn.BatchNorm2d(c), tnn.BatchNorm2d(c), (B, c, side, side)
    elif kind == "pool":
        c, side = a
        m, t, shape = nn.MaxPool2d(2), tnn.MaxPool2d(2), (B, c, side, side)
    elif kind == "linear":
        fin, fout = a
        m, t, shape = nn.Linear(fin, fout), tnn.Linear(fin, fout), (B, fin)
    else:
        b, h, T, d, causal = a
        F, tF = nn.functional, torch.nn.functional
        shape = (b, h, T, d)
        x = rng.standard_normal((3,) + shape, dtype=np.float32)
        g = rng.standard_normal(shape, dtype=np.float32)
        return ((lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)),
                (lambda q, k, v: tF.scaled_dot_product_attention(q, k, v, is_causal=causal)),
                x, g, None)
    with torch.no_grad():
        for k_, v in m.state_dict().items():
            own = t.state_dict()[k_]
            own.copy_(torch.from_numpy(np.asarray(v)).reshape(own.shape))
    x = rng.standard_normal(shape, dtype=np.float32)
    with torch.no_grad():
        gshape = tuple(t(torch.from_numpy(x)).shape)
    g = rng.standard_normal(gshape, dtype=np.float32)
    conv = (t, a) if kind == "conv" else None
    return (lambda xx: m(xx)), (lambda xx: t(xx)), x, g, conv


def tl_runner(fn, x, g, backward):
    import torchlean as tl
    from torchlean.buffer import AnyBuffer
    from torchlean.session import Session
    attn = x.ndim == 5
    # the input and the output gradient uploaded once, as the PyTorch side's from_numpy
    # tensors are made once, and borrowed by each call's session: a call times the layer, not
    # host copies of its operands (a 128x64x32x32 input is 32 MiB); the forward alone under
    # no_grad, as PyTorch's
    xs = [AnyBuffer.from_numpy(np.ascontiguousarray(v)) for v in (x if attn else [x])]
    gb = AnyBuffer.from_numpy(np.ascontiguousarray(g))

    def run():
        with Session() as s:
            if not backward:
                with tl.no_grad():
                    fn(*[s.borrow(v) for v in xs])
                return
            y = fn(*[s.borrow(v, requires_grad=True) for v in xs])
            y.backward(s.borrow(gb))   # (the stub runs each op as it is called: nothing to wait for)
    return run


def torch_runner(torch, fn, x, g, backward):
    attn = x.ndim == 5
    xs = [torch.from_numpy(v) for v in (x if attn else [x])]
    gt = torch.from_numpy(g)

    def run():
        if not backward:
            with torch.no_grad():
                fn(*xs)
            return
        ins = [v.detach().requires_grad_() for v in xs]
        fn(*ins).backward(gt)
    return run


def torch_conv_halves(torch, conv, x, g):
    t, (cin, cout, side, stride, k, bias) = conv
    xt, gt, w = torch.from_numpy(x), torch.from_numpy(g), t.weight.detach()
    bs = [cout] if bias else None

    def half(mask):
        return lambda: torch.ops.aten.convolution_backward(
            gt, xt, w, bs, [stride, stride], [k // 2, k // 2], [1, 1], False, [0, 0], 1, mask)
    return half([True, False, False]), half([False, True, bias])


def alternate(runs, rounds, reps, clock=time.perf_counter):
    for r in runs.values():
        r()
    times = {n: [] for n in runs}
    for _ in range(rounds):
        for n, r in runs.items():
            t0 = clock()
            for _ in range(reps):
                r()
            times[n].append((clock() - t0) / reps)
    return {n: statistics.median(v) * 1e3 for n, v in times.items()}


def main():
    a = ARGS
    import torch
    import torchlean as tl
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    want = [w.strip() for w in a.layers.split(",") if w.strip()]
    rows = []
    for name, kind, args in ROWS:
        if want and not any(name.startswith(w) for w in want):
            continue
        tfn, thfn, x, g, conv = build(kind, args, tl, torch, rng)
        runs = {"tl_f": tl_runner(tfn, x, g, False), "th_f": torch_runner(torch, thfn, x, g, False),
                "tl_fb": tl_runner(tfn, x, g, True), "th_fb": torch_runner(torch, thfn, x, g, True)}
        if conv is not None:
            runs["th_bd"], runs["th_bw"] = torch_conv_halves(torch, conv, x, g)
        t = alternate(runs, a.rounds, a.reps,
                      time.process_time if a.clock == "cpu" else time.perf_counter)
        tl_b, th_b = t["tl_fb"] - t["tl_f"], t["th_fb"] - t["th_f"]
        rows.append((name, t, tl_b, th_b))
        halves = (f", torch bwd-data {t['th_bd']:.2f} bwd-weight {t['th_bw']:.2f}"
                  if conv is not None else "")
        print(f"{name}: fwd {t['tl_f']:.2f}/{t['th_f']:.2f} ms ({t['tl_f'] / t['th_f']:.2f}x), "
              f"bwd {tl_b:.2f}/{th_b:.2f} ms, fwd+bwd {t['tl_fb'] / t['th_fb']:.2f}x{halves}",
              flush=True)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [HEADING, "",
             f"`python bench/bench_stub_layers.py --threads {a.threads} --rounds {a.rounds} "
             f"--reps {a.reps} --clock {a.clock}` ({when}, load average {os.getloadavg()[0]:.2f} at the end), "
             f"{a.threads} threads each side, batch {B} unless named; ms per call, medians of "
             "alternating blocks. bwd = fwd+bwd - fwd; torch's bwd-data and bwd-weight are its "
             "convolution_backward halves.", "",
             "| layer | stub fwd | torch fwd | fwd ratio | stub bwd | torch bwd (data / weight) "
             "| stub fwd+bwd | torch fwd+bwd | fwd+bwd ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, t, tl_b, th_b in rows:
        halves = f" ({t['th_bd']:.2f} / {t['th_bw']:.2f})" if "th_bd" in t else ""
        lines.append(f"| {name} | {t['tl_f']:.2f} | {t['th_f']:.2f} | {t['tl_f'] / t['th_f']:.2f}x "
                     f"| {tl_b:.2f} | {th_b:.2f}{halves} | {t['tl_fb']:.2f} | {t['th_fb']:.2f} "
                     f"| {t['tl_fb'] / t['th_fb']:.2f}x |")
    if a.note:
        lines += ["", a.note]
    section = "\n".join(lines) + "\n"
    print(section)
    if a.out:
        out = Path(a.out)
        old = out.read_text() if out.exists() else ""
        if HEADING in old:
            head, _, rest = old.partition(HEADING)
            nxt = rest.find("\n## ")
            old = head + (rest[nxt + 1:] if nxt >= 0 else "")
        out.write_text(old.rstrip("\n") + "\n\n" + section if old.strip() else section)


if __name__ == "__main__":
    main()
