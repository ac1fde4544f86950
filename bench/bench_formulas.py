"""Stub kernel times of the families whose arithmetic lives in native/common/formulas/
(elementwise and pointwise_extra maps, optimizer steps, RNG, norms, softmax), for two
checkouts in the same run: each round runs every op in a fresh process per checkout, the
checkouts alternating, and a table gives each op's median over the rounds of its best time.

  python bench/bench_formulas.py --base /path/to/other/checkout --out bench/results/formula-refactor.md

Both checkouts need a built stub (make stub). Times are milliseconds per call.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = r"""
import json, sys, time
import numpy as np
import torchlean as tl
from torchlean import AnyBuffer, ops
N = int(sys.argv[1]); REPS = int(sys.argv[2])
rng = np.random.default_rng(0)
up = AnyBuffer.from_numpy
x, y, g = (up(rng.uniform(-3, 3, N).astype(np.float32)) for _ in range(3))
pos = up(rng.uniform(0.1, 3, N).astype(np.float32))
rows, cols = N // 512, 512
xm, gm = up(rng.standard_normal((rows, cols)).astype(np.float32)), up(rng.standard_normal((rows, cols)).astype(np.float32))
gam, bet = up(np.ones(cols, np.float32)), up(np.zeros(cols, np.float32))
xc = up(rng.standard_normal((16, 8, N // 128)).astype(np.float32))
gc = up(rng.standard_normal((16, 8, N // 128)).astype(np.float32))
gam16, bet16 = up(np.ones(16, np.float32)), up(np.zeros(16, np.float32))
m, v, buf = (up(np.zeros(N, np.float32)) for _ in range(3))
ln = ops.layer_norm(xm, gam, bet)
bn = ops.batchnorm_channel_first(xc, gam16, bet16)
sm = ops.softmax(xm)
tall = up(rng.standard_normal((N // 16, 16)).astype(np.float32))
wide = up(rng.standard_normal((N // 2048, 2048)).astype(np.float32))
cube = up(rng.standard_normal((16, N // 256, 16)).astype(np.float32))
cases = {
    "add": lambda: ops.add(x, y), "mul": lambda: ops.mul(x, y), "maximum": lambda: ops.maximum(x, y),
    "axpy": lambda: ops.axpy(x, y, c=0.5), "scale": lambda: ops.scale(x, c=0.5),
    "relu": lambda: ops.relu(x), "exp": lambda: ops.exp(x), "log": lambda: ops.log(pos),
    "sqrt": lambda: ops.sqrt(pos), "gelu": lambda: ops.gelu(x), "tanh": lambda: ops.tanh(x),
    "sigmoid": lambda: ops.sigmoid(x), "softplus": lambda: ops.softplus(x),
    "clamp": lambda: ops.clamp(x, lo=-1.0, hi=1.0),
    "relu_backward": lambda: ops.relu_backward(x, g), "gelu_backward": lambda: ops.gelu_backward(x, g),
    "tanh_backward": lambda: ops.tanh_backward(x, g),
    "maximum_backward": lambda: ops.maximum_backward(x, y, g),
    "safe_log_backward": lambda: ops.safe_log_backward(x, g, eps=1e-6),
    "add (broadcast rows)": lambda: ops.add(xm, gam),
    "pow": lambda: ops.pow(pos, y), "erf": lambda: ops.erf(x), "gelu_erf": lambda: ops.gelu_erf(x),
    "sgd_step (momentum)": lambda: ops.sgd_step(x, g, buf, lr=0.01, momentum=0.9),
    "adam_step": lambda: ops.adam_step(x, g, m, v, lr=1e-3, step=3),
    "rand_uniform": lambda: ops.rand_uniform(n=N, key=1),
    "rand_normal": lambda: ops.rand_normal(n=N, key=1),
    "layer_norm": lambda: ops.layer_norm(xm, gam, bet),
    "layer_norm_backward": lambda: ops.layer_norm_backward(gm, ln[1], ln[2], gam),
    "batchnorm": lambda: ops.batchnorm_channel_first(xc, gam16, bet16),
    "batchnorm_backward": lambda: ops.batchnorm_channel_first_backward(gc, bn[1], bn[4], gam16),
    "softmax": lambda: ops.softmax(xm), "softmax_backward": lambda: ops.softmax_backward(sm, gm),
    "log_softmax": lambda: ops.log_softmax(xm),
    "linear_backward_b (N/16 x 16)": lambda: ops.linear_backward_b(tall),
    "sum_to (N/512 x 512 -> 512)": lambda: ops.sum_to(xm, shape=(cols,)),
    "sum_to (N/2048 x 2048 -> 2048)": lambda: ops.sum_to(wide, shape=(2048,)),
    "reduce_sum (16 x N/256 x 16, axis 1)": lambda: ops.reduce_sum(cube, axis=1),
}
keep = {id(b) for b in (x, y, g, pos, xm, gm, gam, bet, xc, gc, gam16, bet16, m, v, buf, sm, tall, wide, cube) + ln + bn}
out = {}
for name, f in cases.items():
    best = float("inf")
    for _ in range(REPS):
        t = time.perf_counter(); r = f(); best = min(best, time.perf_counter() - t)
        for b in (r if isinstance(r, tuple) else (r,)):
            if b is not None and hasattr(b, "release") and id(b) not in keep: b.release()
    out[name] = best * 1e3
print(json.dumps(out))
"""


def run(root: Path, n: int, reps: int, exact: bool) -> dict:
    env = dict(os.environ, TORCHLEAN_BACKEND="stub", PYTHONPATH=str(root))
    env.pop("TORCHLEAN_LIB_DIR", None)
    if exact:
        env["TORCHLEAN_EXACT"] = "1"
    r = subprocess.run([sys.executable, "-c", WORKER, str(n), str(reps)], cwd=root, env=env,
                       capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise SystemExit(f"worker in {root} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", required=True, help="the other checkout (with a built stub)")
    p.add_argument("--n", type=int, default=1 << 20, help="elements per op (default 2^20)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=7, help="calls per op per round (best kept)")
    p.add_argument("--exact", action="store_true", help="run in exact mode")
    p.add_argument("--out", help="write a markdown table here")
    a = p.parse_args(argv)
    base, head = Path(a.base).resolve(), ROOT
    times: dict[str, dict[str, list]] = {"base": {}, "head": {}}
    for r in range(a.rounds):   # the order alternates, so neither side always runs second
        for side, root in ((("base", base), ("head", head)) if r % 2 == 0 else (("head", head), ("base", base))):
            for k, v in run(root, a.n, a.reps, a.exact).items():
                times[side].setdefault(k, []).append(v)
    thr = os.environ.get("OMP_NUM_THREADS", "all")
    lines = [f"| op (n = {a.n}, {'exact' if a.exact else 'default'} mode, threads {thr}) | base ms | this tree ms | ratio |",
             "|---|---|---|---|"]
    for k in times["base"]:
        b, h = statistics.median(times["base"][k]), statistics.median(times["head"][k])
        lines.append(f"| {k} | {b:.3f} | {h:.3f} | {h / b:.2f} |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
