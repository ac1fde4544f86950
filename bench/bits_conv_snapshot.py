"""Float32 bit patterns of the stub's convolution, batchnorm and pooling kernels at the CIFAR
models' shapes (bits_snapshot.py covers the registry's small cases), for checking that a speed
change to those kernels changes no bit in any mode or thread count:

  TORCHLEAN_BACKEND=stub OMP_NUM_THREADS=2 python bench/bits_conv_snapshot.py before.npz
  TORCHLEAN_BACKEND=stub TORCHLEAN_EXACT=1 python bench/bits_conv_snapshot.py before-exact.npz
  python bench/bits_snapshot.py --compare before.npz after.npz

Inputs hold a few NaN, inf and signed zeros besides normal values; NaNs are compared as one
pattern (bits_snapshot._bits).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bits_snapshot import _bits  # noqa: E402

# (cin, cout, side, stride, k, pad, batch): VGG and ResNet layers, odd sizes, a transposed-like
# 1x1, a batch that is not a multiple of the thread count; channel counts that leave a
# micro-tile's last panel one, two or three vectors wide
CONVS = [(3, 64, 32, 1, 3, 1, 8), (64, 64, 32, 1, 3, 1, 3), (64, 128, 16, 1, 3, 1, 5),
         (32, 64, 32, 2, 3, 1, 4), (32, 64, 32, 2, 1, 0, 4), (5, 7, 13, 1, 3, 1, 3),
         (7, 3, 9, 2, 3, 0, 1), (17, 9, 11, 1, 5, 2, 2), (128, 128, 8, 1, 3, 1, 9),
         (40, 40, 10, 1, 3, 1, 3), (36, 100, 8, 2, 3, 1, 2)]
# (input, kernel, stride, padding) of N-D convolutions
ND = [((3, 4, 37), (5, 4, 5), 2, 3), ((2, 3, 7, 6, 5), (4, 3, 3, 3, 3), 1, 1),
      ((2, 3, 9, 8, 7), (2, 3, 3, 2, 3), 2, 0)]
BNS = [(8, 32, 32, 32), (5, 64, 16, 16), (3, 7, 1, 301), (1, 3, 50, 100)]   # (N, C, H, W)


def _data(rng, shape, special=True):
    x = rng.standard_normal(shape).astype(np.float32)
    if special and x.size > 50:
        f = x.reshape(-1)
        f[7], f[-3], f[x.size // 2] = np.inf, -0.0, 0.0
        f[x.size // 3] = np.nan
    return x


def cases():
    from torchlean import AnyBuffer, ops
    up = AnyBuffer.from_numpy
    rng = np.random.default_rng(5)
    out = {}
    for i, (cin, cout, side, stride, k, pad, b) in enumerate(CONVS):
        for special in (False, True):
            x = _data(rng, (b, cin, side, side), special)
            w = _data(rng, (cout, cin, k, k), False) * 0.2
            bias = _data(rng, (cout,), False)
            y = ops.conv(up(w), up(bias), up(x), stride=stride, padding=pad)
            yv = y.to_numpy()
            g = _data(rng, yv.shape, special)
            res = ops.conv_backward(up(w), up(x), up(g), stride=stride, padding=pad)
            out[f"conv{i}_{special}_y"] = yv
            for j, v in enumerate(res):
                out[f"conv{i}_{special}_d{j}"] = v.to_numpy()
    for i, (cin, cout, side, stride, k, pad, b) in enumerate(CONVS[5:]):   # transposed
        x = _data(rng, (b, cin, side, side))
        w = _data(rng, (cin, cout, k, k), False) * 0.2
        bias = _data(rng, (cout,), False)
        yv = ops.conv_transpose(up(w), up(bias), up(x), stride=stride, padding=pad).to_numpy()
        g = _data(rng, yv.shape)
        out[f"convT{i}_y"] = yv
        for j, v in enumerate(ops.conv_transpose_backward(up(w), up(x), up(g), stride=stride,
                                                          padding=pad)):
            out[f"convT{i}_d{j}"] = v.to_numpy()
    for i, (xs, ws, stride, pad) in enumerate(ND):          # 1-D and 3-D, both directions
        x = _data(rng, xs)
        w = _data(rng, ws, False) * 0.3
        bias = _data(rng, (ws[0],), False)
        yv = ops.conv(up(w), up(bias), up(x), stride=stride, padding=pad).to_numpy()
        out[f"convnd{i}_y"] = yv
        g = _data(rng, yv.shape)
        for j, v in enumerate(ops.conv_backward(up(w), up(x), up(g), stride=stride, padding=pad)):
            out[f"convnd{i}_d{j}"] = v.to_numpy()
        wt = _data(rng, (ws[1], ws[0]) + ws[2:], False) * 0.3
        yt = ops.conv_transpose(up(wt), up(bias), up(x[:, :ws[1]]), stride=stride, padding=pad).to_numpy()
        out[f"convTnd{i}_y"] = yt
        gt = _data(rng, yt.shape)
        for j, v in enumerate(ops.conv_transpose_backward(up(wt), up(x[:, :ws[1]].copy()), up(gt),
                                                          stride=stride, padding=pad)):
            out[f"convTnd{i}_d{j}"] = v.to_numpy()
    for i, (n, c, h, w_) in enumerate(BNS):
        x = _data(rng, (n, c, h, w_)) * 3 + 1
        gam, bet = _data(rng, (c,), False), _data(rng, (c,), False)
        bn = ops.batchnorm_channel_first(up(x), up(gam), up(bet), eps=1e-5)
        for j, v in enumerate(bn):
            out[f"bn{i}_{j}"] = v.to_numpy()
        g = _data(rng, x.shape)
        for j, v in enumerate(ops.batchnorm_channel_first_backward(up(g), bn[1], bn[4], up(gam))):
            out[f"bn{i}_bwd{j}"] = v.to_numpy()
    return {k: _bits(v) for k, v in out.items()}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", nargs=1, metavar="FILE.npz", help="the snapshot to write (compare two "
                   "with bits_snapshot.py --compare)")
    path = p.parse_args(argv).file[0]
    snap = cases()
    np.savez_compressed(path, **snap)
    print(f"{len(snap)} arrays -> {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
