// sort_emu.cpp: the sort family's kernels (native/cuda/sort_kernels.cuh) compiled for the CPU with
// the emulation in cuda_emu/cuda_runtime.h, behind a C API that tests/test_sort_kernels.py loads.
// Each function launches the kernels as sort.cu does (the block-per-row running sums with
// sort.cu's thread count and dynamic shared memory); `grid` caps the blocks of grid-stride
// launches so their loops wrap, and `reverse` runs the threads of a block in reverse order.
#include <cuda_runtime.h>  // the emulation (tests/native/cuda_emu)

alignas(16) float4 smem4[2304];  // the dynamic shared memory: 9216 floats, sort.cu's largest launch fits

#include "sort_kernels.cuh"

static_assert(CUM_WARPS * CUM_TILE <= 4 * 2304 && TOPK_SMEM_WORDS <= 4 * 2304,
              "sort.cu's shared memory exceeds the emulation's");

namespace {
void run(unsigned grid, unsigned threads, std::function<void()> body, bool reverse) {
    emu::launch(dim3(grid), dim3(threads), std::move(body), reverse);
}
// sort.cu's launches (one for rows of one chunk, else totals, carries (rows of more than
// TL_CUM_CHUNK chunks: the running values of the totals, one level up), values); `grid` (0: sort.cu's
// count) caps the blocks so that their loops wrap
template <int KIND>
void cumulative(const float *x, float *y, int64_t rows, int64_t cols, int64_t reverse, int grid, int rev_threads) {
    const int64_t nch = (cols + TL_CUM_CHUNK - 1) / TL_CUM_CHUNK;
    const unsigned threads = CUM_WARPS * 32;
    auto blocks = [grid, threads](int64_t n) { return grid ? (unsigned)grid : (unsigned)((n + threads - 1) / threads); };
    if (nch == 1) {
        run(blocks(rows), threads, [=] { k_cum_tiles<KIND>(x, y, nullptr, nullptr, rows, cols, 1, reverse); },
            rev_threads);
        return;
    }
    std::vector<float> tot((size_t)(rows * nch), NAN);
    float *t = tot.data();
    run(blocks(rows * nch), threads, [=] { k_cum_tiles<KIND>(x, nullptr, nullptr, t, rows, cols, nch, reverse); },
        rev_threads);
    if (nch <= TL_CUM_CHUNK) {
        run(grid ? (unsigned)grid : (unsigned)((rows + CUM_WARPS - 1) / CUM_WARPS), threads,
            [=] { k_cum_carries<KIND>(t, rows, nch); }, rev_threads);
        run(blocks(rows * nch), threads, [=] { k_cum_tiles<KIND>(x, y, t, nullptr, rows, cols, nch, reverse); },
            rev_threads);
        return;
    }
    std::vector<float> carry((size_t)(rows * nch + 1), NAN);   // carry[u] = the totals' running value u - 1
    float *cy = carry.data();
    cumulative<KIND>(t, cy + 1, rows, nch, 0, grid, rev_threads);
    run(blocks(rows * nch), threads, [=] { k_cum_tiles<KIND>(x, y, cy, nullptr, rows, cols, nch, reverse); },
        rev_threads);
}

}  // namespace

extern "C" {

int emu_take_rows(const float *x, const float *idx, float *y, int64_t rows, int64_t cols, int64_t k,
                  int grid, int reverse) {
    run(grid, 64, [=] { k_take_rows(x, idx, y, rows, cols, k); }, reverse);
    return 0;
}

int emu_take_rows_backward(const float *idx, const float *g, float *dx, int64_t rows, int64_t k,
                           int64_t cols, int64_t distinct, int grid, int reverse) {
    std::fill(dx, dx + rows * cols, 0.0f);
    if (distinct) run(grid, 64, [=] { k_take_back_distinct(idx, g, dx, rows, k, cols); }, reverse);
    else run(grid, 64, [=] { k_take_back_ordered(idx, g, dx, rows, k, cols); }, reverse);
    return 0;
}

int emu_cumulative(const float *x, float *y, int64_t rows, int64_t cols, int64_t reverse, int64_t kind,
                   int grid, int rev_threads) {
    if (rows * cols == 0) return 0;
    if (kind == 0) cumulative<0>(x, y, rows, cols, reverse, grid, rev_threads);
    else if (kind == 1) cumulative<1>(x, y, rows, cols, reverse, grid, rev_threads);
    else cumulative<2>(x, y, rows, cols, reverse, grid, rev_threads);
    return 0;
}

// put_add_rows's deterministic schedule (y holds x's copy on entry)
int emu_put_add_ordered(const float *idx, const float *v, float *y, int64_t rows, int64_t k, int64_t cols,
                        int grid, int reverse) {
    run(grid, PUT_ADD_WARPS * 32, [=] { k_put_add_ordered(idx, v, y, rows, k, cols); }, reverse);
    return 0;
}

int emu_cumprod_backward(const float *x, const float *g, float *dx, int64_t rows, int64_t cols,
                         int64_t reverse, int grid, int rev_threads) {
    run(grid, 64, [=] { k_cumprod_back(x, g, dx, rows, cols, reverse); }, rev_threads);
    return 0;
}

int emu_cumarg(const float *x, float *idx, int64_t rows, int64_t cols, int64_t kind, int grid,
               int rev_threads) {
    run(grid, 64, [=] { k_cumarg(x, idx, rows, cols, kind); }, rev_threads);
    return 0;
}

// topk_rows's selection (sort.cu's launch for k <= TOPK_MAX; `grid` caps the blocks)
int emu_topk_rows(const float *x, float *idx, int64_t rows, int64_t cols, int64_t k, int64_t descending,
                  int grid, int reverse) {
    if (rows * k == 0) return 0;
    if (k > TOPK_MAX) return 1;
    run(grid ? (unsigned)grid : (unsigned)rows, TOPK_THREADS, [=] { k_topk_rows(x, idx, rows, cols, k, descending); },
        reverse);
    return 0;
}

// the sort keys of n values (k_sort_keys), so a test can check their order against the stub's
int emu_sort_keys(const float *x, uint32_t *keys, int32_t *pos, int64_t n, int64_t cols,
                  int64_t descending) {
    run(2, 64, [=] { k_sort_keys(x, keys, pos, n, cols, descending); }, false);
    return 0;
}
}
