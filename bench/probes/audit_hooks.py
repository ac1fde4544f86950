"""Where recording's cost per step goes, hook by hook (torchlean.audit's recorder): a model of
bench/bench_audit.py trained without and with recording, and in the recorded steps the host
time inside each recorder method and each native call it makes, per step. Any backend.

    python3 bench/probes/audit_hooks.py --model digits_cnn gpt_char [--steps 100]

A method's time includes what it calls: `vjp` holds the VJP itself (so does a plain step:
compare `vjp` with the difference of the two step times, not with zero), `run` the native
digest batch, `optimizer_step` its own queueing and `run`. tl_digest_batch and tl_buf_release
are the native calls of a batch (their host time: a launch on CUDA, the digest itself on the
stub); a D2H read of the ring shows under `_read_ring`.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples"), str(ROOT / "bench")]

METHODS = {"Recorder": ("op", "vjp", "handoff", "optimizer_step", "flush", "_source"),
           "Batch": ("run", "add", "add_all", "_read_ring", "_unpin", "add_now", "digest_handles")}
NATIVE = ("tl_digest_batch", "tl_buf_release", "tl_digest")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", nargs="+", default=["digits_cnn"])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--mode", choices=["exact", "default"], default="exact")
    a = p.parse_args(argv)
    import torchlean as tl
    from torchlean import audit
    from torchlean.audit import digests, recorder
    import bench_audit
    tl.set_exact(a.mode == "exact")
    spent: dict = {}
    clock = time.perf_counter

    def timed(name, fn):
        def call(*args, **kw):
            t0 = clock()
            try:
                return fn(*args, **kw)
            finally:
                spent[name] = spent.get(name, 0.0) + clock() - t0
        return call

    classes = {"Recorder": recorder.Recorder, "Batch": digests.Batch}

    class Lib:   # digests' view of the library, with the batch's native calls timed
        def __init__(self, real):
            self._real = real
            for n in NATIVE:
                setattr(self, n, timed(n, getattr(real, n)))

        def __getattr__(self, name):
            return getattr(self._real, name)

    for name in a.model:
        step = bench_audit.trainer(name)
        for i in range(5):
            step(i)
        tl.synchronize()

        def block(n):
            t0 = clock()
            for i in range(n):
                step(i)
            tl.synchronize()
            return (clock() - t0) / n

        plain = block(a.steps)
        saved = {(c, m): classes[c].__dict__[m] for c, ms in METHODS.items() for m in ms}
        real_lib = digests.lib
        with tempfile.TemporaryDirectory() as d:
            # wrapped before the record starts: it binds some of them (its optimizer hook, add)
            for (c, m), fn in saved.items():   # (a static method stays one)
                setattr(classes[c], m, staticmethod(timed(m, fn.__func__))
                        if isinstance(fn, staticmethod) else timed(m, fn))
            digests.lib = Lib(real_lib)
            try:
                audit.start(os.path.join(d, "r.tlaudit"))
                step(0)
                spent.clear()
                rec = block(a.steps)
            finally:
                for (c, m), fn in saved.items():
                    setattr(classes[c], m, fn)
                digests.lib = real_lib
                audit.stop()
        print(f"{name} ({tl.backend()}, {a.mode}): plain step {plain * 1e6:.0f} us, recorded "
              f"{rec * 1e6:.0f} us (+{(rec - plain) * 1e6:.0f} us, {(rec / plain - 1) * 100:+.1f}%; "
              f"the timers add a little)")
        for k, v in sorted(spent.items(), key=lambda kv: -kv[1]):
            print(f"  {k:18s} {v / a.steps * 1e6:8.1f} us a step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
