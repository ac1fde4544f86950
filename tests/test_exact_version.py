"""torchlean.exact_version() names the exact arithmetic: a digest of exact-mode bits is pinned to
it, so bits that change without a new version fail here (bump EXACT_VERSION in
torchlean/exact_arith.py, note the change in README "Reproducibility levels", update PINNED)."""
import hashlib

import numpy as np

import torchlean as tl
from torchlean._generated import ops
from torchlean.buffer import AnyBuffer

# version -> sha256 of the exact-mode outputs below
PINNED = {7: "e796839deca1b4d511540501a597a42826f63069a9076018569cb20861f163fe"}


def _exact_bits():
    """exact-mode outputs of the transcendental kernels (and ops built on them) on fixed inputs:
    every 4099th float32 in [-30, 30], plus a Box-Muller draw, plus exact GEMMs over 3.5
    k chunks (rule 3's fold; the second from C's prior value, on operands of every magnitude), plus the special functions there and at inputs versions 4, 5 and
    6 fixed, plus running sums over a row longer than 256 chunks"""
    lo, hi = np.float32(-30).view(np.uint32), np.float32(30).view(np.uint32)
    pos = np.arange(0, int(hi) + 1, 4099, dtype=np.uint32).view(np.float32)
    x = np.concatenate([pos, -pos[1:]]).astype(np.float32)
    assert lo > hi   # negative floats have the sign bit set
    xb, pb = AnyBuffer.from_numpy(x), AnyBuffer.from_numpy(np.abs(x) + np.float32(1e-3))
    rows = AnyBuffer.from_numpy(x[: x.size // 7 * 7].reshape(-1, 7))
    was = tl.set_exact(True)
    try:
        outs = [ops.exp(xb), ops.log(pb), ops.tanh(xb), ops.sigmoid(xb), ops.softplus(xb),
                ops.erf(xb), ops.gelu(xb), ops.softmax(rows), ops.rand_normal(n=4097, key=11)]
        g = x[: 7 * 900].reshape(7, 900)
        prod = AnyBuffer.from_numpy(np.zeros((7, 7), np.float32))
        ops.gemm_exact(AnyBuffer.from_numpy(g), AnyBuffer.from_numpy(g), prod, batch=1, m=7,
                       k=900, n=7, tb=True)
        outs.append(prod)
        # version 7: the exact GEMM's float64 chunk chains, on operands spread over all the
        # magnitudes and both signs (the GEMM above multiplies values below 1e-36 only)
        spread = x[np.arange(7 * 900) * 613 % x.size].reshape(7, 900)
        prod2 = AnyBuffer.from_numpy(np.arange(49, dtype=np.float32).reshape(7, 7))
        ops.gemm_exact(AnyBuffer.from_numpy(spread), AnyBuffer.from_numpy(spread), prod2, batch=1,
                       m=7, k=900, n=7, tb=True, accumulate=True)
        outs.append(prod2)
        # the special functions on the same inputs and on the inputs their fixes of version 4
        # changed (rounding midpoints, poles at x <= -2^23, 1 - erf's cancellation)
        fixed = np.array([0xB76C9F62, 0x401ADF85, 0x3B7C53AA, 0xF4800000, 0xA7DE86A9, 0x37D4FFFC,
                          0x40140A87, 0x4A4ECF8B, 0x403CA6ED, 0xC04BC9B2, 0x36530E01, 0xC0256D8B],
                         np.uint32).view(np.float32)
        sx = AnyBuffer.from_numpy(np.concatenate([x, fixed]))
        p01 = AnyBuffer.from_numpy(np.concatenate([
            np.linspace(0, 1, 4099, dtype=np.float32),
            np.array([0x3A1591DE, 0x39737BF8], np.uint32).view(np.float32)]))
        outs += [ops.erfc(sx), ops.erfcx(sx), ops.ndtr(sx), ops.log_ndtr(sx), ops.lgamma(sx),
                 ops.digamma(sx), ops.i1e(sx), ops.ndtri(p01), ops.erfinv(p01)]
        # version 5: K0, K1, e^x K0, e^x K1 and Ai at the inputs their fixes changed (K's series
        # below 2 in double-double, a midpoint of K0; Ai's phase and sum below -8 in
        # double-double), Ai far below -7e14, and spherical j0 beside them
        k_fixed = np.array([0x401D95C0, 0x39D6E5B5, 0x3FFD1A5C, 0x3EE5FF95, 0x2F865681,
                            0x591BFFA4, 0x662A85D6, 0xE62A85D6,
                            0xC07DF8DD, 0xC2DD9D7C],   # version 6: Ai's two midpoints
                           np.uint32).view(np.float32)
        kx = AnyBuffer.from_numpy(np.concatenate([np.abs(x) + np.float32(1e-3), k_fixed]))
        ai_far = -np.geomspace(7.3e14, 1.8e19, 4099).astype(np.float32)
        ax = AnyBuffer.from_numpy(np.concatenate([x, ai_far, k_fixed]))
        outs += [ops.modified_bessel_k0(kx), ops.modified_bessel_k1(kx),
                 ops.scaled_modified_bessel_k0(kx), ops.scaled_modified_bessel_k1(kx),
                 ops.airy_ai(ax), ops.spherical_bessel_j0(ax)]
        # version 6: a running sum over a row of 274 chunks (carries in the chunked order)
        long_row = AnyBuffer.from_numpy(np.resize(x, 70001).reshape(1, -1))
        outs += [ops.cumsum_rows(long_row), ops.cumsum_rows(long_row, reverse=1)]
        data = b"".join(o.to_numpy().tobytes() for o in outs)
    finally:
        tl.set_exact(was)
    return data


def test_exact_version_is_an_int_in_the_public_api():
    assert isinstance(tl.exact_version(), int)
    assert "exact_version" in tl.__all__
    assert tl.exact_version() in PINNED


def test_exact_bits_match_the_digest_pinned_to_this_version():
    digest = hashlib.sha256(_exact_bits()).hexdigest()
    assert PINNED[tl.exact_version()] == digest, (
        f"exact-mode bits changed (digest {digest}): bump EXACT_VERSION and pin the new digest")
