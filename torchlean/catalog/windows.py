"""torch.signal.windows: the 11 window functions, computed on the host in float64 and rounded
once to float32. sym=False gives the periodic window (the first M points of the symmetric
window of M + 1 points), as torch and SciPy."""
from __future__ import annotations

import math

import numpy as np

from torchlean.session import default_session

EXPORTS = {"signal.windows": ("bartlett", "blackman", "cosine", "exponential", "gaussian",
                              "general_cosine", "general_hamming", "hamming", "hann", "kaiser",
                              "nuttall")}


def _window(op, M, sym, f, requires_grad=False):
    """f(n, N) for n = 0..N-1 where N = M (symmetric) or M + 1 (periodic), first M kept."""
    if isinstance(M, bool) or not isinstance(M, (int, np.integer)):
        raise TypeError(f"signal.windows.{op}: M must be an int, got {type(M).__name__}")
    if M < 0:
        raise ValueError(f"signal.windows.{op}: expected a non-negative window length, got {M}")
    if M <= 1:
        w = np.ones(M)
    else:
        n_pts = M if sym else M + 1
        w = f(np.arange(n_pts, dtype=np.float64), n_pts)[:M]
    return default_session().tensor(w.astype(np.float32), requires_grad=requires_grad)


def _cosine_sum(op, M, coeffs, sym, requires_grad):
    """sum_k (-1)^k a_k cos(2 pi k n / (N - 1))."""
    coeffs = [float(v) for v in coeffs]
    if not coeffs:
        raise ValueError(f"signal.windows.{op}: coefficients a must not be empty")
    return _window(op, M, sym, lambda n, N: sum(
        (-1) ** k * ak * np.cos(2 * math.pi * k * n / (N - 1)) for k, ak in enumerate(coeffs)),
        requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None,
                   requires_grad=False):
    return _cosine_sum("general_cosine", M, a, sym, requires_grad)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    return _cosine_sum("general_hamming", M, [alpha, 1.0 - alpha], sym, requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return _cosine_sum("hamming", M, [0.54, 0.46], sym, requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return _cosine_sum("hann", M, [0.5, 0.5], sym, requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return _cosine_sum("blackman", M, [0.42, 0.5, 0.08], sym, requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return _cosine_sum("nuttall", M, [0.3635819, 0.4891775, 0.1365995, 0.0106411], sym,
                       requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """1 - |2 n / (N - 1) - 1|: a triangle reaching 0 at both ends."""
    return _window("bartlett", M, sym, lambda n, N: 1.0 - np.abs(2.0 * n / (N - 1) - 1.0),
                   requires_grad)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sin(pi (n + 0.5) / N)."""
    return _window("cosine", M, sym, lambda n, N: np.sin(math.pi * (n + 0.5) / N),
                   requires_grad)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None,
             requires_grad=False):
    if std <= 0:
        raise ValueError(f"signal.windows.gaussian: std must be positive, got {std}")
    return _window("gaussian", M, sym,
                   lambda n, N: np.exp(-0.5 * ((n - (N - 1) / 2.0) / float(std)) ** 2),
                   requires_grad)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """exp(-|n - center| / tau), center (M - 1) / 2 by default (M / 2 when periodic)."""
    if tau <= 0:
        raise ValueError(f"signal.windows.exponential: tau must be positive, got {tau}")
    if sym and center is not None:
        raise ValueError("signal.windows.exponential: center must be None for symmetric windows")
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    if isinstance(M, (int, np.integer)) and M > 1:
        n = np.arange(M, dtype=np.float64)
        w = np.exp(-np.abs(n - float(center)) / float(tau))
        return default_session().tensor(w.astype(np.float32), requires_grad=requires_grad)
    return _window("exponential", M, sym, None, requires_grad)


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None,
           requires_grad=False):
    """I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)."""
    if beta < 0:
        raise ValueError(f"signal.windows.kaiser: beta must be non-negative, got {beta}")
    return _window("kaiser", M, sym, lambda n, N: np.i0(float(beta) * np.sqrt(
        np.clip(1.0 - (2.0 * n / (N - 1) - 1.0) ** 2, 0.0, None))) / np.i0(float(beta)),
        requires_grad)
