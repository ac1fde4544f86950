"""What recording (torchlean.audit) adds to a training step, side by side: an example's model
and optimizer (digits_cnn, mlp_digits, char_transformer's defaults are larger), steps timed
without and with recording, medians reported.

    TORCHLEAN_BACKEND=stub python bench/bench_audit.py [--model digits_cnn] [--steps 96] [--mode exact]

Process CPU time is printed beside wall time: on a machine shared with other jobs it is the
steadier of the two (with OMP_NUM_THREADS=1 it is the step's own work). Alternating keeps a
shared machine's load changes out of the ratio as far as possible:
blocks of BLOCK steps without and with recording alternate (each recorded block is one record,
written to a temporary directory and deleted). The first step of every block is left out of the
medians; a record's first one, which also looks up parameter names once, is printed apart.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

import torchlean as tl  # noqa: E402
from torchlean import audit, nn, optim  # noqa: E402
from torchlean.session import Session, manual_seed  # noqa: E402


BLOCK = 8   # steps per block; blocks without and with recording alternate


def trainer(name: str):
    """step(i): one optimizer step of the example's model on batch i."""
    manual_seed(0)
    rng_data = np.random.default_rng(1)
    if name == "digits_cnn":
        import digits_cnn as ex
        model, make_opt = ex.build_model(16), lambda ps: optim.Adam(ps, lr=3e-3)
    else:
        import mlp_digits as ex
        model, make_opt = ex.build_model(128), lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9)
    # the example's shapes with synthetic values (the GPU machine has no scikit-learn; the
    # values do not change the work)
    X = rng_data.random((1437,) + ((1, 8, 8) if name == "digits_cnn" else (64,)), np.float32)
    y = rng_data.integers(0, 10, 1437)
    opt = make_opt(model.parameters())
    s = Session()
    rng = np.random.default_rng(0)

    def step(i):
        idx = rng.integers(0, len(X), 64)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(s.tensor(X[idx])), y[idx])
        loss.backward()
        opt.step()
        s.step()
    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="digits_cnn", choices=["digits_cnn", "mlp_digits"])
    p.add_argument("--steps", type=int, default=96)
    p.add_argument("--mode", choices=["exact", "default"], default="exact")
    a = p.parse_args()
    tl.set_exact(a.mode == "exact")
    step = trainer(a.model)
    plain, recorded, first = [], [], []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.tlaudit")
        for i in range(5):
            step(i)
        for block in range(a.steps // BLOCK):
            for times, rec in ((plain, False), (recorded, True)):
                if rec:
                    audit.start(path)
                for i in range(BLOCK):
                    t0, c0 = time.perf_counter(), time.process_time()
                    step(i)
                    tl.synchronize()
                    t = (time.perf_counter() - t0, time.process_time() - c0)
                    if i:
                        times.append(t)
                    elif rec:   # a record's first step also looks up parameter names
                        first.append(t)
                if rec:
                    audit.stop()   # the last read-back and the trailer, once per record
    print(f"{a.model} ({tl.backend()}, {'exact' if tl.is_exact() else 'default'} mode, "
          f"medians of {len(plain)} steps each)")
    for k, what in enumerate(("wall", "CPU")):
        mp = statistics.median(t[k] for t in plain)
        mr = statistics.median(t[k] for t in recorded)
        print(f"  {what:4s} time: step {mp * 1e3:.3f} ms, recorded {mr * 1e3:.3f} ms, overhead "
              f"{(mr / mp - 1) * 100:+.1f}%")
    print(f"  a record's first step (once per run: parameter names): "
          f"{statistics.median(t[1] for t in first) * 1e3:.3f} ms CPU")


if __name__ == "__main__":
    main()
