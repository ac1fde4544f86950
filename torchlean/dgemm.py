"""torchlean.dgemm(a, b): float64 matrix product of host NumPy arrays.

A thin positional wrapper over the generated registry kernel `ops.dgemm(a=..., b=...)` (host
arrays are keyword attrs there). The stub multiplies with a blocked C loop, CUDA with cuBLAS
DGEMM through staging device memory; neither touches a tape or a Buffer.
"""
from __future__ import annotations

import numpy as np

from torchlean._generated import ops as _ops


def dgemm(a, b) -> np.ndarray:
    """a (m, k) @ b (k, n) -> float64 (m, n). Real numeric arrays are converted to float64;
    other dtypes raise TypeError, ranks other than 2 or mismatched inner dimensions raise
    ValueError naming the shapes. k = 0 gives zeros."""
    return _ops.dgemm(a=a, b=b)


__all__ = ["dgemm"]
