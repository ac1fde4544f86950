"""The max-pool input gradient, bit for bit against a float32 NumPy loop of its documented rule
(windows in row-major output order, each window's first row-major max from -FLT_MAX, the first
NaN winning, padding never winning, each window's grad added onto its max's cell), over 1-D to
4-D geometries with overlaps, gaps, padding, odd and size-1 sizes, ties, NaN and infinities; and
against central finite differences of the forward, and torch where installed."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import torchlean as tl
from torchlean import AnyBuffer, ops

F32_MAX = np.float32(np.finfo(np.float32).max)


def _bits(a):
    """The float32 bits, every NaN as one pattern: which cell gets which gradient is the rule;
    a NaN's payload is not (CUDA writes 0x7fffffff where the C stub keeps 0x7fc00000)."""
    a = np.array(a, np.float32)
    a[np.isnan(a)] = np.nan
    return a.view(np.uint32)


def _out_len(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def _grad_ref(x, g, k, s, p):
    """float32 input gradient of max pooling over the trailing len(k) axes."""
    r = len(k)
    sp = x.shape[-r:]
    outs = tuple(_out_len(n, *a) for n, a in zip(sp, zip(k, s, p)))
    xs = x.reshape((-1,) + sp)
    gs = g.reshape((-1,) + outs)
    dx = np.zeros(xs.shape, np.float32)
    for pl in range(xs.shape[0]):
        for o in itertools.product(*(range(n) for n in outs)):
            best, arg = -F32_MAX, None
            for t in itertools.product(*(range(n) for n in k)):
                cell = tuple(oi * si + ti - pi for oi, si, ti, pi in zip(o, s, t, p))
                if any(c < 0 or c >= n for c, n in zip(cell, sp)):
                    continue                  # padding: -inf, never wins
                v = xs[(pl,) + cell]
                if v > best or (np.isnan(v) and not np.isnan(best)):
                    best, arg = v, cell
            if arg is not None:
                dx[(pl,) + arg] = np.float32(dx[(pl,) + arg] + gs[(pl,) + o])
    return dx.reshape(x.shape)


def _data(rng, shape, specials=True):
    # small integers: many ties; then NaN, infinities and -FLT_MAX sprinkled in
    x = rng.integers(-3, 4, shape).astype(np.float32)
    if specials:
        flat = x.reshape(-1)
        for v in (np.nan, np.inf, -np.inf, -F32_MAX, -0.0):
            flat[rng.integers(0, flat.size, max(1, flat.size // 40))] = v
    return x


CASES = [  # (input shape, kernel, stride, padding)
    ((2, 3, 7, 9), (3, 3), (2, 2), (1, 1)),     # overlapping windows, padding, odd sizes
    ((2, 2, 8, 8), (2, 2), (2, 2), (0, 0)),     # the CNN case
    ((1, 2, 5, 6), (2, 3), (1, 2), (1, 1)),
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0)),     # size 1
    ((1, 2, 9, 10), (2, 2), (3, 3), (0, 0)),    # gaps: cells in no window
    ((3, 1, 4, 17), (3, 1), (1, 1), (1, 0)),
    ((2, 3, 11), (3,), (2,), (1,)),             # 1-D
    ((1, 2, 4, 5, 3), (2, 2, 3), (2, 1, 2), (0, 1, 1)),   # 3-D
    ((1, 1, 3, 3, 3, 4), (2, 2, 2, 2), (1, 1, 2, 1), (0, 1, 0, 1)),   # 4-D
    ((4, 16, 20, 21), (3, 3), (2, 2), (1, 1)),  # enough planes for several threads
    ((3, 5, 9, 7), (2, 2), (2, 2), (0, 0)),     # 2 x 2 fast path: a last row and column unused
    ((64, 16, 8, 8), (2, 2), (2, 2), (0, 0)),   # ... a digits CNN's batch, over threads
    ((2, 3, 2, 3), (2, 2), (2, 2), (0, 0)),     # ... one window a plane
    ((2, 3, 16, 17), (2, 2), (2, 2), (0, 0)),   # ... 8 windows a row: two rows a vector
    ((1, 2, 6, 16), (2, 2), (2, 2), (0, 0)),    # ... an odd number of such rows
    ((1, 2, 33, 40), (2, 2), (2, 2), (0, 0)),   # ... 20 windows a row: one row a vector, then mixed
    ((3, 7, 4, 4), (2, 2), (2, 2), (0, 0)),     # ... small planes: 16 windows across planes, a tail
    ((5, 3, 2, 2), (2, 2), (2, 2), (0, 0)),     # ... one window a plane, 15 in all
    ((1, 3, 4, 4), (2, 2), (2, 2), (0, 0)),     # ... fewer windows than a vector
]


@pytest.mark.parametrize("shape,k,s,p", CASES)
def test_max_pool_backward_bits_match_the_rule(shape, k, s, p):
    rng = np.random.default_rng(len(shape) * 100 + sum(shape))
    x = _data(rng, shape)
    outs = tuple(_out_len(n, *a) for n, a in zip(shape[-len(k):], zip(k, s, p)))
    g = rng.standard_normal(shape[:-len(k)] + outs).astype(np.float32)
    g.reshape(-1)[:: 7] = -0.0
    g.reshape(-1)[3:: 29] = np.nan
    rank = 2 if len(k) == 2 else 0
    # exact mode: the rule's order on every backend (CUDA's default mode may add overlapping
    # windows' gradients in another order, a last-bit difference)
    prev = tl.is_exact()
    tl.set_exact(True)
    try:
        dx = ops.max_pool_backward(AnyBuffer.from_numpy(x), AnyBuffer.from_numpy(g),
                                   kernel_size=list(k), stride=list(s), padding=list(p),
                                   rank=rank).to_numpy()
    finally:
        tl.set_exact(prev)
    want = _grad_ref(x, g, k, s, p)
    assert dx.shape == x.shape
    np.testing.assert_array_equal(_bits(dx), _bits(want))


def test_windows_of_minus_inf_only_pass_no_gradient():
    """The running best starts at -FLT_MAX: a window holding only -inf (or -FLT_MAX) has no
    max, as in the forward."""
    x = np.full((1, 1, 4, 4), -np.inf, np.float32)
    x[0, 0, 0, 0], x[0, 0, 3, 3] = 1.0, -F32_MAX
    g = np.array([[[[2.0, 3.0], [5.0, 7.0]]]], np.float32)
    dx = ops.max_pool_backward(AnyBuffer.from_numpy(x), AnyBuffer.from_numpy(g), kernel_size=[2, 2],
                               stride=[2, 2], rank=2).to_numpy()
    want = np.zeros_like(x)
    want[0, 0, 0, 0] = 2.0
    np.testing.assert_array_equal(_bits(dx), _bits(want))


def test_max_pool_gradient_matches_finite_differences():
    rng = np.random.default_rng(11)
    shape, k, s, p = (2, 2, 7, 6), [3, 2], [2, 2], [1, 0]
    # distinct values a unit apart: a 1e-2 step never changes a window's argmax
    x = (rng.permutation(int(np.prod(shape))).reshape(shape)).astype(np.float32)
    xb = AnyBuffer.from_numpy(x)
    y = ops.max_pool2d(xb, kernel_size=k, stride=s, padding=p).to_numpy()
    g = rng.standard_normal(y.shape).astype(np.float32)
    dx = ops.max_pool_backward(xb, AnyBuffer.from_numpy(g), kernel_size=k, stride=s, padding=p,
                               rank=2).to_numpy()
    eps = 1e-2
    fd = np.zeros(x.size)
    for i in range(x.size):
        vals = []
        for sign in (1, -1):
            xp = x.copy().reshape(-1)
            xp[i] += sign * eps
            yp = ops.max_pool2d(AnyBuffer.from_numpy(xp.reshape(shape)), kernel_size=k, stride=s,
                                padding=p).to_numpy()
            vals.append(float((yp.astype(np.float64) * g).sum()))
        fd[i] = (vals[0] - vals[1]) / (2 * eps)
    np.testing.assert_allclose(dx.reshape(-1), fd, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape,k,s,p", [((3, 5, 16, 16), 2, 2, 0), ((2, 4, 13, 11), 3, 2, 1)])
def test_max_pool_gradient_matches_torch(shape, k, s, p):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)        # no ties: one argmax everywhere
    xt = torch.from_numpy(x).requires_grad_()
    y = torch.nn.functional.max_pool2d(xt, k, s, p)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(torch.from_numpy(g))
    dx = ops.max_pool_backward(AnyBuffer.from_numpy(x), AnyBuffer.from_numpy(g), kernel_size=[k, k],
                               stride=[s, s], padding=[p, p], rank=2).to_numpy()
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-6, atol=1e-6)


def _forward_ref(x, k, s, p):
    """float32 max pooling by the rule: each window's first row-major max from -FLT_MAX, the
    first NaN winning, padding never winning (an all -inf window gives -FLT_MAX)."""
    r = len(k)
    sp = x.shape[-r:]
    outs = tuple(_out_len(n, *a) for n, a in zip(sp, zip(k, s, p)))
    xs = x.reshape((-1,) + sp)
    y = np.empty((xs.shape[0],) + outs, np.float32)
    for pl in range(xs.shape[0]):
        for o in itertools.product(*(range(n) for n in outs)):
            best = -F32_MAX
            for t in itertools.product(*(range(n) for n in k)):
                cell = tuple(oi * si + ti - pi for oi, si, ti, pi in zip(o, s, t, p))
                if any(c < 0 or c >= n for c, n in zip(cell, sp)):
                    continue
                v = xs[(pl,) + cell]
                if v > best or (np.isnan(v) and not np.isnan(best)):
                    best = v
            y[(pl,) + o] = best
    return y.reshape(x.shape[:-r] + outs)


@pytest.mark.parametrize("shape,k,s,p", [c for c in CASES if len(c[1]) == 2])
def test_max_pool_forward_bits_match_the_rule(shape, k, s, p):
    """The forward by the same rule, the 2 x 2 stride-2 fast path and the general one alike
    (ties, NaN, infinities, -FLT_MAX, -0)."""
    rng = np.random.default_rng(sum(shape) + 7)
    x = _data(rng, shape)
    y = ops.max_pool2d(AnyBuffer.from_numpy(x), kernel_size=list(k), stride=list(s),
                       padding=list(p)).to_numpy()
    np.testing.assert_array_equal(_bits(y), _bits(_forward_ref(x, k, s, p)))
