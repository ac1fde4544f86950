"""Random programs of views and in-place writes, compared with NumPy (whose basic views share
memory as torch's do) after every step: the base and every view taken so far, 200 seeds."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl


def _view_ops(rng, shape):
    """One random view (torchlean fn, NumPy fn) valid for `shape`, or None."""
    nd = len(shape)
    ops = []
    if nd >= 2:
        a, b = (int(v) for v in rng.choice(nd, 2, replace=False))
        ops.append((lambda x: x.transpose(a, b), lambda y: y.swapaxes(a, b)))
        perm = [int(p) for p in rng.permutation(nd)]
        ops.append((lambda x: x.permute(*perm), lambda y: y.transpose(perm)))
        ops.append((lambda x: x.mT, lambda y: np.swapaxes(y, -2, -1)))
        if shape[0] > 0 and shape[1] > 0:
            ops.append((lambda x: x.diagonal(), lambda y: _np_diag2(y)))
    if nd >= 1 and shape[0] > 0:
        d = int(rng.integers(nd))
        n = shape[d]
        i = int(rng.integers(-n, n)) if n else 0
        if n:
            ops.append((lambda x: x.select(d, i),   # (..., i, ...): a 0-d NumPy view, not a scalar
                        lambda y: y[(slice(None),) * d + (i, Ellipsis)]))
        st = int(rng.integers(0, n + 1))
        ln = int(rng.integers(0, n - st + 1))
        ops.append((lambda x: x.narrow(d, st, ln), lambda y: y[(slice(None),) * d
                                                            + (slice(st, st + ln),)]))
        step = int(rng.integers(1, 3))
        ops.append((lambda x: x[(slice(None),) * d + (slice(1, None, step),)],
                    lambda y: y[(slice(None),) * d + (slice(1, None, step),)]))
    if nd < 4:
        u = int(rng.integers(nd + 1))
        ops.append((lambda x: x.unsqueeze(u), lambda y: np.expand_dims(y, u)))
    if 1 in shape:
        ops.append((lambda x: x.squeeze(), lambda y: y.squeeze()))
    return ops[int(rng.integers(len(ops)))] if ops else None


def _np_diag2(y):
    """A writable NumPy view of the diagonal of axes 0 and 1, last axis, as torch's."""
    n = min(y.shape[0], y.shape[1])
    shape = y.shape[2:] + (n,)
    strides = y.strides[2:] + (y.strides[0] + y.strides[1],)
    return np.lib.stride_tricks.as_strided(y, shape, strides)


def _write(rng, t, a):
    """One random in-place write applied to torchlean view t and NumPy view a."""
    k = int(rng.integers(6))
    c = float(np.float32(rng.standard_normal()))
    if k == 0:
        t.add_(c)
        a += np.float32(c)
    elif k == 1:
        t.mul_(c)
        a *= np.float32(c)
    elif k == 2:
        t.fill_(c)
        a[...] = c
    elif k == 3:
        t.zero_()
        a[...] = 0
    elif k == 4:
        t.clamp_(-abs(c), abs(c))
        np.clip(a, -abs(c), abs(c), out=a)
    else:
        v = rng.standard_normal(a.shape).astype(np.float32)
        t.copy_(tl.tensor(v))
        a[...] = v


@pytest.mark.parametrize("seed", range(200))
def test_random_views_and_writes_match_numpy(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 4))))
    ref = rng.standard_normal(shape).astype(np.float32)
    base = tl.tensor(ref)
    held = [(base, ref)]
    for _ in range(8):
        t, a = held[int(rng.integers(len(held)))]
        if rng.random() < 0.6:
            op = _view_ops(rng, tuple(a.shape))
            if op is not None:
                held.append((op[0](t), op[1](a)))
        else:
            _write(rng, t, a)
        for tv, av in held:
            assert tuple(tv.shape) == av.shape
            np.testing.assert_array_equal(tv.numpy(), av, err_msg=f"seed {seed}")
