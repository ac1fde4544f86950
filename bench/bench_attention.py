"""Default-mode CUDA attention against torch SDPA: time and peak memory, per backward variant.

Run on a GPU machine after `make cuda`:
    TORCHLEAN_BACKEND=cuda python3 bench/bench_attention.py [--reps 20] [--out FILE]
Two tables, float32, TF32 off on the torch side:
  * the core (ops.attention + ops.attention_backward on (B*H, n, hd)) against
    F.scaled_dot_product_attention forward + backward, kernel time by CUDA events (medians of
    --reps calls after warm-up, each side on its own stream);
  * multi_head_attention with its four projections, one tape step (forward + backward) against
    the same computation in torch, and each side's peak memory above what was live before the
    step (torchlean's allocator counter, torch's max_memory_allocated).
Each torchlean column is one backward variant, chosen by TORCHLEAN_ATTN_BWD (read per call):
`two` (the dQ kernel and the dK/dV kernel, the default), `onepass` (attn_bwd_onepass with
32-query tiles: dQ shares summed in a fixed order) and `onepass64` (64-query tiles where the
head dim is at most 64). Every variant's outputs are checked against torch's (and run
twice, bit for bit) before they are timed.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torchlean as tl  # noqa: E402
from torchlean._generated import ops  # noqa: E402
from bench_attention_exact import Events, release  # noqa: E402
from cuda_timing import gpu_name, torch_median_ms  # noqa: E402

VARIANTS = ["two", "onepass", "onepass64"]
SHAPES = [  # (label, B, H, n, hd, causal)
    ("hd64 n1024", 8, 8, 1024, 64, False),
    ("hd64 n1024 causal", 8, 8, 1024, 64, True),
    ("hd64 n512 H12 causal (GPT width)", 8, 12, 512, 64, True),
    ("hd128 n2048", 4, 16, 2048, 128, False),
    ("hd128 n2048 causal", 4, 16, 2048, 128, True),
]


def set_variant(v):
    os.environ["TORCHLEAN_ATTN_BWD"] = v


def core_tl(ev, q, k, v, g, causal, reps):
    """forward ms, backward ms, and the outputs (o, lse, dq, dk, dv) as numpy"""
    fwd = ops.attention(q, k, v, causal=causal)
    grads = ops.attention_backward(g, q, k, v, *fwd, causal=causal)
    again = ops.attention_backward(g, q, k, v, *fwd, causal=causal)
    outs = [a.to_numpy() for a in list(fwd) + list(grads)]
    same = all(np.array_equal(a.to_numpy().view(np.uint32), b.to_numpy().view(np.uint32))
               for a, b in zip(grads, again))
    release(list(grads) + list(again))
    f_ms = ev.time_ms(lambda: release(ops.attention(q, k, v, causal=causal)), reps)
    b_ms = ev.time_ms(lambda: release(ops.attention_backward(g, q, k, v, *fwd, causal=causal)),
                      reps)
    release(fwd)
    return f_ms, b_ms, outs, same


def core_torch(torch, arrays, B, H, n, hd, causal, reps):
    F = torch.nn.functional
    q, k, v, g = (torch.tensor(a.reshape(B, H, n, hd), device="cuda", requires_grad=True)
                  for a in arrays)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    dq, dk, dv = torch.autograd.grad(y, (q, k, v), g.detach())
    ref = [t.detach().reshape(B * H, n, hd).cpu().numpy() for t in (y, dq, dk, dv)]

    def step():
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        y.backward(g.detach())
    fwd = torch_median_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                          reps)
    return fwd, torch_median_ms(torch, step, reps), ref


def worst_rel(got, want):
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def mha_tl(ev, x, Ws, g, H, causal, reps):
    """ms and peak bytes above the live bytes of one multi_head_attention tape step"""
    kw = dict(num_heads=H, use_flash=True, causal=causal)

    def step():
        t = tl.Tape()
        ids = [t.leaf(w) for w in Ws] + [t.leaf(x)]
        out = t.multi_head_attention(*ids, **kw)
        release(list(t.backward(out, seed=g, wrt=ids).values()))
        t.release()
    step()
    tl.synchronize()
    live = tl.memory_stats()["live_bytes"]
    tl.reset_peak_memory_stats()
    step()
    tl.synchronize()
    peak = tl.memory_stats()["peak_bytes"] - live
    return ev.time_ms(step, reps), peak


def mha_torch(torch, xa, Wa, ga, B, H, n, hd, causal, reps):
    F = torch.nn.functional
    d = H * hd
    xt = torch.tensor(xa, device="cuda", requires_grad=True)
    Ws = [torch.tensor(w, device="cuda", requires_grad=True) for w in Wa]
    gt = torch.tensor(ga, device="cuda")

    def step():
        q, k, v = (xt @ Ws[i] for i in range(3))
        q, k, v = (z.view(B, n, H, hd).transpose(1, 2) for z in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        (o.transpose(1, 2).reshape(B, n, d) @ Ws[3]).backward(gt)
        xt.grad = None
        for w in Ws:
            w.grad = None
    step()
    torch.cuda.synchronize()
    live = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - live
    return torch_median_ms(torch, step, reps), peak


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", default=None)
    p.add_argument("--shapes", default=None, help="comma-separated indices into SHAPES")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated backward variants")
    args = p.parse_args()
    variants = args.variants.split(",")
    assert tl.backend() == "cuda", "run with TORCHLEAN_BACKEND=cuda on a GPU machine"
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tl.set_exact(False)
    tl.set_deterministic(False)
    ev = Events()
    shapes = SHAPES if args.shapes is None else [SHAPES[int(i)] for i in args.shapes.split(",")]
    head = [f"Attention, float32, default mode, {gpu_name()}, torch {torch.__version__} "
            f"(TF32 off); CUDA events, median of {args.reps} after warm-up; ms.", ""]
    core = ["Core (no projections): forward + backward against F.scaled_dot_product_attention.",
            "", "| shape | torch fwd | torch fwd+bwd | " +
            " | ".join(f"{v} fwd | {v} bwd | {v} / torch | {v} max rel err | {v} bits stable"
                       for v in variants) + " |",
            "|---|---:|---:|" + "---:|---:|---:|---:|---:|" * len(variants)]
    mha = ["", "multi_head_attention with projections, one forward + backward step; peak memory "
           "above the live bytes before the step.", "",
           "| shape | torch ms | torch peak MiB | " +
           " | ".join(f"{v} ms | {v} / torch | {v} peak MiB | {v} peak / torch" for v in variants)
           + " |", "|---|---:|---:|" + "---:|---:|---:|---:|" * len(variants)]
    rng = np.random.default_rng(0)
    for label, B, H, n, hd, causal in shapes:
        arrays = [rng.standard_normal((B * H, n, hd)).astype(np.float32) for _ in range(4)]
        tf, tfb, ref = core_torch(torch, arrays, B, H, n, hd, causal, args.reps)
        bufs = [tl.AnyBuffer.from_numpy(a) for a in arrays]
        cells = [label, f"{tf:.3f}", f"{tfb:.3f}"]
        for var in variants:
            set_variant(var)
            f_ms, b_ms, outs, same = core_tl(ev, *bufs, causal, args.reps)
            err = max(worst_rel(outs[i].reshape(ref[j].shape), ref[j])
                      for i, j in ((0, 0), (2, 1), (3, 2), (4, 3)))
            cells += [f"{f_ms:.3f}", f"{b_ms:.3f}", f"{(f_ms + b_ms) / tfb:.2f}", f"{err:.1e}",
                      "yes" if same else "**NO**"]
        release(bufs)
        core.append("| " + " | ".join(cells) + " |")
        print(core[-1], flush=True)
        d = H * hd
        xa = rng.uniform(-1, 1, (B, n, d)).astype(np.float32)
        Wa = [rng.uniform(-.05, .05, (d, d)).astype(np.float32) for _ in range(4)]
        ga = rng.uniform(-1, 1, (B, n, d)).astype(np.float32)
        t_ms, t_peak = mha_torch(torch, xa, Wa, ga, B, H, n, hd, causal, args.reps)
        torch.cuda.empty_cache()
        x, g = tl.AnyBuffer.from_numpy(xa), tl.AnyBuffer.from_numpy(ga)
        Ws = [tl.AnyBuffer.from_numpy(w) for w in Wa]
        cells = [label, f"{t_ms:.3f}", f"{t_peak / 2**20:.1f}"]
        for var in variants:
            set_variant(var)
            ms, peak = mha_tl(ev, x, Ws, g, H, causal, args.reps)
            cells += [f"{ms:.3f}", f"{ms / t_ms:.2f}", f"{peak / 2**20:.1f}",
                      f"{peak / max(t_peak, 1):.2f}"]
        release([x, g] + Ws)
        mha.append("| " + " | ".join(cells) + " |")
        print(mha[-1], flush=True)
    os.environ.pop("TORCHLEAN_ATTN_BWD", None)
    text = "\n".join(head + core + mha) + "\n"
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
