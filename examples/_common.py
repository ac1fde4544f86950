"""Shared command line, progress and summary helpers for the examples.

Every example takes --backend, --steps, --seed, --deterministic, --exact, --accumulate and --save,
shows a tqdm bar and ends with one `summary:` line (key=value pairs) that tests and scripts parse.
Launched under `mpirun -n W` (or srun) an example trains data-parallel: see DataParallel.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parser(desc: str, steps: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=desc)
    p.add_argument("--backend", choices=["auto", "stub", "cuda"], default=None,
                   help="native backend (default: TORCHLEAN_BACKEND or auto)")
    p.add_argument("--steps", type=int, default=steps, help="optimizer steps")
    p.add_argument("--seed", type=int, default=0, help="seeds initialisation, batches, dropout")
    p.add_argument("--deterministic", action="store_true",
                   help="fixed-order reductions: bit-identical runs on CUDA too")
    p.add_argument("--accumulate", type=int, default=1, metavar="K",
                   help="micro-batches per optimizer step (gradient accumulation); under "
                        "mpirun -n W each rank splits its shard of the batch into K")
    p.add_argument("--exact", action="store_true",
                   help="exact mode (implies --deterministic): the canonical arithmetic, meant "
                        "to give the same bits on the stub and on CUDA")
    p.add_argument("--save", default=None, help="write final weights (safetensors)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def graph_option(p: argparse.ArgumentParser) -> None:
    """--graph: the examples whose step loop can be captured (README "Whole-step capture")."""
    p.add_argument("--graph", action="store_true",
                   help="capture the training step once and replay it as one CUDA graph "
                        "(torchlean.cuda.graph_step; the stub runs it eagerly); one process, "
                        "no --accumulate")


def graph_step_or_none(args, dp, fn):
    """graph_step(fn) under --graph (one process, no accumulation), else None."""
    if not getattr(args, "graph", False):
        return None
    if dp.world > 1 or dp.k > 1:
        raise SystemExit("--graph trains in one process without --accumulate")
    from torchlean.cuda import graph_step
    return graph_step(fn)


def setup(args):
    """Select the backend before torchlean is imported, then seed and set determinism."""
    if args.backend:
        os.environ["TORCHLEAN_BACKEND"] = args.backend
    import torchlean as tl
    from torchlean.session import manual_seed
    manual_seed(args.seed)
    if args.deterministic:
        tl.set_deterministic(True)
    if args.exact:
        tl.set_exact(True)
    return tl


class DataParallel:
    """--accumulate K and mpirun -n W for the examples' training loops.

    Every rank draws the same global batch and splits it into W * K micro-batches
    (np.array_split); rank r runs micro-batches r, W + r, 2W + r, ...: its j-th is global
    micro-batch j * W + r, the order in which DistributedDataParallel's BatchNorm folds the
    ranks' statistics. Each micro-batch runs inside torchlean.random.micro_batch(step, index),
    so its dropout masks are those one process draws for it with --accumulate W*K. The model is
    wrapped in DistributedDataParallel(reduce_op="sum") when W > 1; each micro-batch loss is
    scaled by 1/(W*K) and all but the last run under no_sync, so the step uses the mean of the
    W * K micro-batch losses' gradients, and in exact mode its bits are those of one process
    with --accumulate W*K for any W and K. A plain run is W = 1, K = 1. Only rank 0 writes to
    stdout.
    `step` counts the optimizer steps (set it when resuming)."""

    def __init__(self, args):
        import torchlean.distributed as dist
        dist.init()
        self.rank, self.world, self.k = dist.rank(), dist.world_size(), args.accumulate
        self.step = 0
        if self.k < 1:
            raise SystemExit(f"--accumulate must be >= 1, got {self.k}")
        if self.rank > 0:   # one summary line and one progress bar: rank 0's
            sys.stdout = open(os.devnull, "w")

    def wrap(self, model):
        if self.world == 1:
            return model
        from torchlean.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model, reduce_op="sum")

    def micro_batches(self, model, *arrays):
        """Yield (this rank's micro-batch of each array, context to run it in) for one step."""
        import numpy as np
        n, total = len(arrays[0]), self.world * self.k
        if n < total:
            raise SystemExit(f"a global batch of {n} cannot feed {self.world} ranks x "
                             f"{self.k} micro-batches")
        parts = [np.array_split(a, total) for a in arrays]
        for j in range(self.k):
            index = j * self.world + self.rank
            quiet = j < self.k - 1 and hasattr(model, "no_sync")
            yield tuple(p[index] for p in parts), self._context(model, index, quiet)
        self.step += 1

    @contextlib.contextmanager
    def _context(self, model, index, quiet):
        from torchlean import random
        with random.micro_batch(self.step, index), (
                model.no_sync() if quiet else contextlib.nullcontext()):
            yield

    def backward(self, loss):
        n = self.world * self.k
        (loss * (1.0 / n) if n > 1 else loss).backward()


class _NoBar:
    """Stand-in when tqdm is missing or the bar is disabled."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def set_postfix(self, **kw):
        pass


def _rank() -> int:
    import torchlean.distributed as dist
    return dist.rank() if dist.is_initialized() else 0


def progress(n: int, desc: str, disable: bool = False):
    """A tqdm bar over range(n) (cleared when done) on rank 0; .set_postfix(loss=...) shows
    the loss."""
    if disable or _rank() > 0:
        return _NoBar(n)
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar(n)
    return tqdm(range(n), desc=desc, leave=False, dynamic_ncols=True)


def summary(example: str, tl, **fields) -> str:
    """Print the final `summary:` line (rank 0 only): example, backend, deterministic and exact
    flags, then fields."""
    parts = [f"example={example}", f"backend={tl.backend()}",
             f"deterministic={int(tl.is_deterministic())}", f"exact={int(tl.is_exact())}"]
    for k, v in fields.items():
        parts.append(f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}")
    line = "summary: " + " ".join(parts)
    if _rank() == 0:
        print(line, flush=True)
    return line
