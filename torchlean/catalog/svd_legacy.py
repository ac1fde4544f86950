"""torch.svd (and Tensor.svd), the older form of linalg.svd: (U, S, V) rather than Vh, and
some=True for the reduced factors (linalg.svd's full_matrices=False)."""
from __future__ import annotations

from torchlean.catalog import spectral

METHODS = ("svd",)
EXPORTS = {"torch": ("svd",)}


def svd(input, some=True, compute_uv=True):
    U, S, Vh = spectral.svd(input, full_matrices=not some)
    return U, S, Vh.mT
