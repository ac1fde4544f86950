"""The sort family's CUDA kernels (native/cuda/sort_kernels.cuh: take_rows and its adjoint,
running sums/products in both schedules, the cumprod backward, running extremes, sort keys) run
on the CPU through the CUDA emulation (tests/native/cuda_emu) and must give the loaded library's
bits (the stub's in CI; CUDA's own kernels give the same in every mode).
CUB's sorts themselves need the GPU (tests/test_exact_parity.py compares them there)."""

import numpy as np
import pytest
from running_order import chunked_running

import torchlean as tl
from torchlean import ops
from cuda_emu import build_emu

cffi = pytest.importorskip("cffi")

rng = np.random.default_rng(7)


@pytest.fixture(scope="module")
def emu():
    return build_emu("sort_emu.so", "the CUDA sort kernels", """
        int emu_take_rows(const float *x, const float *idx, float *y, int64_t rows, int64_t cols,
                          int64_t k, int grid, int reverse);
        int emu_take_rows_backward(const float *idx, const float *g, float *dx, int64_t rows,
                                   int64_t k, int64_t cols, int64_t distinct, int grid,
                                   int reverse);
        int emu_cumulative(const float *x, float *y, int64_t rows, int64_t cols, int64_t reverse,
                           int64_t kind, int grid, int rev_threads);
        int emu_cumprod_backward(const float *x, const float *g, float *dx, int64_t rows,
                                 int64_t cols, int64_t reverse, int grid, int rev_threads);
        int emu_cumarg(const float *x, float *idx, int64_t rows, int64_t cols, int64_t kind,
                       int grid, int rev_threads);
        int emu_put_add_ordered(const float *idx, const float *v, float *y, int64_t rows,
                                int64_t k, int64_t cols, int grid, int reverse);
        int emu_topk_rows(const float *x, float *idx, int64_t rows, int64_t cols, int64_t k,
                          int64_t descending, int grid, int reverse);
        int emu_sort_keys(const float *x, uint32_t *keys, int32_t *pos, int64_t n, int64_t cols,
                          int64_t descending);
    """)


def ptr(ffi, a, t="float *"):
    return ffi.cast(t, a.ctypes.data)


def buf(a):
    return tl.AnyBuffer.from_numpy(np.ascontiguousarray(a, np.float32))


def stub(name, *arrays, **attrs):
    return getattr(ops, name)(*[buf(a) for a in arrays], **attrs).to_numpy()


def same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert a.shape == b.shape
    bad = a.view(np.int32) != b.view(np.int32)
    assert not bad.any(), f"{bad.sum()} entries differ, first at {np.argwhere(bad)[0]}"


def specials(rows, cols, scale=1.0):
    x = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
    flat = x.reshape(-1)
    k = max(1, flat.size // 17)
    flat[rng.integers(0, flat.size, k)] = np.round(flat[:k])       # ties
    if flat.size > 5:
        flat[3], flat[5] = np.nan, -0.0
    return x


CUM_SHAPES = [(1, 1), (3, 7), (2, 256), (2, 257), (3, 1000), (1, 3000), (5, 513), (1, 70001),
              (70, 33), (300, 5), (33, 600)]


@pytest.mark.parametrize("rows,cols", CUM_SHAPES)
@pytest.mark.parametrize("kind,name", [(0, "cumsum_rows"), (1, "cumprod_rows"),
                                       (2, "logcumsumexp_rows")])
@pytest.mark.parametrize("reverse", [0, 1])
def test_running_sums_both_schedules_are_the_stub(emu, rows, cols, kind, name, reverse):
    ffi, lib = emu
    x = rng.uniform(0.99, 1.01, (rows, cols)).astype(np.float32) if kind == 1 else \
        specials(rows, cols, 1e3 if kind == 0 else 3.0)
    want = stub(name, x, reverse=reverse)
    for grid, rev in [(0, 0), (0, 1), (1, 0), (2, 1)]:
        y = np.full((rows, cols), np.nan, np.float32)
        assert lib.emu_cumulative(ptr(ffi, x), ptr(ffi, y), rows, cols, reverse, kind, grid,
                                  rev) == 0
        same_bits(y, want)


@pytest.mark.parametrize("rows,cols", [(1, 65536), (2, 65537), (1, 200003)])
def test_long_rows_take_the_stated_order(emu, rows, cols):
    """cumsum of rows longer than 256 chunks: the stub equals the order as documented (no NaN,
    so every entry tells), the emulated CUDA kernels equal the stub, and both stay within
    float32 accumulation error of a float64 running sum"""
    ffi, lib = emu
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    for reverse in (0, 1):
        got = stub("cumsum_rows", x, reverse=reverse)
        for r in range(rows):
            src = x[r, ::-1] if reverse else x[r]
            want = chunked_running(src, np.add)
            same_bits(got[r], want[::-1] if reverse else want)
            ref = np.cumsum(src.astype(np.float64))
            assert np.max(np.abs(got[r] - (ref[::-1] if reverse else ref))) < 1e-3 * np.sqrt(cols)
        y = np.full((rows, cols), np.nan, np.float32)
        assert lib.emu_cumulative(ptr(ffi, x), ptr(ffi, y), rows, cols, reverse, 0, 0, 0) == 0
        same_bits(y, got)


@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 7), (2, 300), (4, 33)])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumprod_backward_is_the_stub(emu, rows, cols, reverse):
    ffi, lib = emu
    x = rng.uniform(0.5, 1.5, (rows, cols)).astype(np.float32)
    x.reshape(-1)[:: 5] = 0.0
    g = rng.standard_normal((rows, cols)).astype(np.float32)
    want = stub("cumprod_rows_backward", x, g, reverse=reverse)
    dx = np.full_like(x, np.nan)
    assert lib.emu_cumprod_backward(ptr(ffi, x), ptr(ffi, g), ptr(ffi, dx), rows, cols, reverse,
                                    2, 1) == 0
    same_bits(dx, want)


@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 9), (2, 300)])
@pytest.mark.parametrize("kind", [0, 1])
def test_running_extremes_are_the_stub(emu, rows, cols, kind):
    ffi, lib = emu
    x = specials(rows, cols)
    want = stub("cumarg_rows", x, kind=kind)
    idx = np.full_like(x, np.nan)
    assert lib.emu_cumarg(ptr(ffi, x), ptr(ffi, idx), rows, cols, kind, 1, 0) == 0
    same_bits(idx, want)


@pytest.mark.parametrize("rows,cols,k", [(1, 1, 1), (3, 5, 8), (4, 9, 9), (2, 300, 40), (37, 3, 100),
                                         (1, 2, 70)])
def test_take_rows_and_adjoint_are_the_stub(emu, rows, cols, k):
    ffi, lib = emu
    x = specials(rows, cols)
    idx = rng.integers(-1, cols + 1, size=(rows, k)).astype(np.float32)
    y = np.full((rows, k), np.nan, np.float32)
    assert lib.emu_take_rows(ptr(ffi, x), ptr(ffi, idx), ptr(ffi, y), rows, cols, k, 2, 1) == 0
    same_bits(y, stub("take_rows", x, idx))
    g = (rng.standard_normal((rows, k)) * 1e3).astype(np.float32)
    dx = np.full((rows, cols), np.nan, np.float32)
    assert lib.emu_take_rows_backward(ptr(ffi, idx), ptr(ffi, g), ptr(ffi, dx), rows, k, cols, 0,
                                      2, 1) == 0
    same_bits(dx, stub("take_rows_backward", idx, g, cols=cols))
    perm = np.stack([rng.permutation(cols)[:min(k, cols)] for _ in range(rows)]).astype(np.float32)
    g = g[:, :perm.shape[1]].copy()
    g.reshape(-1)[0] = -0.0
    dx = np.full((rows, cols), np.nan, np.float32)
    assert lib.emu_take_rows_backward(ptr(ffi, perm), ptr(ffi, g), ptr(ffi, dx), rows,
                                      perm.shape[1], cols, 1, 3, 0) == 0
    same_bits(dx, stub("take_rows_backward", perm, g, cols=cols, distinct=1))
    same_bits(dx, stub("take_rows_backward", perm, g, cols=cols, distinct=0))


@pytest.mark.parametrize("descending", [0, 1])
def test_sort_keys_order_is_the_stub_argsort(emu, descending):
    """A stable sort of the CUDA keys (CUB's radix sort is stable) gives the stub's positions."""
    ffi, lib = emu
    rows, cols = 4, 50
    x = specials(rows, cols)
    x[0, :4] = [np.inf, -np.inf, -0.0, 0.0]
    x[1, :3] = [np.float32("-nan"), np.nan, 1.0]
    keys = np.zeros(rows * cols, np.uint32)
    pos = np.zeros(rows * cols, np.int32)
    assert lib.emu_sort_keys(ptr(ffi, x), ptr(ffi, keys, "uint32_t *"), ptr(ffi, pos, "int32_t *"),
                             rows * cols, cols, descending) == 0
    assert np.array_equal(pos.reshape(rows, cols), np.tile(np.arange(cols), (rows, 1)))
    order = np.argsort(keys.reshape(rows, cols), axis=1, kind="stable")
    same_bits(order.astype(np.float32), stub("argsort_rows", x, descending=descending))


@pytest.mark.parametrize("rows,cols,k", [(1, 1, 1), (3, 5, 8), (4, 9, 9), (2, 300, 40), (37, 3, 100),
                                         (1, 2, 70)])
def test_put_add_rows_in_index_order_is_the_stub(emu, rows, cols, k):
    ffi, lib = emu
    x = specials(rows, cols)
    idx = rng.integers(-1, cols + 1, (rows, k)).astype(np.float32)     # repeats, out of range
    v = (rng.standard_normal((rows, k)) * 1e3).astype(np.float32)
    y = x.copy()
    assert lib.emu_put_add_ordered(ptr(ffi, idx), ptr(ffi, v), ptr(ffi, y), rows, k, cols,
                                   2, 1) == 0
    same_bits(y, stub("put_add_rows", x, idx, v))


@pytest.mark.parametrize("rows,cols,k", [(1, 1, 1), (3, 7, 3), (2, 300, 40), (4, 1000, 1000),
                                         (2, 1500, 1024), (5, 33, 32), (1, 5000, 1), (9, 257, 100)])
@pytest.mark.parametrize("descending", [0, 1])
def test_topk_selection_is_the_stable_sort(emu, rows, cols, k, descending):
    """The CUDA selection (radix passes, ordered collection, bitonic sort of the k kept) gives
    the first k positions of NumPy's stable sort, ties, NaN, -0 and infinities included."""
    ffi, lib = emu
    x = specials(rows, cols)
    x = np.round(x * 2) / 2                                   # many equal values
    x.reshape(-1)[::11] = np.nan
    x.reshape(-1)[1::13] = -0.0
    x.reshape(-1)[2::17] = np.inf if descending else -np.inf
    key = np.where(np.isnan(x), np.inf, x).astype(np.float64)
    key[np.isnan(x)] = np.inf
    nan = np.isnan(x)
    order = [np.lexsort(((-kr if descending else kr), (-nr if descending else nr)))
             for kr, nr in zip(np.where(x == 0, 0.0, key), nan.astype(np.int8))]
    want = np.stack(order)[:, :k].astype(np.float32)
    for grid, rev in [(0, 0), (2, 1)]:
        idx = np.full((rows, k), np.nan, np.float32)
        assert lib.emu_topk_rows(ptr(ffi, x), ptr(ffi, idx), rows, cols, k, descending, grid,
                                 rev) == 0
        same_bits(idx, want)
    same_bits(stub("topk_rows", x, k=k, descending=descending), want)
