"""A scaling model of data-parallel training: alpha-beta all-reduce cost fitted per transport,
the measured one-GPU step, and DistributedDataParallel's buckets, giving the step time at any W.

    # 1. all-reduce cost per message size through torchlean's communicator (NCCL on CUDA)
    mpirun -n W python bench/bench_ddp_model.py allreduce --tag nvlink --out A.jsonl
    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 mpirun -n W ... allreduce --tag socket --out A.jsonl
    # 2. fit, predict 8/16/64/256 GPUs, check against the measured W-GPU steps (bench_ddp.py's)
    python bench/bench_ddp_model.py predict --allreduce A.jsonl --steps R.jsonl \\
        [--socket-steps S.jsonl] --out bench/results/ddp-scaling.md

The model. A ring all-reduce of n bytes over W ranks costs t = 2(W-1) alpha + 2(W-1)/W n beta
(NCCL's ring: 2(W-1) steps, each rank sending 2(W-1)/W of the message); alpha and beta are fitted
by least squares on the measured (W, n, t) of each transport. A tree (log-depth) costs
2 ceil(log2 W) alpha + 2 n beta; the cheaper of the two is taken, as NCCL chooses per size.
A cluster is nodes of 8 GPUs on NVLink (the nvlink fit) joined by 400 Gb/s links, one per GPU:
past one node, alpha is the network's (the socket fit: the emulated network, loopback through
NCCL's socket transport, an upper bound for a NIC's latency) and beta the slower of NVLink's and
the link's 1 / (50 GB/s).
The step: forward takes (1 - BACKWARD_SHARE) of the one-GPU step T1, backward the rest, and a
bucket's gradients are final when the backward pass has covered its share of the parameter bytes
(buckets in DistributedDataParallel's order: reverse registration, each up to bucket_cap_mb).
Exact mode sends each chunk of a bucket to the rank that sums it and gathers the sums back: a
ring all-reduce's cost too (exact_cost). Reductions run one after another, each starting when
its bucket is ready and the previous one is done; the optimizer step waits for the last. So
    step(W) = T1 + max(0, end of the last reduction - end of the backward pass).
Host overheads of data parallelism (hooks, the step check) are not in the model: the check
against measured steps shows what they cost.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BACKWARD_SHARE = 2 / 3           # backward ~ twice the forward's work
GPUS_PER_NODE = 8
LINK_BYTES_PER_S = 400e9 / 8     # one 400 Gb/s link per GPU
PREDICT_AT = (8, 16, 64, 256)
SIZES = [1 << k for k in range(12, 27, 2)]     # 4 KiB .. 64 MiB


# ---------------------------------------------------------------------------------- model
def ring_cost(n: float, w: int, alpha: float, beta: float) -> float:
    return 2 * (w - 1) * alpha + 2 * (w - 1) / w * n * beta if w > 1 else 0.0


def tree_cost(n: float, w: int, alpha: float, beta: float) -> float:
    return 2 * math.ceil(math.log2(w)) * alpha + 2 * n * beta if w > 1 else 0.0


def allreduce_cost(n: float, w: int, fit: dict) -> float:
    return min(ring_cost(n, w, fit["alpha"], fit["beta"]), tree_cost(n, w, fit["alpha"],
                                                                    fit["beta"]))


def exact_cost(n: float, w: int, fit: dict) -> float:
    """Exact mode's reduction of n bytes: an all-to-all (each rank sends its W-1 chunks of n/W
    to their owners) and an all-gather of the summed chunks (W-1 ring steps of n/W): the
    bytes and steps of a ring all-reduce."""
    return ring_cost(n, w, fit["alpha"], fit["beta"])


def fit_alpha_beta(points) -> dict:
    """Least squares of t = 2(W-1) alpha + 2(W-1)/W n beta over (W, n, t), W > 1; both >= 0."""
    pts = [(w, n, t) for w, n, t in points if w > 1]
    if not pts:
        raise ValueError("fit_alpha_beta: no measurement with W > 1")
    A = np.array([[2 * (w - 1), 2 * (w - 1) / w * n] for w, n, _ in pts], float)
    y = np.array([t for _, _, t in pts], float)
    # relative error matters at every size: weight each row by 1/t
    wt = 1 / np.maximum(y, 1e-12)
    (a, b), *_ = np.linalg.lstsq(A * wt[:, None], y * wt, rcond=None)
    if a < 0 or b < 0:       # refit the other alone
        if a < 0:
            a, b = 0.0, float(np.sum(A[:, 1] * y * wt ** 2) / np.sum((A[:, 1] * wt) ** 2))
        else:
            a, b = float(np.sum(A[:, 0] * y * wt ** 2) / np.sum((A[:, 0] * wt) ** 2)), 0.0
    return {"alpha": float(a), "beta": float(b), "points": len(pts)}


def cluster_fit(w: int, nvlink: dict, network: dict) -> dict:
    """alpha, beta of W GPUs: one NVLink node, or nodes joined by 400 Gb/s links."""
    if w <= GPUS_PER_NODE:
        return nvlink
    return {"alpha": network["alpha"], "beta": max(nvlink["beta"], 1 / LINK_BYTES_PER_S)}


def buckets_bytes(param_bytes: list[int], cap_mb: float = 25.0,
                  network: bool = False) -> list[int]:
    """DistributedDataParallel's buckets (bytes) for parameters in registration order (network:
    traffic crosses a network, so the first bucket is capped at 1 MB)."""
    out: list[int] = []
    for nb in reversed(param_bytes):
        cap = 1e6 * (min(cap_mb, 1.0) if network and len(out) <= 1 else cap_mb)
        if not out or (out[-1] and out[-1] + nb > cap):
            out.append(0)
        out[-1] += nb
    return out


def step_time(t1: float, buckets: list[int], w: int, fit: dict,
              backward_share: float = BACKWARD_SHARE, exact: bool = False) -> float:
    """Predicted W-GPU step (seconds) from the one-GPU step t1 and the buckets' bytes (exact:
    each bucket reduced by chunks, exact_cost; the rank-order sum is not counted)."""
    cost = exact_cost if exact else allreduce_cost
    if w == 1:
        return t1
    total = float(sum(buckets)) or 1.0
    t_fwd = (1 - backward_share) * t1
    t_bwd_end = t_fwd + backward_share * t1
    done, end = 0.0, 0.0
    for nb in buckets:
        done += nb
        ready = t_fwd + backward_share * t1 * done / total
        end = max(ready, end) + cost(nb, w, fit)
    return t1 + max(0.0, end - t_bwd_end)


# ---------------------------------------------------------------------------------- measure
def allreduce(args) -> None:
    import torchlean as tl
    import torchlean.distributed as dist
    dist.init()
    comm, rank, world = dist.communicator(), dist.rank(), dist.world_size()
    recs = []
    for nbytes in [n for n in SIZES if n <= args.max_bytes]:
        buf = tl.AnyBuffer.from_numpy(np.ones(nbytes // 4, np.float32))
        times = []
        for i in range(args.warmup + args.reps):
            tl.synchronize()
            comm.barrier("bench barrier")
            t0 = time.perf_counter()
            comm.all_reduce([buf], f"bench all_reduce {nbytes} bytes").wait()
            tl.synchronize()
            times.append(time.perf_counter() - t0)
        slowest = comm.allgather_array(np.array(times[args.warmup:]), "bench times").max(axis=0)
        buf.release()
        recs.append({"kind": "allreduce", "tag": args.tag, "world": world, "bytes": nbytes,
                     "seconds": float(np.median(slowest)), "backend": tl.backend(),
                     "comm": comm.name})
    if rank == 0:
        with open(args.out, "a") as f:
            for r in recs:
                print(json.dumps(r), flush=True)
                f.write(json.dumps(r) + "\n")
    dist.destroy()


# ---------------------------------------------------------------------------------- predict
def model_buckets(name: str, network: bool = False) -> list[int]:
    from bench_ddp import build_cnn, build_lm
    net = build_cnn() if name == "cnn" else build_lm(name)
    return buckets_bytes([4 * int(np.prod(p.shape)) for p in net.parameters()
                          if p.requires_grad], network=network)


def _load(path):
    """bench_ddp.py's step records, a configuration's rounds merged (median)."""
    from bench_ddp import load_runs
    return load_runs(path) if path else []


def predict(args) -> None:
    from bench_ddp import MODELS
    ar = [json.loads(line) for line in open(args.allreduce) if line.strip()]
    fits = {}
    for tag in sorted({r["tag"] for r in ar}):
        fits[tag] = fit_alpha_beta([(r["world"], r["bytes"], r["seconds"]) for r in ar
                                    if r["tag"] == tag])
    nvlink = fits.get("nvlink")
    network = fits.get("socket", nvlink)
    steps = {"nvlink": _load(args.steps), "socket": _load(args.socket_steps)}
    lines = ["# Data-parallel scaling model", "",
             "Produced by `bench/bench_ddp_model.py predict` (the model is in its docstring) "
             "from one data-parallel run (bench/device/ddp_final.sh, bench/gpu_ddp_run.sh).", "",
             "## All-reduce fits", "",
             "| transport | alpha (us) | beta (GB/s) | points |", "|---|---|---|---|"]
    for tag, f in fits.items():
        bw = 1 / f["beta"] / 1e9 if f["beta"] > 0 else float("inf")
        lines.append(f"| {tag} | {1e6 * f['alpha']:.1f} | {bw:.1f} | {f['points']} |")
    lines += ["", "## Check against measured steps", "",
              "| model | impl / mode | transport | GPUs | measured (ms) | predicted (ms) | "
              "error |", "|---|---|---|---|---|---|---|"]
    t1s = {}
    for tag, recs in steps.items():
        by = {(r["impl"], r["model"], r["mode"].split(" ")[0], r["world"]): r
              for r in recs if not r.get("variant")}
        for (impl, m, mode, w), r in sorted(by.items()):
            one = by.get((impl, m, mode, 1))
            if tag == "nvlink" and one:
                t1s[(impl, m, mode)] = one["median_ms"] / 1e3
            if w == 1 or one is None or tag not in fits:
                continue
            # (PyTorch's first bucket is always 1 MB; torchlean's where traffic crosses a network)
            net = tag == "socket" or impl == "pytorch"
            pred = step_time(one["median_ms"] / 1e3, model_buckets(m, net), w, fits[tag],
                             exact=mode == "exact")
            lines.append(f"| {m} | {impl} {mode} | {tag} | {w} | {r['median_ms']:.2f} | "
                         f"{1e3 * pred:.2f} | {100 * (pred * 1e3 / r['median_ms'] - 1):+.0f}% |")
    lines += ["", f"## Predicted step time and efficiency ({GPUS_PER_NODE}-GPU NVLink nodes, "
              f"{LINK_BYTES_PER_S * 8 / 1e9:.0f} Gb/s per GPU between nodes)", "",
              "| model | impl / mode | 1 GPU (ms) | " + " | ".join(
                  f"{w} GPUs (ms, eff.)" for w in PREDICT_AT) + " |",
              "|---|---|---|" + "---|" * len(PREDICT_AT)]
    if nvlink is not None:
        for (impl, m, mode), t1 in sorted(t1s.items()):
            cells = []
            for w in PREDICT_AT:
                net = w > GPUS_PER_NODE or impl == "pytorch"
                t = step_time(t1, model_buckets(m, net), w, cluster_fit(w, nvlink, network),
                              exact=mode == "exact")
                cells.append(f"{1e3 * t:.2f} ({100 * t1 / t:.0f}%)")
            lines.append(f"| {MODELS[m]} | {impl} {mode} | {1e3 * t1:.2f} | "
                         + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("allreduce", help="time all-reduces of 4 KiB..64 MiB (under a launcher)")
    a.add_argument("--tag", default="nvlink", help="the transport: nvlink, socket, ...")
    a.add_argument("--warmup", type=int, default=3)
    a.add_argument("--reps", type=int, default=10)
    a.add_argument("--max-bytes", type=int, default=SIZES[-1])
    a.add_argument("--out", required=True, help="JSON lines file to append to")
    q = sub.add_parser("predict", help="fit, predict, check; write the markdown page")
    q.add_argument("--allreduce", required=True, help="JSON lines of the allreduce command")
    q.add_argument("--steps", required=True, help="bench_ddp(_torch).py JSON lines (NVLink)")
    q.add_argument("--socket-steps", default=None, help="the same over the emulated network")
    q.add_argument("--out", default=None)
    args = p.parse_args(argv)
    (allreduce if args.cmd == "allreduce" else predict)(args)


if __name__ == "__main__":
    main()
