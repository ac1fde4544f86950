"""grid_sample and grid_sampler_2d/3d against a float64 NumPy reference written here (a loop
over output points), gradients for input and grid by central differences, torch as an extra
reference, bad input."""
import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.functional as F
from catalog_check import check, rand, torch

X = rand(2, 3, 4, 5)
# grid points inside, on and beyond the edges, none on an integer source coordinate
G = (np.random.default_rng(5).random((2, 3, 4, 2)) * 2.6 - 1.3).astype(np.float32)


def _reflect(x, lo2, hi2):
    if lo2 == hi2:
        return 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    d = abs(x - lo)
    flips = np.floor(d / span)
    extra = d - flips * span
    return extra + lo if flips % 2 == 0 else span - extra + lo


def _source(g, size, padding, align):
    x = (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2
    if padding == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align else _reflect(x, -1, 2 * size - 1)
    if padding in ("border", "reflection"):
        x = min(max(x, 0), size - 1)
    return x


def np_grid_sample_2d(x, grid, mode, padding, align):
    n, c, h, w = x.shape
    out = np.zeros((n, c) + grid.shape[1:3])
    for b in range(n):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                sx = _source(grid[b, i, j, 0], w, padding, align)
                sy = _source(grid[b, i, j, 1], h, padding, align)
                if mode == "nearest":
                    taps = [(int(np.rint(sy)), int(np.rint(sx)), 1.0)]
                else:
                    x0, y0 = int(np.floor(sx)), int(np.floor(sy))
                    fx, fy = sx - x0, sy - y0
                    taps = [(y0, x0, (1 - fy) * (1 - fx)), (y0, x0 + 1, (1 - fy) * fx),
                            (y0 + 1, x0, fy * (1 - fx)), (y0 + 1, x0 + 1, fy * fx)]
                for yy, xx, wt in taps:
                    if 0 <= yy < h and 0 <= xx < w:
                        out[b, :, i, j] += wt * x[b, :, yy, xx]
    return out


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_bilinear(padding, align):
    check(lambda x, g: F.grid_sample(x, g, "bilinear", padding, align),
          lambda x, g: np_grid_sample_2d(x, g, "bilinear", padding, align), X, G,
          torch_fn=(lambda x, g: torch.nn.functional.grid_sample(x, g, "bilinear", padding,
                                                                 align)) if torch else None,
          grad_tol=(3e-3, 5e-4))


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_nearest_input_gradient(padding):
    check(lambda x: F.grid_sample(x, tl.tensor(G), "nearest", padding, False),
          lambda x: np_grid_sample_2d(x, G.astype(np.float64), "nearest", padding, False), X)


def test_sampler_aliases_and_3d():
    a = F.grid_sample(tl.tensor(X), tl.tensor(G), "nearest", "border", True).numpy()
    b = tl.grid_sampler_2d(tl.tensor(X), tl.tensor(G), 1, 1, True).numpy()
    np.testing.assert_array_equal(a, b)
    # a 3-D sample of a volume constant along depth equals the 2-D sample of its plane
    vol = np.repeat(X[:, :, None], 3, axis=2)
    g3 = np.concatenate([G[:, None], np.full(G[:, None, ..., :1].shape, 0.3, np.float32)], -1)
    y3 = tl.grid_sampler_3d(tl.tensor(vol), tl.tensor(g3), 0, 0, False).numpy()
    np.testing.assert_allclose(y3[:, :, 0], np_grid_sample_2d(X, G, "bilinear", "zeros", False),
                               rtol=1e-5, atol=1e-6)
    assert tl.grid_sampler(tl.tensor(vol), tl.tensor(g3), 0, 0, False).shape == y3.shape


BAD = [
    (lambda: F.grid_sample(tl.tensor(X), tl.tensor(G), mode="bicubic"), NotImplementedError,
     "grid_sample"),
    (lambda: F.grid_sample(tl.tensor(X), tl.tensor(G), padding_mode="wrap"), ValueError,
     "grid_sample"),
    (lambda: F.grid_sample(tl.tensor(X), tl.tensor(G[..., :1])), RuntimeError, "grid_sample"),
    (lambda: F.grid_sample(tl.tensor(X[0]), tl.tensor(G[0])), RuntimeError, "grid_sample"),
    (lambda: tl.grid_sampler_2d(tl.tensor(X), tl.tensor(G), 2, 0, False), NotImplementedError,
     "grid_sampler_2d"),
    (lambda: tl.grid_sampler_3d(tl.tensor(X), tl.tensor(G), 0, 0, False), RuntimeError,
     "grid_sampler_3d"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind, name = BAD[i]
    with pytest.raises(kind, match=name):
        fn()
