"""The stub's default GEMM, two builds side by side, against this CPU's measured FMA peak.

    python bench/bench_gemm_ab.py --before DIR [--threads 2] [--rounds 5]
        [--shapes matmul:1024x1024x1024,linear:128x784x512,...] [--out FILE.md]

Each side (this checkout's library, and the library in DIR through TORCHLEAN_LIB_DIR) is a
child process (bench/ab_sides.py); per shape and round, the FMA peak probe of
bench/bench_gemm_peak.py runs, then the sides take turns, so outside load on a shared machine
hits both alike. A shape is op:MxNxP with C (M, P) = A (M, N) @ B (N, P): matmul (B stored
(N, P)), linear (rows M, in N, out P: x @ W^T + bias, W stored (P, N)), matmul_tb (B stored
transposed) or conv3x3 (conv2d, padding 1, on 32 x 32 images: M output channels, N = 9 x the
input channels, P = batch x 1024, the products the convolution's GEMM computes). A side's time
is the median of repeated calls within a round, enough to fill about 0.2 s; GFLOP/s =
2 M N P / time, medians over the rounds, over wall-clock time and over CPU time per thread
(the latter, like the probe's, counts only while the threads run: on a machine shared with
other jobs it moves less). --after DIR takes the after side from another folder too.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sidebyside import append_table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT_SHAPES = ("matmul:1024x1024x1024,matmul:2048x2048x2048,matmul:4096x4096x4096,"
                  "linear:128x784x512,linear:128x512x512,linear:4096x256x256,"
                  "matmul:64x576x65536,conv3x3:64x576x65536")


def parse_shape(s):
    op, dims = s.split(":")
    m, n, p = (int(v) for v in dims.split("x"))
    return op, m, n, p


def child(shapes):
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    sys.path.insert(0, str(ROOT))
    import numpy as np
    from torchlean import AnyBuffer
    from torchlean._generated import ops
    rng = np.random.default_rng(0)
    calls = []
    for op, m, n, p in shapes:
        a = AnyBuffer.from_numpy(rng.standard_normal((m, n), dtype=np.float32))
        if op == "matmul":
            b = AnyBuffer.from_numpy(rng.standard_normal((n, p), dtype=np.float32))
            calls.append(lambda a=a, b=b: ops.matmul(a, b).release())
        elif op == "matmul_tb":
            b = AnyBuffer.from_numpy(rng.standard_normal((p, n), dtype=np.float32))
            calls.append(lambda a=a, b=b: ops.matmul_t(a, b, trans_b=True).release())
        elif op == "linear":
            w = AnyBuffer.from_numpy(rng.standard_normal((p, n), dtype=np.float32))
            bias = AnyBuffer.from_numpy(rng.standard_normal((p,), dtype=np.float32))
            calls.append(lambda a=a, w=w, bias=bias: ops.linear(w, bias, a).release())
        elif op == "conv3x3":   # M = C_out, N = 9 C_in, P = batch x side^2 (side^2 = 1024)
            cin, side = n // 9, 32
            x = AnyBuffer.from_numpy(rng.standard_normal((p // (side * side), cin, side, side),
                                                         dtype=np.float32))
            k = AnyBuffer.from_numpy(rng.standard_normal((m, cin, 3, 3), dtype=np.float32))
            bias = AnyBuffer.from_numpy(rng.standard_normal((m,), dtype=np.float32))
            calls.append(lambda x=x, k=k, bias=bias: ops.conv2d(k, bias, x, padding=1).release())
        else:
            raise SystemExit(f"unknown op {op!r}")
    reps = [None] * len(calls)
    for line in sys.stdin:
        i = int(line)
        f = calls[i]
        if reps[i] is None:   # warm up, then enough calls for about 0.2 s a round
            f()
            t0 = time.perf_counter()
            f()
            reps[i] = max(1, min(200, int(0.2 / max(time.perf_counter() - t0, 1e-6))))
        ts = []
        c0 = time.process_time()
        for _ in range(reps[i]):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        cpu = (time.process_time() - c0) / reps[i] / threads
        op, m, n, p = shapes[i]
        flop = 2.0 * m * n * p
        print(json.dumps([flop / statistics.median(ts) / 1e9, flop / cpu / 1e9]), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=None, help="folder holding the other libtorchlean_stub.so")
    ap.add_argument("--after", default=None,
                    help="folder of the library for the after side (default: this checkout's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--out", default=None, help="append the table to this markdown file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    shapes = [parse_shape(s) for s in a.shapes.split(",")]
    if a.child:
        return child(shapes)
    from ab_sides import spawn_sides, alternate
    from bench_gemm_peak import build_probe
    sides = spawn_sides(__file__, a.threads, ["--shapes", a.shapes], a.before)
    if a.after:   # the after side from another folder too (comparing two experimental builds)
        sides["after"].stdin.close()
        sides["after"].wait()
        os.environ["TORCHLEAN_LIB_DIR"] = a.after
        sides["after"] = subprocess.Popen(
            [sys.executable, __file__, "--child", "--shapes", a.shapes], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, OMP_NUM_THREADS=str(a.threads), TORCHLEAN_BACKEND="stub"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        probe = build_probe(Path(tmp))
        for i, shape in enumerate(shapes):
            peaks, cpu_peaks, got, cpu = [], [], {s: [] for s in sides}, {s: [] for s in sides}
            for _ in range(a.rounds):
                r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
                out = subprocess.run([str(probe)], capture_output=True, text=True, check=True,
                                     env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)))
                wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
                peaks.append(float(out.stdout.split()[0]))
                busy = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
                cpu_peaks.append(peaks[-1] * wall * a.threads / busy)
                for s, v in alternate(sides, i, 1).items():
                    got[s].append(v[0][0])
                    cpu[s].append(v[0][1])
            rows.append((shape, statistics.median(peaks),
                         {s: statistics.median(v) for s, v in got.items()},
                         statistics.median(cpu_peaks), {s: statistics.median(v) for s, v in cpu.items()}))
            pk, cpk = rows[-1][1], rows[-1][3]
            print(f"{shape[0]}:{shape[1]}x{shape[2]}x{shape[3]} peak {pk:.0f} (per CPU s {cpk:.0f}) "
                  + " ".join(f"{s} {v:.1f} ({v / pk:.0%}; per CPU s {rows[-1][4][s]:.1f} = "
                             f"{rows[-1][4][s] / cpk:.0%})" for s, v in rows[-1][2].items()), flush=True)
    for p in sides.values():
        p.stdin.close()
        p.wait()
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cols = [s for s in ("before", "after") if s in sides]
    lines = [f"`python bench/bench_gemm_ab.py{' --before DIR' if a.before else ''} --threads "
             f"{a.threads} --rounds {a.rounds}` ({when}, load average {load}; medians of "
             f"{a.rounds} rounds, sides alternating). Wall: GFLOP/s over wall-clock time; "
             "CPU: over the process's CPU time per thread (what the threads reach while they run, "
             "less sensitive to other jobs taking the cores), each against the probe's same "
             "measure.", "",
             "| shape (op: M x N x P) | peak wall | peak CPU | " +
             " | ".join(f"{c} wall GFLOP/s | % | {c} CPU GFLOP/s | %" for c in cols) + " |",
             "|---|---:|---:|" + "---:|---:|---:|---:|" * len(cols)]
    for (op, m, n, p), pk, med, cpk, cmed in rows:
        lines.append(f"| {op}: {m} x {n} x {p} | {pk:.0f} | {cpk:.0f} | " +
                     " | ".join(f"{med[c]:.1f} | {med[c] / pk:.0%} | {cmed[c]:.1f} | "
                                f"{cmed[c] / cpk:.0%}" for c in cols) + " |")
    append_table("\n".join(lines) + "\n", a.out)


if __name__ == "__main__":
    main()
