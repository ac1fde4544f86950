"""torch.fft's real-valued names: fftshift and ifftshift move the zero-frequency term to the
centre and back (a roll by n // 2 per axis). The transforms themselves return complex
tensors, which torchlean (float32 only) does not represent."""
from __future__ import annotations

from torchlean.catalog import _common as c

EXPORTS = {"fft": ("fftshift", "ifftshift")}


def _shift(op, input, dim, sign):
    x = c.tensor(f"fft.{op}", input)
    dims = tuple(range(x.ndim)) if dim is None else \
        tuple(c.dims(f"fft.{op}", dim, x.ndim))
    if not dims:
        return x.clone()
    shifts = [sign * (x.shape[d] // 2) for d in dims]
    return x.roll(shifts, dims)


def fftshift(input, dim=None):
    return _shift("fftshift", input, dim, 1)


def ifftshift(input, dim=None):
    return _shift("ifftshift", input, dim, -1)
