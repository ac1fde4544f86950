"""An independent float32 fused multiply-add for the exact-mode tests, in NumPy float64.

fmaf(a, b, c) rounds a*b + c once. A float32 product is exact in float64, but float64 p + c
rounds, and rounding that again to float32 is wrong exactly when the float64 sum lands on a
float32 midpoint while the true sum is off it (double rounding). TwoSum gives the float64
rounding error e exactly, and e's sign decides those midpoint cases. Checked against the C
library's fmaf in tests/test_exact_math.py.
"""
import numpy as np


def fma32(a, b, c):
    """Elementwise correctly rounded float32 a*b + c (arrays broadcast)."""
    a, b, c = (np.asarray(v, dtype=np.float32) for v in (a, b, c))
    with np.errstate(over="ignore", invalid="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)      # exact
        c64 = c.astype(np.float64)
        s = p + c64
        bb = s - p
        e = (p - (s - bb)) + (c64 - bb)                        # s + e == p + c exactly
        r = s.astype(np.float32)
        r64 = r.astype(np.float64)
        toward = np.where(s > r64, np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
        other = np.nextafter(r, toward)
        o64 = other.astype(np.float64)
        mid = (s != r64) & (s == (r64 + o64) * 0.5) & (e != 0) & np.isfinite(e)
        upper = np.maximum(r, other)
        lower = np.minimum(r, other)
        return np.where(mid, np.where(e > 0, upper, lower), r).astype(np.float32)


# rule 3's k chunk for the exact GEMM (TL_EXACT_KCHUNK in native/common/tl_math.h)
EXACT_KCHUNK = 256


def fma_chain_reference(a, b, init=None):
    """One fused multiply-add chain per output of C = A B (A (m, k), B (k, n) float32):
    fma(a[i, k], b[k, j], acc) for k = 0..K-1 in order, acc starting at init (zeros by default).
    The order of the stub's tl_sgemm and of exact convolutions."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    m, k = a.shape
    n = b.shape[1]
    acc = np.zeros((m, n), np.float32) if init is None else np.array(init, np.float32, copy=True)
    for kk in range(k):
        acc = fma32(a[:, kk:kk + 1], b[kk:kk + 1, :], acc)
    return acc


def gemm_fma_reference(a, b, init=None, chunk=EXACT_KCHUNK):
    """The float32 chunked order (rule 3's exact GEMM up to exact_version 6): k in chunks of
    `chunk`, each chunk's partial one float32 fma chain (the first from init, the others from 0),
    the partials added left to right in float32. With K <= chunk it is fma_chain_reference, the
    order of exact convolutions' GEMMs (one float32 chain)."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    k = a.shape[1]
    tot = fma_chain_reference(a[:, :chunk], b[:chunk], init)
    for k0 in range(chunk, k, chunk):
        tot = tot + fma_chain_reference(a[:, k0:k0 + chunk], b[k0:k0 + chunk])  # float32 add
    return tot


def gemm_exact_reference(a, b, init=None, chunk=EXACT_KCHUNK):
    """Rule 3 for the exact GEMM (tl_gemm_exact_f32, exact_version 7), in NumPy float64: k in
    chunks of `chunk`; chunk c's partial is the float64 chain p = p + (double)a[i, k] (double)b[k, j]
    over its k's in increasing order (a float32 product is exact in float64, so this is the
    rule's fma((double)a, (double)b, p)), p_0 from init as double (zeros by default), every
    later partial from 0; the partials added left to right in float64, then rounded to float32
    once (nearest even). chunk=None: one float64 chain over all of k."""
    a = np.asarray(a, dtype=np.float32).astype(np.float64)
    b = np.asarray(b, dtype=np.float32).astype(np.float64)
    m, k = a.shape
    n = b.shape[1]
    chunk = max(k, 1) if chunk is None else chunk
    tot = None
    with np.errstate(over="ignore", invalid="ignore"):
        for k0 in range(0, max(k, 1), chunk):
            if k0 == 0 and init is not None:
                p = np.array(np.broadcast_to(np.asarray(init, np.float32), (m, n)), np.float64)
            else:
                p = np.zeros((m, n), np.float64)
            for kk in range(k0, min(k0 + chunk, k)):
                p = p + a[:, kk:kk + 1] * b[kk:kk + 1, :]
            tot = p if tot is None else tot + p
        return tot.astype(np.float32)
