"""Exact-mode GEMM on CUDA: bit-identical to the stub's, and its speed against cuBLAS.

Run on a GPU machine after `make cuda stub`:
    TORCHLEAN_BACKEND=cuda python bench/bench_gemm_exact.py --out bench/results/gemm-exact.md
Parity: tl_gemm_exact on both libraries (opened side by side in one process) for every
transposition on odd shapes, compared bit for bit. Speed: square products timed as a loop of
calls ended by a synchronise (median of repeats), against tl_matmul (cuBLAS SGEMM, TF32 off).
The k-tile depth comes from TORCHLEAN_GEMM_EXACT_BK (8 or 16, the default); it never changes
the bits, so the script times both in child processes.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _upload(lib, ffi, x):
    x = np.ascontiguousarray(x, np.float32).ravel()
    out = ffi.new("tl_buf *")
    assert lib.tl_buf_upload_f32(ffi.cast("float *", ffi.from_buffer(x)), x.size, out) == 0
    return out[0]


def _download(lib, ffi, h, n):
    y = np.empty(n, np.float32)
    assert lib.tl_buf_download_f32(h, ffi.cast("float *", ffi.from_buffer(y)), n) == 0
    return y


def run_gemm(lib, ffi, a, b, batch, m, k, n, ta, tb):
    ha, hb = _upload(lib, ffi, a), _upload(lib, ffi, b)
    hc = _upload(lib, ffi, np.zeros(batch * m * n, np.float32))
    st = lib.tl_gemm_exact(ha, hb, hc, batch, m, k, n, ta, tb, 0)
    assert st == 0, ffi.string(lib.tl_last_error()).decode()
    y = _download(lib, ffi, hc, batch * m * n)
    for h in (ha, hb, hc):
        lib.tl_buf_destroy(h)
    return y


def parity(lines):
    from torchlean._loader import ffi, lib as cuda, open_backend
    stub, _ = open_backend("stub")
    rng = np.random.default_rng(0)
    total = same = 0
    for batch, m, k, n in [(1, 1, 1, 1), (3, 37, 129, 53), (1, 513, 1000, 777), (2, 128, 64, 256),
                           (1, 1024, 1024, 1024), (1, 200, 4097, 130)]:
        for ta in (0, 1):
            for tb in (0, 1):
                a = rng.standard_normal(batch * m * k).astype(np.float32)
                b = rng.standard_normal(batch * k * n).astype(np.float32)
                yc = run_gemm(cuda, ffi, a, b, batch, m, k, n, ta, tb)
                ys = run_gemm(stub, ffi, a, b, batch, m, k, n, ta, tb)
                eq = int(np.sum(yc.view(np.uint32) == ys.view(np.uint32)))
                total += yc.size
                same += eq
                lines.append(f"| {batch}x{m}x{k}x{n} | {'T' if ta else 'N'}{'T' if tb else 'N'} | "
                             f"{eq}/{yc.size} |")
    return same, total


def timing(size, reps):
    """Median seconds per call of (exact GEMM, cuBLAS matmul) at size^3, NN layout."""
    from torchlean._loader import ffi, lib
    rng = np.random.default_rng(1)
    a = rng.standard_normal(size * size).astype(np.float32)
    b = rng.standard_normal(size * size).astype(np.float32)
    ha, hb = _upload(lib, ffi, a), _upload(lib, ffi, b)
    hc = _upload(lib, ffi, np.zeros(size * size, np.float32))
    calls = {"exact": lambda: lib.tl_gemm_exact(ha, hb, hc, 1, size, size, size, 0, 0, 0),
             "cublas": lambda: lib.tl_matmul(ha, hb, hc, size, size, size)}
    out = {}
    for name, f in calls.items():
        inner = max(1, int(2e10 // (2 * size ** 3)))
        f(); lib.tl_synchronize()
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            for _ in range(inner):
                assert f() == 0
            lib.tl_synchronize()
            ts.append((time.perf_counter() - t) / inner)
        out[name] = statistics.median(ts)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default=None)
    p.add_argument("--sizes", default="1024,2048,4096")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--time-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.time_only:   # child process: one k-tile depth
        for s in sizes:
            t = timing(s, args.reps)
            print(f"TIME {s} {t['exact']} {t['cublas']}", flush=True)
        return 0
    import torchlean as tl
    assert tl.backend() == "cuda", "run with TORCHLEAN_BACKEND=cuda on a GPU machine"
    lines = []
    same, total = parity(lines)
    dev = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip() or "unknown GPU"
    rows = []
    for bk in ("8", "16"):
        env = dict(os.environ, TORCHLEAN_GEMM_EXACT_BK=bk, TORCHLEAN_BACKEND="cuda")
        r = subprocess.run([sys.executable, __file__, "--time-only", "--sizes", args.sizes,
                            "--reps", str(args.reps)], env=env, capture_output=True, text=True)
        if r.returncode:
            print(r.stdout, r.stderr)
            return 1
        for line in r.stdout.splitlines():
            if line.startswith("TIME"):
                _, s, te, tc = line.split()
                s, te, tc = int(s), float(te), float(tc)
                fl = 2 * s ** 3
                rows.append(f"| {s} | {bk} | {te * 1e3:.3f} | {fl / te / 1e12:.1f} | {tc * 1e3:.3f} | "
                            f"{fl / tc / 1e12:.1f} | {tc / te:.0%} |")
    text = "\n".join([
        "# Exact-mode GEMM (CUDA) vs cuBLAS", "",
        f"Device: {dev}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
        "Command: `TORCHLEAN_BACKEND=cuda python bench/bench_gemm_exact.py --out bench/results/gemm-exact.md`.",
        "",
        "Exact GEMM: tl_gemm_exact (tiled SIMT, 128x128 block tile, 8x8 outputs per thread, each "
        "a sequential fmaf chain in k order). cuBLAS: tl_matmul (cublasSgemmStridedBatched, strict "
        "FP32, TF32 off). Square NN products, median of "
        f"{args.reps} timed loops ended by a synchronise.", "",
        "| size | BK | exact ms | exact TFLOP/s | cuBLAS ms | cuBLAS TFLOP/s | exact / cuBLAS speed |",
        "|---|---|---|---|---|---|---|", *rows, "",
        f"Parity with the stub's exact GEMM: {same}/{total} outputs bit-identical.", "",
        "| batch x m x k x n | layout | identical outputs |", "|---|---|---|", *lines, ""])
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if same == total else 1


if __name__ == "__main__":
    sys.exit(main())
