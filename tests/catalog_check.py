"""The catalog tests' one check: a torchlean op against an independent float64 NumPy reference
(forward), and its gradient against central differences of that reference in float64; when
torch imports, also the forward against torch (an addition, never the only reference)."""
from __future__ import annotations

import numpy as np

import torchlean as tl

try:                                   # an extra reference only
    import torch
except ImportError:                    # pragma: no cover - torch is optional
    torch = None


def _parts(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v, np.float64)


def central_difference(f, arrays, i, h=1e-6):
    """d f / d arrays[i] of a scalar float64 function, by central differences."""
    a = arrays[i]
    grad = np.zeros_like(a)
    for k in np.ndindex(a.shape):
        old = a[k]
        a[k] = old + h
        up = f(arrays)
        a[k] = old - h
        down = f(arrays)
        a[k] = old
        grad[k] = (up - down) / (2 * h)
    return grad


def check(tl_fn, np_fn, *arrays, grad=True, rtol=1e-5, atol=1e-6, grad_tol=(2e-3, 2e-4),
          torch_fn=None, seed=0):
    """tl_fn(*tensors) == np_fn(*float64 arrays); gradients of sum(out * g) for a fixed
    random g match central differences of the reference."""
    arrays = [np.asarray(a, np.float32).astype(np.float64) for a in arrays]
    ts = [tl.tensor(a.astype(np.float32), requires_grad=grad) for a in arrays]
    out = _parts(tl_fn(*ts))
    ref = _parts(np_fn(*[a.copy() for a in arrays]))
    assert len(out) == len(ref), (len(out), len(ref))
    for o, r in zip(out, ref):
        r = np.asarray(r, np.float64)
        assert tuple(o.shape) == r.shape, (tuple(o.shape), r.shape)
        np.testing.assert_allclose(_host(o), r, rtol=rtol, atol=atol, equal_nan=True)
    if torch_fn is not None and torch is not None:
        tout = _parts(torch_fn(*[torch.tensor(a.astype(np.float32)) for a in arrays]))
        for o, t in zip(out, tout):
            np.testing.assert_allclose(_host(o), t.detach().numpy().astype(np.float64),
                                       rtol=max(rtol, 1e-5), atol=max(atol, 1e-5),
                                       equal_nan=True)
    if not grad:
        return out
    rng = np.random.default_rng(seed)
    # a non-finite output (a fully masked row's NaN) takes no part in the gradient check
    gs = [np.where(np.isfinite(r), rng.standard_normal(np.shape(r)), 0.0) for r in ref]
    loss = None
    for o, g in zip(out, gs):
        term = (o * tl.tensor(g.astype(np.float32))).sum()
        loss = term if loss is None else loss + term
    loss.backward()

    def scalar(xs):
        return sum(float(np.where(g != 0, np.asarray(r, np.float64) * g, 0.0).sum())
                   for r, g in zip(_parts(np_fn(*[x.copy() for x in xs])), gs))

    for i, t in enumerate(ts):
        num = central_difference(scalar, [a.copy() for a in arrays], i)
        got = t.grad
        got = np.zeros_like(num) if got is None else np.asarray(got, np.float64)
        np.testing.assert_allclose(got, num, rtol=grad_tol[0], atol=grad_tol[1],
                                   err_msg=f"gradient of input {i}")
    return out


def rand(*shape, seed=0, low=None):
    """Standard normal float32 values (|x| >= low when low is given, away from kinks)."""
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if low is not None:
        a = np.where(np.abs(a) < low, np.sign(a + 1e-9) * low + a, a).astype(np.float32)
    return a
