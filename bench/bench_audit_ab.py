"""Two versions of the recorder (torchlean.audit) timed in one process: this checkout's and the
one of another checkout (--base, e.g. a `git worktree` of main), on an example's training step.

    python3 bench/bench_audit_ab.py --base ../main-tree --model mlp_digits --threads 1
    TORCHLEAN_BACKEND=cuda python3 bench/bench_audit_ab.py --base ../main-tree --clock wall

On a machine shared with other jobs, two processes timed one after the other see different
loads; here blocks of --block steps without recording, with the base recorder and with this
one alternate in one process (in an order that turns each round), so a load change falls on all
three. Each recorder writes one long record (to a temporary directory, deleted), flushing where
its digest ring fills, as a real run does. Reported: the median step of each kind (CPU time by
default, steadier on a shared machine, or --clock wall; the first step of each block left out)
and the recorded medians against the plain one, with the means (which carry the record lines
written at each flush) in brackets.

The base recorder is loaded from the other tree's torchlean/audit files (recorder, digests,
recordfile) over this checkout's tape; when this tape's hook signature differs from the one
the base recorder takes, an adapter of one extra call per op bridges them (it charges the
base a fraction of a microsecond per op).
"""
import argparse
import importlib.util
import inspect
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_audit import MODELS  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--base", required=True, help="the other checkout's root")
    p.add_argument("--model", nargs="+", default=["mlp_digits", "digits_cnn"],
                   choices=list(MODELS), help="bench_audit.py's MODELS")
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS (default 1)")
    p.add_argument("--rounds", type=int, default=30, help="blocks of each kind (default 30)")
    p.add_argument("--block", type=int, default=20, help="steps per block (default 20)")
    p.add_argument("--mode", choices=["exact", "default"], default="exact")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="process CPU time (default; steadier on a shared machine) or wall time "
                        "(on CUDA, where the host waits for the device)")
    return p.parse_args(argv)


def load_base(base: Path):
    """The base tree's Recorder class, its modules loaded under the names its imports use and
    this checkout's modules put back afterwards."""
    import torchlean.audit  # noqa: F401 - this checkout's modules, put back below
    names = ["torchlean.audit.digests", "torchlean.audit.recordfile", "torchlean.audit.recorder"]
    saved = {n: sys.modules.get(n) for n in names}
    try:
        for n in names:
            path = base / (n.replace(".", "/") + ".py")
            spec = importlib.util.spec_from_file_location(n, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[n] = mod
            spec.loader.exec_module(mod)
        return sys.modules["torchlean.audit.recorder"].Recorder
    finally:
        for n, m in saved.items():
            sys.modules[n] = m


def adapted(cls, new_cls):
    """cls, taking this tape's op hook when its own signature is the former
    op(tape, i, name, out, parents)."""
    if (list(inspect.signature(cls.op).parameters)
            == list(inspect.signature(new_cls.op).parameters)):
        return cls
    base_op = cls.op

    class Adapted(cls):
        def op(self, tape, i, node):
            return base_op(self, tape, i, node.name, node.value, node.parents)
    return Adapted


def measure(name, base_cls, rounds, block, clock=time.process_time):
    import torchlean as tl
    from torchlean import tape as _tape
    from torchlean.audit.recorder import Recorder
    from torchlean.optim.hooks import register_optimizer_step_post_hook
    from bench_audit import trainer
    step = trainer(name)
    for i in range(5):
        step(i)
    times = {"plain": [], "base": [], "this": []}
    with tempfile.TemporaryDirectory() as d:
        recs = {"base": adapted(base_cls, Recorder)(os.path.join(d, "base.tlaudit"), "ab"),
                "this": Recorder(os.path.join(d, "this.tlaudit"), "ab")}
        kinds = ["plain", "base", "this"]
        for r in range(rounds):
            # the order turns each round: a kind always run right after another would carry
            # what that one leaves behind (its garbage, a cold cache) in every block
            for kind in kinds[r % 3:] + kinds[:r % 3]:
                rec = recs.get(kind)
                handle = None
                if rec is not None:
                    handle = register_optimizer_step_post_hook(rec.optimizer_step)
                    _tape.AUDIT = rec
                try:
                    for i in range(block):
                        c0 = clock()
                        step(i)
                        tl.synchronize()
                        c1 = clock()
                        if i:
                            times[kind].append(c1 - c0)
                finally:
                    _tape.AUDIT = None
                    if handle is not None:
                        handle.remove()
        for rec in recs.values():
            rec.close()
    return times


def main(argv=None) -> int:
    a = parse_args(argv)
    os.environ.setdefault("TORCHLEAN_BACKEND", "stub")
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "examples"))
    import torchlean as tl
    tl.set_exact(a.mode == "exact")
    base_cls = load_base(Path(a.base).resolve())
    med, mean = statistics.median, statistics.fmean
    for name in a.model:
        clock = time.process_time if a.clock == "cpu" else time.perf_counter
        t = measure(name, base_cls, a.rounds, a.block, clock)
        mp, np_ = med(t["plain"]), mean(t["plain"])
        cells = []
        for kind in ("base", "this"):
            cells.append(f"{kind} {med(t[kind]) * 1e3:.3f} ms {(med(t[kind]) / mp - 1) * 100:+.1f}% "
                         f"({(mean(t[kind]) / np_ - 1) * 100:+.1f}%)")
        print(f"{name} ({tl.backend()}, OMP_NUM_THREADS={a.threads}, {a.rounds} x {a.block}, "
              f"{a.clock} time): "
              f"plain {mp * 1e3:.3f} ms; " + "; ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
