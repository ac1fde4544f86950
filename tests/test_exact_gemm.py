"""The exact-mode GEMM (registry entry gemm_exact, tl_gemm_exact) equals rule 3 bit for bit
(exact_version 7): k in chunks of 256, every chunk's partial a float64 chain
p = fma((double)a, (double)b, p) in k order (the first from 0 or from C's prior value, the
others from 0), the partials added left to right in float64, one rounding to float32 per output.
The reference is tests/exact_fma.py's gemm_exact_reference: a NumPy float64 loop over k
(a float32 product is exact in float64, so p + a b is the fma). On CUDA the same tests compare
the GPU kernels (FP64 tensor cores) with that reference, so passing on both backends means stub
and CUDA agree bit for bit."""
import numpy as np
import pytest

import torchlean as tl
from torchlean._loader import ffi, lib
from torchlean.buffer import raise_status

from exact_fma import EXACT_KCHUNK, gemm_exact_reference, gemm_fma_reference


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


# CUDA picks the kernel by the shape and layout (gemm.cu): the FP64-tensor-core tiles where
# pointers, leading dimensions and batch strides allow 16-byte copies (multiples of 4 floats),
# 64x64 tiles over all of K or one block per (tile, chunk) plus the ordered fold for few tiles
# over a long K, partial tiles on both sides (4095 x 767, 3071 x 767); the general kernel (one
# output per thread) for the other shapes (odd sizes, K not a multiple of 4)
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
        want = gemm_exact_reference(a[i], b[i])
        ok, where = _bits_equal(got[i], want)
        assert ok, (i, where)
    # and close to float64: one float32 rounding of a float64 sum
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    tol = 1e-6 * np.einsum("bmk,bkn->bmn", np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert np.all(np.abs(got - ref) <= tol + 1e-30)


# rows checked against the reference in the larger products: every CUDA kernel's chunk fold
# (the tensor-core tiles with M, N, K multiples of 4: over all of K with the running fold in
# shared memory at K = 300, 520 and 768 (batch 2, or many tiles), one block per (tile, chunk)
# and the ordered fold for few tiles at K = 300, 1024 and 2052 (a 4-long last chunk); the
# general kernel for the odd shapes)
FOLD_SHAPES = [(1, 1000, 300, 700, 0, 0), (1, 1000, 300, 700, 1, 1), (1, 1920, 300, 2048, 0, 1),
               (1, 4095, 520, 767, 1, 0), (1, 3071, 290, 767, 0, 0), (1, 300, 700, 70, 1, 1),
               (3, 100, 1300, 90, 0, 1), (1, 64, 4099, 64, 1, 0), (1, 1000, 1024, 700, 0, 1),
               (2, 388, 520, 196, 1, 0), (1, 68, 2052, 60, 0, 0), (1, 68, 2052, 60, 1, 1),
               (1, 2000, 768, 1600, 1, 1), (1, 4096, 64, 1024, 0, 0)]


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
            want = gemm_exact_reference(a[i][rows], b[i], c0[i][rows] if accumulate else None)
            ok, where = _bits_equal(got[i][rows], want)
            assert ok, (i, accumulate, where)


def _fold_witness(extra_chunks):
    """b (k,) with a = ones: chunk partials p0 = 2^53 (one 2^53), p1 = 3 - 1 = 2, p2 = -1,
    p3 = 4, then extra_chunks - 1 chunks of zeros (partials 0), then a 3-long tail with
    p = -2^53. Every partial is exact in float64; only the fold rounds."""
    c = EXACT_KCHUNK
    b = np.zeros(3 * c + extra_chunks * c + 3, np.float32)
    b[1] = 2.0 ** 53
    b[c], b[2 * c - 1] = 3.0, -1.0
    b[2 * c] = -1.0
    b[3 * c + 5] = 4.0
    b[-3] = -(2.0 ** 53)
    return b


@pytest.mark.parametrize("extra", [1, 3, 40])
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 1)])
def test_chunk_rule_against_closed_form(extra, ta, tb):
    """Left fold in float64: 2^53 + 2 is exact, + (-1) = 2^53 + 1 is a tie and rounds to even
    2^53, + 4 = 2^53 + 4, + 0 ..., + (-2^53) = 4, rounded to float32: 4. One float64 chain over
    all k gives 8 (2^53 + 3 rounds to 2^53 + 4 twice), the float32 rule 0 (2^53 + 4 rounds to
    2^53 in float32), chunks of 255 or 257 something else again. Rows and columns scale by
    powers of two (exact)."""
    b1 = _fold_witness(extra)
    k = b1.size
    rs = np.array([1.0, 0.5, 4.0], np.float32)         # row scales of A = ones
    cs = np.array([1.0, 2.0, 0.25, 8.0, -1.0], np.float32)  # column scales of B
    a = np.broadcast_to(rs[:, None], (3, k)).astype(np.float32)[None]
    b = (b1[:, None] * cs[None, :]).astype(np.float32)[None]
    a_st = np.swapaxes(a, 1, 2).copy() if ta else a
    b_st = np.swapaxes(b, 1, 2).copy() if tb else b
    got = gemm_exact(a_st, b_st, np.zeros((1, 3, 5), np.float32), 1, 3, k, 5, ta, tb, 0)[0]
    want = (4.0 * np.outer(rs.astype(np.float64), cs.astype(np.float64))).astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), got
    # the witness tells the orders apart, so the test cannot pass by any other rule
    ones = np.ones((1, k), np.float32)
    assert gemm_exact_reference(ones, b1[:, None])[0, 0] == np.float32(4)
    assert gemm_exact_reference(ones, b1[:, None], chunk=None)[0, 0] == np.float32(8)
    assert gemm_fma_reference(ones, b1[:, None])[0, 0] == np.float32(0)
    for other in (EXACT_KCHUNK - 1, EXACT_KCHUNK + 1):
        assert gemm_exact_reference(ones, b1[:, None], chunk=other)[0, 0] != np.float32(4)


def test_first_chunk_starts_from_c_and_later_chunks_from_zero():
    """C = 2^53, b = 1, 1 at k = 0, 1 and 1, 1, -2^53 at k = 256, 257, 258: the first chunk's
    chain stays at 2^53 (2^53 + 1 is a tie, rounds to even), the second chunk's partial is
    2 - 2^53 (exact), the output 2. (One chain from C: 0; C added after the chunks: 4.)"""
    k = EXACT_KCHUNK + 44
    b = np.zeros((1, k, 1), np.float32)
    b[0, [0, 1, EXACT_KCHUNK, EXACT_KCHUNK + 1], 0] = 1.0
    b[0, EXACT_KCHUNK + 2, 0] = -(2.0 ** 53)
    a = np.ones((1, 1, k), np.float32)
    got = gemm_exact(a, b, np.full((1, 1, 1), 2.0 ** 53, np.float32), 1, 1, k, 1, 0, 0, 1)
    assert got[0, 0, 0] == np.float32(2)
    assert gemm_exact_reference(a[0], b[0], np.full((1, 1), 2.0 ** 53, np.float32))[0, 0] == 2
    assert gemm_exact_reference(a[0], b[0], np.full((1, 1), 2.0 ** 53, np.float32), chunk=None)[0, 0] == 0


def _cancelling(rng, batch, m, k, n, scale=2.0 ** 36):
    """float32 operands whose products cancel in pairs at k = 64 q + 17, 18 (x and -x, scaled by
    `scale`): a running sum loses low bits there that only the same order (and the same
    precision) reproduces"""
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = (rng.standard_normal((batch, k, n)) * np.exp(rng.uniform(-3, 3, (batch, k, n)))).astype(np.float32)
    for q in range(0, k, 64):
        if q + 18 < k:
            a[:, :, q + 17] = (a[:, :, q + 17] * scale).astype(np.float32)
            a[:, :, q + 18] = -a[:, :, q + 17]
            b[:, q + 18, :] = b[:, q + 17, :]
    return a, b


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("k", [1, 19, 255, 256, 257, 513, 516, 1024, 1100])
@pytest.mark.parametrize("start", ["zero", "accumulate"])
@pytest.mark.parametrize("batch,m,n", [(2, 37, 45), (1, 68, 132), (2, 68, 132)])
def test_float64_chunk_chains_on_cancelling_data(ta, tb, k, start, batch, m, n):
    """The rule on data where orders and precisions differ: the float32 rule (exact_version 6)
    differs on some outputs, and where a later chunk holds a cancelling pair so does one float64
    chain over all of k. On CUDA, 37 x 45 and odd K take the general kernel, 68 x 132 with K a
    multiple of 4 the tensor-core tiles (batch 1 past one chunk: split per chunk, then the
    fold)."""
    rng = np.random.default_rng(k * 8 + ta * 4 + tb * 2 + (start == "accumulate") + 7919 * m + batch)
    a, b = _cancelling(rng, batch, m, k, n)
    a_st = np.swapaxes(a, 1, 2).copy() if ta else a
    b_st = np.swapaxes(b, 1, 2).copy() if tb else b
    c0 = (rng.standard_normal((batch, m, n)) * 4).astype(np.float32)
    acc = start == "accumulate"
    got = gemm_exact(a_st, b_st, c0, batch, m, k, n, ta, tb, int(acc))
    old_differs = one_chain_differs = 0
    for i in range(batch):
        init = c0[i] if acc else None
        want = gemm_exact_reference(a[i], b[i], init)
        ok, where = _bits_equal(got[i], want)
        assert ok, (i, where)
        old_differs += int((gemm_fma_reference(a[i], b[i], init).view(np.uint32) != want.view(np.uint32)).sum())
        one_chain_differs += int((gemm_exact_reference(a[i], b[i], init, chunk=None).view(np.uint32)
                                  != want.view(np.uint32)).sum())
    if k >= 19:
        assert old_differs > 0
    if k > EXACT_KCHUNK + 18:   # a cancelling pair past the first chunk (K = 257: one chain's bits)
        assert one_chain_differs > 0


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (3, 5, 7, 3), (1, 4, 8, 4), (2, 16, 300, 12),
                                   (1, 67, 513, 33), (4, 2, 257, 130)])
def test_bias_start_and_odd_views(shape):
    """accumulate from a bias broadcast into C, every layout, odd and multiple-of-4 sizes"""
    batch, m, k, n = shape
    rng = np.random.default_rng(sum(shape))
    for ta in (0, 1):
        for tb in (0, 1):
            a, b, a_st, b_st = _operands(rng, batch, m, k, n, ta, tb)
            bias = (rng.standard_normal(n) * 100).astype(np.float32)
            c0 = np.broadcast_to(bias, (batch, m, n)).copy()
            got = gemm_exact(a_st, b_st, c0, batch, m, k, n, ta, tb, 1)
            for i in range(batch):
                ok, where = _bits_equal(got[i], gemm_exact_reference(a[i], b[i], c0[i]))
                assert ok, (ta, tb, i, where)


@pytest.mark.parametrize("ta,tb", [(0, 1), (1, 0)])
def test_accumulate_starts_from_c(ta, tb):
    rng = np.random.default_rng(11)
    batch, m, k, n = 2, 9, 33, 70
    a, b, a_st, b_st = _operands(rng, batch, m, k, n, ta, tb)
    c0 = rng.standard_normal((batch, m, n)).astype(np.float32)
    got = gemm_exact(a_st, b_st, c0, batch, m, k, n, ta, tb, 1)
    for i in range(batch):
        ok, where = _bits_equal(got[i], gemm_exact_reference(a[i], b[i], init=c0[i]))
        assert ok, (i, where)


# FNO's odd layers (bench/probes/fno_gemm_calls.py), big enough that CUDA stages them for its
# tensor-core tiles (or, N = 1, runs the tiles with single stores): lift K = 2, proj2 N = 1 and
# K = 1, the weight gradients with M = 1 and N = 2 over 20480 rows (80 chunks), rows cut to 4096
@pytest.mark.parametrize("ta,tb,m,k,n,accumulate", [
    (0, 1, 4096, 2, 64, 1), (0, 1, 4096, 128, 1, 1), (0, 0, 4096, 1, 128, 0),
    (1, 0, 1, 20480, 128, 0), (1, 0, 64, 20480, 2, 0), (0, 0, 1024, 3, 64, 1)])
def test_fno_odd_shapes(ta, tb, m, k, n, accumulate):
    rng = np.random.default_rng(m + k + n)
    a, b = _cancelling(rng, 1, m, k, n, scale=2.0 ** 30)
    c0 = rng.standard_normal((1, m, n)).astype(np.float32)
    c0[:, ::3] = -0.0
    a[:, ::3] = -0.0                      # chains of +-0 products from C = -0: rows 0, 3, ...
    a_st = np.swapaxes(a, 1, 2).copy() if ta else a
    b_st = np.swapaxes(b, 1, 2).copy() if tb else b
    got = gemm_exact(a_st, b_st, c0, 1, m, k, n, ta, tb, accumulate)
    ok, where = _bits_equal(got[0], gemm_exact_reference(a[0], b[0], init=c0[0] if accumulate else None))
    assert ok, where


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
    want = gemm_exact_reference(a[0], b[0])
    ok, where = _bits_equal(got, want)
    assert ok, where
    assert np.isnan(got[0, 0]) and got[0, 1] == np.inf and np.isnan(got[1]).all()
    # -0 * 0 added to +0 is +0; with accumulate from -0 the chain stays -0
    neg = gemm_exact(a[:, 2:3], b, np.full((1, 1, 2), -0.0, np.float32), 1, 1, 3, 2, 0, 0, 1)[0]
    assert np.signbit(neg[0, 0]) and neg[0, 1] == 6.0
    # a chunk of -0 products from C = -0 stays -0 (CUDA's tensor-core tiles pad k to 16 with +0
    # products, so such a product is staged with -0 x +0 padding, or, this small, takes the
    # general kernel): K = 20, 4 x 4 outputs
    az = np.full((1, 4, 20), -0.0, np.float32)
    bz = np.zeros((1, 20, 4), np.float32)
    z = gemm_exact(az, bz, np.full((1, 4, 4), -0.0, np.float32), 1, 4, 20, 4, 0, 0, 1)
    assert np.signbit(z).all() and (z == 0).all()


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
    want = np.stack([gemm_exact_reference(a[i], b[i], bias[i]) for i in range(2)])
    assert np.array_equal(C.to_numpy().view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="gemm_exact.*m.*>= 0|gemm_exact.*nonneg|gemm_exact.*m"):
        ops.gemm_exact(A, B, C, batch=2, m=-3, k=5, n=4)
    with pytest.raises(ValueError, match="gemm_exact: a must hold 1 elements, got 30"):
        ops.gemm_exact(A, B, C, batch=1, m=1, k=1, n=2)
    for x in (A, B, C):
        x.buf.release()
