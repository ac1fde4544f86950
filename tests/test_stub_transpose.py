"""The stub's block swaps (views.c tlk_swap_blocks: transpose2d, swap_last2, permute3d_*,
swap_adjacent) move values only: every output equals NumPy's transpose bit for bit, NaN
payloads and signed zeros included. Sizes straddle the 16 x 16 register tiles (whole tiles,
a tail of rows, a tail of columns, both), single rows and columns, and the threading threshold.
"""
import numpy as np
import pytest

import torchlean as tl
from torchlean import ops

rng = np.random.default_rng(5)


def data(*shape):
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::7] = np.array([np.nan, -0.0, np.inf, -np.inf], np.float32)[np.arange(len(flat[::7])) % 4]
    flat[3::11] = np.uint32(0x7fc01234).view(np.float32)   # a NaN payload
    return x


def buf(x):
    return tl.AnyBuffer.from_numpy(np.ascontiguousarray(x))


def same_bits(y, want):
    assert y.shape == want.shape
    assert np.array_equal(y.view(np.uint32), np.ascontiguousarray(want).view(np.uint32))


@pytest.mark.parametrize("m,n", [(1, 1), (1, 40), (40, 1), (3, 5), (16, 16), (17, 33), (32, 48),
                                 (15, 17), (33, 40), (127, 255), (512, 512), (513, 255),
                                 (255, 513), (1000, 17), (17, 1000), (2048, 64)])
def test_transpose2d_moves_every_bit(m, n):
    x = data(m, n)
    same_bits(ops.transpose2d(buf(x)).to_numpy(), x.T)


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 4), (3, 17, 9), (4, 16, 32), (5, 33, 47),
                                   (2, 129, 64), (64, 8, 8)])
def test_batched_swaps_move_every_bit(shape):
    x = data(*shape)
    same_bits(ops.swap_last2(buf(x)).to_numpy(), x.transpose(0, 2, 1))
    same_bits(ops.permute3d_bca(buf(x)).to_numpy(), x.transpose(1, 2, 0))
    same_bits(ops.permute3d_cab(buf(x)).to_numpy(), x.transpose(2, 0, 1))


def test_transposed_view_matmul_matches_the_contiguous_copy():
    # x @ w.T goes through the transpose: same bits as x @ (a contiguous w^T)
    x, w = data(128, 512), data(300, 512)
    x[np.isnan(x) | np.isinf(x)] = 0.5
    w[np.isnan(w) | np.isinf(w)] = -0.25
    tx, tw = tl.tensor(x), tl.tensor(w)
    want = (tx @ tl.tensor(np.ascontiguousarray(w.T))).numpy()
    same_bits((tx @ tw.T).numpy(), want)
    np.testing.assert_allclose(want, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4,
                               atol=1e-4)
