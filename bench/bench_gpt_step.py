"""One GPT-2-width training step, torchlean vs PyTorch eager, with and without torchlean's
fused ops (cross_entropy_rows, linear_gelu, linear_residual; issue 24).

    python bench/bench_gpt_step.py [--steps N] [--repeats R] [--quick] [--out FILE]

The model is bench_models.py's pre-norm LM at d=768, 12 heads, 6 layers, T=512, vocab 8192,
batch 8 (causal attention, GELU tanh form, AdamW), both sides from the same initial weights on
the same batches, TF32 off. Each row is the median step time of `repeats` runs of `steps`
steps after warm-up, every run closed by a device synchronisation (sidebyside.measure), and
the peak memory of the timed steps (each allocator's own counter).
Rows: torchlean default mode with the fused ops (the default), without them
(torchlean.nn.fused.enabled = False: log_softmax + gather, linear then gelu, linear then
add), the attention
variants (TORCHLEAN_ATTN_BWD=onepass: the one-pass backward instead of the dQ and dK/dV
kernels; =onepass64: its 64-query tiles; TORCHLEAN_ATTN_FWD_KEYS=32), deterministic, exact, and torch.
--quick shrinks the model to toy sizes (a CPU smoke run). Prints a markdown table."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

from bench_models import lm, tl_trainer, torch_trainer  # noqa: E402
from sidebyside import TorchSide, measure, torchlean_hooks  # noqa: E402

FULL = dict(vocab=8192, d=768, heads=12, layers=6, T=512, batch=8)
QUICK = dict(vocab=37, d=16, heads=2, layers=2, T=8, batch=2)


def _run(tl, w, timing, use_fused=True, mode=None, env=None):
    """Median seconds per step of torchlean with the fused ops on/off in one mode, with the
    environment variables env set for the run (variants the CUDA library reads per call)."""
    from torchlean.nn import fused
    sync, reset, peak = torchlean_hooks(tl)
    fused.enabled = use_fused
    switch = {"det": tl.set_deterministic, "exact": tl.set_exact}.get(mode)
    if switch:
        switch(True)
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        step, _ = tl_trainer(w)
        r = measure(step, sync, reset, peak, **timing)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        fused.enabled = True
        if switch:
            switch(False)
            tl.set_deterministic(False)
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    a = ap.parse_args(argv)
    import torchlean as tl
    cfg = QUICK if a.quick else FULL
    w = lm(dict(cfg), np.random.default_rng(0))
    timing = dict(warmup=a.warmup, repeats=a.repeats, steps=a.steps)
    side = TorchSide(tl.backend(), a.no_torch)
    rows = [("torchlean default, fused ops", _run(tl, w, timing)),
            ("torchlean default, unfused ops", _run(tl, w, timing, use_fused=False)),
            ("torchlean default, fused, one-pass attention backward",
             _run(tl, w, timing, env={"TORCHLEAN_ATTN_BWD": "onepass"})),
            ("torchlean default, fused, one-pass backward with 64-query tiles",
             _run(tl, w, timing, env={"TORCHLEAN_ATTN_BWD": "onepass64"})),
            ("torchlean default, fused, 32-key attention forward tiles",
             _run(tl, w, timing, env={"TORCHLEAN_ATTN_FWD_KEYS": "32"})),
            ("torchlean deterministic, fused", _run(tl, w, timing, mode="det")),
            ("torchlean exact, fused", _run(tl, w, timing, mode="exact"))]
    torch_ms = None
    if side.dev is not None:
        step, state = tl_trainer(w)
        del step
        r = measure(torch_trainer(w, side, state), side.sync, side.reset_peak, side.peak, **timing)
        rows.append((f"torch eager ({side.note}, TF32 off)", r))
        torch_ms = r["step_s"] * 1e3
    lines = [f"GPT step: d={cfg['d']} heads={cfg['heads']} layers={cfg['layers']} T={cfg['T']} "
             f"vocab={cfg['vocab']} batch={cfg['batch']}, AdamW; backend {tl.backend()}, "
             f"{side.device_name}; median of {a.repeats} runs of {a.steps} steps after "
             f"{a.warmup} warm-up steps", "",
             "| run | ms/step | vs torch | peak MiB | first loss |", "|---|---:|---:|---:|---:|"]
    for name, r in rows:
        ms = r["step_s"] * 1e3
        vs = f"{ms / torch_ms:.2f}x" if torch_ms else "n/a"
        pk = "n/a" if r.get("peak") is None else f"{r['peak'] / 2**20:.1f}"
        lines.append(f"| {name} | {ms:.2f} | {vs} | {pk} | {r['first_loss']:.5f} |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
