"""bench_stub_layers.py's convolution, batchnorm, linear and attention rows on the stub alone, one build against another
(no PyTorch needed): the same layer calls through nn modules and the tape, forward and
forward+backward, in two processes that take turns round by round.

    python bench/stub_layers_ab.py --before DIR [--threads 2] [--rounds 9] [--reps 3]
                                   [--clock wall|cpu] [--layers conv,bn,linear,attn]

DIR holds the other libtorchlean_stub.so (TORCHLEAN_LIB_DIR for the "before" process); "after"
is this checkout's library. Medians of --rounds blocks of --reps calls, ms per call; bwd is
fwd+bwd minus fwd. Load that comes and goes hits both processes alike.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_sides import close, compare, load, serve, spawn_sides  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
B = 128
# (c_in, c_out, image size, stride, kernel size, bias): ResNet-style CIFAR convolutions
CONVS = [("conv res 32-32 s32", (32, 32, 32, 1, 3, False)), ("conv res 32-64 s32/2", (32, 64, 32, 2, 3, False)),
         ("conv res 64-64 s16", (64, 64, 16, 1, 3, False)), ("conv res 128-128 s8", (128, 128, 8, 1, 3, False))]
ROWS = [(name, "conv", a) for name, a in CONVS] + [("bn 32 s32", "bn", (32, 32)), ("bn 64 s16", "bn", (64, 16)), ("bn 128 s8", "bn", (128, 8)),
        ("linear 8192-10", "linear", (8192, 10)), ("linear 512-512", "linear", (512, 512)),
        ("attn b32 h8 T128 d32 causal", "attn", (32, 8, 128, 32, True))]


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=False, help="the other library's folder")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    p.add_argument("--layers", default="", help="comma-separated row-name prefixes")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def runners(kind, a, rng):
    """{"fwd": fn, "fwd+bwd": fn} for one row"""
    sys.path.insert(0, str(ROOT))
    from torchlean import nn
    from torchlean.session import Session
    if kind == "attn":   # (batch, heads, T, head_dim, causal): q, k, v from one draw
        b, h, t, d, causal = a
        xs = rng.standard_normal((3, b, h, t, d), dtype=np.float32)
        g = rng.standard_normal((b, h, t, d), dtype=np.float32)

        def m(q, k, v):
            return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    else:
        if kind == "conv":
            cin, cout, size, stride, k, bias = a
            m, shape = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=bias), (B, cin, size, size)
            out = (size + 2 * (k // 2) - k) // stride + 1
        elif kind == "bn":
            m, shape = nn.BatchNorm2d(a[0]), (B, a[0], a[1], a[1])
        else:
            m, shape = nn.Linear(*a), (B, a[0])
        xs = [rng.standard_normal(shape, dtype=np.float32)]
        gshape = (B, a[1], out, out) if kind == "conv" else shape if kind == "bn" else (B, a[1])
        g = rng.standard_normal(gshape, dtype=np.float32)

    # operands uploaded once and borrowed by each call's session (bench_stub_layers.tl_runner
    # says why)
    import torchlean as tl
    from torchlean.buffer import AnyBuffer
    ins = [AnyBuffer.from_numpy(np.ascontiguousarray(x)) for x in xs]
    gb = AnyBuffer.from_numpy(np.ascontiguousarray(g))

    def run(backward):
        with Session() as s:
            if not backward:
                with tl.no_grad():
                    m(*[s.borrow(v) for v in ins])
                return
            m(*[s.borrow(v, requires_grad=True) for v in ins]).backward(s.borrow(gb))
    return {"fwd": lambda: run(False), "fwd+bwd": lambda: run(True)}


def child(a):
    """answer a row index per stdin line with the times of one block of each call, in JSON"""
    rng = np.random.default_rng(0)
    serve(lambda i: runners(ROWS[i][1], ROWS[i][2], rng), a.clock, a.reps)


def main():
    a = parse(sys.argv[1:])
    if a.child:
        return child(a)
    sides = spawn_sides(__file__, a.threads, ["--clock", a.clock, "--reps", str(a.reps)],
                        a.before)
    want = [w.strip() for w in a.layers.split(",") if w.strip()]
    print(f"threads {a.threads}, clock {a.clock}, rounds {a.rounds} x {a.reps} calls, "
          f"load average {load()}")

    def bwd(m):
        m["bwd"] = m["fwd+bwd"] - m["fwd"]
    for i, (name, _, _) in enumerate(ROWS):
        if want and not any(name.startswith(w) for w in want):
            continue
        print(f"{name}: " + compare(sides, i, a.rounds, ("fwd", "bwd", "fwd+bwd"), bwd),
              flush=True)
    print(f"load average at the end {load()}")
    close(sides)


if __name__ == "__main__":
    main()
