// sort.cu (CUDA): sorting rows, taking entries by position, running sums, products and extremes,
// the same results as native/stub/sort.c bit for bit in every mode (put_add_rows: in
// deterministic and exact mode).
//
// Sorting: each entry's key (formulas/sort.h) and column go through CUB's stable radix sorts
// (rows up to 4096 a block each, BlockRadixSort; longer ones DeviceRadixSort, of the keys for
// one row, of (row, key) pairs for many, DeviceSegmentedSort::StableSortPairs past 2^27
// entries), so the positions are the stub's: a stable sort of distinct (key, position) pairs
// has one answer.
// Running sums and products follow the chunked order of formulas/sort.h, a lane per chunk and a
// warp per 32 chunks staged through shared memory (coalesced): rows of one chunk in one launch,
// else three: the chunk totals, a warp per row that sums the carries between chunks in chunk
// order (from shuffles), the running values with their carries (a long row spreads over the
// whole GPU).
// Running extremes, the cumprod backward and take_rows_backward with repeated positions walk
// each row in order on one thread.
// put_add_rows adds with atomics by default; in deterministic mode each column of a row gets
// its updates in index order (the stub's order): a block per row sorts rows of up to 4096
// updates by column, longer ones go a warp per row.
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include "common.cuh"
#include "sort_kernels.cuh"
#include "generated/sort_kernels.h"

namespace {

__global__ void k_row_offsets(int64_t *__restrict__ off, int64_t rows, int64_t cols) {
    TL_GRID_STRIDE(r, rows + 1) off[r] = r * cols;
}

// put_add_rows, default mode: every update one atomic add (any order)
__global__ void k_put_add_atomic(const float *__restrict__ idx, const float *__restrict__ v,
                                 float *__restrict__ y, int64_t rows, int64_t k, int64_t cols) {
    SK_GRID_STRIDE(t, rows * k) {
        int64_t c = tlf_row_index(idx[t], cols);
        if (c >= 0) atomicAdd(&y[(t / k) * cols + c], v[t]);
    }
}

// many long rows: each entry's key behind its row number, so one radix sort of the whole
// array orders every row (stable: a row's equal keys keep their positions' order)
__global__ void k_sort_keys_by_row(const float *__restrict__ x, uint64_t *__restrict__ keys, int32_t *__restrict__ pos,
                                   int64_t n, int64_t cols, int64_t descending) {
    TL_GRID_STRIDE(t, n) {
        keys[t] = (uint64_t)(t / cols) << 32 | tlf_sort_key(x[t], descending);
        pos[t] = (int32_t)(t % cols);
    }
}

__global__ void k_positions_to_float(const int32_t *__restrict__ pos, float *__restrict__ idx, int64_t n) {
    TL_GRID_STRIDE(t, n) idx[t] = (float)pos[t];
}

// Rows of at most THREADS x ITEMS entries: a block per row sorts the (key, position) pairs in
// registers and shared memory (CUB's block radix sort, stable over the blocked order, which is
// position order) and writes the positions in sorted order: one read and one write of the row,
// where the segmented device sort makes several passes through global memory.
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
k_sort_rows_block(const float *__restrict__ x, float *__restrict__ out, int64_t rows, int64_t cols,
                  int64_t descending) {
    using Sort = cub::BlockRadixSort<uint32_t, THREADS, ITEMS, int32_t>;
    __shared__ typename Sort::TempStorage temp;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        uint32_t key[ITEMS];
        int32_t pos[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            const int64_t j = (int64_t)threadIdx.x * ITEMS + i;
            key[i] = j < cols ? tlf_sort_key(x[r * cols + j], descending) : 0xffffffffu;  // after every key
            pos[i] = (int32_t)j;
        }
        Sort(temp).SortBlockedToStriped(key, pos);
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            const int64_t j = (int64_t)i * THREADS + threadIdx.x;
            if (j < cols) out[r * cols + j] = (float)pos[i];
        }
        __syncthreads();   // temp is reused by the next row
    }
}

template <int THREADS, int ITEMS>
static int sort_rows_block(const char *op, const float *x, float *out, int64_t rows, int64_t cols,
                           int64_t descending) {
    k_sort_rows_block<THREADS, ITEMS><<<(unsigned)min(rows, (int64_t)1 << 20), THREADS, 0, tl_stream()>>>(
        x, out, rows, cols, descending);
    TL_LAUNCHED(op);
    return TL_OK;
}

// Deterministic put_add_rows for rows of at most THREADS x ITEMS updates: a block per row sorts
// the (column, update position) pairs by column (CUB's block radix sort, stable over position
// order), and the first update of each column's run adds the run onto the column in that order:
// the stub's adds, with no atomics and no per-batch warp matching.
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
k_put_add_sorted(const float *__restrict__ idx, const float *__restrict__ v, float *__restrict__ y, int64_t rows,
                 int64_t k, int64_t cols, int bits) {
    using Sort = cub::BlockRadixSort<uint32_t, THREADS, ITEMS, int32_t>;
    __shared__ union {
        typename Sort::TempStorage sort;
        struct { uint32_t col[THREADS * ITEMS]; int32_t pos[THREADS * ITEMS]; } run;
    } sm;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *ir = idx + r * k, *vr = v + r * k;
        float *yr = y + r * cols;
        uint32_t key[ITEMS];
        int32_t pos[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            const int64_t j = (int64_t)threadIdx.x * ITEMS + i;
            const int64_t c = j < k ? tlf_row_index(ir[j], cols) : -1;
            key[i] = c < 0 ? (uint32_t)cols : (uint32_t)c;   // outside the row: after every column
            pos[i] = (int32_t)j;
        }
        Sort(sm.sort).Sort(key, pos, 0, bits);
        __syncthreads();                          // the sort's storage becomes the runs
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            sm.run.col[threadIdx.x * ITEMS + i] = key[i];
            sm.run.pos[threadIdx.x * ITEMS + i] = pos[i];
        }
        __syncthreads();
        for (int64_t p = threadIdx.x; p < k; p += THREADS) {
            const uint32_t c = sm.run.col[p];
            if (c >= (uint64_t)cols || (p > 0 && sm.run.col[p - 1] == c)) continue;
            float acc = yr[c];
            for (int64_t q = p; q < k && sm.run.col[q] == c; q++) acc = tlm_add(acc, vr[sm.run.pos[q]]);
            yr[c] = acc;
        }
        __syncthreads();                          // the next row reuses the storage
    }
}

template <int THREADS, int ITEMS>
static int put_add_sorted(const char *op, const float *idx, const float *v, float *y, int64_t rows, int64_t k,
                          int64_t cols) {
    int bits = 1;
    while (bits < 32 && ((uint64_t)cols >> bits) != 0) bits++;   // keys are at most cols
    k_put_add_sorted<THREADS, ITEMS><<<(unsigned)min(rows, (int64_t)1 << 20), THREADS, 0, tl_stream()>>>(
        idx, v, y, rows, k, cols, bits);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // namespace


// rows longer than a block sorts: one device radix sort of (row, key) pairs, 32 + log2(rows)
// bits (a few passes over the whole array, where the segmented sort makes several per row)
static int sort_rows_by_row_keys(const char *op, const float *x, float *out, int64_t rows, int64_t cols,
                                 int64_t descending) {
    const int64_t n = rows * cols;
    cudaStream_t s = tl_stream();
    int bits = 32;
    while (bits < 64 && ((uint64_t)(rows - 1) >> (bits - 32)) != 0) bits++;
    size_t temp = 0;
    TL_CUDA_TRY(op, cub::DeviceRadixSort::SortPairs(nullptr, temp, (const uint64_t *)nullptr, (uint64_t *)nullptr,
                                                    (const int32_t *)nullptr, (int32_t *)nullptr, n, 0, bits, s));
    char *base = nullptr;
    TL_TRY(tl_scratch(op, (size_t)n * 24 + temp + 256, (void **)&base));
    uint64_t *kin = (uint64_t *)base, *kout = kin + n;
    int32_t *pin = (int32_t *)(kout + n), *pout = pin + n;
    void *tmp = (void *)(((uintptr_t)(pout + n) + 255) & ~(uintptr_t)255);
    k_sort_keys_by_row<<<tl_blocks(n), TL_THREADS, 0, s>>>(x, kin, pin, n, cols, descending);
    cudaError_t e = cub::DeviceRadixSort::SortPairs(tmp, temp, (const uint64_t *)kin, kout, (const int32_t *)pin,
                                                    pout, n, 0, bits, s);
    if (e == cudaSuccess) k_positions_to_float<<<tl_blocks(n), TL_THREADS, 0, s>>>(pout, out, n);
    tl_scratch_free(base);
    if (e != cudaSuccess) return tl_cuda_status(op, e);
    TL_LAUNCHED(op);
    return TL_OK;
}

// the positions that stably sort each row of x into out (rows x cols float32 whole numbers)
static int argsort_into(const char *op, const float *x, float *out, int64_t rows, int64_t cols, int64_t descending) {
    const int64_t n = rows * cols;
    cudaStream_t s = tl_stream();
    if (n == 0) return TL_OK;
    if (cols <= 512) return sort_rows_block<128, 4>(op, x, out, rows, cols, descending);
    if (cols <= 1024) return sort_rows_block<128, 8>(op, x, out, rows, cols, descending);
    if (cols <= 2048) return sort_rows_block<256, 8>(op, x, out, rows, cols, descending);
    if (cols <= 4096) return sort_rows_block<512, 8>(op, x, out, rows, cols, descending);
    if (rows > 1 && n <= ((int64_t)1 << 27)) return sort_rows_by_row_keys(op, x, out, rows, cols, descending);
    // keys and positions in, keys and positions out, row offsets, then CUB's temporary storage
    size_t temp = 0;
    if (rows == 1)
        TL_CUDA_TRY(op, cub::DeviceRadixSort::SortPairs(nullptr, temp, (const uint32_t *)nullptr, (uint32_t *)nullptr,
                                                        (const int32_t *)nullptr, (int32_t *)nullptr, n, 0, 32, s));
    else
        TL_CUDA_TRY(op, cub::DeviceSegmentedSort::StableSortPairs(nullptr, temp, (const uint32_t *)nullptr,
                                                                  (uint32_t *)nullptr, (const int32_t *)nullptr,
                                                                  (int32_t *)nullptr, n, rows,
                                                                  (const int64_t *)nullptr, (const int64_t *)nullptr, s));
    const size_t words = (size_t)n * 4 * 4 + (size_t)(rows + 1) * 8 + temp + 256;
    char *base = nullptr;
    TL_TRY(tl_scratch(op, words, (void **)&base));
    uint32_t *kin = (uint32_t *)base, *kout = kin + n;
    int32_t *pin = (int32_t *)(kout + n), *pout = pin + n;
    int64_t *off = (int64_t *)(pout + n);
    void *tmp = (void *)(((uintptr_t)(off + rows + 1) + 255) & ~(uintptr_t)255);
    k_sort_keys<<<tl_blocks(n), TL_THREADS, 0, s>>>(x, kin, pin, n, cols, descending);
    cudaError_t e;
    if (rows == 1) {
        e = cub::DeviceRadixSort::SortPairs(tmp, temp, (const uint32_t *)kin, kout, (const int32_t *)pin, pout, n, 0,
                                            32, s);
    } else {
        k_row_offsets<<<tl_blocks(rows + 1), TL_THREADS, 0, s>>>(off, rows, cols);
        const int64_t *coff = off;   // the iterator types of the size query above
        e = cub::DeviceSegmentedSort::StableSortPairs(tmp, temp, (const uint32_t *)kin, kout, (const int32_t *)pin,
                                                      pout, n, rows, coff, coff + 1, s);
    }
    if (e == cudaSuccess) k_positions_to_float<<<tl_blocks(n), TL_THREADS, 0, s>>>(pout, out, n);
    tl_scratch_free(base);
    if (e != cudaSuccess) return tl_cuda_status(op, e);
    TL_LAUNCHED(op);
    return TL_OK;
}

extern "C" int tlk_argsort_rows(const char *op, tl_buf x, tl_buf idx, int64_t rows, int64_t cols, int64_t descending) {
    return argsort_into(op, x->data, idx->data, rows, cols, descending);
}

// top-k positions: a selection per row up to TOPK_MAX (k_topk_rows), else the first k columns
// of the whole-row sort
extern "C" int tlk_topk_rows(const char *op, tl_buf x, tl_buf idx, int64_t rows, int64_t cols, int64_t k,
                             int64_t descending) {
    cudaStream_t s = tl_stream();
    if (rows * k == 0) return TL_OK;
    if (k <= TOPK_MAX) {
        k_topk_rows<<<(unsigned)min(rows, (int64_t)1 << 20), TOPK_THREADS, sizeof(uint32_t) * TOPK_SMEM_WORDS, s>>>(
            x->data, idx->data, rows, cols, k, descending);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    float *all = nullptr;
    TL_TRY(tl_scratch(op, (size_t)(rows * cols) * sizeof(float), (void **)&all));
    int st = argsort_into(op, x->data, all, rows, cols, descending);
    if (st == TL_OK) {
        cudaError_t e = cudaMemcpy2DAsync(idx->data, (size_t)k * sizeof(float), all, (size_t)cols * sizeof(float),
                                          (size_t)k * sizeof(float), (size_t)rows, cudaMemcpyDeviceToDevice, s);
        if (e != cudaSuccess) st = tl_cuda_status(op, e);
    }
    tl_scratch_free(all);
    return st;
}

extern "C" int tlk_take_rows(const char *op, tl_buf x, tl_buf idx, tl_buf y, int64_t rows, int64_t cols, int64_t k) {
    k_take_rows<<<tl_blocks(rows * k), TL_THREADS, 0, tl_stream()>>>(x->data, idx->data, y->data, rows, cols, k);
    TL_LAUNCHED(op);
    return TL_OK;
}

extern "C" int tlk_take_rows_backward(const char *op, tl_buf idx, tl_buf g, tl_buf dx, int64_t rows, int64_t k,
                                      int64_t cols, int64_t distinct) {
    cudaStream_t s = tl_stream();
    TL_CUDA_TRY(op, cudaMemsetAsync(dx->data, 0, (size_t)(rows * cols) * sizeof(float), s));
    if (rows * k == 0) return TL_OK;
    if (distinct)
        k_take_back_distinct<<<tl_blocks(rows * k), TL_THREADS, 0, s>>>(idx->data, g->data, dx->data, rows, k, cols);
    else
        k_take_back_ordered<<<tl_blocks(rows), TL_THREADS, 0, s>>>(idx->data, g->data, dx->data, rows, k, cols);
    TL_LAUNCHED(op);
    return TL_OK;
}

template <int KIND>
static int cumulative(const char *op, const float *x, float *y, int64_t rows, int64_t cols, int64_t reverse) {
    cudaStream_t s = tl_stream();
    const int64_t nch = (cols + TL_CUM_CHUNK - 1) / TL_CUM_CHUNK;
    const unsigned threads = CUM_WARPS * 32;
    const size_t tile_smem = sizeof(float) * CUM_WARPS * CUM_TILE;
    const unsigned tiles = (unsigned)min((rows * nch + threads - 1) / threads, (int64_t)65535 * 16);
    if (nch == 1) {
        k_cum_tiles<KIND><<<tiles, threads, tile_smem, s>>>(x, y, nullptr, nullptr, rows, cols, 1, reverse);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    float *tot = nullptr;
    TL_TRY(tl_scratch(op, (size_t)(rows * nch) * sizeof(float), (void **)&tot));
    k_cum_tiles<KIND><<<tiles, threads, tile_smem, s>>>(x, nullptr, nullptr, tot, rows, cols, nch, reverse);
    if (nch <= TL_CUM_CHUNK) {   // the carries: a chain of at most TL_CUM_CHUNK steps per row
        const unsigned row_blocks = (unsigned)min((rows + CUM_WARPS - 1) / CUM_WARPS, (int64_t)65535 * 16);
        k_cum_carries<KIND><<<row_blocks, threads, sizeof(float) * threads, s>>>(tot, rows, nch);
        k_cum_tiles<KIND><<<tiles, threads, tile_smem, s>>>(x, y, tot, nullptr, rows, cols, nch, reverse);
        tl_scratch_free(tot);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    // longer rows: the carries are the running values of the chunk totals in this same order
    // (formulas/sort.h), written one place on (carry[u] = run[u - 1], chunk c > 0 of a row)
    float *carry = nullptr;
    int st = tl_scratch(op, (size_t)(rows * nch + 1) * sizeof(float), (void **)&carry);
    if (st == TL_OK) st = cumulative<KIND>(op, tot, carry + 1, rows, nch, 0);
    if (st == TL_OK) k_cum_tiles<KIND><<<tiles, threads, tile_smem, s>>>(x, y, carry, nullptr, rows, cols, nch, reverse);
    tl_scratch_free(carry);
    tl_scratch_free(tot);
    TL_TRY(st);
    TL_LAUNCHED(op);
    return TL_OK;
}

extern "C" int tlk_cumulative(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, int64_t reverse,
                              int64_t kind) {
    if (rows * cols == 0) return TL_OK;
    if (kind == 0) return cumulative<0>(op, x->data, y->data, rows, cols, reverse);
    if (kind == 1) return cumulative<1>(op, x->data, y->data, rows, cols, reverse);
    return cumulative<2>(op, x->data, y->data, rows, cols, reverse);
}

extern "C" int tlk_cumprod_rows_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t rows, int64_t cols,
                                         int64_t reverse) {
    k_cumprod_back<<<tl_blocks(rows), TL_THREADS, 0, tl_stream()>>>(x->data, g->data, dx->data, rows, cols, reverse);
    TL_LAUNCHED(op);
    return TL_OK;
}

extern "C" int tlk_cumarg_rows(const char *op, tl_buf x, tl_buf idx, int64_t rows, int64_t cols, int64_t kind) {
    k_cumarg<<<tl_blocks(rows), TL_THREADS, 0, tl_stream()>>>(x->data, idx->data, rows, cols, kind);
    TL_LAUNCHED(op);
    return TL_OK;
}

extern "C" int tlk_put_add_rows(const char *op, tl_buf x, tl_buf idx, tl_buf values, tl_buf y, int64_t rows,
                                int64_t cols, int64_t k) {
    cudaStream_t s = tl_stream();
    if (rows * cols == 0) return TL_OK;
    TL_CUDA_TRY(op, cudaMemcpyAsync(y->data, x->data, (size_t)(rows * cols) * sizeof(float),
                                    cudaMemcpyDeviceToDevice, s));
    if (k == 0) return TL_OK;
    if (tl_deterministic() && cols < 0xffffffffLL) {
        if (k <= 512) return put_add_sorted<128, 4>(op, idx->data, values->data, y->data, rows, k, cols);
        if (k <= 1024) return put_add_sorted<128, 8>(op, idx->data, values->data, y->data, rows, k, cols);
        if (k <= 2048) return put_add_sorted<256, 8>(op, idx->data, values->data, y->data, rows, k, cols);
        if (k <= 4096) return put_add_sorted<512, 8>(op, idx->data, values->data, y->data, rows, k, cols);
    }
    if (tl_deterministic())
        k_put_add_ordered<<<(unsigned)min((rows + PUT_ADD_WARPS - 1) / PUT_ADD_WARPS, (int64_t)65535 * 16),
                            PUT_ADD_WARPS * 32, PUT_ADD_WARPS * 32 * sizeof(float), s>>>(
            idx->data, values->data, y->data, rows, k, cols);
    else
        k_put_add_atomic<<<tl_blocks(rows * k), TL_THREADS, 0, s>>>(idx->data, values->data, y->data, rows, k, cols);
    TL_LAUNCHED(op);
    return TL_OK;
}
