"""Shared command line and progress helpers for the examples."""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parser(desc: str, steps: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=desc)
    p.add_argument("--backend", choices=["auto", "stub", "cuda"], default=None)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--save", default=None, help="write final weights (safetensors)")
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
    return tl


def progress(n: int, desc: str):
    try:
        from tqdm import tqdm
        return tqdm(range(n), desc=desc, leave=False)
    except ImportError:
        return range(n)
