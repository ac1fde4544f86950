"""Bit-for-bit check of the stub's spectral kernels between two library builds.

Each library runs in its own process (TORCHLEAN_LIB_DIR picks it) over the same random shapes
(batch 1..21, grid 1..1030 with odd and prime lengths, width 1..70, modes 1..grid//2+1; a
quarter of the cases hold NaN, +-inf and +-0, another quarter terms that cancel inside the
float64 sums, so that a change in the order of additions shows in the float32 outputs) and writes every output's float32 bits; --compare then
counts differing words (NaNs compared as NaN, whatever their payload).

  TORCHLEAN_LIB_DIR=/tmp/base OMP_NUM_THREADS=2 python bench/spectral_bits_check.py dump base.npz
  OMP_NUM_THREADS=2 python bench/spectral_bits_check.py dump new.npz
  python bench/spectral_bits_check.py --compare base.npz new.npz
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

FIXED = [(1, 1, 1, 1), (1, 2, 1, 2), (1, 3, 1, 2), (1, 32, 8, 8), (3, 32, 8, 17), (20, 1024, 64, 16),
         (2, 1030, 70, 516), (21, 1021, 9, 5), (1, 1024, 64, 16), (5, 997, 67, 499), (4, 64, 16, 33),
         (2, 8, 3, 5), (7, 7, 5, 4), (1, 1, 70, 1), (21, 2, 1, 1)]
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)


def shapes(n, seed):
    rng = np.random.default_rng(seed)
    out = list(FIXED)
    primes = [2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 251, 509, 1021]
    while len(out) < n:
        b = int(rng.integers(1, 22))
        g = int(rng.choice(primes)) if rng.random() < 0.3 else int(rng.integers(1, 1031))
        w = int(rng.integers(1, 71))
        m = int(rng.integers(1, g // 2 + 2))
        if b * g * w * (m + w) > 6e6:  # keep the old kernels' run time in bounds
            continue
        out.append((b, g, w, m))
    return out


def data(rng, shape, special):
    a = rng.standard_normal(shape).astype(np.float32)
    if special:
        f = a.reshape(-1)
        idx = rng.choice(f.size, size=max(1, f.size // 50), replace=False)
        f[idx] = rng.choice(SPECIAL, size=idx.size)
        zero = rng.choice(f.size, size=max(1, f.size // 20), replace=False)
        f[zero] = rng.choice(np.array([0.0, -0.0], np.float32), size=zero.size)
    return a


def cancelling(x, g, wr, wi, modes):
    """Make the float64 sums cancel, so that their order reaches the float32 bits: a 2^30 wave on
    bins above `modes` (the DFT's sums over t), then the test's terms for dW's sum over samples
    and the mixing's sums (tests/test_spectral_exact.cancelling_terms)."""
    from test_spectral_exact import cancelling_terms
    B, n, W = x.shape
    if modes <= n // 2:
        t = np.arange(n)[:, None]
        f = modes + (np.arange(W)[None, :] % (n // 2 - modes + 1))
        wave = (2.0 ** 30 * np.cos(2 * np.pi * f * t / n)).astype(np.float32)
        x += wave
        g += wave
    cancelling_terms(x, g, wr, wi)


def dump(path, n, seed):
    from torchlean import AnyBuffer, ops
    up = AnyBuffer.from_numpy
    out = {}
    for i, (b, g, w, m) in enumerate(shapes(n, seed)):
        rng = np.random.default_rng(1000 + i)
        special = i % 4 == 3
        x, gr = data(rng, (b, g, w), special), data(rng, (b, g, w), special)
        wr, wi = data(rng, (m, w, w), special), data(rng, (m, w, w), special)
        if i % 4 == 1:
            cancelling(x, gr, wr, wi, m)
        y = ops.spectral_conv1d_rfft(up(x), up(wr), up(wi))
        dx, dwr, dwi = ops.spectral_conv1d_rfft_backward(up(x), up(wr), up(wi), up(gr))
        key = f"{i}_{b}_{g}_{w}_{m}"
        for name, v in (("y", y), ("dx", dx), ("dwr", dwr), ("dwi", dwi)):
            out[f"{key}_{name}"] = v.to_numpy()
        # the plain transforms on (b * w) rows of length g
        rows = x.reshape(-1, g)
        out[f"{key}_rfft"] = ops.rfft(up(rows)).to_numpy()
        spec = ops.rfft(up(rows)).to_numpy()
        out[f"{key}_irfft"] = ops.irfft(up(spec), n=g).to_numpy()
    np.savez(path, **out)
    print(f"{path}: {len(out)} arrays")


def bits(a):
    f = np.asarray(a, np.float32)
    u = f.view(np.uint32).copy()
    u[np.isnan(f)] = 0x7FC00000
    return u


def compare(a, b):
    A, B = np.load(a), np.load(b)
    assert sorted(A.files) == sorted(B.files), "different case lists"
    bad = words = 0
    for k in A.files:
        d = int(np.count_nonzero(bits(A[k]) != bits(B[k])))
        words += A[k].size
        if d:
            bad += 1
            print(f"DIFFER {k}: {d} of {A[k].size} words")
    print(f"{len(A.files)} arrays, {words} words: {bad} arrays differ")
    return bad


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--compare", nargs=2)
    p.add_argument("cmd", nargs="?")
    p.add_argument("path", nargs="?")
    p.add_argument("--cases", type=int, default=120)
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    if a.compare:
        sys.exit(1 if compare(*a.compare) else 0)
    dump(a.path, a.cases, a.seed)


if __name__ == "__main__":
    main()
