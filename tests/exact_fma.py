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


def gemm_fma_reference(a, b, init=None):
    """Rule 3 for C = A B (A (m, k), B (k, n) float32): every output is fma(a[i, k], b[k, j], acc)
    for k = 0..K-1 in order, acc starting at init (zeros by default)."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    m, k = a.shape
    n = b.shape[1]
    acc = np.zeros((m, n), np.float32) if init is None else np.array(init, np.float32, copy=True)
    for kk in range(k):
        acc = fma32(a[:, kk:kk + 1], b[kk:kk + 1, :], acc)
    return acc
