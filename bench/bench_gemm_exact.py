"""Exact-mode GEMM on CUDA: bit-identical to the stub's, and its speed against cuBLAS.

Run on a GPU machine after `make cuda stub`:
    TORCHLEAN_BACKEND=cuda python bench/bench_gemm_exact.py --out bench/results/gemm-exact.md
Parity: tl_gemm_exact on CUDA against the stub's (the stub's outputs computed once, in this
process) for every transposition on odd shapes, compared bit for bit. Speed: the square 4096^3
product and the three products of a transformer's 768 -> 3072 linear layer on 4096 tokens
(forward x W^T: NT; input gradient g W: NN; weight gradient g^T x: TN), timed as a loop of
calls ended by a synchronise (median of repeats), against tl_matmul_t in default mode (cuBLAS
SGEMM, TF32 off). The large-tile shape comes from TORCHLEAN_GEMM_EXACT_TILE (unset: chosen per
shape, "auto" below) and TORCHLEAN_GEMM_EXACT_CHAIN=0 turns off the long-K chain kernel
("nochain"); neither changes the bits, so the script runs the parity check and the timings
for each setting in a child process and reports them side by side. The FNO columns are its
skip-linear's weight gradient (K = 20 x 1024 points) and forward.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# name: (batch, m, k, n, ta, tb)
SHAPES = {
    "4096^3 NN": (1, 4096, 4096, 4096, 0, 0),
    "fwd NT 4096x768->3072": (1, 4096, 768, 3072, 0, 1),
    "dgrad NN 4096x3072->768": (1, 4096, 3072, 768, 0, 0),
    "wgrad TN 3072x4096->768": (1, 3072, 4096, 768, 1, 0),
    "FNO wgrad TN 64x20480->64": (1, 64, 20480, 64, 1, 0),
    "FNO fwd NT 20480x64->64": (1, 20480, 64, 64, 0, 1),
    "LM wgrad TN 256x4096->256": (1, 256, 4096, 256, 1, 0),
    "LM wgrad TN 1024x4096->256": (1, 1024, 4096, 256, 1, 0),
}
# odd shapes: partial tiles on every side, K off the k-tile, unaligned rows (no float4 loads)
PARITY = [(1, 1, 1, 1), (3, 37, 129, 53), (1, 513, 1000, 777), (2, 128, 64, 256),
          (1, 1024, 1024, 1024), (1, 200, 4097, 130), (2, 700, 301, 650), (1, 523, 259, 1037),
          (1, 4096, 5, 96), (1, 97, 33, 4099), (1, 64, 2051, 40), (2, 9, 1500, 13),
          (1, 64, 20480, 64)]
TILES = ["auto", "nochain", "128x128", "96x128", "96x96", "128x64"]


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
    hc = _upload(lib, ffi, np.full(batch * m * n, 7.0, np.float32))
    st = lib.tl_gemm_exact(ha, hb, hc, batch, m, k, n, ta, tb, 0)
    assert st == 0, ffi.string(lib.tl_last_error()).decode()
    y = _download(lib, ffi, hc, batch * m * n)
    for h in (ha, hb, hc):
        lib.tl_buf_destroy(h)
    return y


def parity_cases():
    """(name, batch, m, k, n, ta, tb, a, b) for every parity shape and layout, fixed seed."""
    rng = np.random.default_rng(0)
    for batch, m, k, n in PARITY:
        for ta in (0, 1):
            for tb in (0, 1):
                a = rng.standard_normal(batch * m * k).astype(np.float32)
                b = rng.standard_normal(batch * k * n).astype(np.float32)
                yield f"{batch}x{m}x{k}x{n} {'T' if ta else 'N'}{'T' if tb else 'N'}", batch, m, k, n, ta, tb, a, b


def stub_reference(path):
    from torchlean._loader import ffi, open_backend
    stub, _ = open_backend("stub")
    refs = {name: run_gemm(stub, ffi, a, b, batch, m, k, n, ta, tb)
            for name, batch, m, k, n, ta, tb, a, b in parity_cases()}
    np.savez(path, **refs)


def parity(ref_path):
    """(identical outputs, outputs, failing case names) of this process's tile against the stub."""
    from torchlean._loader import ffi, lib
    refs = np.load(ref_path)
    same = total = 0
    bad = []
    for name, batch, m, k, n, ta, tb, a, b in parity_cases():
        yc = run_gemm(lib, ffi, a, b, batch, m, k, n, ta, tb)
        eq = int(np.sum(yc.view(np.uint32) == refs[name].view(np.uint32)))
        same, total = same + eq, total + yc.size
        if eq != yc.size:
            bad.append(name)
    return same, total, bad


def timing(shape, reps, cublas):
    """Median seconds per call of the exact GEMM (and of cuBLAS when asked) on one shape."""
    from torchlean._loader import ffi, lib
    batch, m, k, n, ta, tb = shape
    rng = np.random.default_rng(1)
    ha = _upload(lib, ffi, rng.standard_normal(batch * m * k).astype(np.float32))
    hb = _upload(lib, ffi, rng.standard_normal(batch * k * n).astype(np.float32))
    hc = _upload(lib, ffi, np.zeros(batch * m * n, np.float32))
    calls = {"exact": lambda: lib.tl_gemm_exact(ha, hb, hc, batch, m, k, n, ta, tb, 0)}
    if cublas:  # default mode: tl_matmul_t is cuBLAS with the same transposes
        calls["cublas"] = lambda: lib.tl_matmul_t(ha, hb, hc, batch, m, k, n, ta, tb)
    out = {}
    for name, f in calls.items():
        assert f() == 0
        lib.tl_synchronize()
        t = time.perf_counter()
        for _ in range(3):
            f()
        lib.tl_synchronize()
        inner = max(1, int(0.025 / ((time.perf_counter() - t) / 3)))  # about 25 ms a loop
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            for _ in range(inner):
                f()
            lib.tl_synchronize()
            ts.append((time.perf_counter() - t) / inner)
        out[name] = statistics.median(ts)
    for h in (ha, hb, hc):
        lib.tl_buf_destroy(h)
    return out


def child(args):
    """One tile (from the environment): parity, then timings, as parseable lines."""
    same, total, bad = parity(args.ref)
    print(f"PARITY {same} {total} {','.join(bad) or '-'}", flush=True)
    for i, (name, shape) in enumerate(SHAPES.items()):
        t = timing(shape, args.reps, args.cublas)
        print(f"TIME {i} {t['exact']} {t.get('cublas', 0.0)}", flush=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default=None)
    p.add_argument("--tiles", default=",".join(TILES), help="tiles to compare (auto: per shape)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--ref", help=argparse.SUPPRESS)
    p.add_argument("--cublas", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    import torchlean as tl
    assert tl.backend() == "cuda", "run with TORCHLEAN_BACKEND=cuda on a GPU machine"
    dev = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip() or "unknown GPU"
    names = list(SHAPES)
    rows, cublas, ok = [], None, True
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, "stub.npz")
        stub_reference(ref)
        for tile in args.tiles.split(","):
            env = dict(os.environ, TORCHLEAN_BACKEND="cuda")
            env.pop("TORCHLEAN_GEMM_EXACT_TILE", None)
            env.pop("TORCHLEAN_GEMM_EXACT_CHAIN", None)
            if tile == "nochain":  # auto tiles without the long-K chain kernel
                env["TORCHLEAN_GEMM_EXACT_CHAIN"] = "0"
            elif tile != "auto":
                env["TORCHLEAN_GEMM_EXACT_TILE"] = tile
            cmd = [sys.executable, __file__, "--child", "--ref", ref, "--reps", str(args.reps)]
            r = subprocess.run(cmd + (["--cublas"] if cublas is None else []), env=env,
                               capture_output=True, text=True)
            if r.returncode:
                print(f"tile {tile} failed:\n{r.stdout}\n{r.stderr}", flush=True)
                ok = False
                continue
            times = {}
            for line in r.stdout.splitlines():
                f = line.split()
                if f and f[0] == "PARITY":
                    same, total, bad = int(f[1]), int(f[2]), f[3]
                elif f and f[0] == "TIME":
                    times[int(f[1])] = float(f[2])
                    if cublas is None or len(cublas) < len(names):
                        cublas = (cublas or {}) | {int(f[1]): float(f[3])}
            ok = ok and same == total
            cells = [f"{times[i] * 1e3:.3f} ms, {cublas[i] / times[i]:.0%}" for i in range(len(names))]
            rows.append(f"| {tile} | {' | '.join(cells)} | {same}/{total}"
                        f"{'' if bad == '-' else ' FAILED ' + bad} |")
            print(rows[-1], flush=True)
    flops = [2 * b * m * k * n for b, m, k, n, _, _ in SHAPES.values()]
    text = "\n".join([
        "# Exact-mode GEMM (CUDA) vs cuBLAS", "",
        f"Device: {dev}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
        "Command: `TORCHLEAN_BACKEND=cuda python bench/bench_gemm_exact.py --out bench/results/gemm-exact.md`.",
        "",
        "Exact GEMM: tl_gemm_exact (tiled SIMT, each output a sequential fmaf chain in k order), "
        "one row per large tile (TORCHLEAN_GEMM_EXACT_TILE; auto = the per-shape choice, the "
        "default). cuBLAS: tl_matmul_t in default mode (cublasSgemmStridedBatched, strict FP32, "
        f"TF32 off). Median of {args.reps} timed loops ended by a synchronise. Cells: exact ms, "
        "exact speed as a fraction of cuBLAS's.", "",
        "cuBLAS: " + ", ".join(f"{nm} {cublas[i] * 1e3:.3f} ms ({flops[i] / cublas[i] / 1e12:.1f} TFLOP/s)"
                               for i, nm in enumerate(names)) if cublas else "cuBLAS: not measured", "",
        f"| tile | {' | '.join(names)} | parity with the stub |",
        "|---|" + "---|" * len(names) + "---|", *rows, "",
        "Parity cases (batch x m x k x n, all four layouts): "
        + ", ".join(f"{b}x{m}x{k}x{n}" for b, m, k, n in PARITY) + ".", ""])
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
