"""torchlean.exact_version() names the exact arithmetic: a digest of exact-mode bits is pinned to
it, so bits that change without a new version fail here (bump EXACT_VERSION in
torchlean/exact_arith.py, note the change in README "Reproducibility levels", update PINNED)."""
import hashlib

import numpy as np

import torchlean as tl
from torchlean._generated import ops
from torchlean.buffer import AnyBuffer

# version -> sha256 of the exact-mode outputs below
PINNED = {3: "a9a7c067c9018a84f0099932437f919b7f687f23e41a09c6a8fe8ee3f1f36b0f"}


def _exact_bits():
    """exact-mode outputs of the transcendental kernels (and ops built on them) on fixed inputs:
    every 4099th float32 in [-30, 30], plus a Box-Muller draw, plus an exact GEMM over 3.5
    k chunks (rule 3's fold)"""
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
