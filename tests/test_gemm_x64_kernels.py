"""CUDA's exact GEMM kernels (native/cuda/gemm_x64.cuh: the FP64-tensor-core tiles over all of K
and split per chunk with the ordered fold, and the general one-output-per-thread kernel) run on
the CPU through the small CUDA emulation (tests/native/cuda_emu; the MMA m16n8k16 .f64 emulated
as the float64 FMA chain over its 16 k's in k order, what bench/results/dmma-gemm.md measured
on the H200), against the loaded backend's exact GEMM (the stub in CI: rule 3's reference) and
tests/exact_fma.py's float64 reference, bit for bit: every layout, partial tiles, K past one
and several chunks with a short last stage, batches, accumulation from C, and both thread
schedules of the emulation. On a GPU, tests/test_exact_gemm.py runs the real kernels."""

import numpy as np
import pytest

from exact_fma import gemm_exact_reference
from test_exact_gemm import _cancelling, gemm_exact
from cuda_emu import build_emu


@pytest.fixture(scope="module")
def emu():
    return build_emu("gemm_x64_emu.so", "the exact CUDA GEMM kernels", """
        int emu_gemm64(int kind, int ta, int tb, int64_t batch, int M, int N, int K, const float *A,
                       int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C,
                       int64_t ldc, int64_t sc, int accumulate, int reverse);
    """)


def run_emu(emu, kind, a_st, b_st, c0, batch, m, k, n, ta, tb, accumulate, reverse):
    ffi, lib = emu
    a_st = np.ascontiguousarray(a_st, np.float32)
    b_st = np.ascontiguousarray(b_st, np.float32)
    c = np.ascontiguousarray(c0, np.float32).copy()
    ptr = lambda x: ffi.cast("float *", ffi.from_buffer(x))
    st = lib.emu_gemm64(kind, ta, tb, batch, m, n, k, ptr(a_st), m if ta else k, m * k, ptr(b_st),
                        k if tb else n, k * n, ptr(c), n, m * n, accumulate, reverse)
    assert st == 0
    return c


CASES = [  # (kind, batch, m, k, n): 0 tiles over all of K, 1 split per chunk, 2 general
    (0, 1, 64, 16, 64), (0, 1, 8, 20, 12), (0, 2, 68, 276, 12), (1, 1, 12, 532, 68),
    (1, 1, 4, 260, 4), (0, 1, 4, 532, 8), (2, 2, 5, 259, 3), (2, 1, 3, 7, 1), (2, 1, 2, 0, 3)]


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("case", CASES)
def test_emulated_kernels_give_the_stubs_bits(emu, ta, tb, case):
    kind, batch, m, k, n = case
    rng = np.random.default_rng(sum(case) * 4 + ta * 2 + tb)
    a, b = _cancelling(rng, batch, m, k, n, scale=2.0 ** 30)
    a_st = np.swapaxes(a, 1, 2).copy() if ta else a
    b_st = np.swapaxes(b, 1, 2).copy() if tb else b
    c0 = (rng.standard_normal((batch, m, n)) * 3).astype(np.float32)
    for accumulate in (0, 1):
        want = gemm_exact(a_st, b_st, c0, batch, m, k, n, ta, tb, accumulate)
        for i in range(batch):
            ref = gemm_exact_reference(a[i], b[i], c0[i] if accumulate else None)
            assert np.array_equal(want[i].view(np.uint32), ref.view(np.uint32))
        for reverse in (0, 1):
            got = run_emu(emu, kind, a_st, b_st, c0, batch, m, k, n, ta, tb, accumulate, reverse)
            same = got.view(np.uint32) == want.view(np.uint32)
            assert same.all(), (accumulate, reverse, np.argwhere(~same)[:5])


# the staged path (x64::plan, x64_stage, then the tiles: kinds 3, 4): FNO's odd layers scaled
# down (lift K = 2, proj2 N = 1 and K = 1, the weight gradients with M = 1 or N = 2 over K past
# several chunks), size 1, K not a multiple of 4 or short with accumulate, every layout
STAGED = [(3, 1, 300, 2, 64), (3, 1, 300, 128, 1), (3, 1, 300, 1, 128), (4, 1, 1, 1100, 128),
          (4, 1, 64, 1100, 2), (3, 1, 1, 1, 1), (3, 2, 5, 7, 3), (3, 2, 68, 20, 12), (4, 1, 3, 531, 5),
          (3, 1, 8, 276, 12)]


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("case", STAGED)
def test_staged_kernels_give_the_stubs_bits(emu, ta, tb, case):
    test_emulated_kernels_give_the_stubs_bits(emu, ta, tb, case)


def run_emu_view(emu, kind, a_st, b_st, c0, m, k, n, ta, tb, accumulate, off, pad):
    """batch 1 through views: each operand at `off` floats into a larger buffer with `pad` more
    floats per row than it needs (an unaligned pointer, a leading dimension not a multiple of 4);
    returns C's view and whether everything around it was left alone"""
    ffi, lib = emu

    def place(x):
        r, cols = x.shape
        buf = np.full(off + r * (cols + pad) + 8, 7.0, np.float32)
        buf[off:off + r * (cols + pad)].reshape(r, cols + pad)[:, :cols] = x
        return buf, cols + pad

    (ab, lda), (bb, ldb), (cb, ldc) = place(a_st), place(b_st), place(c0)
    before = cb.copy()
    ptr = lambda x: ffi.cast("float *", ffi.from_buffer(x)) + off  # noqa: E731
    assert lib.emu_gemm64(kind, ta, tb, 1, m, n, k, ptr(ab), lda, 0, ptr(bb), ldb, 0, ptr(cb), ldc,
                          0, accumulate, 0) == 0
    view = cb[off:off + m * ldc].reshape(m, ldc)[:, :n]
    outside = np.ones(cb.shape, bool)
    outside[off:off + m * ldc].reshape(m, ldc)[:, :n] = False
    return view, np.array_equal(cb[outside].view(np.uint32), before[outside].view(np.uint32))


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("off,pad", [(1, 0), (1, 3), (2, 1), (0, 5)])
@pytest.mark.parametrize("kind,m,k,n", [(3, 70, 36, 68), (4, 8, 600, 12), (3, 33, 2, 5), (3, 1, 16, 1)])
def test_staged_views_give_the_stubs_bits(emu, ta, tb, off, pad, kind, m, k, n):
    rng = np.random.default_rng(m * 31 + k * 7 + n + off * 5 + pad + ta * 2 + tb)
    a, b = _cancelling(rng, 1, m, k, n, scale=2.0 ** 30)
    a_st = (np.swapaxes(a, 1, 2) if ta else a)[0].copy()
    b_st = (np.swapaxes(b, 1, 2) if tb else b)[0].copy()
    c0 = (rng.standard_normal((m, n)) * 3).astype(np.float32)
    for accumulate in (0, 1):
        want = gemm_exact(a_st[None], b_st[None], c0[None], 1, m, k, n, ta, tb, accumulate)[0]
        got, untouched = run_emu_view(emu, kind, a_st, b_st, c0, m, k, n, ta, tb, accumulate, off, pad)
        assert untouched
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (accumulate, off, pad)


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("k", [1, 3, 4, 17, 256, 258])
def test_staged_padding_keeps_negative_zero(emu, ta, tb, k):
    """C = -0 and every product -0 (or +0 added to -0 in some columns): a chain from C stays -0,
    which +0 padding would turn into +0; the staged -0 x +0 padding keeps it"""
    m, n = 6, 5
    a = np.full((1, m, k), -0.0, np.float32)
    a[:, 3] = 0.0                                                  # row 3: +0 products
    b = np.zeros((1, k, n), np.float32)
    b[:, :, 4] = 1.0                                              # column 4: -0 * 1 = -0
    a_st = np.swapaxes(a, 1, 2).copy() if ta else a
    b_st = np.swapaxes(b, 1, 2).copy() if tb else b
    c0 = np.full((1, m, n), -0.0, np.float32)
    want = gemm_exact(a_st, b_st, c0, 1, m, k, n, ta, tb, 1)
    if k <= 256:   # one chunk, from C (a later chunk starts from +0)
        assert np.signbit(want[0, 0, 0]) and np.signbit(want[0, 0, 4])
    for kind in (3, 4, 0):
        if kind == 0 and (k % 4 or (k % 16 and k <= 256)):
            continue   # what the plan stages: the unstaged tiles would read past K or zero-fill
        got = run_emu(emu, kind, a_st, b_st, c0, 1, m, k, n, ta, tb, 1, 0)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), kind
