"""Peak memory of one backward over pass-through gradients (add, sub, reshape, residual chains).

A gradient that only passes through (add, sub, reshape) is handed on without a copy; the
ownership rule of Tape.backward copies only a payload that is shared and read again. This prints
the peak above the live bytes at backward() for a few such chains of 4 MiB tensors, so two trees
can be compared (bench/results/memory-stub.md):
    TORCHLEAN_BACKEND=stub python3 bench/bench_backward_peaks.py
"""
import argparse

import numpy as np
import torchlean as tl

N = 1 << 20        # 4 MiB per float32 tensor


def peak(build):
    s = tl.Session()
    rng = np.random.default_rng(0)
    ps = [tl.Parameter(rng.normal(size=N).astype(np.float32)) for _ in range(4)]
    loss = build(s, [s.use(p) for p in ps])
    base = tl.memory_stats()["live_bytes"]
    tl.reset_peak_memory_stats()
    try:
        loss.backward()
        out = (tl.memory_stats()["peak_bytes"] - base) / 2**20
    except Exception as e:      # noqa: BLE001
        out = f"raises {type(e).__name__}"
    del loss
    s.step()
    return out


def add_chain(s, p):
    h = p[0]
    for k in range(12):
        h = h + p[1 + k % 3]
    return h.sum()


def residual(s, p):
    h = p[0]
    for k in range(6):
        h = h + (h * p[1 + k % 3]).tanh()
    return h.sum()


def reshape_sub(s, p):
    h = p[0]
    for k in range(6):
        h = (h.reshape(1024, 1024) - p[1 + k % 3].reshape(1024, 1024)).reshape(N)
    return (h * h).sum()


def reuse_after_add(s, p):          # the (a + b) * a
    return ((p[0] + p[1]) * p[0]).sum()


def main(argv=None):
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    for name, f in [("add chain x12", add_chain), ("residual tanh x6", residual),
                    ("reshape/sub x6", reshape_sub), ("(a + b) * a", reuse_after_add)]:
        v = peak(f)
        print(f"{name}: {v if isinstance(v, str) else f'{v:.2f} MiB'}")


if __name__ == "__main__":
    main()
