"""Pointwise kernels in default and exact mode: median time per call into preallocated outputs.

    TORCHLEAN_BACKEND=cuda python bench/bench_pointwise_exact.py [--n 16777216] [--reps 21]

Elementwise kernels run the canonical tl_math.h functions in both modes on CUDA; a kernel that
stays memory-bound takes about as long as `add` (two reads, one write) or `scale` (one read).
On the stub the machine's other load makes single timings noisy: read medians only.
"""
import argparse
import time

import numpy as np

import torchlean as tl
from torchlean._loader import ffi, lib
from torchlean.buffer import AnyBuffer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=21)
    args = ap.parse_args()
    n, rng = args.n, np.random.default_rng(0)

    def up(a):
        return AnyBuffer.from_numpy(np.asarray(a, np.float32))

    X, P, G = up(rng.uniform(-3, 3, n)), up(rng.uniform(0.1, 3, n)), up(rng.normal(size=n))
    Y, M, V = up(np.zeros(n)), up(np.zeros(n)), up(np.zeros(n))
    side = int(np.sqrt(n))
    B2, Z, Z1 = up(rng.normal(size=(side, side))), up(np.zeros(side)), up(np.zeros(1))
    dims = {k: np.array(v, np.int64) for k, v in
            {"big": [side, side], "col": [side], "row": [side, 1], "one": [1]}.items()}
    ptr = {k: ffi.from_buffer("int64_t[]", v) for k, v in dims.items()}
    h = {"X": X.handle, "P": P.handle, "G": G.handle, "Y": Y.handle, "M": M.handle, "V": V.handle}
    cases = {
        "scale": lambda: lib.tl_scale(h["X"], h["Y"], n, 0.5),
        "add": lambda: lib.tl_add(h["X"], h["G"], h["Y"], n),
        "exp": lambda: lib.tl_exp(h["X"], h["Y"], n),
        "log": lambda: lib.tl_log(h["P"], h["Y"], n),
        "tanh": lambda: lib.tl_tanh(h["X"], h["Y"], n),
        "sigmoid": lambda: lib.tl_sigmoid(h["X"], h["Y"], n),
        "softplus": lambda: lib.tl_softplus(h["X"], h["Y"], n),
        "gelu": lambda: lib.tl_gelu(h["X"], h["Y"], n),
        "gelu_backward": lambda: lib.tl_gelu_backward(h["X"], h["G"], h["Y"], n),
        "safe_log_backward": lambda: lib.tl_safe_log_backward(h["X"], h["G"], h["Y"], n, 1e-6),
        "rand_normal": lambda: lib.tl_rand_normal(h["Y"], n, 7, 0.0, 1.0),
        "adam_step": lambda: lib.tl_adam_step(h["P"], h["G"], h["M"], h["V"], n, 1e-3, 0.9, 0.999,
                                              1e-8, 0.0, 0, 3),
        f"sum_to {side}^2->({side},)": lambda: lib.tl_sum_to(B2.handle, Z.handle, ptr["big"], 2,
                                                             ptr["col"], 1),
        f"sum_to {side}^2->({side},1)": lambda: lib.tl_sum_to(B2.handle, Z.handle, ptr["big"], 2,
                                                              ptr["row"], 2),
        f"sum_to {side}^2->(1,)": lambda: lib.tl_sum_to(B2.handle, Z1.handle, ptr["big"], 2,
                                                        ptr["one"], 1),
    }
    print(f"backend {tl.backend()}, n = {n}, median of {args.reps} calls (ms)")
    print(f"{'kernel':28s} {'default':>9s} {'exact':>9s} {'exact/default':>14s}")
    for name, f in cases.items():
        med = []
        for exact in (False, True):
            tl.set_exact(exact)
            assert f() == 0, name
            tl.synchronize()
            ts = []
            for _ in range(args.reps):
                t = time.perf_counter()
                f()
                tl.synchronize()
                ts.append(time.perf_counter() - t)
            med.append(np.median(ts) * 1e3)
        tl.set_exact(False)
        print(f"{name:28s} {med[0]:9.3f} {med[1]:9.3f} {med[1] / med[0]:14.2f}")


if __name__ == "__main__":
    main()
