"""Attention forward and backward bit patterns on many shapes and edge values, for checking that a
change to the stub's attention kernels changes no bit: write with one library, then another
(TORCHLEAN_LIB_DIR), then compare.

    python bench/attn_bits_stress.py OUT.npz
    python bench/attn_bits_stress.py --compare A.npz B.npz

Cases: head dims 16/17/32/48/64, T from 1 to 150 (multiples of 16 and not), causal, plain,
masked (random, banded, with fully blocked rows), causal + masked, a mask whose
rows restart short in every 64-row block; inputs normal, all-zero
queries (every score +-0, so the row max is a signed zero), signed zeros, NaN and inf entries,
huge scores (exp underflow), tiny values (subnormal products).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def cases():
    rng = np.random.default_rng(1234)
    out = []
    for d in (16, 17, 32, 48, 64):
        for t in (1, 7, 16, 33, 37, 64, 65, 97, 128, 150):
            for kind in ("causal", "plain", "masked", "causal+mask", "stair"):
                for vals in ("normal", "zeroq", "signed0", "special", "huge", "tiny", "negzero",
                             "zeroscore"):
                    if d in (17, 48) and vals not in ("normal", "special"):
                        continue
                    if kind == "stair" and vals not in ("normal", "special", "negzero"):
                        continue
                    out.append((len(out), d, t, kind, vals, int(rng.integers(1 << 30))))
    return out


def inputs(d, t, kind, vals, seed):
    rng = np.random.default_rng(seed)
    bh = 3
    q, k, v, g = (rng.standard_normal((bh, t, d)).astype(np.float32) for _ in range(4))
    if vals == "zeroq":
        q[:] = 0
        q[1] = -0.0
    elif vals == "signed0":
        q[:, ::2] = 0
        k[rng.random(k.shape) < 0.5] = -0.0
        v[rng.random(v.shape) < 0.5] = -0.0
        g[rng.random(g.shape) < 0.3] = -0.0
    elif vals == "special":
        for a in (q, k, v, g):
            idx = rng.integers(0, a.size, max(1, a.size // 200))
            a.flat[idx] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32),
                                     len(idx))
    elif vals == "huge":
        q *= 30
        k *= 30
    elif vals == "negzero":   # products that underflow to -0: outputs -0 or +0 by the last terms
        # scores fall with the key (key 0 has probability 1, the others below 1/2), V at key 0 is
        # -0 and elsewhere -+1e-45, so every product after key 0 rounds to a signed zero
        q[:] = 0
        q[:, :, 0] = 1
        k[:] = 0
        k[:, :, 0] = -10.0 * (1 + np.arange(t, dtype=np.float32))
        tiny = np.float32(1e-45)
        v[:] = -tiny
        v[rng.random(v.shape) < 0.05] = tiny
        v[:, 0] = -0.0
        g[:] = rng.choice(np.array([-tiny, tiny, 0.0], np.float32), g.shape)
    elif vals == "zeroscore":   # every product underflows: scores +0 and -0, the max a signed zero
        q[:] = np.sign(q) * np.float32(1e-30)
        k[:] = np.sign(k) * np.float32(1e-30)
    elif vals == "tiny":
        v *= np.float32(1e-30)
        q *= 10
        k *= 10
        g *= np.float32(1e-20)
    kw = {"causal": kind.startswith("causal")}
    if kind == "stair":   # row i attends keys j < 2 (i mod 64 + 1): every query block starts short
        kw["mask"] = np.arange(t)[None, :] < 2 * (np.arange(t)[:, None] % 64 + 1)
        if vals == "negzero" and t > 96:
            # dV of keys 64.. may be -0 after rows 0..63; rows 64..95 (which never reach those
            # keys) add +0 terms that make it +0, rows 96.. add -0 terms that keep what they find
            g[:, 64:96] = 0.0
            g[:, 96:128] = -0.0
    if "mask" in kind:
        m = rng.random((t, t)) < 0.6
        if t > 3:
            m[t // 3] = False
        kw["mask"] = m
    return q, k, v, g, kw


def write(path):
    import torchlean as tl
    from torchlean._generated import ops
    res = {}
    for i, d, t, kind, vals, seed in cases():
        q, k, v, g, kw = inputs(d, t, kind, vals, seed)
        Q, K, V, G = (tl.AnyBuffer.from_numpy(a) for a in (q, k, v, g))
        o, lse = ops.attention(Q, K, V, **kw)
        dq, dk, dv = ops.attention_backward(G, Q, K, V, o, lse, **kw)
        for name, b in (("o", o), ("lse", lse), ("dq", dq), ("dk", dk), ("dv", dv)):
            key = f"{i}_{d}_{t}_{kind}_{vals}_{name}"
            res[key] = np.asarray(b.to_numpy(), np.float32).view(np.uint32)
    np.savez(path, **res)
    print(f"wrote {len(res)} arrays to {path}")


def compare(a, b):
    A, B = np.load(a), np.load(b)
    bad = [k for k in A.files if not np.array_equal(A[k], B[k])]
    for k in bad[:20]:
        print("differs:", k)
    print(f"{len(A.files)} arrays compared, {len(bad)} differ")
    return 1 if bad else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", metavar="FILE.npz",
                   help="the snapshot to write, or with --compare the two to compare")
    p.add_argument("--compare", action="store_true", help="compare two snapshots bit for bit")
    a = p.parse_args(argv)
    if a.compare:
        if len(a.files) != 2:
            p.error("--compare takes two files")
        return compare(*a.files)
    if len(a.files) != 1:
        p.error("write one snapshot at a time")
    write(a.files[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
