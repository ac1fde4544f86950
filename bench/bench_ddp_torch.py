"""PyTorch DistributedDataParallel counterpart of bench/bench_ddp.py: the same two models, batch
per GPU, optimizer, timing and JSON record, launched by torchrun (NCCL, one GPU per process):

    torchrun --standalone --nproc_per_node W bench/bench_ddp_torch.py --model cnn --out R.jsonl

Models cnn, lm (d=256) and gpt (GPT-2 width: 6 layers, d=768, 12 heads, T=512, batch 8).

W = 1 trains the bare model; W > 1 wraps it in torch.nn.parallel.DistributedDataParallel.
FP32 throughout with TF32 off, as torchlean's default GEMMs are strict FP32.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as tnn
import torch.nn.functional as F

V = 256
# (layers, d, heads, T, batch per GPU), as bench/bench_ddp.py
LM_SHAPES = {"lm": (4, 256, 8, 128, 32), "gpt": (6, 768, 12, 512, 8)}


def build_cnn():
    return tnn.Sequential(
        tnn.Conv2d(3, 64, 3, padding=1), tnn.ReLU(), tnn.Conv2d(64, 64, 3, padding=1), tnn.ReLU(),
        tnn.MaxPool2d(2),
        tnn.Conv2d(64, 128, 3, padding=1), tnn.ReLU(), tnn.Conv2d(128, 128, 3, padding=1),
        tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(128 * 8 * 8, 10))


class Block(tnn.Module):
    def __init__(self, D, HEADS, T):
        super().__init__()
        self.D, self.HEADS, self.T = D, HEADS, T
        self.ln1, self.ln2 = tnn.LayerNorm(D), tnn.LayerNorm(D)
        self.wq, self.wk, self.wv, self.wo = (tnn.Linear(D, D, bias=False) for _ in range(4))
        self.ff1, self.ff2 = tnn.Linear(D, 4 * D), tnn.Linear(4 * D, D)

    def forward(self, h):
        B, D, HEADS, T = h.shape[0], self.D, self.HEADS, self.T
        x = self.ln1(h)

        def heads(t):
            return t.view(B, T, HEADS, D // HEADS).transpose(1, 2)
        a = F.scaled_dot_product_attention(heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x)),
                                           is_causal=True)
        h = h + self.wo(a.transpose(1, 2).reshape(B, T, D))
        return h + self.ff2(F.gelu(self.ff1(self.ln2(h)), approximate="tanh"))


class LM(tnn.Module):
    def __init__(self, name):
        super().__init__()
        LAYERS, D, HEADS, T, _ = LM_SHAPES[name]
        self.emb = tnn.Embedding(V, D)
        self.pos = tnn.Parameter(torch.randn(T, D) * 0.02)
        self.blocks = tnn.ModuleList(Block(D, HEADS, T) for _ in range(LAYERS))
        self.lnf, self.head = tnn.LayerNorm(D), tnn.Linear(D, V)

    def forward(self, idx):
        h = self.emb(idx) + self.pos
        for b in self.blocks:
            h = b(h)
        return self.head(self.lnf(h))


def batch(model_name: str, rng):
    if model_name == "cnn":
        return (torch.from_numpy(rng.standard_normal((128, 3, 32, 32), dtype=np.float32)),
                torch.from_numpy(rng.integers(0, 10, 128)))
    _, _, _, T, B = LM_SHAPES[model_name]
    x = rng.integers(0, V, (B, T))
    return torch.from_numpy(x), torch.from_numpy(np.roll(x, -1, axis=1))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", required=True, help="cnn, lm, gpt, or several: cnn,lm")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    if world > 1:
        dist.init_process_group("nccl")
    for name in args.model.split(","):
        if name not in ("cnn", *LM_SHAPES):
            raise SystemExit(f"--model: {name!r} is none of cnn, {', '.join(LM_SHAPES)}")
        run_model(args, name, world, local)
    if world > 1:
        dist.destroy_process_group()


def run_model(args, name: str, world: int, local: int) -> None:
    rank = int(os.environ.get("RANK", "0"))
    dev = torch.device("cuda", local)
    torch.manual_seed(0)
    net = (build_cnn() if name == "cnn" else LM(name)).to(dev)
    model = tnn.parallel.DistributedDataParallel(net, device_ids=[local]) if world > 1 else net
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(rank)
    times = []
    for step in range(args.warmup + args.steps):
        x, y = batch(name, rng)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    t = torch.tensor(times, device=dev, dtype=torch.float64)
    if world > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    slowest = t.cpu().numpy()
    if rank == 0:
        rec = {"impl": "pytorch", "model": name, "mode": "default", "world": world,
               "median_ms": 1e3 * float(np.median(slowest)),
               "p10_ms": 1e3 * float(np.percentile(slowest, 10)),
               "p90_ms": 1e3 * float(np.percentile(slowest, 90)),
               "steps": args.steps, "torch": torch.__version__}
        print(json.dumps(rec), flush=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
