"""The exact-mode GEMM (registry entry gemm_exact, tl_gemm_exact) equals rule 3 bit for bit: k in
chunks of 256, every chunk's partial a sequential fused multiply-add chain in k order (the first
from 0 or from C's prior value, the others from 0), the partials added left to right. The reference is the NumPy
emulation in tests/exact_fma.py (checked against the C library's fmaf in test_exact_math.py).
On CUDA the same tests compare the GPU kernel with that reference, so passing on both backends
means stub and CUDA agree bit for bit."""
import numpy as np
import pytest

import torchlean as tl
from torchlean._loader import ffi, lib
from torchlean.buffer import raise_status

from exact_fma import EXACT_KCHUNK, fma_chain_reference, gemm_fma_reference


def gemm_exact(a, b, c, batch, m, k, n, ta, tb, accumulate):
    """Run tl_gemm_exact on float32 arrays; returns C as float32."""
    bufs = [tl.Buffer.from_numpy(np.ascontiguousarray(x, np.float32).ravel()) for x in (a, b, c)]
    st = lib.tl_gemm_exact(bufs[0].handle, bufs[1].handle, bufs[2].handle, batch, m, k, n, ta, tb,
                           accumulate)
    if st:
        raise_status("gemm_exact", st)
    out = bufs[2].to_numpy(np.float32).reshape(batch, m, n)
    for x in bufs:
        x.release()
    return out


def _operands(rng, batch, m, k, n, ta, tb, scale=1.0):
    a = (rng.standard_normal((batch, m, k)) * scale).astype(np.float32)
    b = (rng.standard_normal((batch, k, n)) * np.exp(rng.uniform(-4, 4, (batch, k, n)))).astype(np.float32)
    a_st = np.swapaxes(a, 1, 2).copy() if ta else a
    b_st = np.swapaxes(b, 1, 2).copy() if tb else b
    return a, b, a_st, b_st


def _bits_equal(got, want):
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    return bool(same.all()), np.argwhere(~same)[:5]


# CUDA picks the kernel by the shape (gemm.cu): with 132 SMs, 300 x (1 tile) and 1000 x 700
# take 128x64 tiles, 1920 x 2048 128x128, 4095 x 767 96x128, 3071 x 767 96x96 (partial tiles
# on both sides), 1 x 300 x 300 the 32x32 one, K >= 1024 with few outputs split-K (K = 1100 and
# 1029 end mid-chunk), the other shapes the 16x16 one; K = 70 and 300 cross its 64-deep k-tiles,
# K = 300 and 500 cross a 256-chunk boundary inside the kernel
SHAPES = [(1, 1, 1, 1), (1, 5, 7, 3), (3, 37, 129, 53), (2, 64, 16, 64), (1, 65, 300, 70),
          (1, 130, 9, 129), (2, 4, 1, 67), (1, 1, 500, 1), (300, 5, 7, 3), (1, 300, 70, 300),
          (1, 1000, 19, 700), (1, 1920, 5, 2048), (1, 4095, 11, 767), (1, 3071, 17, 767),
          (1, 9, 1100, 13), (2, 16, 1029, 8)]


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("shape", SHAPES)
def test_bit_identical_to_sequential_fma(ta, tb, shape):
    batch, m, k, n = shape
    rng = np.random.default_rng(hash((ta, tb) + shape) % 2 ** 32)
    a, b, a_st, b_st = _operands(rng, batch, m, k, n, ta, tb)
    got = gemm_exact(a_st, b_st, np.full((batch, m, n), 9.0, np.float32), batch, m, k, n, ta, tb, 0)
    for i in range(batch):
        want = gemm_fma_reference(a[i], b[i])
        ok, where = _bits_equal(got[i], want)
        assert ok, (i, where)
    # and close to float64: the order is fixed, the arithmetic is still float32
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    tol = 1e-5 * np.einsum("bmk,bkn->bmn", np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert np.all(np.abs(got - ref) <= tol + 1e-30)


# rows checked against the reference in the larger products: every CUDA kernel's chunk fold
# (in-kernel through C for the large tiles at K = 300 and 520, split-K at K = 1300)
FOLD_SHAPES = [(1, 1000, 300, 700, 0, 0), (1, 1000, 300, 700, 1, 1), (1, 1920, 300, 2048, 0, 1),
               (1, 4095, 520, 767, 1, 0), (1, 3071, 290, 767, 0, 0), (1, 300, 700, 70, 1, 1),
               (3, 100, 1300, 90, 0, 1), (1, 64, 4099, 64, 1, 0)]


@pytest.mark.parametrize("shape", FOLD_SHAPES)
def test_chunk_fold_in_larger_products(shape):
    batch, m, k, n, ta, tb = shape
    rng = np.random.default_rng(sum(shape))
    a, b, a_st, b_st = _operands(rng, batch, m, k, n, ta, tb)
    for accumulate in (0, 1):
        c0 = rng.standard_normal((batch, m, n)).astype(np.float32)
        got = gemm_exact(a_st, b_st, c0, batch, m, k, n, ta, tb, accumulate)
        for i in range(batch):
            rows = np.unique(np.r_[0, m - 1, rng.integers(0, m, 4)])
            want = gemm_fma_reference(a[i][rows], b[i], c0[i][rows] if accumulate else None)
            ok, where = _bits_equal(got[i][rows], want)
            assert ok, (i, accumulate, where)


def _fold_witness(extra_zero_chunks):
    """b (k,) with a = ones: chunk partials p0 = 2^24 (one 2^24), p1 = 3 - 1 = 2, p2 = -1,
    then extra_zero_chunks chunks of zeros (partials 0), then a 3-long tail with p = -2^25
    (two -2^24). Every partial is exact; only the fold rounds."""
    c = EXACT_KCHUNK
    b = np.zeros(3 * c + extra_zero_chunks * c + 3, np.float32)
    b[1] = 2.0 ** 24
    b[c], b[2 * c - 1] = 3.0, -1.0
    b[2 * c] = -1.0
    b[-3] = b[-1] = -(2.0 ** 24)
    return b


@pytest.mark.parametrize("extra", [0, 2, 40])
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 1)])
def test_chunk_rule_against_closed_form(extra, ta, tb):
    """Left fold in float32: (2^24 + 2) = 2^24 + 2 exactly, + (-1) = 2^24 + 1, a tie, rounds to
    even 2^24, + 0 ..., + (-2^25) = -2^24. One chain over all k gives -2^24 + 4 (2^24 + 3 rounds
    to 2^24 + 4 twice), a pairwise tree -2^24 + 2 (-1 - 2^25 rounds to -2^25), a right fold
    -2^24 + 2, chunks of 255 or 257 -2^24 + 4. Rows and columns scale by powers of two (exact)."""
    b1 = _fold_witness(extra)
    k = b1.size
    rs = np.array([1.0, 0.5, 4.0], np.float32)         # row scales of A = ones
    cs = np.array([1.0, 2.0, 0.25, 8.0, -1.0], np.float32)  # column scales of B
    a = np.broadcast_to(rs[:, None], (3, k)).astype(np.float32)[None]
    b = (b1[:, None] * cs[None, :]).astype(np.float32)[None]
    a_st = np.swapaxes(a, 1, 2).copy() if ta else a
    b_st = np.swapaxes(b, 1, 2).copy() if tb else b
    got = gemm_exact(a_st, b_st, np.zeros((1, 3, 5), np.float32), 1, 3, k, 5, ta, tb, 0)[0]
    want = (-(2.0 ** 24) * np.outer(rs.astype(np.float64), cs.astype(np.float64))).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), got
    # the witness tells the orders apart, so the test cannot pass by any other rule
    chain = fma_chain_reference(np.ones((1, k), np.float32), b1[:, None])[0, 0]
    assert chain == np.float32(-(2.0 ** 24) + 4)
    assert gemm_fma_reference(np.ones((1, k), np.float32), b1[:, None])[0, 0] == np.float32(-(2.0 ** 24))
    for other in (EXACT_KCHUNK - 1, EXACT_KCHUNK + 1):
        assert gemm_fma_reference(np.ones((1, k), np.float32), b1[:, None], chunk=other)[0, 0] != -(2.0 ** 24)


def test_first_chunk_starts_from_c_and_later_chunks_from_zero():
    """C = 2^24, b = 1, 1 at k = 0, 1 and 1, 1 at k = 256, 257: the first chunk's chain stays at
    2^24 (2^24 + 1 is a tie, rounds to even), the second chunk's partial is 2, the output
    2^24 + 2. (One chain from C: 2^24; C added after the chunks: 2^24 + 4.)"""
    k = EXACT_KCHUNK + 44
    b = np.zeros((1, k, 1), np.float32)
    b[0, [0, 1, EXACT_KCHUNK, EXACT_KCHUNK + 1], 0] = 1.0
    a = np.ones((1, 1, k), np.float32)
    got = gemm_exact(a, b, np.full((1, 1, 1), 2.0 ** 24, np.float32), 1, 1, k, 1, 0, 0, 1)
    assert got[0, 0, 0] == np.float32(2.0 ** 24 + 2)


@pytest.mark.parametrize("ta,tb", [(0, 1), (1, 0)])
def test_accumulate_starts_from_c(ta, tb):
    rng = np.random.default_rng(11)
    batch, m, k, n = 2, 9, 33, 70
    a, b, a_st, b_st = _operands(rng, batch, m, k, n, ta, tb)
    c0 = rng.standard_normal((batch, m, n)).astype(np.float32)
    got = gemm_exact(a_st, b_st, c0, batch, m, k, n, ta, tb, 1)
    for i in range(batch):
        ok, where = _bits_equal(got[i], gemm_fma_reference(a[i], b[i], init=c0[i]))
        assert ok, (i, where)


def test_k_zero_gives_zeros_or_c():
    c0 = np.arange(6, dtype=np.float32).reshape(1, 2, 3) - 2.5
    z = gemm_exact(np.zeros(0), np.zeros(0), c0, 1, 2, 0, 3, 0, 0, 0)
    assert np.array_equal(z.view(np.uint32), np.zeros_like(c0).view(np.uint32))
    kept = gemm_exact(np.zeros(0), np.zeros(0), c0, 1, 2, 0, 3, 0, 0, 1)
    assert np.array_equal(kept, c0)


def test_empty_outputs_are_fine():
    assert gemm_exact(np.zeros(0), np.zeros(12), np.zeros(0), 1, 0, 4, 3, 0, 0, 0).size == 0
    assert gemm_exact(np.zeros(0), np.zeros(0), np.zeros(0), 0, 3, 4, 5, 0, 0, 0).size == 0


def test_nan_inf_and_signed_zero_follow_ieee():
    a = np.array([[[np.inf, 1.0, -0.0], [0.0, np.nan, 1.0], [-0.0, -0.0, 2.0]]], np.float32)
    b = np.array([[[0.0, 1.0], [1.0, 2.0], [-0.0, 3.0]]], np.float32)
    got = gemm_exact(a, b, np.zeros((1, 3, 2), np.float32), 1, 3, 3, 2, 0, 0, 0)[0]
    want = gemm_fma_reference(a[0], b[0])
    ok, where = _bits_equal(got, want)
    assert ok, where
    assert np.isnan(got[0, 0]) and got[0, 1] == np.inf and np.isnan(got[1]).all()
    # -0 * 0 added to +0 is +0; with accumulate from -0 the chain stays -0
    neg = gemm_exact(a[:, 2:3], b, np.full((1, 1, 2), -0.0, np.float32), 1, 1, 3, 2, 0, 0, 1)[0]
    assert np.signbit(neg[0, 0]) and neg[0, 1] == 6.0


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match=r"gemm_exact: expected \(ta == 0 or ta == 1\).*got ta=2"):
        gemm_exact(np.ones(4), np.ones(4), np.ones(4), 1, 2, 2, 2, 2, 0, 0)
    with pytest.raises(ValueError, match=r"gemm_exact: .*accumulate == 1\).*accumulate=-1"):
        gemm_exact(np.ones(4), np.ones(4), np.ones(4), 1, 2, 2, 2, 0, 0, -1)
    with pytest.raises(ValueError, match="gemm_exact.*b must hold 6 elements, got 4"):
        gemm_exact(np.ones(4), np.ones(4), np.ones(6), 1, 2, 2, 3, 0, 0, 0)
    with pytest.raises(ValueError, match="gemm_exact.*>= 0"):
        gemm_exact(np.ones(4), np.ones(4), np.ones(4), 1, -2, 2, 2, 0, 0, 0)


def test_output_does_not_depend_on_the_thread_count_or_size_of_the_problem():
    """A row computed inside a big product equals the same row computed alone (neither split-K
    nor blocking changes the order)."""
    rng = np.random.default_rng(5)
    m, k, n = 300, 257, 190
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    b = rng.standard_normal((1, k, n)).astype(np.float32)
    full = gemm_exact(a, b, np.zeros((1, m, n)), 1, m, k, n, 0, 0, 0)[0]
    row = gemm_exact(a[:, 123:124], b, np.zeros((1, 1, n)), 1, 1, k, n, 0, 0, 0)[0]
    assert np.array_equal(full[123].view(np.uint32), row[0].view(np.uint32))


def test_registry_function_checks_and_runs_in_place():
    """gemm_exact is a registry entry: torchlean's generated buffer function checks its attrs in
    Python, the generated C contract checks the lengths, and the kernel updates c in place."""
    from torchlean._generated import ops
    from torchlean.buffer import AnyBuffer
    rng = np.random.default_rng(5)
    a, b, a_st, _ = _operands(rng, 2, 3, 5, 4, 1, 0)
    bias = rng.standard_normal((2, 3, 4)).astype(np.float32)
    A, B, C = (AnyBuffer.from_numpy(x) for x in (a_st, b, bias))
    ops.gemm_exact(A, B, C, batch=2, m=3, k=5, n=4, ta=True, accumulate=True)
    want = np.stack([gemm_fma_reference(a[i], b[i], bias[i]) for i in range(2)])
    assert np.array_equal(C.to_numpy().view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="gemm_exact.*m.*>= 0|gemm_exact.*nonneg|gemm_exact.*m"):
        ops.gemm_exact(A, B, C, batch=2, m=-3, k=5, n=4)
    with pytest.raises(ValueError, match="gemm_exact: a must hold 1 elements, got 30"):
        ops.gemm_exact(A, B, C, batch=1, m=1, k=1, n=2)
    for x in (A, B, C):
        x.buf.release()
