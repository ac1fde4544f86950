"""The stub's default GEMM against this CPU's FMA peak and PyTorch CPU, on large square shapes.

    python bench/bench_gemm_peak.py [--threads 2] [--sizes 1024,2048] [--rounds 5] [--out FILE.md]

The peak is measured, not looked up: a small C probe (compiled here with cc -march=native)
runs 12 independent AVX-512 (or AVX2) FMA chains per thread, so it reads what the cores give
now, beside the same outside load as the GEMMs. Per round, in this order: probe, torchlean
matmul, torch.mm; medians of the rounds. GFLOP/s = 2 n^3 / time.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sidebyside import append_table

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
#include <immintrin.h>
#include <stdio.h>
#include <omp.h>
#ifdef __AVX512F__
typedef __m512 V; enum { L = 16 };
#define FMA _mm512_fmadd_ps
#define SET _mm512_set1_ps
#define ST _mm512_storeu_ps
#else
typedef __m256 V; enum { L = 8 };
#define FMA _mm256_fmadd_ps
#define SET _mm256_set1_ps
#define ST _mm256_storeu_ps
#endif
int main(int argc, char **argv) {
    long iters = 20000000L;
    float out[64] = {0};
    double t0 = omp_get_wtime();
#pragma omp parallel
    {
        V a[12], b = SET(0.999999f), c = SET(1e-7f);
        for (int i = 0; i < 12; i++) a[i] = SET((float)i);
        for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) a[i] = FMA(a[i], b, c);   /* in registers */
        }
        float tmp[16];
        for (int i = 1; i < 12; i++) a[0] = FMA(a[0], b, a[i]);
        ST(tmp, a[0]);
        out[omp_get_thread_num() % 64] = tmp[0];
    }
    double t = omp_get_wtime() - t0;
    printf("%.3f %g\n", omp_get_max_threads() * iters * 12.0 * L * 2 / t / 1e9, out[0]);
    return 0;
}
"""


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sizes", default="1024,2048")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None, help="append the table to this markdown file")
    return p.parse_args(argv)


def build_probe(tmp: Path) -> Path:
    src, exe = tmp / "fma_peak.c", tmp / "fma_peak"
    src.write_text(PROBE)
    subprocess.run(["cc", "-O3", "-march=native", "-fopenmp", str(src), "-o", str(exe)],
                   check=True)
    return exe


def main():
    a = parse(sys.argv[1:])
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    os.environ.setdefault("TORCHLEAN_BACKEND", "stub")
    sys.path.insert(0, str(ROOT))
    import numpy as np
    import torch
    from torchlean import AnyBuffer
    from torchlean._generated import ops
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        probe = build_probe(Path(tmp))

        def peak():
            out = subprocess.run([str(probe)], capture_output=True, text=True, check=True,
                                 env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)))
            return float(out.stdout.split()[0])

        for n in (int(s) for s in a.sizes.split(",")):
            x = rng.standard_normal((n, n), dtype=np.float32)
            y = rng.standard_normal((n, n), dtype=np.float32)
            xb, yb = AnyBuffer.from_numpy(x), AnyBuffer.from_numpy(y)
            xt, yt = torch.from_numpy(x), torch.from_numpy(y)
            flop = 2.0 * n ** 3

            def tl_mm():
                ops.matmul(xb, yb).release()

            def torch_mm():
                torch.mm(xt, yt)

            tl_mm(), torch_mm()
            got = {"peak": [], "tl": [], "torch": []}
            for _ in range(a.rounds):
                got["peak"].append(peak())
                for k, f in (("tl", tl_mm), ("torch", torch_mm)):
                    t0 = time.perf_counter()
                    f()
                    got[k].append(flop / (time.perf_counter() - t0) / 1e9)
            med = {k: statistics.median(v) for k, v in got.items()}
            rows.append((n, med))
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"`python bench/bench_gemm_peak.py --threads {a.threads} --sizes {a.sizes} "
             f"--rounds {a.rounds}` ({when}, load average {load}; {a.threads} threads, wall "
             f"clock, medians of {a.rounds} rounds)", "",
             "| n (n x n x n) | FMA peak probe GFLOP/s | torchlean default GFLOP/s | % of peak | "
             "torch GFLOP/s | % of peak |", "|---:|---:|---:|---:|---:|---:|"]
    for n, m in rows:
        lines.append(f"| {n} | {m['peak']:.0f} | {m['tl']:.0f} | {m['tl'] / m['peak']:.0%} | "
                     f"{m['torch']:.0f} | {m['torch'] / m['peak']:.0%} |")
    append_table("\n".join(lines) + "\n", a.out)


if __name__ == "__main__":
    main()
