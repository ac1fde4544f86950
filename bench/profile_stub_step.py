"""Where a training step of bench_stub_torch.py's models goes on the stub: every registry call
timed (torchlean._generated.ops wrapped by a timer), summed by op name, beside the step's wall
time (the rest is the Python layer: tape, autograd bookkeeping, module code).

    python bench/profile_stub_step.py [--models resnet_cifar,vgg_cifar] [--threads 2] [--steps 3]
                                      [--clock wall|cpu]

--clock cpu times this process's CPU time (all threads) instead of the wall clock: at one
thread on a machine other processes load, it still says what the step costs.

Also counts the process's minor page faults per step (fresh pages of new buffers).
"""
from __future__ import annotations

import argparse
import collections
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet_cifar,vgg_cifar")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--top", type=int, default=14)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    return p.parse_args(argv)


def main():
    a = parse(sys.argv[1:])
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    os.environ.setdefault("TORCHLEAN_BACKEND", "stub")
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    import bench_stub_torch as bst
    bst.ARGS = bst.parse(["--models", a.models])
    import torchlean as tl
    from torchlean._generated import ops
    spent = collections.defaultdict(float)
    count = collections.Counter()
    clock = time.process_time if a.clock == "cpu" else time.perf_counter

    def timed(name, fn):
        def run(*args, **kw):
            t0 = clock()
            try:
                return fn(*args, **kw)
            finally:
                spent[name] += clock() - t0
                count[name] += 1
        return run
    for name in dir(ops):
        fn = getattr(ops, name)
        if callable(fn) and not name.startswith("_") and getattr(fn, "__module__", "") == ops.__name__:
            setattr(ops, name, timed(name, fn))
    for w in bst.example_workloads([m for m in a.models.split(",") if m]):
        if getattr(w, "from_bench_models", False):   # the issue's rows: bench_models' trainer
            import bench_models as bm
            inner = bm.tl_trainer(w)[0]
            step = lambda i, inner=inner: inner(i, want_loss=False)   # noqa: E731
        else:
            _, step = bst.tl_step(w, tl)
        step(0)
        step(1)
        spent.clear()
        count.clear()
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = clock()
        for i in range(a.steps):
            step(2 + i)
        wall = (clock() - t0) / a.steps
        faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / a.steps
        native = sum(spent.values()) / a.steps
        print(f"{w.name}: step {wall * 1e3:.1f} ms ({a.clock}), registry calls {native * 1e3:.1f} ms "
              f"({sum(count.values()) / a.steps:.0f} calls), the rest {(wall - native) * 1e3:.1f} ms; "
              f"{faults:.0f} page faults per step; load average {os.getloadavg()[0]:.2f}")
        for name, t in sorted(spent.items(), key=lambda kv: -kv[1])[:a.top]:
            print(f"  {name:36s} {t / a.steps * 1e3:8.1f} ms  {count[name] / a.steps:5.0f} calls")


if __name__ == "__main__":
    main()
