"""Real DFTs over the last axis, the FNO spectral convolution and the selective scan."""
from __future__ import annotations

import math
import operator

from .core import ShapeError, require_rank, shape


def rfft(s):
    """(..., n) -> (..., n//2 + 1, 2): packed [re, im] per bin k = 0..n/2."""
    s = shape(s)
    require_rank(s, 1, what="x")
    if s[-1] < 1:
        raise ShapeError("the transformed (last) axis must have length >= 1")
    return s[:-1] + (s[-1] // 2 + 1, 2)


def irfft(s, n):
    """(..., n//2 + 1, 2) -> (..., n)."""
    s = shape(s)
    n = operator.index(n)
    if n < 1:
        raise ShapeError(f"n must be >= 1, got {n}")
    require_rank(s, 2, what="x")
    if s[-2:] != (n // 2 + 1, 2):
        raise ShapeError(f"expected x of shape (..., {n // 2 + 1}, 2) for n={n}, got {s}")
    return s[:-2] + (n,)


def spectrum_rows(s):
    """Independent transforms of a packed spectrum (..., bins, 2)."""
    return math.prod(shape(s)[:-2])


def spectral_conv1d(x, w_re, w_im):
    """x (grid, width) or (B, grid, width); w_re, w_im (modes, width, width), modes <= grid//2+1."""
    x, w_re, w_im = shape(x), shape(w_re), shape(w_im)
    require_rank(x, 2, 3, "x")
    require_rank(w_re, 3, 3, "w_re")
    grid, width = x[-2], x[-1]
    if grid < 1 or width < 1:
        raise ShapeError(f"grid and width must be >= 1, got x {x}")
    modes = w_re[0]
    if w_re[1:] != (width, width) or w_im != w_re:
        raise ShapeError(f"expected w_re and w_im of shape (modes, {width}, {width}) (mode, in, out), "
                         f"got w_re {w_re} and w_im {w_im}")
    if not 1 <= modes <= grid // 2 + 1:
        raise ShapeError(f"modes must be in 1..grid//2+1 = {grid // 2 + 1} for grid {grid}, got {modes}")
    return x


def selective_scan(a, b, x, h0):
    """Diagonal SSM shapes. x (T, D) with h0 (D,), or batched x (B, T, D) with h0 (B, D).
    Each of a, b is (D,) (fixed), (T, D) (token-dependent, shared by the batch) or, batched
    only, (B, T, D) (token-dependent per sample). Returns the output shape (= x)."""
    x, h0 = shape(x), shape(h0)
    require_rank(x, 2, 3, "x")
    lead, D = x[:-2], x[-1]
    if h0 != lead + (D,):
        raise ShapeError(f"expected h0 of shape {lead + (D,)} for x {x}, got {h0}")
    for name, c in (("a", a), ("b", b)):
        scan_mode(c, x, name)
    return x


SCAN_CHUNK = 16   # steps per recomputed chunk: TL_SCAN_CHUNK in native/common/tl_internal.h


def scan_chunks(x):
    """Chunks of SCAN_CHUNK steps along the time axis of x (the last one may be shorter)."""
    return -(-shape(x)[-2] // SCAN_CHUNK)


def scan_checkpoints(x):
    """The states entering each chunk: x (T, D) -> (chunks, D); (B, T, D) -> (B, chunks, D)."""
    x = shape(x)
    require_rank(x, 2, 3, "x")
    return x[:-2] + (scan_chunks(x), x[-1])


def scan_mode(c, x, name="coefficient"):
    """How a coefficient is laid out: 0 = (D,), 1 = (T, D), 2 = (B, T, D)."""
    c, x = shape(c), shape(x)
    T, D = x[-2], x[-1]
    forms = {(D,): 0, (T, D): 1}
    if len(x) == 3:
        forms.setdefault(x, 2)
    if c not in forms:
        allowed = " or ".join(str(f) for f in forms)
        raise ShapeError(f"{name} must have shape {allowed} for x {x}, got {c}")
    return forms[c]
