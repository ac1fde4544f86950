"""The catalog's heavy ops on CUDA next to PyTorch on the same GPU, in one process:
sort, topk, cumsum, scatter_add / index_add (default and deterministic mode), gather, and
masked_fill, one_hot, tril, einsum where the build has them.

  TORCHLEAN_BACKEND=cuda python bench/bench_catalog_cuda.py [--out bench/results/catalog-cuda.md]

Timing is bench_cuda.py's: PyTorch with CUDA events on its stream, torchlean (its own stream)
with a loop of calls closed by torchlean.synchronize(); both warmed up, the median of 7
repeats. Rows time the public API under no_grad, so host work is included (sort's and topk's
indices stay on the device, as torch's do, until the host asks; an int64 index made with
tl.tensor goes to the device on first use and keeps that copy, as torch's index lives there).
Kernel rows ("kernels") time the registry ops alone. A row that fails is listed as skipped.
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("TORCHLEAN_BACKEND", "cuda")

import bench_cuda as bc  # noqa: E402  (timing helpers, torch, torchlean, the row list)
from cuda_timing import gpu_name  # noqa: E402

torch, tl = bc.torch, bc.tl
DEV = bc.DEV
ROWS: list = []
SKIPPED: list = []


def pair(shape, seed=0, lo=-1.0, hi=1.0):
    a = bc.rand(shape, seed, lo, hi)
    return tl.tensor(a), torch.from_numpy(a).to(DEV)


def ints(shape, n, seed=0):
    a = np.random.default_rng(seed).integers(0, n, size=shape)
    return tl.tensor(a), torch.from_numpy(a).to(DEV)


def case(name, tl_fn, torch_fn, note=""):
    try:
        with tl.no_grad():
            t_tl = bc.time_tl(tl_fn)
        t_torch = bc.time_torch(torch_fn)
        ROWS.append((name, t_tl, t_torch, t_tl / t_torch, note))
        print(f"  {name}: torchlean {t_tl:.4f} ms, torch {t_torch:.4f} ms, "
              f"ratio {t_tl / t_torch:.2f} {note}", flush=True)
    except Exception as e:  # noqa: BLE001 - a failing row is reported, the table goes on
        SKIPPED.append(f"{name}: {type(e).__name__}: {e}")
        traceback.print_exc()


def sorting():
    for shape in [(4096, 4096), (64, 65536), (1, 1 << 24)]:
        x, xt = pair(shape, 1)
        label = "x".join(map(str, shape))
        case(f"sort {label} dim -1", lambda: x.sort(-1), lambda: torch.sort(xt, -1))
        case(f"sort kernels {label} (argsort_rows + take_rows)",
             lambda: x.session.op("take_rows", x, x.session.op("argsort_rows", x), distinct=1),
             lambda: torch.sort(xt, -1))
        case(f"sort {label} stable", lambda: x.sort(-1, stable=True),
             lambda: torch.sort(xt, dim=-1, stable=True))
    x, xt = pair((4096, 4096), 2)
    case("sort 4096x4096 dim 0", lambda: x.sort(0), lambda: torch.sort(xt, 0))
    x, xt = pair((512, 32000), 3)
    case("topk 512x32000 k=50", lambda: x.topk(50), lambda: torch.topk(xt, 50))
    x, xt = pair((8192, 1024), 4)
    case("topk 8192x1024 k=8", lambda: x.topk(8), lambda: torch.topk(xt, 8))


def scans():
    for shape, dim in [((4096, 4096), -1), ((4096, 4096), 0), ((1, 1 << 24), -1),
                       ((65536, 128), -1)]:
        x, xt = pair(shape, 5)
        case(f"cumsum {'x'.join(map(str, shape))} dim {dim}", lambda: x.cumsum(dim),
             lambda: torch.cumsum(xt, dim))
    x, xt = pair((4096, 4096), 6, 0.999, 1.001)
    case("cumprod 4096x4096 dim -1", lambda: x.cumprod(-1), lambda: torch.cumprod(xt, -1))


def accumulation():
    rows, cols, k = 32768, 1024, 65536
    x, xt = pair((rows, cols), 7)
    src, srct = pair((k, cols), 8)
    idx, idxt = ints((k,), rows, 9)
    for det in (False, True):
        tl.set_deterministic(det)
        mode = "deterministic" if det else "default"
        case(f"index_add {rows}x{cols} += {k} rows ({mode})",
             lambda: x.index_add(0, idx, src), lambda: xt.index_add(0, idxt, srct),
             "torch default (atomic) kernel")
        s2, s2t = pair((4096, 4096), 10)
        i2, i2t = ints((4096, 4096), 4096, 11)
        y2, y2t = pair((4096, 4096), 12)
        case(f"scatter_add 4096x4096 dim 1 ({mode})", lambda: y2.scatter_add(1, i2, s2),
             lambda: y2t.scatter_add(1, i2t, s2t), "torch default (atomic) kernel")
    tl.set_deterministic(False)
    torch.use_deterministic_algorithms(True)
    try:
        case("index_add deterministic: torch's own deterministic kernel (torch column)",
             lambda: x.index_add(0, idx, src), lambda: xt.index_add(0, idxt, srct))
    finally:
        torch.use_deterministic_algorithms(False)


def reads():
    x, xt = pair((4096, 4096), 13)
    i, it = ints((4096, 4096), 4096, 14)
    case("gather 4096x4096 dim 1", lambda: x.gather(1, i), lambda: torch.gather(xt, 1, it))
    m = xt > 0
    mask = x > 0.0
    if hasattr(x, "masked_fill"):
        case("masked_fill 4096x4096", lambda: x.masked_fill(mask, 0.0),
             lambda: xt.masked_fill(m, 0.0))
    else:
        SKIPPED.append("masked_fill: not in this build")
    lab, labt = ints((65536,), 1000, 15)
    f = getattr(tl.nn.functional, "one_hot", None)
    if f is not None:
        case("one_hot 65536 x 1000", lambda: f(lab, 1000),
             lambda: torch.nn.functional.one_hot(labt, 1000))
    else:
        SKIPPED.append("one_hot: not in this build")
    if hasattr(tl, "tril"):
        case("tril 4096x4096", lambda: tl.tril(x), lambda: torch.tril(xt))
    else:
        SKIPPED.append("tril: not in this build")
    if hasattr(tl, "einsum"):
        a, at = pair((32, 256, 64), 16)
        b, bt = pair((32, 64, 256), 17)
        case("einsum bij,bjk->bik 32x256x64x256", lambda: tl.einsum("bij,bjk->bik", a, b),
             lambda: torch.einsum("bij,bjk->bik", at, bt))
    else:
        SKIPPED.append("einsum: not in this build")


def table() -> str:
    lines = [f"# Catalog ops on CUDA vs PyTorch ({gpu_name()}, torch {torch.__version__})", "",
             "Median ms per call (7 repeats after warm-up; bench/bench_catalog_cuda.py). "
             "ratio = torchlean / torch.", "",
             "| op | torchlean ms | torch ms | ratio | note |", "|---|---:|---:|---:|---|"]
    for name, a, b, r, note in ROWS:
        lines.append(f"| {name} | {a:.4f} | {b:.4f} | {r:.2f} | {note} |")
    if SKIPPED:
        lines += ["", "Skipped:", ""] + [f"- {s}" for s in SKIPPED]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="also write the markdown table here")
    ap.add_argument("--only", help="comma-separated sections: sorting,scans,accumulation,reads")
    args = ap.parse_args()
    assert tl.backend() == "cuda", f"needs the CUDA backend, got {tl.backend()}"
    tl.set_deterministic(False)
    sections = {"sorting": sorting, "scans": scans, "accumulation": accumulation, "reads": reads}
    for name in (args.only.split(",") if args.only else sections):
        print(f"[{name}]", flush=True)
        sections[name]()
    text = table()
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
