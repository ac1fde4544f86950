"""Float32 bit patterns of the stub's pointwise, optimizer, RNG and normalize kernels, for
checking that a refactor changes no bit: run it before and after, then compare the two files.

  TORCHLEAN_BACKEND=stub python bench/bits_snapshot.py before.npz   # default mode
  TORCHLEAN_BACKEND=stub TORCHLEAN_EXACT=1 python bench/bits_snapshot.py before-exact.npz
  python bench/bits_snapshot.py --compare before.npz after.npz

Besides every registry test case (tests/test_parity.dump_all), each op runs on 100003 elements
(odd, above the stub's threading threshold) holding NaN, +-inf, +-0 and tiny and huge values.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

N = 100003
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-38, -1e-45, 3e38, -3e38, 88.7, -103.9])


def _data(seed, lo=-6.0, hi=6.0):
    x = np.random.default_rng(seed).uniform(lo, hi, N).astype(np.float32)
    x[::997] = SPECIAL[np.arange(len(x[::997])) % len(SPECIAL)]
    return x


def _finite(seed, shape, shift=0.0, scale=1.0):
    """standard normal float32 values times scale plus shift: no NaN or inf to hide a change"""
    x = np.random.default_rng(seed).standard_normal(shape) * scale + shift
    return x.astype(np.float32)


def _bits(a):
    f = np.asarray(a, np.float32)
    b = f.view(np.uint32).copy()
    b[np.isnan(f)] = 0x7FC00000
    return b


def large_cases():
    from torchlean import AnyBuffer, ops
    up = AnyBuffer.from_numpy
    x, y, g = _data(1), _data(2), _data(3)
    pos = np.abs(_data(4, 0.0, 4.0))
    with np.errstate(over="ignore", invalid="ignore"):
        s01 = (1.0 / (1.0 + np.exp(-_data(5).astype(np.float64)))).astype(np.float32)
    out = {}
    unary = ["relu", "abs", "sqrt", "reciprocal", "exp", "log", "gelu", "sigmoid", "tanh", "softplus",
             "erf", "gelu_erf"]
    for name in unary:
        out[name] = getattr(ops, name)(up(x))
    for name in ["relu", "abs", "sqrt", "gelu", "softplus", "erf", "gelu_erf"]:
        out[name + "_backward"] = getattr(ops, name + "_backward")(up(x), up(g))
    out["sigmoid_backward"] = ops.sigmoid_backward(up(s01), up(g))
    out["tanh_backward"] = ops.tanh_backward(up(s01), up(g))
    for name in ["add", "sub", "mul", "div", "maximum", "minimum", "pow"]:
        out[name] = getattr(ops, name)(up(x), up(y))
    out["pow_pos"] = ops.pow(up(pos), up(y))
    out["maximum_backward"] = ops.maximum_backward(up(x), up(np.where(np.arange(N) % 3 == 0, x, y)), up(g))
    out["minimum_backward"] = ops.minimum_backward(up(x), up(np.where(np.arange(N) % 3 == 0, x, y)), up(g))
    out["scale"] = ops.scale(up(x), c=0.3)
    out["axpy"] = ops.axpy(up(x), up(y), c=-1.7)
    out["clamp"] = ops.clamp(up(x), lo=-0.5, hi=2.0)
    out["clamp_backward"] = ops.clamp_backward(up(x), up(g), lo=-0.5, hi=2.0)
    out["safe_log"] = ops.safe_log(up(x), eps=1e-6)
    out["safe_log_backward"] = ops.safe_log_backward(up(x), up(g), eps=1e-6)
    out["softplus_beta"] = ops.softplus_beta(up(x), beta=1.5, threshold=20.0)
    out["pow_scalar"] = ops.pow_scalar(up(pos), p=1.7)
    xb, yb = x[:300 * 333].reshape(300, 333), y[:333].reshape(1, 333)
    for name in ["add", "sub", "mul", "div", "maximum", "minimum"]:
        out[name + "_bcast"] = getattr(ops, name)(up(xb), up(yb))
    gam, bet = _data(6)[:333], _data(7)[:333]
    out["affine_rows"] = ops.affine_rows(up(xb), up(gam), up(bet))
    xs = _data(8, -3, 3)[:300 * 333].reshape(300, 333)
    for name in ["softmax", "log_softmax"]:
        out[name] = getattr(ops, name)(up(xs))
    sm = ops.softmax(up(xs))
    out["softmax_backward"] = ops.softmax_backward(sm, up(g[:xs.size].reshape(xs.shape)))
    out["log_softmax_backward"] = ops.log_softmax_backward(ops.log_softmax(up(xs)),
                                                           up(g[:xs.size].reshape(xs.shape)))
    ln = ops.layer_norm(up(xs), up(gam), up(bet), eps=1e-5)
    for k, v in zip(["layer_norm", "layer_norm_xhat", "layer_norm_inv"], ln):
        out[k] = v
    lb = ops.layer_norm_backward(up(g[:xs.size].reshape(xs.shape)), ln[1], ln[2], up(gam))
    for k, v in zip(["ln_dx", "ln_dgamma", "ln_dbeta"], lb):
        out[k] = v
    xc = xs.reshape(10, 30, 333)
    bn = ops.batchnorm_channel_first(up(xc), up(gam[:10]), up(bet[:10]), eps=1e-5)
    for i, v in enumerate(bn):
        out[f"batchnorm_{i}"] = v
    bb = ops.batchnorm_channel_first_backward(up(g[:xc.size].reshape(xc.shape)), bn[1], bn[4], up(gam[:10]))
    for i, v in enumerate(bb):
        out[f"batchnorm_bwd_{i}"] = v
    # batchnorm where every 16 positions of a plane are contiguous (s % 16 == 0) and whole
    # blocks of 16 chunks exist: planes of 8x8 (chunks span 4 samples), 4x20 (chunks cross
    # samples mid-plane), 16x16 and 32x32, with a partial block after the whole ones
    for shape in [(70, 3, 8, 8), (60, 2, 4, 20), (20, 2, 16, 16), (6, 2, 32, 32),
                  (128, 20, 8, 8)]:
        xb4, gb4 = _finite(11, shape, 0.3), _finite(12, shape)
        xb4[0, 0, 0, 1] = np.nan   # channel 0 only; the others stay finite
        c4 = shape[1]
        key = "batchnorm_" + "x".join(map(str, shape))
        bn = ops.batchnorm_channel_first(up(xb4), up(gam[:c4]), up(bet[:c4]), eps=1e-5)
        for i, v in enumerate(bn):
            out[f"{key}_{i}"] = v
        bb = ops.batchnorm_channel_first_backward(up(gb4), bn[1], bn[4], up(gam[:c4]))
        for i, v in enumerate(bb):
            out[f"{key}_bwd_{i}"] = v
    # linear, skinny and square: outputs fewer than a vector, deep k, odd sizes
    for rows, fin, fout in [(128, 8192, 10), (7, 1000, 3), (33, 300, 17), (128, 512, 512),
                            (1, 700, 5), (130, 257, 1)]:
        key = f"linear_{rows}x{fin}x{fout}"
        xl, wl = _finite(13, (rows, fin)), _finite(14, (fout, fin), 0.0, 0.1)
        bl, gl = _finite(15, (fout,)), _finite(16, (rows, fout))
        xl[0, -1] = np.inf   # row 0 only
        out[key] = ops.linear(up(wl), up(bl), up(xl))
        out[key + "_dw"] = ops.linear_backward_w(up(gl), up(xl))
        out[key + "_dx"] = ops.linear_backward_x(up(gl), up(wl), up(xl))
    # attention, forward and backward: head dims 32 and 64 (whole 16-float vectors) and 17, T
    # below, at and above the 64-row query block and odd, causal, masked and plain; one case
    # with a NaN query and an infinite value
    for bh, t, e, causal, masked in [(3, 37, 32, True, False), (2, 64, 32, False, False),
                                     (4, 128, 32, True, False), (2, 130, 64, True, False),
                                     (2, 100, 64, False, False), (2, 77, 17, True, False),
                                     (2, 97, 32, False, True), (2, 150, 48, True, True)]:
        key = f"attention_{bh}x{t}x{e}" + ("_causal" if causal else "") + ("_mask" if masked else "")
        qa, ka, va, ga = (_finite(20 + i, (bh, t, e)) for i in range(4))
        if masked:
            qa[0, 3, 0], va[1, t - 2, 1] = np.nan, np.inf
        mask = (np.random.default_rng(24).uniform(size=(t, t)) < 0.7) if masked else None
        if masked:
            mask[5] = False   # a row with no allowed key
        o, lse = ops.attention(up(qa), up(ka), up(va), mask=mask, causal=causal)
        out[key], out[key + "_lse"] = o, lse
        for i, v in enumerate(ops.attention_backward(up(ga), up(qa), up(ka), up(va), o, lse,
                                                     mask=mask, causal=causal)):
            out[f"{key}_bwd_{i}"] = v
    tall = _data(9)[:2570 * 33].reshape(2570, 33)
    out["sum_to_tall"] = ops.sum_to(up(tall), shape=(33,))
    out["sum_to_wide"] = ops.sum_to(up(xs), shape=(333,))
    out["linear_backward_b_tall"] = ops.linear_backward_b(up(tall))
    out["reduce_sum_inner"] = ops.reduce_sum(up(_data(10)[:7 * 600 * 19].reshape(7, 600, 19)), axis=1)
    out["rand_uniform"] = ops.rand_uniform(n=N, key=12345)
    out["rand_normal"] = ops.rand_normal(n=N, key=777, mean=0.5, std=2.0)
    out["bernoulli"] = ops.bernoulli_mask(n=N, key=99, p=0.3)
    for name, kw in [("sgd", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01, nesterov=True)),
                     ("sgd_plain", dict(lr=0.1))]:
        p, b = up(x), up(y)
        for step in range(3):
            ops.sgd_step(p, up(g), b, first=step == 0, **kw)
        out[name + "_p"], out[name + "_buf"] = p, b
    for name, dec in [("adam", False), ("adamw", True)]:
        p, m, v = up(x), up(np.zeros(N, np.float32)), up(np.zeros(N, np.float32))
        for step in range(1, 4):
            ops.adam_step(p, up(g), m, v, lr=1e-3, weight_decay=0.01, decoupled=dec, step=step)
        out[name + "_p"], out[name + "_m"], out[name + "_v"] = p, m, v
    return {k: _bits(v.to_numpy() if hasattr(v, "to_numpy") else v) for k, v in out.items()}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", metavar="FILE.npz",
                   help="the snapshot to write, or with --compare the two to compare")
    p.add_argument("--compare", action="store_true", help="compare two snapshots bit for bit")
    args = p.parse_args(argv)
    if len(args.files) != (2 if args.compare else 1):
        p.error("give one FILE.npz to write, or --compare BEFORE.npz AFTER.npz")
    argv = args.files
    if args.compare:
        a, b = np.load(argv[0], allow_pickle=True), np.load(argv[1], allow_pickle=True)
        bad = [k for k in a.files if k != "__errors__" and (k not in b.files or
               not np.array_equal(_bits(a[k]), _bits(b[k])))]
        missing = [k for k in a.files if k not in b.files]
        print(f"{len(a.files)} arrays compared, {len(bad)} differ{': ' + ', '.join(bad[:20]) if bad else ''}"
              f"{'; missing ' + ', '.join(missing) if missing else ''}")
        return 1 if bad else 0
    import test_parity
    tmp = argv[0] + ".cases.npz"
    test_parity.dump_all(tmp)
    with np.load(tmp, allow_pickle=True) as z:
        data = {k: z[k] for k in z.files}
    Path(tmp).unlink()
    data.update({"large/" + k: v for k, v in large_cases().items()})
    np.savez(argv[0], **data)
    print(f"wrote {len(data)} arrays to {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
