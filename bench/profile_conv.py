"""Where a convolution's forward+backward step spends its GPU time, torchlean beside cuDNN.

    python bench/profile_conv.py [--rows 0,1,...] [--steps 10] [--transposed]

For each row of bench_cuda.py's CONV_ROWS (and, with --transposed, its CONV_TRANSPOSE_ROWS) it
runs the same torchlean and torch steps as the bench, then traces a few of each with
torch.profiler (CUPTI sees every kernel in the process, torchlean's included) and prints per
step: the wall time, the summed kernel time (their gap is host overhead and idle GPU) and every
kernel with its time. The torch side names the cuDNN algorithm its heuristics picked (implicit
GEMM, Winograd, FFT) through its kernel names. Needs torch with CUDA.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import bench_cuda as bc  # noqa: E402  (sets TORCHLEAN_BACKEND=cuda, TF32 off)
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile as tprofile  # noqa: E402

tl = bc.tl


def _trace(step, steps, sync):
    for _ in range(3):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    wall = (time.perf_counter() - t0) / steps
    with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        sync()
        torch.cuda.synchronize()
    per = defaultdict(lambda: [0.0, 0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            d = per[ev.name[:110]]
            d[0] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
            d[1] += 1
    return wall, per


def _print(label, wall, per, steps):
    total = sum(v[0] for v in per.values()) / steps / 1e3
    print(f"  {label}: wall {wall * 1e3:.3f} ms/step, kernels {total:.3f} ms/step")
    for k, (us, n) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        print(f"    {us / steps / 1e3:8.4f} ms  {n / steps:4.1f}x  {k}")


def profile_row(N, Ci, Co, H, k, st, pd, steps, transposed):
    seed = 9 + N + Ci + Co
    if transposed:
        OH = (H - 1) * st - 2 * pd + k
        wshape, gshape, bshape = (Ci, Co, k, k), (N, Co, OH, OH), (Co,)
    else:
        OH = (H + 2 * pd - k) // st + 1
        wshape, gshape, bshape = (Co, Ci, k, k), (N, Co, OH, OH), (Co,)
    x, xt = bc.both((N, Ci, H, H), seed)
    w, wt = bc.both(wshape, seed + 1, lo=-0.1, hi=0.1)
    bias, bt = bc.both(bshape, seed + 2)
    g, gt = bc.both(gshape, seed + 3)
    for z in (xt, wt, bt):
        z.requires_grad_(True)
    tl_op = "conv_transpose2d" if transposed else "conv2d"
    torch_op = torch.nn.functional.conv_transpose2d if transposed else torch.nn.functional.conv2d

    def tl_step():
        t = tl.Tape()
        ik, ib, ix = t.leaf(w), t.leaf(bias), t.leaf(x)
        out = getattr(t, tl_op)(ik, ib, ix, stride=st, padding=pd)
        bc._release(t.backward(out, seed=g, wrt=[ik, ib, ix]))
        t.release()

    def torch_step():
        y = torch_op(xt, wt, bt, stride=st, padding=pd)
        y.backward(gt)
        xt.grad = wt.grad = bt.grad = None

    name = (f"{tl_op} N{N} {Ci}->{Co} {H}x{H} {k}x{k}" + (f" s{st}" if st != 1 else "")
            + (f" p{pd}" if pd != 1 else ""))
    print(f"\n## {name}")
    for mode in ("default", "deterministic"):
        tl.set_deterministic(mode == "deterministic")
        try:
            wall, per = _trace(tl_step, steps, tl.synchronize)
        finally:
            tl.set_deterministic(False)
        _print(f"torchlean [{mode}]", wall, per, steps)
    wall, per = _trace(torch_step, steps, torch.cuda.synchronize)
    _print("torch (cuDNN)", wall, per, steps)
    bc._release([x, w, bias, g])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", default="", help="indices into CONV_ROWS (default: all)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--transposed", action="store_true", help="also the transposed-conv rows")
    a = p.parse_args()
    assert tl.backend() == "cuda", f"profile_conv needs the CUDA backend, got {tl.backend()}"
    bc.setup()
    pick = [int(i) for i in a.rows.split(",") if i] or range(len(bc.CONV_ROWS))
    for i in pick:
        profile_row(*bc.CONV_ROWS[i], a.steps, False)
    if a.transposed:
        for r in bc.CONV_TRANSPOSE_ROWS:
            profile_row(*r, a.steps, True)


if __name__ == "__main__":
    main()
