"""What each part of recording costs a training step, on the stub: recorders that do part of the
work, timed in one process against plain steps (blocks alternating in an order that turns each
round; process CPU time, median step).

    OMP_NUM_THREADS=1 python3 bench/probes/audit_floor.py --model mlp_digits [--rounds 30]

Kinds (each added to the plain step):
- full: torchlean.audit's recorder (records and digests);
- digests: the values the recorder digests (op outputs, VJP contributions, the optimizer
  step's parameters and state; not the leaves, the seed, nor gradients it digests again)
  digested as the stub recorder does (one native call per op, per VJP, per step), but no
  record made: a floor for recording with these digests;
- calls: the same hooks and native calls, each digesting a 1-element buffer instead (the calls'
  cost without the digest kernels' work);
- null: the same hooks, each native call replaced by a trivial one (tl_buf_release(NULL));
- python: the same hooks without any native call;
- hooks: hooks that only run the VJP.
Nothing is written but temporary records, deleted at exit.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples"), str(ROOT / "bench")]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", nargs="+", default=["mlp_digits"])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--block", type=int, default=20)
    a = p.parse_args(argv)
    os.environ.setdefault("TORCHLEAN_BACKEND", "stub")
    import numpy as np
    import torchlean as tl
    from torchlean import tape as _tape
    from torchlean.audit.recorder import Recorder
    from torchlean.buffer import AnyBuffer
    from torchlean.optim.hooks import register_optimizer_step_post_hook
    from torchlean._loader import ffi, lib
    import bench_audit
    if tl.backend() != "stub":
        raise SystemExit("audit_floor.py: the stub's digests at once (TORCHLEAN_BACKEND=stub)")
    tl.set_exact(True)
    one = AnyBuffer.from_numpy(np.ones(1, np.float32))

    class Digests(Recorder):
        """Digests what the recorder digests, as it does, and makes no record."""
        def op(self, tape, i, node):
            self.add(node.value)

        def vjp(self, tape, i, node, cot, needs):
            contribs = node.vjp(cot, needs, node.saved)
            hs = [c.handle for c in contribs if c is not None]
            if hs:
                self.batch.digest_handles(hs)
            return contribs

        def optimizer_step(self, opt, args, kwargs):
            hs = []
            for q in opt.params:
                st = opt.state.get(id(q))
                for k in sorted(st or ()):
                    if isinstance(st[k], AnyBuffer):
                        hs.append(st[k].handle)
                hs.append(q._buf.handle)
            self.batch.digest_handles(hs)
            self.batch.used = 0          # (nothing reads the digests back)

    def variant(kind):
        class V(Digests):
            def __init__(self, *args):
                super().__init__(*args)
                b = self.batch
                real_add, real_dh = b.add_now, b.digest_handles
                rel, null = lib.tl_buf_release, ffi.NULL

                def number(n):
                    d = b.base
                    b.base = d + n
                    if b.used > 4000:
                        b.used = 0
                    return d

                if kind == "calls":
                    def add(value):
                        number(0)
                        return real_add(one)

                    def dh(hs):
                        number(0)
                        return real_dh([one.handle] * len(hs))
                elif kind == "null":
                    def add(value):
                        rel(null)
                        return number(1)

                    def dh(hs):
                        rel(null)
                        return number(len(hs))
                else:
                    def add(value):
                        return number(1)

                    def dh(hs):
                        return number(len(hs))
                self.add = b.add = add
                b.digest_handles = dh
        return V

    class Hooks(Recorder):
        def op(self, tape, i, node):
            pass

        def vjp(self, tape, i, node, cot, needs):
            return node.vjp(cot, needs, node.saved)

        def optimizer_step(self, opt, args, kwargs):
            pass

    d = tempfile.mkdtemp()
    try:
        for name in a.model:
            step = bench_audit.trainer(name)
            for i in range(5):
                step(i)
            recs = {"full": Recorder(f"{d}/full", "floor"), "digests": Digests(f"{d}/d", "floor"),
                    "calls": variant("calls")(f"{d}/c", "floor"),
                    "null": variant("null")(f"{d}/n", "floor"),
                    "python": variant("python")(f"{d}/p", "floor"), "hooks": Hooks(f"{d}/h", "floor")}
            kinds = ["plain", *recs]
            times = {k: [] for k in kinds}
            for r in range(a.rounds):
                for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
                    rec, handle = recs.get(kind), None
                    if rec is not None:
                        handle = register_optimizer_step_post_hook(rec.optimizer_step)
                        _tape.AUDIT = rec
                    try:
                        for i in range(a.block):
                            c0 = time.process_time()
                            step(i)
                            c1 = time.process_time()
                            if i:
                                times[kind].append(c1 - c0)
                    finally:
                        _tape.AUDIT = None
                        if handle is not None:
                            handle.remove()
            med = statistics.median
            base = med(times["plain"])
            print(f"{name} (stub, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '-')}, "
                  f"{a.rounds} x {a.block}, CPU time): plain {base * 1e6:.0f} us; "
                  + ", ".join(f"{k} {(med(times[k]) - base) * 1e6:+.0f} us" for k in recs),
                  flush=True)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
