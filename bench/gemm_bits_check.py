"""The stub's default GEMM gives the same bits after a change of its blocking (tile shape,
panel widths, thread split): every product, on shapes around each blocking edge, dumped by two
builds and compared. Each output is one FMA chain in k order by contract (native/stub/linalg.c),
so any difference is a bug.

  TORCHLEAN_LIB_DIR=OLD python bench/gemm_bits_check.py dump old.npz   # per thread count
  python bench/gemm_bits_check.py dump new.npz
  python bench/gemm_bits_check.py compare old.npz new.npz
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

EDGES_M = [1, 2, 7, 8, 9, 15, 17, 33, 64, 65, 191, 192, 193, 250]
EDGES_K = [1, 3, 16, 17, 100, 383, 384, 385, 769]
EDGES_P = [10, 16, 17, 31, 32, 33, 47, 48, 49, 64, 95, 96, 97, 144, 289, 300, 513, 1921]


def shapes():
    rng = np.random.default_rng(0)
    out = [(m, k, p) for m in (8, 65, 193) for k in (17, 385) for p in EDGES_P]
    out += [(m, k, 48) for m in EDGES_M for k in EDGES_K]
    out += [(int(rng.choice(EDGES_M)), int(rng.choice(EDGES_K)), int(rng.choice(EDGES_P)))
            for _ in range(120)]
    return out


def dump(path: str) -> None:
    from torchlean.buffer import AnyBuffer
    from torchlean._generated import ops
    up = AnyBuffer.from_numpy
    out = {}
    for s, (m, k, p) in enumerate(shapes()):
        rng = np.random.default_rng(s)
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, p)).astype(np.float32)
        a[0, 0] = np.inf if s % 7 == 0 else a[0, 0]
        key = f"{m}x{k}x{p}_{s}"
        out[key + "_nn"] = ops.matmul(up(a), up(b)).to_numpy()
        out[key + "_nt"] = ops.matmul_t(up(a), up(np.ascontiguousarray(b.T)), trans_b=True).to_numpy()
        out[key + "_tn"] = ops.matmul_t(up(np.ascontiguousarray(a.T)), up(b), trans_a=True).to_numpy()
        w, bias = np.ascontiguousarray(b.T), rng.standard_normal(p).astype(np.float32)
        out[key + "_lin"] = ops.linear(up(w), up(bias), up(a)).to_numpy()
        g = rng.standard_normal((m, p)).astype(np.float32)
        out[key + "_dw"] = ops.linear_backward_w(up(g), up(a)).to_numpy()
        out[key + "_dx"] = ops.linear_backward_x(up(g), up(w), up(a)).to_numpy()
    np.savez(path, **out)
    print(f"wrote {len(out)} arrays to {path}")


def compare(a: str, b: str) -> int:
    A, B = np.load(a), np.load(b)
    assert sorted(A.files) == sorted(B.files)
    bad = [k for k in A.files if not np.array_equal(A[k].view(np.uint32), B[k].view(np.uint32))]
    print(f"{len(bad)} of {len(A.files)} arrays differ" + (": " + ", ".join(bad[:20]) if bad else ""))
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("dump", help="write this build's products").add_argument("file")
    c = sub.add_parser("compare", help="compare two dumps bit for bit")
    c.add_argument("a")
    c.add_argument("b")
    a = p.parse_args(argv)
    if a.cmd == "dump":
        dump(a.file)
        return 0
    return compare(a.a, a.b)


if __name__ == "__main__":
    sys.exit(main())
