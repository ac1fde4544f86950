"""Shared command line, progress and summary helpers for the examples.

Every example takes --backend, --steps, --seed, --deterministic, --exact and --save, shows a tqdm bar and
ends with one `summary:` line (key=value pairs) that tests and scripts parse.
"""
from __future__ import annotations

import argparse
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
    p.add_argument("--exact", action="store_true",
                   help="exact mode (implies --deterministic): the canonical arithmetic, meant "
                        "to give the same bits on the stub and on CUDA")
    p.add_argument("--save", default=None, help="write final weights (safetensors)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


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


class _NoBar:
    """Stand-in when tqdm is missing or the bar is disabled."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def set_postfix(self, **kw):
        pass


def progress(n: int, desc: str, disable: bool = False):
    """A tqdm bar over range(n) (cleared when done); .set_postfix(loss=...) shows the loss."""
    if disable:
        return _NoBar(n)
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar(n)
    return tqdm(range(n), desc=desc, leave=False, dynamic_ncols=True)


def summary(example: str, tl, **fields) -> str:
    """Print the final `summary:` line: example, backend, deterministic and exact flags, then
    fields."""
    parts = [f"example={example}", f"backend={tl.backend()}",
             f"deterministic={int(tl.is_deterministic())}", f"exact={int(tl.is_exact())}"]
    for k, v in fields.items():
        parts.append(f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}")
    line = "summary: " + " ".join(parts)
    print(line, flush=True)
    return line
