"""Where a captured step's host time per replay goes (issue 34's target: <= 15 us): the
replayed MLP, CNN and LM steps of bench_graph_step.py (float batches on the device), each
native call a replay makes timed on the host (tl_graph_wait_inputs: whether the replays
launched so far read their inputs; tl_graph_stage_int64: an integer input copied into the
pinned staging and range-checked; tl_graph_launch: cudaGraphLaunch; tl_graph_set_rng; and
tl_graph_copy, none since the graph reads its inputs itself), beside the whole call. What is left is graph_step's Python (bench_graph_step.py --python-only
measures it alone). Needs the CUDA backend.

    TORCHLEAN_BACKEND=cuda python3 bench/probes/replay_host.py [--models mlp,cnn,lm]

Per model: median host microseconds per replay over bursts of 10 replays (synchronised between
bursts, so the launch queue never fills), and per native call its count per replay and median
microseconds; also the captured graph's kernel count when the library reports it.
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

TIMED = ("tl_graph_wait_inputs", "tl_graph_stage_int64", "tl_graph_launch", "tl_graph_copy",
         "tl_graph_set_rng")


class _TimedLib:
    """The loaded library with the replay's native calls timed (every other name passes)."""

    def __init__(self, real):
        self._real = real
        self.times = collections.defaultdict(list)
        for name in TIMED:
            setattr(self, name, self._timed(name, getattr(real, name)))

    def _timed(self, name, fn):
        times = self.times[name]

        def call(*a):
            t0 = time.perf_counter()
            try:
                return fn(*a)
            finally:
                times.append(time.perf_counter() - t0)
        return call

    def __getattr__(self, name):
        return getattr(self._real, name)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="mlp,cnn,lm")
    p.add_argument("--bursts", type=int, default=15)
    a = p.parse_args(argv)
    import torchlean as tl
    from torchlean import _loader
    from bench_graph_step import BUILDERS, SIZES, host_us, tl_graph_trainer
    import numpy as np
    if tl.backend() != "cuda":
        print("replay_host.py: needs the CUDA backend (TORCHLEAN_BACKEND=cuda)")
        return 2
    for name in a.models.split(","):
        w = BUILDERS[name](SIZES[name]["full"], np.random.default_rng(0))
        step, g = tl_graph_trainer(w, tl, on_device=True)
        for i in range(5):
            step(i)
        tl.synchronize()
        total = host_us(step, tl.synchronize, bursts=a.bursts)
        real = _loader.lib
        timed = _TimedLib(real)
        _loader.lib = timed
        try:
            calls = 10 * a.bursts
            host_us(step, tl.synchronize, bursts=a.bursts)
        finally:
            _loader.lib = real
        parts = []
        native = 0.0
        for fn in TIMED:
            ts = timed.times.get(fn) or []
            if ts:
                med = statistics.median(ts) * 1e6
                per = len(ts) / calls
                native += med * per
                parts.append(f"{fn} x{per:g} {med:.1f} us")
        print(f"{name}: {total:.1f} us per replay; native {native:.1f} us ({'; '.join(parts)}); "
              f"the rest (Python, checks) {total - native:.1f} us; {g.captures} capture(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
