// sort.cu (CUDA): sorting rows, taking entries by position, running sums, products and extremes,
// the same results as native/stub/sort.c bit for bit in every mode.
//
// Sorting: each entry's key (formulas/sort.h) and column go through CUB's stable radix sorts
// (DeviceRadixSort for one row, DeviceSegmentedSort::StableSortPairs for many), so the
// positions are the stub's: a stable sort of distinct (key, position) pairs has one answer.
// Running sums and products follow the chunked order of formulas/sort.h: one thread per row
// for rows of one chunk, else a block per row (each thread the totals of its chunks, one thread
// the carries between chunks, then every chunk's running values). Running extremes, the cumprod
// backward and take_rows_backward with repeated positions walk each row in order on one thread.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include "common.cuh"
#include "formulas/sort.h"
#include "entry/sort_kernels.h"

namespace {

__global__ void k_sort_keys(const float *__restrict__ x, uint32_t *__restrict__ keys, int32_t *__restrict__ pos,
                            int64_t n, int64_t cols, int64_t descending) {
    TL_GRID_STRIDE(t, n) {
        keys[t] = tlf_sort_key(x[t], descending);
        pos[t] = (int32_t)(t % cols);
    }
}

__global__ void k_row_offsets(int64_t *__restrict__ off, int64_t rows, int64_t cols) {
    TL_GRID_STRIDE(r, rows + 1) off[r] = r * cols;
}

__global__ void k_positions_to_float(const int32_t *__restrict__ pos, float *__restrict__ idx, int64_t n) {
    TL_GRID_STRIDE(t, n) idx[t] = (float)pos[t];
}

__global__ void k_take_rows(const float *__restrict__ x, const float *__restrict__ idx, float *__restrict__ y,
                            int64_t rows, int64_t cols, int64_t k) {
    TL_GRID_STRIDE(t, rows * k) {
        int64_t c = tlf_row_index(idx[t], cols);
        y[t] = c < 0 ? 0.0f : x[(t / k) * cols + c];
    }
}

// distinct positions: every target is written by at most one update, 0 + g as the stub's sum
__global__ void k_take_back_distinct(const float *__restrict__ idx, const float *__restrict__ g,
                                     float *__restrict__ dx, int64_t rows, int64_t k, int64_t cols) {
    TL_GRID_STRIDE(t, rows * k) {
        int64_t c = tlf_row_index(idx[t], cols);
        if (c >= 0) dx[(t / k) * cols + c] = tlm_add(0.0f, g[t]);
    }
}

// repeated positions: each row's updates in index order on one thread (the stub's order)
__global__ void k_take_back_ordered(const float *__restrict__ idx, const float *__restrict__ g,
                                    float *__restrict__ dx, int64_t rows, int64_t k, int64_t cols) {
    TL_GRID_STRIDE(r, rows) {
        for (int64_t j = 0; j < k; j++) {
            int64_t c = tlf_row_index(idx[r * k + j], cols);
            if (c >= 0) dx[r * cols + c] = tlm_add(dx[r * cols + c], g[r * k + j]);
        }
    }
}

__device__ __forceinline__ int64_t pos_of(int64_t j, int64_t cols, int64_t reverse) {
    return reverse ? cols - 1 - j : j;
}

// a row of at most one chunk per thread: the stub's loop
__global__ void k_cum_thread(const float *__restrict__ x, float *__restrict__ y, int64_t rows, int64_t cols,
                             int64_t reverse, int64_t kind) {
    TL_GRID_STRIDE(r, rows) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float local = 0.0f;
        for (int64_t j = 0; j < cols; j++) {
            int64_t p = pos_of(j, cols, reverse);
            local = j == 0 ? xr[p] : tlf_cum_step(local, xr[p], kind);
            yr[p] = local;
        }
    }
}

// chunk c's running values of row xr; with `carry` (c > 0) each is carry (+|*) the local value
__device__ float cum_chunk(const float *__restrict__ xr, float *__restrict__ yr, int64_t c, int64_t cols,
                           int64_t reverse, int64_t kind, float carry, bool write) {
    int64_t c0 = c * TL_CUM_CHUNK, c1 = min(c0 + (int64_t)TL_CUM_CHUNK, cols);
    float local = 0.0f;
    for (int64_t j = c0; j < c1; j++) {
        int64_t p = pos_of(j, cols, reverse);
        local = j == c0 ? xr[p] : tlf_cum_step(local, xr[p], kind);
        if (write) yr[p] = c == 0 ? local : tlf_cum_step(carry, local, kind);
    }
    return local;
}

// one block per row: chunk totals (tot, one slice per row), the carries in order, the values
__global__ void k_cum_block(const float *__restrict__ x, float *__restrict__ y, float *__restrict__ tot,
                            int64_t cols, int64_t nch, int64_t reverse, int64_t kind) {
    __shared__ float buf[TL_THREADS];
    const int64_t r = blockIdx.x;
    const float *xr = x + r * cols;
    float *yr = y + r * cols, *tr = tot + r * nch;
    for (int64_t c = threadIdx.x; c < nch; c += blockDim.x)
        tr[c] = cum_chunk(xr, yr, c, cols, reverse, kind, 0.0f, false);
    __syncthreads();
    float run = 0.0f;   // thread 0: the running total of the chunks so far
    for (int64_t base = 0; base < nch; base += blockDim.x) {
        int64_t c = base + threadIdx.x;
        buf[threadIdx.x] = c < nch ? tr[c] : 0.0f;
        __syncthreads();
        if (threadIdx.x == 0) {
            int64_t m = min((int64_t)blockDim.x, nch - base);
            for (int64_t i = 0; i < m; i++) {
                float t = buf[i];
                buf[i] = run;   // the carry into chunk base + i (unused for chunk 0)
                run = base + i == 0 ? t : tlf_cum_step(run, t, kind);
            }
        }
        __syncthreads();
        if (c < nch) tr[c] = buf[threadIdx.x];
        __syncthreads();
    }
    for (int64_t c = threadIdx.x; c < nch; c += blockDim.x)
        cum_chunk(xr, yr, c, cols, reverse, kind, tr[c], true);
}

__global__ void k_cumprod_back(const float *__restrict__ x, const float *__restrict__ g, float *__restrict__ dx,
                               int64_t rows, int64_t cols, int64_t reverse) {
    TL_GRID_STRIDE(r, rows) {
        const float *xr = x + r * cols, *gr = g + r * cols;
        float *dr = dx + r * cols;
        float s = gr[pos_of(cols - 1, cols, reverse)];
        dr[pos_of(cols - 1, cols, reverse)] = s;
        for (int64_t j = cols - 2; j >= 0; j--) {
            s = tlf_cumprod_carry(gr[pos_of(j, cols, reverse)], xr[pos_of(j + 1, cols, reverse)], s);
            dr[pos_of(j, cols, reverse)] = s;
        }
        float before = 1.0f;
        for (int64_t j = 0; j < cols; j++) {
            int64_t p = pos_of(j, cols, reverse);
            dr[p] = tlm_mul(before, dr[p]);
            before = tlm_mul(before, xr[p]);
        }
    }
}

__global__ void k_cumarg(const float *__restrict__ x, float *__restrict__ idx, int64_t rows, int64_t cols,
                         int64_t kind) {
    TL_GRID_STRIDE(r, rows) {
        const float *xr = x + r * cols;
        float best = xr[0];
        int64_t at = 0;
        for (int64_t j = 0; j < cols; j++) {
            if (j > 0 && tlf_cumarg_takes(xr[j], best, kind)) { best = xr[j]; at = j; }
            idx[r * cols + j] = (float)at;
        }
    }
}

}  // namespace

extern "C" int tlk_argsort_rows(const char *op, tl_buf x, tl_buf idx, int64_t rows, int64_t cols, int64_t descending) {
    const int64_t n = rows * cols;
    cudaStream_t s = tl_stream();
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
    k_sort_keys<<<tl_blocks(n), TL_THREADS, 0, s>>>(x->data, kin, pin, n, cols, descending);
    cudaError_t e;
    if (rows == 1) {
        e = cub::DeviceRadixSort::SortPairs(tmp, temp, kin, kout, pin, pout, n, 0, 32, s);
    } else {
        k_row_offsets<<<tl_blocks(rows + 1), TL_THREADS, 0, s>>>(off, rows, cols);
        e = cub::DeviceSegmentedSort::StableSortPairs(tmp, temp, kin, kout, pin, pout, n, rows, off, off + 1, s);
    }
    if (e == cudaSuccess) k_positions_to_float<<<tl_blocks(n), TL_THREADS, 0, s>>>(pout, idx->data, n);
    tl_scratch_free(base);
    if (e != cudaSuccess) return tl_cuda_status(op, e);
    TL_LAUNCHED(op);
    return TL_OK;
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

extern "C" int tlk_cumulative(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, int64_t reverse,
                              int64_t kind) {
    cudaStream_t s = tl_stream();
    if (cols <= TL_CUM_CHUNK || rows > TL_MAX_GRID_X) {
        if (cols > TL_CUM_CHUNK)
            return tl_fail(TL_E_UNSUPPORTED, "%s: %lld rows of %lld entries is more rows than one launch takes", op,
                           (long long)rows, (long long)cols);
        k_cum_thread<<<tl_blocks(rows), TL_THREADS, 0, s>>>(x->data, y->data, rows, cols, reverse, kind);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    const int64_t nch = (cols + TL_CUM_CHUNK - 1) / TL_CUM_CHUNK;
    float *tot = nullptr;
    TL_TRY(tl_scratch(op, (size_t)(rows * nch) * sizeof(float), (void **)&tot));
    int threads = (int)min((int64_t)TL_THREADS, (nch + 31) / 32 * 32);
    k_cum_block<<<(unsigned)rows, threads, 0, s>>>(x->data, y->data, tot, cols, nch, reverse, kind);
    tl_scratch_free(tot);
    TL_LAUNCHED(op);
    return TL_OK;
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
