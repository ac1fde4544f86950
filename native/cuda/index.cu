// index.cu (CUDA): concat/slice along the leading axis, gathers and scatter-adds.
//
// Indices arrive as host int64 arrays; they are copied to stream-ordered scratch memory.
// Gathers read 0 for out-of-range indices; scatter-adds skip them and accumulate duplicates,
// with atomicAdd by default. In deterministic mode the device groups the update positions by
// target row (a stable radix sort of (row, j)), and one thread per (touched row, column) adds
// that row's updates in index order j = 0..k-1: the stub's order, at the cost of one pass over
// the updates. triangle and fill_masked work out their masks from
// positions or a mask buffer, with no host array.
#include <stdlib.h>
#include <cub/device/device_radix_sort.cuh>
#include "common.cuh"
#include "formulas/sort.h"
#include "generated/index_kernels.h"

static int copy_d2d(const char *op, float *dst, const float *src, int64_t n) {
    if (n == 0) return TL_OK;
    TL_CUDA_TRY(op, cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, tl_stream()));
    return TL_OK;
}

static int upload_idx(const char *op, const int64_t *idx, int64_t k, int64_t **out) {
    *out = NULL;
    if (k == 0) return TL_OK;
    void *p = NULL;
    TL_TRY(tl_scratch(op, (size_t)k * sizeof(int64_t), &p));
    int st = tl_upload(op, p, idx, (size_t)k * sizeof(int64_t));
    if (st) { tl_scratch_free(p); return st; }
    *out = (int64_t *)p;
    return TL_OK;
}

// concat1d and concat0: both lay a then b out flat
extern "C" int tlk_concat(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t na, int64_t nb) {
    TL_TRY(copy_d2d(op, y->data, a->data, na));
    return copy_d2d(op, y->data + na, b->data, nb);
}

static int slice_rows(const char *op, tl_buf x, tl_buf y, int64_t lead, int64_t row, int64_t start, int64_t length) {
    return copy_d2d(op, y->data, x->data + start * row, length * row);
}

extern "C" int tlk_slice1d(const char *op, tl_buf x, tl_buf y, int64_t n, int64_t start, int64_t length) {
    return slice_rows(op, x, y, n, 1, start, length);
}

extern "C" int tlk_slice_range0(const char *op, tl_buf x, tl_buf y, int64_t lead, int64_t row, int64_t start, int64_t length) {
    return slice_rows(op, x, y, lead, row, start, length);
}

extern "C" int tlk_pad_range0(const char *op, tl_buf g, tl_buf y, int64_t len, int64_t row, int64_t start, int64_t total) {
    if (total * row != 0)
        TL_CUDA_TRY(op, cudaMemsetAsync(y->data, 0, (size_t)(total * row) * sizeof(float), tl_stream()));
    return copy_d2d(op, y->data + start * row, g->data, len * row);
}

__global__ void k_gather_rows(const float *x, float *y, const int64_t *idx, int64_t rows, int64_t cols, int64_t k) {
    TL_GRID_STRIDE(t, k * cols) {
        int64_t j = t / cols, c = t % cols, i = idx[j];
        y[t] = (i >= 0 && i < rows) ? x[i * cols + c] : 0.0f;
    }
}

__global__ void k_scatter_atomic(const float *v, float *y, const int64_t *idx, int64_t rows, int64_t cols, int64_t k) {
    TL_GRID_STRIDE(t, k * cols) {
        int64_t j = t / cols, c = t % cols, i = idx[j];
        if (i >= 0 && i < rows) atomicAdd(&y[i * cols + c], v[t]);
    }
}

// deterministic: the updates sorted by target row on the device (a stable radix sort of
// (row, j) keys: j order within a row), then one thread per (sorted update, column) whose update
// opens its row's run adds the run's updates onto the row's value in that order (the stub's).
// Out-of-range rows sort last (key `rows`) and are skipped.
__global__ void k_scatter_keys(const int64_t *__restrict__ idx, uint64_t *__restrict__ key,
                               int64_t *__restrict__ pos, int64_t k, int64_t rows) {
    TL_GRID_STRIDE(j, k) {
        const int64_t i = idx[j];
        key[j] = (uint64_t)(i >= 0 && i < rows ? i : rows);
        pos[j] = j;
    }
}

__global__ void k_scatter_runs(const float *__restrict__ v, float *__restrict__ y, const uint64_t *__restrict__ key,
                               const int64_t *__restrict__ pos, int64_t k, int64_t rows, int64_t cols) {
    TL_GRID_STRIDE(t, k * cols) {
        const int64_t p = t / cols, c = t % cols;
        const uint64_t row = key[p];
        if (row >= (uint64_t)rows || (p > 0 && key[p - 1] == row)) continue;
        const int64_t at = (int64_t)row * cols + c;
        float acc = y[at];
        for (int64_t q = p; q < k && key[q] == row; q++) acc += v[pos[q] * cols + c];
        y[at] = acc;
    }
}

// y += the updates in index order per row (k_scatter_runs after the device sort)
static int scatter_ordered(const char *op, const float *v, float *y, const int64_t *idx, int64_t k,
                           int64_t rows, int64_t cols) {
    cudaStream_t s = tl_stream();
    int bits = 1;
    while (bits < 64 && ((uint64_t)rows >> bits) != 0) bits++;   // keys are at most rows
    size_t temp = 0;
    TL_CUDA_TRY(op, cub::DeviceRadixSort::SortPairs(nullptr, temp, (const uint64_t *)nullptr, (uint64_t *)nullptr,
                                                    (const int64_t *)nullptr, (int64_t *)nullptr, k, 0, bits, s));
    char *base = nullptr;
    TL_TRY(tl_scratch(op, (size_t)k * 8 * 5 + temp + 256, (void **)&base));
    int64_t *didx = (int64_t *)base, *pin = didx + k, *pout = pin + k;
    uint64_t *kin = (uint64_t *)(pout + k), *kout = kin + k;
    void *tmp = (void *)(((uintptr_t)(kout + k) + 255) & ~(uintptr_t)255);
    int st = tl_upload(op, didx, idx, (size_t)k * sizeof(int64_t));
    if (st == TL_OK) {
        k_scatter_keys<<<tl_blocks(k), TL_THREADS, 0, s>>>(didx, kin, pin, k, rows);
        cudaError_t e = cub::DeviceRadixSort::SortPairs(tmp, temp, (const uint64_t *)kin, kout, (const int64_t *)pin,
                                                        pout, k, 0, bits, s);
        if (e == cudaSuccess)
            k_scatter_runs<<<tl_blocks(k * cols), TL_THREADS, 0, s>>>(v, y, kout, pout, k, rows, cols);
        st = e == cudaSuccess ? tl_cuda_launched(op) : tl_cuda_status(op, e);
    }
    tl_scratch_free(base);
    return st;
}

static int gather_rows_impl(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx, int64_t k) {
    if (k * cols == 0) return TL_OK;
    int64_t *d = NULL;
    TL_TRY(upload_idx(op, idx, k, &d));
    k_gather_rows<<<tl_blocks(k * cols), TL_THREADS, 0, tl_stream()>>>(x->data, y->data, d, rows, cols, k);
    tl_scratch_free(d);
    TL_LAUNCHED(op);
    return TL_OK;
}

// y = (x or zeros) with y[idx[j], :] += v[j, :]
static int scatter_rows_impl(const char *op, tl_buf x, tl_buf v, tl_buf y, int64_t rows, int64_t cols,
                             const int64_t *idx, int64_t k) {
    if (rows * cols == 0) return TL_OK;
    if (x) TL_TRY(copy_d2d(op, y->data, x->data, rows * cols));
    else TL_CUDA_TRY(op, cudaMemsetAsync(y->data, 0, (size_t)(rows * cols) * sizeof(float), tl_stream()));
    if (k == 0) return TL_OK;
    if (tl_deterministic()) return scatter_ordered(op, v->data, y->data, idx, k, rows, cols);
    int64_t *d = NULL;
    TL_TRY(upload_idx(op, idx, k, &d));
    k_scatter_atomic<<<tl_blocks(k * cols), TL_THREADS, 0, tl_stream()>>>(v->data, y->data, d, rows, cols, k);
    tl_scratch_free(d);
    TL_LAUNCHED(op);
    return TL_OK;
}

extern "C" int tlk_gather(const char *op, tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, n, 1, idx, 1);
}

extern "C" int tlk_gather_row(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, rows, cols, idx, 1);
}

extern "C" int tlk_gather_vec(const char *op, tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, n, 1, idx, idx_len);
}

extern "C" int tlk_gather_vec_like(const char *op, tl_buf g, tl_buf v, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, g, y, n, 1, idx, idx_len);
}

extern "C" int tlk_gather_rows(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, rows, cols, idx, idx_len);
}

extern "C" int tlk_scatter_add_vec(const char *op, tl_buf x, tl_buf values, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, x, values, y, n, 1, idx, idx_len);
}

extern "C" int tlk_scatter_add_row(const char *op, tl_buf x, tl_buf values, tl_buf y, int64_t rows, int64_t cols, int64_t i) {
    return scatter_rows_impl(op, x, values, y, rows, cols, &i, 1);
}

extern "C" int tlk_gather_vec_backward(const char *op, tl_buf g, tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, NULL, g, y, n, 1, idx, idx_len);
}

extern "C" int tlk_gather_rows_backward(const char *op, tl_buf g, tl_buf x, tl_buf y, int64_t rows, int64_t cols,
                                       const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, NULL, g, y, rows, cols, idx, idx_len);
}

extern "C" int tlk_scatter_add_rows(const char *op, tl_buf x, tl_buf values, tl_buf y, int64_t rows, int64_t cols,
                                    const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, x, values, y, rows, cols, idx, idx_len);
}

// flat: one thread per entry (for narrow rows); by rows: a thread per column of a row and a
// walk down the rows, so the 64-bit divisions that find an entry's row run once per row, not
// once per entry (they were half of tril's time at 4096 x 4096)
__global__ void k_triangle_flat(const float *__restrict__ x, float *__restrict__ y, int64_t n, int64_t m,
                                int64_t c, int64_t diagonal, int64_t upper) {
    TL_GRID_STRIDE(t, n) {
        const int64_t j = t % c, i = (t / c) % m;
        y[t] = tl_triangle_keeps(i, j, diagonal, upper) ? x[t] : 0.0f;
    }
}

__global__ void k_triangle_rows(const float *__restrict__ x, float *__restrict__ y, int64_t rows, int64_t m,
                                int64_t c, int64_t diagonal, int64_t upper) {
    const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (j >= c) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const int64_t t = r * c + j;
        y[t] = tl_triangle_keeps(r % m, j, diagonal, upper) ? x[t] : 0.0f;
    }
}

// rows of a multiple of 4 columns (16-byte aligned): a thread per 4 columns, as float4; four
// entries none of which is kept are not read (keeps is monotone along a row)
__global__ void k_triangle_rows4(const float4 *__restrict__ x, float4 *__restrict__ y, int64_t rows, int64_t m,
                                 int64_t c, int64_t diagonal, int64_t upper) {
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, j = 4 * q;
    if (j >= c) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const int64_t i = r % m, t = r * (c / 4) + q;
        const bool k0 = tl_triangle_keeps(i, j, diagonal, upper), k3 = tl_triangle_keeps(i, j + 3, diagonal, upper);
        const float4 v = k0 || k3 ? x[t] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        y[t] = make_float4(k0 ? v.x : 0.0f, tl_triangle_keeps(i, j + 1, diagonal, upper) ? v.y : 0.0f,
                           tl_triangle_keeps(i, j + 2, diagonal, upper) ? v.z : 0.0f, k3 ? v.w : 0.0f);
    }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

extern "C" int tlk_triangle(const char *op, tl_buf x, tl_buf y, int64_t n, int64_t m, int64_t c, int64_t diagonal,
                            int64_t upper) {
    if (n == 0) return TL_OK;
    if (c < 128) {
        k_triangle_flat<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(x->data, y->data, n, m, c, diagonal, upper);
    } else {
        const int64_t rows = n / c;
        const bool wide = c % 4 == 0 && aligned16(x->data) && aligned16(y->data);
        const int64_t lanes = wide ? c / 4 : c;
        dim3 grid((unsigned)((lanes + TL_THREADS - 1) / TL_THREADS), (unsigned)(rows < 65535 ? rows : 65535));
        if (wide)
            k_triangle_rows4<<<grid, TL_THREADS, 0, tl_stream()>>>((const float4 *)x->data, (float4 *)y->data, rows,
                                                                   m, c, diagonal, upper);
        else
            k_triangle_rows<<<grid, TL_THREADS, 0, tl_stream()>>>(x->data, y->data, rows, m, c, diagonal, upper);
    }
    TL_LAUNCHED(op);
    return TL_OK;
}

__global__ void k_fill_masked(const float *__restrict__ mask, const float *__restrict__ x, float *__restrict__ y,
                              int64_t n, float v) {
    TL_GRID_STRIDE(t, n) y[t] = mask[t] != 0.0f ? v : x[t];
}

// n a multiple of 4: four entries a thread, as float4
__global__ void k_fill_masked4(const float4 *__restrict__ mask, const float4 *__restrict__ x, float4 *__restrict__ y,
                               int64_t n4, float v) {
    TL_GRID_STRIDE(t, n4) {
        const float4 m = mask[t], a = x[t];
        y[t] = make_float4(m.x != 0.0f ? v : a.x, m.y != 0.0f ? v : a.y, m.z != 0.0f ? v : a.z, m.w != 0.0f ? v : a.w);
    }
}

extern "C" int tlk_fill_masked(const char *op, tl_buf mask, tl_buf x, tl_buf y, int64_t n, double value) {
    if (n % 4 == 0 && aligned16(mask->data) && aligned16(x->data) && aligned16(y->data))
        k_fill_masked4<<<tl_blocks(n / 4), TL_THREADS, 0, tl_stream()>>>((const float4 *)mask->data,
                                                                         (const float4 *)x->data, (float4 *)y->data,
                                                                         n / 4, (float)value);
    else
        k_fill_masked<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(mask->data, x->data, y->data, n, (float)value);
    TL_LAUNCHED(op);
    return TL_OK;
}
